/* Prometheus counters (serve/metrics.h). */
#include "serve/metrics.h"

#include <stdio.h>
#include <string.h>

#include "serve/textbuf.h"

static const int codes[SERVE_CODES - 1] = {200, 400, 401, 404, 405, 413, 429, 500, 503};
static const double latency_le[SERVE_LATENCY_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                         0.1,   0.25,   0.5,   1,    2.5,   10};
static const int batch_le[SERVE_BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

void serve_metrics_init(ServeMetrics *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
}

void serve_metrics_destroy(ServeMetrics *s) { pthread_mutex_destroy(&s->mu); }

void serve_metrics_answer(ServeMetrics *s, int status, double seconds) {
    int c = 0;
    while (c < SERVE_CODES - 1 && codes[c] != status) c++;
    pthread_mutex_lock(&s->mu);
    s->answers[c]++;
    for (int b = 0; b < SERVE_LATENCY_BUCKETS; b++) s->latency[b] += seconds <= latency_le[b];
    s->latency[SERVE_LATENCY_BUCKETS]++;
    s->latency_sum += seconds;
    pthread_mutex_unlock(&s->mu);
}

void serve_metrics_batch(ServeMetrics *s, int rows, long tokens) {
    pthread_mutex_lock(&s->mu);
    for (int b = 0; b < SERVE_BATCH_BUCKETS; b++) s->batch_rows[b] += rows <= batch_le[b];
    s->batch_rows[SERVE_BATCH_BUCKETS]++;
    s->batches++, s->batch_rows_sum += rows, s->tokens += tokens;
    pthread_mutex_unlock(&s->mu);
}

void serve_metrics_queue(ServeMetrics *s, int depth) {
    pthread_mutex_lock(&s->mu);
    s->queue_depth = depth;
    pthread_mutex_unlock(&s->mu);
}

void serve_metrics_texts(ServeMetrics *s, int texts) {
    pthread_mutex_lock(&s->mu);
    s->texts += texts;
    pthread_mutex_unlock(&s->mu);
}

char *serve_metrics_text(ServeMetrics *s) {
    TextBuf t;
    textbuf_init(&t);
    pthread_mutex_lock(&s->mu);
    long total = 0;
    for (int c = 0; c < SERVE_CODES; c++) total += s->answers[c];
    textbuf_printf(&t, "# HELP bert_serve_requests_total HTTP requests answered.\n# TYPE bert_serve_requests_total counter\n");
    textbuf_printf(&t, "bert_serve_requests_total %ld\n", total);
    textbuf_printf(&t, "# HELP bert_serve_responses_total Answers by HTTP status code.\n"
            "# TYPE bert_serve_responses_total counter\n");
    for (int c = 0; c < SERVE_CODES; c++)
        if (c < SERVE_CODES - 1) textbuf_printf(&t, "bert_serve_responses_total{code=\"%d\"} %ld\n", codes[c], s->answers[c]);
        else textbuf_printf(&t, "bert_serve_responses_total{code=\"other\"} %ld\n", s->answers[c]);
    textbuf_printf(&t, "# HELP bert_serve_queue_depth Requests waiting for the compute worker.\n"
            "# TYPE bert_serve_queue_depth gauge\nbert_serve_queue_depth %d\n", s->queue_depth);
    textbuf_printf(&t, "# HELP bert_serve_texts_total Texts received in accepted requests.\n"
            "# TYPE bert_serve_texts_total counter\nbert_serve_texts_total %ld\n", s->texts);
    textbuf_printf(&t, "# HELP bert_serve_tokens_total Tokens the encoder ran.\n"
            "# TYPE bert_serve_tokens_total counter\nbert_serve_tokens_total %ld\n", s->tokens);
    textbuf_printf(&t, "# HELP bert_serve_batch_rows Texts per forward of the compute worker.\n"
            "# TYPE bert_serve_batch_rows histogram\n");
    for (int b = 0; b < SERVE_BATCH_BUCKETS; b++)
        textbuf_printf(&t, "bert_serve_batch_rows_bucket{le=\"%d\"} %ld\n", batch_le[b], s->batch_rows[b]);
    textbuf_printf(&t, "bert_serve_batch_rows_bucket{le=\"+Inf\"} %ld\nbert_serve_batch_rows_sum %ld\n"
            "bert_serve_batch_rows_count %ld\n", s->batch_rows[SERVE_BATCH_BUCKETS], s->batch_rows_sum, s->batches);
    textbuf_printf(&t, "# HELP bert_serve_request_seconds Time from a request's arrival to its answer.\n"
            "# TYPE bert_serve_request_seconds histogram\n");
    for (int b = 0; b < SERVE_LATENCY_BUCKETS; b++)
        textbuf_printf(&t, "bert_serve_request_seconds_bucket{le=\"%g\"} %ld\n", latency_le[b], s->latency[b]);
    textbuf_printf(&t, "bert_serve_request_seconds_bucket{le=\"+Inf\"} %ld\nbert_serve_request_seconds_sum %.6f\n"
            "bert_serve_request_seconds_count %ld\n", s->latency[SERVE_LATENCY_BUCKETS], s->latency_sum,
        s->latency[SERVE_LATENCY_BUCKETS]);
    pthread_mutex_unlock(&s->mu);
    return t.p;
}
