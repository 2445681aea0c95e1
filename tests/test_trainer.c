/* The one training step (train/trainer.h): the hooks' order, accumulation and an epoch's
 * short step, the schedule, the fp16 loss scaler's skip and give-up, errors from the source
 * and the model, and that the 16-bit weight copies follow every update. */
#include "test.h"

#include "core/rng.h"
#include "model/bert.h"
#include "model/bert_views.h"
#include "model/config.h"
#include "train/synthetic.h"
#include "train/trainer.h"

enum { B = 4, T = 32, P = 5 };

static BertModel *tiny_model(BertPrecision precision) {
    BertConfig c;
    BertError err;
    BertModel *m = NULL;
    if (bert_config_resolve("bert-tiny", &c, &err) != 0) { CHECKF(0, "%s", err.msg); return NULL; }
    c.vocab_size = SYNTHETIC_TOPIC_VOCAB;
    if (bert_model_create(&m, &c, B, T, P, &err) != 0) { CHECKF(0, "%s", err.msg); return NULL; }
    bert_init_weights(m, 7);
    if (bert_set_precision(m, precision, &err) != 0) {
        bert_model_free(m);
        return NULL;   /* no bf16 instructions here: the caller skips */
    }
    return m;
}

/* A source of micro-batches that records every call the trainer makes. */
typedef struct {
    SyntheticBatch data;
    int micro_batches;   /* given per step; then 0 (a short step) */
    int fail_at;         /* -1, or the micro-batch whose next_batch fails */
    char log[256];
} Source;

static void note(Source *s, const char *what, int micro) {
    char one[16];
    snprintf(one, sizeof one, "%s%d ", what, micro);
    strncat(s->log, one, sizeof s->log - strlen(s->log) - 1);
}

static int next_batch(void *ctx, int micro, BertBatch *b, uint64_t *key, BertError *err) {
    Source *s = ctx;
    note(s, "n", micro);
    if (micro == s->fail_at) return bert_fail(err, "the source failed at %d", micro);
    if (micro >= s->micro_batches) return 0;
    synthetic_batch_topics(&s->data, 11, micro);
    *b = s->data.train;
    *key = rng_key(3, (uint64_t)micro);
    return 1;
}
static void after_forward(void *ctx, int micro, const BertBatch *b, float loss) { note(ctx, "f", micro); }
static void before_backward(void *ctx, int micro) { note(ctx, "b", micro); }
static void after_backward(void *ctx, int micro) { note(ctx, "a", micro); }
static void after_update(void *ctx) { note(ctx, "u", 0); }

static TrainerHooks hooks_of(Source *s) {
    return (TrainerHooks){.ctx = s, .next_batch = next_batch, .after_forward = after_forward,
                          .before_backward = before_backward, .after_backward = after_backward,
                          .after_update = after_update};
}

static TrainerOptions adamw(int accumulation) {
    TrainerOptions o = {.optimizer = optimizer_defaults(OPTIMIZER_ADAMW),
                        .schedule = {SCHEDULE_LINEAR_WARMUP, 1e-3, 0.5, 4, 0}, .accumulation = accumulation};
    o.optimizer.max_grad_norm = 0;   /* the gradients as they are */
    return o;
}

/* One model, its source of micro-batches and a trainer over them. */
typedef struct {
    BertModel *m;
    Source s;
    Trainer *t;
    TrainerHooks h;
    BertError err;
    TrainerStep st;
} Rig;

/* NULL (and a skip, for a precision this CPU lacks) where the model cannot be made. */
static Rig *rig_open(BertPrecision precision, int micro_batches, const TrainerOptions *o) {
    Rig *r = calloc(1, sizeof *r);
    r->m = tiny_model(precision);
    if (!r->m) return free(r), NULL;
    r->s = (Source){.micro_batches = micro_batches, .fail_at = -1};
    synthetic_batch_alloc(&r->s.data, B, T, P);
    r->h = hooks_of(&r->s);
    CHECKF(trainer_create(&r->t, r->m, o, &r->err) == 0, "%s", r->err.msg);
    return r;
}

static int rig_step(Rig *r) { return trainer_step(r->t, &r->h, &r->st, &r->err); }

static void rig_close(Rig *r) {
    if (!r) return;
    trainer_free(r->t);
    bert_model_free(r->m);
    synthetic_batch_free(&r->s.data);
    free(r);
}

static void test_hooks_in_order(void) {
    const TrainerOptions o = adamw(2);
    Rig *r = rig_open(BERT_FP32, 2, &o);
    if (!r) return;
    CHECKF(rig_step(r) == 0, "%s", r->err.msg);
    CHECKF(!strcmp(r->s.log, "n0 f0 b0 a0 n1 f1 b1 a1 u0 "), "%s", r->s.log);
    CHECK(r->st.micro_batches == 2 && r->st.sequences == 2 * B && !r->st.skipped && trainer_steps_done(r->t) == 1);
    CHECK(r->st.lr == schedule_lr(&o.schedule, 0) && isfinite(r->st.grad_norm) && r->st.grad_norm > 0);
    /* the second step's rate is the schedule's for one step done */
    CHECKF(rig_step(r) == 0, "%s", r->err.msg);
    CHECK(r->st.lr == schedule_lr(&o.schedule, 1) && trainer_steps_done(r->t) == 2);
    rig_close(r);
}

/* A step whose source runs dry after one micro-batch (an epoch's end) is still divided by the
 * accumulation count, as NVIDIA's scripts divide each micro-batch's loss: its gradient is half
 * of a one-micro-batch step's, exactly (a power of two). */
static void test_short_step_divides_by_the_count(void) {
    const TrainerOptions two = adamw(2), one = adamw(1);
    Rig *a = rig_open(BERT_FP32, 1, &two), *b = rig_open(BERT_FP32, 1, &one);
    if (a && b) {
        CHECKF(rig_step(a) == 0, "%s", a->err.msg);
        CHECK(a->st.micro_batches == 1 && !strcmp(a->s.log, "n0 f0 b0 a0 n1 u0 "));
        CHECKF(rig_step(b) == 0, "%s", b->err.msg);
        const float *ga = bert_grads(a->m), *gb = bert_grads(b->m);
        size_t differ = 0;
        for (size_t i = 0; i < bert_num_parameters(a->m); i++) differ += ga[i] != 0.5f * gb[i];
        CHECKF(differ == 0, "%zu gradients are not half", differ);
    }
    rig_close(a), rig_close(b);
}

static void test_errors(void) {
    const TrainerOptions o = adamw(2);
    Rig *r = rig_open(BERT_FP32, 0, &o);
    if (!r) return;
    CHECK(rig_step(r) != 0 && strstr(r->err.msg, "without a micro-batch"));
    r->s.micro_batches = 2, r->s.fail_at = 1;
    CHECK(rig_step(r) != 0 && strstr(r->err.msg, "the source failed at 1"));
    CHECK(trainer_steps_done(r->t) == 0);
    /* a NaN weight: the loss is not finite, and nothing is updated */
    r->s.fail_at = -1;
    float nan = NAN;
    const BertParamInfo *w = bert_find_param(r->m, "bert.embeddings.word_embeddings.weight");
    for (int id = 0; id < SYNTHETIC_TOPIC_VOCAB; id++) memcpy(w->data + (size_t)id * w->shape[1], &nan, sizeof nan);
    bert_params_changed(r->m);
    CHECK(rig_step(r) != 0 && strstr(r->err.msg, "not finite") && trainer_steps_done(r->t) == 0);
    TrainerOptions bad = adamw(0);
    Trainer *none = NULL;
    CHECK(trainer_create(&none, r->m, &bad, &r->err) != 0 && none == NULL);
    rig_close(r);
}

/* fp16: a scale that overflows is halved and the step skipped (no update, the count stays);
 * 64 skips in a row are an error. */
static void test_loss_scaler_skips(void) {
    TrainerOptions o = adamw(1);
    o.loss_scaling = true, o.loss_scale = 1e38, o.dynamic_loss_scale = true;
    Rig *r = rig_open(BERT_FP16, 1, &o);
    if (!r) return;
    const float before = bert_param_info(r->m, 0)->data[0];
    CHECKF(rig_step(r) == 0, "%s", r->err.msg);
    CHECK(r->st.skipped && !isfinite(r->st.grad_norm) && trainer_steps_done(r->t) == 0 &&
          trainer_skipped_steps(r->t) == 1);
    CHECK(trainer_loss_scale(r->t) == 0.5e38 && bert_param_info(r->m, 0)->data[0] == before);
    CHECK(strstr(r->s.log, "u0") == NULL);   /* no update after a skip */
    int rc = 0, steps = 1;
    while (rc == 0 && steps < 100) rc = rig_step(r), steps++;
    CHECKF(rc != 0 && steps == LOSS_SCALER_MAX_OVERFLOWS_IN_A_ROW && strstr(r->err.msg, "overflowed 64 times in a row"),
           "after %d steps: %s", steps, r->err.msg);
    /* a scale that fits: the step is taken */
    trainer_free(r->t);
    o.loss_scale = 1024;
    CHECK(trainer_create(&r->t, r->m, &o, &r->err) == 0);
    CHECKF(rig_step(r) == 0 && !r->st.skipped && trainer_steps_done(r->t) == 1, "%s", r->err.msg);
    rig_close(r);
}

/* The trainer refreshes the model's 16-bit weight copies after each update: after a step, a
 * bf16 forward gives what a model loaded fresh with the new fp32 weights gives. */
static void test_weight_copies_follow_updates(void) {
    TrainerOptions o = adamw(1);
    o.schedule = (Schedule){.kind = SCHEDULE_CONSTANT, .base_lr = 1e-2};
    Rig *r = rig_open(BERT_BF16_EMULATED, 1, &o);
    BertModel *fresh = tiny_model(BERT_BF16_EMULATED);
    if (r && fresh) {
        for (int step = 0; step < 2; step++) CHECKF(rig_step(r) == 0, "%s", r->err.msg);
        /* (bert_params would mark the copies stale itself: read the weights through the table) */
        memcpy(bert_params(fresh), bert_param_info(r->m, 0)->data, sizeof(float) * bert_num_parameters(r->m));
        bert_params_changed(fresh);
        synthetic_batch_topics(&r->s.data, 11, 0);
        const float after = bert_forward(r->m, &r->s.data.train, false, 0);
        const float expect = bert_forward(fresh, &r->s.data.train, false, 0);
        CHECKF(after == expect, "loss %.9g after the steps, %.9g from the same weights loaded fresh", after, expect);
    }
    rig_close(r);
    bert_model_free(fresh);
}

int main(void) {
    RUN_TEST(test_hooks_in_order);
    RUN_TEST(test_short_step_divides_by_the_count);
    RUN_TEST(test_errors);
    RUN_TEST(test_loss_scaler_skips);
    RUN_TEST(test_weight_copies_follow_updates);
    return test_summary();
}
