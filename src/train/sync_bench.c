/* The gradient reduction timed alone: see sync_bench.h. */
#include "train/sync_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"

typedef struct {
    size_t offset, count;
} Range;

/* The ranges bert_backward reports, in its order: [heads], layer L-1, ..., layer 0, the
 * embeddings. Layer l is the span of the tensors named "encoder.layer.l."; the heads follow
 * the last layer, the embeddings precede the first. */
static int backward_ranges(const BertModel *m, Range *out, BertError *err) {
    const int L = bert_model_config(m)->num_hidden_layers, n = bert_num_param_tensors(m);
    const size_t numel = bert_num_parameters(m);
    size_t *lo = xmalloc(sizeof(size_t) * (size_t)L), *hi = xcalloc((size_t)L, sizeof(size_t));
    for (int l = 0; l < L; l++) lo[l] = numel;
    for (int i = 0; i < n; i++) {
        const BertParamInfo *t = bert_param_info(m, i);
        const char *p = strstr(t->name, "encoder.layer.");
        if (!p) continue;
        const int l = atoi(p + strlen("encoder.layer."));
        if (l < 0 || l >= L) continue;
        if (t->offset < lo[l]) lo[l] = t->offset;
        if (t->offset + t->numel > hi[l]) hi[l] = t->offset + t->numel;
    }
    int k = 0, rc = 0;
    if (hi[L - 1] < numel) out[k++] = (Range){hi[L - 1], numel - hi[L - 1]};
    for (int l = L - 1; l >= 0; l--) {
        if (hi[l] != (l == L - 1 ? hi[l] : lo[l + 1]) || lo[l] >= hi[l]) rc = -1;
        out[k++] = (Range){lo[l], hi[l] - lo[l]};
    }
    if (lo[0] > 0) out[k++] = (Range){0, lo[0]};
    free(lo), free(hi);
    if (rc) return bert_fail(err, "bench_allreduce: the layers' gradients are not contiguous in layer order");
    return k;
}

/* The slowest process's time of each repetition, then min and median over repetitions. */
static void summarise(Comm *c, double *t, int iters, double grad_bytes, double bus_factor, SyncBenchTiming *out) {
    comm_max_doubles(c, t, iters, "the timings");
    for (int i = 1; i < iters; i++)   /* insertion sort: a handful of values */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { const double x = t[j]; t[j] = t[j - 1], t[j - 1] = x; }
    out->seconds_min = t[0], out->seconds_median = t[iters / 2], out->grad_bytes = grad_bytes;
    out->algbw_gbs = grad_bytes / t[0] / 1e9, out->busbw_gbs = out->algbw_gbs * bus_factor;
}

/* Values like gradients (the 16-bit wires round them), different on every process. */
static float initial_value(size_t k, int rank) {
    return 1e-3f * (float)((long)((k * 2654435761u + (size_t)rank * 977u) % 2001u) - 1000) / 1000.0f;
}

/* After the repetitions every reduced float must be the processes' mean of initial_value,
 * to the wire's rounding: a benchmark of a wrong reduction says so instead of a rate. */
static int check_means(Comm *c, const float *g, size_t lo, size_t hi, enum CommWire wire, BertError *err) {
    const int P = comm_size(c);
    const double tol = wire == COMM_WIRE_FP32 ? 1e-6 : 1e-2;   /* of the values' scale, 1e-3 */
    for (size_t k = lo; k < hi; k++) {
        double mean = 0;
        for (int r = 0; r < P; r++) mean += initial_value(k, r);
        mean /= P;
        if (!(fabs(g[k] - mean) <= tol * 1e-3))
            return bert_fail(err, "bench_allreduce: float %zu is %.9g after the reduction, the processes' mean is %.9g",
                             k, (double)g[k], mean);
    }
    return 0;
}

static void barrier(Comm *c) {
    double x = 0;
    comm_sum_doubles(c, &x, 1, "the barrier");
}

/* The same buffer summed by one all-reduce (fp32): MPI's own algorithm on the whole gradient. */
static void time_one_call(Comm *c, float *g, size_t numel, const SyncBenchOptions *o, double *t, SyncBenchTiming *out) {
    const int P = comm_size(c);
    for (int i = -o->warmup; i < o->iters; i++) {
        barrier(c);
        const double t0 = now_seconds();
        comm_wait(c, comm_start_sum(c, g, numel, COMM_WIRE_FP32, -1), "the whole-buffer all-reduce");
        if (i >= 0) t[i] = now_seconds() - t0;
        k_scale(g, numel, 1.0f / (float)P);   /* keep the values where they were */
    }
    summarise(c, t, o->iters, 4.0 * (double)numel, 2.0 * (P - 1) / (double)P, out);
    out->wire_bytes = 4.0 * (double)numel, out->buckets = 1;
}

int sync_bench_run(Comm *c, BertModel *m, const SyncBenchOptions *o, SyncBenchResult *r, BertError *err) {
    memset(r, 0, sizeof *r);
    if (o->iters < 1 || o->warmup < 0) return bert_fail(err, "bench_allreduce: --iters must be >= 1, --warmup >= 0");
    const int P = comm_size(c);
    float *g = bert_grads(m);
    const size_t numel = bert_num_parameters(m);
    Range *ranges = xmalloc(sizeof(Range) * (size_t)(bert_model_config(m)->num_hidden_layers + 2));
    const int n = backward_ranges(m, ranges, err);
    if (n < 0) return free(ranges), -1;
    r->ranges = n;
    double *t = xmalloc(sizeof(double) * (size_t)o->iters);
    GradSync *s = grad_sync_create(c, g, numel, &o->sync);
    float *initial = xmalloc(sizeof(float) * numel + 1);   /* this process's values, uploaded before each repetition */
    for (size_t k = 0; k < numel; k++) initial[k] = initial_value(k, comm_rank(c));
    const double grad_bytes = 4.0 * (double)numel;
    for (int i = -o->warmup; i < o->iters; i++) {
        k_upload(g, initial, sizeof(float) * numel);   /* untimed */
        barrier(c);
        const double bytes0 = grad_sync_bytes(s), t0 = now_seconds();
        const long started0 = grad_sync_collectives(s);
        grad_sync_arm(s);
        for (int k = 0; k < n; k++) grad_sync_ready(s, ranges[k].offset, ranges[k].count);
        grad_sync_finish(s);
        if (i >= 0) t[i] = now_seconds() - t0;
        r->bucketed.wire_bytes = grad_sync_bytes(s) - bytes0;
        r->bucketed.buckets = (int)(grad_sync_collectives(s) - started0);
    }
    const size_t *parts = grad_sync_parts(s);
    const size_t lo = o->sync.to_owners ? parts[comm_rank(c)] : 0, hi = o->sync.to_owners ? parts[comm_rank(c) + 1] : numel;
    k_download(initial, g, sizeof(float) * numel);   /* the reduced values, for the check */
    int bad = check_means(c, initial, lo, hi, o->sync.wire, err);
    free(initial);
    grad_sync_free(s);
    int any_bad = bad ? 1 : 0;
    comm_max_ints(c, &any_bad, 1, "the check");
    if (any_bad) {
        if (!bad) bert_fail(err, "bench_allreduce: another process's reduced gradients are wrong");
        return free(t), free(ranges), -1;
    }
    const double wire_scale = o->sync.wire == COMM_WIRE_FP32 ? 1.0 : 0.5;
    const double bus = (o->sync.to_owners ? 1.0 : 2.0) * (P - 1) / (double)P * wire_scale;
    summarise(c, t, o->iters, grad_bytes, bus, &r->bucketed);
    time_one_call(c, g, numel, o, t, &r->one_call);
    free(t), free(ranges);
    return 0;
}
