/* Every kernel's backward against central finite differences of its forward.
 *
 * The kernels compute in float32, so the check is in float32 with a justified tolerance:
 * the scalar probed is L = sum(out * R) for a fixed random R, accumulated in double; with
 * step h = 1e-2 on inputs of order 1, the finite difference carries a truncation error of
 * order h^2 * L''' ~ 1e-4 and a rounding error of order 1e-7 * |L| / h ~ 1e-4 (|L| ~ 10).
 * Each partial derivative is compared as |fd - analytic| <= 2e-2 * max(|analytic|, floor)
 * where floor = 5% of the largest partial of the tensor: two orders of magnitude above the
 * noise, yet any formula error (a wrong sign, a missing term, a misplaced index) gives an
 * error of order 1 and fails. Every input and parameter gradient of every kernel is probed
 * at every entry. */
#include <omp.h>
#include <stdint.h>

#include "core/rng.h"
#include "kernels/kernels.h"
#include "kernels/cpu/sgemm.h"
#include "test.h"

typedef double (*LossFn)(void *ctx);  /* runs the forward and returns sum(out * R) */

static void fill(float *x, size_t n, uint64_t seed, float scale, float offset) {
    uint64_t key = rng_key(seed, 0);
    for (size_t i = 0; i < n; i++) x[i] = offset + scale * (float)rng_normal(key, i);
}

static double dot(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Compares analytic[0..n) with central differences of fn over x[0..n). */
static void check_grad(const char *what, float *x, const float *analytic, size_t n, LossFn fn, void *ctx) {
    const float h = 1e-2f;
    float scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmaxf(scale, fabsf(analytic[i]));
    CHECKF(scale > 0, "%s: analytic gradient is all zero (test would be vacuous)", what);
    double worst = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; i++) {
        float saved = x[i];
        x[i] = saved + h;
        double up = fn(ctx);
        x[i] = saved - h;
        double down = fn(ctx);
        x[i] = saved;
        double fd = (up - down) / (2.0 * h);
        double err = fabs(fd - analytic[i]) / fmax(fabs(analytic[i]), 0.05 * scale);
        if (err > worst) worst = err, worst_i = i;
    }
    CHECKF(worst <= 2e-2, "%s: worst rel err %.3g at %zu (analytic %.6g)", what, worst, worst_i, analytic[worst_i]);
}

/* ---------------------------------------------------------------- matmul */

typedef struct { float *out, *inp, *w, *b, *r; int N, C, OC; } MatmulCtx;
static double matmul_loss(void *p) {
    MatmulCtx *c = p;
    k_matmul_forward(c->out, c->inp, c->w, c->b, c->N, c->C, c->OC);
    return dot(c->out, c->r, (size_t)c->N * c->OC);
}

static void test_matmul(void) {
    enum { N = 5, C = 7, OC = 6 };
    float out[N * OC], inp[N * C], w[OC * C], b[OC], r[N * OC], dinp[N * C], dw[OC * C] = {0}, db[OC] = {0};
    fill(inp, N * C, 1, 1, 0), fill(w, OC * C, 2, 0.5f, 0), fill(b, OC, 3, 1, 0), fill(r, N * OC, 4, 1, 0);
    MatmulCtx c = {out, inp, w, b, r, N, C, OC};
    matmul_loss(&c);
    k_matmul_backward(dinp, dw, db, r, inp, w, N, C, OC, false);
    check_grad("matmul dinp", inp, dinp, N * C, matmul_loss, &c);
    check_grad("matmul dweight", w, dw, OC * C, matmul_loss, &c);
    check_grad("matmul dbias", b, db, OC, matmul_loss, &c);
    /* accumulate_dinp adds to what is there */
    float acc[N * C];
    for (int i = 0; i < N * C; i++) acc[i] = 1.0f;
    k_matmul_backward(acc, dw, NULL, r, inp, w, N, C, OC, true);
    CHECK(max_rel_error(acc, dinp, N * C, 1.0) > 0);  /* differs by the 1s */
    /* acc = 1 + dout @ w, summed by the library in its own order (with the 1 as one more
     * term), then the 1 taken off again: per element within 2 gamma_{OC+2} of the terms'
     * magnitudes (1 + sum|dout||w|) of dinp. */
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < C; j++) {
            double abs_sum = 1;
            for (int o = 0; o < OC; o++) abs_sum += fabs((double)r[n * OC + o] * w[o * C + j]);
            double diff = fabs((double)acc[n * C + j] - 1.0 - dinp[n * C + j]);
            worst = fmax(worst, diff / (2 * gamma_k(OC + 2) * abs_sum));
        }
    CHECKF(worst <= 1, "accumulate_dinp: %.3g of the reordering bound", worst);
}

/* The fp32 forward on a packed weight: the same terms as k_matmul_forward, in another order,
 * for every row count (oneDNN's kernels for one row and for hundreds differ), and after the
 * weight changes and is packed again. */
static void test_matmul_packed(void) {
    const int shapes[][2] = {{72, 56}, {256, 768}}, rows[] = {1, 5, 64, 300};
    for (int s = 0; s < 2; s++) {
        const int C = shapes[s][0], OC = shapes[s][1], N = 300;
        size_t bytes = k_packed_weight_bytes_f32(C, OC);
        if (bytes == 0) {
            printf("    (oneDNN keeps fp32 weights plain on this CPU: nothing to pack)\n");
            return;
        }
        float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * OC * C), *b = malloc(sizeof(float) * OC);
        float *plain = malloc(sizeof(float) * N * OC), *out = malloc(sizeof(float) * N * OC);
        void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
        fill(x, (size_t)N * C, 61, 1, 0), fill(w, (size_t)OC * C, 62, 0.5f, 0), fill(b, OC, 63, 1, 0);
        k_pack_weight_f32(packed, w, C, OC);
        for (int r = 0; r < 4; r++) {
            const int M = rows[r];
            k_matmul_forward(plain, x, w, b, M, C, OC);
            k_matmul_forward_packed(out, x, w, packed, b, M, C, OC);
            double worst = gemm_reorder_ratio_bias(out, plain, x, w, b, M, OC, C);
            CHECKF(worst <= 1, "%d rows of %d x %d: packed vs plain %.3g of the reordering bound", M, OC, C, worst);
        }
        for (int i = 0; i < OC * C; i++) w[i] *= -2.0f;
        k_pack_weight_f32(packed, w, C, OC);
        k_matmul_forward(plain, x, w, NULL, 64, C, OC);
        k_matmul_forward_packed(out, x, w, packed, NULL, 64, C, OC);
        double worst = gemm_reorder_ratio(out, plain, x, w, 64, OC, C);
        CHECKF(worst <= 1, "after packing a changed weight: %.3g of the reordering bound", worst);
        free(x), free(w), free(b), free(plain), free(out), free(packed);
    }
}

/* Inference's product + GELU in one pass over packed fp32 weights, both activations, against
 * GELU of the exact sum (gelu_product_ratio's bound); the pre-activations span GELU's whole
 * range (|s| up to ~8). */
static void test_matmul_gelu_packed(void) {
    const int shapes[][2] = {{72, 56}, {256, 768}}, rows[] = {1, 5, 64, 300};
    double worst_seen = 0, exact_seen = 0, other_seen = INFINITY;
    for (int s = 0; s < 2; s++) {
        const int C = shapes[s][0], OC = shapes[s][1], N = 300;
        size_t bytes = k_packed_weight_bytes_f32(C, OC);
        if (bytes == 0) {
            printf("    (oneDNN keeps fp32 weights plain on this CPU: nothing to fuse)\n");
            return;
        }
        float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * OC * C), *b = malloc(sizeof(float) * OC);
        float *out = malloc(sizeof(float) * N * OC);
        void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
        fill(x, (size_t)N * C, 71, 1, 0), fill(w, (size_t)OC * C, 72, 3.0f / sqrtf((float)C), 0), fill(b, OC, 73, 1, 0);
        k_pack_weight_f32(packed, w, C, OC);
        for (int act = ACT_GELU; act <= ACT_GELU_NEW; act++)
            for (int r = 0; r < 4; r++) {
                const int M = rows[r];
                for (int i = 0; i < M * OC; i++) out[i] = NAN;
                if (!k_matmul_gelu_forward_packed(out, x, packed, r % 2 ? b : NULL, M, C, OC, (Activation)act)) {
                    printf("    (%d rows: oneDNN would run another kernel; the caller runs two passes)\n", M);
                    continue;
                }
                double worst = gelu_product_ratio(out, x, w, r % 2 ? b : NULL, M, OC, C, act, 0);
                worst_seen = fmax(worst_seen, worst);
                CHECKF(worst <= 1, "%s, %d rows of %d x %d%s: %.3g of the bound", act ? "gelu_new" : "gelu", M, OC, C,
                       r % 2 ? " + bias" : "", worst);
            }
        /* the activation alone: a one-hot weight makes each result GELU of one input, exactly
         * summed, for inputs across [-8, 8]; the bound is then the activation's error alone */
        for (int i = 0; i < OC * C; i++) w[i] = (i / C) % C == i % C ? 1.0f : 0.0f;
        for (int i = 0; i < N * C; i++) x[i] = -8.0f + 16.0f * ((float)i + 0.5f) / (float)(N * C);
        k_pack_weight_f32(packed, w, C, OC);
        for (int act = ACT_GELU; act <= ACT_GELU_NEW; act++) {
            if (!k_matmul_gelu_forward_packed(out, x, packed, NULL, N, C, OC, (Activation)act)) continue;
            double worst = gelu_product_ratio(out, x, w, NULL, N, OC, C, act, 0);
            CHECKF(worst <= 1, "%s of exact sums: %.3g of the bound", act ? "gelu_new" : "gelu", worst);
            double other = gelu_product_ratio(out, x, w, NULL, N, OC, C, !act, 0);
            exact_seen = fmax(exact_seen, worst), other_seen = fmin(other_seen, other);
            CHECKF(other > 10, "%s's results within %.3g of the other GELU's bound: the check cannot tell them apart",
                   act ? "gelu_new" : "gelu", other);
        }
        free(x), free(w), free(b), free(out), free(packed);
    }
    printf("    worst %.2g of the bound; the activation alone %.2g of it, the other GELU %.0f times it\n", worst_seen,
           exact_seen, other_seen);
}

/* ---------------------------------------------------------------- layernorm (+ residual) */

typedef struct { float *out, *sum, *mean, *rstd, *a, *res, *w, *b, *r; int N, C; } LnCtx;
static double ln_loss(void *p) {
    LnCtx *c = p;
    k_layernorm_forward(c->out, c->sum, c->mean, c->rstd, c->a, c->res, c->w, c->b, c->N, c->C, 1e-12f);
    return dot(c->out, c->r, (size_t)c->N * c->C);
}

static void test_layernorm(void) {
    enum { N = 4, C = 70 };  /* C > 64 exercises two column blocks of the reductions */
    static float out[N * C], sum[N * C], a[N * C], res[N * C], w[C], b[C], r[N * C], dsum[N * C];
    float mean[N], rstd[N], dw[C] = {0}, db[C] = {0};
    fill(a, N * C, 5, 1, 0.3f), fill(res, N * C, 6, 1, 0), fill(w, C, 7, 0.3f, 1), fill(b, C, 8, 0.2f, 0);
    fill(r, N * C, 9, 1, 0);
    LnCtx c = {out, sum, mean, rstd, a, res, w, b, r, N, C};
    ln_loss(&c);
    k_layernorm_backward(dsum, dw, db, r, sum, mean, rstd, w, N, C);
    /* d sum = d a = d residual */
    check_grad("layernorm d(input)", a, dsum, N * C, ln_loss, &c);
    check_grad("layernorm d(residual)", res, dsum, N * C, ln_loss, &c);
    check_grad("layernorm dweight", w, dw, C, ln_loss, &c);
    check_grad("layernorm dbias", b, db, C, ln_loss, &c);
    /* sanity: each output row has mean b-ish and unit scale: with w=1, b=0 mean 0 var 1 */
    float ones[C], zeros[C] = {0};
    for (int i = 0; i < C; i++) ones[i] = 1;
    k_layernorm_forward(out, NULL, mean, rstd, a, NULL, ones, zeros, N, C, 1e-12f);
    double m = 0, v = 0;
    for (int i = 0; i < C; i++) m += out[i];
    for (int i = 0; i < C; i++) v += out[i] * out[i];
    CHECK(fabs(m / C) < 1e-6 && fabs(v / C - 1) < 1e-5);
}

/* The dropout inside the LayerNorm (a sublayer's output): its backward against finite
 * differences (the masks fixed by the key: the function is smooth in a and the residual), and
 * both against the separate kernels they replace (k_dropout_rows on a, k_layernorm_forward; the
 * backward's copy and k_dropout_rows; out16: k_to_half on out), bit for bit: rows NULL or a
 * packed subset, with and without a residual, sum_out separate or a itself, p 0 or 0.25, out16
 * NULL or in each 16-bit mode, serial and parallel sizes. */
typedef struct { LnCtx ln; const KDropout *drop; } DropLnCtx;
static double drop_ln_loss(void *p) {
    DropLnCtx *c = p;
    k_dropout_layernorm_forward_to(c->ln.out, NULL, HALF_BF16, c->ln.sum, c->ln.mean, c->ln.rstd, c->ln.a, c->drop,
                                   c->ln.res, c->ln.w, c->ln.b, c->ln.N, c->ln.C, 1e-12f);
    return dot(c->ln.out, c->ln.r, (size_t)c->ln.N * c->ln.C);
}

static void test_dropout_layernorm_gradients(void) {
    enum { N = 4, C = 70 };
    static float out[N * C], sum[N * C], a[N * C], res[N * C], w[C], b[C], r[N * C], dres[N * C], da[N * C];
    float mean[N], rstd[N], dw[C] = {0}, db[C] = {0};
    fill(a, N * C, 15, 1, 0.3f), fill(res, N * C, 16, 1, 0), fill(w, C, 17, 0.3f, 1), fill(b, C, 18, 0.2f, 0);
    fill(r, N * C, 19, 1, 0);
    const int32_t rows[N] = {7, 2, 30, 3};
    const KDropout drop = {.p = 0.3f, .key = rng_key(4, 3), .rows = rows};
    DropLnCtx c = {{out, sum, mean, rstd, a, res, w, b, r, N, C}, &drop};
    drop_ln_loss(&c);
    k_layernorm_dropout_backward(dres, da, &drop, dw, db, r, sum, mean, rstd, w, N, C);
    int dropped = 0;
    for (int i = 0; i < N * C; i++) dropped += da[i] == 0.0f;
    CHECKF(dropped > N * C / 10 && dropped < N * C / 2, "%d of %d gradients dropped at p = 0.3", dropped, N * C);
    check_grad("dropout + layernorm d(a)", a, da, N * C, drop_ln_loss, &c);
    check_grad("dropout + layernorm d(residual)", res, dres, N * C, drop_ln_loss, &c);
    check_grad("dropout + layernorm dweight", w, dw, C, drop_ln_loss, &c);
    check_grad("dropout + layernorm dbias", b, db, C, drop_ln_loss, &c);
}

static bool same_floats(const float *x, const float *y, size_t n) { return !memcmp(x, y, sizeof(float) * n); }

static void dropout_layernorm_case(int N, int C, const int32_t *rows, bool residual, bool in_place, float p,
                                   const HalfMode *round_to) {
    const size_t n = (size_t)N * C;
    float *a = malloc(sizeof(float) * n), *res = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * C);
    float *b = malloc(sizeof(float) * C), *dy = malloc(sizeof(float) * n);
    fill(a, n, 21, 1.5f, 0.2f), fill(res, n, 22, 1, 0), fill(w, C, 23, 0.3f, 1), fill(b, C, 24, 0.2f, 0);
    fill(dy, n, 25, 1, 0);
    const KDropout drop = {.p = p, .key = rng_key(11, 2), .rows = rows};
    /* the separate kernels */
    float *want_sum = malloc(sizeof(float) * n), *want_out = malloc(sizeof(float) * n);
    float want_mean[64], want_rstd[64], got_mean[64], got_rstd[64];
    memcpy(want_sum, a, sizeof(float) * n);
    if (rows) k_dropout_rows(want_sum, rows, N, C, p, drop.key);
    else k_dropout(want_sum, (long)n, p, drop.key, 0);
    k_layernorm_forward(want_out, want_sum, want_mean, want_rstd, want_sum, residual ? res : NULL, w, b, N, C, 1e-12f);
    /* fused: sum_out separate from a (a must stay as it was) or a itself */
    float *got_a = malloc(sizeof(float) * n), *got_sum = malloc(sizeof(float) * n), *got_out = malloc(sizeof(float) * n);
    memcpy(got_a, a, sizeof(float) * n);
    float *sum_out = in_place ? got_a : got_sum;
    uint16_t *got16 = round_to ? malloc(sizeof(uint16_t) * n) : NULL, *want16 = malloc(sizeof(uint16_t) * n);
    const HalfMode mode = round_to ? *round_to : HALF_BF16;
    k_dropout_layernorm_forward_to(got_out, got16, mode, sum_out, got_mean, got_rstd, got_a, &drop,
                                   residual ? res : NULL, w, b, N, C, 1e-12f);
    k_to_half(mode, want16, want_out, (long)n);
    if (got16)
        CHECKF(!memcmp(want16, got16, sizeof(uint16_t) * n), "forward N %d C %d mode %d: out16 not out rounded", N, C,
               (int)mode);
    free(got16), free(want16);
    const char *form = in_place ? "sum_out = a" : "sum_out separate";
    const float *sum_values = residual || p > 0 ? sum_out : got_a;   /* else the sum is a: sum_out not written */
    CHECKF(same_floats(want_out, got_out, n) && same_floats(want_sum, sum_values, n) &&
               same_floats(want_mean, got_mean, (size_t)N) && same_floats(want_rstd, got_rstd, (size_t)N),
           "forward N %d C %d rows %s residual %d %s p %g: not the separate kernels' bits", N, C, rows ? "set" : "NULL",
           residual, form, p);
    if (!in_place) CHECKF(same_floats(a, got_a, n), "forward N %d C %d: a written with sum_out separate", N, C);
    /* backward: k_layernorm_backward, a copy, k_dropout_rows */
    float *want_d = malloc(sizeof(float) * n), *want_dd = malloc(sizeof(float) * n);
    float *got_d = malloc(sizeof(float) * n), *got_dd = malloc(sizeof(float) * n);
    float *dw = calloc((size_t)C * 4, sizeof(float)), *db = dw + C, *got_dw = db + C, *got_db = got_dw + C;
    k_layernorm_backward(want_d, dw, db, dy, want_sum, want_mean, want_rstd, w, N, C);
    memcpy(want_dd, want_d, sizeof(float) * n);
    if (rows) k_dropout_rows(want_dd, rows, N, C, p, drop.key);
    else k_dropout(want_dd, (long)n, p, drop.key, 0);
    k_layernorm_dropout_backward(got_d, got_dd, &drop, got_dw, got_db, dy, want_sum, want_mean, want_rstd, w, N, C);
    CHECKF(same_floats(want_d, got_d, n) && same_floats(want_dd, got_dd, n) && same_floats(dw, got_dw, (size_t)C) &&
               same_floats(db, got_db, (size_t)C),
           "backward N %d C %d rows %s p %g: not the separate kernels' bits", N, C, rows ? "set" : "NULL", p);
    free(a), free(res), free(w), free(b), free(dy), free(want_sum), free(want_out), free(got_a), free(got_sum);
    free(got_out), free(want_d), free(want_dd), free(got_d), free(got_dd), free(dw);
}

static const HalfMode MODES16[] = {HALF_BF16, HALF_BF16_EMULATED, HALF_FP16};

static void test_dropout_layernorm_fused(void) {
    const int32_t rows[] = {0, 3, 4, 17, 40, 59, 60, 61, 63, 1000, 2, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const int shapes[][2] = {{6, 70}, {24, 768}, {64, 768}};   /* the last two: parallel (N C >= 32768) */
    for (int s = 0; s < 3; s++)
        for (int variant = 0; variant < 16; variant++) {
            const int N = shapes[s][0], C = shapes[s][1];
            const bool use_rows = variant & 1, residual = variant & 2, in_place = variant & 4;
            const float p = variant & 8 ? 0.25f : 0.0f;
            if (use_rows && N > (int)(sizeof rows / sizeof rows[0])) continue;
            const int rounding = (variant + s) % 4;   /* 0: no out16, else a mode */
            dropout_layernorm_case(N, C, use_rows ? rows : NULL, residual, in_place, p,
                                   rounding ? &MODES16[rounding - 1] : NULL);
        }
}

/* ---------------------------------------------------------------- activations */

typedef struct { float *out, *inp, *r; long n; Activation act; } ActCtx;
static double gelu_loss(void *p) {
    ActCtx *c = p;
    k_gelu_forward(c->out, c->inp, c->n, c->act);
    return dot(c->out, c->r, c->n);
}

static void check_gelu(Activation act, const char *name) {
    enum { N = 300 };
    float out[N], inp[N], r[N], d[N];
    fill(inp, N, 10, 2.0f, 0), fill(r, N, 11, 1, 0);
    ActCtx c = {out, inp, r, N, act};
    gelu_loss(&c);
    k_gelu_backward(d, r, inp, N, act);
    check_grad(name, inp, d, N, gelu_loss, &c);
    /* values against the closed forms in double */
    gelu_loss(&c);  /* check_grad left the last output perturbed */
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double x = inp[i];
        double ref = act == ACT_GELU ? 0.5 * x * (1 + erf(x / sqrt(2.0)))
                                     : 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        /* absolute floor 1e-5: for x << 0 the formula (PyTorch's too) computes 1 + erf(x/sqrt 2)
         * with cancellation, an absolute error of about ulp(1) * |x| / 2 */
        worst = fmax(worst, fabs(out[i] - ref) / fmax(fabs(ref), 1e-2));
    }
    CHECKF(worst < 1e-4, "%s values: rel err %.3g", name, worst);
}

static void test_gelu_erf(void) { check_gelu(ACT_GELU, "gelu"); }
static void test_gelu_tanh(void) { check_gelu(ACT_GELU_NEW, "gelu_new"); }

static double tanh_loss(void *p) {
    ActCtx *c = p;
    memcpy(c->out, c->inp, sizeof(float) * c->n);
    k_tanh_forward(c->out, c->n);
    return dot(c->out, c->r, c->n);
}

static void test_tanh(void) {
    enum { N = 100 };
    float out[N], inp[N], r[N], d[N];
    fill(inp, N, 12, 1.5f, 0), fill(r, N, 13, 1, 0);
    ActCtx c = {out, inp, r, N, ACT_GELU};
    tanh_loss(&c);
    k_tanh_backward(d, r, out, N);
    check_grad("tanh", inp, d, N, tanh_loss, &c);
}

/* ---------------------------------------------------------------- dropout */

static void test_dropout(void) {
    enum { N = 200000 };
    float *x = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = 1.0f, g[i] = 2.0f;
    k_dropout(x, N, 0.1f, rng_key(5, 1), 0);
    k_dropout(g, N, 0.1f, rng_key(5, 1), 0);
    int kept = 0, same_mask = 1;
    for (int i = 0; i < N; i++) {
        kept += x[i] != 0;
        same_mask &= (x[i] != 0) == (g[i] != 0);
        if (x[i] != 0) CHECK(fabsf(x[i] - 1.0f / 0.9f) < 1e-6f);
    }
    double frac = (double)kept / N;  /* binomial sd = sqrt(.09/N) = 6.7e-4 */
    CHECKF(fabs(frac - 0.9) < 0.004, "kept fraction %.4f", frac);
    CHECK(same_mask);  /* backward applies the forward's mask */
    /* a different key gives a different mask; counter0 shifts the stream */
    for (int i = 0; i < N; i++) g[i] = 1.0f;
    k_dropout(g, N, 0.1f, rng_key(5, 2), 0);
    int differ = 0;
    for (int i = 0; i < N; i++) differ += (x[i] != 0) != (g[i] != 0);
    CHECK(differ > N / 20);
    for (int i = 0; i < N; i++) g[i] = 1.0f;
    k_dropout(g, N - 10, 0.1f, rng_key(5, 1), 10);
    int shifted = 1;
    for (int i = 0; i < N - 10; i++) shifted &= (g[i] != 0) == (x[i + 10] != 0);
    CHECK(shifted);
    float y[4] = {1, 2, 3, 4};
    k_dropout(y, 4, 0.0f, 1, 0);
    CHECK(y[0] == 1 && y[3] == 4);
    free(x), free(g);
}

/* k_dropout_rows on a subset of rows (gaps, the last row) draws exactly the mask k_dropout
 * gives those rows of the whole tensor, on the serial and the parallel path. */
static void test_dropout_rows(void) {
    enum { N = 60, C = 768 };
    const int32_t rows[] = {0, 3, 4, 17, 40, 59};
    const int R = (int)(sizeof rows / sizeof rows[0]);
    float *full = malloc(sizeof(float) * N * C), *packed = malloc(sizeof(float) * N * C);
    fill(full, (size_t)N * C, 40, 1, 0);
    for (int widths = 0; widths < 2; widths++) {   /* C = 768: parallel (R*C >= 32768) only with all rows */
        const int n = widths ? N : R;
        int32_t all[N];
        for (int k = 0; k < N; k++) all[k] = k;
        const int32_t *which = widths ? all : rows;
        for (int k = 0; k < n; k++) memcpy(packed + (size_t)k * C, full + (size_t)which[k] * C, sizeof(float) * C);
        float *ref = malloc(sizeof(float) * N * C);
        memcpy(ref, full, sizeof(float) * N * C);
        k_dropout(ref, (long)N * C, 0.25f, rng_key(9, 2), 0);
        k_dropout_rows(packed, which, n, C, 0.25f, rng_key(9, 2));
        int same = 1;
        for (int k = 0; k < n; k++) same &= !memcmp(packed + (size_t)k * C, ref + (size_t)which[k] * C, sizeof(float) * C);
        CHECKF(same, "%d rows: a row's mask differs from the full tensor's", n);
        free(ref);
    }
    float y[3] = {1, 2, 3};
    const int32_t one[1] = {5};
    k_dropout_rows(y, one, 1, 3, 0.0f, 1);
    CHECK(y[0] == 1 && y[2] == 3);
    free(full), free(packed);
}

/* ---------------------------------------------------------------- embeddings */

typedef struct { float *out, *word, *pos, *type, *r; const int32_t *ids, *types; int B, T, C; } EmbCtx;
static double emb_loss(void *p) {
    EmbCtx *c = p;
    k_embeddings_forward(c->out, c->ids, c->types, c->word, c->pos, c->type, c->B, c->T, c->C);
    return dot(c->out, c->r, (size_t)c->B * c->T * c->C);
}

static void test_embeddings(void) {
    enum { B = 2, T = 3, C = 5, V = 4, TV = 2 };
    const int32_t ids[B * T] = {1, 3, 1, 0, 2, 1}, types[B * T] = {0, 0, 1, 1, 0, 1};
    float out[B * T * C], word[V * C], pos[T * C], type[TV * C], r[B * T * C];
    float dword[V * C] = {0}, dpos[T * C] = {0}, dtype[TV * C] = {0};
    fill(word, V * C, 14, 1, 0), fill(pos, T * C, 15, 1, 0), fill(type, TV * C, 16, 1, 0), fill(r, B * T * C, 17, 1, 0);
    EmbCtx c = {out, word, pos, type, r, ids, types, B, T, C};
    emb_loss(&c);
    k_embeddings_backward(dword, dpos, dtype, r, ids, types, B, T, C);
    check_grad("embeddings dword", word, dword, V * C, emb_loss, &c);
    check_grad("embeddings dpos", pos, dpos, T * C, emb_loss, &c);
    check_grad("embeddings dtype", type, dtype, TV * C, emb_loss, &c);
}

/* ---------------------------------------------------------------- attention */

typedef struct { float *ctx, *probs, *qkv, *r; AttentionArgs *a; } AttnCtx;
static double attn_loss(void *p) {
    AttnCtx *c = p;
    k_attention_forward(c->ctx, c->probs, c->qkv, c->a);
    return dot(c->ctx, c->r, (size_t)c->a->B * c->a->T * c->a->A * c->a->d);
}

/* B=3 sequences: full length, suffix padding, padding with a hole; optional dropout. */
static void check_attention(float dropout_p, const char *what) {
    enum { B = 3, T = 6, A = 2, d = 4, H = A * d };
    const int32_t mask[B * T] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0};
    const int32_t kv_len[B] = {6, 4, 4};
    const uint8_t holes[B] = {0, 0, 1};
    static float qkv[B * T * 3 * H], ctx[B * T * H], probs[B * A * T * T], r[B * T * H], dqkv[B * T * 3 * H];
    fill(qkv, B * T * 3 * H, 18, 1, 0), fill(r, B * T * H, 19, 1, 0);
    AttentionArgs a = {B, T, A, d, kv_len, mask, holes, dropout_p, rng_key(3, 4), NULL, NULL, false, HALF_BF16, NULL, NULL, NULL, false};
    AttnCtx c = {ctx, probs, qkv, r, &a};
    attn_loss(&c);
    k_attention_backward(dqkv, r, qkv, probs, &a);
    check_grad(what, qkv, dqkv, B * T * 3 * H, attn_loss, &c);
    /* masked keys get no weight: probabilities of key 1 of sequence 2 are 0, rows sum to 1 */
    const float *p2 = probs + (size_t)(2 * A) * T * T;
    for (int i = 0; i < T; i++) {
        double s = 0;
        for (int j = 0; j < 4; j++) s += p2[i * 4 + j];
        CHECK(p2[i * 4 + 1] == 0.0f);
        CHECK(fabs(s - 1) < 1e-6);
    }
}

static void test_attention(void) { check_attention(0.0f, "attention dqkv"); }
static void test_attention_dropout(void) { check_attention(0.3f, "attention dqkv (dropout)"); }

/* The packed layout (seq_row / seq_rows, as unpadding uses it) against the full one: the same
 * sequences and masks, sequence 2 packed with one query row past its last real token (a
 * masked position in padding). With d(ctx) zero at the rows packing drops (as in the model:
 * nothing reads them), ctx and dqkv at every packed row match the full layout's row, dropout
 * included, and the rows after the packed ones are not written. */
static void check_attention_packed(bool half, HalfMode mode) {
    enum { B = 3, T = 6, A = 2, d = 4, H = A * d, ROWS = 6 + 4 + 5 };
    const int32_t mask[B * T] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0};
    const int32_t kv_len[B] = {6, 4, 4}, seq_row[B] = {0, 6, 10}, seq_rows[B] = {6, 4, 5};
    const uint8_t holes[B] = {0, 0, 1};
    static float qkv[B * T * 3 * H], ctx[B * T * H], probs[B * A * T * T], dctx[B * T * H], dqkv[B * T * 3 * H];
    static float pqkv[(ROWS + 1) * 3 * H], pctx[(ROWS + 1) * H], pprobs[B * A * T * T], pdctx[ROWS * H];
    static float pdqkv[(ROWS + 1) * 3 * H];
    fill(qkv, B * T * 3 * H, 21, 1, 0), fill(dctx, B * T * H, 22, 1, 0);
    for (int b = 0; b < B; b++)   /* nothing reads the rows packing drops: their gradient is 0 */
        memset(dctx + (size_t)(b * T + seq_rows[b]) * H, 0, sizeof(float) * (T - seq_rows[b]) * H);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < seq_rows[b]; t++) {
            memcpy(pqkv + (size_t)(seq_row[b] + t) * 3 * H, qkv + (size_t)(b * T + t) * 3 * H, sizeof(float) * 3 * H);
            memcpy(pdctx + (size_t)(seq_row[b] + t) * H, dctx + (size_t)(b * T + t) * H, sizeof(float) * H);
        }
    for (int j = 0; j < H; j++) pctx[ROWS * H + j] = 7.0f;
    for (int j = 0; j < 3 * H; j++) pdqkv[ROWS * 3 * H + j] = 7.0f;
    AttentionArgs full = {B, T, A, d, kv_len, mask, holes, 0.3f, rng_key(3, 5), NULL, NULL, half, mode, NULL, NULL, NULL, false};
    AttentionArgs pack = full;
    pack.seq_row = seq_row, pack.seq_rows = seq_rows;
    k_attention_forward(ctx, probs, qkv, &full);
    k_attention_backward(dqkv, dctx, qkv, probs, &full);
    k_attention_forward(pctx, pprobs, pqkv, &pack);
    k_attention_backward(pdqkv, pdctx, pqkv, pprobs, &pack);
    /* The packed rows gathered back into the full layout (other rows copied from the full
     * result), compared norm-wise: the products have other row counts, so their sums may be
     * ordered differently. The reductions along the way: scores (d), softmax (T), P V (T);
     * backward dP (d), softmax backward (T), dQ (T), dK and dV (T). */
    static float gctx[B * T * H], gdqkv[B * T * 3 * H];
    memcpy(gctx, ctx, sizeof gctx), memcpy(gdqkv, dqkv, sizeof gdqkv);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < seq_rows[b]; t++) {
            size_t f = (size_t)b * T + t, p = (size_t)seq_row[b] + t;
            memcpy(gctx + f * H, pctx + p * H, sizeof(float) * H);
            memcpy(gdqkv + f * 3 * H, pdqkv + p * 3 * H, sizeof(float) * 3 * H);
        }
    double e_ctx = rel_norm_error(gctx, ctx, B * T * H), e_dqkv = rel_norm_error(gdqkv, dqkv, B * T * 3 * H);
    double tol = chain_reorder_tolerance(2 * sqrt(d) + 6 * sqrt(T));
    CHECKF(e_ctx <= tol && e_dqkv <= tol, "packed vs full layout: ctx %.3g, dqkv %.3g (bound %.3g)", e_ctx, e_dqkv,
           tol);
    int untouched = 1;
    for (int j = 0; j < H; j++) untouched &= pctx[ROWS * H + j] == 7.0f;
    for (int j = 0; j < 3 * H; j++) untouched &= pdqkv[ROWS * 3 * H + j] == 7.0f;
    CHECK(untouched);
}

/* With 16-bit products the same: both layouts round the same values, so they still differ
 * only in the order of their sums. */
static void test_attention_packed(void) {
    check_attention_packed(false, HALF_BF16);
    check_attention_packed(true, HALF_BF16_EMULATED);
    check_attention_packed(true, HALF_FP16);
    if (k_bf16_native_available()) check_attention_packed(true, HALF_BF16);
}

/* sgemm() forces small products onto one thread with omp_set_num_threads around the call:
 * the caller's thread count comes back after small and large products, at the top level and
 * inside a parallel region (where each thread runs its own product on itself); the products
 * are the same there as at the top level (small ones bit for bit: one thread either way). */
static void test_sgemm_thread_state(void) {
    enum { M = 256, K = 256 };
    const int sizes[2] = {16, M};   /* 16^3 multiply-adds: forced to one thread; 256^3: threaded */
    float *a = malloc(sizeof(float) * M * K), *bm = malloc(sizeof(float) * M * K);
    float *top[2], *inner[2];
    fill(a, (size_t)M * K, 50, 1, 0), fill(bm, (size_t)M * K, 51, 1, 0);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(2);
    for (int i = 0; i < 2; i++) {
        int n = sizes[i];
        top[i] = calloc((size_t)n * n, sizeof(float)), inner[i] = calloc((size_t)n * n, sizeof(float));
        sgemm(false, true, n, n, n, 1.0f, a, n, bm, n, 0.0f, top[i], n);
        CHECKF(omp_get_max_threads() == 2, "after a %d^3 product: %d threads", n, omp_get_max_threads());
    }
    int changed = 0;
#pragma omp parallel num_threads(2) reduction(+ : changed)
    {
        int i = omp_get_thread_num(), n = sizes[i], before = omp_get_max_threads();
        sgemm(false, true, n, n, n, 1.0f, a, n, bm, n, 0.0f, inner[i], n);
        changed += omp_get_max_threads() != before;
    }
    CHECKF(changed == 0 && omp_get_max_threads() == 2, "%d threads changed their count; now %d", changed,
           omp_get_max_threads());
    /* The values: inside a parallel region the product runs on the calling thread alone, so
     * the library may block and order its sums differently (OpenBLAS's kernels do, e.g. with
     * OPENBLAS_CORETYPE=Haswell): equal up to reordering, per element. Bit-identity holds only
     * where our code fixes the path: the oneDNN build runs products this small on one thread
     * in both places, through the same call. */
    if (strcmp(sgemm_library(), "onednn") == 0) CHECK(memcmp(top[0], inner[0], sizeof(float) * 16 * 16) == 0);
    for (int i = 0; i < 2; i++) {
        double r = gemm_reorder_ratio(inner[i], top[i], a, bm, sizes[i], sizes[i], sizes[i]);
        CHECKF(r <= 1, "%d^3 inside a parallel region differs by %.3g of the reordering bound", sizes[i], r);
    }
    omp_set_num_threads(saved);
    free(a), free(bm), free(top[0]), free(top[1]), free(inner[0]), free(inner[1]);
}

/* ---------------------------------------------------------------- cross-entropy */

typedef struct { float *logits, *row_loss, *probs; const int32_t *rows, *labels; int M, V; } XentCtx;
static double xent_loss(void *p) {
    XentCtx *c = p;
    float mean;
    k_xent_forward(&mean, c->row_loss, c->probs, c->logits, c->rows, c->labels, c->M, c->V);
    return (double)mean * c->M;   /* the sum, whose gradient backward gives with scale 1 */
}

static void test_xent(void) {
    enum { R = 4, M = 3, V = 9 };
    const int32_t rows[M] = {0, 2, 3}, labels[M] = {4, 0, 8};
    float logits[R * V], row_loss[M], probs[M * V], dfull[R * V] = {0};
    fill(logits, R * V, 20, 2, 0);
    XentCtx c = {logits, row_loss, probs, rows, labels, M, V};
    xent_loss(&c);
    k_xent_backward(probs, labels, M, V, 1.0f);
    for (int k = 0; k < M; k++) memcpy(dfull + rows[k] * V, probs + k * V, sizeof(float) * V);
    check_grad("cross-entropy dlogits", logits, dfull, R * V, xent_loss, &c);
    /* loss value against the definition */
    double ref = 0;
    for (int k = 0; k < M; k++) {
        double s = 0;
        for (int j = 0; j < V; j++) s += exp(logits[rows[k] * V + j]);
        ref += log(s) - logits[rows[k] * V + labels[k]];
    }
    CHECK(fabs(xent_loss(&c) - ref) < 1e-5 * fabs(ref));
}

/* Large enough for the parallel paths: bit-identical results with 1 and 2 threads for our own
 * kernels (the row reductions are split by column blocks, not by thread). */
static void test_thread_count_independent(void) {
    enum { N = 1024, C = 200 };
    float *x = malloc(N * C * 4), *dy = malloc(N * C * 4), *w = malloc(C * 4), *b = malloc(C * 4);
    float *out = malloc(N * C * 4), *dx[2], dw[2][C], db[2][C], dwm[2][C], dbm[2][C], mean[N], rstd[N];
    fill(x, N * C, 30, 1, 0), fill(dy, N * C, 31, 1, 0), fill(w, C, 32, 0.2f, 1), fill(b, C, 33, 0.1f, 0);
    int saved = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        dx[run] = malloc(N * C * 4);
        memset(dw[run], 0, sizeof dw[run]), memset(db[run], 0, sizeof db[run]);
        memset(dwm[run], 0, sizeof dwm[run]), memset(dbm[run], 0, sizeof dbm[run]);
        k_layernorm_forward(out, NULL, mean, rstd, x, NULL, w, b, N, C, 1e-12f);
        k_layernorm_backward(dx[run], dw[run], db[run], dy, x, mean, rstd, w, N, C);
        /* a [N,1] -> [N,C] linear layer: dweight and dbias are reductions over the N rows */
        k_matmul_backward(NULL, dwm[run], dbm[run], dy, x, w, N, 1, C, false);
    }
    omp_set_num_threads(saved);
    CHECK(memcmp(dx[0], dx[1], N * C * 4) == 0);
    CHECK(memcmp(dw[0], dw[1], sizeof dw[0]) == 0);
    CHECK(memcmp(db[0], db[1], sizeof db[0]) == 0);
    CHECK(memcmp(dbm[0], dbm[1], sizeof dbm[0]) == 0);
    /* dweight is an sgemm over the N rows: the same bits only where our code fixes the path
     * (oneDNN build: a product this small runs on one thread for any thread count); with
     * OpenBLAS the library picks its own split, so the bound for reordered sums applies. */
    if (strcmp(sgemm_library(), "onednn") == 0) CHECK(memcmp(dwm[0], dwm[1], sizeof dwm[0]) == 0);
    double worst = 0;
    for (int c = 0; c < C; c++) {
        double abs_sum = 0;
        for (int n = 0; n < N; n++) abs_sum += fabs((double)dy[(size_t)n * C + c] * x[n]);
        worst = fmax(worst, fabs((double)dwm[0][c] - dwm[1][c]) / (2 * gamma_k(N) * abs_sum + 1e-45));
    }
    CHECKF(worst <= 1, "dweight with 1 vs 2 threads: %.3g of the reordering bound", worst);
    free(x), free(dy), free(w), free(b), free(out), free(dx[0]), free(dx[1]);
}

/* The row-moving kernels against plain loops: gather (also in place), scatter-add with a
 * repeated row, scatter with zeroing (also in place: compact rows spread to their places). */
static void test_row_kernels(void) {
    enum { N = 6, C = 3 };
    float src[N * C], dst[N * C], want[N * C];
    fill(src, N * C, 40, 1, 0);
    const int32_t rows[3] = {4, 1, 4}, asc[3] = {0, 2, 5};
    k_gather_rows(dst, src, rows, 3, C);
    for (int k = 0; k < 3; k++) CHECK(!memcmp(dst + k * C, src + rows[k] * C, sizeof(float) * C));
    memcpy(dst, src, sizeof dst);
    k_gather_rows(dst, dst, asc, 3, C);   /* in place */
    for (int k = 0; k < 3; k++) CHECK(!memcmp(dst + k * C, src + asc[k] * C, sizeof(float) * C));
    memcpy(dst, src, sizeof dst), memcpy(want, src, sizeof want);
    k_scatter_add_rows(dst, src, rows, 3, C);
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < C; c++) want[rows[k] * C + c] += src[k * C + c];
    CHECK(!memcmp(dst, want, sizeof dst));
    k_scatter_rows(dst, src, asc, 3, N, C);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            int k = r == 0 ? 0 : r == 2 ? 1 : r == 5 ? 2 : -1;
            CHECK(dst[r * C + c] == (k < 0 ? 0.0f : src[k * C + c]));
        }
    memcpy(dst, src, sizeof dst);
    k_scatter_rows(dst, dst, asc, 3, N, C);   /* in place: compact rows 0, 1, 2 to rows 0, 2, 5 */
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            int k = r == 0 ? 0 : r == 2 ? 1 : r == 5 ? 2 : -1;
            CHECK(dst[r * C + c] == (k < 0 ? 0.0f : src[k * C + c]));
        }
    k_zero(dst, N * C), k_add(dst, src, N * C);
    CHECK(!memcmp(dst, src, sizeof dst) && k_read_scalar(dst + 4) == src[4]);
}

int main(void) {
    RUN_TEST(test_matmul);
    RUN_TEST(test_matmul_packed);
    RUN_TEST(test_matmul_gelu_packed);
    RUN_TEST(test_layernorm);
    RUN_TEST(test_dropout_layernorm_gradients);
    RUN_TEST(test_dropout_layernorm_fused);
    RUN_TEST(test_gelu_erf);
    RUN_TEST(test_gelu_tanh);
    RUN_TEST(test_tanh);
    RUN_TEST(test_dropout);
    RUN_TEST(test_dropout_rows);
    RUN_TEST(test_embeddings);
    RUN_TEST(test_attention);
    RUN_TEST(test_attention_dropout);
    RUN_TEST(test_attention_packed);
    RUN_TEST(test_xent);
    RUN_TEST(test_thread_count_independent);
    RUN_TEST(test_sgemm_thread_state);
    RUN_TEST(test_row_kernels);
    return test_summary();
}
