/* The CUDA backend's matrix products and typed linear layer (src/kernels/cuda/linear.cu) against
 * the CPU backend's (kernels/cpu/layers.c, linear.c) on the same inputs, for shapes from 1 row
 * to BERT's widths, with and without bias, accumulating or overwriting, NULL arguments.
 *
 * Tolerances. A product's element is a sum of K terms a_k b_k (plus a bias or, with beta 1,
 * the old value: one more term). Summed in fp32 in any order it is within gamma_{K+1} S of the
 * exact sum, S = sum |terms| (tests/test.h, Higham 3.1). The CPU's sgemm meets that; cuBLAS's
 * fp32 product too (fused multiply-adds only lower it); its 16-bit products on tensor cores
 * accumulate in fp32 but may align and add with truncation, unit roundoff 2^-23: 2 gamma. Two
 * evaluations therefore differ by at most 3 gamma_{K+2} S, S computed per element as |A| |B|^T
 * (+ |bias| or |old value|) by the CPU's sgemm on absolute values (1% margin for its own
 * rounding). The 16-bit products take the same rounded operands on both sides (the bits are
 * checked), and products of two bf16 or two fp16 values are exact in fp32, so the same bound
 * holds with S from the widened 16-bit operands. That bound is far below what a wrong index,
 * transpose or leading dimension gives; TF32 (10-bit operands) is caught separately by a product
 * that is exact in fp32 (identity weights) and must come back bit for bit.
 *
 * A 16-bit result (out16) is rounded once from the GPU's fp32 value: that bound plus one rounding.
 * Exact: the 16-bit roundings of operands (inp16, dout16) and the 16-bit
 * backward's bias gradient (the CPU's 16 row slices, summed in the CPU's order). */
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"

typedef struct { int N, C, OC; } Shape;
/* the last three: the bias gradient's 16 row slices long enough for whole chunks of the rows
 * its kernel fetches ahead (64 to 1024 columns, 32 to 2560, then 16) */
static const Shape SHAPES[] = {
    {1, 64, 3}, {7, 1000, 768}, {33, 64, 1000}, {128, 768, 2304}, {300, 3072, 768}, {300, 768, 3072},
    {2100, 64, 768}, {1100, 32, 2304}, {600, 32, 3072},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

/* The 16-bit modes under test (-1: fp32), and the CPU mode that computes the reference: the
 * CPU's native bf16 may be missing on the GPU machine's CPU; its emulation is the same format. */
static const int MODES[] = {-1, HALF_BF16, HALF_BF16_EMULATED, HALF_FP16};
static const char *mode_name(int m) {
    return m < 0 ? "fp32" : m == HALF_BF16 ? "bf16" : m == HALF_BF16_EMULATED ? "bf16-emulated" : "fp16";
}
static HalfMode cpu_mode(HalfMode m) { return m == HALF_BF16 ? HALF_BF16_EMULATED : m; }

/* ---------------------------------------------------------------- helpers */

static float *absolute(const float *x, size_t n) {
    float *a = malloc(sizeof(float) * (n + 1));
    for (size_t i = 0; i < n; i++) a[i] = fabsf(x[i]);
    return a;
}
static float *copy_of(const float *x, size_t n) {
    float *c = malloc(sizeof(float) * (n + 1));
    memcpy(c, x, sizeof(float) * n);
    return c;
}
static float *filled(size_t n, float v) {
    float *x = malloc(sizeof(float) * (n + 1));
    for (size_t i = 0; i < n; i++) x[i] = v;
    return x;
}
static uint16_t *halves(HalfMode mode, const float *x, size_t n) {   /* the CPU's rounding */
    uint16_t *h = malloc(sizeof(uint16_t) * (n + 1));
    k_to_half(mode, h, x, (long)n);
    return h;
}
static float *widened(HalfMode mode, const uint16_t *h, size_t n) {
    float *x = malloc(sizeof(float) * (n + 1));
    k_from_half(mode, x, h, (long)n);
    return x;
}
static float *rounded(HalfMode mode, const float *x, size_t n) {   /* x through the 16-bit format */
    uint16_t *h = halves(mode, x, n);
    float *r = widened(mode, h, n);
    free(h);
    return r;
}
static uint16_t *download16(const void *device, size_t n) {
    uint16_t *h = malloc(sizeof(uint16_t) * (n + 1));
    CUDA_FN(k_download)(h, device, sizeof(uint16_t) * n);
    return h;
}

/* S = |inp| |W|^T + |bias| [N, OC]: the forward's magnitudes. */
static float *forward_magnitudes(const float *inp, const float *W, const float *bias, int N, int C, int OC) {
    float *ai = absolute(inp, (size_t)N * C), *aw = absolute(W, (size_t)OC * C);
    float *ab = bias ? absolute(bias, OC) : NULL, *S = malloc(sizeof(float) * ((size_t)N * OC + 1));
    k_matmul_forward(S, ai, aw, ab, N, C, OC);
    free(ai), free(aw), free(ab);
    return S;
}

/* The backward's magnitudes: Sdinp = |dout| |W| + |dinp0| (dinp0 NULL: overwritten), Sdw =
 * |dout|^T |inp| + |dw0|, Sdb = column sums of |dout| + |db0|. */
static void backward_magnitudes(float **Sdinp, float **Sdw, float **Sdb, const float *dout, const float *inp,
                                const float *W, const float *dinp0, const float *dw0, const float *db0, int N, int C,
                                int OC) {
    float *ad = absolute(dout, (size_t)N * OC), *ai = absolute(inp, (size_t)N * C), *aw = absolute(W, (size_t)OC * C);
    *Sdinp = dinp0 ? absolute(dinp0, (size_t)N * C) : filled((size_t)N * C, 0);
    *Sdw = absolute(dw0, (size_t)OC * C);
    *Sdb = absolute(db0, OC);
    k_matmul_backward(*Sdinp, *Sdw, *Sdb, ad, ai, aw, N, C, OC, dinp0 != NULL);
    free(ad), free(ai), free(aw);
}

/* TF32's operands keep 10 of fp32's 23 fraction bits: each rounded (2^-11 relative) or cut
 * (2^-10), so a product of two moves by at most 2^-10 + 2^-10 + 2^-20 < 1.01 2^-9 of its size:
 * added to close_by_sums's factor while test_tf32 runs (0 otherwise: fp32 operands are exact). */
static double operand_error = 0;

/* Whether got is within 3 gamma_{K+2} mag[i] (1% margin; + operand_error mag[i]) of want at every
 * element (see the top); prints the count, the first failure as (row, column) of a [*, cols]
 * matrix, and the worst ratio of difference to bound. */
static bool close_by_sums(const char *what, const float *want, const float *got, const float *mag, size_t n, int cols,
                          double K) {
    const double g = 3 * gamma_k(K + 2) * 1.01 + operand_error;
    size_t bad = 0, first = 0, worst_at = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double diff = fabs((double)got[i] - want[i]), bound = g * mag[i] + 1e-38;
        const bool ok = diff <= bound;   /* false for NaN */
        if (!ok && bad++ == 0) first = i;
        if (!(diff / bound <= worst)) worst = diff / bound, worst_at = i;
    }
    if (bad)
        printf("    %s: %zu of %zu beyond 3 gamma_%g S; first [%zu, %zu]: cpu %.9g cuda %.9g (bound %.3g); "
               "worst diff/bound %.3g at [%zu, %zu]\n",
               what, bad, n, K + 2, first / cols, first % cols, want[first], got[first], g * mag[first] + 1e-38,
               worst, worst_at / cols, worst_at % cols);
    return bad == 0;
}

/* A 16-bit result stored rounded: the GPU's fp32 value is within close_by_sums's bound of the
 * CPU's (want), and one rounding to the 16-bit format moves it by at most u |value| (u = 2^-8
 * for bf16, 2^-11 for fp16; 2^-25 absolute below fp16's normal range). */
static bool close16_by_sums(const char *what, const float *want, const uint16_t *got16, HalfMode mode,
                            const float *mag, size_t n, int cols, double K) {
    const double g = 3 * gamma_k(K + 2) * 1.01, u = mode == HALF_FP16 ? 0x1p-11 : 0x1p-8;
    float *got = widened(mode, got16, n);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        const double sums = g * mag[i], bound = sums + u * (fabs((double)want[i]) + sums) + 0x1p-25 + 1e-38;
        if (!(fabs((double)got[i] - want[i]) <= bound) && bad++ == 0) first = i;
    }
    if (bad)
        printf("    %s: %zu of %zu beyond the sums' bound plus one 16-bit rounding; first [%zu, %zu]: cpu %.9g cuda "
               "%.9g\n", what, bad, n, first / cols, first % cols, want[first], got[first]);
    free(got);
    return bad == 0;
}

static float *device_floats(const float *h, size_t n) { return cuda_copy_in(h, sizeof(float) * n); }
static uint16_t *device_halves(const uint16_t *h, size_t n) { return cuda_copy_in(h, sizeof(uint16_t) * n); }

/* ---------------------------------------------------------------- fp32 exactness (no TF32) */

/* W = identity [64, 64]: out = inp @ I^T is exact in fp32 (one nonzero term per sum), so any
 * reduced precision (TF32 keeps 10 significand bits) shows as a difference. Operands with full
 * 24-bit significands. The backward: dinp = dout @ I = dout, and with inp = I (64 rows),
 * dweight = 0 + dout^T @ I = dout^T: also exact, and a transposition or leading-dimension
 * mistake would show too. */
static void test_fp32_is_not_tf32(void) {
    enum { D = 64, N = 64 };
    float *eye = filled(D * D, 0), *x = cuda_test_values(N * D, 71, 1.0f);
    for (int i = 0; i < D; i++) eye[i * D + i] = 1;
    for (int i = 0; i < N * D; i++) x[i] *= 1 + 0x1.23457p-20f;   /* low significand bits set */
    float *nans = filled(N * D, NAN), *zeros = filled(D * D, 0);
    float *d_eye = device_floats(eye, D * D), *d_x = device_floats(x, N * D);
    float *d_out = device_floats(nans, N * D), *d_dw = device_floats(zeros, D * D);
    CUDA_FN(k_matmul_forward)(d_out, d_x, d_eye, NULL, N, D, D);
    float *got = cuda_copy_out(d_out, N * D);
    CHECKF(cuda_same("forward inp @ I^T (TF32?)", x, got, sizeof(float) * N * D), "fp32 forward is not exact fp32");
    free(got);
    CUDA_FN(k_matmul_backward)(d_out, d_dw, NULL, d_x, d_eye, d_eye, N, D, D, false);   /* dout = x, inp = I */
    got = cuda_copy_out(d_out, N * D);
    CHECKF(cuda_same("dinp = dout @ I (TF32?)", x, got, sizeof(float) * N * D), "fp32 dinp is not exact fp32");
    free(got);
    float *xt = malloc(sizeof(float) * D * D);
    for (int o = 0; o < D; o++)
        for (int c = 0; c < D; c++) xt[o * D + c] = x[c * D + o];   /* dweight[o, c] = sum_n dout[n, o] I[n, c] */
    got = cuda_copy_out(d_dw, D * D);
    CHECKF(cuda_same("dweight = dout^T @ I (TF32? transposed?)", xt, got, sizeof(float) * D * D),
           "fp32 dweight is not exact fp32");
    free(got), free(xt), free(eye), free(x), free(nans), free(zeros);
    cuda_release(d_eye), cuda_release(d_x), cuda_release(d_out), cuda_release(d_dw);
}

/* k_set_tf32: x @ I^T for a 1024-square identity (big enough that cuBLAS runs tensor cores) gives
 * x with each value's fraction cut to TF32's 10 bits (rounded to nearest, even or away, or
 * truncated: whichever the hardware does; x itself where a product stayed fp32), and with TF32
 * in use at least one value must have lost bits; off again, the product is exact. */
static int identity_product_tf32(const char *what, bool tf32) {
    enum { D = 1024 };
    float *eye = filled((size_t)D * D, 0), *x = cuda_test_values((size_t)D * D, 73, 1.0f);
    for (int i = 0; i < D; i++) eye[(size_t)i * D + i] = 1;
    for (size_t i = 0; i < (size_t)D * D; i++) x[i] *= 1 + 0x1.23457p-20f;   /* low fraction bits set */
    float *d_eye = device_floats(eye, (size_t)D * D), *d_x = device_floats(x, (size_t)D * D);
    float *d_out = CUDA_FN(k_alloc)(sizeof(float) * D * D);
    CUDA_FN(k_matmul_forward)(d_out, d_x, d_eye, NULL, D, D, D);
    float *got = cuda_copy_out(d_out, (size_t)D * D);
    size_t cut = 0, wrong = 0;
    for (size_t i = 0; i < (size_t)D * D; i++) {
        const uint32_t b = float_bits(x[i]), g = float_bits(got[i]), low = 0x1fffu;
        const uint32_t even = (b + 0xfffu + ((b >> 13) & 1u)) & ~low, away = (b + 0x1000u) & ~low, trunc = b & ~low;
        if (g == b) continue;
        if (tf32 && (g == even || g == away || g == trunc)) cut++;
        else if (wrong++ == 0) printf("    %s: x 0x%08x gave 0x%08x\n", what, b, g);
    }
    CHECKF(wrong == 0, "%s: %zu values neither x nor x in TF32", what, wrong);
    if (tf32) CHECKF(cut > 0, "%s: no value lost a bit: the product did not run in TF32", what);
    free(eye), free(x), free(got);
    cuda_release(d_eye), cuda_release(d_x), cuda_release(d_out);
    return (int)cut;
}

/* ---------------------------------------------------------------- forward */

static void forward_case(Shape s, int mode, bool with_bias) {
    const int N = s.N, C = s.C, OC = s.OC;
    const size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    char what[160];
    snprintf(what, sizeof what, "%s forward N %d C %d OC %d%s", mode_name(mode), N, C, OC, with_bias ? " bias" : "");
    float *inp = cuda_test_values(ni, 1000 + N + C, 1.0f), *W = cuda_test_values(nw, 2000 + OC + C, 0.05f);
    float *bias = with_bias ? cuda_test_values(OC, 3000 + OC, 0.1f) : NULL;
    float *want = malloc(sizeof(float) * (no + 1)), *nans = filled(no, NAN);
    float *d_inp = device_floats(inp, ni), *d_W = device_floats(W, nw), *d_bias = bias ? device_floats(bias, OC) : NULL;
    float *d_out = device_floats(nans, no);   /* NaN: an overwrite (beta 0) must not read it */

    if (mode < 0) {
        k_matmul_forward(want, inp, W, bias, N, C, OC);
        float *S = forward_magnitudes(inp, W, bias, N, C, OC);
        CUDA_FN(k_matmul_forward)(d_out, d_inp, d_W, d_bias, N, C, OC);
        float *got = cuda_copy_out(d_out, no);
        CHECKF(close_by_sums(what, want, got, S, no, OC, C), "%s", what);
        /* the packed entry point runs the same product: the same bits */
        CHECK(CUDA_FN(k_packed_weight_bytes_f32)(C, OC) == 0);
        float *d_out2 = device_floats(nans, no);
        CUDA_FN(k_matmul_forward_packed)(d_out2, d_inp, d_W, NULL, d_bias, N, C, OC);
        float *got2 = cuda_copy_out(d_out2, no);
        CHECKF(cuda_same("k_matmul_forward_packed vs k_matmul_forward", got, got2, sizeof(float) * no), "%s", what);
        free(S), free(got), free(got2), cuda_release(d_out2);
    } else {
        const HalfMode m = (HalfMode)mode;
        uint16_t *inp16 = halves(m, inp, ni), *W16 = halves(m, W, nw);
        float *inpw = widened(m, inp16, ni), *Ww = widened(m, W16, nw);
        uint16_t *cpu_inp16 = malloc(sizeof(uint16_t) * (ni + 1));
        CHECK(k_matmul_forward_half(want, inp, cpu_inp16, W16, NULL, bias, N, C, OC, cpu_mode(m)));
        float *S = forward_magnitudes(inpw, Ww, bias, N, C, OC);
        uint16_t *junk = malloc(sizeof(uint16_t) * (ni + 1));
        memset(junk, 0xab, sizeof(uint16_t) * ni);   /* inp16 must be written over */
        uint16_t *d_inp16 = device_halves(junk, ni), *d_W16 = device_halves(W16, nw);

        /* weight NULL: inp rounded into inp16, false, out untouched */
        CHECKF(!CUDA_FN(k_matmul_forward_half)(d_out, d_inp, d_inp16, NULL, NULL, d_bias, N, C, OC, m),
               "%s: weight NULL returned true", what);
        uint16_t *got16 = download16(d_inp16, ni);
        CHECKF(cuda_same("inp16 (weight NULL)", inp16, got16, sizeof(uint16_t) * ni), "%s", what);
        float *untouched = cuda_copy_out(d_out, no);
        CHECKF(cuda_same("out with weight NULL", nans, untouched, sizeof(float) * no), "%s: out written", what);
        free(got16), free(untouched);

        /* the product from inp (inp16 cleared first: rounded again) */
        CUDA_FN(k_upload)(d_inp16, junk, sizeof(uint16_t) * ni);
        CHECK(CUDA_FN(k_matmul_forward_half)(d_out, d_inp, d_inp16, d_W16, NULL, d_bias, N, C, OC, m));
        got16 = download16(d_inp16, ni);
        CHECKF(cuda_same("inp16", inp16, got16, sizeof(uint16_t) * ni), "%s", what);
        CHECKF(cuda_same("inp16 cpu vs cpu reference", inp16, cpu_inp16, sizeof(uint16_t) * ni), "%s", what);
        float *got = cuda_copy_out(d_out, no);
        CHECKF(close_by_sums(what, want, got, S, no, OC, C), "%s", what);

        /* inp NULL: inp16 already holds the rounded input: the same product, the same bits */
        float *d_out2 = device_floats(nans, no);
        CHECK(CUDA_FN(k_matmul_forward_half)(d_out2, NULL, d_inp16, d_W16, NULL, d_bias, N, C, OC, m));
        float *got2 = cuda_copy_out(d_out2, no);
        CHECKF(cuda_same("out with inp NULL vs with inp", got, got2, sizeof(float) * no), "%s", what);
        free(got2);

        /* out16: stored rounded (by the product's epilogue, or from the fp32 product in out, scratch):
         * the CPU's product within the sums' bound and one rounding; inp16 rounded again */
        uint16_t *d_out16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * no + 4);
        CUDA_FN(k_upload)(d_out2, nans, sizeof(float) * no);
        CHECKF(!CUDA_FN(k_matmul_forward_half_out16)(d_out16, d_out2, d_inp, d_inp16, NULL, NULL, d_bias, N, C, OC, m),
               "%s: out16 with weight NULL returned true", what);
        CUDA_FN(k_upload)(d_inp16, junk, sizeof(uint16_t) * ni);
        CHECK(CUDA_FN(k_matmul_forward_half_out16)(d_out16, d_out2, d_inp, d_inp16, d_W16, NULL, d_bias, N, C, OC, m));
        uint16_t *out16 = download16(d_out16, no);
        CHECKF(close16_by_sums("out16", want, out16, m, S, no, OC, C), "%s", what);
        free(got16);
        got16 = download16(d_inp16, ni);
        CHECKF(cuda_same("inp16 (out16)", inp16, got16, sizeof(uint16_t) * ni), "%s", what);
        CHECK(CUDA_FN(k_packed_weight_bytes)(m, C, OC) == 0);

        free(out16), free(got), free(got16), free(S);
        free(inp16), free(W16), free(inpw), free(Ww), free(cpu_inp16), free(junk);
        cuda_release(d_inp16), cuda_release(d_W16), cuda_release(d_out2), cuda_release(d_out16);
    }
    free(inp), free(W), free(bias), free(want), free(nans);
    cuda_release(d_inp), cuda_release(d_W), cuda_release(d_out);
    if (d_bias) cuda_release(d_bias);
}

static void test_forward(void) {
    for (int s = 0; s < N_SHAPES; s++)
        for (int m = 0; m < 4; m++)
            for (int b = 0; b < 2; b++) forward_case(SHAPES[s], MODES[m], b);
}

/* ---------------------------------------------------------------- backward */

typedef enum {
    OVERWRITE_DINP,    /* dinp = (NaN before: must not be read), dbias += */
    ACCUMULATE_DINP,   /* dinp +=, dbias += */
    NO_DINP_NO_DBIAS,  /* dinp NULL, dbias NULL: only dweight */
    DOUT_ROUNDED,      /* 16-bit only: dout NULL, dout16 already rounded, dbias NULL, dinp += */
} BackwardCase;
static const char *case_name(BackwardCase c) {
    return c == OVERWRITE_DINP ? "overwrite" : c == ACCUMULATE_DINP ? "accumulate" : c == NO_DINP_NO_DBIAS ? "dinp,dbias NULL" : "dout NULL";
}

static void backward_case(Shape s, int mode, BackwardCase bc) {
    const int N = s.N, C = s.C, OC = s.OC;
    const size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    const bool with_dinp = bc != NO_DINP_NO_DBIAS, accumulate = bc == ACCUMULATE_DINP || bc == DOUT_ROUNDED;
    const bool with_dbias = bc == OVERWRITE_DINP || bc == ACCUMULATE_DINP;
    char what[160];
    snprintf(what, sizeof what, "%s backward N %d C %d OC %d %s", mode_name(mode), N, C, OC, case_name(bc));
    float *inp = cuda_test_values(ni, 1100 + N + C, 1.0f), *W = cuda_test_values(nw, 2100 + OC + C, 0.05f);
    float *dout = cuda_test_values(no, 4100 + N + OC, 0.01f);
    float *dinp0 = accumulate ? cuda_test_values(ni, 5100 + N, 0.02f) : filled(ni, NAN);
    float *dw0 = cuda_test_values(nw, 6100 + OC, 0.01f), *db0 = cuda_test_values(OC, 7100 + OC, 0.1f);
    float *dinp = copy_of(dinp0, ni), *dw = copy_of(dw0, nw), *db = copy_of(db0, OC);
    float *d_dinp = device_floats(dinp0, ni), *d_dw = device_floats(dw0, nw), *d_db = device_floats(db0, OC);
    float *d_dout = device_floats(dout, no);
    float *Sdinp, *Sdw, *Sdb;

    if (mode < 0) {
        float *d_inp = device_floats(inp, ni), *d_W = device_floats(W, nw);
        k_matmul_backward(with_dinp ? dinp : NULL, dw, with_dbias ? db : NULL, dout, inp, W, N, C, OC, accumulate);
        CUDA_FN(k_matmul_backward)(with_dinp ? d_dinp : NULL, d_dw, with_dbias ? d_db : NULL, d_dout, d_inp, d_W, N, C,
                                   OC, accumulate);
        backward_magnitudes(&Sdinp, &Sdw, &Sdb, dout, inp, W, accumulate ? dinp0 : NULL, dw0, db0, N, C, OC);
        float *got = cuda_copy_out(d_db, OC);
        /* the CPU sums each column in row order, the GPU in 64 slices: N + 64 + 1 additions at most */
        if (with_dbias) CHECKF(close_by_sums("dbias", db, got, Sdb, OC, OC, N + 66), "%s", what);
        else CHECKF(cuda_same("dbias NULL: untouched", db0, got, sizeof(float) * OC), "%s", what);
        free(got);
        cuda_release(d_inp), cuda_release(d_W);
    } else {
        const HalfMode m = (HalfMode)mode;
        uint16_t *inp16 = halves(m, inp, ni), *W16 = halves(m, W, nw), *dout16 = halves(m, dout, no);
        float *inpw = widened(m, inp16, ni), *Ww = widened(m, W16, nw), *doutw = widened(m, dout16, no);
        uint16_t *d_inp16 = device_halves(inp16, ni), *d_W16 = device_halves(W16, nw);
        uint16_t *cpu_dout16 = malloc(sizeof(uint16_t) * (no + 1));
        uint16_t *d_dout16 = bc == DOUT_ROUNDED ? device_halves(dout16, no) : CUDA_FN(k_alloc)(sizeof(uint16_t) * no + 4);
        if (bc == DOUT_ROUNDED) memcpy(cpu_dout16, dout16, sizeof(uint16_t) * no);
        const float *dout_arg = bc == DOUT_ROUNDED ? NULL : dout;
        k_matmul_backward_half(with_dinp ? dinp : NULL, dw, with_dbias ? db : NULL, dout_arg, inp16, W16, N, C, OC,
                               accumulate, cpu_dout16, cpu_mode(m));
        CUDA_FN(k_matmul_backward_half)(with_dinp ? d_dinp : NULL, d_dw, with_dbias ? d_db : NULL,
                                        bc == DOUT_ROUNDED ? NULL : d_dout, d_inp16, d_W16, N, C, OC, accumulate,
                                        d_dout16, m);
        uint16_t *got16 = download16(d_dout16, no);
        CHECKF(cuda_same("dout16", dout16, got16, sizeof(uint16_t) * no), "%s", what);
        float *got = cuda_copy_out(d_db, OC);   /* the CPU's slices in the CPU's order: the same bits */
        CHECKF(cuda_same(with_dbias ? "dbias" : "dbias NULL: untouched", db, got, sizeof(float) * OC), "%s", what);
        backward_magnitudes(&Sdinp, &Sdw, &Sdb, doutw, inpw, Ww, accumulate ? dinp0 : NULL, dw0, db0, N, C, OC);
        free(got16), free(got), free(inp16), free(W16), free(dout16), free(inpw), free(Ww), free(doutw);
        free(cpu_dout16);
        cuda_release(d_inp16), cuda_release(d_W16), cuda_release(d_dout16);
    }
    float *got = cuda_copy_out(d_dw, nw);
    CHECKF(close_by_sums("dweight", dw, got, Sdw, nw, C, N), "%s", what);
    free(got);
    got = cuda_copy_out(d_dinp, ni);
    if (with_dinp) CHECKF(close_by_sums("dinp", dinp, got, Sdinp, ni, C, OC), "%s", what);
    else CHECKF(cuda_same("dinp NULL: untouched", dinp0, got, sizeof(float) * ni), "%s", what);
    free(got), free(Sdinp), free(Sdw), free(Sdb);
    free(inp), free(W), free(dout), free(dinp0), free(dw0), free(db0), free(dinp), free(dw), free(db);
    cuda_release(d_dinp), cuda_release(d_dw), cuda_release(d_db), cuda_release(d_dout);
}

static void test_backward(void) {
    for (int s = 0; s < N_SHAPES; s++)
        for (int m = 0; m < 4; m++)
            for (int c = 0; c < (MODES[m] < 0 ? 3 : 4); c++) backward_case(SHAPES[s], MODES[m], (BackwardCase)c);
}

/* Device copies of host arrays placed `offset` floats past an allocation's start (which the CUDA
 * backend aligns to 256 bytes): views as an activation's may start. */
typedef struct {
    void *base;
    float *at;
} View;
static View view_of(const float *h, size_t n, int offset) {
    View v = {CUDA_FN(k_alloc)(sizeof(float) * (n + (size_t)offset)), NULL};
    v.at = (float *)v.base + offset;
    CUDA_FN(k_upload)(v.at, h, sizeof(float) * n);
    return v;
}

/* The products with every operand and result at the 256-byte alignment or 64, 32 or 16 bytes
 * past it, and the bias likewise, in an order that makes each plan key matter: cuBLASLt's plans
 * are keyed by the operands' alignment (its heuristic assumes 256 bytes unless told) and by the
 * bias's (which the heuristic reads), and a plan found for more alignment than a later call's
 * pointers have must not serve that call (its algorithm may refuse or misread them: the host
 * emulator's cuBLASLt refuses). So the operands go to 64 bytes with the bias still aligned,
 * then the bias to 16 with the operands as before, then both lower. fp32 and bf16, forward with
 * a bias and the backward accumulating, against the CPU within the sums' bound; under
 * BERT_CUDA_LT_BACKWARD=1 (gpu_check.sh) the backward's products take the same path. */
static void test_unaligned_views(void) {
    const int N = 33, C = 768, OC = 2304;
    const size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *inp = cuda_test_values(ni, 81, 1.0f), *W = cuda_test_values(nw, 82, 0.05f);
    float *bias = cuda_test_values(OC, 83, 0.1f), *dout = cuda_test_values(no, 84, 0.01f);
    float *dinp0 = cuda_test_values(ni, 85, 0.02f), *dw0 = cuda_test_values(nw, 86, 0.01f);
    const int offsets[5] = {0, 16, 16, 8, 4}, bias_offsets[5] = {0, 0, 4, 8, 16};   /* floats */
    for (int o = 0; o < 5; o++)
        for (int half = 0; half < 2; half++) {
            const HalfMode m = HALF_BF16;
            char what[128];
            snprintf(what, sizeof what, "%s products from views %d bytes past the alignment (the bias %d)",
                     half ? "bf16" : "fp32", 4 * offsets[o], 4 * bias_offsets[o]);
            /* the operands as both sides multiply them: fp32, or the bf16 roundings widened */
            float *a = half ? rounded(m, inp, ni) : copy_of(inp, ni), *w = half ? rounded(m, W, nw) : copy_of(W, nw);
            float *g = half ? rounded(m, dout, no) : copy_of(dout, no);
            float *want = malloc(sizeof(float) * no), *dinp = copy_of(dinp0, ni), *dw = copy_of(dw0, nw);
            k_matmul_forward(want, a, w, bias, N, C, OC);
            k_matmul_backward(dinp, dw, NULL, g, a, w, N, C, OC, true);
            float *S = forward_magnitudes(a, w, bias, N, C, OC), *Sdinp, *Sdw, *Sdb;
            float *zero_db = filled(OC, 0);
            backward_magnitudes(&Sdinp, &Sdw, &Sdb, g, a, w, dinp0, dw0, zero_db, N, C, OC);
            View d_inp = view_of(inp, ni, offsets[o]), d_W = view_of(W, nw, offsets[o]);
            View d_bias = view_of(bias, OC, bias_offsets[o]), d_out = view_of(want, no, offsets[o]);
            View d_dout = view_of(dout, no, offsets[o]), d_dinp = view_of(dinp0, ni, offsets[o]);
            View d_dw = view_of(dw0, nw, offsets[o]);
            if (!half) {
                CUDA_FN(k_matmul_forward)(d_out.at, d_inp.at, d_W.at, d_bias.at, N, C, OC);
                CUDA_FN(k_matmul_backward)(d_dinp.at, d_dw.at, NULL, d_dout.at, d_inp.at, d_W.at, N, C, OC, true);
            } else {   /* 16-bit operands in views at the same offset (in 16-bit elements: half the bytes) */
                uint16_t *i16 = halves(m, inp, ni), *w16 = halves(m, W, nw);
                void *b_i16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * (ni + 2 * (size_t)offsets[o]));
                void *b_w16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * (nw + 2 * (size_t)offsets[o]));
                void *b_g16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * (no + 2 * (size_t)offsets[o]));
                uint16_t *d_i16 = (uint16_t *)b_i16 + 2 * offsets[o], *d_w16 = (uint16_t *)b_w16 + 2 * offsets[o];
                uint16_t *d_g16 = (uint16_t *)b_g16 + 2 * offsets[o];
                CUDA_FN(k_upload)(d_i16, i16, sizeof(uint16_t) * ni), CUDA_FN(k_upload)(d_w16, w16, sizeof(uint16_t) * nw);
                CHECK(CUDA_FN(k_matmul_forward_half)(d_out.at, NULL, d_i16, d_w16, NULL, d_bias.at, N, C, OC, m));
                CUDA_FN(k_matmul_backward_half)(d_dinp.at, d_dw.at, NULL, d_dout.at, d_i16, d_w16, N, C, OC, true, d_g16,
                                                m);
                free(i16), free(w16);
                CUDA_FN(k_free)(b_i16), CUDA_FN(k_free)(b_w16), CUDA_FN(k_free)(b_g16);
            }
            float *got = cuda_copy_out(d_out.at, no);
            CHECKF(close_by_sums("forward", want, got, S, no, OC, C), "%s", what);
            free(got);
            got = cuda_copy_out(d_dinp.at, ni);
            CHECKF(close_by_sums("dinp", dinp, got, Sdinp, ni, C, OC + 1), "%s", what);
            free(got);
            got = cuda_copy_out(d_dw.at, nw);
            CHECKF(close_by_sums("dweight", dw, got, Sdw, nw, C, N + 1), "%s", what);
            free(got);
            View views[] = {d_inp, d_W, d_bias, d_out, d_dout, d_dinp, d_dw};
            for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) CUDA_FN(k_free)(views[v].base);
            free(a), free(w), free(g), free(want), free(dinp), free(dw), free(S), free(Sdinp), free(Sdw), free(Sdb);
            free(zero_db);
        }
    free(inp), free(W), free(bias), free(dout), free(dinp0), free(dw0);
}

/* --tf32: the fp32 products in TF32 (k_set_tf32), every forward and backward case within the
 * operands' extra error; then off again: exact fp32 (the identity product and
 * test_fp32_is_not_tf32 after this test). */
static void test_tf32(void) {
    CHECKF(CUDA_FN(k_set_tf32)(true), "k_set_tf32(true) refused on a GPU with bf16 (compute capability 8+)");
    identity_product_tf32("TF32 on: identity product", true);
    operand_error = 0x1p-9 * 1.01;
    for (int s = 0; s < N_SHAPES; s++) {
        forward_case(SHAPES[s], -1, false), forward_case(SHAPES[s], -1, true);
        for (int c = 0; c < 3; c++) backward_case(SHAPES[s], -1, (BackwardCase)c);
    }
    operand_error = 0;
    CHECK(CUDA_FN(k_set_tf32)(false));
    identity_product_tf32("TF32 off again: identity product", false);
}

/* ---------------------------------------------------------------- typed layer */

/* KWeight's 16-bit copy: made on each call here (counting them), by the backend under test. */
typedef struct {
    HalfMode mode;
    uint16_t *buffer;   /* device memory for the CUDA side, host for the CPU side */
    bool device;
    int calls;
} HalfCopy;
static const uint16_t *make_half(void *ctx, const float *f32, int C, int OC) {
    HalfCopy *h = ctx;
    h->calls++;
    if (h->device) CUDA_FN(k_to_half)(h->mode, h->buffer, f32, (long)C * OC);
    else k_to_half(h->mode, h->buffer, f32, (long)C * OC);
    return h->buffer;
}

/* fp32 (with pack_f32 both ways: nothing is packed), bf16, bf16 emulated, fp16 (int8: none on
 * the GPU, k_int8_support() 0) */
static const KPrecision PRECISIONS[] = {
    {false, HALF_BF16, false, false}, {false, HALF_BF16, true, false}, {true, HALF_BF16, false, false},
    {true, HALF_BF16_EMULATED, false, false}, {true, HALF_FP16, false, false},
};
enum { N_PRECISIONS = sizeof PRECISIONS / sizeof PRECISIONS[0] };

typedef struct {   /* one layer's inputs on both sides */
    Shape s;
    KPrecision gpu, cpu;
    float *inp, *W, *bias, *dout, *pre, *dinp0, *dw0, *db0;   /* host */
    float *d_inp, *d_W, *d_bias, *d_dout, *d_pre;             /* device */
    uint16_t *inp16, *pre16, *d_inp16, *d_pre16;              /* rounded (host), device scratch / copies */
    float *inpw, *Ww;                                         /* the operands (16-bit: rounded, widened) */
    float *prew;                                              /* pre16 widened */
    HalfCopy cpu_half, gpu_half;
    KWeight cpu_w, gpu_w;
} Layer;

/* In place: the weights' callbacks point at the layer's HalfCopy fields. */
static void layer_init(Layer *layer, Shape s, KPrecision p) {
    const size_t ni = (size_t)s.N * s.C, nw = (size_t)s.OC * s.C, no = (size_t)s.N * s.OC;
    Layer L = {.s = s, .gpu = p, .cpu = p};
    L.cpu.half_mode = cpu_mode(p.half_mode);
    L.inp = cuda_test_values(ni, 8100 + s.N, 1.0f), L.W = cuda_test_values(nw, 8200 + s.OC, 0.05f);
    L.bias = cuda_test_values(s.OC, 8300, 0.1f), L.dout = cuda_test_values(no, 8400, 0.01f);
    L.pre = cuda_test_values(no, 8500, 2.0f), L.dinp0 = cuda_test_values(ni, 8600, 0.02f);
    L.dw0 = cuda_test_values(nw, 8700, 0.01f), L.db0 = cuda_test_values(s.OC, 8800, 0.1f);
    L.d_inp = device_floats(L.inp, ni), L.d_W = device_floats(L.W, nw), L.d_bias = device_floats(L.bias, s.OC);
    L.d_dout = device_floats(L.dout, no), L.d_pre = device_floats(L.pre, no);
    const HalfMode m = p.half_mode;
    L.inp16 = halves(m, L.inp, ni), L.pre16 = halves(m, L.pre, no);
    L.d_inp16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * ni + 4), L.d_pre16 = device_halves(L.pre16, no);
    uint16_t *W16 = halves(m, L.W, nw);
    L.inpw = p.half ? widened(m, L.inp16, ni) : copy_of(L.inp, ni);
    L.Ww = p.half ? widened(m, W16, nw) : copy_of(L.W, nw);
    free(W16);
    L.cpu_half = (HalfCopy){m, malloc(sizeof(uint16_t) * (nw + 1)), false, 0};
    L.gpu_half = (HalfCopy){m, CUDA_FN(k_alloc)(sizeof(uint16_t) * nw + 4), true, 0};
    L.prew = widened(m, L.pre16, no);
    *layer = L;
    layer->cpu_w = (KWeight){L.W, NULL, make_half, &layer->cpu_half, s.C, s.OC};
    layer->gpu_w = (KWeight){L.d_W, NULL, make_half, &layer->gpu_half, s.C, s.OC};
}
static void layer_free(Layer *L) {
    free(L->inp), free(L->W), free(L->bias), free(L->dout), free(L->pre), free(L->dinp0), free(L->dw0), free(L->db0);
    free(L->inp16), free(L->pre16), free(L->inpw), free(L->Ww), free(L->prew), free(L->cpu_half.buffer);
    cuda_release(L->d_inp), cuda_release(L->d_W), cuda_release(L->d_bias), cuda_release(L->d_dout);
    cuda_release(L->d_pre), cuda_release(L->d_inp16), cuda_release(L->d_pre16), cuda_release(L->gpu_half.buffer);
}
static const char *precision_name(const KPrecision *p) {
    return !p->half ? (p->pack_f32 ? "fp32 pack_f32" : "fp32") : mode_name(p->half_mode);
}

/* k_linear_forward and k_linear_forward_to, and k_linear_act_forward's "not here". */
static void typed_forward(Layer *L) {
    const int N = L->s.N, C = L->s.C, OC = L->s.OC;
    const size_t ni = (size_t)N * C, no = (size_t)N * OC;
    char what[160];
    snprintf(what, sizeof what, "k_linear_forward %s N %d C %d OC %d", precision_name(&L->gpu), N, C, OC);
    float *want = malloc(sizeof(float) * (no + 1)), *S = forward_magnitudes(L->inpw, L->Ww, L->bias, N, C, OC);
    uint16_t *cpu_inp16 = malloc(sizeof(uint16_t) * (ni + 1));
    k_linear_forward(&L->cpu, want, L->inp, cpu_inp16, &L->cpu_w, L->bias, N);
    float *d_out = device_floats(want, no);   /* overwritten */
    CUDA_FN(k_linear_forward)(&L->gpu, d_out, L->d_inp, L->d_inp16, &L->gpu_w, L->d_bias, N);
    float *got = cuda_copy_out(d_out, no);
    CHECKF(close_by_sums(what, want, got, S, no, OC, C), "%s", what);
    CHECKF(L->gpu_half.calls == (L->gpu.half ? 1 : 0), "%s: the 16-bit weight made %d times", what,
           L->gpu_half.calls);
    if (L->gpu.half) {
        uint16_t *got16 = download16(L->d_inp16, ni);
        CHECKF(cuda_same("inp16", L->inp16, got16, sizeof(uint16_t) * ni), "%s", what);
        free(got16);
    }
    free(got);

    /* forward_to: fp32 into out; 16-bit into out16 rounded (out: scratch, maybe unwritten) */
    snprintf(what, sizeof what, "k_linear_forward_to %s N %d C %d OC %d", precision_name(&L->gpu), N, C, OC);
    uint16_t *d_out16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * no + 4);
    float *nans = filled(no, NAN);
    CUDA_FN(k_upload)(d_out, nans, sizeof(float) * no);
    free(nans);
    CUDA_FN(k_linear_forward_to)(&L->gpu, d_out, d_out16, L->d_inp, L->d_inp16, &L->gpu_w, L->d_bias, N);
    got = cuda_copy_out(d_out, no);
    if (L->gpu.half) {
        uint16_t *got16 = download16(d_out16, no);
        CHECKF(close16_by_sums("out16", want, got16, L->gpu.half_mode, S, no, OC, C), "%s", what);
        free(got16);
    } else {
        CHECKF(close_by_sums(what, want, got, S, no, OC, C), "%s", what);
    }
    /* no fused product + GELU on the GPU: false, with or without a packed pointer */
    int dummy;
    KWeight packed_w = L->gpu_w;
    packed_w.packed = &dummy;
    CHECK(!CUDA_FN(k_linear_act_forward)(&L->gpu, d_out, d_out16, L->d_inp, L->d_inp16, &L->gpu_w, L->d_bias, N,
                                         ACT_GELU));
    CHECK(!CUDA_FN(k_linear_act_forward)(&L->gpu, d_out, d_out16, L->d_inp, L->d_inp16, &packed_w, L->d_bias, N,
                                         ACT_GELU));
    free(want), free(S), free(cpu_inp16), free(got);
    cuda_release(d_out), cuda_release(d_out16);
}

/* k_linear_backward: dinp accumulated, dweight, dbias. */
static void typed_backward(Layer *L) {
    const int N = L->s.N, C = L->s.C, OC = L->s.OC;
    const size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    const HalfMode m = L->gpu.half_mode;
    char what[160];
    snprintf(what, sizeof what, "k_linear_backward %s N %d C %d OC %d", precision_name(&L->gpu), N, C, OC);
    float *dinp = copy_of(L->dinp0, ni), *dw = copy_of(L->dw0, nw), *db = copy_of(L->db0, OC);
    float *d_dinp = device_floats(dinp, ni), *d_dw = device_floats(dw, nw), *d_db = device_floats(db, OC);
    uint16_t *dout16 = malloc(sizeof(uint16_t) * (no + 1)), *d_dout16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * no + 4);
    uint16_t *d_inp16 = device_halves(L->inp16, ni);
    k_linear_backward(&L->cpu, dinp, dw, db, L->dout, L->inp, L->inp16, &L->cpu_w, N, true, dout16);
    L->gpu_half.calls = 0;
    CUDA_FN(k_linear_backward)(&L->gpu, d_dinp, d_dw, d_db, L->d_dout, L->d_inp, d_inp16, &L->gpu_w, N, true,
                               d_dout16);
    CHECKF(L->gpu_half.calls == (L->gpu.half ? 1 : 0), "%s: the 16-bit weight made %d times", what,
           L->gpu_half.calls);
    uint16_t *dout16_ref = halves(m, L->dout, no);
    float *doutw = L->gpu.half ? widened(m, dout16_ref, no) : copy_of(L->dout, no);
    free(dout16_ref);
    float *Sdinp, *Sdw, *Sdb;
    backward_magnitudes(&Sdinp, &Sdw, &Sdb, doutw, L->inpw, L->Ww, L->dinp0, L->dw0, L->db0, N, C, OC);
    float *got = cuda_copy_out(d_dinp, ni);
    CHECKF(close_by_sums("dinp", dinp, got, Sdinp, ni, C, OC), "%s", what);
    free(got), got = cuda_copy_out(d_dw, nw);
    CHECKF(close_by_sums("dweight", dw, got, Sdw, nw, C, N), "%s", what);
    free(got), got = cuda_copy_out(d_db, OC);
    if (L->gpu.half) {
        CHECKF(cuda_same("dbias", db, got, sizeof(float) * OC), "%s", what);
        uint16_t *got16 = download16(d_dout16, no);
        CHECKF(cuda_same("dout16", dout16, got16, sizeof(uint16_t) * no), "%s", what);
        free(got16);
    } else {
        /* dbias: the fp32 operand sums (dout itself), CPU row order vs GPU slices */
        float *Sdb32, *unused1, *unused2;
        backward_magnitudes(&unused1, &unused2, &Sdb32, L->dout, L->inp, L->W, NULL, L->dw0, L->db0, N, C, OC);
        CHECKF(close_by_sums("dbias", db, got, Sdb32, OC, OC, N + 66), "%s", what);
        free(Sdb32), free(unused1), free(unused2);
    }
    free(got), free(doutw), free(Sdinp), free(Sdw), free(Sdb), free(dinp), free(dw), free(db), free(dout16);
    cuda_release(d_dinp), cuda_release(d_dw), cuda_release(d_db), cuda_release(d_dout16), cuda_release(d_inp16);
}

/* k_activation_forward_to (the GELU kernels of another file, through the typed layer): libm's and
 * CUDA's erff/tanhf/expf differ by a few ulp, so GELU(x) = 0.5 x (1 + erf(x / sqrt 2)) may differ
 * by 0.5 |x| 4 ulp(1) < 1e-6 |x| plus 4 ulp of the result; 16-bit results by one unit of the
 * 16-bit format where the fp32 values straddle a rounding boundary. */
static void typed_activation(Layer *L, Activation act) {
    const long n = (long)L->s.N * L->s.OC;
    const HalfMode m = L->gpu.half_mode;
    char what[160];
    snprintf(what, sizeof what, "k_activation_forward_to %s act %d n %ld", precision_name(&L->gpu), act, n);
    float *want = malloc(sizeof(float) * (n + 1)), *d_out = device_floats(L->pre, n);
    uint16_t *want16 = malloc(sizeof(uint16_t) * (n + 1)), *d_out16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * n + 4);
    k_activation_forward_to(&L->cpu, want, want16, L->pre, L->pre16, n, act);
    CUDA_FN(k_activation_forward_to)(&L->gpu, d_out, d_out16, L->d_pre, L->d_pre16, n, act);
    float *got;
    double unit;   /* relative size of one unit in the last place */
    if (L->gpu.half) {
        uint16_t *got16 = download16(d_out16, n);
        got = widened(m, got16, n);
        free(want);
        want = widened(m, want16, n);
        unit = m == HALF_FP16 ? 0x1p-10 : 0x1p-7;
        free(got16);
    } else {
        got = cuda_copy_out(d_out, n);
        unit = 4 * 0x1p-23;
    }
    long bad = 0, differ = 0;
    for (long i = 0; i < n; i++) {
        const double diff = fabs((double)got[i] - want[i]);
        const double in = L->gpu.half ? L->prew[i] : L->pre[i];   /* the activation's input */
        const double tol = 1e-6 * fabs(in) + unit * fmax(fabs((double)want[i]), fabs((double)got[i])) + 0x1p-24;
        differ += diff != 0;
        if (!(diff <= tol) && bad++ == 0)
            printf("    %s: first beyond tolerance at %ld: input %.9g cpu %.9g cuda %.9g\n", what, i, in, want[i],
                   got[i]);
    }
    if (differ) printf("    (%s: %ld of %ld differ, within a few ulp)\n", what, differ, n);
    CHECKF(bad == 0, "%s: %ld beyond tolerance", what, bad);
    free(want), free(want16), free(got);
    cuda_release(d_out), cuda_release(d_out16);
}

/* k_linear_act_backward: GELU's backward (another file's kernel) then the product's. The GELU
 * gradient may differ from the CPU's by a few ulp of erf/tanh/exp: |GELU'| error below 1e-5
 * for |x| <= 3 (tanh's form: 0.5 |x| (1 - t^2) with t^2 off by 8 ulp, times its inner slope),
 * and 16-bit results by one unit where that straddles a rounding boundary. So the GELU gradient
 * is compared with that allowance, and the products are compared against the CPU's products
 * on the GPU's own GELU gradient (the same operands: the product bound above). */
static void typed_act_backward(Layer *L, Activation act) {
    const int N = L->s.N, C = L->s.C, OC = L->s.OC;
    const size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    const HalfMode m = L->gpu.half_mode;
    char what[160];
    snprintf(what, sizeof what, "k_linear_act_backward %s act %d N %d C %d OC %d", precision_name(&L->gpu), act, N, C,
             OC);
    float *dinp = copy_of(L->dinp0, ni), *dw = copy_of(L->dw0, nw), *db = copy_of(L->db0, OC);
    float *d_dinp = device_floats(dinp, ni), *d_dw = device_floats(dw, nw), *d_db = device_floats(db, OC);
    float *dout = copy_of(L->dout, no), *d_dout = device_floats(dout, no);   /* fp32: overwritten */
    uint16_t *dout16 = malloc(sizeof(uint16_t) * (no + 1)), *d_dout16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * no + 4);
    uint16_t *d_inp16 = device_halves(L->inp16, ni);
    k_linear_act_backward(&L->cpu, dinp, dw, db, dout, L->pre, L->pre16, L->inp, L->inp16, &L->cpu_w, N, act,
                          dout16);
    L->gpu_half.calls = 0;
    CUDA_FN(k_linear_act_backward)(&L->gpu, d_dinp, d_dw, d_db, d_dout, L->d_pre, L->d_pre16, L->d_inp, d_inp16,
                                   &L->gpu_w, N, act, d_dout16);
    CHECKF(L->gpu_half.calls == (L->gpu.half ? 1 : 0), "%s: the 16-bit weight made %d times", what,
           L->gpu_half.calls);

    /* the GELU gradient: fp32 in dout (overwritten), or 16 bits in dout16 */
    float *want, *got;
    uint16_t *got16 = NULL;
    double unit;
    if (L->gpu.half) {
        got16 = download16(d_dout16, no);
        want = widened(m, dout16, no), got = widened(m, got16, no);
        unit = m == HALF_FP16 ? 0x1p-10 : 0x1p-7;
    } else {
        want = copy_of(dout, no), got = cuda_copy_out(d_dout, no);
        unit = 4 * 0x1p-23;
    }
    long bad = 0, differ = 0;
    for (size_t i = 0; i < no; i++) {
        const double diff = fabs((double)got[i] - want[i]);
        const double tol = 1e-5 * fabs(L->dout[i]) + unit * fmax(fabs((double)want[i]), fabs((double)got[i])) + 0x1p-24;
        differ += diff != 0;
        if (!(diff <= tol) && bad++ == 0)
            printf("    %s: GELU gradient [%zu, %zu]: dout %.9g pre %.9g cpu %.9g cuda %.9g\n", what, i / OC, i % OC,
                   L->dout[i], L->gpu.half ? L->prew[i] : L->pre[i], want[i], got[i]);
    }
    if (differ) printf("    (%s: %ld of %zu GELU gradients differ, within a few ulp)\n", what, differ, no);
    CHECKF(bad == 0, "%s: %ld GELU gradients beyond tolerance", what, bad);

    /* dbias: the GELU gradients' column sums: each term within the allowance above, and the sums'
     * own rounding (the same slices for 16 bits; row order vs 64 slices in fp32) */
    float *got_db = cuda_copy_out(d_db, OC);
    for (int c = 0; c < OC; c++) {
        double mag = fabs((double)L->db0[c]);
        for (int n = 0; n < N; n++) mag += 1.2 * fabs((double)L->dout[(size_t)n * OC + c]);   /* |GELU'| < 1.13 */
        const double tol = (1e-5 + 3 * gamma_k(N + 66)) * mag + 0x1p-24 * N;
        if (!(fabs((double)got_db[c] - db[c]) <= tol)) {
            CHECKF(false, "%s: dbias[%d] cpu %.9g cuda %.9g (tolerance %.3g)", what, c, db[c], got_db[c], tol);
            break;
        }
    }

    /* the products on the GPU's GELU gradient, on the CPU */
    float *ref_dinp = copy_of(L->dinp0, ni), *ref_dw = copy_of(L->dw0, nw), *Sdinp, *Sdw, *Sdb;
    if (L->gpu.half) {
        uint16_t *W16 = halves(m, L->W, nw);
        k_matmul_backward_half(ref_dinp, ref_dw, NULL, NULL, L->inp16, W16, N, C, OC, true, got16, cpu_mode(m));
        free(W16);
    } else {
        k_matmul_backward(ref_dinp, ref_dw, NULL, got, L->inp, L->W, N, C, OC, true);
    }
    backward_magnitudes(&Sdinp, &Sdw, &Sdb, got, L->inpw, L->Ww, L->dinp0, L->dw0, L->db0, N, C, OC);
    float *g = cuda_copy_out(d_dinp, ni);
    CHECKF(close_by_sums("dinp (on the GPU's GELU gradient)", ref_dinp, g, Sdinp, ni, C, OC), "%s", what);
    free(g), g = cuda_copy_out(d_dw, nw);
    CHECKF(close_by_sums("dweight (on the GPU's GELU gradient)", ref_dw, g, Sdw, nw, C, N), "%s", what);
    free(g), free(ref_dinp), free(ref_dw), free(Sdinp), free(Sdw), free(Sdb), free(got_db);
    free(want), free(got), free(got16), free(dinp), free(dw), free(db), free(dout), free(dout16);
    cuda_release(d_dinp), cuda_release(d_dw), cuda_release(d_db), cuda_release(d_dout), cuda_release(d_dout16);
    cuda_release(d_inp16);
}

static const Shape LAYER_SHAPES[] = {{1, 64, 3}, {7, 1000, 768}, {128, 768, 3072}};

static void test_typed_layer(void) {
    for (int s = 0; s < 3; s++)
        for (int p = 0; p < N_PRECISIONS; p++) {
            Layer L;
            layer_init(&L, LAYER_SHAPES[s], PRECISIONS[p]);
            typed_forward(&L);
            typed_backward(&L);
            for (int act = 0; act < 2; act++) {
                typed_activation(&L, (Activation)act);
                typed_act_backward(&L, (Activation)act);
            }
            layer_free(&L);
        }
}

static void test_describe(void) {
    char text[256] = "";
    CUDA_FN(k_bf16_describe)(text, sizeof text);
    printf("    %s\n", text);
    CHECK(CUDA_FN(k_bf16_native_available)());
    CHECK(strncmp(text, "cuBLAS bf16 on ", 15) == 0);
}

int main(int argc, char **argv) {
    (void)cuda_close;   /* the header's scalar tolerances: the bounds here are per element */
    setvbuf(stdout, NULL, _IOLBF, 0);   /* details (stdout) before the failed CHECK's line (stderr) */
    if (!cuda_open(argc, argv)) return test_summary();
    RUN_TEST(test_describe);
    RUN_TEST(test_fp32_is_not_tf32);
    RUN_TEST(test_forward);
    RUN_TEST(test_backward);
    RUN_TEST(test_unaligned_views);
    RUN_TEST(test_tf32);
    RUN_TEST(test_fp32_is_not_tf32);   /* again, after TF32 was on and off */
    RUN_TEST(test_typed_layer);
    return test_summary();
}
