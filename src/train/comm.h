/* The processes of a data-parallel run: MPI's world communicator, or a group of one.
 *
 * A process started by an MPI launcher (mpirun, srun: core/launcher.h reads its rank from
 * the environment) initialises MPI; any other process is a group of one and makes no MPI
 * call at all, so the same binary runs without mpirun. Only the main thread calls MPI
 * (MPI_THREAD_FUNNELED): OpenMP threads and the loader's thread never do.
 *
 * Every collective here waits with a deadline (--comm_timeout): a rank that died or hangs
 * would otherwise leave the others blocked forever. When the deadline passes, the rank that
 * saw it prints what it was waiting for and ends the whole job (MPI_Abort), so the job
 * stops with a message instead of hanging. MPI's own errors are fatal (its default). */
#ifndef BERT_TRAIN_COMM_H
#define BERT_TRAIN_COMM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"

typedef struct Comm Comm;

/* timeout_seconds > 0: how long any one collective may wait for the other ranks. */
int comm_open(Comm **out, double timeout_seconds, BertError *err);
/* The float buffers of this group's collectives (comm_start_sum, comm_allgather_floats, and
 * comm_gather_floats's `mine`) are from now on the memory of a backend MPI cannot read (a
 * GPU's): they go through the backend's own collectives (kernels.h: NCCL on CUDA), whose group
 * is set up here over MPI. A no-op for a backend without them (the CPU: MPI reads its memory).
 * In a group of one the backend's group has one member too (BERT_DATA_PARALLEL_ALONE: the path
 * checked on one GPU). Every process calls it; an error on any process fails it on every one. */
int comm_use_backend_collectives(Comm *c, BertError *err);
/* Whether it did (the collectives above go through the backend). */
bool comm_on_backend(const Comm *c);
/* MPI_Finalize (after every rank's last collective). */
void comm_close(Comm *c);

/* The MPI this build was compiled against, from mpi.h ("Open MPI 4.1.4, MPI 3.1"): no MPI
 * call, so it is safe in a process not started by mpirun. */
void comm_describe(char *out, size_t n);

int comm_rank(const Comm *c);
int comm_size(const Comm *c);
double comm_timeout(const Comm *c);

/* Ends every rank of the job: prints "bert: rank R of P: msg" and calls MPI_Abort (exit(code)
 * in a group of one). For errors only one rank sees (a bad shard, a full disk). */
_Noreturn void comm_abort(Comm *c, int code, const char *msg);

/* Blocking collectives, each with the deadline; `what` names it in a timeout message. */
void comm_sum_doubles(Comm *c, double *x, int n, const char *what);
void comm_max_ints(Comm *c, int *x, int n, const char *what);
void comm_max_doubles(Comm *c, double *x, int n, const char *what);
/* Every rank's `bytes` bytes, in rank order, into all (size * bytes). */
void comm_allgather(Comm *c, const void *mine, void *all, size_t bytes, const char *what);
/* Each rank sends send_counts[r] items of item_bytes bytes to rank r (send: those to rank 0,
 * then those to rank 1, ...) and receives recv_counts[r] items from rank r into recv, in rank
 * order: MPI_Alltoallv. */
void comm_alltoallv(Comm *c, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                    size_t item_bytes, const char *what);
/* floats [lo[r], lo[r+1]) of x are rank r's; each rank's part sent to every rank (in place). */
void comm_allgather_floats(Comm *c, float *x, const size_t *lo, const char *what);
/* Every rank's part (`mine`, lo[r+1] - lo[r] floats) into full[lo[r] ..] on root (full: NULL
 * on the other ranks). */
void comm_gather_floats(Comm *c, const float *mine, float *full, const size_t *lo, int root, const char *what);

/* Non-blocking requests for the gradient buckets (train/grad_sync.h): an opaque handle. */
typedef struct CommRequest CommRequest;
enum CommWire { COMM_WIRE_FP32, COMM_WIRE_FP16, COMM_WIRE_BF16 };
/* Sum of buf[0..count) over the ranks, into every rank's buf (root < 0) or into root's only.
 * A 16-bit wire sends buf rounded to IEEE half or bfloat16 (half the bytes; each partial sum
 * rounded to the wire's type) and writes the sum back as floats when the request completes;
 * buf must stay untouched until then. */
CommRequest *comm_start_sum(Comm *c, float *buf, size_t count, enum CommWire wire, int root);
/* Drives MPI's progress; 1 when the request is done (and freed), else 0. */
int comm_test(Comm *c, CommRequest *r);
/* Waits for it (with the deadline) and frees it. */
void comm_wait(Comm *c, CommRequest *r, const char *what);

#endif
