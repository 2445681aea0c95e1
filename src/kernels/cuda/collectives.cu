/* The CUDA backend's collectives (kernels.h): NCCL on device memory, for data parallelism
 * across GPUs, one process per GPU.
 *
 * NCCL is opened with dlopen when a run first asks for it ($BERT_NCCL_LIB, else libnccl.so.2),
 * so the library builds without NCCL and loads where it is absent; only a multi-process run
 * needs it. Its ABI is declared here (the few types and constants of nccl.h 2.x; checked
 * against nccl.h at compile time where that header is on the include path).
 *
 * The collectives run on a stream of their own: each waits for the default stream's position
 * when it was asked (an event), so a gradient bucket starts as soon as the backward has written
 * it and moves while the backward goes on below; k_collective_test, once the bucket's event has
 * passed, makes the default stream wait for it, so the kernels called after it see the sums.
 * A 16-bit wire converts on that stream too (the CPU's bits: half_bits.cuh), in a buffer from
 * the stream-ordered allocator, freed on the stream when the sum has come back. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/half_bits.cuh"

extern "C" {
#include "kernels/kernels.h"
}

/* ---- NCCL's ABI (nccl.h 2.x) ---- */
typedef struct NcclCommOpaque *NcclComm;
typedef struct { char internal[128]; } NcclUniqueId;
typedef int NcclResult;
enum { NCCL_SUCCESS = 0, NCCL_INVALID_USAGE = 5, NCCL_IN_PROGRESS = 7 };
enum { NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7, NCCL_BFLOAT16 = 9 };
enum { NCCL_SUM = 0 };
#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
static_assert(sizeof(NcclUniqueId) == sizeof(ncclUniqueId), "ncclUniqueId's size");
static_assert(NCCL_SUCCESS == (int)ncclSuccess && NCCL_INVALID_USAGE == (int)ncclInvalidUsage &&
              NCCL_IN_PROGRESS == (int)ncclInProgress, "ncclResult_t");
static_assert(NCCL_FLOAT16 == (int)ncclFloat16 && NCCL_FLOAT32 == (int)ncclFloat32 && NCCL_BFLOAT16 == (int)ncclBfloat16,
              "ncclDataType_t");
static_assert(NCCL_SUM == (int)ncclSum, "ncclRedOp_t");
static_assert(sizeof(ncclDataType_t) == sizeof(int) && sizeof(ncclRedOp_t) == sizeof(int), "enums are ints");
#endif
#endif

static struct {
    void *lib;
    NcclResult (*get_unique_id)(NcclUniqueId *id);
    NcclResult (*comm_init_rank)(NcclComm *comm, int nranks, NcclUniqueId id, int rank);
    NcclResult (*all_reduce)(const void *send, void *recv, size_t count, int type, int op, NcclComm comm,
                             cudaStream_t stream);
    NcclResult (*reduce)(const void *send, void *recv, size_t count, int type, int op, int root, NcclComm comm,
                         cudaStream_t stream);
    NcclResult (*broadcast)(const void *send, void *recv, size_t count, int type, int root, NcclComm comm,
                            cudaStream_t stream);
    NcclResult (*group_start)(void);
    NcclResult (*group_end)(void);
    NcclResult (*comm_destroy)(NcclComm comm);
    NcclResult (*comm_abort)(NcclComm comm);
    NcclResult (*comm_get_async_error)(NcclComm comm, NcclResult *result);
    const char *(*get_error_string)(NcclResult result);
    NcclResult (*get_version)(int *version);
} nccl;

static bool load_nccl(char *err, size_t errlen) {
    if (nccl.lib) return true;
    const char *env = getenv("BERT_NCCL_LIB");
    const char *path = env && *env ? env : "libnccl.so.2";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "cannot load NCCL (%s): install it (libnccl2, or PyTorch's nvidia-nccl wheel) and put "
                 "its folder on LD_LIBRARY_PATH, or set BERT_NCCL_LIB to libnccl.so.2's path", dlerror());
        return false;
    }
    struct { void **fn; const char *name; } table[] = {
        {(void **)&nccl.get_unique_id, "ncclGetUniqueId"},       {(void **)&nccl.comm_init_rank, "ncclCommInitRank"},
        {(void **)&nccl.all_reduce, "ncclAllReduce"},            {(void **)&nccl.reduce, "ncclReduce"},
        {(void **)&nccl.broadcast, "ncclBroadcast"},             {(void **)&nccl.group_start, "ncclGroupStart"},
        {(void **)&nccl.group_end, "ncclGroupEnd"},              {(void **)&nccl.comm_destroy, "ncclCommDestroy"},
        {(void **)&nccl.comm_abort, "ncclCommAbort"},            {(void **)&nccl.comm_get_async_error, "ncclCommGetAsyncError"},
        {(void **)&nccl.get_error_string, "ncclGetErrorString"}, {(void **)&nccl.get_version, "ncclGetVersion"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!(*table[i].fn = dlsym(lib, table[i].name))) {
            snprintf(err, errlen, "%s lacks %s (NCCL 2.10 or later is needed)", path, table[i].name);
            dlclose(lib);
            memset(&nccl, 0, sizeof nccl);
            return false;
        }
    int version = 0;
    if (nccl.get_version(&version) != NCCL_SUCCESS || version < 21000) {   /* ncclBfloat16: 2.10 */
        snprintf(err, errlen, "%s is NCCL %d; bert.c needs 2.10 or later (bf16 sums)", path, version);
        dlclose(lib);
        memset(&nccl, 0, sizeof nccl);
        return false;
    }
    nccl.lib = lib;
    return true;
}

/* An NCCL call that queues work: its failure here (bad arguments, a broken transport seen at
 * once) is not recoverable mid-step, as a CUDA error is not. */
#define NCCL_CHECK(call)                                                                               \
    do {                                                                                               \
        const NcclResult nccl_check_r_ = (call);                                                       \
        if (nccl_check_r_ != NCCL_SUCCESS && nccl_check_r_ != NCCL_IN_PROGRESS) {                      \
            fprintf(stderr, "bert: NCCL: %s at %s:%d (%s)\n", nccl.get_error_string(nccl_check_r_), __FILE__, \
                    __LINE__, #call);                                                                  \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

/* ---- the group and its tickets ---- */

static NcclComm group;
static int group_rank, group_size;
static cudaStream_t stream;    /* the collectives' own (non-blocking: no implicit wait on the default stream) */
static cudaEvent_t asked;      /* the default stream's position when a collective was asked */

typedef struct {
    cudaEvent_t done;          /* recorded on `stream` after the collective (and its conversion back) */
    bool busy;
} Ticket;
static Ticket *tickets;
static int n_tickets;

extern "C" size_t k_collectives_id_bytes(void) { return sizeof(NcclUniqueId); }

extern "C" bool k_collectives_new_id(void *id, char *err, size_t errlen) {
    if (!load_nccl(err, errlen)) return false;
    NcclUniqueId u;
    const NcclResult r = nccl.get_unique_id(&u);
    if (r != NCCL_SUCCESS) {
        snprintf(err, errlen, "ncclGetUniqueId: %s", nccl.get_error_string(r));
        return false;
    }
    memcpy(id, &u, sizeof u);
    return true;
}

extern "C" bool k_collectives_open(const void *id, int rank, int size, char *err, size_t errlen) {
    if (group) {
        snprintf(err, errlen, "the GPU collectives are open already");
        return false;
    }
    if (!load_nccl(err, errlen)) return false;
    NcclUniqueId u;
    memcpy(&u, id, sizeof u);
    const NcclResult r = nccl.comm_init_rank(&group, size, u, rank);
    if (r != NCCL_SUCCESS) {
        int version = 0;
        nccl.get_version(&version);
        int device = -1, devices = 0;
        cudaGetDevice(&device), cudaGetDeviceCount(&devices);
        /* the usual cause of "invalid usage": more processes on a node than GPUs (NCCL refuses two
         * processes on one GPU; bert.c gives local rank r GPU r modulo those visible) */
        snprintf(err, errlen, "ncclCommInitRank (rank %d of %d, NCCL %d, this process on GPU %d of the %d it sees): "
                 "%s%s", rank, size, version, device, devices, nccl.get_error_string(r),
                 r == NCCL_INVALID_USAGE ? "; two processes on one GPU? one process per GPU (NCCL_DEBUG=WARN says more)"
                                         : "");
        group = NULL;
        return false;
    }
    group_rank = rank, group_size = size;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&asked, cudaEventDisableTiming));
    return true;
}

extern "C" void k_collectives_close(void) {
    if (!group) return;
    CUDA_CHECK(cudaStreamSynchronize(stream));
    nccl.comm_destroy(group);
    group = NULL;
    for (int i = 0; i < n_tickets; i++) CUDA_CHECK(cudaEventDestroy(tickets[i].done));
    free(tickets), tickets = NULL, n_tickets = 0;
    CUDA_CHECK(cudaEventDestroy(asked));
    CUDA_CHECK(cudaStreamDestroy(stream));
}

extern "C" void k_collectives_abort(void) {
    if (group) nccl.comm_abort(group);
    group = NULL;   /* the stream and events are left: they may be stuck behind the aborted work */
}

static int new_ticket(void) {
    if (!group) {
        fprintf(stderr, "bert: a GPU collective asked for before k_collectives_open\n");
        exit(1);
    }
    int t = 0;
    while (t < n_tickets && tickets[t].busy) t++;
    if (t == n_tickets) {
        tickets = (Ticket *)realloc(tickets, sizeof(Ticket) * (size_t)(n_tickets + 1));
        if (!tickets) { fprintf(stderr, "bert: out of memory\n"); exit(1); }
        CUDA_CHECK(cudaEventCreateWithFlags(&tickets[t].done, cudaEventDisableTiming));
        n_tickets++;
    }
    tickets[t].busy = true;
    /* after everything asked of the default stream so far */
    CUDA_CHECK(cudaEventRecord(asked, 0));
    CUDA_CHECK(cudaStreamWaitEvent(stream, asked, 0));
    return t;
}

static int queued(int t) {
    CUDA_CHECK(cudaEventRecord(tickets[t].done, stream));
    return t;
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)

__global__ static void to_wire(uint16_t *w, const float *x, size_t n, bool fp16) {
    GRID_STRIDE(i, n) w[i] = fp16 ? fp16_from_float_bits(x[i]) : bf16_from_float_bits(x[i]);
}
__global__ static void from_wire(float *x, const uint16_t *w, size_t n, bool fp16) {
    GRID_STRIDE(i, n) x[i] = fp16 ? float_from_fp16_bits(w[i]) : float_from_bf16_bits(w[i]);
}

extern "C" int k_collective_sum(float *buf, size_t count, int wire, int root) {
    const int t = new_ticket();
    if (count == 0) return queued(t);
    const bool half = wire == HALF_BF16 || wire == HALF_BF16_EMULATED || wire == HALF_FP16;
    const bool fp16 = wire == HALF_FP16, here = root < 0 || root == group_rank;
    void *data = buf;
    int type = NCCL_FLOAT32;
    if (half) {
        CUDA_CHECK(cudaMallocAsync(&data, count * sizeof(uint16_t), stream));
        to_wire<<<cuda_blocks(count), CUDA_THREADS, 0, stream>>>((uint16_t *)data, buf, count, fp16);
        CUDA_LAUNCHED();
        type = fp16 ? NCCL_FLOAT16 : NCCL_BFLOAT16;
    }
    if (root < 0) NCCL_CHECK(nccl.all_reduce(data, data, count, type, NCCL_SUM, group, stream));
    else NCCL_CHECK(nccl.reduce(data, data, count, type, NCCL_SUM, root, group, stream));
    if (half) {
        if (here) {
            from_wire<<<cuda_blocks(count), CUDA_THREADS, 0, stream>>>(buf, (const uint16_t *)data, count, fp16);
            CUDA_LAUNCHED();
        }
        CUDA_CHECK(cudaFreeAsync(data, stream));
    }
    return queued(t);
}

extern "C" int k_collective_share_parts(float *x, const size_t *lo) {
    const int t = new_ticket();
    NCCL_CHECK(nccl.group_start());
    for (int r = 0; r < group_size; r++)
        if (lo[r + 1] > lo[r])
            NCCL_CHECK(nccl.broadcast(x + lo[r], x + lo[r], lo[r + 1] - lo[r], NCCL_FLOAT32, r, group, stream));
    NCCL_CHECK(nccl.group_end());
    return queued(t);
}

extern "C" int k_collective_test(int t, char *err, size_t errlen) {
    if (t < 0 || t >= n_tickets || !tickets[t].busy) return 1;
    const cudaError_t e = cudaEventQuery(tickets[t].done);
    if (e == cudaSuccess) {
        /* the kernels asked for from now on see the result */
        CUDA_CHECK(cudaStreamWaitEvent(0, tickets[t].done, 0));
        tickets[t].busy = false;
        return 1;
    }
    if (e != cudaErrorNotReady) {
        snprintf(err, errlen, "CUDA, waiting for a collective: %s", cudaGetErrorString(e));
        return -1;
    }
    /* "not ready" is recorded as the thread's last error: cleared, or the next launch's check
     * (CUDA_LAUNCHED) would take it for a failure */
    (void)cudaGetLastError();
    NcclResult r = NCCL_SUCCESS;
    if (group && nccl.comm_get_async_error(group, &r) == NCCL_SUCCESS && r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS) {
        snprintf(err, errlen, "NCCL: %s (another process died, or the network between them failed)",
                 nccl.get_error_string(r));
        return -1;
    }
    return 0;
}
