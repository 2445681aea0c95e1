/* The backend's own product peak: see device_peak.h. */
#include "bench/device_peak.h"

#include <string.h>

#include "core/common.h"

/* How fast one call runs: batches of calls, each ended by k_wait (a device queues its work). */
typedef struct {
    double best_seconds;   /* per call, in the best batch */
    double mean_rate;      /* calls per second, averaged over the batches */
    int batches;
} CallTiming;

/* Times run(ctx) for about `budget` seconds after a warm-up (plans, workspaces): one call
 * alone, then batches of enough calls for ~10 ms at that call's rate (1 to 1000). */
static CallTiming time_calls(void (*run)(const void *ctx), const void *ctx, double budget) {
    run(ctx);
    k_wait();
    double t0 = now_seconds();
    run(ctx);
    k_wait();
    const double one = now_seconds() - t0;
    int reps = one > 0 ? (int)(0.01 / one) : 1;
    if (reps < 1) reps = 1;
    if (reps > 1000) reps = 1000;
    CallTiming t = {.best_seconds = one, .mean_rate = one > 0 ? 1 / one : 0, .batches = 1};
    const double start = now_seconds();
    while (now_seconds() - start < budget) {
        t0 = now_seconds();
        for (int i = 0; i < reps; i++) run(ctx);
        k_wait();
        const double per_call = (now_seconds() - t0) / reps;
        if (per_call < t.best_seconds || t.best_seconds <= 0) t.best_seconds = per_call;
        t.mean_rate += per_call > 0 ? 1 / per_call : 0, t.batches++;
    }
    t.mean_rate /= t.batches;
    return t;
}

/* out [m, n] = inp [m, k] @ weight [n, k]^T, through the backend's product for the precision. */
typedef struct {
    int half, m, n, k;
    float *out, *inp, *weight;
    uint16_t *inp16, *weight16;
} PeakProduct;

static void run_peak_product(const void *ctx) {
    const PeakProduct *p = ctx;
    if (p->half < 0) k_matmul_forward(p->out, p->inp, p->weight, NULL, p->m, p->k, p->n);
    else k_matmul_forward_half(p->out, NULL, p->inp16, p->weight16, NULL, NULL, p->m, p->k, p->n, (HalfMode)p->half);
}

static void time_shape(SgemmShapeResult *r, int half, int m, int n, int k, double budget) {
    const size_t na = (size_t)m * k, nb = (size_t)n * k;
    PeakProduct p = {.half = half, .m = m, .n = n, .k = k, .inp = k_alloc(sizeof(float) * na),
                     .weight = k_alloc(sizeof(float) * nb), .out = k_alloc(sizeof(float) * (size_t)m * n)};
    k_fill(p.inp, na, 0.25f), k_fill(p.weight, nb, -0.125f);
    if (half >= 0) {
        p.inp16 = k_alloc(sizeof(uint16_t) * na), p.weight16 = k_alloc(sizeof(uint16_t) * nb);
        k_to_half((HalfMode)half, p.inp16, p.inp, (long)na), k_to_half((HalfMode)half, p.weight16, p.weight, (long)nb);
    }
    const double flops = 2.0 * m * n * k;
    const CallTiming t = time_calls(run_peak_product, &p, budget);
    *r = (SgemmShapeResult){.m = m, .n = n, .k = k, .reps = t.batches,
                            .best_gflops = t.best_seconds > 0 ? flops / t.best_seconds * 1e-9 : 0,
                            .mean_gflops = flops * t.mean_rate * 1e-9};
    k_free(p.inp), k_free(p.weight), k_free(p.out), k_free(p.inp16), k_free(p.weight16);
}

void device_gemm_peak_measure(DeviceGemmPeak *out, int half, int m, int square, double budget_seconds) {
    memset(out, 0, sizeof *out);
    if (m <= 0) m = 4096;
    const int hidden = 768, inter = 3072;
    const int shapes[DEVICE_PEAK_SHAPES][3] = {{m, hidden, hidden}, {m, inter, hidden}, {m, hidden, inter},
                                               {square, square, square}};   /* m, n, k */
    out->nshapes = square > 0 ? DEVICE_PEAK_SHAPES : DEVICE_PEAK_SHAPES - 1;
    for (int i = 0; i < out->nshapes; i++) {
        SgemmShapeResult *r = &out->shapes[i];
        time_shape(r, half, shapes[i][0], shapes[i][1], shapes[i][2], budget_seconds / out->nshapes);
        if (r->best_gflops > out->peak_gflops) out->peak_gflops = r->best_gflops;
    }
}

/* ---- every product of a training step (device_products_measure) ---- */

typedef enum {
    CALL_FORWARD,          /* fp32 result (16-bit: the input already rounded, as the layer's attention or GELU left it) */
    CALL_FORWARD_ROUNDED,  /* fp32 result; 16-bit: the fp32 input rounded in the call */
    CALL_FORWARD_OUT16,    /* 16-bit result, the fp32 input rounded in the call (fp32: as CALL_FORWARD_ROUNDED) */
    CALL_BACKWARD,         /* the gradient rounded (16-bit), its column sums into dbias, dinp and dweight */
    CALL_BACKWARD_GELU,    /* GELU's backward (with the bias sums), then dinp += and dweight: the feed-forward's input layer */
    CALL_WEIGHT_GRAD,      /* dweight alone (16-bit: with the gradient's rounding) */
} CallKind;

typedef struct {
    CallKind kind;
    int half, N, C, OC;
    bool accumulate;   /* dinp += (the layer's input gradient adds to another's) */
    float *inp, *out, *weight, *bias, *dinp, *dweight, *dbias, *dout, *scratch;
    uint16_t *inp16, *out16, *weight16, *dout16;
} ProductCall;

static void run_backward(const ProductCall *c, float *dinp, float *dbias, const float *dout) {
    if (c->half < 0)
        k_matmul_backward(dinp, c->dweight, dbias, dout, c->inp, c->weight, c->N, c->C, c->OC, c->accumulate);
    else
        k_matmul_backward_half(dinp, c->dweight, dbias, dout, c->inp16, c->weight16, c->N, c->C, c->OC, c->accumulate,
                               c->dout16, (HalfMode)c->half);
}

static void run_product_call(const void *ctx) {
    const ProductCall *c = ctx;
    const HalfMode mode = (HalfMode)(c->half < 0 ? 0 : c->half);
    const long n_out = (long)c->N * c->OC;
    switch (c->kind) {
    case CALL_FORWARD:
    case CALL_FORWARD_ROUNDED:
    case CALL_FORWARD_OUT16:
        if (c->half < 0) k_matmul_forward(c->out, c->inp, c->weight, c->bias, c->N, c->C, c->OC);
        else if (c->kind == CALL_FORWARD_OUT16)
            k_matmul_forward_half_out16(c->out16, c->out, c->inp, c->inp16, c->weight16, NULL, c->bias, c->N, c->C,
                                        c->OC, mode);
        else
            k_matmul_forward_half(c->out, c->kind == CALL_FORWARD_ROUNDED ? c->inp : NULL, c->inp16, c->weight16, NULL,
                                  c->bias, c->N, c->C, c->OC, mode);
        break;
    case CALL_BACKWARD: run_backward(c, c->dinp, c->dbias, c->dout); break;
    case CALL_BACKWARD_GELU:   /* the pre-activation: out (fp32) or out16, as the forward left it */
        if (c->half < 0) {
            k_gelu_backward(c->scratch, c->dout, c->out, n_out, ACT_GELU);
            k_matmul_backward(c->dinp, c->dweight, c->dbias, c->scratch, c->inp, c->weight, c->N, c->C, c->OC, true);
        } else {
            k_gelu_backward_half_out16(c->dout16, c->dbias, c->dout, c->out16, c->N, c->OC, ACT_GELU, mode);
            run_backward(c, c->dinp, NULL, NULL);
        }
        break;
    case CALL_WEIGHT_GRAD: run_backward(c, NULL, NULL, c->dout); break;
    }
}

/* What each entry times: kind, the layer, its shape (rows, C, OC), calls per step (0: a variant). */
typedef struct {
    const char *what;
    CallKind kind;
    int N, C, OC, per_step;
    bool accumulate;
} ProductPlan;

static int plan_products(ProductPlan *plan, const DeviceProductShapes *s, bool half) {
    const int N = s->tokens, H = s->hidden, I = s->intermediate, L = s->layers;
    const ProductPlan all[] = {
        {"QKV forward, 16-bit result", CALL_FORWARD_OUT16, N, H, 3 * H, L, false},
        {"  the same, fp32 result", CALL_FORWARD_ROUNDED, N, H, 3 * H, 0, false},
        {"QKV backward", CALL_BACKWARD, N, H, 3 * H, L, true},
        {"  weight gradient alone", CALL_WEIGHT_GRAD, N, H, 3 * H, 0, false},
        {"attention-out forward", CALL_FORWARD, N, H, H, L, false},
        {"attention-out backward", CALL_BACKWARD, N, H, H, L, false},
        {"  weight gradient alone", CALL_WEIGHT_GRAD, N, H, H, 0, false},
        {"FFN-in forward, 16-bit result", CALL_FORWARD_OUT16, N, H, I, L, false},
        {"  the same, fp32 result", CALL_FORWARD_ROUNDED, N, H, I, 0, false},
        {"FFN-in backward, with GELU's", CALL_BACKWARD_GELU, N, H, I, L, true},
        {"  weight gradient alone", CALL_WEIGHT_GRAD, N, H, I, 0, false},
        {"FFN-out forward", CALL_FORWARD, N, I, H, L, false},
        {"FFN-out backward", CALL_BACKWARD, N, I, H, L, false},
        {"  weight gradient alone", CALL_WEIGHT_GRAD, N, I, H, 0, false},
        {"MLM decoder forward", CALL_FORWARD, s->predictions, H, s->vocab, 1, false},
        {"MLM decoder backward", CALL_BACKWARD, s->predictions, H, s->vocab, 1, false},
    };
    int count = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        /* fp32 has no 16-bit result: its variant would time the same call again */
        if (!half && all[i].kind == CALL_FORWARD_ROUNDED) continue;
        if (all[i].N <= 0) continue;
        plan[count] = all[i];
        if (!half && all[i].kind == CALL_FORWARD_OUT16)   /* an fp32 result like the others */
            plan[count].what = strncmp(all[i].what, "QKV", 3) ? "FFN-in forward" : "QKV forward";
        count++;
    }
    return count;
}

static double product_flops(const ProductPlan *p) {
    const double one = 2.0 * p->N * p->C * p->OC;
    return p->kind == CALL_BACKWARD || p->kind == CALL_BACKWARD_GELU ? 2 * one : one;
}

void device_products_measure(DeviceProducts *out, const DeviceProductShapes *s, int half, double budget_seconds) {
    memset(out, 0, sizeof *out);
    ProductPlan plan[DEVICE_PRODUCTS_MAX];
    const int count = plan_products(plan, s, half >= 0);
    size_t in_max = 1, out_max = 1, w_max = 1, oc_max = 1;   /* one set of buffers, for the biggest product */
    for (int i = 0; i < count; i++) {
        const size_t rows = (size_t)plan[i].N, C = (size_t)plan[i].C, OC = (size_t)plan[i].OC;
        if (rows * C > in_max) in_max = rows * C;
        if (rows * OC > out_max) out_max = rows * OC;
        if (C * OC > w_max) w_max = C * OC;
        if (OC > oc_max) oc_max = OC;
    }
    ProductCall c = {.half = half, .inp = k_alloc(sizeof(float) * in_max), .dinp = k_alloc(sizeof(float) * in_max),
                     .out = k_alloc(sizeof(float) * out_max), .dout = k_alloc(sizeof(float) * out_max),
                     .scratch = k_alloc(sizeof(float) * out_max), .weight = k_alloc(sizeof(float) * w_max),
                     .dweight = k_alloc(sizeof(float) * w_max), .bias = k_alloc(sizeof(float) * oc_max),
                     .dbias = k_alloc(sizeof(float) * oc_max)};
    /* values of a trained layer's scale (a product's speed may depend on its operands' bits) */
    k_truncated_normal(c.inp, in_max, 1.0f, 1), k_truncated_normal(c.out, out_max, 1.0f, 2);
    k_truncated_normal(c.dout, out_max, 1e-3f, 3), k_truncated_normal(c.weight, w_max, 0.02f, 4);
    if (half >= 0) {
        const HalfMode mode = (HalfMode)half;
        c.inp16 = k_alloc(sizeof(uint16_t) * in_max), c.weight16 = k_alloc(sizeof(uint16_t) * w_max);
        c.out16 = k_alloc(sizeof(uint16_t) * out_max), c.dout16 = k_alloc(sizeof(uint16_t) * out_max);
        k_to_half(mode, c.inp16, c.inp, (long)in_max), k_to_half(mode, c.weight16, c.weight, (long)w_max);
        k_to_half(mode, c.out16, c.out, (long)out_max);
    }
    for (int i = 0; i < count; i++) {
        c.kind = plan[i].kind, c.N = plan[i].N, c.C = plan[i].C, c.OC = plan[i].OC, c.accumulate = plan[i].accumulate;
        if (c.kind == CALL_BACKWARD_GELU && half >= 0) k_to_half((HalfMode)half, c.out16, c.out, (long)c.N * c.OC);
        const CallTiming t = time_calls(run_product_call, &c, budget_seconds / count);
        DeviceProduct *p = &out->p[out->count++];
        *p = (DeviceProduct){.what = plan[i].what, .N = c.N, .C = c.C, .OC = c.OC, .flops = product_flops(&plan[i]),
                             .seconds = t.best_seconds, .per_step = plan[i].per_step};
        out->step_seconds += p->per_step * p->seconds, out->step_flops += p->per_step * p->flops;
    }
    k_free(c.inp), k_free(c.dinp), k_free(c.out), k_free(c.dout), k_free(c.scratch), k_free(c.weight);
    k_free(c.dweight), k_free(c.bias), k_free(c.dbias), k_free(c.inp16), k_free(c.weight16), k_free(c.out16);
    k_free(c.dout16);
}

void device_products_print(FILE *f, const DeviceProducts *p, double peak_gflops) {
    for (int i = 0; i < p->count; i++) {
        const DeviceProduct *d = &p->p[i];
        const double gflops = d->seconds > 0 ? d->flops / d->seconds * 1e-9 : 0;
        fprintf(f, "products %-32s %6d x %5d -> %5d: %9.1f us %10.1f GFLOP/s = %3.0f%% of the peak", d->what, d->N,
                d->C, d->OC, d->seconds * 1e6, gflops, peak_gflops > 0 ? 100 * gflops / peak_gflops : 0);
        if (d->per_step) fprintf(f, ", x%d a step: %.2f ms\n", d->per_step, d->per_step * d->seconds * 1e3);
        else fprintf(f, "\n");
    }
    const double gflops = p->step_seconds > 0 ? p->step_flops / p->step_seconds * 1e-9 : 0;
    fprintf(f, "products of one training step (the lines with \"a step\"): %.2f ms, %.1f GFLOP/s = %.0f%% of the peak\n",
            p->step_seconds * 1e3, gflops, peak_gflops > 0 ? 100 * gflops / peak_gflops : 0);
}
