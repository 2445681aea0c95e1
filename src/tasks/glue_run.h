/* `bert glue`: fine-tuning, evaluation and test predictions on one GLUE task, as NVIDIA's
 * run_glue.py (its flags) runs them, for all nine tasks (tasks/glue.h). */
#ifndef BERT_TASKS_GLUE_RUN_H
#define BERT_TASKS_GLUE_RUN_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "tasks/glue.h"

typedef struct {
    const char *task_name, *data_dir, *output_dir;
    const char *init_checkpoint, *config_file, *vocab_file;
    bool do_lower_case, do_train, do_eval, do_predict;
    int max_seq_length, train_batch_size, eval_batch_size, gradient_accumulation_steps;
    double learning_rate, num_train_epochs, warmup_proportion, weight_decay, adam_epsilon;
    long max_steps;            /* > 0: overrides the epochs */
    long train_examples;       /* > 0: train on the first N training rows only (a fixed subset) */
    long seed;
    int threads;
    BertPrecision precision;
    double loss_scale;         /* --fp16: 0 dynamic, > 0 static (NVIDIA's --loss_scale) */
    bool skip_checkpoint;      /* do not save the fine-tuned model */
    const char *json_summary;  /* DLLogger JSON lines */
    long log_freq;
} GlueOptions;

typedef struct {
    const GlueTask *task;
    long steps, train_sequences;
    long skipped_steps;        /* --fp16: steps skipped for an overflow */
    double loss_scale;         /* --fp16: the scale at the end */
    double train_seconds, final_loss;
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
