/* Fine-tuning: the model, AdamW and the linear warmup/decay step. See finetune.h. */
#include "train/finetune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/config.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "train/schedulers.h"

struct Finetuner {
    FinetuneOptions o;
    BertConfig cfg;
    BertModel *model;
    Optimizer *opt;
    long micro_batches;      /* since the start: dropout masks are keyed by it */
    int in_step;             /* micro-batches accumulated since the last update */
    bool scaling;            /* FP16: loss scaling */
    LossScaler scaler;
    int overflows_in_a_row;
};

#define FINETUNE_INIT_LOSS_SCALE 65536.0   /* apex's and GradScaler's dynamic start, 2^16 */

int finetune_open(Finetuner **out, const FinetuneOptions *o, char *what, size_t what_size, BertError *err) {
    *out = NULL;
    if (o->gradient_accumulation_steps < 1 || o->total_steps < 1 || !(o->learning_rate > 0) ||
        !(o->warmup_proportion >= 0 && o->warmup_proportion < 1) || !(o->weight_decay >= 0) || !(o->adam_epsilon > 0))
        return bert_fail(err, "fine-tuning: bad optimisation settings (steps, learning rate, warmup, decay, epsilon)");
    Finetuner *f = xcalloc(1, sizeof *f);
    f->o = *o;
    int initialised = 0;
    if (bert_open_checkpoint(&f->model, o->init_checkpoint, o->config_file, o->heads, o->max_batch, o->max_seq_length,
                             (uint64_t)o->seed, &initialised, err) != 0)
        goto fail;
    f->cfg = *bert_model_config(f->model);
    if (o->vocab_size_expected > 0 && o->vocab_size_expected != f->cfg.vocab_size) {
        bert_fail(err, "the vocabulary has %d tokens but %s's model has %d: not the checkpoint's vocabulary",
                  o->vocab_size_expected, o->init_checkpoint, f->cfg.vocab_size);
        goto fail;
    }
    if (bert_set_precision(f->model, (BertPrecision)o->precision, err) != 0) goto fail;
    f->scaling = o->precision == BERT_FP16;
    loss_scaler_init(&f->scaler, o->loss_scale > 0 ? o->loss_scale : FINETUNE_INIT_LOSS_SCALE, !(o->loss_scale > 0));
    if (f->scaling) bert_set_loss_scale(f->model, (float)f->scaler.scale);
    const char *bad_tensor;
    const size_t bad = bert_nonfinite_params(f->model, &bad_tensor);
    if (bad && o->strict) {
        bert_fail(err, "%s: %zu weights are NaN or infinite (the first in %s); refused (--strict)", o->init_checkpoint, bad, bad_tensor);
        goto fail;
    }
    bert_set_unpadding(f->model, true);
    bert_set_packed_weights(f->model, true);   /* evaluation's forwards; each step announces its change */
    bert_set_inference_only(f->model, true);   /* the same: training's forwards (training=true) keep everything */
    if (o->forward_only) bert_set_forward_only(f->model, true);
    OptimizerConfig oc = optimizer_defaults(OPTIMIZER_ADAMW);
    oc.weight_decay = (float)o->weight_decay, oc.eps = (float)o->adam_epsilon;
    if (optimizer_create(&f->opt, &oc, bert_param_info(f->model, 0), bert_num_param_tensors(f->model), err) != 0)
        goto fail;
    snprintf(what, what_size, "%s (%d task-head tensors drawn from seed %ld%s)", o->init_checkpoint, initialised, o->seed,
             bad ? "; WARNING: NaN/Inf weights" : "");
    *out = f;
    return 0;
fail:
    finetune_close(f);
    return -1;
}

void finetune_close(Finetuner *f) {
    if (!f) return;
    optimizer_free(f->opt);
    bert_model_free(f->model);
    free(f);
}

BertModel *finetune_model(Finetuner *f) { return f->model; }
const BertConfig *finetune_config(const Finetuner *f) { return &f->cfg; }
long finetune_steps_done(const Finetuner *f) { return optimizer_step_count(f->opt); }
long finetune_skipped_steps(const Finetuner *f) { return f->scaling ? f->scaler.skipped_steps : 0; }
double finetune_loss_scale(const Finetuner *f) { return f->scaling ? f->scaler.scale : 1.0; }

int finetune_micro_batch(Finetuner *f, const BertBatch *b, float *loss, BertError *err) {
    if (f->overflows_in_a_row >= LOSS_SCALER_MAX_OVERFLOWS_IN_A_ROW)
        return bert_fail(err, "fp16 gradients overflowed %d times in a row (loss scale now %g): not a matter of scale",
                         LOSS_SCALER_MAX_OVERFLOWS_IN_A_ROW, f->scaler.scale);
    if (f->in_step == 0) bert_zero_grad(f->model);
    const uint64_t key = rng_key(rng_key((uint64_t)f->o.seed, 0xF17E), (uint64_t)f->micro_batches);
    *loss = bert_forward(f->model, b, true, key);
    if (!isfinite(*loss)) {
        const char *why = bert_last_error(f->model);
        return bert_fail(err, "%s", why[0] ? why : "the loss is not finite");
    }
    if (bert_backward(f->model, b) != 0) return bert_fail(err, "%s", bert_last_error(f->model));
    f->micro_batches++, f->in_step++;
    return 0;
}

double finetune_step(Finetuner *f, double *grad_norm) {
    /* divided by the accumulation count even when an epoch's last step has fewer micro-batches
     * (NVIDIA's scripts divide each micro-batch's loss by it; recent HF Trainers divide by the
     * items actually accumulated): such a step is a little under-weighted */
    const int n = bert_num_param_tensors(f->model), accum = f->o.gradient_accumulation_steps;
    f->in_step = 0;
    if (accum > 1) tensors_scale_grads(bert_param_info(f->model, 0), n, 1.0f / (float)accum);
    const double lr = linear_warmup_lr(f->o.learning_rate, f->o.warmup_proportion, f->o.total_steps,
                                       optimizer_step_count(f->opt));
    if (f->scaling) {   /* unscale (a power of two: exact); any inf or NaN is an fp16 overflow */
        tensors_scale_grads(bert_param_info(f->model, 0), n, (float)(1.0 / f->scaler.scale));
        const double norm = tensors_grad_norm(bert_param_info(f->model, 0), n);
        const bool taken = loss_scaler_update(&f->scaler, !isfinite(norm));
        bert_set_loss_scale(f->model, (float)f->scaler.scale);
        if (!taken) {   /* the gradients are dropped at the next micro-batch */
            f->overflows_in_a_row++;
            *grad_norm = norm;
            return lr;
        }
        f->overflows_in_a_row = 0;
    }
    *grad_norm = optimizer_step(f->opt, lr);
    bert_params_changed(f->model);
    return lr;
}

void finetune_report(const Finetuner *f, Logger *log, FinetuneProgress *p, long total_steps, long epoch,
                     long log_freq, double step_loss, long step_sequences, double lr, double grad_norm) {
    const long step = finetune_steps_done(f);
    p->sequences += step_sequences, p->window_loss += step_loss, p->window++;
    const double elapsed = now_seconds() - p->start, rate = elapsed > 0 ? p->sequences / elapsed : 0;
    if (f->scaling && !isfinite(grad_norm)) {   /* a skipped step: the same step comes again */
        p->window_loss -= step_loss, p->window--;
        logger_print(log, "step %ld/%ld skipped: fp16 gradients overflowed; loss scale now %g", step + 1, total_steps,
                     f->scaler.scale);
        return;
    }
    if (step % log_freq != 0 && step != total_steps) {
        logger_progress(log, "step %ld/%ld  loss %.4f  %.1f seq/s", step, total_steps, step_loss, rate);
        return;
    }
    char el[32], eta[32];
    format_duration(elapsed, el, sizeof el), format_duration(elapsed / step * (total_steps - step), eta, sizeof eta);
    const double mean = p->window_loss / p->window;
    logger_print(log, "step %ld/%ld (epoch %ld) | loss %.4f | lr %.3e | grad %.3f | %.1f seq/s | %s, ETA %s", step,
                 total_steps, epoch, mean, lr, grad_norm, rate, el, eta);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "average_loss", mean);
    cJSON_AddNumberToObject(d, "step_loss", step_loss);
    cJSON_AddNumberToObject(d, "learning_rate", lr);
    cJSON_AddNumberToObject(d, "grad_norm", grad_norm);
    cJSON_AddNumberToObject(d, "training_sequences_per_second", rate);
    if (f->scaling) {
        cJSON_AddNumberToObject(d, "loss_scale", f->scaler.scale);
        cJSON_AddNumberToObject(d, "skipped_steps", (double)f->scaler.skipped_steps);
    }
    logger_step(log, epoch, step, d);
    p->window_loss = 0, p->window = 0;
}

int finetune_save(Finetuner *f, const char *dir, const char *extra_json, BertError *err) {
    char path[4096 + 32];
    if (make_dirs(dir, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (bert_save_safetensors(f->model, path, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    return bert_config_save_ex(path, &f->cfg, extra_json, err);
}
