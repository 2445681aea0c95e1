/* The one fp32 matrix product every kernel calls: C = alpha op(A) op(B) + beta C, row-major
 * (op = transpose when trans_*). Which library runs it is a build choice:
 *   make GEMM=onednn (default)  oneDNN's dnnl_sgemm: 7-10% faster than OpenBLAS on BERT's
 *                               shapes on AVX-512 hosts (bench/RESULTS.md, "GEMM library")
 *   make GEMM=openblas          OpenBLAS's cblas_sgemm
 * Both run on the calling thread when called inside an OpenMP parallel region, and split the
 * product over OpenMP threads otherwise. */
#ifndef BERT_SGEMM_H
#define BERT_SGEMM_H

#include <stdbool.h>

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
           int ldb, float beta, float *C, int ldc);

/* "onednn" or "openblas": what this build links, for reports. */
const char *sgemm_library(void);

#include <stddef.h>
/* For reports, so two runs can be compared: the library with its version and the kernel it
 * runs on this CPU ("oneDNN 3.0.0 (ISA avx2); ...", "OpenBLAS 0.3.21 (Haswell kernel)"). */
void sgemm_describe(char *out, size_t n);
/* "OpenBLAS 0.3.21 (Haswell kernel)" from openblas_get_config() / openblas_get_corename()
 * (given by the caller, so that only code that links OpenBLAS calls them). */
void openblas_describe(char *out, size_t n, const char *config, const char *core);
/* The environment variables that change the kernels' speed or rounding (OpenMP threads and
 * waiting, OpenBLAS's core type and cache size, oneDNN's ISA cap), as "NAME=value ..." for
 * those set, or "none set". */
void compute_environment(char *out, size_t n);

#endif
