/* The HTTP side of bert serve (serve/server.h): routing, authentication, limits, the answers'
 * JSON; the model runs only in the batcher's worker. */
#include "serve/server.h"

#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/version.h"
#include "model/bert.h"
#include "model/config.h"
#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/textbuf.h"
#include "tasks/classify_infer.h"
#include "tasks/embed.h"
#include "tasks/glue.h"
#include "tasks/infer_model.h"
#include "tasks/squad_infer.h"

typedef struct {
    ServeOptions o;
    InferModel em;
    int hidden;
    bool classify;                /* --task classify: /predict, /rerank */
    bool qa;                      /* --task qa: /v1/qa; neither: the embedding endpoints */
    Tokenizer *qa_tok;            /* qa: bert squad's tokenizer (words of up to 200 characters) */
    SquadInferOptions qa_opt;
    char **labels;                /* classify: id2label's names */
    int num_labels;
    char model_name[256];
    ServeBatcher batcher;
    ServeMetrics metrics;
    atomic_int active;            /* requests between their first byte and their answer */
    atomic_int connections;       /* open now (the batcher waits for company only while one may send) */
} Server;

typedef struct {                  /* one request on a connection */
    char *body;
    size_t len, cap;
    double t0;
    bool answered;                /* refused early (413): the rest of the body is discarded */
    bool timed;                   /* ran in the worker: queue_s and forward_s hold its times */
    double queue_s, forward_s;
} Request;

ServeOptions serve_default_options(void) {
    return (ServeOptions){.task = "embed", .host = "127.0.0.1", .port = 8080, .truncate = true,
                          .max_batch_tokens = 16384, .max_batch_rows = 128, .max_wait_ms = 2, .max_queue = 512,
                          .max_inputs = 1024, .max_body_bytes = 4L << 20, .timeout_s = 30, .max_connections = 512,
                          .drain_s = 30, .doc_stride = 128, .max_query_length = 64, .n_best_size = 20,
                          .max_answer_length = 30};
}

/* ---- answers ---- */

static enum MHD_Result answer(Server *s, struct MHD_Connection *c, Request *r, int status, const char *type,
                              TextBuf *body) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(body->len, body->p, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (r->timed) {   /* W3C Server-Timing: what a client can subtract from its latency, request by request */
        char timing[160];
        snprintf(timing, sizeof timing, "queue;dur=%.3f, forward;dur=%.3f, total;dur=%.3f", 1e3 * r->queue_s,
                 1e3 * r->forward_s, 1e3 * (now_seconds() - r->t0));
        MHD_add_response_header(resp, "Server-Timing", timing);
    }
    if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    const enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    r->answered = true;
    MHD_destroy_response(resp);
    serve_metrics_answer(&s->metrics, status, now_seconds() - r->t0);
    return rc;
}

/* An error as OpenAI's clients read it ({"error": {"message", "type", "code"}}); TEI's
 * clients read "error" and "error_type" at the top level, which the same body carries. */
static enum MHD_Result answer_error(Server *s, struct MHD_Connection *c, Request *r, int status, const char *msg) {
    const char *type = status == 401 ? "authentication_error" : status == 429 || status == 503 ? "overloaded"
                       : status == 413 ? "validation" : status >= 500 ? "backend" : "invalid_request_error";
    TextBuf t;
    textbuf_init(&t);
    textbuf_printf(&t, "{\"error\":{\"message\":");
    textbuf_json_string(&t, msg);
    textbuf_printf(&t, ",\"type\":\"%s\",\"code\":%d},\"error_type\":\"%s\"}\n", type, status, type);
    return answer(s, c, r, status, "application/json", &t);
}

/* The submit-and-wait every model endpoint does: 0, or the status with msg; r gets the job's
 * times (the answer's Server-Timing header). */
static int run_job(Server *s, Request *r, ServeRow *rows, int n, char *msg, size_t size) {
    ServeJob job = {.rows = rows, .n = n};
    int status = serve_batcher_submit(&s->batcher, &job);
    if (status) snprintf(msg, size, status == 429 ? "the queue is full (%d requests): try again later"
                                                  : "the server is shutting down", s->o.max_queue);
    else if ((status = serve_batcher_wait(&s->batcher, &job)) != 0) snprintf(msg, size, "%s", job.msg);
    else r->timed = true, r->queue_s = job.started - job.submitted, r->forward_s = job.forward_s;
    return status;
}

/* ---- embeddings ---- */

typedef struct {
    int32_t *ids;                 /* n * max_seq */
    ServeRow *rows;
    float *vectors;               /* n * hidden */
    long tokens;
} Encoded;

static void encoded_free(Encoded *e) { free(e->ids), free(e->rows), free(e->vectors); }

/* Tokenizes the request's texts (in this request's thread) into rows for the worker. 0, or
 * the status (413: too long with truncation off) with msg. */
static int encode_request(Server *s, const ServeRequest *q, Encoded *e, char *msg, size_t size) {
    const int T = s->em.max_seq, H = s->hidden;
    const bool truncate = q->truncate >= 0 ? q->truncate : s->o.truncate;
    const bool normalize = q->normalize != 0;
    e->ids = xmalloc(sizeof(int32_t) * (size_t)q->n * T), e->rows = xmalloc(sizeof(ServeRow) * (size_t)q->n);
    e->vectors = xmalloc(sizeof(float) * (size_t)q->n * H), e->tokens = 0;
    TokenList scratch;
    token_list_init(&scratch);
    int status = 0;
    for (int i = 0; !status && i < q->n; i++) {
        BertError err;
        int full;
        int32_t *ids = e->ids + (size_t)i * T;
        const int len = embed_encode(s->em.tok, &scratch, q->text_a[i], strlen(q->text_a[i]), T, ids, &full, &err);
        if (len < 0) status = 500, snprintf(msg, size, "%s", err.msg);
        else if (!truncate && full > T)
            status = 413, snprintf(msg, size, "input %d has %d tokens, more than the server's --max_seq_length %d (truncate: false)", i,
                                   full, T);
        e->rows[i] = (ServeRow){.ids = ids, .length = len, .normalize = normalize, .out = e->vectors + (size_t)i * H};
        e->tokens += len;
    }
    token_list_free(&scratch);
    return status;
}

static void put_vector(TextBuf *t, const float *v, int H, bool base64) {
    if (base64) {   /* OpenAI's: the float32 array's bytes, little-endian (this machine's order) */
        textbuf_printf(t, "\"");
        textbuf_base64(t, (const unsigned char *)v, sizeof(float) * (size_t)H);
        textbuf_printf(t, "\"");
        return;
    }
    textbuf_printf(t, "[");
    for (int h = 0; h < H; h++) {   /* float32 exactly: 9 significant digits */
        if (h) textbuf_char(t, ',');
        textbuf_float(t, v[h]);
    }
    textbuf_printf(t, "]");
}

static void put_openai(Server *s, const ServeRequest *q, const Encoded *e, TextBuf *t) {
    textbuf_printf(t, "{\"object\":\"list\",\"data\":[");
    for (int i = 0; i < q->n; i++) {
        textbuf_printf(t, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        put_vector(t, e->vectors + (size_t)i * s->hidden, s->hidden, q->base64);
        textbuf_printf(t, "}");
    }
    textbuf_printf(t, "],\"model\":");
    textbuf_json_string(t, q->model[0] ? q->model : s->model_name);
    textbuf_printf(t, ",\"usage\":{\"prompt_tokens\":%ld,\"total_tokens\":%ld}}\n", e->tokens, e->tokens);
}

static enum MHD_Result handle_embeddings(Server *s, struct MHD_Connection *c, Request *r, ServeEndpoint ep) {
    ServeRequest q;
    BertError err;
    const ServeLimits lim = {.max_inputs = s->o.max_inputs};
    int status = serve_request_parse(ep, r->body ? r->body : "", r->len, &lim, &q, &err);
    if (status) return answer_error(s, c, r, status, err.msg);
    Encoded e;
    char msg[1100] = "";
    status = encode_request(s, &q, &e, msg, sizeof msg);
    if (!status) status = run_job(s, r, e.rows, q.n, msg, sizeof msg);
    enum MHD_Result rc;
    if (status) rc = answer_error(s, c, r, status, msg);
    else {
        serve_metrics_texts(&s->metrics, q.n);
        TextBuf t;
        textbuf_init(&t);
        if (ep == SERVE_OPENAI_EMBEDDINGS) put_openai(s, &q, &e, &t);
        else {   /* TEI: always a list of vectors */
            textbuf_printf(&t, "[");
            for (int i = 0; i < q.n; i++) {
                if (i) textbuf_printf(&t, ",");
                put_vector(&t, e.vectors + (size_t)i * s->hidden, s->hidden, false);
            }
            textbuf_printf(&t, "]\n");
        }
        rc = answer(s, c, r, 200, "application/json", &t);
    }
    encoded_free(&e), serve_request_free(&q);
    return rc;
}

/* ---- classification ---- */

/* One input's labels with their scores, highest first (TEI's /predict). */
static void put_scores(Server *s, const float *logits, bool raw, TextBuf *t) {
    const int NL = s->num_labels;
    float *p = xmalloc(sizeof(float) * (size_t)NL);
    int *order = xmalloc(sizeof(int) * (size_t)NL);
    if (raw || NL == 1) memcpy(p, logits, sizeof(float) * NL);   /* a regression's value is its logit */
    else classify_softmax(logits, NL, p);
    for (int k = 0; k < NL; k++) order[k] = k;
    for (int k = 1; k < NL; k++)   /* insertion sort, stable: equal scores keep label order */
        for (int j = k; j > 0 && p[order[j]] > p[order[j - 1]]; j--) {
            const int x = order[j];
            order[j] = order[j - 1], order[j - 1] = x;
        }
    textbuf_printf(t, "[");
    for (int k = 0; k < NL; k++) {
        textbuf_printf(t, "%s{\"score\":%.9g,\"label\":", k ? "," : "", p[order[k]]);
        textbuf_json_string(t, s->labels[order[k]]);
        textbuf_printf(t, "}");
    }
    textbuf_printf(t, "]");
    free(p), free(order);
}

/* The logits (n * num_labels) of texts or pairs, as bert glue's features (the same
 * tokenization, [SEP]s and pair truncation): 0, or the status with msg. */
static int classify_texts(Server *s, Request *r, const GlueExamples *e, int truncate, float *logits, char *msg,
                          size_t size) {
    GlueFeatures f;
    BertError err;
    if (glue_features(e, s->em.tok, s->em.max_seq, &f, &err) != 0) return snprintf(msg, size, "%s", err.msg), 500;
    int status = 0;
    if (f.truncated && !(truncate >= 0 ? truncate : s->o.truncate))
        status = 413, snprintf(msg, size, "an input is longer than the model's %d tokens (truncate: false)", s->em.max_seq);
    const int T = s->em.max_seq, NL = s->num_labels;
    ServeRow *rows = xmalloc(sizeof(ServeRow) * (size_t)e->n);
    for (int i = 0; !status && i < e->n; i++)
        rows[i] = (ServeRow){.ids = f.input_ids + (size_t)i * T, .types = f.segment_ids + (size_t)i * T,
                             .length = f.length[i], .out = logits + (size_t)i * NL};
    if (!status) status = run_job(s, r, rows, e->n, msg, size);
    glue_features_free(&f), free(rows);
    return status;
}

static enum MHD_Result handle_predict(Server *s, struct MHD_Connection *c, Request *r) {
    ServeRequest q;
    BertError err;
    const ServeLimits lim = {.max_inputs = s->o.max_inputs};
    int status = serve_request_parse(SERVE_TEI_PREDICT, r->body ? r->body : "", r->len, &lim, &q, &err);
    if (status) return answer_error(s, c, r, status, err.msg);
    const GlueExamples e = {.n = q.n, .text_a = q.text_a, .text_b = q.text_b};
    const int NL = s->num_labels;
    float *logits = xmalloc(sizeof(float) * (size_t)q.n * NL);
    char msg[1100] = "";
    status = classify_texts(s, r, &e, q.truncate, logits, msg, sizeof msg);
    enum MHD_Result rc;
    if (status) rc = answer_error(s, c, r, status, msg);
    else {
        serve_metrics_texts(&s->metrics, q.n);
        TextBuf t;
        textbuf_init(&t);
        if (q.input_is_list) textbuf_printf(&t, "[");
        for (int i = 0; i < q.n; i++) {
            if (i) textbuf_printf(&t, ",");
            put_scores(s, logits + (size_t)i * NL, q.raw_scores, &t);
        }
        textbuf_printf(&t, q.input_is_list ? "]\n" : "\n");
        rc = answer(s, c, r, 200, "application/json", &t);
    }
    free(logits), serve_request_free(&q);
    return rc;
}

/* A cross-encoder's relevance of a (query, text) pair: one label: its sigmoid; two: the
 * softmax of the second ("relevant") label; raw: that logit. */
static double relevance(const float *logits, int NL, bool raw) {
    const float z = logits[NL - 1];
    if (raw) return z;
    if (NL == 1) return 1 / (1 + exp(-(double)z));
    float p[2];
    classify_softmax(logits, 2, p);
    return p[1];
}

/* TEI's /rerank: the query paired with each text (bert glue's [CLS] query [SEP] text [SEP]),
 * [{"index", "score"(, "text")}] highest score first (equal scores in text order). */
static enum MHD_Result handle_rerank(Server *s, struct MHD_Connection *c, Request *r) {
    ServeRequest q;
    BertError err;
    const ServeLimits lim = {.max_inputs = s->o.max_inputs};
    if (s->num_labels > 2)
        return answer_error(s, c, r, 400, "/rerank needs a cross-encoder: a classifier with 1 or 2 labels");
    int status = serve_request_parse(SERVE_TEI_RERANK, r->body ? r->body : "", r->len, &lim, &q, &err);
    if (status) return answer_error(s, c, r, status, err.msg);
    const int NL = s->num_labels;
    char **queries = xmalloc(sizeof(char *) * (size_t)q.n);
    for (int i = 0; i < q.n; i++) queries[i] = q.query;
    const GlueExamples e = {.n = q.n, .text_a = queries, .text_b = q.text_a};
    float *logits = xmalloc(sizeof(float) * (size_t)q.n * NL);
    double *score = xmalloc(sizeof(double) * (size_t)q.n);
    int *order = xmalloc(sizeof(int) * (size_t)q.n);
    char msg[1100] = "";
    status = classify_texts(s, r, &e, q.truncate, logits, msg, sizeof msg);
    enum MHD_Result rc;
    if (status) rc = answer_error(s, c, r, status, msg);
    else {
        serve_metrics_texts(&s->metrics, q.n);
        for (int i = 0; i < q.n; i++) score[i] = relevance(logits + (size_t)i * NL, NL, q.raw_scores), order[i] = i;
        for (int k = 1; k < q.n; k++)   /* insertion sort, stable */
            for (int j = k; j > 0 && score[order[j]] > score[order[j - 1]]; j--) {
                const int x = order[j];
                order[j] = order[j - 1], order[j - 1] = x;
            }
        TextBuf t;
        textbuf_init(&t);
        textbuf_printf(&t, "[");
        for (int k = 0; k < q.n; k++) {
            textbuf_printf(&t, "%s{\"index\":%d,\"score\":%.9g", k ? "," : "", order[k], score[order[k]]);
            if (q.return_text) textbuf_printf(&t, ",\"text\":"), textbuf_json_string(&t, q.text_a[order[k]]);
            textbuf_printf(&t, "}");
        }
        textbuf_printf(&t, "]\n");
        rc = answer(s, c, r, 200, "application/json", &t);
    }
    free(queries), free(logits), free(score), free(order), serve_request_free(&q);
    return rc;
}

/* ---- question answering ---- */

/* /v1/qa: the question's windows over the context as bert squad's features (tokenized in
 * this thread), their logits from the worker, bert squad's post-processing. */
static enum MHD_Result handle_qa(Server *s, struct MHD_Connection *c, Request *r) {
    ServeRequest q;
    BertError err;
    const ServeLimits lim = {.max_inputs = 1};
    int status = serve_request_parse(SERVE_QA, r->body ? r->body : "", r->len, &lim, &q, &err);
    if (status) return answer_error(s, c, r, status, err.msg);
    SquadQuery sq;
    char msg[1100] = "";
    if (squad_query_open(s->qa_tok, q.text_a[0], q.text_b[0], &s->qa_opt, &sq, &err) != 0) {
        serve_request_free(&q);
        return answer_error(s, c, r, 400, err.msg);
    }
    const int T = s->em.max_seq, n = sq.f.n_features;
    if (n > s->o.max_inputs)
        status = 413, snprintf(msg, sizeof msg, "the context makes %d windows of %d tokens: at most %d "
                                                "(--max_client_batch_size)", n, T, s->o.max_inputs);
    int32_t *ids = xmalloc(sizeof(int32_t) * ((size_t)n * T + 1)), *types = xmalloc(sizeof(int32_t) * ((size_t)n * T + 1));
    ServeRow *rows = xmalloc(sizeof(ServeRow) * ((size_t)n + 1));
    for (int i = 0; !status && i < n; i++) {
        const size_t at = (size_t)i * T;
        const int len = squad_query_inputs(&sq, i, ids + at, types + at);
        rows[i] = (ServeRow){.ids = ids + at, .types = types + at, .length = len, .padded = T,
                             .out = sq.start_logits + at, .out2 = sq.end_logits + at};
    }
    if (!status && n > 0) status = run_job(s, r, rows, n, msg, sizeof msg);   /* no document tokens: no window */
    SquadResults res = {0};
    if (!status && squad_query_answer(&sq, s->qa_tok, &s->qa_opt, &res, &err) != 0)
        status = 500, snprintf(msg, sizeof msg, "%s", err.msg);
    enum MHD_Result rc;
    if (status) rc = answer_error(s, c, r, status, msg);
    else {
        serve_metrics_texts(&s->metrics, 1);
        char *json = squad_answer_json(&res, q.top_k);
        TextBuf t;
        textbuf_init(&t);
        textbuf_printf(&t, "%s\n", json);
        free(json);
        rc = answer(s, c, r, 200, "application/json", &t);
    }
    squad_results_free(&res), squad_query_free(&sq);
    free(ids), free(types), free(rows), serve_request_free(&q);
    return rc;
}

/* ---- the other endpoints ---- */

static enum MHD_Result handle_get(Server *s, struct MHD_Connection *c, Request *r, const char *url) {
    TextBuf t;
    textbuf_init(&t);
    if (!strcmp(url, "/health")) {
        textbuf_printf(&t, "{\"status\":\"ok\"}\n");
        return answer(s, c, r, 200, "application/json", &t);
    }
    if (!strcmp(url, "/metrics")) {
        free(t.p);
        t.p = serve_metrics_text(&s->metrics), t.len = strlen(t.p);
        return answer(s, c, r, 200, "text/plain; version=0.0.4; charset=utf-8", &t);
    }
    textbuf_printf(&t, "{\"model_id\":");
    textbuf_json_string(&t, s->model_name);
    textbuf_printf(&t, ",\"task\":\"%s\",\"model_type\":", s->o.task);
    if (s->qa)
        textbuf_printf(&t, "{\"question_answering\":{\"doc_stride\":%d,\"max_query_length\":%d,\"n_best_size\":%d,"
                           "\"max_answer_length\":%d,\"version_2_with_negative\":%s,\"null_score_diff_threshold\":%.17g}}",
                       s->o.doc_stride, s->o.max_query_length, s->o.n_best_size, s->o.max_answer_length,
                       s->o.version_2_with_negative ? "true" : "false", s->o.null_score_diff_threshold);
    else if (!s->classify) textbuf_printf(&t, "{\"embedding\":{\"pooling\":\"mean\"}}");
    else {   /* TEI's form: {"classifier": {"id2label": {"0": name, ...}}} */
        textbuf_printf(&t, "{\"classifier\":{\"id2label\":{");
        for (int k = 0; k < s->num_labels; k++) {
            textbuf_printf(&t, "%s\"%d\":", k ? "," : "", k);
            textbuf_json_string(&t, s->labels[k]);
        }
        textbuf_printf(&t, "}}}");
    }
    textbuf_printf(&t, ",\"max_input_length\":%d,"
                       "\"hidden_size\":%d,\"precision\":\"%s\",\"max_batch_tokens\":%d,\"max_client_batch_size\":%d,"
                       "\"max_concurrent_requests\":%d,\"version\":\"%s\"}\n",
                   s->em.max_seq, s->hidden, bert_precision_name(bert_precision(s->em.model)),
                   s->o.max_batch_tokens, s->o.max_inputs, s->o.max_queue, BERT_VERSION);
    return answer(s, c, r, 200, "application/json", &t);
}

static bool authorized(Server *s, struct MHD_Connection *c) {
    if (!s->o.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    /* compared in time independent of where they differ */
    const char *k = h + 7, *want = s->o.api_key;
    const size_t n = strlen(k), m = strlen(want);
    unsigned diff = n != m;
    for (size_t i = 0; i < m; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < n ? k[i] : 0);
    return diff == 0;
}

/* The request complete: route it. */
static enum MHD_Result dispatch(Server *s, struct MHD_Connection *c, Request *r, const char *url, const char *method) {
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    const bool is_get_path = !strcmp(url, "/health") || !strcmp(url, "/info") || !strcmp(url, "/metrics");
    const bool is_post_path = !strcmp(url, "/v1/embeddings") || !strcmp(url, "/embed") || !strcmp(url, "/predict") ||
                              !strcmp(url, "/rerank") || !strcmp(url, "/v1/qa");
    if (!is_get_path && !is_post_path) return answer_error(s, c, r, 404, "no such endpoint");
    if ((is_get_path && !get) || (is_post_path && !post)) return answer_error(s, c, r, 405, "method not allowed");
    if (strcmp(url, "/health") && !authorized(s, c))
        return answer_error(s, c, r, 401, "a valid API key is needed: Authorization: Bearer KEY");
    if (get) return handle_get(s, c, r, url);
    const bool wants_classify = !strcmp(url, "/predict") || !strcmp(url, "/rerank"), wants_qa = !strcmp(url, "/v1/qa");
    if (wants_classify != s->classify || wants_qa != s->qa) {
        char msg[160];
        snprintf(msg, sizeof msg, "this server runs --task %s: %s needs --task %s", s->o.task, url,
                 wants_classify ? "classify" : wants_qa ? "qa" : "embed");
        return answer_error(s, c, r, 400, msg);
    }
    if (!strcmp(url, "/predict")) return handle_predict(s, c, r);
    if (!strcmp(url, "/rerank")) return handle_rerank(s, c, r);
    if (wants_qa) return handle_qa(s, c, r);
    return handle_embeddings(s, c, r, !strcmp(url, "/embed") ? SERVE_TEI_EMBED : SERVE_OPENAI_EMBEDDINGS);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state) {
    Server *s = cls;
    Request *r = *state;
    if (!r) {   /* the headers: refuse a declared body that is too large before reading it */
        *state = r = xcalloc(1, sizeof *r);
        r->t0 = now_seconds();
        atomic_fetch_add(&s->active, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoll(cl, NULL, 10) > s->o.max_body_bytes) {
            char msg[128];
            snprintf(msg, sizeof msg, "the body is larger than %ld bytes", s->o.max_body_bytes);
            return answer_error(s, c, r, 413, msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {   /* a chunk of the body */
        if (r->answered) {
            *upload_size = 0;
            return MHD_YES;
        }
        if (r->len + *upload_size > (size_t)s->o.max_body_bytes) {
            char msg[128];
            snprintf(msg, sizeof msg, "the body is larger than %ld bytes", s->o.max_body_bytes);
            *upload_size = 0;
            return answer_error(s, c, r, 413, msg);
        }
        ARRAY_RESERVE(r->body, r->cap, r->len + *upload_size + 1, 4096);
        memcpy(r->body + r->len, upload, *upload_size);
        r->len += *upload_size, *upload_size = 0;
        return MHD_YES;
    }
    return r->answered ? MHD_YES : dispatch(s, c, r, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode code) {
    Server *s = cls;
    Request *r = *state;
    if (!r) return;
    free(r->body), free(r);
    *state = NULL;
    atomic_fetch_sub(&s->active, 1);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    Server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) atomic_fetch_add(&s->connections, 1);
    else atomic_fetch_sub(&s->connections, 1), serve_batcher_recheck(&s->batcher);   /* one sender fewer */
}

/* The worker's forward: the rows' embeddings. */
static int run_embed(void *ctx, const ServeRow *rows, int n, BertError *err) {
    Server *s = ctx;
    EmbedRow *er = xmalloc(sizeof(EmbedRow) * (size_t)n);
    for (int i = 0; i < n; i++)
        er[i] = (EmbedRow){.ids = rows[i].ids, .length = rows[i].length, .normalize = rows[i].normalize,
                           .out = rows[i].out};
    const int rc = embed_rows(s->em.model, er, n, err);
    free(er);
    return rc;
}

/* The worker's forward: the rows' logits. */
static int run_classify(void *ctx, const ServeRow *rows, int n, BertError *err) {
    Server *s = ctx;
    ClassifyRow *cr = xmalloc(sizeof(ClassifyRow) * (size_t)n);
    for (int i = 0; i < n; i++)
        cr[i] = (ClassifyRow){.ids = rows[i].ids, .types = rows[i].types, .length = rows[i].length,
                              .logits = rows[i].out};
    const int rc = classify_rows(s->em.model, cr, n, err);
    free(cr);
    return rc;
}

/* The worker's forward: the rows' (QA windows') start and end logits. */
static int run_qa(void *ctx, const ServeRow *rows, int n, BertError *err) {
    Server *s = ctx;
    SquadQaRow *qr = xmalloc(sizeof(SquadQaRow) * (size_t)n);
    for (int i = 0; i < n; i++)
        qr[i] = (SquadQaRow){.ids = rows[i].ids, .types = rows[i].types, .length = rows[i].length,
                             .start = rows[i].out, .end = rows[i].out2};
    const int rc = squad_qa_rows(s->em.model, s->em.max_seq, qr, n, err);
    free(qr);
    return rc;
}

/* host:port as a socket address; IPv6 when host has a ':'. */
static int listen_address(const ServeOptions *o, struct sockaddr_storage *a, bool *ipv6, BertError *err) {
    memset(a, 0, sizeof *a);
    if (o->port < 0 || o->port > 65535) return bert_fail(err, "--port %d: not a port (0 to 65535)", o->port);
    *ipv6 = strchr(o->host, ':') != NULL;
    if (*ipv6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)a;
        a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)o->port);
        if (inet_pton(AF_INET6, o->host, &a6->sin6_addr) == 1) return 0;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)a;
        a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)o->port);
        if (inet_pton(AF_INET, o->host, &a4->sin_addr) == 1) return 0;
    }
    return bert_fail(err, "--host %s: not an IPv4 or IPv6 address", o->host);
}

static int check_options(const ServeOptions *o, BertError *err) {
    if (o->bf16 && o->int8) return bert_fail(err, "give at most one of --bf16 and --int8");
    if (strcmp(o->task, "embed") && strcmp(o->task, "classify") && strcmp(o->task, "qa"))
        return bert_fail(err, "--task %s: embed, classify or qa", o->task);
    if (!strcmp(o->task, "qa") && (o->doc_stride < 1 || o->max_query_length < 1 || o->n_best_size < 1 ||
                                   o->max_answer_length < 1))
        return bert_fail(err, "--doc_stride, --max_query_length, --n_best_size and --max_answer_length must be positive");
    if (o->max_batch_tokens < 1 || o->max_batch_rows < 1 || o->max_queue < 1 || o->max_inputs < 1 ||
        o->max_wait_ms < 0 || o->max_body_bytes < 1 || o->timeout_s < 1 || o->max_connections < 1)
        return bert_fail(err, "the limits (--max_batch_tokens, --max_queue, ...) must be positive");
    return 0;
}

static void free_labels(Server *s) {
    for (int k = 0; k < s->num_labels; k++) free(s->labels[k]);
    free(s->labels);
    s->labels = NULL, s->num_labels = 0;
}

/* The classifier's labels: its config.json's id2label. */
static int classifier_labels(Server *s, BertError *err) {
    char weights[4096], config[4096];
    if (bert_checkpoint_locate(s->o.init_checkpoint, s->o.config_file, weights, sizeof weights, config, sizeof config,
                               err) != 0)
        return -1;
    if (!config[0]) return bert_fail(err, "%s: no config.json with the labels (id2label)", s->o.init_checkpoint);
    return bert_config_labels(config, &s->labels, &s->num_labels, err);
}

static int server_open(Server *s, const ServeOptions *o, BertError *err) {
    memset(s, 0, sizeof *s);
    s->o = *o;
    if (check_options(o, err) != 0) return -1;
    s->classify = !strcmp(o->task, "classify"), s->qa = !strcmp(o->task, "qa");
    /* QA's windows run padded to the full length (as bert squad's): fewer rows fit the budget */
    const int qa_seq = o->max_seq_length > 0 ? o->max_seq_length : 384;
    int rows = o->max_batch_rows;
    if (s->qa && o->max_batch_tokens / qa_seq < rows) rows = o->max_batch_tokens / qa_seq > 1 ? o->max_batch_tokens / qa_seq : 1;
    const InferModelOptions mo = {.init_checkpoint = o->init_checkpoint, .config_file = o->config_file,
                                  .vocab_file = o->vocab_file, .do_lower_case = o->do_lower_case, .bf16 = o->bf16,
                                  .int8 = o->int8,
                                  .max_seq_length = s->qa ? qa_seq : o->max_seq_length};
    if (s->classify && classifier_labels(s, err) != 0) return -1;
    const BertHeads heads = {s->classify ? BERT_HEADS_CLASSIFIER : s->qa ? BERT_HEADS_QA : BERT_HEADS_NONE,
                             s->num_labels};
    if (infer_model_open(&mo, heads, rows, &s->em, err) != 0) return free_labels(s), -1;
    if (s->em.heads_initialised) {   /* a random head would answer with confidence */
        infer_model_close(&s->em), free_labels(s);
        return bert_fail(err, s->qa ? "%s has no question-answering weights (qa_outputs): not a fine-tuned SQuAD model"
                                    : "%s has no classifier weights: not a fine-tuned classifier", o->init_checkpoint);
    }
    if (s->qa) {
        s->qa_opt = squad_infer_default_options();
        s->qa_opt.features = (SquadFeatureOptions){s->em.max_seq, o->doc_stride, o->max_query_length};
        s->qa_opt.predict = (SquadPredictOptions){o->n_best_size, o->max_answer_length, o->version_2_with_negative,
                                                  o->null_score_diff_threshold};
        if (s->em.max_seq <= o->max_query_length + 3) {
            infer_model_close(&s->em);
            return bert_fail(err, "--max_seq_length %d must exceed --max_query_length %d + 3", s->em.max_seq,
                             o->max_query_length);
        }
        s->qa_tok = squad_infer_tokenizer(s->em.vocab, o->do_lower_case);
    }
    s->hidden = bert_model_config(s->em.model)->hidden_size;
    if (o->model_name) snprintf(s->model_name, sizeof s->model_name, "%s", o->model_name);
    else {   /* the folder's name, as a model id */
        char path[4096];
        snprintf(path, sizeof path, "%s", o->init_checkpoint);
        for (size_t n = strlen(path); n > 1 && path[n - 1] == '/'; n--) path[n - 1] = '\0';
        const char *base = strrchr(path, '/');
        snprintf(s->model_name, sizeof s->model_name, "%.255s", base ? base + 1 : path);
    }
    serve_metrics_init(&s->metrics);
    const ServeBatchOptions bo = {.max_queue = o->max_queue, .max_rows = rows,
                                  .max_tokens = o->max_batch_tokens, .max_wait_s = o->max_wait_ms / 1000.0,
                                  .senders = &s->connections};
    serve_batcher_start(&s->batcher, &bo, s->classify ? run_classify : s->qa ? run_qa : run_embed, s, &s->metrics);
    return 0;
}

static void server_close(Server *s) {
    serve_batcher_stop(&s->batcher);
    serve_metrics_destroy(&s->metrics);
    tokenizer_free(s->qa_tok);
    infer_model_close(&s->em);
    free_labels(s);
}

/* SIGTERM: no new connections; the requests in flight get their answers (up to drain_s). */
static void drain(Server *s, struct MHD_Daemon *d) {
    const MHD_socket fd = MHD_quiesce_daemon(d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
    const double until = now_seconds() + s->o.drain_s;
    while (atomic_load(&s->active) > 0 && now_seconds() < until) {
        struct timespec ms = {0, 5000000};
        nanosleep(&ms, NULL);
    }
    if (atomic_load(&s->active) > 0)
        fprintf(stderr, "bert serve: %d requests still open after %.0f s: closing them\n", atomic_load(&s->active),
                s->o.drain_s);
}

int serve_run(const ServeOptions *o, BertError *err) {
    struct sockaddr_storage addr;
    bool ipv6 = false;
    if (listen_address(o, &addr, &ipv6, err) != 0) return -1;
    /* the signals are taken by sigwait below: every thread started from here blocks them */
    sigset_t stop;
    sigemptyset(&stop), sigaddset(&stop, SIGTERM), sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);   /* a client gone mid-answer is that connection's error only */
    Server *s = xmalloc(sizeof *s);
    if (server_open(s, o, err) != 0) {
        free(s);
        return -1;
    }
    const unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC |
                           MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)o->max_connections, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!d) {
        server_close(s), free(s);
        return bert_fail(err, "cannot listen on %s port %d (in use, or not this machine's address?)", o->host, o->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "bert serve: listening on http://%s%s%s:%d (task %s, model %s, %s, max %d tokens per text)\n",
            ipv6 ? "[" : "", o->host, ipv6 ? "]" : "", info ? info->port : o->port, o->task, s->model_name,
            bert_precision_name(bert_precision(s->em.model)), s->em.max_seq);
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "bert serve: %s: finishing the requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    drain(s, d);
    MHD_stop_daemon(d);
    server_close(s), free(s);
    fprintf(stderr, "bert serve: stopped\n");
    return 0;
}
