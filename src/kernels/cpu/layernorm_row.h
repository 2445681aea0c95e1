/* One row of LayerNorm's forward, shared by k_layernorm_forward (kernels/cpu/layers.c) and the
 * int8 products' epilogue (kernels/cpu/gemm_int8.c), which normalises each output row while it
 * is in cache: the same operations in the same order, so the same bits either way. */
#ifndef BERT_KERNELS_CPU_LAYERNORM_ROW_H
#define BERT_KERNELS_CPU_LAYERNORM_ROW_H

#include <math.h>
#include <stdbool.h>

#include "kernels/cpu/vec16.h"

/* The sum of n values in LN_LANES interleaved partial sums (value c into lane c mod LN_LANES,
 * each lane in order), the lanes then added as a tree (ln_lanes_tree): one order of additions,
 * written out, so that every call site computes the same bits however the compiler vectorises
 * it (a `#pragma omp simd reduction` leaves the order to the compiler, which chose differently
 * for the two call sites of an x86-64-v3 build: the epilogue's LayerNorm then differed from
 * k_layernorm_forward's). 64 lanes, four AVX-512 accumulators: with one, the chain of
 * dependent additions (n / 16 of them, then 16 lanes in order) bounded the row (layernorm_row
 * at 768 values, one core: 165-170 ns with one accumulator, 105 with four). */
enum { LN_LANES = 64 };

/* The 64 lanes' total: the four groups of 16 as (g0 + g1) + (g2 + g3), then the 16 halved
 * three times (lane j + lane j + 8, + 4, + 2) and the last two added. */
static inline float ln_lanes_tree(const float *lane) {
    float t[16];
    for (int j = 0; j < 16; j++) t[j] = (lane[j] + lane[16 + j]) + (lane[32 + j] + lane[48 + j]);
    for (int w = 8; w >= 2; w /= 2)
        for (int j = 0; j < w; j++) t[j] = t[j] + t[j + w];
    return t[0] + t[1];
}

#if VEC16
/* ln_lanes_tree of four accumulators (lane j of acc[g] is lane 16 g + j), in vectors. */
static inline float ln_lanes_total(const __m512 acc[4]) {
    const __m512 v = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}
#endif

static inline float ln_sum(const float *restrict x, float mean, bool squares, int n) {
#if VEC16   /* value c into accumulator (c / 16) mod 4, lane c mod 16; a masked tail adds exact
             * zeros to the other lanes (a lane is never -0) */
    const __m512 vm = _mm512_set1_ps(mean);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int c0 = 0; c0 < n; c0 += 64)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {   /* unrolled: the accumulators stay in registers */
            const int c = c0 + 16 * g;
            if (c >= n) break;
            const __mmask16 m = lanes(n - c);
            const __m512 v = _mm512_maskz_loadu_ps(m, x + c);
            if (squares) {
                const __m512 d = _mm512_sub_ps(v, vm);
                acc[g] = _mm512_add_ps(acc[g], _mm512_maskz_mul_ps(m, d, d));
            } else {
                acc[g] = _mm512_add_ps(acc[g], v);
            }
        }
    return ln_lanes_total(acc);
#else
    float lane[LN_LANES] = {0};
    int c = 0;
    for (; c + LN_LANES <= n; c += LN_LANES)   /* vectorises without reordering anything */
        for (int j = 0; j < LN_LANES; j++) {
            const float d = x[c + j] - mean;
            lane[j] += squares ? d * d : x[c + j];
        }
    for (int j = 0; c < n; c++, j++) {
        const float d = x[c] - mean;
        lane[j] += squares ? d * d : x[c];
    }
    return ln_lanes_tree(lane);
#endif
}

/* The row's mean and 1 / sqrt(var + eps) from the sum of its C values (two-pass variance: no
 * cancellation). */
static inline void ln_stats(const float *restrict x, float sum, int C, float eps, float *mean, float *rstd) {
    const float m = sum / (float)C;
    const float v = ln_sum(x, m, true, C) / (float)C;
    *mean = m;
    *rstd = 1.0f / sqrtf(v + eps);
}

#if VEC16
/* 16 values of y = ((x - mean) rstd) w + b, the scalar loop's operations in its order. */
static inline __m512 ln_apply16(__m512 x, __m512 mean, __m512 rstd, __m512 w, __m512 b) {
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(x, mean), rstd);
    return _mm512_add_ps(_mm512_mul_ps(d, w), b);
}
#endif

/* y = (x - mean) / sqrt(var + eps) * w + b over C values; *mean_out and *rstd_out keep the mean
 * and 1/std for the backward. y may not alias x. sum: ln_sum(x, 0, false, C), or the same
 * lanes added by the kernel that made x (the int8 epilogue adds them as it dequantizes the
 * row). */
static inline void layernorm_row_summed(float *restrict y, float *mean_out, float *rstd_out, const float *restrict x,
                                        float sum, const float *restrict w, const float *restrict b, int C, float eps) {
    float m, rs;
    ln_stats(x, sum, C, eps, &m, &rs);
    int c = 0;
#if VEC16
    const __m512 vm = _mm512_set1_ps(m), vrs = _mm512_set1_ps(rs);
    for (; c < C; c += 16) {
        const __mmask16 k = lanes(C - c);
        _mm512_mask_storeu_ps(y + c, k, ln_apply16(_mm512_maskz_loadu_ps(k, x + c), vm, vrs,
                                                   _mm512_maskz_loadu_ps(k, w + c), _mm512_maskz_loadu_ps(k, b + c)));
    }
#endif
    for (; c < C; c++) y[c] = (x[c] - m) * rs * w[c] + b[c];
    *mean_out = m;
    *rstd_out = rs;
}

static inline void layernorm_row(float *restrict y, float *mean_out, float *rstd_out, const float *restrict x,
                                 const float *restrict w, const float *restrict b, int C, float eps) {
    layernorm_row_summed(y, mean_out, rstd_out, x, ln_sum(x, 0.0f, false, C), w, b, C, eps);
}

#endif
