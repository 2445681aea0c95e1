/* The queue and the compute worker (serve/batcher.h). */
#include "serve/batcher.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static struct timespec deadline_after(double seconds) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    const long ns = t.tv_nsec + (long)(seconds * 1e9);
    t.tv_sec += ns / 1000000000L, t.tv_nsec = ns % 1000000000L;
    return t;
}

/* Under the lock: up to max_rows rows from the queue's head within the token budget (at least
 * one row), their jobs in jobs[]; whole jobs leave the queue. */
static int take_rows(ServeBatcher *b, ServeRow *rows, ServeJob **jobs, long *tokens) {
    int n = 0;
    *tokens = 0;
    while (b->head && n < b->o.max_rows) {
        ServeJob *j = b->head;
        const int len = serve_row_cost(&j->rows[j->taken]);
        if (n > 0 && *tokens + len > b->o.max_tokens) break;
        rows[n] = j->rows[j->taken], jobs[n++] = j;
        *tokens += len, b->queued_tokens -= len;
        if (++j->taken == j->n) {
            b->head = j->next, b->queued--;
            if (!b->head) b->tail = NULL;
        }
    }
    return n;
}

/* Under the lock: whether another request may join the batch: a connection without a queued job. */
static bool more_coming(const ServeBatcher *b) {
    return !b->o.senders || b->queued < atomic_load(b->o.senders);
}

static void *worker_main(void *arg) {
    ServeBatcher *b = arg;
    ServeRow *rows = xmalloc(sizeof(ServeRow) * (size_t)b->o.max_rows);
    ServeJob **jobs = xmalloc(sizeof(ServeJob *) * (size_t)b->o.max_rows);
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->head && !b->stopping) pthread_cond_wait(&b->work, &b->mu);
        if (!b->head) break;   /* stopping, and nothing left to do */
        /* more on its way: wait a little for a fuller batch (each submit wakes us to look again) */
        const struct timespec until = deadline_after(b->o.max_wait_s);
        while (!b->stopping && b->queued_tokens < b->o.max_tokens && more_coming(b) &&
               pthread_cond_timedwait(&b->work, &b->mu, &until) != ETIMEDOUT) {}
        long tokens;
        const int n = take_rows(b, rows, jobs, &tokens);
        const double t0 = now_seconds();
        for (int i = 0; i < n; i++)
            if (jobs[i]->started == 0) jobs[i]->started = t0;
        serve_metrics_queue(b->metrics, b->queued);
        pthread_mutex_unlock(&b->mu);
        BertError err = {""};
        const int rc = b->run(b->ctx, rows, n, &err);
        const double took = now_seconds() - t0;
        serve_metrics_batch(b->metrics, n, tokens);
        pthread_mutex_lock(&b->mu);
        for (int i = 0; i < n; i++) {
            if (i == 0 || jobs[i] != jobs[i - 1]) jobs[i]->forward_s += took;   /* a job's rows are consecutive */
            if (rc != 0 && !jobs[i]->status)
                jobs[i]->status = 500, snprintf(jobs[i]->msg, sizeof jobs[i]->msg, "%.255s", err.msg);
            jobs[i]->finished++;
        }
        pthread_cond_broadcast(&b->done);
    }
    pthread_mutex_unlock(&b->mu);
    free(rows), free(jobs);
    return NULL;
}

void serve_batcher_start(ServeBatcher *b, const ServeBatchOptions *o, ServeRunFn run, void *ctx, ServeMetrics *m) {
    memset(b, 0, sizeof *b);
    b->o = *o, b->run = run, b->ctx = ctx, b->metrics = m;
    if (b->o.max_rows < 1) b->o.max_rows = 1;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->work, NULL), pthread_cond_init(&b->done, NULL);
    if (pthread_create(&b->worker, NULL, worker_main, b) != 0) die("bert serve: cannot start the compute worker");
}

int serve_batcher_submit(ServeBatcher *b, ServeJob *job) {
    job->taken = job->finished = job->status = 0, job->next = NULL, job->msg[0] = '\0';
    job->submitted = now_seconds(), job->started = 0, job->forward_s = 0;
    job->tokens = 0;
    for (int i = 0; i < job->n; i++) job->tokens += serve_row_cost(&job->rows[i]);
    pthread_mutex_lock(&b->mu);
    const int status = b->stopping ? 503 : b->queued >= b->o.max_queue ? 429 : 0;
    if (!status) {
        if (b->tail) b->tail->next = job;
        else b->head = job;
        b->tail = job, b->queued++, b->queued_tokens += job->tokens;
        serve_metrics_queue(b->metrics, b->queued);
        pthread_cond_signal(&b->work);
    }
    pthread_mutex_unlock(&b->mu);
    return status;
}

int serve_batcher_wait(ServeBatcher *b, ServeJob *job) {
    pthread_mutex_lock(&b->mu);
    while (job->finished < job->n) pthread_cond_wait(&b->done, &b->mu);
    pthread_mutex_unlock(&b->mu);
    return job->status;
}

void serve_batcher_recheck(ServeBatcher *b) {
    pthread_mutex_lock(&b->mu);
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
}

void serve_batcher_stop(ServeBatcher *b) {
    pthread_mutex_lock(&b->mu);
    b->stopping = true;
    pthread_cond_broadcast(&b->work);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->worker, NULL);
    pthread_cond_destroy(&b->work), pthread_cond_destroy(&b->done);
    pthread_mutex_destroy(&b->mu);
}
