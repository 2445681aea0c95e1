/* Classification data and metrics: see classify.h. */
#include "tasks/classify.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "core/utf8.h"
#include "io/json_util.h"
#include "tasks/glue.h"

/* ---- formats ---- */

int cls_format(const char *path, const char *format_flag, ClsFormat *out, BertError *err) {
    static const struct { const char *name; ClsFormat f; } names[] = {
        {"csv", CLS_FORMAT_CSV}, {"tsv", CLS_FORMAT_TSV}, {"txt", CLS_FORMAT_TSV}, {"json", CLS_FORMAT_JSONL},
        {"jsonl", CLS_FORMAT_JSONL},
    };
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    const char *what = format_flag ? format_flag : (dot && (!slash || dot > slash) ? dot + 1 : "");
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (!strcasecmp(what, names[k].name)) return *out = names[k].f, 0;
    if (format_flag) return bert_fail(err, "--format %s: one of csv, tsv, jsonl", format_flag);
    return bert_fail(err, "%s: the format is not told by the name (.csv, .tsv, .jsonl): give --format", path);
}

const char *cls_problem_name(ClsProblem p) {
    return p == CLS_REGRESSION ? "regression" : p == CLS_MULTI_LABEL ? "multi_label_classification"
                                                                     : "single_label_classification";
}

int cls_problem_of(const char *problem_type) {
    for (int p = CLS_SINGLE_LABEL; p <= CLS_MULTI_LABEL; p++)
        if (problem_type && !strcmp(problem_type, cls_problem_name((ClsProblem)p))) return p;
    return -1;
}

/* ---- tables ---- */

/* The line of the first invalid UTF-8 sequence, or 0 when all is valid. */
static long invalid_utf8_line(const char *s, size_t len) {
    long line = 1;
    for (size_t k = 0; k < len;) {
        int nb = 1;
        if ((unsigned char)s[k] >= 0x80 && utf8_decode((const unsigned char *)s + k, len - k, &nb) < 0) return line;
        line += s[k] == '\n';
        k += (size_t)nb;
    }
    return 0;
}

typedef struct {
    char **cells;
    bool *is_list;
    int *line;
    size_t n, cap, rows, row_cap;
} Grow;

static void grow_cell(Grow *g, char *cell, bool is_list) {
    if (g->n == g->cap) {
        g->cap = grow_capacity(g->cap, g->n + 1, 256);
        g->cells = xrealloc(g->cells, sizeof(char *) * g->cap), g->is_list = xrealloc(g->is_list, g->cap);
    }
    g->cells[g->n] = cell, g->is_list[g->n++] = is_list;
}

static void grow_row(Grow *g, int line) {
    if (g->rows == g->row_cap) g->row_cap = grow_capacity(g->row_cap, g->rows + 1, 64), g->line = xrealloc(g->line, sizeof(int) * g->row_cap);
    g->line[g->rows++] = line;
}

/* One CSV cell at *p, unquoted in place and NUL-terminated; *p is left at the character that
 * ended it (the separator, a line break or the end), *line counts the breaks inside quotes. */
static int csv_cell(char **p, char *end, char sep, char **cell, char *ended, const char *path, long *line,
                    BertError *err) {
    char *r = *p, *w = *p;
    *cell = w;
    if (r < end && *r == '"') {
        const long opened = *line;
        for (r++;; r++) {
            if (r >= end) return bert_fail(err, "%s:%ld: a quoted cell is not closed", path, opened);
            if (*r == '"' && r + 1 < end && r[1] == '"') *w++ = '"', r++;
            else if (*r == '"') break;
            else *line += *r == '\n' || (*r == '\r' && !(r + 1 < end && r[1] == '\n')), *w++ = *r;
        }
        r++;
        if (r < end && *r != sep && *r != '\n' && *r != '\r')
            return bert_fail(err, "%s:%ld: text after a closing quote (a quote inside a quoted cell is written \"\")",
                             path, *line);
    } else {
        while (r < end && *r != sep && *r != '\n' && *r != '\r') *w++ = *r++;
    }
    *ended = r < end ? *r : '\0';
    *w = '\0';   /* w <= r: the terminator was read already */
    *p = r;
    return 0;
}

static int read_csv(ClsTable *t, char *text, size_t len, char sep, const char *path, BertError *err) {
    Grow g = {0};
    char *p = text, *end = text + len;
    long line = 1;
    int rc = 0;
    while (rc == 0 && p < end) {
        if (*p == '\n' || *p == '\r') {   /* a blank line */
            p += (*p == '\r' && p + 1 < end && p[1] == '\n') ? 2 : 1, line++;
            continue;
        }
        const long first = line;
        const size_t before = g.n;
        for (char ended = sep; rc == 0 && ended == sep;) {
            char *cell;
            rc = csv_cell(&p, end, sep, &cell, &ended, path, &line, err);
            if (rc == 0) grow_cell(&g, cell, false);
            /* the cell's terminator may be its NUL now: `ended` says what it was */
            if (p < end) p += (ended == '\r' && p + 1 < end && p[1] == '\n') ? 2 : 1;
        }
        line++;
        const int cells = (int)(g.n - before);
        if (rc) break;
        if (t->n_cols == 0) t->n_cols = cells;
        else if (cells != t->n_cols) rc = bert_fail(err, "%s:%ld: %d cells, the header has %d", path, first, cells, t->n_cols);
        else grow_row(&g, (int)first);
    }
    if (rc == 0 && t->n_cols) {
        t->names = xmalloc(sizeof(char *) * (size_t)t->n_cols);
        memcpy(t->names, g.cells, sizeof(char *) * (size_t)t->n_cols);
        t->n_rows = (int)g.rows;
        t->cell = xmalloc(sizeof(char *) * (g.n - (size_t)t->n_cols + 1));
        t->is_list = xcalloc(g.n - (size_t)t->n_cols + 1, 1);
        memcpy(t->cell, g.cells + t->n_cols, sizeof(char *) * (g.n - (size_t)t->n_cols));
        t->line = g.line, g.line = NULL;
    }
    free(g.cells), free(g.is_list), free(g.line);
    return rc;
}

/* A JSON value as a cell (allocated), NULL for null; arrays' items joined by '\x1f'. */
static int json_cell(const cJSON *v, char **out, bool *is_list, const char *path, long line, const char *key,
                     BertError *err) {
    *out = NULL, *is_list = false;
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) return *out = xstrdup(v->valuestring), 0;
    if (cJSON_IsBool(v)) return *out = xstrdup(cJSON_IsTrue(v) ? "true" : "false"), 0;
    if (cJSON_IsNumber(v)) return *out = cJSON_PrintUnformatted(v), 0;
    if (!cJSON_IsArray(v)) return bert_fail(err, "%s:%ld: \"%s\" is an object, not a text, number or list", path, line, key);
    size_t n = 0, cap = 16;
    char *s = xmalloc(cap);
    s[0] = '\0';
    for (const cJSON *item = v->child; item; item = item->next) {
        char *one = NULL;
        bool nested;
        if (cJSON_IsArray(item) || json_cell(item, &one, &nested, path, line, key, err) != 0 || !one || !one[0]) {
            free(s), free(one);
            return bert_fail(err, "%s:%ld: \"%s\": a list's items must be texts (not empty) or numbers", path, line, key);
        }
        const size_t k = strlen(one);
        if (n + k + 2 > cap) cap = grow_capacity(cap, n + k + 2, 16), s = xrealloc(s, cap);
        if (n) s[n++] = '\x1f';
        memcpy(s + n, one, k + 1), n += k;
        free(one);
    }
    *out = s, *is_list = true;
    return 0;
}

static int jsonl_row(ClsTable *t, Grow *g, const cJSON *obj, const char *path, long line, BertError *err) {
    if (!cJSON_IsObject(obj)) return bert_fail(err, "%s:%ld: not a JSON object", path, line);
    if (!t->names) {
        t->n_cols = cJSON_GetArraySize(obj);
        if (t->n_cols == 0) return bert_fail(err, "%s:%ld: an object without keys", path, line);
        t->names = xmalloc(sizeof(char *) * (size_t)t->n_cols);
        int k = 0;
        for (const cJSON *c = obj->child; c; c = c->next) t->names[k++] = xstrdup(c->string);
    }
    for (int k = 0; k < t->n_cols; k++) {
        char *cell;
        bool is_list;
        if (json_cell(json_get_last(obj, t->names[k]), &cell, &is_list, path, line, t->names[k], err) != 0) return -1;
        grow_cell(g, cell, is_list);
    }
    grow_row(g, (int)line);
    return 0;
}

static int read_jsonl(ClsTable *t, char *text, size_t len, const char *path, BertError *err) {
    Grow g = {0};
    t->owns_cells = true;
    char *p = text, *end = text + len;
    int rc = 0;
    for (long line = 1; rc == 0 && p < end; line++) {
        char *stop = memchr(p, '\n', (size_t)(end - p));
        if (!stop) stop = end;
        const char *q = p;
        while (q < stop && isspace((unsigned char)*q)) q++;
        if (q < stop) {
            cJSON *obj = cJSON_ParseWithLength(p, (size_t)(stop - p));
            rc = obj ? jsonl_row(t, &g, obj, path, line, err) : bert_fail(err, "%s:%ld: not valid JSON", path, line);
            cJSON_Delete(obj);
        }
        p = stop + 1;
    }
    for (size_t k = g.rows * (size_t)t->n_cols; k < g.n; k++) free(g.cells[k]);   /* a failed row's cells */
    t->n_rows = (int)g.rows, t->cell = g.cells, t->is_list = g.is_list, t->line = g.line;
    if (!t->cell) t->cell = xcalloc(1, sizeof(char *)), t->is_list = xcalloc(1, 1);
    return rc;
}

int cls_read_table(const char *path, ClsFormat format, ClsTable *t, BertError *err) {
    memset(t, 0, sizeof *t);
    size_t len;
    if (read_file(path, &t->storage, &len, err) != 0) return -1;
    char *text = t->storage;
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) text += 3, len -= 3;
    int rc = 0;
    long bad;
    if (memchr(text, '\0', len)) rc = bert_fail(err, "%s: a NUL byte: not a text file", path);
    else if ((bad = invalid_utf8_line(text, len)) > 0) rc = bert_fail(err, "%s:%ld: not UTF-8", path, bad);
    else if (format == CLS_FORMAT_JSONL) rc = read_jsonl(t, text, len, path, err);
    else rc = read_csv(t, text, len, format == CLS_FORMAT_TSV ? '\t' : ',', path, err);
    if (rc == 0 && t->n_cols == 0) rc = bert_fail(err, "%s: empty (no header row)", path);
    else if (rc == 0 && t->n_rows == 0) rc = bert_fail(err, "%s: no rows", path);
    if (rc) cls_table_free(t);
    return rc;
}

void cls_table_free(ClsTable *t) {
    if (t->owns_cells) {
        for (long k = 0; t->cell && k < (long)t->n_rows * t->n_cols; k++) free(t->cell[k]);
        for (int k = 0; t->names && k < t->n_cols; k++) free(t->names[k]);
    }
    free(t->names), free(t->cell), free(t->is_list), free(t->line), free(t->storage);
    memset(t, 0, sizeof *t);
}

int cls_column(const ClsTable *t, const char *name) {
    for (int k = 0; k < t->n_cols; k++)
        if (!strcmp(t->names[k], name)) return k;
    return -1;
}

/* ---- labels ---- */

static int labels_add(ClsLabels *l, const char *name, BertError *err) {
    if (!name[0]) return bert_fail(err, "an empty label name");
    bool added;
    StrMapEntry *e = strmap_intern(&l->index, name, strlen(name), &added);
    if (!added) return bert_fail(err, "the label '%.60s' is named twice", name);
    e->value = l->n;
    l->name = xrealloc(l->name, sizeof(char *) * (size_t)(l->n + 1));
    l->name[l->n++] = xstrdup(name);
    return 0;
}

int cls_labels_from_names(char *const *names, int n, ClsLabels *out, BertError *err) {
    memset(out, 0, sizeof *out);
    strmap_init(&out->index, (size_t)n, true);
    for (int k = 0; k < n; k++)
        if (labels_add(out, names[k], err) != 0) return cls_labels_free(out), -1;
    return 0;
}

int cls_labels_parse(const char *list, ClsLabels *out, BertError *err) {
    char *copy = xstrdup(list);
    const char **items = xmalloc(sizeof(char *) * (size_t)list_capacity(list));
    const int n = split_list(copy, items, list_capacity(list));
    int rc = n > 0 ? cls_labels_from_names((char *const *)items, n, out, err) : bert_fail(err, "--labels: no labels");
    if (rc) snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), " (--labels)");
    free(items), free(copy);
    return rc;
}

int cls_label_id(const ClsLabels *l, const char *name) {
    const StrMapEntry *e = strmap_find(&l->index, name, strlen(name));
    return e ? (int)e->value : -1;
}

void cls_labels_free(ClsLabels *l) {
    for (int k = 0; k < l->n; k++) free(l->name[k]);
    free(l->name), strmap_free(&l->index);
    memset(l, 0, sizeof *l);
}

/* A cell's labels, each NUL-terminated in a copy (items[] point into *copy; free both). A
 * single-label cell is one label; a multi-label cell is split at '\x1f' (a JSON list) or sep. */
static int split_labels(const char *cell, bool is_list, ClsProblem p, const char *sep, char **copy, char ***items) {
    *copy = xstrdup(cell);
    const size_t seplen = strlen(sep);
    int cap = 1;
    for (const char *s = cell; *s; s++) cap += is_list ? *s == '\x1f' : !strncmp(s, sep, seplen);
    *items = xmalloc(sizeof(char *) * (size_t)cap);
    if (p != CLS_MULTI_LABEL) return (*items)[0] = *copy, 1;
    int n = 0;
    if (is_list && !cell[0]) return 0;   /* [] */
    for (char *s = *copy;;) {
        char *stop = is_list ? strchr(s, '\x1f') : strstr(s, sep);
        if (stop) *stop = '\0';
        if (*s || is_list) (*items)[n++] = s;   /* "a,,b" or an empty CSV cell: no label there */
        if (!stop) break;
        s = stop + (is_list ? 1 : seplen);
    }
    return n;
}

/* A JSON list is a multi-label row's labels. Without --multi_label it is refused, not taken
 * for one label made of its items joined by the list's internal separator. */
static int refuse_list(const ClsTable *t, const char *path, int i, int col, ClsProblem p, BertError *err) {
    const size_t at = (size_t)i * t->n_cols + col;
    if (p == CLS_MULTI_LABEL || !t->is_list[at]) return 0;
    return bert_fail(err, "%s:%d: \"%s\" is %s: a row's labels as a list need --multi_label", path, t->line[i],
                     t->names[col], t->cell[at][0] ? "a list" : "an empty list");
}

static bool is_integer(const char *s, long long *v) {
    char *end;
    errno = 0;
    *v = strtoll(s, &end, 10);
    return end != s && !*end && errno == 0;
}

static int compare_labels(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int compare_integer_labels(const void *a, const void *b) {
    long long x, y;
    is_integer(*(char *const *)a, &x), is_integer(*(char *const *)b, &y);
    return (x > y) - (x < y);
}

int cls_labels_collect(const ClsTable *t, const char *path, int col, ClsProblem p, const char *sep, ClsLabels *out,
                       BertError *err) {
    StrMap seen;
    strmap_init(&seen, 64, true);
    int rc = 0;
    for (int i = 0; rc == 0 && i < t->n_rows; i++) {
        const char *cell = t->cell[(size_t)i * t->n_cols + col];
        if (!cell) rc = bert_fail(err, "%s:%d: no label", path, t->line[i]);
        else rc = refuse_list(t, path, i, col, p, err);
        char *copy = NULL, **items = NULL;
        const int n = rc ? 0 : split_labels(cell, t->is_list[(size_t)i * t->n_cols + col], p, sep, &copy, &items);
        for (int k = 0; rc == 0 && k < n; k++) {
            if (!items[k][0]) rc = bert_fail(err, "%s:%d: an empty label", path, t->line[i]);
            else strmap_intern(&seen, items[k], strlen(items[k]), NULL);
        }
        free(copy), free(items);
    }
    char **names = xmalloc(sizeof(char *) * (seen.n + 1));
    bool integers = true;
    for (size_t k = 0; k < seen.n; k++) {
        long long v;
        names[k] = (char *)seen.entries[k].key, integers = integers && is_integer(names[k], &v);
    }
    qsort(names, seen.n, sizeof(char *), integers ? compare_integer_labels : compare_labels);
    if (rc == 0 && seen.n < (p == CLS_MULTI_LABEL ? 1u : 2u))
        rc = bert_fail(err, "%s: %zu distinct label(s) in column \"%s\": classification needs %s", path, seen.n,
                       t->names[col], p == CLS_MULTI_LABEL ? "one" : "two (or --do_regression)");
    if (rc == 0) rc = cls_labels_from_names(names, (int)seen.n, out, err);
    free(names), strmap_free(&seen);
    return rc;
}

/* ---- examples ---- */

/* The text columns: c->text_columns or the defaults (classify.h); -1 for an absent second. */
static int text_columns(const ClsTable *t, const char *path, const ClsColumns *c, int label_col, int col[2],
                        BertError *err) {
    col[0] = col[1] = -1;
    if (c->text_columns) {
        char *copy = xstrdup(c->text_columns);
        const char *names[3];
        const int n = split_list(copy, names, 2);
        int rc = n >= 1 ? 0 : bert_fail(err, "--text_column_names %s: one column or two (a pair)", c->text_columns);
        for (int k = 0; rc == 0 && k < n; k++)
            if ((col[k] = cls_column(t, names[k])) < 0)
                rc = bert_fail(err, "%s: no column \"%s\" (--text_column_names)", path, names[k]);
        free(copy);
        return rc;
    }
    if ((col[0] = cls_column(t, "sentence")) >= 0 || (col[0] = cls_column(t, "text")) >= 0) return 0;
    if ((col[0] = cls_column(t, "sentence1")) >= 0 && (col[1] = cls_column(t, "sentence2")) >= 0) return 0;
    for (int k = 0; k < t->n_cols; k++)
        if (k != label_col) return col[0] = k, col[1] = -1, 0;
    return bert_fail(err, "%s: no text column (only the label's)", path);
}

static int row_labels(const ClsTable *t, const char *path, int i, int col, const ClsColumns *c, const ClsLabels *l,
                      ClsExamples *e, BertError *err) {
    const char *cell = t->cell[(size_t)i * t->n_cols + col];
    const int line = t->line[i];
    if (!cell) return bert_fail(err, "%s:%d: no label", path, line);
    if (refuse_list(t, path, i, col, c->problem, err) != 0) return -1;
    if (c->problem == CLS_REGRESSION) {
        char *end;
        e->value[i] = strtof(cell, &end);
        if (end == cell || *end || !isfinite(e->value[i]))
            return bert_fail(err, "%s:%d: the value '%.40s' is not a number (--do_regression)", path, line, cell);
        return 0;
    }
    char *copy, **items;
    const int n = split_labels(cell, t->is_list[(size_t)i * t->n_cols + col], c->problem,
                               c->label_separator ? c->label_separator : ",", &copy, &items);
    int rc = 0;
    for (int k = 0; rc == 0 && k < n; k++) {
        const int id = cls_label_id(l, items[k]);
        if (id < 0) {
            rc = bert_fail(err, "%s:%d: the label '%.40s' is not one of the %d labels (%.40s%s)", path, line, items[k],
                           l->n, l->name[0], l->n > 1 ? ", ..." : "");
        } else if (c->problem == CLS_MULTI_LABEL) {
            e->multi[(size_t)i * l->n + id] = 1.0f;
        } else {
            e->label[i] = id;
        }
    }
    free(copy), free(items);
    return rc;
}

int cls_examples(const ClsTable *t, const char *path, const ClsColumns *c, const ClsLabels *labels, bool need_labels,
                 ClsExamples *e, BertError *err) {
    memset(e, 0, sizeof *e);
    const char *label_name = c->label_column ? c->label_column : "label";
    const int label_col = cls_column(t, label_name);
    int col[2];
    if (text_columns(t, path, c, label_col, col, err) != 0) return -1;
    if (label_col < 0 && need_labels) return bert_fail(err, "%s: no column \"%s\" (--label_column_name)", path, label_name);
    if (need_labels && (label_col == col[0] || label_col == col[1]))
        return bert_fail(err, "%s: the column \"%s\" is both a text and the label", path, label_name);
    const int n = t->n_rows, NL = c->problem == CLS_REGRESSION ? 1 : labels->n;
    e->n = n, e->num_labels = NL, e->labelled = need_labels;   /* a test file's labels (or -1s) are not read */
    e->text_a = xcalloc((size_t)n, sizeof(char *)), e->text_b = xcalloc((size_t)n, sizeof(char *));
    e->label = xcalloc((size_t)n, sizeof(int)), e->value = xcalloc((size_t)n, sizeof(float));
    e->multi = xcalloc((size_t)n * NL, sizeof(float));
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        char *a = t->cell[(size_t)i * t->n_cols + col[0]];
        e->text_a[i] = a ? a : "";
        if (col[1] >= 0) e->text_b[i] = t->cell[(size_t)i * t->n_cols + col[1]];
        if (e->text_b[i] && !e->text_b[i][0]) e->text_b[i] = NULL;   /* as Google's `if example.text_b:` */
        e->label[i] = -1;
        if (e->labelled) rc = row_labels(t, path, i, label_col, c, labels, e, err);
    }
    if (rc) cls_examples_free(e);
    return rc;
}

void cls_examples_free(ClsExamples *e) {
    free(e->text_a), free(e->text_b), free(e->label), free(e->value), free(e->multi);
    memset(e, 0, sizeof *e);
}

/* ---- metrics ---- */

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }
static double f1_of(double tp, double fp, double fn) { return ratio(2 * tp, 2 * tp + fp + fn); }

static void score_single(const ClsExamples *e, const int *pred, ClsScores *s) {
    const int NL = e->num_labels;
    long *tp = xcalloc((size_t)NL, sizeof(long)), *fp = xcalloc((size_t)NL, sizeof(long));
    long *fn = xcalloc((size_t)NL, sizeof(long)), right = 0;
    for (int i = 0; i < e->n; i++) {
        const int y = e->label[i], p = pred[i];
        if (y == p) tp[y]++, right++;
        else fp[p]++, fn[y]++;
    }
    double f1_sum = 0;
    int present = 0;   /* sklearn averages over the labels in the truth or the predictions */
    for (int k = 0; k < NL; k++)
        if (tp[k] + fp[k] + fn[k] > 0) f1_sum += f1_of(tp[k], fp[k], fn[k]), present++;
    s->accuracy = ratio(right, e->n), s->f1_micro = s->accuracy, s->f1_macro = ratio(f1_sum, present);
    if (NL == 2)
        s->f1 = f1_of(tp[1], fp[1], fn[1]), s->precision = ratio(tp[1], tp[1] + fp[1]), s->recall = ratio(tp[1], tp[1] + fn[1]);
    free(tp), free(fp), free(fn);
}

static void score_multi(const ClsExamples *e, const float *pred, ClsScores *s) {
    const int NL = e->num_labels;
    long TP = 0, FP = 0, FN = 0, exact = 0;
    double samples = 0, f1_sum = 0;
    for (int i = 0; i < e->n; i++) {
        long tp = 0, fp = 0, fn = 0;
        for (int k = 0; k < NL; k++) {
            const bool y = e->multi[(size_t)i * NL + k] > 0.5f, p = pred[(size_t)i * NL + k] > 0.5f;
            tp += y && p, fp += !y && p, fn += y && !p;
        }
        samples += f1_of(tp, fp, fn), exact += fp == 0 && fn == 0;
        TP += tp, FP += fp, FN += fn;
    }
    for (int k = 0; k < NL; k++) {
        long tp = 0, fp = 0, fn = 0;
        for (int i = 0; i < e->n; i++) {
            const bool y = e->multi[(size_t)i * NL + k] > 0.5f, p = pred[(size_t)i * NL + k] > 0.5f;
            tp += y && p, fp += !y && p, fn += y && !p;
        }
        f1_sum += f1_of(tp, fp, fn);
    }
    s->subset_accuracy = ratio(exact, e->n), s->f1_samples = ratio(samples, e->n);
    s->f1_micro = f1_of(TP, FP, FN), s->f1_macro = ratio(f1_sum, NL);
}

void cls_score(ClsProblem p, const ClsExamples *e, const int *pred_label, const float *pred_value,
               const float *pred_multi, ClsScores *s) {
    *s = (ClsScores){.n = e->n};
    double *all[] = {&s->accuracy, &s->f1_macro, &s->f1_micro, &s->f1, &s->precision, &s->recall, &s->pearson,
                     &s->spearman, &s->mse, &s->subset_accuracy, &s->f1_samples};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) *all[k] = NAN;
    if (p == CLS_SINGLE_LABEL) return score_single(e, pred_label, s);
    if (p == CLS_MULTI_LABEL) return score_multi(e, pred_multi, s);
    double *x = xmalloc(sizeof(double) * 2 * (size_t)e->n), *y = x + e->n, se = 0;
    for (int i = 0; i < e->n; i++) x[i] = pred_value[i], y[i] = e->value[i], se += (x[i] - y[i]) * (x[i] - y[i]);
    s->pearson = glue_pearson(x, y, e->n), s->spearman = glue_spearman(x, y, e->n), s->mse = ratio(se, e->n);
    free(x);
}

char *cls_scores_json(const ClsScores *s) {
    const struct { const char *name; double v; } all[] = {
        {"accuracy", s->accuracy}, {"f1_macro", s->f1_macro}, {"f1_micro", s->f1_micro}, {"f1", s->f1},
        {"precision", s->precision}, {"recall", s->recall}, {"pearson", s->pearson}, {"spearmanr", s->spearman},
        {"mse", s->mse}, {"subset_accuracy", s->subset_accuracy}, {"f1_samples", s->f1_samples},
    };
    cJSON *o = cJSON_CreateObject();
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (!isnan(all[k].v)) cJSON_AddNumberToObject(o, all[k].name, all[k].v);
    cJSON_AddNumberToObject(o, "eval_samples", s->n);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}
