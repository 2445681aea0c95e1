/* Sentence embeddings as sentence-transformers computes them for BERT models such as
 * all-MiniLM-L6-v2: [CLS] tokens [SEP] cut to max_seq_length, the encoder's last layer,
 * the mean over the sentence's tokens ([CLS] and [SEP] included, padding not), then L2
 * normalisation (its Normalize module; optional).
 *
 * Fast: sentences are batched in order of length (so a batch holds similar lengths) and the
 * encoder runs packed (bert_set_unpadding: no padding row is ever computed); the output is
 * in input order. */
#ifndef BERT_TASKS_EMBED_H
#define BERT_TASKS_EMBED_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "text/tokenizer.h"

typedef struct {
    int max_seq_length;   /* sentence-transformers' max_seq_length (all-MiniLM-L6-v2: 256) */
    int batch_size;
    bool normalize;       /* L2-normalise (the model's Normalize module) */
    bool sort_by_length;  /* batch sentences of similar length (output order unchanged) */
} EmbedOptions;

/* out: n * hidden_size floats. The model needs max_batch >= batch_size and max_seq >=
 * max_seq_length (bert_model_create_with_heads with BERT_HEADS_NONE). *tokens (optional):
 * the tokens the encoder ran, for throughput reports. */
int embed_sentences(BertModel *m, const Tokenizer *tok, const char *const *sentences, int n, const EmbedOptions *o,
                    float *out, long *tokens, BertError *err);

/* One sentence as the encoder reads it: [CLS] its word pieces [SEP], cut to max_seq tokens
 * (ids: max_seq entries). Returns the length kept, or -1 (err) for a vocabulary without
 * [CLS] / [SEP]; *full_length (optional): the length before the cut. scratch: the caller's
 * (one per thread: a Tokenizer may be shared between threads). */
int embed_encode(const Tokenizer *tok, TokenList *scratch, const char *text, size_t len, int max_seq, int32_t *ids,
                 int *full_length, BertError *err);

/* One encoded sentence of a batch and where its vector goes (hidden_size floats). */
typedef struct {
    const int32_t *ids;
    int length;
    bool normalize;
    float *out;
} EmbedRow;

/* One packed forward over b rows (b <= the model's max_batch, lengths <= its max_seq) and
 * their mean-pooled vectors: what embed_sentences does per batch, so a server that batches
 * sentences its own way gets the same vectors. */
int embed_rows(BertModel *m, const EmbedRow *rows, int b, BertError *err);

#endif
