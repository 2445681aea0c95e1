/* The CUDA backend's reductions and updates on parameter memory (kernels.h), and the weights'
 * 16-bit copies after an update (k_to_half_each). Every sum has the
 * CPU backend's order (chunks of K_SUM_CHUNK floats, 16 interleaved lanes each, the lanes and
 * then the chunks added in order), and the element-wise updates are the same float operations
 * compiled without contraction into fused multiply-adds (-fmad=false, as the CPU build's
 * -std=c11 keeps gcc from contracting): LAMB and AdamW give the CPU's bits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/half_bits.cuh"

extern "C" {
#include "core/rng.h"
#include "kernels/kernels.h"
}

enum { LANES = 16 };

/* ---- the sums and updates over many tensors (kernels.h's k_*_each) ----
 * The host builds a table of the call's tensors (the empty ones left out) and stages it to the
 * device in one asynchronous copy (cuda_stage); each tensor is cut into chunks, numbered on
 * through the table, and one launch covers every chunk: a block finds its chunk's tensor by a
 * binary search of the tensors' first chunk numbers. */
struct TensorJob {
    float *w, *m, *v;   /* w: the x of a sum of squares, and LAMB's w (both only read) */
    uint16_t *half;     /* k_to_half_each: w's 16-bit copy */
    const float *g;
    size_t n;           /* floats, > 0 */
    size_t first;       /* the tensor's first chunk among the call's */
    float ratio;        /* LAMB's update: lr times the trust ratio */
    LambArgs lamb;
    AdamWArgs adamw;
};

/* The tensor that holds chunk number `chunk`: the last whose first chunk is <= chunk (the first
 * chunks strictly increase: every tensor in the table has at least one chunk). */
__device__ static const TensorJob *job_of(const TensorJob *jobs, int count, size_t chunk) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (jobs[mid].first <= chunk) lo = mid;
        else hi = mid - 1;
    }
    return &jobs[lo];
}

/* LAMB's update direction u of one element, m and v advanced (the CPU's lamb_element). */
__device__ static float lamb_element(float g, float w, float *m, float *v, const LambArgs a) {
    const float grad = g / a.clip;
    *m = a.beta1 * *m + (1.0f - a.beta1) * grad;
    *v = a.beta2 * *v + (1.0f - a.beta2) * grad * grad;
    return (*m / a.bc1) / (sqrtf(*v / a.bc2) + a.eps) + a.weight_decay * w;
}

/* One element's operands, loaded before any is used: a batch of loads in flight per thread
 * (LAMB's stores to m and v could alias later loads as far as the compiler knows, so it would
 * not hoist them itself). */
struct Operands { float x, g, m, v; };
template <bool LAMB> __device__ static Operands load(const TensorJob &t, size_t k) {
    Operands o;
    o.x = t.w[k];
    if (LAMB) o.g = t.g[k], o.m = t.m[k], o.v = t.v[k];
    return o;
}
/* The value whose square is summed: x, or LAMB's u with m and v advanced and stored. */
template <bool LAMB> __device__ static float squared_value(const TensorJob &t, size_t k, Operands o) {
    if (!LAMB) return o.x;
    const float u = lamb_element(o.g, o.x, &o.m, &o.v, t.lamb);
    t.m[k] = o.m, t.v[k] = o.v;
    return u;
}

/* partial[c] = chunk c's sum of squares (of x, or of LAMB's u) in the CPU's order: a block of
 * LANES threads per chunk of K_SUM_CHUNK floats, lane j summing elements j, j + 16, ... in order
 * as the CPU's lane j does; then thread 0 adds the lanes in order and the tail (the last
 * len % 16 elements) after them, as block_sum_squares does. A lane's 4,096 elements are loaded
 * BATCH at a time ahead of their additions (the order unchanged): LAMB's four operands 8 at a
 * time, a plain sum of squares (the gradient's and the weights' norms: one operand, a wait on
 * memory per batch) 32. */
template <bool LAMB>
__global__ static void chunk_sums(double *partial, const TensorJob *jobs, int count, size_t chunks) {
    enum { BATCH = LAMB ? 8 : 32 };
    __shared__ double lane[LANES];
    const int j = threadIdx.x;
    for (size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const TensorJob t = *job_of(jobs, count, chunk);   /* a copy: LAMB's stores cannot alias it */
        const size_t begin = (chunk - t.first) * K_SUM_CHUNK;
        const size_t end = begin + K_SUM_CHUNK < t.n ? begin + K_SUM_CHUNK : t.n;
        const size_t full = begin + (end - begin) / LANES * LANES;   /* the lanes' part; the rest is the tail */
        double s = 0;
        size_t k = begin + j;
        for (; k + (BATCH - 1) * LANES < full; k += BATCH * LANES) {
            Operands o[BATCH];
#pragma unroll
            for (int b = 0; b < BATCH; b++) o[b] = load<LAMB>(t, k + b * LANES);
#pragma unroll
            for (int b = 0; b < BATCH; b++) {
                const float u = squared_value<LAMB>(t, k + b * LANES, o[b]);
                s += (double)u * u;
            }
        }
        for (; k < full; k += LANES) {
            const float u = squared_value<LAMB>(t, k, load<LAMB>(t, k));
            s += (double)u * u;
        }
        lane[j] = s;
        __syncthreads();
        if (j == 0) {
            double total = 0;
            for (int l = 0; l < LANES; l++) total += lane[l];
            for (size_t e = full; e < end; e++) {
                const float u = squared_value<LAMB>(t, e, load<LAMB>(t, e));
                total += (double)u * u;
            }
            partial[chunk] = total;
        }
        __syncthreads();   /* lane[] is the next chunk's */
    }
}

/* Device scratch kept between calls and grown as needed (no cudaMalloc, which synchronises,
 * on every call). Calls come from one host thread; the default stream orders the uses. */
static void *scratch(size_t bytes) {
    static void *p = NULL;
    static size_t cap = 0;
    if (bytes > cap) {
        if (p) CUDA_CHECK(cudaFree(p));
        cap = bytes * 2;
        cuda_malloc(&p, cap);
    }
    return p;
}

/* The table of the call's nonempty tensors on the host (kept between calls) with n and first
 * set; *jobs: how many, *chunks: how many chunks of chunk_len floats they make. The caller fills
 * in the pointers and arguments: job t is the t-th tensor with n > 0. */
static TensorJob *job_table(const size_t *n, int count, size_t chunk_len, int *jobs, size_t *chunks) {
    static TensorJob *table = NULL;
    static int cap = 0;
    if (count > cap) {
        free(table);
        cap = count;
        table = (TensorJob *)malloc(sizeof(TensorJob) * (size_t)cap);
        if (!table) { fprintf(stderr, "bert: out of host memory\n"); exit(1); }
    }
    *jobs = 0, *chunks = 0;
    for (int i = 0; i < count; i++) {
        if (!n[i]) continue;
        TensorJob *t = &table[(*jobs)++];
        memset(t, 0, sizeof *t);
        t->n = n[i], t->first = *chunks;
        *chunks += (n[i] + chunk_len - 1) / chunk_len;
    }
    return table;
}

/* A grid for a grid-stride loop over `chunks` blocks' worth of work. */
static unsigned chunk_grid(size_t chunks) { return (unsigned)(chunks < (1u << 20) ? chunks : (1u << 20)); }

/* The chunks' partial sums copied to a pinned host buffer (kept between calls: no allocation
 * per call, and the copy goes at the bus's speed); waits for the kernels before it. */
static const double *download_partials(const double *partial, size_t chunks) {
    static double *host = NULL;
    static size_t cap = 0;
    if (chunks > cap) {
        if (host) CUDA_CHECK(cudaFreeHost(host));
        cap = chunks * 2;
        CUDA_CHECK(cudaMallocHost(&host, sizeof(double) * cap));
    }
    CUDA_CHECK(cudaMemcpy(host, partial, sizeof(double) * chunks, cudaMemcpyDeviceToHost));
    return host;
}

/* Launches the sums over the table's chunks (of K_SUM_CHUNK floats) and sets out[i] to tensor
 * i's sum: its chunks' partial sums added on the host in order, from 0, as the CPU does; 0 for an
 * empty tensor. One download, which waits for the launch. */
template <bool LAMB>
static void sums_each(double *out, const size_t *n, int count, const TensorJob *table, int jobs, size_t chunks) {
    for (int i = 0; i < count; i++) out[i] = 0;
    if (chunks == 0) return;
    const TensorJob *device_jobs = (const TensorJob *)cuda_stage(0, table, sizeof(TensorJob) * (size_t)jobs);
    double *partial = (double *)scratch(sizeof(double) * chunks);
    chunk_sums<LAMB><<<chunk_grid(chunks), LANES>>>(partial, device_jobs, jobs, chunks);
    CUDA_LAUNCHED();
    const double *host = download_partials(partial, chunks);
    size_t c = 0;
    for (int i = 0; i < count; i++) {
        if (!n[i]) continue;
        const size_t end = c + (n[i] + K_SUM_CHUNK - 1) / K_SUM_CHUNK;
        double total = 0;
        for (; c < end; c++) total += host[c];
        out[i] = total;
    }
}

extern "C" void k_sum_squares_each(double *out, const float *const *x, const size_t *n, int count) {
    int jobs;
    size_t chunks;
    TensorJob *table = job_table(n, count, K_SUM_CHUNK, &jobs, &chunks);
    for (int i = 0, t = 0; i < count; i++)
        if (n[i]) table[t++].w = const_cast<float *>(x[i]);   /* only read */
    sums_each<false>(out, n, count, table, jobs, chunks);
}

extern "C" void k_lamb_moments_each(double *out, float *const *m, float *const *v, const float *const *g,
                                    const float *const *w, const size_t *n, const LambArgs *args, int count) {
    int jobs;
    size_t chunks;
    TensorJob *table = job_table(n, count, K_SUM_CHUNK, &jobs, &chunks);
    for (int i = 0, t = 0; i < count; i++) {
        if (!n[i]) continue;
        TensorJob *j = &table[t++];
        j->w = const_cast<float *>(w[i]), j->m = m[i], j->v = v[i], j->g = g[i], j->lamb = args[i];   /* w only read */
    }
    sums_each<true>(out, n, count, table, jobs, chunks);
}

extern "C" double k_sum_squares(const float *x, size_t n) {
    double out;
    k_sum_squares_each(&out, &x, &n, 1);
    return out;
}

extern "C" double k_lamb_moments(float *m, float *v, const float *g, const float *w, size_t n, const LambArgs *a) {
    double out;
    k_lamb_moments_each(&out, &m, &v, &g, &w, &n, a, 1);
    return out;
}

/* The updates: a block of CUDA_THREADS per chunk of UPDATE_CHUNK floats (element-wise, so any
 * chunking gives the same bits; small chunks spread the large tensors over every SM). The
 * element's float operations are the CPU's, in its order. Each thread loads UPDATE_BATCH
 * elements' operands before it computes and stores any: the stores to w, m and v could alias
 * later loads as far as the compiler knows, so element by element it would wait on memory two
 * or three times per element (sm_90's code), one load in flight. */
enum { UPDATE_CHUNK = 1 << 13, UPDATE_BATCH = 4 };
template <bool LAMB>
__global__ static void chunk_updates(const TensorJob *jobs, int count, size_t chunks) {
    const size_t step = blockDim.x;
    for (size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const TensorJob t = *job_of(jobs, count, chunk);   /* a copy: the stores cannot alias it */
        const size_t begin = (chunk - t.first) * UPDATE_CHUNK;
        const size_t end = begin + UPDATE_CHUNK < t.n ? begin + UPDATE_CHUNK : t.n;
        float *w = t.w, *m = t.m, *v = t.v;
        const float *g = t.g;
        for (size_t k0 = begin + threadIdx.x; k0 < end; k0 += UPDATE_BATCH * step) {
            float wb[UPDATE_BATCH], mb[UPDATE_BATCH], vb[UPDATE_BATCH], gb[UPDATE_BATCH];
#pragma unroll
            for (int b = 0; b < UPDATE_BATCH; b++) {
                const size_t k = k0 + b * step;
                if (k >= end) break;
                wb[b] = w[k], mb[b] = m[k], vb[b] = v[k];
                if (!LAMB) gb[b] = g[k];
            }
#pragma unroll
            for (int b = 0; b < UPDATE_BATCH; b++) {
                const size_t k = k0 + b * step;
                if (k >= end) break;
                if (LAMB) {
                    const LambArgs a = t.lamb;
                    const float u = (mb[b] / a.bc1) / (sqrtf(vb[b] / a.bc2) + a.eps) + a.weight_decay * wb[b];
                    w[k] = wb[b] - t.ratio * u;
                } else {
                    const AdamWArgs a = t.adamw;
                    const float grad = gb[b] * a.clip_scale;
                    const float m_new = mb[b] * a.beta1 + grad * (1.0f - a.beta1);
                    const float v_new = vb[b] * a.beta2 + grad * grad * (1.0f - a.beta2);
                    m[k] = m_new, v[k] = v_new;
                    w[k] = wb[b] * a.decay_factor - a.step_size * (m_new / (sqrtf(v_new) / a.bc2_sqrt + a.eps));
                }
            }
        }
    }
}

template <bool LAMB> static void updates_each(const TensorJob *table, int jobs, size_t chunks) {
    if (chunks == 0) return;
    const TensorJob *device_jobs = (const TensorJob *)cuda_stage(0, table, sizeof(TensorJob) * (size_t)jobs);
    chunk_updates<LAMB><<<chunk_grid(chunks), CUDA_THREADS>>>(device_jobs, jobs, chunks);
    CUDA_LAUNCHED();
}

extern "C" void k_lamb_update_each(float *const *w, const float *const *m, const float *const *v, const size_t *n,
                                   const float *ratio, const LambArgs *args, int count) {
    int jobs;
    size_t chunks;
    TensorJob *table = job_table(n, count, UPDATE_CHUNK, &jobs, &chunks);
    for (int i = 0, t = 0; i < count; i++) {
        if (!n[i]) continue;
        TensorJob *j = &table[t++];   /* m and v only read */
        j->w = w[i], j->m = const_cast<float *>(m[i]), j->v = const_cast<float *>(v[i]), j->ratio = ratio[i];
        j->lamb = args[i];
    }
    updates_each<true>(table, jobs, chunks);
}

extern "C" void k_adamw_update_each(float *const *w, float *const *m, float *const *v, const float *const *g,
                                    const size_t *n, const AdamWArgs *args, int count) {
    int jobs;
    size_t chunks;
    TensorJob *table = job_table(n, count, UPDATE_CHUNK, &jobs, &chunks);
    for (int i = 0, t = 0; i < count; i++) {
        if (!n[i]) continue;
        TensorJob *j = &table[t++];
        j->w = w[i], j->m = m[i], j->v = v[i], j->g = g[i], j->adamw = args[i];
    }
    updates_each<false>(table, jobs, chunks);
}

/* k_to_half_each: each tensor's 16-bit copy (a model's weights after an update) in one launch
 * over the tensors' chunks, as the updates; the conversion is k_to_half's (layers_norm_act.cu,
 * half_bits.cuh: the CPU's bits), a value at a time, eight loads ahead (the weights' copies are
 * read-bound: 4 bytes in, 2 out). */
__global__ static void chunk_halves(int fp16, const TensorJob *jobs, int count, size_t chunks) {
    enum { BATCH = 8 };   /* loads in flight per thread (the stores could alias them) */
    const size_t step = blockDim.x;
    for (size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const TensorJob t = *job_of(jobs, count, chunk);
        const size_t begin = (chunk - t.first) * UPDATE_CHUNK;
        const size_t end = begin + UPDATE_CHUNK < t.n ? begin + UPDATE_CHUNK : t.n;
        for (size_t k0 = begin + threadIdx.x; k0 < end; k0 += BATCH * step) {
            float x[BATCH];
#pragma unroll
            for (int b = 0; b < BATCH; b++)
                if (k0 + b * step < end) x[b] = t.w[k0 + b * step];
#pragma unroll
            for (int b = 0; b < BATCH; b++)
                if (k0 + b * step < end) t.half[k0 + b * step] = fp16 ? fp16_from_float_bits(x[b]) : bf16_from_float_bits(x[b]);
        }
    }
}

extern "C" void k_to_half_each(HalfMode mode, uint16_t *const *dst, const float *const *src, const size_t *n,
                               int count) {
    int jobs;
    size_t chunks;
    TensorJob *table = job_table(n, count, UPDATE_CHUNK, &jobs, &chunks);
    for (int i = 0, t = 0; i < count; i++) {
        if (!n[i]) continue;
        TensorJob *j = &table[t++];   /* w only read */
        j->w = const_cast<float *>(src[i]), j->half = dst[i];
    }
    if (chunks == 0) return;
    const TensorJob *device_jobs = (const TensorJob *)cuda_stage(0, table, sizeof(TensorJob) * (size_t)jobs);
    chunk_halves<<<chunk_grid(chunks), CUDA_THREADS>>>(mode == HALF_FP16, device_jobs, jobs, chunks);
    CUDA_LAUNCHED();
}

extern "C" void k_lamb_update(float *w, const float *m, const float *v, size_t n, float ratio, const LambArgs *a) {
    k_lamb_update_each(&w, &m, &v, &n, &ratio, a, 1);
}

extern "C" void k_adamw_update(float *w, float *m, float *v, const float *g, size_t n, const AdamWArgs *a) {
    k_adamw_update_each(&w, &m, &v, &g, &n, a, 1);
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
