/* The host emulator of the CUDA backend: every .cu file of src/kernels/cuda/ (rewrite.py turns
 * their launches into emu_run calls) compiled as C++ for the CPU, with this runtime, cuBLAS
 * (below), cuBLASLt (cublaslt.cpp) and NCCL over MPI (nccl_mpi.cpp, a library of its own), so
 * that the CUDA tests (tests/cuda/) and the commands (./bert --device cuda) run the backend's own
 * code on a machine without a GPU (`make cuda-emulate`; docs/gpu.md). The device is one of
 * compute capability 9.0; device memory is host memory; streams and events keep no queue: each
 * launch, copy and collective has run when its call returns.
 *
 * A launch runs its blocks one after the other; a block's threads are fibers (emu_switch) that
 * run until they reach __syncthreads, __syncwarp or a shuffle, and a barrier opens when every
 * live thread of the block (warp) waits at it; waiting at different barriers is reported as a
 * deadlock, a warp barrier with some lanes gone as an error. EMU_ORDER=1 runs the fibers in the
 * reverse order (a read of another thread's write with no barrier between shows in one of the
 * two orders: dynamic shared memory and the scratch buffers start as NaN bits, or with
 * EMU_POISON=0x7f as 3.4e38, which a maximum does not pass over as it passes over NaN), EMU_MMA_ORDER
 * 0/1/2 sums each wmma tile's 16 products forwards, backwards, or exactly and rounded once (the
 * tensor cores' order is not documented: the tests' bounds must hold for any). A launch the
 * hardware would refuse (shared memory, block and grid sizes: check_launch) stops the run, as a
 * misaligned access does (the library is compiled with -fsanitize=alignment: Makefile). */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <mma.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "kernels/cuda/cuda_blas.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/half_bits.cuh"

/* the mark by which a test knows the library is this emulator (tests/cuda/cuda_test.h) */
extern "C" { extern const int bert_cuda_emulator; const int bert_cuda_emulator = 1; }

uint3 blockIdx, threadIdx;
dim3 blockDim, gridDim;

static int fiber_order, mma_order, poison = 0xff;
static long launches, threads_run, mma_calls, mma_computed;

__attribute__((constructor)) static void emu_start(void) {
    if (getenv("EMU_ORDER")) fiber_order = atoi(getenv("EMU_ORDER"));
    if (getenv("EMU_MMA_ORDER")) mma_order = atoi(getenv("EMU_MMA_ORDER"));
    if (getenv("EMU_POISON")) poison = (int)strtol(getenv("EMU_POISON"), NULL, 0);
}
__attribute__((destructor)) static void emu_report(void) {
    if (getenv("EMU_REPORT"))
        fprintf(stderr, "cuda emulator: %ld launches, %ld threads, %ld wmma products (%ld computed)\n", launches,
                threads_run, mma_calls, mma_computed);
}

/* ---------------------------------------------------------------- fibers */

enum State { RUNNABLE, AT_WARP, AT_BLOCK, DONE };
struct Fiber {
    void *sp;   /* its stack pointer while switched out (emu_switch) */
    State state;
    uint3 tid;
    int lane, warp;
    long mma_index;   /* this lane's wmma products so far in the block */
};
struct Tile { float a[256], b[256], c[256], d[256]; };   /* one warp call of mma_sync */
struct Warp {
    float shuffle[32];
    std::vector<Tile> mma;   /* the warp's products in call order */
};

static const size_t STACK_BYTES = 1 << 20;
static void *scheduler_sp;
static std::vector<Fiber> fibers;
static std::vector<char *> stacks;
static std::vector<Warp> warps;
static unsigned char *dynamic_shared;   /* 1024-byte aligned, as the hardware's */
static Fiber *running;
static void (*kernel_body)(void *);
static void *kernel_closure;
static const char *kernel_name;

static void fail(const char *what) {
    fprintf(stderr, "cuda emulator: %s in kernel %s, block (%u, %u, %u), thread %u\n", what, kernel_name, blockIdx.x,
            blockIdx.y, blockIdx.z, running ? running->tid.x : 0u);
    abort();
}

/* The switch between fibers (x86-64, System V): the callee-saved registers pushed on the stack
 * being left, its pointer stored in *save, the other stack's registers popped. glibc's
 * swapcontext does the same plus two system calls for the signal mask, which nothing here
 * changes: a third of the emulator's time went to them. */
extern "C" void emu_switch(void **save, void *to);
#if !defined(__x86_64__)
#error "the CUDA emulator's fiber switch is written for x86-64"
#endif
asm(".text\n"
    ".p2align 4\n"
    ".type emu_switch, @function\n"
    "emu_switch:\n"
    "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
    "    ret\n"
    ".size emu_switch, .-emu_switch\n");

static void wait_as(State s) {
    Fiber *me = running;
    me->state = s;
    emu_switch(&me->sp, scheduler_sp);
    running = me, threadIdx = me->tid;
}
/* A fiber's first frame (entered by emu_switch's ret, as if called): it never returns. */
static void fiber_main(void) {
    kernel_body(kernel_closure);
    running->state = DONE;
    emu_switch(&running->sp, scheduler_sp);
    abort();   /* a finished fiber is never switched to */
}
/* A new fiber's stack: six zero registers for emu_switch to pop, then fiber_main as the return
 * address, then a null one for fiber_main's own frame (16-byte aligned as after a call). */
static void *fresh_stack(char *stack) {
    uintptr_t top = ((uintptr_t)stack + STACK_BYTES) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;
    *--sp = (void *)fiber_main;
    for (int r = 0; r < 6; r++) *--sp = NULL;
    return sp;
}

void __syncthreads(void) { wait_as(AT_BLOCK); }
void __syncwarp(unsigned mask) {
    if (mask != 0xffffffffu) fail("__syncwarp with a partial mask");
    wait_as(AT_WARP);
}
float __shfl_xor_sync(unsigned mask, float v, int k) {
    if (mask != 0xffffffffu) fail("a shuffle with a partial mask");
    Warp &w = warps[running->warp];
    w.shuffle[running->lane] = v;
    wait_as(AT_WARP);
    const float r = w.shuffle[running->lane ^ k];
    wait_as(AT_WARP);   /* every lane has read before the slots are written again */
    return r;
}
void *emu_shared(void) { return dynamic_shared; }
int emu_lane(void) { return running ? running->lane : 0; }

/* Opens the barriers every live thread waits at; false if none can open. */
static bool open_barriers(unsigned nt) {
    unsigned live = 0, at_block = 0;
    for (unsigned t = 0; t < nt; t++) live += fibers[t].state != DONE, at_block += fibers[t].state == AT_BLOCK;
    bool opened = false;
    for (unsigned w0 = 0; w0 < nt; w0 += 32) {
        const unsigned w1 = w0 + 32 < nt ? w0 + 32 : nt;
        unsigned warp_live = 0, waiting = 0;
        for (unsigned t = w0; t < w1; t++) warp_live += fibers[t].state != DONE, waiting += fibers[t].state == AT_WARP;
        if (!waiting || waiting != warp_live) continue;
        if (warp_live != w1 - w0) fail("a warp barrier or shuffle with lanes that have returned");
        for (unsigned t = w0; t < w1; t++) fibers[t].state = RUNNABLE;
        opened = true;
    }
    if (!opened && at_block && at_block == live) {
        for (unsigned t = 0; t < nt; t++)
            if (fibers[t].state == AT_BLOCK) fibers[t].state = RUNNABLE;
        opened = true;
    }
    return opened;
}

static void run_block(unsigned nt) {
    if (fibers.size() < nt) fibers.resize(nt);
    while (stacks.size() < nt) stacks.push_back((char *)malloc(STACK_BYTES));
    warps.assign((nt + 31) / 32, Warp{});
    for (unsigned t = 0; t < nt; t++) {
        Fiber &f = fibers[t];
        f.state = RUNNABLE, f.lane = (int)(t % 32), f.warp = (int)(t / 32), f.mma_index = 0;
        f.tid = uint3{t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
        f.sp = fresh_stack(stacks[t]);
    }
    for (;;) {
        for (unsigned q = 0; q < nt; q++) {
            Fiber &f = fibers[fiber_order == 1 ? nt - 1 - q : q];
            if (f.state != RUNNABLE) continue;
            running = &f, threadIdx = f.tid;
            emu_switch(&scheduler_sp, f.sp);
        }
        running = NULL;
        unsigned done = 0;
        for (unsigned t = 0; t < nt; t++) done += fibers[t].state == DONE;
        if (done == nt) break;
        if (!open_barriers(nt)) fail("deadlock: threads wait at different barriers");
    }
    threads_run += nt;
}

/* Dynamic shared memory: 48 KiB a block unless the kernel was allowed more by
 * cudaFuncSetAttribute, at most 227 KiB on compute capability 9.0 (sm_80: 163 KiB); the launch
 * fails past either, on the hardware as here. */
enum : size_t { SHARED_DEFAULT = 48 << 10, SHARED_OPT_IN_MAX = 227 << 10 };
static std::map<const void *, size_t> shared_allowed;

cudaError_t emu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (value < 0 || (size_t)value > SHARED_OPT_IN_MAX) {
        fprintf(stderr, "cuda emulator: cudaFuncSetAttribute: %d bytes of dynamic shared memory, past the "
                        "device's %zu\n", value, (size_t)SHARED_OPT_IN_MAX);
        abort();
    }
    shared_allowed[kernel] = (size_t)value;
    return cudaSuccess;
}

static void refuse(const char *what) {
    fprintf(stderr, "cuda emulator: the launch of kernel %s refused: %s\n", kernel_name, what);
    abort();
}
static void check_launch(const EmuLaunch &cfg, const void *address) {
    const unsigned nt = cfg.block.x * cfg.block.y * cfg.block.z;
    if (nt == 0 || nt > 1024) refuse("a block of no threads or of more than 1024");
    if (cfg.grid.x == 0 || cfg.grid.y == 0 || cfg.grid.z == 0) refuse("a launch of an empty grid");
    if (cfg.grid.x > 0x7fffffffu || cfg.grid.y > 65535 || cfg.grid.z > 65535) refuse("a grid past the device's limits");
    const auto allowed = shared_allowed.find(address);
    const size_t limit = allowed == shared_allowed.end() ? (size_t)SHARED_DEFAULT : allowed->second;
    if (cfg.shared > limit) {
        char what[160];
        snprintf(what, sizeof what, "%zu bytes of dynamic shared memory, past the %zu the kernel is allowed",
                 cfg.shared, limit);
        refuse(what);
    }
}

void emu_launch(EmuLaunch cfg, const char *kernel, const void *address, void (*body)(void *), void *closure) {
    gridDim = cfg.grid, blockDim = cfg.block;
    kernel_name = kernel, kernel_body = body, kernel_closure = closure;
    launches++;
    check_launch(cfg, address);
    const unsigned nt = cfg.block.x * cfg.block.y * cfg.block.z;
    free(dynamic_shared);
    if (posix_memalign((void **)&dynamic_shared, 1024, cfg.shared + 16)) fail("out of memory");
    for (unsigned bz = 0; bz < cfg.grid.z; bz++)
        for (unsigned by = 0; by < cfg.grid.y; by++)
            for (unsigned bx = 0; bx < cfg.grid.x; bx++) {
                blockIdx = uint3{bx, by, bz};
                memset(dynamic_shared, poison, cfg.shared + 16);
                run_block(nt);
            }
}

/* ---------------------------------------------------------------- wmma */

float emu_float(const __half *p) { return float_from_fp16_bits(p->bits); }
float emu_float(const __nv_bfloat16 *p) { return float_from_bf16_bits(p->bits); }

void emu_check_tile(const void *p, unsigned ld, size_t element_bytes) {
    if ((uintptr_t)p % 32) fail("a wmma tile not 256-bit aligned");
    if (ld * element_bytes % 16) fail("a wmma tile's rows not a multiple of 16 bytes apart");
}

void emu_mma(float *d, const float *a, const float *b, const float *c) {
    mma_calls++;
    std::vector<Tile> &calls = warps[running->warp].mma;
    const size_t k = (size_t)running->mma_index++;
    if (k < calls.size()) {   /* an earlier lane of the warp computed this call */
        const Tile &t = calls[k];
        if (memcmp(t.a, a, sizeof t.a) || memcmp(t.b, b, sizeof t.b) || memcmp(t.c, c, sizeof t.c))
            fail("the lanes of a warp passed mma_sync different tiles");
        memcpy(d, t.d, sizeof t.d);
        return;
    }
    mma_computed++;
    calls.emplace_back();
    Tile &t = calls.back();
    memcpy(t.a, a, sizeof t.a), memcpy(t.b, b, sizeof t.b), memcpy(t.c, c, sizeof t.c);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c[i * 16 + j];   /* the products of 16-bit values are exact in fp32 */
            if (mma_order == 2) {
                double exact = 0;
                for (int q = 0; q < 16; q++) exact += (double)a[i * 16 + q] * b[q * 16 + j];
                s = (float)((double)s + exact);
            } else {
                for (int q = 0; q < 16; q++) {
                    const int r = mma_order == 1 ? 15 - q : q;
                    s += a[i * 16 + r] * b[r * 16 + j];
                }
            }
            t.d[i * 16 + j] = s;
        }
    memcpy(d, t.d, sizeof t.d);
}

/* ---------------------------------------------------------------- memory */

static cudaError_t last_error;   /* cudaGetLastError's */

/* Device memory: exact-size allocations (AddressSanitizer sees an overrun) with cudaMalloc's
 * 256-byte alignment, filled with NaN bits (a read of an unwritten element shows). */
cudaError_t cudaMalloc(void **p, size_t bytes) {
    if (posix_memalign(p, 256, bytes ? bytes : 1)) {
        *p = NULL;
        return last_error = cudaErrorMemoryAllocation;
    }
    memset(*p, poison, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    const long page = sysconf(_SC_PAGESIZE);
    *total = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)page;
    *free_bytes = (size_t)sysconf(_SC_AVPHYS_PAGES) * (size_t)page;
    return cudaSuccess;
}
/* cuda_scratch: a fresh allocation each call, NaN again (a kernel that reads scratch it did not
 * write in this call shows), in place of memory.cu's, which keeps a slot's buffer and its
 * contents (its definition is made weak in the emulated library: Makefile). */
void *cuda_scratch(int slot, size_t bytes) {
    static void *slots[CUDA_SCRATCH_SLOTS];
    free(slots[slot]);
    if (cudaMalloc(&slots[slot], bytes) != cudaSuccess) fail("out of memory");
    return slots[slot];
}
cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }

/* ---------------------------------------------------------------- streams, events */

struct EmuEvent { double ms; unsigned flags; bool queried; };
static int not_ready = -1;   /* EMU_NOT_READY */
cudaError_t cudaGetLastError(void) {
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
static double host_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    *e = new EmuEvent{host_ms(), flags, true};
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
    if (!e) fail("cudaEventRecord of no event");
    e->ms = host_ms(), e->queried = false;
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return 400;
    if (not_ready < 0) not_ready = getenv("EMU_NOT_READY") && atoi(getenv("EMU_NOT_READY")) == 1;
    if (not_ready && !e->queried) {
        e->queried = true;
        return last_error = cudaErrorNotReady;
    }
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : 400; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop) {
    if ((start->flags | stop->flags) & cudaEventDisableTiming) fail("cudaEventElapsedTime of an event without timing");
    *ms = (float)(stop->ms - start->ms);
    return cudaSuccess;
}
static char streams_made;
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = &streams_made; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned) { return e ? cudaSuccess : 400; }
/* ---------------------------------------------------------------- cuBLAS */

struct Handle { int math; };
cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    *handle = new Handle{CUBLAS_DEFAULT_MATH};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    ((Handle *)handle)->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }

/* TF32: an fp32 operand rounded to 10 mantissa bits, to nearest with ties away (cvt.rna.tf32). */
static float tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}
static float element(const void *p, cudaDataType t, size_t e, bool tf32_operands) {
    if (t == CUDA_R_32F) return tf32_operands ? tf32(((const float *)p)[e]) : ((const float *)p)[e];
    const uint16_t bits = ((const uint16_t *)p)[e];
    return t == CUDA_R_16F ? float_from_fp16_bits(bits) : float_from_bf16_bits(bits);
}
/* A dot product of k fp32 values in `order`: 0 forwards, 1 backwards, 2 the two halves each
 * forwards and then added (split-K with fp32 partial sums). */
static float dot(const float *x, const float *y, int k, int order) {
    float s = 0, t = 0;
    if (order == 1)
        for (int p = k - 1; p >= 0; p--) s += x[p] * y[p];
    else if (order == 2) {
        for (int p = 0; p < k / 2; p++) s += x[p] * y[p];
        for (int p = k / 2; p < k; p++) t += x[p] * y[p];
        s += t;
    } else
        for (int p = 0; p < k; p++) s += x[p] * y[p];
    return s;
}

/* Column-major C = alpha op(A) op(B) + beta C for each of count blocks (C not read with beta 0),
 * fp32 sums in `order` (dot's). Each block's operands are converted once, into op(A) by rows and
 * op(B) by columns (k contiguous), not once per product. */
static cublasStatus_t products(bool tf32_operands, int order, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                               int k, float alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
                               cudaDataType bt, int ldb, long long sb, float beta, float *C, int ldc, long long sc,
                               int count) {
    const size_t ea = at == CUDA_R_32F ? 4 : 2, eb = bt == CUDA_R_32F ? 4 : 2;
    std::vector<float> rows((size_t)m * k), cols((size_t)n * k);
    for (int z = 0; z < count; z++) {
        const char *a = (const char *)A + (size_t)z * sa * ea, *b = (const char *)B + (size_t)z * sb * eb;
        float *c = C + (size_t)z * sc;
        for (int i = 0; i < m; i++)
            for (int p = 0; p < k; p++)
                rows[(size_t)i * k + p] =
                    element(a, at, ta == CUBLAS_OP_N ? (size_t)p * lda + i : (size_t)i * lda + p, tf32_operands);
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                cols[(size_t)j * k + p] =
                    element(b, bt, tb == CUBLAS_OP_N ? (size_t)j * ldb + p : (size_t)p * ldb + j, tf32_operands);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                const float s = dot(&rows[(size_t)i * k], &cols[(size_t)j * k], k, order);
                float &out = c[(size_t)j * ldc + i];
                out = beta == 0.0f ? (alpha == 1.0f ? s : alpha * s) : alpha * s + beta * out;
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}
static bool tf32_math(cublasHandle_t handle) {
    return handle && (((Handle *)handle)->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH;
}
/* For the emulated cuBLASLt (cublaslt.cpp): element e of an fp32 or 16-bit matrix as a float;
 * C [m, n] (column-major, ld m) = op(A) op(B), fp32 sums in `order`. */
float emu_element(const void *p, cudaDataType t, size_t e) { return element(p, t, e, false); }
void emu_product(bool tf32_operands, int order, bool ta, bool tb, int m, int n, int k, const void *A, cudaDataType at,
                 int lda, const void *B, cudaDataType bt, int ldb, float *C) {
    products(tf32_operands, order, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, 1.0f, A, at,
             lda, 0, B, bt, ldb, 0, 0.0f, C, m, 0, 1);
}
void emu_fail(const char *what) { fail(what); }
int emu_mma_order(void) { return mma_order; }
static void fp32_results_only(cudaDataType ct) {
    if (ct != CUDA_R_32F) {
        fprintf(stderr, "cuda emulator: products with fp32 results only\n");
        abort();
    }
}
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    return products(tf32_math(handle), 0, ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, *beta,
                    C, ldc, 0, 1);
}
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t,
                            cublasGemmAlgo_t) {
    fp32_results_only(ct);
    return products(tf32_math(handle), 0, ta, tb, m, n, k, *(const float *)alpha, A, at, lda, 0, B, bt, ldb, 0,
                    *(const float *)beta, (float *)C, ldc, 0, 1);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
                                         long long sc, int count) {
    return products(tf32_math(handle), 0, ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb,
                    *beta, C, ldc, sc, count);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                          int n, int k, const void *alpha, const void *A, cudaDataType at, int lda,
                                          long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType ct, int ldc, long long sc, int count,
                                          cublasComputeType_t, cublasGemmAlgo_t) {
    fp32_results_only(ct);
    return products(tf32_math(handle), 0, ta, tb, m, n, k, *(const float *)alpha, A, at, lda, sa, B, bt, ldb, sb,
                    *(const float *)beta, (float *)C, ldc, sc, count);
}
