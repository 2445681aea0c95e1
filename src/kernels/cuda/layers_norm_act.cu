/* The CUDA backend's 16-bit conversions, LayerNorm, activations and dropout (kernels.h), each
 * computing what the CPU backend computes (src/kernels/cpu/layers.c, gemm_half.c):
 *
 * - the 16-bit conversions and dropout are the CPU's integer and float operations, so their
 *   results are the CPU's bits (rounding to nearest even, fp16 overflow from 65520, NaNs made
 *   quiet keeping the top of their payload; the same RNG counters, threshold and scale);
 * - the activations use the same formulas (and constants) in the same order, compiled without
 *   fused multiply-adds (-fmad=false): they differ from the CPU only where CUDA's erff, expf
 *   and tanhf differ from libm's (a few ulp);
 * - LayerNorm's forward is the CPU's bits: a warp per row, the row's sums in the CPU's order
 *   (64 interleaved lanes, then its tree, as shuffles); the backward's row dots are in float as
 *   the CPU's, a warp per row (32 strided partial sums and a shuffle butterfly: another order
 *   than the CPU's vectorised loop, so a few ulp apart); column sums over rows (parameter
 *   gradients) are deterministic: fixed row blocks summed in order, then the blocks in order,
 *   never atomics.
 *   k_gelu_backward_half_out16's bias gradient keeps the CPU's exact order (16 row slices).
 *
 * Scratch: cuda_stage slot 0 (dropout rows), cuda_scratch slot 0 (column partial sums). */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/half_bits.cuh"
#include "kernels/cuda/ordered_sum.cuh"

extern "C" {
#include "core/rng.h"
#include "kernels/kernels.h"
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)

/* ---------------------------------------------------------------- 16-bit formats */

/* The two bf16 modes are one format (kernels.h). */
__device__ static uint16_t half_from_float(int mode, float f) {
    return mode == HALF_FP16 ? fp16_from_float_bits(f) : bf16_from_float_bits(f);
}
__device__ static float float_from_half(int mode, uint16_t h) {
    return mode == HALF_FP16 ? float_from_fp16_bits(h) : float_from_bf16_bits(h);
}

__global__ static void to_half(int mode, uint16_t *dst, const float *src, long n) {
    GRID_STRIDE(i, n) dst[i] = half_from_float(mode, src[i]);
}
/* Four values a thread: one 16-byte load, one 8-byte store (the same conversion of each). */
__global__ static void to_half4(int mode, uint2 *dst, const float4 *src, long n4) {
    GRID_STRIDE(i, n4) {
        const float4 v = src[i];
        dst[i] = make_uint2((uint32_t)half_from_float(mode, v.x) | (uint32_t)half_from_float(mode, v.y) << 16,
                            (uint32_t)half_from_float(mode, v.z) | (uint32_t)half_from_float(mode, v.w) << 16);
    }
}
__global__ static void from_half(int mode, float *dst, const uint16_t *src, long n) {
    GRID_STRIDE(i, n) dst[i] = float_from_half(mode, src[i]);
}

/* Every product rounds its input or its gradient: a pass over a whole activation, so four
 * values a thread where the arrays' alignment allows, the tail (or all) one at a time. */
extern "C" void k_to_half(HalfMode mode, uint16_t *dst, const float *src, long n) {
    if (n <= 0) return;
    const long n4 = (uintptr_t)src % 16 == 0 && (uintptr_t)dst % 8 == 0 ? n / 4 : 0;
    if (n4 > 0) {
        to_half4<<<cuda_blocks((size_t)n4), CUDA_THREADS>>>((int)mode, (uint2 *)dst, (const float4 *)src, n4);
        CUDA_LAUNCHED();
    }
    if (n > 4 * n4) {
        to_half<<<cuda_blocks((size_t)(n - 4 * n4)), CUDA_THREADS>>>((int)mode, dst + 4 * n4, src + 4 * n4, n - 4 * n4);
        CUDA_LAUNCHED();
    }
}
extern "C" void k_from_half(HalfMode mode, float *dst, const uint16_t *src, long n) {
    if (n <= 0) return;
    from_half<<<cuda_blocks((size_t)n), CUDA_THREADS>>>((int)mode, dst, src, n);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- layernorm */

enum { WARP = 32, ROWS_PER_BLOCK = CUDA_THREADS / WARP };

/* The warp's sum, the same bits in every lane: each butterfly step adds a lane's value and its
 * partner's, and the partner adds the same two (float addition commutes). */
__device__ static float warp_sum(float v) {
    for (int k = WARP / 2; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
    return v;
}

/* A KDropout on the device: the mask's parameters as the CPU computes them (see dropout below)
 * and the rows staged; on = false: no dropout. */
struct DeviceDropout {
    bool on;
    uint32_t threshold;
    float scale;
    uint64_t key;
    const int32_t *rows;   /* device; NULL: row n's own mask */
};
static DeviceDropout device_dropout(const KDropout *drop, int N) {
    DeviceDropout d = {};
    if (!drop || drop->p <= 0.0f || N <= 0) return d;
    d.on = true, d.threshold = rng_dropout_threshold(drop->p), d.scale = 1.0f / (1.0f - drop->p), d.key = drop->key;
    if (drop->rows) d.rows = (const int32_t *)cuda_stage(0, drop->rows, sizeof(int32_t) * (size_t)N);
    return d;
}
/* x through the dropout at counter: the kept value scaled, or 0 (every dropout's element, as
 * the CPU's). */
__device__ static float dropped_at(const DeviceDropout &d, uint32_t counter, float x) {
    return rng_bits32(d.key, counter) >= d.threshold ? x * d.scale : 0.0f;
}
/* The first counter of row n's mask: row n of the whole tensor, or row rows[n] (k_dropout_rows'
 * counters). A row kernel takes it once, before its stores (which, as far as the compiler
 * knows, could change rows[n]: read per element, it was a dependent load after each store). */
__device__ static uint32_t row_counter0(const DeviceDropout &d, int n, int C) {
    return (uint32_t)((size_t)(d.rows ? d.rows[n] : n) * C);
}
/* Element c of row n. */
__device__ static float dropped(const DeviceDropout &d, int n, int C, int c, float x) {
    return dropped_at(d, row_counter0(d, n, C) + (uint32_t)c, x);
}

/* A row's sum in the CPU's order (kernels/cpu/layernorm_row.h's ln_sum): value c into lane
 * c mod 64, each lane in order from 0, the 64 lanes then added as its tree. Warp lane i keeps
 * the CPU's lanes i (lo) and i + 32 (hi); the tree's steps are xor shuffles, in which lane j and
 * its partner add the same two values (addition commutes): every lane ends with the CPU's bits.
 * (t[j] = (L[j] + L[16 + j]) + (L[32 + j] + L[48 + j]), then t[j] + t[j + w] for w = 8, 4, 2,
 * then t[0] + t[1].) */
__device__ static float cpu_lanes_total(float lo, float hi) {
    float t = (lo + __shfl_xor_sync(0xffffffffu, lo, 16)) + (hi + __shfl_xor_sync(0xffffffffu, hi, 16));
    for (int k = 8; k > 0; k >>= 1) t += __shfl_xor_sync(0xffffffffu, t, k);
    return t;
}

/* The row's value c of the LayerNorm's input from xc = a[c] and rc = residual[c] (read when
 * r is not NULL): a[c] through the dropout, plus the residual, stored into sum (NULL: a[c]
 * itself). */
__device__ static float ln_input(const DeviceDropout &drop, uint32_t counter0, int c, float xc, const float *r,
                                 float rc, float *sum) {
    if (!sum) return xc;
    const float kept = drop.on ? dropped_at(drop, counter0 + (uint32_t)c, xc) : xc;
    const float v = r ? kept + rc : kept;
    sum[c] = v;
    return v;
}
/* y = (x - mean) rstd w + b (layernorm_row's operations, in its order), into out and, unless
 * out16 is NULL, rounded into out16. */
__device__ static void ln_store(float *out, uint16_t *out16, int mode, int c, float x, float m, float rs, float wc,
                                float bc) {
    const float y = (x - m) * rs * wc + bc;
    out[c] = y;
    if (out16) out16[c] = half_from_float(mode, y);
}

/* One warp per row, the row held in registers (the CPU lane's values c = 64 k + i and
 * 64 k + 32 + i, k < K, so C <= 64 K; the row's a and residual values all loaded before the
 * first store into sum_out, which may be a): the dropout and the residual add (into sum_out),
 * the mean, the two-pass variance and the output, with layernorm_row's float operations and
 * sums in its order (cpu_lanes_total): the CPU's bits. K = 0: any C, the row read from memory
 * each pass (each lane its own elements, read before it writes them). */
template <int K>
__global__ static void layernorm_forward(float *out, uint16_t *out16, int mode, float *sum_out, float *mean,
                                         float *rstd, const float *a, DeviceDropout drop, const float *residual,
                                         const float *w, const float *b, int N, int C, float eps) {
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;   /* the whole warp */
    const size_t at = (size_t)row * C;
    const float *x = a + at, *r = residual ? residual + at : NULL;
    float *sum = residual || drop.on ? sum_out + at : NULL;
    float *y = out + at;
    uint16_t *y16 = out16 ? out16 + at : NULL;
    const int n = K ? 2 * K : 2 * ((C + 63) / 64);   /* the lane's values, c = 32 j + lane (j even: lo) */
    float v[K ? 2 * K : 1], rv[K ? 2 * K : 1];       /* (K = 0: unused) */
    const uint32_t counter0 = drop.on ? row_counter0(drop, row, C) : 0;
#pragma unroll
    for (int j = 0; j < (K ? n : 0); j++) {
        const int c = 32 * j + lane, s = K ? j : 0;
        if (c < C) v[s] = x[c], rv[s] = r ? r[c] : 0.0f;
    }
    float lo = 0.0f, hi = 0.0f;
#pragma unroll
    for (int j = 0; j < n; j++) {
        const int c = 32 * j + lane, s = K ? j : 0;
        if (c >= C) break;
        const float value = K ? ln_input(drop, counter0, c, v[s], r, rv[s], sum)
                              : ln_input(drop, counter0, c, x[c], r, r ? r[c] : 0.0f, sum);
        if (K) v[s] = value;
        if (j % 2 == 0) lo += value;
        else hi += value;
    }
    const float m = cpu_lanes_total(lo, hi) / (float)C;
    if (sum) x = sum;   /* K = 0 reads it back: the lane's own stores */
    float wv[K ? 2 * K : 1], bv[K ? 2 * K : 1];   /* w and b, in flight while the variance is summed */
#pragma unroll
    for (int j = 0; j < (K ? n : 0); j++) {
        const int c = 32 * j + lane, s = K ? j : 0;
        if (c < C) wv[s] = w[c], bv[s] = b[c];
    }
    lo = 0.0f, hi = 0.0f;   /* two-pass variance, as the CPU */
#pragma unroll
    for (int j = 0; j < n; j++) {
        const int c = 32 * j + lane, s = K ? j : 0;
        if (c >= C) break;
        const float d = (K ? v[s] : x[c]) - m;
        if (j % 2 == 0) lo += d * d;
        else hi += d * d;
    }
    const float rs = 1.0f / sqrtf(cpu_lanes_total(lo, hi) / (float)C + eps);
#pragma unroll
    for (int j = 0; j < n; j++) {
        const int c = 32 * j + lane, s = K ? j : 0;
        if (c >= C) break;
        ln_store(y, y16, mode, c, K ? v[s] : x[c], m, rs, K ? wv[s] : w[c], K ? bv[s] : b[c]);
    }
    if (lane == 0) mean[row] = m, rstd[row] = rs;
}

/* The row kernels' instances by the row's width C (width_class): rows of up to 128, 256, 512, 768
 * and 1024 values held in registers (BERT's widths), wider ones read from memory (K = 0). */
static int width_class(int C) { return C <= 128 ? 0 : C <= 256 ? 1 : C <= 512 ? 2 : C <= 768 ? 3 : C <= 1024 ? 4 : 5; }
static decltype(&layernorm_forward<0>) const LN_FORWARD[] = {layernorm_forward<2>,  layernorm_forward<4>,
                                                             layernorm_forward<8>,  layernorm_forward<12>,
                                                             layernorm_forward<16>, layernorm_forward<0>};

extern "C" void k_dropout_layernorm_forward_to(float *out, uint16_t *out16, HalfMode mode, float *sum_out, float *mean,
                                               float *rstd, const float *a, const KDropout *drop,
                                               const float *residual, const float *w, const float *b, int N, int C,
                                               float eps) {
    if (N <= 0) return;
    const DeviceDropout d = device_dropout(drop, N);
    if (d.on && !sum_out) {
        fprintf(stderr, "bert: k_dropout_layernorm_forward_to: dropout needs sum_out\n");
        exit(1);
    }
    const auto kernel = LN_FORWARD[width_class(C)];
    kernel<<<(unsigned)((N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK), CUDA_THREADS>>>(
        out, out16, (int)mode, sum_out, mean, rstd, a, d, residual, w, b, N, C, eps);
    CUDA_LAUNCHED();
}

extern "C" void k_layernorm_forward(float *out, float *sum_out, float *mean, float *rstd, const float *a,
                                    const float *residual, const float *w, const float *b, int N, int C, float eps) {
    k_dropout_layernorm_forward_to(out, NULL, HALF_BF16, sum_out, mean, rstd, a, NULL, residual, w, b, N, C, eps);
}

/* dw and db are column sums over N rows: COL_ROWS rows at a time into partials (one thread per
 * column, rows in order), then the partials added in block order. The same bits on every run.
 * (More rows per block only past 65535 blocks, the grid's y limit: N > 2M rows.) */
enum { COL_ROWS = 32, MAX_GRID_Y = 65535 };

__global__ static void layernorm_column_partials(float *partial_w, float *partial_b, const float *dout,
                                                 const float *inp, const float *mean, const float *rstd, int N,
                                                 int C, int rows_per_block) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, blk = blockIdx.y;
    if (c >= C) return;
    const int n0 = blk * rows_per_block, n1 = N - n0 > rows_per_block ? n0 + rows_per_block : N;
    float aw = 0.0f, ab = 0.0f;
    for (int n = n0; n < n1; n++) {
        const size_t at = (size_t)n * C + c;
        const float dy = dout[at];
        aw += dy * (inp[at] - mean[n]) * rstd[n];   /* the CPU's term */
        ab += dy;
    }
    partial_w[(size_t)blk * C + c] = aw;
    partial_b[(size_t)blk * C + c] = ab;
}

/* blockIdx.y 0: dw's partials, 1: db's (a thread each: twice the loads in flight); 2 C threads
 * in all, so a warp a block (spread over the SMs) and 64 partials fetched ahead (N / 32 of them:
 * 256 at 64 x 128 rows) */
__global__ static void add_column_partials(float *dw, float *db, const float *partial_w, const float *partial_b,
                                           int blocks, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const float *partial = blockIdx.y == 0 ? partial_w : partial_b;
    float *sum = blockIdx.y == 0 ? dw : db;
    sum[c] += ordered_sum<64>(0.0f, 0, blocks, [&](int blk) { return partial[(size_t)blk * C + c]; });
}

/* One warp per row: dinp = rs (dy w - mean(g) - xhat mean(g xhat)), g = dy w, as the CPU, and
 * dinp_dropped (unless NULL) = dinp through the dropout (a copy when it is off). The lane's
 * values c = 32 j + lane in order, then the butterfly (warp_sum). K > 0: C <= 32 K, g and x - m
 * held in registers, every load of the row issued before the sums need them; K = 0: any C,
 * the row read twice from memory; the same operations either way, the same bits. */
template <int K>
__global__ static void layernorm_backward_rows(float *dinp, float *dinp_dropped, DeviceDropout drop,
                                               const float *dout, const float *inp, const float *mean,
                                               const float *rstd, const float *w, int N, int C) {
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    const float m = mean[row], rs = rstd[row];
    const uint32_t counter0 = drop.on ? row_counter0(drop, row, C) : 0;
    const int n = K ? K : (C + WARP - 1) / WARP;
    /* the row's dy, x and w, loaded first (a loop of loads alone: the compiler keeps them
     * ahead, where mixed with the sums it issued three and waited), then g and x - m in
     * their place */
    float g_at[K ? K : 1], d_at[K ? K : 1], w_at[K ? K : 1];
#pragma unroll
    for (int j = 0; j < (K ? n : 0); j++) {
        const int c = WARP * j + lane, s = K ? j : 0;
        if (c < C) g_at[s] = dy[c], d_at[s] = x[c], w_at[s] = w[c];
    }
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
    for (int j = 0; j < n; j++) {
        const int c = WARP * j + lane, s = K ? j : 0;
        if (c >= C) break;
        const float g = K ? g_at[s] * w_at[s] : dy[c] * w[c], d = (K ? d_at[s] : x[c]) - m;
        if (K) g_at[s] = g, d_at[s] = d;
        sum_g += g;
        sum_gx += g * d * rs;
    }
    sum_g = warp_sum(sum_g) / (float)C;
    sum_gx = warp_sum(sum_gx) / (float)C;
    float *dx = dinp + (size_t)row * C;
    float *dd = dinp_dropped ? dinp_dropped + (size_t)row * C : NULL;
#pragma unroll
    for (int j = 0; j < n; j++) {
        const int c = WARP * j + lane, s = K ? j : 0;
        if (c >= C) break;
        const float g = K ? g_at[s] : dy[c] * w[c], d = K ? d_at[s] : x[c] - m;
        const float v = rs * (g - sum_g - d * rs * sum_gx);
        dx[c] = v;
        if (dd) dd[c] = drop.on ? dropped_at(drop, counter0 + (uint32_t)c, v) : v;
    }
}

static decltype(&layernorm_backward_rows<0>) const LN_BACKWARD_ROWS[] = {
    layernorm_backward_rows<4>,  layernorm_backward_rows<8>,  layernorm_backward_rows<16>,
    layernorm_backward_rows<24>, layernorm_backward_rows<32>, layernorm_backward_rows<0>};

extern "C" void k_layernorm_dropout_backward(float *dinp, float *dinp_dropped, const KDropout *drop, float *dw,
                                             float *db, const float *dout, const float *inp, const float *mean,
                                             const float *rstd, const float *w, int N, int C) {
    if (N <= 0 || C <= 0) return;
    /* the column sums first: they read dout before dinp is written (robust should the two alias) */
    const int rows_per_block = N > MAX_GRID_Y * COL_ROWS ? (N + MAX_GRID_Y - 1) / MAX_GRID_Y : COL_ROWS;
    const int blocks = (N + rows_per_block - 1) / rows_per_block;
    float *partial_w = (float *)cuda_scratch(0, sizeof(float) * 2 * (size_t)blocks * C);
    float *partial_b = partial_w + (size_t)blocks * C;
    const unsigned col_blocks = (unsigned)((C + CUDA_THREADS - 1) / CUDA_THREADS);
    layernorm_column_partials<<<dim3(col_blocks, (unsigned)blocks), CUDA_THREADS>>>(partial_w, partial_b, dout, inp,
                                                                                   mean, rstd, N, C, rows_per_block);
    CUDA_LAUNCHED();
    add_column_partials<<<dim3((unsigned)((C + WARP - 1) / WARP), 2), WARP>>>(dw, db, partial_w, partial_b, blocks, C);
    CUDA_LAUNCHED();
    const DeviceDropout d = dinp_dropped ? device_dropout(drop, N) : DeviceDropout{};
    const auto rows = LN_BACKWARD_ROWS[width_class(C)];
    rows<<<(unsigned)((N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK), CUDA_THREADS>>>(dinp, dinp_dropped, d, dout, inp,
                                                                                mean, rstd, w, N, C);
    CUDA_LAUNCHED();
}

extern "C" void k_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                     const float *mean, const float *rstd, const float *w, int N, int C) {
    k_layernorm_dropout_backward(dinp, NULL, NULL, dw, db, dout, inp, mean, rstd, w, N, C);
}

/* ---------------------------------------------------------------- activations */

/* layers.c's constants and formulas, operation for operation. */
#define GELU_TANH_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_TANH_K1 0.044715f
#define INV_SQRT2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

__device__ static float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * INV_SQRT2)); }
__device__ static float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_TANH_K0 * (x + GELU_TANH_K1 * x * x * x)));
}
__device__ static float gelu_erf_slope(float x) {
    const float cdf = 0.5f * (1.0f + erff(x * INV_SQRT2));
    const float pdf = INV_SQRT_2PI * expf(-0.5f * x * x);
    return cdf + x * pdf;
}
__device__ static float gelu_tanh_slope(float x) {
    const float t = tanhf(GELU_TANH_K0 * (x + GELU_TANH_K1 * x * x * x));
    const float dinner = GELU_TANH_K0 * (1.0f + 3.0f * GELU_TANH_K1 * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}
/* Activation kinds (kernels/activation.h): ACT_GELU exact; every other (ACT_GELU_NEW) the tanh
 * form, as layers.c's `act == ACT_GELU ? ... : ...`. */
__device__ static float activation(int act, float x) { return act == ACT_GELU ? gelu_erf(x) : gelu_tanh(x); }
__device__ static float activation_slope(int act, float x) {
    return act == ACT_GELU ? gelu_erf_slope(x) : gelu_tanh_slope(x);
}

__global__ static void gelu_forward(float *out, const float *inp, long n, int act) {
    GRID_STRIDE(i, n) out[i] = activation(act, inp[i]);
}
__global__ static void gelu_backward(float *dinp, const float *dout, const float *inp, long n, int act) {
    GRID_STRIDE(i, n) dinp[i] = dout[i] * activation_slope(act, inp[i]);   /* dinp may be dout: read first */
}
__global__ static void gelu_forward_half(uint16_t *out16, const uint16_t *inp16, long n, int act, int mode) {
    GRID_STRIDE(i, n) out16[i] = half_from_float(mode, activation(act, float_from_half(mode, inp16[i])));
}
/* Eight values a thread through 16-byte loads and stores: the same operations on each value
 * (the same bits), the activation's eight evaluations independent of one another. */
union Half8 {
    uint4 v;
    uint16_t h[8];
};
__global__ static void gelu_forward_half8(uint4 *out16, const uint4 *inp16, long n8, int act, int mode) {
    GRID_STRIDE(i, n8) {
        Half8 x;
        x.v = inp16[i];
#pragma unroll
        for (int j = 0; j < 8; j++) x.h[j] = half_from_float(mode, activation(act, float_from_half(mode, x.h[j])));
        out16[i] = x.v;
    }
}

extern "C" void k_gelu_forward(float *out, const float *inp, long n, Activation act) {
    if (n <= 0) return;
    gelu_forward<<<cuda_blocks((size_t)n), CUDA_THREADS>>>(out, inp, n, (int)act);
    CUDA_LAUNCHED();
}
extern "C" void k_gelu_backward(float *dinp, const float *dout, const float *inp, long n, Activation act) {
    if (n <= 0) return;
    gelu_backward<<<cuda_blocks((size_t)n), CUDA_THREADS>>>(dinp, dout, inp, n, (int)act);
    CUDA_LAUNCHED();
}
/* The feed-forward's activation over [N, 4H]: eight values a thread where both arrays are
 * 16-byte aligned (run 3: 96 us a bert-base batch one value a thread, a third of the memory's
 * rate), the tail (or all) one at a time. out16 may be inp16. */
extern "C" void k_gelu_forward_half(uint16_t *out16, const uint16_t *inp16, long n, Activation act, HalfMode mode) {
    if (n <= 0) return;
    const long n8 = ((uintptr_t)out16 | (uintptr_t)inp16) % 16 == 0 ? n / 8 : 0;
    if (n8 > 0) {
        gelu_forward_half8<<<cuda_blocks((size_t)n8), CUDA_THREADS>>>((uint4 *)out16, (const uint4 *)inp16, n8,
                                                                       (int)act, (int)mode);
        CUDA_LAUNCHED();
    }
    if (n > 8 * n8) {
        gelu_forward_half<<<cuda_blocks((size_t)(n - 8 * n8)), CUDA_THREADS>>>(out16 + 8 * n8, inp16 + 8 * n8,
                                                                               n - 8 * n8, (int)act, (int)mode);
        CUDA_LAUNCHED();
    }
}

/* The CPU's (and k_matmul_backward_half's) bias-gradient order (ordered_sum.cuh, ROW_SLICES): one
 * thread per (slice, column) keeps it exactly, so the bias gradient differs from the CPU's only
 * through the elements' values (erff/expf/tanhf's last bits). */
enum { SLICE_THREADS = 128 };

__global__ static void gelu_backward_half_slices(uint16_t *dinp16, float *partial, const float *dout,
                                                 const uint16_t *inp16, int N, int C, int act, int mode) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, slice = blockIdx.y;
    if (c >= C) return;
    struct Loaded {
        float dy;
        uint16_t x;
    };
    const float acc = ordered_sum(
        0.0f, slice_row(N, slice, ROW_SLICES), slice_row(N, slice + 1, ROW_SLICES),
        [&](int n) { return Loaded{dout[(size_t)n * C + c], inp16[(size_t)n * C + c]}; },
        [&](int n, Loaded l) {
            const float d = l.dy * activation_slope(act, float_from_half(mode, l.x));
            dinp16[(size_t)n * C + c] = half_from_float(mode, d);
            return d;
        });
    if (partial) partial[(size_t)slice * C + c] = acc;
}

extern "C" void k_gelu_backward_half_out16(uint16_t *dinp16, float *dbias, const float *dout, const uint16_t *inp16,
                                           int N, int C, Activation act, HalfMode mode) {
    if (N <= 0 || C <= 0) return;
    float *partial = dbias ? (float *)cuda_scratch(0, sizeof(float) * ROW_SLICES * (size_t)C) : NULL;
    const unsigned col_blocks = (unsigned)((C + SLICE_THREADS - 1) / SLICE_THREADS);
    gelu_backward_half_slices<<<dim3(col_blocks, ROW_SLICES), SLICE_THREADS>>>(dinp16, partial, dout, inp16, N, C,
                                                                               (int)act, (int)mode);
    CUDA_LAUNCHED();
    if (!dbias) return;
    add_slice_sums<<<col_blocks, SLICE_THREADS>>>(dbias, partial, C, ROW_SLICES);
    CUDA_LAUNCHED();
}

__global__ static void tanh_forward(float *x, long n) { GRID_STRIDE(i, n) x[i] = tanhf(x[i]); }
__global__ static void tanh_backward(float *dinp, const float *dout, const float *y, long n) {
    GRID_STRIDE(i, n) dinp[i] = dout[i] * (1.0f - y[i] * y[i]);   /* may alias: each element read, then written */
}

extern "C" void k_tanh_forward(float *x, long n) {
    if (n <= 0) return;
    tanh_forward<<<cuda_blocks((size_t)n), CUDA_THREADS>>>(x, n);
    CUDA_LAUNCHED();
}
extern "C" void k_tanh_backward(float *dinp, const float *dout, const float *y, long n) {
    if (n <= 0) return;
    tanh_backward<<<cuda_blocks((size_t)n), CUDA_THREADS>>>(dinp, dout, y, n);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- dropout */

/* The threshold and scale are computed on the host exactly as the CPU computes them (the same
 * double product, the same float division: device_dropout), so masks and kept values are the
 * CPU's bits. */
__global__ static void dropout(float *x, long n, DeviceDropout d, uint32_t counter0) {
    GRID_STRIDE(i, n) x[i] = dropped_at(d, counter0 + (uint32_t)i, x[i]);
}

__global__ static void dropout_rows(float *x, int R, int C, DeviceDropout d) {
    GRID_STRIDE(i, (size_t)R * C) x[i] = dropped(d, (int)(i / (size_t)C), C, (int)(i % (size_t)C), x[i]);
}

extern "C" void k_dropout(float *x, long n, float p, uint64_t key, uint32_t counter0) {
    const KDropout drop = {p, key, NULL};
    const DeviceDropout d = device_dropout(&drop, n > 0 ? 1 : 0);   /* no rows to stage: 1 says "not empty" */
    if (!d.on) return;
    dropout<<<cuda_blocks((size_t)n), CUDA_THREADS>>>(x, n, d, counter0);
    CUDA_LAUNCHED();
}

extern "C" void k_dropout_rows(float *x, const int32_t *rows, int R, int C, float p, uint64_t key) {
    const KDropout drop = {p, key, rows};
    const DeviceDropout d = C > 0 ? device_dropout(&drop, R) : DeviceDropout{};   /* rows staged */
    if (!d.on) return;
    dropout_rows<<<cuda_blocks((size_t)R * C), CUDA_THREADS>>>(x, R, C, d);
    CUDA_LAUNCHED();
}
