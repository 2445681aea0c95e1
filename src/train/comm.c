/* MPI for data parallelism, with a deadline on every wait: see comm.h. */
#include "train/comm.h"

#include <immintrin.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/launcher.h"
#include "kernels/kernels.h"

struct Comm {
    int rank, size;
    double timeout;
    bool mpi;                 /* MPI was initialised (started by an MPI launcher) */
    bool backend;             /* the float collectives go through the backend's (comm_use_backend_collectives) */
    MPI_Op sum_fp16, sum_bf16;
};

struct CommRequest {
    MPI_Request req;
    float *dst;               /* the caller's floats: the 16-bit result is written back here */
    uint16_t *wire;           /* 16-bit staging copy (NULL for fp32) */
    size_t count;
    enum CommWire kind;
    bool result_here;         /* this rank receives the sum */
    int ticket;               /* the backend's collective (Comm.backend) */
};

/* ---- 16-bit words: IEEE half (F16C instructions) and bfloat16 (round to nearest even) ----
 * The wire is written and read by the kernels' conversions (k_to_half, k_from_half: the same
 * bits as these, NaN included); these are the reduction operators' own, on MPI's buffers. */

static inline uint16_t to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);   /* NaN stays a (quiet) NaN */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static inline float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static inline uint16_t to_fp16(float x) { return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT); }
static inline float from_fp16(uint16_t h) { return _cvtsh_ss(h); }

/* fp16 eight at a time (F16C: every AVX2 CPU), the same rounding as to_fp16 / from_fp16. */
static inline __m256 from_fp16_8(const uint16_t *h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)); }

/* The kernels' name for a 16-bit wire's format. */
static HalfMode wire_format(enum CommWire kind) { return kind == COMM_WIRE_BF16 ? HALF_BF16 : HALF_FP16; }

/* MPI reduction operators on 16-bit words: each pairwise sum in float, rounded back. */
static void sum_fp16_op(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    const int n8 = *len / 8 * 8;
    for (int i = 0; i < n8; i += 8) {
        const __m256 s = _mm256_add_ps(from_fp16_8(a + i), from_fp16_8(b + i));
        _mm_storeu_si128((__m128i *)(b + i), _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT));
    }
    for (int i = n8; i < *len; i++) b[i] = to_fp16(from_fp16(a[i]) + from_fp16(b[i]));
}
static void sum_bf16_op(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
#pragma omp simd
    for (int i = 0; i < *len; i++) b[i] = to_bf16(from_bf16(a[i]) + from_bf16(b[i]));
}

/* ---- the group ---- */

/* MPI moves a non-blocking collective only when a process calls into it, and bert.c calls at
 * each finished layer: an algorithm that cuts a bucket into many small rounds (OpenMPI
 * libnbc's defaults: recursive doubling for all-reduce, a segmented chain for reduce) then
 * advances one round per call. Measured with `bert bench_allreduce` on 2 processes here:
 * ring all-reduce 2.1 GB/s against 1.2 by default, binomial reduce 1.9 against 0.4.
 * Only where the user chose nothing (mpirun --mca or OMPI_MCA_* set it first); other MPIs
 * ignore these names. Binomial moves log2(P) times the bytes, so only up to 4 processes. */
static void prefer_unsegmented_collectives(int size) {
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);   /* ring */
    if (size <= 4) setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "2", 0);   /* binomial */
}

int comm_open(Comm **out, double timeout_seconds, BertError *err) {
    *out = NULL;
    if (!(timeout_seconds > 0)) return bert_fail(err, "--comm_timeout must be > 0 seconds");
    Comm *c = xcalloc(1, sizeof *c);
    c->timeout = timeout_seconds, c->size = 1;
    int rank, size;
    launcher_rank(&rank, &size);
    if (size > 1) {   /* started by an MPI launcher: the job's processes */
        prefer_unsegmented_collectives(size);
        int provided = 0, already = 0;
        MPI_Initialized(&already);
        if (!already && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(c);
            return bert_fail(err, "MPI_Init_thread failed (started as rank %d of %d)", rank, size);
        }
        c->mpi = true;
        MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->size);
        if (c->size != size || c->rank != rank) {   /* each process would train alone on all the data */
            const int got_rank = c->rank, got_size = c->size;
            MPI_Finalize();
            free(c);
            return bert_fail(err, "the launcher says rank %d of %d but MPI made this process rank %d of %d: MPI was "
                                  "not started by this job's launcher (under Slurm: srun --mpi=pmix)", rank, size,
                             got_rank, got_size);
        }
        MPI_Op_create(sum_fp16_op, 1, &c->sum_fp16);
        MPI_Op_create(sum_bf16_op, 1, &c->sum_bf16);
    }
    *out = c;
    return 0;
}

int comm_use_backend_collectives(Comm *c, BertError *err) {
    const size_t bytes = k_collectives_id_bytes();
    if (bytes == 0 || c->backend) return 0;
    unsigned char *id = xcalloc(1, bytes), *all = xcalloc((size_t)c->size, bytes);
    char why[256] = "";
    /* process 0 makes the group's id; every process learns whether that worked, then gets it */
    int failed = c->rank == 0 && !k_collectives_new_id(id, why, sizeof why);
    comm_max_ints(c, &failed, 1, "making the GPU collectives' id");
    if (!failed) {
        comm_allgather(c, id, all, bytes, "sending the GPU collectives' id");
        failed = !k_collectives_open(all, c->rank, c->size, why, sizeof why);
        if (failed && c->size > 1) {   /* the others wait inside NCCL's init, which has no deadline: end the job */
            char msg[400];
            snprintf(msg, sizeof msg, "the GPU collectives (NCCL) could not be opened: %s", why);
            free(id), free(all);
            comm_abort(c, 1, msg);
        }
        int any = failed;
        comm_max_ints(c, &any, 1, "opening the GPU collectives");
        if (any && !failed) snprintf(why, sizeof why, "another process could not open them");
        if (any && !failed) k_collectives_close();
        failed = any;
    } else if (c->rank != 0)
        snprintf(why, sizeof why, "process 0 could not make their id");
    free(id), free(all);
    if (failed) return bert_fail(err, "the GPU collectives (NCCL) for %d process%s: %s", c->size, c->size > 1 ? "es" : "", why);
    c->backend = true;
    return 0;
}

bool comm_on_backend(const Comm *c) { return c->backend; }

void comm_close(Comm *c) {
    if (!c) return;
    if (c->backend) k_collectives_close();
    if (c->mpi) {
        MPI_Op_free(&c->sum_fp16), MPI_Op_free(&c->sum_bf16);
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
    }
    free(c);
}

int comm_rank(const Comm *c) { return c->rank; }
int comm_size(const Comm *c) { return c->size; }
double comm_timeout(const Comm *c) { return c->timeout; }

_Noreturn void comm_abort(Comm *c, int code, const char *msg) {
    fprintf(stderr, "bert: rank %d of %d: %s\n", c->rank, c->size, msg);
    fflush(stderr);
    /* NCCL's own abort may wait for the other processes' (it can hang while they still wait in a
     * collective): with MPI, MPI_Abort ends them all and the GPUs are freed with the processes */
    if (c->backend && !c->mpi) k_collectives_abort();
    if (c->mpi) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

/* Tests r until done; past the deadline, the job ends with a message naming what hung. */
static void wait_with_deadline(Comm *c, MPI_Request *r, const char *what) {
    const double start = now_seconds();
    for (long spins = 0;; spins++) {
        int done = 0;
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (spins > 200) {   /* past a short spin: let the other ranks (maybe on this core) run */
            sched_yield();
            if (now_seconds() - start > c->timeout) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s did not complete within %.0f s (--comm_timeout): another rank has died "
                                          "or hangs; ending the job (resume from the last checkpoint)", what,
                         c->timeout);
                comm_abort(c, 3, msg);
            }
        }
    }
}

/* The same for a collective of the backend's: its failure (a process died) or the deadline
 * ends the job. */
static void wait_ticket(Comm *c, int ticket, const char *what) {
    const double start = now_seconds();
    for (long spins = 0;; spins++) {
        char why[256];
        const int done = k_collective_test(ticket, why, sizeof why);
        if (done == 1) return;
        char msg[512];
        if (done < 0) {
            snprintf(msg, sizeof msg, "%s failed: %s; ending the job (resume from the last checkpoint)", what, why);
            comm_abort(c, 3, msg);
        }
        if (spins > 200) {
            sched_yield();
            if (now_seconds() - start > c->timeout) {
                snprintf(msg, sizeof msg, "%s did not complete within %.0f s (--comm_timeout): another rank has "
                                          "died or hangs; ending the job (resume from the last checkpoint)", what,
                         c->timeout);
                comm_abort(c, 3, msg);
            }
        }
    }
}

static int as_count(Comm *c, size_t n) {
    if (n > (size_t)INT_MAX) comm_abort(c, 2, "a message of more than 2^31 elements (split it)");
    return (int)n;
}

void comm_sum_doubles(Comm *c, double *x, int n, const char *what) {
    if (!c->mpi) return;
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    wait_with_deadline(c, &r, what);
}

void comm_max_ints(Comm *c, int *x, int n, const char *what) {
    if (!c->mpi) return;
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r);
    wait_with_deadline(c, &r, what);
}

void comm_max_doubles(Comm *c, double *x, int n, const char *what) {
    if (!c->mpi) return;
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &r);
    wait_with_deadline(c, &r, what);
}

void comm_allgather(Comm *c, const void *mine, void *all, size_t bytes, const char *what) {
    if (!c->mpi) {
        memcpy(all, mine, bytes);
        return;
    }
    MPI_Request r;
    MPI_Iallgather(mine, as_count(c, bytes), MPI_BYTE, all, as_count(c, bytes), MPI_BYTE, MPI_COMM_WORLD, &r);
    wait_with_deadline(c, &r, what);
}

void comm_alltoallv(Comm *c, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                    size_t item_bytes, const char *what) {
    if (!c->mpi) {
        memcpy(recv, send, send_counts[0] * item_bytes);
        return;
    }
    /* the counts in bytes, whole messages packed one after another */
    int *v = xmalloc(sizeof(int) * 4 * (size_t)c->size);
    int *sc = v, *sd = v + c->size, *rc = v + 2 * c->size, *rd = v + 3 * c->size;
    size_t s_at = 0, r_at = 0;
    for (int r = 0; r < c->size; r++) {
        sc[r] = as_count(c, send_counts[r] * item_bytes), sd[r] = as_count(c, s_at);
        rc[r] = as_count(c, recv_counts[r] * item_bytes), rd[r] = as_count(c, r_at);
        s_at += send_counts[r] * item_bytes, r_at += recv_counts[r] * item_bytes;
    }
    MPI_Request q;
    MPI_Ialltoallv(send, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, MPI_COMM_WORLD, &q);
    wait_with_deadline(c, &q, what);
    free(v);
}

/* counts and displacements of the parts [lo[r], lo[r+1]) */
static void parts(Comm *c, const size_t *lo, int *counts, int *displs) {
    for (int r = 0; r < c->size; r++) counts[r] = as_count(c, lo[r + 1] - lo[r]), displs[r] = as_count(c, lo[r]);
}

void comm_allgather_floats(Comm *c, float *x, const size_t *lo, const char *what) {
    if (c->backend) {
        wait_ticket(c, k_collective_share_parts(x, lo), what);
        return;
    }
    if (!c->mpi) return;
    int *counts = xmalloc(sizeof(int) * 2 * (size_t)c->size), *displs = counts + c->size;
    parts(c, lo, counts, displs);
    MPI_Request r;
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, displs, MPI_FLOAT, MPI_COMM_WORLD, &r);
    wait_with_deadline(c, &r, what);
    free(counts);
}

void comm_gather_floats(Comm *c, const float *mine, float *full, const size_t *lo, int root, const char *what) {
    float *host = NULL;   /* mine on the host, where it is the backend's memory */
    if (c->backend) {
        host = xmalloc(sizeof(float) * (lo[c->rank + 1] - lo[c->rank]) + 1);
        k_download(host, mine, sizeof(float) * (lo[c->rank + 1] - lo[c->rank]));
        mine = host;
    }
    if (c->rank == root) memmove(full + lo[root], mine, sizeof(float) * (lo[root + 1] - lo[root]));
    if (!c->mpi) {
        free(host);
        return;
    }
    int *counts = xmalloc(sizeof(int) * 2 * (size_t)c->size), *displs = counts + c->size;
    parts(c, lo, counts, displs);
    MPI_Request r;
    if (c->rank == root)
        MPI_Igatherv(MPI_IN_PLACE, 0, MPI_FLOAT, full, counts, displs, MPI_FLOAT, root, MPI_COMM_WORLD, &r);
    else
        MPI_Igatherv(mine, counts[c->rank], MPI_FLOAT, NULL, NULL, NULL, MPI_FLOAT, root, MPI_COMM_WORLD, &r);
    wait_with_deadline(c, &r, what);
    free(counts), free(host);
}

/* ---- gradient buckets ---- */

CommRequest *comm_start_sum(Comm *c, float *buf, size_t count, enum CommWire wire, int root) {
    CommRequest *q = xcalloc(1, sizeof *q);
    q->dst = buf, q->count = count, q->kind = wire, q->result_here = root < 0 || root == c->rank;
    if (c->backend) {   /* the backend converts to and from the wire itself */
        q->ticket = k_collective_sum(buf, count, wire == COMM_WIRE_FP32 ? -1 : (int)wire_format(wire), root);
        return q;
    }
    if (!c->mpi) return q;   /* a group of one: the sum is already there */
    const int n = as_count(c, count);
    const bool in_place = q->result_here;
    void *data = buf;
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    if (wire != COMM_WIRE_FP32) {
        q->wire = xmalloc(sizeof(uint16_t) * count);
        k_to_half(wire_format(wire), q->wire, buf, (long)count);
        data = q->wire, type = MPI_UINT16_T, op = wire == COMM_WIRE_FP16 ? c->sum_fp16 : c->sum_bf16;
    }
    if (root < 0) MPI_Iallreduce(MPI_IN_PLACE, data, n, type, op, MPI_COMM_WORLD, &q->req);
    else MPI_Ireduce(in_place ? MPI_IN_PLACE : data, in_place ? data : NULL, n, type, op, root, MPI_COMM_WORLD, &q->req);
    return q;
}

static void finish_request(CommRequest *q) {
    if (q->wire && q->result_here) k_from_half(wire_format(q->kind), q->dst, q->wire, (long)q->count);
    free(q->wire), free(q);
}

int comm_test(Comm *c, CommRequest *q) {
    int done = 1;
    if (c->backend) {
        char why[256], msg[512];
        done = k_collective_test(q->ticket, why, sizeof why);
        if (done < 0) {
            snprintf(msg, sizeof msg, "a gradient bucket's sum failed: %s; ending the job", why);
            comm_abort(c, 3, msg);
        }
    } else if (c->mpi) MPI_Test(&q->req, &done, MPI_STATUS_IGNORE);
    if (done) finish_request(q);
    return done;
}

void comm_wait(Comm *c, CommRequest *q, const char *what) {
    if (c->backend) wait_ticket(c, q->ticket, what);
    else if (c->mpi) wait_with_deadline(c, &q->req, what);
    finish_request(q);
}

void comm_describe(char *out, size_t n) {
#if defined(OMPI_MAJOR_VERSION)
    snprintf(out, n, "Open MPI %d.%d.%d, MPI %d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION,
             MPI_VERSION, MPI_SUBVERSION);
#else
    snprintf(out, n, "MPI %d.%d", MPI_VERSION, MPI_SUBVERSION);
#endif
}
