/* Column sums in a fixed order with their loads issued ahead (linear.cu's bias gradients,
 * layers_norm_act.cu's LayerNorm and GELU column sums).
 *
 * A deterministic column sum gives each (column, row slice) to one thread, which adds the
 * slice's rows one after another: the order is what makes the bits (the CPU's 16 slices, or
 * the GPU's own fixed blocks). That leaves few threads (16 slices x 768 columns: 3 warps per
 * SM on an H200), and a plain loop keeps only a few loads in flight per thread, so the sum waits
 * on memory latency, not bandwidth. Here each thread fetches ORDERED_CHUNK rows' terms into
 * registers before adding any of them: the same additions in the same order, the same bits
 * (the CUDA files are built without contraction, -fmad=false), several times the loads in
 * flight. Where the threads are fewest (a 768-column gradient's 16 x 768), a caller takes more
 * rows a fetch (the template's CHUNK): a full memory pipe wants some megabytes in flight. What
 * the compiler keeps in flight is its choice: where a store follows each fetch (a rounded copy)
 * the whole chunk (sm_90's SASS: 64 loads, then the additions); where only additions follow,
 * it interleaves them from 16 to 21 loads on (cuobjdump of add_row_lists, mean_in_order,
 * chunk_sums), still several times the plain loop's 4. */
#ifndef BERT_KERNELS_CUDA_ORDERED_SUM_CUH
#define BERT_KERNELS_CUDA_ORDERED_SUM_CUH

enum { ORDERED_CHUNK = 16 };

/* acc + term(n0) + ... + term(n1 - 1), added one at a time in that order (the plain loop's
 * bits), where term(n) = finish(n, fetch(n)): fetch only reads memory (a row's loads, into a
 * value of its own type), finish computes the term from them and may store (a rounded copy
 * of it). A chunk's CHUNK fetches all come before its finishes, so stores never hold the next
 * loads back, and an element stored where it was fetched from is read first. */
template <int CHUNK = ORDERED_CHUNK, typename Acc, typename Fetch, typename Finish>
__device__ static inline Acc ordered_sum(Acc acc, int n0, int n1, Fetch fetch, Finish finish) {
    int n = n0;
    for (; n + CHUNK <= n1; n += CHUNK) {
        decltype(fetch(n)) f[CHUNK];
#pragma unroll
        for (int j = 0; j < CHUNK; j++) f[j] = fetch(n + j);
#pragma unroll
        for (int j = 0; j < CHUNK; j++) acc += finish(n + j, f[j]);
    }
    for (; n < n1; n++) acc += finish(n, fetch(n));
    return acc;
}

/* The same with the term loaded as it is: term(n) reads memory only. (Acc: the sum's type, a
 * float, or the losses' double.) */
template <int CHUNK = ORDERED_CHUNK, typename Acc, typename Term>
__device__ static inline Acc ordered_sum(Acc acc, int n0, int n1, Term term) {
    return ordered_sum<CHUNK>(acc, n0, n1, term, [](int, auto t) { return t; });
}

/* Column sums in slices: the rows split into `slices` fixed slices (slice s: rows slice_row(N, s)
 * .. slice_row(N, s + 1) - 1), each column of each slice summed in row order into a partial
 * [slices, C], then each column's partials added in slice order (add_slice_sums). With ROW_SLICES
 * these are the CPU's 16-bit backward's float operations in its order (kernels/cpu/layers.c,
 * halves_and_column_sums): the bias gradients of k_matmul_backward_half and
 * k_gelu_backward_half_out16 have the CPU's bits. */
enum { ROW_SLICES = 16 };
__device__ static inline int slice_row(int N, int slice, int slices) { return (int)((long)N * slice / slices); }

/* db[c] += column c's partials [slices, C], added in slice order. */
__global__ static void add_slice_sums(float *db, const float *partial, int C, int slices) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
        db[c] += ordered_sum(0.0f, 0, slices, [&](int slice) { return partial[(size_t)slice * C + c]; });
}

#endif
