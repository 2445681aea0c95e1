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

/* acc + term(n0) + term(n0 + 1) + ... + term(n1 - 1), added one at a time in that order (the
 * plain loop's bits). term(n) only reads memory (no stores: they would keep the next chunk's
 * loads behind them). */
template <typename Term>
__device__ static inline float ordered_sum(float acc, int n0, int n1, Term term) {
    int n = n0;
    for (; n + ORDERED_CHUNK <= n1; n += ORDERED_CHUNK) {
        float t[ORDERED_CHUNK];
#pragma unroll
        for (int j = 0; j < ORDERED_CHUNK; j++) t[j] = term(n + j);
#pragma unroll
        for (int j = 0; j < ORDERED_CHUNK; j++) acc += t[j];
    }
    for (; n < n1; n++) acc += term(n);
    return acc;
}

#endif
