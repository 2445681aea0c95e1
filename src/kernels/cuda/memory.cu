/* The CUDA backend's memory (kernels.h): device memory, copies through the default stream, and
 * host staging for k_map. */
#include <string.h>

#include "kernels/cuda/cuda_common.h"

extern "C" {
#include "kernels/kernels.h"
}

extern "C" void *k_alloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));   /* 256-byte aligned */
    CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 1));
    return p;
}

extern "C" void k_free(void *p) {
    if (p) CUDA_CHECK(cudaFree(p));
}

extern "C" void k_upload(void *dst, const void *host_src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}

extern "C" void k_download(void *host_dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

/* A host copy of the bytes (pinned: the copies run at the bus's speed), filled when read. */
extern "C" void *k_map(void *p, size_t bytes, bool read) {
    void *host = NULL;
    CUDA_CHECK(cudaMallocHost(&host, bytes ? bytes : 1));
    if (read) k_download(host, p, bytes);
    return host;
}

extern "C" void k_unmap(void *p, void *host, size_t bytes, bool write) {
    if (write) k_upload(p, host, bytes);
    CUDA_CHECK(cudaFreeHost(host));
}

/* How many CUDA devices this process sees (0 without a driver or a device: no error). Not
 * part of kernels.h: for the CUDA build's start-up and its tests. */
extern "C" int k_cuda_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   /* clear it */
        return 0;
    }
    return n;
}

/* A buffer per slot, grown (never shrunk) to the largest size asked of it. */
static void *grow(void **p, size_t *cap, size_t bytes) {
    if (bytes > *cap) {
        if (*p) CUDA_CHECK(cudaFree(*p));
        *cap = bytes + bytes / 2 + 256;
        CUDA_CHECK(cudaMalloc(p, *cap));
    }
    return *p;
}

const void *cuda_stage(int slot, const void *host, size_t bytes) {
    static void *buffer[CUDA_STAGE_SLOTS];
    static size_t capacity[CUDA_STAGE_SLOTS];
    if (!host) return NULL;
    void *d = grow(&buffer[slot], &capacity[slot], bytes);
    k_upload(d, host, bytes);
    return d;
}

void *cuda_scratch(int slot, size_t bytes) {
    static void *buffer[CUDA_SCRATCH_SLOTS];
    static size_t capacity[CUDA_SCRATCH_SLOTS];
    return grow(&buffer[slot], &capacity[slot], bytes);
}

/* One line on the GPU the kernels run on (kernels/backend.h's k_backend_describe). */
extern "C" void k_cuda_describe(char *out, size_t n) {
    int device = 0, runtime = 0, driver = 0;
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    cudaRuntimeGetVersion(&runtime), cudaDriverGetVersion(&driver);
    snprintf(out, n, "%s (sm_%d%d, %d SMs, %.1f GiB), CUDA runtime %d.%d, driver %d.%d", p.name, p.major, p.minor,
             p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, runtime / 1000, runtime % 1000 / 10,
             driver / 1000, driver % 1000 / 10);
}

/* Waits for every queued kernel and copy (the kernel profile, kernels/backend.h). */
extern "C" void k_cuda_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }
