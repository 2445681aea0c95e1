/* bert serve: a model behind HTTP/1.1 (libmicrohttpd, one thread per connection), its
 * requests batched by one compute worker (serve/batcher.h). Endpoints: --task embed: OpenAI's
 * POST /v1/embeddings, text-embeddings-inference's POST /embed; --task classify: TEI's
 * POST /predict and /rerank; --task qa: POST /v1/qa; all: GET /health, /info, /metrics
 * (docs/serving.md). SIGTERM or SIGINT: stop accepting, answer what is in flight,
 * return 0. */
#ifndef BERT_SERVE_SERVER_H
#define BERT_SERVE_SERVER_H

#include <stdbool.h>

#include "core/common.h"

typedef struct {
    const char *init_checkpoint, *config_file, *vocab_file;
    bool do_lower_case, bf16, int8;   /* int8: the encoder's linear layers in int8, as bert embed --int8 */
    int max_seq_length;           /* <= 0: bert embed's default */
    const char *task;             /* "embed", "classify" or "qa" */
    const char *model_name;       /* /info's and OpenAI's "model"; NULL: the checkpoint's folder name */
    const char *host;             /* an IPv4 or IPv6 address; loopback by default */
    int port;                     /* 0: any free port (the one bound is printed) */
    const char *api_key;          /* NULL: none; else "Authorization: Bearer KEY" on all but /health */
    bool truncate;                /* texts longer than the model: cut (true) or 413 */
    int max_batch_tokens, max_batch_rows, max_wait_ms, max_queue;
    int max_inputs;               /* texts per request */
    long max_body_bytes;          /* request body; more: 413 */
    int timeout_s;                /* an idle or slow connection is closed after this */
    int max_connections;
    double drain_s;               /* on SIGTERM: how long in-flight requests may take */
    /* --task qa: bert squad's (max_seq_length <= 0: its 384) */
    int doc_stride, max_query_length, n_best_size, max_answer_length;
    bool version_2_with_negative;
    double null_score_diff_threshold;
} ServeOptions;

ServeOptions serve_default_options(void);
/* Loads the model, serves until SIGTERM/SIGINT, drains. 0, or -1 with err (start-up errors). */
int serve_run(const ServeOptions *o, BertError *err);

#endif
