/* Inference timing on real length distributions: see infer_bench.h. */
#include "tasks/infer_bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/embed.h"
#include "tasks/glue.h"
#include "tasks/squad.h"

int glue_dev_lengths(const char *task, const char *data_dir, const Tokenizer *tok, int max_seq_length,
                     int32_t **lengths, int *n, BertError *err) {
    const GlueTask *t = glue_task(task);
    if (!t) return bert_fail(err, "no GLUE task '%s' (%s)", task, glue_task_names());
    GlueExamples e;
    GlueFeatures f;
    if (glue_read(t, data_dir, GLUE_DEV, &e, err) != 0) return -1;
    int rc = glue_features(&e, tok, max_seq_length, &f, err);
    if (rc == 0) {
        *n = f.n, *lengths = xmalloc(sizeof(int32_t) * (size_t)f.n);
        memcpy(*lengths, f.length, sizeof(int32_t) * (size_t)f.n);
        glue_features_free(&f);
    }
    glue_examples_free(&e);
    return rc;
}

int text_file_lengths(const char *path, const Tokenizer *tok, int max_seq_length, int32_t **lengths, int *n,
                      BertError *err) {
    char *data;
    size_t len;
    if (read_file(path, &data, &len, err) != 0) return -1;
    int32_t *ids = xmalloc(sizeof(int32_t) * (size_t)max_seq_length);
    TokenList scratch;
    token_list_init(&scratch);
    size_t cap = 0;
    *n = 0, *lengths = NULL;
    int rc = 0;
    for (char *p = data, *end = data + len; rc == 0 && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        const size_t line = (size_t)((nl ? nl : end) - p) - (nl && nl > p && nl[-1] == '\r');
        if (line > 0) {
            const int got = embed_encode(tok, &scratch, p, line, max_seq_length, ids, NULL, err);
            if (got < 0) rc = -1;
            else {
                ARRAY_RESERVE(*lengths, cap, (size_t)*n + 1, 256);
                (*lengths)[(*n)++] = got;
            }
        }
        p = nl ? nl + 1 : end;
    }
    if (rc == 0 && *n == 0) rc = bert_fail(err, "%s: no texts (one a line)", path);
    if (rc != 0) free(*lengths), *lengths = NULL, *n = 0;
    token_list_free(&scratch), free(ids), free(data);
    return rc;
}

int squad_feature_lengths(const char *path, const Tokenizer *tok, int max_seq_length, int32_t **lengths, int *n,
                          BertError *err) {
    SquadData d;
    SquadFeatures f = {0};
    const SquadReadOptions ro = {.is_training = false};
    if (squad_read(path, &ro, &d, err) != 0) return -1;
    SquadFeatureOptions fo = squad_feature_default_options();
    fo.max_seq_length = max_seq_length;
    int rc = squad_convert(&d, tok, &fo, &f, err);
    if (rc == 0) {
        *n = f.n_features, *lengths = xmalloc(sizeof(int32_t) * (size_t)(f.n_features + 1));
        for (int i = 0; i < f.n_features; i++) (*lengths)[i] = f.features[i].n_tokens;
    }
    squad_features_free(&f);
    squad_data_free(&d);
    return rc;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of sorted[0..n) (nearest rank). */
static double quantile(const double *sorted, int n, double q) {
    int k = (int)ceil(q * n) - 1;
    return sorted[k < 0 ? 0 : k >= n ? n - 1 : k];
}

int infer_bench_run(BertModel *m, const int32_t *lengths, int n, int batch, int max_seq_length, InferMode mode,
                    int warmup, InferTiming *t, BertError *err) {
    memset(t, 0, sizeof *t);
    const int vocab = bert_model_config(m)->vocab_size;
    const int batches = (n + batch - 1) / batch;
    int32_t *ids = xcalloc((size_t)batch * max_seq_length, 4), *mask = xcalloc((size_t)batch * max_seq_length, 4);
    int32_t *types = xcalloc((size_t)batch * max_seq_length, 4);
    double *ms = xmalloc(sizeof(double) * (size_t)(batches + 1));
    bert_set_unpadding(m, mode == INFER_PACKED);
    int rc = 0;
    for (int k = -warmup; rc == 0 && k < batches; k++) {
        const int first = (k < 0 ? k + warmup : k) % batches * batch;   /* warmup replays the first batches */
        const int b = n - first < batch ? n - first : batch;
        int T = 1;
        for (int i = 0; i < b; i++) T = lengths[first + i] > T ? lengths[first + i] : T;
        if (mode == INFER_PADDED) T = max_seq_length;
        for (int i = 0; i < b; i++)
            for (int p = 0; p < T; p++) {
                const bool real = p < lengths[first + i];
                ids[(size_t)i * T + p] = real ? 5 + (int32_t)((uint32_t)(first + i) * 2654435761u % (uint32_t)(vocab - 5)) : 0;
                mask[(size_t)i * T + p] = real, types[(size_t)i * T + p] = 0;
            }
        BertBatch bb = {.batch = b, .seq_len = T, .input_ids = ids, .token_type_ids = types, .attention_mask = mask};
        const double t0 = now_seconds();
        if (!isfinite(bert_forward(m, &bb, false, 0))) rc = bert_fail(err, "%s", bert_last_error(m));
        const double dt = now_seconds() - t0;
        if (k < 0) continue;
        ms[k] = 1e3 * dt, t->seconds += dt;
        t->batches++, t->sequences += b, t->tokens_computed += bert_encoder_rows(m);
        for (int i = 0; i < b; i++) t->tokens_real += lengths[first + i];
    }
    if (rc == 0 && t->batches) {
        qsort(ms, (size_t)t->batches, sizeof(double), by_value);
        t->p50_ms = quantile(ms, t->batches, 0.5), t->p90_ms = quantile(ms, t->batches, 0.9);
        t->p95_ms = quantile(ms, t->batches, 0.95), t->p99_ms = quantile(ms, t->batches, 0.99);
        t->max_ms = ms[t->batches - 1], t->avg_ms = 1e3 * t->seconds / t->batches;
        t->sequences_per_second = t->sequences / t->seconds;
    }
    free(ids), free(mask), free(types), free(ms);
    return rc;
}
