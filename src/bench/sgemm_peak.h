/* The machine's practical fp32 matrix-product peak, measured at run time on the shapes that
 * dominate BERT (a [tokens, hidden] activation times a weight), so throughput reports can say
 * what fraction of the attainable speed a model reaches. Every sgemm library the binary links
 * is timed (OpenBLAS's cblas_sgemm, and oneDNN's when it is the build's sgemm.h library) and
 * the peak is the best of them all, so a model is never measured against a slower library. */
#ifndef BERT_SGEMM_PEAK_H
#define BERT_SGEMM_PEAK_H

#include <stddef.h>

typedef struct {
    int m, n, k;          /* C[m,n] = A[m,k] B[k,n] */
    double best_gflops;   /* fastest of the timed repetitions */
    double mean_gflops;
    int reps;
} SgemmShapeResult;

enum { SGEMM_PEAK_SHAPES = 3, SGEMM_PEAK_MAX_LIBS = 2 };

typedef struct {
    int nlibs;
    const char *libs[SGEMM_PEAK_MAX_LIBS];    /* "openblas", "onednn" */
    SgemmShapeResult shapes[SGEMM_PEAK_MAX_LIBS][SGEMM_PEAK_SHAPES];
    double lib_peak_gflops[SGEMM_PEAK_MAX_LIBS];
    double peak_gflops;   /* best over all libraries and shapes */
    const char *peak_lib;
} SgemmPeak;

/* Times the three BERT-base linear shapes (tokens=m, hidden=768, intermediate=3072) for about
 * budget_seconds in total, with the current thread count. m <= 0 picks 4096 (batch 32 x
 * seq 128). Its ~100 MB of buffers are freed and the peak RSS reset afterwards
 * (reset_peak_rss), so they do not count in the caller's peak. It runs in this process: a
 * child forked after the parent ran OpenMP threads cannot use libgomp. */
void sgemm_peak_measure(SgemmPeak *out, int m, double budget_seconds);

/* The bf16 counterpart (kernels/cpu/gemm_half.h, oneDNN's matmul on bf16 instructions): the
 * same three shapes, weights stored [n, k] as the model keeps them, bf16 inputs, fp32
 * output. Only where gemm_bf16_native_available(); peak 0 otherwise. */
typedef struct {
    SgemmShapeResult shapes[SGEMM_PEAK_SHAPES];
    double peak_gflops;
} Bf16GemmPeak;
void bf16_gemm_peak_measure(Bf16GemmPeak *out, int m, double budget_seconds);

/* The int8 counterpart (kernels/cpu/gemm_int8.h: oneDNN's s8 x s8 matmul with int32 sums, what
 * --int8 runs): the same three shapes, the weight packed as the model packs it, s8 inputs,
 * int32 output, in GOP/s (2 m n k per product, as FLOPs count). peak 0 where there are no
 * int8 products. And the int8 dot-product instruction's own peak: every thread running
 * independent vpdpbusd (AVX-512 VNNI, 128 ops per zmm instruction; else AVX-VNNI, 64 per ymm)
 * back to back, no memory: 0 where the CPU has neither. On CPUs with AMX, the tile
 * instruction's (tdpbssd: 2 x 16 x 16 x 64 ops, the products' instruction there) the same way,
 * every thread on its own tiles: 0 without AMX. The fractions are reported against the GEMM
 * peak (whose int32 output, 13-38 MB, goes to memory: the model's products keep their sums in
 * cache and can pass it), against the same products run as the model runs them with nothing
 * else running (in_cache), and, with AMX, against the tile instruction's. */
typedef struct {
    SgemmShapeResult shapes[SGEMM_PEAK_SHAPES];
    double peak_gops;
    double vpdpbusd_gops;
    const char *vpdpbusd_isa;   /* "avx512_vnni", "avx_vnni" or "none" */
    double amx_gops;            /* tdpbssd; 0 where the CPU (or the kernel) gives no AMX */
    /* The shapes' products as the model runs them (gemm_int8_rows, sums kept in cache for the
     * epilogue), their own time alone (gemm_int8_product_counters), and the best of the three */
    double in_cache_gops[SGEMM_PEAK_SHAPES];
    double in_cache_peak_gops;
} Int8GemmPeak;
void int8_gemm_peak_measure(Int8GemmPeak *out, int m, double budget_seconds);

/* Prints the bf16 speed of every product shape of a bert-base training step on `tokens`
 * rows (forward, input gradient, weight gradient of each linear layer and the MLM decoder,
 * with the operand layouts the model uses), as GFLOP/s and a fraction of peak_gflops. */
void bf16_gemm_shapes_report(int tokens, int predictions, double peak_gflops);

/* What the OpenBLAS the peak times runs: "OpenBLAS 0.3.21 (Haswell kernel)". */
void sgemm_peak_openblas_describe(char *out, size_t n);

#endif
