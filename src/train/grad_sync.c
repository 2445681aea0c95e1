/* Bucketed, overlapped gradient reduction: see grad_sync.h. */
#include "train/grad_sync.h"

#include "kernels/kernels.h"

#include <stdlib.h>

typedef struct {
    CommRequest *req;
    size_t begin, count;
} Bucket;

struct GradSync {
    Comm *comm;
    float *grads;
    size_t numel;
    GradSyncOptions o;
    size_t *parts;          /* [size + 1] */
    bool armed, in_order;
    size_t ready_lo;        /* [ready_lo, numel) has been reported final */
    size_t started_lo;      /* [started_lo, numel) is in buckets already started */
    Bucket *flight;
    int n_flight, cap_flight;
    double bytes;
    long collectives;
};

GradSync *grad_sync_create(Comm *c, float *grads, size_t numel, const GradSyncOptions *o) {
    GradSync *s = xcalloc(1, sizeof *s);
    s->comm = c, s->grads = grads, s->numel = numel, s->o = *o;
    if (s->o.bucket_floats < 1) s->o.bucket_floats = 1;
    const int P = comm_size(c);
    s->parts = xmalloc(sizeof(size_t) * (size_t)(P + 1));
    for (int r = 0; r <= P; r++) s->parts[r] = numel / (size_t)P * (size_t)r + (numel % (size_t)P) * (size_t)r / (size_t)P;
    s->parts[P] = numel;
    return s;
}

void grad_sync_free(GradSync *s) {
    if (!s) return;
    free(s->parts), free(s->flight), free(s);
}

const size_t *grad_sync_parts(const GradSync *s) { return s->parts; }
double grad_sync_bytes(const GradSync *s) { return s->bytes; }
long grad_sync_collectives(const GradSync *s) { return s->collectives; }

void grad_sync_arm(GradSync *s) {
    s->armed = true, s->in_order = true;
    s->ready_lo = s->started_lo = s->numel;
}

/* The owner of float k: the part that holds it. */
static int owner_of(const GradSync *s, size_t k) {
    int lo = 0, hi = comm_size(s->comm) - 1;
    while (lo < hi) {   /* the last part whose start is <= k */
        const int mid = (lo + hi + 1) / 2;
        if (s->parts[mid] <= k) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Starts one bucket ending at started_lo, at most `limit` floats long and not crossing a part
 * (when reducing to owners). */
static void start_bucket(GradSync *s, size_t limit) {
    const size_t end = s->started_lo;
    size_t begin = end - limit;
    int root = -1;
    if (s->o.to_owners) {
        root = owner_of(s, end - 1);
        if (begin < s->parts[root]) begin = s->parts[root];
    }
    if (s->n_flight == s->cap_flight) {
        s->cap_flight = s->cap_flight ? 2 * s->cap_flight : 64;
        s->flight = xrealloc(s->flight, sizeof(Bucket) * (size_t)s->cap_flight);
    }
    const size_t count = end - begin;
    s->flight[s->n_flight++] = (Bucket){comm_start_sum(s->comm, s->grads + begin, count, s->o.wire, root), begin, count};
    s->bytes += (double)count * (s->o.wire == COMM_WIRE_FP32 ? 4 : 2), s->collectives++;
    s->started_lo = begin;
}

/* Lets MPI move the started buckets along (no progress thread: MPI moves when called). */
static void progress(GradSync *s) {
    for (int i = 0; i < s->n_flight; i++)
        if (s->flight[i].req && comm_test(s->comm, s->flight[i].req)) s->flight[i].req = NULL;
}

void grad_sync_ready(void *ctx, size_t offset, size_t count) {
    GradSync *s = ctx;
    if (!s->armed || !s->in_order) return;
    if (offset + count != s->ready_lo) {   /* not the next range down: finish covers the rest */
        s->in_order = false;
        return;
    }
    s->ready_lo = offset;
    while (s->started_lo - s->ready_lo >= s->o.bucket_floats ||
           (s->o.to_owners && s->started_lo > s->ready_lo &&
            s->parts[owner_of(s, s->started_lo - 1)] >= s->ready_lo))   /* a part is complete */
        start_bucket(s, s->started_lo - s->ready_lo < s->o.bucket_floats ? s->started_lo - s->ready_lo
                                                                          : s->o.bucket_floats);
    progress(s);
}

double grad_sync_finish(GradSync *s) {
    if (!s->armed) return 0;
    const double t0 = now_seconds();
    while (s->started_lo > 0)
        start_bucket(s, s->started_lo < s->o.bucket_floats ? s->started_lo : s->o.bucket_floats);
    for (int i = 0; i < s->n_flight; i++)
        if (s->flight[i].req) comm_wait(s->comm, s->flight[i].req, "the gradient all-reduce");
    s->n_flight = 0, s->armed = false;
    /* the sums -> means (P a power of two: exact) */
    const int P = comm_size(s->comm);
    if (P > 1) {
        const size_t lo = s->o.to_owners ? s->parts[comm_rank(s->comm)] : 0;
        const size_t hi = s->o.to_owners ? s->parts[comm_rank(s->comm) + 1] : s->numel;
        k_scale(s->grads + lo, hi - lo, 1.0f / (float)P);
    }
    return now_seconds() - t0;
}
