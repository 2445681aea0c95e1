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

static void test_hooks_in_order(void) {
    BertModel *m = tiny_model(BERT_FP32);
    if (!m) return;
    Source s = {.micro_batches = 2, .fail_at = -1};
    synthetic_batch_alloc(&s.data, B, T, P);
    Trainer *t;
    BertError err;
    const TrainerOptions o = adamw(2);
    CHECK(trainer_create(&t, m, &o, &err) == 0);
    const TrainerHooks h = hooks_of(&s);
    TrainerStep st;
    CHECKF(trainer_step(t, &h, &st, &err) == 0, "%s", err.msg);
    CHECKF(!strcmp(s.log, "n0 f0 b0 a0 n1 f1 b1 a1 u0 "), "%s", s.log);
    CHECK(st.micro_batches == 2 && st.sequences == 2 * B && !st.skipped && trainer_steps_done(t) == 1);
    CHECK(st.lr == schedule_lr(&o.schedule, 0) && isfinite(st.grad_norm) && st.grad_norm > 0);
    /* the second step's rate is the schedule's for one step done */
    CHECKF(trainer_step(t, &h, &st, &err) == 0, "%s", err.msg);
    CHECK(st.lr == schedule_lr(&o.schedule, 1) && trainer_steps_done(t) == 2);
    trainer_free(t);
    bert_model_free(m);
    synthetic_batch_free(&s.data);
}

/* A step whose source runs dry after one micro-batch (an epoch's end) is still divided by the
 * accumulation count, as NVIDIA's scripts divide each micro-batch's loss: its gradient is half
 * of a one-micro-batch step's, exactly (a power of two). */
static void test_short_step_divides_by_the_count(void) {
    BertModel *a = tiny_model(BERT_FP32), *b = tiny_model(BERT_FP32);
    if (!a || !b) return;
    Source sa = {.micro_batches = 1, .fail_at = -1}, sb = {.micro_batches = 1, .fail_at = -1};
    synthetic_batch_alloc(&sa.data, B, T, P), synthetic_batch_alloc(&sb.data, B, T, P);
    Trainer *ta, *tb;
    BertError err;
    const TrainerOptions oa = adamw(2), ob = adamw(1);
    CHECK(trainer_create(&ta, a, &oa, &err) == 0 && trainer_create(&tb, b, &ob, &err) == 0);
    const TrainerHooks ha = hooks_of(&sa), hb = hooks_of(&sb);
    TrainerStep st;
    CHECKF(trainer_step(ta, &ha, &st, &err) == 0, "%s", err.msg);
    CHECK(st.micro_batches == 1 && !strcmp(sa.log, "n0 f0 b0 a0 n1 u0 "));
    CHECKF(trainer_step(tb, &hb, &st, &err) == 0, "%s", err.msg);
    const float *ga = bert_grads(a), *gb = bert_grads(b);
    size_t differ = 0;
    for (size_t i = 0; i < bert_num_parameters(a); i++) differ += ga[i] != 0.5f * gb[i];
    CHECKF(differ == 0, "%zu gradients are not half", differ);
    trainer_free(ta), trainer_free(tb);
    bert_model_free(a), bert_model_free(b);
    synthetic_batch_free(&sa.data), synthetic_batch_free(&sb.data);
}

static void test_errors(void) {
    BertModel *m = tiny_model(BERT_FP32);
    if (!m) return;
    Source s = {.micro_batches = 0, .fail_at = -1};
    synthetic_batch_alloc(&s.data, B, T, P);
    Trainer *t;
    BertError err;
    const TrainerOptions o = adamw(2);
    CHECK(trainer_create(&t, m, &o, &err) == 0);
    const TrainerHooks h = hooks_of(&s);
    TrainerStep st;
    CHECK(trainer_step(t, &h, &st, &err) != 0 && strstr(err.msg, "without a micro-batch"));
    s.micro_batches = 2, s.fail_at = 1;
    CHECK(trainer_step(t, &h, &st, &err) != 0 && strstr(err.msg, "the source failed at 1"));
    CHECK(trainer_steps_done(t) == 0);
    /* a NaN weight: the loss is not finite, and nothing is updated */
    s.fail_at = -1;
    float nan = NAN;
    const BertParamInfo *w = bert_find_param(m, "bert.embeddings.word_embeddings.weight");
    for (int id = 0; id < SYNTHETIC_TOPIC_VOCAB; id++) memcpy(w->data + (size_t)id * w->shape[1], &nan, sizeof nan);
    bert_params_changed(m);
    CHECK(trainer_step(t, &h, &st, &err) != 0 && strstr(err.msg, "not finite") && trainer_steps_done(t) == 0);
    TrainerOptions bad = adamw(0);
    Trainer *none = NULL;
    CHECK(trainer_create(&none, m, &bad, &err) != 0 && none == NULL);
    trainer_free(t);
    bert_model_free(m);
    synthetic_batch_free(&s.data);
}

/* fp16: a scale that overflows is halved and the step skipped (no update, the count stays);
 * 64 skips in a row are an error. */
static void test_loss_scaler_skips(void) {
    BertModel *m = tiny_model(BERT_FP16);
    if (!m) return;
    Source s = {.micro_batches = 1, .fail_at = -1};
    synthetic_batch_alloc(&s.data, B, T, P);
    TrainerOptions o = adamw(1);
    o.loss_scaling = true, o.loss_scale = 1e38, o.dynamic_loss_scale = true;
    Trainer *t;
    BertError err;
    CHECK(trainer_create(&t, m, &o, &err) == 0);
    const TrainerHooks h = hooks_of(&s);
    TrainerStep st;
    const float before = bert_param_info(m, 0)->data[0];
    CHECKF(trainer_step(t, &h, &st, &err) == 0, "%s", err.msg);
    CHECK(st.skipped && !isfinite(st.grad_norm) && trainer_steps_done(t) == 0 && trainer_skipped_steps(t) == 1);
    CHECK(trainer_loss_scale(t) == 0.5e38 && bert_param_info(m, 0)->data[0] == before);
    CHECK(strstr(s.log, "u0") == NULL);   /* no update after a skip */
    int rc = 0, steps = 1;
    while (rc == 0 && steps < 100) rc = trainer_step(t, &h, &st, &err), steps++;
    CHECKF(rc != 0 && steps == LOSS_SCALER_MAX_OVERFLOWS_IN_A_ROW && strstr(err.msg, "overflowed 64 times in a row"),
           "after %d steps: %s", steps, err.msg);
    trainer_free(t);
    /* a scale that fits: the step is taken */
    o.loss_scale = 1024;
    CHECK(trainer_create(&t, m, &o, &err) == 0);
    CHECKF(trainer_step(t, &h, &st, &err) == 0 && !st.skipped && trainer_steps_done(t) == 1, "%s", err.msg);
    trainer_free(t);
    bert_model_free(m);
    synthetic_batch_free(&s.data);
}

/* The trainer refreshes the model's 16-bit weight copies after each update: after a step, a
 * bf16 forward gives what a model loaded fresh with the new fp32 weights gives. */
static void test_weight_copies_follow_updates(void) {
    BertModel *m = tiny_model(BERT_BF16_EMULATED), *fresh = tiny_model(BERT_BF16_EMULATED);
    if (!m || !fresh) return;
    Source s = {.micro_batches = 1, .fail_at = -1};
    synthetic_batch_alloc(&s.data, B, T, P);
    Trainer *t;
    BertError err;
    TrainerOptions o = adamw(1);
    o.schedule = (Schedule){.kind = SCHEDULE_CONSTANT, .base_lr = 1e-2};
    CHECK(trainer_create(&t, m, &o, &err) == 0);
    const TrainerHooks h = hooks_of(&s);
    TrainerStep st;
    for (int step = 0; step < 2; step++) CHECKF(trainer_step(t, &h, &st, &err) == 0, "%s", err.msg);
    /* (bert_params would mark m's copies stale itself: read m's weights through the table) */
    memcpy(bert_params(fresh), bert_param_info(m, 0)->data, sizeof(float) * bert_num_parameters(m));
    bert_params_changed(fresh);
    synthetic_batch_topics(&s.data, 11, 0);
    const float after = bert_forward(m, &s.data.train, false, 0), expect = bert_forward(fresh, &s.data.train, false, 0);
    CHECKF(after == expect, "loss %.9g after the steps, %.9g from the same weights loaded fresh", after, expect);
    trainer_free(t);
    bert_model_free(m), bert_model_free(fresh);
    synthetic_batch_free(&s.data);
}

int main(void) {
    RUN_TEST(test_hooks_in_order);
    RUN_TEST(test_short_step_divides_by_the_count);
    RUN_TEST(test_errors);
    RUN_TEST(test_loss_scaler_skips);
    RUN_TEST(test_weight_copies_follow_updates);
    return test_summary();
}
