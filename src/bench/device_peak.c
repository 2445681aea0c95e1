/* The backend's own product peak: see device_peak.h. */
#include "bench/device_peak.h"

#include <string.h>

#include "core/common.h"

/* out [m, n] = inp [m, k] @ weight [n, k]^T, through the backend's product for the precision. */
static void product(int half, float *out, const float *inp, uint16_t *inp16, const float *weight,
                    const uint16_t *weight16, int m, int n, int k) {
    if (half < 0) k_matmul_forward(out, inp, weight, NULL, m, k, n);
    else k_matmul_forward_half(out, NULL, inp16, weight16, NULL, NULL, m, k, n, (HalfMode)half);
}

/* Repeats the product in batches of `reps` calls, each ended by k_wait, for about `budget`
 * seconds after a warm-up; the best batch's rate. */
static void time_shape(SgemmShapeResult *r, int half, int m, int n, int k, double budget) {
    const size_t na = (size_t)m * k, nb = (size_t)n * k;
    float *inp = k_alloc(sizeof(float) * na), *weight = k_alloc(sizeof(float) * nb);
    float *out = k_alloc(sizeof(float) * (size_t)m * n);
    uint16_t *inp16 = NULL, *weight16 = NULL;
    k_fill(inp, na, 0.25f), k_fill(weight, nb, -0.125f);
    if (half >= 0) {
        inp16 = k_alloc(sizeof(uint16_t) * na), weight16 = k_alloc(sizeof(uint16_t) * nb);
        k_to_half((HalfMode)half, inp16, inp, (long)na), k_to_half((HalfMode)half, weight16, weight, (long)nb);
    }
    const double flops = 2.0 * m * n * k;
    product(half, out, inp, inp16, weight, weight16, m, n, k);   /* warm-up: plans, workspaces */
    k_wait();
    /* calls per batch: enough for ~10 ms at the first call's rate, at least one */
    double t0 = now_seconds();
    product(half, out, inp, inp16, weight, weight16, m, n, k);
    k_wait();
    const double one = now_seconds() - t0;
    int reps = one > 0 ? (int)(0.01 / one) : 1;
    if (reps < 1) reps = 1;
    if (reps > 1000) reps = 1000;
    *r = (SgemmShapeResult){.m = m, .n = n, .k = k, .best_gflops = one > 0 ? flops / one * 1e-9 : 0, .reps = 1};
    double sum_rate = r->best_gflops;
    const double start = now_seconds();
    while (now_seconds() - start < budget) {
        t0 = now_seconds();
        for (int i = 0; i < reps; i++) product(half, out, inp, inp16, weight, weight16, m, n, k);
        k_wait();
        const double t = now_seconds() - t0, rate = t > 0 ? reps * flops / t * 1e-9 : 0;
        if (rate > r->best_gflops) r->best_gflops = rate;
        sum_rate += rate, r->reps++;
    }
    r->mean_gflops = sum_rate / r->reps;
    k_free(inp), k_free(weight), k_free(out), k_free(inp16), k_free(weight16);
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
