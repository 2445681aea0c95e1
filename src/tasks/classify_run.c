/* `bert classify`: see classify_run.h. Training reads the examples in a new random order each
 * epoch (seeded), in micro-batches each as long as its longest row (tasks/glue_run.h's
 * batches); the encoder skips each row's padding (finetune.h). */
#include "tasks/classify_run.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "io/json_util.h"
#include "tasks/glue.h"
#include "tasks/glue_run.h"
#include "tasks/task_session.h"
#include "text/vocab.h"
#include "train/logger.h"

void classify_default_options(ClassifyOptions *o) {
    memset(o, 0, sizeof *o);
    finetune_default_args(&o->ft);
    o->ft.max_seq_length = 128, o->ft.eval_batch_size = 32;
}

/* A file read into examples (the table they point into) and, once the tokenizer is there,
 * features. */
typedef struct {
    ClsTable table;
    ClsExamples e;
    GlueFeatures f;
    ClsFormat format;
} Loaded;

static void loaded_free(Loaded *d) {
    glue_features_free(&d->f), cls_examples_free(&d->e), cls_table_free(&d->table);
}

typedef struct {
    const ClassifyOptions *o;
    ClsColumns columns;            /* the options' with the problem the run settled on */
    ClsLabels labels;              /* none for regression */
    int num_labels;                /* the head's outputs: the labels, or 1 */
    Loaded train, dev, test;       /* the files the run reads, each read and checked before any work */
    Tokenizer *tok;
    Vocab *vocab;
    Finetuner *ft;
    Logger *log;
    GlueBatchInputs in;
    int32_t *class_labels;         /* [max_batch] */
    float *targets;                /* [max_batch, num_labels] */
} Run;

/* A file's rows as examples: the text columns there, and with need_labels every row's
 * label(s) one of the run's (an error names the file and line). */
static int read_examples(Run *r, const char *path, bool need_labels, Loaded *d, BertError *err) {
    int rc = cls_format(path, r->o->format, &d->format, err);
    if (rc == 0) rc = cls_read_table(path, d->format, &d->table, err);
    if (rc == 0) rc = cls_examples(&d->table, path, &r->columns, &r->labels, need_labels, &d->e, err);
    return rc;
}

/* The examples tokenized into features. */
static int make_features(Run *r, const char *path, Loaded *d, BertError *err) {
    const GlueExamples view = {.n = d->e.n, .text_a = d->e.text_a, .text_b = d->e.text_b};
    if (glue_features(&view, r->tok, r->o->ft.max_seq_length, &d->f, err) != 0) return -1;
    if (d->f.truncated)
        logger_print(r->log, "%s: %ld of %d examples cut to --max_seq_length %d", path, d->f.truncated, d->e.n,
                     r->o->ft.max_seq_length);
    return 0;
}

/* The fine-tuner's batches (train/finetune.h): training rows with the problem's labels. */
static BertBatch training_batch(void *ctx, const int *rows, int n) {
    Run *r = ctx;
    const ClsExamples *e = &r->train.e;
    BertBatch b = glue_batch(&r->train.f, rows, n, &r->in);
    const int NL = r->num_labels;
    for (int i = 0; i < n; i++) {
        r->class_labels[i] = e->label[rows[i]];
        if (r->columns.problem == CLS_MULTI_LABEL) memcpy(r->targets + (size_t)i * NL, e->multi + (size_t)rows[i] * NL, sizeof(float) * NL);
        else r->targets[i] = e->value[rows[i]];
    }
    if (r->columns.problem == CLS_SINGLE_LABEL) b.class_labels = r->class_labels;
    else if (r->columns.problem == CLS_REGRESSION) b.regression_targets = r->targets;
    else b.multi_label_targets = r->targets;
    return b;
}

/* What the logits say: label ids and their softmax probabilities (single-label), values
 * (regression) or 0/1 decisions and sigmoid probabilities per label (multi-label). */
typedef struct {
    int *label;
    float *value, *multi, *prob;   /* prob: [n, num_labels] */
    double seconds;
} Predicted;

static void predicted_free(Predicted *p) { free(p->label), free(p->value), free(p->multi), free(p->prob); }

static void decode_row(ClsProblem problem, const float *z, int NL, float *prob, float *multi, int *label) {
    if (problem == CLS_MULTI_LABEL) {
        for (int k = 0; k < NL; k++) prob[k] = 1.0f / (1.0f + expf(-z[k])), multi[k] = z[k] > 0.0f;
        return;
    }
    int best = 0;
    for (int k = 1; k < NL; k++) best = z[k] > z[best] ? k : best;
    double sum = 0;
    for (int k = 0; k < NL; k++) sum += exp((double)z[k] - z[best]);
    for (int k = 0; k < NL; k++) prob[k] = (float)(exp((double)z[k] - z[best]) / sum);
    *label = best;
}

static int predict(Run *r, const Loaded *d, Predicted *p, BertError *err) {
    const int n = d->e.n, NL = r->num_labels;
    p->label = xcalloc((size_t)n, sizeof(int)), p->value = xcalloc((size_t)n, sizeof(float));
    p->multi = xcalloc((size_t)n * NL, sizeof(float)), p->prob = xcalloc((size_t)n * NL, sizeof(float));
    float *logits = xmalloc(sizeof(float) * (size_t)n * NL);
    const int rc = glue_predict_logits(finetune_model(r->ft), &d->f, r->o->ft.eval_batch_size, NL, &r->in, logits,
                                       &p->seconds, r->log, err);
    for (int i = 0; rc == 0 && i < n; i++) {
        const size_t at = (size_t)i * NL;
        p->value[i] = logits[at];
        decode_row(r->columns.problem, logits + at, NL, p->prob + at, p->multi + at, &p->label[i]);
    }
    free(logits);
    return rc;
}

static int write_text(const char *path, const char *text, BertError *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    fprintf(af.fp, "%s\n", text);
    return atomic_commit(&af, err);
}

/* The validation file's scores (caller frees), NULL on an error. */
static char *dev_scores(Run *r, ClassifyResult *res, BertError *err) {
    Predicted p = {0};
    char *json = NULL;
    if (predict(r, &r->dev, &p, err) == 0) {
        cls_score(r->columns.problem, &r->dev.e, p.label, p.value, p.multi, &res->dev);
        res->evaluated = true, res->eval_examples = r->dev.e.n, res->eval_seconds = p.seconds;
        json = cls_scores_json(&res->dev);
    }
    predicted_free(&p);
    return json;
}

/* Evaluation during training (finetune.h's hook): the scores only. */
static char *evaluate_during_training(void *ctx, BertError *err) {
    ClassifyResult scratch = {0};
    return dev_scores(ctx, &scratch, err);
}

/* The score that picks the best model (--save_best): accuracy (single-label), Pearson's r
 * (regression), micro-averaged F1 (multi-label). */
static const char *main_metric(ClsProblem problem) {
    return problem == CLS_REGRESSION ? "pearson" : problem == CLS_MULTI_LABEL ? "f1_micro" : "accuracy";
}

static int evaluate(Run *r, ClassifyResult *res, BertError *err) {
    char *json = dev_scores(r, res, err), path[4096 + 32];
    if (!json) return -1;
    logger_print(r->log, "eval %s (%ld examples, %.1f seq/s): %s", r->o->validation_file, (long)res->eval_examples,
                 res->eval_examples / res->eval_seconds, json);
    logger_summary(r->log, cJSON_Parse(json));
    snprintf(path, sizeof path, "%s/eval_results.json", r->o->ft.output_dir);
    const int rc = write_text(path, json, err);
    free(json);
    return rc;
}

/* A TSV cell: quoted (RFC 4180, as the reader reads TSV) when it holds a tab, a line break or
 * a quote. */
static void tsv_cell(FILE *fp, const char *s) {
    if (!strpbrk(s, "\t\n\r\"")) {
        fputs(s, fp);
        return;
    }
    fputc('"', fp);
    for (; *s; s++) {
        if (*s == '"') fputc('"', fp);   /* a quote inside is written twice */
        fputc(*s, fp);
    }
    fputc('"', fp);
}

/* predict_results.tsv: index, prediction (multi-label: the labels joined by the separator),
 * then each label's probability in a column named after it. */
static void write_tsv(Run *r, const Loaded *d, const Predicted *p, FILE *fp) {
    const int NL = r->num_labels;
    const bool regression = r->columns.problem == CLS_REGRESSION, multi = r->columns.problem == CLS_MULTI_LABEL;
    const char *sep = r->columns.label_separator ? r->columns.label_separator : ",";
    fputs("index\tprediction", fp);
    for (int k = 0; !regression && k < NL; k++) fputc('\t', fp), tsv_cell(fp, r->labels.name[k]);
    fputc('\n', fp);
    for (int i = 0; i < d->e.n; i++) {
        const size_t at = (size_t)i * NL;
        fprintf(fp, "%d\t", i);
        if (regression) {
            fprintf(fp, "%.6g\n", p->value[i]);
            continue;
        }
        if (!multi) tsv_cell(fp, r->labels.name[p->label[i]]);
        for (int k = 0, first = 1; multi && k < NL; k++)
            if (p->multi[at + k] > 0.5f) fputs(first ? "" : sep, fp), tsv_cell(fp, r->labels.name[k]), first = 0;
        for (int k = 0; k < NL; k++) fprintf(fp, "\t%.6f", p->prob[at + k]);
        fputc('\n', fp);
    }
}

/* A float with the digits a float holds (7), not the 17 of its double. */
static void add_float(cJSON *o, const char *name, float p) {
    char text[32];
    snprintf(text, sizeof text, "%.7g", p);
    cJSON_AddRawToObject(o, name, text);
}

/* predict_results.jsonl: {"index", "label" (multi-label: a list) and "score" (its
 * probability), or "value"; "scores": each label's probability}. */
static void write_jsonl(Run *r, const Loaded *d, const Predicted *p, FILE *fp) {
    const int NL = r->num_labels;
    const ClsProblem problem = r->columns.problem;
    for (int i = 0; i < d->e.n; i++) {
        const size_t at = (size_t)i * NL;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", i);
        if (problem == CLS_REGRESSION) {
            add_float(o, "value", p->value[i]);
        } else {
            if (problem == CLS_SINGLE_LABEL) {
                cJSON_AddStringToObject(o, "label", r->labels.name[p->label[i]]);
                add_float(o, "score", p->prob[at + p->label[i]]);
            } else {
                cJSON *list = cJSON_AddArrayToObject(o, "label");
                for (int k = 0; k < NL; k++)
                    if (p->multi[at + k] > 0.5f) cJSON_AddItemToArray(list, cJSON_CreateString(r->labels.name[k]));
            }
            cJSON *scores = cJSON_AddObjectToObject(o, "scores");
            for (int k = 0; k < NL; k++) add_float(scores, r->labels.name[k], p->prob[at + k]);
        }
        char *line = cJSON_PrintUnformatted(o);
        fprintf(fp, "%s\n", line);
        free(line), cJSON_Delete(o);
    }
}

static int predict_test(Run *r, ClassifyResult *res, BertError *err) {
    Loaded *d = &r->test;
    Predicted p = {0};
    int rc = make_features(r, r->o->test_file, d, err);   /* now: a large file's features only while used */
    if (rc == 0 && (rc = predict(r, d, &p, err)) == 0) {
        const bool jsonl = d->format == CLS_FORMAT_JSONL;
        snprintf(res->predictions, sizeof res->predictions, "%s/predict_results.%s", r->o->ft.output_dir,
                 jsonl ? "jsonl" : "tsv");
        AtomicFile af;
        if ((rc = atomic_open(&af, res->predictions, err)) == 0) {
            if (jsonl) write_jsonl(r, d, &p, af.fp);
            else write_tsv(r, d, &p, af.fp);
            rc = atomic_commit(&af, err);
        }
        res->predicted = rc == 0 ? d->e.n : 0;
        if (rc == 0) logger_print(r->log, "test predictions: %s (%d rows)", res->predictions, d->e.n);
        else res->predictions[0] = '\0';
    }
    predicted_free(&p), glue_features_free(&d->f);
    return rc;
}

/* config.json's task members, as transformers writes them for BertForSequenceClassification
 * (regression: one output named LABEL_0). */
static char *task_config_json(const Run *r) {
    const bool regression = r->columns.problem == CLS_REGRESSION;
    return finetune_task_config_json("BertForSequenceClassification", "text-classification",
                                     cls_problem_name(r->columns.problem),
                                     regression ? NULL : (const char *const *)r->labels.name, r->num_labels);
}

/* A fine-tuned model's labels and problem: its config.json's id2label ("0" .. "N-1") and
 * problem_type (absent: regression with one output, else single-label). */
static int labels_from_config(Run *r, BertError *err) {
    const FinetuneArgs *a = &r->o->ft;
    char path[4096 + 32];
    struct stat st;
    if (a->config_file) snprintf(path, sizeof path, "%s", a->config_file);
    else if (stat(a->init_checkpoint, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/config.json", a->init_checkpoint);
    else return bert_fail(err, "--labels: needed to evaluate or predict without --do_train from a weights file");
    char *text;
    size_t len;
    if (read_file(path, &text, &len, err)) return -1;
    cJSON *root = cJSON_Parse(text);
    const cJSON *map = root ? json_get_last(root, "id2label") : NULL, *type = root ? json_get_last(root, "problem_type") : NULL;
    const int n = cJSON_IsObject(map) ? cJSON_GetArraySize(map) : 0;
    int rc = n > 0 ? 0 : bert_fail(err, "%s has no id2label (not a sequence-classification model): give --labels", path);
    char **names = xcalloc((size_t)n + 1, sizeof(char *));
    for (int k = 0; rc == 0 && k < n; k++) {
        char key[16];
        snprintf(key, sizeof key, "%d", k);
        const cJSON *name = json_get_last(map, key);
        if (!cJSON_IsString(name)) rc = bert_fail(err, "%s: id2label lacks \"%s\" (ids 0 .. %d expected)", path, key, n - 1);
        else names[k] = name->valuestring;
    }
    const int problem = cls_problem_of(cJSON_IsString(type) ? type->valuestring : NULL);
    if (rc == 0 && !r->o->problem_given)
        r->columns.problem = problem >= 0 ? (ClsProblem)problem : n == 1 ? CLS_REGRESSION : CLS_SINGLE_LABEL;
    if (rc == 0 && r->columns.problem == CLS_REGRESSION && n != 1)
        rc = bert_fail(err, "%s: %d labels, a regression model has one output", path, n);
    if (rc == 0 && r->columns.problem != CLS_REGRESSION) rc = cls_labels_from_names(names, n, &r->labels, err);
    r->num_labels = n;
    free(names), cJSON_Delete(root), free(text);
    return rc;
}

/* The run's labels: --labels, else the training file's (its table read), else the model's. */
static int choose_labels(Run *r, const ClsTable *train, BertError *err) {
    const ClassifyOptions *o = r->o;
    if (o->ft.do_train || o->labels) {
        int rc = 0;
        if (r->columns.problem == CLS_REGRESSION) r->num_labels = 1;
        else if (o->labels) rc = cls_labels_parse(o->labels, &r->labels, err);
        else {
            const int col = cls_column(train, o->columns.label_column ? o->columns.label_column : "label");
            rc = col < 0 ? bert_fail(err, "%s: no column \"%s\" (--label_column_name)", o->train_file,
                                     o->columns.label_column ? o->columns.label_column : "label")
                         : cls_labels_collect(train, o->train_file, col, r->columns.problem,
                                              o->columns.label_separator ? o->columns.label_separator : ",", &r->labels, err);
        }
        if (r->columns.problem != CLS_REGRESSION) r->num_labels = r->labels.n;
        return rc;
    }
    return labels_from_config(r, err);
}

/* Before any work: the flags, the model folder's defaults and that the data files are there. */
static int check_options(const ClassifyOptions *o, FinetuneInputs *in, BertError *err) {
    if (o->columns.problem == CLS_REGRESSION && o->labels) return bert_fail(err, "--labels with --do_regression");
    if (o->columns.label_separator && !o->columns.label_separator[0]) return bert_fail(err, "--label_separator is empty");
    if (finetune_prepare_args(&o->ft, in, err) != 0) return -1;
    const bool wanted[3] = {o->ft.do_train, o->ft.do_eval, o->ft.do_predict};
    const char *file[3] = {o->train_file, o->validation_file, o->test_file};
    static const char *const flag[3] = {"--do_train", "--do_eval", "--do_predict"};
    static const char *const name[3] = {"--train_file", "--validation_file", "--test_file"};
    for (int k = 0; k < 3; k++) {
        if (!wanted[k]) continue;
        if (!file[k]) return bert_fail(err, "%s needs %s", flag[k], name[k]);
        char what[64];
        ClsFormat format;
        snprintf(what, sizeof what, "%s", name[k]);   /* "--train_file F: a folder, not a file" */
        if (check_input_file(file[k], what, err) != 0 || cls_format(file[k], o->format, &format, err) != 0) return -1;
    }
    return 0;
}

/* Every data file the run will read, read whole and checked (columns, labels, cells) before
 * the output folder is made: a bad validation or test row ended a whole training run in an
 * error, with a model left and no all_results.json. The labels come first: the training
 * file's, --labels or the model's. */
static int read_inputs(Run *r, BertError *err) {
    const ClassifyOptions *o = r->o;
    int rc = 0;
    if (o->ft.do_train && (rc = cls_format(o->train_file, o->format, &r->train.format, err)) == 0)
        rc = cls_read_table(o->train_file, r->train.format, &r->train.table, err);
    if (rc == 0) rc = choose_labels(r, &r->train.table, err);
    if (rc == 0 && o->ft.do_train)
        rc = cls_examples(&r->train.table, o->train_file, &r->columns, &r->labels, true, &r->train.e, err);
    if (rc == 0 && o->ft.do_eval) rc = read_examples(r, o->validation_file, true, &r->dev, err);
    if (rc == 0 && o->ft.do_predict) rc = read_examples(r, o->test_file, false, &r->test, err);
    return rc;
}

/* Trains on the training file and saves the model with its labels. */
static int train(Run *r, ClassifyResult *res, BertError *err) {
    char *extra = task_config_json(r);
    const FinetuneData fd = {.n_rows = r->train.e.n, .rows = "examples", .make_batch = training_batch,
                             .evaluate = evaluate_during_training, .metric = main_metric(r->columns.problem),
                             .config_json = extra, .ctx = r, .log = r->log};
    int rc = finetune_train(r->ft, &fd, &res->train, err);
    if (rc == 0 && !res->train.stopped_by_signal && !r->o->ft.skip_checkpoint) {
        rc = finetune_save(r->ft, r->o->ft.output_dir, extra, err);
        if (rc == 0) snprintf(res->model_dir, sizeof res->model_dir, "%s", r->o->ft.output_dir);
    }
    free(extra);
    return rc;
}

/* The training and validation features, and the model with its head. */
static int open_run(Run *r, const FinetuneInputs *in, BertError *err) {
    const ClassifyOptions *o = r->o;
    int rc = 0;
    if (o->ft.do_train) rc = make_features(r, o->train_file, &r->train, err);
    if (rc == 0 && o->ft.do_eval) rc = make_features(r, o->validation_file, &r->dev, err);
    const long total_steps = rc == 0 && o->ft.do_train ? finetune_total_steps(&o->ft, r->train.e.n) : 1;
    const int max_batch = finetune_max_batch(&o->ft);
    char what[4600] = "";
    if (rc == 0)
        rc = finetune_open_args(&r->ft, &o->ft, in, (BertHeads){BERT_HEADS_CLASSIFIER, r->num_labels}, total_steps,
                                vocab_size(r->vocab), what, sizeof what, err);
    if (rc == 0) {
        glue_batch_inputs_alloc(&r->in, max_batch, o->ft.max_seq_length);
        r->class_labels = xcalloc((size_t)max_batch, sizeof(int32_t));
        r->targets = xcalloc((size_t)max_batch * r->num_labels, sizeof(float));
        logger_print(r->log, "classify: %s, %d output(s); weights %s; %d threads", cls_problem_name(r->columns.problem),
                     r->num_labels, what, omp_get_max_threads());
    }
    return rc;
}

static void run_free(Run *r) {
    glue_batch_inputs_free(&r->in), free(r->class_labels), free(r->targets);
    loaded_free(&r->train), loaded_free(&r->dev), loaded_free(&r->test), cls_labels_free(&r->labels);
    finetune_close(r->ft);
}

int classify_run(const ClassifyOptions *opts, ClassifyResult *res, BertError *err) {
    memset(res, 0, sizeof *res);
    FinetuneInputs in;
    if (check_options(opts, &in, err) != 0) return -1;
    ClassifyOptions resolved = *opts;   /* the vocabulary and casing the model folder gave */
    const ClassifyOptions *o = &resolved;
    resolved.ft.vocab_file = in.vocab_file, resolved.ft.do_lower_case = in.do_lower_case;
    if (o->ft.threads > 0) omp_set_num_threads(o->ft.threads);
    Run r = {.o = o, .columns = o->columns};
    if (read_inputs(&r, err) != 0) {   /* nothing made yet */
        run_free(&r);
        return -1;
    }
    TaskSession session;
    int rc = task_session_open(&session, &o->ft, &in, 100, err);
    r.log = session.log, r.vocab = session.vocab, r.tok = session.tok;
    if (rc == 0) rc = open_run(&r, &in, err);
    res->problem = r.columns.problem, res->num_labels = r.num_labels;
    if (rc == 0 && o->ft.do_train) rc = train(&r, res, err);
    const bool stopped = res->train.stopped_by_signal != 0;   /* after a checkpoint: nothing more is written */
    if (rc == 0 && !stopped && o->ft.do_eval) rc = evaluate(&r, res, err);
    const double predict_start = now_seconds();
    if (rc == 0 && !stopped && o->ft.do_predict) rc = predict_test(&r, res, err);
    if (rc == 0 && !stopped) {   /* all_results.json: the run's figures in one file */
        char *scores = res->evaluated ? cls_scores_json(&res->dev) : NULL;
        const FinetuneResults fr = {.train = o->ft.do_train ? &res->train : NULL, .eval_json = scores,
                                    .eval_samples = res->eval_examples, .eval_seconds = res->eval_seconds,
                                    .predict_samples = res->predicted, .predict_seconds = now_seconds() - predict_start};
        rc = finetune_write_results(o->ft.output_dir, &fr, now_seconds() - session.start, err);
        free(scores);
    }
    run_free(&r);
    task_session_close(&session, o->ft.output_dir, rc);
    return rc;
}
