/* The CUDA backend's 16-bit conversions, LayerNorm, activations and dropout
 * (src/kernels/cuda/layers_norm_act.cu) against the CPU backend's (src/kernels/cpu/layers.c,
 * gemm_half.c) on the same inputs.
 *
 * Bit for bit where both run the same integer or float operations on the same values: the
 * conversions (every 16-bit pattern back, special and random floats there), dropout (masks and
 * kept values), tanh's backward, LayerNorm's forward (its sums in the CPU's order). Elsewhere
 * within a bound derived per element from the arithmetic (U = 2^-24, float's unit roundoff):
 * - a float sum of k terms in any order is within (k-1) U sum|terms| of the exact sum, so two
 *   orders are within 2 k U sum|terms| of each other (the LayerNorm backward's warp of 32
 *   strided sums and butterfly against the CPU's vectorised loop; row blocks against the CPU's
 *   column loop);
 * - CUDA's erff, expf, tanhf are within 2 ulp of the exact value, glibc's (and libmvec's vector
 *   forms the CPU's loops call) within 4: ULPS = 6 ulp apart, and one ulp of v is at most
 *   2 U |v|; each later float operation on two differing inputs adds at most 2 U (one rounding
 *   on each side) of its result;
 * - two fp32 values a, b delta apart, each rounded to 16 bits, are within delta plus half the
 *   two results' spacings, at most one spacing at the larger result v (bf16: 2^-7 |v|, fp16:
 *   2^-10 |v|, 2^-24 among subnormals): a rounding flip where the two straddle a midpoint.
 * These are worst cases (first order; a factor SAFETY covers the second-order terms); the
 * worst err/bound ratio of each test is printed, so a run shows how close the kernels come.
 * Skips, passing, where no GPU is present. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"

static const double U = 1.0 / 16777216.0;
enum { ULPS = 6, ROW_SLICES_CPU = 16 /* layers.c's ROW_SLICES */ };
static const double SAFETY = 2.0;

static const int NS[] = {1, 3, 128, 1000}, CS[] = {1, 17, 768, 1024};
enum { N_NS = 4, N_CS = 4 };
static const HalfMode MODES[] = {HALF_BF16, HALF_BF16_EMULATED, HALF_FP16};
static const char *const MODE_NAMES[] = {"bf16", "bf16-emulated", "fp16"};
static const Activation ACTS[] = {ACT_GELU, ACT_GELU_NEW};
static const char *const ACT_NAMES[] = {"gelu", "gelu_new"};

/* Per test: the largest err / bound seen, and the failures printed (the first SHOWN of each test,
 * one line each, so that one run's output shows every test's state) and not printed. */
enum { SHOWN = 6 };
static double worst_ratio;
static bool bounded;   /* some comparison within a bound ran */
static int failures_shown, failures_hidden;
static long not_identical, compared;   /* 16-bit results not bit-identical, of how many */

static void begin_test(void) {
    worst_ratio = 0, bounded = false, failures_shown = failures_hidden = 0, not_identical = compared = 0;
}
static void end_test(const char *test) {
    if (!bounded && !failures_hidden) return;   /* bit-identical comparisons that all passed */
    const char *sep = "";
    printf("    %s: ", test);
    if (bounded) printf("worst err/bound %.3g", worst_ratio), sep = "; ";
    if (compared) printf("%s%ld of %ld 16-bit results not bit-identical", sep, not_identical, compared), sep = "; ";
    if (failures_hidden) printf("%s%d more failing comparisons not shown", sep, failures_hidden);
    printf("\n");
}
/* Records a failure; whether to print it. */
static bool failure_to_show(void) {
    test_case_failed = 1;
    if (failures_shown < SHOWN) return ++failures_shown, true;
    return failures_hidden++, false;
}

/* Whether |got - want| <= bound[i] for every element (NaN and infinities exactly: NaN for NaN,
 * whatever the payload); on failure prints the count, the first failure and the worst ratio. */
static bool within(const char *what, const float *want, const float *got, const double *bound, size_t n) {
    size_t bad = 0, first = 0, worst_at = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double w = want[i], g = got[i];
        bool ok;
        if (!isfinite(w) || !isfinite(g)) ok = (isnan(w) && isnan(g)) || w == g;
        else {
            const double err = fabs(g - w), r = err == 0 ? 0 : bound[i] > 0 ? err / bound[i] : INFINITY;
            ok = err <= bound[i];
            if (r > worst) worst = r, worst_at = i;
        }
        if (!ok && bad++ == 0) first = i;
    }
    if (bad && failure_to_show())
        printf("    %s: %zu of %zu outside the bound; first at %zu: cpu %.9g cuda %.9g bound %.3g; worst err/bound "
               "%.3g at %zu (cpu %.9g cuda %.9g)\n",
               what, bad, n, first, want[first], got[first], bound[first], worst, worst_at, want[worst_at],
               got[worst_at]);
    if (worst > worst_ratio) worst_ratio = worst;
    bounded = true;
    return bad == 0;
}

/* Whether the n elements of `size` bytes are the same bytes; on failure prints the count and the
 * first differing element's bytes as an integer. */
static bool same(const char *what, const void *want, const void *got, size_t n, size_t size) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)want + i * size, (const char *)got + i * size, size) && bad++ == 0) first = i;
    if (bad && failure_to_show()) {
        uint32_t w = 0, g = 0;
        memcpy(&w, (const char *)want + first * size, size), memcpy(&g, (const char *)got + first * size, size);
        printf("    %s: %zu of %zu differ; first at %zu: cpu 0x%0*x cuda 0x%0*x\n", what, bad, n, first, (int)size * 2, w,
               (int)size * 2, g);
    }
    return bad == 0;
}

static float *floats(size_t n) { return malloc(sizeof(float) * (n + 1)); }
static double *bounds(size_t n) { return malloc(sizeof(double) * (n + 1)); }
static uint16_t *halves_out(const void *device, size_t n) {
    uint16_t *h = malloc(sizeof(uint16_t) * (n + 1));
    CUDA_FN(k_download)(h, device, sizeof(uint16_t) * n);
    return h;
}
/* An upper bound on the 16-bit format's spacing at a result v (v's binade's spacing, at most 2^-7 |v| for bf16). */
static double half_ulp(HalfMode mode, double v) {
    v = fabs(v);
    return mode == HALF_FP16 ? fmax(v * 0x1p-10, 0x1p-24) : fmax(v * 0x1p-7, 0x1p-133);
}

/* ---------------------------------------------------------------- 16-bit conversions */

static float bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Signed zeros, float subnormals, fp16's subnormal range and its ties, fp16's 65504 / 65520
 * boundary, bf16's and fp16's ties to even (both directions), FLT_MAX's bf16 tie, infinities,
 * NaNs quiet and signalling with payloads in the kept and the dropped bits. Each with both signs. */
static const uint32_t SPECIAL_BITS[] = {
    0x00000000, 0x00000001, 0x007fffff, 0x00800000, 0x33000000, 0x33000001, 0x33800000, 0x33c00000, 0x34200000,
    0x387fc000, 0x387fe000, 0x387fffff, 0x38800000, 0x3f801000, 0x3f801001, 0x3f803000, 0x3f808000, 0x3f808001,
    0x3f818000, 0x3f80ffff, 0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, 0x7f7f7fff, 0x7f7f8000,
    0x7f7fffff, 0x7f800000, 0x7f800001, 0x7f802000, 0x7fa00000, 0x7fbfffff, 0x7fc00000, 0x7fc12345, 0x7fffffff,
    0x3f800000, 0x40490fdb, 0x3dcccccd, 0x45000800, 0x45001800};
enum { N_SPECIAL = sizeof SPECIAL_BITS / sizeof SPECIAL_BITS[0] };

static void test_half_conversions(void) {
    begin_test();
    /* the specials, then random bit patterns (every exponent), then random values at three scales */
    enum { RANDOM_BITS = 1 << 20, PER_SCALE = 1 << 16 };
    const size_t n = 2 * N_SPECIAL + RANDOM_BITS + 3 * PER_SCALE;
    float *x = floats(n);
    size_t k = 0;
    for (int i = 0; i < N_SPECIAL; i++) {
        x[k++] = bits_float(SPECIAL_BITS[i]);
        x[k++] = bits_float(SPECIAL_BITS[i] | 0x80000000u);
    }
    for (int i = 0; i < RANDOM_BITS; i++) x[k++] = bits_float(rng_bits32(41, (uint32_t)i));
    const float scales[3] = {1e-5f, 1.0f, 3e4f};   /* fp16 subnormals, ordinary values, near 65504 */
    for (int s = 0; s < 3; s++) {
        float *v = cuda_test_values(PER_SCALE, 42 + s, scales[s]);
        memcpy(x + k, v, sizeof(float) * PER_SCALE);
        k += PER_SCALE;
        free(v);
    }
    float *dx = cuda_copy_in(x, sizeof(float) * n);
    uint16_t *want = malloc(sizeof(uint16_t) * n), *d16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * n);
    for (int m = 0; m < 3; m++) {
        /* the first, the specials and a few, all; from an offset of 1 (misaligned: one value a
         * thread) and of 4 (four a thread from another start) */
        const size_t offsets[5] = {0, 0, 0, 1, 4}, sizes[5] = {1, 2 * N_SPECIAL + 17, n, n - 1, n - 4};
        for (int s = 0; s < 5; s++) {
            const size_t off = offsets[s];
            k_to_half(MODES[m], want, x + off, (long)sizes[s]);
            CUDA_FN(k_to_half)(MODES[m], d16 + off, dx + off, (long)sizes[s]);
            uint16_t *all16 = halves_out(d16, off + sizes[s]), *got = all16 + off;
            char what[96];
            snprintf(what, sizeof what, "k_to_half %s n %zu from %zu", MODE_NAMES[m], sizes[s], off);
            if (!same(what, want, got, sizes[s], sizeof(uint16_t)))
                for (size_t i = 0, shown = 0; i < sizes[s] && shown < 8; i++)
                    if (want[i] != got[i])
                        printf("      input 0x%08x: cpu 0x%04x cuda 0x%04x\n", float_bits(x[off + i]), want[i],
                               got[i]), shown++;
            free(all16);
        }
        /* back: every 16-bit pattern */
        uint16_t all[65536];
        for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
        uint16_t *dall = cuda_copy_in(all, sizeof all);
        float *back_want = floats(65536), *dback = CUDA_FN(k_alloc)(sizeof(float) * 65536);
        k_from_half(MODES[m], back_want, all, 65536);
        CUDA_FN(k_from_half)(MODES[m], dback, dall, 65536);
        float *back_got = cuda_copy_out(dback, 65536);
        char what[64];
        snprintf(what, sizeof what, "k_from_half %s", MODE_NAMES[m]);
        if (!same(what, back_want, back_got, 65536, sizeof(float)))
            for (int i = 0, shown = 0; i < 65536 && shown < 8; i++)
                if (float_bits(back_want[i]) != float_bits(back_got[i]))
                    printf("      input 0x%04x: cpu 0x%08x cuda 0x%08x\n", i, float_bits(back_want[i]),
                           float_bits(back_got[i])),
                        shown++;
        cuda_release(dall), cuda_release(dback), free(back_want), free(back_got);
    }
    cuda_release(dx), cuda_release(d16), free(x), free(want);
    end_test("16-bit conversions");
}

/* k_to_half_each: many tensors in one call (a model's weights' copies after an update), each
 * the CPU's bits: sizes around the launch's chunks (8192 values) and empty ones, sources and
 * destinations at odd offsets in one buffer, and nothing written between the destinations. */
static void test_half_conversions_each(void) {
    begin_test();
    enum { COUNT = 9, GAP = 5 };
    const size_t n[COUNT] = {1000, 0, 1, 8191, 8192, 8193, 3 * 8192 + 5, 0, 17};
    size_t at[COUNT], total = 0;
    for (int i = 0; i < COUNT; i++) at[i] = total + (size_t)(i % 3), total = at[i] + n[i] + GAP;
    float *x = cuda_test_values(total, 61, 2.0f);
    for (int i = 0; i < N_SPECIAL; i++) x[at[6] + (size_t)i] = bits_float(SPECIAL_BITS[i]);
    float *dx = cuda_copy_in(x, sizeof(float) * total);
    uint16_t *want = malloc(sizeof(uint16_t) * total), *d16 = CUDA_FN(k_alloc)(sizeof(uint16_t) * total);
    for (int m = 0; m < 3; m++) {
        for (size_t i = 0; i < total; i++) want[i] = 0xabcd;   /* the gaps stay so */
        CUDA_FN(k_upload)(d16, want, sizeof(uint16_t) * total);
        uint16_t *dst[COUNT], *ddst[COUNT];
        const float *src[COUNT], *dsrc[COUNT];
        for (int i = 0; i < COUNT; i++)
            dst[i] = want + at[i], src[i] = x + at[i], ddst[i] = d16 + at[i], dsrc[i] = dx + at[i];
        k_to_half_each(MODES[m], dst, src, n, COUNT);
        CUDA_FN(k_to_half_each)(MODES[m], ddst, dsrc, n, COUNT);
        uint16_t *got = halves_out(d16, total);
        char what[64];
        snprintf(what, sizeof what, "k_to_half_each %s, %d tensors", MODE_NAMES[m], COUNT);
        same(what, want, got, total, sizeof(uint16_t));
        free(got);
    }
    /* none at all */
    CUDA_FN(k_to_half_each)(HALF_BF16, NULL, NULL, NULL, 0);
    cuda_release(dx), cuda_release(d16), free(x), free(want);
    end_test("16-bit conversions of many tensors in one call");
}

/* ---------------------------------------------------------------- layernorm */

/* The forward sums each row in the CPU's order (kernels/cpu/layernorm_row.h: 64 interleaved
 * lanes, then a fixed tree) with the CPU's float operations: the mean, rstd and out are the
 * CPU's bits, for every C (the kernel keeps rows of up to 1024 values in registers, longer
 * ones in memory: LN_CS covers each size it is compiled for, partial lanes and tails). */
static const int LN_CS[] = {1, 17, 100, 200, 384, 768, 1000, 1024, 1500};
enum { N_LN_CS = sizeof LN_CS / sizeof LN_CS[0] };

typedef enum { SUM_SEPARATE, SUM_IN_PLACE, NO_RESIDUAL, NO_RESIDUAL_SUM_GIVEN } ResidualCase;
static const char *const RESIDUAL_NAMES[] = {"residual, sum_out separate", "residual, sum_out = a",
                                             "residual NULL, sum_out NULL", "residual NULL, sum_out given"};

static void layernorm_forward_case(int N, int C, ResidualCase rc) {
    const size_t nc = (size_t)N * C;
    const float eps = 1e-12f;
    float *a = cuda_test_values(nc, 100 + N + C, 1.0f), *r = cuda_test_values(nc, 200 + N + C, 0.5f);
    float *w = cuda_test_values(C, 300 + C, 0.3f), *b = cuda_test_values(C, 400 + C, 0.1f);
    for (size_t i = 0; i < nc; i++) a[i] += 0.7f;   /* a mean away from zero */
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    const bool residual = rc == SUM_SEPARATE || rc == SUM_IN_PLACE;
    float *sum = floats(nc), *out = floats(nc), *mean = floats(N), *rstd = floats(N);
    float *sum_cpu_input = floats(nc);   /* the CPU's a, which sum_out may overwrite */
    memcpy(sum_cpu_input, a, sizeof(float) * nc);
    float *da = cuda_copy_in(a, sizeof(float) * nc), *dr = cuda_copy_in(r, sizeof(float) * nc);
    float *dw = cuda_copy_in(w, sizeof(float) * C), *db = cuda_copy_in(b, sizeof(float) * C);
    float *dsum = cuda_copy_in(a, sizeof(float) * nc);   /* the untouched case keeps this */
    float *dout = CUDA_FN(k_alloc)(sizeof(float) * nc), *dmean = CUDA_FN(k_alloc)(sizeof(float) * N);
    float *drstd = CUDA_FN(k_alloc)(sizeof(float) * N);
    switch (rc) {
    case SUM_SEPARATE:
        k_layernorm_forward(out, sum, mean, rstd, a, r, w, b, N, C, eps);
        CUDA_FN(k_layernorm_forward)(dout, dsum, dmean, drstd, da, dr, dw, db, N, C, eps);
        break;
    case SUM_IN_PLACE:
        k_layernorm_forward(out, sum_cpu_input, mean, rstd, sum_cpu_input, r, w, b, N, C, eps);
        memcpy(sum, sum_cpu_input, sizeof(float) * nc);
        CUDA_FN(k_layernorm_forward)(dout, da, dmean, drstd, da, dr, dw, db, N, C, eps);
        break;
    case NO_RESIDUAL:
        k_layernorm_forward(out, NULL, mean, rstd, a, NULL, w, b, N, C, eps);
        CUDA_FN(k_layernorm_forward)(dout, NULL, dmean, drstd, da, NULL, dw, db, N, C, eps);
        break;
    case NO_RESIDUAL_SUM_GIVEN:
        k_layernorm_forward(out, sum, mean, rstd, a, NULL, w, b, N, C, eps);
        CUDA_FN(k_layernorm_forward)(dout, dsum, dmean, drstd, da, NULL, dw, db, N, C, eps);
        break;
    }
    char what[160];
    const int at = snprintf(what, sizeof what, "layernorm forward N %d C %d (%s): ", N, C, RESIDUAL_NAMES[rc]);
    /* the residual sum: one float add each, the same bits; unwritten without a residual */
    float *got_sum = cuda_copy_out(rc == SUM_IN_PLACE ? da : dsum, nc);
    const float *want_sum = residual ? sum : a;
    snprintf(what + at, sizeof what - at, "sum_out (or a)");
    same(what, want_sum, got_sum, nc, sizeof(float));
    float *got_mean = cuda_copy_out(dmean, N), *got_rstd = cuda_copy_out(drstd, N), *got_out = cuda_copy_out(dout, nc);
    snprintf(what + at, sizeof what - at, "mean");
    same(what, mean, got_mean, N, sizeof(float));
    snprintf(what + at, sizeof what - at, "rstd");
    same(what, rstd, got_rstd, N, sizeof(float));
    snprintf(what + at, sizeof what - at, "out");
    same(what, out, got_out, nc, sizeof(float));
    cuda_release(da), cuda_release(dr), cuda_release(dw), cuda_release(db), cuda_release(dsum), cuda_release(dout);
    cuda_release(dmean), cuda_release(drstd);
    free(a), free(r), free(w), free(b), free(sum), free(out), free(mean), free(rstd), free(sum_cpu_input);
    free(got_sum), free(got_mean), free(got_rstd), free(got_out);
}

static void test_layernorm_forward(void) {
    begin_test();
    for (int i = 0; i < N_NS; i++)
        for (int j = 0; j < N_LN_CS; j++)
            for (int rc = 0; rc < 4; rc++) layernorm_forward_case(NS[i], LN_CS[j], (ResidualCase)rc);
    end_test("layernorm forward");
}

/* The backward's bounds: g = dy w and xhat = (x - m) rs are the same floats on both sides, so
 * the row means of g and g xhat differ only by their sums' order (2 C U sum|terms| / C, and
 * 2 U for the division); dinp = rs (g - mean_g - xhat mean_gx) carries them, plus 2 U for each
 * of its operations. dw and db: the same terms summed over N rows in two orders (2 N U
 * sum|terms|), added to their start (2 U). */
static void layernorm_backward_case(int N, int C) {
    const size_t nc = (size_t)N * C;
    float *x = cuda_test_values(nc, 500 + N + C, 1.0f), *dy = cuda_test_values(nc, 600 + N + C, 0.02f);
    float *w = cuda_test_values(C, 700 + C, 0.3f), *b = cuda_test_values(C, 800 + C, 0.1f);
    float *dw0 = cuda_test_values(C, 900 + C, 0.05f), *db0 = cuda_test_values(C, 1000 + C, 0.05f);
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    float *mean = floats(N), *rstd = floats(N), *y = floats(nc);
    k_layernorm_forward(y, NULL, mean, rstd, x, NULL, w, b, N, C, 1e-12f);   /* the statistics both read */
    float *dinp = floats(nc), *dwc = floats(C), *dbc = floats(C);
    memcpy(dwc, dw0, sizeof(float) * C), memcpy(dbc, db0, sizeof(float) * C);
    float *ddinp = cuda_copy_in(y, sizeof(float) * nc);   /* garbage: the backward overwrites it */
    float *ddw = cuda_copy_in(dw0, sizeof(float) * C), *ddb = cuda_copy_in(db0, sizeof(float) * C);
    float *ddy = cuda_copy_in(dy, sizeof(float) * nc), *dx = cuda_copy_in(x, sizeof(float) * nc);
    float *dmean = cuda_copy_in(mean, sizeof(float) * N), *drstd = cuda_copy_in(rstd, sizeof(float) * N);
    float *dwd = cuda_copy_in(w, sizeof(float) * C);
    k_layernorm_backward(dinp, dwc, dbc, dy, x, mean, rstd, w, N, C);
    CUDA_FN(k_layernorm_backward)(ddinp, ddw, ddb, ddy, dx, dmean, drstd, dwd, N, C);

    double *bdx = bounds(nc), *bw = bounds(C), *bb = bounds(C);
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *gr = dy + (size_t)n * C;
        const double m = mean[n], rs = rstd[n];
        double sg = 0, sgx = 0, ag = 0, agx = 0;
        for (int c = 0; c < C; c++) {
            const double g = (double)gr[c] * w[c], xhat = (xr[c] - m) * rs;
            sg += g, sgx += g * xhat, ag += fabs(g), agx += fabs(g * xhat);
        }
        sg /= C, sgx /= C;
        const double d_sg = 2.0 * C * U * ag / C + 2 * U * fabs(sg), d_sgx = 2.0 * C * U * agx / C + 2 * U * fabs(sgx);
        for (int c = 0; c < C; c++) {
            const double g = (double)gr[c] * w[c], xhat = fabs((xr[c] - m) * rs);
            bdx[(size_t)n * C + c] =
                SAFETY * rs * (d_sg + xhat * d_sgx + 8 * U * (fabs(g) + fabs(sg) + xhat * fabs(sgx)));
        }
    }
    for (int c = 0; c < C; c++) {
        double aw = 0, ab = 0;
        for (int n = 0; n < N; n++) {
            const size_t at = (size_t)n * C + c;
            aw += fabs(dy[at] * ((double)x[at] - mean[n]) * rstd[n]), ab += fabs(dy[at]);
        }
        bw[c] = SAFETY * (2.0 * (N + 2) * U * aw + 2 * U * (fabs(dw0[c]) + aw));
        bb[c] = SAFETY * (2.0 * (N + 2) * U * ab + 2 * U * (fabs(db0[c]) + ab));
    }
    char what[96];
    const int at = snprintf(what, sizeof what, "layernorm backward N %d C %d: ", N, C);
    float *got_dinp = cuda_copy_out(ddinp, nc), *got_dw = cuda_copy_out(ddw, C), *got_db = cuda_copy_out(ddb, C);
    snprintf(what + at, sizeof what - at, "dinp");
    within(what, dinp, got_dinp, bdx, nc);
    snprintf(what + at, sizeof what - at, "dw (accumulated)");
    within(what, dwc, got_dw, bw, C);
    snprintf(what + at, sizeof what - at, "db (accumulated)");
    within(what, dbc, got_db, bb, C);
    cuda_release(ddinp), cuda_release(ddw), cuda_release(ddb), cuda_release(ddy), cuda_release(dx);
    cuda_release(dmean), cuda_release(drstd), cuda_release(dwd);
    free(x), free(dy), free(w), free(b), free(dw0), free(db0), free(mean), free(rstd), free(y), free(dinp);
    free(dwc), free(dbc), free(bdx), free(bw), free(bb), free(got_dinp), free(got_dw), free(got_db);
}

static void test_layernorm_backward(void) {
    begin_test();
    for (int i = 0; i < N_NS; i++)
        for (int j = 0; j < N_LN_CS; j++) layernorm_backward_case(NS[i], LN_CS[j]);
    layernorm_backward_case(2100, 768);   /* 66 row blocks: the partials' sum fetches 64 ahead */
    end_test("layernorm backward");
}

/* ---------------------------------------------------------------- activations */

/* Per-element bounds (from the exact values, in double) on act(x) and act'(x): the library
 * functions' results E (erff or tanhf) and expf ULPS ulp apart (ULPS 2 U |v| each), carried
 * through the formula's later operations, each adding 2 U of its result. */
static double gelu_bound(Activation act, double x) {
    const double E = act == ACT_GELU ? erf(x * 0.7071067811865476) :
                                       tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    const double dE = ULPS * 2 * U * fabs(E);
    const double y = 0.5 * x * (1 + E);
    return SAFETY * (0.5 * fabs(x) * (dE + 2 * U * fabs(1 + E)) + 4 * U * fabs(y)) + 0x1p-149;
}
static double gelu_slope_bound(Activation act, double x) {
    if (act == ACT_GELU) {
        const double E = erf(x * 0.7071067811865476), cdf = 0.5 * (1 + E);
        const double pdf = 0.3989422804014327 * exp(-0.5 * x * x);
        const double d_cdf = 0.5 * ULPS * 2 * U * fabs(E) + 4 * U * fabs(cdf);
        const double d_pdf = (ULPS * 2 * U + 4 * U) * pdf;
        return SAFETY * (d_cdf + fabs(x) * d_pdf + 4 * U * (fabs(cdf) + fabs(x) * pdf));
    }
    const double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)), dt = ULPS * 2 * U * fabs(t);
    const double dinner = 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
    const double second = 0.5 * fabs(x) * (1 - t * t) * dinner;
    return SAFETY * (0.5 * dt + 0.5 * fabs(x) * dinner * (2 * fabs(t) * dt + 4 * U) +
                     6 * U * (0.5 * fabs(1 + t) + second));
}

/* Inputs for the element-wise tests: spread over [-6, 6] (erf and tanh saturate past that),
 * the first few replaced by edge values: zeros, tiny and subnormal, saturated, huge (x^3
 * overflows in gelu_new: its slope is 0 * inf, NaN on both), infinities, a NaN. */
static const float EDGE_VALUES[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-40f, -1e-40f, 10.0f, -10.0f, 20.0f, -20.0f,
                                    1e20f, -1e20f, INFINITY, -INFINITY, NAN, 0.5f, -0.5f};
enum { N_EDGE = sizeof EDGE_VALUES / sizeof EDGE_VALUES[0] };
static float *activation_inputs(size_t n, uint64_t seed) {
    float *x = cuda_test_values(n, seed, 4.0f);
    for (size_t i = 0; i < n && i < N_EDGE; i++) x[i] = EDGE_VALUES[i];
    return x;
}

static const long ELEMENTWISE_SIZES[] = {1, 17, 1000, 128 * 768 + 5, 1000 * 1024};
enum { N_ELEMENTWISE = sizeof ELEMENTWISE_SIZES / sizeof ELEMENTWISE_SIZES[0] };

static void test_gelu(void) {
    begin_test();
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < N_ELEMENTWISE; s++) {
            const long n = ELEMENTWISE_SIZES[s];
            const Activation act = ACTS[a];
            float *x = activation_inputs(n, 1100 + s), *g = cuda_test_values(n, 1200 + s, 0.1f);
            float *y = floats(n), *dx = floats(n);
            double *by = bounds(n), *bdx = bounds(n);
            k_gelu_forward(y, x, n, act);
            k_gelu_backward(dx, g, x, n, act);
            for (long i = 0; i < n; i++) {
                by[i] = gelu_bound(act, x[i]);
                bdx[i] = fabs(g[i]) * gelu_slope_bound(act, x[i]) + 2 * U * fabs(dx[i]);
            }
            float *dev_x = cuda_copy_in(x, sizeof(float) * n), *dev_g = cuda_copy_in(g, sizeof(float) * n);
            float *dev_y = CUDA_FN(k_alloc)(sizeof(float) * n), *dev_dx = CUDA_FN(k_alloc)(sizeof(float) * n);
            CUDA_FN(k_gelu_forward)(dev_y, dev_x, n, act);
            CUDA_FN(k_gelu_backward)(dev_dx, dev_g, dev_x, n, act);
            char what[96];
            const int at = snprintf(what, sizeof what, "%s n %ld: ", ACT_NAMES[a], n);
            float *got_y = cuda_copy_out(dev_y, n), *got_dx = cuda_copy_out(dev_dx, n);
            snprintf(what + at, sizeof what - at, "forward");
            within(what, y, got_y, by, n);
            snprintf(what + at, sizeof what - at, "backward");
            within(what, dx, got_dx, bdx, n);
            /* in place: dinp = dout */
            CUDA_FN(k_gelu_backward)(dev_g, dev_g, dev_x, n, act);
            float *got_inplace = cuda_copy_out(dev_g, n);
            snprintf(what + at, sizeof what - at, "backward with dinp = dout against dinp separate");
            if (!cuda_same(what, got_dx, got_inplace, sizeof(float) * n)) failure_to_show();
            cuda_release(dev_x), cuda_release(dev_g), cuda_release(dev_y), cuda_release(dev_dx);
            free(x), free(g), free(y), free(dx), free(by), free(bdx), free(got_y), free(got_dx), free(got_inplace);
        }
    end_test("gelu");
}

/* The 16-bit forward on every 16-bit input pattern of each format: out16 within the fp32
 * bound plus one 16-bit ulp of the result; the count of results not bit-identical is printed
 * (rounding flips where the fp32 values straddle a rounding boundary; NaN outputs' payloads:
 * x86 propagates an input NaN's payload, CUDA returns its canonical NaN, so NaNs compare as NaN). */
static void test_gelu_forward_half(void) {
    begin_test();
    enum { ALL = 65536 };
    uint16_t *in16 = malloc(sizeof(uint16_t) * ALL), *want = malloc(sizeof(uint16_t) * ALL);
    for (int i = 0; i < ALL; i++) in16[i] = (uint16_t)i;
    uint16_t *dev_in = cuda_copy_in(in16, sizeof(uint16_t) * ALL), *dev_out = CUDA_FN(k_alloc)(sizeof(uint16_t) * ALL);
    float *x = floats(ALL), *want_f = floats(ALL), *got_f = floats(ALL);
    double *bound = bounds(ALL);
    for (int m = 0; m < 3; m++)
        for (int a = 0; a < 2; a++) {
            /* eight values a thread and a tail; all; from an offset of 3 (one a thread: misaligned) */
            const long offsets[3] = {0, 0, 3}, sizes[3] = {17, ALL, ALL - 3};
            for (int s = 0; s < 3; s++) {
                const long n = sizes[s], off = offsets[s];
                k_gelu_forward_half(want, in16 + off, n, ACTS[a], MODES[m]);
                CUDA_FN(k_gelu_forward_half)(dev_out + off, dev_in + off, n, ACTS[a], MODES[m]);
                uint16_t *all16 = halves_out(dev_out, off + n), *got = all16 + off;
                k_from_half(MODES[m], x, in16 + off, n);
                k_from_half(MODES[m], want_f, want, n);
                k_from_half(MODES[m], got_f, got, n);
                long differing = 0;
                for (long i = 0; i < n; i++) {
                    bound[i] = gelu_bound(ACTS[a], x[i]) + half_ulp(MODES[m], fmax(fabs(want_f[i]), fabs(got_f[i])));
                    differing += want[i] != got[i] && !(isnan(want_f[i]) && isnan(got_f[i]));
                }
                char what[96];
                snprintf(what, sizeof what, "gelu_forward_half %s %s n %ld from %ld", ACT_NAMES[a], MODE_NAMES[m],
                         n, off);
                not_identical += differing, compared += n;
                within(what, want_f, got_f, bound, n);
                free(all16);
            }
        }
    cuda_release(dev_in), cuda_release(dev_out);
    free(in16), free(want), free(x), free(want_f), free(got_f), free(bound);
    end_test("gelu forward half");
}

/* The 16-bit backward over [N, C]: dinp16 within the fp32 dinp's bound plus one 16-bit ulp;
 * dbias (accumulated) within the elements' bounds summed plus both sides' roundings of the
 * same ordered sums (16 row slices, then the slices in order: 2 (N + 16) U sum|terms|), plus
 * the final add's. The reference fp32 dinp is the CPU's k_gelu_backward of the widened input. */
static void gelu_backward_half_case(int N, int C, Activation act, int m) {
    const HalfMode mode = MODES[m];
    const size_t nc = (size_t)N * C;
    float *x32 = cuda_test_values(nc, 1300 + N + C, 3.0f), *g = cuda_test_values(nc, 1400 + N + C, 0.1f);
    float *db0 = cuda_test_values(C, 1500 + C, 0.05f);
    uint16_t *in16 = malloc(sizeof(uint16_t) * nc), *want16 = malloc(sizeof(uint16_t) * nc);
    k_to_half(mode, in16, x32, (long)nc);
    float *x = floats(nc), *dx = floats(nc), *dbias = floats(C);
    k_from_half(mode, x, in16, (long)nc);
    k_gelu_backward(dx, g, x, (long)nc, act);
    memcpy(dbias, db0, sizeof(float) * C);
    k_gelu_backward_half_out16(want16, dbias, g, in16, N, C, act, mode);

    uint16_t *dev_in = cuda_copy_in(in16, sizeof(uint16_t) * nc), *dev_out = CUDA_FN(k_alloc)(sizeof(uint16_t) * nc);
    float *dev_g = cuda_copy_in(g, sizeof(float) * nc), *dev_db = cuda_copy_in(db0, sizeof(float) * C);
    CUDA_FN(k_gelu_backward_half_out16)(dev_out, dev_db, dev_g, dev_in, N, C, act, mode);
    uint16_t *got16 = halves_out(dev_out, nc);
    float *got_db = cuda_copy_out(dev_db, C), *want_f = floats(nc), *got_f = floats(nc);
    k_from_half(mode, want_f, want16, (long)nc);
    k_from_half(mode, got_f, got16, (long)nc);
    double *b16 = bounds(nc), *bdb = bounds(C);
    for (int c = 0; c < C; c++) bdb[c] = 0;
    long differing = 0;
    double *sum_abs = bounds(C);
    for (int c = 0; c < C; c++) sum_abs[c] = 0;
    for (size_t i = 0; i < nc; i++) {
        const double e = fabs(g[i]) * gelu_slope_bound(act, x[i]) + 2 * U * fabs(dx[i]);
        b16[i] = e + half_ulp(mode, fmax(fabs(want_f[i]), fabs(got_f[i])));
        bdb[i % C] += e;
        sum_abs[i % C] += fabs(dx[i]);
        differing += want16[i] != got16[i];
    }
    for (int c = 0; c < C; c++)
        bdb[c] += SAFETY * (2.0 * (N + ROW_SLICES_CPU) * U * sum_abs[c] + 2 * U * (fabs(db0[c]) + sum_abs[c]));
    char what[128];
    snprintf(what, sizeof what, "gelu_backward_half_out16 N %d C %d %s %s", N, C, ACT_NAMES[act == ACT_GELU ? 0 : 1],
             MODE_NAMES[m]);
    not_identical += differing, compared += (long)nc;
    const int at = (int)strlen(what);
    snprintf(what + at, sizeof what - at, ": dinp16");
    within(what, want_f, got_f, b16, nc);
    snprintf(what + at, sizeof what - at, ": dbias (accumulated)");
    within(what, dbias, got_db, bdb, C);
    cuda_release(dev_in), cuda_release(dev_out), cuda_release(dev_g), cuda_release(dev_db);
    free(x32), free(g), free(db0), free(in16), free(want16), free(x), free(dx), free(dbias), free(got16), free(got_db);
    free(want_f), free(got_f), free(b16), free(bdb), free(sum_abs);
}

static void test_gelu_backward_half(void) {
    begin_test();
    for (int i = 0; i < N_NS; i++)
        for (int j = 0; j < N_CS; j++)
            for (int a = 0; a < 2; a++)
                for (int m = 0; m < 3; m++) gelu_backward_half_case(NS[i], CS[j], ACTS[a], m);
    end_test("gelu backward half");
}

/* tanh: the forward within both libraries' ulp (ULPS 2 U |t|, plus subnormal outputs' absolute
 * spacing); the backward dout (1 - y^2) is the same three float operations on the same
 * floats: exactly equal (cuda_close with no tolerance), also with dinp = dout and dinp = y. Not
 * compared byte for byte: the NaN input's result is NaN on both, but x86 carries the input
 * NaN's payload where CUDA returns its canonical NaN. */
static void test_tanh(void) {
    begin_test();
    for (int s = 0; s < N_ELEMENTWISE; s++) {
        const long n = ELEMENTWISE_SIZES[s];
        float *x = activation_inputs(n, 1600 + s), *g = cuda_test_values(n, 1700 + s, 0.1f);
        float *dev_x = cuda_copy_in(x, sizeof(float) * n), *dev_g = cuda_copy_in(g, sizeof(float) * n);
        double *bt = bounds(n);
        for (long i = 0; i < n; i++) bt[i] = SAFETY * (ULPS * 2 * U * fabs(tanh((double)x[i])) + 0x1p-149);
        k_tanh_forward(x, n);
        CUDA_FN(k_tanh_forward)(dev_x, n);
        float *got_t = cuda_copy_out(dev_x, n);
        char what[64];
        snprintf(what, sizeof what, "tanh n %ld: forward", n);
        within(what, x, got_t, bt, n);
        /* the backward from the CPU's y on both sides (the forward's ulps not carried) */
        CUDA_FN(k_upload)(dev_x, x, sizeof(float) * n);
        float *dx = floats(n), *dev_dx = CUDA_FN(k_alloc)(sizeof(float) * n);
        k_tanh_backward(dx, g, x, n);
        CUDA_FN(k_tanh_backward)(dev_dx, dev_g, dev_x, n);
        float *got = cuda_copy_out(dev_dx, n);
        snprintf(what, sizeof what, "tanh n %ld: backward", n);
        if (!cuda_close(what, dx, got, n, 0, 0)) failure_to_show();
        free(got);
        CUDA_FN(k_tanh_backward)(dev_g, dev_g, dev_x, n);   /* dinp = dout */
        got = cuda_copy_out(dev_g, n);
        snprintf(what, sizeof what, "tanh n %ld: backward dinp = dout", n);
        if (!cuda_close(what, dx, got, n, 0, 0)) failure_to_show();
        free(got);
        CUDA_FN(k_upload)(dev_g, g, sizeof(float) * n);
        CUDA_FN(k_tanh_backward)(dev_x, dev_g, dev_x, n);   /* dinp = y */
        got = cuda_copy_out(dev_x, n);
        snprintf(what, sizeof what, "tanh n %ld: backward dinp = y", n);
        if (!cuda_close(what, dx, got, n, 0, 0)) failure_to_show();
        free(got);
        cuda_release(dev_x), cuda_release(dev_g), cuda_release(dev_dx);
        free(x), free(g), free(bt), free(got_t), free(dx);
    }
    end_test("tanh");
}

/* ---------------------------------------------------------------- dropout */

/* Masks and kept values bit for bit (no NaN inputs: a kept NaN's payload is x86's or CUDA's). */
static void test_dropout(void) {
    begin_test();
    const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
    const uint32_t counters[] = {0, 12345, 0xfffffff0u};   /* the last wraps past 2^32 */
    for (int s = 0; s < N_ELEMENTWISE; s++)
        for (int p = 0; p < 5; p++)
            for (int k = 0; k < 3; k++) {
                const long n = ELEMENTWISE_SIZES[s];
                float *x = cuda_test_values(n, 1800 + s, 1.0f);
                float *dev = cuda_copy_in(x, sizeof(float) * n);
                const uint64_t key = rng_key(7, (uint64_t)(s * 100 + p * 10 + k));
                k_dropout(x, n, ps[p], key, counters[k]);
                CUDA_FN(k_dropout)(dev, n, ps[p], key, counters[k]);
                float *got = cuda_copy_out(dev, n);
                char what[96];
                snprintf(what, sizeof what, "dropout n %ld p %g counter0 %u", n, ps[p], counters[k]);
                same(what, x, got, n, sizeof(float));
                cuda_release(dev), free(x), free(got);
            }
    end_test("dropout");
}

static void test_dropout_rows(void) {
    begin_test();
    const int Cs[] = {1, 17, 768, 1024};
    const float ps[] = {0.0f, 0.1f, 0.5f};
    for (int j = 0; j < 4; j++)
        for (int p = 0; p < 3; p++) {
            const int C = Cs[j], R = 37;
            int32_t rows[37];
            for (int k = 0; k < R; k++) rows[k] = (int32_t)((k * 7919 + 3) % 1000);   /* scattered, out of order */
            rows[5] = rows[4];                                                     /* and a repeat */
            float *x = cuda_test_values((size_t)R * C, 1900 + j, 1.0f);
            float *dev = cuda_copy_in(x, sizeof(float) * R * C);
            const uint64_t key = rng_key(8, (uint64_t)(j * 10 + p));
            k_dropout_rows(x, rows, R, C, ps[p], key);
            CUDA_FN(k_dropout_rows)(dev, rows, R, C, ps[p], key);
            float *got = cuda_copy_out(dev, (size_t)R * C);
            char what[64];
            snprintf(what, sizeof what, "dropout_rows R %d C %d p %g", R, C, ps[p]);
            same(what, x, got, (size_t)R * C, sizeof(float));
            cuda_release(dev), free(x), free(got);
        }
    end_test("dropout_rows");
}

/* The dropout inside the LayerNorm (k_dropout_layernorm_forward_to, k_layernorm_dropout_backward):
 * the GPU's fused kernels against the GPU's separate ones (k_dropout_rows, k_layernorm_forward;
 * k_layernorm_backward, k_copy, k_dropout_rows), bit for bit (the same operations on each
 * element); the sum against the CPU's fused kernel bit for bit (the CPU's masks, one multiply
 * and one add each), the normalised rows and their 16-bit copy (out16, in rounding's mode; 0:
 * none) the CPU's bits, and the backward's masks the CPU's (zero exactly where the CPU's are). */
static void dropout_layernorm_case(int N, int C, bool use_rows, bool residual, bool in_place, float p, int rounding) {
    const size_t nc = (size_t)N * C;
    const float eps = 1e-12f;
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)N);
    for (int k = 0; k < N; k++) rows[k] = (int32_t)((k * 7919 + 3) % 5000);   /* scattered, out of order */
    const KDropout drop = {.p = p, .key = rng_key(12, (uint64_t)(N + C)), .rows = use_rows ? rows : NULL};
    float *a = cuda_test_values(nc, 2100 + N + C, 1.0f), *r = cuda_test_values(nc, 2200 + N + C, 0.5f);
    float *w = cuda_test_values(C, 2300 + C, 0.3f), *b = cuda_test_values(C, 2400 + C, 0.1f);
    float *dy = cuda_test_values(nc, 2500 + N + C, 1.0f);
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    const float *res = residual ? r : NULL;
    /* the CPU's fused forward */
    float *cpu_a = floats(nc), *sum = floats(nc), *out = floats(nc), *mean = floats(N), *rstd = floats(N);
    memcpy(cpu_a, a, sizeof(float) * nc);
    const HalfMode mode = rounding ? MODES[rounding - 1] : HALF_BF16;
    uint16_t *out16 = rounding ? malloc(sizeof(uint16_t) * nc) : NULL;
    k_dropout_layernorm_forward_to(out, out16, mode, in_place ? cpu_a : sum, mean, rstd, cpu_a, &drop, res, w, b, N, C,
                                   eps);
    const float *want_sum = in_place ? cpu_a : (residual || p > 0 ? sum : a);
    /* the GPU's, fused and separate */
    float *da = cuda_copy_in(a, sizeof(float) * nc), *da2 = cuda_copy_in(a, sizeof(float) * nc);
    float *dr = cuda_copy_in(r, sizeof(float) * nc), *dw = cuda_copy_in(w, sizeof(float) * C);
    float *db = cuda_copy_in(b, sizeof(float) * C), *ddy = cuda_copy_in(dy, sizeof(float) * nc);
    float *dsum = CUDA_FN(k_alloc)(sizeof(float) * nc), *dsum2 = CUDA_FN(k_alloc)(sizeof(float) * nc);
    float *dout = CUDA_FN(k_alloc)(sizeof(float) * nc), *dout2 = CUDA_FN(k_alloc)(sizeof(float) * nc);
    float *dmean = CUDA_FN(k_alloc)(sizeof(float) * N), *drstd = CUDA_FN(k_alloc)(sizeof(float) * N);
    float *dmean2 = CUDA_FN(k_alloc)(sizeof(float) * N), *drstd2 = CUDA_FN(k_alloc)(sizeof(float) * N);
    float *gpu_sum = in_place ? da : dsum;
    uint16_t *d16 = rounding ? CUDA_FN(k_alloc)(sizeof(uint16_t) * nc) : NULL;
    CUDA_FN(k_dropout_layernorm_forward_to)(dout, d16, mode, gpu_sum, dmean, drstd, da, &drop, residual ? dr : NULL, dw,
                                            db, N, C, eps);
    CUDA_FN(k_copy)(dsum2, da2, (long)nc);
    if (use_rows) CUDA_FN(k_dropout_rows)(dsum2, rows, N, C, p, drop.key);
    else CUDA_FN(k_dropout)(dsum2, (long)nc, p, drop.key, 0);
    CUDA_FN(k_layernorm_forward)(dout2, dsum2, dmean2, drstd2, dsum2, residual ? dr : NULL, dw, db, N, C, eps);
    char what[160];
    const int at = snprintf(what, sizeof what, "dropout layernorm N %d C %d rows %d residual %d in place %d p %g: ", N,
                            C, use_rows, residual, in_place, p);
    float *got_sum = cuda_copy_out(residual || p > 0 || in_place ? gpu_sum : da, nc);
    float *got_sum2 = cuda_copy_out(dsum2, nc), *got_out = cuda_copy_out(dout, nc), *got_out2 = cuda_copy_out(dout2, nc);
    float *got_mean = cuda_copy_out(dmean, N), *got_rstd = cuda_copy_out(drstd, N);
    float *got_mean2 = cuda_copy_out(dmean2, N), *got_rstd2 = cuda_copy_out(drstd2, N);
    snprintf(what + at, sizeof what - at, "the sum against the CPU's");
    same(what, want_sum, got_sum, nc, sizeof(float));
    snprintf(what + at, sizeof what - at, "the sum against the separate kernels'");
    if (residual || p > 0) same(what, got_sum2, got_sum, nc, sizeof(float));
    snprintf(what + at, sizeof what - at, "out, mean, rstd against the separate kernels'");
    same(what, got_out2, got_out, nc, sizeof(float));
    same(what, got_mean2, got_mean, N, sizeof(float));
    same(what, got_rstd2, got_rstd, N, sizeof(float));
    snprintf(what + at, sizeof what - at, "out, mean, rstd against the CPU's");
    same(what, out, got_out, nc, sizeof(float));
    same(what, mean, got_mean, N, sizeof(float));
    same(what, rstd, got_rstd, N, sizeof(float));
    if (rounding) {
        uint16_t *got16 = malloc(sizeof(uint16_t) * nc);
        CUDA_FN(k_download)(got16, d16, sizeof(uint16_t) * nc);
        snprintf(what + at, sizeof what - at, "out16 (%s) against the CPU's", MODE_NAMES[rounding - 1]);
        same(what, out16, got16, nc, sizeof(uint16_t));
        free(got16), cuda_release(d16);
    }
    free(out16);
    /* the backward, at the CPU's sum and statistics (both sides read the same) */
    float *dx = cuda_copy_in(want_sum, sizeof(float) * nc), *dm = cuda_copy_in(mean, sizeof(float) * N);
    float *drs = cuda_copy_in(rstd, sizeof(float) * N);
    float *dinp = CUDA_FN(k_alloc)(sizeof(float) * nc), *ddrop = CUDA_FN(k_alloc)(sizeof(float) * nc);
    float *dinp2 = CUDA_FN(k_alloc)(sizeof(float) * nc), *ddrop2 = CUDA_FN(k_alloc)(sizeof(float) * nc);
    float *zeros = calloc((size_t)C, sizeof(float));
    float *gw = cuda_copy_in(zeros, sizeof(float) * C), *gb = cuda_copy_in(zeros, sizeof(float) * C);
    float *gw2 = cuda_copy_in(zeros, sizeof(float) * C), *gb2 = cuda_copy_in(zeros, sizeof(float) * C);
    CUDA_FN(k_layernorm_dropout_backward)(dinp, ddrop, &drop, gw, gb, ddy, dx, dm, drs, dw, N, C);
    CUDA_FN(k_layernorm_backward)(dinp2, gw2, gb2, ddy, dx, dm, drs, dw, N, C);
    CUDA_FN(k_copy)(ddrop2, dinp2, (long)nc);
    if (use_rows) CUDA_FN(k_dropout_rows)(ddrop2, rows, N, C, p, drop.key);
    else CUDA_FN(k_dropout)(ddrop2, (long)nc, p, drop.key, 0);
    float *cpu_dinp = floats(nc), *cpu_drop = floats(nc), *cpu_gw = calloc((size_t)C, sizeof(float));
    float *cpu_gb = calloc((size_t)C, sizeof(float));
    k_layernorm_dropout_backward(cpu_dinp, cpu_drop, &drop, cpu_gw, cpu_gb, dy, want_sum, mean, rstd, w, N, C);
    float *g1 = cuda_copy_out(dinp, nc), *g2 = cuda_copy_out(dinp2, nc), *gd1 = cuda_copy_out(ddrop, nc);
    float *gd2 = cuda_copy_out(ddrop2, nc), *w1 = cuda_copy_out(gw, C), *w2 = cuda_copy_out(gw2, C);
    float *b1 = cuda_copy_out(gb, C), *b2 = cuda_copy_out(gb2, C);
    snprintf(what + at, sizeof what - at, "backward against the separate kernels'");
    same(what, g2, g1, nc, sizeof(float));
    same(what, gd2, gd1, nc, sizeof(float));
    same(what, w2, w1, C, sizeof(float));
    same(what, b2, b1, C, sizeof(float));
    size_t mask_differs = 0, dropped = 0;
    for (size_t i = 0; i < nc; i++) {
        if (cpu_dinp[i] == 0.0f || g1[i] == 0.0f) continue;   /* a zero gradient: no mask to see */
        mask_differs += (cpu_drop[i] == 0.0f) != (gd1[i] == 0.0f);
        dropped += gd1[i] == 0.0f;
    }
    CHECKF(mask_differs == 0, "%sbackward: %zu elements dropped on one device only", what, mask_differs);
    CHECKF(p > 0 ? dropped > 0 || nc < 100 : dropped == 0, "%sbackward: %zu dropped at p %g", what, dropped, p);
    cuda_release(da), cuda_release(da2), cuda_release(dr), cuda_release(dw), cuda_release(db), cuda_release(ddy);
    cuda_release(dsum), cuda_release(dsum2), cuda_release(dout), cuda_release(dout2), cuda_release(dmean);
    cuda_release(drstd), cuda_release(dmean2), cuda_release(drstd2), cuda_release(dx), cuda_release(dm);
    cuda_release(drs), cuda_release(dinp), cuda_release(ddrop), cuda_release(dinp2), cuda_release(ddrop2);
    cuda_release(gw), cuda_release(gb), cuda_release(gw2), cuda_release(gb2);
    free(rows), free(a), free(r), free(w), free(b), free(dy), free(cpu_a), free(sum), free(out), free(mean), free(rstd);
    free(got_sum), free(got_sum2), free(got_out), free(got_out2), free(got_mean), free(got_rstd), free(got_mean2);
    free(got_rstd2), free(zeros), free(cpu_dinp), free(cpu_drop), free(cpu_gw);
    free(cpu_gb), free(g1), free(g2), free(gd1), free(gd2), free(w1), free(w2), free(b1), free(b2);
}

static void test_dropout_layernorm(void) {
    begin_test();
    const int Ns[] = {1, 37, 1000}, Cs[] = {17, 768};
    const float ps[] = {0.0f, 0.1f, 0.5f};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int v = 0; v < 8; v++)
                for (int k = 0; k < 3; k++)
                    dropout_layernorm_case(Ns[i], Cs[j], v & 1, v & 2, v & 4, ps[k], (v + k + i) % 4);
    end_test("dropout layernorm");
}

int main(int argc, char **argv) {
    if (!cuda_open(argc, argv)) return test_summary();
    RUN_TEST(test_half_conversions);
    RUN_TEST(test_half_conversions_each);
    RUN_TEST(test_layernorm_forward);
    RUN_TEST(test_layernorm_backward);
    RUN_TEST(test_gelu);
    RUN_TEST(test_gelu_forward_half);
    RUN_TEST(test_gelu_backward_half);
    RUN_TEST(test_tanh);
    RUN_TEST(test_dropout);
    RUN_TEST(test_dropout_rows);
    RUN_TEST(test_dropout_layernorm);
    return test_summary();
}
