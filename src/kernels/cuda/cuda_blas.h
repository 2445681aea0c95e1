/* cuBLAS for the CUDA backend's products (linear.cu, attention.cu): one handle for the process
 * and a status check that stops with a message naming the call. */
#ifndef BERT_KERNELS_CUDA_BLAS_H
#define BERT_KERNELS_CUDA_BLAS_H

#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>

#define CUBLAS_CHECK(call)                                                                          \
    do {                                                                                            \
        cublasStatus_t cublas_check_status_ = (call);                                               \
        if (cublas_check_status_ != CUBLAS_STATUS_SUCCESS) {                                        \
            fprintf(stderr, "bert: cuBLAS: %s at %s:%d (%s)\n", cublasGetStatusString(cublas_check_status_), \
                    __FILE__, __LINE__, #call);                                                     \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

/* The handle, made on first use (linear.cu), on the default stream. The default math mode keeps
 * fp32 products in fp32 (no TF32; k_set_tf32 allows it), and reduced-precision reductions are
 * refused as well, so that split-K partial sums stay in fp32 whatever the operand type. */
cublasHandle_t cuda_cublas(void);
/* Whether fp32 products run in TF32 (k_set_tf32). */
bool cuda_tf32(void);

/* out [N, OC] = inp [N, C] @ weight [OC, C]^T (+ bias [OC], fp32, in the epilogue), row-major,
 * operands of in_type, out of out_type (fp32 or in_type), through cuBLASLt (lt_matmul.cu).
 * false, nothing written, where cuBLASLt has no algorithm for it: run the plain product. */
bool cuda_lt_forward(void *out, cudaDataType out_type, const void *inp, const void *weight, const float *bias, int N,
                     int C, int OC, cudaDataType in_type);
/* Column-major C [m, n] (ld ldc, fp32) = op(A) op(B) + beta C, operands of in_type (fp32 sums),
 * through cuBLASLt: the backward's products where cuda_lt_backward_enabled (BERT_CUDA_LT_BACKWARD=1).
 * false, nothing written, where cuBLASLt has no algorithm. */
bool cuda_lt_backward_enabled(void);
bool cuda_lt_gemm(bool ta, bool tb, int m, int n, int k, const void *A, int lda, const void *B, int ldb, float beta,
                  float *C, int ldc, cudaDataType in_type);
/* One line on how the cuBLASLt plans went (shapes planned, shapes left to plain cuBLAS). */
void cuda_lt_notes(char *out, size_t n);

#endif
