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

#endif
