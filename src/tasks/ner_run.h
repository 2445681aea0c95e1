/* `bert ner`: fine-tuning, evaluation and predictions for token classification (named
 * entities) on CoNLL files, as HuggingFace's run_ner.py runs them (its flags and data
 * conventions: tasks/ner.h), on the common fine-tuning loop (train/finetune.h). */
#ifndef BERT_TASKS_NER_RUN_H
#define BERT_TASKS_NER_RUN_H

#include <stdbool.h>

#include "core/common.h"
#include "tasks/ner.h"
#include "train/finetune.h"

typedef struct {
    FinetuneArgs ft;              /* the fine-tuning flags every task shares */
    const char *train_file, *validation_file, *test_file;
    const char *labels;           /* a file of labels, one a line; NULL: the training file's tags (training), else
                                     the --init_checkpoint folder's config.json id2label */
    bool label_all_tokens;        /* every word piece labelled (B-X -> I-X after the first), not the first only */
    NerMetricMode metric;         /* seqeval's default mode (run_ner.py's), or strict IOB2 / IOBES */
} NerOptions;

typedef struct {
    FinetuneTrainResult train;
    int num_labels;
    bool evaluated, test_scored;  /* test_scored: --do_predict on a test file with every word tagged */
    NerScores dev, test;
    long eval_sentences, predicted_sentences;
    double eval_seconds;
    char model_dir[4096];         /* where the fine-tuned model went ("" if not saved) */
} NerResult;

/* run_ner.py's defaults: FinetuneArgs' with sequences of 128, prediction batches of 32. */
void ner_default_options(NerOptions *o);
/* Writes to ft.output_dir: the model (model.safetensors with classifier.weight/bias,
 * config.json with id2label / label2id and BertForTokenClassification, the tokenizer's
 * files), eval_results.json (precision, recall, f1, accuracy of the validation file),
 * predictions.txt (the test file in CoNLL format, "word predicted-tag" lines, a blank line
 * between sentences; a word left without a word piece by --max_seq_length is predicted O) and,
 * when the test file is tagged, predict_results.json. Metrics count the words that have a
 * first piece, as run_ner.py's (its -100 labels mark the rest). */
int ner_run(const NerOptions *o, NerResult *r, BertError *err);
/* The scores as eval_results.json holds them (caller frees). */
char *ner_scores_json(const NerScores *s);

#endif
