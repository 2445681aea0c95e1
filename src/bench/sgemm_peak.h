/* The machine's practical fp32 matrix-product peak, measured at run time with cblas_sgemm
 * on the shapes that dominate BERT (a [tokens, hidden] activation times a weight), so
 * throughput reports can say what fraction of the attainable speed a model reaches. */
#ifndef BERT_SGEMM_PEAK_H
#define BERT_SGEMM_PEAK_H

typedef struct {
    int m, n, k;          /* C[m,n] = A[m,k] B[k,n] */
    double best_gflops;   /* fastest of the timed repetitions */
    double mean_gflops;
    int reps;
} SgemmShapeResult;

enum { SGEMM_PEAK_SHAPES = 3 };

typedef struct {
    SgemmShapeResult shapes[SGEMM_PEAK_SHAPES];
    double peak_gflops;   /* best over all shapes */
} SgemmPeak;

/* Times the three BERT-base linear shapes (tokens=m, hidden=768, intermediate=3072) for about
 * budget_seconds in total, with BLAS's current thread count. m <= 0 picks 4096 (batch 32 x
 * seq 128). The measurement runs in a short-lived child process so its ~100 MB of buffers do
 * not count in the caller's peak RSS; it falls back to running in-process if fork fails.
 * Call it before the caller starts OpenMP threads of its own. */
void sgemm_peak_measure(SgemmPeak *out, int m, double budget_seconds);

#endif
