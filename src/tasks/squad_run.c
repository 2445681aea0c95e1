/* `bert squad`: see squad_run.h. Training reads the features in a new random order each
 * epoch (seeded) at the full max_seq_length, as the reference does: the span head's softmax
 * runs over every position, padding included, so the padding is part of the computation. */
#include "tasks/squad_run.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "tasks/squad.h"
#include "tasks/squad_eval.h"
#include "tasks/task_session.h"
#include "train/finetune.h"
#include "train/logger.h"

void squad_default_options(SquadOptions *o) {
    memset(o, 0, sizeof *o);
    finetune_default_args(&o->ft);   /* run_squad.py's defaults: those, sequences of 384, predictions in 8s */
    o->ft.eval_batch_size = 8, o->ft.max_steps = -1, o->ft.max_seq_length = 384;
    o->doc_stride = 128, o->max_query_length = 64, o->n_best_size = 20, o->max_answer_length = 30;
}

typedef struct {
    const SquadOptions *o;
    Tokenizer *tok;
    Vocab *vocab;
    Finetuner *ft;
    Logger *log;
    int32_t *ids, *mask, *types, *starts, *ends;   /* one batch */
    const SquadData *train_d;                      /* the training features (training_batch) */
    const SquadFeatures *train_f;
    const SquadData *pred_d;                       /* the predict file, for evaluation during training */
    const SquadFeatures *pred_f;
    const SquadDataset *eval_d;
    bool quiet;                                    /* evaluating during training: finetune.c logs it */
} Run;

/* Features rows[0..n) as one batch at the full sequence length. */
static BertBatch make_batch(Run *r, const SquadData *d, const SquadFeatures *f, const int *rows, int n, bool labels) {
    const int T = r->o->ft.max_seq_length;
    for (int i = 0; i < n; i++) {
        squad_feature_inputs(d, f, rows[i], r->ids + (size_t)i * T, r->mask + (size_t)i * T, r->types + (size_t)i * T);
        r->starts[i] = f->features[rows[i]].start_position, r->ends[i] = f->features[rows[i]].end_position;
    }
    BertBatch b = {.batch = n, .seq_len = T, .input_ids = r->ids, .token_type_ids = r->types, .attention_mask = r->mask};
    if (labels) b.start_positions = r->starts, b.end_positions = r->ends;
    return b;
}

/* The SQuAD file at path, parsed once: the whole file, or its articles [skip, skip + count)
 * (count 0: all from skip), each question with its first answer only when training. A slice
 * is also written to the output folder as `name` and named in the log and messages. */
static int read_squad_file(Run *r, const char *path, int skip, int count, bool training, SquadJsonRules rules,
                           const char *name, SquadFile *file, BertError *err) {
    if (squad_file_load(path, rules, file, err) != 0) return -1;
    if (skip == 0 && count == 0) return 0;
    char out[4096 + 64];
    snprintf(out, sizeof out, "%s/%s", r->o->ft.output_dir, name);
    int kept;
    long cut;
    if (squad_file_slice(file, skip, count, training, &kept, &cut, err) != 0) return -1;
    if (squad_file_write(file, out, err) != 0) return -1;
    logger_print(r->log, "%s: articles %d to %d of %s (%d articles)%s", out, skip, skip + kept - 1, path, kept,
                 cut ? "; training on each question's first answer (the others dropped, as HF's processor does)" : "");
    return 0;
}

static int load(Run *r, const SquadFile *file, bool training, SquadData *d, SquadFeatures *f, BertError *err) {
    const SquadReadOptions ro = {.is_training = training, .version_2_with_negative = r->o->version_2_with_negative,
                                 .log = NULL};
    if (squad_read_file(file, &ro, d, err) != 0) return -1;
    SquadFeatureOptions fo = {r->o->ft.max_seq_length, r->o->doc_stride, r->o->max_query_length};
    if (squad_convert(d, r->tok, &fo, f, err) != 0) return -1;
    logger_print(r->log, "%s: %d questions -> %d features%s", file->name, d->n_examples, f->n_features,
                 d->n_answers_not_found ? " (answers not found in their text were left out: see below)" : "");
    if (d->n_answers_not_found)
        logger_print(r->log, "%s: %ld training answers not found where answer_start says (left out, as the "
                             "reference does)", file->name, d->n_answers_not_found);
    return 0;
}

/* The fine-tuner's batches (train/finetune.h): training features with their answer spans. */
static BertBatch training_batch(void *ctx, const int *rows, int n) {
    Run *r = ctx;
    return make_batch(r, r->train_d, r->train_f, rows, n, true);
}

/* Every feature's start and end logits, then the reference's post-processing (into out) and
 * files. */
static int predict(Run *r, const SquadData *d, const SquadFeatures *f, const char *dir, SquadResults *out,
                   SquadResult *res, BertError *err) {
    const int T = r->o->ft.max_seq_length, B = r->o->ft.eval_batch_size, n = f->n_features;
    float *start = xmalloc(sizeof(float) * ((size_t)n * T + 1)), *end = xmalloc(sizeof(float) * ((size_t)n * T + 1));
    int *rows = xmalloc(sizeof(int) * (size_t)B);
    BertModel *m = finetune_model(r->ft);
    const double t0 = now_seconds();
    int rc = 0;
    for (int s = 0; rc == 0 && s < n; s += B) {
        const int b = n - s < B ? n - s : B;
        for (int i = 0; i < b; i++) rows[i] = s + i;
        BertBatch batch = make_batch(r, d, f, rows, b, false);
        if (!isfinite(bert_forward(m, &batch, false, 0))) rc = bert_fail(err, "prediction: %s", bert_last_error(m));
        bert_read_qa_logits(m, start + (size_t)s * T, end + (size_t)s * T);
        logger_count_progress(r->log, "predicting", s + b, n, "features", t0);
    }
    res->predict_seconds = now_seconds() - t0;
    const SquadPredictOptions po = {r->o->n_best_size, r->o->max_answer_length, r->o->version_2_with_negative,
                                    r->o->null_score_diff_threshold};
    if (rc == 0) rc = squad_predict(d, f, start, end, r->tok, &po, out, err);
    char pred[4096 + 64], nbest[4096 + 64], odds[4096 + 64];
    snprintf(pred, sizeof pred, "%s/predictions.json", dir), snprintf(nbest, sizeof nbest, "%s/nbest_predictions.json", dir);
    snprintf(odds, sizeof odds, "%s/null_odds.json", dir);
    if (rc == 0) rc = squad_write_predictions(d, out, pred, nbest, r->o->version_2_with_negative ? odds : NULL, err);
    if (rc == 0 && !r->quiet) {
        res->without_non_null = out->n_without_non_null;
        logger_print(r->log, "predictions: %s, %s%s%s (%d features in %.1f s, %.1f features/s)", pred, nbest,
                     r->o->version_2_with_negative ? ", " : "", r->o->version_2_with_negative ? odds : "", n,
                     res->predict_seconds, n / res->predict_seconds);
        if (out->n_without_non_null)   /* where Google's code would stop with an error */
            logger_print(r->log, "%ld questions had no non-empty candidate answer (the reference crashes there): "
                                 "answered \"\"", out->n_without_non_null);
    }
    free(start), free(end), free(rows);
    return rc;
}

/* The official metrics of the predictions (what predictions.json holds) against ds, the
 * dataset predicted on (d) as the evaluation reads it. */
static int evaluate(Run *r, const SquadDataset *ds, const SquadData *d, const SquadResults *out, const char *dir,
                    SquadResult *res, BertError *err) {
    char pred[4096 + 64];
    snprintf(pred, sizeof pred, "%s/predictions.json", dir);
    SquadPredictions *p = squad_predictions_new(pred);
    for (int e = 0; e < d->n_examples; e++) squad_predictions_set(p, d->examples[e].qas_id, out->answer[e]);
    SquadEvalOptions eo = squad_eval_default_options(r->o->version_2_with_negative ? SQUAD_V2_0 : SQUAD_V1_1);
    SquadMetrics m;
    int rc;
    eo.v2_hint = "run bert squad with --version_2_with_negative";   /* one hint, bert squad's (issue 35, D19) */
    rc = squad_evaluate(ds, p, &eo, &m, err);
    if (rc == 0) {
        char *json = squad_metrics_json(&m, 0);
        snprintf(res->metrics_json, sizeof res->metrics_json, "%s", json);
        res->evaluated = true, res->exact = m.exact, res->f1 = m.f1;
        if (!r->quiet) logger_print(r->log, "official metrics of %s: %s", pred, json);
        free(json);
    }
    squad_predictions_free(p);
    return rc;
}

/* Before any work: the flags, the model folder's defaults (finetune_prepare_args) and the
 * SQuAD files the run will read. */
/* Evaluation during training (finetune.h's hook): the predict file predicted and scored with
 * the official metrics (predictions.json written, as at the end). */
static char *evaluate_during_training(void *ctx, BertError *err) {
    Run *r = ctx;
    SquadResults out = {0};
    SquadResult scratch = {0};
    char *json = NULL;
    r->quiet = true;
    if (predict(r, r->pred_d, r->pred_f, r->o->ft.output_dir, &out, &scratch, err) == 0 &&
        evaluate(r, r->eval_d, r->pred_d, &out, r->o->ft.output_dir, &scratch, err) == 0)
        json = xstrdup(scratch.metrics_json);
    r->quiet = false;
    squad_results_free(&out);
    return json;
}

static int check_options(const SquadOptions *o, FinetuneInputs *in, BertError *err) {
    if (o->ft.do_eval && !o->ft.do_predict) return bert_fail(err, "--do_eval evaluates the predictions: add --do_predict");
    if (o->ft.do_train && !o->train_file) return bert_fail(err, "--do_train needs --train_file");
    if (o->ft.do_predict && !o->predict_file) return bert_fail(err, "--do_predict needs --predict_file");
    if ((o->train_articles && !o->ft.do_train) || ((o->predict_skip_articles || o->predict_articles) && !o->ft.do_predict))
        return bert_fail(err, "--train_articles goes with --do_train, --predict_skip_articles and --predict_articles "
                              "with --do_predict");
    if (o->n_best_size < 1 || o->max_answer_length < 1 || o->train_articles < 0 || o->predict_skip_articles < 0 ||
        o->predict_articles < 0)
        return bert_fail(err, "--n_best_size and --max_answer_length must be positive, article counts >= 0");
    if (finetune_prepare_args(&o->ft, in, err) != 0) return -1;
    if (o->ft.do_train && check_input_file(o->train_file, "--train_file", err) != 0) return -1;
    if (o->ft.do_predict && check_input_file(o->predict_file, "--predict_file", err) != 0) return -1;
    return 0;
}

int squad_run(const SquadOptions *opts, SquadResult *res, BertError *err) {
    memset(res, 0, sizeof *res);
    FinetuneInputs in;
    if (check_options(opts, &in, err) != 0) return -1;
    SquadOptions resolved = *opts;   /* the vocabulary and casing the model folder gave */
    const SquadOptions *o = &resolved;
    resolved.ft.vocab_file = in.vocab_file, resolved.ft.do_lower_case = in.do_lower_case;
    if (o->ft.threads > 0) omp_set_num_threads(o->ft.threads);
    Run r = {.o = o};
    SquadData train_d = {0}, pred_d = {0};
    SquadFeatures train_f = {0}, pred_f = {0};
    SquadDataset eval_d = {0};
    SquadResults pred_out = {0};
    SquadFile file = {0};
    char train_path[4096 + 64] = "";
    TaskSession session;   /* Google's FullTokenizer: words up to 200 characters */
    int rc = task_session_open(&session, &o->ft, &in, 200, err);
    r.log = session.log, r.vocab = session.vocab, r.tok = session.tok;
    if (rc == 0 && o->ft.do_train) {
        rc = read_squad_file(&r, o->train_file, 0, o->train_articles, true, SQUAD_JSON_PYTHON, "train_articles.json",
                             &file, err);
        if (rc == 0) snprintf(train_path, sizeof train_path, "%s", file.name);
        if (rc == 0) rc = load(&r, &file, true, &train_d, &train_f, err);
        squad_file_free(&file);
    }
    if (rc == 0 && o->ft.do_predict) {   /* one read for the features and the metrics (read as Python's json reads) */
        rc = read_squad_file(&r, o->predict_file, o->predict_skip_articles, o->predict_articles, false,
                             SQUAD_JSON_PYTHON, "predict_articles.json", &file, err);
        if (rc == 0) rc = load(&r, &file, false, &pred_d, &pred_f, err);
        if (rc == 0 && o->ft.do_eval) rc = squad_dataset_from_file(&file, &eval_d, err);
        squad_file_free(&file);
    }
    if (rc == 0 && o->ft.do_train) {
        if (train_f.n_features == 0) rc = bert_fail(err, "%s: no training features", train_path);
        res->train_examples = train_d.n_examples, res->train_features = train_f.n_features;
        res->answers_not_found = train_d.n_answers_not_found;
    }
    const long total_steps = rc == 0 && o->ft.do_train ? finetune_total_steps(&o->ft, train_f.n_features) : 1;
    const int max_batch = finetune_max_batch(&o->ft);
    char what[4600] = "";
    if (rc == 0)
        rc = finetune_open_args(&r.ft, &o->ft, &in, (BertHeads){BERT_HEADS_QA, 0}, total_steps, vocab_size(r.vocab),
                                what, sizeof what, err);
    if (rc == 0) {
        const size_t cells = (size_t)max_batch * o->ft.max_seq_length;
        r.ids = xcalloc(cells, 4), r.mask = xcalloc(cells, 4), r.types = xcalloc(cells, 4);
        r.starts = xcalloc((size_t)max_batch, 4), r.ends = xcalloc((size_t)max_batch, 4);
        logger_print(r.log, "squad: weights %s; %d threads", what, omp_get_max_threads());
    }
    bool stopped = false;   /* by a signal, after a checkpoint: nothing more is written */
    if (rc == 0 && o->ft.do_train) {
        r.train_d = &train_d, r.train_f = &train_f, r.pred_d = &pred_d, r.pred_f = &pred_f, r.eval_d = &eval_d;
        static const char *const extra = "{\"architectures\": [\"BertForQuestionAnswering\"]}";
        const FinetuneData d = {.n_rows = train_f.n_features, .rows = "features", .make_batch = training_batch,
                                .evaluate = o->ft.do_eval ? evaluate_during_training : NULL, .metric = "f1",
                                .config_json = extra, .ctx = &r, .log = r.log};
        rc = finetune_train(r.ft, &d, &res->train, err);
        stopped = res->train.stopped_by_signal != 0;
        if (rc == 0 && !stopped && !o->ft.skip_checkpoint) {
            rc = finetune_save(r.ft, o->ft.output_dir, extra, err);
            if (rc == 0) snprintf(res->model_dir, sizeof res->model_dir, "%s", o->ft.output_dir);
        }
    }
    if (rc == 0 && !stopped && o->ft.do_predict) {
        res->predict_examples = pred_d.n_examples, res->predict_features = pred_f.n_features;
        rc = predict(&r, &pred_d, &pred_f, o->ft.output_dir, &pred_out, res, err);
    }
    if (rc == 0 && !stopped && o->ft.do_eval) rc = evaluate(&r, &eval_d, &pred_d, &pred_out, o->ft.output_dir, res, err);
    if (rc == 0 && !stopped) {   /* all_results.json: the run's figures in one file (the metrics are the predictions') */
        const FinetuneResults fr = {.train = o->ft.do_train ? &res->train : NULL,
                                    .eval_json = res->evaluated ? res->metrics_json : NULL,
                                    .predict_samples = res->predict_features, .predict_seconds = res->predict_seconds};
        rc = finetune_write_results(o->ft.output_dir, &fr, now_seconds() - session.start, err);
    }
    squad_results_free(&pred_out), squad_dataset_free(&eval_d);
    free(r.ids), free(r.mask), free(r.types), free(r.starts), free(r.ends);
    squad_features_free(&train_f), squad_features_free(&pred_f);
    squad_data_free(&train_d), squad_data_free(&pred_d);
    finetune_close(r.ft);
    task_session_close(&session, o->ft.output_dir, rc);
    return rc;
}
