/* `bert glue --do_predict --predict_file -`: a fine-tuned GLUE model over texts read from a
 * stream, one example a line (the text, or text_a TAB text_b for a pair task), its predictions
 * written as they come in bert glue's submission format ("index\tprediction": the label, or
 * STS-B's value), the lines numbered from 0. The same features (tasks/glue.h) and batches of
 * eval_batch_size rows as `bert glue --do_predict` runs over test.tsv, so the same lines give
 * the same file. */
#ifndef BERT_TASKS_GLUE_STREAM_H
#define BERT_TASKS_GLUE_STREAM_H

#include <stdio.h>

#include "core/common.h"
#include "tasks/glue.h"
#include "tasks/infer_model.h"

typedef struct {
    InferModelOptions model;   /* its max_seq_length is the features' (bert glue's 128 by default) */
    const GlueTask *task;
    int batch;                 /* rows per forward, and lines read before their predictions go out */
} GlueStreamOptions;

/* Reads `in` to its end. Errors (-1, err names the line): a line that is empty, not UTF-8, or
 * without the task's one TAB (pair tasks) / with one (single-text tasks); a model without the
 * task's classifier weights. *lines: the examples predicted; *precision: the model's
 * (bert_precision_name), "" if it did not open. */
int glue_predict_stream(const GlueStreamOptions *o, FILE *in, FILE *out, long *lines, const char **precision,
                        BertError *err);

#endif
