/* The CUDA backend's row kernels (kernels.h): embeddings, the losses (softmax cross-entropy,
 * squared error), and moving, clearing and reading rows of activation memory. Each computes
 * what the CPU backend's (src/kernels/cpu/layers.c) does with the same float operations in the
 * same order wherever that order is defined (-fmad=false: no contraction into fused
 * multiply-adds), so these give the CPU's bits, except the softmax, whose sum the CPU splits
 * over its vector lanes (an order of GCC's choosing) and whose expf/logf are libm's: there the
 * results agree to a few ulp plus the sum's rounding.
 *
 * Accumulations into rows that several sources name (the embedding tables' gradients,
 * k_scatter_add_rows) are deterministic and in the CPU's order: the host, which holds the
 * indices (kernels.h: they are host memory), sorts the sources by destination row (stable: in
 * source order) into lists, and one thread per (destination row, column) adds its list in
 * order. No atomics, so the same bits on every run and the CPU's bits.
 *
 * Host arrays are staged with cuda_stage slots 0-2, device scratch is cuda_scratch slots 0-1. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/ordered_sum.cuh"

extern "C" {
#include "kernels/kernels.h"
}

/* ---------------------------------------------------------------- launch shapes */

/* Row kernels run on a 2-D grid: blockIdx.x the row (up to 2^31 - 1 rows), blockIdx.y the
 * block of columns, one thread per column: no divisions by C, and consecutive threads read
 * consecutive floats. Narrow rows take a narrower block (a multiple of a warp). */
static unsigned row_threads(int C) {
    const int warps = (C + 31) / 32;
    return (unsigned)(warps >= CUDA_THREADS / 32 ? CUDA_THREADS : (warps ? warps * 32 : 32));
}
static dim3 row_grid(int rows, int C) {
    const unsigned t = row_threads(C);
    return dim3((unsigned)rows, (unsigned)(((unsigned)C + t - 1) / t));   /* C <= 16.7M: y within 65535 */
}
/* The column this thread owns in a row kernel, or -1 past the row's end. */
__device__ static inline int row_column(int C) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    return c < C ? c : -1;
}

static void *host_grow(void **p, size_t *cap, size_t bytes) {
    if (bytes > *cap) {
        free(*p);
        *cap = bytes + bytes / 2 + 256;
        *p = malloc(*cap);
        if (!*p) {
            fprintf(stderr, "bert: CUDA: out of host memory (%zu bytes)\n", *cap);
            exit(1);
        }
    }
    return *p;
}

/* Whether [a, a + a_bytes) and [b, b + b_bytes) share memory (in-place calls). */
static bool overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + b_bytes && y < x + a_bytes;
}

static int max_index(const int32_t *idx, int n) {
    int m = -1;
    for (int i = 0; i < n; i++) m = idx[i] > m ? idx[i] : m;
    return m;
}

/* ---------------------------------------------------------------- ordered scatter-accumulate */

/* Sources grouped by destination row, for dst[row] += src[member] over each row's members in
 * increasing member order (the CPU's loop order). One int32 array, staged as a whole:
 *   start[count + 1] | row[count] | member[n]
 * list l adds sources member[start[l] .. start[l+1]-1] into destination row row[l]. */
typedef struct {
    int count;              /* distinct destination rows */
    const int32_t *device;  /* the staged array */
} RowLists;

/* Built from keys[i] (the destination row of source i, >= 0) by a counting sort, which is
 * stable: each list keeps its sources in increasing i. */
static RowLists stage_row_lists(int slot, const int32_t *keys, int n) {
    static void *next_buf, *lists_buf;
    static size_t next_cap, lists_cap;
    const int K = max_index(keys, n) + 1;
    int32_t *next = (int32_t *)host_grow(&next_buf, &next_cap, sizeof(int32_t) * (size_t)(K ? K : 1));
    for (int k = 0; k < K; k++) next[k] = 0;
    for (int i = 0; i < n; i++) next[keys[i]]++;
    int count = 0;
    for (int k = 0; k < K; k++) count += next[k] > 0;
    const size_t words = (size_t)count + 1 + (size_t)count + (size_t)n;
    int32_t *lists = (int32_t *)host_grow(&lists_buf, &lists_cap, sizeof(int32_t) * words);
    int32_t *start = lists, *row = lists + count + 1, *member = row + count;
    int l = 0, offset = 0;
    for (int k = 0; k < K; k++) {
        if (!next[k]) continue;
        start[l] = offset, row[l] = k, l++;
        const int c = next[k];
        next[k] = offset;   /* from here on: where key k's next member goes */
        offset += c;
    }
    start[count] = offset;
    for (int i = 0; i < n; i++) member[next[keys[i]]++] = i;
    /* cuda_stage copies the host array before it returns: the host buffers may be reused at once */
    RowLists r = {count, (const int32_t *)cuda_stage(slot, lists, sizeof(int32_t) * words)};
    return r;
}

/* dst[row[l], c] += src[member[m], c] for m over list l in order: one thread per (list, column),
 * the sum kept in a register, which rounds each addition to float as the CPU's += does. The
 * order leaves few threads where the lists are few and long (the token-type table: 2 lists of
 * half the batch's rows, 2 x 768 threads at bert-base; the word table's [MASK] row, a tenth of
 * them): so a warp a block (spread over the SMs) and LIST_CHUNK rows fetched ahead
 * (ordered_sum: the same additions in the same order). */
enum { LIST_CHUNK = 64 };
__global__ static void add_row_lists(float *dst, const float *src, const int32_t *lists, int count, int C) {
    const int c = row_column(C);
    if (c < 0) return;
    const int l = blockIdx.x;
    const int32_t *start = lists, *row = lists + count + 1, *member = row + count;
    float *d = dst + (size_t)row[l] * C + c;
    *d = ordered_sum<LIST_CHUNK>(*d, start[l], start[l + 1], [&](int m) { return src[(size_t)member[m] * C + c]; });
}

static void scatter_add_by_key(int slot, float *dst, const float *src, const int32_t *keys, int n, int C) {
    if (n <= 0 || C <= 0) return;
    const RowLists lists = stage_row_lists(slot, keys, n);
    add_row_lists<<<dim3((unsigned)lists.count, (unsigned)((C + 31) / 32)), 32>>>(dst, src, lists.device, lists.count,
                                                                                 C);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- embeddings */

/* out[n] = (word[ids[n]] + type[types[n]]) + pos[n % T]: the CPU's order of the two additions. */
__global__ static void embeddings_forward(float *out, const int32_t *ids, const int32_t *types, const float *word,
                                          const float *pos, const float *type, int T, int C) {
    const int c = row_column(C);
    if (c < 0) return;
    const int n = blockIdx.x;
    out[(size_t)n * C + c] =
        word[(size_t)ids[n] * C + c] + type[(size_t)types[n] * C + c] + pos[(size_t)(n % T) * C + c];
}

extern "C" void k_embeddings_forward(float *out, const int32_t *ids, const int32_t *types, const float *word,
                                     const float *pos, const float *type, int B, int T, int C) {
    const int N = B * T;
    if (N <= 0 || C <= 0) return;
    const int32_t *d_ids = (const int32_t *)cuda_stage(0, ids, sizeof(int32_t) * (size_t)N);
    const int32_t *d_types = (const int32_t *)cuda_stage(1, types, sizeof(int32_t) * (size_t)N);
    embeddings_forward<<<row_grid(N, C), row_threads(C)>>>(out, d_ids, d_types, word, pos, type, T, C);
    CUDA_LAUNCHED();
}

/* dpos[t] += dout[b T + t] for b = 0 .. B-1 in order (the rows n with n % T == t, in n order):
 * no index list needed, one thread per (t, column). */
__global__ static void position_grad(float *dpos, const float *dout, int B, int T, int C) {
    const int c = row_column(C);
    if (c < 0) return;
    const int t = blockIdx.x;
    float *d = dpos + (size_t)t * C + c;
    *d = ordered_sum(*d, 0, B, [&](int b) { return dout[((size_t)b * T + t) * C + c]; });
}

/* The CPU adds row n's gradient into each table's row in n order; the three tables are
 * independent, so each is accumulated on its own, in that order. */
extern "C" void k_embeddings_backward(float *dword, float *dpos, float *dtype, const float *dout, const int32_t *ids,
                                      const int32_t *types, int B, int T, int C) {
    const int N = B * T;
    if (N <= 0 || C <= 0) return;
    scatter_add_by_key(0, dword, dout, ids, N, C);
    scatter_add_by_key(1, dtype, dout, types, N, C);
    position_grad<<<row_grid(T, C), row_threads(C)>>>(dpos, dout, B, T, C);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- cross-entropy */

enum { SOFTMAX_MAX_THREADS = 1024 };

/* A block-wide max or sum (blockDim.x a multiple of 32, at most 1024): a butterfly in each warp
 * (both partners add the same two floats, so every lane holds the same value), then every
 * thread combines the warps' values in warp order: all threads return the same float, and the
 * order depends only on blockDim. */
__device__ static float block_reduce(float v, bool take_max) {
    __shared__ float warp_value[SOFTMAX_MAX_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = take_max ? (w > v ? w : v) : v + w;
    }
    __syncthreads();   /* a previous call's readers are done with warp_value */
    if ((threadIdx.x & 31) == 0) warp_value[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_value[0];
    for (int w = 1; w < (int)(blockDim.x / 32); w++) v = take_max ? (warp_value[w] > v ? warp_value[w] : v) : v + warp_value[w];
    return v;
}

/* One block per row, as the CPU's softmax_row: the maximum (NaNs skipped, as the CPU's
 * `x > mx ? x : mx`), probs = expf(x - max) with their float sum, probs *= 1 / sum (each thread
 * scales the values it wrote), and the row's loss logf(sum) + max - x[label]. */
__global__ static void softmax_xent_rows(float *row_loss, float *probs, const float *logits, const int32_t *row_index,
                                         const int32_t *labels, int V) {
    const int k = blockIdx.x;
    const float *x = logits + (size_t)(row_index ? row_index[k] : k) * V;
    float *p = probs + (size_t)k * V;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = x[j] > mx ? x[j] : mx;
    mx = block_reduce(mx, true);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float e = expf(x[j] - mx);
        p[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, false);
    const float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < V; j += blockDim.x) p[j] *= inv;
    if (threadIdx.x == 0) row_loss[k] = logf(sum) + mx - x[labels[k]];
}

/* loss[0] = mean of row_loss, summed in float64 in row order as the CPU does: one thread (M is
 * a batch's labelled rows, thousands at most), so the mean is exactly the CPU's mean of these
 * row losses; LOSS_CHUNK of them loaded ahead (a load at a time: a latency each). M == 0 gives
 * 0/0 = NaN, as on the CPU. The float64 sums of mse_forward and bce_forward likewise. */
enum { LOSS_CHUNK = 32 };
__global__ static void mean_in_order(float *loss, const float *row_loss, int M) {
    const double total = ordered_sum<LOSS_CHUNK>(0.0, 0, M, [&](int k) { return row_loss[k]; });
    loss[0] = (float)(total / M);
}

extern "C" void k_xent_forward(float *loss, float *row_loss, float *probs, const float *logits,
                               const int32_t *row_index, const int32_t *labels, int M, int V) {
    if (M > 0) {
        const int32_t *d_labels = (const int32_t *)cuda_stage(0, labels, sizeof(int32_t) * (size_t)M);
        const int32_t *d_rows = (const int32_t *)cuda_stage(1, row_index, sizeof(int32_t) * (size_t)M);  /* NULL stays NULL */
        const int warps = (V + 31) / 32;
        const unsigned threads = warps >= SOFTMAX_MAX_THREADS / 32 ? SOFTMAX_MAX_THREADS : (warps ? warps * 32 : 32);
        softmax_xent_rows<<<(unsigned)M, threads>>>(row_loss, probs, logits, d_rows, d_labels, V);
        CUDA_LAUNCHED();
    }
    mean_in_order<<<1, 1>>>(loss, row_loss, M < 0 ? 0 : M);
    CUDA_LAUNCHED();
}

/* g = probs * scale, then the label's entry minus scale: the CPU's two roundings. */
__global__ static void xent_backward(float *g, const int32_t *labels, int V, float scale) {
    const int j = row_column(V);
    if (j < 0) return;
    const int k = blockIdx.x;
    float *e = g + (size_t)k * V + j;
    float v = *e * scale;
    if (j == labels[k]) v -= scale;
    *e = v;
}

extern "C" void k_xent_backward(float *probs_to_dlogits, const int32_t *labels, int M, int V, float scale) {
    if (M <= 0 || V <= 0) return;
    const int32_t *d_labels = (const int32_t *)cuda_stage(0, labels, sizeof(int32_t) * (size_t)M);
    xent_backward<<<row_grid(M, V), row_threads(V)>>>(probs_to_dlogits, d_labels, V, scale);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- squared error */

/* The CPU's float64 sum in element order, on one thread: n is a batch's regression targets. */
struct Pair { float a, b; };
__global__ static void mse_forward(float *loss, const float *pred, const float *target, int n) {
    const double sum = ordered_sum<LOSS_CHUNK>(
        0.0, 0, n, [&](int i) { return Pair{pred[i], target[i]}; },
        [](int, Pair p) { return ((double)p.a - p.b) * ((double)p.a - p.b); });
    loss[0] = (float)(sum / n);
}

extern "C" void k_mse_forward(float *loss, const float *pred, const float *target, int n) {
    mse_forward<<<1, 1>>>(loss, pred, target, n < 0 ? 0 : n);
    CUDA_LAUNCHED();
}

__global__ static void mse_backward(float *dpred, const float *pred, const float *target, size_t n, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dpred[i] = 2.0f * (pred[i] - target[i]) * scale;
}

extern "C" void k_mse_backward(float *dpred, const float *pred, const float *target, int n, float scale) {
    if (n <= 0) return;
    mse_backward<<<cuda_blocks((size_t)n), CUDA_THREADS>>>(dpred, pred, target, (size_t)n, scale);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- sigmoid cross-entropy */

/* As mse_forward: the CPU's float64 sum in element order on one thread (n = batch x labels). */
__global__ static void bce_forward(float *loss, const float *logits, const float *target, int n) {
    const double sum = ordered_sum<LOSS_CHUNK>(0.0, 0, n, [&](int i) { return Pair{logits[i], target[i]}; },
                                               [](int, Pair p) {
                                                   const double x = p.a;
                                                   return (x > 0 ? x : 0) - x * p.b + log1p(exp(-fabs(x)));
                                               });
    loss[0] = n > 0 ? (float)(sum / n) : 0.0f;
}

extern "C" void k_bce_forward(float *loss, const float *logits, const float *target, int n) {
    bce_forward<<<1, 1>>>(loss, logits, target, n < 0 ? 0 : n);
    CUDA_LAUNCHED();
}

__global__ static void bce_backward(float *dlogits, const float *logits, const float *target, size_t n, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dlogits[i] = (1.0f / (1.0f + expf(-logits[i])) - target[i]) * scale;
}

extern "C" void k_bce_backward(float *dlogits, const float *logits, const float *target, int n, float scale) {
    if (n <= 0) return;
    bce_backward<<<cuda_blocks((size_t)n), CUDA_THREADS>>>(dlogits, logits, target, (size_t)n, scale);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- rows */

__global__ static void gather_rows(float *dst, const float *src, const int32_t *rows, int C) {
    const int c = row_column(C);
    if (c < 0) return;
    const int k = blockIdx.x;
    dst[(size_t)k * C + c] = src[(size_t)rows[k] * C + c];
}

/* In place (dst overlapping the rows read) the rows are gathered into scratch and copied back:
 * a parallel gather would overwrite rows other blocks have still to read. */
extern "C" void k_gather_rows(float *dst, const float *src, const int32_t *rows, int R, int C) {
    if (R <= 0 || C <= 0) return;
    const size_t bytes = sizeof(float) * (size_t)R * C;
    const size_t src_bytes = sizeof(float) * (size_t)(max_index(rows, R) + 1) * C;
    const int32_t *d_rows = (const int32_t *)cuda_stage(0, rows, sizeof(int32_t) * (size_t)R);
    float *out = overlap(dst, bytes, src, src_bytes) ? (float *)cuda_scratch(0, bytes) : dst;
    gather_rows<<<row_grid(R, C), row_threads(C)>>>(out, src, d_rows, C);
    CUDA_LAUNCHED();
    if (out != dst) CUDA_CHECK(cudaMemcpyAsync(dst, out, bytes, cudaMemcpyDeviceToDevice, 0));
}

extern "C" void k_scatter_add_rows(float *dst, const float *src, const int32_t *rows, int R, int C) {
    scatter_add_by_key(0, dst, src, rows, R, C);
}

/* dst row r = src row from[r], or zeros where from[r] < 0. */
__global__ static void spread_rows(float *dst, const float *src, const int32_t *from, int C) {
    const int c = row_column(C);
    if (c < 0) return;
    const int r = blockIdx.x, k = from[r];
    dst[(size_t)r * C + c] = k >= 0 ? src[(size_t)k * C + c] : 0.0f;
}

/* Each of dst's N rows written once from its source (from[r]: the last k with rows[k] == r, as
 * the CPU's copies in k order leave it; -1: none, zeroed). In place (dst overlapping src) the
 * compact rows are first copied to scratch: a row's new contents may be another row's source.
 * The CPU's in-place call with R == N does nothing (ascending rows: each row in its place). */
extern "C" void k_scatter_rows(float *dst, const float *src, const int32_t *rows, int R, int N, int C) {
    if (N <= 0 || C <= 0) return;
    if (dst == src && R == N) return;
    static void *from_buf;
    static size_t from_cap;
    int32_t *from = (int32_t *)host_grow(&from_buf, &from_cap, sizeof(int32_t) * (size_t)N);
    for (int r = 0; r < N; r++) from[r] = -1;
    for (int k = 0; k < R; k++) from[rows[k]] = k;
    const int32_t *d_from = (const int32_t *)cuda_stage(0, from, sizeof(int32_t) * (size_t)N);
    const size_t src_bytes = sizeof(float) * (size_t)(R > 0 ? R : 0) * C;
    if (src_bytes && overlap(dst, sizeof(float) * (size_t)N * C, src, src_bytes)) {
        float *copy = (float *)cuda_scratch(0, src_bytes);
        CUDA_CHECK(cudaMemcpyAsync(copy, src, src_bytes, cudaMemcpyDeviceToDevice, 0));
        src = copy;
    }
    spread_rows<<<row_grid(N, C), row_threads(C)>>>(dst, src, d_from, C);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- plain memory */

extern "C" void k_copy(float *dst, const float *src, long n) {
    if (n > 0 && dst != src)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice, 0));
}

extern "C" void k_zero(float *x, long n) {
    if (n > 0) CUDA_CHECK(cudaMemsetAsync(x, 0, sizeof(float) * (size_t)n, 0));
}

__global__ static void add(float *dst, const float *src, size_t n) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
        dst[k] += src[k];
}

extern "C" void k_add(float *dst, const float *src, long n) {
    if (n <= 0) return;
    add<<<cuda_blocks((size_t)n), CUDA_THREADS>>>(dst, src, (size_t)n);
    CUDA_LAUNCHED();
}

/* Synchronises: the value is the result of every kernel launched before. */
extern "C" float k_read_scalar(const float *x) {
    float v;
    CUDA_CHECK(cudaMemcpy(&v, x, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}
