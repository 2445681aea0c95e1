/* `bert glue`: see glue_run.h. Training reads the examples in a new random order each epoch
 * (seeded: the same run twice gives the same weights), micro-batches of train_batch_size /
 * gradient_accumulation_steps rows, each only as long as its longest row, and the encoder
 * skips each row's padding (finetune.h). */
#include "tasks/glue_run.h"
#include "tasks/task_session.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/rng.h"
#include "train/finetune.h"
#include "train/logger.h"

void glue_default_options(GlueOptions *o) {
    memset(o, 0, sizeof *o);
    finetune_default_args(&o->ft);   /* run_glue.py's defaults: those, sequences of 128, seed 1 */
    o->ft.max_seq_length = 128, o->ft.eval_batch_size = 32, o->ft.seed = 1;
}

void glue_batch_inputs_alloc(GlueBatchInputs *b, int max_batch, int max_seq_length) {
    const size_t cells = (size_t)max_batch * (size_t)max_seq_length;
    *b = (GlueBatchInputs){xcalloc(cells, 4), xcalloc(cells, 4), xcalloc(cells, 4)};
}

void glue_batch_inputs_free(GlueBatchInputs *b) {
    free(b->ids), free(b->types), free(b->mask);
    memset(b, 0, sizeof *b);
}

BertBatch glue_batch(const GlueFeatures *f, const int *rows, int n, GlueBatchInputs *buf) {
    int T = 1;
    for (int i = 0; i < n; i++) T = f->length[rows[i]] > T ? f->length[rows[i]] : T;
    for (int i = 0; i < n; i++) {
        const size_t src = (size_t)rows[i] * f->max_seq_length, dst = (size_t)i * T;
        memcpy(buf->ids + dst, f->input_ids + src, sizeof(int32_t) * T);
        memcpy(buf->types + dst, f->segment_ids + src, sizeof(int32_t) * T);
        memcpy(buf->mask + dst, f->input_mask + src, sizeof(int32_t) * T);
    }
    return (BertBatch){.batch = n, .seq_len = T, .input_ids = buf->ids, .token_type_ids = buf->types,
                       .attention_mask = buf->mask};
}

int glue_predict_logits(BertModel *m, const GlueFeatures *f, int batch, int num_labels, GlueBatchInputs *buf,
                        float *logits, double *seconds, Logger *log, BertError *err) {
    int *rows = xmalloc(sizeof(int) * (size_t)batch);
    const double t0 = now_seconds();
    int rc = 0;
    for (int start = 0; rc == 0 && start < f->n; start += batch) {
        const int n = f->n - start < batch ? f->n - start : batch;
        for (int i = 0; i < n; i++) rows[i] = start + i;
        BertBatch b = glue_batch(f, rows, n, buf);
        if (!isfinite(bert_forward(m, &b, false, 0))) rc = bert_fail(err, "prediction: %s", bert_last_error(m));
        else bert_read_classifier_logits(m, logits + (size_t)start * num_labels);
        logger_count_progress(log, "predicting", start + n, f->n, "sequences", t0);
    }
    *seconds = now_seconds() - t0;
    free(rows);
    return rc;
}

typedef struct {
    GlueBatchInputs in;
    int32_t *labels;
    float *targets;
} BatchBuffers;

/* Rows rows[0..n) of the features as one batch with their labels. */
static BertBatch make_batch(const GlueFeatures *f, const GlueExamples *e, const int *rows, int n, bool regression,
                            BatchBuffers *buf) {
    BertBatch b = glue_batch(f, rows, n, &buf->in);
    for (int i = 0; i < n; i++) buf->labels[i] = e->label[rows[i]], buf->targets[i] = e->value[rows[i]];
    if (regression) b.regression_targets = buf->targets;
    else b.class_labels = buf->labels;
    return b;
}

typedef struct {
    const GlueOptions *o;
    const GlueTask *task;
    const GlueExamples *train_e;   /* the training rows (training_batch) */
    const GlueFeatures *train_f;
    Tokenizer *tok;
    Vocab *vocab;
    Finetuner *ft;
    Logger *log;
    BatchBuffers buf;
    bool quiet;   /* evaluating during training: finetune.c logs it */
} Run;

static int load_split(Run *r, GlueSplit split, GlueExamples *e, GlueFeatures *f, BertError *err) {
    if (glue_read(r->task, r->o->data_dir, split, e, err) != 0) return -1;
    if (e->skipped && !r->quiet)
        logger_print(r->log, "%s: %ld rows with too few cells skipped (as HuggingFace's QQP processor skips them)",
                     r->task->files[split], e->skipped);
    if (glue_features(e, r->tok, r->o->ft.max_seq_length, f, err) != 0) return -1;
    if (f->truncated && !r->quiet)
        logger_print(r->log, "%s: %ld of %d examples cut to --max_seq_length %d", r->task->files[split], f->truncated,
                     e->n, r->o->ft.max_seq_length);
    return 0;
}

/* The fine-tuner's batches (train/finetune.h): rows of the training features, labelled. */
static BertBatch training_batch(void *ctx, const int *rows, int n) {
    Run *r = ctx;
    return make_batch(r->train_f, r->train_e, rows, n, r->task->num_labels == 1, &r->buf);
}

/* Predictions for every row, in order: label ids (argmax) or values (regression). */
static int predict(Run *r, const GlueExamples *e, const GlueFeatures *f, int *label, float *value, double *seconds,
                   BertError *err) {
    const int NL = r->task->num_labels;
    float *logits = xmalloc(sizeof(float) * (size_t)e->n * NL);
    const int rc = glue_predict_logits(finetune_model(r->ft), f, r->o->ft.eval_batch_size, NL, &r->buf.in, logits,
                                       seconds, r->log, err);
    for (int i = 0; rc == 0 && i < e->n; i++) {
        const float *row = logits + (size_t)i * NL;
        int best = 0;
        for (int k = 1; k < NL; k++) best = row[k] > row[best] ? k : best;
        label[i] = best, value[i] = row[0];
    }
    free(logits);
    return rc;
}

/* One split read and predicted: its examples, label ids and values (the caller frees). */
typedef struct {
    GlueExamples e;
    GlueFeatures f;
    int *label;
    float *value;
    double seconds;
} Predicted;

static int predict_split(Run *r, GlueSplit split, Predicted *p, BertError *err) {
    memset(p, 0, sizeof *p);
    if (load_split(r, split, &p->e, &p->f, err) != 0) return -1;
    p->label = xmalloc(sizeof(int) * (size_t)p->e.n), p->value = xmalloc(sizeof(float) * (size_t)p->e.n);
    return predict(r, &p->e, &p->f, p->label, p->value, &p->seconds, err);
}

static void predicted_free(Predicted *p) {
    free(p->label), free(p->value);
    glue_examples_free(&p->e), glue_features_free(&p->f);
}

/* The dev split's scores as run_glue.py names them (caller frees), NULL on an error. */
static char *dev_scores(Run *r, GlueResult *res, BertError *err) {
    Predicted p;
    char *json = NULL;
    if (predict_split(r, GLUE_DEV, &p, err) == 0) {
        glue_score(r->task, p.label, p.value, &p.e, &res->dev);
        res->evaluated = true, res->eval_sequences = p.e.n, res->eval_seconds = p.seconds;
        json = glue_scores_json(r->task, &res->dev);
    }
    predicted_free(&p);
    return json;
}

/* Evaluation during training (finetune.h's hook): the scores only. */
static char *evaluate_during_training(void *ctx, BertError *err) {
    Run *r = ctx;
    GlueResult scratch = {0};
    r->quiet = true;
    char *json = dev_scores(r, &scratch, err);
    r->quiet = false;
    return json;
}

/* The score that picks the best model (--save_best): the task's one metric; F1 for MRPC and
 * QQP and Pearson's r for STS-B, the first of the pair GLUE's leaderboard shows. */
static const char *main_metric(const GlueTask *t) {
    switch (t->metric) {
    case GLUE_MATTHEWS: return "mcc";
    case GLUE_ACCURACY_F1: return "f1";
    case GLUE_PEARSON_SPEARMAN: return "pearson";
    case GLUE_ACCURACY: break;
    }
    return "acc";
}

static int evaluate(Run *r, GlueResult *res, BertError *err) {
    char *json = dev_scores(r, res, err);
    int rc = json ? 0 : -1;
    if (rc == 0) {
        char path[4096 + 32];
        logger_print(r->log, "eval %s (%ld examples, %.1f seq/s): %s", r->task->files[GLUE_DEV], res->eval_sequences,
                     res->eval_sequences / res->eval_seconds, json);
        logger_summary(r->log, cJSON_Parse(json));
        snprintf(path, sizeof path, "%s/eval_results.json", r->o->ft.output_dir);
        AtomicFile af;
        if ((rc = atomic_open(&af, path, err)) == 0) fprintf(af.fp, "%s\n", json), rc = atomic_commit(&af, err);
        free(json);
    }
    return rc;
}

/* The test rows' predictions in the GLUE submission format: "index\tprediction". */
static int write_test_predictions(Run *r, GlueResult *res, BertError *err) {
    Predicted p;
    int rc = predict_split(r, GLUE_TEST, &p, err);
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/%s", r->o->ft.output_dir, r->task->submission);
    AtomicFile af;
    if (rc == 0 && (rc = atomic_open(&af, path, err)) == 0) {
        fputs("index\tprediction\n", af.fp);
        for (int i = 0; i < p.e.n; i++) {
            if (r->task->num_labels == 1) fprintf(af.fp, "%s\t%.3f\n", p.e.id[i], p.value[i]);
            else fprintf(af.fp, "%s\t%s\n", p.e.id[i], r->task->labels[p.label[i]]);
        }
        rc = atomic_commit(&af, err);
        res->predicted = p.e.n;
        if (rc == 0) logger_print(r->log, "test predictions: %s (%d rows)", path, p.e.n);
    }
    predicted_free(&p);
    return rc;
}

/* config.json's task members, as transformers writes them for BertForSequenceClassification. */
static char *task_config_json(const GlueTask *t) {
    return finetune_task_config_json("BertForSequenceClassification", t->name,
                                     t->num_labels == 1 ? "regression" : "single_label_classification",
                                     t->num_labels == 1 ? NULL : t->labels, t->num_labels);
}

/* Before any work: the flags, the model folder's defaults (finetune_prepare_args) and every
 * data file the run will read. */
static int check_options(const GlueOptions *o, FinetuneInputs *in, BertError *err) {
    const GlueTask *t = o->task_name ? glue_task(o->task_name) : NULL;
    if (!t) return bert_fail(err, "--task_name %s: one of %s", o->task_name ? o->task_name : "(missing)", glue_task_names());
    if (!o->data_dir) return bert_fail(err, "--data_dir is required");
    if (o->train_examples > 0 && !o->ft.do_train) return bert_fail(err, "--train_examples needs --do_train");
    if (finetune_prepare_args(&o->ft, in, err) != 0) return -1;
    const bool wanted[3] = {o->ft.do_train, o->ft.do_eval, o->ft.do_predict};
    static const char *const flag[3] = {"--do_train", "--do_eval", "--do_predict"};
    for (int split = GLUE_TRAIN; split <= GLUE_TEST; split++) {
        char path[4096 + 64], what[64];
        snprintf(path, sizeof path, "%s/%s", o->data_dir, t->files[split]);
        snprintf(what, sizeof what, "%s needs", flag[split]);
        if (wanted[split] && check_input_file(path, what, err) != 0) return -1;
    }
    /* dev.tsv and test.tsv are read through now (and again when they are used): a bad row
     * there ended a long fine-tuning in an error after training (issue 35, D23); train.tsv
     * is read before training anyway */
    for (int split = GLUE_DEV; split <= GLUE_TEST; split++) {
        GlueExamples e;
        if (wanted[split] && o->ft.do_train && glue_read(t, o->data_dir, (GlueSplit)split, &e, err) != 0) return -1;
        if (wanted[split] && o->ft.do_train) glue_examples_free(&e);
    }
    return 0;
}

int glue_run(const GlueOptions *opts, GlueResult *res, BertError *err) {
    memset(res, 0, sizeof *res);
    FinetuneInputs in;
    if (check_options(opts, &in, err) != 0) return -1;
    GlueOptions resolved = *opts;   /* the vocabulary and casing the model folder gave */
    const GlueOptions *o = &resolved;
    resolved.ft.vocab_file = in.vocab_file, resolved.ft.do_lower_case = in.do_lower_case;
    if (o->ft.threads > 0) omp_set_num_threads(o->ft.threads);
    Run r = {.o = o, .task = glue_task(o->task_name)};
    res->task = r.task;
    GlueExamples train_e = {0};
    GlueFeatures train_f = {0};
    TaskSession session;
    int rc = task_session_open(&session, &o->ft, &in, 100, err);
    r.log = session.log, r.vocab = session.vocab, r.tok = session.tok;
    if (rc == 0 && o->ft.do_train) rc = load_split(&r, GLUE_TRAIN, &train_e, &train_f, err);
    if (rc == 0 && o->train_examples > 0 && o->train_examples < train_e.n) train_e.n = train_f.n = (int)o->train_examples;
    const long total_steps = rc == 0 && o->ft.do_train ? finetune_total_steps(&o->ft, train_e.n) : 1;
    const int max_batch = finetune_max_batch(&o->ft);
    char what[4600] = "";
    if (rc == 0)
        rc = finetune_open_args(&r.ft, &o->ft, &in, (BertHeads){BERT_HEADS_CLASSIFIER, r.task->num_labels},
                                total_steps, vocab_size(r.vocab), what, sizeof what, err);
    if (rc == 0) {
        glue_batch_inputs_alloc(&r.buf.in, max_batch, o->ft.max_seq_length);
        r.buf.labels = xcalloc((size_t)max_batch, 4), r.buf.targets = xcalloc((size_t)max_batch, 4);
        logger_print(&*r.log, "glue %s: weights %s; %d threads", r.task->name, what, omp_get_max_threads());
    }
    bool stopped = false;   /* by a signal, after a checkpoint: nothing more is written */
    if (rc == 0 && o->ft.do_train) {
        r.train_e = &train_e, r.train_f = &train_f;
        char *extra = task_config_json(r.task);
        const FinetuneData d = {.n_rows = train_e.n, .rows = "examples", .make_batch = training_batch,
                                .evaluate = evaluate_during_training, .metric = main_metric(r.task),
                                .config_json = extra, .ctx = &r, .log = r.log};
        rc = finetune_train(r.ft, &d, &res->train, err);
        stopped = res->train.stopped_by_signal != 0;
        if (rc == 0 && !stopped && !o->ft.skip_checkpoint) {
            rc = finetune_save(r.ft, o->ft.output_dir, extra, err);
            if (rc == 0) snprintf(res->model_dir, sizeof res->model_dir, "%s", o->ft.output_dir);
        }
        free(extra);
    }
    if (rc == 0 && !stopped && o->ft.do_eval) rc = evaluate(&r, res, err);
    const double predict_start = now_seconds();
    if (rc == 0 && !stopped && o->ft.do_predict) rc = write_test_predictions(&r, res, err);
    if (rc == 0 && !stopped) {   /* all_results.json: the run's figures in one file */
        char *scores = res->evaluated ? glue_scores_json(r.task, &res->dev) : NULL;
        const FinetuneResults fr = {.train = o->ft.do_train ? &res->train : NULL, .eval_json = scores,
                                    .eval_samples = res->eval_sequences, .eval_seconds = res->eval_seconds,
                                    .predict_samples = res->predicted, .predict_seconds = now_seconds() - predict_start};
        rc = finetune_write_results(o->ft.output_dir, &fr, now_seconds() - session.start, err);
        free(scores);
    }
    glue_batch_inputs_free(&r.buf.in), free(r.buf.labels), free(r.buf.targets);
    glue_examples_free(&train_e), glue_features_free(&train_f);
    finetune_close(r.ft);
    task_session_close(&session, o->ft.output_dir, rc);
    return rc;
}
