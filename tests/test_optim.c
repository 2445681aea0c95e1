/* The optimizers (src/optim/optimizer.h) against float64 PyTorch references written from
 * apex's FusedLAMB and torch.optim.AdamW (tools/make_optim_fixtures.py): 10 steps with
 * clipping on some of them, both weight-decay groups, and an all-zero weight matrix.
 * Tolerance: float32 arithmetic against float64 over 10 steps of O(1) element-wise work
 * (each step a few roundings, u = 6e-8, amplified by the division by sqrt(v) + eps and
 * the trust ratio's norms) stays near 1e-6 relative; the bound is the 1e-5. Also:
 * state saved, loaded into a new optimizer and continued equals the uninterrupted run bit
 * for bit, and norms do not depend on the thread count. */
#include "test.h"

#include <omp.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"

#include <cjson/cJSON.h>
#include "test_util.h"

enum { STEPS = 10, NT = 5 };
static const char *NAMES[NT] = {"layer.weight", "layer.bias", "LayerNorm.weight", "out.weight", "zero.weight"};
static const int64_t SHAPES[NT][2] = {{6, 5}, {6, 0}, {5, 0}, {4, 6}, {3, 3}};

typedef struct {
    BertParamInfo t[NT];
    float *data, *grad;
} Tensors;

static size_t numel_of(int i) { return (size_t)SHAPES[i][0] * (SHAPES[i][1] ? (size_t)SHAPES[i][1] : 1); }

static void tensors_init(Tensors *x, const SafeTensors *st) {
    size_t total = 0;
    for (int i = 0; i < NT; i++) total += numel_of(i);
    x->data = calloc(total, sizeof(float)), x->grad = calloc(total, sizeof(float));
    size_t off = 0;
    for (int i = 0; i < NT; i++) {
        BertParamInfo *t = &x->t[i];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", NAMES[i]);
        t->ndim = SHAPES[i][1] ? 2 : 1, t->shape[0] = SHAPES[i][0], t->shape[1] = SHAPES[i][1];
        t->numel = numel_of(i), t->offset = off, t->data = x->data + off, t->grad = x->grad + off;
        t->decay = !strstr(NAMES[i], "bias") && !strstr(NAMES[i], "LayerNorm");
        off += t->numel;
        char name[128];
        BertError err;
        snprintf(name, sizeof name, "param.%s", NAMES[i]);
        CHECKF(safetensors_read_f32(st, name, t->shape, t->ndim, t->data, &err) == 0, "%s", err.msg);
    }
}

static void load_grads(Tensors *x, const SafeTensors *st, int step) {
    for (int i = 0; i < NT; i++) {
        char name[128];
        BertError err;
        snprintf(name, sizeof name, "grad.%d.%s", step, NAMES[i]);
        CHECKF(safetensors_read_f32(st, name, x->t[i].shape, x->t[i].ndim, x->t[i].grad, &err) == 0, "%s", err.msg);
    }
}

static double lr_of(const SafeTensors *st, int step) {
    const StTensor *t = safetensors_find(st, "lr");
    double lr;
    memcpy(&lr, st->data + t->begin + sizeof(double) * (size_t)step, sizeof lr);
    return lr;
}

static void run_against_reference(OptimizerKind kind, const char *prefix) {
    SafeTensors st;
    BertError err;
    if (safetensors_open(&st, "tests/data/optim/optimizers.safetensors", &err)) { CHECKF(0, "%s", err.msg); return; }
    Tensors x;
    tensors_init(&x, &st);
    OptimizerConfig c = optimizer_defaults(kind);
    Optimizer *o;
    CHECK(optimizer_create(&o, &c, x.t, NT, &err) == 0);
    int clipped = 0;
    for (int s = 0; s < STEPS; s++) {
        load_grads(&x, &st, s);
        clipped += optimizer_step(o, lr_of(&st, s)) > 1.0;
    }
    CHECKF(clipped == 4, "%d steps had a gradient norm above 1 (the fixture clips 4)", clipped);
    CHECK(optimizer_step_count(o) == STEPS);
    double worst = 0;
    for (int i = 0; i < NT; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s.%s", prefix, NAMES[i]);
        const StTensor *ref = safetensors_find(&st, name);
        double scale = 0;
        for (size_t k = 0; k < x.t[i].numel; k++) {
            double r;
            memcpy(&r, st.data + ref->begin + sizeof(double) * k, sizeof r);
            scale = fmax(scale, fabs(r));
        }
        for (size_t k = 0; k < x.t[i].numel; k++) {
            double r;
            memcpy(&r, st.data + ref->begin + sizeof(double) * k, sizeof r);
            /* per element, against max(|ref|, 1e-2 of the tensor's largest |ref|) */
            worst = fmax(worst, fabs(x.t[i].data[k] - r) / fmax(fabs(r), 1e-2 * scale + 1e-30));
        }
    }
    printf("    %s: 10 steps, worst rel err %.2g against the float64 reference\n", prefix, worst);
    CHECKF(worst <= 1e-5, "%s: rel err %.3g", prefix, worst);
    optimizer_free(o);
    free(x.data), free(x.grad);
    safetensors_close(&st);
}

static void test_lamb_reference(void) { run_against_reference(OPTIMIZER_LAMB, "lamb"); }
static void test_adamw_reference(void) { run_against_reference(OPTIMIZER_ADAMW, "adamw"); }

/* 5 steps, save, load into a fresh optimizer over a copy of the weights, 5 more steps:
 * the same bits as 10 uninterrupted steps. A state file of the other kind is refused. */
static void test_save_load_continue(void) {
    for (int kind = 0; kind < 2; kind++) {
        SafeTensors st;
        BertError err;
        if (safetensors_open(&st, "tests/data/optim/optimizers.safetensors", &err)) {
            CHECKF(0, "%s", err.msg);
            return;
        }
        Tensors a, b;
        tensors_init(&a, &st), tensors_init(&b, &st);
        OptimizerConfig c = optimizer_defaults((OptimizerKind)kind);
        Optimizer *oa, *ob, *ob2;
        optimizer_create(&oa, &c, a.t, NT, &err), optimizer_create(&ob, &c, b.t, NT, &err);
        char path[64];
        snprintf(path, sizeof path, "/tmp/bert_test_optim.%d.safetensors", (int)getpid());
        for (int s = 0; s < STEPS; s++) {
            load_grads(&a, &st, s), optimizer_step(oa, lr_of(&st, s));
            if (s < STEPS / 2) load_grads(&b, &st, s), optimizer_step(ob, lr_of(&st, s));
        }
        CHECKF(optimizer_save(ob, path, &err) == 0, "%s", err.msg);
        optimizer_free(ob);
        optimizer_create(&ob2, &c, b.t, NT, &err);
        CHECKF(optimizer_load(ob2, path, &err) == 0, "%s", err.msg);
        CHECK(optimizer_step_count(ob2) == STEPS / 2);
        for (int s = STEPS / 2; s < STEPS; s++) load_grads(&b, &st, s), optimizer_step(ob2, lr_of(&st, s));
        size_t total = 0;
        for (int i = 0; i < NT; i++) total += numel_of(i);
        CHECKF(memcmp(a.data, b.data, total * sizeof(float)) == 0, "%s: resumed run differs",
               optimizer_kind_name((OptimizerKind)kind));
        OptimizerConfig other = optimizer_defaults(kind ? OPTIMIZER_LAMB : OPTIMIZER_ADAMW);
        Optimizer *wrong;
        optimizer_create(&wrong, &other, b.t, NT, &err);
        CHECK(optimizer_load(wrong, path, &err) != 0 && strstr(err.msg, path));
        optimizer_free(wrong);
        /* a state for another tensor set (one tensor fewer) is refused */
        Optimizer *fewer;
        optimizer_create(&fewer, &c, b.t, NT - 1, &err);
        CHECK(optimizer_load(fewer, path, &err) != 0);
        optimizer_free(fewer);
        unlink(path);
        optimizer_free(oa), optimizer_free(ob2);
        free(a.data), free(a.grad), free(b.data), free(b.grad);
        safetensors_close(&st);
    }
}

/* The global norm over many chunks: the same bits with 1 and 2 threads, and equal to a
 * float64 sum within its rounding. */
static void test_norm_thread_independent(void) {
    const size_t n = (size_t)5 << 16;
    float *g = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) g[i] = (float)sin((double)i) * 0.01f;
    BertParamInfo t = {.ndim = 1, .shape = {(int64_t)n}, .numel = n, .data = g, .grad = g};
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    double one = tensors_grad_norm(&t, 1);
    omp_set_num_threads(2);
    double two = tensors_grad_norm(&t, 1);
    omp_set_num_threads(saved);
    double ref = 0;
    for (size_t i = 0; i < n; i++) ref += (double)g[i] * g[i];
    CHECK(one == two);
    CHECK(fabs(one - sqrt(ref)) <= 1e-12 * sqrt(ref));
    tensors_scale_grads(&t, 1, 0.5f);
    CHECK(fabs(tensors_grad_norm(&t, 1) - 0.5 * one) <= 1e-12 * one);
    free(g);
}

static void test_bad_config(void) {
    BertError err;
    Optimizer *o;
    float w = 1, g = 1;
    BertParamInfo t = {.name = "w", .ndim = 1, .shape = {1}, .numel = 1, .data = &w, .grad = &g, .decay = true};
    OptimizerConfig c = optimizer_defaults(OPTIMIZER_LAMB);
    c.beta1 = 1.5f;
    CHECK(optimizer_create(&o, &c, &t, 1, &err) != 0 && o == NULL);
    c = optimizer_defaults(OPTIMIZER_LAMB);
    CHECK(optimizer_create(&o, &c, &t, 0, &err) != 0);
    CHECK(optimizer_kind_from_name("lamb") == OPTIMIZER_LAMB && optimizer_kind_from_name("sgd") == -1);
    CHECK(optimizer_load(NULL == o ? (optimizer_create(&o, &c, &t, 1, &err), o) : o, "/nonexistent.safetensors",
                         &err) != 0);
    optimizer_free(o);
}

/* The loss scaler against torch's GradScaler on a committed fixture
 * (tools/make_loss_scaler_fixture.py): step by step, whether the step is taken and the scale
 * after the update, through growth, backoff, skips on injected inf and NaN, and growth that
 * would leave fp32's range. */
static void test_loss_scaler_matches_gradscaler(void) {
    char *text = read_text("tests/data/optim/loss_scaler.json");
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECKF(root != NULL, "tests/data/optim/loss_scaler.json missing or not JSON");
    const cJSON *run, *step;
    int compared = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(root, "runs")) {
        LossScaler s;
        loss_scaler_init(&s, cJSON_GetObjectItem(run, "init_scale")->valuedouble, true);
        s.growth_interval = (long)cJSON_GetObjectItem(run, "growth_interval")->valuedouble;
        long skipped = 0;
        cJSON_ArrayForEach(step, cJSON_GetObjectItem(run, "steps")) {
            const bool overflow = strcmp(cJSON_GetObjectItem(step, "gradient")->valuestring, "-") != 0;
            const bool taken = loss_scaler_update(&s, overflow);
            skipped += !taken;
            const double want = cJSON_GetObjectItem(step, "scale_after")->valuedouble;
            CHECKF(taken == cJSON_IsTrue(cJSON_GetObjectItem(step, "taken")) && s.scale == want,
                   "step %d: taken %d, scale %g; GradScaler: taken %d, scale %g", compared, taken, s.scale,
                   cJSON_IsTrue(cJSON_GetObjectItem(step, "taken")), want);
            compared++;
        }
        CHECK(s.skipped_steps == skipped);
    }
    CHECKF(compared >= 20, "only %d steps compared", compared);
    /* a static scale never moves, and an overflow still skips the step */
    LossScaler fixed;
    loss_scaler_init(&fixed, 128, false);
    CHECK(!loss_scaler_update(&fixed, true) && fixed.scale == 128 && fixed.skipped_steps == 1);
    for (int i = 0; i < 5000; i++) loss_scaler_update(&fixed, false);
    CHECK(fixed.scale == 128);
    /* NVIDIA's defaults */
    LossScaler d;
    loss_scaler_init(&d, LOSS_SCALER_INIT_SCALE, true);
    CHECK(d.scale == 1048576.0 && d.growth_interval == 2000 && d.growth_factor == 2 && d.backoff_factor == 0.5);
    cJSON_Delete(root);
    free(text);
}

int main(void) {
    RUN_TEST(test_lamb_reference);
    RUN_TEST(test_adamw_reference);
    RUN_TEST(test_save_load_continue);
    RUN_TEST(test_norm_thread_independent);
    RUN_TEST(test_bad_config);
    RUN_TEST(test_loss_scaler_matches_gradscaler);
    return test_summary();
}
