/* The CUDA backend's memory (kernels.h): device memory, copies through the default stream, and
 * host staging for k_map. */
#include <string.h>

#include "kernels/cuda/cuda_blas.h"
#include "kernels/cuda/cuda_common.h"

extern "C" {
#include "kernels/kernels.h"
}

static double gib(size_t bytes) { return bytes / 1073741824.0; }

void cuda_malloc(void **p, size_t bytes) {
    const cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);   /* 256-byte aligned */
    if (e == cudaErrorMemoryAllocation) {
        size_t free_bytes = 0, total = 0;
        (void)cudaGetLastError();
        CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
        fprintf(stderr, "bert: the GPU is out of memory: %.2f GiB asked, %.2f GiB free of %.2f (a smaller batch, "
                        "with --gradient_accumulation_steps for the same global batch)\n", gib(bytes),
                gib(free_bytes), gib(total));
        exit(1);
    }
    CUDA_CHECK(e);
}

extern "C" void *k_alloc(size_t bytes) {
    void *p = NULL;
    cuda_malloc(&p, bytes);
    CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 1));
    return p;
}

extern "C" size_t k_memory_bytes(void) {
    size_t free_bytes = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    return total;
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

/* A kernel that does nothing: whether its attributes can be read says whether the library holds
 * code this GPU runs. */
__global__ static void code_probe(void) {}

static void cuda_version(char *out, size_t n, int v) { snprintf(out, n, "%d.%d", v / 1000, v % 1000 / 10); }

/* Whether this process can run the library's kernels on its GPU (the current one): 0, or -1
 * with the reason, which --device cuda stops with (kernels/backend.c). Not part of kernels.h.
 * The reasons: no driver, or one of an older major version than the CUDA runtime linked into the
 * library (which then counts no GPU; an older minor version of the same major runs it); no GPU
 * visible; compute capability below 8.0 (bf16 tensor cores; the library is built for sm_80 and
 * later); a GPU the library holds no code for (machine code for sm_80 and sm_90, and compute_90
 * PTX, which a driver at least as new as the toolkit compiles for a newer GPU at the first run);
 * PTX the driver is too old for; or a GPU that cannot start a context (busy, exclusive, full). */
extern "C" int k_cuda_check(char *why, size_t n) {
    int count = 0, runtime = 0, driver = 0;
    char rv[16], dv[16];
    cudaRuntimeGetVersion(&runtime), cudaDriverGetVersion(&driver);
    cuda_version(rv, sizeof rv, runtime), cuda_version(dv, sizeof dv, driver);
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        if (driver == 0 && runtime > 0)
            snprintf(why, n, "no NVIDIA driver is loaded (%s): nvidia-smi says whether the machine has one",
                     cudaGetErrorString(e));
        else if (e == cudaErrorInsufficientDriver)
            snprintf(why, n, "the NVIDIA driver supports CUDA %s, an older major version than the CUDA %s runtime "
                     "this library was built with (%s): build it with the machine's CUDA (make GPU=cuda "
                     "NVCC=/usr/local/cuda-%d/bin/nvcc, or CUDA_HOME=) or update the driver", dv, rv,
                     cudaGetErrorString(e), driver / 1000);
        else
            snprintf(why, n, "no CUDA GPU is visible to this process (%s): nvidia-smi lists the machine's, "
                     "CUDA_VISIBLE_DEVICES chooses among them", e != cudaSuccess ? cudaGetErrorString(e) : "none counted");
        return -1;
    }
    int device = 0;
    cudaDeviceProp p;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&p, device) != cudaSuccess) {
        snprintf(why, n, "cannot read the GPU's properties (%s)", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    if (p.major < 8) {
        snprintf(why, n, "GPU %d, %s, has compute capability %d.%d: the CUDA backend needs 8.0 or newer (Ampere, "
                 "Ada, Hopper, Blackwell: bf16 tensor cores)", device, p.name, p.major, p.minor);
        return -1;
    }
    /* the first call that needs the GPU's context and this module's code */
    cudaFuncAttributes attributes;
    const cudaError_t probe = cudaFuncGetAttributes(&attributes, code_probe);
    if (probe == cudaSuccess) return 0;
    (void)cudaGetLastError();
    if (probe == cudaErrorNoKernelImageForDevice || probe == cudaErrorInvalidDeviceFunction)
        snprintf(why, n, "GPU %d, %s (sm_%d%d), has no code in this library (%s): it holds sm_80 and sm_90 machine "
                 "code, and compute_90 PTX for newer GPUs; build for this one: make GPU=cuda CUDA_ARCHS=\"-gencode "
                 "arch=compute_%d%d,code=sm_%d%d\"", device, p.name, p.major, p.minor, cudaGetErrorString(probe),
                 p.major, p.minor, p.major, p.minor);
    else if (probe == cudaErrorUnsupportedPtxVersion || probe == cudaErrorInvalidPtx)
        snprintf(why, n, "GPU %d, %s (sm_%d%d), runs this library only through its PTX, which the driver (CUDA %s) "
                 "is older than (the library's CUDA: %s; %s): build with the machine's CUDA (NVCC= or CUDA_HOME=), "
                 "for this GPU (CUDA_ARCHS=\"-gencode arch=compute_%d%d,code=sm_%d%d\"), or update the driver", device,
                 p.name, p.major, p.minor, dv, rv, cudaGetErrorString(probe), p.major, p.minor, p.major, p.minor);
    else
        snprintf(why, n, "GPU %d, %s (sm_%d%d), cannot start (%s): nvidia-smi shows whether it is busy, full or "
                 "in an exclusive compute mode", device, p.name, p.major, p.minor, cudaGetErrorString(probe));
    return -1;
}

/* Makes GPU `ordinal` this process's, before anything is allocated (backend.c: the launcher's
 * local rank, so that a node's processes take its GPUs in turn). 0, or -1 if it cannot. */
extern "C" int k_cuda_use_device(int ordinal) {
    if (cudaSetDevice(ordinal) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return 0;
}

/* A buffer per slot, grown (never shrunk) to the largest size asked of it. */
static void *grow(void **p, size_t *cap, size_t bytes) {
    if (bytes > *cap) {
        if (*p) CUDA_CHECK(cudaFree(*p));
        *cap = bytes + bytes / 2 + 256;
        cuda_malloc(p, *cap);
    }
    return *p;
}

/* cuda_stage: each slot keeps a device buffer and a ring of STAGE_RING pinned host buffers. The
 * host array is copied into the next pinned buffer and from there to the device buffer with
 * cudaMemcpyAsync on the default stream: the host goes on at once (a copy from pageable memory
 * would wait for the GPU to go idle). Stream order keeps the device buffer safe (the next copy
 * into it runs after the kernels queued before it); a pinned buffer is reused only after its
 * event says its last copy is done, so the host waits only when it is STAGE_RING stagings of a
 * slot ahead of the GPU. An array the same as the slot's last one is not copied again: the
 * device buffer holds it at that point of the stream (kernels only read staged arrays). */
enum { STAGE_RING = 8 };
typedef struct {
    void *device;
    size_t device_cap;
    void *pinned[STAGE_RING];
    size_t pinned_cap[STAGE_RING];
    cudaEvent_t copied[STAGE_RING];   /* recorded after the copy out of pinned[r] */
    int next;                         /* the ring buffer to use next */
    int last;                         /* the ring buffer of the last copy, -1 before any */
    size_t last_bytes;
} StageSlot;

const void *cuda_stage(int slot, const void *host, size_t bytes) {
    static StageSlot slots[CUDA_STAGE_SLOTS];
    static bool ready = false;
    if (!ready) {
        for (int s = 0; s < CUDA_STAGE_SLOTS; s++) slots[s].last = -1;
        ready = true;
    }
    if (!host) return NULL;
    StageSlot *s = &slots[slot];
    if (bytes > s->device_cap) s->last = -1;   /* a new device buffer holds nothing yet */
    void *d = grow(&s->device, &s->device_cap, bytes ? bytes : 1);   /* cudaFree waits for its readers */
    if (!bytes) return d;
    if (s->last >= 0 && s->last_bytes == bytes && memcmp(s->pinned[s->last], host, bytes) == 0) return d;
    const int r = s->next;
    s->next = (r + 1) % STAGE_RING;
    if (!s->copied[r]) CUDA_CHECK(cudaEventCreateWithFlags(&s->copied[r], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventSynchronize(s->copied[r]));   /* the last copy out of pinned[r] is done */
    if (bytes > s->pinned_cap[r]) {
        if (s->pinned[r]) CUDA_CHECK(cudaFreeHost(s->pinned[r]));
        s->pinned_cap[r] = bytes + bytes / 2 + 256;
        CUDA_CHECK(cudaMallocHost(&s->pinned[r], s->pinned_cap[r]));
    }
    memcpy(s->pinned[r], host, bytes);   /* the caller may reuse its array at once */
    CUDA_CHECK(cudaMemcpyAsync(d, s->pinned[r], bytes, cudaMemcpyHostToDevice, 0));
    CUDA_CHECK(cudaEventRecord(s->copied[r], 0));
    s->last = r, s->last_bytes = bytes;
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

/* Notes for the kernel profile (kernels/backend.h): which paths the products took. */
extern "C" void k_cuda_notes(char *out, size_t n) { cuda_lt_notes(out, n); }

extern "C" void k_wait(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

/* Waits for every queued kernel and copy (the kernel profile, kernels/backend.h). */
extern "C" void k_cuda_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

/* The kernel profile on the GPU (kernels/backend.h): a pair of events around each profiled
 * call, recorded on the default stream without waiting, so the pipeline runs as it does
 * unprofiled; k_cuda_profile_collect waits once and adds each pair's elapsed time to its
 * kernel's total. A pair's time is its kernels' time on the GPU plus any gap in which the GPU
 * waited for the host to launch them (a host-bound stretch shows up in the calls it delays). */
typedef struct {
    cudaEvent_t begin, end;
    int id;
} ProfilePair;
static ProfilePair *profile_pairs;
static int profile_used, profile_cap;

extern "C" void k_cuda_profile_collect(double *seconds, int count) {
    if (profile_used) CUDA_CHECK(cudaEventSynchronize(profile_pairs[profile_used - 1].end));
    for (int i = 0; i < profile_used; i++) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, profile_pairs[i].begin, profile_pairs[i].end));
        if (profile_pairs[i].id >= 0 && profile_pairs[i].id < count) seconds[profile_pairs[i].id] += 1e-3 * ms;
    }
    profile_used = 0;
}

/* Before a profiled call: its begin event (the pool grows; events are made once and reused). */
extern "C" void k_cuda_profile_begin(int id) {
    if (profile_used == profile_cap) {
        const int cap = profile_cap ? 2 * profile_cap : 1024;
        ProfilePair *p = (ProfilePair *)realloc(profile_pairs, sizeof *p * (size_t)cap);
        if (!p) {
            fprintf(stderr, "bert: out of host memory for the kernel profile\n");
            exit(1);
        }
        for (int i = profile_cap; i < cap; i++) {
            CUDA_CHECK(cudaEventCreate(&p[i].begin));
            CUDA_CHECK(cudaEventCreate(&p[i].end));
        }
        profile_pairs = p, profile_cap = cap;
    }
    profile_pairs[profile_used].id = id;
    CUDA_CHECK(cudaEventRecord(profile_pairs[profile_used].begin, 0));
}

/* After it: its end event. */
extern "C" void k_cuda_profile_end(void) {
    CUDA_CHECK(cudaEventRecord(profile_pairs[profile_used].end, 0));
    profile_used++;
}
