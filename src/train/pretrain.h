/* Pre-training from HDF5 shards: what NVIDIA's run_pretraining.py does, on the CPU.
 *
 * One optimizer step = gradient_accumulation_steps micro-batches of
 * train_batch_size / gradient_accumulation_steps sequences (each micro-batch's loss is
 * averaged, and the step's gradient is the mean over its micro-batches, as NVIDIA divides
 * each micro-batch's loss by the accumulation count) -> [all-reduce across processes] ->
 * [loss-scale check] -> optimizer (LAMB clips the global gradient norm to 1.0 itself; AdamW
 * gets the same clipping first) -> the learning rate of NVIDIA's PolyWarmUpScheduler.
 *
 * Steps are counted per phase, as NVIDIA does: phase 2 starts from phase 1's newest
 * checkpoint (--resume_from_checkpoint --phase2 --phase1_end_step N) at step 0 with phase
 * 1's weights and optimizer moments, its own schedule and its own shards; its checkpoints
 * are named by N + its step. Everything a run depends on is a function of (seed, step,
 * data position), so a run stopped at any checkpoint and resumed gives the same losses and
 * weights, bit for bit, as one that was never stopped. */
#ifndef BERT_TRAIN_PRETRAIN_H
#define BERT_TRAIN_PRETRAIN_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "train/comm.h"

typedef struct {
    /* data */
    const char *input_dir;          /* HDF5 shards ("training" in their names) */
    const char *eval_dir;           /* held-out shards ("test" in their names); NULL: input_dir */
    int max_seq_length, max_predictions_per_seq;
    bool dynamic_masking;           /* new 80/10/10 masks each time a sequence is read */
    /* model */
    const char *config_file;        /* HF config.json, or */
    const char *bert_model;         /* a preset name (bert-tiny ... bert-large); neither: the config.json
                                     * or bert_config.json beside init_checkpoint's weights */
    const char *init_checkpoint;    /* the weights to start from (any format model/bert.h reads) */
    /* the tokenizer the shards were made with, carried by every checkpoint (vocab.txt,
     * tokenizer_config.json) so that it is a model folder that stands alone: vocab_file NULL:
     * the resumed checkpoint's or --init_checkpoint's folder's vocab.txt, else the bundled
     * bert-base-uncased vocabulary (`prepare`'s default) when the model has its size;
     * do_lower_case < 0: that folder's tokenizer_config.json, else the vocabulary's casing */
    const char *vocab_file;
    int do_lower_case;
    /* optimisation */
    const char *optimizer;          /* "lamb" (default) or "adamw" */
    int train_batch_size;           /* sequences per optimizer step per process */
    int gradient_accumulation_steps;
    double learning_rate, warmup_proportion;
    long max_steps, steps_this_run; /* steps_this_run <= 0: up to max_steps */
    long seed;
    /* phases, checkpoints */
    const char *output_dir;
    bool phase2;
    long phase1_end_step;           /* required with phase2 (>= 0); -1 by default */
    bool resume_from_checkpoint;
    long resume_step;               /* < 0: the newest complete checkpoint */
    long num_steps_per_checkpoint;
    int keep_checkpoints;           /* the newest N are kept (NVIDIA keeps 3) */
    bool skip_checkpoint;
    /* evaluation and logging */
    long eval_steps;                /* <= 0: no evaluation during training */
    int eval_batches;               /* batches of held-out data per evaluation (<= 0: all) */
    long log_freq;
    const char *json_summary;       /* DLLogger JSON lines; NULL: none */
    bool disable_progress_bar;
    int threads;                    /* <= 0: OpenMP's default */
    bool strict;                    /* refuse loaded weights with NaN/Inf values (else: a warning) */
    bool check_shards;              /* read and validate every shard first, each in a child process */
    /* precision of the matrix products: FP32 (0), BF16 (refused without bf16 instructions),
     * BF16_EMULATED, FP16 (with loss scaling). The fp32 master weights, optimizer state and
     * checkpoints are the same in every precision. */
    BertPrecision precision;
    double init_loss_scale;         /* fp16, dynamic scaling: the first scale (NVIDIA: 2^20) */
    double loss_scale;              /* fp16: > 0 a static scale instead (NVIDIA's --loss_scale) */
    /* data parallelism over MPI (train/comm.h, train/grad_sync.h; docs/distributed.md): each
     * process reads its share of the shards; gradients are averaged across processes in
     * buckets while the backward runs, after every micro-batch or (post accumulation) once
     * per step; train_batch_size stays per process, so the global batch is P times it */
    bool allreduce_post_accumulation;
    enum CommWire allreduce_wire;   /* post accumulation: gradients sent as fp32 (0), fp16 or bf16 */
    bool shard_optimizer;           /* ZeRO-1: each process holds and updates 1/P of the optimizer state */
    double bucket_cap_mb;           /* gradient bucket size (DDP's default 25) */
    double comm_timeout;            /* seconds a collective may wait before the job is ended */
    bool consecutive_micro_batches; /* NVIDIA's micro-batches as read, not dealt by work (train/step_batches.h) */
} PretrainOptions;

typedef struct {
    long first_step, last_step;     /* phase steps this run started at and reached */
    long sequences;                 /* sequences trained on in this run */
    long tokens;                    /* of those, real tokens (not padding), over all processes */
    double seconds, sequences_per_second, tokens_per_second;
    double model_seconds;           /* of those, inside forward, backward and the optimizer: the rest
                                       is the loop's own cost (data, logging, evaluation, checkpoints) */
    double mean_loss, final_loss;   /* mean over this run's steps, and of the last step */
    double final_mlm_accuracy;      /* of the last evaluation, or NAN */
    long skipped_steps;             /* fp16: steps skipped for gradient overflow (whole run, resumed included) */
    double loss_scale;              /* fp16: the scale at the end */
    int processes, rank;            /* data-parallel processes (1 without mpirun), this one's rank */
    double comm_exposed_seconds;    /* waiting for gradient reductions the backward did not hide (per step, the
                                       least any process waited: the one that finished its backward last) */
    double comm_imbalance_seconds;  /* waiting beyond that for slower processes (per step, the most minus the least) */
    double comm_bytes;              /* gradient bytes this process sent into reductions */
    double work_spread;             /* per step, the busiest process's work over the mean (1: even), averaged */
    double work_spread_consecutive; /* the same had the micro-batches not been dealt (train/step_batches.h) */
    bool stopped_by_signal;
    bool already_finished;          /* issue 35, D13: resumed at --max_steps; nothing was run or written */
    int phase;                      /* 1 or 2 */
    char last_checkpoint[4096];     /* "" when none was written */
} PretrainSummary;

/* NVIDIA's defaults where they apply (phase 1: seq 128, 20 predictions, LAMB, lr 6e-3,
 * warmup 0.2843, 7038 steps, checkpoints every 200 steps, seed 42). */
void pretrain_default_options(PretrainOptions *o);

/* Runs (or resumes) the training. Returns 0 on success, including a stop by SIGTERM/SIGINT
 * after which a checkpoint was written (summary->stopped_by_signal); -1 with err filled. */
int pretrain_run(const PretrainOptions *o, PretrainSummary *summary, BertError *err);

#endif
