/* `bert squad`: fine-tuning the span head on SQuAD v1.1 / v2.0 and predicting, as NVIDIA's
 * run_squad.py (its flags): features and post-processing as Google's run_squad.py
 * (tasks/squad.h), AdamW with linear warmup/decay (train/finetune.h), the official metrics
 * after prediction with --do_eval (tasks/squad_eval.h). */
#ifndef BERT_TASKS_SQUAD_RUN_H
#define BERT_TASKS_SQUAD_RUN_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"

typedef struct {
    const char *init_checkpoint, *config_file, *vocab_file;
    bool do_lower_case;
    const char *train_file, *predict_file, *output_dir;
    bool do_train, do_predict, do_eval;
    int train_batch_size, predict_batch_size, gradient_accumulation_steps;
    double learning_rate, num_train_epochs, warmup_proportion, weight_decay, adam_epsilon;
    long max_steps;
    int max_seq_length, doc_stride, max_query_length, n_best_size, max_answer_length;
    bool version_2_with_negative;
    double null_score_diff_threshold;
    /* SQuAD's train set is not always at hand: train on the first N articles of train_file
     * and predict on predict_file's articles from M on (both 0: the whole files); the
     * slices are written to output_dir and named in the log */
    int train_articles, predict_skip_articles;
    long seed;
    int threads;
    BertPrecision precision;
    double loss_scale;         /* --fp16: 0 dynamic, > 0 static (NVIDIA's --loss_scale) */
    bool skip_checkpoint;
    const char *json_summary;
    long log_freq;
} SquadOptions;

typedef struct {
    long train_examples, train_features, answers_not_found, steps, train_sequences;
    long skipped_steps;        /* --fp16: steps skipped for an overflow */
    double loss_scale;         /* --fp16: the scale at the end */
    double train_seconds, final_loss;
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
