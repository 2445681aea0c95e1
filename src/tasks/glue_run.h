/* `bert glue`: fine-tuning, evaluation and test predictions on one GLUE task, as NVIDIA's
 * run_glue.py (its flags) runs them, for all nine tasks (tasks/glue.h). */
#ifndef BERT_TASKS_GLUE_RUN_H
#define BERT_TASKS_GLUE_RUN_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "tasks/glue.h"
#include "train/finetune.h"

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

#endif
