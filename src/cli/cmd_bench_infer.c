/* `bert bench_infer`: inference throughput and latency (mean, p50/p90/p95/p99, max) on a task's
 * real length distribution (a GLUE dev set or a SQuAD file's features) or at fixed shapes,
 * padded / dynamic / packed, swept over batch sizes and sequence lengths (tasks/infer_bench.h). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/device_peak.h"
#include "bench/sgemm_peak.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "io/tokenizer_files.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/bert.h"
#include "tasks/infer_bench.h"

static const char *MODE_NAMES[] = {"padded", "dynamic", "packed"};

/* The encoder's linear layers' work per computed row (2 m n k per product: QKV, attention
 * output, the two feed-forward products), for the rate against the GEMM peak. */
static double linear_ops_per_row(const BertConfig *c) {
    return 2.0 * c->num_hidden_layers * c->hidden_size * (4.0 * c->hidden_size + 2.0 * c->intermediate_size);
}

/* The peak of the arithmetic the products run in, measured now (GFLOP/s; int8: GOP/s): the
 * CPU's, or on a GPU (--device cuda) its own products' on `rows` rows and a big square
 * (bench/device_peak.h, as bert bench measures it there). */
static double measure_peak(BertPrecision precision, int rows, bool gpu) {
    if (gpu) {
        DeviceGemmPeak d;
        device_gemm_peak_measure(&d, precision == BERT_BF16 ? HALF_BF16 : -1, rows, 8192, 2.0);
        return d.peak_gflops;
    }
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

/* One measurement; the linear layers' work over the whole run's time (attention, LayerNorm
 * and the rest included): a floor under what the products alone reach. */
static void report(const char *name, int seq, int batch, InferMode mode, const InferTiming *t, bool json,
                   double row_ops, double peak) {
    const double gops = t->seconds > 0 ? row_ops * (double)t->tokens_computed / t->seconds * 1e-9 : 0;
    const double percent = peak > 0 ? 100 * gops / peak : 0;
    if (json) {
        printf("{\"impl\": \"bert.c\", \"lengths\": \"%s\", \"max_seq_length\": %d, \"batch\": %d, \"mode\": \"%s\", "
               "\"sequences\": %d, \"sequences_per_second\": %.3f, \"avg_ms\": %.3f, \"p50_ms\": %.3f, \"p90_ms\": %.3f, "
               "\"p95_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, \"real_tokens\": %ld, \"computed_rows\": %ld, "
               "\"linear_gops\": %.2f, \"gemm_peak\": %.2f}\n",
               name, seq, batch, MODE_NAMES[mode], t->sequences, t->sequences_per_second, t->avg_ms, t->p50_ms,
               t->p90_ms, t->p95_ms, t->p99_ms, t->max_ms, t->tokens_real, t->tokens_computed, gops, peak);
        return;
    }
    printf("seq %4d batch %3d %-8s %8.1f seq/s   latency avg %7.2f p50 %7.2f p90 %7.2f p95 %7.2f p99 %7.2f max "
           "%7.2f ms   rows computed %5.1f%% real   linear layers %6.1f GOP/s = %3.0f%% of peak\n", seq, batch,
           MODE_NAMES[mode], t->sequences_per_second, t->avg_ms, t->p50_ms, t->p90_ms, t->p95_ms, t->p99_ms, t->max_ms,
           100.0 * t->tokens_real / (double)(t->tokens_computed ? t->tokens_computed : 1), gops, percent);
}

enum { MAX_SWEEP = 16 };

/* "1,8,32" -> sizes; 0 and a message when a value is not a whole number in [1, 65536]. */
static int parse_sizes(const char *flag, const char *text, int *out, int *n) {
    *n = 0;
    for (const char *p = text; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 65536 || (*end && *end != ',') || *n == MAX_SWEEP) {
            fprintf(stderr, "bert bench_infer: --%s %s: give up to %d numbers from 1 to 65536, comma-separated\n", flag,
                    text, MAX_SWEEP);
            return 0;
        }
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *n;
}

typedef struct {
    const char *glue, *data_dir, *squad, *text_file;
    const Tokenizer *tok;
    int latency_sequences;
} LengthSource;

/* The sequences' token counts at max_seq: the task's (cut to it), else all max_seq long. */
static int task_lengths(const LengthSource *src, int max_seq, int max_batch, int32_t **lengths, int *n,
                        BertError *err) {
    if (src->text_file) return text_file_lengths(src->text_file, src->tok, max_seq, lengths, n, err);
    if (src->squad) return squad_feature_lengths(src->squad, src->tok, max_seq, lengths, n, err);
    if (src->glue) return glue_dev_lengths(src->glue, src->data_dir, src->tok, max_seq, lengths, n, err);
    *n = src->latency_sequences > 4 * max_batch ? src->latency_sequences : 4 * max_batch;
    *lengths = xmalloc(sizeof(int32_t) * (size_t)*n);
    for (int i = 0; i < *n; i++) (*lengths)[i] = max_seq;
    return 0;
}

int cmd_bench_infer(int argc, char **argv) {
    const char *preset = NULL, *config = NULL, *glue = NULL, *data_dir = NULL, *squad = NULL, *vocab_file = NULL;
    const char *text_file = NULL;
    const char *init = NULL, *batch_list = NULL, *seq_list = NULL, *device = NULL;
    bool tf32 = false;
    int max_seq = 0, batch = 32, threads = 0, latency_sequences = 256, warmup = 2;
    bool lower = true, bf16 = false, int8 = false, json = false, plain_weights = false, unfused = false;
    const Flag flags[] = {
        {"preset", FLAG_STRING, &preset, "bert-tiny ... bert-large (default bert-base; random weights)"},
        {"config", FLAG_STRING, &config, "a HuggingFace config.json instead (with --init_checkpoint: its configuration)"},
        {"init_checkpoint", FLAG_STRING, &init,
         "a trained model instead of random weights: any checkpoint --init_checkpoint reads elsewhere (HF folder, "
         ".pt, .bin, TensorFlow, a pretrain run folder)"},
        {"glue_task", FLAG_STRING, &glue, "lengths of this GLUE task's dev rows (with --data_dir)"},
        {"data_dir", FLAG_STRING, &data_dir, "the GLUE task's folder"},
        {"squad_file", FLAG_STRING, &squad, "or the lengths of a SQuAD file's features (384 / 128 / 64); "
                                            "neither: fixed shapes, every sequence max_seq_length long"},
        {"text_file", FLAG_STRING, &text_file, "or the lengths of a file's texts, one a line, as bert embed and bert "
                                               "serve encode them (a server load's texts)"},
        {"vocab_file", FLAG_STRING, &vocab_file, "the vocabulary that tokenizes the task (default a model folder's)"},
        {"do_lower_case", FLAG_BOOL, &lower, "uncased (default true)"},
        {"max_seq_length", FLAG_INT, &max_seq, "default 128 (GLUE, fixed shapes) or 384 (SQuAD)"},
        {"seq_lengths", FLAG_STRING, &seq_list, "a sweep instead: max_seq_length values, e.g. 128,384"},
        {"batch", FLAG_INT, &batch, "the large batch; default 32 (batch 1 is always run)"},
        {"batch_sizes", FLAG_STRING, &batch_list, "a sweep instead: batch sizes, e.g. 1,8,32"},
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
        {"tf32", FLAG_BOOL, &tf32, FLAGS_TF32_HELP},
        {"json", FLAG_BOOL, &json, "one JSON line per measurement"},
    };
    const FlagSpec spec = {"bench_infer", "bench_infer [--glue_task T --data_dir D | --squad_file F | --text_file F] [--vocab_file V] "
                                          "[--preset bert-base] [--batch_sizes 1,8,32] [--seq_lengths 128,384] [flags]",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    char init_buf[4096 + 64];   /* a run folder's newest checkpoint */
    if (init && flags_init_checkpoint("bench_infer", &init, init_buf, sizeof init_buf) != 0) return 1;
    TokenizerFolder folder;
    if (init && !vocab_file) {
        tokenizer_folder_read(init, &folder);
        if (folder.vocab_file[0]) vocab_file = folder.vocab_file;
    }
    const bool task = glue || squad || text_file;
    if ((glue != NULL) + (squad != NULL) + (text_file != NULL) > 1 || (glue && !data_dir) || (task && !vocab_file)) {
        fprintf(stderr, "bert bench_infer: give at most one of --glue_task (with --data_dir), --squad_file and "
                        "--text_file, and --vocab_file with any\n");
        return 2;
    }
    if (batch < 1 || latency_sequences < 1 || warmup < 0) {
        fprintf(stderr, "bert bench_infer: --batch %d and --latency_sequences %d must be >= 1, --warmup %d >= 0\n", batch,
                latency_sequences, warmup);   /* the values named (issue 35, D20) */
        return 2;
    }
    int batches[MAX_SWEEP], seqs[MAX_SWEEP], n_batches = 2, n_seqs = 1;
    batches[0] = 1, batches[1] = batch, seqs[0] = max_seq > 0 ? max_seq : squad ? 384 : 128;
    if (batch == 1) n_batches = 1;
    if ((batch_list && !parse_sizes("batch_sizes", batch_list, batches, &n_batches)) ||
        (seq_list && !parse_sizes("seq_lengths", seq_list, seqs, &n_seqs)))
        return 2;
    if (flags_use_device("bench_infer", device, tf32) != 0) return 2;
    if (bf16 && int8) return fprintf(stderr, "bert bench_infer: give at most one of --bf16 and --int8\n"), 2;
    if (int8 && flags_int8("bench_infer") != 0) return 2;
    if (int8 && plain_weights)
        return fprintf(stderr, "bert bench_infer: --plain_weights: int8 weights exist only packed\n"), 2;
    if (threads > 0) omp_set_num_threads(threads);
    int max_batch = 1, top_seq = 1;
    for (int i = 0; i < n_batches; i++) max_batch = batches[i] > max_batch ? batches[i] : max_batch;
    for (int i = 0; i < n_seqs; i++) top_seq = seqs[i] > top_seq ? seqs[i] : top_seq;
    const BertPrecision precision = bf16 ? BERT_BF16 : int8 ? BERT_INT8 : BERT_FP32;
    const bool gpu = strcmp(k_backend_name(), "cpu") != 0;
    const double peak = measure_peak(precision, max_batch * top_seq, gpu);   /* before the model: out of the peak RSS */
    BertError err;
    BertConfig cfg;
    Vocab *v = NULL;
    BertModel *m = NULL;
    if ((init ? 0 : config ? bert_config_load(config, &cfg, &err) : bert_config_preset(preset ? preset : "bert-base", &cfg, &err)) ||
        (task && vocab_load(&v, vocab_file, &err) != 0)) {
        fprintf(stderr, "bert bench_infer: %s\n", err.msg);
        vocab_free(v);
        return 1;
    }
    TokenizerOptions to = tokenizer_default_options();
    to.do_lower_case = lower, to.max_input_chars_per_word = squad ? 200 : 100;
    Tokenizer *tok = v ? tokenizer_new(v, &to) : NULL;
    if (init)
        rc = bert_open_checkpoint(&m, init, config, (BertHeads){BERT_HEADS_NONE, 0}, max_batch, top_seq, 0, NULL, &err);
    else if ((rc = bert_model_create_with_heads(&m, &cfg, (BertHeads){BERT_HEADS_NONE, 0}, max_batch, top_seq, 0,
                                                 &err)) == 0)
        bert_init_weights(m, 1);
    if (rc == 0) rc = bert_set_precision(m, precision, &err);
    if (rc == 0) {   /* a server's model: its layers share their activations (not with --unfused: no fusing) */
        bert_set_packed_weights(m, !plain_weights);
        bert_set_mode(m, unfused ? BERT_MODE_FULL : BERT_MODE_FORWARD_ONLY);
    }
    const char *name = squad ? squad : glue ? glue : text_file ? text_file : "fixed";
    const LengthSource src = {glue, data_dir, squad, text_file, tok, latency_sequences};
    for (int si = 0; rc == 0 && si < n_seqs; si++) {
        int32_t *lengths = NULL;
        int n = 0;
        rc = task_lengths(&src, seqs[si], max_batch, &lengths, &n, &err);
        long real = 0;
        for (int i = 0; rc == 0 && i < n; i++) real += lengths[i];
        if (rc == 0 && !json)
            printf("bert bench_infer: %s, %d sequences (mean %.1f of %d tokens), %s %s, %d threads; weights %s, "
                   "feed-forward product and GELU %s\n", name, n, (double)real / n, seqs[si],
                   init ? init : config ? config : preset ? preset : "bert-base", bert_precision_name(precision),
                   omp_get_max_threads(), plain_weights ? "plain" : "packed",
                   plain_weights || unfused ? "in two passes" : "fused");
        if (rc == 0 && !json && si == 0)
            printf("bert bench_infer: the %s%s GEMM peak, measured now: %.1f %s (the linear layers' rate below is "
                   "over the whole forward's time)\n", gpu ? "device's " : "",
                   precision == BERT_BF16 ? "bf16" : precision == BERT_INT8 ? "int8" : "fp32", peak,
                   precision == BERT_INT8 ? "GOP/s" : "GFLOP/s");
        for (int bi = 0; rc == 0 && bi < n_batches; bi++)
            for (InferMode mode = INFER_PADDED; rc == 0 && mode <= (task ? INFER_PACKED : INFER_PADDED); mode++) {
                InferTiming t;   /* batch 1 runs a part; at fixed shapes the three modes are one */
                const int count = batches[bi] == 1 && latency_sequences < n ? latency_sequences : n;
                rc = infer_bench_run(m, lengths, count, batches[bi], seqs[si], mode, warmup, &t, &err);
                if (rc == 0)
                    report(name, seqs[si], batches[bi], mode, &t, json, linear_ops_per_row(bert_model_config(m)), peak);
            }
        free(lengths);
    }
    if (rc != 0) fprintf(stderr, "bert bench_infer: %s\n", err.msg);
    bert_model_free(m);
    tokenizer_free(tok), vocab_free(v);
    return rc ? 1 : 0;
}
