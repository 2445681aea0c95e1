/* A step's micro-batches dealt by work: see step_batches.h. */
#include "train/step_batches.h"

#include <stdlib.h>
#include <string.h>

/* ---- the deal ---- */

typedef struct { double work; int row; } RowWork;

static int heavier_first(const void *a, const void *b) {
    const RowWork *x = a, *y = b;
    if (x->work != y->work) return x->work > y->work ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

typedef struct { double work; int bin; } BinLoad;

static bool lighter(const BinLoad *a, const BinLoad *b) {
    return a->work < b->work || (a->work == b->work && a->bin < b->bin);
}

/* A binary min-heap of the bins with room, lightest on top. */
static void sift_down(BinLoad *h, int n, int i) {
    for (;;) {
        int least = i, l = 2 * i + 1, r = l + 1;
        if (l < n && lighter(&h[l], &h[least])) least = l;
        if (r < n && lighter(&h[r], &h[least])) least = r;
        if (least == i) return;
        BinLoad t = h[i];
        h[i] = h[least], h[least] = t, i = least;
    }
}

void deal_by_work(const double *work, int n, int per_bin, int *position) {
    const int bins = n / per_bin;
    RowWork *rows = xmalloc(sizeof(RowWork) * (size_t)n);
    for (int i = 0; i < n; i++) rows[i] = (RowWork){work[i], i};
    qsort(rows, (size_t)n, sizeof *rows, heavier_first);
    BinLoad *heap = xmalloc(sizeof(BinLoad) * (size_t)bins);
    int *filled = xcalloc((size_t)bins, sizeof(int));
    for (int b = 0; b < bins; b++) heap[b] = (BinLoad){0, b};   /* all zero, ascending: already a heap */
    int open = bins;
    for (int k = 0; k < n; k++) {
        const int b = heap[0].bin;
        position[rows[k].row] = b * per_bin + filled[b]++;
        heap[0].work += rows[k].work;
        if (filled[b] == per_bin) heap[0] = heap[--open];   /* full: out of the heap */
        sift_down(heap, open, 0);
    }
    free(rows), free(heap), free(filled);
}

double row_work(int tokens, int hidden_size) { return (double)tokens * (6.0 * hidden_size + tokens); }

/* ---- the step ---- */

struct StepBatches {
    StepBatchOptions o;
    int rank, world;
    int rows;                     /* k * B: this process's rows */
    int ints_per_row;             /* one row packed: ids, types, mask [T each], positions, labels [P each], nsp */
    int *my_lengths;              /* [rows]: this process's rows' real tokens */
    int *lengths;                 /* [world * rows]: every row's real tokens */
    double *work;
    int *position;                /* [world * rows]: where the deal puts each row */
    int *row_at;                  /* [world * rows]: the inverse */
    int32_t *sendbuf, *recvbuf;   /* [rows * ints_per_row] */
    /* this process's dealt rows, micro-batch after micro-batch */
    int32_t *ids, *types, *mask, *masked_positions, *labels, *nsp;
    double spread_dealt, spread_consecutive;
};

StepBatches *step_batches_create(const StepBatchOptions *o, int rank, int world) {
    StepBatches *s = xcalloc(1, sizeof *s);
    s->o = *o, s->rank = rank, s->world = world;
    s->rows = o->micro_batch * o->accumulation;
    const int T = o->seq_len, P = o->max_predictions;
    s->ints_per_row = 3 * T + 2 * P + 1;
    const size_t all = (size_t)world * s->rows, mine = (size_t)s->rows;
    s->my_lengths = xmalloc(sizeof(int) * mine), s->lengths = xmalloc(sizeof(int) * all), s->work = xmalloc(sizeof(double) * all);
    s->position = xmalloc(sizeof(int) * all), s->row_at = xmalloc(sizeof(int) * all);
    s->sendbuf = xmalloc(sizeof(int32_t) * mine * s->ints_per_row);
    s->recvbuf = xmalloc(sizeof(int32_t) * mine * s->ints_per_row);
    s->ids = xmalloc(sizeof(int32_t) * mine * T), s->types = xmalloc(sizeof(int32_t) * mine * T);
    s->mask = xmalloc(sizeof(int32_t) * mine * T);
    s->masked_positions = xmalloc(sizeof(int32_t) * (mine * P + 1)), s->labels = xmalloc(sizeof(int32_t) * (mine * P + 1));
    s->nsp = xmalloc(sizeof(int32_t) * mine);
    return s;
}

void step_batches_free(StepBatches *s) {
    if (!s) return;
    free(s->my_lengths), free(s->lengths), free(s->work), free(s->position), free(s->row_at), free(s->sendbuf), free(s->recvbuf);
    free(s->ids), free(s->types), free(s->mask), free(s->masked_positions), free(s->labels), free(s->nsp);
    free(s);
}

static void pack_row(const StepBatches *s, const BertBatch *b, int i, int32_t *out) {
    const size_t T = (size_t)s->o.seq_len, P = (size_t)s->o.max_predictions;
    memcpy(out, b->input_ids + i * T, T * 4), out += T;
    memcpy(out, b->token_type_ids + i * T, T * 4), out += T;
    memcpy(out, b->attention_mask + i * T, T * 4), out += T;
    memcpy(out, b->masked_positions + i * P, P * 4), out += P;
    memcpy(out, b->masked_labels + i * P, P * 4), out += P;
    *out = b->next_sentence_labels[i];
}

static void unpack_row(StepBatches *s, const int32_t *in, int i) {
    const size_t T = (size_t)s->o.seq_len, P = (size_t)s->o.max_predictions;
    memcpy(s->ids + i * T, in, T * 4), in += T;
    memcpy(s->types + i * T, in, T * 4), in += T;
    memcpy(s->mask + i * T, in, T * 4), in += T;
    memcpy(s->masked_positions + i * P, in, P * 4), in += P;
    memcpy(s->labels + i * P, in, P * 4), in += P;
    s->nsp[i] = *in;
}

/* The busiest process's work over the mean, with rows placed at `position`. */
static double spread(const StepBatches *s, const int *position) {
    double *per = xcalloc((size_t)s->world, sizeof(double)), total = 0, most = 0;
    for (int i = 0; i < s->world * s->rows; i++) per[position[i] / s->rows] += s->work[i], total += s->work[i];
    for (int r = 0; r < s->world; r++) most = per[r] > most ? per[r] : most;
    free(per);
    return total > 0 ? most * s->world / total : 1;
}

/* Global row i (process i / rows, its row i mod rows) goes to place position[i]: process
 * position[i] / rows, its row position[i] mod rows. Each side walks the receiving process's
 * places in order, so sender and receiver agree on the order of the rows in a message. */
static void exchange_rows(StepBatches *s, const BertBatch *mine, Comm *comm) {
    const int n = s->rows, W = s->world, R = s->ints_per_row;
    size_t *send_counts = xcalloc((size_t)W * 2, sizeof(size_t)), *recv_counts = send_counts + W;
    int32_t *out = s->sendbuf;
    for (int to = 0; to < W; to++)
        for (int p = to * n; p < (to + 1) * n; p++) {
            const int i = s->row_at[p];
            if (i / n != s->rank) continue;
            pack_row(s, mine, i % n, out), out += R;
            send_counts[to]++;
        }
    for (int p = s->rank * n; p < (s->rank + 1) * n; p++) recv_counts[s->row_at[p] / n]++;
    comm_alltoallv(comm, s->sendbuf, send_counts, s->recvbuf, recv_counts, sizeof(int32_t) * R,
                   "the step's rows all-to-all");
    /* the received messages in process order, each in the order of our places */
    size_t *next = xcalloc((size_t)W, sizeof(size_t));
    for (int from = 1; from < W; from++) next[from] = next[from - 1] + recv_counts[from - 1];
    for (int p = s->rank * n; p < (s->rank + 1) * n; p++) {
        const int from = s->row_at[p] / n;
        unpack_row(s, s->recvbuf + (next[from]++) * R, p - s->rank * n);
    }
    free(send_counts), free(next);
}

int step_batches_load(StepBatches *s, DataLoader *train, Comm *comm, BertError *err) {
    BertBatch mine;
    if (loader_next(train, &mine, err) != 1) return -1;
    if (mine.batch != s->rows) return bert_fail(err, "the loader gave %d rows for a step of %d", mine.batch, s->rows);
    const int n = s->rows, T = s->o.seq_len, all = s->world * n;
    for (int i = 0; i < n; i++) {
        int len = 0;
        for (int t = 0; t < T; t++) len = mine.attention_mask[(size_t)i * T + t] ? t + 1 : len;
        s->my_lengths[i] = len;
    }
    comm_allgather(comm, s->my_lengths, s->lengths, sizeof(int) * n, "the step's sequence lengths all-gather");
    for (int i = 0; i < all; i++) s->work[i] = row_work(s->lengths[i], s->o.hidden_size), s->position[i] = i;
    s->spread_consecutive = spread(s, s->position);
    if (!s->o.consecutive) deal_by_work(s->work, all, s->o.micro_batch, s->position);
    s->spread_dealt = spread(s, s->position);
    for (int i = 0; i < all; i++) s->row_at[s->position[i]] = i;
    exchange_rows(s, &mine, comm);
    return 0;
}

BertBatch step_batches_micro(const StepBatches *s, int m) {
    const size_t B = (size_t)s->o.micro_batch, T = (size_t)s->o.seq_len, P = (size_t)s->o.max_predictions;
    const size_t r = (size_t)m * B;
    return bert_pretraining_batch((int)B, (int)T, (int)P, s->ids + r * T, s->types + r * T, s->mask + r * T,
                                  s->masked_positions + r * P, s->labels + r * P, s->nsp + r);
}

long step_batches_tokens(const StepBatches *s) {
    long n = 0;
    for (int i = 0; i < s->world * s->rows; i++) n += s->lengths[i];
    return n;
}

void step_batches_spread(const StepBatches *s, double *dealt, double *consecutive) {
    *dealt = s->spread_dealt, *consecutive = s->spread_consecutive;
}
