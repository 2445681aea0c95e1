/* `bert ner`: see ner_run.h. Training reads the sentences in a new random order each epoch
 * (seeded), micro-batches each as long as its longest row; the encoder skips each row's
 * padding (finetune.h) and the head runs on the rows it computed. */
#include "tasks/ner_run.h"
#include "tasks/task_session.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "io/json_util.h"
#include "text/vocab.h"
#include "train/logger.h"

void ner_default_options(NerOptions *o) {
    memset(o, 0, sizeof *o);
    finetune_default_args(&o->ft);
    o->ft.max_seq_length = 128, o->ft.eval_batch_size = 32;
    o->metric = NER_METRIC_DEFAULT;
}

typedef struct {
    int32_t *ids, *mask, *labels;
} BatchBuffers;

/* Rows rows[0..n) of the features as one batch, as long as its longest row. */
static BertBatch make_batch(const NerFeatures *f, const int *rows, int n, bool labelled, BatchBuffers *buf) {
    int T = 1;
    for (int i = 0; i < n; i++) T = f->length[rows[i]] > T ? f->length[rows[i]] : T;
    for (int i = 0; i < n; i++) {
        const size_t src = (size_t)rows[i] * f->max_seq_length, dst = (size_t)i * T;
        memcpy(buf->ids + dst, f->input_ids + src, sizeof(int32_t) * T);
        memcpy(buf->mask + dst, f->input_mask + src, sizeof(int32_t) * T);
        memcpy(buf->labels + dst, f->labels + src, sizeof(int32_t) * T);
    }
    BertBatch b = {.batch = n, .seq_len = T, .input_ids = buf->ids, .attention_mask = buf->mask};
    if (labelled) b.token_labels = buf->labels;
    return b;
}

typedef struct {
    const NerOptions *o;
    NerLabels labels;
    NerData train, dev, test;      /* the files the run reads, each read and checked before any work */
    NerFeatures train_f, dev_f;
    Tokenizer *tok;
    Vocab *vocab;
    Finetuner *ft;
    Logger *log;
    BatchBuffers buf;
} Run;

static BertBatch training_batch(void *ctx, const int *rows, int n) {
    Run *r = ctx;
    return make_batch(&r->train_f, rows, n, true, &r->buf);
}

/* A data file read and its tags checked against the run's labels (an error names the line). */
static int read_checked(Run *r, const char *path, bool allow_untagged, NerData *d, BertError *err) {
    return ner_read_conll(path, allow_untagged, d, err) || ner_check_tags(d, &r->labels, path, err) ? -1 : 0;
}

/* A file's features: its words' pieces and labels. */
static int make_features(Run *r, const char *path, const NerData *d, NerFeatures *f, BertError *err) {
    if (ner_features(d, &r->labels, r->tok, r->o->ft.max_seq_length, r->o->label_all_tokens, f, err)) return -1;
    logger_print(r->log, "%s: %d sentences, %ld words", path, d->n_sentences, d->n_words);
    if (f->truncated)
        logger_print(r->log, "%s: %ld sentences cut to --max_seq_length %d (%ld words without a piece, predicted O)",
                     path, f->truncated, r->o->ft.max_seq_length, f->words_cut);
    return 0;
}

/* The predicted label of every word (-1: the word has no piece), by argmax at its first piece. */
static int predict(Run *r, const NerData *d, const NerFeatures *f, int *pred, double *seconds, BertError *err) {
    const int batch = r->o->ft.eval_batch_size, NL = r->labels.n, T = f->max_seq_length;
    int *rows = xmalloc(sizeof(int) * (size_t)batch);
    float *logits = xmalloc(sizeof(float) * (size_t)batch * T * NL);
    BertModel *m = finetune_model(r->ft);
    const double t0 = now_seconds();
    int rc = 0;
    for (int start = 0; rc == 0 && start < f->n; start += batch) {
        const int n = f->n - start < batch ? f->n - start : batch;
        for (int i = 0; i < n; i++) rows[i] = start + i;
        BertBatch b = make_batch(f, rows, n, false, &r->buf);
        if (!isfinite(bert_forward(m, &b, false, 0))) {
            rc = bert_fail(err, "prediction: %s", bert_last_error(m));
            break;
        }
        bert_read_token_logits(m, logits);
        logger_count_progress(r->log, "predicting", start + n, f->n, "sentences", t0);
        for (int i = 0; i < n; i++)
            for (long w = d->start[start + i]; w < d->start[start + i + 1]; w++) {
                pred[w] = -1;
                if (f->first_piece[w] < 0) continue;
                const float *row = logits + ((size_t)i * b.seq_len + f->first_piece[w]) * NL;
                int best = 0;
                for (int k = 1; k < NL; k++) best = row[k] > row[best] ? k : best;
                pred[w] = best;
            }
    }
    *seconds = now_seconds() - t0;
    free(rows), free(logits);
    return rc;
}

char *ner_scores_json(const NerScores *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "precision", s->precision);
    cJSON_AddNumberToObject(o, "recall", s->recall);
    cJSON_AddNumberToObject(o, "f1", s->f1);
    cJSON_AddNumberToObject(o, "accuracy", s->accuracy);
    cJSON_AddNumberToObject(o, "true_entities", (double)s->true_entities);
    cJSON_AddNumberToObject(o, "predicted_entities", (double)s->predicted_entities);
    cJSON_AddNumberToObject(o, "correct_entities", (double)s->correct_entities);
    cJSON_AddNumberToObject(o, "tokens", (double)s->tokens);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

/* The metric over the words that have a first piece (run_ner.py's labels that are not -100). */
static int score(Run *r, const NerData *d, const int *pred, NerScores *out, BertError *err) {
    const char **gold = xmalloc(sizeof(char *) * (size_t)(d->n_words + 1));
    const char **guess = xmalloc(sizeof(char *) * (size_t)(d->n_words + 1));
    long *start = xmalloc(sizeof(long) * (size_t)(d->n_sentences + 1)), n = 0;
    for (int s = 0; s < d->n_sentences; s++) {
        start[s] = n;
        for (long w = d->start[s]; w < d->start[s + 1]; w++)
            if (pred[w] >= 0) gold[n] = d->tag[w], guess[n++] = r->labels.name[pred[w]];
    }
    start[d->n_sentences] = n;
    const int rc = ner_score(gold, guess, start, d->n_sentences, r->o->metric, out, err);
    free(gold), free(guess), free(start);
    return rc;
}

static int write_json(const char *dir, const char *name, const char *json, BertError *err) {
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    fprintf(af.fp, "%s\n", json);
    return atomic_commit(&af, err);
}

/* The validation file's scores (caller frees), NULL on an error. */
static char *dev_scores(Run *r, NerResult *res, BertError *err) {
    int *pred = xmalloc(sizeof(int) * (size_t)r->dev.n_words);
    int rc = predict(r, &r->dev, &r->dev_f, pred, &res->eval_seconds, err);
    if (rc == 0) rc = score(r, &r->dev, pred, &res->dev, err);
    if (rc == 0) res->evaluated = true, res->eval_sentences = r->dev.n_sentences;
    free(pred);
    return rc == 0 ? ner_scores_json(&res->dev) : NULL;
}

/* Evaluation during training (finetune.h's hook): the scores only; the entity F1 decides. */
static char *evaluate_during_training(void *ctx, BertError *err) {
    NerResult scratch = {0};
    return dev_scores(ctx, &scratch, err);
}

static int evaluate(Run *r, NerResult *res, BertError *err) {
    char *json = dev_scores(r, res, err);
    if (!json) return -1;
    logger_print(r->log, "eval %s (%ld sentences, %.1f seq/s): %s", r->o->validation_file, res->eval_sentences,
                 res->eval_sentences / res->eval_seconds, json);
    logger_summary(r->log, cJSON_Parse(json));
    const int rc = write_json(r->o->ft.output_dir, "eval_results.json", json, err);
    free(json);
    return rc;
}

/* predictions.txt: "word tag" lines, a blank line after each sentence. */
static int write_predictions(Run *r, const NerData *d, const int *pred, BertError *err) {
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/predictions.txt", r->o->ft.output_dir);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    for (int s = 0; s < d->n_sentences; s++) {
        for (long w = d->start[s]; w < d->start[s + 1]; w++)
            fprintf(af.fp, "%s %s\n", d->word[w], pred[w] >= 0 ? r->labels.name[pred[w]] : "O");
        fputc('\n', af.fp);
    }
    return atomic_commit(&af, err);
}

static int predict_test(Run *r, NerResult *res, BertError *err) {
    const NerData *d = &r->test;
    NerFeatures f = {0};   /* now: a large file's features only while used */
    double seconds;
    int *pred = NULL, rc = make_features(r, r->o->test_file, d, &f, err);
    if (rc == 0) pred = xmalloc(sizeof(int) * (size_t)d->n_words), rc = predict(r, d, &f, pred, &seconds, err);
    if (rc == 0) rc = write_predictions(r, d, pred, err);
    if (rc == 0) {
        res->predicted_sentences = d->n_sentences;
        logger_print(r->log, "test predictions: %s/predictions.txt (%d sentences)", r->o->ft.output_dir, d->n_sentences);
    }
    if (rc == 0 && d->untagged == 0 && (rc = score(r, d, pred, &res->test, err)) == 0) {
        res->test_scored = true;
        char *json = ner_scores_json(&res->test);
        logger_print(r->log, "test %s: %s", r->o->test_file, json);
        rc = write_json(r->o->ft.output_dir, "predict_results.json", json, err);
        free(json);
    }
    free(pred), ner_features_free(&f);
    return rc;
}

/* config.json's task members, as transformers writes them for BertForTokenClassification. */
static char *task_config_json(const NerLabels *l) {
    return finetune_task_config_json("BertForTokenClassification", "ner", NULL, (const char *const *)l->name, l->n);
}

/* A fine-tuned model's labels: its config.json's id2label ("0" .. "N-1"). */
static int labels_from_config(const FinetuneArgs *a, NerLabels *out, BertError *err) {
    memset(out, 0, sizeof *out);
    char path[4096 + 32];
    struct stat st;
    if (a->config_file) snprintf(path, sizeof path, "%s", a->config_file);
    else if (stat(a->init_checkpoint, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/config.json", a->init_checkpoint);
    else return bert_fail(err, "--labels: needed to evaluate or predict without --do_train from a weights file");
    BertError why;
    char **names;
    int n;
    if (bert_config_labels(path, &names, &n, &why) != 0) return bert_fail(err, "%s: give --labels", why.msg);
    ner_labels_from_names(names, n, out);
    for (int k = 0; k < n; k++) free(names[k]);
    free(names);
    return 0;
}

/* The run's labels: --labels, else the training file's tags, else the model's. */
static int choose_labels(const NerOptions *o, const NerData *train, NerLabels *out, BertError *err) {
    if (o->labels) return ner_labels_read(o->labels, out, err);
    if (o->ft.do_train) return ner_labels_from_data(train, out, err);
    return labels_from_config(&o->ft, out, err);
}

/* Before any work: the flags, the model folder's defaults and that the data files are there. */
static int check_options(const NerOptions *o, FinetuneInputs *in, BertError *err) {
    if (finetune_prepare_args(&o->ft, in, err) != 0) return -1;
    const bool wanted[3] = {o->ft.do_train, o->ft.do_eval, o->ft.do_predict};
    const char *file[3] = {o->train_file, o->validation_file, o->test_file};
    static const char *const flag[3] = {"--do_train", "--do_eval", "--do_predict"};
    static const char *const name[3] = {"--train_file", "--validation_file", "--test_file"};
    for (int k = 0; k < 3; k++) {
        if (!wanted[k]) continue;
        if (!file[k]) return bert_fail(err, "%s needs %s", flag[k], name[k]);
        char what[64];
        snprintf(what, sizeof what, "%s needs", flag[k]);
        if (check_input_file(file[k], what, err) != 0) return -1;
    }
    if (o->labels && check_input_file(o->labels, "--labels", err) != 0) return -1;
    return 0;
}

/* Every data file the run will read, read whole and checked (a tag on every word where one
 * is needed, every tag one of the labels) before the output folder is made: a bad validation
 * or test file ended a whole training run in an error, with a model left and no
 * all_results.json. The labels come first: --labels, the training file's tags or the model's. */
static int read_inputs(Run *r, BertError *err) {
    const NerOptions *o = r->o;
    int rc = 0;
    if (o->ft.do_train) rc = ner_read_conll(o->train_file, false, &r->train, err);
    if (rc == 0) rc = choose_labels(o, &r->train, &r->labels, err);
    if (rc == 0 && o->ft.do_train) rc = ner_check_tags(&r->train, &r->labels, o->train_file, err);
    if (rc == 0 && o->ft.do_eval) rc = read_checked(r, o->validation_file, false, &r->dev, err);
    if (rc == 0 && o->ft.do_predict) rc = read_checked(r, o->test_file, true, &r->test, err);
    return rc;
}

static int train(Run *r, NerResult *res, BertError *err) {
    char *extra = task_config_json(&r->labels);
    const FinetuneData d = {.n_rows = r->train_f.n, .rows = "sentences", .make_batch = training_batch,
                            .evaluate = evaluate_during_training, .metric = "f1", .config_json = extra, .ctx = r,
                            .log = r->log};
    int rc = finetune_train(r->ft, &d, &res->train, err);
    if (rc == 0 && !res->train.stopped_by_signal && !r->o->ft.skip_checkpoint) {
        rc = finetune_save(r->ft, r->o->ft.output_dir, extra, err);
        if (rc == 0) snprintf(res->model_dir, sizeof res->model_dir, "%s", r->o->ft.output_dir);
    }
    free(extra);
    return rc;
}

static void run_free(Run *r) {
    free(r->buf.ids), free(r->buf.mask), free(r->buf.labels);
    ner_features_free(&r->train_f), ner_features_free(&r->dev_f);
    ner_data_free(&r->train), ner_data_free(&r->dev), ner_data_free(&r->test), ner_labels_free(&r->labels);
    finetune_close(r->ft);
}

int ner_run(const NerOptions *opts, NerResult *res, BertError *err) {
    memset(res, 0, sizeof *res);
    FinetuneInputs in;
    if (check_options(opts, &in, err) != 0) return -1;
    NerOptions resolved = *opts;   /* the vocabulary and casing the model folder gave */
    const NerOptions *o = &resolved;
    resolved.ft.vocab_file = in.vocab_file, resolved.ft.do_lower_case = in.do_lower_case;
    if (o->ft.threads > 0) omp_set_num_threads(o->ft.threads);
    Run r = {.o = o};
    if (read_inputs(&r, err) != 0) {   /* nothing made yet */
        run_free(&r);
        return -1;
    }
    res->num_labels = r.labels.n;
    TaskSession session;
    int rc = task_session_open(&session, &o->ft, &in, 100, err);
    r.log = session.log, r.vocab = session.vocab, r.tok = session.tok;
    if (rc == 0 && o->ft.do_train) rc = make_features(&r, o->train_file, &r.train, &r.train_f, err);
    if (rc == 0 && o->ft.do_eval) rc = make_features(&r, o->validation_file, &r.dev, &r.dev_f, err);
    const long total_steps = rc == 0 && o->ft.do_train ? finetune_total_steps(&o->ft, r.train_f.n) : 1;
    const int max_batch = finetune_max_batch(&o->ft);
    char what[4600] = "";
    if (rc == 0)
        rc = finetune_open_args(&r.ft, &o->ft, &in, (BertHeads){BERT_HEADS_TOKEN_CLASSIFIER, r.labels.n}, total_steps,
                                vocab_size(r.vocab), what, sizeof what, err);
    if (rc == 0) {
        const size_t cells = (size_t)max_batch * (size_t)o->ft.max_seq_length;
        r.buf = (BatchBuffers){xcalloc(cells, 4), xcalloc(cells, 4), xcalloc(cells, 4)};
        logger_print(r.log, "ner: %d labels; weights %s; %d threads", r.labels.n, what, omp_get_max_threads());
    }
    if (rc == 0 && o->ft.do_train) rc = train(&r, res, err);
    const bool stopped = res->train.stopped_by_signal != 0;   /* after a checkpoint: nothing more is written */
    if (rc == 0 && !stopped && o->ft.do_eval) rc = evaluate(&r, res, err);
    const double predict_start = now_seconds();
    if (rc == 0 && !stopped && o->ft.do_predict) rc = predict_test(&r, res, err);
    if (rc == 0 && !stopped) {   /* all_results.json: the run's figures in one file */
        char *scores = res->evaluated ? ner_scores_json(&res->dev) : NULL;
        const FinetuneResults fr = {.train = o->ft.do_train ? &res->train : NULL, .eval_json = scores,
                                    .eval_samples = res->eval_sentences, .eval_seconds = res->eval_seconds,
                                    .predict_samples = res->predicted_sentences,
                                    .predict_seconds = now_seconds() - predict_start};
        rc = finetune_write_results(o->ft.output_dir, &fr, now_seconds() - session.start, err);
        free(scores);
    }
    run_free(&r);
    task_session_close(&session, o->ft.output_dir, rc);
    return rc;
}
