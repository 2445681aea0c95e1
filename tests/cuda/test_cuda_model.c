/* The whole model on the CUDA backend against the CPU backend: the same weights (the
 * initialisation kernels are bit-identical, test_cuda_optim), the same batch (padding, a hole
 * in one attention mask, MLM + NSP labels) and dropout masks, then one forward and backward on
 * each, through the dispatch (kernels/backend.h) as `bert --device cuda` runs it. Compared: the
 * loss, the NSP logits and every parameter tensor's gradient.
 *
 * Tolerances, from the arithmetic: the two backends sum the products' K terms (K <= 4H = 1024
 * here) in different orders, each within K u sum|terms| of the exact sum (u = 2^-24 in fp32);
 * through the layers these relative errors add, not multiply, so an fp32 gradient tensor stays
 * well within 1e-3 of the CPU's in relative norm (K u = 6e-5 per product, a few dozen products
 * deep). In bf16 (the CPU's reference: the same rounding of operands in fp32 arithmetic,
 * BERT_BF16_EMULATED), a last-bit difference before a rounding to bf16 flips that operand by
 * 2^-8 relative, so the bound is 2^-8 times the depth's few dozen: 5e-2 in relative norm.
 * These bounds are bert-mini's 4 layers; the relative errors add layer by layer, so a deeper
 * model's bound grows with its depth (bert-base's 12: three times).
 *
 * Then one LAMB step (optim/optimizer.h, as the trainer takes it: the multi-tensor norm and
 * update kernels) on each backend from the same gradients (the CPU's, uploaded to the GPU's
 * model): the optimizer's kernels do the CPU's float operations in the CPU's order, so the
 * gradient norm and every updated weight are the same bits. After it, an inference forward of
 * the updated model (its 16-bit copies remade in one call) equals a fresh model's given the
 * updated weights bit for bit, and the CPU's within the forward's bound. */
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_test.h"

#include "kernels/backend.h"
#include "model/bert.h"
#include "model/config.h"
#include "optim/optimizer.h"

enum { B = 4, T = 64, P = 10 };

typedef struct {
    int32_t ids[B * T], types[B * T], mask[B * T], positions[B * P], labels[B * P], nsp[B];
} Batch;

static void make_batch(Batch *x, int vocab) {
    static const int lengths[B] = {64, 50, 33, 20};
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const int k = b * T + t;
            x->ids[k] = t < lengths[b] ? 1000 + (int32_t)(rng_bits32(7, (uint32_t)k) % (uint32_t)(vocab - 1000)) : 0;
            x->types[k] = t < lengths[b] && t >= lengths[b] / 2;
            x->mask[k] = t < lengths[b] && !(b == 2 && t == 10);   /* a hole before the last real token */
        }
        for (int p = 0; p < P; p++) {
            x->positions[b * P + p] = 1 + p * (lengths[b] - 2) / P;
            x->labels[b * P + p] = p == P - 1 && b == 1 ? -1 : 1000 + (int32_t)(rng_bits32(8, (uint32_t)(b * P + p)) % 20000);
        }
        x->nsp[b] = b & 1;
    }
}

typedef struct {
    float loss, nsp[B * 2];
    float *grads;   /* host copy, bert_num_parameters floats */
} Result;

static bool run(const char *preset, const char *device, BertPrecision precision, const Batch *x, Result *r,
                BertModel **kept) {
    char why[512];
    if (!k_backend_use(device, why, sizeof why)) { printf("    %s\n", why); return false; }
    BertConfig cfg;
    BertError err;
    BertModel *m = NULL;
    if (bert_config_preset(preset, &cfg, &err) != 0 || bert_model_create(&m, &cfg, B, T, P, &err) != 0) {
        printf("    %s\n", err.msg);
        return false;
    }
    bert_init_weights(m, 42);
    if (bert_set_precision(m, precision, &err) != 0) { printf("    %s\n", err.msg); return false; }
    const BertBatch b = bert_pretraining_batch(B, T, P, x->ids, x->types, x->mask, x->positions, x->labels, x->nsp);
    bert_zero_grad(m);
    r->loss = bert_forward(m, &b, true, rng_key(5, 1));
    bert_read_nsp_logits(m, r->nsp);
    if (bert_backward(m, &b) != 0) { printf("    backward: %s\n", bert_last_error(m)); return false; }
    const size_t n = bert_num_parameters(m);
    r->grads = malloc(sizeof(float) * n);
    k_download(r->grads, bert_grads(m), sizeof(float) * n);
    *kept = m;
    return true;
}

/* Every gradient tensor within rel (the norm of the difference over the tensor's norm); the
 * worst named. A tensor whose exact gradient is zero (the key bias: softmax ignores a shift of
 * every score) holds only rounding noise, so its norm is floored at 1e-3 of the whole
 * gradient's. */
static bool gradients_close(const BertModel *m, const float *want, const float *got, double rel) {
    double worst = 0, total = 0;
    const char *worst_name = "";
    for (size_t k = 0; k < bert_num_parameters(m); k++) total += (double)want[k] * want[k];
    for (int i = 0; i < bert_num_param_tensors(m); i++) {
        const BertParamInfo *p = bert_param_info(m, i);
        double diff = 0, norm = 0;
        for (size_t k = p->offset; k < p->offset + p->numel; k++) {
            diff += ((double)got[k] - want[k]) * ((double)got[k] - want[k]);
            norm += (double)want[k] * want[k];
        }
        const double floor = 1e-3 * sqrt(total), e = sqrt(diff) / fmax(sqrt(norm), floor);
        if (!(e <= worst)) worst = e, worst_name = p->name;
    }
    printf("    worst gradient tensor %s: relative difference %.3g (bound %.3g)\n", worst_name, worst, rel);
    return worst <= rel;
}

/* One LAMB step (lr 1e-3) on the model from grads (host floats): the gradient norm it returns
 * and the updated weights (host copy). */
static float *lamb_step(BertModel *m, const float *grads, double *grad_norm) {
    const size_t n = bert_num_parameters(m);
    k_upload(bert_grads(m), grads, sizeof(float) * n);
    Optimizer *o = NULL;
    BertError err;
    const OptimizerConfig oc = optimizer_defaults(OPTIMIZER_LAMB);
    if (optimizer_create(&o, &oc, bert_param_info(m, 0), bert_num_param_tensors(m), &err) != 0) {
        printf("    %s\n", err.msg);
        return NULL;
    }
    *grad_norm = optimizer_step(o, 1e-3);
    float *w = malloc(sizeof(float) * n);
    k_download(w, bert_params(m), sizeof(float) * n);
    optimizer_free(o);
    return w;
}

/* After an update the weights' 16-bit copies are remade (bert_refresh_weights: on the GPU the
 * tensors a product has read, in one k_to_half_each launch) before the next forward reads them:
 * the updated model m's inference forward against a fresh model given the same weights w (its
 * copies made as the products first read them, a launch each), bit for bit on one backend (the
 * same kernels on the same operands, the same layout and alignments, so the same plans). A copy
 * left stale, or one made from other bytes, moves the loss. Returns the loss, NAN on failure. */
static float forward_after_update(const char *preset, BertPrecision precision, BertModel *m, const float *w,
                                  const Batch *x) {
    const BertBatch b = bert_pretraining_batch(B, T, P, x->ids, x->types, x->mask, x->positions, x->labels, x->nsp);
    bert_params_changed(m);
    const float updated = bert_forward(m, &b, false, rng_key(6, 1));
    float nsp_updated[B * 2], nsp_fresh[B * 2];
    bert_read_nsp_logits(m, nsp_updated);
    BertConfig cfg;
    BertError err;
    BertModel *fresh = NULL;
    if (bert_config_preset(preset, &cfg, &err) != 0 || bert_model_create(&fresh, &cfg, B, T, P, &err) != 0 ||
        bert_set_precision(fresh, precision, &err) != 0) {
        printf("    %s\n", err.msg);
        bert_model_free(fresh);
        return NAN;
    }
    k_upload(bert_params(fresh), w, sizeof(float) * bert_num_parameters(fresh));
    bert_params_changed(fresh);
    const float again = bert_forward(fresh, &b, false, rng_key(6, 1));
    bert_read_nsp_logits(fresh, nsp_fresh);
    bert_model_free(fresh);
    printf("    after the step: the updated model's loss %.9g, a fresh model with its weights %.9g\n", updated, again);
    const bool same = memcmp(&updated, &again, sizeof updated) == 0 && !memcmp(nsp_updated, nsp_fresh, sizeof nsp_fresh);
    CHECKF(same, "%s %s: the forward after an update differs from a fresh model's with the same weights", preset,
           bert_precision_name(precision));
    return same ? updated : NAN;
}

/* The models' bytes: the same layout on both backends (the CPU's reference precisions pack no
 * weights, nor does the GPU), but for each layer's attention state, which the model takes as the
 * backend in use says (k_attention_state_floats): the CPU's B A T T probabilities, the GPU's
 * the same or, on its fused path, 2 B A T floats. Called with the CUDA backend in use. */
static bool state_bytes_as_said(const BertModel *mc, const BertModel *mg, const BertConfig *cfg, bool half) {
    const AttentionArgs shape = {.B = B, .T = T, .A = cfg->num_attention_heads,
                                 .d = cfg->hidden_size / cfg->num_attention_heads, .half = half};
    const size_t kept = (size_t)B * shape.A * T * T, gpu = k_attention_state_floats(&shape);
    const size_t per_layer = (kept * sizeof(float) + 63) / 64 * 64 - (gpu * sizeof(float) + 63) / 64 * 64;
    const size_t want = (size_t)cfg->num_hidden_layers * per_layer;
    const size_t got = bert_model_bytes(mc) - bert_model_bytes(mg);
    printf("    attention state a layer: cpu %zu floats, cuda %zu (%s); the models' bytes differ by %zu (want %zu)\n",
           kept, gpu, k_attention_keeps_probs(&shape) ? "probabilities" : "its own", got, want);
    return bert_model_bytes(mc) >= bert_model_bytes(mg) && got == want;
}

static void compare(const char *preset, BertPrecision cpu_precision, BertPrecision gpu_precision, double rel4) {
    Batch x;
    make_batch(&x, 30522);
    Result cpu, gpu;
    BertModel *mc = NULL, *mg = NULL;
    BertConfig cfg;
    BertError err;
    CHECK(bert_config_preset(preset, &cfg, &err) == 0);
    const double rel = rel4 * fmax(1.0, cfg.num_hidden_layers / 4.0);
    CHECK(run(preset, "cpu", cpu_precision, &x, &cpu, &mc));
    if (!mc) return;
    CHECK(run(preset, "cuda", gpu_precision, &x, &gpu, &mg));
    if (mg) {
        printf("    %s: loss: cpu %.7f cuda %.7f\n", preset, cpu.loss, gpu.loss);
        CHECKF(fabs(cpu.loss - gpu.loss) <= rel * fabs(cpu.loss), "loss %.7g vs %.7g", cpu.loss, gpu.loss);
        CHECK(cuda_close("NSP logits", cpu.nsp, gpu.nsp, B * 2, rel, rel));
        CHECK(gradients_close(mg, cpu.grads, gpu.grads, rel));
        CHECK(state_bytes_as_said(mc, mg, &cfg, gpu_precision != BERT_FP32));
        /* the optimizer step from the CPU's gradients on both backends (the GPU's model first:
         * the backend in use is the CUDA one until switched back) */
        double norm_gpu = 0, norm_cpu = -1;
        float *w_gpu = lamb_step(mg, cpu.grads, &norm_gpu);
        const float after_gpu = w_gpu ? forward_after_update(preset, gpu_precision, mg, w_gpu, &x) : NAN;
        bert_model_free(mg);
        free(gpu.grads);
        k_backend_use("cpu", NULL, 0);
        float *w_cpu = lamb_step(mc, cpu.grads, &norm_cpu);
        CHECKF(w_gpu && w_cpu && norm_cpu == norm_gpu, "LAMB's gradient norm: cpu %.17g cuda %.17g", norm_cpu,
               norm_gpu);
        if (w_gpu && w_cpu) {
            CHECKF(cuda_same("weights after a LAMB step", w_cpu, w_gpu, sizeof(float) * bert_num_parameters(mc)),
                   "%s: one LAMB step from the same gradients differs", preset);
            /* and the CPU's forward after its step: the loss within the forward's bound */
            const BertBatch b = bert_pretraining_batch(B, T, P, x.ids, x.types, x.mask, x.positions, x.labels, x.nsp);
            bert_params_changed(mc);
            const float after_cpu = bert_forward(mc, &b, false, rng_key(6, 1));
            printf("    loss after the step: cpu %.7f cuda %.7f\n", after_cpu, after_gpu);
            CHECKF(fabs(after_cpu - after_gpu) <= rel * fabs(after_cpu), "loss after the step %.7g vs %.7g",
                   after_cpu, after_gpu);
        }
        free(w_gpu), free(w_cpu);
    }
    k_backend_use("cpu", NULL, 0);
    bert_model_free(mc);
    free(cpu.grads);
}

static void test_fp32(void) { compare("bert-mini", BERT_FP32, BERT_FP32, 1e-3); }
static void test_bf16(void) { compare("bert-mini", BERT_BF16_EMULATED, BERT_BF16, 5e-2); }
static void test_tiny_fp32(void) { compare("bert-tiny", BERT_FP32, BERT_FP32, 1e-3); }
static void test_base_fp32(void) { compare("bert-base", BERT_FP32, BERT_FP32, 1e-3); }
static void test_base_bf16(void) { compare("bert-base", BERT_BF16_EMULATED, BERT_BF16, 5e-2); }

/* The child of test_out_of_memory (this binary run again with --alloc-beyond, a process of its
 * own: CUDA's state does not survive a fork): 2^60 bytes asked of the device; returns 0 only if
 * it got them. */
static int alloc_beyond(void) {
    char why[512];
    if (!k_backend_use("cuda", why, sizeof why)) { printf("%s\n", why); return 2; }
    void *p = k_alloc((size_t)1 << 60);
    printf("k_alloc gave 2^60 bytes at %p\n", p);
    return 0;
}

/* Memory the device cannot give: a model needing more than k_memory_bytes (400,000 bert-tiny
 * layers, 0.6 TB of parameters and gradients) refused at creation with the figure; an
 * allocation past it ends the process with what was asked and what is free, not only CUDA's
 * error name. */
static void test_out_of_memory(void) {
    char why[512], self[4096], cmd[8300], out[2048] = "";
    if (!k_backend_use("cuda", why, sizeof why)) { printf("    %s\n", why); CHECK(false); return; }
    const size_t memory = k_memory_bytes();
    BertConfig c;
    BertError err;
    BertModel *m = NULL;
    CHECK(bert_config_preset("bert-tiny", &c, &err) == 0);
    c.num_hidden_layers = 400000;
    const bool refused = bert_model_create(&m, &c, 1, 8, 1, &err) == -1 && m == NULL;
    printf("    device memory %.1f GiB; the model: %s\n", memory / 1073741824.0, refused ? err.msg : "made");
    CHECK(memory > 0 && refused && strstr(err.msg, "more than the") != NULL);
    bert_model_free(m);
    k_backend_use("cpu", NULL, 0);

    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    if (n <= 0) return;
    self[n] = 0;
    snprintf(cmd, sizeof cmd, "'%s' '%s' --alloc-beyond 2>&1", self, getenv("BERT_CUDA_LIB"));
    FILE *child = popen(cmd, "r");
    CHECK(child != NULL);
    if (!child) return;
    const size_t got = fread(out, 1, sizeof out - 1, child);
    out[got] = 0;
    const int status = pclose(child);
    printf("    2^60 bytes asked: exit %d, \"%.*s\"\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           (int)strcspn(out, "\n"), out);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CHECKF(strstr(out, "out of memory") && strstr(out, "GiB asked") && strstr(out, "free of"), "message: %s", out);
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[2], "--alloc-beyond")) {
        setenv("BERT_CUDA_LIB", argv[1], 1);
        return alloc_beyond();
    }
    if (!cuda_open(argc, argv)) return test_summary();
    setenv("BERT_CUDA_LIB", argc > 1 ? argv[1] : "build-cuda/libbert_cuda.so", 0);
    RUN_TEST(test_out_of_memory);
    RUN_TEST(test_fp32);
    RUN_TEST(test_bf16);
    RUN_TEST(test_tiny_fp32);
    RUN_TEST(test_base_fp32);
    RUN_TEST(test_base_bf16);
    return test_summary();
}
