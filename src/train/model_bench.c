/* `bert bench`'s measurement (train/model_bench.h). */
#include "train/model_bench.h"

#include <math.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "train/synthetic.h"
#include "train/trainer.h"

static void timing_add(ModelBenchTiming *t, double step_s, double cpu_s, bool timed) {
    if (!timed) return;
    t->steps++;
    t->total_s += step_s;
    t->cpu_s += cpu_s;
    if (t->best_s == 0 || step_s < t->best_s) t->best_s = step_s;
}

/* The trainer's batch (train/trainer.h): the one synthetic batch, a dropout key per step. */
typedef struct {
    const SyntheticBatch *s;
    uint64_t seed;
    int step;
} BenchSteps;

static int bench_batch(void *ctx, int micro, BertBatch *b, uint64_t *dropout_key, BertError *err) {
    const BenchSteps *c = ctx;
    *b = c->s->train;
    *dropout_key = c->seed * 1000003u + (uint64_t)c->step;
    return 1;
}

/* Warm-up steps run first and are not timed. -1 (err set) if a step fails. */
static int bench_train(BertModel *m, Trainer *trainer, const SyntheticBatch *s, const ModelBenchOptions *o,
                       ModelBenchTiming *t, BertError *err) {
    memset(t, 0, sizeof *t);
    /* pre-training reads only the heads' rows of the last layer, and no trailing padding */
    bert_set_last_layer_pruning(m, !o->full_last_layer && !o->all_rows);
    bert_set_unpadding(m, !o->all_rows);
    BenchSteps steps = {s, o->seed, 0};
    const TrainerHooks hooks = {.ctx = &steps, .next_batch = bench_batch};
    for (int step = 1; step <= o->warmup + o->steps; step++) {
        if (o->kernel_profile && step == o->warmup + 1) k_profile_start();
        bool timed = step > o->warmup;
        double t0 = now_seconds(), c0 = cpu_seconds();
        TrainerStep ts;
        BertError e;
        steps.step = step;
        if (trainer_step(trainer, &hooks, &ts, &e) != 0)   /* a rejected batch says why; otherwise training diverged */
            return bert_fail(err, "training step %d: %s%s", step, e.msg,
                             bert_last_error(m)[0] ? "" : " (the run diverged: --learning_rate too high?)");
        double t3 = now_seconds();
        if (step == 1) t->first_loss = (float)ts.loss;
        t->last_loss = (float)ts.loss;
        timing_add(t, t3 - t0, cpu_seconds() - c0, timed);
        if (timed) t->forward_s += ts.forward_seconds, t->backward_s += ts.backward_seconds, t->optimizer_s += ts.update_seconds;
        if (o->train_step) o->train_step(o->ctx, step, timed, t3 - t0, ts.loss);
    }
    if (o->kernel_profile) k_profile_stop();
    t->last_layer_rows = bert_last_layer_rows(m);
    t->encoder_rows = bert_encoder_rows(m);
    t->executed_flops = bert_executed_train_flops(m);
    bert_set_last_layer_pruning(m, false);   /* inference returns every hidden state */
    bert_set_unpadding(m, false);
    return 0;
}

static int bench_infer(BertModel *m, const SyntheticBatch *s, const ModelBenchOptions *o, ModelBenchTiming *t,
                       BertError *err) {
    memset(t, 0, sizeof *t);
    const bool profile = o->kernel_profile && o->steps == 0;   /* inference alone: its batches profiled */
    for (int step = 1; step <= o->warmup + o->infer_steps; step++) {
        if (profile && step == o->warmup + 1) k_profile_start();
        if (step == o->warmup + 1) k_int8_product_counters(NULL, NULL, true);   /* the timed batches' alone */
        double t0 = now_seconds(), c0 = cpu_seconds();
        float r = bert_forward(m, &s->infer, false, 0);
        if (isnan(r)) return bert_fail(err, "%s", bert_last_error(m));
        k_wait();   /* a device's batch is timed to the end of its work, not of its launches */
        double dt = now_seconds() - t0;
        timing_add(t, dt, cpu_seconds() - c0, step > o->warmup);
        t->forward_s += step > o->warmup ? dt : 0;
    }
    if (profile) k_profile_stop();
    k_int8_product_counters(&t->int8_product_thread_s, &t->int8_product_ops, true);
    return 0;
}

int model_bench_run(const BertConfig *cfg, const ModelBenchOptions *o, ModelBenchResult *r, BertError *err) {
    memset(r, 0, sizeof *r);
    BertModel *m = NULL;
    if (bert_model_create(&m, cfg, o->batch, o->seq, o->preds, err) != 0) return -1;
    bert_init_weights(m, o->seed);
    if (bert_set_precision(m, o->precision, err) != 0) {
        bert_model_free(m);
        return -1;
    }
    bert_set_packed_weights(m, !o->plain_weights);
    /* its inference forwards are never followed by a backward; inference alone: every layer on
     * one layer's buffers, as bert embed and the tasks run it */
    bert_set_mode(m, o->unfused ? BERT_MODE_FULL : o->steps == 0 ? BERT_MODE_FORWARD_ONLY : BERT_MODE_LEAN_INFERENCE);
    SyntheticBatch s;
    synthetic_batch_alloc(&s, o->batch, o->seq, o->preds);
    synthetic_batch_random(&s, cfg->vocab_size, o->pad_fraction, o->seed);
    r->real_tokens = s.real_tokens;
    r->params = bert_num_parameters(m);
    r->model_bytes = bert_model_bytes(m);
    r->train_flops = bert_train_flops(cfg, o->batch, o->seq, o->preds);
    r->infer_flops = bert_infer_flops(cfg, o->batch, o->seq);
    if (o->started) o->started(o->ctx);
    /* AdamW as the PyTorch peer runs it (no clipping), or LAMB as bert pretrain does (NVIDIA's
     * defaults); the moments allocated up front */
    TrainerOptions to = {.optimizer = optimizer_defaults(o->optimizer),
                         .schedule = {.kind = SCHEDULE_CONSTANT, .base_lr = o->learning_rate}, .accumulation = 1};
    if (o->optimizer == OPTIMIZER_ADAMW) to.optimizer.max_grad_norm = 0;
    Trainer *trainer = NULL;
    if (trainer_create(&trainer, m, &to, err) != 0) {
        synthetic_batch_free(&s), bert_model_free(m);
        return -1;
    }
    if (o->steps > 0) r->model_bytes += optimizer_state_bytes(trainer_optimizer(trainer));
    int failed = (o->steps > 0 && bench_train(m, trainer, &s, o, &r->train, err) != 0) ||
                 (o->infer_steps > 0 && bench_infer(m, &s, o, &r->infer, err) != 0);
    r->infer.executed_flops = r->infer_flops;
    r->peak_rss = peak_rss_bytes();
    synthetic_batch_free(&s);
    trainer_free(trainer);
    bert_model_free(m);
    return failed ? -1 : 0;
}

static double seq_per_s(const ModelBenchTiming *t, int batch) {
    return t->steps ? batch * t->steps / t->total_s : 0;
}

static double gflops(const ModelBenchTiming *t, double flops) {
    return t->steps ? flops * t->steps / t->total_s * 1e-9 : 0;
}

/* Mean milliseconds per timed step of a total in seconds (0 when nothing was timed). */
static double mean_ms(const ModelBenchTiming *t, double total_s) { return t->steps ? 1e3 * total_s / t->steps : 0; }

void model_bench_rates(const ModelBenchTiming *t, double formula_flops, int batch, double peak_gflops,
                       ModelBenchRates *out) {
    const double g = gflops(t, t->executed_flops);
    *out = (ModelBenchRates){
        .seq_per_s = seq_per_s(t, batch),
        .ms_per_step = mean_ms(t, t->total_s),
        .best_ms = 1e3 * t->best_s,
        .forward_ms = mean_ms(t, t->forward_s),
        .backward_ms = mean_ms(t, t->backward_s),
        .optimizer_ms = mean_ms(t, t->optimizer_s),
        .cpu_ms = mean_ms(t, t->cpu_s),
        .gflops = g,
        .percent_of_peak = peak_gflops > 0 ? 100.0 * g / peak_gflops : 0,
        .formula_gflops = gflops(t, formula_flops),
        .gflop_per_seq = t->executed_flops / batch * 1e-9,
        .formula_gflop_per_seq = formula_flops / batch * 1e-9,
        .percent_fewer = 100.0 * (1.0 - t->executed_flops / formula_flops),
    };
}
