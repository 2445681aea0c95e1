/* int8 inference (kernels/cpu/gemm_int8.h, BERT_INT8): quantization, the integer product
 * against an exact integer reference, the dequantized product against the same formula in
 * double, and the model against fp32 within a bound from the quantization step. Run it also
 * with ONEDNN_MAX_CPU_ISA=AVX2 (no VNNI: oneDNN's other int8 kernels) and
 * ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI (VNNI without AMX): every check is the same. On AMX
 * CPUs the products run on bert.c's own tile loop (kernels/cpu/amx.h): the exact products
 * are checked on it and on oneDNN's kernels, and the epilogues' bits compared between them. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/rng.h"
#include "core/test_hooks.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/team.h"
#include "kernels/kernels.h"
#include "model/bert.h"
#include "model/bert_views.h"
#include "model/config.h"
#include "test.h"
#include "test_int8_util.h"
#include "train/synthetic.h"

static void fill(float *x, size_t n, uint64_t seed, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (float)(2.0 * rng_uniform(seed, i) - 1.0);
}

static void *packed_weight(const float *W, int K, int N) {
    size_t bytes = gemm_int8_packed_bytes(K, N);
    CHECKF(bytes >= (size_t)N * K + (size_t)N * sizeof(float), "packed int8 weight of %zu bytes for %dx%d", bytes, N, K);
    void *p = k_alloc(bytes);
    gemm_int8_pack(p, W, K, N, NULL);
    return p;
}

/* ---- quantization ---- */

/* Each element's quantization error is at most half a step (r/2, r = max|x|/L), plus the
 * fp32 rounding of x L/max and of r (a few units of 2^-24 relative); the largest element
 * maps to +-L; q(-x) = -q(x) (round to nearest is symmetric); a zero row has scale 0, a row
 * with a NaN or infinity a NaN scale. For the activations' L (127) and the 7-bit weights' (63). */
static void check_quantize_rows(int L) {
    enum { R = 7, C = 301 };
    float x[R * C], neg[R * C], scale[R], scale_neg[R];
    int8_t q[R * C], qn[R * C];
    fill(x, R * C, 1, 3.0f);
    for (int k = 0; k < C; k++) x[2 * C + k] = 0.0f;            /* a zero row */
    for (int k = 0; k < C; k++) x[3 * C + k] *= 1e-30f;         /* tiny values: the scale, not the step, is small */
    x[4 * C + 17] = NAN;                                        /* a NaN row */
    x[5 * C + 5] = 1e6f;                                        /* one outlier */
    for (int i = 0; i < R * C; i++) neg[i] = -x[i];
    quantize_rows_s8(q, scale, x, R, C, C, L);
    quantize_rows_s8(qn, scale_neg, neg, R, C, C, L);
    for (int i = 0; i < R; i++) {
        if (i == 4) {
            CHECKF(isnan(scale[i]), "row with a NaN: scale %g, not NaN", scale[i]);
            continue;
        }
        double amax = 0;
        int qmax = 0;
        for (int k = 0; k < C; k++) amax = fmax(amax, fabs(x[i * C + k])), qmax = abs(q[i * C + k]) > qmax ? abs(q[i * C + k]) : qmax;
        CHECKF(fabs(scale[i] - amax / L) <= 2 * F32_UNIT_ROUNDOFF * amax / L, "row %d: scale %.9g, max/L %.9g", i,
               scale[i], amax / L);
        CHECKF(i == 2 ? qmax == 0 : qmax == L, "row %d: largest |q| %d of %d", i, qmax, L);
        for (int k = 0; k < C; k++) {
            const double err = fabs((double)x[i * C + k] - (double)scale[i] * q[i * C + k]);
            const double bound = 0.5 * scale[i] + 4 * F32_UNIT_ROUNDOFF * fabs(x[i * C + k]) + 1e-45;
            CHECKF(err <= bound, "row %d col %d: %.9g -> %d x %.9g, error %.3g > %.3g", i, k, x[i * C + k], q[i * C + k],
                   scale[i], err, bound);
            CHECKF(qn[i * C + k] == -q[i * C + k], "q(-x) %d != -q(x) %d", qn[i * C + k], q[i * C + k]);
            CHECK(q[i * C + k] >= -L && q[i * C + k] <= L);
        }
    }
}

static void test_quantize_rows(void) {
    check_quantize_rows(127), check_quantize_rows(63);
    CHECKF(gemm_int8_weight_levels() == (gemm_int8_support() == 2 ? 127 : 63), "weights in %d levels, support %d",
           gemm_int8_weight_levels(), gemm_int8_support());
}

/* ---- the integer product: exact ---- */

/* Every int32 sum against an int64 reference over the quantized weight (the packing's scales
 * are the per-row quantization's, bit for bit): integer sums have no rounding, so any
 * difference is a wrong element. K up to 3072 with |a q| <= 127^2 stays below 2^31. Shapes
 * with K not a multiple of 4 (VNNI's groups) and row counts other than the packing's; the
 * extremes (all +-127 against +-L) as well as random values: without VNNI, 8-bit weights
 * would saturate on the random ones (vpmaddubsw's int16 pairs). */
static void check_s32(int M, int N, int K, uint64_t seed, bool extremes) {
    float *W = malloc(sizeof(float) * N * K), *ws = malloc(sizeof(float) * N);
    int8_t *qw = malloc((size_t)N * K), *A = malloc((size_t)M * K);
    int32_t *C = malloc(sizeof(int32_t) * M * N);
    fill(W, (size_t)N * K, seed, 0.05f);
    if (extremes)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++) W[(size_t)j * K + k] = (j + k) % 3 ? 0.05f : -0.05f;
    for (size_t i = 0; i < (size_t)M * K; i++)
        A[i] = extremes ? (i % 5 ? 127 : -127) : (int8_t)(rng_bits32(seed + 1, i) % 255 - 127);
    void *packed = packed_weight(W, K, N);
    quantize_rows_s8(qw, ws, W, N, K, K, gemm_int8_weight_levels());
    CHECK(memcmp(ws, gemm_int8_weight_scales(packed), sizeof(float) * N) == 0);
    gemm_int8_s32(M, N, K, A, packed, C);
    long wrong = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int64_t s = 0;
            for (int k = 0; k < K; k++) s += (int64_t)A[(size_t)i * K + k] * qw[(size_t)j * K + k];
            if (s != C[(size_t)i * N + j]) {
                if (!wrong) CHECKF(0, "M=%d N=%d K=%d: C[%d,%d] = %d, exact %lld", M, N, K, i, j, C[(size_t)i * N + j], (long long)s);
                wrong++;
            }
        }
    CHECKF(!wrong, "M=%d N=%d K=%d%s: %ld of %d sums wrong", M, N, K, extremes ? " (extremes)" : "", wrong, M * N);
    k_free(packed), free(W), free(ws), free(qw), free(A), free(C);
}

static void products_exact(void) {
    check_s32(1, 64, 64, 1, false);
    check_s32(5, 96, 37, 2, false);
    check_s32(64, 384, 128, 3, false);
    check_s32(300, 130, 256, 4, false);
    check_s32(33, 64, 3072, 5, true);   /* the largest sums: 3072 x 127^2 */
    check_s32(4, 48, 770, 6, true);
    check_s32(40, 1600, 96, 7, false);   /* wide */
    /* the shapes bert.c's AMX loop takes (M a multiple of 16, N of 64, K of 64): a single row
     * tile (16), a pair and a single one (48), the threads splitting the rows (96 x 256 x 256),
     * a weight larger than 3/4 of L2 (its strips outermost: 1024 x 2048, 2 MiB) */
    check_s32(16, 64, 64, 8, false);
    check_s32(48, 128, 192, 9, true);
    check_s32(96, 256, 256, 10, false);
    check_s32(48, 1024, 2048, 11, false);
}

/* Every product exact on oneDNN's kernels, and where this CPU has AMX also on bert.c's own loop
 * (kernels/cpu/amx.h). */
static void test_product_exact(void) {
    const bool own = gemm_int8_own_amx();
    printf("  products on %s\n", own ? "bert.c's AMX loop, then oneDNN's kernels" : "oneDNN's kernels (bert.c's AMX loop: not on this CPU, BERT_AMX=0 or oneDNN's ISA cap below AMX)");
    products_exact();
    if (!own) return;
    amx_set_enabled(false);
    products_exact();
    amx_set_enabled(true);
}

/* ---- dequantized: the formula's fp32 evaluation ---- */

/* out = float(sum) (r_i s_j) + b_j, in fp32: float(sum) rounds once (sums above 2^24), the
 * scale product once, the product once and the bias addition once: within
 * 3u |sum r s| + u |out| of the double value (u = 2^-24), u |out| covering the last
 * rounding. With GELU, that error times GELU's slope (< 1.13) plus the activation's own:
 * erf as a rational function in AVX-512 (measured within 2.4e-7 |v| of GELU over [-30, 30];
 * gemm_int8.c), or erff / tanhf, within 0.5e-6 |v|; and 3 fp32 roundings of the
 * result. */
static void check_forward(int M, int N, int K, uint64_t seed, int gelu) {
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * N);
    float *out = malloc(sizeof(float) * M * N), *ws = malloc(sizeof(float) * N), *xs = malloc(sizeof(float) * M);
    int8_t *qw = malloc((size_t)N * K), *qx = malloc((size_t)M * K);
    fill(W, (size_t)N * K, seed, 0.08f), fill(X, (size_t)M * K, seed + 1, 2.0f), fill(b, N, seed + 2, 0.5f);
    void *packed = packed_weight(W, K, N);
    gemm_int8_forward(M, N, K, X, packed, b, gelu, out);
    quantize_rows_s8(qw, ws, W, N, K, K, gemm_int8_weight_levels()), quantize_rows_s8(qx, xs, X, M, K, K, 127);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int64_t s = 0;
            for (int k = 0; k < K; k++) s += (int64_t)qx[(size_t)i * K + k] * qw[(size_t)j * K + k];
            const double d = (double)s * ((double)xs[i] * ws[j]), v = d + b[j];
            const double u = F32_UNIT_ROUNDOFF, e = 3 * u * fabs(d) + u * (fabs(v) + 3 * u * fabs(d));
            double ref = v, bound = e;
            if (gelu) {
                ref = gelu == 1 ? 0.5 * v * (1 + erf(v / sqrt(2.0)))
                                : 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
                bound = 1.13 * e + 0.5e-6 * fabs(v) + 3 * u * fabs(ref);
            }
            const double r = fabs(out[(size_t)i * N + j] - ref) / (bound + 1e-45);
            worst = r > worst || r != r ? (r != r ? INFINITY : r) : worst;
        }
    CHECKF(worst <= 1, "M=%d N=%d K=%d gelu %d: error %.3g of the bound", M, N, K, gelu, worst);
    k_free(packed), free(W), free(X), free(b), free(out), free(ws), free(xs), free(qw), free(qx);
}

static void test_forward_formula(void) {
    check_forward(1, 64, 64, 11, 0);
    check_forward(17, 200, 96, 12, 0);
    check_forward(300, 64, 128, 13, 1);
    check_forward(40, 128, 3072, 14, 2);
    check_forward(200, 4096, 64, 15, 1);   /* wide: the rows run in blocks of 64, on each thread */
    check_forward(9, 203, 96, 16, 1);      /* the vector GELU's scalar tail */
}

/* Rows are quantized one by one and the integer sums are exact, so a row's results do not
 * depend on the other rows: the same bits in a batch of 37 rows as alone (what makes padded
 * and packed batches agree on real tokens). Through kernels.h, as the model calls it. */
static void test_rows_independent(void) {
    enum { M = 37, N = 96, K = 160 };
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * N);
    float *all = malloc(sizeof(float) * M * N), *one = malloc(sizeof(float) * N);
    fill(W, (size_t)N * K, 21, 0.1f), fill(X, (size_t)M * K, 22, 1.0f), fill(b, N, 23, 0.2f);
    const size_t bytes = k_packed_weight_bytes_int8(K, N);
    void *packed = k_alloc(bytes);
    k_pack_weight_int8(packed, W, NULL, K, N);
    k_matmul_forward_int8(all, X, packed, b, M, K, N, false, ACT_GELU);
    for (int i = 0; i < M; i += 6) {
        k_matmul_forward_int8(one, X + (size_t)i * K, packed, b, 1, K, N, false, ACT_GELU);
        CHECKF(memcmp(one, all + (size_t)i * N, sizeof(float) * N) == 0, "row %d alone differs from row %d of %d", i, i, M);
    }
    k_free(packed), free(W), free(X), free(b), free(all), free(one);
}

/* Against the fp32 product: the int8 result's error is the quantization's. With
 * |x - r p| <= r/2 and |w - s q| <= s/2 per element,
 *   |x.w - (r p).(s q)| <= (s/2) sum|x| + (r/2) sum|w| + K r s / 4
 * (plus the fp32 rounding, 2 gamma_K sum|x w|, far below): per element, any data. */
static void test_against_fp32(void) {
    enum { M = 29, N = 72, K = 200 };
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K);
    float *o8 = malloc(sizeof(float) * M * N), *ws = malloc(sizeof(float) * N), *xs = malloc(sizeof(float) * M);
    int8_t *qw = malloc((size_t)N * K), *qx = malloc((size_t)M * K);
    fill(W, (size_t)N * K, 31, 0.1f), fill(X, (size_t)M * K, 32, 1.0f);
    void *packed = packed_weight(W, K, N);
    gemm_int8_forward(M, N, K, X, packed, NULL, 0, o8);
    quantize_rows_s8(qw, ws, W, N, K, K, gemm_int8_weight_levels()), quantize_rows_s8(qx, xs, X, M, K, K, 127);
    double worst = 0, err2 = 0, ref2 = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double exact = 0, sx = 0, sw = 0, sxw = 0;
            for (int k = 0; k < K; k++) {
                const double x = X[(size_t)i * K + k], w = W[(size_t)j * K + k];
                exact += x * w, sx += fabs(x), sw += fabs(w), sxw += fabs(x * w);
            }
            const double bound = ws[j] / 2 * sx + xs[i] / 2 * sw + K * (double)xs[i] * ws[j] / 4 + 2 * gamma_k(K) * sxw;
            const double d = fabs(o8[(size_t)i * N + j] - exact);
            worst = fmax(worst, d / bound), err2 += d * d, ref2 += exact * exact;
        }
    CHECKF(worst <= 1, "int8 against fp32: %.3g of the quantization bound", worst);
    printf("    int8 vs exact: worst %.2f of the per-element bound, %.2g norm-wise\n", worst, sqrt(err2 / ref2));
    k_free(packed), free(W), free(X), free(o8), free(ws), free(xs), free(qw), free(qx);
}

/* ---- smoothing (SmoothQuant without calibration: the products whose input is a LayerNorm's) ---- */

/* A LayerNorm's output as a product's input: x = z gamma + beta, z uniform in [-1.7, 1.7],
 * gamma in [0.5, 1.5] but 25 on every 37th channel (the outlier channels of real models,
 * which make the per-row input scale large for every other channel), beta in [-0.1, 0.1]
 * but -3 there. */
static void layernorm_like(float *x, float *lw, float *lb, int M, int K, uint64_t seed) {
    fill(lw, K, seed, 0.5f), fill(lb, K, seed + 1, 0.1f), fill(x, (size_t)M * K, seed + 2, 1.7f);
    for (int k = 0; k < K; k++) {
        lw[k] += 1.0f;
        if (k % 37 == 3) lw[k] = 25.0f, lb[k] = -3.0f;
    }
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) x[(size_t)i * K + k] = x[(size_t)i * K + k] * lw[k] + lb[k];
}

/* The factors against their formula in double: t_k = sqrt(max(|g_k| + |b_k|, 1e-5) /
 * max(max_j |W_jk|, 1e-5)) over their mean (two fp32 roundings and a sum: within 4u of it);
 * a zero column takes the clamp. The packed weight keeps them (k_int8_smoothing, bit for
 * bit), its scales and integers are W t's (the product W[j,k] t_k in fp32, then quantized per
 * row); the factors from a block of rows (KInt8Smoothing.row0, rows) are that block's; an
 * unsmoothed weight has none. */
static void test_smoothing_factors(void) {
    enum { K = 200, N = 96 };
    float *W = malloc(sizeof(float) * N * K), *Wt = malloc(sizeof(float) * N * K), lw[K], lb[K], t[K], x[K];
    float *ws = malloc(sizeof(float) * N);
    int8_t *q = malloc((size_t)N * K), *q_ref = malloc((size_t)N * K);
    fill(W, (size_t)N * K, 61, 0.1f);
    layernorm_like(x, lw, lb, 1, K, 62);
    for (int j = 0; j < N; j++) W[(size_t)j * K + 5] = 0.0f, W[(size_t)j * K + 7] *= 10.0f;   /* a dead and a large column */
    for (int block = 0; block < 2; block++) {
        const int row0 = block ? 32 : 0, rows = block ? 32 : N;   /* all rows; one block (the value projection's) */
        gemm_int8_smoothing(t, lw, lb, W + (size_t)row0 * K, K, rows);
        double raw[K], mean = 0;
        for (int k = 0; k < K; k++) {
            double wmax = 0;
            for (int j = row0; j < row0 + rows; j++) wmax = fmax(wmax, fabs(W[(size_t)j * K + k]));
            raw[k] = sqrt(fmax(fabs(lw[k]) + fabs(lb[k]), 1e-5) / fmax(wmax, 1e-5)), mean += raw[k] / K;
        }
        double worst = 0;
        for (int k = 0; k < K; k++) worst = fmax(worst, fabs(t[k] - raw[k] / mean) / (raw[k] / mean));
        CHECKF(worst <= 4 * F32_UNIT_ROUNDOFF, "block %d: factors %.3g relative from the formula", block, worst);
        void *packed = k_alloc(k_packed_weight_bytes_int8(K, N));
        k_pack_weight_int8(packed, W, &(KInt8Smoothing){.ln_w = lw, .ln_b = lb, .row0 = row0, .rows = block ? rows : 0},
                           K, N);
        const float *kept = k_int8_smoothing(packed);
        CHECKF(kept && !memcmp(kept, t, sizeof t), "block %d: the packed weight's factors differ", block);
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++) Wt[(size_t)j * K + k] = W[(size_t)j * K + k] * t[k];
        quantize_rows_s8(q_ref, ws, Wt, N, K, K, gemm_int8_weight_levels());
        gemm_int8_unpack(q, packed, K, N);
        CHECKF(!memcmp(ws, gemm_int8_weight_scales(packed), sizeof(float) * N) && !memcmp(q, q_ref, (size_t)N * K),
               "block %d: the packed weight is not W t quantized", block);
        k_pack_weight_int8(packed, W, NULL, K, N);
        CHECK(k_int8_smoothing(packed) == NULL);
        k_free(packed);
    }
    free(W), free(Wt), free(ws), free(q), free(q_ref);
}

/* k_quantize_rows_int8 with factors against the exact reference: y = x / t in double,
 * scale = max |y| / 127, q = round(y / scale). The fp32 y = x fl(1/t) and scale are within 2u
 * and 3u of theirs, so q is the reference's integer but where y / scale is within 6u |y / scale|
 * (+ the scale's 3u of 127) of a half: there +-1 (counted; a handful at most). A zero row: scale 0;
 * a NaN: scale NaN. 130 rows of 301: the threaded path. */
static void test_smoothed_quantization(void) {
    enum { M = 130, K = 301 };
    float *x = malloc(sizeof(float) * M * K), lw[K], lb[K], t[K], *W = malloc(sizeof(float) * 64 * K);
    float *scale = malloc(sizeof(float) * M);
    int8_t *q = malloc((size_t)M * K);
    layernorm_like(x, lw, lb, M, K, 71);
    fill(W, (size_t)64 * K, 72, 0.1f);
    gemm_int8_smoothing(t, lw, lb, W, K, 64);
    for (int k = 0; k < K; k++) x[2 * K + k] = 0.0f;
    x[4 * K + 9] = NAN;
    k_quantize_rows_int8(q, scale, x, t, M, K);
    int ties = 0;
    for (int i = 0; i < M; i++) {
        if (i == 4) {
            CHECKF(isnan(scale[i]), "row with a NaN: scale %g", scale[i]);
            continue;
        }
        double amax = 0;
        for (int k = 0; k < K; k++) amax = fmax(amax, fabs((double)x[i * K + k] / t[k]));
        const double s = amax / 127;
        CHECKF(fabs(scale[i] - s) <= 3 * F32_UNIT_ROUNDOFF * s, "row %d: scale %.9g, exact %.9g", i, scale[i], s);
        for (int k = 0; k < K && s > 0; k++) {
            const double v = (double)x[i * K + k] / t[k] / s, r = nearbyint(v);
            const double slack = 6 * F32_UNIT_ROUNDOFF * (fabs(v) + 127);
            const bool near_half = fabs(fabs(v - trunc(v)) - 0.5) <= slack;
            if (q[i * K + k] != r) {
                ties++;
                CHECKF(near_half && fabs(q[i * K + k] - r) == 1, "row %d col %d: q %d, exact round(%.9g) = %.0f", i, k,
                       q[i * K + k], v, r);
            }
        }
        if (s == 0)
            for (int k = 0; k < K; k++) CHECK(q[i * K + k] == 0);
    }
    CHECKF(ties <= 5, "%d values off the exact reference at halves", ties);
    free(x), free(W), free(scale), free(q);
}

/* The smoothed product against the unsmoothed math, x.w in double: the quantized operands
 * are y = x / t (row scale r) and w' = w t (channel scale s'), whose product is x.w's in exact
 * arithmetic, so the bound is test_against_fp32's for them,
 *   (s'/2) sum|y| + (r/2) sum|w'| + K r s' / 4,
 * plus y's two fp32 roundings (x fl(1/t)) and w''s one (3u sum|x w|) and the sums' (2 gamma_K
 * sum|x w|). Through k_matmul_forward_int8, which smooths its fp32 input itself; on a LayerNorm-like input with
 * outlier channels, where smoothing is for: its error norm-wise is printed beside the
 * unsmoothed one's and must be smaller. */
static void test_smoothed_against_fp32(void) {
    enum { M = 29, N = 72, K = 200 };
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K), lw[K], lb[K];
    float *o8 = malloc(sizeof(float) * M * N), *o_plain = malloc(sizeof(float) * M * N), *xs = malloc(sizeof(float) * M);
    int8_t *qx = malloc((size_t)M * K);
    fill(W, (size_t)N * K, 81, 0.1f);
    layernorm_like(X, lw, lb, M, K, 82);
    void *packed = k_alloc(k_packed_weight_bytes_int8(K, N)), *plain = k_alloc(k_packed_weight_bytes_int8(K, N));
    k_pack_weight_int8(packed, W, &(KInt8Smoothing){.ln_w = lw, .ln_b = lb}, K, N);
    k_pack_weight_int8(plain, W, NULL, K, N);
    const float *t = k_int8_smoothing(packed), *ws = gemm_int8_weight_scales(packed);
    k_matmul_forward_int8(o8, X, packed, NULL, M, K, N, false, ACT_GELU);
    k_matmul_forward_int8(o_plain, X, plain, NULL, M, K, N, false, ACT_GELU);
    k_quantize_rows_int8(qx, xs, X, t, M, K);
    double worst = 0, err2 = 0, plain2 = 0, ref2 = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double exact = 0, sy = 0, sw = 0, sxw = 0;
            for (int k = 0; k < K; k++) {
                const double x = X[(size_t)i * K + k], w = W[(size_t)j * K + k];
                exact += x * w, sy += fabs(x / t[k]), sw += fabs(w * t[k]), sxw += fabs(x * w);
            }
            const double u = F32_UNIT_ROUNDOFF;
            const double bound = ws[j] / 2 * sy * (1 + u) + xs[i] / 2 * sw * (1 + u) + K * (double)xs[i] * ws[j] / 4 +
                                 (3 * u + 2 * gamma_k(K)) * sxw;
            const double d = fabs(o8[(size_t)i * N + j] - exact), dp = o_plain[(size_t)i * N + j] - exact;
            worst = fmax(worst, d / bound), err2 += d * d, plain2 += dp * dp, ref2 += exact * exact;
        }
    CHECKF(worst <= 1, "smoothed int8 against fp32: %.3g of the quantization bound", worst);
    CHECKF(err2 < plain2, "smoothing did not help on outlier channels: %.3g vs %.3g", sqrt(err2 / ref2),
           sqrt(plain2 / ref2));
    printf("    smoothed int8 vs exact: worst %.2f of the bound, %.2g norm-wise (unsmoothed %.2g)\n", worst,
           sqrt(err2 / ref2), sqrt(plain2 / ref2));
    /* the same numbers from rows quantized first (the producers' way) */
    k_matmul_forward_int8_rows(&(KInt8Output){.out = o_plain}, qx, xs, packed, NULL, M, K, N);
    CHECKF(!memcmp(o8, o_plain, sizeof(float) * M * N), "smoothed: quantized rows' product differs from the fp32 input's");
    k_free(packed), k_free(plain);
    free(W), free(X), free(o8), free(o_plain), free(xs), free(qx);
}

/* ---- the products on rows already quantized, and their epilogues ----
 * k_matmul_forward_int8_rows computes v = float(sum) (r s) + bias (+ residual) with the same
 * fp32 operations as the plain product (k_matmul_forward_int8, whose numbers the tests above
 * check) and only then stores v in another form, so each form is checked bit for bit against
 * the plain product followed by the separate step it replaces: bf16 rounding (k_to_half), the
 * residual added in fp32, LayerNorm (k_layernorm_forward), quantization (k_quantize_rows_int8).
 * M = 300 rows of N = 200 (not a multiple of the 16-wide loops) run in several blocks of rows,
 * on each thread. */
static int bits_differ(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) != 0; }

static void check_epilogues(int M, int N, int K, Activation act, uint64_t seed) {
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * N);
    /* the outputs in backend memory (64-byte aligned, as the model's activations): what is
     * streamed past the caches must be aligned */
    float *res = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N), *out = k_alloc(sizeof(float) * M * N);
    float *xs = malloc(sizeof(float) * M), *qs = malloc(sizeof(float) * M), *qs_ref = malloc(sizeof(float) * M);
    float *lw = malloc(sizeof(float) * N), *lb = malloc(sizeof(float) * N), *sum = malloc(sizeof(float) * M * N);
    float *mean = malloc(sizeof(float) * M), *rstd = malloc(sizeof(float) * M), *mean_ref = malloc(sizeof(float) * M);
    float *rstd_ref = malloc(sizeof(float) * M), *ln_ref = malloc(sizeof(float) * M * N);
    int8_t *qx = malloc((size_t)M * K), *q = malloc((size_t)M * N), *q_ref = malloc((size_t)M * N);
    uint16_t *h = k_alloc(sizeof(uint16_t) * M * N), *h_ref = malloc(sizeof(uint16_t) * M * N);
    float *sm = malloc(sizeof(float) * N);   /* a next product's smoothing factors, in [0.2, 3.8] */
    fill(sm, N, seed + 6, 1.8f);
    for (int j = 0; j < N; j++) sm[j] += 2.0f;
    fill(W, (size_t)N * K, seed, 0.1f), fill(X, (size_t)M * K, seed + 1, 2.0f), fill(b, N, seed + 2, 0.5f);
    fill(res, (size_t)M * N, seed + 3, 3.0f), fill(lw, N, seed + 4, 1.0f), fill(lb, N, seed + 5, 0.2f);
    void *packed = k_alloc(k_packed_weight_bytes_int8(K, N));
    k_pack_weight_int8(packed, W, NULL, K, N);
    k_quantize_rows_int8(qx, xs, X, NULL, M, K);
    /* bf16, no activation (QKV for attention) */
    k_matmul_forward_int8(ref, X, packed, b, M, K, N, false, act);
    k_to_half(HALF_BF16, h_ref, ref, (long)M * N);
    k_matmul_forward_int8_rows(&(KInt8Output){.out16 = h}, qx, xs, packed, b, M, K, N);
    CHECKF(!bits_differ(h, h_ref, sizeof(uint16_t) * M * N), "M=%d N=%d K=%d: bf16 output differs", M, N, K);
    /* the activation, quantized (the feed-forward's first product) */
    k_matmul_forward_int8(ref, X, packed, b, M, K, N, true, act);
    k_quantize_rows_int8(q_ref, qs_ref, ref, NULL, M, N);
    k_matmul_forward_int8_rows(&(KInt8Output){.q8 = q, .q8_scale = qs, .act_on = true, .act = act}, qx, xs, packed, b, M,
                               K, N);
    CHECKF(!bits_differ(q, q_ref, (size_t)M * N) && !bits_differ(qs, qs_ref, sizeof(float) * M),
           "M=%d N=%d K=%d act %d: quantized activation differs", M, N, K, (int)act);
    /* ... smoothed by the next product's factors first (times their reciprocals) */
    k_quantize_rows_int8(q_ref, qs_ref, ref, sm, M, N);
    k_matmul_forward_int8_rows(&(KInt8Output){.q8 = q, .q8_scale = qs, .q8_smooth = sm, .act_on = true, .act = act},
                               qx, xs, packed, b, M, K, N);
    CHECKF(!bits_differ(q, q_ref, (size_t)M * N) && !bits_differ(qs, qs_ref, sizeof(float) * M),
           "M=%d N=%d K=%d act %d: smoothed quantized activation differs", M, N, K, (int)act);
    /* + residual in fp32 */
    k_matmul_forward_int8(ref, X, packed, b, M, K, N, false, act);
    for (size_t i = 0; i < (size_t)M * N; i++) sum[i] = ref[i] + res[i];
    k_matmul_forward_int8_rows(&(KInt8Output){.out = out, .residual = res}, qx, xs, packed, b, M, K, N);
    CHECKF(!bits_differ(out, sum, sizeof(float) * M * N), "M=%d N=%d K=%d: output + residual differs", M, N, K);
    /* + residual, LayerNorm, quantized (the attention output and second feed-forward products) */
    k_layernorm_forward(ln_ref, NULL, mean_ref, rstd_ref, sum, NULL, lw, lb, M, N, 1e-12f);
    k_quantize_rows_int8(q_ref, qs_ref, ln_ref, NULL, M, N);
    const KInt8Output ln = {.out = out, .residual = res, .q8 = q, .q8_scale = qs, .ln_w = lw, .ln_b = lb,
                            .ln_eps = 1e-12f, .ln_mean = mean, .ln_rstd = rstd};
    k_matmul_forward_int8_rows(&ln, qx, xs, packed, b, M, K, N);
    CHECKF(!bits_differ(out, ln_ref, sizeof(float) * M * N) && !bits_differ(mean, mean_ref, sizeof(float) * M) &&
               !bits_differ(rstd, rstd_ref, sizeof(float) * M),
           "M=%d N=%d K=%d: LayerNorm in the epilogue differs from k_layernorm_forward", M, N, K);
    CHECKF(!bits_differ(q, q_ref, (size_t)M * N) && !bits_differ(qs, qs_ref, sizeof(float) * M),
           "M=%d N=%d K=%d: LayerNorm's output quantized differs", M, N, K);
    /* the LayerNorm's output smoothed by the next product's factors, then quantized (the
     * smoothed QKV and FFN in products' inputs); the output itself (the residual) unchanged */
    k_quantize_rows_int8(q_ref, qs_ref, ln_ref, sm, M, N);
    KInt8Output ln_sm = ln;
    ln_sm.q8_smooth = sm;
    k_matmul_forward_int8_rows(&ln_sm, qx, xs, packed, b, M, K, N);
    CHECKF(!bits_differ(out, ln_ref, sizeof(float) * M * N) && !bits_differ(q, q_ref, (size_t)M * N) &&
               !bits_differ(qs, qs_ref, sizeof(float) * M),
           "M=%d N=%d K=%d: LayerNorm's output, smoothed and quantized, differs", M, N, K);
    /* no bias, the LayerNorm output without quantizing it */
    k_matmul_forward_int8(ref, X, packed, NULL, M, K, N, false, act);
    for (size_t i = 0; i < (size_t)M * N; i++) sum[i] = ref[i] + res[i];
    k_layernorm_forward(ln_ref, NULL, mean_ref, rstd_ref, sum, NULL, lw, lb, M, N, 1e-12f);
    k_matmul_forward_int8_rows(&(KInt8Output){.out = out, .residual = res, .ln_w = lw, .ln_b = lb, .ln_eps = 1e-12f,
                                              .ln_mean = mean, .ln_rstd = rstd},
                               qx, xs, packed, NULL, M, K, N);
    CHECKF(!bits_differ(out, ln_ref, sizeof(float) * M * N), "M=%d N=%d K=%d: LayerNorm without bias differs", M, N, K);
    k_free(packed);
    free(W), free(X), free(b), free(res), free(ref), k_free(out), free(xs), free(qs), free(qs_ref), free(lw), free(lb);
    free(sum), free(mean), free(rstd), free(mean_ref), free(rstd_ref), free(ln_ref), free(qx), free(q), free(q_ref);
    k_free(h), free(h_ref), free(sm);
}

static void test_epilogues(void) {
    check_epilogues(300, 200, 96, ACT_GELU, 41);
    check_epilogues(7, 33, 40, ACT_GELU_NEW, 42);     /* one block, tails everywhere */
    check_epilogues(1, 768, 64, ACT_GELU, 43);        /* one row */
    check_epilogues(520, 96, 3072 / 8, ACT_GELU, 44); /* rows in blocks of 64 and more */
    check_epilogues(150, 1000, 64, ACT_GELU, 45);     /* wide rows */
    /* outputs larger than the threads' L2 caches together, even in bf16: stored past the caches
     * (Int8Epilogue.stream), the same bits */
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE) > 0 ? sysconf(_SC_LEVEL2_CACHE_SIZE) : 1L << 20;
    check_epilogues((int)(l2 * omp_get_max_threads() / (2 * 1024)) + 40, 1024, 64, ACT_GELU, 46);
}

/* The model's int8 products on bert.c's AMX loop and on oneDNN's kernels give the same bits
 * through every epilogue (the int32 sums are exact both ways): bf16, GELU quantized (the column
 * panels where the threads split them), + residual, LayerNorm quantized (the rows' blocks, with
 * a tail of 16 rows: the loop's single row tile). */
static void test_own_amx_same_bits(void) {
    if (!gemm_int8_own_amx()) {
        printf("  (no AMX loop on this CPU: oneDNN runs every product)\n");
        return;
    }
    enum { M = 144, K = 192, N = 256 };
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * N);
    float *res = malloc(sizeof(float) * M * N), *lw = malloc(sizeof(float) * N), *xs = malloc(sizeof(float) * M);
    int8_t *qx = malloc((size_t)M * K);
    float *out[2], *qs[2], *stats[2];
    int8_t *q[2];
    uint16_t *h[2];
    for (int k = 0; k < 2; k++) {
        out[k] = malloc(sizeof(float) * M * N), qs[k] = malloc(sizeof(float) * M), stats[k] = malloc(sizeof(float) * 2 * M);
        q[k] = malloc((size_t)M * N), h[k] = malloc(sizeof(uint16_t) * M * N);
    }
    fill(W, (size_t)N * K, 81, 0.1f), fill(X, (size_t)M * K, 82, 2.0f), fill(b, N, 83, 0.5f);
    fill(res, (size_t)M * N, 84, 3.0f), fill(lw, N, 85, 1.0f);
    void *packed = k_alloc(k_packed_weight_bytes_int8(K, N));
    k_pack_weight_int8(packed, W, NULL, K, N);
    k_quantize_rows_int8(qx, xs, X, NULL, M, K);
    for (int k = 0; k < 2; k++) {   /* k 0: oneDNN's kernels; 1: the AMX loop */
        amx_set_enabled(k);
        k_matmul_forward_int8_rows(&(KInt8Output){.out16 = h[k]}, qx, xs, packed, b, M, K, N);
        k_matmul_forward_int8_rows(&(KInt8Output){.q8 = q[k], .q8_scale = qs[k], .act_on = true, .act = ACT_GELU}, qx,
                                   xs, packed, b, M, K, N);
    }
    CHECK(!bits_differ(h[0], h[1], sizeof(uint16_t) * M * N));
    CHECK(!bits_differ(q[0], q[1], (size_t)M * N) && !bits_differ(qs[0], qs[1], sizeof(float) * M));
    for (int k = 0; k < 2; k++) {
        amx_set_enabled(k);
        const KInt8Output ln = {.out = out[k], .residual = res, .q8 = q[k], .q8_scale = qs[k], .ln_w = lw,
                                .ln_b = b, .ln_eps = 1e-12f, .ln_mean = stats[k], .ln_rstd = stats[k] + M};
        k_matmul_forward_int8_rows(&ln, qx, xs, packed, b, M, K, N);
    }
    CHECK(!bits_differ(out[0], out[1], sizeof(float) * M * N) && !bits_differ(stats[0], stats[1], sizeof(float) * 2 * M));
    CHECK(!bits_differ(q[0], q[1], (size_t)M * N) && !bits_differ(qs[0], qs[1], sizeof(float) * M));
    amx_set_enabled(true);
    k_free(packed);
    for (int k = 0; k < 2; k++) free(out[k]), free(qs[k]), free(stats[k]), free(q[k]), free(h[k]);
    free(W), free(X), free(b), free(res), free(lw), free(xs), free(qx);
}

/* gemm_int8_rows shares a product between threads in two ways: by rows (always, with one
 * thread) and, where gemm_int8_column_panels says so, by the weight's columns (each thread its
 * panel; the rows' maxima combined before quantizing). Every epilogue gives the same bits both ways: bf16, the activation
 * quantized (plain and smoothed), fp32 + residual, LayerNorm and its output quantized, over
 * blocks of 64 rows with a tail and one short block. */
static void check_column_panels(int M, int N, int K, Activation act, uint64_t seed) {
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * N);
    float *res = malloc(sizeof(float) * M * N), *sm = malloc(sizeof(float) * N), *xs = malloc(sizeof(float) * M);
    float *out[2], *qs[2];
    int8_t *qx = malloc((size_t)M * K), *q[2];
    uint16_t *h[2];
    fill(W, (size_t)N * K, seed, 0.1f), fill(X, (size_t)M * K, seed + 1, 2.0f), fill(b, N, seed + 2, 0.5f);
    fill(res, (size_t)M * N, seed + 3, 3.0f), fill(sm, N, seed + 4, 1.8f);
    for (int j = 0; j < N; j++) sm[j] += 2.0f;
    X[(M / 2) * K + 3] = 40.0f;   /* one row's input far from the others: its maximum in one panel */
    for (int k = 0; k < 2; k++) {
        out[k] = malloc(sizeof(float) * M * N), qs[k] = malloc(sizeof(float) * M);
        q[k] = malloc((size_t)M * N), h[k] = malloc(sizeof(uint16_t) * M * N);
    }
    void *packed = k_alloc(k_packed_weight_bytes_int8(K, N));
    k_pack_weight_int8(packed, W, NULL, K, N);
    k_quantize_rows_int8(qx, xs, X, NULL, M, K);
    const int threads = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {   /* k 0: one thread (rows); 1: all (panels) */
        omp_set_num_threads(k ? threads : 1);
        k_matmul_forward_int8_rows(&(KInt8Output){.out16 = h[k]}, qx, xs, packed, b, M, K, N);
    }
    CHECKF(!bits_differ(h[0], h[1], sizeof(uint16_t) * M * N), "M=%d N=%d K=%d: bf16 output differs", M, N, K);
    for (int smooth = 0; smooth < 2; smooth++) {
        for (int k = 0; k < 2; k++) {
            omp_set_num_threads(k ? threads : 1);
            k_matmul_forward_int8_rows(&(KInt8Output){.q8 = q[k], .q8_scale = qs[k], .q8_smooth = smooth ? sm : NULL,
                                                      .act_on = true, .act = act},
                                       qx, xs, packed, b, M, K, N);
        }
        CHECKF(!bits_differ(q[0], q[1], (size_t)M * N) && !bits_differ(qs[0], qs[1], sizeof(float) * M),
               "M=%d N=%d K=%d act %d smoothed %d: quantized activation differs", M, N, K, (int)act, smooth);
    }
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k ? threads : 1);
        k_matmul_forward_int8_rows(&(KInt8Output){.out = out[k], .residual = res}, qx, xs, packed, NULL, M, K, N);
    }
    CHECKF(!bits_differ(out[0], out[1], sizeof(float) * M * N), "M=%d N=%d K=%d: output + residual differs", M, N, K);
    /* + residual, LayerNorm, quantized: the rows' split both ways (panels never take LayerNorm) */
    float *lw = malloc(sizeof(float) * N), *lb = malloc(sizeof(float) * N), *stats = malloc(sizeof(float) * 4 * M);
    fill(lw, N, seed + 5, 1.0f), fill(lb, N, seed + 6, 0.2f);
    for (int smooth = 0; smooth < 2; smooth++) {
        for (int k = 0; k < 2; k++) {
            omp_set_num_threads(k ? threads : 1);
            const KInt8Output ln = {.out = out[k], .residual = res, .q8 = q[k], .q8_scale = qs[k],
                                    .q8_smooth = smooth ? sm : NULL, .ln_w = lw, .ln_b = lb, .ln_eps = 1e-12f,
                                    .ln_mean = stats + 2 * k * M, .ln_rstd = stats + (2 * k + 1) * M};
            k_matmul_forward_int8_rows(&ln, qx, xs, packed, b, M, K, N);
        }
        CHECKF(!bits_differ(out[0], out[1], sizeof(float) * M * N) &&
                   !bits_differ(stats, stats + 2 * M, sizeof(float) * 2 * M),
               "M=%d N=%d K=%d smoothed %d: LayerNorm differs", M, N, K, smooth);
        CHECKF(!bits_differ(q[0], q[1], (size_t)M * N) && !bits_differ(qs[0], qs[1], sizeof(float) * M),
               "M=%d N=%d K=%d smoothed %d: LayerNorm's output quantized differs", M, N, K, smooth);
    }
    free(lw), free(lb), free(stats);
    omp_set_num_threads(threads);
    k_free(packed);
    for (int k = 0; k < 2; k++) free(out[k]), free(qs[k]), free(q[k]), free(h[k]);
    free(W), free(X), free(b), free(res), free(sm), free(xs), free(qx);
}

static void test_column_panels(void) {
    const int threads = omp_get_max_threads();
    if (!gemm_int8_column_panels(96, 64 * threads, threads)) {
        printf("  (column panels: not with oneDNN's packing on this CPU (AMX's only) or %d thread%s; the rows' split "
               "is tested above)\n", threads, threads == 1 ? "" : "s");
        return;
    }
    check_column_panels(300, 128 * threads, 96, ACT_GELU, 61);       /* 4 blocks and a tail of 44 */
    check_column_panels(5, 64 * threads, 3072 / 8, ACT_GELU_NEW, 62); /* one short block; the tanh GELU */
    check_column_panels(70, 192 * threads, 200, ACT_GELU, 63);   /* K not a multiple of 64 */
}

/* k_int8_product_counters: the products of k_matmul_forward_int8_rows counted with the rows
 * each was made for (M = 300 in blocks of 64: four and a tail of 44 rounded up to 48, whether
 * the threads split the rows or the weight's columns), some time spent in them, and zero after
 * a reset. */
static void test_product_counters(void) {
    const int M = 300, N = 128 * omp_get_max_threads(), K = 96;
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K), *xs = malloc(sizeof(float) * M);
    float *lw = malloc(sizeof(float) * N), *lb = malloc(sizeof(float) * N), *res = malloc(sizeof(float) * M * N);
    float *out = k_alloc(sizeof(float) * M * N), *mean = malloc(sizeof(float) * M), *rstd = malloc(sizeof(float) * M);
    int8_t *qx = malloc((size_t)M * K);
    uint16_t *h = k_alloc(sizeof(uint16_t) * M * N);
    fill(W, (size_t)N * K, 71, 0.1f), fill(X, (size_t)M * K, 72, 2.0f), fill(res, (size_t)M * N, 73, 1.0f);
    for (int j = 0; j < N; j++) lw[j] = 1.0f, lb[j] = 0.0f;
    void *packed = k_alloc(k_packed_weight_bytes_int8(K, N));
    k_pack_weight_int8(packed, W, NULL, K, N);
    k_quantize_rows_int8(qx, xs, X, NULL, M, K);
    const double expected = 2.0 * (4 * 64 + 48) * N * K;
    const KInt8Output outputs[2] = {{.out16 = h},   /* column panels where the CPU allows */
                                    {.out = out, .residual = res, .ln_w = lw, .ln_b = lb, .ln_eps = 1e-12f,
                                     .ln_mean = mean, .ln_rstd = rstd}};   /* the rows' split */
    for (int i = 0; i < 2; i++) {
        double seconds = -1, ops = -1;
        k_int8_product_counters(NULL, NULL, true);
        k_matmul_forward_int8_rows(&outputs[i], qx, xs, packed, NULL, M, K, N);
        k_int8_product_counters(&seconds, &ops, true);
        CHECKF(ops == expected && seconds > 0, "output %d: %.0f operations counted (expected %.0f), %g s", i, ops,
               expected, seconds);
        k_int8_product_counters(&seconds, &ops, false);
        CHECK(seconds == 0 && ops == 0);
    }
    k_free(packed), k_free(out), k_free(h);
    free(W), free(X), free(xs), free(lw), free(lb), free(res), free(mean), free(rstd), free(qx);
}

/* kernels/cpu/team.h: inside a region of ours, active or made inactive by its if clause (where
 * omp_in_parallel() is 0 and oneDNN would start a nested team), a library's product sees one
 * thread; outside, the library's own count; the caller's count comes back after. Then a
 * one-block product (the rows' split runs it in an inactive region) inside and outside such a
 * region: the same bits. */
static void test_library_team(void) {
    const int threads = omp_get_max_threads();
    const int outside = library_team_begin();
    CHECK(outside == 0 && omp_get_max_threads() == threads);
    library_team_end(outside);
    for (int active = 0; active < 2; active++) {
        int saw = -1, saved = -1, after = -1;
#pragma omp parallel num_threads(2) if (active)
        if (omp_get_thread_num() == 0) {
            const int before = omp_get_max_threads();
            saved = library_team_begin();
            saw = omp_get_max_threads();
            library_team_end(saved);
            after = omp_get_max_threads() == before;
        }
        CHECKF(saw == 1 && after == 1 && (threads == 1 || saved > 1), "active %d: a library saw %d threads", active, saw);
    }
    enum { M = 8, N = 128, K = 96 };
    float *W = malloc(sizeof(float) * N * K), *X = malloc(sizeof(float) * M * K), *xs = malloc(sizeof(float) * M);
    float *out = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N);
    int8_t *qx = malloc((size_t)M * K);
    fill(W, (size_t)N * K, 71, 0.1f), fill(X, (size_t)M * K, 72, 1.0f);
    void *packed = k_alloc(k_packed_weight_bytes_int8(K, N));
    k_pack_weight_int8(packed, W, NULL, K, N);
    k_quantize_rows_int8(qx, xs, X, NULL, M, K);
    k_matmul_forward_int8_rows(&(KInt8Output){.out = ref}, qx, xs, packed, NULL, M, K, N);
#pragma omp parallel num_threads(2) if (0)
    k_matmul_forward_int8_rows(&(KInt8Output){.out = out}, qx, xs, packed, NULL, M, K, N);
    CHECK(!bits_differ(out, ref, sizeof(float) * M * N));
    CHECK(omp_get_max_threads() == threads);
    k_free(packed), free(W), free(X), free(xs), free(out), free(ref), free(qx);
}

/* Attention's context quantized in attention (AttentionArgs.ctx_q8) is k_quantize_rows_int8 of
 * the context it writes, which is the context written without it: by whole sequences (batch
 * of at least twice the threads) and after the (sequence, head) blocks (batch 1), padded and
 * packed, fp32 and bf16 products (d 16: bf16 runs the heads in groups, attention_group); and
 * the same int8 rows where ctx need not be written (ctx_q8_only: by whole sequences, each row
 * gathered from the heads' contexts and quantized, ctx left as it was). */
static void check_attention_ctx(int B, bool packed, bool half, int d) {
    enum { T = 12, A = 2 };
    const int H = A * d;
    int32_t kv_len[8], mask[8 * T], seq_row[8], seq_rows[8];
    uint8_t holes[8];
    int rows = 0;
    for (int s = 0; s < B; s++) {
        kv_len[s] = T - (s * 5) % 7, holes[s] = s % 3 == 1;
        for (int t = 0; t < T; t++) mask[s * T + t] = t < kv_len[s] && !(holes[s] && t == 2);
        seq_row[s] = rows, seq_rows[s] = packed ? kv_len[s] : T, rows += seq_rows[s];
    }
    float *qkv = malloc(sizeof(float) * B * T * 3 * H), *ctx = malloc(sizeof(float) * B * T * H);
    float *ctx_ref = malloc(sizeof(float) * B * T * H), *scale = malloc(sizeof(float) * B * T);
    float *scale_ref = malloc(sizeof(float) * B * T);
    int8_t *q = malloc((size_t)B * T * H), *q_ref = malloc((size_t)B * T * H);
    uint16_t *qkv16 = malloc(sizeof(uint16_t) * B * T * 3 * H);
    fill(qkv, (size_t)B * T * 3 * H, 50 + B, 2.0f);
    k_to_half(HALF_BF16, qkv16, qkv, (long)B * T * 3 * H);
    AttentionArgs a = {.B = B, .T = T, .A = A, .d = d, .kv_len = kv_len, .mask = mask, .has_holes = holes,
                       .seq_row = packed ? seq_row : NULL, .seq_rows = packed ? seq_rows : NULL, .half = half,
                       .half_mode = HALF_BF16, .qkv16 = half ? qkv16 : NULL};
    k_attention_forward(ctx_ref, NULL, qkv, &a);
    k_quantize_rows_int8(q_ref, scale_ref, ctx_ref, NULL, rows, H);
    a.ctx_q8 = q, a.ctx_q8_scale = scale;
    k_attention_forward(ctx, NULL, qkv, &a);
    CHECKF(!bits_differ(ctx, ctx_ref, sizeof(float) * rows * H), "B=%d packed %d half %d: ctx differs", B, packed, half);
    CHECKF(!bits_differ(q, q_ref, (size_t)rows * H) && !bits_differ(scale, scale_ref, sizeof(float) * rows),
           "B=%d packed %d half %d: ctx quantized in attention differs from k_quantize_rows_int8", B, packed, half);
    memset(q, 0, (size_t)rows * H), memset(scale, 0, sizeof(float) * rows);
    for (int i = 0; i < rows * H; i++) ctx[i] = -7.0f;
    a.ctx_q8_only = true;
    k_attention_forward(ctx, NULL, qkv, &a);
    CHECKF(!bits_differ(q, q_ref, (size_t)rows * H) && !bits_differ(scale, scale_ref, sizeof(float) * rows),
           "B=%d packed %d half %d: ctx_q8_only: the int8 rows differ", B, packed, half);
    if (B >= 2 * omp_get_max_threads() && half && k_bf16_native_available())
        CHECKF(ctx[0] == -7.0f && ctx[rows * H - 1] == -7.0f, "B=%d packed %d: ctx_q8_only: ctx written", B, packed);
    free(qkv), free(ctx), free(ctx_ref), free(scale), free(scale_ref), free(q), free(q_ref), free(qkv16);
}

static void test_attention_quantized_ctx(void) {
    for (int half = 0; half < 2 && (half == 0 || k_bf16_native_available()); half++)
        for (int packed = 0; packed < 2; packed++) {
            check_attention_ctx(8, packed, half, 16);
            check_attention_ctx(1, packed, half, 16);
            check_attention_ctx(8, packed, half, 64);   /* bf16: on AMX CPUs bert.c's tile loop */
            check_attention_ctx(1, packed, half, 64);
        }
}

/* ---- the model ---- */

enum { MB = 3, MT = 24, MP = 4, MV = 1000 };

static BertModel *small_model(BertPrecision precision) {
    BertConfig c;
    BertError err;
    if (bert_config_preset("bert-mini", &c, &err)) { CHECKF(0, "%s", err.msg); return NULL; }
    c.vocab_size = MV, c.num_hidden_layers = 2;
    BertModel *m = NULL;
    if (bert_model_create(&m, &c, MB, MT, MP, &err)) { CHECKF(0, "%s", err.msg); return NULL; }
    bert_init_weights(m, 5);
    if (bert_set_precision(m, precision, &err)) { CHECKF(0, "%s", err.msg); bert_model_free(m); return NULL; }
    return m;
}

/* The model's bound, norm-wise. Quantizing a row x of K values with step r = max|x|/L
 * moves each element by at most r/2, so ||dx||_2 <= sqrt(K) max|x| / 2L <= sqrt(K) ||x||_2 / 2L:
 * a relative perturbation of at most sqrt(K)/2L of each operand (L = 127 for the inputs'
 * rows, the weights' levels for each output channel's). A product's two operands give at most the sum of the two
 * relative errors (to first order), and, as in the 16-bit test (test_bf16.c), the stages'
 * errors add along the chain to first order, LayerNorm renormalising each sublayer. The chain
 * of the MLM logits: per layer QKV (K = H), attention output (K = H), the feed-forward's two
 * products (K = H, then K = I); then the MLM transform (K = H). Attention's two products run in
 * bf16 where the CPU has bf16 instructions, as the bf16 model runs them (Q, K, V stored in bf16
 * by the QKV product, the probabilities rounded): 2u per product on the chain (u = 2^-8, as
 * test_bf16.c bounds them); else in fp32. The decoder stays fp32 (its fp32 reordering,
 * chain_reorder_tolerance, is far below). */
static double int8_chain_tolerance(const BertConfig *c, double spread) {
    const double per_step = 1.0 / 254 + 1.0 / (2 * gemm_int8_weight_levels());   /* input's + weight's */
    const double h = sqrt((double)c->hidden_size) * per_step, i = sqrt((double)c->intermediate_size) * per_step;
    const double attention = k_bf16_native_available() ? 2 * (2 * 0x1p-8) : 0;
    /* QKV and FFN in are smoothed: their two terms times the factors' spread (test_int8_util.h) */
    return c->num_hidden_layers * ((2 * spread + 1) * h + i + attention) + h + chain_reorder_tolerance(2000);
}

/* Every producer's quantization of an int8 product's input, seen through the model's test
 * hook (TEST_HOOK_INT8_INPUT): the rows are k_quantize_rows_int8 of the fp32 rows they were
 * made from, divided by the factors the product's weight was smoothed with (QKV: the
 * embeddings' LayerNorm for layer 0, the previous layer's second for the others; FFN in: the
 * layer's first LayerNorm), or by none (attention output), bit for bit. */
static struct {
    const float *weight[16];
    float *t[16];
    int n, checked, wrong, unsmoothed;
} hook8;

static void check_int8_input(const float *weight, const float *x, const int8_t *q, const float *scale, int rows, int cols) {
    if (!x) return;   /* the feed-forward's activation: no fp32 copy (its epilogue is test_epilogues') */
    const float *t = NULL;
    for (int i = 0; i < hook8.n; i++)
        if (hook8.weight[i] == weight) t = hook8.t[i];
    int8_t *q_ref = malloc((size_t)rows * cols);
    float *s_ref = malloc(sizeof(float) * rows);
    k_quantize_rows_int8(q_ref, s_ref, x, t, rows, cols);
    hook8.checked++, hook8.unsmoothed += t == NULL;
    hook8.wrong += memcmp(q, q_ref, (size_t)rows * cols) != 0 || memcmp(scale, s_ref, sizeof(float) * rows) != 0;
    free(q_ref), free(s_ref);
}

static void watch_int8_inputs(const BertModel *m) {
    const BertConfig *c = bert_model_config(m);
    for (int i = 0; i < hook8.n; i++) free(hook8.t[i]);
    memset(&hook8, 0, sizeof hook8);
    for (int l = 0; l < c->num_hidden_layers && hook8.n + 2 <= 16; l++)
        for (int ffn = 0; ffn < 2; ffn++) {
            hook8.t[hook8.n] = malloc(sizeof(float) * c->hidden_size);
            if (expected_factors(m, l, ffn, hook8.t[hook8.n], &hook8.weight[hook8.n])) hook8.n++;
            else free(hook8.t[hook8.n]);
        }
    test_hook_int8_input = check_int8_input;
}

static void test_model_against_fp32(void) {
    BertModel *ref = small_model(BERT_FP32), *m = small_model(BERT_INT8);
    if (!ref || !m) return;
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, MV, 0.2, 9);
    const BertConfig *c = bert_model_config(m);
    const size_t nl = (size_t)MB * MP * MV;
    float l32 = bert_forward(ref, &s.train, false, 0), l8 = bert_forward(m, &s.train, false, 0);
    const double spread = smoothing_spread(m), tol = int8_chain_tolerance(c, spread);
    float *logits = malloc(sizeof(float) * nl);
    memcpy(logits, bert_mlm_logits(m), sizeof(float) * nl);
    const double e = rel_norm_error(logits, bert_mlm_logits(ref), nl);
    CHECKF(e <= tol, "MLM logits: %.3g relative to fp32 (tolerance %.3g)", e, tol);
    CHECKF(fabs(l8 - l32) <= tol * fabs(l32), "loss %.6f vs fp32 %.6f (tolerance %.3g relative)", l8, l32, tol);
    CHECKF(e > 1e-5, "int8 logits equal fp32's to %.3g: no quantization happened", e);
    printf("    loss %.6f vs %.6f, MLM logits %.2g relative (tolerance %.2g; factors' spread %.2f)\n", l8, l32, e, tol,
           spread);
    /* packed rows (unpadding) and every row (padded): the real tokens' outputs agree up to fp32
     * reordering outside the products (each row is quantized on its own) */
    const int H = c->hidden_size;
    bert_set_unpadding(m, true);
    bert_forward(m, &s.train, false, 0);
    float *a = malloc(sizeof(float) * H), *b = malloc(sizeof(float) * H);
    double worst = 0;
    BertModel *padded = small_model(BERT_INT8);
    bert_set_unpadding(padded, false);
    bert_forward(padded, &s.train, false, 0);
    for (int q = 0; q < MB; q++)
        for (int t = 0; t < MT; t++) {
            if (!s.train.attention_mask[q * MT + t]) continue;
            if (!bert_read_token_output(m, q, t, a) || !bert_read_token_output(padded, q, t, b)) continue;
            worst = fmax(worst, rel_norm_error(a, b, H));
        }
    const double tol_rows = chain_reorder_tolerance(2000);
    CHECKF(worst <= tol_rows, "packed vs padded rows in int8: %.3g (tolerance %.3g)", worst, tol_rows);
    /* inference only */
    CHECKF(isnan(bert_forward(m, &s.train, true, 1)) && strstr(bert_last_error(m), "int8"),
           "a training forward in int8: %s", bert_last_error(m));
    bert_forward(m, &s.train, false, 0);
    CHECKF(bert_backward(m, &s.train) != 0 && strstr(bert_last_error(m), "int8"), "a backward in int8: %s",
           bert_last_error(m));
    /* the weights follow the fp32 master copy; back to fp32 gives fp32's numbers */
    CHECK(bert_set_precision(m, BERT_FP32, NULL) == 0);
    CHECK(bert_forward(m, &s.train, false, 0) == bert_forward(ref, &s.train, false, 0));
    free(logits), free(a), free(b);
    synthetic_batch_free(&s);
    bert_model_free(ref), bert_model_free(m), bert_model_free(padded);
}

/* The same bound with outlier channels in every LayerNorm (gamma 25, beta -3 on every 37th
 * channel, as real models have them: what smoothing is for), set through the parameter table
 * in both models: the factors' spread is then large, and a producer that quantized its rows
 * without dividing them by the next product's factors (or the wrong product's) would be off
 * by that spread on the outlier channels. */
static void test_model_outlier_layernorms(void) {
    BertModel *ref = small_model(BERT_FP32), *m = small_model(BERT_INT8);
    if (!ref || !m) return;
    BertModel *models[2] = {ref, m};
    for (int i = 0; i < 2; i++) {
        for (int p = 0; p < bert_num_param_tensors(models[i]); p++) {
            const BertParamInfo *t = bert_param_info(models[i], p);
            const bool gamma = strstr(t->name, "LayerNorm.weight") != NULL, beta = strstr(t->name, "LayerNorm.bias") != NULL;
            if (!gamma && !beta) continue;
            for (size_t k = 3; k < t->numel; k += 37) t->data[k] = gamma ? 25.0f : -3.0f;
        }
        bert_params_changed(models[i]);
    }
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, MV, 0.2, 29);
    const int L = bert_model_config(m)->num_hidden_layers;
    watch_int8_inputs(m);
    bert_forward(ref, &s.train, false, 0), bert_forward(m, &s.train, false, 0);
    CHECKF(hook8.checked == 3 * L && hook8.unsmoothed == L && !hook8.wrong,
           "int8 inputs: %d of %d checked (%d unsmoothed, %d expected), %d quantized otherwise than expected",
           hook8.checked, 3 * L, hook8.unsmoothed, L, hook8.wrong);
    const size_t nl = (size_t)MB * MP * MV;
    const double spread = smoothing_spread(m), tol = int8_chain_tolerance(bert_model_config(m), spread);
    const double e = rel_norm_error(bert_mlm_logits(m), bert_mlm_logits(ref), nl);
    CHECKF(e <= tol, "outlier LayerNorms: MLM logits %.3g relative to fp32 (tolerance %.3g)", e, tol);
    printf("    outlier LayerNorms: MLM logits %.2g relative (tolerance %.2g; factors' spread %.2f)\n", e, tol, spread);
    /* the pruned last layer (its attention output quantized apart) and packed rows */
    bert_set_last_layer_pruning(m, true), bert_set_unpadding(m, true);
    hook8.checked = hook8.unsmoothed = hook8.wrong = 0;
    bert_forward(m, &s.train, false, 0);
    CHECKF(hook8.checked == 3 * L && !hook8.wrong, "int8 inputs, pruned and packed: %d of %d checked, %d wrong",
           hook8.checked, 3 * L, hook8.wrong);
    test_hook_int8_input = NULL;
    for (int i = 0; i < hook8.n; i++) free(hook8.t[i]);
    hook8.n = 0;
    synthetic_batch_free(&s);
    bert_model_free(ref), bert_model_free(m);
}

/* The last layer on the heads' rows only (pre-training's pruning): every row is quantized and
 * normalised on its own and the int32 sums are exact, so the MLM and NSP logits are the same
 * bits as with every row computed. */
static void test_model_pruned(void) {
    BertModel *m = small_model(BERT_INT8);
    if (!m) return;
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, MV, 0.2, 23);
    const size_t nl = (size_t)MB * MP * MV;
    float *full = malloc(sizeof(float) * nl);
    bert_set_last_layer_pruning(m, false);
    const float l_full = bert_forward(m, &s.train, false, 0);
    memcpy(full, bert_mlm_logits(m), sizeof(float) * nl);
    bert_set_last_layer_pruning(m, true);
    const float l_pruned = bert_forward(m, &s.train, false, 0);
    CHECKF(bert_last_layer_rows(m) < bert_encoder_rows(m), "pruning ran the last layer on %d of %d rows",
           bert_last_layer_rows(m), bert_encoder_rows(m));
    CHECKF(memcmp(full, bert_mlm_logits(m), sizeof(float) * nl) == 0 && l_full == l_pruned,
           "pruned last layer in int8: loss %.9g vs %.9g, logits differ", l_pruned, l_full);
    free(full);
    synthetic_batch_free(&s);
    bert_model_free(m);
}

/* Lean inference (the layers sharing their buffers, no probabilities kept) gives the full
 * forward's int8 numbers: the int8 layers are the same kernels either way. */
static void test_model_lean(void) {
    BertModel *m = small_model(BERT_INT8), *lean = small_model(BERT_INT8);
    if (!m || !lean) return;
    bert_set_mode(lean, BERT_MODE_FORWARD_ONLY);
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, MV, 0.2, 19);
    bert_forward(m, &s.train, false, 0), bert_forward(lean, &s.train, false, 0);
    const size_t nl = (size_t)MB * MP * MV;
    const double e = rel_norm_error(bert_mlm_logits(lean), bert_mlm_logits(m), nl), tol = chain_reorder_tolerance(2000);
    CHECKF(e <= tol, "lean int8 forward vs full: %.3g (tolerance %.3g)", e, tol);
    synthetic_batch_free(&s);
    bert_model_free(m), bert_model_free(lean);
}

int main(void) {
    char what[256];
    gemm_int8_describe(what, sizeof what);
    printf("test_int8 (%s)\n", what);
    if (!gemm_int8_support()) {
        printf("  skipped: no int8 products on this CPU\n");
        test_skipped_count++;
        return test_summary();
    }
    RUN_TEST(test_quantize_rows);
    RUN_TEST(test_product_exact);
    RUN_TEST(test_own_amx_same_bits);
    RUN_TEST(test_forward_formula);
    RUN_TEST(test_rows_independent);
    RUN_TEST(test_against_fp32);
    RUN_TEST(test_smoothing_factors);
    RUN_TEST(test_smoothed_quantization);
    RUN_TEST(test_smoothed_against_fp32);
    RUN_TEST(test_epilogues);
    RUN_TEST(test_column_panels);
    RUN_TEST(test_product_counters);
    RUN_TEST(test_library_team);
    RUN_TEST(test_attention_quantized_ctx);
    RUN_TEST(test_model_against_fp32);
    RUN_TEST(test_model_outlier_layernorms);
    RUN_TEST(test_model_pruned);
    RUN_TEST(test_model_lean);
    return test_summary();
}
