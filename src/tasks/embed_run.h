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
    /* Takes each chunk's vectors (n x hidden, in input order) as they are made; 0, or -1 with
     * err (e.g. a failed write), which ends the run. */
    int (*emit)(void *ctx, const float *vectors, int n, int hidden, BertError *err);
    void *emit_ctx;
} EmbedRunOptions;

typedef struct {
    long n;                        /* sentences embedded */
    int hidden;
    long tokens;                   /* the encoder ran */
    double seconds;                /* of the embedding, loading and reading aside */
    size_t nonfinite;              /* weights that are NaN or infinite (a warning for the caller) */
    char nonfinite_tensor[160];    /* the first tensor holding one */
} EmbedRunResult;

/* Every line of `in` is a sentence (lines end as Python's text mode ends them: \n, \r\n or a
 * lone \r); input holding a NUL byte is refused. The input is read, embedded and handed to
 * o->emit a chunk of lines at a time (sorted by length within a chunk for packing), so memory
 * does not grow with the input. */
int embed_run(const EmbedRunOptions *o, FILE *in, EmbedRunResult *r, BertError *err);

#endif
