/* The compute kernels behind the BERT model: one forward and one backward per layer kind.
 * This is the whole interface a backend implements (the CPU one is kernels/cpu/: sgemm.h's
 * matrix products + OpenMP); a CUDA backend would provide the same functions on device pointers.
 *
 * Which memory a pointer is: float and uint16_t arrays (parameters, gradients, optimizer
 * state, activations, 16-bit copies) and packed weights are backend memory (k_alloc); the
 * integer arrays that describe a batch (token and type ids, masks, row maps, labels, lengths:
 * int32_t / uint8_t) and the argument structs are host memory, which a device backend copies
 * over itself. Values returned to the host (sums, counts, k_read_scalar) synchronise. The
 * precision of the products is chosen inside the backend (KPrecision); CPU-only context
 * (attention scratch, thread counts) stays inside the implementation.
 *
 * Conventions: row-major; N rows of C features; "weight [OC, C]" is PyTorch's nn.Linear
 * layout. Backward functions ACCUMULATE into parameter gradients (dweight, dbias, +=) and
 * OVERWRITE activation gradients (dinp) unless the argument says otherwise. Element-wise
 * and row-wise work is split over OpenMP threads; every reduction is ordered the same way
 * whatever the thread count, so these kernels' results do not depend on it. (Matrix
 * products are split by whole output blocks, each computed on one thread, and small ones run
 * on one thread (oneDNN build; OpenBLAS decides for itself); the sgemm library's blocking of K can still depend on a block's shape, so for
 * some large shapes a different thread count can change the float rounding.) */
#ifndef BERT_KERNELS_H
#define BERT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/activation.h"   /* Activation: the feed-forward activation kinds */

/* out[N, OC] = inp[N, C] @ weight[OC, C]^T + bias[OC] (bias may be NULL). */
void k_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
/* The same forward with the weight also packed once (k_pack_weight_f32) in the layout the
 * CPU's GEMM reads fastest, for inference: the same terms as k_matmul_forward, summed in
 * another order. k_packed_weight_bytes_f32 is the space weight [OC, C] takes packed (0: no
 * packed form on this CPU: use k_matmul_forward); the packed space is 64-byte aligned. */
size_t k_packed_weight_bytes_f32(int C, int OC);
void k_pack_weight_f32(void *packed, const float *weight, int C, int OC);
void k_matmul_forward_packed(float *out, const float *inp, const float *weight, const void *packed, const float *bias,
                             int N, int C, int OC);
/* dinp[N, C] = dout @ weight (+= if accumulate_dinp; skipped if dinp NULL);
 * dweight += dout^T @ inp; dbias += column sums of dout (skipped if NULL). */
void k_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                       const float *weight, int N, int C, int OC, bool accumulate_dinp);

/* The same products in mixed precision: 16-bit operands, fp32 accumulation (the CPU's:
 * kernels/cpu/gemm_half.h). The 16-bit format and how its products run: */
typedef enum {
    HALF_BF16 = 0,       /* bf16 on the CPU's bf16 instructions (k_bf16_native_available) */
    HALF_BF16_EMULATED,  /* bf16 operands, fp32 arithmetic (any CPU; same terms, other order) */
    HALF_FP16,           /* IEEE fp16 operands (overflow past 65504), fp32 arithmetic */
} HalfMode;
/* The weight is given in the 16-bit format (k_to_half of the fp32 master copy); out, dinp,
 * dweight, dbias stay fp32. Forward rounds inp into inp16 [N, C], which the backward then
 * takes as its operand (the layer keeps it instead of inp); with inp NULL, inp16 already
 * holds the rounded input. With a packed copy (k_pack_weight) the forward runs on it where it
 * can. weight may be NULL (with or without packed): the forward then returns false (inp16
 * holding the rounded input, nothing else written) where it would need the plain weight, so
 * that the caller makes the plain 16-bit weight only when it is needed. Otherwise it returns
 * true. The backward
 * rounds dout into dout16 [N, OC] (scratch); dbias comes from the fp32 dout. With dout NULL,
 * dout16 already holds the rounded gradient and the caller has added its column sums to the
 * bias gradient (k_gelu_backward_half_out16; dbias is then NULL). */
bool k_matmul_forward_half(float *out, const float *inp, uint16_t *inp16, const uint16_t *weight, const void *packed,
                           const float *bias, int N, int C, int OC, HalfMode mode);
/* The same product with its result rounded to 16 bits into out16 [N, OC] (a 16-bit
 * activation's input): stored rounded by the product itself where it runs on a packed bf16
 * weight (no fp32 result written), else computed into out (scratch) and rounded. Returns
 * false, as k_matmul_forward_half, where it would need the plain weight and weight is NULL. */
bool k_matmul_forward_half_out16(uint16_t *out16, float *out, const float *inp, uint16_t *inp16, const uint16_t *weight,
                                 const void *packed, const float *bias, int N, int C, int OC, HalfMode mode);
/* A weight packed once for the forward product, in the layout the CPU's bf16 GEMM reads
 * fastest (what ONNX Runtime and OpenVINO do with constant weights): k_packed_weight_bytes is
 * the space weight [OC, C] takes packed (0: this mode has none; pass packed = NULL, the
 * plain weight is used), k_pack_weight fills it (64-byte aligned) from the 16-bit weight.
 * The forward then reads packed (and weight, where it runs better plain): the same terms,
 * summed in another order. */
size_t k_packed_weight_bytes(HalfMode mode, int C, int OC);
void k_pack_weight(HalfMode mode, void *packed, const uint16_t *weight, int C, int OC);
/* Inference's product and activation in one pass over packed weights: act(inp @ weight^T +
 * bias) with the activation (GELU) applied to each fp32 sum inside the product, so no
 * pre-activation matrix is written or read. k_matmul_gelu_forward_packed writes out in fp32
 * (packed by k_pack_weight_f32); k_matmul_gelu_forward_half_packed (HALF_BF16, packed by
 * k_pack_weight) rounds inp into inp16 and writes the activation rounded to bf16 into out16,
 * the next product's input. The activation is oneDNN's polynomial: erf (tanh) within 1e-6
 * absolute, where libm's erff is within 3e-7. Both return false without writing out/out16 where the packed product
 * would run on another kernel: the caller then runs the product and k_gelu_forward. */
bool k_matmul_gelu_forward_packed(float *out, const float *inp, const void *packed, const float *bias, int N, int C,
                                  int OC, Activation act);
bool k_matmul_gelu_forward_half_packed(uint16_t *out16, const float *inp, uint16_t *inp16, const void *packed,
                                       const float *bias, int N, int C, int OC, Activation act);
void k_matmul_backward_half(float *dinp, float *dweight, float *dbias, const float *dout, const uint16_t *inp16,
                            const uint16_t *weight, int N, int C, int OC, bool accumulate_dinp, uint16_t *dout16,
                            HalfMode mode);
/* dst = src rounded to the 16-bit format (to nearest, ties to even; fp16 overflows to
 * infinity; a NaN stays a NaN of the same sign, made quiet, keeping the top of its payload);
 * and back (exact; an fp16 NaN made quiet). The two bf16 modes are the same format here. */
void k_to_half(HalfMode mode, uint16_t *dst, const float *src, long n);
void k_from_half(HalfMode mode, float *dst, const uint16_t *src, long n);
/* k_to_half on each of count tensors (dst[i] = src[i] rounded, n[i] values; the same bits) in
 * one call: a model's weights' 16-bit copies after each update, which a GPU converts in one
 * launch (bert-base has 74 such tensors, each otherwise a launch of its own). */
void k_to_half_each(HalfMode mode, uint16_t *const *dst, const float *const *src, const size_t *n, int count);
/* Whether HALF_BF16 products can run here (bf16 instructions), and what runs them. */
bool k_bf16_native_available(void);
void k_bf16_describe(char *out, size_t n);
/* TF32 (NVIDIA's, from Ampere on): the fp32 products (k_matmul_forward/_backward and fp32
 * attention's) on tensor cores, their operands rounded to 10-bit mantissas, the sums in fp32:
 * what the GPU recipe's "fp32" runs ("TF32" in NVIDIA's tables). Off by default (true fp32).
 * Returns false where the backend has none (the CPU: turning it on fails, off succeeds). */
bool k_set_tf32(bool on);

/* int8 inference (dynamic quantization, the CPU's: kernels/cpu/gemm_int8.h): the weight
 * [OC, C] quantized once, symmetric per output channel (s_j = max |w_j.| / L, q in [-L, L],
 * L = 127 with VNNI, 63 without: exact sums either way), and packed with its scales (k_packed_weight_bytes_int8: the space, 0 where
 * this backend has no int8 products; k_pack_weight_int8 quantizes the fp32 weight and packs
 * it); the input quantized per row at each call (symmetric, r_i = max |x_i.| / 127); the
 * integer products summed exactly in int32; out = sum (r_i s_j) + bias, then, with gelu,
 * act(out), in fp32. k_int8_support: 2 on int8 dot-product instructions (AVX-512 VNNI, AMX), 1
 * on older ones (7-bit weights, slower), 0 none. */
int k_int8_support(void);
void k_int8_describe(char *out, size_t n);
/* The int8 products' own time in k_matmul_forward_int8_rows, their epilogues apart: thread-
 * seconds summed over the threads that ran them, and their operations (2 m n k), since the
 * counters were last reset (reset: after reading them); 0 where a backend does not count. What
 * `bert bench --int8` reports as the products' rate against the int8 GEMM peak. */
void k_int8_product_counters(double *thread_seconds, double *ops, bool reset);
size_t k_packed_weight_bytes_int8(int C, int OC);
/* With smooth: the product's input is the output of the LayerNorm ln_w, ln_b (ln_b may be
 * NULL), and the weight is smoothed (SmoothQuant without calibration: gemm_int8.h,
 * gemm_int8_smoothing): factors t [C] from gamma, beta and the largest magnitudes of the
 * columns of the weight's rows [row0, row0 + rows) (rows 0: all OC), the weight packed as
 * W t, and the input quantized as x / t, computed as x fl(1/t) (k_int8_smoothing gives t to the
 * kernel that produces x: its KInt8Output.q8_smooth, or k_quantize_rows_int8's smooth;
 * k_matmul_forward_int8 smooths its fp32 input itself). smooth NULL: not smoothed, k_int8_smoothing NULL. */
typedef struct {
    const float *ln_w, *ln_b;
    int row0, rows;
} KInt8Smoothing;
void k_pack_weight_int8(void *packed, const float *weight, const KInt8Smoothing *smooth, int C, int OC);
const float *k_int8_smoothing(const void *packed);
void k_matmul_forward_int8(float *out, const float *inp, const void *packed, const float *bias, int N, int C, int OC,
                           bool gelu, Activation act);
/* The int8 encoder's activations (BERT_INT8's layers, which quantize each product's input in
 * the pass that produces it, not in a pass of their own): rows of C values quantized as
 * k_matmul_forward_int8 quantizes its input, q [N, C] int8 and scale [N] in backend memory,
 * q = round(y / scale), scale = max |y_n.| / 127, y = x, or y = x fl(1/t) (fp32) for a smoothed
 * weight's input (smooth: its k_int8_smoothing t [C]; NULL: none). k_quantize_rows_int8
 * quantizes x. */
void k_quantize_rows_int8(int8_t *q, float *scale, const float *x, const float *smooth, int N, int C);
/* k_matmul_forward_int8's product on an input already quantized (q, scale), its result
 * v = sum (r_n s_j) + bias (+ residual [N, OC] where given; then act(v) with act_on) stored
 * in exactly one form: out fp32 [N, OC], out16 rounded to bf16 [N, OC], or q8 [N, OC] with
 * q8_scale [N] quantized per row as above (the next int8 product's input; q8_smooth: that
 * product's k_int8_smoothing, the row smoothed by it as above before it is quantized). With
 * ln_w: out = LayerNorm(v) as k_layernorm_forward computes it (ln_mean, ln_rstd kept), and
 * with q8 also quantized: the post-LN sublayer's end in the product's pass over its rows. */
typedef struct {
    float *out;
    const float *residual;
    uint16_t *out16;
    int8_t *q8;
    float *q8_scale;
    const float *q8_smooth;
    bool act_on;
    Activation act;
    const float *ln_w, *ln_b;
    float ln_eps;
    float *ln_mean, *ln_rstd;
} KInt8Output;
void k_matmul_forward_int8_rows(const KInt8Output *o, const int8_t *q, const float *scale, const void *packed,
                                const float *bias, int N, int C, int OC);

/* ---- typed products: the precision is chosen here, not by the caller ----
 * A linear layer's weight [OC, C] in the forms a product may run on: the fp32 master copy
 * (f32, in parameter memory), a packed copy (k_pack_weight / k_pack_weight_f32; NULL: none),
 * and the 16-bit copy, which half(ctx, f32, C, OC) returns, making it first where it is stale
 * (the model keeps each tensor's freshness); called only where a product needs it. */
typedef struct {
    const float *f32;
    const void *packed;
    const uint16_t *(*half)(void *ctx, const float *f32, int C, int OC);
    void *ctx;
    int C, OC;
} KWeight;
/* The arithmetic of the products: fp32 (half false), or half_mode's 16-bit operands with fp32
 * accumulation; pack_f32: an fp32 packed copy may run (inference: a training forward keeps
 * k_matmul_forward's numbers); int8 (with half false, inference only): a weight with a packed
 * copy (k_pack_weight_int8) runs k_matmul_forward_int8, one without (a task head) fp32. */
typedef struct {
    bool half;
    HalfMode half_mode;
    bool pack_f32;
    bool int8;
} KPrecision;
/* out[N, OC] = inp @ W^T + bias in the precision's arithmetic. 16-bit: inp rounded into inp16
 * (kept for the backward), or with inp NULL inp16 already holds the rounded input; the packed
 * weight where it runs, else the 16-bit copy. */
void k_linear_forward(const KPrecision *p, float *out, const float *inp, uint16_t *inp16, const KWeight *w,
                      const float *bias, int N);
/* The same product stored where the next kernel reads it: in fp32 into out, in 16 bits into
 * out16 rounded (out: fp32 scratch where the product cannot store it rounded itself). */
void k_linear_forward_to(const KPrecision *p, float *out, uint16_t *out16, const float *inp, uint16_t *inp16,
                         const KWeight *w, const float *bias, int N);
/* act(inp @ W^T + bias) in one product over the packed weight (fp32 into out, native bf16
 * into out16); false, writing nothing, where no such product runs: the caller then runs
 * k_linear_forward_to and k_activation_forward_to. */
bool k_linear_act_forward(const KPrecision *p, float *out, uint16_t *out16, const float *inp, uint16_t *inp16,
                          const KWeight *w, const float *bias, int N, Activation act);
/* out = act(pre) (fp32), or out16 = act(pre16) rounded (16 bits), over n values. */
void k_activation_forward_to(const KPrecision *p, float *out, uint16_t *out16, const float *pre, const uint16_t *pre16,
                             long n, Activation act);
/* The backward of k_linear_forward: dinp (+= if accumulate_dinp; skipped if NULL), dweight
 * +=, dbias += (skipped if NULL); reads inp in fp32, inp16 in 16 bits; dout16 [N, OC]: 16-bit
 * scratch. */
void k_linear_backward(const KPrecision *p, float *dinp, float *dweight, float *dbias, const float *dout,
                       const float *inp, const uint16_t *inp16, const KWeight *w, int N, bool accumulate_dinp,
                       uint16_t *dout16);
/* The backward of act(inp @ W^T + b) given dout at the activation (overwritten) and the
 * pre-activation (pre fp32, pre16 16 bits): dinp += d/dinp, dweight, dbias +=. */
void k_linear_act_backward(const KPrecision *p, float *dinp, float *dweight, float *dbias, float *dout,
                           const float *pre, const uint16_t *pre16, const float *inp, const uint16_t *inp16,
                           const KWeight *w, int N, Activation act, uint16_t *dout16);

/* sum = a + residual (residual may be NULL: then sum is a and sum_out may be NULL; sum_out
 * may alias a);
 * out = LayerNorm(sum) * w + b, keeping mean and 1/std per row for backward. */
void k_layernorm_forward(float *out, float *sum_out, float *mean, float *rstd, const float *a, const float *residual,
                         const float *w, const float *b, int N, int C, float eps);
/* dinp = d LayerNorm / d inp (overwrite); dw, db accumulate. inp is the LayerNorm's input. */
void k_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *mean,
                          const float *rstd, const float *w, int N, int C);
/* A sublayer's output dropout inside the LayerNorm after it (a transformer layer's two sites):
 * inverted dropout with k_dropout_rows' masks, row n taking the mask of row rows[n] of the whole
 * tensor (rows NULL: row n's own, k_dropout(x, N*C, p, key, 0)'s counters; a HOST array of N
 * entries). p == 0: no dropout. */
typedef struct { float p; uint64_t key; const int32_t *rows; } KDropout;
/* sum = dropout(a) + residual (residual NULL: sum = dropout(a)), then out = LayerNorm(sum) as
 * k_layernorm_forward: the bits of k_dropout_rows on a, then k_layernorm_forward, in one pass
 * over the rows; and unless out16 is NULL, out rounded to 16 bits (mode) into out16 in the
 * same pass: the next product's operand (the bits of k_to_half on out). sum_out is required
 * when drop->p > 0 (it may alias a; a is not written otherwise); drop NULL or p == 0:
 * k_layernorm_forward. */
void k_dropout_layernorm_forward_to(float *out, uint16_t *out16, HalfMode mode, float *sum_out, float *mean,
                                    float *rstd, const float *a, const KDropout *drop, const float *residual,
                                    const float *w, const float *b, int N, int C, float eps);
/* Its backward: k_layernorm_backward, and dinp_dropped = dropout(dinp) with drop's masks (the
 * gradient of a; dinp is the residual's), written in the same pass: the bits of a copy and
 * k_dropout_rows on it. dinp_dropped must not alias dinp; p == 0 (or drop NULL): a copy. */
void k_layernorm_dropout_backward(float *dinp, float *dinp_dropped, const KDropout *drop, float *dw, float *db,
                                  const float *dout, const float *inp, const float *mean, const float *rstd,
                                  const float *w, int N, int C);

/* out = act(inp); dinp = dout * act'(inp) (dinp may alias dout). */
void k_gelu_forward(float *out, const float *inp, long n, Activation act);
void k_gelu_backward(float *dinp, const float *dout, const float *inp, long n, Activation act);
/* GELU of a 16-bit input, rounded to 16 bits (out16 = round(GELU(inp16)), evaluated in fp32):
 * the mixed-precision feed-forward, whose pre-activation is kept in 16 bits as the product
 * left it. Its backward over [N, C] at that input, written as the next product's operand:
 * dinp16 = dout * GELU'(inp16) (dout fp32, evaluated in fp32) rounded to 16 bits, and
 * dbias[c] += sum_n dinp[n, c] from the fp32 values (the feed-forward's input bias, summed as
 * k_matmul_backward_half sums it: the same slices in the same order), without writing dinp
 * and reading it back; k_matmul_backward_half then takes dout NULL. */
void k_gelu_forward_half(uint16_t *out16, const uint16_t *inp16, long n, Activation act, HalfMode mode);
void k_gelu_backward_half_out16(uint16_t *dinp16, float *dbias, const float *dout, const uint16_t *inp16, int N, int C,
                                Activation act, HalfMode mode);
/* x = tanh(x) in place; dinp = dout * (1 - y^2) given y = tanh output (may alias). */
void k_tanh_forward(float *x, long n);
void k_tanh_backward(float *dinp, const float *dout, const float *y, long n);

/* Inverted dropout, mask from the counter-based RNG: element i is kept (and scaled by
 * 1/(1-p)) iff rng_bits32(key, counter0 + i) >= threshold(p). Applying the same call to the
 * gradient is the backward pass. p == 0 is a no-op. */
void k_dropout(float *x, long n, float p, uint64_t key, uint32_t counter0);
/* k_dropout on R rows of C: row k gets the mask of row rows[k] of the whole tensor (counters
 * rows[k]*C + c), so a packed or pruned layout draws the same masks as the full one. */
void k_dropout_rows(float *x, const int32_t *rows, int R, int C, float p, uint64_t key);

/* out[n] = word[ids[n]] + pos[n % T] + type[types[n]] for n < B*T; backward scatters
 * dout into the three tables (accumulating). */
void k_embeddings_forward(float *out, const int32_t *ids, const int32_t *types, const float *word, const float *pos,
                          const float *type, int B, int T, int C);
void k_embeddings_backward(float *dword, float *dpos, float *dtype, const float *dout, const int32_t *ids,
                           const int32_t *types, int B, int T, int C);

/* Scaled dot-product attention on a fused QKV activation [B*T, 3H] (Q | K | V per row, heads
 * of size d side by side). Queries attend only to keys 0..kv_len[b]-1 (everything after the
 * last real token is skipped), and within that range to keys with mask 1 (masked keys get
 * probability exactly 0, as with HF's additive mask in fp32). Every query row is computed,
 * padded ones included, so all hidden states match HF's. With seq_row/seq_rows the rows are
 * packed instead: sequence b has seq_rows[b] rows (kv_len[b] <= seq_rows[b] <= T) from row
 * seq_row[b] on, and trailing padding rows beyond them are not there at all. */
typedef struct {
    int B, T, A, d;                /* batch, sequence length, heads, head size (H = A*d) */
    const int32_t *kv_len;         /* [B] */
    const int32_t *mask;           /* [B*T] 1 real, 0 padding */
    const uint8_t *has_holes;      /* [B] 1 if some key before kv_len[b] is padding */
    float dropout_p;               /* attention-probability dropout */
    uint64_t dropout_key;
    const int32_t *seq_row, *seq_rows;  /* [B] packed layout, or both NULL: row b*T, T rows */
    /* 16-bit products (the model's bf16/fp16 precision): the four forward and backward products
     * take their operands (Q, K, V, the dropped probabilities, dctx, the score gradients)
     * rounded to half_mode's format and accumulate in fp32, as PyTorch's autocast runs
     * attention's matmuls; the scale, softmax, dropout and their gradients stay fp32. */
    bool half;
    HalfMode half_mode;
    /* with half: the same [B*T, 3H] activation already rounded to half_mode's format (as the
     * QKV product stores it), read in place of qkv (which is then not read); NULL: qkv is
     * rounded block by block */
    const uint16_t *qkv16;
    /* int8 inference (k_int8_support; NULL otherwise): ctx also quantized per row as
     * k_quantize_rows_int8 quantizes it, into ctx_q8 [rows, H] and ctx_q8_scale [rows], each
     * sequence's rows once its heads are done, while they are in cache */
    int8_t *ctx_q8;
    float *ctx_q8_scale;
    /* with ctx_q8: ctx's rows are not read afterwards (only the int8 rows are), so they may be
     * left unwritten (by whole sequences they are; otherwise they are written) */
    bool ctx_q8_only;
} AttentionArgs;
/* probs: k_attention_state_floats(a) floats kept for the backward: [B, A, T, T] blocks (row
 * stride kv_len[b]) of softmax probabilities before dropout where k_attention_keeps_probs says
 * so, else the backend's own state, from which its backward recomputes them; NULL (inference, no
 * dropout): not kept, each block's scores stay in the thread's scratch. */
void k_attention_forward(float *ctx, float *probs, const float *qkv, const AttentionArgs *a);
/* k_attention_forward, and with a->half and ctx16 not NULL each sequence's ctx rows also
 * rounded to half_mode's format into ctx16 [rows, H]: the output product's operand (the bits of
 * k_to_half on those rows), written as ctx is where the backend can. */
void k_attention_forward_to(float *ctx, uint16_t *ctx16, float *probs, const float *qkv, const AttentionArgs *a);
/* dqkv overwritten (rows of padded keys get 0). */
void k_attention_backward(float *dqkv, const float *dctx, const float *qkv, const float *probs, const AttentionArgs *a);
/* Whether k_attention_forward leaves a's probabilities in probs (the CPU backend: always) or a
 * state of the backend's own (the CUDA backend's fused attention: each score row's maximum and
 * 1 / sum, recomputing the probabilities in the backward rather than writing and reading them).
 * Either way the backward takes probs as that backend's forward left it, with the forward's
 * arguments and qkv (qkv16) unchanged since; tests compare probs where it holds the
 * probabilities. */
bool k_attention_keeps_probs(const AttentionArgs *a);
/* The floats of probs k_attention_forward needs for a's shape (B, T, A, d, half: the pointers
 * need not be set) and for every call within it (B' <= B, T' <= T, the same A, d and half, any
 * buffers): B A T T where the backend keeps the probabilities, less where it keeps a state of its
 * own (the CUDA backend's fused path: 2 B A T). The model sizes each layer's probs by it at its
 * largest batch, once per layout. */
size_t k_attention_state_floats(const AttentionArgs *a);

/* Softmax cross-entropy over rows of logits [*, V]. row_index maps compact row k to the
 * logits row it reads (NULL = k). Forward stores each row's loss in row_loss[M] and its
 * softmax in probs[M, V] (compact), and the mean loss in loss[0] (summed in float64, in row
 * order). Backward turns those probabilities, in place, into
 * dlogits = (softmax - onehot(label)) * scale. */
void k_xent_forward(float *loss, float *row_loss, float *probs, const float *logits, const int32_t *row_index,
                    const int32_t *labels, int M, int V);
void k_xent_backward(float *probs_to_dlogits, const int32_t *labels, int M, int V, float scale);

/* Squared error: loss[0] = mean_i (pred[i] - target[i])^2 over n; backward writes
 * dpred = 2 (pred - target) * scale. */
void k_mse_forward(float *loss, const float *pred, const float *target, int n);
void k_mse_backward(float *dpred, const float *pred, const float *target, int n, float scale);

/* Sigmoid binary cross-entropy on logits (PyTorch's BCEWithLogitsLoss, multi-label
 * classification): loss[0] = mean_i max(x,0) - x t + log(1 + exp(-|x|)) over n, the stable
 * form, summed in float64 in element order; backward writes dlogits = (sigmoid(x) - t) * scale. */
void k_bce_forward(float *loss, const float *logits, const float *target, int n);
void k_bce_backward(float *dlogits, const float *logits, const float *target, int n, float scale);

/* ---- moving, clearing and reading activation memory (rows of C floats) ---- */

/* dst[k] = src[rows[k]] for k < R; dst may be src when rows ascend (compaction in place). */
void k_gather_rows(float *dst, const float *src, const int32_t *rows, int R, int C);
/* dst[rows[k]] += src[k], in k order (rows may repeat). */
void k_scatter_add_rows(float *dst, const float *src, const int32_t *rows, int R, int C);
/* dst[rows[k]] = src[k] for k < R; every other of dst's N rows zeroed. dst may be src when
 * rows ascend (spreading compact rows to their places in place): gather's inverse. */
void k_scatter_rows(float *dst, const float *src, const int32_t *rows, int R, int N, int C);
void k_copy(float *dst, const float *src, long n);
void k_zero(float *x, long n);
void k_add(float *dst, const float *src, long n);   /* dst += src */
/* One value of activation memory, for the host (a loss). */
float k_read_scalar(const float *x);
/* Returns once every kernel and copy asked of the backend so far is done: for timings of work
 * a device queues (a step's phases, an inference batch). The CPU's kernels are done when they
 * return: nothing to wait for. */
void k_wait(void);

/* ---- backend memory ----
 * Everything the model and the optimizer compute on (parameters, gradients, optimizer state,
 * activations, 16-bit and packed weight copies) is allocated here, and the host touches it
 * only through k_upload / k_download / k_map and the values the kernels below return. On the
 * CPU backend these are an aligned calloc and memcpy, and k_map returns the memory itself; a
 * GPU backend allocates device memory and stages. Pointers into this memory may be passed
 * around (to kernels, to the collectives) but are dereferenced only by the backend. */
void *k_alloc(size_t bytes);   /* zeroed, 64-byte aligned; exits with a message when memory runs out */
/* The backend's memory in all, in bytes (the machine's for the CPU backend, the device's for a
 * GPU's), for refusing up front what cannot fit; 0 where unknown. */
size_t k_memory_bytes(void);
void k_free(void *p);
void k_upload(void *dst, const void *host_src, size_t bytes);
void k_download(void *host_dst, const void *src, size_t bytes);
/* Host access to `bytes` of backend memory at p for I/O (reading or writing whole tensors):
 * with read set the host pointer holds p's contents; k_unmap with write set copies the host
 * pointer's contents back to p; both release what k_map made. */
void *k_map(void *p, size_t bytes, bool read);
void k_unmap(void *p, void *host, size_t bytes, bool write);

/* ---- reductions and updates on parameter memory (the optimizer and the trainer) ----
 * Sums run over chunks of K_SUM_CHUNK floats, each in 16 interleaved lanes, the chunks added
 * in order: the same bits for any thread count. A value returned to the host synchronises. */
enum { K_SUM_CHUNK = 1 << 16 };
double k_sum_squares(const float *x, size_t n);
void k_scale(float *x, size_t n, float s);           /* x *= s */
size_t k_count_nonfinite(const float *x, size_t n);  /* NaN and infinities */
/* LAMB (optim/optimizer.h), per element: g' = g / clip; m = b1 m + (1 - b1) g';
 * v = b2 v + (1 - b2) g'^2; u = (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay w.
 * k_lamb_moments advances m and v and returns sum(u^2) (chunked as k_sum_squares);
 * k_lamb_update recomputes u from the new moments (the same floats) and does w -= ratio u. */
typedef struct { float beta1, beta2, eps, weight_decay, clip, bc1, bc2; } LambArgs;
double k_lamb_moments(float *m, float *v, const float *g, const float *w, size_t n, const LambArgs *a);
void k_lamb_update(float *w, const float *m, const float *v, size_t n, float ratio, const LambArgs *a);
/* AdamW (torch.optim.AdamW), per element: g' = g clip_scale; m = b1 m + (1 - b1) g';
 * v = b2 v + (1 - b2) g'^2; w = w decay_factor - step_size m / (sqrt(v) / bc2_sqrt + eps). */
typedef struct { float beta1, beta2, eps, clip_scale, step_size, bc2_sqrt, decay_factor; } AdamWArgs;
void k_adamw_update(float *w, float *m, float *v, const float *g, size_t n, const AdamWArgs *a);
/* The same over `count` tensors in one call (an optimizer step over every parameter tensor: one
 * launch and at most one synchronisation instead of one per tensor). Tensor i is x[i] (m[i], v[i],
 * g[i], w[i]) of n[i] floats (0 allowed: a zero sum, no update) with args[i] and ratio[i]. The
 * pointer arrays, n, args, ratio and out are HOST arrays of count entries; the pointers in them are
 * backend memory, and the tensors a call writes must not overlap. out[i] gets exactly what the
 * one-tensor function returns for tensor i (the same chunks, the same order: the same bits); the
 * sums synchronise once per call, the updates not at all. */
void k_sum_squares_each(double *out, const float *const *x, const size_t *n, int count);
void k_lamb_moments_each(double *out, float *const *m, float *const *v, const float *const *g, const float *const *w,
                         const size_t *n, const LambArgs *args, int count);
void k_lamb_update_each(float *const *w, const float *const *m, const float *const *v, const size_t *n,
                        const float *ratio, const LambArgs *args, int count);
void k_adamw_update_each(float *const *w, float *const *m, float *const *v, const float *const *g, const size_t *n,
                         const AdamWArgs *args, int count);

/* ---- initialisation ---- */
void k_fill(float *x, size_t n, float value);
/* x[i] = std z_i, z_i the counter-based RNG's normal draw (key, i 64 + attempt) redrawn up to
 * 64 times until |z| <= 2 (TF's truncated_normal_initializer), 0 if none was. */
void k_truncated_normal(float *x, size_t n, float std, uint64_t key);

/* ---- collectives on backend memory: data parallelism across devices ----
 * For a backend whose memory MPI cannot reach: CUDA's, through NCCL (loaded when first opened:
 * $BERT_NCCL_LIB, else libnccl.so.2 from the library path). train/comm.h opens them over MPI
 * (one process makes the id, every process receives it) and sends its float collectives on
 * backend memory here. The CPU backend has none (k_collectives_id_bytes() is 0): MPI reads its
 * memory in place.
 * A collective is queued after every kernel called before it and runs beside the kernels
 * called after it (the gradient buckets while the backward goes on): those must leave its
 * buffer alone until k_collective_test has returned 1 for its ticket; from then on the kernels
 * see its result. Every process calls the same collectives in the same order. */
size_t k_collectives_id_bytes(void);   /* 0: this backend has none */
bool k_collectives_new_id(void *id, char *err, size_t errlen);
/* Joins the group of `size` processes named by id as `rank` (blocks until all have joined). */
bool k_collectives_open(const void *id, int rank, int size, char *err, size_t errlen);
void k_collectives_close(void);
/* The sum over the processes of buf[0 .. count): into every process's buf (root < 0) or into
 * root's only (the others' buf is left as it was). wire HALF_FP16 or HALF_BF16 sends buf
 * rounded to that 16-bit format, each partial sum rounded to it, and writes the sum back as
 * floats; -1 sends floats. Returns the ticket. */
int k_collective_sum(float *buf, size_t count, int wire, int root);
/* x[lo[r] .. lo[r + 1]) from process r to every process, in place (lo: size + 1 entries, host
 * memory): the parameters after a sharded optimizer step. Returns the ticket. */
int k_collective_share_parts(float *x, const size_t *lo);
/* 1: done (its ticket is freed); 0: not yet; -1: failed, with the reason in err (another
 * process died or the transport broke: the group is unusable, k_collectives_abort). */
int k_collective_test(int ticket, char *err, size_t errlen);
/* Ends whatever is in flight (after a failure or a deadline) so that the process can exit. */
void k_collectives_abort(void);

/* ---- reading outputs ---- */
/* How many of the M rows of logits [M, V] with labels[k] >= 0 have their argmax (the first of
 * equal maxima) at labels[k]; *labelled: how many rows had a label. */
long k_count_argmax_matches(const float *logits, const int32_t *labels, int M, int V, long *labelled);

#endif
