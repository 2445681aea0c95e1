/* `bert bench`: training-step and inference throughput of a model configuration on
 * synthetic inputs, with achieved GFLOP/s next to the machine's measured sgemm peak (the
 * measurement is train/model_bench.h; the peaks bench/sgemm_peak.h).
 * bench/run_model_bench.sh runs it beside the PyTorch peer (bench/bench_pytorch.py), which
 * uses the same shapes and the same FLOP formula (bert_train_flops, src/model/bert.c). */
#include <cblas.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench/device_peak.h"
#include "bench/sgemm_peak.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/cpu/sgemm.h"
#include "train/model_bench.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/common.h"
#include "model/config.h"
#include "model/bert.h"

typedef struct {
    const char *preset, *config, *mode, *optimizer;
    int batch, seq, preds, steps, warmup, infer_steps, threads;
    double pad_fraction, sgemm_peak, lr;
    long long seed;
    const char *device;
    bool kernel_profile;
    bool json, full_last_layer, all_rows, bf16, bf16_emulate, fp16, int8, gemm_shapes, plain_weights, unfused, tf32;
} BenchOptions;

typedef struct {
    const char *name;
    BertConfig cfg;
    SgemmPeak peak;
    bool measured_peak;
    bool gpu;   /* --device cuda: the CPU's peaks are not measured; the device's products' peak is
                 * (device_peak), unless --sgemm_peak gives one */
    DeviceGemmPeak device_peak;
    BertPrecision precision;
    Bf16GemmPeak bf16_peak;   /* measured with --bf16 */
    Int8GemmPeak int8_peak;   /* measured with --int8 */
    ModelBenchResult run;
    ModelBenchRates train, infer;   /* against the reference peak below */
} BenchReport;

/* Against the peak of the arithmetic the products ran in: bf16's with --bf16, int8's (GOP/s)
 * with --int8, else fp32's. */
static double reference_peak(const BenchReport *r) {
    if (r->precision == BERT_INT8) return r->int8_peak.peak_gops;
    return r->precision == BERT_BF16 && !r->gpu ? r->bf16_peak.peak_gflops : r->peak.peak_gflops;
}
static const char *reference_peak_name(const BenchReport *r) {
    return r->precision == BERT_BF16 ? "bf16 GEMM peak" : r->precision == BERT_INT8 ? "int8 GEMM peak" : "sgemm peak";
}

/* The "rows" line: what the training step skipped against the formula, naming only the
 * savings that applied (--all_rows turns unpadding and pruning off, --full_last_layer pruning). */
static void print_skipped_rows(const BenchReport *r, const BenchOptions *o) {
    const ModelBenchTiming *t = &r->run.train;
    const int all_rows = o->batch * o->seq;
    printf("rows     ");
    if (t->encoder_rows < all_rows) printf(" the encoder ran on %d of %d rows (unpadding),", t->encoder_rows, all_rows);
    if (t->last_layer_rows < t->encoder_rows)
        printf(" the last layer after attention on %d of them (pruning),", t->last_layer_rows);
    if (r->run.real_tokens < all_rows) printf(" attention skipped padded keys,");
    printf(" a step executes %.2f of the formula's %.2f GFLOP/seq (%.1f%% fewer); in the formula's FLOPs that is "
           "%.1f GFLOP/s\n", r->train.gflop_per_seq, r->train.formula_gflop_per_seq, r->train.percent_fewer,
           r->train.formula_gflops);
}

/* The build's GEMM library and kernel, and the OpenBLAS the sgemm peak also times. */
static void describe_gemm(char *out, size_t n) {
    char ours[256], openblas[256];
    sgemm_describe(ours, sizeof ours), sgemm_peak_openblas_describe(openblas, sizeof openblas);
    if (strcmp(sgemm_library(), "openblas") == 0) snprintf(out, n, "%s", ours);
    else snprintf(out, n, "%s; the peak also times %s", ours, openblas);
}

/* The int8 products alone in the timed inference batches (k_int8_product_counters): their
 * rate, ops over their thread time divided by the threads, and their own wall-equivalent time
 * per batch; 0 where nothing was counted. */
static double int8_products_gops(const BenchReport *r, int threads, double *ms_per_batch) {
    const ModelBenchTiming *t = &r->run.infer;
    const double wall = t->int8_product_thread_s / (threads > 0 ? threads : 1);
    if (ms_per_batch) *ms_per_batch = t->steps ? 1e3 * wall / t->steps : 0;
    return wall > 0 ? t->int8_product_ops / wall * 1e-9 : 0;
}

static void print_text(const BenchReport *r, const BenchOptions *o) {
    const BertConfig *c = &r->cfg;
    int B = o->batch;
    printf("model     %s: L%d H%d A%d I%d vocab %d, %.2fM parameters\n", r->name, c->num_hidden_layers,
           c->hidden_size, c->num_attention_heads, c->intermediate_size, c->vocab_size, r->run.params / 1e6);
    printf("shapes    batch %d, seq %d, %d masked slots per sequence, %.1f%% real tokens, %d threads\n", B,
           o->seq, o->preds, 100.0 * r->run.real_tokens / ((double)B * o->seq), o->threads);
    if (r->gpu) {
        char device[256];
        k_backend_describe(device, sizeof device);
        printf("device    %s\n", device);
        const DeviceGemmPeak *d = &r->device_peak;
        if (d->nshapes) {
            printf("gemm      peak %.1f GFLOP/s (%s products measured now through the backend; best of", d->peak_gflops,
                   bert_precision_name(r->precision));
            for (int i = 0; i < d->nshapes; i++)
                printf("%s %dx%dx%d %.1f", i ? "," : "", d->shapes[i].m, d->shapes[i].n, d->shapes[i].k,
                       d->shapes[i].best_gflops);
            printf("): the percentages are of it\n");
        } else {
            printf("gemm      peak %.1f GFLOP/s (given by --sgemm_peak): the percentages are of it\n", r->peak.peak_gflops);
        }
    } else if (r->measured_peak) {
        printf("sgemm     peak %.1f GFLOP/s (measured now with %s; best of 4096x768x768, x3072x768, x768x3072:",
               r->peak.peak_gflops, r->peak.peak_lib);
        for (int lib = 0; lib < r->peak.nlibs; lib++)
            printf("%s %s %.1f/%.1f/%.1f", lib ? ";" : "", r->peak.libs[lib], r->peak.shapes[lib][0].best_gflops,
                   r->peak.shapes[lib][1].best_gflops, r->peak.shapes[lib][2].best_gflops);
        printf(")\n");
    } else {
        printf("sgemm     peak %.1f GFLOP/s (given by --sgemm_peak)\n", r->peak.peak_gflops);
    }
    char kernel[600], env[1024];
    describe_gemm(kernel, sizeof kernel), compute_environment(env, sizeof env);
    if (r->gpu) {
        printf("precision %s (cuBLAS with fp32 accumulation; fp32 products: %s)\n", bert_precision_name(r->precision),
               o->tf32 ? "TF32 (--tf32)" : "true fp32, no TF32");
    } else if (r->precision == BERT_FP32) {
        printf("gemm      the model's products run in %s: %s; inference with packed weights: %s\n", sgemm_library(),
               kernel, o->plain_weights ? "no" : "yes (oneDNN matmul)");
    } else if (r->precision == BERT_INT8) {
        char int8_kernel[256];
        k_int8_describe(int8_kernel, sizeof int8_kernel);
        const Int8GemmPeak *p = &r->int8_peak;
        printf("precision int8: the encoder's and pooler's linear layers on int8 weights (per channel) and inputs "
               "(per row, quantized by the kernel before), int32 sums (%s); attention's products in %s; LayerNorm, "
               "softmax, the heads in fp32 (%s)\n", int8_kernel, k_bf16_native_available() ? "bf16" : "fp32 (no bf16 "
               "instructions here)", kernel);
        printf("int8 gemm peak %.1f GOP/s (measured now; best of 4096x768x768, x3072x768, x768x3072: %.1f/%.1f/%.1f); "
               "vpdpbusd instruction peak %.1f GOP/s (%s)", p->peak_gops, p->shapes[0].best_gflops,
               p->shapes[1].best_gflops, p->shapes[2].best_gflops, p->vpdpbusd_gops, p->vpdpbusd_isa);
        if (p->amx_gops > 0) printf("; AMX tdpbssd instruction peak %.1f GOP/s", p->amx_gops);
        printf("\n");
        if (p->in_cache_peak_gops > 0)
            printf("int8 gemm peak, output in cache %.1f GOP/s (the same shapes as the model runs them, sums kept in "
                   "cache for the epilogue, the products' own time: %.1f/%.1f/%.1f)\n", p->in_cache_peak_gops,
                   p->in_cache_gops[0], p->in_cache_gops[1], p->in_cache_gops[2]);
    } else {
        char bf16_kernel[256];
        k_bf16_describe(bf16_kernel, sizeof bf16_kernel);
        if (r->precision == BERT_FP16)
            printf("precision fp16: every product's operands (linear layers and attention) in fp16, widened to fp32 "
                   "for the products (%s); everything else in fp32\n", kernel);
        else
            printf("precision %s: the linear layers' and attention's products in bf16 with fp32 accumulation (%s; "
                   "weights packed: %s); everything else in fp32 (%s)\n", bert_precision_name(r->precision),
                   bf16_kernel, o->plain_weights ? "no" : "yes", kernel);
        if (r->precision == BERT_BF16 && !r->gpu)
            printf("bf16 gemm peak %.1f GFLOP/s (measured now; best of 4096x768x768, x3072x768, x768x3072: "
                   "%.1f/%.1f/%.1f)\n", r->bf16_peak.peak_gflops, r->bf16_peak.shapes[0].best_gflops,
                   r->bf16_peak.shapes[1].best_gflops, r->bf16_peak.shapes[2].best_gflops);
    }
    printf("env       %s\n", env);
    if (r->run.train.steps) {
        const ModelBenchTiming *t = &r->run.train;
        const ModelBenchRates *g = &r->train;   /* what the machine did: the rows that ran */
        if (t->executed_flops < r->run.train_flops) print_skipped_rows(r, o);
        printf("train     %.2f seq/s, %.1f ms/step (best %.1f; forward %.1f, backward %.1f, %s %.1f), "
               "%.1f GFLOP/s = %.0f%% of %s, CPU %.1f ms/step [%.2f GFLOP/seq, %d steps, loss %.3f -> %.3f]\n",
               g->seq_per_s, g->ms_per_step, g->best_ms, g->forward_ms, g->backward_ms,
               optimizer_kind_from_name(o->optimizer) == OPTIMIZER_LAMB ? "LAMB" : "AdamW", g->optimizer_ms, g->gflops,
               g->percent_of_peak, reference_peak_name(r), g->cpu_ms, g->gflop_per_seq, t->steps, t->first_loss,
               t->last_loss);
    }
    if (r->run.infer.steps) {
        const ModelBenchRates *g = &r->infer;
        char amx[64] = "";
        if (r->precision == BERT_INT8 && r->int8_peak.amx_gops > 0)
            snprintf(amx, sizeof amx, " (%.0f%% of the AMX instruction's)", 100 * g->gflops / r->int8_peak.amx_gops);
        printf("inference %.2f seq/s, %.1f ms/batch (best %.1f), %.1f GFLOP/s = %.0f%% of %s%s, "
               "CPU %.1f ms/batch [%.2f GFLOP/seq, %d batches]\n", g->seq_per_s, g->ms_per_step, g->best_ms, g->gflops,
               g->percent_of_peak, reference_peak_name(r), amx, g->cpu_ms, g->gflop_per_seq, r->run.infer.steps);
        double ms = 0;
        const double gops = int8_products_gops(r, o->threads, &ms);
        if (r->precision == BERT_INT8 && gops > 0) {
            char of_amx[64] = "";
            if (r->int8_peak.amx_gops > 0)
                snprintf(of_amx, sizeof of_amx, ", %.0f%% of the AMX instruction's", 100 * gops / r->int8_peak.amx_gops);
            const Int8GemmPeak *p = &r->int8_peak;
            printf("products  int8 products alone (their epilogues apart) %.1f GOP/s = %.0f%% of int8 GEMM peak, %.0f%% "
                   "of its output-in-cache peak%s; %.1f of the %.1f ms/batch\n", gops,
                   p->peak_gops > 0 ? 100 * gops / p->peak_gops : 0,
                   p->in_cache_peak_gops > 0 ? 100 * gops / p->in_cache_peak_gops : 0, of_amx, ms, g->ms_per_step);
        }
    }
    printf("memory    peak RSS %.1f MiB (model and optimizer buffers %.1f MiB)\n", r->run.peak_rss / 1048576.0,
           r->run.model_bytes / 1048576.0);
}

/* A JSON string value: the text with quotes, backslashes and control characters escaped. */
static void print_json_string(const char *key, const char *text) {
    printf("\"%s\": \"", key);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c < 0x20) printf("\\u%04x", *c);
        else putchar(*c);
    }
    printf("\", ");
}

/* One JSON object on stdout, the format bench/run_model_bench.sh reads (bench_pytorch.py
 * writes the same keys). */
static void print_json(const BenchReport *r, const BenchOptions *o) {
    const ModelBenchTiming *tr = &r->run.train, *in = &r->run.infer;
    char kernel[600], env[1024];
    describe_gemm(kernel, sizeof kernel), compute_environment(env, sizeof env);
    printf("{\"impl\": \"bert.c\", \"preset\": \"%s\", \"batch\": %d, \"seq\": %d, \"preds\": %d, "
           "\"threads\": %d, \"params\": %zu, \"sgemm_peak_gflops\": %.2f, \"gemm_library\": \"%s\", "
           "\"pad_fraction\": %.3f, ",
           r->name, o->batch, o->seq, o->preds, o->threads, r->run.params, r->peak.peak_gflops, sgemm_library(),
           1.0 - r->run.real_tokens / ((double)o->batch * o->seq));
    print_json_string("gemm_kernel", kernel), print_json_string("environment", env);
    char bf16_kernel[256] = "";
    if (r->precision != BERT_FP32) k_bf16_describe(bf16_kernel, sizeof bf16_kernel);
    print_json_string("precision", bert_precision_name(r->precision));
    print_json_string("bf16_gemm_kernel", bf16_kernel);
    print_json_string("optimizer", o->optimizer);
    const bool packs = r->precision == BERT_INT8 ||
                       ((r->precision == BERT_BF16 || r->precision == BERT_FP32) && !o->plain_weights);
    printf("\"int8_peak_gops\": %.2f, \"vpdpbusd_peak_gops\": %.2f, \"amx_peak_gops\": %.2f, "
           "\"int8_in_cache_peak_gops\": %.2f, ", r->int8_peak.peak_gops, r->int8_peak.vpdpbusd_gops,
           r->int8_peak.amx_gops, r->int8_peak.in_cache_peak_gops);
    printf("\"bf16_peak_gflops\": %.2f, \"packed_weights\": %s, \"fused_gelu\": %s, ", r->bf16_peak.peak_gflops,
           packs ? "true" : "false", packs && !o->unfused ? "true" : "false");
    const ModelBenchRates *gt = &r->train, *gi = &r->infer;
    printf("\"train_seq_per_s\": %.4f, \"train_ms_per_step\": %.2f, \"train_gflops\": %.2f, "
           "\"train_forward_ms\": %.2f, \"train_backward_ms\": %.2f, \"train_optimizer_ms\": %.2f, "
           "\"train_cpu_ms_per_step\": %.2f, \"train_best_ms_per_step\": %.2f, ",
           gt->seq_per_s, gt->ms_per_step, gt->gflops, gt->forward_ms, gt->backward_ms, gt->optimizer_ms, gt->cpu_ms,
           gt->best_ms);
    printf("\"infer_seq_per_s\": %.4f, \"infer_gflops\": %.2f, \"infer_cpu_ms_per_batch\": %.2f, "
           "\"infer_best_ms_per_batch\": %.2f, ", gi->seq_per_s, gi->gflops, gi->cpu_ms, gi->best_ms);
    double products_ms = 0;
    const double products_gops = int8_products_gops(r, o->threads, &products_ms);
    printf("\"infer_int8_products_gops\": %.2f, \"infer_int8_products_ms_per_batch\": %.2f, ", products_gops,
           products_ms);
    printf("\"train_encoder_rows\": %d, \"train_last_layer_rows\": %d, \"train_formula_gflops\": %.2f, "
           "\"train_executed_gflop_per_seq\": %.4f, ", tr->encoder_rows, tr->last_layer_rows, gt->formula_gflops,
           gt->gflop_per_seq);
    printf("\"peak_rss_mib\": %.1f, \"train_gflop_per_seq\": %.4f, \"train_steps\": %d, \"infer_steps\": %d}\n",
           r->run.peak_rss / 1048576.0, gt->formula_gflop_per_seq, tr->steps, in->steps);
}

static int check_options(const BenchOptions *o, const BertConfig *cfg) {
    char bad[160] = "";
    if (o->batch < 1) snprintf(bad, sizeof bad, "--batch %d must be at least 1", o->batch);
    else if (o->seq < 8 || o->seq > cfg->max_position_embeddings)
        snprintf(bad, sizeof bad, "--seq %d must be in [8, %d] (max_position_embeddings)", o->seq,
                 cfg->max_position_embeddings);
    else if (o->preds < 0 || o->preds > o->seq - 2)
        snprintf(bad, sizeof bad, "--preds %d must be in [0, %d] (seq minus [CLS] and [SEP])", o->preds, o->seq - 2);
    else if (o->steps < 0 || o->warmup < 0 || o->infer_steps < 0 || o->steps > 1000000 || o->warmup > 1000000 ||
             o->infer_steps > 1000000)
        snprintf(bad, sizeof bad, "--steps, --infer_steps and --warmup must be in [0, 1000000]");
    else if (o->threads < 1 || o->threads > FLAGS_MAX_THREADS)
        snprintf(bad, sizeof bad, "--threads %d must be in [1, %d]", o->threads, FLAGS_MAX_THREADS);
    else if (!(o->pad_fraction >= 0 && o->pad_fraction < 0.5))
        snprintf(bad, sizeof bad, "--pad_fraction %g must be in [0, 0.5)", o->pad_fraction);
    else if (strcmp(o->mode, "train") && strcmp(o->mode, "infer") && strcmp(o->mode, "both"))
        snprintf(bad, sizeof bad, "--mode '%s' must be train, infer or both", o->mode);
    else if (optimizer_kind_from_name(o->optimizer) < 0)
        snprintf(bad, sizeof bad, "--optimizer '%s' must be adamw or lamb", o->optimizer);
    if (bad[0]) fprintf(stderr, "bert bench: %s\n", bad);
    return bad[0] ? -1 : 0;
}

static int parse_options(int argc, char **argv, BenchOptions *o) {
    *o = (BenchOptions){.preset = NULL, .config = NULL, .mode = "both", .optimizer = "adamw", .batch = 32, .seq = 128, .preds = 20,
                        .steps = 5, .warmup = 1, .infer_steps = -1, .threads = omp_get_num_procs(),
                        .pad_fraction = 0, .sgemm_peak = 0, .lr = 1e-4, .seed = 42, .json = false};
    const Flag flags[] = {
        {"preset", FLAG_STRING, &o->preset, "bert-tiny|mini|small|medium|base|large (default bert-base)"},
        {"config", FLAG_STRING, &o->config, "HuggingFace config.json instead of a preset"},
        {"batch", FLAG_INT, &o->batch, "sequences per step (default 32)"},
        {"train_batch_size", FLAG_INT, &o->batch, "same as --batch (NVIDIA's name)"},
        {"seq", FLAG_INT, &o->seq, "sequence length (default 128)"},
        {"max_seq_length", FLAG_INT, &o->seq, "same as --seq"},
        {"preds", FLAG_INT, &o->preds, "masked slots per sequence (default 20)"},
        {"max_predictions_per_seq", FLAG_INT, &o->preds, "same as --preds"},
        {"steps", FLAG_INT, &o->steps, "timed training steps (default 5)"},
        {"infer_steps", FLAG_INT, &o->infer_steps, "timed inference batches (default: --steps)"},
        {"warmup", FLAG_INT, &o->warmup, "untimed steps before each measurement (default 1)"},
        {"threads", FLAG_INT, &o->threads, "OpenMP/BLAS threads (default: all cores)"},
        {"device", FLAG_STRING, &o->device, FLAGS_DEVICE_HELP},
        {"tf32", FLAG_BOOL, &o->tf32, FLAGS_TF32_HELP},
        {"mode", FLAG_STRING, &o->mode, "train, infer or both (default both)"},
        {"pad_fraction", FLAG_DOUBLE, &o->pad_fraction, "mean fraction of padding tokens (default 0: full length)"},
        {"sgemm_peak", FLAG_DOUBLE, &o->sgemm_peak, "GFLOP/s to compare against (default: measure, ~1 s)"},
        {"optimizer", FLAG_STRING, &o->optimizer,
         "adamw (default: as the PyTorch peer, no clipping) or lamb (NVIDIA's, as bert pretrain runs it)"},
        {"learning_rate", FLAG_DOUBLE, &o->lr, "the optimizer's learning rate (default 1e-4)"},
        {"seed", FLAG_INT64, &o->seed, "seed for weights, inputs and dropout (default 42, as every command)"},
        {"full_last_layer", FLAG_BOOL, &o->full_last_layer,
         "train without last-layer pruning (by default the last layer runs only at the heads' rows after attention)"},
        {"all_rows", FLAG_BOOL, &o->all_rows,
         "train on every row: no unpadding (trailing padding skipped by default) and no last-layer pruning"},
        {"json", FLAG_BOOL, &o->json, "print one JSON object instead of the text report"},
        {"kernel_profile", FLAG_BOOL, &o->kernel_profile,
         "time every kernel of the timed training steps, or with --mode infer of the timed inference batches (each "
         "synchronised: the step times become the kernels' sum) and print the table, per step"},
        {"bf16", FLAG_BOOL, &o->bf16,
         "mixed precision: the linear layers' and attention's products in bf16 with fp32 accumulation (needs avx512_bf16)"},
        {"bf16_emulate", FLAG_BOOL, &o->bf16_emulate, "the same rounding as --bf16 in fp32 arithmetic (any CPU; slow)"},
        {"plain_weights", FLAG_BOOL, &o->plain_weights,
         "the forward reads the plain weights, not the packed copy (to measure what packing gives)"},
        {"unfused", FLAG_BOOL, &o->unfused,
         "inference: the feed-forward's product and GELU as two passes, not one (to measure what fusing gives)"},
        {"gemm_shapes", FLAG_BOOL, &o->gemm_shapes,
         "time every product shape of a training step (batch x seq rows) and stop: on the CPU bert-base's, with "
         "--bf16; with --device cuda the model's products through the backend, in any precision"},
        {"int8", FLAG_BOOL, &o->int8, "inference only (the training part is skipped): the encoder's linear layers in "
                                      "int8, weights per channel, inputs per row quantized on the fly (VNNI/AMX where "
                                      "the CPU has them); the fraction is of the measured int8 GEMM peak"},
        {"fp16", FLAG_BOOL, &o->fp16, "the products' operands in fp16 with fp32 arithmetic (no fp16 arithmetic on this "
                                      "CPU: what fp16 storage costs, not what fp16 hardware runs at)"},
    };
    const FlagSpec spec = {"bench", "bench [--preset bert-base | --config config.json] [--mode train|infer|both] [flags]"
                                    "\n  (training and inference throughput of a model on synthetic batches)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc != 0) return rc;
    if (o->preset && o->config) { fprintf(stderr, "bert bench: give --preset or --config, not both\n"); return -1; }
    if (o->bf16 + o->bf16_emulate + o->fp16 + o->int8 > 1) {
        fprintf(stderr, "bert bench: give one of --bf16, --bf16_emulate, --fp16 and --int8\n");
        return -1;
    }
    if (o->int8 && !strcmp(o->mode, "train")) {
        fprintf(stderr, "bert bench: --int8 is for inference only: give --mode infer (or both: the training part is "
                        "skipped)\n");
        return -1;
    }
    if (o->int8 && o->plain_weights) {
        fprintf(stderr, "bert bench: --plain_weights: int8 weights exist only packed\n");
        return -1;
    }
    if (o->int8) o->mode = "infer";
    if (o->infer_steps < 0) o->infer_steps = o->steps;
    if (!strcmp(o->mode, "train")) o->infer_steps = 0;
    if (!strcmp(o->mode, "infer")) o->steps = 0;
    return 0;
}

static void set_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

/* Progress on stderr (not with --json). */
typedef struct {
    const BenchReport *r;
    const BenchOptions *o;
} Progress;

static void print_started(void *ctx) {
    const BenchReport *r = ((const Progress *)ctx)->r;
    const BenchOptions *o = ((const Progress *)ctx)->o;
    fprintf(stderr, "bert bench: %s, batch %d, seq %d, preds %d, %d threads\n", r->name, o->batch, o->seq, o->preds,
            o->threads);
}

static void print_train_step(void *ctx, int step, bool timed, double seconds, double loss) {
    fprintf(stderr, "  train step %d%s: %.1f ms (loss %.4f)\n", step, timed ? "" : " (warm-up)", seconds * 1e3, loss);
}

/* --gemm_shapes on a GPU: its product peak, then every product of the model's training step
 * through the backend (bench/device_peak.h). */
static int device_products(BenchReport *r, const BenchOptions *o) {
    const int half = r->precision == BERT_FP16 ? HALF_FP16 : r->precision == BERT_FP32 ? -1 : HALF_BF16;
    const int tokens = o->batch * o->seq;
    device_gemm_peak_measure(&r->device_peak, half, tokens, 8192, 2.0);
    printf("products peak %.1f GFLOP/s (%s products on %d rows and an 8192 square, the best of them)\n",
           r->device_peak.peak_gflops, half < 0 ? "fp32" : half == HALF_FP16 ? "fp16" : "bf16", tokens);
    const DeviceProductShapes shapes = {.hidden = r->cfg.hidden_size, .intermediate = r->cfg.intermediate_size,
                                        .vocab = r->cfg.vocab_size, .layers = r->cfg.num_hidden_layers,
                                        .tokens = tokens, .predictions = o->batch * o->preds};
    DeviceProducts products;
    device_products_measure(&products, &shapes, half, 8.0);
    device_products_print(stdout, &products, r->device_peak.peak_gflops);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    BenchOptions o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (flags_use_device("bench", o.device, o.tf32) != 0) return 2;
    BenchReport r = {.name = o.config ? o.config : o.preset ? o.preset : "bert-base"};
    BertError err;
    int cfg_rc = o.config ? bert_config_load(o.config, &r.cfg, &err) : bert_config_preset(r.name, &r.cfg, &err);
    if (cfg_rc != 0) { fprintf(stderr, "bert bench: %s\n", err.msg); return 1; }
    if (check_options(&o, &r.cfg) != 0) return 2;
    set_threads(o.threads);

    r.precision = o.bf16 ? BERT_BF16 : o.bf16_emulate ? BERT_BF16_EMULATED : o.fp16 ? BERT_FP16 : o.int8 ? BERT_INT8 : BERT_FP32;
    if (o.int8 && flags_int8("bench") != 0) return 1;
    if (r.precision == BERT_BF16 && !k_bf16_native_available()) {
        fprintf(stderr, "bert bench: --bf16: this CPU has no bf16 instructions that oneDNN can use (avx512_bf16; or "
                        "ONEDNN_MAX_CPU_ISA caps them); --bf16_emulate runs the same rounding in fp32\n");
        return 1;
    }
    r.gpu = strcmp(k_backend_name(), "cpu") != 0;
    if (r.precision == BERT_BF16 && !r.gpu) bf16_gemm_peak_measure(&r.bf16_peak, 0, 1.0);
    if (r.precision == BERT_INT8) int8_gemm_peak_measure(&r.int8_peak, 0, 1.0);
    if (o.gemm_shapes && r.gpu) return device_products(&r, &o);
    if (o.gemm_shapes) {
        if (r.precision != BERT_BF16) { fprintf(stderr, "bert bench: --gemm_shapes goes with --bf16\n"); return 2; }
        printf("bf16 gemm peak %.1f GFLOP/s\n", r.bf16_peak.peak_gflops);
        bf16_gemm_shapes_report(o.batch * o.seq, o.batch * o.preds, r.bf16_peak.peak_gflops);
        return 0;
    }
    r.measured_peak = o.sgemm_peak <= 0 && !r.gpu;   /* measure before the model exists: its buffers stay out of the peak RSS */
    if (r.measured_peak) sgemm_peak_measure(&r.peak, 0, 1.0);
    else if (r.gpu && o.sgemm_peak <= 0) {   /* the GPU's own products, on the bench's rows and a big square */
        const int half = r.precision == BERT_FP16 ? HALF_FP16 : r.precision == BERT_FP32 ? -1 : HALF_BF16;
        device_gemm_peak_measure(&r.device_peak, half, o.batch * o.seq, 8192, 2.0);
        r.peak.peak_gflops = r.device_peak.peak_gflops;
    } else r.peak.peak_gflops = o.sgemm_peak;

    Progress progress = {&r, &o};
    const ModelBenchOptions mo = {
        .batch = o.batch, .seq = o.seq, .preds = o.preds, .steps = o.steps, .infer_steps = o.infer_steps,
        .warmup = o.warmup, .pad_fraction = o.pad_fraction, .learning_rate = o.lr, .seed = (uint64_t)o.seed,
        .optimizer = (OptimizerKind)optimizer_kind_from_name(o.optimizer), .precision = r.precision,
        .full_last_layer = o.full_last_layer, .all_rows = o.all_rows, .plain_weights = o.plain_weights,
        .unfused = o.unfused, .kernel_profile = o.kernel_profile, .ctx = &progress, .started = o.json ? NULL : print_started,
        .train_step = o.json ? NULL : print_train_step};
    if (model_bench_run(&r.cfg, &mo, &r.run, &err) != 0) {
        fprintf(stderr, "bert bench: %s\n", err.msg);
        return 1;
    }
    model_bench_rates(&r.run.train, r.run.train_flops, o.batch, reference_peak(&r), &r.train);
    model_bench_rates(&r.run.infer, r.run.infer_flops, o.batch, reference_peak(&r), &r.infer);
    if (o.json) print_json(&r, &o);
    else print_text(&r, &o);
    if (o.kernel_profile && !o.json) k_profile_print(stdout, o.steps ? o.steps : o.infer_steps);
    return 0;
}
