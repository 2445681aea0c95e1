/* Classification on any data (`bert classify`, tasks/classify_run.h): tables read from CSV,
 * TSV or JSONL files, the text and label columns named as HuggingFace's
 * run_classification.py names them, the label map, and the metrics.
 *
 * Files (UTF-8, a leading byte-order mark skipped):
 *   CSV / TSV  RFC 4180 with ',' or '\t' between cells: the first record names the columns;
 *              a cell in double quotes may hold the separator, line breaks and "" (one
 *              quote); records end at \n, \r\n or \r; blank lines are skipped (as pandas);
 *              a record with another number of cells than the header is an error.
 *   JSONL      one JSON object a line (blank lines skipped); the columns are the first
 *              object's keys. Strings are cells as they are, numbers as JSON writes them,
 *              true/false as "true"/"false", an array (a multi-label row's labels) as a list
 *              (a list label of another problem is an error); null or a missing key: no value.
 * Every error names the file and the line.
 *
 * Labels: --labels fixes the list and its order; otherwise the training file's distinct
 * labels sorted (as run_classification.py's label_list.sort(): numerically when every label
 * is an integer, else by their UTF-8 bytes). Multi-label rows hold a list (JSONL) or the
 * labels joined by a separator (CSV/TSV, default ","; an empty cell: no label). */
#ifndef BERT_TASKS_CLASSIFY_H
#define BERT_TASKS_CLASSIFY_H

#include <stdbool.h>

#include "core/common.h"
#include "core/strmap.h"

typedef enum { CLS_FORMAT_AUTO = 0, CLS_FORMAT_CSV, CLS_FORMAT_TSV, CLS_FORMAT_JSONL } ClsFormat;
typedef enum { CLS_SINGLE_LABEL = 0, CLS_REGRESSION, CLS_MULTI_LABEL } ClsProblem;

/* The format --format names ("csv", "tsv", "json", "jsonl"), else the path's extension
 * (.csv, .tsv, .json, .jsonl, .txt as TSV); -1 (err) when neither says. */
int cls_format(const char *path, const char *format_flag, ClsFormat *out, BertError *err);
/* HF's problem_type string of a problem, and back (-1: unknown). */
const char *cls_problem_name(ClsProblem p);
int cls_problem_of(const char *problem_type);

typedef struct {
    int n_cols, n_rows;
    char **names;        /* [n_cols] */
    char **cell;         /* [n_rows * n_cols]: NUL-terminated; NULL: no value (JSONL) */
    bool *is_list;       /* [n_rows * n_cols]: a JSON array, its items joined by '\x1f' */
    int *line;           /* [n_rows]: the line each row starts on */
    char *storage;       /* CSV/TSV: the file, which the cells point into */
    bool owns_cells;     /* JSONL: each cell its own allocation */
} ClsTable;

/* Reads the whole file; a file without a header row or any rows is an error. */
int cls_read_table(const char *path, ClsFormat format, ClsTable *out, BertError *err);
void cls_table_free(ClsTable *t);
/* The index of the column named name, or -1. */
int cls_column(const ClsTable *t, const char *name);

typedef struct {
    int n;
    char **name;         /* in label-id order */
    StrMap index;        /* name -> id */
} ClsLabels;

/* From a comma-separated list ("neg,pos"); a repeated or empty name is an error. */
int cls_labels_parse(const char *list, ClsLabels *out, BertError *err);
/* From names in id order (a model's id2label). */
int cls_labels_from_names(char *const *names, int n, ClsLabels *out, BertError *err);
/* The distinct labels of column `col` sorted (see above); multi-label cells split at sep. */
int cls_labels_collect(const ClsTable *t, const char *path, int col, ClsProblem p, const char *sep, ClsLabels *out,
                       BertError *err);
int cls_label_id(const ClsLabels *l, const char *name);   /* -1 when not a label */
void cls_labels_free(ClsLabels *l);

/* Which columns hold the texts and the label. */
typedef struct {
    const char *text_columns;     /* "a" or "a,b" (a pair); NULL: "sentence", else "text", else
                                     "sentence1,sentence2", else the first column but the label */
    const char *label_column;     /* NULL: "label" */
    const char *label_separator;  /* multi-label cells of CSV/TSV; NULL: "," */
    ClsProblem problem;
} ClsColumns;

typedef struct {
    int n, num_labels;
    char **text_a, **text_b;      /* into the table; text_b NULL: a single text */
    bool labelled;                /* the labels were read (need_labels) */
    int *label;                   /* single-label ids */
    float *value;                 /* regression targets */
    float *multi;                 /* multi-label targets [n, num_labels]: 1 or 0 */
} ClsExamples;

/* The examples of a table: the texts (an empty or missing text is ""), and with need_labels
 * each row's label(s) from the label column by `labels` (a label not in it is an error naming
 * the file and line; NULL for regression); without, the labels are not read (a test file's
 * column may hold anything, e.g. -1). */
int cls_examples(const ClsTable *t, const char *path, const ClsColumns *c, const ClsLabels *labels, bool need_labels,
                 ClsExamples *out, BertError *err);
void cls_examples_free(ClsExamples *e);

typedef struct {
    int n;
    /* single-label: accuracy, f1_macro and f1_micro (sklearn's, over the labels in the truth or
     * the predictions), and with two labels f1, precision, recall of label id 1 */
    double accuracy, f1_macro, f1_micro, f1, precision, recall;
    double pearson, spearman, mse;          /* regression */
    double subset_accuracy, f1_samples;     /* multi-label (with f1_micro, f1_macro over every label) */
} ClsScores;                                /* NAN where the problem does not report it */

/* pred_label (single-label ids), pred_value (regression) or pred_multi ([n, num_labels] 0/1)
 * against the examples' labels; a 0/0 ratio counts 0 (sklearn's zero_division default). */
void cls_score(ClsProblem p, const ClsExamples *e, const int *pred_label, const float *pred_value,
               const float *pred_multi, ClsScores *out);
/* The reported scores as a JSON object, e.g. {"accuracy": ..., "f1_macro": ...} (caller frees). */
char *cls_scores_json(const ClsScores *s);

#endif
