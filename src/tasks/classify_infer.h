/* Sequence classification at inference (a BertForSequenceClassification model, e.g. one
 * `bert glue` fine-tuned): texts or pairs encoded as GLUE's features (tasks/glue.h's
 * glue_features: [CLS] a [SEP] b [SEP], the pair cut as Google's _truncate_seq_pair cuts it),
 * one packed forward over rows of any lengths, the logits, their softmax. For a server that
 * batches requests its own way (serve/): the same features and forward as `bert glue
 * --do_predict`. */
#ifndef BERT_TASKS_CLASSIFY_INFER_H
#define BERT_TASKS_CLASSIFY_INFER_H

#include <stdint.h>

#include "core/common.h"
#include "model/bert.h"

typedef struct {
    const int32_t *ids, *types;   /* length entries: a glue_features row */
    int length;
    float *logits;                /* num_labels floats, written */
} ClassifyRow;

/* One forward over n rows (n <= the model's max_batch, lengths <= its max_seq); the model has
 * the CLASSIFIER heads. 0, or -1 with err. */
int classify_rows(BertModel *m, const ClassifyRow *rows, int n, BertError *err);

/* p = softmax(logits), in double internally (n >= 1). */
void classify_softmax(const float *logits, int n, float *p);

#endif
