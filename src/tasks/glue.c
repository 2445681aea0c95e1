/* GLUE tasks, features and metrics: see glue.h. */
#include "tasks/glue.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

/* Columns as HuggingFace's glue processors (transformers/data/processors/glue.py) and
 * NVIDIA's processors/glue.py read them. */
static const GlueTask TASKS[] = {
    {"cola", "CoLA.tsv", {"train.tsv", "dev.tsv", "test.tsv"}, {false, false, true}, {3, 3, 1}, {-1, -1, -1}, 1,
     {"0", "1"}, 2, GLUE_MATTHEWS},
    {"sst-2", "SST-2.tsv", {"train.tsv", "dev.tsv", "test.tsv"}, {true, true, true}, {0, 0, 1}, {-1, -1, -1}, 1,
     {"0", "1"}, 2, GLUE_ACCURACY},
    {"mrpc", "MRPC.tsv", {"train.tsv", "dev.tsv", "test.tsv"}, {true, true, true}, {3, 3, 3}, {4, 4, 4}, 0,
     {"0", "1"}, 2, GLUE_ACCURACY_F1},
    {"sts-b", "STS-B.tsv", {"train.tsv", "dev.tsv", "test.tsv"}, {true, true, true}, {7, 7, 7}, {8, 8, 8}, -1,
     {NULL}, 1, GLUE_PEARSON_SPEARMAN},
    {"qqp", "QQP.tsv", {"train.tsv", "dev.tsv", "test.tsv"}, {true, true, true}, {3, 3, 1}, {4, 4, 2}, 5,
     {"0", "1"}, 2, GLUE_ACCURACY_F1},
    {"mnli", "MNLI-m.tsv", {"train.tsv", "dev_matched.tsv", "test_matched.tsv"}, {true, true, true}, {8, 8, 8},
     {9, 9, 9}, -1, {"contradiction", "entailment", "neutral"}, 3, GLUE_ACCURACY},
    {"mnli-mm", "MNLI-mm.tsv", {"train.tsv", "dev_mismatched.tsv", "test_mismatched.tsv"}, {true, true, true},
     {8, 8, 8}, {9, 9, 9}, -1, {"contradiction", "entailment", "neutral"}, 3, GLUE_ACCURACY},
    {"qnli", "QNLI.tsv", {"train.tsv", "dev.tsv", "test.tsv"}, {true, true, true}, {1, 1, 1}, {2, 2, 2}, -1,
     {"entailment", "not_entailment"}, 2, GLUE_ACCURACY},
    {"rte", "RTE.tsv", {"train.tsv", "dev.tsv", "test.tsv"}, {true, true, true}, {1, 1, 1}, {2, 2, 2}, -1,
     {"entailment", "not_entailment"}, 2, GLUE_ACCURACY},
    {"wnli", "WNLI.tsv", {"train.tsv", "dev.tsv", "test.tsv"}, {true, true, true}, {1, 1, 1}, {2, 2, 2}, -1,
     {"0", "1"}, 2, GLUE_ACCURACY},
};
enum { NTASKS = sizeof TASKS / sizeof TASKS[0] };

const GlueTask *glue_task(const char *name) {
    if (!strcasecmp(name, "sst2")) name = "sst-2";
    if (!strcasecmp(name, "stsb")) name = "sts-b";
    for (int i = 0; i < NTASKS; i++)
        if (!strcasecmp(name, TASKS[i].name)) return &TASKS[i];
    return NULL;
}

const char *glue_task_names(void) { return "cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli"; }

/* ---- reading ---- */

enum { MAX_CELLS = 64 };   /* MNLI's dev files have 16 columns */

/* Splits line (NUL-terminated, modified) at tabs into at most max cells. */
static int split_cells(char *line, char **cells, int max) {
    int n = 0;
    for (char *p = line;;) {
        char *tab = strchr(p, '\t');
        if (n < max) cells[n] = p;
        n++;
        if (!tab) break;
        *tab = '\0', p = tab + 1;
    }
    return n;
}

/* Whether s[0..n) is a decimal number as Python's float() reads one: a sign, digits with
 * at most one point (some digit), an exponent with digits; or inf, infinity, nan. strtof
 * also takes hexadecimal ("0x10" read as 16, issue 35 D24), which float() refuses. */
static bool python_float_syntax(const char *s, size_t n) {
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    static const char *const WORDS[] = {"inf", "infinity", "nan"};
    for (int w = 0; w < 3; w++)
        if (n - i == strlen(WORDS[w]) && !strncasecmp(s + i, WORDS[w], n - i)) return true;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) digits++;
    if (i < n && s[i] == '.')
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) digits++;
    if (!digits) return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t exp = 0;
        if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) exp++;
        if (!exp) return false;
    }
    return i == n;
}

static int label_of(const GlueTask *t, const char *cell, const char *path, long line, int *label, float *value,
                    BertError *err) {
    if (t->num_labels == 1) {
        size_t start = strspn(cell, " \t\n\v\f\r"), end = strlen(cell);
        while (end > start && strchr(" \t\n\v\f\r", cell[end - 1])) end--;
        if (!python_float_syntax(cell + start, end - start))
            return bert_fail(err, "%s:%ld: the score '%.40s' is not a number", path, line, cell);
        *value = strtof(cell + start, NULL);   /* stops at the trailing spaces */
        if (!isfinite(*value))
            return bert_fail(err, "%s:%ld: the score '%.40s' is not finite", path, line, cell);
        return 0;
    }
    for (int k = 0; k < t->num_labels; k++)
        if (!strcmp(cell, t->labels[k])) return *label = k, 0;
    return bert_fail(err, "%s:%ld: the label '%.40s' is not one of %s's labels", path, line, cell, t->name);
}

static int add_row(const GlueTask *t, GlueSplit split, char **cells, int ncells, const char *path, long line,
                   GlueExamples *e, BertError *err) {
    const int a = t->text_a[split], b = t->text_b[split];
    const int label_col = split == GLUE_TEST ? -2 : (t->label < 0 ? ncells - 1 : t->label);
    int need = a > b ? a : b;
    if (label_col > need) need = label_col;
    if (ncells <= need) {
        if (!strcmp(t->name, "qqp")) return e->skipped++, 0;   /* HF's QqpProcessor skips them (IndexError) */
        return bert_fail(err, "%s:%ld: %d tab-separated cells, %s needs at least %d", path, line, ncells, t->name,
                         need + 1);
    }
    const int i = e->n++;
    /* an empty second text makes a single-text example, as Google's `if example.text_b:` */
    e->text_a[i] = cells[a], e->text_b[i] = b >= 0 && cells[b][0] ? cells[b] : NULL;
    e->id[i] = cells[0], e->label[i] = -1, e->value[i] = 0;
    if (split == GLUE_TEST) return 0;
    return label_of(t, cells[label_col], path, line, &e->label[i], &e->value[i], err);
}

int glue_read(const GlueTask *t, const char *data_dir, GlueSplit split, GlueExamples *e, BertError *err) {
    memset(e, 0, sizeof *e);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", data_dir, t->files[split]);
    size_t len;
    if (read_file(path, &e->storage, &len, err) != 0) return -1;
    if (memchr(e->storage, '\0', len)) {
        glue_examples_free(e);
        return bert_fail(err, "%s: a NUL byte: not a text file", path);
    }
    long lines = 1;
    for (size_t k = 0; k < len; k++) lines += e->storage[k] == '\n' || e->storage[k] == '\r';
    e->text_a = xcalloc((size_t)lines, sizeof(char *)), e->text_b = xcalloc((size_t)lines, sizeof(char *));
    e->id = xcalloc((size_t)lines, sizeof(char *));
    e->label = xcalloc((size_t)lines, sizeof(int)), e->value = xcalloc((size_t)lines, sizeof(float));
    char *p = e->storage, *end = e->storage + len;
    int rc = 0;
    for (long line = 1; rc == 0 && p < end; line++) {
        /* Python reads the files with universal newlines: \n, \r\n and a lone \r end a row */
        char *stop = p;
        while (stop < end && *stop != '\n' && *stop != '\r') stop++;
        const bool crlf = stop + 1 < end && stop[0] == '\r' && stop[1] == '\n';
        if (stop < end) *stop = '\0';
        char *row = p;
        p = stop + 1 + crlf;
        /* the header; and blank lines, which HF's processors would fail on */
        if ((line == 1 && t->header[split]) || !row[0]) continue;
        char *cells[MAX_CELLS];
        const int n = split_cells(row, cells, MAX_CELLS);
        rc = n <= MAX_CELLS ? add_row(t, split, cells, n, path, line, e, err)
                            : bert_fail(err, "%s:%ld: %d cells: more than any GLUE file has", path, line, n);
    }
    if (rc == 0 && e->n == 0) rc = bert_fail(err, "%s: no examples", path);
    if (rc != 0) glue_examples_free(e);
    return rc;
}

void glue_examples_free(GlueExamples *e) {
    free(e->text_a), free(e->text_b), free(e->id), free(e->label), free(e->value), free(e->storage);
    memset(e, 0, sizeof *e);
}

/* ---- features ---- */

/* Drops the last token of the longer list until the pair fits (Google's _truncate_seq_pair). */
static void truncate_pair(int *na, int *nb, int max) {
    while (*na + *nb > max) {
        if (*na > *nb) (*na)--;
        else (*nb)--;
    }
}

int glue_features(const GlueExamples *e, const Tokenizer *tok, int max_seq_length, GlueFeatures *f, BertError *err) {
    memset(f, 0, sizeof *f);
    const Vocab *v = tokenizer_vocab(tok);
    const int cls = vocab_lookup(v, "[CLS]", 5), sep = vocab_lookup(v, "[SEP]", 5);
    if (cls < 0 || sep < 0) return bert_fail(err, "the vocabulary has no [CLS] or [SEP]");
    if (max_seq_length < 4) return bert_fail(err, "--max_seq_length %d: at least 4", max_seq_length);
    const size_t cells = (size_t)e->n * (size_t)max_seq_length;
    f->n = e->n, f->max_seq_length = max_seq_length;
    f->input_ids = xcalloc(cells, sizeof(int32_t)), f->segment_ids = xcalloc(cells, sizeof(int32_t));
    f->input_mask = xcalloc(cells, sizeof(int32_t)), f->length = xcalloc((size_t)e->n, sizeof(int32_t));
    TokenList a, b;
    token_list_init(&a), token_list_init(&b);
    for (int i = 0; i < e->n; i++) {
        tokenize(tok, e->text_a[i], strlen(e->text_a[i]), &a);
        int na = a.n, nb = 0;
        if (e->text_b[i]) {
            tokenize(tok, e->text_b[i], strlen(e->text_b[i]), &b);
            nb = b.n;
            truncate_pair(&na, &nb, max_seq_length - 3);
        } else if (na > max_seq_length - 2) {
            na = max_seq_length - 2;
        }
        f->truncated += na < a.n || (e->text_b[i] && nb < b.n);
        const bool pair = e->text_b[i] && nb > 0;   /* Google: `if tokens_b:` (after the pair's truncation) */
        int32_t *ids = f->input_ids + (size_t)i * max_seq_length, *seg = f->segment_ids + (size_t)i * max_seq_length;
        int t = 0;
        ids[t++] = cls;
        for (int k = 0; k < na; k++) ids[t++] = a.tokens[k].id;
        ids[t++] = sep;
        if (pair) {
            for (int k = 0; k < nb; k++) seg[t] = 1, ids[t++] = b.tokens[k].id;
            seg[t] = 1, ids[t++] = sep;
        }
        f->length[i] = t;
        for (int k = 0; k < t; k++) f->input_mask[(size_t)i * max_seq_length + k] = 1;
    }
    token_list_free(&a), token_list_free(&b);
    return 0;
}

void glue_features_free(GlueFeatures *f) {
    free(f->input_ids), free(f->segment_ids), free(f->input_mask), free(f->length);
    memset(f, 0, sizeof *f);
}

/* ---- metrics ---- */

double glue_pearson(const double *x, const double *y, int n) {
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= n, my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx), syy += (y[i] - my) * (y[i] - my);
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

static int by_key(const void *a, const void *b, void *keys) {
    const double x = ((const double *)keys)[*(const int *)a], y = ((const double *)keys)[*(const int *)b];
    return x < y ? -1 : x > y;
}

/* 1-based ranks, ties sharing their mean rank. */
static void ranks(const double *x, int n, double *r) {
    int *order = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof(int), by_key, (void *)x);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && x[order[j + 1]] == x[order[i]]) j++;
        for (int k = i; k <= j; k++) r[order[k]] = (i + j) / 2.0 + 1;
        i = j + 1;
    }
    free(order);
}

double glue_spearman(const double *x, const double *y, int n) {
    for (int i = 0; i < n; i++)
        if (isnan(x[i]) || isnan(y[i])) return NAN;   /* as scipy; and NaN would break the sort's order */
    double *rx = xmalloc(sizeof(double) * 2 * (size_t)n), *ry = rx + n;
    ranks(x, n, rx), ranks(y, n, ry);
    const double r = glue_pearson(rx, ry, n);
    free(rx);
    return r;
}

void glue_score(const GlueTask *t, const int *pred, const float *pred_value, const GlueExamples *e, GlueScores *s) {
    *s = (GlueScores){NAN, NAN, NAN, NAN, NAN, e->n};
    if (t->metric == GLUE_PEARSON_SPEARMAN) {
        double *x = xmalloc(sizeof(double) * 2 * (size_t)e->n), *y = x + e->n;
        for (int i = 0; i < e->n; i++) x[i] = pred_value[i], y[i] = e->value[i];
        s->pearson = glue_pearson(x, y, e->n), s->spearman = glue_spearman(x, y, e->n);
        free(x);
        return;
    }
    long tp = 0, tn = 0, fp = 0, fn = 0, right = 0;
    for (int i = 0; i < e->n; i++) {
        right += pred[i] == e->label[i];
        tp += pred[i] == 1 && e->label[i] == 1, tn += pred[i] == 0 && e->label[i] == 0;
        fp += pred[i] == 1 && e->label[i] == 0, fn += pred[i] == 0 && e->label[i] == 1;
    }
    s->accuracy = (double)right / e->n;
    if (t->metric == GLUE_ACCURACY_F1)   /* sklearn's f1_score: 0 when there is no positive at all */
        s->f1 = tp ? 2.0 * tp / (2.0 * tp + fp + fn) : 0.0;
    if (t->metric == GLUE_MATTHEWS) {    /* sklearn's matthews_corrcoef: 0 when undefined */
        const double den = sqrt((double)(tp + fp) * (tp + fn) * (tn + fp) * (tn + fn));
        s->matthews = den > 0 ? ((double)tp * tn - (double)fp * fn) / den : 0.0;
    }
}

char *glue_scores_json(const GlueTask *t, const GlueScores *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "task", t->name);
    cJSON_AddNumberToObject(o, "examples", s->n);
    switch (t->metric) {
    case GLUE_MATTHEWS: cJSON_AddNumberToObject(o, "mcc", s->matthews); break;
    case GLUE_ACCURACY: cJSON_AddNumberToObject(o, "acc", s->accuracy); break;
    case GLUE_ACCURACY_F1:
        cJSON_AddNumberToObject(o, "acc", s->accuracy), cJSON_AddNumberToObject(o, "f1", s->f1);
        cJSON_AddNumberToObject(o, "acc_and_f1", (s->accuracy + s->f1) / 2);
        break;
    case GLUE_PEARSON_SPEARMAN:
        cJSON_AddNumberToObject(o, "pearson", s->pearson), cJSON_AddNumberToObject(o, "spearmanr", s->spearman);
        cJSON_AddNumberToObject(o, "corr", (s->pearson + s->spearman) / 2);
        break;
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}
