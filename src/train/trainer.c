/* One training step: see trainer.h. */
#include "train/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

struct Trainer {
    TrainerOptions o;
    BertModel *model;
    Optimizer *opt;
    LossScaler scaler;
    int overflows_in_a_row;
};

int trainer_create(Trainer **out, BertModel *m, const TrainerOptions *o, BertError *err) {
    *out = NULL;
    if (o->accumulation < 1) return bert_fail(err, "trainer: the accumulation count must be at least 1");
    if (o->loss_scaling && !(o->loss_scale >= 1 && o->loss_scale <= 1e38))
        return bert_fail(err, "trainer: the loss scale must be in [1, 1e38]");
    Trainer *t = xcalloc(1, sizeof *t);
    t->o = *o;
    t->model = m;
    const BertParamInfo *tensors = bert_param_info(m, 0);
    const int n = bert_num_param_tensors(m);
    const int rc = o->shard ? optimizer_create_sharded(&t->opt, &o->optimizer, tensors, n, o->shard, err)
                            : optimizer_create(&t->opt, &o->optimizer, tensors, n, err);
    if (rc != 0) {
        free(t);
        return -1;
    }
    loss_scaler_init(&t->scaler, o->loss_scaling ? o->loss_scale : 1.0, o->loss_scaling && o->dynamic_loss_scale);
    *out = t;
    return 0;
}

void trainer_free(Trainer *t) {
    if (!t) return;
    optimizer_free(t->opt);
    free(t);
}

long trainer_steps_done(const Trainer *t) { return optimizer_step_count(t->opt); }
Optimizer *trainer_optimizer(Trainer *t) { return t->opt; }
LossScaler *trainer_loss_scaler(Trainer *t) { return t->o.loss_scaling ? &t->scaler : NULL; }
double trainer_loss_scale(const Trainer *t) { return t->o.loss_scaling ? t->scaler.scale : 1.0; }
long trainer_skipped_steps(const Trainer *t) { return t->o.loss_scaling ? t->scaler.skipped_steps : 0; }

/* Forward and backward of the step's micro-batches; the gradients add up. */
static int accumulate(Trainer *t, const TrainerHooks *h, TrainerStep *s, BertError *err) {
    for (int micro = 0; micro < t->o.accumulation; micro++) {
        BertBatch b;
        uint64_t dropout_key = 0;
        const int got = h->next_batch(h->ctx, micro, &b, &dropout_key, err);
        if (got < 0) return -1;
        if (got == 0) {
            if (micro == 0) return bert_fail(err, "trainer: a step without a micro-batch");
            break;
        }
        const double t0 = now_seconds();
        const float loss = bert_forward(t->model, &b, true, dropout_key);
        if (!isfinite(loss)) {
            const char *why = bert_last_error(t->model);
            if (why[0]) return bert_fail(err, "%s", why);
            /* after a first update the usual cause is a learning rate too high for the model
             * (issue 35, D20: --learning_rate 1e30 was not named) */
            const long done = optimizer_step_count(t->opt);
            if (done > 0)
                return bert_fail(err, "the loss is not finite after %ld optimizer steps (the last at learning rate %g, "
                                      "--learning_rate %g%s)", done, schedule_lr(&t->o.schedule, done - 1),
                                 t->o.schedule.base_lr, t->o.schedule.base_lr > 1 ? ": far too high" : "");
            return bert_fail(err, "the loss is not finite before any update (the weights or the batch hold NaN or Inf?)");
        }
        const double t1 = now_seconds();
        if (h->after_forward) h->after_forward(h->ctx, micro, &b, loss);
        const double t2 = now_seconds();
        if (h->before_backward) h->before_backward(h->ctx, micro);
        if (bert_backward(t->model, &b) != 0) return bert_fail(err, "%s", bert_last_error(t->model));
        if (h->after_backward) h->after_backward(h->ctx, micro);
        k_wait();   /* a device's queued backward counts here, not in the update's time */
        s->forward_seconds += t1 - t0, s->backward_seconds += now_seconds() - t2;
        s->loss += loss / t->o.accumulation, s->sequences += b.batch, s->micro_batches++;
    }
    return 0;
}

/* fp16: unscale the gradients (a power of two: exact); any inf or NaN among them is an
 * overflow. Returns whether the step goes on; *norm: the global norm, when it is the one the
 * optimizer would compute (unsharded), else -1. */
static bool unscale_and_check(Trainer *t, const TrainerHooks *h, TrainerStep *s, double *norm) {
    const BertParamInfo *tensors = bert_param_info(t->model, 0);
    const int n = bert_num_param_tensors(t->model);
    tensors_scale_grads(tensors, n, (float)(1.0 / t->scaler.scale));
    const double checked = h->grad_norm ? h->grad_norm(h->ctx) : tensors_grad_norm(tensors, n);
    *norm = h->grad_norm ? -1 : checked;
    if (loss_scaler_update(&t->scaler, !isfinite(checked))) return true;
    s->skipped = true, s->grad_norm = checked;
    return false;
}

int trainer_step(Trainer *t, const TrainerHooks *h, TrainerStep *s, BertError *err) {
    memset(s, 0, sizeof *s);
    bert_zero_grad(t->model);
    if (t->o.loss_scaling) bert_set_loss_scale(t->model, (float)t->scaler.scale);
    if (accumulate(t, h, s, err) != 0) return -1;
    const double t0 = now_seconds();
    const BertParamInfo *tensors = bert_param_info(t->model, 0);
    const int n = bert_num_param_tensors(t->model);
    if (t->o.accumulation > 1) tensors_scale_grads(tensors, n, 1.0f / (float)t->o.accumulation);
    s->lr = schedule_lr(&t->o.schedule, optimizer_step_count(t->opt));
    double norm = -1;   /* the overflow check's norm, when the optimizer can take it as it is */
    if (t->o.loss_scaling && !unscale_and_check(t, h, s, &norm)) {
        s->update_seconds = now_seconds() - t0;
        return ++t->overflows_in_a_row < LOSS_SCALER_MAX_OVERFLOWS_IN_A_ROW ? 0 :
            bert_fail(err, "fp16 gradients overflowed %d times in a row (loss scale now %g): not a matter of scale",
                      LOSS_SCALER_MAX_OVERFLOWS_IN_A_ROW, t->scaler.scale);
    }
    t->overflows_in_a_row = 0;
    s->grad_norm = norm >= 0 ? optimizer_step_with_norm(t->opt, s->lr, norm) : optimizer_step(t->opt, s->lr);
    if (h->after_update) h->after_update(h->ctx);
    bert_params_changed(t->model);   /* 16-bit and packed copies are remade at the next forward */
    k_wait();
    s->update_seconds = now_seconds() - t0;
    if (!isfinite(s->grad_norm)) return bert_fail(err, "the gradient is not finite");
    return 0;
}
