/* `bert bench_infer`: inference throughput and latency on a task's real length distribution
 * (a GLUE dev set or a SQuAD file's features), padded / dynamic / packed, batch 1 and a large
 * batch (tasks/infer_bench.h). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/sgemm_peak.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "io/tokenizer_files.h"
#include "model/config.h"
#include "model/bert.h"
#include "tasks/infer_bench.h"

static const char *MODE_NAMES[] = {"padded", "dynamic", "packed"};

/* The encoder's linear layers' work per computed row (2 m n k per product: QKV, attention
 * output, the two feed-forward products), for the rate against the GEMM peak. */
static double linear_ops_per_row(const BertConfig *c) {
    return 2.0 * c->num_hidden_layers * c->hidden_size * (4.0 * c->hidden_size + 2.0 * c->intermediate_size);
}

/* The peak of the arithmetic the products run in, measured now (GFLOP/s; int8: GOP/s). */
static double measure_peak(BertPrecision precision) {
    if (precision == BERT_INT8) {
        Int8GemmPeak p;
        int8_gemm_peak_measure(&p, 0, 1.0);
        return p.peak_gops;
    }
    if (precision == BERT_BF16) {
        Bf16GemmPeak p;
        bf16_gemm_peak_measure(&p, 0, 1.0);
        return p.peak_gflops;
    }
    SgemmPeak p;
    sgemm_peak_measure(&p, 0, 1.0);
    return p.peak_gflops;
}

/* The linear layers' work over the whole run's time (attention, LayerNorm and the rest
 * included): a floor under what the products alone reach. */
static void report(const char *name, int batch, InferMode mode, const InferTiming *t, bool json, double row_ops,
                   double peak) {
    const double seconds = t->sequences / (t->sequences_per_second > 0 ? t->sequences_per_second : 1);
    const double gops = row_ops * (double)t->tokens_computed / seconds * 1e-9, percent = peak > 0 ? 100 * gops / peak : 0;
    if (json) {
        printf("{\"impl\": \"bert.c\", \"lengths\": \"%s\", \"batch\": %d, \"mode\": \"%s\", \"sequences\": %d, "
               "\"sequences_per_second\": %.3f, \"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, "
               "\"real_tokens\": %ld, \"computed_rows\": %ld, \"linear_gops\": %.2f, \"gemm_peak\": %.2f}\n", name,
               batch, MODE_NAMES[mode], t->sequences, t->sequences_per_second, t->p50_ms, t->p90_ms, t->p99_ms,
               t->tokens_real, t->tokens_computed, gops, peak);
        return;
    }
    printf("batch %3d %-8s %8.1f seq/s   latency p50 %8.2f ms  p90 %8.2f ms  p99 %8.2f ms   rows computed %5.1f%% real"
           "   linear layers %6.1f GOP/s = %3.0f%% of peak\n",
           batch, MODE_NAMES[mode], t->sequences_per_second, t->p50_ms, t->p90_ms, t->p99_ms,
           100.0 * t->tokens_real / (double)(t->tokens_computed ? t->tokens_computed : 1), gops, percent);
}

int cmd_bench_infer(int argc, char **argv) {
    const char *preset = NULL, *config = NULL, *glue = NULL, *data_dir = NULL, *squad = NULL, *vocab_file = NULL;
    const char *init = NULL;
    int max_seq = 0, batch = 32, threads = 0, latency_sequences = 256, warmup = 2;
    const char *device = NULL;
    bool lower = true, bf16 = false, int8 = false, json = false, plain_weights = false, unfused = false;
    const Flag flags[] = {
        {"preset", FLAG_STRING, &preset, "bert-tiny ... bert-large (default bert-base; random weights)"},
        {"config", FLAG_STRING, &config, "a HuggingFace config.json instead (with --init_checkpoint: its configuration)"},
        {"init_checkpoint", FLAG_STRING, &init,
         "a trained model instead of random weights: any checkpoint --init_checkpoint reads elsewhere (HF folder, "
         ".pt, .bin, TensorFlow, a pretrain run folder)"},
        {"glue_task", FLAG_STRING, &glue, "lengths of this GLUE task's dev rows (with --data_dir)"},
        {"data_dir", FLAG_STRING, &data_dir, "the GLUE task's folder"},
        {"squad_file", FLAG_STRING, &squad, "or the lengths of a SQuAD file's features (384 / 128 / 64)"},
        {"vocab_file", FLAG_STRING, &vocab_file, "the vocabulary that tokenizes them (required, but for a model folder's)"},
        {"do_lower_case", FLAG_BOOL, &lower, "uncased (default true)"},
        {"max_seq_length", FLAG_INT, &max_seq, "default 128 (GLUE) or 384 (SQuAD)"},
        {"batch", FLAG_INT, &batch, "the large batch; default 32 (batch 1 is always run)"},
        {"latency_sequences", FLAG_INT, &latency_sequences, "sequences run one by one for batch 1; default 256"},
        {"warmup", FLAG_INT, &warmup, "batches run first and not timed (the first ones replayed); default 2"},
        {"bf16", FLAG_BOOL, &bf16, "matrix products in bf16 (needs avx512_bf16)"},
        {"int8", FLAG_BOOL, &int8, "the encoder's linear layers in int8 (weights per channel, inputs per row, "
                                   "quantized on the fly; VNNI/AMX where the CPU has them)"},
        {"plain_weights", FLAG_BOOL, &plain_weights,
         "the forward reads the plain weights, not the packed copy (to measure what packing gives)"},
        {"unfused", FLAG_BOOL, &unfused,
         "the feed-forward's product and GELU as two passes, not one (to measure what fusing gives)"},
        {"threads", FLAG_INT, &threads, "OpenMP threads (0: all cores)"},
        {"device", FLAG_STRING, &device, FLAGS_DEVICE_HELP},
        {"json", FLAG_BOOL, &json, "one JSON line per measurement"},
    };
    const FlagSpec spec = {"bench_infer", "bench_infer (--glue_task T --data_dir D | --squad_file F) --vocab_file V "
                                          "[--preset bert-base] [flags]", flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    char init_buf[4096 + 64];   /* a run folder's newest checkpoint */
    if (init && flags_init_checkpoint("bench_infer", &init, init_buf, sizeof init_buf) != 0) return 1;
    TokenizerFolder folder;
    if (init && !vocab_file) {
        tokenizer_folder_read(init, &folder);
        if (folder.vocab_file[0]) vocab_file = folder.vocab_file;
    }
    if (flags_require(&spec, "vocab_file") != 0) return 2;
    if (!vocab_file || !!glue == !!squad || (glue && !data_dir) || batch < 1 || latency_sequences < 1) {
        fprintf(stderr, "bert bench_infer: give --vocab_file and one of --glue_task (with --data_dir) and --squad_file\n");
        return 2;
    }
    if (warmup < 0) {
        fprintf(stderr, "bert bench_infer: --warmup must be >= 0 (got %d)\n", warmup);
        return 2;
    }
    if (flags_use_device("bench_infer", device) != 0) return 2;
    if (bf16 && int8) return fprintf(stderr, "bert bench_infer: give at most one of --bf16 and --int8\n"), 2;
    if (int8 && flags_int8("bench_infer") != 0) return 2;
    if (int8 && plain_weights)
        return fprintf(stderr, "bert bench_infer: --plain_weights: int8 weights exist only packed\n"), 2;
    if (threads > 0) omp_set_num_threads(threads);
    if (max_seq <= 0) max_seq = squad ? 384 : 128;
    const BertPrecision precision = bf16 ? BERT_BF16 : int8 ? BERT_INT8 : BERT_FP32;
    const double peak = measure_peak(precision);   /* before the model: its buffers stay out of the peak RSS */
    BertError err;
    BertConfig cfg;
    Vocab *v = NULL;
    BertModel *m = NULL;
    int32_t *lengths = NULL;
    int n = 0;
    if ((init ? 0 : config ? bert_config_load(config, &cfg, &err) : bert_config_preset(preset ? preset : "bert-base", &cfg, &err)) ||
        vocab_load(&v, vocab_file, &err) != 0) {
        fprintf(stderr, "bert bench_infer: %s\n", err.msg);
        vocab_free(v);
        return 1;
    }
    TokenizerOptions to = tokenizer_default_options();
    to.do_lower_case = lower, to.max_input_chars_per_word = squad ? 200 : 100;
    Tokenizer *tok = tokenizer_new(v, &to);
    rc = squad ? squad_feature_lengths(squad, tok, max_seq, &lengths, &n, &err)
               : glue_dev_lengths(glue, data_dir, tok, max_seq, &lengths, &n, &err);
    if (rc == 0 && init)
        rc = bert_open_checkpoint(&m, init, config, (BertHeads){BERT_HEADS_NONE, 0}, batch, max_seq, 0, NULL, &err);
    else if (rc == 0 && (rc = bert_model_create_with_heads(&m, &cfg, (BertHeads){BERT_HEADS_NONE, 0}, batch, max_seq, 0,
                                                            &err)) == 0)
        bert_init_weights(m, 1);
    if (rc == 0) rc = bert_set_precision(m, precision, &err);
    if (rc == 0) {   /* a server's model: its layers share their activations (not with --unfused: no fusing) */
        bert_set_packed_weights(m, !plain_weights);
        bert_set_mode(m, unfused ? BERT_MODE_FULL : BERT_MODE_FORWARD_ONLY);
    }
    const char *name = squad ? squad : glue;
    if (rc == 0) {
        long real = 0;
        for (int i = 0; i < n; i++) real += lengths[i];
        if (!json)
            printf("bert bench_infer: %s, %d sequences (mean %.1f of %d tokens), %s %s, %d threads; weights %s, "
                   "feed-forward product and GELU %s\n", name, n, (double)real / n, max_seq,
                   init ? init : config ? config : preset ? preset : "bert-base", bert_precision_name(precision), omp_get_max_threads(),
                   plain_weights ? "plain" : "packed", plain_weights || unfused ? "in two passes" : "fused");
        if (!json)
            printf("bert bench_infer: the %s GEMM peak, measured now: %.1f %s (the linear layers' rate below is over "
                   "the whole forward's time)\n", precision == BERT_BF16 ? "bf16" : precision == BERT_INT8 ? "int8" : "fp32",
                   peak, precision == BERT_INT8 ? "GOP/s" : "GFLOP/s");
        const int sizes[2] = {1, batch};
        for (int s = 0; rc == 0 && s < 2 && (s == 0 || batch > 1); s++)
            for (InferMode mode = INFER_PADDED; rc == 0 && mode <= INFER_PACKED; mode++) {
                InferTiming t;
                const int count = sizes[s] == 1 && latency_sequences < n ? latency_sequences : n;
                rc = infer_bench_run(m, lengths, count, sizes[s], max_seq, mode, warmup, &t, &err);
                if (rc == 0) report(name, sizes[s], mode, &t, json, linear_ops_per_row(bert_model_config(m)), peak);
            }
    }
    if (rc != 0) fprintf(stderr, "bert bench_infer: %s\n", err.msg);
    free(lengths);
    bert_model_free(m);
    tokenizer_free(tok), vocab_free(v);
    return rc ? 1 : 0;
}
