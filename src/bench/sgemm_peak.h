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

/* Prints the bf16 speed of every product shape of a bert-base training step on `tokens`
 * rows (forward, input gradient, weight gradient of each linear layer and the MLM decoder,
 * with the operand layouts the model uses), as GFLOP/s and a fraction of peak_gflops. */
void bf16_gemm_shapes_report(int tokens, int predictions, double peak_gflops);

/* What the OpenBLAS the peak times runs: "OpenBLAS 0.3.21 (Haswell kernel)". */
void sgemm_peak_openblas_describe(char *out, size_t n);

#endif
