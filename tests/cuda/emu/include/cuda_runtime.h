/* The CUDA runtime as the host emulator (tests/cuda/emu/runtime.cpp) gives it to the backend's
 * .cu files compiled as C++ for the CPU: a block's threads are fibers, __syncthreads,
 * __syncwarp and shuffles their scheduling points; memory is the host's. Only what the
 * emulated files use. */
#ifndef BERT_CUDA_EMU_RUNTIME_H
#define BERT_CUDA_EMU_RUNTIME_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__ static   /* one block runs at a time: a static is its block's */

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 { unsigned x, y, z; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

extern uint3 blockIdx, threadIdx;
extern dim3 blockDim, gridDim;
float __shfl_xor_sync(unsigned mask, float v, int k);
void __syncwarp(unsigned mask = 0xffffffffu);
void __syncthreads(void);
template <typename T> static inline T atomicAdd(T *p, T v) { const T old = *p; *p = old + v; return old; }

/* the emulator's: the running block's dynamic shared memory, the calling thread's lane */
void *emu_shared(void);
int emu_lane(void);

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInsufficientDriver = 35, cudaErrorDevicesUnavailable = 46,
       cudaErrorInvalidDeviceFunction = 98, cudaErrorNoDevice = 100, cudaErrorNoKernelImageForDevice = 209,
       cudaErrorInvalidPtx = 218, cudaErrorUnsupportedPtxVersion = 222, cudaErrorNotReady = 600 };
typedef void *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
/* the thread's last error, returned and cleared (runtime.cpp: a "not ready" query sets it) */
cudaError_t cudaGetLastError(void);
/* A node of EMU_DEVICES GPUs (default 8, so that a test's processes each take one, as on a GPU
 * node), each of them the host, of compute capability 9.0 (an H100's or H200's). The machines a
 * library cannot run on, for k_cuda_check's messages: EMU_SM=75 (a GPU of compute capability
 * 7.5), EMU_PROBE_ERROR=209 (one the library holds no code for; 222: PTX newer than the driver;
 * 46: a GPU that cannot start a context), EMU_DEVICES=0 (none visible), EMU_DRIVER=12040 (a
 * CUDA 12.4 driver under the CUDA 13.5 runtime: an older major version, so no device counted, as
 * the real runtime refuses; EMU_DRIVER=13000, an older minor version, runs, as the device's) */
enum cudaDeviceAttr { cudaDevAttrComputeCapabilityMajor, cudaDevAttrComputeCapabilityMinor,
                      cudaDevAttrMaxSharedMemoryPerBlockOptin };
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount; size_t totalGlobalMem; };
static inline int emu_env(const char *name, int otherwise) { const char *v = getenv(name); return v ? atoi(v) : otherwise; }
static inline int emu_sm(void) { return emu_env("EMU_SM", 90); }
static inline cudaError_t cudaRuntimeGetVersion(int *v) { *v = getenv("EMU_DRIVER") ? 13050 : 0; return cudaSuccess; }
static inline cudaError_t cudaDriverGetVersion(int *v) { *v = emu_env("EMU_DRIVER", 0); return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) {
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime), cudaDriverGetVersion(&driver);
    const bool refused = driver / 1000 < runtime / 1000;   /* minor version compatibility within a major */
    *n = refused ? 0 : emu_env("EMU_DEVICES", 8);
    return refused ? cudaErrorInsufficientDriver : *n < 1 ? cudaErrorNoDevice : cudaSuccess;
}
inline int *emu_current_device(void) { static int current = 0; return &current; }   /* one for the library */
static inline cudaError_t cudaGetDevice(int *d) { *d = *emu_current_device(); return cudaSuccess; }
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
    *v = a == cudaDevAttrComputeCapabilityMajor ? emu_sm() / 10 : a == cudaDevAttrComputeCapabilityMinor ? emu_sm() % 10
       : a == cudaDevAttrMaxSharedMemoryPerBlockOptin ? 227 << 10 : 0;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    memset(p, 0, sizeof *p);
    strcpy(p->name, "the host emulator (tests/cuda/emu)");
    p->major = emu_sm() / 10, p->minor = emu_sm() % 10, p->multiProcessorCount = 1, p->totalGlobalMem = (size_t)1 << 30;
    return cudaSuccess;
}
struct cudaFuncAttributes { int maxThreadsPerBlock; };
template <typename F> static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, F *) {
    a->maxThreadsPerBlock = 1024;
    return emu_env("EMU_PROBE_ERROR", cudaSuccess);
}
static inline cudaError_t cudaSetDevice(int d) {
    int n = 0;
    cudaGetDeviceCount(&n);
    if (d < 0 || d >= n) return 101;   /* cudaErrorInvalidDevice */
    *emu_current_device() = d;
    return cudaSuccess;
}
/* the device's memory is the host's */
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total);
static inline const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess ? "no error (emulated)" : e == cudaErrorNotReady ? "cudaErrorNotReady (emulated)"
         : e == cudaErrorMemoryAllocation ? "out of memory (emulated)"
         : e == cudaErrorInsufficientDriver ? "CUDA driver version is insufficient for CUDA runtime version (emulated)"
         : e == cudaErrorNoDevice ? "no CUDA-capable device is detected (emulated)"
         : e == cudaErrorNoKernelImageForDevice ? "no kernel image is available for execution on the device (emulated)"
         : e == cudaErrorUnsupportedPtxVersion ? "the provided PTX was compiled with an unsupported toolchain (emulated)"
         : e == cudaErrorDevicesUnavailable ? "CUDA-capable device(s) is/are busy or unavailable (emulated)"
         : "(emulated)";
}
/* the hardware's limits on dynamic shared memory are checked at each launch (runtime.cpp) */
cudaError_t emu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value);
template <typename F> static inline cudaError_t cudaFuncSetAttribute(F *kernel, cudaFuncAttribute attr, int value) {
    return emu_func_set_attribute(reinterpret_cast<const void *>(kernel), attr, value);
}
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaFreeHost(void *p);
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }
template <typename T> static inline cudaError_t cudaMallocHost(T **p, size_t bytes) { return cudaMallocHost((void **)p, bytes); }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memmove(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t = 0) {
    memmove(d, s, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t = 0) { memset(d, v, n); return cudaSuccess; }

/* Streams and events: every launch and copy has run when its call returns (one stream in
 * effect, in the order of the calls), so a wait finds the work done; a query does too, but with
 * EMU_NOT_READY=1 an event's first query after each record says cudaErrorNotReady (and leaves it
 * as the last error, as the runtime does), so that a caller's polling path runs. An event keeps
 * the host's clock at its record, for cudaEventElapsedTime. The stream-ordered allocator
 * allocates and frees at once. */
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
typedef struct EmuEvent *cudaEvent_t;
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
template <typename T> static inline cudaError_t cudaMallocAsync(T **p, size_t bytes, cudaStream_t s) {
    return cudaMallocAsync((void **)p, bytes, s);
}
static inline cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return cudaFree(p); }

/* k<<<grid, block, shared bytes, stream>>>(args), rewritten by rewrite.py (the kernel's address:
 * its shared memory allowance, cudaFuncSetAttribute's) */
struct EmuLaunch { dim3 grid, block; size_t shared; };
static inline EmuLaunch emu_config(dim3 g, dim3 b, size_t shared = 0, cudaStream_t = 0) { return EmuLaunch{g, b, shared}; }
void emu_launch(EmuLaunch cfg, const char *kernel, const void *address, void (*body)(void *), void *closure);
template <typename K, typename F> static inline void emu_run(EmuLaunch cfg, const char *kernel, K *address, F f) {
    emu_launch(cfg, kernel, reinterpret_cast<const void *>(address), [](void *c) { (*(F *)c)(); }, &f);
}
#endif
