/* `bert classify`: fine-tuning, evaluation and predictions for sequence classification on
 * any CSV / TSV / JSONL data (tasks/classify.h), with HuggingFace run_classification.py's
 * flags: single-label (softmax cross-entropy), regression (--do_regression: one output, mean
 * squared error) or multi-label (--multi_label: a sigmoid per label, binary cross-entropy;
 * a label applies where its probability is above 0.5), on the common fine-tuning loop
 * (train/finetune.h) and `bert glue`'s batches and features (tasks/glue_run.h). */
#ifndef BERT_TASKS_CLASSIFY_RUN_H
#define BERT_TASKS_CLASSIFY_RUN_H

#include <stdbool.h>

#include "core/common.h"
#include "tasks/classify.h"
#include "train/finetune.h"

typedef struct {
    FinetuneArgs ft;              /* the fine-tuning flags every task shares */
    const char *train_file, *validation_file, *test_file;
    const char *format;           /* NULL: each file's extension */
    ClsColumns columns;           /* text and label columns, the problem, the multi-label separator */
    bool problem_given;           /* --do_regression or --multi_label said; else (no training) the model's */
    const char *labels;           /* "a,b,c": the labels and their order; NULL: the training file's sorted
                                     (training), else the --init_checkpoint model's id2label */
} ClassifyOptions;

typedef struct {
    FinetuneTrainResult train;
    ClsProblem problem;
    int num_labels;
    bool evaluated;
    ClsScores dev;
    long eval_examples, predicted;
    double eval_seconds;
    char predictions[4096 + 32];  /* the predictions file ("" if none) */
    char model_dir[4096];         /* where the fine-tuned model went ("" if not saved) */
} ClassifyResult;

/* run_classification.py's defaults: FinetuneArgs' with sequences of 128, prediction batches of 32. */
void classify_default_options(ClassifyOptions *o);
/* Writes to ft.output_dir: the model (config.json with id2label / label2id, problem_type and
 * BertForSequenceClassification, as transformers writes them), eval_results.json (the
 * validation file's scores, classify.h) and the test file's predictions: predict_results.tsv
 * (index, prediction, score: the predicted label's probability; multi-label: the labels
 * joined by the separator and each one's probability) or, for a JSONL test file,
 * predict_results.jsonl ({"index", "label" (a list for multi-label) or "value", "scores": a
 * probability per label name}). */
int classify_run(const ClassifyOptions *o, ClassifyResult *r, BertError *err);

#endif
