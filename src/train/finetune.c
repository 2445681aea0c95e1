/* Fine-tuning: the model, AdamW and the linear warmup/decay step. See finetune.h. */
#include "train/finetune.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "core/rng.h"
#include "io/tokenizer_files.h"
#include "model/config.h"
#include "train/checkpoint.h"
#include "train/stop_signal.h"
#include "train/trainer.h"

struct Finetuner {
    FinetuneOptions o;
    BertConfig cfg;
    BertModel *model;
    Trainer *trainer;
    long micro_batches;      /* since the start: dropout masks are keyed by it */
};

#define FINETUNE_INIT_LOSS_SCALE 65536.0   /* apex's and GradScaler's dynamic start, 2^16 */
#define CHECKPOINT_PREFIX "checkpoint-"          /* HF Trainer's folder names */
#define TRAINER_STATE "trainer_state.json"

/* The optimizer's numbers, each named when it is bad (issue 35, D20: one message listed all
 * five settings for any of them). */
static int check_rates(double learning_rate, double warmup_proportion, double weight_decay, double adam_epsilon,
                       BertError *err) {
    if (!(learning_rate > 0 && isfinite(learning_rate)))
        return bert_fail(err, "--learning_rate %g must be a number > 0", learning_rate);
    if (!(warmup_proportion >= 0 && warmup_proportion < 1))
        return bert_fail(err, "--warmup_proportion %g must be in [0, 1)", warmup_proportion);
    if (!(weight_decay >= 0 && isfinite(weight_decay)))
        return bert_fail(err, "--weight_decay %g must be a number >= 0", weight_decay);
    if (!(adam_epsilon > 0 && isfinite(adam_epsilon)))
        return bert_fail(err, "--adam_epsilon %g must be a number > 0", adam_epsilon);
    return 0;
}

static int check_optimisation(const FinetuneOptions *o, BertError *err) {
    if (o->gradient_accumulation_steps < 1)
        return bert_fail(err, "--gradient_accumulation_steps %d must be at least 1", o->gradient_accumulation_steps);
    if (o->total_steps < 1) return bert_fail(err, "fine-tuning: %ld optimizer steps: nothing to train", o->total_steps);
    return check_rates(o->learning_rate, o->warmup_proportion, o->weight_decay, o->adam_epsilon, err);
}

int finetune_open(Finetuner **out, const FinetuneOptions *o, char *what, size_t what_size, BertError *err) {
    *out = NULL;
    if (check_optimisation(o, err) != 0) return -1;
    Finetuner *f = xcalloc(1, sizeof *f);
    f->o = *o;
    int initialised = 0;
    if (bert_open_checkpoint(&f->model, o->init_checkpoint, o->config_file, o->heads, o->max_batch, o->max_seq_length,
                             (uint64_t)o->seed, &initialised, err) != 0)
        goto fail;
    f->cfg = *bert_model_config(f->model);
    if (o->vocab_size_expected > 0 && !bert_vocab_fits(o->vocab_size_expected, f->cfg.vocab_size)) {
        bert_fail(err, "the vocabulary has %d tokens but %s's model has %d: not the checkpoint's vocabulary",
                  o->vocab_size_expected, o->init_checkpoint, f->cfg.vocab_size);
        goto fail;
    }
    if (bert_set_precision(f->model, o->precision, err) != 0) goto fail;
    const char *bad_tensor;
    const size_t bad = bert_nonfinite_params(f->model, &bad_tensor);
    if (bad && o->strict) {
        bert_fail(err, "%s: %zu weights are NaN or infinite (the first in %s); refused (--strict)", o->init_checkpoint, bad, bad_tensor);
        goto fail;
    }
    bert_set_unpadding(f->model, true);
    bert_set_packed_weights(f->model, true);   /* evaluation's forwards; each step announces its change */
    /* evaluation's forwards lean; training's (training=true) keep everything */
    bert_set_mode(f->model, o->forward_only ? BERT_MODE_FORWARD_ONLY : BERT_MODE_LEAN_INFERENCE);
    TrainerOptions to = {.optimizer = optimizer_defaults(OPTIMIZER_ADAMW),
                         .schedule = {SCHEDULE_LINEAR_WARMUP, o->learning_rate, o->warmup_proportion, o->total_steps, 0},
                         .accumulation = o->gradient_accumulation_steps, .loss_scaling = o->precision == BERT_FP16,
                         .loss_scale = o->loss_scale > 0 ? o->loss_scale : FINETUNE_INIT_LOSS_SCALE,
                         .dynamic_loss_scale = !(o->loss_scale > 0)};
    to.optimizer.weight_decay = (float)o->weight_decay, to.optimizer.eps = (float)o->adam_epsilon;
    if (trainer_create(&f->trainer, f->model, &to, err) != 0) goto fail;
    /* as pretrain: NaN or Inf weights named (count, first tensor), refused with --strict
     * (issue 35, D22: NaN in a row never read fine-tuned and saved a model still holding it) */
    char warning[320] = "";
    if (bad)
        snprintf(warning, sizeof warning, "; WARNING: %zu weights are NaN or infinite (the first in %.160s); --strict "
                 "refuses such weights", bad, bad_tensor);
    snprintf(what, what_size, "%s (%d task-head tensors drawn from seed %ld%s)", o->init_checkpoint, initialised, o->seed,
             warning);
    *out = f;
    return 0;
fail:
    finetune_close(f);
    return -1;
}

void finetune_default_args(FinetuneArgs *a) {
    memset(a, 0, sizeof *a);
    a->train_batch_size = 32, a->eval_batch_size = 32, a->gradient_accumulation_steps = 1;
    a->learning_rate = 5e-5, a->num_train_epochs = 3, a->warmup_proportion = 0.1;
    a->weight_decay = 0.01, a->adam_epsilon = 1e-6, a->seed = 42, a->log_freq = 50, a->max_seq_length = 128;
    a->precision = BERT_FP32;
    a->do_lower_case = -1;   /* the model folder's */
    a->save_total_limit = 2;
}

int finetune_check_args(const FinetuneArgs *a, BertError *err) {
    if (!a->output_dir || !a->init_checkpoint) return bert_fail(err, "--output_dir and --init_checkpoint are required");
    if (!a->do_train && !a->do_eval && !a->do_predict)
        return bert_fail(err, "nothing to do: give --do_train, --do_eval or --do_predict");
    if (a->train_batch_size < 1 || a->gradient_accumulation_steps < 1 ||
        a->train_batch_size % a->gradient_accumulation_steps || a->eval_batch_size < 1)
        return bert_fail(err, "the training batch must be a positive multiple of --gradient_accumulation_steps, and "
                              "the prediction batch positive");
    if (!(a->num_train_epochs > 0) && a->max_steps <= 0) return bert_fail(err, "--num_train_epochs must be > 0");
    if (a->log_freq < 1) return bert_fail(err, "--log_freq must be at least 1");
    if (a->eval_steps < 0 || a->save_steps < 0) return bert_fail(err, "--eval_steps and --save_steps must be >= 0");
    if (a->eval_steps > 0 && !(a->do_train && a->do_eval))
        return bert_fail(err, "--eval_steps evaluates during training: give it with --do_train and --do_eval");
    if (a->save_best && a->eval_steps <= 0)
        return bert_fail(err, "--save_best keeps the best evaluation's model: add --eval_steps N");
    if (a->resume_from_checkpoint && !a->do_train)
        return bert_fail(err, "--resume_from_checkpoint continues a training run: add --do_train");
    if ((a->save_steps > 0 || a->save_best || a->resume_from_checkpoint) && a->skip_checkpoint)
        return bert_fail(err, "--skip_checkpoint saves nothing: it goes with none of --save_steps, --save_best and "
                              "--resume_from_checkpoint");
    return check_rates(a->learning_rate, a->warmup_proportion, a->weight_decay, a->adam_epsilon, err);
}

int finetune_prepare_args(const FinetuneArgs *a, FinetuneInputs *in, BertError *err) {
    memset(in, 0, sizeof *in);
    if (finetune_check_args(a, err) != 0) return -1;
    /* the checkpoint and its configuration (NVIDIA's: rows padded past the configuration's vocab_size) */
    struct stat st;
    char path[4096 + 32];
    BertCheckpointInfo ck;
    if (bert_checkpoint_inspect(a->init_checkpoint, a->config_file, &ck, err) != 0) return -1;
    const BertConfig cfg = ck.cfg;
    if (a->max_seq_length > cfg.max_position_embeddings)
        return bert_fail(err, "a sequence length of %d exceeds the model's %d positions (%s)", a->max_seq_length,
                         cfg.max_position_embeddings, ck.config);
    /* the vocabulary and the casing: the flags, else what the model folder says */
    TokenizerFolder folder;
    tokenizer_folder_read(a->init_checkpoint, &folder);
    if (!a->vocab_file && !folder.vocab_file[0])
        return bert_fail(err, "--vocab_file is required: %s has no vocab.txt", folder.dir);
    snprintf(in->vocab_file, sizeof in->vocab_file, "%s", a->vocab_file ? a->vocab_file : folder.vocab_file);
    int tokens, cased;
    if (check_input_file(in->vocab_file, a->vocab_file ? "--vocab_file" : "the model's vocabulary", err) != 0 ||
        tokenizer_vocab_scan(in->vocab_file, &tokens, &cased, err) != 0)
        return -1;
    if (!bert_vocab_fits(tokens, cfg.vocab_size))
        return bert_fail(err, "the vocabulary %s has %d tokens but %s's model has %d: not the checkpoint's vocabulary",
                         in->vocab_file, tokens, a->init_checkpoint, cfg.vocab_size);
    in->do_lower_case = tokenizer_casing(a->do_lower_case, "--do_lower_case", &folder, in->vocab_file, cased, in->note,
                                         sizeof in->note);
    /* the output folder: a folder, and no finished run's for a training run unless asked */
    if (stat(a->output_dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return bert_fail(err, "--output_dir %s exists and is not a folder", a->output_dir);
        snprintf(path, sizeof path, "%s/model.safetensors", a->output_dir);
        if (a->do_train && !a->overwrite_output_dir && stat(path, &st) == 0)
            return bert_fail(err, "--output_dir %s holds a finished run (model.safetensors): give "
                                  "--overwrite_output_dir to replace it, or another --output_dir", a->output_dir);
    }
    long *steps;
    int count;
    if (a->do_train && !a->resume_from_checkpoint && !a->overwrite_output_dir) {   /* an earlier run's checkpoints */
        if (checkpoint_list_named(a->output_dir, CHECKPOINT_PREFIX, &steps, &count, err) != 0) return -1;
        free(steps);
        if (count)
            return bert_fail(err, "--output_dir %s holds checkpoints of an earlier run (checkpoint-<step>): give "
                                  "--resume_from_checkpoint to continue it, --overwrite_output_dir to start afresh "
                                  "(they are deleted), or another --output_dir", a->output_dir);
    }
    if (a->resume_from_checkpoint && a->resume_from_checkpoint[0]) {   /* a folder named: a checkpoint */
        snprintf(path, sizeof path, "%s/trainer_state.json", a->resume_from_checkpoint);
        if (stat(path, &st) != 0)
            return bert_fail(err, "--resume_from_checkpoint %s: not a complete fine-tuning checkpoint (no "
                                  "trainer_state.json)", a->resume_from_checkpoint);
    }
    return 0;
}

long finetune_total_steps(const FinetuneArgs *a, long n_rows) {
    if (a->max_steps > 0) return a->max_steps;
    const int micro_batch = a->train_batch_size / a->gradient_accumulation_steps;
    const long micros = (n_rows + micro_batch - 1) / micro_batch;
    const long per_epoch = (micros + a->gradient_accumulation_steps - 1) / a->gradient_accumulation_steps;
    return (long)ceil(per_epoch * a->num_train_epochs);
}

int finetune_max_batch(const FinetuneArgs *a) {
    const int micro = a->train_batch_size / a->gradient_accumulation_steps;
    return micro > a->eval_batch_size ? micro : a->eval_batch_size;
}

int finetune_open_args(Finetuner **out, const FinetuneArgs *a, const FinetuneInputs *in, BertHeads heads,
                       long total_steps, int vocab_size, char *what, size_t what_size, BertError *err) {
    const FinetuneOptions fo = {.init_checkpoint = a->init_checkpoint, .config_file = a->config_file, .heads = heads,
                                .vocab_file = in->vocab_file, .do_lower_case = in->do_lower_case,
                                .max_batch = finetune_max_batch(a),
                                .max_seq_length = a->max_seq_length, .learning_rate = a->learning_rate,
                                .warmup_proportion = a->warmup_proportion, .weight_decay = a->weight_decay,
                                .adam_epsilon = a->adam_epsilon, .total_steps = total_steps,
                                .gradient_accumulation_steps = a->gradient_accumulation_steps, .seed = a->seed,
                                .train_batch_size = a->train_batch_size, .log_freq = a->log_freq,
                                .precision = a->precision, .loss_scale = a->loss_scale,
                                .vocab_size_expected = vocab_size, .forward_only = !a->do_train,
                                .output_dir = a->output_dir, .eval_steps = a->eval_steps, .save_best = a->save_best,
                                .save_steps = a->save_steps, .save_total_limit = a->save_total_limit,
                                .resume_from_checkpoint = a->resume_from_checkpoint, .strict = a->strict};
    return finetune_open(out, &fo, what, what_size, err);
}

void finetune_close(Finetuner *f) {
    if (!f) return;
    trainer_free(f->trainer);
    bert_model_free(f->model);
    free(f);
}

BertModel *finetune_model(Finetuner *f) { return f->model; }
const BertConfig *finetune_config(const Finetuner *f) { return &f->cfg; }

/* A training run's progress for its log: the time it started, the sequences so far, and the
 * steps and loss since the last line. */
typedef struct {
    double start;
    long first_step;   /* the steps done when it started (a resumed run's checkpoint): the ETA's rate is this run's */
    long sequences;
    double window_loss;
    long window;
} Progress;

/* After each step: every log_freq steps (and at the last) a line with the step, the mean
 * loss since the last line, the rate, the throughput and the time left, and the same as a
 * DLLogger record; a redrawn progress line in between. */
static void report(const Finetuner *f, const FinetuneData *d, Progress *p, long epoch, const TrainerStep *s) {
    const long step = trainer_steps_done(f->trainer), total_steps = f->o.total_steps;
    Logger *log = d->log;
    p->sequences += s->sequences, p->window_loss += s->loss, p->window++;
    const double elapsed = now_seconds() - p->start, rate = elapsed > 0 ? p->sequences / elapsed : 0;
    if (s->skipped) {   /* the same step comes again */
        p->window_loss -= s->loss, p->window--;
        logger_print(log, "step %ld/%ld skipped: fp16 gradients overflowed; loss scale now %g", step + 1, total_steps,
                     trainer_loss_scale(f->trainer));
        return;
    }
    char el[32], eta[32];
    const long done = step - p->first_step;
    format_duration(elapsed, el, sizeof el);
    format_duration(done > 0 ? elapsed / done * (double)(total_steps - step) : -1, eta, sizeof eta);
    if (step % f->o.log_freq != 0 && step != total_steps) {
        logger_progress(log, "step %ld/%ld  loss %.4f  %.1f seq/s  ETA %s", step, total_steps, s->loss, rate, eta);
        return;
    }
    const double mean = p->window_loss / p->window;
    logger_print(log, "step %ld/%ld (epoch %ld) | loss %.4f | lr %.3e | grad %.3f | %.1f seq/s | %s, ETA %s", step,
                 total_steps, epoch, mean, s->lr, s->grad_norm, rate, el, eta);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "average_loss", mean);
    cJSON_AddNumberToObject(j, "step_loss", s->loss);
    cJSON_AddNumberToObject(j, "learning_rate", s->lr);
    cJSON_AddNumberToObject(j, "grad_norm", s->grad_norm);
    cJSON_AddNumberToObject(j, "training_sequences_per_second", rate);
    if (f->o.precision == BERT_FP16) {
        cJSON_AddNumberToObject(j, "loss_scale", trainer_loss_scale(f->trainer));
        cJSON_AddNumberToObject(j, "skipped_steps", (double)trainer_skipped_steps(f->trainer));
    }
    logger_step(log, epoch, step, j);
    p->window_loss = 0, p->window = 0;
}

static void shuffle(int *order, int n, uint64_t key) {
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {   /* Fisher-Yates */
        const int j = (int)(rng_bits32(key, (uint32_t)i) % (uint32_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
}

/* The trainer's batch source: the next micro-batch of the epoch's order, a new epoch
 * shuffled when one ends between steps. With the model, the optimizer and the Finetuner's
 * micro-batch count, (epoch, next) is all a checkpoint needs to go on exactly. */
typedef struct {
    Finetuner *f;
    const FinetuneData *d;
    int *order, next, micro_rows;
    long epoch;                    /* epochs begun (orders drawn) */
    FinetuneTrainResult *res;
    CheckpointHistory written;     /* this run's checkpoints (save_total_limit prunes them) */
} Epochs;

static int next_rows(void *ctx, int micro, BertBatch *b, uint64_t *dropout_key, BertError *err) {
    Epochs *e = ctx;
    const int n_rows = e->d->n_rows;
    if (e->next >= n_rows) {
        if (micro > 0) return 0;   /* the epoch's last step is short */
        shuffle(e->order, n_rows, rng_key((uint64_t)e->f->o.seed, (uint64_t)e->epoch++)), e->next = 0;
    }
    const int n = n_rows - e->next < e->micro_rows ? n_rows - e->next : e->micro_rows;
    *b = e->d->make_batch(e->d->ctx, e->order + e->next, n);
    e->next += n;
    *dropout_key = rng_key(rng_key((uint64_t)e->f->o.seed, 0xF17E), (uint64_t)e->f->micro_batches++);
    return 1;
}

/* ---- checkpoints: the model folder, optimizer.safetensors, trainer_state.json (last) ---- */


/* What a resume must share with the run it continues, or the data order, the schedule or the
 * updates differ: compared member by member. */
static cJSON *resume_settings(const Epochs *e) {
    const FinetuneOptions *o = &e->f->o;
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "seed", (double)o->seed);
    cJSON_AddNumberToObject(s, "train_batch_size", o->train_batch_size);
    cJSON_AddNumberToObject(s, "gradient_accumulation_steps", o->gradient_accumulation_steps);
    cJSON_AddNumberToObject(s, "total_steps", (double)o->total_steps);
    cJSON_AddNumberToObject(s, "training_rows", e->d->n_rows);
    cJSON_AddNumberToObject(s, "learning_rate", o->learning_rate);
    cJSON_AddNumberToObject(s, "warmup_proportion", o->warmup_proportion);
    cJSON_AddNumberToObject(s, "weight_decay", o->weight_decay);
    cJSON_AddNumberToObject(s, "adam_epsilon", o->adam_epsilon);
    cJSON_AddStringToObject(s, "precision", bert_precision_name(o->precision));
    return s;
}

static int write_checkpoint_files(const char *dir, void *ctx, BertError *err) {
    Epochs *e = ctx;
    Finetuner *f = e->f;
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    if (finetune_save(f, dir, e->d->config_json, err) != 0 ||
        optimizer_save(trainer_optimizer(f->trainer), path, err) != 0)
        return -1;
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "format", "bert.c fine-tuning checkpoint");
    cJSON_AddNumberToObject(s, "version", 1);
    cJSON_AddNumberToObject(s, "global_step", (double)trainer_steps_done(f->trainer));
    cJSON *data = cJSON_AddObjectToObject(s, "data");   /* the position in the data order */
    cJSON_AddNumberToObject(data, "epoch", (double)e->epoch);
    cJSON_AddNumberToObject(data, "next", e->next);
    cJSON_AddNumberToObject(data, "micro_batches", (double)f->micro_batches);
    cJSON_AddItemToObject(s, "settings", resume_settings(e));
    const LossScaler *ls = trainer_loss_scaler(f->trainer);
    if (ls) {   /* fp16: the scaler's whole state */
        cJSON *j = cJSON_AddObjectToObject(s, "loss_scaler");
        cJSON_AddNumberToObject(j, "scale", ls->scale);
        cJSON_AddNumberToObject(j, "good_steps", (double)ls->good_steps);
        cJSON_AddNumberToObject(j, "skipped_steps", (double)ls->skipped_steps);
    }
    cJSON_AddNumberToObject(s, "evaluations", (double)e->res->evaluations);
    if (e->res->best_step > 0) {
        cJSON_AddNumberToObject(s, "best_step", (double)e->res->best_step);
        cJSON_AddNumberToObject(s, "best_metric", e->res->best_metric);
    }
    cJSON *files = checkpoint_digest_files(dir, TRAINER_STATE, err);   /* checked when resumed */
    int rc = files ? 0 : -1;
    if (files) cJSON_AddItemToObject(s, "files", files), rc = checkpoint_write_json(dir, TRAINER_STATE, s, err);
    cJSON_Delete(s);
    return rc;
}

static int save_checkpoint(Epochs *e, BertError *err) {
    const FinetuneOptions *o = &e->f->o;
    const double t0 = now_seconds();
    const long step = trainer_steps_done(e->f->trainer);
    if (checkpoint_save_named(o->output_dir, CHECKPOINT_PREFIX, step, o->save_total_limit, &e->written,
                              write_checkpoint_files, e, e->res->last_checkpoint, sizeof e->res->last_checkpoint,
                              err) != 0)
        return -1;
    logger_print(e->d->log, "checkpoint %s (%.1f s)", e->res->last_checkpoint, now_seconds() - t0);
    return 0;
}

static double number_in(const cJSON *o, const char *key, double fallback) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : fallback;
}

/* The checkpoint's settings against this run's: the first that differs refused by name. */
static int check_settings(const Epochs *e, const char *dir, const cJSON *saved, BertError *err) {
    cJSON *now = resume_settings(e), *item;
    int rc = 0;
    cJSON_ArrayForEach(item, now) {
        const cJSON *was = cJSON_GetObjectItemCaseSensitive(saved, item->string);
        if (was && !cJSON_Compare(was, item, 1)) {
            char *a = cJSON_PrintUnformatted(was), *b = cJSON_PrintUnformatted(item);
            rc = bert_fail(err, "checkpoint %s was trained with %s %s, this run has %s: resume with the same settings "
                                "and data, or start another --output_dir", dir, item->string, a, b);
            free(a), free(b);
            break;
        }
    }
    cJSON_Delete(now);
    return rc;
}

/* Model, optimizer, data position, dropout counter, loss scaler and best so far from dir. */
static int restore_checkpoint(Epochs *e, const char *dir, BertError *err) {
    Finetuner *f = e->f;
    cJSON *s;
    if (checkpoint_read_json(dir, TRAINER_STATE, &s, err) != 0) return -1;
    char path[4096 + 160];
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(s, "data");
    const long epoch = (long)number_in(data, "epoch", -1), next = (long)number_in(data, "next", -1);
    const long micro = (long)number_in(data, "micro_batches", -1);
    int rc = checkpoint_verify_files(dir, cJSON_GetObjectItemCaseSensitive(s, "files"), err);
    if (rc == 0) rc = check_settings(e, dir, cJSON_GetObjectItemCaseSensitive(s, "settings"), err);
    if (rc == 0 && (epoch < 0 || next < 0 || next > e->d->n_rows || micro < 0))
        rc = bert_fail(err, "%s/%s: a bad data position", dir, TRAINER_STATE);
    if (rc == 0) snprintf(path, sizeof path, "%s/model.safetensors", dir), rc = bert_load_weights(f->model, path, err);
    if (rc == 0)
        snprintf(path, sizeof path, "%s/optimizer.safetensors", dir),
            rc = optimizer_load(trainer_optimizer(f->trainer), path, err);
    LossScaler *ls = trainer_loss_scaler(f->trainer);
    const cJSON *saved_ls = cJSON_GetObjectItemCaseSensitive(s, "loss_scaler");
    if (rc == 0 && ls && saved_ls) {
        ls->scale = number_in(saved_ls, "scale", ls->scale);
        ls->good_steps = (long)number_in(saved_ls, "good_steps", 0);
        ls->skipped_steps = (long)number_in(saved_ls, "skipped_steps", 0);
        if (!(ls->scale > 0)) rc = bert_fail(err, "%s/%s: a bad loss_scaler state", dir, TRAINER_STATE);
    }
    if (rc == 0) {
        e->epoch = epoch, e->next = (int)next, f->micro_batches = micro;
        if (epoch > 0) shuffle(e->order, e->d->n_rows, rng_key((uint64_t)f->o.seed, (uint64_t)(epoch - 1)));
        e->res->evaluations = (long)number_in(s, "evaluations", 0);
        e->res->best_step = (long)number_in(s, "best_step", 0);
        e->res->best_metric = number_in(s, "best_metric", NAN);
        e->res->resumed_step = trainer_steps_done(f->trainer);
    }
    cJSON_Delete(s);
    return rc;
}

/* A fresh run's start (--overwrite_output_dir: finetune_prepare_args refuses it otherwise): an
 * earlier run's checkpoints deleted, so that no later --resume_from_checkpoint takes one; each
 * moved aside before its files go, as a save's pruning does, so a kill part-way leaves no
 * checkpoint-<step> with files missing for a resume to take. */
static int remove_old_checkpoints(Epochs *e, BertError *err) {
    const char *out = e->f->o.output_dir;
    long *steps;
    int count, rc = out ? checkpoint_list_named(out, CHECKPOINT_PREFIX, &steps, &count, err) : 0;
    if (!out || rc != 0) return rc;
    for (int i = 0; rc == 0 && i < count; i++) rc = checkpoint_remove_named(out, CHECKPOINT_PREFIX, steps[i], err);
    if (rc == 0 && count) logger_print(e->d->log, "%s: %d checkpoints of an earlier run deleted", out, count);
    free(steps);
    return rc;
}

/* resume_from_checkpoint: the folder named, or "" the newest complete one in output_dir (none:
 * a fresh start, said). The output_dir's checkpoints up to it count as this run's. */
static int resume(Epochs *e, BertError *err) {
    const FinetuneOptions *o = &e->f->o;
    char dir[4096 + 64];
    long step = 0;
    if (o->resume_from_checkpoint[0]) {
        snprintf(dir, sizeof dir, "%s", o->resume_from_checkpoint);
    } else {
        const int found = checkpoint_find_latest_named(o->output_dir, CHECKPOINT_PREFIX, TRAINER_STATE, dir,
                                                       sizeof dir, &step, err);
        if (found < 0) return -1;
        if (!found) {
            logger_print(e->d->log, "no checkpoint in %s yet: starting at step 0", o->output_dir);
            return 0;
        }
    }
    if (restore_checkpoint(e, dir, err) != 0) return -1;
    long *steps;
    int count;
    if (checkpoint_list_named(o->output_dir, CHECKPOINT_PREFIX, &steps, &count, err) != 0) return -1;
    for (int i = 0; i < count; i++)
        if (steps[i] <= e->res->resumed_step) checkpoint_history_add(&e->written, steps[i]);
    free(steps);
    logger_print(e->d->log, "resumed from %s: step %ld of %ld", dir, e->res->resumed_step, o->total_steps);
    return 0;
}

/* ---- evaluation during training ---- */

/* OUTPUT_DIR/best/ replaced whole: the new folder written aside, then swapped in. */
static int save_best(Epochs *e, long step, double value, BertError *err) {
    const char *out = e->f->o.output_dir;
    char dir[4096 + 16], tmp[4096 + 16], old[4096 + 16];
    snprintf(dir, sizeof dir, "%s/best", out), snprintf(tmp, sizeof tmp, "%s/.best.tmp", out);
    snprintf(old, sizeof old, "%s/.best.old", out);
    struct stat st;
    if (stat(dir, &st) != 0 && stat(old, &st) == 0) rename(old, dir);   /* a swap a kill cut short */
    if (fs_remove_tree(tmp, err) != 0 || fs_remove_tree(old, err) != 0) return -1;
    if (finetune_save(e->f, tmp, e->d->config_json, err) != 0) return -1;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "step", (double)step);
    cJSON_AddStringToObject(j, "metric", e->d->metric);
    cJSON_AddNumberToObject(j, "value", value);
    const int rc = checkpoint_write_json(tmp, "best.json", j, err);
    cJSON_Delete(j);
    if (rc != 0) return -1;
    if (stat(dir, &st) == 0 && rename(dir, old) != 0) return bert_fail(err, "cannot move %s aside: %s", dir, strerror(errno));
    if (rename(tmp, dir) != 0) return bert_fail(err, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    return fs_remove_tree(old, err);
}

/* One evaluation: a log line, a DLLogger record of eval_<metric>s, and best/ when better. */
static int evaluate_now(Epochs *e, BertError *err) {
    const FinetuneData *d = e->d;
    FinetuneTrainResult *res = e->res;
    const long step = trainer_steps_done(e->f->trainer);
    const double t0 = now_seconds();
    char *json = d->evaluate(d->ctx, err);
    if (!json) return -1;
    cJSON *metrics = cJSON_Parse(json), *record = cJSON_CreateObject(), *item;
    const cJSON *main_metric = cJSON_GetObjectItemCaseSensitive(metrics, d->metric);
    const double value = cJSON_IsNumber(main_metric) ? main_metric->valuedouble : NAN;
    cJSON_ArrayForEach(item, metrics) {
        char key[256];
        snprintf(key, sizeof key, "eval_%s", item->string);
        cJSON_AddItemToObject(record, key, cJSON_Duplicate(item, 1));
    }
    cJSON_Delete(metrics);
    res->evaluations++;
    const bool better = isfinite(value) && (res->best_step == 0 || !(value <= res->best_metric));
    if (better) res->best_step = step, res->best_metric = value;
    logger_print(d->log, "eval at step %ld/%ld (%.1f s): %s %.4f%s | %s", step, e->f->o.total_steps,
                 now_seconds() - t0, d->metric, value, better ? " (best so far)" : "", json);
    logger_step(d->log, e->epoch, step, record);
    free(json);
    if (better && e->f->o.save_best && save_best(e, step, value, err) != 0) return -1;
    return 0;
}

/* After each step: evaluate and checkpoint when due; a stop signal checkpoints and ends. */
static int after_step(Epochs *e, bool *stop, BertError *err) {
    const FinetuneOptions *o = &e->f->o;
    const long step = trainer_steps_done(e->f->trainer);
    if (o->eval_steps > 0 && e->d->evaluate && (step % o->eval_steps == 0 || step == o->total_steps) &&
        evaluate_now(e, err) != 0)
        return -1;
    const int sig = o->save_steps > 0 ? stop_signal_received() : 0;
    if (o->save_steps > 0 && (step % o->save_steps == 0 || sig) && save_checkpoint(e, err) != 0) return -1;
    if (sig && step < o->total_steps) {
        logger_print(e->d->log, "stopped by signal %d at step %ld: resume with --resume_from_checkpoint", sig, step);
        e->res->stopped_by_signal = sig, *stop = true;
    }
    return 0;
}

int finetune_train(Finetuner *f, const FinetuneData *d, FinetuneTrainResult *res, BertError *err) {
    memset(res, 0, sizeof *res);
    res->best_metric = NAN;
    const FinetuneOptions *o = &f->o;
    const int accum = o->gradient_accumulation_steps;
    if (d->n_rows < 1 || o->train_batch_size < accum || o->train_batch_size % accum != 0 || o->log_freq < 1)
        return bert_fail(err, "fine-tuning: no training rows, or a batch of %d not divisible into %d micro-batches",
                         o->train_batch_size, accum);
    if ((o->eval_steps > 0 && !(d->evaluate && d->metric)) || ((o->save_steps > 0 || o->save_best) && !o->output_dir))
        return bert_fail(err, "fine-tuning: evaluation during training needs the task's evaluation, checkpoints an "
                              "output folder");
    logger_print(d->log, "training on %d %s: %ld steps of %d (%d x %d), lr %g, warmup %g", d->n_rows, d->rows,
                 o->total_steps, o->train_batch_size, accum, o->train_batch_size / accum, o->learning_rate,
                 o->warmup_proportion);
    Epochs e = {.f = f, .d = d, .order = xmalloc(sizeof(int) * (size_t)d->n_rows), .next = d->n_rows,
                .micro_rows = o->train_batch_size / accum, .res = res};
    for (int i = 0; i < d->n_rows; i++) e.order[i] = i;
    int rc = o->resume_from_checkpoint ? resume(&e, err) : remove_old_checkpoints(&e, err);
    const TrainerHooks hooks = {.ctx = &e, .next_batch = next_rows};
    Progress progress = {.start = now_seconds(), .first_step = trainer_steps_done(f->trainer)};
    if (o->save_steps > 0) stop_signal_install();   /* a stop signal: a checkpoint, then 0 */
    bool stop = false;
    double loss_sum = 0;   /* over this run's optimizer steps, for train_loss */
    long loss_steps = 0;
    while (rc == 0 && !stop && trainer_steps_done(f->trainer) < f->o.total_steps) {
        TrainerStep s;
        rc = trainer_step(f->trainer, &hooks, &s, err);
        if (rc != 0) break;
        res->train_sequences += s.sequences, res->final_loss = s.loss;
        if (!s.skipped) loss_sum += s.loss, loss_steps++;
        report(f, d, &progress, e.epoch, &s);
        if (!s.skipped) rc = after_step(&e, &stop, err);
    }
    res->mean_loss = loss_steps ? loss_sum / (double)loss_steps : NAN;
    if (o->save_steps > 0) stop_signal_restore(), stop_signal_clear();
    res->steps = trainer_steps_done(f->trainer), res->train_seconds = now_seconds() - progress.start;
    res->skipped_steps = trainer_skipped_steps(f->trainer), res->loss_scale = trainer_loss_scale(f->trainer);
    if (rc == 0 && res->best_step > 0)
        logger_print(d->log, "best evaluation: step %ld, %s %.4f%s", res->best_step, d->metric, res->best_metric,
                     o->save_best ? " (its model in best/)" : "");
    checkpoint_history_free(&e.written);
    free(e.order);
    return rc;
}

int finetune_save(Finetuner *f, const char *dir, const char *extra_json, BertError *err) {
    char path[4096 + 32];
    if (make_dirs(dir, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (bert_config_save_ex(path, &f->cfg, extra_json, err) != 0) return -1;
    if (f->o.vocab_file &&
        tokenizer_folder_write(dir, f->o.vocab_file, f->o.do_lower_case, f->cfg.max_position_embeddings, err) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);   /* last: a finished run's mark */
    return bert_save_safetensors(f->model, path, err);
}

/* runtime, samples and samples per second of one phase under HF's prefix ("train", "eval", ...) */
static void add_timing(cJSON *root, const char *prefix, long samples, double seconds) {
    char key[64];
    snprintf(key, sizeof key, "%s_runtime", prefix), cJSON_AddNumberToObject(root, key, seconds);
    snprintf(key, sizeof key, "%s_samples", prefix), cJSON_AddNumberToObject(root, key, (double)samples);
    snprintf(key, sizeof key, "%s_samples_per_second", prefix);
    cJSON_AddNumberToObject(root, key, seconds > 0 ? samples / seconds : 0);
}

int finetune_write_results(const char *dir, const FinetuneResults *r, double command_seconds, BertError *err) {
    cJSON *root = cJSON_CreateObject();
    if (r->train) {
        add_timing(root, "train", r->train->train_sequences, r->train->train_seconds);
        cJSON_AddNumberToObject(root, "train_steps", (double)r->train->steps);
        cJSON_AddNumberToObject(root, "train_loss", r->train->mean_loss);   /* NaN (no step in this run): null */
    }
    cJSON *metrics = r->eval_json ? cJSON_Parse(r->eval_json) : NULL, *item;
    cJSON_ArrayForEach(item, metrics) {   /* the task's metrics, HF's eval_ prefix */
        char key[256];
        snprintf(key, sizeof key, "eval_%s", item->string);
        cJSON_AddItemToObject(root, key, cJSON_Duplicate(item, 1));
    }
    cJSON_Delete(metrics);
    if (r->eval_samples) add_timing(root, "eval", r->eval_samples, r->eval_seconds);
    if (r->predict_samples) add_timing(root, "predict", r->predict_samples, r->predict_seconds);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);   /* ru_maxrss: KiB on Linux */
    cJSON_AddNumberToObject(root, "peak_memory_mb", ru.ru_maxrss / 1024.0);
    cJSON_AddNumberToObject(root, "runtime", command_seconds);
    char *json = cJSON_Print(root), path[4096 + 32];
    cJSON_Delete(root);
    snprintf(path, sizeof path, "%s/all_results.json", dir);
    AtomicFile af;
    int rc = atomic_open(&af, path, err);
    if (rc == 0) fprintf(af.fp, "%s\n", json), rc = atomic_commit(&af, err);
    free(json);
    return rc;
}

char *finetune_task_config_json(const char *architecture, const char *task, const char *problem_type,
                                const char *const *names, int n) {
    cJSON *o = cJSON_CreateObject(), *id2label = cJSON_CreateObject(), *label2id = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "architectures"), cJSON_CreateString(architecture));
    cJSON_AddStringToObject(o, "finetuning_task", task);
    if (problem_type) cJSON_AddStringToObject(o, "problem_type", problem_type);
    for (int k = 0; k < (names ? n : 1); k++) {
        char key[16];
        snprintf(key, sizeof key, "%d", k);
        const char *name = names ? names[k] : "LABEL_0";
        cJSON_AddStringToObject(id2label, key, name);
        cJSON_AddNumberToObject(label2id, name, k);
    }
    cJSON_AddItemToObject(o, "id2label", id2label);
    cJSON_AddItemToObject(o, "label2id", label2id);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}
