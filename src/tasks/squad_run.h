/* `bert squad`: fine-tuning the span head on SQuAD v1.1 / v2.0 and predicting, as NVIDIA's
 * run_squad.py (its flags): features and post-processing as Google's run_squad.py
 * (tasks/squad.h), AdamW with linear warmup/decay (train/finetune.h), the official metrics
 * after prediction with --do_eval (tasks/squad_eval.h). */
#ifndef BERT_TASKS_SQUAD_RUN_H
#define BERT_TASKS_SQUAD_RUN_H

#include <stdbool.h>

#include "core/common.h"
#include "train/finetune.h"

typedef struct {
    FinetuneArgs ft;           /* the fine-tuning flags every task shares (eval_batch_size: --predict_batch_size) */
    const char *train_file, *predict_file;
    int doc_stride, max_query_length, n_best_size, max_answer_length;
    bool version_2_with_negative;
    double null_score_diff_threshold;
    /* SQuAD's train set is not always at hand: train on the first N articles of train_file
     * and predict on predict_file's articles from M on (both 0: the whole files); the
     * slices are written to output_dir and named in the log */
    int train_articles, predict_skip_articles, predict_articles;   /* 0: all / none skipped / all the rest */
} SquadOptions;

typedef struct {
    long train_examples, train_features, answers_not_found;
    FinetuneTrainResult train;   /* steps, features, time, loss; fp16's skipped steps and scale */
    long predict_examples, predict_features, without_non_null;
    double predict_seconds;
    bool evaluated;
    double exact, f1;          /* official metrics (v1.1: exact_match, f1; v2.0: exact, f1) */
    char metrics_json[2048];
    char model_dir[4096];
} SquadResult;

void squad_default_options(SquadOptions *o);
int squad_run(const SquadOptions *o, SquadResult *r, BertError *err);

#endif
