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
 * flight. */
#ifndef BERT_KERNELS_CUDA_ORDERED_SUM_CUH
#define BERT_KERNELS_CUDA_ORDERED_SUM_CUH

enum { ORDERED_CHUNK = 16 };

/* acc + term(n0) + ... + term(n1 - 1), added one at a time in that order (the plain loop's
 * bits), where term(n) = finish(n, fetch(n)): fetch only reads memory (a row's loads, into a
 * value of its own type), finish computes the term from them and may store (a rounded copy
 * of it). A chunk's fetches all come before its finishes, so stores never hold the next loads
 * back, and an element stored where it was fetched from is read first. */
template <typename Fetch, typename Finish>
__device__ static inline float ordered_sum(float acc, int n0, int n1, Fetch fetch, Finish finish) {
    int n = n0;
    for (; n + ORDERED_CHUNK <= n1; n += ORDERED_CHUNK) {
        decltype(fetch(n)) f[ORDERED_CHUNK];
#pragma unroll
        for (int j = 0; j < ORDERED_CHUNK; j++) f[j] = fetch(n + j);
#pragma unroll
        for (int j = 0; j < ORDERED_CHUNK; j++) acc += finish(n + j, f[j]);
    }
    for (; n < n1; n++) acc += finish(n, fetch(n));
    return acc;
}

/* The same with the term loaded as it is: term(n) reads memory only. */
template <typename Term>
__device__ static inline float ordered_sum(float acc, int n0, int n1, Term term) {
    return ordered_sum(acc, n0, n1, term, [](int, float t) { return t; });
}

#endif
