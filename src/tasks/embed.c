/* Mean-pooled sentence embeddings: see embed.h. */
#include "tasks/embed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *ids;     /* [n, max_seq] token ids, [CLS] ... [SEP] */
    int32_t *length;  /* [n] */
} Encoded;

int embed_encode(const Tokenizer *tok, TokenList *scratch, const char *text, size_t len, int max_seq, int32_t *ids,
                 int *full_length, BertError *err) {
    const Vocab *v = tokenizer_vocab(tok);
    const int cls = vocab_lookup(v, "[CLS]", 5), sep = vocab_lookup(v, "[SEP]", 5);
    if (cls < 0 || sep < 0) return bert_fail(err, "the vocabulary has no [CLS] or [SEP]");
    if (max_seq < 2) return bert_fail(err, "embed: max_seq_length >= 2 needed");
    tokenize(tok, text, len, scratch);
    const int keep = scratch->n < max_seq - 2 ? scratch->n : max_seq - 2;   /* truncation, as HF's tokenizer */
    ids[0] = cls;
    for (int k = 0; k < keep; k++) ids[1 + k] = scratch->tokens[k].id;
    ids[keep + 1] = sep;
    if (full_length) *full_length = scratch->n + 2;
    return keep + 2;
}

static int encode_all(const Tokenizer *tok, const char *const *s, int n, int max_seq, Encoded *e, BertError *err) {
    e->ids = xcalloc((size_t)n * max_seq, sizeof(int32_t)), e->length = xcalloc((size_t)n, sizeof(int32_t));
    TokenList l;
    token_list_init(&l);
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        const int len = embed_encode(tok, &l, s[i], strlen(s[i]), max_seq, e->ids + (size_t)i * max_seq, NULL, err);
        if (len < 0) rc = -1;
        else e->length[i] = len;
    }
    token_list_free(&l);
    return rc;
}

static int by_length(const void *a, const void *b, void *lengths) {
    const int32_t *len = lengths;
    const int x = *(const int *)a, y = *(const int *)b;
    return len[x] != len[y] ? (len[x] < len[y] ? -1 : 1) : (x < y ? -1 : x > y);
}

/* Mean over the sentence's rows, then (optionally) divided by its L2 norm. */
static void pool(const BertModel *m, int s, int length, int H, bool normalize, float *out) {
    double *acc = xcalloc((size_t)H, sizeof(double));
    float *row = xmalloc(sizeof(float) * (size_t)H);
    for (int t = 0; t < length; t++) {
        bert_read_token_output(m, s, t, row);
        for (int h = 0; h < H; h++) acc[h] += row[h];
    }
    free(row);
    double norm = 0;
    for (int h = 0; h < H; h++) acc[h] /= length, norm += acc[h] * acc[h];
    norm = sqrt(norm);
    /* sentence-transformers' Normalize: F.normalize, eps 1e-12 */
    const double scale = normalize ? 1.0 / (norm > 1e-12 ? norm : 1e-12) : 1.0;
    for (int h = 0; h < H; h++) out[h] = (float)(acc[h] * scale);
    free(acc);
}

int embed_rows(BertModel *m, const EmbedRow *rows, int b, BertError *err) {
    const int H = bert_model_config(m)->hidden_size;
    int len = 1;
    for (int i = 0; i < b; i++) len = rows[i].length > len ? rows[i].length : len;
    int32_t *ids = xcalloc((size_t)b * len, sizeof(int32_t)), *mask = xcalloc((size_t)b * len, sizeof(int32_t));
    int32_t *types = xcalloc((size_t)b * len, sizeof(int32_t));
    for (int i = 0; i < b; i++) {
        memcpy(ids + (size_t)i * len, rows[i].ids, sizeof(int32_t) * rows[i].length);
        for (int t = 0; t < len; t++) mask[(size_t)i * len + t] = t < rows[i].length;
    }
    bert_set_unpadding(m, true);
    BertBatch batch = {.batch = b, .seq_len = len, .input_ids = ids, .token_type_ids = types, .attention_mask = mask};
    int rc = 0;
    if (!isfinite(bert_forward(m, &batch, false, 0))) rc = bert_fail(err, "embed: %s", bert_last_error(m));
    for (int i = 0; rc == 0 && i < b; i++) pool(m, i, rows[i].length, H, rows[i].normalize, rows[i].out);
    free(ids), free(mask), free(types);
    return rc;
}

int embed_sentences(BertModel *m, const Tokenizer *tok, const char *const *sentences, int n, const EmbedOptions *o,
                    float *out, long *tokens, BertError *err) {
    const int H = bert_model_config(m)->hidden_size, T = o->max_seq_length, B = o->batch_size;
    if (T < 2 || B < 1) return bert_fail(err, "embed: max_seq_length >= 2 and batch_size >= 1 needed");
    Encoded e = {NULL, NULL};
    if (encode_all(tok, sentences, n, T, &e, err) != 0) {
        free(e.ids), free(e.length);
        return -1;
    }
    int *order = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) order[i] = i;
    if (o->sort_by_length) qsort_r(order, (size_t)n, sizeof(int), by_length, e.length);
    EmbedRow *rows = xmalloc(sizeof(EmbedRow) * (size_t)B);
    int rc = 0;
    if (tokens) *tokens = 0;
    for (int start = 0; rc == 0 && start < n; start += B) {
        const int b = n - start < B ? n - start : B;
        for (int i = 0; i < b; i++) {
            const int s = order[start + i];
            rows[i] = (EmbedRow){.ids = e.ids + (size_t)s * T, .length = e.length[s], .normalize = o->normalize,
                                 .out = out + (size_t)s * H};
            if (tokens) *tokens += e.length[s];
        }
        rc = embed_rows(m, rows, b, err);
    }
    free(rows), free(order), free(e.ids), free(e.length);
    return rc;
}
