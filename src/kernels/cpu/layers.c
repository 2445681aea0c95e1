/* CPU backend of kernels.h: matrix products through sgemm.h (oneDNN or OpenBLAS),
 * everything else as plain loops that GCC vectorises, split over OpenMP threads.
 *
 * Reductions over rows (bias and LayerNorm gradients, embedding scatter) are split by
 * column blocks, each thread summing whole columns in row order, so the result is the same
 * for any thread count. */
#include "kernels/cpu/cpu_names.h"   /* first: this file defines the CPU backend's cpu_k_* */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_half.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/layernorm_row.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/vec16.h"

/* glibc's vector math library (libmvec, pulled in by -lm) has AVX2 versions of these;
 * declaring them SIMD-callable lets the vectoriser use them without -ffast-math, which
 * math.h would otherwise require. Accuracy stays within a few ulp. */
float expf(float) __attribute__((simd("notinbranch")));
float erff(float) __attribute__((simd("notinbranch")));
float tanhf(float) __attribute__((simd("notinbranch")));

enum { COL_BLOCK = 64 };
/* Work (elements or multiply-adds) below which a loop runs on the calling thread: an
 * OpenMP region costs a fork and a barrier, which is more than the loop itself for the
 * pooler/NSP-sized calls, and much more when another process holds a core. */
#define PARALLEL_MIN_WORK 32768L

/* ---------------------------------------------------------------- matmul */

/* On exactly two threads, independent single-threaded sgemm calls, one per thread (both
 * libraries go single-threaded inside a parallel region), run at ~190-200 GFLOP/s on BERT's
 * shapes with OpenBLAS, where one call split two ways by OpenBLAS reaches ~150-185: its
 * threads synchronise on shared packed panels (with oneDNN the two are about level). Each call computes whole output elements with the
 * single-threaded blocking, so the results are the 1-thread results bit for bit. */
static bool split_over_two_threads(long multiply_adds) {
    /* below ~4M multiply-adds (~40 us on one core) a fork and a barrier cost too much */
    return omp_get_max_threads() == 2 && multiply_adds >= (1L << 22);
}

/* The block out[n0:n1, o0:o1] = inp[n0:n1] @ weight[o0:o1]^T + bias[o0:o1]. */
static void matmul_forward_block(float *out, const float *inp, const float *weight, const float *bias, int n0, int n1,
                                 int o0, int o1, int C, int OC) {
    if (n1 <= n0 || o1 <= o0) return;
    float *dst = out + (size_t)n0 * OC + o0;
    if (bias)
        for (int n = 0; n < n1 - n0; n++) memcpy(dst + (size_t)n * OC, bias + o0, sizeof(float) * (o1 - o0));
    sgemm(false, true, n1 - n0, o1 - o0, C, 1.0f, inp + (size_t)n0 * C, C,
                weight + (size_t)o0 * C, C, bias ? 1.0f : 0.0f, dst, OC);
}

void k_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    if (!split_over_two_threads((long)N * C * OC)) {
        matmul_forward_block(out, inp, weight, bias, 0, N, 0, OC, C, OC);
        return;
    }
    /* Halve the longer side of out: each thread packs all of the other operand, so that one
     * should be the smaller (the MLM decoder's 30522-row weight is not read twice). */
    const bool by_rows = N >= OC;
#pragma omp parallel num_threads(2)
    {
        int half = omp_get_thread_num(), len = by_rows ? N : OC, a = half ? len / 2 : 0, b = half ? len : len / 2;
        if (by_rows) matmul_forward_block(out, inp, weight, bias, a, b, 0, OC, C, OC);
        else matmul_forward_block(out, inp, weight, bias, 0, N, a, b, C, OC);
    }
}

/* db[o] += sum_n dout[n, o], by column blocks (deterministic). */
static void column_sums_accumulate(float *restrict db, const float *restrict dout, int N, int OC) {
    int nblocks = (OC + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * OC >= PARALLEL_MIN_WORK)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * COL_BLOCK, c1 = c0 + COL_BLOCK < OC ? c0 + COL_BLOCK : OC;
        float acc[COL_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *row = dout + (size_t)n * OC;
            for (int c = c0; c < c1; c++) acc[c - c0] += row[c];
        }
        for (int c = c0; c < c1; c++) db[c] += acc[c - c0];
    }
}

void k_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                       const float *weight, int N, int C, int OC, bool accumulate_dinp) {
    /* The two products have the same FLOPs: on two threads, one each (see above). */
    const bool side_by_side = dinp && split_over_two_threads((long)N * C * OC);
#pragma omp parallel sections num_threads(2) if (side_by_side)
    {
#pragma omp section
        if (dinp)
            sgemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C,
                        accumulate_dinp ? 1.0f : 0.0f, dinp, C);
#pragma omp section
        sgemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    }
    if (dbias) column_sums_accumulate(dbias, dout, N, OC);
}

/* ---------------------------------------------------------------- matmul, bf16 */

void k_to_half(HalfMode mode, uint16_t *dst, const float *src, long n) { halves_from_floats(mode, dst, src, n); }
void k_from_half(HalfMode mode, float *dst, const uint16_t *src, long n) { floats_from_halves(mode, dst, src, n); }
void k_to_half_each(HalfMode mode, uint16_t *const *dst, const float *const *src, const size_t *n, int count) {
    for (int i = 0; i < count; i++) halves_from_floats(mode, dst[i], src[i], (long)n[i]);
}
bool k_bf16_native_available(void) { return gemm_bf16_native_available(); }
void k_bf16_describe(char *out, size_t n) { gemm_bf16_describe(out, n); }
bool k_set_tf32(bool on) { return !on; }   /* no TF32 on the CPU: its fp32 products are fp32 */

/* oneDNN splits each product over the threads itself (no two-way split as above). */
bool k_matmul_forward_half(float *out, const float *inp, uint16_t *inp16, const uint16_t *weight, const void *packed,
                           const float *bias, int N, int C, int OC, HalfMode mode) {
    if (inp) halves_from_floats(mode, inp16, inp, (long)N * C);
    if (packed && mode == HALF_BF16 && gemm_packed(false, N, OC, C, inp16, C, packed, bias, out, OC)) return true;
    if (!weight) return false;
    gemm_half(mode, false, true, N, OC, C, inp16, C, weight, C, bias, 0.0f, out, OC);
    return true;
}

bool k_matmul_forward_half_out16(uint16_t *out16, float *out, const float *inp, uint16_t *inp16, const uint16_t *weight,
                                 const void *packed, const float *bias, int N, int C, int OC, HalfMode mode) {
    if (inp) halves_from_floats(mode, inp16, inp, (long)N * C);
    if (packed && mode == HALF_BF16 &&
        gemm_packed_post(false, N, OC, C, inp16, C, packed, bias, GEMM_POST_NONE, out16, true, OC))
        return true;
    /* else the product in fp32 into out, rounded after: on the packed weight where it runs */
    if (!k_matmul_forward_half(out, NULL, inp16, weight, packed, bias, N, C, OC, mode)) return false;
    halves_from_floats(mode, out16, out, (long)N * OC);
    return true;
}

size_t k_packed_weight_bytes(HalfMode mode, int C, int OC) {
    return mode == HALF_BF16 ? gemm_packed_bytes(false, C, OC) : 0;
}

void k_pack_weight(HalfMode mode, void *packed, const uint16_t *weight, int C, int OC) {
    if (mode != HALF_BF16) die("k_pack_weight: only native bf16 weights are packed");
    gemm_pack(false, packed, weight, C, OC);
}

static GemmPost gemm_post(Activation act) { return act == ACT_GELU ? GEMM_POST_GELU_ERF : GEMM_POST_GELU_TANH; }

bool k_matmul_gelu_forward_packed(float *out, const float *inp, const void *packed, const float *bias, int N, int C,
                                  int OC, Activation act) {
    return gemm_packed_post(true, N, OC, C, inp, C, packed, bias, gemm_post(act), out, false, OC);
}

bool k_matmul_gelu_forward_half_packed(uint16_t *out16, const float *inp, uint16_t *inp16, const void *packed,
                                       const float *bias, int N, int C, int OC, Activation act) {
    if (inp) halves_from_floats(HALF_BF16, inp16, inp, (long)N * C);
    return gemm_packed_post(false, N, OC, C, inp16, C, packed, bias, gemm_post(act), out16, true, OC);
}

/* ---------------------------------------------------------------- matmul, int8 */

int k_int8_support(void) { return gemm_int8_support(); }
void k_int8_describe(char *out, size_t n) { gemm_int8_describe(out, n); }
void k_int8_product_counters(double *thread_seconds, double *ops, bool reset) {
    gemm_int8_product_counters(thread_seconds, ops, reset);
}
size_t k_packed_weight_bytes_int8(int C, int OC) { return gemm_int8_packed_bytes(C, OC); }
void k_pack_weight_int8(void *packed, const float *weight, const KInt8Smoothing *smooth, int C, int OC) {
    float *t = smooth ? xmalloc(sizeof(float) * (size_t)C) : NULL;
    if (smooth) {
        const int row0 = smooth->rows ? smooth->row0 : 0, rows = smooth->rows ? smooth->rows : OC;
        if (row0 < 0 || rows < 0 || row0 + rows > OC) die("k_pack_weight_int8: rows %d..%d of %d", row0, row0 + rows, OC);
        gemm_int8_smoothing(t, smooth->ln_w, smooth->ln_b, weight + (size_t)row0 * C, C, rows);
    }
    gemm_int8_pack(packed, weight, C, OC, t);
    free(t);
}
const float *k_int8_smoothing(const void *packed) { return packed ? gemm_int8_weight_smoothing(packed) : NULL; }

void k_matmul_forward_int8(float *out, const float *inp, const void *packed, const float *bias, int N, int C, int OC,
                           bool gelu, Activation act) {
    gemm_int8_forward(N, OC, C, inp, packed, bias, !gelu ? 0 : act == ACT_GELU ? 1 : 2, out);
}

void k_quantize_rows_int8(int8_t *q, float *scale, const float *x, const float *smooth, int N, int C) {
    quantize_rows_s8_smoothed(q, scale, x, smooth, N, C);
}

void k_matmul_forward_int8_rows(const KInt8Output *o, const int8_t *q, const float *scale, const void *packed,
                                const float *bias, int N, int C, int OC) {
    const Int8Epilogue e = {.out = o->out, .residual = o->residual, .out16 = o->out16, .q = o->q8,
                            .q_scale = o->q8_scale, .q_smooth = o->q8_smooth, .gelu = !o->act_on ? 0 : o->act == ACT_GELU ? 1 : 2,
                            .ln_w = o->ln_w, .ln_b = o->ln_b, .ln_eps = o->ln_eps, .ln_mean = o->ln_mean,
                            .ln_rstd = o->ln_rstd};
    gemm_int8_rows(N, OC, C, q, scale, packed, bias, &e);
}

size_t k_packed_weight_bytes_f32(int C, int OC) { return gemm_packed_bytes(true, C, OC); }
void k_pack_weight_f32(void *packed, const float *weight, int C, int OC) { gemm_pack(true, packed, weight, C, OC); }

void k_matmul_forward_packed(float *out, const float *inp, const float *weight, const void *packed, const float *bias,
                             int N, int C, int OC) {
    if (!gemm_packed(true, N, OC, C, inp, C, packed, bias, out, OC)) k_matmul_forward(out, inp, weight, bias, N, C, OC);
}

/* The 16-bit backward's bias gradients are summed over ROW_SLICES fixed slices of rows, each
 * into its own partial, the partials then added in order: the same bits for any thread count
 * (up to ROW_SLICES threads share the work). */
enum { ROW_SLICES = 16 };

/* db[c] += the ROW_SLICES partial sums partial[slice * C + c], in slice order; frees partial. */
static void add_slice_sums(float *db, float *partial, int C) {
    for (int c = 0; c < C; c++) {
        float sum = 0;
        for (int slice = 0; slice < ROW_SLICES; slice++) sum += partial[(size_t)slice * C + c];
        db[c] += sum;
    }
    free(partial);
}

static void rows_to_half(HalfMode mode, uint16_t *restrict dst, const float *restrict src, int rows, int cols, int ld);

/* dout16 = dout rounded to 16 bits and, where db, db[o] += sum_n dout[n, o] from the fp32
 * values, by row slices: one pass over dout, not two. Streaming rows (not column blocks, as
 * column_sums_accumulate) is what makes it fast. */
static void halves_and_column_sums(HalfMode mode, uint16_t *restrict dout16, float *restrict db,
                                   const float *restrict dout, int N, int OC) {
    if (!db) {
        halves_from_floats(mode, dout16, dout, (long)N * OC);
        return;
    }
    float *partial = xcalloc((size_t)ROW_SLICES * OC, sizeof(float));
#pragma omp parallel for schedule(static) if ((long)N * OC >= PARALLEL_MIN_WORK)
    for (int slice = 0; slice < ROW_SLICES; slice++) {
        float *restrict acc = partial + (size_t)slice * OC;
        const int n1 = (int)((long)N * (slice + 1) / ROW_SLICES);
        for (int n = (int)((long)N * slice / ROW_SLICES); n < n1; n++) {
            const float *restrict row = dout + (size_t)n * OC;
            uint16_t *restrict row16 = dout16 + (size_t)n * OC;
            if (mode == HALF_FP16) {   /* a storage emulation: its speed is not the point */
                for (int c = 0; c < OC; c++) acc[c] += row[c];
                rows_to_half(mode, row16, row, 1, OC, OC);
                continue;
            }
#pragma omp simd   /* one loop: a third faster than two at bert-base's widths */
            for (int c = 0; c < OC; c++) {
                acc[c] += row[c];
                row16[c] = bf16_from_float(row[c]);
            }
        }
    }
    add_slice_sums(db, partial, OC);
}

void k_matmul_backward_half(float *dinp, float *dweight, float *dbias, const float *dout, const uint16_t *inp16,
                            const uint16_t *weight, int N, int C, int OC, bool accumulate_dinp, uint16_t *dout16,
                            HalfMode mode) {
    if (dout) halves_and_column_sums(mode, dout16, dbias, dout, N, OC);
    else if (dbias) die("k_matmul_backward_half: with dout NULL the caller adds the bias gradient (dbias NULL)");
    if (dinp) gemm_half(mode, false, false, N, C, OC, dout16, OC, weight, C, NULL, accumulate_dinp ? 1.0f : 0.0f,
                        dinp, C);
    gemm_half(mode, true, false, OC, C, N, dout16, OC, inp16, C, NULL, 1.0f, dweight, C);
}

/* ---------------------------------------------------------------- layernorm */

/* A KDropout's mask parameters, as k_dropout computes them; off for drop NULL or p <= 0. */
typedef struct { bool on; uint32_t threshold; float scale; } DropMask;
static DropMask drop_mask(const KDropout *drop) {
    if (!drop || drop->p <= 0.0f) return (DropMask){.on = false, .scale = 1.0f};
    return (DropMask){.on = true, .threshold = rng_dropout_threshold(drop->p), .scale = 1.0f / (1.0f - drop->p)};
}
/* The first counter of row n's mask (k_dropout_rows'). */
static uint32_t drop_counter0(const KDropout *drop, int n, int C) {
    return (uint32_t)((size_t)(drop->rows ? drop->rows[n] : n) * C);
}
/* x through the dropout at counter: kept and scaled, or 0 (every dropout's element). */
static inline float dropped(DropMask d, uint64_t key, uint32_t counter, float x) {
    return rng_bits32(key, counter) >= d.threshold ? x * d.scale : 0.0f;
}

void k_dropout_layernorm_forward_to(float *out, uint16_t *out16, HalfMode mode, float *sum_out, float *mean,
                                    float *rstd, const float *a, const KDropout *drop, const float *residual,
                                    const float *w, const float *b, int N, int C, float eps) {
    const DropMask d = drop_mask(drop);
    if (d.on && !sum_out) die("k_dropout_layernorm_forward_to: dropout needs sum_out");
#pragma omp parallel for schedule(static) if ((long)N * C >= PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *x = a + (size_t)n * C;  /* no restrict: sum_out may alias a */
        const float *r = residual ? residual + (size_t)n * C : NULL;
        float *s = sum_out ? sum_out + (size_t)n * C : NULL;
        if (d.on) {   /* k_dropout_rows's kept value, then the residual added to it */
            const uint32_t counter0 = drop_counter0(drop, n, C);
#pragma omp simd
            for (int c = 0; c < C; c++) {
                const float v = dropped(d, drop->key, counter0 + (uint32_t)c, x[c]);
                s[c] = r ? v + r[c] : v;
            }
            x = s;
        } else if (r) {  /* fuse the residual add */
            for (int c = 0; c < C; c++) s[c] = x[c] + r[c];
            x = s;
        }
        layernorm_row(out + (size_t)n * C, mean + n, rstd + n, x, w, b, C, eps);
        /* the row rounded while in cache, on this thread (halves_from_floats would open a
         * parallel region per row) */
        if (out16) rows_to_half(mode, out16 + (size_t)n * C, out + (size_t)n * C, 1, C, C);
    }
}

void k_layernorm_forward(float *out, float *sum_out, float *mean, float *rstd, const float *a, const float *residual,
                         const float *w, const float *b, int N, int C, float eps) {
    k_dropout_layernorm_forward_to(out, NULL, HALF_BF16, sum_out, mean, rstd, a, NULL, residual, w, b, N, C, eps);
}

void k_layernorm_dropout_backward(float *dinp, float *dinp_dropped, const KDropout *drop, float *dw, float *db,
                                  const float *dout, const float *inp, const float *mean, const float *rstd,
                                  const float *w, int N, int C) {
    const DropMask d = drop_mask(drop);
#pragma omp parallel for schedule(static) if ((long)N * C >= PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *restrict x = inp + (size_t)n * C, *restrict dy = dout + (size_t)n * C;
        float *restrict dx = dinp + (size_t)n * C;
        float m = mean[n], rs = rstd[n], sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int c = 0; c < C; c++) {
            float g = dy[c] * w[c];
            sum_g += g;
            sum_gx += g * (x[c] - m) * rs;
        }
        sum_g /= (float)C;
        sum_gx /= (float)C;
        for (int c = 0; c < C; c++) dx[c] = rs * (dy[c] * w[c] - sum_g - (x[c] - m) * rs * sum_gx);
        if (!dinp_dropped) continue;
        float *restrict dd = dinp_dropped + (size_t)n * C;
        if (!d.on) {
            memcpy(dd, dx, sizeof(float) * (size_t)C);
            continue;
        }
        const uint32_t counter0 = drop_counter0(drop, n, C);
#pragma omp simd
        for (int c = 0; c < C; c++) dd[c] = dropped(d, drop->key, counter0 + (uint32_t)c, dx[c]);
    }
    int nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C >= PARALLEL_MIN_WORK)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * COL_BLOCK, c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        float aw[COL_BLOCK] = {0}, ab[COL_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            float m = mean[n], rs = rstd[n];
            for (int c = c0; c < c1; c++) {
                aw[c - c0] += dy[c] * (x[c] - m) * rs;
                ab[c - c0] += dy[c];
            }
        }
        for (int c = c0; c < c1; c++) {
            dw[c] += aw[c - c0];
            db[c] += ab[c - c0];
        }
    }
}

void k_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *mean,
                          const float *rstd, const float *w, int N, int C) {
    k_layernorm_dropout_backward(dinp, NULL, NULL, dw, db, dout, inp, mean, rstd, w, N, C);
}

/* ---------------------------------------------------------------- activations */

#define GELU_TANH_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_TANH_K1 0.044715f
#define INV_SQRT2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

/* The formulas, one element at a time, inlined into the vectorised loops below. */
static inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * INV_SQRT2)); }
static inline float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_TANH_K0 * (x + GELU_TANH_K1 * x * x * x)));
}
static inline float gelu_erf_slope(float x) {
    float cdf = 0.5f * (1.0f + erff(x * INV_SQRT2));
    float pdf = INV_SQRT_2PI * expf(-0.5f * x * x);
    return cdf + x * pdf;
}
static inline float gelu_tanh_slope(float x) {
    float t = tanhf(GELU_TANH_K0 * (x + GELU_TANH_K1 * x * x * x));
    float dinner = GELU_TANH_K0 * (1.0f + 3.0f * GELU_TANH_K1 * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}

void k_gelu_forward(float *restrict out, const float *restrict inp, long n, Activation act) {
    if (act == ACT_GELU) {
#pragma omp parallel for simd schedule(static) if (n >= PARALLEL_MIN_WORK)
        for (long i = 0; i < n; i++) out[i] = gelu_erf(inp[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n >= PARALLEL_MIN_WORK)
        for (long i = 0; i < n; i++) out[i] = gelu_tanh(inp[i]);
    }
}

void k_gelu_backward(float *dinp, const float *dout, const float *restrict inp, long n, Activation act) {
    if (act == ACT_GELU) {
#pragma omp parallel for simd schedule(static) if (n >= PARALLEL_MIN_WORK)
        for (long i = 0; i < n; i++) dinp[i] = dout[i] * gelu_erf_slope(inp[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n >= PARALLEL_MIN_WORK)
        for (long i = 0; i < n; i++) dinp[i] = dout[i] * gelu_tanh_slope(inp[i]);
    }
}

/* The 16-bit forms work through fp32 chunks that stay in L1: widen, evaluate (vectorised as
 * above), narrow. */
enum { HALF_CHUNK = 1024 };

static void widen_span(HalfMode mode, float *restrict dst, const uint16_t *restrict src, int n) {
    if (mode == HALF_FP16)
        for (int i = 0; i < n; i++) dst[i] = float_from_fp16(src[i]);
    else
#pragma omp simd
        for (int i = 0; i < n; i++) dst[i] = float_from_bf16(src[i]);
}

/* dst [rows, cols] dense = src's rows (stride ld) rounded to the 16-bit format. */
static void rows_to_half(HalfMode mode, uint16_t *restrict dst, const float *restrict src, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        const float *restrict s = src + (size_t)r * ld;
        uint16_t *restrict d = dst + (size_t)r * cols;
        if (mode == HALF_FP16)
            for (int c = 0; c < cols; c++) d[c] = fp16_from_float(s[c]);
        else
#pragma omp simd
            for (int c = 0; c < cols; c++) d[c] = bf16_from_float(s[c]);
    }
}

void k_gelu_forward_half(uint16_t *out16, const uint16_t *inp16, long n, Activation act, HalfMode mode) {
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN_WORK)
    for (long c0 = 0; c0 < n; c0 += HALF_CHUNK) {
        const int len = (int)(n - c0 < HALF_CHUNK ? n - c0 : HALF_CHUNK);
        float x[HALF_CHUNK];
        widen_span(mode, x, inp16 + c0, len);
        if (act == ACT_GELU) {
#pragma omp simd
            for (int i = 0; i < len; i++) x[i] = gelu_erf(x[i]);
        } else {
#pragma omp simd
            for (int i = 0; i < len; i++) x[i] = gelu_tanh(x[i]);
        }
        rows_to_half(mode, out16 + c0, x, 1, len, len);
    }
}

/* d[i] = g[i] * act'(x[i]) over one span (d may be x). */
static void gelu_backward_span(float *d, const float *restrict g, const float *x, int len, Activation act) {
    if (act == ACT_GELU) {
#pragma omp simd
        for (int i = 0; i < len; i++) d[i] = g[i] * gelu_erf_slope(x[i]);
    } else {
#pragma omp simd
        for (int i = 0; i < len; i++) d[i] = g[i] * gelu_tanh_slope(x[i]);
    }
}

void k_gelu_backward_half_out16(uint16_t *dinp16, float *dbias, const float *dout, const uint16_t *inp16, int N, int C,
                                Activation act, HalfMode mode) {
    float *partial = xcalloc((size_t)ROW_SLICES * C, sizeof(float));
#pragma omp parallel for schedule(static) if ((long)N * C >= PARALLEL_MIN_WORK)
    for (int slice = 0; slice < ROW_SLICES; slice++) {   /* the slices of halves_and_column_sums */
        float *restrict acc = partial + (size_t)slice * C;
        const int n1 = (int)((long)N * (slice + 1) / ROW_SLICES);
        for (int n = (int)((long)N * slice / ROW_SLICES); n < n1; n++)
            for (int c0 = 0; c0 < C; c0 += HALF_CHUNK) {
                const int len = C - c0 < HALF_CHUNK ? C - c0 : HALF_CHUNK;
                const size_t at = (size_t)n * C + c0;
                float x[HALF_CHUNK];
                widen_span(mode, x, inp16 + at, len);
                gelu_backward_span(x, dout + at, x, len, act);
#pragma omp simd
                for (int i = 0; i < len; i++) acc[c0 + i] += x[i];
                rows_to_half(mode, dinp16 + at, x, 1, len, len);
            }
    }
    add_slice_sums(dbias, partial, C);
}

void k_tanh_forward(float *x, long n) {
#pragma omp parallel for simd schedule(static) if (n >= PARALLEL_MIN_WORK)
    for (long i = 0; i < n; i++) x[i] = tanhf(x[i]);
}

void k_tanh_backward(float *dinp, const float *dout, const float *y, long n) {
#pragma omp parallel for simd schedule(static) if (n >= PARALLEL_MIN_WORK)
    for (long i = 0; i < n; i++) dinp[i] = dout[i] * (1.0f - y[i] * y[i]);
}

/* ---------------------------------------------------------------- dropout */

void k_dropout(float *x, long n, float p, uint64_t key, uint32_t counter0) {
    const DropMask d = drop_mask(&(KDropout){.p = p});
    if (!d.on) return;
#pragma omp parallel for simd schedule(static) if (n >= PARALLEL_MIN_WORK)
    for (long i = 0; i < n; i++) x[i] = dropped(d, key, counter0 + (uint32_t)i, x[i]);
}

void k_dropout_rows(float *x, const int32_t *rows, int R, int C, float p, uint64_t key) {
    const KDropout drop = {.p = p, .key = key, .rows = rows};
    const DropMask d = drop_mask(&drop);
    if (!d.on) return;
#pragma omp parallel for schedule(static) if ((long)R * C >= PARALLEL_MIN_WORK)
    for (int k = 0; k < R; k++) {
        float *row = x + (size_t)k * C;
        const uint32_t counter0 = drop_counter0(&drop, k, C);
#pragma omp simd
        for (int c = 0; c < C; c++) row[c] = dropped(d, key, counter0 + (uint32_t)c, row[c]);
    }
}

/* ---------------------------------------------------------------- embeddings */

void k_embeddings_forward(float *out, const int32_t *ids, const int32_t *types, const float *word, const float *pos,
                          const float *type, int B, int T, int C) {
#pragma omp parallel for schedule(static) if ((long)B * T * C >= PARALLEL_MIN_WORK)
    for (int n = 0; n < B * T; n++) {
        const float *restrict w = word + (size_t)ids[n] * C, *restrict p = pos + (size_t)(n % T) * C;
        const float *restrict t = type + (size_t)types[n] * C;
        float *restrict o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = w[c] + t[c] + p[c];
    }
}

void k_embeddings_backward(float *dword, float *dpos, float *dtype, const float *dout, const int32_t *ids,
                           const int32_t *types, int B, int T, int C) {
    int nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)B * T * C >= PARALLEL_MIN_WORK)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * COL_BLOCK, c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        for (int n = 0; n < B * T; n++) {
            const float *g = dout + (size_t)n * C;
            float *w = dword + (size_t)ids[n] * C, *p = dpos + (size_t)(n % T) * C, *t = dtype + (size_t)types[n] * C;
            for (int c = c0; c < c1; c++) {
                w[c] += g[c];
                p[c] += g[c];
                t[c] += g[c];
            }
        }
    }
}

/* ---------------------------------------------------------------- softmax */

/* dst = softmax(src) over n values (dst may be src), max-subtracted so large inputs do not
 * overflow. Returns log(sum(exp(src))), the normaliser cross-entropy needs (attention's
 * softmax is softmax_rows_scaled, below). */
static float softmax_row(float *dst, const float *src, int n) {
    float mx = -INFINITY;  /* without the simd clause GCC keeps a float max scalar */
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < n; j++) mx = src[j] > mx ? src[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        dst[j] = expf(src[j] - mx);
        sum += dst[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) dst[j] *= inv;
    return logf(sum) + mx;
}

/* ---------------------------------------------------------------- attention */

#if VEC16
/* softmax_rows_scaled's row (below) 16 lanes at a time, a masked vector for the tail, on R rows
 * at once with the same operations on each (inlined with R a constant): a row alone is a chain
 * of dependent steps (maximum, exponentials, sum, scaling) that left the vector units idle
 * between them; attention's head groups run two rows, whose chains interleave. */
static inline __attribute__((always_inline)) void softmax_rows_avx512(int R, float *const row[], float *const out[],
                                                                      uint16_t *const out16[], HalfMode mode, int L,
                                                                      float scale) {
    __m512 vmx[2], mx[2], vsum[2], inv[2];
    for (int r = 0; r < R; r++) vmx[r] = _mm512_set1_ps(-INFINITY), vsum[r] = _mm512_setzero_ps();
    for (int j = 0; j < L; j += 16) {
        const __mmask16 m = lanes(L - j);
        for (int r = 0; r < R; r++)
            vmx[r] = _mm512_max_ps(vmx[r], _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, row[r] + j));
    }
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r = 0; r < R; r++) mx[r] = _mm512_set1_ps(_mm512_reduce_max_ps(vmx[r]) * scale);
    for (int j = 0; j < L; j += 16) {
        const __mmask16 m = lanes(L - j);
        for (int r = 0; r < R; r++) {
            const __m512 e = exp16(_mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, row[r] + j), vs), mx[r]));
            _mm512_mask_storeu_ps(row[r] + j, m, e);
            vsum[r] = _mm512_add_ps(vsum[r], _mm512_maskz_mov_ps(m, e));
        }
    }
    for (int r = 0; r < R; r++) inv[r] = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum[r]));
    for (int j = 0; j < L; j += 16) {
        const __mmask16 m = lanes(L - j);
        for (int r = 0; r < R; r++) {
            const __m512 pj = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row[r] + j), inv[r]);
            if (out[r]) _mm512_mask_storeu_ps(out[r] + j, m, pj);
            if (out16[r] && mode != HALF_FP16) _mm256_mask_storeu_epi16(out16[r] + j, m, bf16x16(pj));
            else if (out16[r])
                for (int k = 0; k < 16 && j + k < L; k++) out16[r][j + k] = fp16_from_float(pj[k]);
        }
    }
}

/* One row (softmax_rows_scaled's). */
static void softmax_row_avx512(float *row, float *out, uint16_t *out16, HalfMode mode, int L, float scale) {
    softmax_rows_avx512(1, &row, &out, &out16, mode, L, scale);
}

/* Two rows, their probabilities in bf16 only (attention's head groups). */
static void softmax_row_pair_bf16(float *r0, float *r1, uint16_t *o0, uint16_t *o1, int L, float scale) {
    softmax_rows_avx512(2, (float *[2]){r0, r1}, (float *[2]){NULL, NULL}, (uint16_t *[2]){o0, o1}, HALF_BF16, L,
                        scale);
}
#endif

/* Row-wise softmax(s * scale) of scores [T, L]; keys with mask 0 (mask non-NULL only when
 * the sequence has padding before its last real token) get probability 0. One pass over the
 * scores for the maximum, one for the exponentials (kept in s) and one that writes the
 * probabilities: to p (fp32, may be s; NULL: not kept, as in inference) and rounded to p16
 * for a 16-bit product (NULL: not made; fp32 runs, or dropout comes first). The same values
 * as scaling s, a softmax and rounding in passes of their own: fl(s * scale) is recomputed
 * identically, and rounding is monotonic, so the maximum of the scaled scores is the scaled
 * maximum. */
static void softmax_rows_scaled(float *s, float *p, uint16_t *restrict p16, HalfMode mode, int T, int L, float scale,
                                const int32_t *mask) {
    for (int i = 0; i < T; i++) {
        float *row = s + (size_t)i * L;
        if (mask)
            for (int j = 0; j < L; j++)
                if (!mask[j]) row[j] = -INFINITY;
#if VEC16
        softmax_row_avx512(row, p ? p + (size_t)i * L : NULL, p16 ? p16 + (size_t)i * L : NULL, mode, L, scale);
        continue;
#endif
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int j = 0; j < L; j++) mx = row[j] > mx ? row[j] : mx;
        mx *= scale;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < L; j++) {
            row[j] = expf(row[j] * scale - mx);
            sum += row[j];
        }
        float inv = 1.0f / sum;
        if (p) {   /* p may be s: then the rounding below reads the probabilities, times 1 */
            float *out = p + (size_t)i * L;
            for (int j = 0; j < L; j++) out[j] = row[j] * inv;
            row = out, inv = 1.0f;
        }
        if (p16) {
            uint16_t *restrict out = p16 + (size_t)i * L;
            if (mode == HALF_FP16)
                for (int j = 0; j < L; j++) out[j] = fp16_from_float(row[j] * inv);
            else
#pragma omp simd
                for (int j = 0; j < L; j++) out[j] = bf16_from_float(row[j] * inv);
        }
    }
}

/* rows rows of unscaled scores (row length lds) into bf16 probabilities over their first L
 * values (row length ldp), as softmax_rows_scaled: two rows at a time where no mask has holes
 * (their dependent chains interleave), else one at a time with the mask. */
static void softmax_rows_bf16(float *s, int lds, uint16_t *p, int ldp, int rows, int L, float scale,
                              const int32_t *mask) {
    int i = 0;
#if VEC16
    for (; !mask && i + 2 <= rows; i += 2)
        softmax_row_pair_bf16(s + (size_t)i * lds, s + (size_t)(i + 1) * lds, p + (size_t)i * ldp,
                              p + (size_t)(i + 1) * ldp, L, scale);
#endif
    for (; i < rows; i++) softmax_rows_scaled(s + (size_t)i * lds, NULL, p + (size_t)i * ldp, HALF_BF16, 1, L, scale, mask);
}

/* dst = dropout(src) for one (b, h) block of probabilities [T, L], counters by (b, h, i, j)
 * in the full [grid, grid] grid (grid = the batch's sequence length) so the mask depends
 * neither on kv_len nor on how many query rows the block has. */
static void dropout_probs(float *dst, const float *src, int T, int grid, int L, size_t block, float p, uint64_t key) {
    uint32_t threshold = rng_dropout_threshold(p);
    float scale = 1.0f / (1.0f - p);
    for (int i = 0; i < T; i++) {
        uint32_t base = (uint32_t)((block * grid + i) * grid);
        const float *s = src + (size_t)i * L;
        float *d = dst + (size_t)i * L;
        for (int j = 0; j < L; j++) d[j] = rng_bits32(key, base + (uint32_t)j) >= threshold ? s[j] * scale : 0.0f;
    }
}

/* Backward's two uses of one block's mask, drawn once: pd = dropout(p), dp = dropout(dp). */
static void dropout_probs_pair(float *restrict pd, const float *restrict p, float *restrict dp, int T, int grid,
                               int L, size_t block, float prob, uint64_t key) {
    uint32_t threshold = rng_dropout_threshold(prob);
    float scale = 1.0f / (1.0f - prob);
    for (int i = 0; i < T; i++) {
        uint32_t base = (uint32_t)((block * grid + i) * grid);
        size_t row = (size_t)i * L;
        for (int j = 0; j < L; j++) {
            bool keep = rng_bits32(key, base + (uint32_t)j) >= threshold;
            pd[row + j] = keep ? p[row + j] * scale : 0.0f;
            dp[row + j] = keep ? dp[row + j] * scale : 0.0f;
        }
    }
}

/* One (sequence, head) block. q, k, v point into the sequence's T rows of QKV (row stride
 * 3H); L = kv_len <= T; grid = the batch's sequence length (T unless the layout is packed);
 * scratch holds 2*grid*grid floats of this thread's. */
typedef struct {
    const float *q, *k, *v;
    const uint16_t *q16, *k16, *v16;   /* the same in 16 bits (AttentionArgs.qkv16), or NULL */
    int T, grid, L, d, H;
    size_t block;
    const int32_t *mask;  /* the sequence's mask when it has holes, else NULL */
} AttnBlock;

static void attention_block_forward(const AttnBlock *x, float *ctx, float *p, float *scratch, const AttentionArgs *a) {
    const int T = x->T, L = x->L, d = x->d, H3 = 3 * x->H;
    if (!p) p = scratch + (size_t)x->grid * x->grid;   /* not kept: the scratch's second half */
    sgemm(false, true, T, L, d, 1.0f / sqrtf((float)d), x->q, H3, x->k, H3, 0.0f, p, L);
    softmax_rows_scaled(p, p, NULL, HALF_BF16, T, L, 1.0f, x->mask);   /* sgemm applied the scale */
    const float *pd = p;
    if (a->dropout_p > 0.0f) {
        dropout_probs(scratch, p, T, x->grid, L, x->block, a->dropout_p, a->dropout_key);
        pd = scratch;
    }
    sgemm(false, false, T, d, L, 1.0f, pd, L, x->v, H3, 0.0f, ctx, x->H);
}

/* ---- the same block with 16-bit products ---- */

/* The block's Q, K, V in 16 bits: in place in the 16-bit QKV activation (row stride 3H) when
 * the caller has it, else rounded from the fp32 one into the thread's scratch (dense, stride
 * d). The same values either way: the QKV product's fp32 sums rounded to nearest. */
static void qkv_half(const AttnBlock *x, uint16_t *h16, HalfMode mode, const uint16_t **q16, const uint16_t **k16,
                     const uint16_t **v16, int *ld) {
    const int T = x->T, L = x->L, d = x->d;
    if (x->q16) {
        *q16 = x->q16, *k16 = x->k16, *v16 = x->v16, *ld = 3 * x->H;
        return;
    }
    uint16_t *q = h16, *k = q + (size_t)T * d, *v = k + (size_t)L * d;
    rows_to_half(mode, q, x->q, T, d, 3 * x->H);
    rows_to_half(mode, k, x->k, L, d, 3 * x->H);
    rows_to_half(mode, v, x->v, L, d, 3 * x->H);
    *q16 = q, *k16 = k, *v16 = v, *ld = d;
}

/* A thread's 16-bit scratch: Q, K, V and dctx dense (grid x d each), probabilities and
 * score gradients (grid x grid each). */
static size_t attention_half_scratch(int grid, int d) { return (size_t)4 * grid * d + (size_t)2 * grid * grid; }

static void attention_block_forward_half(const AttnBlock *x, float *ctx, float *p, float *scratch, uint16_t *h16,
                                         const AttentionArgs *a) {
    const int T = x->T, L = x->L, d = x->d;
    const HalfMode mode = a->half_mode;
    uint16_t *p16 = h16 + (size_t)(T + 2 * L) * d;
    int ld;
    const uint16_t *q16, *k16, *v16;
    qkv_half(x, h16, mode, &q16, &k16, &v16, &ld);
    /* the scores in p when the probabilities are kept there, else in the scratch's second half */
    float *s = p ? p : scratch + (size_t)x->grid * x->grid;
    gemm_half_serial(mode, false, true, T, L, d, q16, ld, k16, ld, 0.0f, s, L);
    const bool dropout = a->dropout_p > 0.0f;
    softmax_rows_scaled(s, p, dropout ? NULL : p16, mode, T, L, 1.0f / sqrtf((float)d), x->mask);
    if (dropout) {   /* training: p is kept */
        dropout_probs(scratch, p, T, x->grid, L, x->block, a->dropout_p, a->dropout_key);
        rows_to_half(mode, p16, scratch, T, L, L);
    }
    gemm_half_serial(mode, false, false, T, d, L, p16, L, v16, ld, 0.0f, ctx, x->H);
}

/* g = P * (g - rowsum(P * g)) * scale: softmax backward, the 1/sqrt(d) scale folded in. */
static void softmax_backward_rows(float *g, const float *p, int T, int L, float scale) {
    for (int i = 0; i < T; i++) {
        const float *restrict pr = p + (size_t)i * L;
        float *restrict gr = g + (size_t)i * L;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < L; j++) dot += pr[j] * gr[j];
        for (int j = 0; j < L; j++) gr[j] = pr[j] * (gr[j] - dot) * scale;
    }
}

static void attention_block_backward(const AttnBlock *x, float *dq, const float *dctx, const float *p, float *scratch,
                                     const AttentionArgs *a) {
    const int T = x->T, L = x->L, d = x->d, H = x->H, H3 = 3 * H;
    float *dk = dq + H, *dv = dq + 2 * H, *dp = scratch, *pd_buf = scratch + (size_t)x->grid * x->grid;
    /* dP_dropped = dctx V^T; dV = P_dropped^T dctx */
    sgemm(false, true, T, L, d, 1.0f, dctx, H, x->v, H3, 0.0f, dp, L);
    const float *pd = p;
    if (a->dropout_p > 0.0f) {
        dropout_probs_pair(pd_buf, p, dp, T, x->grid, L, x->block, a->dropout_p, a->dropout_key);
        pd = pd_buf;
    }
    sgemm(true, false, L, d, T, 1.0f, pd, L, dctx, H, 0.0f, dv, H3);
    softmax_backward_rows(dp, p, T, L, 1.0f / sqrtf((float)d));
    sgemm(false, false, T, d, L, 1.0f, dp, L, x->k, H3, 0.0f, dq, H3);
    sgemm(true, false, L, d, T, 1.0f, dp, L, x->q, H3, 0.0f, dk, H3);
    for (int j = L; j < T; j++) {  /* keys after the last real token got no attention */
        memset(dk + (size_t)j * H3, 0, sizeof(float) * d);
        memset(dv + (size_t)j * H3, 0, sizeof(float) * d);
    }
}

static void attention_block_backward_half(const AttnBlock *x, float *dq, const float *dctx, const float *p,
                                          float *scratch, uint16_t *h16, const AttentionArgs *a) {
    const int T = x->T, L = x->L, d = x->d, H = x->H, H3 = 3 * H;
    const HalfMode mode = a->half_mode;
    float *dk = dq + H, *dv = dq + 2 * H, *dp = scratch, *pd_buf = scratch + (size_t)x->grid * x->grid;
    uint16_t *dctx16 = h16 + (size_t)(T + 2 * L) * d;
    uint16_t *p16 = dctx16 + (size_t)T * d, *ds16 = p16 + (size_t)T * L;
    int ld;
    const uint16_t *q16, *k16, *v16;
    qkv_half(x, h16, mode, &q16, &k16, &v16, &ld);
    rows_to_half(mode, dctx16, dctx, T, d, H);
    /* dP_dropped = dctx V^T; dV = P_dropped^T dctx */
    gemm_half_serial(mode, false, true, T, L, d, dctx16, d, v16, ld, 0.0f, dp, L);
    const float *pd = p;
    if (a->dropout_p > 0.0f) {
        dropout_probs_pair(pd_buf, p, dp, T, x->grid, L, x->block, a->dropout_p, a->dropout_key);
        pd = pd_buf;
    }
    rows_to_half(mode, p16, pd, T, L, L);
    gemm_half_serial(mode, true, false, L, d, T, p16, L, dctx16, d, 0.0f, dv, H3);
    softmax_backward_rows(dp, p, T, L, 1.0f / sqrtf((float)d));
    rows_to_half(mode, ds16, dp, T, L, L);
    gemm_half_serial(mode, false, false, T, d, L, ds16, L, k16, ld, 0.0f, dq, H3);
    gemm_half_serial(mode, true, false, L, d, T, ds16, L, q16, ld, 0.0f, dk, H3);
    for (int j = L; j < T; j++) {  /* keys after the last real token got no attention */
        memset(dk + (size_t)j * H3, 0, sizeof(float) * d);
        memset(dv + (size_t)j * H3, 0, sizeof(float) * d);
    }
}

/* First row of sequence b in the activations, and its number of rows. */
static size_t sequence_row(const AttentionArgs *a, int b) { return a->seq_row ? (size_t)a->seq_row[b] : (size_t)b * a->T; }
static int sequence_rows(const AttentionArgs *a, int b) { return a->seq_rows ? a->seq_rows[b] : a->T; }

static AttnBlock attention_block(const AttentionArgs *a, const float *qkv, int b, int h) {
    const int H = a->A * a->d;
    const size_t first = sequence_row(a, b) * 3 * H + (size_t)h * a->d;
    const float *q = qkv + first;
    const uint16_t *q16 = a->half && a->qkv16 ? a->qkv16 + first : NULL;
    return (AttnBlock){.q = q, .k = q + H, .v = q + 2 * H, .q16 = q16, .k16 = q16 ? q16 + H : NULL,
                       .v16 = q16 ? q16 + 2 * H : NULL, .T = sequence_rows(a, b), .grid = a->T, .L = a->kv_len[b],
                       .d = a->d, .H = H, .block = (size_t)b * a->A + h,
                       .mask = a->has_holes[b] ? a->mask + (size_t)b * a->T : NULL};
}

/* Each thread's scratch: 2 T^2 floats (the dropped probabilities, or dP and its product),
 * and with 16-bit products attention_half_scratch halves after them. */
static size_t attention_scratch_floats(const AttentionArgs *a) {
    return (size_t)2 * a->T * a->T + (a->half ? (attention_half_scratch(a->T, a->d) + 1) / 2 : 0);
}

static void attention_forward_block(float *ctx, float *probs, const float *qkv, const AttentionArgs *a, int b, int h,
                                    float *scratch) {
    const int T = a->T, H = a->A * a->d;
    AttnBlock x = attention_block(a, qkv, b, h);
    float *out = ctx + sequence_row(a, b) * H + (size_t)h * a->d, *p = probs ? probs + x.block * T * T : NULL;
    if (a->half) attention_block_forward_half(&x, out, p, scratch, (uint16_t *)(scratch + 2 * T * T), a);
    else attention_block_forward(&x, out, p, scratch, a);
}

/* Sequence b's rows of ctx quantized (int8 inference), on this thread. */
static void quantize_sequence(const float *ctx, const AttentionArgs *a, int b) {
    const int H = a->A * a->d;
    for (size_t row = sequence_row(a, b), end = row + (size_t)sequence_rows(a, b); row < end; row++)
        a->ctx_q8_scale[row] = gemm_int8_quantize_row(a->ctx_q8 + row * H, ctx + row * H, H, 127);
}

/* ---- inference in bf16: a sequence's heads in groups ----
 * Without probabilities to keep or dropout, on the QKV product's bf16 rows: each group of G
 * heads of a sequence copies its Q, K and V rows, read in order, into dense arrays padded with
 * zero rows to gemm_half_serial's buckets (Tp, Lp), then runs QK^T for the G heads as one
 * batched product, the softmax rows, PV as another, and copies the context rows out. Per head
 * (attention_forward_block) each product gathered its operand's rows 3H apart (a cache miss
 * each), copied them, and was one oneDNN call of its own. G: the largest divisor of A whose
 * scores fit 256 KiB and, with fewer sequences than twice the threads, that leaves a multiple
 * of the threads' count of groups where there is one (one sequence on 2 threads: 6 groups of
 * 2, not 3 of 4). A head's numbers do not depend on G (the batched product runs each head
 * alone: the same bits for G 1 to 6, bert-base, checked), so a sequence's answer does not
 * depend on the batch around it. */
static int head_group(int A, int Tp, int Lp, int spread) {
    int cap = (int)((256 << 10) / (sizeof(float) * (size_t)Tp * Lp));
    cap = cap < 1 ? 1 : cap > A ? A : cap;
    for (int g = cap; g >= 1; g--)
        if (A % g == 0 && (A / g) % spread == 0) return g;
    int g = cap;
    while (A % g) g--;
    return g;
}

static bool attention_grouped(const AttentionArgs *a, const float *probs) {
    return a->half && a->half_mode == HALF_BF16 && a->qkv16 && !probs && a->dropout_p == 0.0f && a->T <= 512 &&
           gemm_half_serial_bucket(a->d) == a->d && gemm_bf16_native_available();
}

/* A thread's arrays for head groups: halves (Q, K, V, P) and floats (scores, contexts). */
static size_t group_scores(const AttentionArgs *a) {
    const size_t tp = (size_t)gemm_half_serial_bucket(a->T);
    return tp * tp > 65536 ? tp * tp : 65536;
}
static size_t group_halves(const AttentionArgs *a) {   /* every head's Q, K, V, then probabilities */
    return (size_t)3 * a->A * gemm_half_serial_bucket(a->T) * a->d + group_scores(a);
}
static size_t group_floats(const AttentionArgs *a) {   /* scores, every head's contexts, one context row */
    return group_scores(a) + (size_t)a->A * gemm_half_serial_bucket(a->T) * a->d + (size_t)a->A * a->d;
}

/* Heads h0 .. h0 + G - 1 of sequence b staged from the QKV rows into dense arrays padded with
 * zero rows: q [G][Tp][d], k and v [G][Lp][d]. Row after row, each row's heads in order: with
 * all the heads (a sequence by one thread) that reads the sequence's rows front to back, which
 * the hardware's prefetchers follow (the QKV product's output comes from memory: it is stored
 * past the caches at batch sizes that do not fit them); head by head the reads jumped between
 * rows 3H apart. */
static void stage_heads(uint16_t *q, uint16_t *k, uint16_t *v, const AttentionArgs *a, int b, int h0, int G) {
    const int d = a->d, H = a->A * d, T = sequence_rows(a, b), L = a->kv_len[b];
    const int Tp = gemm_half_serial_bucket(T), Lp = gemm_half_serial_bucket(L);
    const size_t bytes = sizeof(uint16_t) * (size_t)d;
    const uint16_t *rows = a->qkv16 + sequence_row(a, b) * 3 * H + (size_t)h0 * d;
    for (int r = 0; r < T; r++) {
        const uint16_t *row = rows + (size_t)r * 3 * H;
        for (int g = 0; g < G; g++) copy_short(q + ((size_t)g * Tp + r) * d, row + (size_t)g * d, bytes);
        if (r >= L) continue;
        for (int g = 0; g < G; g++) copy_short(k + ((size_t)g * Lp + r) * d, row + H + (size_t)g * d, bytes);
        for (int g = 0; g < G; g++) copy_short(v + ((size_t)g * Lp + r) * d, row + 2 * H + (size_t)g * d, bytes);
    }
    for (int g = 0; g < G; g++) {
        memset(q + ((size_t)g * Tp + T) * d, 0, bytes * (size_t)(Tp - T));
        memset(k + ((size_t)g * Lp + L) * d, 0, bytes * (size_t)(Lp - L));
        memset(v + ((size_t)g * Lp + L) * d, 0, bytes * (size_t)(Lp - L));
    }
}

/* Heads h0 .. h0 + G - 1 of sequence b, staged (stage_heads) in q, k, v: their contexts into c
 * [G][Tp][d], then into ctx's rows where ctx is given (floats: the thread's scores; p16: its
 * probabilities). */
static void attention_group(float *ctx, const AttentionArgs *a, int b, int h0, int G, const uint16_t *q,
                            const uint16_t *k, const uint16_t *v, uint16_t *p16, float *floats, float *c) {
    const int d = a->d, H = a->A * d, T = sequence_rows(a, b), L = a->kv_len[b];
    const int Tp = gemm_half_serial_bucket(T), Lp = gemm_half_serial_bucket(L);
    float *s = floats;
    if (!gemm_half_serial_batched(G, true, Tp, Lp, d, q, k, s)) die("attention: no batched bf16 product");
    const int32_t *mask = a->has_holes[b] ? a->mask + (size_t)b * a->T : NULL;
    const float scale = 1.0f / sqrtf((float)d);
    for (int g = 0; g < G; g++) {   /* the scores' padding columns and rows get probability 0 */
        softmax_rows_bf16(s + (size_t)g * Tp * Lp, Lp, p16 + (size_t)g * Tp * Lp, Lp, T, L, scale, mask);
        if (Lp > L)
            for (int i = 0; i < T; i++) memset(p16 + ((size_t)g * Tp + i) * Lp + L, 0, sizeof(uint16_t) * (size_t)(Lp - L));
        memset(p16 + ((size_t)g * Tp + T) * Lp, 0, sizeof(uint16_t) * (size_t)(Tp - T) * Lp);
    }
    if (!gemm_half_serial_batched(G, false, Tp, d, Lp, p16, v, c)) die("attention: no batched bf16 product");
    if (!ctx) return;
    float *out = ctx + sequence_row(a, b) * H + (size_t)h0 * d;
    for (int i = 0; i < T; i++)
        for (int g = 0; g < G; g++) copy_short(out + (size_t)i * H + (size_t)g * d, c + ((size_t)g * Tp + i) * d, sizeof(float) * d);
}

/* Sequence b's context rows from its heads' contexts c [A][Tp][d], quantized into ctx_q8 and,
 * unless a->ctx_q8_only, into ctx's rows: each row gathered (into ctx's row, or into row [H] of
 * this thread's) and quantized from there while it is in cache. The same values as copying
 * every head out and quantizing ctx's rows (quantize_sequence), without ctx's pass through
 * memory where only the int8 rows are read. */
static void sequence_context(float *ctx, const AttentionArgs *a, int b, const float *c, int Tp, float *row) {
    const int d = a->d, H = a->A * d, T = sequence_rows(a, b);
    for (int i = 0; i < T; i++) {
        const size_t r = sequence_row(a, b) + (size_t)i;
        float *x = a->ctx_q8_only ? row : ctx + r * H;
        for (int h = 0; h < a->A; h++) copy_short(x + (size_t)h * d, c + ((size_t)h * Tp + i) * d, sizeof(float) * d);
        a->ctx_q8_scale[r] = gemm_int8_quantize_row(a->ctx_q8 + r * H, x, H, 127);
    }
}

/* Every sequence's rows of ctx quantized (int8 inference; the sequences' rows are consecutive). */
static void quantize_all(const float *ctx, const AttentionArgs *a) {
    if (!a->ctx_q8 || a->B <= 0) return;
    const int rows = (int)(sequence_row(a, a->B - 1) + (size_t)sequence_rows(a, a->B - 1)), H = a->A * a->d;
    quantize_rows_s8(a->ctx_q8, a->ctx_q8_scale, ctx, rows, H, H, 127);
}

/* A thread's arrays for head groups (group_halves, group_floats), kept from call to call and
 * freed when the thread ends: allocated per call (~1.4 MB a thread for bert-base), they were
 * returned to the system and faulted in again whenever malloc's thresholds said so (a loop of
 * attention calls alone spent 30% of its time in page faults). */
typedef struct {
    uint16_t *halves;
    float *floats;
    size_t halves_cap, floats_cap;
    bool registered;
} GroupScratch;
static _Thread_local GroupScratch t_group;

static void group_scratch_release(void *p) {
    GroupScratch *g = p;
    free(g->halves), free(g->floats);
    memset(g, 0, sizeof *g);
}

/* This thread's arrays, of at least nh halves and nf floats. */
static void group_scratch(size_t nh, size_t nf, uint16_t **halves, float **floats) {
    if (!t_group.registered) thread_at_exit(group_scratch_release, &t_group), t_group.registered = true;
    if (t_group.halves_cap < nh) free(t_group.halves), t_group.halves = xmalloc(sizeof(uint16_t) * nh), t_group.halves_cap = nh;
    if (t_group.floats_cap < nf) free(t_group.floats), t_group.floats = xmalloc(sizeof(float) * nf), t_group.floats_cap = nf;
    *halves = t_group.halves, *floats = t_group.floats;
}

/* ---- the same on AMX tiles (kernels/cpu/amx.h: both products of a head, where this CPU has
 * AMX-BF16): no staging of Q, K and V for oneDNN's dense operands (the tile loop reads Q from the
 * QKV rows and lays out K and V for the tiles itself), and no call per product. */
typedef struct {
    const int32_t *mask;
    int L;
    float scale;
} AmxSoftmaxArgs;

/* amx_attention_head's softmax: as attention_group's (a block's rows start at a multiple of 32:
 * the same pairs). */
static void amx_softmax_rows(void *arg, float *s, int lds, uint16_t *p, int ldp, int row0, int rows) {
    const AmxSoftmaxArgs *x = arg;
    (void)row0;
    softmax_rows_bf16(s, lds, p, ldp, rows, x->L, x->scale, x->mask);
}

static bool attention_on_amx(const AttentionArgs *a) { return amx_enabled() && amx_attention_ok(a->T, a->d); }

/* Heads h0 .. h0 + G - 1 of sequence b on AMX: head g's context rows into out + g d, rows ldo
 * floats apart (ctx's rows: H). scratch: amx_attention_scratch_bytes(a->T, d). */
static void attention_heads_amx(float *out, int ldo, const AttentionArgs *a, int b, int h0, int G, void *scratch) {
    const int d = a->d, H = a->A * d, T = sequence_rows(a, b);
    AmxSoftmaxArgs x = {.mask = a->has_holes[b] ? a->mask + (size_t)b * a->T : NULL, .L = a->kv_len[b],
                        .scale = 1.0f / sqrtf((float)d)};
    const uint16_t *rows = a->qkv16 + sequence_row(a, b) * 3 * H;
    for (int g = 0; g < G; g++) {
        const uint16_t *q = rows + (size_t)(h0 + g) * d;
        amx_attention_head(q, q + H, q + 2 * H, 3 * H, T, x.L, d, out + (size_t)g * d, ldo, scratch, amx_softmax_rows, &x);
    }
}

/* Sequence b on AMX, all its heads, into ctx's rows, or (int8, ctx_q8_only) into this thread's
 * rows c [T][H], then each row quantized (the same values as quantize_sequence's). */
static void sequence_amx(float *ctx, const AttentionArgs *a, int b, float *c, void *scratch) {
    const size_t H = (size_t)a->A * a->d, row0 = sequence_row(a, b);
    float *rows = a->ctx_q8 && a->ctx_q8_only ? c : ctx + row0 * H;
    attention_heads_amx(rows, (int)H, a, b, 0, a->A, scratch);
    if (!a->ctx_q8) return;
    for (int i = 0; i < sequence_rows(a, b); i++)
        a->ctx_q8_scale[row0 + i] = gemm_int8_quantize_row(a->ctx_q8 + (row0 + i) * H, rows + i * H, (int)H, 127);
}

static int sequence_group(const AttentionArgs *a, int b, int spread) {
    return head_group(a->A, gemm_half_serial_bucket(sequence_rows(a, b)), gemm_half_serial_bucket(a->kv_len[b]), spread);
}

/* ctx quantized by whole sequences (each by the thread that computed it, right after its heads,
 * in cache) where there are enough to share out, else as a whole afterwards. */
static void attention_forward_grouped(float *ctx, const AttentionArgs *a, bool by_sequence, bool parallel, int nthreads) {
    const int B = a->B, A = a->A;
    const size_t nh = group_halves(a), nf = group_floats(a);
    const size_t contexts = group_scores(a), row = contexts + (size_t)A * gemm_half_serial_bucket(a->T) * a->d;
    const bool amx = attention_on_amx(a);
    const size_t amx_halves = amx ? amx_attention_scratch_bytes(a->T, a->d) / sizeof(uint16_t) + 1 : 0;
    const size_t nh_all = nh > amx_halves ? nh : amx_halves;
    if (by_sequence) {   /* int8: all the heads' contexts kept, then each row gathered and quantized */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) if (parallel)
        for (int b = 0; b < B; b++) {
            uint16_t *q;
            float *f;
            group_scratch(nh_all, nf, &q, &f);
            if (amx) {
                sequence_amx(ctx, a, b, f + contexts, q);
                continue;
            }
            const int G = sequence_group(a, b, 1);
            const size_t head = (size_t)gemm_half_serial_bucket(sequence_rows(a, b)) * a->d;
            const size_t kv_head = (size_t)gemm_half_serial_bucket(a->kv_len[b]) * a->d;
            uint16_t *k = q + A * head, *v = k + A * kv_head, *p16 = v + A * kv_head;
            stage_heads(q, k, v, a, b, 0, A);   /* the whole sequence, its rows in order */
            for (int h0 = 0; h0 < A; h0 += G)
                attention_group(a->ctx_q8 ? NULL : ctx, a, b, h0, G, q + h0 * head, k + h0 * kv_head,
                                v + h0 * kv_head, p16, f, f + contexts + (a->ctx_q8 ? h0 * head : 0));
            if (a->ctx_q8)
                sequence_context(ctx, a, b, f + contexts, gemm_half_serial_bucket(sequence_rows(a, b)), f + row);
        }
    } else {
#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(nthreads) if (parallel)
        for (int b = 0; b < B; b++)
            for (int h0 = 0; h0 < A; h0++) {   /* a group's first head runs the group */
                const int G = sequence_group(a, b, nthreads);
                if (h0 % G) continue;
                const size_t head = (size_t)gemm_half_serial_bucket(sequence_rows(a, b)) * a->d;
                const size_t kv_head = (size_t)gemm_half_serial_bucket(a->kv_len[b]) * a->d;
                uint16_t *q;
                float *f;
                group_scratch(nh_all, nf, &q, &f);
                if (amx) {
                    attention_heads_amx(ctx + sequence_row(a, b) * A * a->d + (size_t)h0 * a->d, A * a->d, a, b, h0, G, q);
                    continue;
                }
                uint16_t *k = q + G * head, *v = k + G * kv_head, *p16 = v + G * kv_head;
                stage_heads(q, k, v, a, b, h0, G);
                attention_group(ctx, a, b, h0, G, q, k, v, p16, f, f + contexts);
            }
        quantize_all(ctx, a);
    }
}

void k_attention_forward(float *ctx, float *probs, const float *qkv, const AttentionArgs *a) {
    const int B = a->B, T = a->T, A = a->A, nthreads = omp_get_max_threads();
    const bool parallel = (long)B * A * T * T * a->d >= PARALLEL_MIN_WORK;
    if (!probs && a->dropout_p > 0.0f) die("k_attention_forward: dropout needs the probabilities kept");
    /* quantizing ctx: by whole sequences where there are enough to share out, each quantized by
     * the thread that computed it, right after its heads */
    const bool by_sequence = a->ctx_q8 && B >= 2 * nthreads;
    if (attention_grouped(a, probs)) {   /* by whole sequences wherever there are enough, int8 or not */
        attention_forward_grouped(ctx, a, B >= 2 * nthreads, parallel, nthreads);
        return;
    }
    const size_t per_thread = attention_scratch_floats(a);
    float *scratch_all = xmalloc(sizeof(float) * per_thread * nthreads);
    if (by_sequence) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) if (parallel)
        for (int b = 0; b < B; b++) {
            float *scratch = scratch_all + (size_t)omp_get_thread_num() * per_thread;
            for (int h = 0; h < A; h++) attention_forward_block(ctx, probs, qkv, a, b, h, scratch);
            quantize_sequence(ctx, a, b);
        }
    } else {
#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(nthreads) if (parallel)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < A; h++)
                attention_forward_block(ctx, probs, qkv, a, b, h, scratch_all + (size_t)omp_get_thread_num() * per_thread);
        quantize_all(ctx, a);
    }
    free(scratch_all);
}

/* Here the rounding is a pass of its own after the heads, a sequence a thread (the product
 * would make it otherwise: the same work; halves_from_floats per sequence would open a
 * parallel region each); the GPU's kernels round as they write ctx. */
void k_attention_forward_to(float *ctx, uint16_t *ctx16, float *probs, const float *qkv, const AttentionArgs *a) {
    k_attention_forward(ctx, probs, qkv, a);
    if (!ctx16 || !a->half) return;
    const int H = a->A * a->d;
#pragma omp parallel for schedule(dynamic, 1) if ((long)a->B * a->T * H >= PARALLEL_MIN_WORK)
    for (int b = 0; b < a->B; b++) {
        const size_t row = sequence_row(a, b);
        rows_to_half(a->half_mode, ctx16 + row * H, ctx + row * H, sequence_rows(a, b), H, H);
    }
}

bool k_attention_keeps_probs(const AttentionArgs *a) {
    (void)a;
    return true;   /* the backward reads the probabilities; recomputing them would cost T T d a block */
}

size_t k_attention_state_floats(const AttentionArgs *a) {
    return a->B <= 0 || a->T <= 0 || a->A <= 0 ? 0 : (size_t)a->B * a->A * a->T * a->T;
}

void k_attention_backward(float *dqkv, const float *dctx, const float *qkv, const float *probs, const AttentionArgs *a) {
    const int B = a->B, T = a->T, A = a->A, H = A * a->d, nthreads = omp_get_max_threads();
    const bool parallel = (long)B * A * T * T * a->d >= PARALLEL_MIN_WORK;
    const size_t per_thread = attention_scratch_floats(a);
    float *scratch_all = xmalloc(sizeof(float) * per_thread * nthreads);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(nthreads) if (parallel)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < A; h++) {
            AttnBlock x = attention_block(a, qkv, b, h);
            float *scratch = scratch_all + (size_t)omp_get_thread_num() * per_thread;
            size_t row = sequence_row(a, b), off = row * 3 * H + (size_t)h * a->d;
            const float *g = dctx + row * H + (size_t)h * a->d, *p = probs + x.block * T * T;
            if (a->half)
                attention_block_backward_half(&x, dqkv + off, g, p, scratch, (uint16_t *)(scratch + 2 * T * T), a);
            else attention_block_backward(&x, dqkv + off, g, p, scratch, a);
        }
    free(scratch_all);
}

/* ---------------------------------------------------------------- cross-entropy */

void k_xent_forward(float *loss, float *row_loss, float *probs, const float *logits, const int32_t *row_index,
                    const int32_t *labels, int M, int V) {
#pragma omp parallel for schedule(static) if ((long)M * V >= PARALLEL_MIN_WORK)
    for (int k = 0; k < M; k++) {
        const float *row = logits + (size_t)(row_index ? row_index[k] : k) * V;
        row_loss[k] = softmax_row(probs + (size_t)k * V, row, V) - row[labels[k]];
    }
    double total = 0.0;  /* summed in order: the same for any thread count */
    for (int k = 0; k < M; k++) total += row_loss[k];
    loss[0] = (float)(total / M);
}

void k_xent_backward(float *dlogits, const int32_t *labels, int M, int V, float scale) {
#pragma omp parallel for schedule(static) if ((long)M * V >= PARALLEL_MIN_WORK)
    for (int k = 0; k < M; k++) {
        float *restrict g = dlogits + (size_t)k * V;
        for (int j = 0; j < V; j++) g[j] *= scale;
        g[labels[k]] -= scale;
    }
}

void k_mse_forward(float *loss, const float *pred, const float *target, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += ((double)pred[i] - target[i]) * ((double)pred[i] - target[i]);
    loss[0] = (float)(sum / n);
}

void k_mse_backward(float *dpred, const float *pred, const float *target, int n, float scale) {
    for (int i = 0; i < n; i++) dpred[i] = 2.0f * (pred[i] - target[i]) * scale;
}

void k_bce_forward(float *loss, const float *logits, const float *target, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const double x = logits[i];
        sum += (x > 0 ? x : 0) - x * target[i] + log1p(exp(-fabs(x)));
    }
    loss[0] = n > 0 ? (float)(sum / n) : 0.0f;
}

void k_bce_backward(float *dlogits, const float *logits, const float *target, int n, float scale) {
    for (int i = 0; i < n; i++) dlogits[i] = (1.0f / (1.0f + expf(-logits[i])) - target[i]) * scale;
}

/* ---------------------------------------------------------------- memory */

void k_gather_rows(float *dst, const float *src, const int32_t *rows, int R, int C) {
    for (int k = 0; k < R; k++)
        if (dst + (size_t)k * C != src + (size_t)rows[k] * C)
            memmove(dst + (size_t)k * C, src + (size_t)rows[k] * C, sizeof(float) * C);
}

void k_scatter_add_rows(float *dst, const float *src, const int32_t *rows, int R, int C) {
    for (int k = 0; k < R; k++) {   /* serial: two k may name the same row */
        float *d = dst + (size_t)rows[k] * C;
        const float *s = src + (size_t)k * C;
        for (int c = 0; c < C; c++) d[c] += s[c];
    }
}

void k_scatter_rows(float *dst, const float *src, const int32_t *rows, int R, int N, int C) {
    if (dst != src) {
        memset(dst, 0, sizeof(float) * (size_t)N * C);
        for (int k = 0; k < R; k++) memcpy(dst + (size_t)rows[k] * C, src + (size_t)k * C, sizeof(float) * C);
        return;
    }
    if (R == N) return;   /* ascending: every row in its place */
    for (int k = R - 1; k >= 0; k--)   /* backwards: rows[k] >= k, so no row still to move is overwritten */
        if (rows[k] != k) memmove(dst + (size_t)rows[k] * C, dst + (size_t)k * C, sizeof(float) * C);
    int next = 0;
    for (int row = 0; row < N; row++) {
        if (next < R && rows[next] == row) { next++; continue; }
        memset(dst + (size_t)row * C, 0, sizeof(float) * C);
    }
}

void k_copy(float *dst, const float *src, long n) { memcpy(dst, src, sizeof(float) * (size_t)n); }
void k_zero(float *x, long n) { memset(x, 0, sizeof(float) * (size_t)n); }
void k_add(float *dst, const float *src, long n) {
    for (long i = 0; i < n; i++) dst[i] += src[i];
}
float k_read_scalar(const float *x) { return x[0]; }
void k_wait(void) {}   /* each kernel's work is done when it returns */
