/* What the CUDA backend's files share: error checks that stop with a message (a CUDA error
 * is not recoverable mid-step), and the launch geometry of element-wise kernels. */
#ifndef BERT_KERNELS_CUDA_COMMON_H
#define BERT_KERNELS_CUDA_COMMON_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        cudaError_t cuda_check_err_ = (call);                                                     \
        if (cuda_check_err_ != cudaSuccess) {                                                     \
            fprintf(stderr, "bert: CUDA: %s at %s:%d (%s)\n", cudaGetErrorString(cuda_check_err_), \
                    __FILE__, __LINE__, #call);                                                   \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* After a launch: its configuration error now, its execution errors at the next synchronising call. */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

enum { CUDA_THREADS = 256 };
static inline unsigned cuda_blocks(size_t n) {
    const size_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    return (unsigned)(b > 65535u * 32u ? 65535u * 32u : (b ? b : 1));   /* grid-stride loops cover the rest */
}

#endif
