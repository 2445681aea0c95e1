/* The CPU backend's reductions and updates on parameter memory (kernels.h): the optimizers'
 * element-wise work, norms, initialisation and argmax counts. Every sum has a fixed order
 * (K_SUM_CHUNK chunks of 16 lanes), so results do not depend on the thread count. */
#include "kernels/cpu/cpu_names.h"   /* first: this file defines the CPU backend's cpu_k_* */
#include <math.h>
#include <stdlib.h>

#include "core/common.h"
#include "core/rng.h"
#include "kernels/kernels.h"

/* Sum of squares of x[0..n) in double, in SUM_LANES interleaved partial sums added in a fixed
 * order: one running sum would be a chain of dependent additions (one per element, scalar);
 * the lanes are independent, so the loop vectorises, and the order is the same on every CPU. */
enum { SUM_LANES = 16 };
static double block_sum_squares(const float *x, size_t n) {
    double lane[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) lane[k] += (double)x[i + k] * x[i + k];
    double s = 0;
    for (int k = 0; k < SUM_LANES; k++) s += lane[k];
    for (; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

/* Many threads only for a tensor of several chunks. */
#define PARALLEL_IF(len) if ((len) >= 4 * (size_t)K_SUM_CHUNK)

double k_sum_squares(const float *x, size_t n) {
    const size_t chunks = (n + K_SUM_CHUNK - 1) / K_SUM_CHUNK;
    if (chunks <= 1) return block_sum_squares(x, n);
    double total = 0;
    double *partial = xmalloc(sizeof(double) * chunks);
#pragma omp parallel for schedule(static) PARALLEL_IF(n)
    for (size_t c = 0; c < chunks; c++) {
        size_t end = (c + 1) * K_SUM_CHUNK < n ? (c + 1) * K_SUM_CHUNK : n;
        partial[c] = block_sum_squares(x + c * K_SUM_CHUNK, end - c * K_SUM_CHUNK);
    }
    for (size_t c = 0; c < chunks; c++) total += partial[c];
    free(partial);
    return total;
}

void k_scale(float *x, size_t n, float s) {
#pragma omp parallel for simd schedule(static) PARALLEL_IF(n)
    for (size_t k = 0; k < n; k++) x[k] *= s;
}

size_t k_count_nonfinite(const float *x, size_t n) {
    size_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) PARALLEL_IF(n)
    for (size_t k = 0; k < n; k++) bad += !isfinite(x[k]);
    return bad;
}

/* LAMB's update of one element: m, v advanced, u = m^ / (sqrt(v^) + eps) + wd w returned. */
static inline float lamb_element(float g, float w, float *m, float *v, const LambArgs *a) {
    const float grad = g / a->clip;
    *m = a->beta1 * *m + (1.0f - a->beta1) * grad;
    *v = a->beta2 * *v + (1.0f - a->beta2) * grad * grad;
    return (*m / a->bc1) / (sqrtf(*v / a->bc2) + a->eps) + a->weight_decay * w;
}

double k_lamb_moments(float *restrict m, float *restrict v, const float *restrict g, const float *restrict w, size_t n,
                      const LambArgs *args) {
    const LambArgs a = *args;   /* a local copy: the compiler keeps the constants in registers */
    const size_t chunks = (n + K_SUM_CHUNK - 1) / K_SUM_CHUNK;
    double *partial = xmalloc(sizeof(double) * (chunks + 1)), total = 0;
#pragma omp parallel for schedule(static) PARALLEL_IF(n)
    for (size_t ch = 0; ch < chunks; ch++) {
        const size_t end = (ch + 1) * K_SUM_CHUNK < n ? (ch + 1) * K_SUM_CHUNK : n;
        double lane[SUM_LANES] = {0}, s = 0;   /* lanes as in block_sum_squares: vectorised */
        size_t k = ch * K_SUM_CHUNK;
        for (; k + SUM_LANES <= end; k += SUM_LANES)
            for (int j = 0; j < SUM_LANES; j++) {
                const size_t e = k + j;
                const float u = lamb_element(g[e], w[e], &m[e], &v[e], &a);
                lane[j] += (double)u * u;
            }
        for (int j = 0; j < SUM_LANES; j++) s += lane[j];
        for (; k < end; k++) {
            const float u = lamb_element(g[k], w[k], &m[k], &v[k], &a);
            s += (double)u * u;
        }
        partial[ch] = s;
    }
    for (size_t ch = 0; ch < chunks; ch++) total += partial[ch];
    free(partial);
    return total;
}

void k_lamb_update(float *restrict w, const float *restrict m, const float *restrict v, size_t n, float ratio,
                   const LambArgs *args) {
    const float bc1 = args->bc1, bc2 = args->bc2, eps = args->eps, wd = args->weight_decay;
#pragma omp parallel for simd schedule(static) PARALLEL_IF(n)
    for (size_t k = 0; k < n; k++) {   /* u again, from the moments just written */
        const float u = (m[k] / bc1) / (sqrtf(v[k] / bc2) + eps) + wd * w[k];
        w[k] -= ratio * u;
    }
}

void k_adamw_update(float *restrict w, float *restrict m, float *restrict v, const float *restrict g, size_t n,
                    const AdamWArgs *args) {
    const float b1 = args->beta1, b2 = args->beta2, eps = args->eps, clip_scale = args->clip_scale,
                step_size = args->step_size, bc2_sqrt = args->bc2_sqrt, decay_factor = args->decay_factor;
#pragma omp parallel for simd schedule(static) PARALLEL_IF(n)
    for (size_t k = 0; k < n; k++) {
        float grad = g[k] * clip_scale;
        m[k] = m[k] * b1 + grad * (1.0f - b1);
        v[k] = v[k] * b2 + grad * grad * (1.0f - b2);
        w[k] = w[k] * decay_factor - step_size * (m[k] / (sqrtf(v[k]) / bc2_sqrt + eps));
    }
}

/* The many-tensor forms: the one-tensor functions in turn (the same bits by construction; each
 * one already spreads a large tensor over the threads). */
void k_sum_squares_each(double *out, const float *const *x, const size_t *n, int count) {
    for (int i = 0; i < count; i++) out[i] = k_sum_squares(x[i], n[i]);
}

void k_lamb_moments_each(double *out, float *const *m, float *const *v, const float *const *g, const float *const *w,
                         const size_t *n, const LambArgs *args, int count) {
    for (int i = 0; i < count; i++) out[i] = k_lamb_moments(m[i], v[i], g[i], w[i], n[i], &args[i]);
}

void k_lamb_update_each(float *const *w, const float *const *m, const float *const *v, const size_t *n,
                        const float *ratio, const LambArgs *args, int count) {
    for (int i = 0; i < count; i++) k_lamb_update(w[i], m[i], v[i], n[i], ratio[i], &args[i]);
}

void k_adamw_update_each(float *const *w, float *const *m, float *const *v, const float *const *g, const size_t *n,
                         const AdamWArgs *args, int count) {
    for (int i = 0; i < count; i++) k_adamw_update(w[i], m[i], v[i], g[i], n[i], &args[i]);
}

void k_fill(float *x, size_t n, float value) {
    for (size_t i = 0; i < n; i++) x[i] = value;
}

void k_truncated_normal(float *x, size_t n, float std, uint64_t key) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = rng_truncated_normal(key, i, std);
}

long k_count_argmax_matches(const float *logits, const int32_t *labels, int M, int V, long *labelled) {
    long correct = 0, count = 0;
    for (int k = 0; k < M; k++) {
        if (labels[k] < 0) continue;
        const float *row = logits + (size_t)k * V;
        int best = 0;
        for (int v = 1; v < V; v++) best = row[v] > row[best] ? v : best;
        correct += best == labels[k], count++;
    }
    if (labelled) *labelled = count;
    return correct;
}
