/* `bert train_demo`'s run (train/demo.h). */
#include "train/demo.h"

#include <stdio.h>
#include <string.h>

#include "core/rng.h"
#include "model/bert.h"
#include "train/synthetic.h"
#include "train/trainer.h"

static int save_outputs(BertModel *m, const BertConfig *cfg, const char *out, TrainDemoResult *r, BertError *err) {
    const char *slash = strrchr(out, '/');
    snprintf(r->config_path, sizeof r->config_path, "%.*sconfig.json", slash ? (int)(slash - out + 1) : 0, out);
    char dir[4200];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
    if (slash && slash != out && make_dirs(dir, err)) return -1;
    if (bert_save_safetensors(m, out, err) || bert_config_save(r->config_path, cfg, err)) return -1;
    return 0;
}

/* The trainer's batches (train/trainer.h): each step a fresh batch of the toy language. */
typedef struct {
    SyntheticBatch *d;
    const TrainDemoOptions *o;
    BertModel *model;
    int step;
    double mlm_sum, nsp_sum;
} DemoSteps;

static int demo_batch(void *ctx, int micro, BertBatch *b, uint64_t *dropout_key, BertError *err) {
    DemoSteps *c = ctx;
    synthetic_batch_topics(c->d, c->o->seed, c->step);
    *b = c->d->train;
    *dropout_key = rng_key(c->o->seed, (uint64_t)c->step);
    return 1;
}

static void read_losses(void *ctx, int micro, const BertBatch *b, float loss) {
    DemoSteps *c = ctx;
    c->mlm_sum += bert_last_mlm_loss(c->model), c->nsp_sum += bert_last_nsp_loss(c->model);
}

int train_demo_run(const TrainDemoOptions *o, TrainDemoResult *r, BertError *err) {
    memset(r, 0, sizeof *r);
    BertModel *m;
    if (bert_model_create(&m, &o->config, o->batch, o->seq, o->preds, err)) return -1;
    bert_init_weights(m, o->seed);
    bert_set_last_layer_pruning(m, true);   /* pre-training reads only the heads' rows of the last layer */
    bert_set_unpadding(m, true);            /* and nothing past a sequence's last real token */
    if (o->started) o->started(o->ctx, bert_num_parameters(m));
    SyntheticBatch d;
    synthetic_batch_alloc(&d, o->batch, o->seq, o->preds);
    /* AdamW (b1 0.9, b2 0.999, eps 1e-6, decay 0.01), the global gradient norm clipped to 1;
     * BERT's schedule: linear warmup over the first 10% of the steps, then linear decay to 0 */
    const TrainerOptions to = {.optimizer = optimizer_defaults(OPTIMIZER_ADAMW),
                               .schedule = {SCHEDULE_LINEAR_WARMUP, o->lr, 0.1, o->steps, 0}, .accumulation = 1};
    Trainer *trainer;
    if (trainer_create(&trainer, m, &to, err)) {
        synthetic_batch_free(&d);
        bert_model_free(m);
        return -1;
    }
    DemoSteps steps = {&d, o, m, 0, 0, 0};
    const TrainerHooks hooks = {.ctx = &steps, .next_batch = demo_batch, .after_forward = read_losses};
    double t0 = now_seconds(), loss_sum = 0;
    int window = 0, rc = 0;
    for (int step = 1; step <= o->steps && rc == 0; step++) {
        steps.step = step;
        TrainerStep s;
        BertError e;
        if (trainer_step(trainer, &hooks, &s, &e)) {
            rc = bert_fail(err, "step %d: %s", step, e.msg);
            break;
        }
        loss_sum += s.loss, window++;
        if (step % o->log_every == 0 || step == o->steps) {
            double el = now_seconds() - t0, rate = step * o->batch / el;
            const TrainDemoProgress p = {step, o->steps, loss_sum / window, steps.mlm_sum / window,
                                         steps.nsp_sum / window, s.lr, rate, el, (o->steps - step) * o->batch / rate};
            if (o->progress) o->progress(o->ctx, &p);
            loss_sum = steps.mlm_sum = steps.nsp_sum = 0, window = 0;
        }
    }
    if (rc == 0) rc = save_outputs(m, &o->config, o->out, r, err);
    synthetic_batch_free(&d);
    trainer_free(trainer);
    bert_model_free(m);
    return rc;
}
