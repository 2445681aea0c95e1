/* NCCL for the host emulator: the calls collectives.cu makes (through dlopen: BERT_NCCL_LIB=
 * build-emu/libnccl_emu.so), done by MPI on the buffers, which are host memory under the
 * emulator. Each call completes before it returns, in the order the process makes them: every
 * process makes the same collectives in the same order, so this is one of the orders NCCL's
 * asynchronous ones may take (and what the kernels queued behind one on its stream see: the
 * emulator runs those at their launch, after it). The group is MPI_COMM_WORLD, which must
 * match the rank and size the caller gives; the unique id must be the same bytes on every
 * rank (it travels by the caller's MPI broadcast). A group of one in a process without MPI
 * (tests/cuda/test_cuda_collectives.c) needs none: its sums are its own buffers. A 16-bit sum adds two values in fp32 and
 * rounds once, as NCCL's reduction of bf16/fp16 does. A process that dies or hangs is not
 * seen (no asynchronous error): MPI blocks. */
#define OMPI_SKIP_MPICXX 1   /* the C API from C++, without OpenMPI's C++ bindings */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_runtime.h"
#include "kernels/cuda/half_bits.cuh"

typedef int Result;
enum { SUCCESS = 0, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };
enum { FLOAT16 = 6, FLOAT32 = 7, BFLOAT16 = 9 };
struct Comm { int rank, size; bool mpi; };
struct UniqueId { char internal[128]; };
static const char MAGIC[] = "bert.c emulated NCCL";

static void sum_halves(void *in, void *inout, int *len, MPI_Datatype *type, bool fp16) {
    const uint16_t *a = (const uint16_t *)in;
    uint16_t *b = (uint16_t *)inout;
    for (int i = 0; i < *len; i++)
        b[i] = fp16 ? fp16_from_float_bits(float_from_fp16_bits(a[i]) + float_from_fp16_bits(b[i]))
                    : bf16_from_float_bits(float_from_bf16_bits(a[i]) + float_from_bf16_bits(b[i]));
}
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type) { sum_halves(in, inout, len, type, false); }
static void sum_fp16(void *in, void *inout, int *len, MPI_Datatype *type) { sum_halves(in, inout, len, type, true); }

/* The MPI type and sum of an NCCL type; false for one collectives.cu does not use. */
static bool mpi_of(int type, MPI_Datatype *t, MPI_Op *op, size_t *bytes) {
    static MPI_Op bf16_sum = MPI_OP_NULL, fp16_sum = MPI_OP_NULL;
    int ready = 0;
    MPI_Initialized(&ready);
    if (ready && bf16_sum == MPI_OP_NULL) {
        MPI_Op_create(sum_bf16, 1, &bf16_sum);
        MPI_Op_create(sum_fp16, 1, &fp16_sum);
    }
    switch (type) {
    case FLOAT32: *t = MPI_FLOAT, *op = MPI_SUM, *bytes = 4; return true;
    case BFLOAT16: *t = MPI_UINT16_T, *op = bf16_sum, *bytes = 2; return true;
    case FLOAT16: *t = MPI_UINT16_T, *op = fp16_sum, *bytes = 2; return true;
    default: return false;
    }
}

/* MPI counts are ints: a larger collective goes in pieces */
static const size_t PIECE = (size_t)1 << 30;

extern "C" {
Result ncclGetVersion(int *version) { *version = 22000; return SUCCESS; }
const char *ncclGetErrorString(Result r) { return r == SUCCESS ? "no error" : "emulated NCCL: invalid argument or usage"; }

Result ncclGetUniqueId(UniqueId *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "%s %ld", MAGIC, (long)getpid());
    return SUCCESS;
}

Result ncclCommInitRank(Comm **comm, int nranks, UniqueId id, int rank) {
    int ready = 0, world_rank = -1, world_size = 0;
    MPI_Initialized(&ready);
    if (!ready && nranks == 1 && rank == 0 && !strncmp(id.internal, MAGIC, strlen(MAGIC))) {
        *comm = new Comm{0, 1, false};
        return SUCCESS;
    }
    if (!ready) { fprintf(stderr, "emulated NCCL: MPI is not initialised\n"); return INVALID_USAGE; }
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (rank != world_rank || nranks != world_size) {
        fprintf(stderr, "emulated NCCL: rank %d of %d asked for, MPI has %d of %d\n", rank, nranks, world_rank, world_size);
        return INVALID_ARGUMENT;
    }
    UniqueId first = id;
    MPI_Bcast(&first, (int)sizeof first, MPI_BYTE, 0, MPI_COMM_WORLD);
    int same = strncmp(id.internal, MAGIC, strlen(MAGIC)) == 0 && memcmp(&first, &id, sizeof id) == 0, all = 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all) { fprintf(stderr, "emulated NCCL: the ranks were given different unique ids\n"); return INVALID_ARGUMENT; }
    *comm = new Comm{rank, nranks, true};
    return SUCCESS;
}

Result ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, Comm *comm, cudaStream_t) {
    MPI_Datatype t;
    MPI_Op o;
    size_t bytes;
    if (!comm || op != 0 || !mpi_of(type, &t, &o, &bytes)) return INVALID_ARGUMENT;
    for (size_t at = 0; at < count; at += PIECE) {
        const int n = (int)(count - at < PIECE ? count - at : PIECE);
        char *r = (char *)recv + at * bytes;
        const char *s = (const char *)send + at * bytes;
        if (!comm->mpi) { memmove(r, s, (size_t)n * bytes); continue; }
        MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, n, t, o, MPI_COMM_WORLD);
    }
    return SUCCESS;
}

Result ncclReduce(const void *send, void *recv, size_t count, int type, int op, int root, Comm *comm, cudaStream_t) {
    MPI_Datatype t;
    MPI_Op o;
    size_t bytes;
    if (!comm || op != 0 || root < 0 || root >= comm->size || !mpi_of(type, &t, &o, &bytes)) return INVALID_ARGUMENT;
    for (size_t at = 0; at < count; at += PIECE) {
        const int n = (int)(count - at < PIECE ? count - at : PIECE);
        char *r = (char *)recv + at * bytes;
        const char *s = (const char *)send + at * bytes;
        if (!comm->mpi) memmove(r, s, (size_t)n * bytes);
        else if (comm->rank == root) MPI_Reduce(s == r ? MPI_IN_PLACE : s, r, n, t, o, root, MPI_COMM_WORLD);
        else MPI_Reduce(s, NULL, n, t, o, root, MPI_COMM_WORLD);
    }
    return SUCCESS;
}

Result ncclBroadcast(const void *send, void *recv, size_t count, int type, int root, Comm *comm, cudaStream_t) {
    MPI_Datatype t;
    MPI_Op o;
    size_t bytes;
    if (!comm || root < 0 || root >= comm->size || !mpi_of(type, &t, &o, &bytes)) return INVALID_ARGUMENT;
    if (comm->rank == root && send != recv) memmove(recv, send, count * bytes);
    for (size_t at = 0; at < count && comm->mpi; at += PIECE) {
        const int n = (int)(count - at < PIECE ? count - at : PIECE);
        MPI_Bcast((char *)recv + at * bytes, n, t, root, MPI_COMM_WORLD);
    }
    return SUCCESS;
}

Result ncclGroupStart(void) { return SUCCESS; }
Result ncclGroupEnd(void) { return SUCCESS; }
Result ncclCommDestroy(Comm *comm) { delete comm; return SUCCESS; }
Result ncclCommAbort(Comm *comm) { delete comm; return SUCCESS; }
Result ncclCommGetAsyncError(Comm *comm, Result *r) { *r = SUCCESS; return comm ? SUCCESS : INVALID_ARGUMENT; }
}
