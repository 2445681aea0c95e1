/* `bert embed`'s run: a model folder (or checkpoint file) and its vocabulary loaded for
 * inference only, sentences read one per line, their embeddings computed (tasks/embed.h). */
#ifndef BERT_TASKS_EMBED_RUN_H
#define BERT_TASKS_EMBED_RUN_H

#include <stdbool.h>
#include <stdio.h>

#include "core/common.h"

typedef struct {
    const char *init_checkpoint;   /* a model folder (model.safetensors, config.json, vocab.txt) or file */
    const char *config_file;       /* config.json when init_checkpoint is a file (NULL: the folder's) */
    const char *vocab_file;        /* NULL: the folder's vocab.txt */
    bool do_lower_case, normalize, bf16, int8;   /* int8: BERT_INT8 (bf16 wins if both) */
    int max_seq_length;            /* <= 0: sentence-transformers' 256, within the model's positions */
    int batch_size;
    bool strict;                   /* refuse weights holding NaN or Inf (else r->nonfinite says how many) */
} EmbedRunOptions;

typedef struct {
    float *vectors;                /* n x hidden, in input order; the caller frees it */
    int n, hidden;
    long tokens;                   /* the encoder ran */
    double seconds;                /* of the embedding, loading and reading aside */
    size_t nonfinite;              /* weights that are NaN or infinite (a warning for the caller) */
    char nonfinite_tensor[160];    /* the first tensor holding one */
} EmbedRunResult;

/* Every line of `in` (without its \n or \r\n) is a sentence; input holding a NUL byte is
 * refused. r->vectors is NULL on an error. */
int embed_run(const EmbedRunOptions *o, FILE *in, EmbedRunResult *r, BertError *err);

#endif
