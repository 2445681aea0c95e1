/* int8 matrix products for inference (dynamic quantization, as ONNX Runtime's
 * quantize_dynamic and PyTorch's dynamic quantization): C = A W^T with
 *   W [N, K]  quantized once, symmetric per output channel: w ~ s_j q_jk, q in [-L, L],
 *             s_j = max_k |w_jk| / L, stored in oneDNN's packed layout with its scales;
 *             L = 127 on VNNI CPUs, 63 without (gemm_int8_weight_levels; see below);
 *   A [M, K]  quantized per row at each call, symmetric: a ~ r_i p_ik, p in [-127, 127],
 *             r_i = max_k |a_ik| / 127;
 * the integer products summed exactly in int32 by oneDNN's matmul (VNNI / AMX where the CPU
 * has them), then C_ij = float(sum) (r_i s_j) + bias_j, optionally GELU, in fp32.
 *
 * Why signed, symmetric activations (not u8 with a zero point, VNNI's native u8 x s8):
 *   - oneDNN 2.x applies zero points per tensor only; a per-row zero point would be a rank-1
 *     correction (zp_i colsum_j) outside the product. Symmetric rows need none.
 *   - CPUs without VNNI multiply u8 x s8 with vpmaddubsw, whose int16 pair sums saturate.
 *     oneDNN runs s8 x s8 there as (a + 128) x q, u8 x s8 with a compensation, so with 8-bit
 *     weights it saturates too (measured: ONEDNN_MAX_CPU_ISA=AVX2 gives wrong sums on random
 *     data). With weights in 7 bits, |q| <= 63, a pair is at most 2 x 255 x 63 = 32130 <
 *     32767: exact. So without VNNI the weights get half the levels (and the products
 *     stay exact); with VNNI (vpdpbusd sums in int32) and AMX the full 8 bits.
 * The per-row scale costs nothing in the product: it is applied in the epilogue, which oneDNN
 * 2.6 cannot fuse (a per-row binary post-op falls back to its reference kernel). */
#ifndef BERT_GEMM_INT8_H
#define BERT_GEMM_INT8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 2: oneDNN runs int8 products on AVX-512 VNNI or AMX here; 1: on older instructions (AVX2,
 * AVX-512 without VNNI: 7-bit weights, exact, slower); 0: not at all (below AVX2). */
int gemm_int8_support(void);
/* "oneDNN 2.6.3 int8 matmul brg:avx512_core_amx_int8" for reports, or why there is none. */
void gemm_int8_describe(char *out, size_t n);

/* Symmetric quantization of rows to L levels each side (1 <= L <= 127): q[i, k] =
 * round-to-nearest-even(x[i, k] (L / max_k |x[i, k]|)) in [-L, L] (the product rounded in
 * fp32), scale[i] = max_k |x[i, k]| / L (0 for a zero row: q all 0; NaN for a row with a NaN or
 * infinity, so its results are NaN). ld: x's row length. Activations use L = 127. */
void quantize_rows_s8(int8_t *q, float *scale, const float *x, int rows, int cols, int ld, int levels);
/* The weights' L: 127 where gemm_int8_support() is 2, else 63 (exact without VNNI). */
int gemm_int8_weight_levels(void);

/* A packed weight: W [N, K] fp32 (nn.Linear's layout) quantized per row of W (output channel)
 * and packed. gemm_int8_packed_bytes is its size (scales and room for K smoothing factors
 * included); gemm_int8_pack fills it. With smooth [K] (NULL: none) the weight is smoothed
 * (SmoothQuant): W's column k multiplied by t_k before the per-channel quantization, and t
 * kept in the packed weight, so that the product's input is quantized as x / t: the same
 * product in exact arithmetic, x t^-1 . t w, with the input's outlier channels moved into the
 * weight, whose per-channel scales absorb them far better than the input's per-row ones. */
size_t gemm_int8_packed_bytes(int K, int N);
void gemm_int8_pack(void *packed, const float *W, int K, int N, const float *smooth);
/* The weight's per-channel scales s_j (N floats) inside a packed weight. */
const float *gemm_int8_weight_scales(const void *packed);
/* The smoothing factors t [K] a packed weight was made with, or NULL where it has none. */
const float *gemm_int8_weight_smoothing(const void *packed);
/* SmoothQuant's factors (migration strength 1/2) for a product whose input is a LayerNorm's
 * output, without calibration: channel k's activation range taken as |ln_w_k| + |ln_b_k| (the
 * normalised value is O(1), so gamma and beta bound the channel's typical size), the weight's
 * as max_j |W_jk|: t_k = sqrt(act_k / wmax_k) (each clamped below at 1e-5), divided by their
 * mean (t ~ 1: the factors move range between operands without scaling the whole input). */
void gemm_int8_smoothing(float *t, const float *ln_w, const float *ln_b, const float *W, int K, int N);
/* The quantized weight q [N, K] a packed weight holds, unpacked (for tests). */
void gemm_int8_unpack(int8_t *q, const void *packed, int K, int N);

/* Whether products run on bert.c's own AMX loop (kernels/cpu/amx.h) where their shapes allow
 * (AMX CPUs, unless amx_enabled() says no), else on oneDNN's kernels. The sums are the same
 * either way. */
bool gemm_int8_own_amx(void);

/* The exact integer product: C[i, j] = sum_k A[i, k] q_jk in int32, A [M, K] (row length K). */
void gemm_int8_s32(int M, int N, int K, const int8_t *A, const void *packed, int32_t *C);

/* One row quantized as quantize_rows_s8 quantizes each row; returns its scale. For the kernels
 * that quantize the rows they produce while the row is in cache (LayerNorm, the epilogue). */
float gemm_int8_quantize_row(int8_t *q, const float *x, int cols, int levels);
/* Rows of x / t quantized with 127 levels (a smoothed weight's input: smooth = the weight's
 * t [cols]; NULL: x itself, as quantize_rows_s8): y_k = x_k u_k rounded to fp32, u_k = 1 / t_k
 * rounded to fp32 (a multiplication per value, not a division: within 2 roundings of x / t),
 * then y's row quantized as quantize_rows_s8 quantizes it, scale = max |y| / 127. */
void quantize_rows_s8_smoothed(int8_t *q, float *scale, const float *x, const float *smooth, int rows, int cols);

/* Where the product's rows go, and what is done to them first: v_ij = float(sum_ij) (r_i s_j)
 * + bias_j, + residual_ij where residual is given, then GELU (gelu 1: erf, 2: tanh; 0 none);
 * then exactly one destination: out [M, N] fp32, out16 [M, N] v rounded to bf16, or q [M, N]
 * with q_scale [M]: v quantized per row (quantize_rows_s8, 127 levels: the next product's
 * input; with q_smooth [N], v / q_smooth quantized as quantize_rows_s8_smoothed does: the next
 * product's weight is smoothed by those factors). With ln_w: out = LayerNorm(v) (ln_w, ln_b,
 * ln_eps; the row's mean and 1/std into ln_mean, ln_rstd, as k_layernorm_forward), and with q
 * also that quantized. */
typedef struct {
    float *out;
    const float *residual;
    uint16_t *out16;
    int8_t *q;
    float *q_scale;
    const float *q_smooth;
    int gelu;
    const float *ln_w, *ln_b;
    float ln_eps;
    float *ln_mean, *ln_rstd;
    /* set by gemm_int8_rows (a caller's value is not read): out or out16 is larger than the
     * threads' L2 caches together, so its whole vectors are stored past the caches */
    bool stream;
} Int8Epilogue;
/* The product of rows already quantized (A [M, K] s8 and its row scales r [M], as
 * quantize_rows_s8 leaves them) with a packed weight, the int32 sums taken in blocks of rows
 * that stay in cache for the epilogue. Same numbers as gemm_int8_s32 then the formula above. */
void gemm_int8_rows(int M, int N, int K, const int8_t *A, const float *row_scale, const void *packed, const float *bias,
                    const Int8Epilogue *e);
/* The int32 products' own time in gemm_int8_rows (their epilogues apart): thread-seconds
 * summed over the threads that ran them, and their operations (2 m n k, m the rows each product
 * was made for), since the counters were last reset (reset: after reading them). */
void gemm_int8_product_counters(double *thread_seconds, double *ops, bool reset);
/* Whether `threads` threads split a (K, N) weight's columns between them in gemm_int8_rows
 * (each keeps its part of the weight in its cache; the rows' results are the same bits either
 * way) where the epilogue has no LayerNorm: on CPUs where oneDNN packs for AMX, N a multiple of
 * 64 threads. Otherwise the threads split the rows. */
bool gemm_int8_column_panels(int K, int N, int threads);

/* The whole product: A [M, K] fp32 quantized per row (A / t where the weight is smoothed),
 * multiplied, dequantized, + bias (may be NULL), then GELU (gelu 1: erf, 2: tanh; 0 none),
 * into C [M, N] fp32. */
void gemm_int8_forward(int M, int N, int K, const float *A, const void *packed, const float *bias, int gelu,
                       float *C);

#endif
