/* One row of LayerNorm's forward, shared by k_layernorm_forward (kernels/cpu/layers.c) and the
 * int8 products' epilogue (kernels/cpu/gemm_int8.c), which normalises each output row while it
 * is in cache: the same operations in the same order, so the same bits either way. */
#ifndef BERT_KERNELS_CPU_LAYERNORM_ROW_H
#define BERT_KERNELS_CPU_LAYERNORM_ROW_H

#include <math.h>

/* y = (x - mean) / sqrt(var + eps) * w + b over C values (two-pass variance: no
 * cancellation); *mean_out and *rstd_out keep the mean and 1/std for the backward. y may not
 * alias x. */
static inline void layernorm_row(float *restrict y, float *mean_out, float *rstd_out, const float *restrict x,
                                 const float *restrict w, const float *restrict b, int C, float eps) {
    float m = 0.0f;
#pragma omp simd reduction(+ : m)
    for (int c = 0; c < C; c++) m += x[c];
    m /= (float)C;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    v /= (float)C;
    const float rs = 1.0f / sqrtf(v + eps);
    for (int c = 0; c < C; c++) y[c] = (x[c] - m) * rs * w[c] + b[c];
    *mean_out = m;
    *rstd_out = rs;
}

#endif
