/* Dynamic batching for bert serve: request threads submit jobs (a request's encoded texts) to
 * a bounded queue; ONE compute worker takes what is queued, up to a token budget and a row
 * count, waiting up to max_wait for more after the first arrives (while more can come), runs one forward over the
 * rows of several requests (the task's run function: one packed batch) and wakes each
 * request when all its rows are done. A request larger than the budget is run over several
 * forwards. The model is only ever touched by the worker. */
#ifndef BERT_SERVE_BATCHER_H
#define BERT_SERVE_BATCHER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"
#include "serve/metrics.h"

typedef struct {
    const int32_t *ids, *types;   /* length token ids and segment ids (types NULL: all 0) */
    int length;
    bool normalize;               /* embeddings: L2-normalise */
    int padded;                   /* > 0: the forward runs the row at this length (QA's windows): the
                                   * token budget counts that */
    float *out, *out2;            /* the task's output for this row (QA: start and end logits) */
} ServeRow;

/* The tokens a row costs a forward. */
static inline int serve_row_cost(const ServeRow *r) { return r->padded > 0 ? r->padded : r->length; }

/* Runs one batch of rows (n <= max_rows, lengths <= the model's): 0, or -1 with err. */
typedef int (*ServeRunFn)(void *ctx, const ServeRow *rows, int n, BertError *err);

typedef struct ServeJob {
    ServeRow *rows;
    int n;
    long tokens;
    int taken, finished;          /* rows handed to the worker, rows done (under the lock) */
    int status;                   /* 0, or 500 with msg: the forward failed */
    char msg[256];
    double submitted, started;    /* now_seconds() at the submit and when its first row was taken */
    double forward_s;             /* seconds of the forwards its rows ran in (their whole time: shared) */
    struct ServeJob *next;
} ServeJob;

typedef struct {
    int max_queue;                /* requests waiting; one more: 429 */
    int max_rows;                 /* rows per forward: the model's max_batch */
    long max_tokens;              /* tokens per forward (a longer single row still runs alone) */
    double max_wait_s;            /* how long the worker waits for more work after the first */
    const atomic_int *senders;    /* the connections open now, each of which may send a request (HTTP/1.1:
                                   * one at a time): the worker waits (up to max_wait_s) only while fewer
                                   * jobs are queued than that, so a lone client's request never waits
                                   * for company that cannot come, and a full round of c clients runs
                                   * as soon as all c are in; NULL: it always waits */
} ServeBatchOptions;

typedef struct {
    ServeBatchOptions o;
    ServeRunFn run;
    void *ctx;
    ServeMetrics *metrics;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    ServeJob *head, *tail;
    int queued;                   /* jobs with rows not yet taken */
    long queued_tokens;
    bool stopping;
    pthread_t worker;
} ServeBatcher;

void serve_batcher_start(ServeBatcher *b, const ServeBatchOptions *o, ServeRunFn run, void *ctx, ServeMetrics *m);
/* Queues the job (its rows ready): 0, 429 when the queue is full, 503 once stopping. */
int serve_batcher_submit(ServeBatcher *b, ServeJob *job);
/* Blocks until every row of a submitted job is done; returns job->status. */
int serve_batcher_wait(ServeBatcher *b, ServeJob *job);
/* The senders' count went down (a connection closed): a worker waiting for company looks again. */
void serve_batcher_recheck(ServeBatcher *b);
/* Refuses new jobs, finishes the queued ones, joins the worker. */
void serve_batcher_stop(ServeBatcher *b);

#endif
