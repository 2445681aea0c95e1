/* The CUDA backend's attention (kernels.h: k_attention_forward, k_attention_backward): the CPU
 * backend's arithmetic (kernels/cpu/layers.c, attention_block_*), structured as the CPU
 * structures it (per (sequence, head) block: a product for the scores, a softmax pass, a product
 * for the context; backward four products around the softmax gradient), with every block's
 * product issued at once as one cuBLAS strided batched GEMM (tensor cores in half mode):
 *
 *   forward   gather     Q, K, V of every block (b, h) into dense operands [B A][n][d] (16-bit
 *                        in half mode, as the CPU rounds them), zero rows past the sequence
 *                        (queries) or past kv_len (keys);
 *             GEMM       S = Q K^T                      [B A][n][n] fp32
 *             softmax    one warp per score row: fl(s scale), masks, max-subtracted expf, the
 *                        probabilities kept in probs (the CPU's layout), dropout with the CPU's
 *                        counters, the dropped probabilities as an operand (0 past kv_len);
 *             GEMM       ctx = P_dropped V              [B A][n][d] fp32, scattered into ctx.
 *   backward  gather     Q, K, V and dctx as operands;
 *             GEMM       dP = dctx V^T;
 *             dS         one warp per row: the dropout mask on dP, P_dropped as an operand, and
 *                        dS = P (dP - sum(P dP)) scale (the CPU's softmax_backward_rows);
 *             GEMMs      dV = P_dropped^T dctx, dQ = dS K, dK = dS^T Q, scattered into dqkv
 *                        (dK, dV of keys from kv_len on: 0).
 *
 * Dense blocks have n = T rounded up to a multiple of 8 rows (aligned 16-bit rows for the tensor
 * cores); every block has the same shape, so no product reads outside its operands whatever
 * kv_len or the packed layout (the packed activations have fewer than B T rows, so products in
 * place on them could run past the end). The padding adds only exact zeros to the sums: keys
 * past kv_len have probability 0 and zero K, V rows; query rows past the sequence have zero
 * Q, dctx and get zero P_dropped and dS rows.
 *
 * The scale is applied as the CPU applies it: scores fl(s / sqrt(d)) with s the product's sum
 * (the products run with alpha = 1; the CPU's fp32 sgemm applies alpha to its sum, its 16-bit
 * path scales in the softmax: the same values), and the softmax gradient times the scale. fp32
 * products are true fp32 (cublasSgemm*, the default math mode; TF32 after k_set_tf32). With 16-bit products
 * (AttentionArgs.half) every operand (Q, K, V, the dropped probabilities, dctx, dS) is rounded
 * to the CPU's format (round to nearest even: the bits of gemm_half.h's bf16_from_float /
 * fp16_from_float) and the products accumulate in fp32 (CUBLAS_COMPUTE_32F, fp32 outputs), as on
 * the CPU: products of two 16-bit values are exact in fp32, so only the order of the sums
 * differs. cuBLAS GEMMs are deterministic; everything runs on the default stream.
 *
 * In 16-bit mode, BERT_CUDA_ATTENTION=fused runs the same arithmetic as
 * one fused forward kernel and two fused backward kernels instead, which keep each score row's
 * maximum and 1 / sum in place of its probabilities and recompute them in the backward
 * (k_attention_keeps_probs false; below; opt-in until run on a GPU). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_blas.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/half_bits.cuh"

extern "C" {
#include "core/rng.h"
#include "kernels/kernels.h"
}

/* Row kernels: ROWS warps per block, one score row each. Dense blocks: rows rounded up to ALIGN. */
enum { WARP = 32, ROWS = 8, ALIGN = 8 };

/* ---------------------------------------------------------------- 16-bit rounding */

/* The CPU's roundings (half_bits.cuh: gemm_half.h's bf16_from_float / fp16_from_float, NaNs
 * made quiet, ties to even). */
__device__ static uint16_t half_bits(HalfMode mode, float x) {
    return mode == HALF_FP16 ? fp16_from_float_bits(x) : bf16_from_float_bits(x);
}

/* ---------------------------------------------------------------- arguments */

/* AttentionArgs with its host arrays staged to the device, the dense blocks' row count, and
 * the constants of the scale and the dropout computed once on the host as the CPU computes
 * them. */
typedef struct {
    int B, T, A, d, H;
    int n;                   /* rows (and key columns) of a dense block: T rounded up to ALIGN */
    const int32_t *kv_len, *mask, *seq_row, *seq_rows;
    const uint8_t *has_holes;
    const uint16_t *qkv16;   /* read in place of qkv (half only) */
    const float *qkv;        /* fused path: the fp32 QKV, rounded as it is read where qkv16 is NULL */
    bool vec16;              /* fused path: qkv16 given and 16-byte aligned */
    uint16_t *ctx16;         /* forward, half: ctx rounded there too, as it is written; NULL: not */
    bool vec;                /* fused path: its fp32 activations (and ctx16) 16-byte aligned */
    float scale;             /* 1 / sqrt(d) */
    bool dropout;
    uint32_t threshold;      /* rng_dropout_threshold(p) */
    float keep_scale;        /* 1 / (1 - p) */
    uint64_t key;
    bool half;
    HalfMode mode;
} Attn;

/* One sequence: its first row in the activations, its rows (query rows), keys (kv_len) and
 * mask (NULL unless it has holes). */
typedef struct {
    size_t row0;
    int rows, L;
    const int32_t *mask;
} Seq;

__device__ static Seq sequence(const Attn &a, int b) {
    Seq s;
    s.row0 = a.seq_row ? (size_t)a.seq_row[b] : (size_t)b * a.T;
    s.rows = a.seq_rows ? a.seq_rows[b] : a.T;
    s.L = a.kv_len[b];
    s.mask = a.has_holes[b] ? a.mask + (size_t)b * a.T : NULL;
    return s;
}

/* Element k of a dense operand: 16-bit bits (half, x rounded as the CPU rounds) or fp32. */
__device__ static void store_operand(const Attn &a, void *op, size_t k, float x) {
    if (a.half) ((uint16_t *)op)[k] = half_bits(a.mode, x);
    else ((float *)op)[k] = x;
}

/* The CPU's dropout_probs mask: element (i, j) of block (b, h) kept iff its bits reach the
 * threshold, counters in the full [T, T] grid of the block (T: the batch's sequence length,
 * not the dense blocks' n). */
__device__ static bool kept(const Attn &a, int block, int i, int j) {
    const uint32_t base = (uint32_t)(((unsigned long long)block * a.T + (unsigned long long)i) * a.T);
    return rng_bits32(a.key, base + (uint32_t)j) >= a.threshold;
}

__device__ static float warp_sum(float x) {
    for (int o = WARP / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ static float warp_max(float x) {
    for (int o = WARP / 2; o > 0; o /= 2) {
        const float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = y > x ? y : x;
    }
    return x;
}

/* ---------------------------------------------------------------- gather and scatter */

/* The dense-block kernels below run on a grid of (block (b A + h), chunk of the block's n d
 * elements, part): the sequence is looked up once per thread block, and the element's row and
 * column within its block come from 32-bit arithmetic (a 64-bit division per element costs
 * more than the copy). Element t of block k of part p is at (p B A + k) n d + t. */
enum { DENSE_THREADS = 256, DENSE_PER_THREAD = 4 };
static dim3 dense_grid(const Attn &x, int parts) {
    const int per_block = x.n * x.d, per_chunk = DENSE_THREADS * DENSE_PER_THREAD;
    const int chunks = (per_block + per_chunk - 1) / per_chunk;
    return dim3((unsigned)(x.B * x.A), (unsigned)(chunks < 65535 ? chunks : 65535), (unsigned)parts);
}
#define DENSE_ELEMENTS(t, a)                                                                  \
    for (int t = blockIdx.y * blockDim.x + threadIdx.x; t < (a).n * (a).d; t += gridDim.y * blockDim.x)

/* Dense operands, `parts` of them one after the other, each [B A][n][d] (block b A + h, row i,
 * column c at ((b A + h) n + i) d + c): part 0 Q, 1 K, 2 V of the QKV activation (the 16-bit
 * copy's bits when given, else qkv as an operand), 3 dctx. Rows from the sequence's end (Q,
 * dctx) or from kv_len (K, V) on are 0 (+0 in every format). */
__global__ static void gather_operands(void *op, const float *qkv, const float *dctx, Attn a) {
    const int block = blockIdx.x, part = blockIdx.z, b = block / a.A, h = block % a.A;
    const Seq s = sequence(a, b);
    const int count = part == 1 || part == 2 ? s.L : s.rows;
    const size_t base = ((size_t)part * a.B * a.A + block) * (size_t)(a.n * a.d);
    DENSE_ELEMENTS(t, a) {
        const int i = t / a.d, c = t - i * a.d;
        const size_t e = base + (size_t)t;
        if (i >= count) {
            store_operand(a, op, e, 0.0f);
        } else if (part == 3) {
            store_operand(a, op, e, dctx[(s.row0 + i) * a.H + (size_t)h * a.d + c]);
        } else {
            const size_t at = (s.row0 + i) * 3 * a.H + (size_t)part * a.H + (size_t)h * a.d + c;
            if (a.qkv16) ((uint16_t *)op)[e] = a.qkv16[at];
            else store_operand(a, op, e, qkv[at]);
        }
    }
}

/* ctx rows of each sequence from the dense [B A][n][d] product (rows past the sequence are
 * not there), and their 16-bit copy where a.ctx16 asks for it. */
__global__ static void scatter_ctx(float *ctx, const float *dense, Attn a) {
    const int block = blockIdx.x, b = block / a.A, h = block % a.A;
    const Seq s = sequence(a, b);
    const float *src = dense + (size_t)block * (size_t)(a.n * a.d);
    DENSE_ELEMENTS(t, a) {
        const int i = t / a.d, c = t - i * a.d;
        if (i >= s.rows) continue;
        const size_t at = (s.row0 + i) * a.H + (size_t)h * a.d + c;
        ctx[at] = src[t];
        if (a.ctx16) a.ctx16[at] = half_bits(a.mode, src[t]);
    }
}

/* dqkv rows of each sequence from the dense dQ, dK, dV (three parts as gather_operands'); dK
 * and dV of keys from kv_len on are 0 (they got no attention). Every row of every sequence is
 * written: dqkv is overwritten. */
__global__ static void scatter_dqkv(float *dqkv, const float *dense, Attn a) {
    const int block = blockIdx.x, part = blockIdx.z, b = block / a.A, h = block % a.A;
    const Seq s = sequence(a, b);
    const float *src = dense + ((size_t)part * a.B * a.A + block) * (size_t)(a.n * a.d);
    DENSE_ELEMENTS(t, a) {
        const int i = t / a.d, c = t - i * a.d;
        if (i < s.rows)
            dqkv[(s.row0 + i) * 3 * a.H + (size_t)part * a.H + (size_t)h * a.d + c] =
                part == 0 || i < s.L ? src[t] : 0.0f;
    }
}

/* ---------------------------------------------------------------- row kernels */

/* The fused path's state for its backward, in the probabilities' buffer (k_attention_state_floats'
 * 2 B A T floats): each score row's scaled maximum and 1 / sum, [B A T][2]. */
__device__ __forceinline__ static void row_stats_store(float *stats, const Attn &a, int block, int i, float mx,
                                                       float inv) {
    float *at = stats + 2 * ((size_t)block * a.T + i);
    at[0] = mx, at[1] = inv;
}
__device__ __forceinline__ static float2 row_stats_load(const float *stats, const Attn &a, int block, int i) {
    const float *at = stats + 2 * ((size_t)block * a.T + i);
    return make_float2(at[0], at[1]);
}

/* Key j's score as the softmax takes it: -inf where masked (probability exactly 0). */
__device__ __forceinline__ static float masked_score(const Seq &s, int j, float score) {
    return s.mask && !s.mask[j] ? -INFINITY : score;
}
/* The exponential of a masked score less its row's scaled maximum (times the row's 1 / sum: the
 * probability): the forward's operation, which the fused backward repeats on the same scores for
 * the same bits (-fmad=false: nothing contracted differently in the two places). */
__device__ __forceinline__ static float softmax_exp(const Attn &a, float x, float mx) { return expf(x * a.scale - mx); }
/* dS of a score from its probability p, its dP after the dropout and its row's sum(P dP): one
 * expression wherever dS is computed (the fused backward computes each twice: the same bits). */
__device__ __forceinline__ static float score_grad(const Attn &a, float p, float g, float dot) {
    return p * (g - dot) * a.scale;
}

/* One warp's score row srow (query i of block `block`, keys < L; L = 0 for rows past the
 * sequence): the CPU's softmax_rows_scaled (masked keys -inf before the maximum, so
 * probability exactly 0; the maximum of the scaled scores is the scaled maximum, as there),
 * the probabilities kept in probs (block (b, h) at (b A + h) T T, row stride L; NULL: not
 * kept) or the row's scaled maximum and 1 / sum in stats (the fused path's; NULL: not kept),
 * the CPU's dropout, and each dropped probability handed to store(j, value). The exponentials
 * are kept in srow between the passes. */
template <typename Store>
__device__ static void softmax_row(float *srow, float *probs, float *stats, const Attn &a, const Seq &s, int block,
                                   int i, int L, Store store) {
    const int lane = threadIdx.x % WARP;
    if (L <= 0) return;
    float mx = -INFINITY;
    for (int j = lane; j < L; j += WARP) {
        const float x = masked_score(s, j, srow[j]);
        mx = x > mx ? x : mx;
    }
    mx = warp_max(mx) * a.scale;
    float sum = 0.0f;
    for (int j = lane; j < L; j += WARP) {
        const float e = softmax_exp(a, masked_score(s, j, srow[j]), mx);
        srow[j] = e;
        sum += e;
    }
    const float inv = 1.0f / warp_sum(sum);
    if (stats && lane == 0) row_stats_store(stats, a, block, i, mx, inv);
    float *p_out = probs ? probs + (size_t)block * a.T * a.T + (size_t)i * L : NULL;
    for (int j = lane; j < L; j += WARP) {
        const float p = srow[j] * inv;
        if (p_out) p_out[j] = p;
        float pd = p;
        if (a.dropout) pd = kept(a, block, i, j) ? p * a.keep_scale : 0.0f;
        store(j, pd);
    }
}

/* One warp per dense score row (block, i): softmax_row, the dropped probabilities as the
 * operand of ctx = P V (0 for keys from kv_len on and for rows past the sequence). */
__global__ static void softmax_rows(float *probs, void *pd_op, float *scores, Attn a) {
    const size_t row = (size_t)blockIdx.x * ROWS + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP, n = a.n;
    if (row >= (size_t)a.B * a.A * n) return;
    const int i = (int)(row % n), block = (int)(row / n), b = block / a.A;
    const Seq s = sequence(a, b);
    const int L = i < s.rows ? s.L : 0;   /* rows past the sequence: only zeros */
    const size_t orow = row * n;
    softmax_row(scores + row * n, probs, NULL, a, s, block, i, L,
                [&](int j, float pd) { store_operand(a, pd_op, orow + j, pd); });
    for (int j = L + lane; j < n; j += WARP) store_operand(a, pd_op, orow + j, 0.0f);
}

/* One score row's softmax gradient (keys < L; nothing for L 0): g holds dP (fp32), overwritten
 * by the dropped dP (the forward's dropout: the same counters), each dropped probability handed
 * to store_pd(j, value) and dS = P (dP - sum(P dP)) scale to store_ds(j, value); P the kept
 * probabilities before dropout, row i of block in probs (row stride L). The second loop reads
 * g[j] of the same lane's j. */
template <typename StorePd, typename StoreDs>
__device__ static void softmax_backward_row(float *g, const float *probs, const Attn &a, int block, int i, int L,
                                            StorePd store_pd, StoreDs store_ds) {
    const int lane = threadIdx.x % WARP;
    if (L <= 0) return;
    const float *p = probs + (size_t)block * a.T * a.T + (size_t)i * L;
    float dot = 0.0f;
    for (int j = lane; j < L; j += WARP) {
        float gj = g[j], pd = p[j];
        if (a.dropout) {
            const bool keep = kept(a, block, i, j);
            gj = keep ? gj * a.keep_scale : 0.0f;
            pd = keep ? pd * a.keep_scale : 0.0f;
            g[j] = gj;
        }
        store_pd(j, pd);
        dot += p[j] * gj;
    }
    dot = warp_sum(dot);
    for (int j = lane; j < L; j += WARP) store_ds(j, score_grad(a, p[j], g[j], dot));
}

/* One warp per dense row (block, i) of dP = dctx V^T (fp32, in dp): the forward's dropout on
 * it (kept in dp), the dropped probabilities as the operand of dV = P_dropped^T dctx, and
 * dS = P (dP - sum(P dP)) scale (the CPU's softmax_backward_rows, P the kept probabilities
 * before dropout) as the operand of dQ and dK; both 0 for keys from kv_len on and for rows
 * past the sequence. */
__global__ static void softmax_backward_rows(void *pd_op, void *ds_op, float *dp, const float *probs, Attn a) {
    const size_t row = (size_t)blockIdx.x * ROWS + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP, n = a.n;
    if (row >= (size_t)a.B * a.A * n) return;
    const int i = (int)(row % n), block = (int)(row / n), b = block / a.A;
    const Seq s = sequence(a, b);
    const int L = i < s.rows ? s.L : 0;
    const size_t orow = row * n;
    softmax_backward_row(
        dp + row * n, probs, a, block, i, L, [&](int j, float pd) { store_operand(a, pd_op, orow + j, pd); },
        [&](int j, float ds) { store_operand(a, ds_op, orow + j, ds); });
    for (int j = L + lane; j < n; j += WARP) {
        store_operand(a, pd_op, orow + j, 0.0f);
        store_operand(a, ds_op, orow + j, 0.0f);
    }
}

/* ---------------------------------------------------------------- products */

/* Every block's column-major C[m, n] = op(A) op(B) (alpha 1, beta 0), block k's operands at
 * A + k sa, B + k sb, C + k sc (elements): fp32 (true fp32), or 16-bit operands of the mode's
 * format accumulated and stored in fp32. */
static void batched_gemm(const Attn &x, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         const void *A, int lda, long long sa, const void *B, int ldb, long long sb, float *C, int ldc,
                         long long sc) {
    const float one = 1.0f, zero = 0.0f;
    const int count = x.B * x.A;
    if (!x.half)
        CUBLAS_CHECK(cublasSgemmStridedBatched(cuda_cublas(), ta, tb, m, n, k, &one, (const float *)A, lda, sa,
                                               (const float *)B, ldb, sb, &zero, C, ldc, sc, count));
    else {
        const cudaDataType type = x.mode == HALF_FP16 ? CUDA_R_16F : CUDA_R_16BF;
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(cuda_cublas(), ta, tb, m, n, k, &one, A, type, lda, sa, B, type,
                                                ldb, sb, &zero, C, CUDA_R_32F, ldc, sc, count, CUBLAS_COMPUTE_32F,
                                                CUBLAS_GEMM_DEFAULT));
    }
}

/* The products on the dense row-major blocks, as cuBLAS's column-major: a row-major X [R][C]
 * (row length ld = C) is the column-major X^T [C, R] with the same ld. With blocks of n rows,
 * head size d, operands [n][d] (ld d, stride n d) and scores [n][n] (ld n, stride n n):
 *
 *   rows_by_rows   S[i][j] = sum_c X[i][c] Y[j][c]   (S = Q K^T, dP = dctx V^T)
 *                  column-major S^T (n x n), S^T(j, i) = sum_c Y^T(c, j) X^T(c, i):
 *                  C = S (ldc n), op(A) = (Y^T)^T (A = Y as column-major d x n, lda d, OP_T),
 *                  op(B) = X^T (B = X, ldb d, OP_N); m = n, n = n, k = d.
 *   weights_rows   O[i][c] = sum_j W[i][j] Y[j][c]   (ctx = P_dropped V, dQ = dS K)
 *                  column-major O^T (d x n), O^T(c, i) = sum_j Y^T(c, j) W^T(j, i):
 *                  C = O (ldc d), A = Y (column-major d x n, lda d, OP_N),
 *                  B = W (column-major W^T, n x n, ldb n, OP_N); m = d, n = n, k = n.
 *   weightsT_rows  O[j][c] = sum_i W[i][j] Y[i][c]   (dV = P_dropped^T dctx, dK = dS^T Q)
 *                  column-major O^T (d x n), O^T(c, j) = sum_i Y^T(c, i) W(i, j), and W (i, j)
 *                  is the transpose of the column-major W^T stored there:
 *                  C = O (ldc d), A = Y (lda d, OP_N), B = W (ldb n, OP_T); m = d, n = n, k = n. */
static void rows_by_rows(const Attn &x, float *S, const void *X, const void *Y) {
    const long long nd = (long long)x.n * x.d, nn = (long long)x.n * x.n;
    batched_gemm(x, CUBLAS_OP_T, CUBLAS_OP_N, x.n, x.n, x.d, Y, x.d, nd, X, x.d, nd, S, x.n, nn);
}
static void weights_rows(const Attn &x, float *O, const void *W, const void *Y) {
    const long long nd = (long long)x.n * x.d, nn = (long long)x.n * x.n;
    batched_gemm(x, CUBLAS_OP_N, CUBLAS_OP_N, x.d, x.n, x.n, Y, x.d, nd, W, x.n, nn, O, x.d, nd);
}
static void weightsT_rows(const Attn &x, float *O, const void *W, const void *Y) {
    const long long nd = (long long)x.n * x.d, nn = (long long)x.n * x.n;
    batched_gemm(x, CUBLAS_OP_N, CUBLAS_OP_T, x.d, x.n, x.n, Y, x.d, nd, W, x.n, nn, O, x.d, nd);
}

/* ---------------------------------------------------------------- fused forward (16-bit)
 *
 * The forward in one kernel per (block (b, h), tile of FUSED_ROWS query rows), with the same
 * arithmetic as the path above: S = Q K^T on tensor cores (wmma, 16-bit operands, fp32 sums)
 * into shared memory, the softmax of softmax_rows on those rows (the same float operations in
 * the same order: its masks, probabilities, dropout counters and rounding of the dropped
 * probabilities), then ctx = P_dropped V on tensor cores, written to ctx's rows. For the
 * backward it keeps each row's scaled maximum and 1 / sum (row_stats_store), not the
 * probabilities. No dense operands, score or probability blocks in device memory, and one
 * launch instead of five. Runs where fused_fits says (half mode, d a multiple of 16 up to 128, T
 * from 2 to 512: the score rows of a tile fit in shared memory); otherwise the path above runs.
 *
 * Not yet verified on a GPU (written after the last device run): it runs only with
 * BERT_CUDA_ATTENTION=fused in the environment until tests/cuda/test_cuda_attention.c has
 * passed with it there (scripts/gpu_check.sh runs that test both ways; on the CPU's emulator,
 * make cuda-emulate, it passes). */
enum { FUSED_ROWS = 32, FUSED_WARPS = FUSED_ROWS / 16, FUSED_KEYS = 64, FUSED_MAX_T = 512, FUSED_MAX_D = 128 };

/* A key count rounded up to whole tiles of FUSED_KEYS (a tile's score rows, the dense rows). */
__host__ __device__ static int round_to_keys(int keys) { return (keys + FUSED_KEYS - 1) / FUSED_KEYS * FUSED_KEYS; }

template <typename T16> struct Wmma16;
template <> struct Wmma16<__nv_bfloat16> { static bool ok(HalfMode m) { return m != HALF_FP16; } };
template <> struct Wmma16<__half> { static bool ok(HalfMode m) { return m == HALF_FP16; } };

/* Shared memory of one tile: scores [FUSED_ROWS][stride] fp32 (later ctx's staging), dropped
 * probabilities [FUSED_ROWS][stride] 16-bit, Q [FUSED_ROWS][d], a K or V tile [FUSED_KEYS][d]. */
__host__ __device__ static size_t fused_scores_floats(int max_lp, int d) { return (size_t)FUSED_ROWS * (max_lp > d ? max_lp : d); }
static size_t fused_smem_bytes(int max_lp, int d) {
    return sizeof(float) * fused_scores_floats(max_lp, d) + sizeof(uint16_t) * FUSED_ROWS * (size_t)max_lp +
           sizeof(uint16_t) * (FUSED_ROWS + FUSED_KEYS) * (size_t)d;
}

/* Two values rounded to 16 bits, the first in the low half (the lower address). */
__device__ __forceinline__ static uint32_t half_pair(HalfMode mode, float lo, float hi) {
    return (uint32_t)half_bits(mode, lo) | (uint32_t)half_bits(mode, hi) << 16;
}

/* rows [r0, r0 + count) of part (0 Q, 1 K, 2 V) of head h into dst [count][d] (16-bit bits),
 * rows from `valid` on zero (past the sequence or kv_len: zero operands add nothing). With
 * a.vec16 16 bytes (8 values) a thread at a time, one division per 8 values: d is a multiple of
 * 16 and qkv16 16-byte aligned, so every row of the head starts 16-byte aligned; otherwise a
 * value at a time, from qkv16 or from qkv rounded as gather_operands rounds it. */
__device__ static void load_rows16(uint16_t *dst, const Attn &a, const Seq &s, int h, int part, int r0, int count,
                                   int valid) {
    if (!a.vec16) {
        const unsigned n = (unsigned)count * (unsigned)a.d;
        const size_t head = (size_t)part * a.H + (size_t)h * a.d;
        for (unsigned e = threadIdx.x; e < n; e += blockDim.x) {
            const unsigned r = e / (unsigned)a.d, c = e - r * (unsigned)a.d;
            const int i = r0 + (int)r;
            const size_t at = (s.row0 + i) * 3 * (size_t)a.H + head + c;
            dst[e] = i >= valid ? (uint16_t)0 : a.qkv16 ? a.qkv16[at] : half_bits(a.mode, a.qkv[at]);
        }
        return;
    }
    const unsigned per_row = (unsigned)a.d / 8, n = (unsigned)count * per_row;
    const size_t stride = 3 * (size_t)a.H / 8;   /* a row of qkv16 in 16-byte vectors */
    const uint4 *src = (const uint4 *)(a.qkv16 + (size_t)part * a.H + (size_t)h * a.d);
    for (unsigned e = threadIdx.x; e < n; e += blockDim.x) {
        const unsigned r = e / per_row, c = e - r * per_row;
        const int i = r0 + (int)r;
        ((uint4 *)dst)[e] = i < valid ? src[(s.row0 + i) * stride + c] : make_uint4(0, 0, 0, 0);
    }
}

/* softmax_row on one score row in shared memory, the row's statistics into stats (unless NULL),
 * the dropped probabilities into prow (16-bit, zero from L to lp). */
__device__ static void fused_softmax_row(float *srow, uint16_t *prow, float *stats, const Attn &a, const Seq &s,
                                         int block, int i, int lp) {
    const int lane = threadIdx.x % WARP, L = i < s.rows ? s.L : 0;
    softmax_row(srow, NULL, stats, a, s, block, i, L, [&](int j, float pd) { prow[j] = half_bits(a.mode, pd); });
    for (int j = L + lane; j < lp; j += WARP) prow[j] = 0;
}

/* A warp's 16 x 16 fp32 sums on tensor cores. */
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> Frag;

/* out [FUSED_ROWS][lp] fp32 (row stride lp) = rows [FUSED_ROWS][d] (16-bit, shared) times the
 * transposed rows of part (1 K, 2 V) below kv_len, FUSED_KEYS keys at a time through kv
 * (shared); each warp its own 16 rows (S = Q K^T, dP = dctx V^T), held in fragments for every
 * key tile (loaded from shared memory once, not once per 16 keys; unrolled to the compile-time
 * count, as weights_by_rows' results). */
template <typename T16>
__device__ __forceinline__ static void rows_by_keys(float *out, const uint16_t *rows, uint16_t *kv, const Attn &a,
                                                    const Seq &s, int h, int part, int lp) {
    using namespace nvcuda;
    const int warp = threadIdx.x / WARP, d = a.d;
    const T16 *rows16 = (const T16 *)rows, *kv16 = (const T16 *)kv;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T16, wmma::row_major> ra[FUSED_MAX_D / 16];
    __syncthreads();   /* rows written by the whole block */
#pragma unroll
    for (int k = 0; k < FUSED_MAX_D / 16; k++)
        if (k < d / 16) wmma::load_matrix_sync(ra[k], rows16 + warp * 16 * d + k * 16, d);
    for (int k0 = 0; k0 < lp; k0 += FUSED_KEYS) {
        __syncthreads();
        load_rows16(kv, a, s, h, part, k0, FUSED_KEYS, s.L);
        __syncthreads();
        for (int n = 0; n < FUSED_KEYS / 16; n++) {
            Frag acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int k = 0; k < FUSED_MAX_D / 16; k++) {
                if (k >= d / 16) continue;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T16, wmma::col_major> kb;   /* the keys' rows transposed */
                wmma::load_matrix_sync(kb, kv16 + n * 16 * d + k * 16, d);
                wmma::mma_sync(acc, ra[k], kb, acc);
            }
            wmma::store_matrix_sync(out + warp * 16 * lp + k0 + n * 16, acc, lp, wmma::mem_row_major);
        }
    }
}

/* acc (a warp's 16 rows by d; zeroed here) = w [FUSED_ROWS][lp] (16-bit, shared, row stride lp)
 * times the rows of part (1 K, 2 V) below kv_len, through kv (shared) (ctx = P_dropped V,
 * dQ = dS K). The loops over the fragments are unrolled to their compile-time count (a run-time
 * bound would put acc[] in local memory: 256 bytes of stack in ptxas's report). */
template <typename T16>
__device__ __forceinline__ static void weights_by_rows(Frag *acc, const uint16_t *w, uint16_t *kv, const Attn &a,
                                                       const Seq &s, int h, int part, int lp) {
    using namespace nvcuda;
    const int warp = threadIdx.x / WARP, d = a.d;
    const T16 *kv16 = (const T16 *)kv;
#pragma unroll
    for (int n = 0; n < FUSED_MAX_D / 16; n++)
        if (n < d / 16) wmma::fill_fragment(acc[n], 0.0f);
    for (int k0 = 0; k0 < lp; k0 += FUSED_KEYS) {
        __syncthreads();
        load_rows16(kv, a, s, h, part, k0, FUSED_KEYS, s.L);
        __syncthreads();
        for (int k = 0; k < FUSED_KEYS; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T16, wmma::row_major> wa;
            wmma::load_matrix_sync(wa, (const T16 *)w + warp * 16 * lp + k0 + k, lp);
#pragma unroll
            for (int n = 0; n < FUSED_MAX_D / 16; n++) {
                if (n >= d / 16) continue;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T16, wmma::row_major> vb;
                wmma::load_matrix_sync(vb, kv16 + k * d + n * 16, d);
                wmma::mma_sync(acc[n], wa, vb, acc[n]);
            }
        }
    }
}

/* A warp's 16 x d results (acc) through stage [16][d] (fp32, shared, the warp's own) into rows
 * r0 .. r0 + 15 of dst (row stride ld): rows from `rows` on are not written, rows from
 * `zero_from` on are written 0; unless dst16 is NULL, each value also rounded (mode) into
 * dst16's same place. With vec four values a lane at a time (16-byte stores, 8 into dst16: d
 * and ld are multiples of 16, dst and dst16 16-byte aligned), else one. */
__device__ __forceinline__ static void store_warp_rows(float *dst, uint16_t *dst16, HalfMode mode, size_t ld,
                                                       float *stage, Frag *acc, int d, int r0, int rows,
                                                       int zero_from, bool vec) {
    using namespace nvcuda;
#pragma unroll
    for (int n = 0; n < FUSED_MAX_D / 16; n++)
        if (n < d / 16) wmma::store_matrix_sync(stage + n * 16, acc[n], d, wmma::mem_row_major);
    __syncwarp();
    const unsigned width = vec ? 4 : 1, per_row = (unsigned)d / width;
    for (unsigned e = threadIdx.x % WARP; e < 16 * per_row; e += WARP) {
        const unsigned r = e / per_row, c = width * (e - r * per_row);
        const int i = r0 + (int)r;
        if (i >= rows) continue;
        float *out = dst + (size_t)i * ld + c;
        uint16_t *out16 = dst16 ? dst16 + (size_t)i * ld + c : NULL;
        if (vec) {
            const float4 v = i < zero_from ? ((const float4 *)stage)[e] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            *(float4 *)out = v;
            if (out16) *(uint2 *)out16 = make_uint2(half_pair(mode, v.x, v.y), half_pair(mode, v.z, v.w));
        } else {
            const float v = i < zero_from ? stage[e] : 0.0f;
            *out = v;
            if (out16) *out16 = half_bits(mode, v);
        }
    }
    __syncwarp();   /* the staging may be reused next */
}

template <typename T16>
__global__ static void __launch_bounds__(FUSED_WARPS *WARP) fused_forward(float *ctx, float *stats, Attn a,
                                                                          int max_lp) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char smem[];
    const int block = blockIdx.x, b = block / a.A, h = block % a.A, r0 = blockIdx.y * FUSED_ROWS;
    const Seq s = sequence(a, b);
    if (r0 >= s.rows) return;   /* no rows of this sequence here */
    const int warp = threadIdx.x / WARP, d = a.d, lp = round_to_keys(s.L);
    float *scores = (float *)smem;   /* [FUSED_ROWS][lp], later [FUSED_ROWS][d] */
    uint16_t *pd = (uint16_t *)(scores + fused_scores_floats(max_lp, d));   /* [FUSED_ROWS][lp] */
    uint16_t *q = pd + (size_t)FUSED_ROWS * max_lp, *kv = q + (size_t)FUSED_ROWS * d;

    load_rows16(q, a, s, h, 0, r0, FUSED_ROWS, s.rows);
    rows_by_keys<T16>(scores, q, kv, a, s, h, 1, lp);   /* S = Q K^T */
    __syncwarp();
    for (int r = warp * 16; r < warp * 16 + 16; r++)   /* each warp its own 16 rows */
        fused_softmax_row(scores + r * lp, pd + r * lp, stats, a, s, block, r0 + r, lp);
    Frag out[FUSED_MAX_D / 16];
    weights_by_rows<T16>(out, pd, kv, a, s, h, 2, lp);   /* ctx = P_dropped V */
    /* this warp's staging rows: the score rows there are done (read before the product's first
     * barrier; with lp 0 none is read) */
    const size_t at = s.row0 * a.H + (size_t)h * d;
    store_warp_rows(ctx + at, a.ctx16 ? a.ctx16 + at : NULL, a.mode, a.H, scores + warp * 16 * d, out, d,
                    r0 + warp * 16, s.rows, s.rows, a.vec);
}

/* Whether the fused kernels take this call (see above). */
static bool fused_wanted(void) {
    static int wanted = -1;
    if (wanted < 0) {
        const char *v = getenv("BERT_CUDA_ATTENTION");
        wanted = v && !strcmp(v, "fused");
    }
    return wanted;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The most dynamic shared memory a block may be given on this device (227 KiB on sm_90, 163 on
 * sm_80). */
static size_t shared_memory_limit(void) {
    static int limit = -1;
    if (limit < 0) {
        int device = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    }
    return (size_t)limit;
}

static size_t fused_rows_smem_bytes(int max_lp, int d);
static size_t fused_keys_smem_bytes(int d);

/* The fused path's conditions, on the shape alone (the forward and the backward must decide
 * alike: the forward's state is the backward's; and k_attention_state_floats sizes that state
 * before any call): half, d a multiple of 16 up to 128, T from 2 to 512, and every kernel's
 * shared memory within the device's, which grows with T (so a T that fits is taken at every
 * shorter length from 2). */
static bool fused_fits(bool half, int d, int T) {
    if (!half || d % 16 || d > FUSED_MAX_D || T < 2 || T > FUSED_MAX_T) return false;
    const int max_lp = round_to_keys(T);
    size_t most = fused_smem_bytes(max_lp, d);
    if (fused_rows_smem_bytes(max_lp, d) > most) most = fused_rows_smem_bytes(max_lp, d);
    if (fused_keys_smem_bytes(d) > most) most = fused_keys_smem_bytes(d);
    return most <= shared_memory_limit();
}
static bool fused_takes(const Attn &x) { return fused_wanted() && fused_fits(x.half, x.d, x.T); }

/* kernel's dynamic shared memory raised to bytes where past the default 48 KiB (once per size
 * reached; *allowed: what the kernel has been given so far). */
template <typename Kernel> static void allow_shared_memory(Kernel kernel, size_t bytes, size_t *allowed) {
    if (bytes <= *allowed) return;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *allowed = bytes;
}

static size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

template <typename T16> static void launch_fused(float *ctx, float *stats, const Attn &x) {
    const int max_lp = round_to_keys(x.T);
    const size_t bytes = fused_smem_bytes(max_lp, x.d);
    static size_t allowed = 48 << 10;
    allow_shared_memory(fused_forward<T16>, bytes, &allowed);
    const dim3 grid((unsigned)(x.B * x.A), (unsigned)((x.T + FUSED_ROWS - 1) / FUSED_ROWS));
    fused_forward<T16><<<grid, FUSED_WARPS * WARP, bytes>>>(ctx, stats, x, max_lp);
    CUDA_LAUNCHED();
}

/* probs: where the forward leaves its state (each row's statistics), NULL: none kept */
static bool fused_forward_ran(float *ctx, float *probs, const float *qkv, const Attn &x) {
    if (!fused_takes(x)) return false;
    Attn v = x;
    v.qkv = qkv, v.vec16 = x.qkv16 && aligned16(x.qkv16);
    v.vec = aligned16(ctx) && aligned16(x.ctx16);
    if (Wmma16<__half>::ok(x.mode)) launch_fused<__half>(ctx, probs, v);
    else launch_fused<__nv_bfloat16>(ctx, probs, v);
    return true;
}

/* ---------------------------------------------------------------- fused backward (16-bit)
 *
 * The backward in two kernels with the arithmetic of the path above (every operand rounded as
 * the CPU rounds it, fp32 sums on tensor cores through wmma, softmax_backward_rows' float
 * operations on each score row) and without its gathers, dense blocks and scatters, nor the
 * probabilities: the forward kept each score row's scaled maximum and 1 / sum (8 bytes a row,
 * in the probabilities' buffer), and both kernels recompute S = Q K^T with the forward's wmma
 * sums and P = expf(s scale - max) / sum with the forward's operations, so the forward's
 * probabilities, bit for bit:
 *
 *   rows   one thread block per (block (b, h), tile of FUSED_ROWS query rows): S and dP =
 *          dctx V^T into shared memory, each row's P, dropout, sum(P dP) (kept for the keys
 *          kernel, 4 bytes a row) and dS as softmax_backward_rows computes them, and dQ = dS K
 *          into dqkv's Q rows;
 *   keys   one thread block per (block (b, h), tile of FUSED_ROWS key rows), each warp 16 keys:
 *          over the sequence's query rows, FUSED_KEYS at a time, the tile's S and dP for its
 *          keys, P, the dropout and dS from the rows kernel's sums, then dV += P_dropped^T dctx
 *          and dK += dS^T Q in 16-row steps (a fixed order: no atomics), into dqkv's K and V
 *          rows (0 for keys from kv_len on).
 *
 * Per score element nothing goes through device memory (the dense blocks took 16 bytes each:
 * the probabilities written and read, P_dropped and dS written and read); S and dP are computed
 * twice (tensor cores' time, not memory's). A key's S in the keys kernel is the rows kernel's
 * sum (the same fragments' layout, the same k order). Same conditions and switch as the fused
 * forward; like it, not yet run on a GPU. */

/* rows [r0, r0 + count) of dctx's head h rounded to 16 bits into dst [count][d], rows past the
 * sequence zero (gather_operands' part 3). With a.vec eight values a thread at a time (two
 * 16-byte loads, one 16-byte store), else one. */
__device__ static void load_dctx16(uint16_t *dst, const float *dctx, const Attn &a, const Seq &s, int h, int r0,
                                   int count) {
    if (!a.vec) {
        for (int e = threadIdx.x; e < count * a.d; e += blockDim.x) {
            const int r = e / a.d, c = e - r * a.d, i = r0 + r;
            dst[e] = i < s.rows ? half_bits(a.mode, dctx[(s.row0 + i) * a.H + (size_t)h * a.d + c]) : 0;
        }
        return;
    }
    const unsigned per_row = (unsigned)a.d / 8, n = (unsigned)count * per_row;
    for (unsigned e = threadIdx.x; e < n; e += blockDim.x) {
        const unsigned r = e / per_row, c = e - r * per_row;
        const int i = r0 + (int)r;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (i < s.rows) {
            const float4 *src = (const float4 *)(dctx + (s.row0 + i) * a.H + (size_t)h * a.d) + 2 * c;
            const float4 x = src[0], y = src[1];
            v = make_uint4(half_pair(a.mode, x.x, x.y), half_pair(a.mode, x.z, x.w), half_pair(a.mode, y.x, y.y),
                           half_pair(a.mode, y.z, y.w));
        }
        ((uint4 *)dst)[e] = v;
    }
}

/* Key j's probability from its score and its row's statistics: the forward's operations. */
__device__ __forceinline__ static float recomputed_p(const Attn &a, const Seq &s, int j, float score, float2 st) {
    return softmax_exp(a, masked_score(s, j, score), st.x) * st.y;
}

/* Key j's dS and dropped probability for query row i (keys < L) from its score and dP:
 * softmax_backward_row's operations, P recomputed from the row's statistics. */
__device__ __forceinline__ static void score_gradient(float *pd, float *ds, const Attn &a, const Seq &s, int block,
                                                      int i, int j, float score, float dp, float2 st, float dot) {
    const float p = recomputed_p(a, s, j, score, st);
    float g = dp, dropped = p;
    if (a.dropout) {
        const bool keep = kept(a, block, i, j);
        g = keep ? g * a.keep_scale : 0.0f;
        dropped = keep ? p * a.keep_scale : 0.0f;
    }
    *pd = dropped;
    *ds = score_grad(a, p, g, dot);
}

/* One query row of the rows kernel: srow holds S, grow dP (fp32, shared); P recomputed into srow
 * and the dropped dP into grow, sum(P dP) into dots, dS into ds_row (16-bit, shared, zero from L
 * to lp). */
__device__ static void fused_backward_row(float *srow, float *grow, uint16_t *ds_row, float *dots, const float *stats,
                                          const Attn &a, const Seq &s, int block, int i, int lp) {
    const int lane = threadIdx.x % WARP, L = i < s.rows ? s.L : 0;
    if (L > 0) {
        const float2 st = row_stats_load(stats, a, block, i);
        float dot = 0.0f;
        for (int j = lane; j < L; j += WARP) {
            const float p = recomputed_p(a, s, j, srow[j], st);
            float g = grow[j];
            if (a.dropout) g = kept(a, block, i, j) ? g * a.keep_scale : 0.0f;
            srow[j] = p, grow[j] = g;
            dot += p * g;
        }
        dot = warp_sum(dot);
        if (lane == 0) dots[(size_t)block * a.T + i] = dot;
        for (int j = lane; j < L; j += WARP) ds_row[j] = half_bits(a.mode, score_grad(a, srow[j], grow[j], dot));
    }
    for (int j = L + lane; j < lp; j += WARP) ds_row[j] = 0;
}

/* Shared memory of the rows kernel: S then P [FUSED_ROWS][max_lp] and dP [FUSED_ROWS][max_lp or
 * d] (fp32; dP's rows later the staging of dQ), dS [FUSED_ROWS][max_lp], Q and dctx
 * [FUSED_ROWS][d], a K or V tile [FUSED_KEYS][d] (16-bit). */
static size_t fused_rows_smem_bytes(int max_lp, int d) {
    return sizeof(float) * ((size_t)FUSED_ROWS * max_lp + fused_scores_floats(max_lp, d)) +
           sizeof(uint16_t) * ((size_t)FUSED_ROWS * max_lp + (size_t)(2 * FUSED_ROWS + FUSED_KEYS) * d);
}

template <typename T16>
__global__ static void __launch_bounds__(FUSED_WARPS *WARP)
    fused_backward_rows(float *dqkv, float *dots, const float *dctx, const float *stats, Attn a, int max_lp) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char smem[];
    const int block = blockIdx.x, b = block / a.A, h = block % a.A, r0 = blockIdx.y * FUSED_ROWS;
    const Seq s = sequence(a, b);
    if (r0 >= s.rows) return;
    const int warp = threadIdx.x / WARP, d = a.d, lp = round_to_keys(s.L);
    float *sp = (float *)smem;                            /* [FUSED_ROWS][lp] */
    float *dp = sp + (size_t)FUSED_ROWS * max_lp;         /* [FUSED_ROWS][lp], later [FUSED_ROWS][d] */
    uint16_t *ds = (uint16_t *)(dp + fused_scores_floats(max_lp, d));   /* [FUSED_ROWS][lp] */
    uint16_t *q = ds + (size_t)FUSED_ROWS * max_lp, *g = q + (size_t)FUSED_ROWS * d, *kv = g + (size_t)FUSED_ROWS * d;

    load_rows16(q, a, s, h, 0, r0, FUSED_ROWS, s.rows);
    load_dctx16(g, dctx, a, s, h, r0, FUSED_ROWS);
    rows_by_keys<T16>(sp, q, kv, a, s, h, 1, lp);   /* S = Q K^T, as the forward */
    rows_by_keys<T16>(dp, g, kv, a, s, h, 2, lp);   /* dP = dctx V^T */
    __syncwarp();
    for (int r = warp * 16; r < warp * 16 + 16; r++)   /* each warp its own 16 rows */
        fused_backward_row(sp + r * lp, dp + r * lp, ds + r * lp, dots, stats, a, s, block, r0 + r, lp);
    Frag out[FUSED_MAX_D / 16];
    weights_by_rows<T16>(out, ds, kv, a, s, h, 1, lp);   /* dQ = dS K */
    /* this warp's staging rows: the dP rows there are done (read before the product's first
     * barrier; with lp 0 none is read) */
    store_warp_rows(dqkv + s.row0 * 3 * a.H + (size_t)h * d, NULL, a.mode, 3 * (size_t)a.H, dp + warp * 16 * d, out,
                    d, r0 + warp * 16, s.rows, s.rows, a.vec);
}

/* Shared memory of the keys kernel: S and dP tiles [FUSED_KEYS][FUSED_ROWS], the staging of dK
 * or dV [FUSED_ROWS][d], the query tile's row statistics and sums [FUSED_KEYS][3] (fp32); P_dropped
 * and dS tiles [FUSED_KEYS][FUSED_ROWS], the block's K and V rows [FUSED_ROWS][d], Q and dctx
 * tiles [FUSED_KEYS][d] (16-bit). */
static size_t fused_keys_smem_bytes(int d) {
    return sizeof(float) * (2 * (size_t)FUSED_KEYS * FUSED_ROWS + (size_t)FUSED_ROWS * d + 3 * FUSED_KEYS) +
           sizeof(uint16_t) * (2 * (size_t)FUSED_KEYS * FUSED_ROWS + 2 * (size_t)(FUSED_ROWS + FUSED_KEYS) * d);
}

/* A warp's 16 keys' scores (rows of part 0, Q) or dP (rows dctx, part 2 V) for `tiles` x 16
 * query rows: out [tiles 16][FUSED_ROWS] fp32 at the warp's 16 columns = rows [.][d] (16-bit)
 * times the transposed key rows keys [16][d] (16-bit), fragments as rows_by_keys lays them (the
 * keys' held across the tiles). */
template <typename T16>
__device__ __forceinline__ static void tile_by_keys(float *out, const uint16_t *rows, const uint16_t *keys, int d,
                                                    int tiles) {
    using namespace nvcuda;
    const int warp = threadIdx.x / WARP;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T16, wmma::col_major> kb[FUSED_MAX_D / 16];
#pragma unroll
    for (int k = 0; k < FUSED_MAX_D / 16; k++)
        if (k < d / 16) wmma::load_matrix_sync(kb[k], (const T16 *)keys + k * 16, d);
    for (int t = 0; t < tiles; t++) {
        Frag acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int k = 0; k < FUSED_MAX_D / 16; k++) {
            if (k >= d / 16) continue;
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T16, wmma::row_major> ra;
            wmma::load_matrix_sync(ra, (const T16 *)rows + t * 16 * d + k * 16, d);
            wmma::mma_sync(acc, ra, kb[k], acc);
        }
        wmma::store_matrix_sync(out + t * 16 * FUSED_ROWS + warp * 16, acc, FUSED_ROWS, wmma::mem_row_major);
    }
}

template <typename T16>
__global__ static void __launch_bounds__(FUSED_WARPS *WARP)
    fused_backward_keys(float *dqkv, const float *dctx, const float *stats, const float *dots, Attn a) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char smem[];
    const int block = blockIdx.x, b = block / a.A, h = block % a.A, j0 = blockIdx.y * FUSED_ROWS;
    const Seq s = sequence(a, b);
    if (j0 >= s.rows) return;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, d = a.d, wj0 = j0 + warp * 16;
    const bool active = wj0 < s.L;   /* keys from kv_len on got no attention: dK = dV = 0 */
    float *st = (float *)smem, *dpt = st + FUSED_KEYS * FUSED_ROWS;   /* [FUSED_KEYS][FUSED_ROWS] each */
    float *stage = dpt + FUSED_KEYS * FUSED_ROWS + warp * 16 * d;     /* [16][d] a warp */
    float2 *row_st = (float2 *)(dpt + FUSED_KEYS * FUSED_ROWS + (size_t)FUSED_ROWS * d);   /* [FUSED_KEYS] */
    float *row_dot = (float *)(row_st + FUSED_KEYS);                                        /* [FUSED_KEYS] */
    uint16_t *pdt = (uint16_t *)(row_dot + FUSED_KEYS);
    uint16_t *dst = pdt + FUSED_KEYS * FUSED_ROWS;                    /* [FUSED_KEYS][FUSED_ROWS] each */
    uint16_t *kk = dst + FUSED_KEYS * FUSED_ROWS, *vv = kk + (size_t)FUSED_ROWS * d;   /* [FUSED_ROWS][d] each */
    uint16_t *q = vv + (size_t)FUSED_ROWS * d, *g = q + (size_t)FUSED_KEYS * d;        /* [FUSED_KEYS][d] each */
    const T16 *q16 = (const T16 *)q, *g16 = (const T16 *)g;

    load_rows16(kk, a, s, h, 1, j0, FUSED_ROWS, s.L);
    load_rows16(vv, a, s, h, 2, j0, FUSED_ROWS, s.L);
    Frag dk[FUSED_MAX_D / 16], dv[FUSED_MAX_D / 16];
#pragma unroll
    for (int n = 0; n < FUSED_MAX_D / 16; n++)
        if (n < d / 16) wmma::fill_fragment(dk[n], 0.0f), wmma::fill_fragment(dv[n], 0.0f);
    /* a tile from kv_len on (both warps inactive: the same for the whole block) only writes zeros */
    const int rows16 = j0 < s.L ? (s.rows + 15) / 16 * 16 : 0;
    for (int i0 = 0; i0 < rows16; i0 += FUSED_KEYS) {   /* the query rows, a tile at a time */
        __syncthreads();
        load_rows16(q, a, s, h, 0, i0, FUSED_KEYS, s.rows);
        load_dctx16(g, dctx, a, s, h, i0, FUSED_KEYS);
        for (int r = threadIdx.x; r < FUSED_KEYS && i0 + r < s.rows; r += blockDim.x) {   /* each row's, once */
            row_st[r] = row_stats_load(stats, a, block, i0 + r);
            row_dot[r] = dots[(size_t)block * a.T + i0 + r];
        }
        __syncthreads();
        if (!active) continue;
        const int tiles = (rows16 - i0 < FUSED_KEYS ? rows16 - i0 : FUSED_KEYS) / 16;
        tile_by_keys<T16>(st, q, kk + warp * 16 * d, d, tiles);    /* S, as the forward */
        tile_by_keys<T16>(dpt, g, vv + warp * 16 * d, d, tiles);   /* dP */
        __syncwarp();
        for (int e = lane; e < tiles * 16 * 16; e += WARP) {   /* the warp's [tiles 16][16] */
            const int r = e / 16, c = e % 16, i = i0 + r, j = wj0 + c, at = r * FUSED_ROWS + warp * 16 + c;
            float pd = 0.0f, ds = 0.0f;
            if (i < s.rows && j < s.L)
                score_gradient(&pd, &ds, a, s, block, i, j, st[at], dpt[at], row_st[r], row_dot[r]);
            pdt[at] = half_bits(a.mode, pd), dst[at] = half_bits(a.mode, ds);
        }
        __syncwarp();
        for (int t = 0; t < tiles; t++) {
            /* P_dropped^T and dS^T [16 keys][16 query rows]: the tiles' rows read as columns */
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T16, wmma::col_major> pt, sT;
            wmma::load_matrix_sync(pt, (const T16 *)pdt + t * 16 * FUSED_ROWS + warp * 16, FUSED_ROWS);
            wmma::load_matrix_sync(sT, (const T16 *)dst + t * 16 * FUSED_ROWS + warp * 16, FUSED_ROWS);
#pragma unroll
            for (int n = 0; n < FUSED_MAX_D / 16; n++) {
                if (n >= d / 16) continue;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T16, wmma::row_major> gb, qb;
                wmma::load_matrix_sync(gb, g16 + t * 16 * d + n * 16, d);
                wmma::load_matrix_sync(qb, q16 + t * 16 * d + n * 16, d);
                wmma::mma_sync(dv[n], pt, gb, dv[n]);
                wmma::mma_sync(dk[n], sT, qb, dk[n]);
            }
        }
    }
    /* dK and dV of the keys from kv_len on: 0 */
    float *key_rows = dqkv + s.row0 * 3 * a.H + (size_t)h * d;
    store_warp_rows(key_rows + 2 * (size_t)a.H, NULL, a.mode, 3 * (size_t)a.H, stage, dv, d, wj0, s.rows, s.L, a.vec);
    store_warp_rows(key_rows + a.H, NULL, a.mode, 3 * (size_t)a.H, stage, dk, d, wj0, s.rows, s.L, a.vec);
}

template <typename T16>
static void launch_fused_backward(float *dqkv, const float *dctx, const float *stats, const Attn &x) {
    const int max_lp = round_to_keys(x.T);
    float *dots = (float *)cuda_scratch(3, sizeof(float) * (size_t)x.B * x.A * x.T);   /* slot 3: sum(P dP) a row */
    const size_t rows_bytes = fused_rows_smem_bytes(max_lp, x.d), keys_bytes = fused_keys_smem_bytes(x.d);
    static size_t rows_allowed = 48 << 10, keys_allowed = 48 << 10;
    allow_shared_memory(fused_backward_rows<T16>, rows_bytes, &rows_allowed);
    allow_shared_memory(fused_backward_keys<T16>, keys_bytes, &keys_allowed);
    const dim3 grid((unsigned)(x.B * x.A), (unsigned)((x.T + FUSED_ROWS - 1) / FUSED_ROWS));
    fused_backward_rows<T16><<<grid, FUSED_WARPS * WARP, rows_bytes>>>(dqkv, dots, dctx, stats, x, max_lp);
    CUDA_LAUNCHED();
    fused_backward_keys<T16><<<grid, FUSED_WARPS * WARP, keys_bytes>>>(dqkv, dctx, stats, dots, x);
    CUDA_LAUNCHED();
}

/* probs: the fused forward's state (each row's statistics) */
static bool fused_backward_ran(float *dqkv, const float *dctx, const float *qkv, const float *probs, const Attn &x) {
    if (!fused_takes(x)) return false;
    Attn v = x;
    v.qkv = qkv, v.vec16 = x.qkv16 && aligned16(x.qkv16);
    v.vec = aligned16(dqkv) && aligned16(dctx);
    if (Wmma16<__half>::ok(x.mode)) launch_fused_backward<__half>(dqkv, dctx, probs, v);
    else launch_fused_backward<__nv_bfloat16>(dqkv, dctx, probs, v);
    return true;
}

/* ---------------------------------------------------------------- launches */

static Attn attn_from(const AttentionArgs *a) {
    Attn x;
    x.B = a->B, x.T = a->T, x.A = a->A, x.d = a->d, x.H = a->A * a->d;
    x.n = (a->T + ALIGN - 1) / ALIGN * ALIGN;
    /* stage slots 3..7: this file's */
    x.kv_len = (const int32_t *)cuda_stage(3, a->kv_len, sizeof(int32_t) * a->B);
    x.mask = (const int32_t *)cuda_stage(4, a->mask, sizeof(int32_t) * a->B * a->T);
    x.has_holes = (const uint8_t *)cuda_stage(5, a->has_holes, sizeof(uint8_t) * a->B);
    x.seq_row = (const int32_t *)cuda_stage(6, a->seq_row, sizeof(int32_t) * a->B);
    x.seq_rows = (const int32_t *)cuda_stage(7, a->seq_rows, sizeof(int32_t) * a->B);
    x.qkv16 = a->half ? a->qkv16 : NULL;
    x.ctx16 = NULL;
    x.vec = false, x.vec16 = false, x.qkv = NULL;
    x.scale = 1.0f / sqrtf((float)a->d);
    x.dropout = a->dropout_p > 0.0f;
    x.threshold = rng_dropout_threshold(a->dropout_p);
    x.keep_scale = 1.0f / (1.0f - a->dropout_p);
    x.key = a->dropout_key;
    x.half = a->half;
    x.mode = a->half_mode;
    return x;
}

static bool attention_empty(const AttentionArgs *a) { return a->B <= 0 || a->T <= 0 || a->A <= 0 || a->d <= 0; }

/* Sizes of the dense buffers: an operand element (16-bit or fp32), one operand [B A][n][d] in
 * elements, one score block set [B A][n][n] in elements, and byte offsets kept 256-aligned. */
static size_t operand_bytes(const Attn &x) { return x.half ? sizeof(uint16_t) : sizeof(float); }
static size_t operand_elems(const Attn &x) { return (size_t)x.B * x.A * x.n * x.d; }
static size_t score_elems(const Attn &x) { return (size_t)x.B * x.A * x.n * x.n; }

/* Part p of dense operands laid one after the other (gather_operands' parts). */
static void *operand_part(const Attn &x, void *op, int p) {
    return (char *)op + (size_t)p * operand_elems(x) * operand_bytes(x);
}

static unsigned row_blocks(const Attn &x) { return (unsigned)(((size_t)x.B * x.A * x.n + ROWS - 1) / ROWS); }

extern "C" void k_attention_forward_to(float *ctx, uint16_t *ctx16, float *probs, const float *qkv,
                                       const AttentionArgs *a) {
    if (!probs && a->dropout_p > 0.0f) {
        fprintf(stderr, "bert: k_attention_forward: dropout needs the probabilities kept\n");
        exit(1);
    }
    if (attention_empty(a)) return;
    Attn x = attn_from(a);
    if (x.half) x.ctx16 = ctx16;
    if (fused_forward_ran(ctx, probs, qkv, x)) return;
    /* device scratch: slot 4 Q, K, V operands then the dense ctx; slot 2 scores; slot 3 P_dropped */
    const size_t ops_bytes = aligned(3 * operand_elems(x) * operand_bytes(x));
    char *work = (char *)cuda_scratch(4, ops_bytes + sizeof(float) * operand_elems(x));
    void *ops = work;
    float *ctx_dense = (float *)(work + ops_bytes);
    float *scores = (float *)cuda_scratch(2, sizeof(float) * score_elems(x));
    void *pd = cuda_scratch(3, score_elems(x) * operand_bytes(x));

    gather_operands<<<dense_grid(x, 3), DENSE_THREADS>>>(ops, qkv, NULL, x);
    CUDA_LAUNCHED();
    rows_by_rows(x, scores, operand_part(x, ops, 0), operand_part(x, ops, 1));   /* S = Q K^T */
    softmax_rows<<<row_blocks(x), ROWS * WARP>>>(probs, pd, scores, x);
    CUDA_LAUNCHED();
    weights_rows(x, ctx_dense, pd, operand_part(x, ops, 2));   /* ctx = P_dropped V */
    scatter_ctx<<<dense_grid(x, 1), DENSE_THREADS>>>(ctx, ctx_dense, x);
    CUDA_LAUNCHED();
}

extern "C" bool k_attention_keeps_probs(const AttentionArgs *a) {
    return !(fused_wanted() && fused_fits(a->half, a->d, a->T));
}

/* Kept probabilities, B A T T floats; the fused path's state, 2 B A T, at every shape it takes
 * up to a's (fused_fits), and where a shorter one falls to the path above (T = 1) its B A T T is
 * within that too. */
extern "C" size_t k_attention_state_floats(const AttentionArgs *a) {
    if (attention_empty(a)) return 0;
    const size_t blocks = (size_t)a->B * a->A, T = (size_t)a->T;
    return k_attention_keeps_probs(a) ? blocks * T * T : blocks * 2 * T;
}

extern "C" void k_attention_forward(float *ctx, float *probs, const float *qkv, const AttentionArgs *a) {
    k_attention_forward_to(ctx, NULL, probs, qkv, a);
}

extern "C" void k_attention_backward(float *dqkv, const float *dctx, const float *qkv, const float *probs,
                                     const AttentionArgs *a) {
    if (attention_empty(a)) return;
    const Attn x = attn_from(a);
    if (fused_backward_ran(dqkv, dctx, qkv, probs, x)) return;
    /* device scratch: slot 4 Q, K, V, dctx operands then the dense dQ, dK, dV; slot 2 dP;
     * slot 3 P_dropped and dS operands */
    const size_t ops_bytes = aligned(4 * operand_elems(x) * operand_bytes(x));
    char *work = (char *)cuda_scratch(4, ops_bytes + 3 * sizeof(float) * operand_elems(x));
    void *ops = work;
    float *dq = (float *)(work + ops_bytes), *dk = dq + operand_elems(x), *dv = dk + operand_elems(x);
    float *dp = (float *)cuda_scratch(2, sizeof(float) * score_elems(x));
    const size_t pd_bytes = aligned(score_elems(x) * operand_bytes(x));
    char *weights = (char *)cuda_scratch(3, 2 * pd_bytes);
    void *pd = weights, *ds = weights + pd_bytes;
    void *q = operand_part(x, ops, 0), *k = operand_part(x, ops, 1), *v = operand_part(x, ops, 2);
    void *g = operand_part(x, ops, 3);

    gather_operands<<<dense_grid(x, 4), DENSE_THREADS>>>(ops, qkv, dctx, x);
    CUDA_LAUNCHED();
    rows_by_rows(x, dp, g, v);   /* dP = dctx V^T */
    softmax_backward_rows<<<row_blocks(x), ROWS * WARP>>>(pd, ds, dp, probs, x);
    CUDA_LAUNCHED();
    weightsT_rows(x, dv, pd, g);   /* dV = P_dropped^T dctx */
    weights_rows(x, dq, ds, k);    /* dQ = dS K */
    weightsT_rows(x, dk, ds, q);   /* dK = dS^T Q */
    scatter_dqkv<<<dense_grid(x, 3), DENSE_THREADS>>>(dqkv, dq, x);
    CUDA_LAUNCHED();
}
