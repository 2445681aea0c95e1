/* `bert classify`: the CSV/TSV/JSONL readers (RFC 4180 against Python's csv module, errors
 * with file and line), label maps, the metrics against scikit-learn, the multi-label loss
 * against PyTorch and finite differences, and small runs end to end (single-label on a CSV
 * pair, regression on TSV, multi-label on JSONL and on CSV with a separator). Fixtures:
 * tools/make_classify_fixtures.py. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "model/bert.h"
#include "tasks/classify.h"
#include "tasks/classify_run.h"
#include "test.h"
#include "test_util.h"

#define DATA "tests/data/classify/"

static cJSON *read_json(const char *path) {
    char *text = read_text(path);
    cJSON *j = cJSON_Parse(text);
    free(text);
    CHECKF(j != NULL, "%s unreadable", path);
    return j;
}

/* ---- readers ---- */

static void check_table(const char *path, ClsFormat format, const cJSON *want) {
    ClsTable t;
    BertError err;
    CHECKF(cls_read_table(path, format, &t, &err) == 0, "%s", err.msg);
    const int rows = cJSON_GetArraySize(want);
    CHECKF(t.n_rows == rows - 1 && t.n_cols == 3, "%s: %d rows x %d columns, Python %d rows", path, t.n_rows, t.n_cols,
           rows - 1);
    for (int i = 0; i < rows && t.n_rows == rows - 1; i++) {
        const cJSON *row = cJSON_GetArrayItem(want, i);
        for (int k = 0; k < 3; k++) {
            const char *got = i == 0 ? t.names[k] : t.cell[(size_t)(i - 1) * 3 + k];
            const char *py = cJSON_GetArrayItem(row, k)->valuestring;
            CHECKF(got && !strcmp(got, py), "%s: row %d cell %d: '%s', Python '%s'", path, i, k, got ? got : "(null)", py);
        }
    }
    if (t.n_rows == 6) CHECKF(t.line[0] == 2 && t.line[2] == 4 && t.line[3] == 7 && t.line[5] == 9,
                              "%s: lines %d %d %d %d", path, t.line[0], t.line[2], t.line[3], t.line[5]);
    cls_table_free(&t);
}

static void test_csv_quoting_as_python(void) {
    cJSON *want = read_json(DATA "quoting.json");
    check_table(DATA "quoting.csv", CLS_FORMAT_CSV, cJSON_GetObjectItem(want, "csv"));
    check_table(DATA "quoting.tsv", CLS_FORMAT_TSV, cJSON_GetObjectItem(want, "tsv"));
    cJSON_Delete(want);
}

/* Each bad file is refused with its name and line and the trouble named. */
static void expect_read_error(const char *text, ClsFormat format, const char *want1, const char *want2) {
    const char *path = test_tmp_path("/bad.txt");
    write_text(path, text);
    ClsTable t;
    BertError err;
    const int rc = cls_read_table(path, format, &t, &err);
    CHECKF(rc != 0 && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)), "'%s': rc %d: %s", text, rc,
           rc ? err.msg : "(read)");
    if (rc == 0) cls_table_free(&t);
}

static void test_reader_errors(void) {
    mkdir(test_tmp_path(""), 0777);
    expect_read_error("", CLS_FORMAT_CSV, "bad.txt: empty", NULL);
    expect_read_error("\n\n", CLS_FORMAT_CSV, "bad.txt: empty", NULL);
    expect_read_error("text,label\n", CLS_FORMAT_CSV, "bad.txt: no rows", NULL);
    expect_read_error("text,label\na,b\nc,d,e\n", CLS_FORMAT_CSV, "bad.txt:3", "3 cells, the header has 2");
    expect_read_error("text,label\n\"open,b\nc,d\n", CLS_FORMAT_CSV, "bad.txt:2", "not closed");
    expect_read_error("text,label\n\"a\"b,c\n", CLS_FORMAT_CSV, "bad.txt:2", "after a closing quote");
    expect_read_error("text,label\nok,1\n\xff\xfe,2\n", CLS_FORMAT_CSV, "bad.txt:3", "not UTF-8");
    expect_read_error("{\"text\": \"a\"}\n{\"text\": \n", CLS_FORMAT_JSONL, "bad.txt:2", "not valid JSON");
    expect_read_error("{\"text\": \"a\"}\n[1]\n", CLS_FORMAT_JSONL, "bad.txt:2", "not a JSON object");
    expect_read_error("{\"text\": {\"a\": 1}}\n", CLS_FORMAT_JSONL, "bad.txt:1", "is an object");
    expect_read_error("{\"text\": \"a\", \"label\": [[1]]}\n", CLS_FORMAT_JSONL, "bad.txt:1", "list's items");
    ClsFormat f;
    BertError err;
    CHECK(cls_format("a/b.CSV", NULL, &f, &err) == 0 && f == CLS_FORMAT_CSV);
    CHECK(cls_format("x.jsonl", NULL, &f, &err) == 0 && f == CLS_FORMAT_JSONL);
    CHECK(cls_format("x.data", "tsv", &f, &err) == 0 && f == CLS_FORMAT_TSV);
    CHECKF(cls_format("dir.v2/x", NULL, &f, &err) != 0 && strstr(err.msg, "--format"), "%s", err.msg);
    CHECKF(cls_format("x.csv", "xml", &f, &err) != 0 && strstr(err.msg, "--format xml"), "%s", err.msg);
}

/* JSONL: strings, numbers as JSON writes them, lists, null and missing keys; the columns
 * are the first object's. */
static void test_jsonl_cells(void) {
    const char *path = test_tmp_path("/cells.jsonl");
    write_text(path, "{\"text\": \"a\", \"label\": 3, \"tags\": [\"x\", 2]}\r\n\n"
                     "{\"label\": 0.25, \"text\": \"b\\n\", \"tags\": null, \"extra\": 1}\n"
                     "{\"text\": \"c\", \"label\": true}");
    ClsTable t;
    BertError err;
    CHECKF(cls_read_table(path, CLS_FORMAT_JSONL, &t, &err) == 0, "%s", err.msg);
    CHECK(t.n_cols == 3 && t.n_rows == 3 && !strcmp(t.names[2], "tags") && t.line[1] == 3 && t.line[2] == 4);
    if (t.n_rows == 3 && t.n_cols == 3) {
        CHECK(!strcmp(t.cell[0], "a") && !strcmp(t.cell[1], "3") && !strcmp(t.cell[2], "x\x1f" "2") && t.is_list[2]);
        CHECK(!strcmp(t.cell[3], "b\n") && !strcmp(t.cell[4], "0.25") && t.cell[5] == NULL);
        CHECK(!strcmp(t.cell[7], "true") && t.cell[8] == NULL && cls_column(&t, "extra") < 0);
    }
    cls_table_free(&t);
}

/* A list label without --multi_label: refused naming the file, the line and the flag (it
 * was taken for one label, its items joined by the table's internal separator, "a\x1fb"). */
static void test_list_label_needs_multi_label(void) {
    const char *path = test_tmp_path("/lists.jsonl");
    write_text(path, "{\"text\": \"hello\", \"labels\": \"a\"}\n{\"text\": \"hi\", \"labels\": [\"a\", \"b\"]}\n"
                     "{\"text\": \"hey\", \"labels\": []}\n");
    ClsTable t;
    ClsLabels l;
    ClsExamples e;
    BertError err;
    CHECKF(cls_read_table(path, CLS_FORMAT_JSONL, &t, &err) == 0, "%s", err.msg);
    CHECKF(cls_labels_collect(&t, path, 1, CLS_SINGLE_LABEL, ",", &l, &err) != 0 &&
               strstr(err.msg, "lists.jsonl:2: \"labels\" is a list: a row's labels as a list need --multi_label"),
           "%s", err.msg);
    CHECK(cls_labels_parse("a,b", &l, &err) == 0);
    const ClsColumns single = {.label_column = "labels"}, regression = {.label_column = "labels", .problem = CLS_REGRESSION};
    CHECKF(cls_examples(&t, path, &single, &l, true, &e, &err) != 0 && strstr(err.msg, "lists.jsonl:2:") &&
               strstr(err.msg, "--multi_label"), "%s", err.msg);
    cls_labels_free(&l), cls_table_free(&t);
    /* a regression target in a list (it was read as the number) */
    write_text(path, "{\"text\": \"hello\", \"labels\": 0.5}\n{\"text\": \"hi\", \"labels\": [1.5]}\n");
    CHECKF(cls_read_table(path, CLS_FORMAT_JSONL, &t, &err) == 0, "%s", err.msg);
    CHECKF(cls_examples(&t, path, &regression, NULL, true, &e, &err) != 0 && strstr(err.msg, "lists.jsonl:2:") &&
               strstr(err.msg, "--multi_label"), "%s", err.msg);
    cls_table_free(&t);
    /* an empty list: the same (it said "an empty label") */
    write_text(path, "{\"text\": \"hello\", \"labels\": \"a\"}\n{\"text\": \"hey\", \"labels\": []}\n");
    CHECKF(cls_read_table(path, CLS_FORMAT_JSONL, &t, &err) == 0, "%s", err.msg);
    CHECKF(cls_labels_collect(&t, path, 1, CLS_SINGLE_LABEL, ",", &l, &err) != 0 &&
               strstr(err.msg, "lists.jsonl:2: \"labels\" is an empty list: a row's labels as a list need --multi_label"),
           "%s", err.msg);
    /* with --multi_label both are labels (none for []) */
    CHECKF(cls_labels_collect(&t, path, 1, CLS_MULTI_LABEL, ",", &l, &err) == 0 && l.n == 1, "%s", err.msg);
    cls_labels_free(&l), cls_table_free(&t);
}

/* ---- labels and examples ---- */

static void test_labels_and_examples(void) {
    const char *path = test_tmp_path("/l.csv");
    write_text(path, "sentence,label,topics\nx,10,a|b\ny,9,\nz,-1,b\nw,9,c|a\n");
    ClsTable t;
    ClsLabels l, m;
    BertError err;
    CHECKF(cls_read_table(path, CLS_FORMAT_CSV, &t, &err) == 0, "%s", err.msg);
    /* integers sorted as numbers (run_classification.py's label_list.sort() on int labels) */
    CHECKF(cls_labels_collect(&t, path, 1, CLS_SINGLE_LABEL, ",", &l, &err) == 0, "%s", err.msg);
    CHECK(l.n == 3 && !strcmp(l.name[0], "-1") && !strcmp(l.name[1], "9") && !strcmp(l.name[2], "10"));
    CHECK(cls_label_id(&l, "10") == 2 && cls_label_id(&l, "11") == -1);
    CHECKF(cls_labels_collect(&t, path, 2, CLS_MULTI_LABEL, "|", &m, &err) == 0, "%s", err.msg);
    CHECK(m.n == 3 && !strcmp(m.name[0], "a") && !strcmp(m.name[2], "c"));
    ClsColumns c = {.label_column = "topics", .label_separator = "|", .problem = CLS_MULTI_LABEL};
    ClsExamples e;
    CHECKF(cls_examples(&t, path, &c, &m, true, &e, &err) == 0, "%s", err.msg);
    static const float want[4][3] = {{1, 1, 0}, {0, 0, 0}, {0, 1, 0}, {1, 0, 1}};
    CHECK(e.n == 4 && e.num_labels == 3 && !strcmp(e.text_a[3], "w") && !e.text_b[0] && !memcmp(e.multi, want, sizeof want));
    cls_examples_free(&e);
    c = (ClsColumns){.problem = CLS_REGRESSION};
    CHECKF(cls_examples(&t, path, &c, NULL, true, &e, &err) == 0 && e.value[2] == -1.0f, "%s", err.msg);
    cls_examples_free(&e);
    /* a label outside the map: the file and line */
    ClsLabels fixed;
    CHECK(cls_labels_parse("9,10", &fixed, &err) == 0 && fixed.n == 2);
    c = (ClsColumns){0};
    CHECKF(cls_examples(&t, path, &c, &fixed, true, &e, &err) != 0 && strstr(err.msg, "l.csv:4") &&
               strstr(err.msg, "'-1'"), "%s", err.msg);
    c.text_columns = "sentence,nope";
    CHECKF(cls_examples(&t, path, &c, &fixed, true, &e, &err) != 0 && strstr(err.msg, "no column \"nope\""), "%s", err.msg);
    c = (ClsColumns){.label_column = "gold"};
    CHECKF(cls_examples(&t, path, &c, &fixed, true, &e, &err) != 0 && strstr(err.msg, "no column \"gold\""), "%s", err.msg);
    CHECK(cls_examples(&t, path, &c, &fixed, false, &e, &err) == 0 && !e.labelled && e.label[0] == -1);
    cls_examples_free(&e);
    c = (ClsColumns){0};   /* a test file: its labels are not read, '-1' or not */
    CHECKF(cls_examples(&t, path, &c, &fixed, false, &e, &err) == 0 && !e.labelled && e.label[2] == -1, "%s", err.msg);
    cls_examples_free(&e);
    cls_labels_free(&m);
    CHECKF(cls_labels_parse("a,b,a", &m, &err) != 0 && strstr(err.msg, "twice") && strstr(err.msg, "--labels"), "%s",
           err.msg);
    cls_labels_free(&l), cls_labels_free(&fixed), cls_table_free(&t);
    /* one distinct label is not a classification */
    write_text(path, "text,label\na,x\nb,x\n");
    CHECK(cls_read_table(path, CLS_FORMAT_CSV, &t, &err) == 0);
    CHECKF(cls_labels_collect(&t, path, 1, CLS_SINGLE_LABEL, ",", &l, &err) != 0 && strstr(err.msg, "1 distinct"), "%s",
           err.msg);
    cls_table_free(&t);
}

/* ---- metrics against scikit-learn (metrics.json) ---- */

static void check_score(const char *what, int c, const cJSON *want, double got) {
    const cJSON *w = cJSON_GetObjectItem(want, what);
    if (!w) return;
    /* both sides sum the same counts in float64: only the last bits may differ */
    CHECKF(fabs(got - w->valuedouble) <= 1e-12 * fmax(1, fabs(w->valuedouble)), "case %d %s: %.15g, sklearn %.15g",
           c, what, got, w->valuedouble);
}

static void test_metrics_match_sklearn(void) {
    cJSON *cases = read_json(DATA "metrics.json");
    int c = 0;
    for (const cJSON *k = cases ? cases->child : NULL; k; k = k->next, c++) {
        const char *problem = cJSON_GetObjectItem(k, "problem")->valuestring;
        const cJSON *truth = cJSON_GetObjectItem(k, "truth"), *pred = cJSON_GetObjectItem(k, "pred");
        const int n = cJSON_GetArraySize(truth), multi = !strcmp(problem, "multi");
        const int NL = cJSON_GetObjectItem(k, "num_labels") ? cJSON_GetObjectItem(k, "num_labels")->valueint : 1;
        ClsExamples e = {.n = n, .num_labels = NL, .labelled = true};
        e.label = calloc(n, sizeof(int)), e.value = calloc(n, sizeof(float)), e.multi = calloc((size_t)n * NL, 4);
        int *pl = calloc(n, sizeof(int));
        float *pv = calloc(n, sizeof(float)), *pm = calloc((size_t)n * NL, 4);
        for (int i = 0; i < n; i++) {
            const cJSON *t = cJSON_GetArrayItem(truth, i), *p = cJSON_GetArrayItem(pred, i);
            e.label[i] = t->valueint, pl[i] = p->valueint, e.value[i] = (float)t->valuedouble, pv[i] = (float)p->valuedouble;
            for (int j = 0; multi && j < NL; j++)
                e.multi[(size_t)i * NL + j] = (float)cJSON_GetArrayItem(t, j)->valueint,
                pm[(size_t)i * NL + j] = (float)cJSON_GetArrayItem(p, j)->valueint;
        }
        ClsScores s;
        cls_score(multi ? CLS_MULTI_LABEL : !strcmp(problem, "regression") ? CLS_REGRESSION : CLS_SINGLE_LABEL, &e, pl,
                  pv, pm, &s);
        const struct { const char *name; double v; } got[] = {
            {"accuracy", s.accuracy}, {"f1_macro", s.f1_macro}, {"f1_micro", s.f1_micro}, {"f1", s.f1},
            {"precision", s.precision}, {"recall", s.recall}, {"pearson", s.pearson}, {"spearmanr", s.spearman},
            {"mse", s.mse}, {"subset_accuracy", s.subset_accuracy}, {"f1_samples", s.f1_samples}};
        int reported = 0;
        for (size_t j = 0; j < sizeof got / sizeof got[0]; j++) {
            check_score(got[j].name, c, k, got[j].v);
            reported += !isnan(got[j].v);
            CHECKF(isnan(got[j].v) == !cJSON_GetObjectItem(k, got[j].name), "case %d: %s reported %d, sklearn %d", c,
                   got[j].name, !isnan(got[j].v), cJSON_GetObjectItem(k, got[j].name) != NULL);
        }
        CHECK(reported >= 3);
        cls_examples_free(&e), free(pl), free(pv), free(pm);
    }
    CHECK(c >= 9);
    cJSON_Delete(cases);
}

/* ---- the multi-label loss ---- */

/* k_bce_* against PyTorch's float64 BCEWithLogitsLoss: the loss is a float64 sum rounded once
 * to float (half an ulp, and libm's few ulps on each term); each gradient one expf and a
 * division in float: a few float ulps of 1, times the mean's 1/n. */
static void test_bce_matches_torch(void) {
    cJSON *j = read_json(DATA "bce.json");
    const cJSON *x = cJSON_GetObjectItem(j, "logits"), *t = cJSON_GetObjectItem(j, "targets");
    const cJSON *g = cJSON_GetObjectItem(j, "grad");
    const int n = cJSON_GetArraySize(x);
    float *logits = malloc(sizeof(float) * n), *target = malloc(sizeof(float) * n), *d = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++)
        logits[i] = (float)cJSON_GetArrayItem(x, i)->valuedouble, target[i] = (float)cJSON_GetArrayItem(t, i)->valuedouble;
    float loss;
    k_bce_forward(&loss, logits, target, n);
    const double want = cJSON_GetObjectItem(j, "loss")->valuedouble;
    CHECKF(fabs(loss - want) <= 4 * FLT_EPSILON * want, "loss %.9g, torch %.9g", loss, want);
    k_bce_backward(d, logits, target, n, 1.0f / n);
    for (int i = 0; i < n; i++) {
        const double w = cJSON_GetArrayItem(g, i)->valuedouble;
        CHECKF(fabs(d[i] - w) <= 4 * FLT_EPSILON / n, "grad[%d] %.9g, torch %.9g", i, d[i], w);
    }
    free(logits), free(target), free(d);
    cJSON_Delete(j);
}

static double train_loss(BertModel *m, const BertBatch *b) { return bert_forward(m, b, true, 17); }

/* The model's multi-label head in training mode: the backward's gradient against central
 * differences along it. A step moving the loss (~0.7, float32: rounded to ~6e-8) by ~1e-3:
 * ~6e-5 relative from rounding; the curvature's share, measured 3.4e-2 at a step 10 times
 * longer, falls with its square to ~3e-4: tolerance 2e-3. */
static void test_multilabel_head_gradient(void) {
    BertConfig c;
    BertError err;
    bert_config_preset("bert-tiny", &c, &err);
    c.num_hidden_layers = 1, c.hidden_size = 16, c.num_attention_heads = 2, c.intermediate_size = 32;
    c.vocab_size = 50, c.max_position_embeddings = 16;
    BertModel *m;
    if (bert_model_create_with_heads(&m, &c, (BertHeads){BERT_HEADS_CLASSIFIER, 5}, 3, 8, 0, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    bert_init_weights(m, 7);
    const int32_t ids[24] = {2, 5, 9, 11, 3, 0, 0, 0, 2, 7, 7, 8, 12, 30, 41, 3, 2, 4, 3, 0, 0, 0, 0, 0};
    const int32_t mask[24] = {1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    const int32_t types[24] = {0};
    const float targets[15] = {1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1};
    BertBatch b = {.batch = 3, .seq_len = 8, .input_ids = ids, .token_type_ids = types, .attention_mask = mask,
                   .multi_label_targets = targets};
    const size_t np = bert_num_parameters(m);
    bert_zero_grad(m);
    const double l0 = train_loss(m, &b);
    bert_backward(m, &b);
    float *g = malloc(np * sizeof(float)), *p = bert_params(m), *saved = malloc(np * sizeof(float));
    memcpy(g, bert_grads(m), np * sizeof(float)), memcpy(saved, p, np * sizeof(float));
    double norm = 0;
    for (size_t i = 0; i < np; i++) norm += (double)g[i] * g[i];
    norm = sqrt(norm);
    const double h = 1e-3 / norm;
    for (size_t i = 0; i < np; i++) p[i] = saved[i] + (float)(h * g[i] / norm);
    bert_params_changed(m);
    const double up = train_loss(m, &b);
    for (size_t i = 0; i < np; i++) p[i] = saved[i] - (float)(h * g[i] / norm);
    bert_params_changed(m);
    const double fd = (up - train_loss(m, &b)) / (2 * h);
    printf("    multi-label loss %.5f (log 2 = %.5f), |g| %.5f, fd %.5f\n", l0, log(2.0), norm, fd);
    CHECKF(isfinite(l0) && fabs(fd - norm) <= 2e-3 * norm, "fd %.6g vs |g| %.6g", fd, norm);
    float bad[15];
    memcpy(bad, targets, sizeof bad), bad[4] = 2;
    b.multi_label_targets = bad;
    CHECKF(isnan(bert_forward(m, &b, false, 0)) && strstr(bert_last_error(m), "outside [0, 1]"), "%s",
           bert_last_error(m));
    free(g), free(saved);
    bert_model_free(m);
}


/* ---- `bert classify` end to end ---- */

#define VOCAB "data/vocab/bert-base-uncased-vocab.txt"

/* A tiny model with the real vocabulary saved as a checkpoint folder root/init. */
static void write_tiny_checkpoint(const char *root, char *init, size_t init_size) {
    remove_tree(root);
    mkdir(root, 0777);
    BertConfig c;
    BertError err;
    bert_config_preset("bert-tiny", &c, &err);
    c.num_hidden_layers = 2, c.hidden_size = 32, c.num_attention_heads = 2, c.intermediate_size = 64;
    c.max_position_embeddings = 64;
    BertModel *m;
    char path[512];
    snprintf(init, init_size, "%s/init", root);
    mkdir(init, 0777);
    if (bert_model_create(&m, &c, 1, 8, 1, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    bert_init_weights(m, 3);
    snprintf(path, sizeof path, "%s/model.safetensors", init);
    CHECKF(bert_save_safetensors(m, path, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/config.json", init);
    CHECKF(bert_config_save(path, &c, &err) == 0, "%s", err.msg);
    bert_model_free(m);
}

static void tiny_options(ClassifyOptions *o, const char *init, const char *out, const char *kind, const char *ext) {
    static char files[3][128];
    classify_default_options(o);
    const char *split[3] = {"train", "dev", "test"};
    for (int k = 0; k < 3; k++) snprintf(files[k], sizeof files[k], DATA "%s_%s.%s", kind, split[k], ext);
    o->train_file = files[0], o->validation_file = files[1], o->test_file = files[2];
    o->ft.output_dir = out, o->ft.init_checkpoint = init, o->ft.vocab_file = VOCAB, o->ft.do_lower_case = true;
    o->ft.do_train = true, o->ft.max_seq_length = 32, o->ft.train_batch_size = 8, o->ft.eval_batch_size = 5;
    o->ft.learning_rate = 2e-3, o->ft.warmup_proportion = 0, o->ft.log_freq = 1000, o->ft.seed = 5;
}

static char *read_in(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return read_text(path);
}

static int count_lines(const char *text) {
    int n = 0;
    for (; *text; text++) n += *text == '\n';
    return n;
}

/* config.json as transformers reads it: the architecture, problem_type and id2label[k]. */
static void check_config(const char *dir, const char *problem, int n, const char *last_label) {
    char *text = read_in(dir, "config.json");
    cJSON *j = cJSON_Parse(text);
    const cJSON *id2label = cJSON_GetObjectItem(j, "id2label"), *label2id = cJSON_GetObjectItem(j, "label2id");
    char key[16];
    snprintf(key, sizeof key, "%d", n - 1);
    const cJSON *last = cJSON_GetObjectItem(id2label, key), *type = cJSON_GetObjectItem(j, "problem_type");
    CHECKF(j && strstr(text, "\"BertForSequenceClassification\"") && cJSON_GetArraySize(id2label) == n && last &&
               !strcmp(last->valuestring, last_label) && cJSON_GetObjectItem(label2id, last_label)->valueint == n - 1 &&
               type && !strcmp(type->valuestring, problem), "%s", text);
    cJSON_Delete(j), free(text);
}

/* Trains one problem twice: one step (fp32, then bf16 emulated: the same step within bf16's
 * rounding), then `epochs` epochs with evaluation and predictions; the loss falls to below
 * `fall` of the first step's. Returns the long run's result and its output folder's path. */
static void train_twice(ClassifyOptions *o, double epochs, double fall, ClassifyResult *r) {
    ClassifyResult first, bf16;
    BertError err;
    ClassifyOptions one = *o;
    one.ft.max_steps = 1, one.ft.skip_checkpoint = true, one.ft.do_eval = one.ft.do_predict = false;
    CHECKF(classify_run(&one, &first, &err) == 0, "%s", err.msg);
    one.ft.precision = BERT_BF16_EMULATED;
    CHECKF(classify_run(&one, &bf16, &err) == 0, "%s", err.msg);
    CHECKF(first.train.steps == 1 && bf16.train.final_loss != first.train.final_loss &&
               fabs(bf16.train.final_loss - first.train.final_loss) <= 1e-2 * first.train.final_loss,
           "first step's loss fp32 %.6f, bf16 %.6f", first.train.final_loss, bf16.train.final_loss);
    o->ft.num_train_epochs = epochs, o->ft.do_eval = o->ft.do_predict = true;
    CHECKF(classify_run(o, r, &err) == 0, "%s", err.msg);
    char *json = cls_scores_json(&r->dev);
    printf("    %s: loss %.4f after 1 step, %.4f after %ld; dev %s\n", cls_problem_name(r->problem),
           first.train.final_loss, r->train.final_loss, r->train.steps, json);
    free(json);
    CHECKF(r->train.final_loss < fall * first.train.final_loss, "loss %.4f -> %.4f", first.train.final_loss,
           r->train.final_loss);
    CHECK(r->evaluated && r->predicted > 0 && r->model_dir[0]);
}

/* Evaluating alone from the saved model (its labels and problem from config.json) gives the
 * same scores. */
static void check_alone(const ClassifyOptions *trained, const ClassifyResult *r, const char *alone) {
    ClassifyOptions o;
    ClassifyResult pr;
    BertError err;
    classify_default_options(&o);
    o.validation_file = trained->validation_file, o.columns = trained->columns, o.columns.problem = CLS_SINGLE_LABEL;
    o.ft.output_dir = alone, o.ft.init_checkpoint = trained->ft.output_dir, o.ft.do_eval = true;
    o.ft.max_seq_length = 32, o.ft.eval_batch_size = 3;
    CHECKF(classify_run(&o, &pr, &err) == 0, "%s", err.msg);
    char *a = cls_scores_json(&r->dev), *b = cls_scores_json(&pr.dev);
    CHECKF(pr.problem == r->problem && pr.num_labels == r->num_labels && !strcmp(a, b), "%s vs %s", a, b);
    free(a), free(b);
}

static void test_single_label_end_to_end(void) {
    const char *root = test_tmp_path("/single");
    char init[256], out[300], alone[300];
    write_tiny_checkpoint(root, init, sizeof init);
    snprintf(out, sizeof out, "%s/out", root), snprintf(alone, sizeof alone, "%s/alone", root);
    ClassifyOptions o;
    ClassifyResult r;
    tiny_options(&o, init, out, "multiclass", "csv");   /* sentence1,sentence2: a pair by default */
    /* the tiny random model takes some 20 epochs to find the words that decide: chance is 1/3 */
    train_twice(&o, 30, 0.75, &r);
    CHECKF(r.dev.accuracy >= 0.6, "dev accuracy %.3f", r.dev.accuracy);
    CHECK(r.problem == CLS_SINGLE_LABEL && r.num_labels == 3 && r.eval_examples == 15 && r.predicted == 6);
    check_config(out, "single_label_classification", 3, "positive");
    char *eval = read_in(out, "eval_results.json"), *pred = read_in(out, "predict_results.tsv");
    CHECKF(strstr(eval, "\"accuracy\"") && strstr(eval, "\"f1_macro\"") && !strstr(eval, "\"precision\""), "%s", eval);
    CHECKF(!strncmp(pred, "index\tprediction\tnegative\tneutral\tpositive\n0\t", 43) && count_lines(pred) == 7, "%s", pred);
    free(eval), free(pred);
    check_alone(&o, &r, alone);
    remove_tree(root);
}

static void test_regression_end_to_end(void) {
    const char *root = test_tmp_path("/regression");
    char init[256], out[300], alone[300];
    write_tiny_checkpoint(root, init, sizeof init);
    snprintf(out, sizeof out, "%s/out", root), snprintf(alone, sizeof alone, "%s/alone", root);
    ClassifyOptions o;
    ClassifyResult r;
    tiny_options(&o, init, out, "regression", "tsv");
    o.columns.label_column = "score", o.columns.problem = CLS_REGRESSION, o.problem_given = true;
    train_twice(&o, 10, 0.5, &r);
    CHECK(r.problem == CLS_REGRESSION && r.num_labels == 1 && r.eval_examples == 12 && r.predicted == 5);
    check_config(out, "regression", 1, "LABEL_0");
    char *eval = read_in(out, "eval_results.json"), *pred = read_in(out, "predict_results.tsv");
    CHECKF(strstr(eval, "\"pearson\"") && strstr(eval, "\"spearmanr\"") && strstr(eval, "\"mse\""), "%s", eval);
    CHECKF(!strncmp(pred, "index\tprediction\n0\t", 19) && count_lines(pred) == 6, "%s", pred);
    free(eval), free(pred);
    check_alone(&o, &r, alone);
    remove_tree(root);
}

/* JSONL lists, and the same rows as a CSV with "|" between labels: the same labels and the
 * same first step, bit for bit. */
static void test_multi_label_end_to_end(void) {
    const char *root = test_tmp_path("/multi");
    char init[256], out[300], alone[300];
    write_tiny_checkpoint(root, init, sizeof init);
    snprintf(out, sizeof out, "%s/out", root), snprintf(alone, sizeof alone, "%s/alone", root);
    ClassifyOptions o;
    ClassifyResult r, a, b;
    BertError err;
    tiny_options(&o, init, out, "multilabel", "jsonl");
    o.columns.label_column = "labels", o.columns.problem = CLS_MULTI_LABEL, o.problem_given = true;
    ClassifyOptions one = o;
    one.ft.max_steps = 1, one.ft.skip_checkpoint = true, one.ft.do_eval = one.ft.do_predict = false;
    CHECKF(classify_run(&one, &a, &err) == 0, "%s", err.msg);
    one.train_file = DATA "multilabel_train.csv", one.columns.label_separator = "|";
    CHECKF(classify_run(&one, &b, &err) == 0, "%s", err.msg);
    CHECKF(a.num_labels == 4 && b.num_labels == 4 && a.train.final_loss == b.train.final_loss, "%d %d labels, %.7f %.7f",
           a.num_labels, b.num_labels, a.train.final_loss, b.train.final_loss);
    train_twice(&o, 30, 0.9, &r);   /* the loss starts at log 2 a label */
    CHECKF(r.dev.f1_micro >= 0.6, "dev micro F1 %.3f", r.dev.f1_micro);
    CHECK(r.problem == CLS_MULTI_LABEL && r.num_labels == 4 && r.eval_examples == 15 && r.predicted == 5);
    check_config(out, "multi_label_classification", 4, "travel");
    char *eval = read_in(out, "eval_results.json"), *pred = read_in(out, "predict_results.jsonl");
    CHECKF(strstr(eval, "\"subset_accuracy\"") && strstr(eval, "\"f1_samples\"") && strstr(eval, "\"f1_micro\""), "%s",
           eval);
    CHECKF(!strncmp(pred, "{\"index\":0,\"label\":[", 20) && strstr(pred, "\"scores\":{\"food\":") && count_lines(pred) == 5,
           "%s", pred);
    free(eval), free(pred);
    check_alone(&o, &r, alone);
    remove_tree(root);
}

/* Every file the run reads is read and checked before any work: a bad validation or test
 * file fails at once, naming its line, no step trained and no output folder made (it was
 * found only after the whole training, leaving a model and no all_results.json). */
static void test_bad_files_fail_before_training(void) {
    const char *root = test_tmp_path("/early");
    char init[256], out[300];
    write_tiny_checkpoint(root, init, sizeof init);
    snprintf(out, sizeof out, "%s/out", root);
    write_text(test_tmp_path("/early/dev_mixed.csv"), "sentence1,sentence2,label\na,b,neutral\nc,d,mixed\n");
    write_text(test_tmp_path("/early/dev_unlabelled.csv"), "sentence1,sentence2\na,b\n");
    write_text(test_tmp_path("/early/test_short.csv"), "sentence1,sentence2\na,b\nc\n");
    const struct { const char *dev, *test, *message; } cases[] = {
        {test_tmp_path("/early/dev_mixed.csv"), NULL, "dev_mixed.csv:3: the label 'mixed' is not one of the 3 labels"},
        {test_tmp_path("/early/dev_unlabelled.csv"), NULL, "dev_unlabelled.csv: no column \"label\""},
        {NULL, test_tmp_path("/early/test_short.csv"), "test_short.csv:3: 1 cells, the header has 2"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ClassifyOptions o;
        ClassifyResult r;
        BertError err;
        tiny_options(&o, init, out, "multiclass", "csv");
        o.ft.do_eval = o.ft.do_predict = true, o.ft.num_train_epochs = 2;
        if (cases[k].dev) o.validation_file = cases[k].dev;
        if (cases[k].test) o.test_file = cases[k].test;
        const int rc = classify_run(&o, &r, &err);
        CHECKF(rc != 0 && strstr(err.msg, cases[k].message), "case %zu: rc %d: %s", k, rc, rc ? err.msg : "");
        CHECKF(r.train.steps == 0 && !file_exists(out), "case %zu: %ld steps trained, the output folder %s", k,
               r.train.steps, file_exists(out) ? "made" : "not made");
        remove_tree(out);
    }
    remove_tree(root);
}

/* The command as a user runs it: run_classification.py's flags, --bf16 where the CPU has
 * bf16 instructions (else the run says so and stops); contradicting flags refused. */
static char bert_bin[512];

static void test_classify_command(void) {
    const char *root = test_tmp_path("/cmd");
    char init[256], cmd[2048], path[512];
    write_tiny_checkpoint(root, init, sizeof init);
    const char *common = "--train_file " DATA "multiclass_train.csv --validation_file " DATA "multiclass_dev.csv "
                         "--test_file " DATA "multiclass_test.csv --vocab_file " VOCAB " --do_lower_case "
                         "--max_seq_length 32 --train_batch_size 8 --learning_rate 2e-3 --num_train_epochs 2";
    snprintf(cmd, sizeof cmd, "%s classify --init_checkpoint %s --output_dir %s/out --do_train --do_eval --do_predict %s "
             "--text_column_names sentence1 --bf16 > %s/log.txt 2>&1", bert_bin, init, root, common, root);
    const int rc = system(cmd);
    snprintf(path, sizeof path, "%s/log.txt", root);
    char *log = read_text(path);
    CHECKF(rc == 0 || strstr(log, "no bf16 instructions"), "rc %d: %s", rc, log);
    if (rc == 0) CHECKF(strstr(log, "bert classify: eval {\"accuracy\":") && strstr(log, "predict_results.tsv"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s classify --init_checkpoint %s --output_dir %s/o2 --do_train %s --do_regression "
             "--multi_label > /dev/null 2>&1", bert_bin, init, root, common);
    CHECK(WEXITSTATUS(system(cmd)) == 2);
    snprintf(cmd, sizeof cmd, "%s classify --init_checkpoint %s --output_dir %s/o3 --do_train %s --label_column_name gold "
             "> %s/log.txt 2>&1", bert_bin, init, root, common, root);
    CHECK(WEXITSTATUS(system(cmd)) == 1);
    log = read_text(path);
    CHECKF(strstr(log, "multiclass_train.csv: no column \"gold\""), "%s", log);
    snprintf(path, sizeof path, "%s/o3", root);
    CHECK(!file_exists(path));   /* a failed run leaves no folder */
    free(log);
    remove_tree(root);
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert_bin, sizeof bert_bin) != 0) return 1;
    test_tmp_begin("bert_test_classify");
    RUN_TEST(test_csv_quoting_as_python);
    RUN_TEST(test_reader_errors);
    RUN_TEST(test_jsonl_cells);
    RUN_TEST(test_list_label_needs_multi_label);
    RUN_TEST(test_labels_and_examples);
    RUN_TEST(test_metrics_match_sklearn);
    RUN_TEST(test_bce_matches_torch);
    RUN_TEST(test_multilabel_head_gradient);
    RUN_TEST(test_single_label_end_to_end);
    RUN_TEST(test_regression_end_to_end);
    RUN_TEST(test_multi_label_end_to_end);
    RUN_TEST(test_bad_files_fail_before_training);
    RUN_TEST(test_classify_command);
    remove_tree(test_tmp_path(""));
    return test_summary();
}
