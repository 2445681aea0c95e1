/* bert serve's counters, as Prometheus text (GET /metrics): requests and answers by status
 * code, the queue's depth, rows and tokens per batch, request latency. Thread-safe. */
#ifndef BERT_SERVE_METRICS_H
#define BERT_SERVE_METRICS_H

#include <pthread.h>

#define SERVE_LATENCY_BUCKETS 12
#define SERVE_BATCH_BUCKETS 9
#define SERVE_CODES 10

typedef struct {
    pthread_mutex_t mu;
    long answers[SERVE_CODES];                  /* by serve_metrics_codes()'s codes, the last: any other */
    long latency[SERVE_LATENCY_BUCKETS + 1];    /* cumulative counts per bucket, then +Inf */
    double latency_sum;
    long batch_rows[SERVE_BATCH_BUCKETS + 1];
    long batches, batch_rows_sum, tokens, texts;
    int queue_depth;                            /* requests waiting for the worker */
} ServeMetrics;

void serve_metrics_init(ServeMetrics *s);
void serve_metrics_destroy(ServeMetrics *s);
/* One answered request: its status and seconds from its first byte to its answer. */
void serve_metrics_answer(ServeMetrics *s, int status, double seconds);
/* One forward of the worker: rows and tokens. */
void serve_metrics_batch(ServeMetrics *s, int rows, long tokens);
void serve_metrics_queue(ServeMetrics *s, int depth);
void serve_metrics_texts(ServeMetrics *s, int texts);
/* The text exposition format (version 0.0.4); the caller frees it. */
char *serve_metrics_text(ServeMetrics *s);

#endif
