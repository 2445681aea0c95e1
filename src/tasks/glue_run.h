/* `bert glue`: fine-tuning, evaluation and test predictions on one GLUE task, as NVIDIA's
 * run_glue.py (its flags) runs them, for all nine tasks (tasks/glue.h). */
#ifndef BERT_TASKS_GLUE_RUN_H
#define BERT_TASKS_GLUE_RUN_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "tasks/glue.h"
#include "train/finetune.h"
#include "train/logger.h"

typedef struct {
    FinetuneArgs ft;           /* the fine-tuning flags every task shares */
    const char *task_name, *data_dir;
    long train_examples;       /* > 0: train on the first N training rows only (a fixed subset) */
} GlueOptions;

typedef struct {
    const GlueTask *task;
    FinetuneTrainResult train;   /* steps, sequences, time, loss; fp16's skipped steps and scale */
    bool evaluated;
    GlueScores dev;
    long eval_sequences;
    double eval_seconds;
    long predicted;            /* test rows written */
    char model_dir[4096];      /* where the fine-tuned model went ("" if not saved) */
} GlueResult;

void glue_default_options(GlueOptions *o);
int glue_run(const GlueOptions *o, GlueResult *r, BertError *err);

/* What `bert glue` and `bert classify` (tasks/classify_run.h) share: batches of feature rows,
 * each as long as its longest row, and the classifier's logits over every row. */
typedef struct {
    int32_t *ids, *types, *mask;   /* [max_batch, max_seq_length] */
} GlueBatchInputs;

void glue_batch_inputs_alloc(GlueBatchInputs *b, int max_batch, int max_seq_length);
void glue_batch_inputs_free(GlueBatchInputs *b);
/* Rows rows[0..n) of the features as one batch without labels (the caller adds them); its
 * arrays are b's. */
BertBatch glue_batch(const GlueFeatures *f, const int *rows, int n, GlueBatchInputs *b);
/* The classifier head's logits [f->n, num_labels] of every row, in order, in batches of
 * `batch` rows; the time taken in *seconds; a progress line with the time left on `log`
 * (NULL: none). */
int glue_predict_logits(BertModel *m, const GlueFeatures *f, int batch, int num_labels, GlueBatchInputs *b,
                        float *logits, double *seconds, Logger *log, BertError *err);

#endif
