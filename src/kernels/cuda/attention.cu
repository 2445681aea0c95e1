/* The CUDA backend's attention (kernels.h: k_attention_forward, k_attention_backward): the CPU
 * backend's arithmetic (kernels/cpu/layers.c, attention_block_*), kernel by kernel:
 *
 *   forward      one block per (query tile of ROWS rows, head, sequence), one warp per query
 *                row: the row's scores (keys < kv_len) in shared memory, a max-subtracted fp32
 *                softmax (masked keys -inf, so probability exactly 0), the probabilities kept in
 *                probs (the CPU's layout: block (b, h) at (b A + h) T T, row stride kv_len[b]),
 *                dropout with the CPU's counters, then ctx = P V.
 *   backward     dq_rows: per query row as the forward: dP = dctx V^T, the dropout mask on dP,
 *                dS = P (dP - sum(P dP)) / sqrt(d) (kept in device scratch), dQ = dS K.
 *                dkv_rows: one block per (key tile, head, sequence), one warp per key:
 *                dV = P_dropped^T dctx and dK = dS^T Q summed over the query rows in order:
 *                deterministic, no atomics.
 *
 * The scale is applied as the CPU applies it: scores fl(fl(q.k) / sqrt(d)) before the softmax
 * (the fp32 path's sgemm alpha, the 16-bit path's softmax scale: the same values), and the
 * softmax gradient times the scale. With 16-bit products (AttentionArgs.half) every operand of
 * the four products (Q, K, V, the dropped probabilities, dctx, dS) is rounded to the CPU's
 * format (round to nearest even: the bits of gemm_half.h's bf16_from_float / fp16_from_float)
 * and the products accumulate in fp32, as on the CPU (products of two 16-bit values are exact
 * in fp32, so only the order of the sums differs). Everything runs on the default stream. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_common.h"

extern "C" {
#include "core/rng.h"
#include "kernels/kernels.h"
}

/* ROWS warps per block (one query row or key each); keys (forward, dq_rows) or query rows
 * (dkv_rows) staged in shared memory TILE at a time. A lane owns head columns lane + 32 t,
 * t < PL (PL = ceil(d / 32), a template argument: head sizes up to D_MAX). */
enum { WARP = 32, ROWS = 8, TILE = 32, D_MAX = 256 };

/* ---------------------------------------------------------------- 16-bit rounding */

/* x rounded to bf16 (the CPU's bf16_from_float: ties to even, NaN kept quiet), as a float. */
__device__ static float bf16_rounded(float x) {
    const uint32_t u = __float_as_uint(x);
    const uint32_t h = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return __uint_as_float((h & 0xffffu) << 16);
}

/* IEEE fp16 bits and back: gemm_half.c's fp16_from_float / float_from_fp16 line by line
 * (rintf rounds ties to even, as nearbyintf in the default rounding mode). */
__device__ static uint16_t fp16_bits(float x) {
    const uint32_t u = __float_as_uint(x), sign = (u >> 16) & 0x8000u, ax = u & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));   /* NaN, made quiet */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                         /* >= 65520: infinity */
    if (ax < 0x38800000u) return (uint16_t)(sign | (uint32_t)rintf(__uint_as_float(ax) * 16777216.0f));
    uint32_t h = ax - 0x38000000u;
    h += 0xfffu + ((h >> 13) & 1u);
    return (uint16_t)(sign | (h >> 13));
}
__device__ static float fp16_value(uint16_t bits) {
    const uint32_t sign = (uint32_t)(bits & 0x8000u) << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0) {
        const float x = (float)m * (1.0f / 16777216.0f);
        return sign ? -x : x;
    }
    if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m ? 0x400000u : 0) | (m << 13));
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

__device__ static float half_rounded(HalfMode mode, float x) {
    return mode == HALF_FP16 ? fp16_value(fp16_bits(x)) : bf16_rounded(x);
}
__device__ static float half_value(HalfMode mode, uint16_t bits) {
    return mode == HALF_FP16 ? fp16_value(bits) : __uint_as_float((uint32_t)bits << 16);
}

/* ---------------------------------------------------------------- arguments */

/* AttentionArgs with its host arrays staged to the device, and the constants of the scale and
 * the dropout computed once on the host as the CPU computes them. */
typedef struct {
    int B, T, A, d, H;
    const int32_t *kv_len, *mask, *seq_row, *seq_rows;
    const uint8_t *has_holes;
    const uint16_t *qkv16;   /* read in place of qkv (half only) */
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

/* Element idx of the QKV activation as a product operand: the 16-bit copy's value, or qkv
 * rounded (half), or qkv. */
__device__ static float qkv_operand(const Attn &a, const float *qkv, size_t idx) {
    if (a.qkv16) return half_value(a.mode, a.qkv16[idx]);
    return a.half ? half_rounded(a.mode, qkv[idx]) : qkv[idx];
}
__device__ static float operand(const Attn &a, float x) { return a.half ? half_rounded(a.mode, x) : x; }

/* The CPU's dropout_probs mask: element (i, j) of block (b, h) kept iff its bits reach the
 * threshold, counters in the full [T, T] grid of the block. */
__device__ static bool kept(const Attn &a, int block, int i, int j) {
    const uint32_t base = (uint32_t)(((unsigned long long)block * a.T + (unsigned long long)i) * a.T);
    return rng_bits32(a.key, base + (uint32_t)j) >= a.threshold;
}

/* ---------------------------------------------------------------- shared helpers */

/* Rows j0 .. j0+TILE-1 (those < count; zeros past it) of one part (0 Q, 1 K, 2 V) of head h
 * of a sequence, as operands, into tile [TILE][d + 1] (padded: lanes reading a column of it
 * hit distinct banks). All the block's threads call it. */
__device__ static void load_qkv_tile(float *tile, const Attn &a, const float *qkv, size_t row0, int j0, int count,
                                     int part, int h) {
    const int d = a.d;
    for (int e = threadIdx.x; e < TILE * d; e += blockDim.x) {
        const int r = e / d, c = e % d;
        float x = 0.0f;
        if (j0 + r < count) x = qkv_operand(a, qkv, (row0 + j0 + r) * 3 * a.H + (size_t)part * a.H + (size_t)h * d + c);
        tile[r * (d + 1) + c] = x;
    }
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

/* vec . (tile row lane), summed over c in order: a lane's key's score or dP; vec (d operands)
 * is broadcast from shared memory to the warp's lanes. */
__device__ static float tile_dot(const float *vec, const float *tile, int lane, int d) {
    float dot = 0.0f;
    const float *t = tile + lane * (d + 1);
    for (int c = 0; c < d; c++) dot += vec[c] * t[c];
    return dot;
}

/* acc[t] += sum over the tile's n rows jj of weight[jj] tile[jj][lane + 32 t], in row order. */
template <int PL>
__device__ static void tile_accumulate(float *acc, const float *weight, const float *tile, int n, int lane, int d) {
    for (int jj = 0; jj < n; jj++) {
        const float w = weight[jj];
#pragma unroll
        for (int t = 0; t < PL; t++) {
            const int c = lane + WARP * t;
            if (c < d) acc[t] += w * tile[jj * (d + 1) + c];
        }
    }
}

/* Shared memory of the per-query-row kernels: ROWS operand rows of d, one [TILE][d+1] tile,
 * ROWS rows of T floats (scores, probabilities, score gradients). */
static size_t row_kernel_shared_bytes(int d, int T) {
    return sizeof(float) * ((size_t)ROWS * d + (size_t)TILE * (d + 1) + (size_t)ROWS * T);
}

/* ---------------------------------------------------------------- forward */

template <int PL>
__global__ static void attention_forward_rows(float *ctx, float *probs, const float *qkv, Attn a) {
    extern __shared__ float smem[];
    const int b = blockIdx.z, h = blockIdx.y, w = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const Seq s = sequence(a, b);
    const int i0 = blockIdx.x * ROWS, i = i0 + w, d = a.d, L = s.L, block = b * a.A + h;
    if (i0 >= s.rows) return;   /* the whole block: no sequence rows here */
    const bool active = i < s.rows;
    float *q_s = smem, *tile = q_s + ROWS * d, *row = tile + TILE * (d + 1) + (size_t)w * a.T;
    for (int e = threadIdx.x; e < ROWS * d; e += blockDim.x) {
        const int r = e / d, c = e % d;
        q_s[e] = i0 + r < s.rows ? qkv_operand(a, qkv, (s.row0 + i0 + r) * 3 * a.H + (size_t)h * d + c) : 0.0f;
    }
    /* scores fl(q.k / sqrt(d)); masked keys -inf */
    for (int j0 = 0; j0 < L; j0 += TILE) {
        __syncthreads();   /* the previous tile is read (and q_s written) */
        load_qkv_tile(tile, a, qkv, s.row0, j0, L, 1, h);
        __syncthreads();
        const int j = j0 + lane;
        if (active && j < L) {
            float x = tile_dot(q_s + w * d, tile, lane, d) * a.scale;
            if (s.mask && !s.mask[j]) x = -INFINITY;
            row[j] = x;
        }
    }
    /* softmax (the CPU's softmax_rows_scaled), probabilities kept, dropout, operands rounded */
    if (active) {
        __syncwarp();
        float mx = -INFINITY;
        for (int j = lane; j < L; j += WARP) mx = row[j] > mx ? row[j] : mx;
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int j = lane; j < L; j += WARP) {
            const float e = expf(row[j] - mx);
            row[j] = e;
            sum += e;
        }
        const float inv = 1.0f / warp_sum(sum);
        float *p_out = probs ? probs + (size_t)block * a.T * a.T + (size_t)i * L : NULL;
        for (int j = lane; j < L; j += WARP) {
            const float p = row[j] * inv;
            if (p_out) p_out[j] = p;
            float pd = p;
            if (a.dropout) pd = kept(a, block, i, j) ? p * a.keep_scale : 0.0f;
            row[j] = operand(a, pd);
        }
        __syncwarp();
    }
    /* ctx = P_dropped V */
    float acc[PL];
#pragma unroll
    for (int t = 0; t < PL; t++) acc[t] = 0.0f;
    for (int j0 = 0; j0 < L; j0 += TILE) {
        __syncthreads();
        load_qkv_tile(tile, a, qkv, s.row0, j0, L, 2, h);
        __syncthreads();
        if (active) tile_accumulate<PL>(acc, row + j0, tile, min(TILE, L - j0), lane, d);
    }
    if (active) {
        float *out = ctx + (s.row0 + i) * a.H + (size_t)h * d;
#pragma unroll
        for (int t = 0; t < PL; t++)
            if (lane + WARP * t < d) out[lane + WARP * t] = acc[t];
    }
}

/* ---------------------------------------------------------------- backward */

/* Per query row: dP = dctx V^T, the forward's dropout on it, dS = P (dP - sum(P dP)) scale
 * (the CPU's softmax_backward_rows, P the kept probabilities before dropout) into ds (the
 * probabilities' layout; 16-bit values when half), and dQ = dS K into dqkv's Q part. */
template <int PL>
__global__ static void attention_backward_dq_rows(float *dqkv, float *ds, const float *dctx, const float *qkv,
                                                  const float *probs, Attn a) {
    extern __shared__ float smem[];
    const int b = blockIdx.z, h = blockIdx.y, w = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const Seq s = sequence(a, b);
    const int i0 = blockIdx.x * ROWS, i = i0 + w, d = a.d, L = s.L, block = b * a.A + h;
    if (i0 >= s.rows) return;
    const bool active = i < s.rows;
    float *g_s = smem, *tile = g_s + ROWS * d, *row = tile + TILE * (d + 1) + (size_t)w * a.T;
    for (int e = threadIdx.x; e < ROWS * d; e += blockDim.x) {
        const int r = e / d, c = e % d;
        g_s[e] = i0 + r < s.rows ? operand(a, dctx[(s.row0 + i0 + r) * a.H + (size_t)h * d + c]) : 0.0f;
    }
    for (int j0 = 0; j0 < L; j0 += TILE) {   /* dP = dctx V^T */
        __syncthreads();
        load_qkv_tile(tile, a, qkv, s.row0, j0, L, 2, h);
        __syncthreads();
        const int j = j0 + lane;
        if (active && j < L) row[j] = tile_dot(g_s + w * d, tile, lane, d);
    }
    const size_t at = (size_t)block * a.T * a.T + (size_t)i * L;
    if (active) {
        __syncwarp();
        const float *p = probs + at;
        float dot = 0.0f;
        for (int j = lane; j < L; j += WARP) {
            float g = row[j];
            if (a.dropout) g = kept(a, block, i, j) ? g * a.keep_scale : 0.0f;
            row[j] = g;
            dot += p[j] * g;
        }
        dot = warp_sum(dot);
        for (int j = lane; j < L; j += WARP) {
            const float x = operand(a, p[j] * (row[j] - dot) * a.scale);
            row[j] = x;
            ds[at + j] = x;
        }
        __syncwarp();
    }
    float acc[PL];   /* dQ = dS K */
#pragma unroll
    for (int t = 0; t < PL; t++) acc[t] = 0.0f;
    for (int j0 = 0; j0 < L; j0 += TILE) {
        __syncthreads();
        load_qkv_tile(tile, a, qkv, s.row0, j0, L, 1, h);
        __syncthreads();
        if (active) tile_accumulate<PL>(acc, row + j0, tile, min(TILE, L - j0), lane, d);
    }
    if (active) {
        float *out = dqkv + (s.row0 + i) * 3 * a.H + (size_t)h * d;
#pragma unroll
        for (int t = 0; t < PL; t++)
            if (lane + WARP * t < d) out[lane + WARP * t] = acc[t];
    }
}

/* Shared memory of dkv_rows: dctx and Q tiles [TILE][d + 1], and the tile's dropped
 * probabilities and score gradients for the block's keys [TILE][ROWS]. */
static size_t dkv_shared_bytes(int d) {
    return sizeof(float) * ((size_t)2 * TILE * (d + 1) + (size_t)2 * TILE * ROWS);
}

/* Per key j (one warp): dV[j] = sum_i P_dropped[i, j] dctx[i] and dK[j] = sum_i dS[i, j] Q[i]
 * over the sequence's query rows in order; keys from kv_len on (padding) get 0. */
template <int PL>
__global__ static void attention_backward_dkv_rows(float *dqkv, const float *ds, const float *dctx, const float *qkv,
                                                   const float *probs, Attn a) {
    extern __shared__ float smem[];
    const int b = blockIdx.z, h = blockIdx.y, w = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const Seq s = sequence(a, b);
    const int j0 = blockIdx.x * ROWS, j = j0 + w, d = a.d, L = s.L, block = b * a.A + h;
    if (j0 >= s.rows) return;
    float *g_s = smem, *q_s = g_s + TILE * (d + 1), *pd_s = q_s + TILE * (d + 1), *ds_s = pd_s + TILE * ROWS;
    float acc_v[PL], acc_k[PL];
#pragma unroll
    for (int t = 0; t < PL; t++) acc_v[t] = acc_k[t] = 0.0f;
    const size_t base = (size_t)block * a.T * a.T;
    for (int i0 = 0; j0 < L && i0 < s.rows; i0 += TILE) {   /* blocks of padding keys only: no sums */
        __syncthreads();
        load_qkv_tile(q_s, a, qkv, s.row0, i0, s.rows, 0, h);
        for (int e = threadIdx.x; e < TILE * d; e += blockDim.x) {
            const int r = e / d, c = e % d;
            g_s[r * (d + 1) + c] = i0 + r < s.rows ? operand(a, dctx[(s.row0 + i0 + r) * a.H + (size_t)h * d + c]) : 0.0f;
        }
        for (int e = threadIdx.x; e < TILE * ROWS; e += blockDim.x) {
            const int r = e / ROWS, k = e % ROWS, i = i0 + r, jj = j0 + k;
            float pd = 0.0f, g = 0.0f;
            if (i < s.rows && jj < L) {
                const size_t at = base + (size_t)i * L + jj;
                pd = probs[at];
                if (a.dropout) pd = kept(a, block, i, jj) ? pd * a.keep_scale : 0.0f;
                pd = operand(a, pd);
                g = ds[at];
            }
            pd_s[k * TILE + r] = pd;   /* [ROWS][TILE]: warp k reads its key's column as a row */
            ds_s[k * TILE + r] = g;
        }
        __syncthreads();
        if (j < L) {
            const int n = min(TILE, s.rows - i0);
            tile_accumulate<PL>(acc_v, pd_s + w * TILE, g_s, n, lane, d);
            tile_accumulate<PL>(acc_k, ds_s + w * TILE, q_s, n, lane, d);
        }
    }
    if (j < s.rows) {
        float *dk = dqkv + (s.row0 + j) * 3 * a.H + a.H + (size_t)h * d, *dv = dk + a.H;
#pragma unroll
        for (int t = 0; t < PL; t++) {
            const int c = lane + WARP * t;
            if (c < d) {
                dk[c] = j < L ? acc_k[t] : 0.0f;
                dv[c] = j < L ? acc_v[t] : 0.0f;
            }
        }
    }
}

/* ---------------------------------------------------------------- launches */

static Attn attn_from(const AttentionArgs *a) {
    Attn x;
    x.B = a->B, x.T = a->T, x.A = a->A, x.d = a->d, x.H = a->A * a->d;
    /* stage slots 3..7: this file's */
    x.kv_len = (const int32_t *)cuda_stage(3, a->kv_len, sizeof(int32_t) * a->B);
    x.mask = (const int32_t *)cuda_stage(4, a->mask, sizeof(int32_t) * a->B * a->T);
    x.has_holes = (const uint8_t *)cuda_stage(5, a->has_holes, sizeof(uint8_t) * a->B);
    x.seq_row = (const int32_t *)cuda_stage(6, a->seq_row, sizeof(int32_t) * a->B);
    x.seq_rows = (const int32_t *)cuda_stage(7, a->seq_rows, sizeof(int32_t) * a->B);
    x.qkv16 = a->half ? a->qkv16 : NULL;
    x.scale = 1.0f / sqrtf((float)a->d);
    x.dropout = a->dropout_p > 0.0f;
    x.threshold = rng_dropout_threshold(a->dropout_p);
    x.keep_scale = 1.0f / (1.0f - a->dropout_p);
    x.key = a->dropout_key;
    x.half = a->half;
    x.mode = a->half_mode;
    return x;
}

/* Above 48 KiB of dynamic shared memory a kernel must say so (long sequences, large heads). */
template <typename Kernel>
static void allow_shared(Kernel kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

static bool attention_empty(const AttentionArgs *a, const char *who) {
    if (a->d > D_MAX) {
        fprintf(stderr, "bert: %s: head size %d above the CUDA backend's %d\n", who, a->d, (int)D_MAX);
        exit(1);
    }
    return a->B <= 0 || a->T <= 0 || a->A <= 0 || a->d <= 0;
}

template <int PL>
static void forward_launch(float *ctx, float *probs, const float *qkv, const Attn &x) {
    const dim3 grid((unsigned)((x.T + ROWS - 1) / ROWS), (unsigned)x.A, (unsigned)x.B);
    const size_t bytes = row_kernel_shared_bytes(x.d, x.T);
    allow_shared(attention_forward_rows<PL>, bytes);
    attention_forward_rows<PL><<<grid, ROWS * WARP, bytes>>>(ctx, probs, qkv, x);
    CUDA_LAUNCHED();
}

template <int PL>
static void backward_launch(float *dqkv, float *ds, const float *dctx, const float *qkv, const float *probs,
                            const Attn &x) {
    const dim3 grid((unsigned)((x.T + ROWS - 1) / ROWS), (unsigned)x.A, (unsigned)x.B);
    const size_t rows_bytes = row_kernel_shared_bytes(x.d, x.T), dkv_bytes = dkv_shared_bytes(x.d);
    allow_shared(attention_backward_dq_rows<PL>, rows_bytes);
    allow_shared(attention_backward_dkv_rows<PL>, dkv_bytes);
    attention_backward_dq_rows<PL><<<grid, ROWS * WARP, rows_bytes>>>(dqkv, ds, dctx, qkv, probs, x);
    CUDA_LAUNCHED();
    attention_backward_dkv_rows<PL><<<grid, ROWS * WARP, dkv_bytes>>>(dqkv, ds, dctx, qkv, probs, x);
    CUDA_LAUNCHED();
}

extern "C" void k_attention_forward(float *ctx, float *probs, const float *qkv, const AttentionArgs *a) {
    if (!probs && a->dropout_p > 0.0f) {
        fprintf(stderr, "bert: k_attention_forward: dropout needs the probabilities kept\n");
        exit(1);
    }
    if (attention_empty(a, "k_attention_forward")) return;
    const Attn x = attn_from(a);
    if (x.d <= 32) forward_launch<1>(ctx, probs, qkv, x);
    else if (x.d <= 64) forward_launch<2>(ctx, probs, qkv, x);
    else if (x.d <= 128) forward_launch<4>(ctx, probs, qkv, x);
    else forward_launch<8>(ctx, probs, qkv, x);
}

extern "C" void k_attention_backward(float *dqkv, const float *dctx, const float *qkv, const float *probs,
                                     const AttentionArgs *a) {
    if (attention_empty(a, "k_attention_backward")) return;
    const Attn x = attn_from(a);
    /* dS for every (b, h) block in the probabilities' layout: device scratch slot 2 */
    float *ds = (float *)cuda_scratch(2, sizeof(float) * (size_t)x.B * x.A * x.T * x.T);
    if (x.d <= 32) backward_launch<1>(dqkv, ds, dctx, qkv, probs, x);
    else if (x.d <= 64) backward_launch<2>(dqkv, ds, dctx, qkv, probs, x);
    else if (x.d <= 128) backward_launch<4>(dqkv, ds, dctx, qkv, probs, x);
    else backward_launch<8>(dqkv, ds, dctx, qkv, probs, x);
}
