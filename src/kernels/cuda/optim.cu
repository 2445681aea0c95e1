/* The CUDA backend's reductions and updates on parameter memory (kernels.h). Every sum has the
 * CPU backend's order (chunks of K_SUM_CHUNK floats, 16 interleaved lanes each, the lanes and
 * then the chunks added in order), and the element-wise updates are the same float operations
 * compiled without contraction into fused multiply-adds (-fmad=false, as the CPU build's
 * -std=c11 keeps gcc from contracting): LAMB and AdamW give the CPU's bits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_common.h"

extern "C" {
#include "core/rng.h"
#include "kernels/kernels.h"
}

enum { LANES = 16 };

/* The chunk's sum of squares, or (with m and v) LAMB's moments advanced and sum(u^2): one block
 * of LANES threads per chunk, lane j summing elements j, j + 16, ... as the CPU's lane j does. */
__device__ static float lamb_element(float g, float w, float *m, float *v, const LambArgs a) {
    const float grad = g / a.clip;
    *m = a.beta1 * *m + (1.0f - a.beta1) * grad;
    *v = a.beta2 * *v + (1.0f - a.beta2) * grad * grad;
    return (*m / a.bc1) / (sqrtf(*v / a.bc2) + a.eps) + a.weight_decay * w;
}

__global__ static void chunk_sums(double *partial, const float *x, float *m, float *v, const float *g, size_t n,
                                  LambArgs a, bool lamb) {
    __shared__ double lane[LANES];
    const size_t begin = (size_t)blockIdx.x * K_SUM_CHUNK;
    const size_t end = begin + K_SUM_CHUNK < n ? begin + K_SUM_CHUNK : n;
    const size_t full = begin + (end - begin) / LANES * LANES;   /* the lanes' part; the rest is the tail */
    const int j = threadIdx.x;
    double s = 0;
    for (size_t k = begin + j; k < full; k += LANES) {
        const double u = lamb ? (double)lamb_element(g[k], x[k], &m[k], &v[k], a) : (double)x[k];
        s += u * u;
    }
    lane[j] = s;
    __syncthreads();
    if (j != 0) return;
    double total = 0;
    for (int l = 0; l < LANES; l++) total += lane[l];
    for (size_t k = full; k < end; k++) {
        const double u = lamb ? (double)lamb_element(g[k], x[k], &m[k], &v[k], a) : (double)x[k];
        total += u * u;
    }
    partial[blockIdx.x] = total;
}

/* Device scratch kept between calls and grown as needed (the step calls these once per tensor:
 * no cudaMalloc, which synchronises, inside that loop). Calls come from one host thread. */
static void *scratch(size_t bytes) {
    static void *p = NULL;
    static size_t cap = 0;
    if (bytes > cap) {
        if (p) CUDA_CHECK(cudaFree(p));
        cap = bytes * 2;
        CUDA_CHECK(cudaMalloc(&p, cap));
    }
    return p;
}

/* The chunks' sums, added on the host in order. */
static double chunked(const float *x, float *m, float *v, const float *g, size_t n, const LambArgs *a, bool lamb) {
    const size_t chunks = (n + K_SUM_CHUNK - 1) / K_SUM_CHUNK;
    if (chunks == 0) return 0;
    double *partial = (double *)scratch(sizeof(double) * chunks), total = 0;
    const LambArgs none = {0, 0, 0, 0, 0, 0, 0};
    chunk_sums<<<(unsigned)chunks, LANES>>>(partial, x, m, v, g, n, a ? *a : none, lamb);
    CUDA_LAUNCHED();
    double *host = (double *)malloc(sizeof(double) * chunks);
    CUDA_CHECK(cudaMemcpy(host, partial, sizeof(double) * chunks, cudaMemcpyDeviceToHost));
    for (size_t c = 0; c < chunks; c++) total += host[c];
    free(host);
    return total;
}

extern "C" double k_sum_squares(const float *x, size_t n) { return chunked(x, NULL, NULL, NULL, n, NULL, false); }

extern "C" double k_lamb_moments(float *m, float *v, const float *g, const float *w, size_t n, const LambArgs *a) {
    return chunked(w, m, v, g, n, a, true);
}

__global__ static void scale(float *x, size_t n, float s) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) x[k] *= s;
}
extern "C" void k_scale(float *x, size_t n, float s) {
    if (!n) return;
    scale<<<cuda_blocks(n), CUDA_THREADS>>>(x, n, s);
    CUDA_LAUNCHED();
}

__global__ static void count_nonfinite(unsigned long long *count, const float *x, size_t n) {
    unsigned long long mine = 0;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
        mine += !isfinite(x[k]);
    if (mine) atomicAdd(count, mine);
}
extern "C" size_t k_count_nonfinite(const float *x, size_t n) {
    if (!n) return 0;
    unsigned long long *count = (unsigned long long *)scratch(sizeof *count), host = 0;
    CUDA_CHECK(cudaMemset(count, 0, sizeof *count));
    count_nonfinite<<<cuda_blocks(n), CUDA_THREADS>>>(count, x, n);
    CUDA_LAUNCHED();
    CUDA_CHECK(cudaMemcpy(&host, count, sizeof host, cudaMemcpyDeviceToHost));
    return (size_t)host;
}

__global__ static void lamb_update(float *w, const float *m, const float *v, size_t n, float ratio, LambArgs a) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        const float u = (m[k] / a.bc1) / (sqrtf(v[k] / a.bc2) + a.eps) + a.weight_decay * w[k];
        w[k] -= ratio * u;
    }
}
extern "C" void k_lamb_update(float *w, const float *m, const float *v, size_t n, float ratio, const LambArgs *a) {
    if (!n) return;
    lamb_update<<<cuda_blocks(n), CUDA_THREADS>>>(w, m, v, n, ratio, *a);
    CUDA_LAUNCHED();
}

__global__ static void adamw_update(float *w, float *m, float *v, const float *g, size_t n, AdamWArgs a) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        const float grad = g[k] * a.clip_scale;
        m[k] = m[k] * a.beta1 + grad * (1.0f - a.beta1);
        v[k] = v[k] * a.beta2 + grad * grad * (1.0f - a.beta2);
        w[k] = w[k] * a.decay_factor - a.step_size * (m[k] / (sqrtf(v[k]) / a.bc2_sqrt + a.eps));
    }
}
extern "C" void k_adamw_update(float *w, float *m, float *v, const float *g, size_t n, const AdamWArgs *a) {
    if (!n) return;
    adamw_update<<<cuda_blocks(n), CUDA_THREADS>>>(w, m, v, g, n, *a);
    CUDA_LAUNCHED();
}

__global__ static void fill(float *x, size_t n, float value) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) x[k] = value;
}
extern "C" void k_fill(float *x, size_t n, float value) {
    if (!n) return;
    fill<<<cuda_blocks(n), CUDA_THREADS>>>(x, n, value);
    CUDA_LAUNCHED();
}

/* Drawn on the host and uploaded: the device's log and cos are not libm's to the last bit, and
 * the same seed must give both backends the same initial weights. Once per run. */
extern "C" void k_truncated_normal(float *x, size_t n, float std, uint64_t key) {
    float *host = (float *)malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) host[i] = rng_truncated_normal(key, i, std);
    k_upload(x, host, sizeof(float) * n);
    free(host);
}

/* One block per row: each thread keeps the first maximum of its stride, then the block takes
 * the largest, the smallest index among equals (the CPU's first maximum). */
__global__ static void argmax_matches(unsigned long long *correct, const float *logits, const int32_t *labels, int V) {
    __shared__ float best_value[CUDA_THREADS];
    __shared__ int best_index[CUDA_THREADS];
    const int row = blockIdx.x, t = threadIdx.x;
    if (labels[row] < 0) return;
    const float *x = logits + (size_t)row * V;
    float value = -INFINITY;
    int index = -1;
    for (int k = t; k < V; k += blockDim.x)
        if (index < 0 || x[k] > value) value = x[k], index = k;
    best_value[t] = value, best_index[t] = index;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            const float ov = best_value[t + half];
            const int oi = best_index[t + half];
            if (oi >= 0 && (best_index[t] < 0 || ov > best_value[t] || (ov == best_value[t] && oi < best_index[t])))
                best_value[t] = ov, best_index[t] = oi;
        }
        __syncthreads();
    }
    if (t == 0 && best_index[0] == labels[row]) atomicAdd(correct, 1ull);
}
extern "C" long k_count_argmax_matches(const float *logits, const int32_t *labels, int M, int V, long *labelled) {
    long count = 0;
    for (int k = 0; k < M; k++) count += labels[k] >= 0;   /* the labels are host memory (kernels.h) */
    if (labelled) *labelled = count;
    if (M <= 0 || count == 0) return 0;
    /* the count first, then the labels, in one scratch block */
    unsigned long long *correct = (unsigned long long *)scratch(sizeof *correct + sizeof(int32_t) * (size_t)M), host = 0;
    int32_t *device_labels = (int32_t *)(correct + 1);
    CUDA_CHECK(cudaMemset(correct, 0, sizeof *correct));
    k_upload(device_labels, labels, sizeof(int32_t) * (size_t)M);
    argmax_matches<<<(unsigned)M, CUDA_THREADS>>>(correct, logits, device_labels, V);
    CUDA_LAUNCHED();
    CUDA_CHECK(cudaMemcpy(&host, correct, sizeof host, cudaMemcpyDeviceToHost));
    return (long)host;
}
