/* `bert bench`'s measurement: training steps (through train/trainer.h, AdamW or LAMB at a
 * constant rate) and inference forwards of a model configuration on one synthetic batch
 * (train/synthetic.h), timed step by step, with the FLOP formula's counts (bert_train_flops,
 * bert_infer_flops) and the derived rates a report prints. The machine's GEMM peaks to compare
 * against are measured by the caller (bench/sgemm_peak.h), before the model exists, so that
 * their buffers stay out of the peak RSS reported here. */
#ifndef BERT_TRAIN_MODEL_BENCH_H
#define BERT_TRAIN_MODEL_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "model/bert.h"
#include "model/config.h"
#include "optim/optimizer.h"

typedef struct {
    int batch, seq, preds;          /* the synthetic batch: sequences, length, masked slots each */
    int steps, infer_steps;         /* timed training steps and inference batches (0: none) */
    int warmup;                     /* untimed steps before each measurement */
    double pad_fraction;            /* mean fraction of padding tokens, in [0, 0.5) */
    double learning_rate;
    uint64_t seed;                  /* weights, inputs and dropout */
    OptimizerKind optimizer;        /* AdamW as the PyTorch peer runs it (no clipping), or LAMB as
                                       bert pretrain does (NVIDIA's defaults) */
    BertPrecision precision;
    bool full_last_layer;           /* train without last-layer pruning */
    bool all_rows;                  /* train on every row: no unpadding, no pruning */
    bool plain_weights;             /* the forward reads the plain weights, not the packed copy */
    bool unfused;                   /* inference: the feed-forward's product and GELU in two passes */
    bool kernel_profile;            /* the timed training steps' kernels profiled (k_profile_*, kernels/backend.h); inference alone (steps 0): its batches' */
    /* Progress, each may be NULL: `started` once the model and its batch exist (before the
     * optimizer's state); `train_step` after every training step, warm-up ones included. */
    void *ctx;
    void (*started)(void *ctx);
    void (*train_step)(void *ctx, int step, bool timed, double seconds, double loss);
} ModelBenchOptions;

typedef struct {
    int steps;                      /* timed */
    double total_s, best_s, forward_s, backward_s, optimizer_s;
    double cpu_s;                   /* process CPU time (all threads): the work done, whatever else runs */
    float first_loss, last_loss;    /* training: of the first step (warm-up included) and the last */
    int last_layer_rows;            /* training: rows the last layer ran on after attention */
    int encoder_rows;               /* training: rows the encoder ran on */
    double executed_flops;          /* per step, what the last one ran (inference runs every row:
                                       the formula's) */
    double int8_product_thread_s;   /* inference in int8: the timed batches' products alone
                                       (k_int8_product_counters: thread-seconds, all threads) */
    double int8_product_ops;        /* and their operations */
} ModelBenchTiming;

typedef struct {
    size_t params;
    size_t model_bytes;             /* the model's buffers, and the optimizer's when training */
    size_t peak_rss;                /* of the process, after the measurements */
    int real_tokens;                /* of the batch's batch x seq */
    double train_flops, infer_flops;/* per step, the formula's (model FLOPs) */
    ModelBenchTiming train, infer;
} ModelBenchResult;

/* Creates the model for cfg, then times o->warmup + o->steps training steps and
 * o->warmup + o->infer_steps inference forwards. -1 (err set) when the model cannot be made
 * or a step fails ("training step N: ..."). */
int model_bench_run(const BertConfig *cfg, const ModelBenchOptions *o, ModelBenchResult *r, BertError *err);

/* What a report prints of one timing (0 where nothing was timed). */
typedef struct {
    double seq_per_s;
    double ms_per_step, best_ms, forward_ms, backward_ms, optimizer_ms, cpu_ms;   /* means but best_ms */
    double gflops;                  /* executed FLOPs per second: what the machine did */
    double percent_of_peak;         /* gflops against the peak given (0 without one) */
    double formula_gflops;          /* the formula's FLOPs per second */
    double gflop_per_seq;           /* executed, per sequence */
    double formula_gflop_per_seq;
    double percent_fewer;           /* executed FLOPs below the formula's */
} ModelBenchRates;

/* The rates of a timing (r.train with r.train_flops, r.infer with r.infer_flops) for
 * batches of `batch` sequences, against peak_gflops (the peak of the arithmetic the
 * products ran in; <= 0: none). */
void model_bench_rates(const ModelBenchTiming *t, double formula_flops, int batch, double peak_gflops,
                       ModelBenchRates *out);

#endif
