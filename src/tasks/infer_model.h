/* A model folder (or checkpoint file) loaded for inference only: the weights with the given
 * heads, packed, forward-only (no activations kept for a backward; the layers share theirs),
 * its vocabulary (whose size must be the model's) and tokenizer. What `bert embed` computes
 * with, and `bert serve` (serve/). */
#ifndef BERT_TASKS_INFER_MODEL_H
#define BERT_TASKS_INFER_MODEL_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

typedef struct {
    const char *init_checkpoint;   /* a model folder (weights, config.json, vocab.txt) or a weights file */
    const char *config_file;       /* config.json when init_checkpoint is a file (NULL: the folder's) */
    const char *vocab_file;        /* NULL: the folder's vocab.txt */
    bool do_lower_case, bf16, int8;   /* int8: the encoder's products in int8 (inference only) */
    int max_seq_length;            /* <= 0: sentence-transformers' 256, within the model's positions */
} InferModelOptions;

typedef struct {
    BertModel *model;
    Vocab *vocab;
    Tokenizer *tok;
    int max_seq;                   /* o->max_seq_length, or its default */
    int heads_initialised;         /* head tensors the checkpoint lacked (drawn at random) */
} InferModel;

/* Room for batches of up to max_batch sequences of max_seq tokens. */
int infer_model_open(const InferModelOptions *o, BertHeads heads, int max_batch, InferModel *m, BertError *err);
void infer_model_close(InferModel *m);

#endif
