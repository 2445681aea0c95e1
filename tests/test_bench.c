/* The benchmark's arithmetic: FLOP counts (against the per-sequence figures measured in
 * /work/shared/notes/cpu-performance.md and against an explicit list of the products the
 * model runs) and the sgemm-peak probe's bookkeeping. Timings are never checked. */
#include "test.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <unistd.h>

#include "bench/device_peak.h"
#include "bench/sgemm_peak.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/kernels.h"
#include "cli/commands.h"
#include "core/common.h"
#include "model/config.h"
#include "model/bert.h"
#include "tasks/embed.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

#define MICRO_CONFIG "tests/data/bench/micro_config.json"

/* 2*M*N*K summed over every product of one forward pass, written out shape by shape as the
 * model executes them (batched linear layers, per-(sequence, head) attention). */
static double forward_flops_by_shapes(const BertConfig *c, double B, double T, double P) {
    double H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    double heads = c->num_attention_heads, d = H / heads;
    double total = 0;
#define GEMM(m, n, k, times) (total += (times) * 2.0 * (m) * (n) * (k))
    for (int l = 0; l < c->num_hidden_layers; l++) {
        GEMM(B * T, 3 * H, H, 1);           /* fused Q, K, V */
        GEMM(T, T, d, B * heads);           /* scores Q K^T */
        GEMM(T, d, T, B * heads);           /* probs V */
        GEMM(B * T, H, H, 1);               /* attention output projection */
        GEMM(B * T, I, H, 1);               /* FFN up */
        GEMM(B * T, H, I, 1);               /* FFN down */
    }
    GEMM(B, H, H, 1);                       /* pooler */
    GEMM(B, 2, H, 1);                       /* NSP classifier */
    GEMM(B * P, H, H, 1);                   /* MLM transform */
    GEMM(B * P, V, H, 1);                   /* MLM decoder (tied embeddings) */
#undef GEMM
    return total;
}

static void test_train_flops_match_published_figures(void) {
    const char *names[] = {"bert-tiny", "bert-mini", "bert-small", "bert-medium", "bert-base"};
    const double gflop_per_seq[] = {0.82, 3.56, 11.97, 22.04, 69.93};  /* cpu-performance.md, T=128 P=20 */
    for (int i = 0; i < 5; i++) {
        BertConfig c;
        BertError err;
        CHECKF(bert_config_preset(names[i], &c, &err) == 0, "%s", err.msg);
        double per_seq = bert_train_flops(&c, 32, 128, 20) / 32 * 1e-9;
        CHECKF(fabs(per_seq - gflop_per_seq[i]) <= 0.005, "%s: %.4f GFLOP/seq, published %.2f", names[i], per_seq,
               gflop_per_seq[i]);
    }
}

static void test_flops_equal_explicit_product_list(void) {
    BertConfig c;
    BertError err;
    CHECK(bert_config_preset("bert-mini", &c, &err) == 0);
    c.vocab_size = 1000, c.intermediate_size = 700;   /* odd sizes so no term hides behind another */
    const int shapes[][3] = {{1, 16, 0}, {3, 16, 3}, {5, 37, 7}, {2, 128, 20}};
    for (int i = 0; i < 4; i++) {
        int B = shapes[i][0], T = shapes[i][1], P = shapes[i][2];
        double want_train = 3 * forward_flops_by_shapes(&c, B, T, P);
        double want_infer = forward_flops_by_shapes(&c, B, T, 0);
        CHECKF(fabs(bert_train_flops(&c, B, T, P) - want_train) <= 1e-9 * want_train, "train B%d T%d P%d", B, T, P);
        CHECKF(fabs(bert_infer_flops(&c, B, T) - want_infer) <= 1e-9 * want_infer, "infer B%d T%d", B, T);
    }
}

/* bert_executed_train_flops against the products written out for one batch: lengths 16, 10
 * and 7 of T = 16 (trailing padding), a masked position past the last real token of the
 * third sequence, one unlabelled slot. Full-length and with every row it is the formula. */
static void test_executed_flops(void) {
    BertConfig c;
    BertError err;
    CHECK(bert_config_preset("bert-mini", &c, &err) == 0);
    c.vocab_size = 1000, c.intermediate_size = 700, c.num_hidden_layers = 2;
    enum { B = 3, T = 16, P = 3 };
    const int len[B] = {16, 10, 7};
    int32_t ids[B * T], types[B * T] = {0}, mask[B * T], full[B * T];
    int32_t pos[B * P] = {1, 5, 14, 2, 3, 8, 4, 9, 1}, labels[B * P] = {7, 8, 9, 10, -1, 12, 13, 14, 15};
    int32_t nsp[B] = {0, 1, 0};
    for (int i = 0; i < B * T; i++) ids[i] = 1 + i % 900, mask[i] = i % T < len[i / T], full[i] = 1;
    BertModel *m;
    if (bert_model_create(&m, &c, B, T, P, &err)) { CHECKF(0, "%s", err.msg); return; }
    bert_init_weights(m, 3);
    const double H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, after = 2 * H * H + 4 * H * I;
    const double heads = B * (2 * H * H + 4 * H) + 8 * (2 * H * H + 2 * H * V);   /* 8 labelled slots */

    BertBatch dense = bert_pretraining_batch(B, T, P, ids, types, full, pos, labels, nsp);   /* no padding, every row */
    bert_forward(m, &dense, false, 0);
    double formula = bert_train_flops(&c, B, T, P) - 3 * (2 * H * H + 2 * H * V);   /* one slot unlabelled */
    CHECKF(fabs(bert_executed_train_flops(m) - formula) <= 1e-9 * formula, "dense %.6g vs %.6g",
           bert_executed_train_flops(m), formula);

    BertBatch padded = bert_pretraining_batch(B, T, P, ids, types, mask, pos, labels, nsp);
    bert_forward(m, &padded, false, 0);   /* every row; attention skips the keys past each length */
    double want = 3 * (2 * (B * T * 2 * H * 3 * H + 4 * T * (16 + 10 + 7) * H + B * T * after) + heads);
    CHECKF(fabs(bert_executed_train_flops(m) - want) <= 1e-9 * want, "padded %.6g vs %.6g",
           bert_executed_train_flops(m), want);

    bert_set_unpadding(m, true);
    bert_set_last_layer_pruning(m, true);
    bert_forward(m, &padded, false, 0);
    /* rows 16 + 10 + 10 (the slot at position 9 of the 7-token sequence); the last layer keeps
     * 3 [CLS] rows + 8 labelled positions */
    const double rows = 36, q_keys = 16 * 16 + 10 * 10 + 10 * 7, kept = 11;
    want = 3 * (2 * (rows * 2 * H * 3 * H + 4 * q_keys * H) + rows * after + kept * after + heads);
    CHECKF(bert_encoder_rows(m) == 36 && bert_last_layer_rows(m) == 11, "rows %d, kept %d", bert_encoder_rows(m),
           bert_last_layer_rows(m));
    CHECKF(fabs(bert_executed_train_flops(m) - want) <= 1e-9 * want, "unpadded + pruned %.6g vs %.6g",
           bert_executed_train_flops(m), want);
    bert_model_free(m);
}

static void test_sgemm_peak_reports_every_shape(void) {
    SgemmPeak p;
    sgemm_peak_measure(&p, 64, 0.05);   /* small and short: bookkeeping only, not speed */
    CHECKF(p.nlibs == (strcmp(sgemm_library(), "openblas") ? 2 : 1), "%d libraries timed", p.nlibs);
    CHECK(strcmp(p.libs[0], "openblas") == 0 && strcmp(p.libs[p.nlibs - 1], sgemm_library()) == 0);
    double best = 0;
    const char *best_lib = NULL;
    for (int lib = 0; lib < p.nlibs; lib++) {
        double lib_best = 0;
        for (int i = 0; i < SGEMM_PEAK_SHAPES; i++) {
            const SgemmShapeResult *r = &p.shapes[lib][i];
            CHECKF(r->m == 64 && r->n > 0 && r->k > 0, "%s shape %d: %dx%dx%d", p.libs[lib], i, r->m, r->n, r->k);
            CHECKF(r->reps >= 3, "%s shape %d timed %d times", p.libs[lib], i, r->reps);
            CHECKF(isfinite(r->best_gflops) && r->best_gflops > 0 && r->mean_gflops <= r->best_gflops * (1 + 1e-9),
                   "%s shape %d: best %g mean %g", p.libs[lib], i, r->best_gflops, r->mean_gflops);
            if (r->best_gflops > lib_best) lib_best = r->best_gflops;
        }
        CHECKF(p.lib_peak_gflops[lib] == lib_best, "%s peak %g, best shape %g", p.libs[lib], p.lib_peak_gflops[lib],
               lib_best);
        if (lib_best > best) best = lib_best, best_lib = p.libs[lib];
    }
    CHECKF(p.peak_gflops == best, "peak %g is not the best shape %g", p.peak_gflops, best);
    CHECK(best_lib && strcmp(p.peak_lib, best_lib) == 0);
}

/* The device peak (`bert bench --device cuda`'s) runs through kernels.h on any backend: here the
 * CPU's, small and short (bookkeeping, not speed): every shape timed, in the order and sizes
 * asked, the peak the best of them, for fp32 and a 16-bit format, with and without the square. */
static void test_device_peak_reports_every_shape(void) {
    const int halves[] = {-1, HALF_BF16_EMULATED};
    for (int h = 0; h < 2; h++)
        for (int square = 0; square <= 96; square += 96) {
            DeviceGemmPeak p;
            device_gemm_peak_measure(&p, halves[h], 64, square, 0.04);
            CHECKF(p.nshapes == (square ? 4 : 3), "%d shapes", p.nshapes);
            double best = 0;
            for (int i = 0; i < p.nshapes; i++) {
                const SgemmShapeResult *r = &p.shapes[i];
                const int m = i < 3 ? 64 : square, n = i == 1 ? 3072 : i < 3 ? 768 : square,
                          k = i == 2 ? 3072 : i < 3 ? 768 : square;
                CHECKF(r->m == m && r->n == n && r->k == k, "shape %d: %dx%dx%d", i, r->m, r->n, r->k);
                CHECKF(r->reps >= 2 && isfinite(r->best_gflops) && r->best_gflops > 0 &&
                       r->mean_gflops <= r->best_gflops * (1 + 1e-9), "shape %d: %d batches, best %g mean %g", i,
                       r->reps, r->best_gflops, r->mean_gflops);
                if (r->best_gflops > best) best = r->best_gflops;
            }
            CHECKF(p.peak_gflops == best, "peak %g, best shape %g", p.peak_gflops, best);
        }
}

/* --gemm_shapes on a GPU times every product of the training step through the backend: here
 * on the CPU's, small shapes. Every product runs (ASan: the buffers hold the biggest), the
 * step's products are the model's (6 N C OC FLOPs each: forward and both gradients), and the
 * printout has a line per product and the total. */
static void test_device_products_time_every_product(void) {
    const DeviceProductShapes s = {.hidden = 24, .intermediate = 40, .vocab = 57, .layers = 3, .tokens = 20,
                                   .predictions = 6};
    const int halves[] = {-1, HALF_BF16_EMULATED};
    for (int h = 0; h < 2; h++) {
        DeviceProducts p;
        device_products_measure(&p, &s, halves[h], 0.02);
        CHECKF(p.count == (halves[h] < 0 ? 14 : 16), "%d products", p.count);
        const double H = s.hidden, I = s.intermediate, N = s.tokens;
        const double step = s.layers * 6 * N * (3 * H * H + H * H + 2 * H * I) + 6.0 * s.predictions * H * s.vocab;
        CHECKF(p.step_flops == step, "step FLOPs %.0f, the model's %.0f", p.step_flops, step);
        double seconds = 0;
        for (int i = 0; i < p.count; i++) {
            const DeviceProduct *d = &p.p[i];
            CHECKF(d->seconds > 0 && isfinite(d->seconds), "%s: %g s", d->what, d->seconds);
            CHECKF(d->flops == 2.0 * d->N * d->C * d->OC * (strstr(d->what, "backward") ? 2 : 1), "%s: %g FLOPs",
                   d->what, d->flops);
            seconds += d->per_step * d->seconds;
        }
        CHECKF(fabs(p.step_seconds - seconds) <= 1e-12 * seconds, "step %g s, lines %g s", p.step_seconds, seconds);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        device_products_print(f, &p, 1.0);
        fclose(f);
        int lines = 0;
        for (const char *c = text; *c; c++) lines += *c == '\n';
        CHECKF(lines == p.count + 1 && strstr(text, "products of one training step"), "%d lines:\n%s", lines, text);
        free(text);
    }
}

/* Runs `bert bench` (or another command) with the given arguments, capturing its stdout into
 * *out (caller frees). */
static int run_command(int (*cmd)(int, char **), char **out, int argc, const char **argv);
static int run_bench(char **out, int argc, const char **argv) { return run_command(cmd_bench, out, argc, argv); }

static int run_command(int (*cmd)(int, char **), char **out, int argc, const char **argv) {
    char path[] = "/tmp/test_bench_stdout_XXXXXX";
    int fd = mkstemp(path), saved = dup(STDOUT_FILENO);
    fflush(stdout);
    dup2(fd, STDOUT_FILENO);
    int rc = cmd(argc, (char **)argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved), close(fd);
    BertError err;
    if (read_file(path, out, NULL, &err) != 0) *out = xstrdup("");
    unlink(path);
    return rc;
}

static double json_number(const cJSON *root, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A real (micro) run: the JSON report counts the steps asked for, the model's parameters
 * and the FLOP formula's figure, and every rate is positive. */
static void test_bench_json_report(void) {
    const char *pads[] = {"0", "0.3"};
    /* read by libgomp at start-up only, so setting it now changes nothing but the report */
    setenv("GOMP_SPINCOUNT", "12345", 1);
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {"--config", MICRO_CONFIG, "--batch", "3", "--seq", "24", "--preds", "4", "--steps", "2",
                              "--infer_steps", "3", "--warmup", "1", "--sgemm_peak", "100", "--pad_fraction", pads[i],
                              "--optimizer", i ? "lamb" : "adamw", "--json"};
        char *out = NULL;
        int rc = run_bench(&out, (int)(sizeof argv / sizeof argv[0]), argv);
        CHECKF(rc == 0, "pad %s: exit %d", pads[i], rc);
        cJSON *root = cJSON_Parse(out);
        CHECKF(root != NULL, "not JSON: %s", out);
        if (root) {
            BertConfig c;
            BertError err;
            BertModel *m = NULL;
            CHECK(bert_config_load(MICRO_CONFIG, &c, &err) == 0 && bert_model_create(&m, &c, 3, 24, 4, &err) == 0);
            CHECK(json_number(root, "train_steps") == 2 && json_number(root, "infer_steps") == 3);
            CHECK(m && json_number(root, "params") == (double)bert_num_parameters(m));
            CHECK(fabs(json_number(root, "train_gflop_per_seq") - bert_train_flops(&c, 1, 24, 4) * 1e-9) < 1e-4);
            CHECK(json_number(root, "sgemm_peak_gflops") == 100);
            CHECK(json_number(root, "train_seq_per_s") > 0 && json_number(root, "infer_seq_per_s") > 0);
            CHECK(json_number(root, "peak_rss_mib") > 0);
            const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
            CHECKF(cJSON_IsString(opt) && !strcmp(opt->valuestring, i ? "lamb" : "adamw"), "optimizer %s",
                   cJSON_IsString(opt) ? opt->valuestring : "missing");
            /* the report names what ran the products and the variables that change them */
            const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(root, "gemm_kernel");
            const cJSON *env = cJSON_GetObjectItemCaseSensitive(root, "environment");
            const char *lib = strcmp(sgemm_library(), "onednn") == 0 ? "oneDNN " : "OpenBLAS ";
            CHECKF(cJSON_IsString(kernel) && strncmp(kernel->valuestring, lib, strlen(lib)) == 0, "gemm_kernel %s",
                   cJSON_IsString(kernel) ? kernel->valuestring : "missing");
            CHECKF(cJSON_IsString(env) && strstr(env->valuestring, "GOMP_SPINCOUNT=12345"), "environment %s",
                   cJSON_IsString(env) ? env->valuestring : "missing");
            bert_model_free(m);
        }
        cJSON_Delete(root);
        free(out);
    }
    unsetenv("GOMP_SPINCOUNT");
}

static void test_bench_rejects_bad_flags(void) {
    const char *cases[][4] = {
        {"--seq", "4", NULL, NULL},                        /* shorter than [CLS] + slots + [SEP] */
        {"--seq", "16", "--preds", "15"},                  /* more slots than maskable tokens */
        {"--seq", "100000", NULL, NULL},                   /* beyond max_position_embeddings */
        {"--pad_fraction", "0.7", NULL, NULL},
        {"--threads", "0", NULL, NULL},
        {"--mode", "fast", NULL, NULL},
        {"--optimizer", "sgd", NULL, NULL},
        {"--batch", "x", NULL, NULL},                      /* not a number */
        {"--unknown_flag", "1", NULL, NULL},
        {"--tf32", NULL, NULL, NULL},                      /* the CPU has no TF32 products */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[10] = {"--config", MICRO_CONFIG, "--sgemm_peak", "100", "--seq", "32"};  /* valid */
        int argc = 6;
        for (int j = 0; j < 4 && cases[i][j]; j++) argv[argc++] = cases[i][j];
        char *out = NULL;
        int rc = run_bench(&out, argc, argv);
        CHECKF(rc == 2 && out[0] == 0, "case %zu (%s %s): exit %d, stdout '%s'", i, cases[i][0], cases[i][1], rc, out);
        free(out);
    }
    const char *unknown[] = {"--preset", "bert-enormous", "--sgemm_peak", "100"};
    const char *both[] = {"--preset", "bert-tiny", "--config", MICRO_CONFIG};
    const char *missing[] = {"--config", "tests/data/bench/no_such_config.json"};
    char *out = NULL;
    CHECK(run_bench(&out, 4, unknown) == 1);
    free(out);
    CHECK(run_bench(&out, 4, both) == 2);
    free(out);
    CHECK(run_bench(&out, 2, missing) == 1);
    free(out);
    const char *threads[] = {"--config", MICRO_CONFIG, "--sgemm_peak", "100", "--seq", "32", "--threads", "100000"};
    CHECK(run_bench(&out, 8, threads) == 2);  /* libgomp overflowed its stack building such a team */
    free(out);
}

/* --int8: inference only (the training part skipped; --mode train refused), the int8 GEMM
 * peak measured and named, the rate a fraction of it; a CPU without int8 products refuses. */
static void test_bench_int8(void) {
    const char *argv[] = {"--config", MICRO_CONFIG, "--batch", "3", "--seq", "24", "--preds", "4", "--infer_steps", "2",
                          "--warmup", "1", "--sgemm_peak", "100", "--int8", "--json"};
    char *out = NULL;
    int rc = run_bench(&out, (int)(sizeof argv / sizeof argv[0]), argv);
    if (!k_int8_support()) {
        CHECKF(rc != 0, "--int8 without int8 products: exit %d", rc);
        free(out);
        return;
    }
    CHECKF(rc == 0, "--int8: exit %d", rc);
    cJSON *root = cJSON_Parse(out);
    CHECKF(root != NULL, "not JSON: %s", out);
    if (root) {
        const cJSON *precision = cJSON_GetObjectItemCaseSensitive(root, "precision");
        CHECK(cJSON_IsString(precision) && !strcmp(precision->valuestring, "int8"));
        CHECK(json_number(root, "train_steps") == 0 && json_number(root, "infer_steps") == 2);
        CHECK(json_number(root, "int8_peak_gops") > 0 && json_number(root, "infer_seq_per_s") > 0);
    }
    cJSON_Delete(root);
    free(out);
    /* --kernel_profile on inference alone: the int8 layers' kernels, per batch */
    const char *profile[] = {"--config", MICRO_CONFIG, "--batch", "3", "--seq", "24", "--preds", "4", "--infer_steps", "2",
                             "--warmup", "1", "--sgemm_peak", "100", "--int8", "--kernel_profile"};
    CHECKF(run_bench(&out, (int)(sizeof profile / sizeof profile[0]), profile) == 0 && out &&
               strstr(out, "k_matmul_forward_int8_rows") && strstr(out, "k_attention_forward"),
           "--int8 --kernel_profile: %s", out ? out : "(no output)");
    free(out);
    const char *train[] = {"--config", MICRO_CONFIG, "--sgemm_peak", "100", "--int8", "--mode", "train"};
    CHECK(run_bench(&out, 7, train) == 2);
    free(out);
    const char *two[] = {"--config", MICRO_CONFIG, "--sgemm_peak", "100", "--int8", "--bf16"};
    CHECK(run_bench(&out, 6, two) == 2);
    free(out);
    Int8GemmPeak p;
    int8_gemm_peak_measure(&p, 64, 0.05);   /* bookkeeping only, not speed */
    double best = 0;
    for (int i = 0; i < SGEMM_PEAK_SHAPES; i++) {
        CHECKF(p.shapes[i].m == 64 && p.shapes[i].reps >= 3 && p.shapes[i].best_gflops > 0, "int8 shape %d: m %d, %d "
               "reps, %g GOP/s", i, p.shapes[i].m, p.shapes[i].reps, p.shapes[i].best_gflops);
        best = fmax(best, p.shapes[i].best_gflops);
    }
    CHECKF(p.peak_gops == best, "int8 peak %g, best shape %g", p.peak_gops, best);
    CHECKF(strcmp(p.vpdpbusd_isa, "none") ? p.vpdpbusd_gops > 0 : p.vpdpbusd_gops == 0, "vpdpbusd (%s): %g GOP/s",
           p.vpdpbusd_isa, p.vpdpbusd_gops);
}

/* --all_rows and --full_last_layer: the JSON's row counts say what ran (3 x 24 rows with 30%
 * padding: unpadded to fewer, pruned to the 3 [CLS] rows + labelled slots), and the text
 * report's "rows" line names only the savings that applied: with --all_rows it must claim
 * neither unpadding nor pruning, with --full_last_layer no pruning. */
static void test_bench_row_flags(void) {
    const char *variants[] = {"--all_rows=false", "--full_last_layer", "--all_rows"};
    for (int v = 0; v < 3; v++) {
        const char *argv[] = {"--config", MICRO_CONFIG, "--batch", "3", "--seq", "24", "--preds", "4", "--steps", "1",
                              "--infer_steps", "0", "--warmup", "0", "--sgemm_peak", "100", "--pad_fraction", "0.3",
                              variants[v], "--json"};
        const int argc = (int)(sizeof argv / sizeof argv[0]);
        char *out = NULL;
        CHECKF(run_bench(&out, argc, argv) == 0, "%s: JSON run failed", variants[v]);
        cJSON *root = cJSON_Parse(out);
        double enc = json_number(root, "train_encoder_rows"), last = json_number(root, "train_last_layer_rows");
        CHECKF(v == 2 ? enc == 72 : enc < 72, "%s: encoder rows %g", variants[v], enc);
        CHECKF(v == 0 ? last <= 3 + 3 * 4 : last == enc, "%s: last layer rows %g (encoder %g)", variants[v], last, enc);
        cJSON_Delete(root);
        free(out);

        CHECKF(run_bench(&out, argc - 1, argv) == 0, "%s: text run failed", variants[v]);   /* without --json */
        const char *rows = strstr(out, "\nrows ");
        CHECKF(rows != NULL, "%s: no rows line in '%s'", variants[v], out);
        if (rows) {
            const char *end = strchr(rows + 1, '\n');
            char line[1024];
            snprintf(line, sizeof line, "%.*s", end ? (int)(end - rows - 1) : 1000, rows + 1);
            CHECKF((strstr(line, "unpadding") != NULL) == (v != 2), "%s: '%s'", variants[v], line);
            CHECKF((strstr(line, "pruning") != NULL) == (v == 0), "%s: '%s'", variants[v], line);
            CHECKF(strstr(line, "padded keys") != NULL, "%s: '%s'", variants[v], line);
        }
        free(out);
    }
}

/* Vocabularies of at most 1000 ids: the synthetic ids were drawn from [1000, vocab), an
 * empty range (a division by zero at 1000, ids out of range below). */
static void test_bench_small_vocabulary(void) {
    const char *configs[][2] = {
        {"build/test_bench_vocab1000.json", "{\"vocab_size\": 1000, \"hidden_size\": 16, \"num_hidden_layers\": 1, "
                                            "\"num_attention_heads\": 2, \"intermediate_size\": 32, \"max_position_embeddings\": 32}"},
        {"build/test_bench_vocab30.json", "{\"vocab_size\": 30, \"hidden_size\": 16, \"num_hidden_layers\": 1, "
                                          "\"num_attention_heads\": 2, \"intermediate_size\": 32, \"max_position_embeddings\": 32}"},
    };
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(configs[i][0], "w");
        CHECK(f != NULL);
        if (!f) continue;
        fputs(configs[i][1], f);
        fclose(f);
        const char *argv[] = {"--config", configs[i][0], "--batch", "2", "--seq", "16", "--preds", "3", "--steps", "1",
                              "--warmup", "0", "--sgemm_peak", "100", "--json"};
        char *out = NULL;
        int rc = run_bench(&out, (int)(sizeof argv / sizeof argv[0]), argv);
        CHECKF(rc == 0 && strstr(out, "\"train_steps\": 1"), "%s: exit %d, '%s'", configs[i][0], rc, out);
        free(out);
        unlink(configs[i][0]);
    }
}

/* bench_infer's sweep at fixed shapes: one JSON line per (sequence length, batch size), each
 * with its latency distribution in order; a bad list is refused. */
static void test_bench_infer_sweep(void) {
    const char *argv[] = {"--config", MICRO_CONFIG, "--batch_sizes", "1,3", "--seq_lengths", "16,24",
                          "--latency_sequences", "6", "--warmup", "0", "--json"};
    char *out = NULL;
    CHECK(run_command(cmd_bench_infer, &out, (int)(sizeof argv / sizeof argv[0]), argv) == 0);
    int lines = 0;
    const int want[4][2] = {{16, 1}, {16, 3}, {24, 1}, {24, 3}};
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        if (lines < 4)
            CHECKF(json_number(j, "max_seq_length") == want[lines][0] && json_number(j, "batch") == want[lines][1] &&
                       json_number(j, "p50_ms") <= json_number(j, "p95_ms") &&
                       json_number(j, "p95_ms") <= json_number(j, "p99_ms") &&
                       json_number(j, "p99_ms") <= json_number(j, "max_ms") && json_number(j, "avg_ms") > 0,
                   "line %d: %s", lines, line);
        lines++;
        cJSON_Delete(j);
    }
    CHECKF(lines == 4, "%d measurements, 4 expected", lines);
    free(out);
    const char *bad[] = {"--config", MICRO_CONFIG, "--batch_sizes", "1,0"};
    CHECK(run_command(cmd_bench_infer, &out, 4, bad) == 2);
    free(out);
}

/* bench_infer --text_file: a server load's texts, one a line (empty lines skipped, CRLF as
 * LF), at the lengths bert embed encodes them ([CLS] text [SEP], cut to max_seq_length): the
 * batch-1 measurement runs that many sequences of those tokens. */
static void test_bench_infer_text_file(void) {
    const char *dir = "tests/data/embed";
    char path[64];   /* this process's own: two suites running at once (the matrix and CI) emptied each other's */
    snprintf(path, sizeof path, "/tmp/bert_test_bench_texts_%d.txt", (int)getpid());
    char *text = NULL;
    size_t len = 0;
    BertError err;
    CHECK(read_file("tests/data/embed/sentences.txt", &text, &len, &err) == 0);
    FILE *f = fopen(path, "wb");   /* the fixture's lines, the first ones ending in CRLF */
    int lines = 0;
    for (char *p = text; p && *p; lines++) {
        char *nl = strchr(p, '\n');
        fprintf(f, "%.*s%s", (int)(nl ? nl - p : (long)strlen(p)), p, lines < 3 ? "\r\n" : "\n");
        p = nl ? nl + 1 : NULL;
    }
    fclose(f);
    Vocab *v = NULL;
    CHECK(vocab_load(&v, "tests/data/embed/vocab.txt", &err) == 0);
    TokenizerOptions to = tokenizer_default_options();
    Tokenizer *tok = tokenizer_new(v, &to);
    TokenList scratch;
    token_list_init(&scratch);
    int32_t ids[16];
    long want_tokens = 0;
    int want_texts = 0;
    for (char *p = text; p && *p;) {   /* the reference: each non-empty line through bert embed's encoder */
        char *nl = strchr(p, '\n');
        const size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n) want_tokens += embed_encode(tok, &scratch, p, n, 16, ids, NULL, &err), want_texts++;
        p = nl ? nl + 1 : NULL;
    }
    const char *argv[] = {"--init_checkpoint", dir, "--text_file", path, "--max_seq_length", "16", "--batch_sizes", "1",
                          "--latency_sequences", "100", "--warmup", "0", "--threads", "1", "--json"};
    char *out = NULL;
    CHECK(run_command(cmd_bench_infer, &out, (int)(sizeof argv / sizeof argv[0]), argv) == 0);
    const char *packed = out ? strstr(out, "\"mode\": \"packed\"") : NULL;
    const char *line = packed ? packed : "";
    while (line > out && line[-1] != '\n') line--;
    cJSON *j = cJSON_Parse(line);
    CHECKF(j && json_number(j, "sequences") == want_texts && json_number(j, "real_tokens") == want_tokens,
           "%d texts of %ld tokens expected: %s", want_texts, want_tokens, out ? out : "");
    CHECK(want_texts >= 2 && want_texts < lines);   /* the fixture has an empty line, skipped */
    cJSON_Delete(j), free(out);
    FILE *empty = fopen(path, "w");
    fputs("\n\n", empty), fclose(empty);
    CHECK(run_command(cmd_bench_infer, &out, (int)(sizeof argv / sizeof argv[0]), argv) == 1);
    free(out);
    const char *both[] = {"--init_checkpoint", dir, "--text_file", path, "--squad_file", path};
    CHECK(run_command(cmd_bench_infer, &out, 6, both) == 2);
    free(out), unlink(path);
    token_list_free(&scratch), tokenizer_free(tok), vocab_free(v), free(text);
}

int main(void) {
    RUN_TEST(test_train_flops_match_published_figures);
    RUN_TEST(test_flops_equal_explicit_product_list);
    RUN_TEST(test_executed_flops);   /* runs OpenMP threads before the measurement, as callers may */
    RUN_TEST(test_sgemm_peak_reports_every_shape);
    RUN_TEST(test_device_peak_reports_every_shape);
    RUN_TEST(test_device_products_time_every_product);
    RUN_TEST(test_bench_json_report);
    RUN_TEST(test_bench_infer_sweep);
    RUN_TEST(test_bench_infer_text_file);
    RUN_TEST(test_bench_rejects_bad_flags);
    RUN_TEST(test_bench_small_vocabulary);
    RUN_TEST(test_bench_row_flags);
    RUN_TEST(test_bench_int8);
    return test_summary();
}
