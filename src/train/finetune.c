/* Fine-tuning: the model, AdamW and the linear warmup/decay step. See finetune.h. */
#include "train/finetune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "core/rng.h"
#include "io/tokenizer_files.h"
#include "model/config.h"
#include "train/trainer.h"

struct Finetuner {
    FinetuneOptions o;
    BertConfig cfg;
    BertModel *model;
    Trainer *trainer;
    long micro_batches;      /* since the start: dropout masks are keyed by it */
};

#define FINETUNE_INIT_LOSS_SCALE 65536.0   /* apex's and GradScaler's dynamic start, 2^16 */

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

static int check_settings(const FinetuneOptions *o, BertError *err) {
    if (o->gradient_accumulation_steps < 1)
        return bert_fail(err, "--gradient_accumulation_steps %d must be at least 1", o->gradient_accumulation_steps);
    if (o->total_steps < 1) return bert_fail(err, "fine-tuning: %ld optimizer steps: nothing to train", o->total_steps);
    return check_rates(o->learning_rate, o->warmup_proportion, o->weight_decay, o->adam_epsilon, err);
}

int finetune_open(Finetuner **out, const FinetuneOptions *o, char *what, size_t what_size, BertError *err) {
    *out = NULL;
    if (check_settings(o, err) != 0) return -1;
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
                                .strict = a->strict};
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
    if (step % f->o.log_freq != 0 && step != total_steps) {
        logger_progress(log, "step %ld/%ld  loss %.4f  %.1f seq/s", step, total_steps, s->loss, rate);
        return;
    }
    char el[32], eta[32];
    format_duration(elapsed, el, sizeof el), format_duration(elapsed / step * (total_steps - step), eta, sizeof eta);
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
 * shuffled when one ends between steps. */
typedef struct {
    Finetuner *f;
    const FinetuneData *d;
    int *order, next, micro_rows;
    long epoch;
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

int finetune_train(Finetuner *f, const FinetuneData *d, FinetuneTrainResult *res, BertError *err) {
    memset(res, 0, sizeof *res);
    const FinetuneOptions *o = &f->o;
    const int accum = o->gradient_accumulation_steps;
    if (d->n_rows < 1 || o->train_batch_size < accum || o->train_batch_size % accum != 0 || o->log_freq < 1)
        return bert_fail(err, "fine-tuning: no training rows, or a batch of %d not divisible into %d micro-batches",
                         o->train_batch_size, accum);
    logger_print(d->log, "training on %d %s: %ld steps of %d (%d x %d), lr %g, warmup %g", d->n_rows, d->rows,
                 o->total_steps, o->train_batch_size, accum, o->train_batch_size / accum, o->learning_rate,
                 o->warmup_proportion);
    Epochs e = {.f = f, .d = d, .order = xmalloc(sizeof(int) * (size_t)d->n_rows), .next = d->n_rows,
                .micro_rows = o->train_batch_size / accum};
    const TrainerHooks hooks = {.ctx = &e, .next_batch = next_rows};
    Progress progress = {.start = now_seconds()};
    int rc = 0;
    while (rc == 0 && trainer_steps_done(f->trainer) < f->o.total_steps) {
        TrainerStep s;
        rc = trainer_step(f->trainer, &hooks, &s, err);
        if (rc != 0) break;
        res->train_sequences += s.sequences, res->final_loss = s.loss;
        report(f, d, &progress, e.epoch, &s);
    }
    res->steps = trainer_steps_done(f->trainer), res->train_seconds = now_seconds() - progress.start;
    res->skipped_steps = trainer_skipped_steps(f->trainer), res->loss_scale = trainer_loss_scale(f->trainer);
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
