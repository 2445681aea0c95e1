/* What the CUDA backend's files share: error checks that stop with a message (a CUDA error
 * is not recoverable mid-step), and the launch geometry of element-wise kernels. */
#ifndef BERT_KERNELS_CUDA_COMMON_H
#define BERT_KERNELS_CUDA_COMMON_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stddef.h>
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

/* cudaMalloc of bytes (at least 1) into *p; where the device has too little, the process ends with
 * what was asked, what is free and in all, and what to do, not only CUDA's error name. */
void cuda_malloc(void **p, size_t bytes);

/* After a launch: its configuration error now, its execution errors at the next synchronising call. */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

enum { CUDA_THREADS = 256 };
static inline unsigned cuda_blocks(size_t n) {
    const size_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    return (unsigned)(b > 65535u * 32u ? 65535u * 32u : (b ? b : 1));   /* grid-stride loops cover the rest */
}

/* Host arrays that describe a batch (kernels.h: ids, masks, row maps, labels, lengths are host
 * memory) copied to device memory for a kernel: slot s (0 .. CUDA_STAGE_SLOTS-1; one per array
 * a call needs at once) keeps its buffer between calls, grown as needed. The copy is
 * asynchronous (through pinned memory: the host array may be reused as soon as this returns)
 * and ordered before later launches on the default stream; the device array is valid for the
 * kernels launched before the slot's next cuda_stage, which must only read it. NULL gives NULL. */
enum { CUDA_STAGE_SLOTS = 8 };
const void *cuda_stage(int slot, const void *host, size_t bytes);
/* Device scratch for a kernel's intermediate values: slot s (0 .. CUDA_SCRATCH_SLOTS-1) keeps its
 * buffer between calls, grown as needed (contents not kept across growth). One host thread calls. */
enum { CUDA_SCRATCH_SLOTS = 8 };
void *cuda_scratch(int slot, size_t bytes);

#endif
