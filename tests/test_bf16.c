/* Mixed precision (bf16 products, fp32 accumulation): the rounding, the products, the
 * linear layer's forward and backward, and the model, each against an fp32 or float64
 * reference within a bound derived from bf16's 8-bit mantissa and the reduction length.
 *
 * The arithmetic: rounding to bf16 (8 significant bits, to nearest) changes a value by at
 * most u_b = 2^-8 relative. A product of two rounded operands is exact in fp32 (16 bits), so
 * a bf16 product C = sum_k a'_k b'_k accumulated in fp32 differs from the fp32 product of
 * the unrounded operands by at most
 *     (2 u_b + u_b^2) sum_k |a_k b_k|      (the operands' rounding)
 *   + 2 gamma_K sum_k |a_k b_k|            (two fp32 summations in any order, test.h)
 * element by element: the bound checked on every product below. The native path (oneDNN on
 * bf16 instructions) is checked wherever the CPU has them and against the same bounds; the
 * emulated path (the same rounded operands in fp32 sgemm) runs everywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_half.h"
#include "model/config.h"
#include "kernels/kernels.h"
#include "model/bert.h"
#include "model/bert_views.h"
#include "test.h"
#include "train/synthetic.h"

#define BF16_UNIT_ROUNDOFF (1.0 / 256.0)    /* 2^-8: half an ulp of an 8-bit significand */
#define FP16_UNIT_ROUNDOFF (1.0 / 2048.0)   /* 2^-11: fp16's 11-bit significand (normal range) */
static double unit_roundoff(HalfMode mode) { return mode == HALF_FP16 ? FP16_UNIT_ROUNDOFF : BF16_UNIT_ROUNDOFF; }
static const char *mode_name(HalfMode mode) {
    return mode == HALF_FP16 ? "fp16" : mode == HALF_BF16_EMULATED ? "bf16 emulated" : "bf16 native";
}

static void fill(float *x, size_t n, uint64_t seed, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (float)(2.0 * rng_uniform(seed, i) - 1.0);
}

/* ---- rounding ---- */

/* The nearest bf16 to f by exhaustive comparison in double (ties to the even significand):
 * an independent statement of what bf16_from_float must return. */
static bf16 nearest_bf16_reference(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    bf16 down = (bf16)(v.u >> 16), up = (bf16)(down + 1);  /* neighbours towards zero and away */
    double dd = fabs((double)float_from_bf16(down) - f), du = fabs((double)float_from_bf16(up) - f);
    if (isinf(float_from_bf16(up)) && !isinf(f)) {   /* rounding up overflows: IEEE rounds to inf past the midpoint */
        double max = (double)float_from_bf16((bf16)(up - 1)), half_ulp = ldexp(1.0, 127 - 8);
        return fabs(f) >= max + half_ulp ? up : down;
    }
    if (dd < du) return down;
    if (du < dd) return up;
    return (down & 1) ? up : down;
}

static void test_rounding(void) {
    int bad = 0;
    for (uint64_t i = 0; i < 200000; i++) {
        union { uint32_t u; float f; } v = {.u = (uint32_t)rng_bits32(7, i)};
        if (isnan(v.f)) continue;
        if (bf16_from_float(v.f) != nearest_bf16_reference(v.f) && bad++ < 5)
            printf("    %a -> %04x, nearest %04x\n", v.f, bf16_from_float(v.f), nearest_bf16_reference(v.f));
    }
    CHECKF(bad == 0, "%d of 200000 random floats rounded to another bf16 than the nearest", bad);
    /* ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (even: 1); 1 + 3*2^-8 goes up to 1 + 2^-6 */
    CHECK(float_from_bf16(bf16_from_float(1.0f + 0x1p-8f)) == 1.0f);
    CHECK(float_from_bf16(bf16_from_float(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
    CHECK(isnan(float_from_bf16(bf16_from_float(NAN))));
    CHECK(isinf(float_from_bf16(bf16_from_float(INFINITY))));
    CHECK(float_from_bf16(bf16_from_float(-2.5f)) == -2.5f);
    float x[1000], y[1000];
    bf16 h[1000];
    fill(x, 1000, 3, 100.0f);
    bf16_from_floats(h, x, 1000);
    floats_from_bf16(y, h, 1000);
    double worst = 0;
    for (int i = 0; i < 1000; i++) worst = fmax(worst, fabs((double)y[i] - x[i]) / fabs((double)x[i]));
    CHECKF(worst <= BF16_UNIT_ROUNDOFF, "relative rounding error %.3g > 2^-8", worst);
}

/* fp16 rounding: to nearest even within the range, infinity past 65504 + half an ulp, and
 * the value within half an ulp (2^-11 relative for normal numbers). */
static void test_fp16_rounding(void) {
    CHECK(float_from_fp16(fp16_from_float(65504.0f)) == 65504.0f);
    CHECK(isinf(float_from_fp16(fp16_from_float(65520.0f))));              /* the midpoint to 2^16 goes up */
    CHECK(float_from_fp16(fp16_from_float(65519.0f)) == 65504.0f);
    CHECK(float_from_fp16(fp16_from_float(1.0f + 0x1p-11f)) == 1.0f);       /* tie: to even */
    CHECK(float_from_fp16(fp16_from_float(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f);
    CHECK(float_from_fp16(fp16_from_float(0x1p-24f)) == 0x1p-24f);         /* smallest subnormal */
    CHECK(float_from_fp16(fp16_from_float(0x1p-26f)) == 0.0f);
    CHECK(isnan(float_from_fp16(fp16_from_float(NAN))));
    int changed = 0;   /* every fp16 value is a float: widened and rounded back, the same bits */
    for (uint32_t h = 0; h < 65536; h++)
        if (!isnan(float_from_fp16((fp16)h))) changed += fp16_from_float(float_from_fp16((fp16)h)) != h;
    CHECKF(changed == 0, "%d fp16 values changed by a round trip through float", changed);
    CHECK(float_from_fp16(0x3c00) == 1.0f && float_from_fp16(0xc000) == -2.0f && float_from_fp16(0x0001) == 0x1p-24f);
    CHECK(float_from_fp16(0x7bff) == 65504.0f && isinf(float_from_fp16(0x7c00)));
    double worst = 0;
    for (uint32_t i = 0; i < 100000; i++) {
        float x = 60000.0f * (2.0f * rng_uniform(17, i) - 1.0f);
        if (fabsf(x) < 0x1p-14f) continue;   /* subnormal: absolute, not relative, precision */
        worst = fmax(worst, fabs((double)float_from_fp16(fp16_from_float(x)) - x) / fabs((double)x));
    }
    CHECKF(worst <= FP16_UNIT_ROUNDOFF, "relative rounding error %.3g > 2^-11", worst);
}

/* The array conversions (k_to_half / k_from_half: F16C eight at a time where compiled for it,
 * the scalar functions for the rest) give the scalar functions' bits, NaNs included (made
 * quiet, the top of the payload kept, as F16C does), over random floats, edge cases and every
 * fp16; train/comm.c's 16-bit wire relies on it. (Checked once over all 2^32 floats.) */
static void test_fp16_arrays_match_scalar(void) {
    static const uint32_t edges[] = {0x7f800001u, 0x7f802000u, 0xffc00000u, 0x7fffffffu, 0xff800000u, 0x7f800000u,
                                     0x00000001u, 0x80000000u, 0x477ff000u, 0x477fefffu, 0x33000000u, 0x33000001u,
                                     0x387fe000u, 0x38800000u, 0xc77fffffu};
    enum { NE = sizeof edges / sizeof edges[0], N = (1 << 20) + NE };   /* not a multiple of 8: a tail */
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * 65536);
    fp16 *h = malloc(sizeof(fp16) * N), all[65536];
    for (int i = 0; i < N; i++) {
        union { uint32_t u; float f; } v = {.u = i < NE ? edges[i] : (uint32_t)rng_bits32(29, (uint64_t)i)};
        x[i] = v.f;
    }
    k_to_half(HALF_FP16, h, x, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += h[i] != fp16_from_float(x[i]);
    for (uint32_t i = 0; i < 65536; i++) all[i] = (fp16)i;
    k_from_half(HALF_FP16, y, all, 65536);
    int bad_back = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        const float s = float_from_fp16(all[i]);
        bad_back += memcmp(&s, &y[i], sizeof s) != 0;
    }
    CHECKF(bad == 0 && bad_back == 0, "fp16 arrays vs scalar: %d of %d floats, %d of 65536 halves differ", bad, N, bad_back);
    union { float f; uint32_t u; } snan = {.u = 0x7f802000u}, back = {.f = float_from_fp16(0x7c01)};
    CHECKF(fp16_from_float(snan.f) == 0x7e01 && back.u == 0x7fc02000u, "NaNs: %04x, %08x (want 7e01, 7fc02000)",
           fp16_from_float(snan.f), back.u);
    free(x), free(y), free(h);
}

/* ---- products ---- */

/* Worst |C - C_ref| / bound over C = op(A) op(B) (+ bias) (+ C0), where C_ref is the float64
 * product of the unrounded operands and bound = (2 u + u^2 + 2 gamma_K) sum|a b| (+ the fp32
 * rounding of adding bias and C0), u the 16-bit format's unit roundoff. <= 1 passes. */
static double product_ratio(double u, const float *C, const float *A, const float *B, const float *bias,
                            const float *C0, bool ta, bool tb, int M, int N, int K) {
    double worst = 0;
    const double per_term = 2 * u + u * u + 2 * gamma_k(K + 2);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double exact = 0, abs_sum = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
                double b = tb ? B[(size_t)j * K + k] : B[(size_t)k * N + j];
                exact += a * b, abs_sum += fabs(a * b);
            }
            double extra = (bias ? bias[j] : 0) + (C0 ? C0[(size_t)i * N + j] : 0);
            exact += extra;
            double bound = per_term * abs_sum + 2 * gamma_k(K + 2) * fabs(extra) + 1e-40;
            double r = fabs((double)C[(size_t)i * N + j] - exact) / bound;
            if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
        }
    return worst;
}

static void check_products(HalfMode mode) {
    const double u = unit_roundoff(mode);
    const int M = 37, N = 53, K = 300;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *bias = malloc(sizeof(float) * N);
    float *C = malloc(sizeof(float) * M * N), *C0 = malloc(sizeof(float) * M * N);
    bf16 *A16 = malloc(sizeof(bf16) * M * K), *B16 = malloc(sizeof(bf16) * K * N);
    fill(A, (size_t)M * K, 11, 1.0f), fill(B, (size_t)K * N, 12, 0.5f), fill(bias, N, 13, 1.0f);
    fill(C0, (size_t)M * N, 14, 3.0f);
    halves_from_floats(mode, A16, A, (long)M * K), halves_from_floats(mode, B16, B, (long)K * N);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int lda = ta ? M : K, ldb = tb ? K : N;
        gemm_half(mode, ta, tb, M, N, K, A16, lda, B16, ldb, NULL, 0.0f, C, N);
        double r = product_ratio(u, C, A, B, NULL, NULL, ta, tb, M, N, K);
        CHECKF(r <= 1, "%s %c%c: error %.3g of the bound", mode_name(mode), ta ? 'T' : 'N',
               tb ? 'T' : 'N', r);
        gemm_half(mode, ta, tb, M, N, K, A16, lda, B16, ldb, bias, 0.0f, C, N);
        r = product_ratio(u, C, A, B, bias, NULL, ta, tb, M, N, K);
        CHECKF(r <= 1, "%s %c%c + bias: error %.3g of the bound", mode_name(mode), ta ? 'T' : 'N',
               tb ? 'T' : 'N', r);
        memcpy(C, C0, sizeof(float) * M * N);
        gemm_half(mode, ta, tb, M, N, K, A16, lda, B16, ldb, NULL, 1.0f, C, N);
        r = product_ratio(u, C, A, B, NULL, C0, ta, tb, M, N, K);
        CHECKF(r <= 1, "%s %c%c accumulating: error %.3g of the bound", mode_name(mode),
               ta ? 'T' : 'N', tb ? 'T' : 'N', r);
    }
    /* the bound is not vacuous: plain fp32 operands' error is far inside it, bf16's is not */
    gemm_half(mode, false, true, M, N, K, A16, K, B16, K, NULL, 0.0f, C, N);
    double loose = product_ratio(u, C, A, B, NULL, NULL, false, true, M, N, K);
    CHECKF(loose > 0.01, "error %.3g of the bound: the check could not see bf16 rounding", loose);
    free(A), free(B), free(bias), free(C), free(C0), free(A16), free(B16);
}

static void test_products_emulated(void) { check_products(HALF_BF16_EMULATED); }
static void test_products_fp16(void) { check_products(HALF_FP16); }

static void test_products_native(void) {
    if (!gemm_bf16_native_available()) {
        printf("    (no bf16 instructions here: the native path is checked on machines with avx512_bf16)\n");
        return;
    }
    check_products(HALF_BF16);
    /* native and emulated sum the same exact terms: within 2 gamma_K sum|a'b'| of each other */
    const int M = 64, N = 96, K = 768;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
    bf16 *A16 = malloc(sizeof(bf16) * M * K), *B16 = malloc(sizeof(bf16) * N * K);
    fill(A, (size_t)M * K, 21, 1.0f), fill(B, (size_t)N * K, 22, 1.0f);
    bf16_from_floats(A16, A, (long)M * K), bf16_from_floats(B16, B, (long)N * K);
    floats_from_bf16(A, A16, (long)M * K), floats_from_bf16(B, B16, (long)N * K);   /* the rounded operands */
    gemm_half(HALF_BF16, false, true, M, N, K, A16, K, B16, K, NULL, 0.0f, C1, N);
    gemm_half(HALF_BF16_EMULATED, false, true, M, N, K, A16, K, B16, K, NULL, 0.0f, C2, N);
    double r = gemm_reorder_ratio(C1, C2, A, B, M, N, K);
    CHECKF(r <= 1, "native vs emulated: %.3g of the reordering bound", r);
    free(A), free(B), free(C1), free(C2), free(A16), free(B16);
}

/* ---- the linear layer ---- */

/* k_matmul_*_bf16 against fp32 k_matmul_*: forward out, dinp (reduction over OC), dweight
 * (over N) within the bf16 bound; dbias from the fp32 gradient, within fp32 reordering. */
static void check_linear(HalfMode mode) {
    const double u = unit_roundoff(mode);
    const int N = 40, C = 72, OC = 56;
    float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * OC * C), *b = malloc(sizeof(float) * OC);
    float *dout = malloc(sizeof(float) * N * OC), *out = malloc(sizeof(float) * N * OC);
    float *dinp = malloc(sizeof(float) * N * C), *dw = calloc((size_t)OC * C, sizeof(float));
    float *db = calloc(OC, sizeof(float)), *db32 = calloc(OC, sizeof(float)), *dw32 = calloc((size_t)OC * C, 4);
    float *dinp32 = malloc(sizeof(float) * N * C);
    bf16 *w16 = malloc(sizeof(bf16) * OC * C), *x16 = malloc(sizeof(bf16) * N * C), *dout16 = malloc(sizeof(bf16) * N * OC);
    fill(x, (size_t)N * C, 31, 2.0f), fill(w, (size_t)OC * C, 32, 0.1f), fill(b, OC, 33, 0.5f);
    fill(dout, (size_t)N * OC, 34, 1.0f);
    k_to_half(mode, w16, w, (long)OC * C);
    k_matmul_forward_half(out, x, x16, w16, NULL, b, N, C, OC, mode);
    double r = product_ratio(u, out, x, w, b, NULL, false, true, N, OC, C);
    CHECKF(r <= 1, "forward: %.3g of the bound", r);
    int unrounded = 0;   /* the forward kept the backward's operand: inp rounded to bf16 */
    for (int i = 0; i < N * C; i++) unrounded += x16[i] != (mode == HALF_FP16 ? fp16_from_float(x[i]) : bf16_from_float(x[i]));
    CHECKF(unrounded == 0, "%d of the kept bf16 inputs are not the rounded inputs", unrounded);
    /* the result stored in 16 bits (GELU's input): without a packed weight, the fp32 result
     * computed the same way, rounded */
    bf16 *out16 = malloc(sizeof(bf16) * N * OC);
    float *scratch = malloc(sizeof(float) * N * OC);
    k_matmul_forward_half_out16(out16, scratch, x, x16, w16, NULL, b, N, C, OC, mode);
    int off = 0;
    for (int i = 0; i < N * OC; i++) off += out16[i] != (mode == HALF_FP16 ? fp16_from_float(out[i]) : bf16_from_float(out[i]));
    CHECKF(off == 0, "%d of %d 16-bit results are not the fp32 results rounded", off, N * OC);
    free(out16), free(scratch);
    k_matmul_backward_half(dinp, dw, db, dout, x16, w16, N, C, OC, false, dout16, mode);
    r = product_ratio(u, dinp, dout, w, NULL, NULL, false, false, N, C, OC);
    CHECKF(r <= 1, "dinp: %.3g of the bound", r);
    r = product_ratio(u, dw, dout, x, NULL, NULL, true, false, OC, C, N);
    CHECKF(r <= 1, "dweight: %.3g of the bound", r);
    k_matmul_backward(dinp32, dw32, db32, dout, x, w, N, C, OC, false);
    CHECKF(max_rel_error(db, db32, OC, 1e-3) <= 2 * gamma_k(N), "dbias differs from fp32's beyond reordering");
    /* accumulating: dinp += and dweight += a second time */
    float *dinp_before = malloc(sizeof(float) * N * C);
    memcpy(dinp_before, dinp, sizeof(float) * N * C);
    k_matmul_backward_half(dinp, dw, NULL, dout, x16, w16, N, C, OC, true, dout16, mode);
    double worst = 0;
    for (int i = 0; i < N * C; i++) worst = fmax(worst, fabs(dinp[i] - 2 * dinp_before[i]) / (fabs(dinp[i]) + 1e-6));
    CHECKF(worst <= 4 * F32_UNIT_ROUNDOFF, "accumulating dinp: %.3g", worst);
    free(x), free(w), free(b), free(dout), free(out), free(dinp), free(dw), free(db), free(db32), free(dw32);
    free(dinp32), free(w16), free(x16), free(dout16), free(dinp_before);
}

static void test_linear_emulated(void) { check_linear(HALF_BF16_EMULATED); }
static void test_linear_fp16(void) { check_linear(HALF_FP16); }
static void test_linear_native(void) {
    if (!gemm_bf16_native_available()) { printf("    (no bf16 instructions here)\n"); return; }
    check_linear(HALF_BF16);
}

/* Packed weights (native bf16): the forward with the packed copy sums the same exact terms
 * as with the plain weight, so the two agree within fp32 reordering for every row count
 * (oneDNN's kernels for 1 row and for hundreds differ), with a bias as one more term of the
 * sums. 53 rows run on a row-padded copy (64 rows), 300 as 288 rows then 12
 * (gemm_packed_post): their first rows the same bits as a 64-row product's (a 1-row product
 * runs another kernel: not compared). Packing again follows a changed weight. */
static void test_packed_weights_native(void) {
    if (!gemm_bf16_native_available()) {
        CHECK(k_packed_weight_bytes(HALF_BF16_EMULATED, 64, 64) == 0);
        printf("    (no bf16 instructions here: packing is checked on machines with avx512_bf16)\n");
        return;
    }
    CHECK(k_packed_weight_bytes(HALF_BF16_EMULATED, 64, 64) == 0 && k_packed_weight_bytes(HALF_FP16, 64, 64) == 0);
    const int shapes[][2] = {{72, 56}, {256, 768}}, rows[] = {1, 5, 53, 64, 300};
    for (int s = 0; s < 2; s++) {
        const int C = shapes[s][0], OC = shapes[s][1], N = 300;
        size_t bytes = k_packed_weight_bytes(HALF_BF16, C, OC);
        CHECKF(bytes >= sizeof(bf16) * C * OC, "%d x %d packed in %zu bytes", OC, C, bytes);
        float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * OC * C), *b = malloc(sizeof(float) * OC);
        float *plain = malloc(sizeof(float) * N * OC), *packed_out = malloc(sizeof(float) * N * OC);
        bf16 *x16 = malloc(sizeof(bf16) * N * C), *w16 = malloc(sizeof(bf16) * OC * C);
        void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
        fill(x, (size_t)N * C, 41, 2.0f), fill(w, (size_t)OC * C, 42, 0.1f), fill(b, OC, 43, 0.5f);
        bf16_from_floats(w16, w, (long)OC * C);
        k_pack_weight(HALF_BF16, packed, w16, C, OC);
        floats_from_bf16(w, w16, (long)OC * C);
        float *rows64 = malloc(sizeof(float) * 64 * OC);
        k_matmul_forward_half(rows64, x, x16, w16, packed, NULL, 64, C, OC, HALF_BF16);
        for (int r = 0; r < 5; r++) {
            const int M = rows[r];
            k_matmul_forward_half(plain, x, x16, w16, NULL, NULL, M, C, OC, HALF_BF16);
            k_matmul_forward_half(packed_out, x, x16, w16, packed, NULL, M, C, OC, HALF_BF16);
            float *xr = malloc(sizeof(float) * M * C);
            floats_from_bf16(xr, x16, (long)M * C);   /* the rounded operands */
            double ratio = gemm_reorder_ratio(packed_out, plain, xr, w, M, OC, C);
            CHECKF(ratio <= 1, "%d rows of %d x %d: packed vs plain %.3g of the reordering bound", M, OC, C, ratio);
            CHECKF(M < 16 || !memcmp(packed_out, rows64, sizeof(float) * (M < 64 ? M : 64) * OC),
                   "%d rows of %d x %d: not the 64-row product's bits", M, OC, C);
            k_matmul_forward_half(packed_out, x, x16, w16, packed, b, M, C, OC, HALF_BF16);
            /* + bias: one more term of each sum */
            k_matmul_forward_half(plain, x, x16, w16, NULL, b, M, C, OC, HALF_BF16);
            double worst = gemm_reorder_ratio_bias(packed_out, plain, xr, w, b, M, OC, C);
            CHECKF(worst <= 1, "%d rows + bias: %.3g of the bound", M, worst);
            /* stored rounded to bf16 by the product itself: within one bf16 rounding of the
             * fp32 result, after reordering */
            bf16 *out16 = malloc(sizeof(bf16) * M * OC);
            k_matmul_forward_half_out16(out16, plain, x, x16, w16, packed, b, M, C, OC, HALF_BF16);
            k_matmul_forward_half(packed_out, x, x16, w16, packed, b, M, C, OC, HALF_BF16);
            double worst16 = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < OC; j++) {
                    double abs_sum = fabs(b[j]);
                    for (int k = 0; k < C; k++) abs_sum += fabs((double)xr[(size_t)i * C + k] * w[(size_t)j * C + k]);
                    double v = packed_out[(size_t)i * OC + j], reorder = 2 * gamma_k(C + 1) * abs_sum;
                    double bound = BF16_UNIT_ROUNDOFF * (fabs(v) + reorder) + reorder + 1e-40;
                    worst16 = fmax(worst16, fabs(float_from_bf16(out16[(size_t)i * OC + j]) - v) / bound);
                }
            CHECKF(worst16 <= 1, "%d rows stored in bf16: %.3g of the bound", M, worst16);
            free(xr), free(out16);
        }
        /* a changed weight, packed again, is the one multiplied */
        for (int i = 0; i < OC * C; i++) w16[i] = bf16_from_float(2.0f * float_from_bf16(w16[i]));
        k_pack_weight(HALF_BF16, packed, w16, C, OC);
        k_matmul_forward_half(plain, x, x16, w16, NULL, NULL, 64, C, OC, HALF_BF16);
        k_matmul_forward_half(packed_out, x, x16, w16, packed, NULL, 64, C, OC, HALF_BF16);
        floats_from_bf16(w, w16, (long)OC * C);
        float *xr = malloc(sizeof(float) * 64 * C);
        floats_from_bf16(xr, x16, 64L * C);
        double ratio = gemm_reorder_ratio(packed_out, plain, xr, w, 64, OC, C);
        CHECKF(ratio <= 1, "after repacking a changed weight: %.3g of the bound", ratio);
        free(x), free(w), free(b), free(plain), free(packed_out), free(x16), free(w16), free(packed), free(xr), free(rows64);
    }
}

/* GELU's derivative at v, in double: erf's form (ACT_GELU) or the tanh approximation's. */
static double gelu_slope(double v, int act) {
    if (act == ACT_GELU) return 0.5 * (1 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2 * M_PI);
    double t = tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
    return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
}

/* GELU on a 16-bit input, rounded to 16 bits, and its backward at that input, against the
 * double formulas at the widened input: the forward within gelu_product_ratio's allowance
 * plus one rounding; the backward, written in 16 bits, within the slope's fp32 evaluation
 * (erf within 1e-6, 8 roundings) plus one rounding, with the bias gradient it adds within
 * fp32 summation of those values. */
static void check_gelu_half(HalfMode mode) {
    enum { n = 5000 };
    float *x = malloc(sizeof(float) * n), *xr = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    float *dout = malloc(sizeof(float) * n), one = 1.0f;
    uint16_t *x16 = malloc(sizeof(uint16_t) * n), *y16 = malloc(sizeof(uint16_t) * n);
    double *exact = malloc(sizeof(double) * n), *bound = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) x[i] = -8.0f + 16.0f * ((float)i + 0.5f) / n;
    fill(dout, n, 91, 2.0f);
    k_to_half(mode, x16, x, n), k_from_half(mode, xr, x16, n);
    for (int act = ACT_GELU; act <= ACT_GELU_NEW; act++) {
        k_gelu_forward_half(y16, x16, n, (Activation)act, mode);
        k_from_half(mode, y, y16, n);
        double r = gelu_product_ratio(y, xr, &one, NULL, n, 1, 1, act, unit_roundoff(mode));
        CHECKF(r <= 1, "%s %s forward: %.3g of the bound", mode_name(mode), act ? "gelu_new" : "gelu", r);
        for (int i = 0; i < n; i++) {   /* the backward's exact value and its fp32 evaluation's allowance */
            exact[i] = dout[i] * gelu_slope(xr[i], act);
            bound[i] = fabs(dout[i]) * (1e-6 + 8 * F32_UNIT_ROUNDOFF * (fabs(gelu_slope(xr[i], act)) + 1)) + 1e-40;
        }
        /* written as the next product's operand, as 50 rows of 100: within one 16-bit rounding
         * of that bound, and the bias gradient (0.25 each before) plus the column sums within
         * fp32 reordering of those */
        enum { R = 50, C = n / R };
        float dbias[C];
        for (int c = 0; c < C; c++) dbias[c] = 0.25f;
        k_gelu_backward_half_out16(y16, dbias, dout, x16, R, C, (Activation)act, mode);
        k_from_half(mode, y, y16, n);
        double worst16 = 0, worst_bias = 0;
        const double spacing = mode == HALF_FP16 ? 0x1p-25 : 0x1p-134;   /* half the smallest subnormal */
        for (int i = 0; i < n; i++)
            worst16 = fmax(worst16, fabs(y[i] - exact[i]) /
                                        (bound[i] + unit_roundoff(mode) * (fabs(exact[i]) + bound[i]) + spacing));
        for (int c = 0; c < C; c++) {
            double sum = 0.25, magnitude = 0.25, slack = 0;
            for (int row = 0; row < R; row++) {
                const int i = row * C + c;
                sum += exact[i], magnitude += fabs(exact[i]) + bound[i], slack += bound[i];
            }
            worst_bias = fmax(worst_bias, fabs(dbias[c] - sum) / (gamma_k(R + 1) * magnitude + slack));
        }
        CHECKF(worst16 <= 1 && worst_bias <= 1, "%s %s backward to 16 bits: %.3g of the bound, its bias gradient %.3g",
               mode_name(mode), act ? "gelu_new" : "gelu", worst16, worst_bias);
    }
    free(x), free(xr), free(y), free(dout), free(x16), free(y16), free(exact), free(bound);
}

static void test_gelu_half(void) {
    check_gelu_half(HALF_BF16_EMULATED), check_gelu_half(HALF_FP16);
    if (gemm_bf16_native_available()) check_gelu_half(HALF_BF16);
}

/* Inference's product + GELU in one pass with the result stored in bf16 (the next product's
 * input): against GELU of the exact sum of the bf16 operands, within the fp32 bound
 * (gelu_product_ratio) plus one bf16 rounding of the result, for both activations. */
static void test_matmul_gelu_native(void) {
    if (!gemm_bf16_native_available()) {
        printf("    (no bf16 instructions here: checked on machines with avx512_bf16)\n");
        return;
    }
    const int C = 256, OC = 768, rows[] = {1, 5, 64, 300};
    size_t bytes = k_packed_weight_bytes(HALF_BF16, C, OC);
    float *x = malloc(sizeof(float) * 300 * C), *w = malloc(sizeof(float) * OC * C), *b = malloc(sizeof(float) * OC);
    float *xr = malloc(sizeof(float) * 300 * C), *out = malloc(sizeof(float) * 300 * OC);
    bf16 *x16 = malloc(sizeof(bf16) * 300 * C), *w16 = malloc(sizeof(bf16) * OC * C), *out16 = malloc(sizeof(bf16) * 300 * OC);
    void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
    fill(x, (size_t)300 * C, 81, 1.0f), fill(w, (size_t)OC * C, 82, 3.0f / 16), fill(b, OC, 83, 1.0f);
    bf16_from_floats(w16, w, (long)OC * C);
    floats_from_bf16(w, w16, (long)OC * C);
    k_pack_weight(HALF_BF16, packed, w16, C, OC);
    double worst_seen = 0;
    for (int act = ACT_GELU; act <= ACT_GELU_NEW; act++)
        for (int r = 0; r < 4; r++) {
            const int M = rows[r];
            memset(out16, 0xff, sizeof(bf16) * M * OC);   /* NaN: anything not written shows */
            if (!k_matmul_gelu_forward_half_packed(out16, x, x16, packed, r % 2 ? b : NULL, M, C, OC, (Activation)act)) {
                printf("    (%d rows: oneDNN would run another kernel; the caller runs two passes)\n", M);
                continue;
            }
            floats_from_bf16(xr, x16, (long)M * C), floats_from_bf16(out, out16, (long)M * OC);
            double worst = gelu_product_ratio(out, xr, w, r % 2 ? b : NULL, M, OC, C, act, BF16_UNIT_ROUNDOFF);
            worst_seen = fmax(worst_seen, worst);
            CHECKF(worst <= 1, "%s, %d rows%s: %.3g of the bound", act ? "gelu_new" : "gelu", M, r % 2 ? " + bias" : "",
                   worst);
        }
    printf("    worst %.2g of the bound\n", worst_seen);
    free(x), free(w), free(b), free(xr), free(out), free(x16), free(w16), free(out16), free(packed);
}

/* ---- attention with 16-bit products ---- */

enum { AB = 3, AT = 20, AA = 2, AD = 16, AH = AA * AD };
static const int32_t att_kv_len[AB] = {20, 13, 17};
static const uint8_t att_holes[AB] = {0, 0, 1};
static int32_t att_mask[AB * AT];

static AttentionArgs attention_args(bool half, HalfMode mode, float dropout_p) {
    for (int b = 0; b < AB; b++)
        for (int t = 0; t < AT; t++) att_mask[b * AT + t] = t < att_kv_len[b] && !(b == 2 && (t == 3 || t == 8));
    return (AttentionArgs){.B = AB, .T = AT, .A = AA, .d = AD, .kv_len = att_kv_len, .mask = att_mask,
                           .has_holes = att_holes, .dropout_p = dropout_p, .dropout_key = rng_key(8, 9),
                           .half = half, .half_mode = mode};
}

/* Forward, element by element, against the fp32 kernel (no dropout; first order, with 10%
 * for the second-order terms): rounding q and k (u each) moves score S_ij by at most
 * e_i = (2u + u^2 + gamma_d) max_j Sabs_ij, Sabs_ij = sum_k |q_ik k_jk| / sqrt(d); softmax
 * turns score errors of at most e_i into probability errors of at most 2 e_i P_ij; rounding
 * P and V adds 2u + u^2 relative to each term, and both sides' fp32 sums of L terms gamma_L
 * each. So |ctx16 - ctx32| <= (2 e_i + 2u + u^2 + 2 gamma_L) sum_j P_ij |v_jc|. */
static void check_attention_forward(HalfMode mode) {
    const double u = unit_roundoff(mode);
    const size_t N = (size_t)AB * AT;
    float *qkv = malloc(sizeof(float) * N * 3 * AH), *ctx32 = malloc(sizeof(float) * N * AH);
    float *ctx16 = malloc(sizeof(float) * N * AH), *p32 = malloc(sizeof(float) * AB * AA * AT * AT);
    float *p16 = malloc(sizeof(float) * AB * AA * AT * AT);
    fill(qkv, N * 3 * AH, 51, 1.5f);
    AttentionArgs a32 = attention_args(false, mode, 0.0f), a16 = attention_args(true, mode, 0.0f);
    /* k_attention_forward_to: in 16 bits ctx rounded into its out16 as k_to_half rounds it; in
     * fp32 out16 not written */
    uint16_t *out16 = malloc(sizeof(uint16_t) * N * AH), *want16 = malloc(sizeof(uint16_t) * N * AH);
    memset(out16, 0x77, sizeof(uint16_t) * N * AH), memset(want16, 0x77, sizeof(uint16_t) * N * AH);
    k_attention_forward_to(ctx32, out16, p32, qkv, &a32);
    CHECKF(!memcmp(out16, want16, sizeof(uint16_t) * N * AH), "%s attention forward_to in fp32 wrote out16",
           mode_name(mode));
    k_attention_forward_to(ctx16, out16, p16, qkv, &a16);
    k_to_half(mode, want16, ctx16, (long)(N * AH));
    CHECKF(!memcmp(out16, want16, sizeof(uint16_t) * N * AH), "%s attention forward_to: out16 not ctx rounded",
           mode_name(mode));
    free(out16), free(want16);
    double worst = 0;
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AA; h++)
            for (int i = 0; i < AT; i++) {
                const int L = att_kv_len[b];
                const float *q = qkv + ((size_t)b * AT + i) * 3 * AH + h * AD;
                const float *P = p32 + (((size_t)b * AA + h) * AT * AT) + (size_t)i * L;
                double smax = 0;
                for (int j = 0; j < L; j++) {
                    const float *k = qkv + ((size_t)b * AT + j) * 3 * AH + AH + h * AD;
                    double sabs = 0;
                    for (int c = 0; c < AD; c++) sabs += fabs((double)q[c] * k[c]);
                    smax = fmax(smax, sabs / sqrt(AD));
                }
                const double e = (2 * u + u * u + gamma_k(AD)) * smax;
                for (int c = 0; c < AD; c++) {
                    double pv = 0;
                    for (int j = 0; j < L; j++) pv += P[j] * fabs(qkv[((size_t)b * AT + j) * 3 * AH + 2 * AH + h * AD + c]);
                    const double bound = 1.1 * (2 * e + 2 * u + u * u + 2 * gamma_k(L)) * pv + 1e-30;
                    const size_t at = ((size_t)b * AT + i) * AH + h * AD + c;
                    worst = fmax(worst, fabs((double)ctx16[at] - ctx32[at]) / bound);
                }
            }
    CHECKF(worst <= 1, "%s attention forward: %.3g of the bound", mode_name(mode), worst);
    CHECKF(worst > 0.01, "%s attention forward: %.3g of the bound: no 16-bit rounding seen", mode_name(mode), worst);
    printf("    %s forward: %.2g of the bound\n", mode_name(mode), worst);
    free(qkv), free(ctx32), free(ctx16), free(p32), free(p16);
}

/* The backward against fp32's, norm-wise, with the model test's first-order rule (each
 * 16-bit product on the chain adds at most 2u relative, stages add): dP, then dS through
 * the softmax backward (whose P carries the forward's 2 e relative error), then dQ and dK;
 * dV is one product of P: 2u (3 + 2 e / u) over all. With dropout, and checked to see the
 * rounding. */
static void check_attention_backward(HalfMode mode) {
    const double u = unit_roundoff(mode);
    const size_t N = (size_t)AB * AT, probs = (size_t)AB * AA * AT * AT;
    float *qkv = malloc(sizeof(float) * N * 3 * AH), *dctx = malloc(sizeof(float) * N * AH);
    float *ctx = malloc(sizeof(float) * N * AH), *p32 = malloc(sizeof(float) * probs), *p16 = malloc(sizeof(float) * probs);
    float *d32 = malloc(sizeof(float) * N * 3 * AH), *d16 = malloc(sizeof(float) * N * 3 * AH);
    fill(qkv, N * 3 * AH, 52, 1.5f), fill(dctx, N * AH, 53, 1.0f);
    AttentionArgs a32 = attention_args(false, mode, 0.1f), a16 = attention_args(true, mode, 0.1f);
    k_attention_forward(ctx, p32, qkv, &a32);
    k_attention_backward(d32, dctx, qkv, p32, &a32);
    k_attention_forward(ctx, p16, qkv, &a16);
    k_attention_backward(d16, dctx, qkv, p16, &a16);
    double smax = 0;   /* the largest |score| sum over the batch */
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AA; h++)
            for (int i = 0; i < AT; i++)
                for (int j = 0; j < att_kv_len[b]; j++) {
                    double sabs = 0;
                    for (int c = 0; c < AD; c++)
                        sabs += fabs((double)qkv[((size_t)b * AT + i) * 3 * AH + h * AD + c] *
                                     qkv[((size_t)b * AT + j) * 3 * AH + AH + h * AD + c]);
                    smax = fmax(smax, sabs / sqrt(AD));
                }
    const double e = (2 * u + u * u) * smax;
    const double tol = 2 * u * 4 + 2 * e + chain_reorder_tolerance(2 * sqrt(AD) + 6 * sqrt(AT));
    double err = rel_norm_error(d16, d32, N * 3 * AH);
    CHECKF(err <= tol && err > 0.01 * tol, "%s attention backward: %.3g relative to fp32 (tolerance %.3g)",
           mode_name(mode), err, tol);
    printf("    %s backward: %.2g (tolerance %.2g)\n", mode_name(mode), err, tol);
    free(qkv), free(dctx), free(ctx), free(p32), free(p16), free(d32), free(d16);
}

/* Q, K, V given already in 16 bits (AttentionArgs.qkv16, as the model's QKV product stores
 * them): read in place, and the fp32 QKV not read at all (NaN here); the same values as
 * rounding the fp32 QKV block by block, multiplied with another row stride, so the same
 * results up to a flipped 16-bit rounding downstream (one u per rounded operand). */
static void check_attention_qkv16(HalfMode mode) {
    const size_t N = (size_t)AB * AT, probs = (size_t)AB * AA * AT * AT;
    float *qkv = malloc(sizeof(float) * N * 3 * AH), *nan_qkv = malloc(sizeof(float) * N * 3 * AH);
    float *dctx = malloc(sizeof(float) * N * AH), *c1 = malloc(sizeof(float) * N * AH), *c2 = malloc(sizeof(float) * N * AH);
    float *p1 = malloc(sizeof(float) * probs), *p2 = malloc(sizeof(float) * probs);
    float *d1 = malloc(sizeof(float) * N * 3 * AH), *d2 = malloc(sizeof(float) * N * 3 * AH);
    uint16_t *qkv16 = malloc(sizeof(uint16_t) * N * 3 * AH);
    fill(qkv, N * 3 * AH, 56, 1.5f), fill(dctx, N * AH, 57, 1.0f);
    for (size_t i = 0; i < N * 3 * AH; i++) nan_qkv[i] = NAN;
    k_to_half(mode, qkv16, qkv, (long)(N * 3 * AH));
    AttentionArgs plain = attention_args(true, mode, 0.1f), in_place = plain;
    in_place.qkv16 = qkv16;
    k_attention_forward(c1, p1, qkv, &plain), k_attention_backward(d1, dctx, qkv, p1, &plain);
    k_attention_forward(c2, p2, nan_qkv, &in_place), k_attention_backward(d2, dctx, nan_qkv, p2, &in_place);
    const double tol = 4 * unit_roundoff(mode);
    double ec = rel_norm_error(c2, c1, N * AH), ed = rel_norm_error(d2, d1, N * 3 * AH);
    CHECKF(ec <= tol && ed <= tol, "%s attention on 16-bit QKV: ctx %.3g, dqkv %.3g (tolerance %.3g)", mode_name(mode),
           ec, ed, tol);
    free(qkv), free(nan_qkv), free(dctx), free(c1), free(c2), free(p1), free(p2), free(d1), free(d2), free(qkv16);
}

/* Inference (no probabilities kept, Q, K, V in bf16 as the QKV product stores them): a
 * sequence's heads run in groups on batched products (kernels/cpu/layers.c,
 * attention_forward_grouped), against the per-head path the training forward takes
 * (probabilities kept, no dropout) on the same 16-bit QKV: the same products of the same
 * rounded values, summed in another order, so within a few u (a flipped bf16 rounding of a
 * probability at most). Padded and packed layouts, a hole in a mask, lengths off the product
 * buckets (16, then multiples of 32), the batch (whole sequences per thread) and each sequence
 * alone (its head groups shared by the threads), which gives the same bits as in the batch. */
static void check_attention_grouped(int d) {
    enum { B = 5, T = 37, A = 4 };
    const int H = A * d;
    int32_t kv_len[B], mask[B * T], seq_row[B], seq_rows[B];
    uint8_t holes[B];
    float *qkv = malloc(sizeof(float) * B * T * 3 * H), *nan_qkv = malloc(sizeof(float) * B * T * 3 * H);
    float *grouped = malloc(sizeof(float) * B * T * H), *per_head = malloc(sizeof(float) * B * T * H);
    float *one = malloc(sizeof(float) * T * H), *probs = malloc(sizeof(float) * B * A * T * T);
    uint16_t *qkv16 = malloc(sizeof(uint16_t) * B * T * 3 * H);
    fill(qkv, (size_t)B * T * 3 * H, 71, 1.5f);
    for (size_t i = 0; i < (size_t)B * T * 3 * H; i++) nan_qkv[i] = NAN;   /* the fp32 QKV is not read */
    for (int packed = 0; packed < 2; packed++) {
        int rows = 0;
        for (int b = 0; b < B; b++) {
            kv_len[b] = T - (b * 9) % 25, holes[b] = b == 2;
            for (int t = 0; t < T; t++) mask[b * T + t] = t < kv_len[b] && !(holes[b] && t == 5);
            seq_row[b] = rows, seq_rows[b] = packed ? kv_len[b] : T, rows += seq_rows[b];
        }
        k_to_half(HALF_BF16, qkv16, qkv, (long)rows * 3 * H);
        AttentionArgs a = {.B = B, .T = T, .A = A, .d = d, .kv_len = kv_len, .mask = mask, .has_holes = holes,
                           .seq_row = packed ? seq_row : NULL, .seq_rows = packed ? seq_rows : NULL, .half = true,
                           .half_mode = HALF_BF16, .qkv16 = qkv16};
        k_attention_forward(grouped, NULL, nan_qkv, &a);
        if (amx_enabled() && amx_attention_ok(T, d)) {   /* bert.c's tile loop: oneDNN's bits */
            amx_set_enabled(false);
            k_attention_forward(per_head, NULL, nan_qkv, &a);
            amx_set_enabled(true);
            CHECKF(!memcmp(grouped, per_head, sizeof(float) * rows * H), "d %d packed %d: AMX loop differs from oneDNN's",
                   d, packed);
        }
        k_attention_forward(per_head, probs, nan_qkv, &a);
        const double err = rel_norm_error(grouped, per_head, (size_t)rows * H), tol = 4 * unit_roundoff(HALF_BF16);
        CHECKF(err <= tol, "d %d packed %d: grouped attention %.3g from the per-head path (tolerance %.3g)", d, packed,
               err, tol);
        for (int b = 0; b < B; b++) {   /* each sequence alone */
            AttentionArgs alone = a;
            int32_t r0 = 0, n = seq_rows[b];
            alone.B = 1, alone.kv_len = kv_len + b, alone.mask = mask + b * T, alone.has_holes = holes + b;
            alone.seq_row = packed ? &r0 : NULL, alone.seq_rows = packed ? &n : NULL;
            alone.qkv16 = qkv16 + (size_t)seq_row[b] * 3 * H;
            k_attention_forward(one, NULL, nan_qkv, &alone);
            CHECKF(!memcmp(one, grouped + (size_t)seq_row[b] * H, sizeof(float) * seq_rows[b] * H),
                   "d %d packed %d: sequence %d alone differs from the batch's", d, packed, b);
        }
    }
    free(qkv), free(nan_qkv), free(grouped), free(per_head), free(one), free(probs), free(qkv16);
}

/* Head sizes 16 (oneDNN's batched products) and 32, 64 (on AMX CPUs bert.c's own tile loop,
 * kernels/cpu/amx.h, checked also to give the bits of oneDNN's products; elsewhere oneDNN's). */
static void test_attention_grouped(void) {
    if (!gemm_bf16_native_available()) return;
    check_attention_grouped(16), check_attention_grouped(32), check_attention_grouped(64);
}

static void test_attention_half(void) {
    check_attention_forward(HALF_BF16_EMULATED), check_attention_forward(HALF_FP16);
    check_attention_backward(HALF_BF16_EMULATED), check_attention_backward(HALF_FP16);
    check_attention_qkv16(HALF_BF16_EMULATED), check_attention_qkv16(HALF_FP16);
    if (!gemm_bf16_native_available()) return;
    check_attention_forward(HALF_BF16), check_attention_backward(HALF_BF16), check_attention_qkv16(HALF_BF16);
    /* native and emulated round the same values: they differ only in the order of sums */
    const size_t N = (size_t)AB * AT, probs = (size_t)AB * AA * AT * AT;
    float *qkv = malloc(sizeof(float) * N * 3 * AH), *dctx = malloc(sizeof(float) * N * AH);
    float *c1 = malloc(sizeof(float) * N * AH), *c2 = malloc(sizeof(float) * N * AH);
    float *p1 = malloc(sizeof(float) * probs), *p2 = malloc(sizeof(float) * probs);
    float *d1 = malloc(sizeof(float) * N * 3 * AH), *d2 = malloc(sizeof(float) * N * 3 * AH);
    fill(qkv, N * 3 * AH, 54, 1.5f), fill(dctx, N * AH, 55, 1.0f);
    AttentionArgs native = attention_args(true, HALF_BF16, 0.1f), emulated = attention_args(true, HALF_BF16_EMULATED, 0.1f);
    k_attention_forward(c1, p1, qkv, &native), k_attention_backward(d1, dctx, qkv, p1, &native);
    k_attention_forward(c2, p2, qkv, &emulated), k_attention_backward(d2, dctx, qkv, p2, &emulated);
    /* a sum's reordering can flip a 16-bit rounding downstream (P, dS): one unit u at most
     * per rounded operand, to first order */
    const double tol = 4 * BF16_UNIT_ROUNDOFF;
    double ec = rel_norm_error(c1, c2, N * AH), ed = rel_norm_error(d1, d2, N * 3 * AH);
    CHECKF(ec <= tol && ed <= tol, "native vs emulated attention: ctx %.3g, dqkv %.3g (tolerance %.3g)", ec, ed, tol);
    free(qkv), free(dctx), free(c1), free(c2), free(p1), free(p2), free(d1), free(d2);
}

/* ---- the model ---- */

enum { MB = 3, MT = 24, MP = 4 };

static BertModel *tiny_model_spread(BertPrecision precision, float initializer_range) {
    BertConfig c;
    BertError err;
    if (bert_config_preset("bert-tiny", &c, &err)) { CHECKF(0, "%s", err.msg); return NULL; }
    c.vocab_size = 1000;
    c.initializer_range = initializer_range;
    BertModel *m = NULL;
    if (bert_model_create(&m, &c, MB, MT, MP, &err)) { CHECKF(0, "%s", err.msg); return NULL; }
    bert_init_weights(m, 5);
    if (bert_set_precision(m, precision, &err)) { CHECKF(0, "%s", err.msg); bert_model_free(m); return NULL; }
    return m;
}

static BertModel *tiny_model(BertPrecision precision) { return tiny_model_spread(precision, 0.02f); }

/* Norm-wise bound for the model: every bf16 product on the chain adds at most 2 u_b (its two
 * operands' rounding, relative to sum|a b|, which for these well-scaled, sign-mixed values
 * is the size of the result) and the stages' errors add to first order (LayerNorm
 * renormalises each sublayer); plus fp32 reordering (chain_reorder_tolerance). Forward:
 * 6 products per layer (4 linear, QK^T and PV) and 3 in the MLM head (pooler, NSP on the
 * other branch), and GELU taken at its bf16-rounded input (u_b more per layer); backward:
 * each product twice more (dinp and dweight) along the chain, and GELU's derivative taken
 * at the rounded input (u_b more per layer). */
static double bf16_chain_tolerance(int layers, bool backward) {
    double products = 6.0 * layers + 3 + layers / 2.0;
    if (backward) products = 3 * products + layers / 2.0;
    return 2 * BF16_UNIT_ROUNDOFF * products + chain_reorder_tolerance(2000);
}

static void test_model_against_fp32(void) {
    BertModel *ref = tiny_model(BERT_FP32), *m = tiny_model(BERT_BF16_EMULATED);
    if (!ref || !m) return;
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, 1000, 0.2, 9);
    const int L = bert_model_config(m)->num_hidden_layers;
    const size_t V = 1000, np = bert_num_parameters(m);
    bert_zero_grad(ref), bert_zero_grad(m);
    float l32 = bert_forward(ref, &s.train, false, 0), l16 = bert_forward(m, &s.train, false, 0);
    double tol = bf16_chain_tolerance(L, false);
    CHECKF(fabs(l16 - l32) <= tol * fabs(l32), "loss %.6f vs fp32 %.6f (tolerance %.3g relative)", l16, l32, tol);
    double e = rel_norm_error(bert_mlm_logits(m), bert_mlm_logits(ref), (size_t)MB * MP * V);
    CHECKF(e <= tol, "MLM logits: %.3g relative to fp32 (tolerance %.3g)", e, tol);
    printf("    loss %.6f vs %.6f, MLM logits %.2g (tolerance %.2g)\n", l16, l32, e, tol);
    CHECK(bert_backward(ref, &s.train) == 0 && bert_backward(m, &s.train) == 0);
    e = rel_norm_error(bert_grads(m), bert_grads(ref), np);
    double tol_b = bf16_chain_tolerance(L, true);
    CHECKF(e <= tol_b, "gradients: %.3g relative to fp32 (tolerance %.3g)", e, tol_b);
    printf("    gradients %.2g (tolerance %.2g)\n", e, tol_b);
    /* the check sees bf16 at all: the two are not the same computation */
    CHECKF(e > 1e-5, "gradients equal to fp32's to %.3g: no bf16 rounding happened", e);

    if (gemm_bf16_native_available()) {   /* native: the emulated model's numbers up to fp32 reordering */
        BertModel *n = tiny_model(BERT_BF16);
        bert_zero_grad(n);
        float ln = bert_forward(n, &s.train, false, 0);
        CHECK(bert_backward(n, &s.train) == 0);
        double en = rel_norm_error(bert_grads(n), bert_grads(m), np);
        double tol_n = 4 * chain_reorder_tolerance(2000);
        CHECKF(fabs(ln - l16) <= tol_n * fabs(l16) && en <= tol_n, "native vs emulated: loss %.7f vs %.7f, "
               "gradients %.3g (tolerance %.3g)", ln, l16, en, tol_n);
        /* that ran on packed weights; the plain ones give the same to reordering */
        size_t with_packed = bert_model_bytes(n);
        bert_set_packed_weights(n, false);
        CHECKF(bert_model_bytes(n) < with_packed, "no packed weights were kept (%zu bytes either way)", with_packed);
        float lp = bert_forward(n, &s.train, false, 0);
        CHECKF(fabs(lp - ln) <= tol_n * fabs(ln), "plain weights: loss %.7f vs packed %.7f", lp, ln);
        /* lean inference: the feed-forward's product and GELU fused, written in bf16 (the same
         * roundings, GELU by oneDNN's polynomial); such a forward has no backward */
        bert_set_packed_weights(n, true), bert_set_mode(n, BERT_MODE_LEAN_INFERENCE);
        float lf = bert_forward(n, &s.train, false, 0);
        double ef = rel_norm_error(bert_mlm_logits(n), bert_mlm_logits(m), (size_t)MB * MP * V);
        CHECKF(fabs(lf - l16) <= tol_n * fabs(l16) && ef <= tol_n, "fused: loss %.7f vs emulated %.7f, logits %.3g "
               "(tolerance %.3g)", lf, l16, ef, tol_n);
        CHECKF(bert_backward(n, &s.train) != 0 && strstr(bert_last_error(n), "lean"),
               "a backward after a lean inference forward: %s", bert_last_error(n));
        bert_forward(n, &s.train, true, 1);   /* training forwards keep everything */
        CHECKF(bert_backward(n, &s.train) == 0, "backward after a training forward: %s", bert_last_error(n));
        bert_model_free(n);
    }
    synthetic_batch_free(&s);
    bert_model_free(ref), bert_model_free(m);
}

/* fp16 storage: the model against fp32 within fp16's bound (as bf16's, with u = 2^-11), and
 * what loss scaling is for: a scale that pushes the output gradients past 65504 makes the
 * fp16 gradients overflow (inf/NaN: the step would be skipped), where fp32 stays finite and
 * unscales to the unscaled gradient. */
static void test_model_fp16(void) {
    BertModel *ref = tiny_model(BERT_FP32), *m = tiny_model(BERT_FP16);
    if (!ref || !m) return;
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, 1000, 0.2, 9);
    const int L = bert_model_config(m)->num_hidden_layers;
    const size_t np = bert_num_parameters(m);
    bert_zero_grad(ref), bert_zero_grad(m);
    float l32 = bert_forward(ref, &s.train, false, 0), l16 = bert_forward(m, &s.train, false, 0);
    const double scale_tol = FP16_UNIT_ROUNDOFF / BF16_UNIT_ROUNDOFF;   /* the bf16 bound, at fp16's roundoff */
    double tol = bf16_chain_tolerance(L, false) * scale_tol + chain_reorder_tolerance(2000);
    CHECKF(fabs(l16 - l32) <= tol * fabs(l32), "fp16 loss %.6f vs fp32 %.6f (tolerance %.3g)", l16, l32, tol);
    bert_set_loss_scale(m, 1024.0f), bert_set_loss_scale(ref, 1024.0f);
    CHECK(bert_backward(ref, &s.train) == 0 && bert_backward(m, &s.train) == 0);
    double e = rel_norm_error(bert_grads(m), bert_grads(ref), np);
    double tol_b = bf16_chain_tolerance(L, true) * scale_tol + chain_reorder_tolerance(2000);
    CHECKF(e <= tol_b && e > 1e-6, "fp16 gradients (scaled by 1024): %.3g relative to fp32 (tolerance %.3g)", e, tol_b);
    printf("    fp16: loss %.6f vs %.6f, gradients %.2g (tolerance %.2g)\n", l16, l32, e, tol_b);
    /* overflow: output gradients of ~1e9 */
    bert_zero_grad(ref), bert_zero_grad(m);
    bert_set_loss_scale(m, 1e12f), bert_set_loss_scale(ref, 1e12f);
    bert_forward(ref, &s.train, false, 0), bert_forward(m, &s.train, false, 0);
    bert_backward(ref, &s.train), bert_backward(m, &s.train);
    int nonfinite16 = 0, nonfinite32 = 0;
    for (size_t i = 0; i < np; i++) nonfinite16 += !isfinite(bert_grads(m)[i]), nonfinite32 += !isfinite(bert_grads(ref)[i]);
    CHECKF(nonfinite16 > 0 && nonfinite32 == 0, "loss scale 1e12: %d non-finite fp16 gradients, %d fp32", nonfinite16,
           nonfinite32);
    synthetic_batch_free(&s);
    bert_model_free(ref), bert_model_free(m);
}

/* The bf16 weights (and, native, their packed copies) follow the fp32 master copy: after it
 * changes (through bert_params or bert_params_changed), the next forward uses the new values. */
static void check_weights_follow_master(BertPrecision precision) {
    BertModel *a = tiny_model(precision), *b = tiny_model(precision);
    if (!a || !b) return;
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, 1000, 0.0, 4);
    float before = bert_forward(a, &s.train, false, 0);
    const BertParamInfo *t = bert_find_param(a, "bert.encoder.layer.0.intermediate.dense.weight");
    for (size_t i = 0; i < t->numel; i++) t->data[i] *= 1.5f;   /* written through the table ... */
    bert_params_changed(a);                                      /* ... and said */
    float *pb = bert_params(b);                                  /* b: written through bert_params */
    const BertParamInfo *tb = bert_find_param(b, t->name);
    for (size_t i = 0; i < tb->numel; i++) pb[tb->offset + i] *= 1.5f;
    BertModel *fresh = tiny_model(precision);
    const BertParamInfo *tf = bert_find_param(fresh, t->name);
    for (size_t i = 0; i < tf->numel; i++) tf->data[i] *= 1.5f;   /* written before any forward */
    float la = bert_forward(a, &s.train, false, 0), lb = bert_forward(b, &s.train, false, 0);
    float lf = bert_forward(fresh, &s.train, false, 0);
    CHECKF(la != before, "the forward after a change gave the old loss %.7f", la);
    CHECKF(la == lf && lb == lf, "after the change: %.7f and %.7f, a fresh model %.7f", la, lb, lf);
    synthetic_batch_free(&s);
    bert_model_free(a), bert_model_free(b), bert_model_free(fresh);
}

static void test_weights_follow_master(void) {
    check_weights_follow_master(BERT_BF16_EMULATED);
    if (gemm_bf16_native_available()) check_weights_follow_master(BERT_BF16);   /* packed weights */
}

/* Every tensor reaches the 16-bit products: a change to any one parameter tensor (each
 * element moved by up to 0.5, ten times the initialisation's spread) moves the 16-bit model's
 * loss as it moves fp32's. The whole-model comparison above cannot see a product reading a
 * stale or missing 16-bit copy of a weight: at its initialisation attention is near uniform,
 * and zeroing the key and value weights' copies kept its loss within the bound. Two checks:
 * - exact, on any machine: where fp32's loss moves (beyond 1e-4 of it), the 16-bit loss
 *   moves at all; a stale copy leaves it bit for bit as it was;
 * - where fp32's move is well past rounding (100 times the 16-bit loss's own error, and
 *   0.1% of the loss), the 16-bit move is within half of it: a missing copy loses all of it,
 *   rounding a small fraction (within 0.08 on the machines measured). At least three
 *   quarters of the tensors move that far (the key bias never does: softmax ignores a
 *   shift).
 * On the plain weights (emulated), the packed ones (native) and a forward-only model's
 * (packed through a scratch). */
static void check_every_tensor_read(BertPrecision precision, bool forward_only) {
    BertModel *ref = tiny_model_spread(BERT_FP32, 0.05f), *m = tiny_model_spread(precision, 0.05f);
    if (!ref || !m) {
        bert_model_free(ref), bert_model_free(m);
        return;
    }
    if (forward_only) bert_set_mode(m, BERT_MODE_FORWARD_ONLY);
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, 1000, 0.2, 8);
    const float l32 = bert_forward(ref, &s.train, false, 0), l16 = bert_forward(m, &s.train, false, 0);
    /* moves checked: past 100 times the 16-bit loss's own error here, and past 0.1% of the
     * loss (should that error be small by chance) */
    const double floor = fmax(100 * fabs((double)l16 - l32), 0.001 * fabs(l32));
    const int n = bert_num_param_tensors(m);
    int checked = 0;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const BertParamInfo *t = bert_param_info(m, i), *tr = bert_param_info(ref, i);
        float *saved = malloc(sizeof(float) * t->numel);
        memcpy(saved, t->data, sizeof(float) * t->numel);
        for (size_t k = 0; k < t->numel; k++) {
            const float step = 0.5f * (float)((k * 2654435761u) % 2001) / 1000.0f - 0.5f;   /* in [-0.5, 0.5] */
            t->data[k] += step, tr->data[k] += step;
        }
        bert_params_changed(m), bert_params_changed(ref);
        const double d32 = (double)bert_forward(ref, &s.train, false, 0) - l32;
        const double d16 = (double)bert_forward(m, &s.train, false, 0) - l16;
        memcpy(t->data, saved, sizeof(float) * t->numel), memcpy(tr->data, saved, sizeof(float) * t->numel);
        bert_params_changed(m), bert_params_changed(ref);
        free(saved);
        /* a stale copy leaves the 16-bit loss exactly as it was, whatever the machine's rounding */
        CHECKF(fabs(d32) <= 1e-4 * fabs(l32) || d16 != 0, "%s%s: changing %s does not move the 16-bit loss (fp32's by %.4g)",
               precision == BERT_BF16 ? "native" : "emulated", forward_only ? ", forward-only" : "", t->name, d32);
        if (fabs(d32) <= floor) continue;   /* too small a move to tell from rounding (the key bias: none) */
        checked++;
        worst = fmax(worst, fabs(d16 - d32) / fabs(d32));
        CHECKF(fabs(d16 - d32) <= 0.5 * fabs(d32), "%s%s: changing %s moves the loss by %.4g, fp32's by %.4g",
               precision == BERT_BF16 ? "native" : "emulated", forward_only ? ", forward-only" : "", t->name, d16, d32);
    }
    CHECKF(checked >= n * 3 / 4, "only %d of %d tensors moved fp32's loss beyond %.3g", checked, n, floor);
    printf("    %s%s: %d of %d tensors checked, the moves within %.2g of fp32's (bound 0.5)\n",
           precision == BERT_BF16 ? "native" : "emulated", forward_only ? ", forward-only" : "", checked, n, worst);
    synthetic_batch_free(&s);
    bert_model_free(ref), bert_model_free(m);
}

static void test_every_tensor_read(void) {
    check_every_tensor_read(BERT_BF16_EMULATED, false);
    if (!gemm_bf16_native_available()) return;
    check_every_tensor_read(BERT_BF16, false);
    check_every_tensor_read(BERT_BF16, true);
}

static void test_precision_refused_without_instructions(void) {
    BertModel *m = tiny_model(BERT_FP32);
    if (!m) return;
    BertError err;
    int rc = bert_set_precision(m, BERT_BF16, &err);
    if (gemm_bf16_native_available()) {
        CHECKF(rc == 0, "bf16 refused on a CPU with bf16 instructions: %s", err.msg);
    } else {
        CHECK(rc == -1 && strstr(err.msg, "bf16_emulate"));
        CHECK(bert_precision(m) == BERT_FP32);   /* unchanged: no silent fallback either way */
    }
    CHECK(bert_set_precision(m, (BertPrecision)7, &err) == -1);
    bert_model_free(m);
}

/* fp32 stays fp32: switching to bf16 and back gives the fp32 numbers bit for bit. */
static void test_fp32_unchanged(void) {
    BertModel *a = tiny_model(BERT_FP32), *b = tiny_model(BERT_BF16_EMULATED);
    if (!a || !b) return;
    BertError err;
    CHECK(bert_set_precision(b, BERT_FP32, &err) == 0);
    SyntheticBatch s;
    synthetic_batch_alloc(&s, MB, MT, MP);
    synthetic_batch_random(&s, 1000, 0.1, 6);
    bert_zero_grad(a), bert_zero_grad(b);
    CHECK(bert_forward(a, &s.train, true, 3) == bert_forward(b, &s.train, true, 3));
    bert_backward(a, &s.train), bert_backward(b, &s.train);
    CHECK(!memcmp(bert_grads(a), bert_grads(b), sizeof(float) * bert_num_parameters(a)));
    synthetic_batch_free(&s);
    bert_model_free(a), bert_model_free(b);
}

int main(void) {
    printf("bf16 instructions: %s\n", gemm_bf16_native_available() ? "yes (native path checked)" : "no (emulated only)");
    RUN_TEST(test_rounding);
    RUN_TEST(test_fp16_rounding);
    RUN_TEST(test_fp16_arrays_match_scalar);
    RUN_TEST(test_products_emulated);
    RUN_TEST(test_products_native);
    RUN_TEST(test_products_fp16);
    RUN_TEST(test_linear_emulated);
    RUN_TEST(test_linear_native);
    RUN_TEST(test_linear_fp16);
    RUN_TEST(test_packed_weights_native);
    RUN_TEST(test_gelu_half);
    RUN_TEST(test_matmul_gelu_native);
    RUN_TEST(test_attention_half);
    RUN_TEST(test_attention_grouped);
    RUN_TEST(test_model_against_fp32);
    RUN_TEST(test_model_fp16);
    RUN_TEST(test_weights_follow_master);
    RUN_TEST(test_every_tensor_read);
    RUN_TEST(test_precision_refused_without_instructions);
    RUN_TEST(test_fp32_unchanged);
    return test_summary();
}
