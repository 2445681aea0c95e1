/* One row of LayerNorm's forward, shared by k_layernorm_forward (kernels/cpu/layers.c) and the
 * int8 products' epilogue (kernels/cpu/gemm_int8.c), which normalises each output row while it
 * is in cache: the same operations in the same order, so the same bits either way. */
#ifndef BERT_KERNELS_CPU_LAYERNORM_ROW_H
#define BERT_KERNELS_CPU_LAYERNORM_ROW_H

#include <math.h>
#include <stdbool.h>

/* The sum of n values in LN_LANES interleaved partial sums (value c into lane c mod LN_LANES,
 * each lane in order), the lanes then added in order: one order of additions, written out, so
 * that every call site computes the same bits however the compiler vectorises it (a
 * `#pragma omp simd reduction` leaves the order to the compiler, which chose differently for
 * the two call sites of an x86-64-v3 build: the epilogue's LayerNorm then differed from
 * k_layernorm_forward's). The lanes' loop vectorises without reordering anything. */
enum { LN_LANES = 16 };
static inline float ln_sum(const float *restrict x, float mean, bool squares, int n) {
    float lane[LN_LANES] = {0};
    int c = 0;
    for (; c + LN_LANES <= n; c += LN_LANES)
        for (int j = 0; j < LN_LANES; j++) {
            const float d = x[c + j] - mean;
            lane[j] += squares ? d * d : x[c + j];
        }
    for (int j = 0; c < n; c++, j++) {
        const float d = x[c] - mean;
        lane[j] += squares ? d * d : x[c];
    }
    float sum = 0.0f;
    for (int j = 0; j < LN_LANES; j++) sum += lane[j];
    return sum;
}

/* y = (x - mean) / sqrt(var + eps) * w + b over C values (two-pass variance: no
 * cancellation); *mean_out and *rstd_out keep the mean and 1/std for the backward. y may not
 * alias x. */
static inline void layernorm_row(float *restrict y, float *mean_out, float *rstd_out, const float *restrict x,
                                 const float *restrict w, const float *restrict b, int C, float eps) {
    const float m = ln_sum(x, 0.0f, false, C) / (float)C;
    const float v = ln_sum(x, m, true, C) / (float)C;
    const float rs = 1.0f / sqrtf(v + eps);
    for (int c = 0; c < C; c++) y[c] = (x[c] - m) * rs * w[c] + b[c];
    *mean_out = m;
    *rstd_out = rs;
}

#endif
