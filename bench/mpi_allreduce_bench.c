/* MPI collective timings for the data-parallel scaling model (docs/distributed.md, "Past one machine").
 *
 * Standalone: built with mpicc by bench/run_allreduce_bench.sh, not part of the Makefile's
 * build. Times, on the processes mpirun starts:
 *
 *   - MPI_Allreduce (in place, MPI_SUM, MPI_FLOAT) from 4 B to --max_bytes, plus exactly one
 *     25 MiB bucket (DDP's bucket_cap_mb) and the whole bert-base gradient (--whole_bytes,
 *     110,106,428 fp32 values; a quarter of it when the machine's free memory is short);
 *   - MPI_Reduce_scatter_block (out of place) and MPI_Allgather (in place), the two halves of
 *     an all-reduce that optimizer sharding (ZeRO-1) runs instead of it;
 *   - MPI_Iallreduce of one 25 MiB bucket, posted and waited for, against MPI_Allreduce;
 *   - a simulated backward pass: a fixed amount of arithmetic (a register-resident kernel, no
 *     memory traffic) during which the gradient's buckets become ready one by one (25 MiB each,
 *     the last one the embeddings' 95 MB, as bert-base finishes them), each posted with
 *     MPI_Iallreduce as it is ready and progressed by MPI_Testall every --poll_ms of compute;
 *     the time past the compute alone is the communication the overlap did not hide;
 *   - one core summing one array into another (a[i] += b[i], 25 MiB), the reduction's own
 *     cost, with every rank doing it at once.
 *
 * Each timing is the mean over a batch of back-to-back calls (enough for --target_s), the
 * slowest rank's mean (MPI_MAX), repeated --reps times (round-robin over all sizes and
 * operations); the table shows the fastest and the median repetition. Bandwidths are in GB/s = 1e9 B/s and follow nccl-tests' definitions
 * (nccl-tests/doc/PERFORMANCE.md): algbw = bytes / time; busbw = algbw * 2(P-1)/P for
 * all-reduce and algbw * (P-1)/P for reduce-scatter and all-gather (bytes = the whole
 * vector, input of the reduce-scatter, output of the all-gather), the rate each rank's link
 * carries under the ring algorithm, comparable across P.
 *
 * Fits (weighted least squares, weights 1/t^2, so each size counts by its relative error):
 *   all-reduce       t = 2(P-1) alpha + 2(P-1)/P * n / beta
 *   reduce-scatter   t =  (P-1) alpha +  (P-1)/P * n / beta     (all-gather likewise)
 * once over small messages (n <= 4 KiB: alpha, the per-step latency) and once over the sizes
 * gradient buckets have (n >= 16 MiB, past the 2 MiB L2 and most of a 32 MiB L3: beta, the bus
 * bandwidth; the intercept is printed as the large-message start-up, and is negative when the
 * cache still speeds up the smaller of those sizes).
 *
 * The last line of output is one JSON object with every number (bench/run_allreduce_bench.sh
 * keeps it in bench/results/). */
#define _GNU_SOURCE
#include <mpi.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024.0 * 1024.0)

typedef struct {
    double max_bytes, whole_bytes, bucket_bytes, last_bytes, target_s, compute_s;
    int reps, quick, parts;   /* parts: bit 0 sizes, bit 1 local reduction, bit 2 overlap */
    double poll_ms[8];
    int n_poll;
} Options;

typedef struct {
    const char *op;
    double bytes, t_min, t_med, algbw, busbw;   /* seconds, GB/s (of t_min) */
    int iters;
} Row;

static int rank_, size_;
static Row rows_[128];
static int row_op_[128];
static int n_rows_;

static void die(const char *msg) {
    if (rank_ == 0) fprintf(stderr, "mpi_allreduce_bench: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static void *alloc_floats(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) die("out of memory");
    return p;
}

static void fill(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------------ collectives */

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_IALLREDUCE_WAIT };
static const char *op_names[] = {"allreduce", "reduce_scatter", "allgather", "iallreduce+wait"};

typedef struct {
    float *buf;    /* n floats: all-reduce in place, reduce-scatter input, all-gather output */
    float *shard;  /* n / P floats: reduce-scatter output */
} Buffers;

static void run_once(int op, Buffers *b, size_t n) {
    const size_t per = n / (size_t)size_;
    MPI_Request req;
    switch (op) {
    case OP_ALLREDUCE:
        MPI_Allreduce(MPI_IN_PLACE, b->buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case OP_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(b->buf, b->shard, (int)per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case OP_ALLGATHER:
        MPI_Allgather(MPI_IN_PLACE, (int)per, MPI_FLOAT, b->buf, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case OP_IALLREDUCE_WAIT:
        MPI_Iallreduce(MPI_IN_PLACE, b->buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        break;
    }
}

/* The first call checks the result: every rank's value r+1 (times 0.5) must come back summed. */
static void check_once(int op, Buffers *b, size_t n) {
    const size_t per = n / (size_t)size_;
    const float mine = 0.5f * (float)(rank_ + 1), sum = 0.25f * (float)size_ * (float)(size_ + 1);
    fill(b->buf, n, mine);   /* all-gather in place: this rank's slice is its contribution */
    run_once(op, b, n);
    size_t idx[3] = {0, n / 2, n - 1};
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        size_t i = idx[k];
        float got, want;
        if (op == OP_REDUCE_SCATTER) {
            i = i % per, got = b->shard[i], want = sum;
        } else if (op == OP_ALLGATHER) {   /* slice j holds rank j's value */
            got = b->buf[i], want = 0.5f * (float)(i / per + 1);
        } else {
            got = b->buf[i], want = sum;
        }
        if (fabsf(got - want) > 1e-6f * fabsf(want)) bad = 1;
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s of %zu floats returned a wrong result", op_names[op], n);
        die(msg);
    }
}

/* Mean seconds per call over `iters` back-to-back calls, the slowest rank's. */
static double time_batch(int op, Buffers *b, size_t n, int iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) run_once(op, b, n);
    double t = (MPI_Wtime() - t0) / iters, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static double bus_factor(int op) {
    const double P = size_;
    return op == OP_ALLREDUCE || op == OP_IALLREDUCE_WAIT ? 2.0 * (P - 1) / P : (P - 1) / P;
}

/* Pass 1 (prepare): checks the result, warms up, and picks the batch size (enough calls for
 * --target_s). Pass 2 (time_rows): the repetitions, round-robin over every row, so a burst of
 * other load on the machine spoils one repetition of many rows rather than all of one row's;
 * the fastest repetition is the least disturbed. */
static void prepare(const Options *o, int op, Buffers *b, double bytes) {
    size_t n = (size_t)(bytes / sizeof(float));
    if (op == OP_REDUCE_SCATTER || op == OP_ALLGATHER) n -= n % (size_t)size_;
    if (n == 0) return;
    check_once(op, b, n);                      /* also the warm-up call */
    int k = 1;                                 /* a first estimate, over >= 10 ms of calls, */
    double est = 1e30;                         /* the fastest of three (a hiccup inflates one) */
    for (;;) {
        for (int r = 0; r < 3; r++) est = fmin(est, time_batch(op, b, n, k));
        if (est * k >= 0.01 || k >= 10000) break;
        k *= 10, est = 1e30;
    }
    double want = o->target_s / (est > 1e-7 ? est : 1e-7);
    Row *row = &rows_[n_rows_++];
    row->op = op_names[op], row->bytes = (double)n * sizeof(float);
    row->iters = want < 1 ? 1 : want > 200000 ? 200000 : (int)want;
    row_op_[n_rows_ - 1] = op;
}

static void time_rows(const Options *o, Buffers *b) {
    static double t[128][64];
    int reps = o->reps < 64 ? o->reps : 64;
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n_rows_; i++)
            t[i][r] = time_batch(row_op_[i], b, (size_t)(rows_[i].bytes / sizeof(float)), rows_[i].iters);
    for (int i = 0; i < n_rows_; i++) {
        Row *row = &rows_[i];
        qsort(t[i], (size_t)reps, sizeof t[i][0], cmp_double);
        row->t_min = t[i][0], row->t_med = t[i][reps / 2];
        row->algbw = row->bytes / row->t_min / 1e9, row->busbw = row->algbw * bus_factor(row_op_[i]);
        if (rank_ == 0)
            printf("%-16s %12.0f %10.1f %10.1f %8d %9.3f %9.3f\n", row->op, row->bytes, 1e6 * row->t_min,
                   1e6 * row->t_med, row->iters, row->algbw, row->busbw);
    }
    if (rank_ == 0) fflush(stdout);
}

typedef struct {
    double alpha, beta, intercept;   /* s per step, B/s of bus bandwidth, s */
    int points;
} Fit;

/* Weighted least squares t = a + s * n over the rows of `op` with lo <= bytes <= hi. */
static Fit fit_rows(const char *op, double lo, double hi, double steps, double bus) {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < n_rows_; i++) {
        const Row *r = &rows_[i];
        if (strcmp(r->op, op) || r->bytes < lo || r->bytes > hi) continue;
        double w = 1.0 / (r->t_min * r->t_min), x = r->bytes, y = r->t_min;
        sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y, k++;
    }
    Fit f = {NAN, NAN, NAN, k};
    double det = sw * sxx - sx * sx;
    if (k < 2 || det <= 0) return f;
    double s = (sw * sxy - sx * sy) / det, a = (sy - s * sx) / sw;
    f.intercept = a, f.alpha = a / steps, f.beta = s > 0 ? bus / s : NAN;
    return f;
}

/* ------------------------------------------------------------------ overlap */

/* Register-resident arithmetic standing in for the backward pass's compute: `units` blocks of
 * 8 x 256 dependent multiply-adds. No memory traffic, so it competes with the communication
 * only for the core. */
static volatile float sink_;
static void spin(long units) {
    float a0 = 1, a1 = 2, a2 = 3, a3 = 4, a4 = 5, a5 = 6, a6 = 7, a7 = 8;
    const float m = 0.9999999f, c = 1e-7f;
    for (long u = 0; u < units; u++)
        for (int i = 0; i < 256; i++) {
            a0 = a0 * m + c, a1 = a1 * m + c, a2 = a2 * m + c, a3 = a3 * m + c;
            a4 = a4 * m + c, a5 = a5 * m + c, a6 = a6 * m + c, a7 = a7 * m + c;
        }
    sink_ = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct {
    const char *mode;
    double poll_ms, total_s, compute_s, exposed_s;
} OverlapRow;

static OverlapRow overlap_rows_[16];
static int n_overlap_;
static double units_per_s_;
static int n_buckets_;

/* Runs the simulated backward: compute (units[i] before bucket i is ready), bucket i posted.
 * mode 0: compute only; 1: compute, then a blocking MPI_Allreduce per bucket (no overlap);
 * 2: MPI_Iallreduce per bucket when ready, MPI_Testall every poll_units of compute, Waitall. */
static double backward(int mode, float *grad, const size_t *off, const size_t *len, int nb, const long *units,
                       long poll_units) {
    MPI_Request req[64];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int i = 0; i < nb; i++) {
        long left = units[i];
        while (left > 0) {
            long chunk = mode == 2 && poll_units > 0 && poll_units < left ? poll_units : left;
            spin(chunk);
            left -= chunk;
            if (mode == 2 && poll_units > 0 && i > 0) {
                int done;
                MPI_Testall(i, req, &done, MPI_STATUSES_IGNORE);
            }
        }
        if (mode == 2)
            MPI_Iallreduce(MPI_IN_PLACE, grad + off[i], (int)len[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[i]);
    }
    if (mode == 1)
        for (int i = 0; i < nb; i++)
            MPI_Allreduce(MPI_IN_PLACE, grad + off[i], (int)len[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (mode == 2) MPI_Waitall(nb, req, MPI_STATUSES_IGNORE);
    double t = now() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static void overlap_test(const Options *o, double whole_bytes) {
    /* Buckets in the order the backward finishes them: 25 MiB slices of everything but the
     * embeddings, then the embeddings (finished last, by the input layer's backward). */
    size_t total = (size_t)(whole_bytes / sizeof(float)), last = (size_t)(o->last_bytes / sizeof(float));
    size_t cap = (size_t)(o->bucket_bytes / sizeof(float));
    if (last > total / 2) last = total / 4;   /* a shrunk whole: keep a last bucket in proportion */
    size_t off[64], len[64];
    int nb = 0;
    size_t rest = total - last;
    for (size_t pos = 0; pos < rest && nb < 62; pos += cap) off[nb] = pos, len[nb] = rest - pos < cap ? rest - pos : cap, nb++;
    off[nb] = rest, len[nb] = last, nb++;
    n_buckets_ = nb;
    float *grad = alloc_floats(total);
    fill(grad, total, 1e-3f);

    /* Calibrate the compute kernel with every rank running it at once. */
    long probe = 2000;
    double t = 0;
    while (t < 0.2) {
        probe *= 2;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        spin(probe);
        t = now() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    units_per_s_ = probe / t;
    /* The backward's compute runs at a uniform rate over the encoder's and heads' gradient
     * bytes: the compute before bucket i is its share of them. The embeddings' bucket is
     * complete when the backward ends (the input layer's backward is a cheap scatter-add), so
     * no compute follows the last encoder bucket before it. */
    long total_units = (long)(o->compute_s * units_per_s_), units[64];
    size_t done = 0;
    long used = 0;
    for (int i = 0; i < nb - 1; i++) {
        done += len[i];
        long upto = (long)((double)total_units * (double)done / (double)rest);
        units[i] = upto - used, used = upto;
    }
    units[nb - 1] = total_units - used;

    if (rank_ == 0)
        printf("\n# simulated backward: %.2f s of compute, %d buckets (%d x %.0f MiB, last %.1f MB), Iallreduce + "
               "MPI_Testall every poll_ms of compute\n%-22s %8s %10s %10s %10s\n", o->compute_s, nb, nb - 1,
               o->bucket_bytes / MiB, len[nb - 1] * 4.0 / 1e6, "mode", "poll_ms", "total_s", "compute_s", "exposed_s");
    const int reps = o->quick ? 1 : 2;
    double alone = 1e30, blocking = 1e30;
    for (int r = 0; r < reps; r++) {
        double a = backward(0, grad, off, len, nb, units, 0);
        if (a < alone) alone = a;
    }
    for (int r = 0; r < reps; r++) {
        double b = backward(1, grad, off, len, nb, units, 0);
        if (b < blocking) blocking = b;
    }
    OverlapRow base[2] = {{"compute only", 0, alone, alone, 0}, {"compute, then blocking", 0, blocking, alone, blocking - alone}};
    for (int k = 0; k < 2; k++) overlap_rows_[n_overlap_++] = base[k];
    for (int p = -1; p < o->n_poll; p++) {
        double ms = p < 0 ? 0 : o->poll_ms[p];
        long pu = p < 0 ? 0 : (long)(ms * 1e-3 * units_per_s_);
        if (p >= 0 && pu < 1) pu = 1;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double x = backward(2, grad, off, len, nb, units, pu);
            if (x < best) best = x;
        }
        OverlapRow row = {p < 0 ? "iallreduce, wait at end" : "iallreduce + testall", ms, best, alone, best - alone};
        overlap_rows_[n_overlap_++] = row;
    }
    if (rank_ == 0) {
        for (int i = 0; i < n_overlap_; i++) {
            const OverlapRow *r = &overlap_rows_[i];
            printf("%-22s %8.2f %10.3f %10.3f %10.3f\n", r->mode, r->poll_ms, r->total_s, r->compute_s, r->exposed_s);
        }
        fflush(stdout);
    }
    free(grad);
}

/* ------------------------------------------------------------------ local reduction */

static double sum_gbps_, copy_gbps_;

static void local_reduce(void) {
    const size_t n = (size_t)(25 * MiB / sizeof(float));
    float *a = alloc_floats(n), *b = alloc_floats(n);
    fill(a, n, 1.0f), fill(b, n, 1e-3f);
    double best_sum = 1e30, best_copy = 1e30;
    for (int r = 0; r < 5; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        for (int k = 0; k < 4; k++)
            for (size_t i = 0; i < n; i++) a[i] += b[i];
        double t = (now() - t0) / 4;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (t < best_sum) best_sum = t;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now();
        for (int k = 0; k < 4; k++) memcpy(a, b, n * sizeof(float)), b[k] += 1.0f;
        t = (now() - t0) / 4;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (t < best_copy) best_copy = t;
    }
    sink_ = a[n / 3];
    sum_gbps_ = n * sizeof(float) / best_sum / 1e9, copy_gbps_ = n * sizeof(float) / best_copy / 1e9;
    if (rank_ == 0)
        printf("\n# one core per rank, all ranks at once, 25 MiB arrays: a += b %.2f GB/s (of b), memcpy %.2f GB/s\n",
               sum_gbps_, copy_gbps_);
    free(a), free(b);
}

/* ------------------------------------------------------------------ main */

static double parse_bytes(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    else if (*end == 'M') v *= MiB;
    else if (*end == 'G') v *= 1024 * MiB;
    return v;
}

static void usage(void) {
    if (rank_ == 0)
        fprintf(stderr,
                "usage: mpirun -np P mpi_allreduce_bench [--max_bytes 100M] [--whole_bytes 440425712]\n"
                "       [--bucket_bytes 25M] [--last_bytes 95348736] [--target_s 0.2] [--reps 5]\n"
                "       [--compute_s 4] [--poll_ms 10,1,0.1] [--parts sizes,local,overlap] [--quick]\n");
}

static double avail_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb < 0 ? (double)sysconf(_SC_AVPHYS_PAGES) * sysconf(_SC_PAGESIZE) : kb * 1024;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    /* bert-base: 110,106,428 parameters (src/model/bert.c's layout: embeddings 23,837,184, 12
     * layers of 7,087,872, pooler 590,592, heads 624,188); the last bucket is the embeddings:
     * word + position + token-type embeddings and their LayerNorm, 95,348,736 B. */
    Options o = {100 * MiB, 440425712.0, 25 * MiB, 95348736.0, 0.2, 4.0, 5, 0, 7, {10, 1, 0.1}, 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) { o.quick = 1; continue; }
        if (!v) { usage(); die("missing value"); }
        if (!strcmp(a, "--max_bytes")) o.max_bytes = parse_bytes(v);
        else if (!strcmp(a, "--whole_bytes")) o.whole_bytes = parse_bytes(v);
        else if (!strcmp(a, "--bucket_bytes")) o.bucket_bytes = parse_bytes(v);
        else if (!strcmp(a, "--last_bytes")) o.last_bytes = parse_bytes(v);
        else if (!strcmp(a, "--target_s")) o.target_s = atof(v);
        else if (!strcmp(a, "--reps")) o.reps = atoi(v);
        else if (!strcmp(a, "--compute_s")) o.compute_s = atof(v);
        else if (!strcmp(a, "--parts")) o.parts = (strstr(v, "sizes") ? 1 : 0) | (strstr(v, "local") ? 2 : 0) |
                                                 (strstr(v, "overlap") ? 4 : 0);
        else if (!strcmp(a, "--poll_ms")) {
            o.n_poll = 0;
            for (char *s = strdup(v), *tok = strtok(s, ","); tok && o.n_poll < 8; tok = strtok(NULL, ","))
                o.poll_ms[o.n_poll++] = atof(tok);
        } else { usage(); die("unknown option"); }
        i++;
    }
    if (o.quick) o.reps = 2, o.target_s = 0.05, o.compute_s = 0.5;
    if (o.reps < 1) o.reps = 1;

    /* The whole gradient needs one buffer per rank plus MPI's temporaries (about 3x); shrink
     * to a quarter when the machine has not that much free (every rank shares it here). */
    double whole = o.whole_bytes, need = 4.0 * size_ * whole, avail = avail_bytes(), shared;
    MPI_Allreduce(&avail, &shared, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    int shrunk = 0;
    if (whole > 0 && need > 0.8 * shared) whole = floor(whole / 4 / (4.0 * size_)) * 4.0 * size_, shrunk = 1;
    double biggest = fmax(o.max_bytes, fmax(whole, fmax(o.bucket_bytes, 100 * MiB)));
    Buffers b;
    size_t nmax = (size_t)(biggest / sizeof(float)) + (size_t)size_;
    b.buf = alloc_floats(nmax), b.shard = alloc_floats(nmax / (size_t)size_ + 1);
    fill(b.buf, nmax, 0), fill(b.shard, nmax / (size_t)size_ + 1, 0);   /* touch the pages once */

    char host[256] = "?";
    gethostname(host, sizeof host);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (rank_ == 0) {
        printf("# mpi_allreduce_bench: P = %d ranks on %s (%ld cores online: %.2f core(s) per rank)\n", size_, host,
               cores, (double)cores / size_);
        printf("# whole gradient: %.0f B%s\n", whole, shrunk ? " (a quarter of bert-base's: free memory is short)" : "");
        printf("%-16s %12s %10s %10s %8s %9s %9s\n", "op", "bytes", "min_us", "median_us", "iters", "algbw_GBs",
               "busbw_GBs");
    }

    double sizes[64];
    int ns = 0;
    for (double s = 4; s <= o.max_bytes * 1.0001 && ns < 40; s *= o.quick ? 16 : 4) sizes[ns++] = s;
    const double extra[] = {o.bucket_bytes, 100 * MiB, whole};
    for (int k = 0; k < 3; k++) {
        int dup = extra[k] <= 0;
        for (int i = 0; i < ns; i++) dup |= fabs(sizes[i] - extra[k]) < 1;
        if (!dup && (k < 2 ? extra[k] <= o.max_bytes * 1.0001 : 1)) sizes[ns++] = extra[k];
    }
    qsort(sizes, (size_t)ns, sizeof sizes[0], cmp_double);

    if (o.parts & 1) {
        for (int i = 0; i < ns; i++) prepare(&o, OP_ALLREDUCE, &b, sizes[i]);
        for (int op = OP_REDUCE_SCATTER; op <= OP_ALLGATHER; op++)
            for (int i = 0; i < ns; i++)
                if (sizes[i] >= 4.0 * size_ * 4) prepare(&o, op, &b, sizes[i]);
        prepare(&o, OP_IALLREDUCE_WAIT, &b, o.bucket_bytes);
        time_rows(&o, &b);
    }

    const double P = size_;
    Fit ar_s = fit_rows("allreduce", 0, 4096, 2 * (P - 1), 2 * (P - 1) / P);
    Fit ar_l = fit_rows("allreduce", 16 * MiB, 1e12, 2 * (P - 1), 2 * (P - 1) / P);
    Fit rs_l = fit_rows("reduce_scatter", 16 * MiB, 1e12, P - 1, (P - 1) / P);
    Fit ag_l = fit_rows("allgather", 16 * MiB, 1e12, P - 1, (P - 1) / P);
    Fit rs_s = fit_rows("reduce_scatter", 0, 4096, P - 1, (P - 1) / P);
    Fit ag_s = fit_rows("allgather", 0, 4096, P - 1, (P - 1) / P);
    if (rank_ == 0) {
        printf("\n# fits (weighted least squares on the fastest repetition)\n");
        printf("allreduce       small (<= 4 KiB): alpha %.2f us per step (2(P-1) = %d steps)\n", 1e6 * ar_s.alpha,
               2 * (size_ - 1));
        printf("allreduce       large (>= 16 MiB): beta %.3f GB/s bus bandwidth, start-up %.1f us\n", ar_l.beta / 1e9,
               1e6 * ar_l.intercept);
        printf("reduce_scatter  small: alpha %.2f us; large: beta %.3f GB/s, start-up %.1f us\n", 1e6 * rs_s.alpha,
               rs_l.beta / 1e9, 1e6 * rs_l.intercept);
        printf("allgather       small: alpha %.2f us; large: beta %.3f GB/s, start-up %.1f us\n", 1e6 * ag_s.alpha,
               ag_l.beta / 1e9, 1e6 * ag_l.intercept);
        fflush(stdout);
    }

    if (o.parts & 2) local_reduce();
    free(b.buf), free(b.shard);
    if (whole > 0 && (o.parts & 4)) overlap_test(&o, whole);

    if (rank_ == 0) {
        printf("{\"bench\": \"mpi_allreduce\", \"ranks\": %d, \"cores_online\": %ld, \"host\": \"%s\", "
               "\"whole_bytes\": %.0f, \"whole_shrunk\": %s, \"reps\": %d, \"target_s\": %g, ",
               size_, cores, host, whole, shrunk ? "true" : "false", o.reps, o.target_s);
        const char *fk[] = {"allreduce_alpha_us", "allreduce_beta_GBs", "allreduce_startup_us", "reduce_scatter_alpha_us",
                            "reduce_scatter_beta_GBs", "allgather_alpha_us", "allgather_beta_GBs"};
        const double fv[] = {1e6 * ar_s.alpha, ar_l.beta / 1e9, 1e6 * ar_l.intercept, 1e6 * rs_s.alpha,
                             rs_l.beta / 1e9, 1e6 * ag_s.alpha, ag_l.beta / 1e9};
        printf("\"fit\": {");
        for (int i = 0; i < 7; i++)   /* JSON has no NaN: a fit without points is null */
            isfinite(fv[i]) ? printf("%s\"%s\": %.4f", i ? ", " : "", fk[i], fv[i])
                            : printf("%s\"%s\": null", i ? ", " : "", fk[i]);
        printf("}, ");
        printf("\"local\": {\"sum_GBs\": %.4f, \"memcpy_GBs\": %.4f}, ", sum_gbps_, copy_gbps_);
        printf("\"overlap\": {\"compute_s\": %.4f, \"buckets\": %d, \"bucket_bytes\": %.0f, \"last_bytes\": %.0f, "
               "\"units_per_s\": %.1f, \"rows\": [", o.compute_s, n_buckets_, o.bucket_bytes, o.last_bytes,
               units_per_s_);
        for (int i = 0; i < n_overlap_; i++)
            printf("%s{\"mode\": \"%s\", \"poll_ms\": %g, \"total_s\": %.5f, \"compute_s\": %.5f, \"exposed_s\": %.5f}",
                   i ? ", " : "", overlap_rows_[i].mode, overlap_rows_[i].poll_ms, overlap_rows_[i].total_s,
                   overlap_rows_[i].compute_s, overlap_rows_[i].exposed_s);
        printf("]}, \"rows\": [");
        for (int i = 0; i < n_rows_; i++)
            printf("%s{\"op\": \"%s\", \"bytes\": %.0f, \"t_min_us\": %.3f, \"t_med_us\": %.3f, \"iters\": %d, "
                   "\"algbw_GBs\": %.4f, \"busbw_GBs\": %.4f}",
                   i ? ", " : "", rows_[i].op, rows_[i].bytes, 1e6 * rows_[i].t_min, 1e6 * rows_[i].t_med,
                   rows_[i].iters, rows_[i].algbw, rows_[i].busbw);
        printf("]}\n");
    }
    MPI_Finalize();
    return 0;
}
