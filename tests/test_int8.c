/* int8 inference (kernels/cpu/gemm_int8.h, BERT_INT8): quantization, the integer product
 * against an exact integer reference, the dequantized product against the same formula in
 * double, and the model against fp32 within a bound from the quantization step. Run it also
 * with ONEDNN_MAX_CPU_ISA=AVX2 (no VNNI: oneDNN's other int8 kernels) and
 * ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI (VNNI without AMX): every check is the same. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/kernels.h"
#include "model/bert.h"
#include "model/bert_views.h"
#include "model/config.h"
#include "test.h"
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

static void test_product_exact(void) {
    check_s32(1, 64, 64, 1, false);
    check_s32(5, 96, 37, 2, false);
    check_s32(64, 384, 128, 3, false);
    check_s32(300, 130, 256, 4, false);
    check_s32(33, 64, 3072, 5, true);   /* the largest sums: 3072 x 127^2 */
    check_s32(4, 48, 770, 6, true);
    check_s32(40, 1600, 96, 7, false);   /* wide */
}

/* ---- dequantized: the formula's fp32 evaluation ---- */

/* out = float(sum) (r_i s_j) + b_j, in fp32: float(sum) rounds once (sums above 2^24), the
 * scale product once, the product once and the bias addition once: within
 * 3u |sum r s| + u |out| of the double value (u = 2^-24), u |out| covering the last
 * rounding. With GELU, that error times GELU's slope (< 1.13) plus the activation's own:
 * erf as Abramowitz and Stegun's 7.1.26 in AVX-512 (measured within 2.7e-7 |v| of GELU over
 * [-30, 30]; gemm_int8.c), or erff / tanhf, within 0.5e-6 |v|; and 3 fp32 roundings of the
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
    float *res = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N), *out = malloc(sizeof(float) * M * N);
    float *xs = malloc(sizeof(float) * M), *qs = malloc(sizeof(float) * M), *qs_ref = malloc(sizeof(float) * M);
    float *lw = malloc(sizeof(float) * N), *lb = malloc(sizeof(float) * N), *sum = malloc(sizeof(float) * M * N);
    float *mean = malloc(sizeof(float) * M), *rstd = malloc(sizeof(float) * M), *mean_ref = malloc(sizeof(float) * M);
    float *rstd_ref = malloc(sizeof(float) * M), *ln_ref = malloc(sizeof(float) * M * N);
    int8_t *qx = malloc((size_t)M * K), *q = malloc((size_t)M * N), *q_ref = malloc((size_t)M * N);
    uint16_t *h = malloc(sizeof(uint16_t) * M * N), *h_ref = malloc(sizeof(uint16_t) * M * N);
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
    /* no bias, the LayerNorm output without quantizing it */
    k_matmul_forward_int8(ref, X, packed, NULL, M, K, N, false, act);
    for (size_t i = 0; i < (size_t)M * N; i++) sum[i] = ref[i] + res[i];
    k_layernorm_forward(ln_ref, NULL, mean_ref, rstd_ref, sum, NULL, lw, lb, M, N, 1e-12f);
    k_matmul_forward_int8_rows(&(KInt8Output){.out = out, .residual = res, .ln_w = lw, .ln_b = lb, .ln_eps = 1e-12f,
                                              .ln_mean = mean, .ln_rstd = rstd},
                               qx, xs, packed, NULL, M, K, N);
    CHECKF(!bits_differ(out, ln_ref, sizeof(float) * M * N), "M=%d N=%d K=%d: LayerNorm without bias differs", M, N, K);
    k_free(packed);
    free(W), free(X), free(b), free(res), free(ref), free(out), free(xs), free(qs), free(qs_ref), free(lw), free(lb);
    free(sum), free(mean), free(rstd), free(mean_ref), free(rstd_ref), free(ln_ref), free(qx), free(q), free(q_ref);
    free(h), free(h_ref);
}

static void test_epilogues(void) {
    check_epilogues(300, 200, 96, ACT_GELU, 41);
    check_epilogues(7, 33, 40, ACT_GELU_NEW, 42);     /* one block, tails everywhere */
    check_epilogues(1, 768, 64, ACT_GELU, 43);        /* one row */
    check_epilogues(520, 96, 3072 / 8, ACT_GELU, 44); /* rows in blocks of 64 and more */
    check_epilogues(150, 1000, 64, ACT_GELU, 45);     /* wide rows */
}

/* Attention's context quantized in attention (AttentionArgs.ctx_q8) is k_quantize_rows_int8 of
 * the context it writes, which is the context written without it: by whole sequences (batch
 * of at least twice the threads) and after the (sequence, head) blocks (batch 1), padded and
 * packed, fp32 and bf16 products. */
static void check_attention_ctx(int B, bool packed, bool half) {
    enum { T = 12, A = 2, d = 8, H = A * d };
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
    free(qkv), free(ctx), free(ctx_ref), free(scale), free(scale_ref), free(q), free(q_ref), free(qkv16);
}

static void test_attention_quantized_ctx(void) {
    for (int half = 0; half < 2 && (half == 0 || k_bf16_native_available()); half++)
        for (int packed = 0; packed < 2; packed++) {
            check_attention_ctx(8, packed, half);
            check_attention_ctx(1, packed, half);
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
static double int8_chain_tolerance(const BertConfig *c) {
    const double per_step = 1.0 / 254 + 1.0 / (2 * gemm_int8_weight_levels());   /* input's + weight's */
    const double h = sqrt((double)c->hidden_size) * per_step, i = sqrt((double)c->intermediate_size) * per_step;
    const double attention = k_bf16_native_available() ? 2 * (2 * 0x1p-8) : 0;
    return c->num_hidden_layers * (3 * h + i + attention) + h + chain_reorder_tolerance(2000);
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
    const double tol = int8_chain_tolerance(c);
    float *logits = malloc(sizeof(float) * nl);
    memcpy(logits, bert_mlm_logits(m), sizeof(float) * nl);
    const double e = rel_norm_error(logits, bert_mlm_logits(ref), nl);
    CHECKF(e <= tol, "MLM logits: %.3g relative to fp32 (tolerance %.3g)", e, tol);
    CHECKF(fabs(l8 - l32) <= tol * fabs(l32), "loss %.6f vs fp32 %.6f (tolerance %.3g relative)", l8, l32, tol);
    CHECKF(e > 1e-5, "int8 logits equal fp32's to %.3g: no quantization happened", e);
    printf("    loss %.6f vs %.6f, MLM logits %.2g relative (tolerance %.2g)\n", l8, l32, e, tol);
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
        return test_summary();
    }
    RUN_TEST(test_quantize_rows);
    RUN_TEST(test_product_exact);
    RUN_TEST(test_forward_formula);
    RUN_TEST(test_rows_independent);
    RUN_TEST(test_against_fp32);
    RUN_TEST(test_epilogues);
    RUN_TEST(test_attention_quantized_ctx);
    RUN_TEST(test_model_against_fp32);
    RUN_TEST(test_model_pruned);
    RUN_TEST(test_model_lean);
    return test_summary();
}
