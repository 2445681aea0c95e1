/* GLUE: the nine tasks' TSV files as HuggingFace's and NVIDIA's processors read them, their
 * features (Google's run_classifier.py convert_single_example), and their metrics.
 *
 * Files: the standard GLUE layout, DATA_DIR/{train,dev,test}.tsv (MNLI: dev_matched.tsv,
 * dev_mismatched.tsv for "mnli-mm", test_matched / test_mismatched), read as Python's
 * csv.reader(delimiter="\t", quotechar=None) reads them: one row per line, cells split at
 * tabs, quotes are ordinary characters. Which rows are headers and which columns hold the
 * texts and the label is each task's convention (the table in glue.c). A row with too few
 * cells or a label outside the task's set is an error naming the file and line.
 *
 * Features: [CLS] a [SEP] (b [SEP]), segment 0 for a and its [SEP], 1 for b and its [SEP];
 * the pair truncated to max_seq_length - 3 by dropping the last token of the longer one
 * (_truncate_seq_pair), a single text to max_seq_length - 2. Each row's real length is kept,
 * so batches need not be padded (the model skips the padding, docs/fine_tuning.md).
 *
 * Metrics as run_glue.py computes them: accuracy; F1 of the positive class "1" (MRPC, QQP);
 * Matthews correlation (CoLA); Pearson and Spearman (STS-B, a regression: one output). */
#ifndef BERT_TASKS_GLUE_H
#define BERT_TASKS_GLUE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"
#include "text/tokenizer.h"

typedef enum { GLUE_ACCURACY, GLUE_ACCURACY_F1, GLUE_MATTHEWS, GLUE_PEARSON_SPEARMAN } GlueMetric;
typedef enum { GLUE_TRAIN, GLUE_DEV, GLUE_TEST } GlueSplit;

typedef struct {
    const char *name;              /* "cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "mnli-mm", "qnli", "rte", "wnli" */
    const char *submission;        /* the GLUE leaderboard's file name, e.g. "CoLA.tsv" */
    const char *files[3];          /* train, dev, test file names */
    bool header[3];                /* the first row is a header (per split) */
    int text_a[3], text_b[3];      /* columns; text_b -1: a single text */
    int label;                     /* column of train/dev rows; -1: the last */
    const char *labels[3];         /* the label strings, in label-id order; none for regression */
    int num_labels;                /* 1: regression */
    GlueMetric metric;
} GlueTask;

/* The task of that name (case-insensitive; "sst2", "stsb" also accepted); NULL if none. */
const GlueTask *glue_task(const char *name);
/* "cola, sst-2, ..." for messages. */
const char *glue_task_names(void);

typedef struct {
    int n;
    char **text_a, **text_b;       /* text_b[i] NULL for single-text tasks */
    char **id;                     /* test rows: the index column (the submission's ids) */
    int *label;                    /* label ids (classification), -1 for test rows */
    float *value;                  /* regression targets (STS-B) */
    char *storage;                 /* the file's text, which the strings point into */
    long skipped;                  /* QQP rows with too few cells, skipped as HF's processor does */
} GlueExamples;

int glue_read(const GlueTask *t, const char *data_dir, GlueSplit split, GlueExamples *out, BertError *err);
void glue_examples_free(GlueExamples *e);

typedef struct {
    int n, max_seq_length;
    int32_t *input_ids, *segment_ids, *input_mask;   /* [n, max_seq_length], zero-padded */
    int32_t *length;                                 /* [n] real tokens of each row */
    long truncated;                                  /* rows whose texts were cut to fit */
} GlueFeatures;

int glue_features(const GlueExamples *e, const Tokenizer *tok, int max_seq_length, GlueFeatures *out, BertError *err);
void glue_features_free(GlueFeatures *f);

typedef struct {
    double accuracy, f1, matthews, pearson, spearman;   /* NAN where the task does not report it */
    int n;
} GlueScores;

/* Predicted label ids (classification) or values (regression) against the examples' labels. */
void glue_score(const GlueTask *t, const int *predicted, const float *predicted_value, const GlueExamples *e,
                GlueScores *out);
/* The scores as run_glue.py names them, e.g. {"acc": ..., "f1": ..., "acc_and_f1": ...}
 * (caller frees). */
char *glue_scores_json(const GlueTask *t, const GlueScores *s);

/* Pearson and Spearman correlations (Spearman: Pearson of the ranks, ties given their mean
 * rank, as scipy.stats.spearmanr). NAN when a side is constant. */
double glue_pearson(const double *x, const double *y, int n);
double glue_spearman(const double *x, const double *y, int n);

#endif
