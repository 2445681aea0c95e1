/* `bert pretrain`: NVIDIA's run_pretraining.py in C (flags of the same names and meanings):
 * LAMB, PolyWarmUp schedule, accumulation, two phases, checkpoints that resume exactly. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "model/bert.h"
#include "train/pretrain.h"

int cmd_pretrain(int argc, char **argv) {
    PretrainOptions o;
    pretrain_default_options(&o);
    long long max_steps = o.max_steps, steps_this_run = o.steps_this_run, seed = o.seed;
    long long phase1_end_step = o.phase1_end_step, resume_step = LLONG_MIN;   /* not given: the newest */
    long long ckpt_every = o.num_steps_per_checkpoint, eval_steps = o.eval_steps, log_freq = o.log_freq;
    bool bf16 = false, bf16_emulate = false, fp16 = false, wire_fp16 = false, wire_bf16 = false;
    const char *device = NULL;
    bool tf32 = false;
    const Flag flags[] = {
        {"input_dir", FLAG_STRING, &o.input_dir, "folder of HDF5 shards ('training' in their names) (required)"},
        {"eval_dir", FLAG_STRING, &o.eval_dir, "held-out shards ('test' in their names); default --input_dir"},
        {"config_file", FLAG_STRING, &o.config_file,
         "HuggingFace config.json of the model; default, with --init_checkpoint, the config.json or bert_config.json "
         "beside its weights"},
        {"bert_model", FLAG_STRING, &o.bert_model, "or a preset: bert-tiny, -mini, -small, -medium, -base, -large"},
        {"output_dir", FLAG_STRING, &o.output_dir, "checkpoints go to OUTPUT_DIR/ckpt_<step>/ (required)"},
        {"init_checkpoint", FLAG_STRING, &o.init_checkpoint,
         "the weights to start from: a model folder or a checkpoint file (safetensors, NVIDIA's .pt, HF's .bin, "
         "TensorFlow)"},
        {"vocab_file", FLAG_STRING, &o.vocab_file,
         "the shards' vocabulary, copied into every checkpoint; default the resumed checkpoint's or --init_checkpoint's "
         "folder's vocab.txt, else the bundled bert-base-uncased one (prepare's default) when the model has its size"},
        {"do_lower_case", FLAG_TRIBOOL, &o.do_lower_case,
         "the shards' casing, for the checkpoints' tokenizer_config.json; default that folder's, else whether the "
         "vocabulary has upper-case tokens"},
        {"max_seq_length", FLAG_INT, &o.max_seq_length, "must match the shards; default 128"},
        {"max_predictions_per_seq", FLAG_INT, &o.max_predictions_per_seq, "must match the shards; default 20"},
        {"dynamic_masking", FLAG_BOOL, &o.dynamic_masking, "draw new 80/10/10 masks each time a sequence is read"},
        {"optimizer", FLAG_STRING, &o.optimizer, "lamb (default, NVIDIA's) or adamw"},
        {"train_batch_size", FLAG_INT, &o.train_batch_size, "sequences per optimizer step (per process); default 64"},
        {"gradient_accumulation_steps", FLAG_INT, &o.gradient_accumulation_steps,
         "micro-batches per step (train_batch_size / this sequences each); default 1"},
        {"learning_rate", FLAG_DOUBLE, &o.learning_rate, "peak learning rate; default 6e-3"},
        {"warmup_proportion", FLAG_DOUBLE, &o.warmup_proportion, "share of max_steps for linear warmup; default 0.2843"},
        {"max_steps", FLAG_INT64, &max_steps, "optimizer steps of this phase; default 7038"},
        {"steps_this_run", FLAG_INT64, &steps_this_run, "stop (with a checkpoint) after this many steps; default all"},
        {"seed", FLAG_INT64, &seed, "data order, initial weights and dropout; default 42"},
        {"phase2", FLAG_BOOL, &o.phase2, "phase 2: start from phase 1's newest checkpoint (with --resume_from_checkpoint)"},
        {"phase1_end_step", FLAG_INT64, &phase1_end_step, "phase 1's last step (phase-2 checkpoints are named past it); required with --phase2"},
        {"resume_from_checkpoint", FLAG_BOOL, &o.resume_from_checkpoint, "continue from the newest complete checkpoint"},
        {"resume_step", FLAG_INT64, &resume_step, "resume from this checkpoint step instead of the newest"},
        {"num_steps_per_checkpoint", FLAG_INT64, &ckpt_every, "checkpoint every N steps; default 200"},
        {"keep_checkpoints", FLAG_INT, &o.keep_checkpoints, "how many of this run's newest checkpoints to keep (another run's are never deleted); default 3"},
        {"skip_checkpoint", FLAG_BOOL, &o.skip_checkpoint, "write no checkpoints"},
        {"eval_steps", FLAG_INT64, &eval_steps, "evaluate on held-out shards every N steps (0: never)"},
        {"eval_batches", FLAG_INT, &o.eval_batches, "batches per evaluation (0: all held-out data); default 20"},
        {"log_freq", FLAG_INT64, &log_freq, "log every N steps; default 1"},
        {"json-summary", FLAG_STRING, &o.json_summary, "DLLogger JSON lines to this file (bert plot reads it)"},
        {"disable_progress_bar", FLAG_BOOL, &o.disable_progress_bar, "no redrawn progress line on a terminal"},
        {"threads", FLAG_INT, &o.threads, "OpenMP threads (0: all cores)"},
        {"device", FLAG_STRING, &device, FLAGS_DEVICE_HELP},
        {"tf32", FLAG_BOOL, &tf32, FLAGS_TF32_HELP},
        {"check_shards", FLAG_BOOL, &o.check_shards, "read and validate every shard first (each in a child process)"},
        {"strict", FLAG_BOOL, &o.strict, "refuse checkpoints whose weights hold NaN or Inf (default: a warning)"},
        {"bf16", FLAG_BOOL, &bf16, "mixed precision: matrix products in bf16, fp32 accumulation and master weights "
                                   "(needs avx512_bf16; refused without)"},
        {"bf16_emulate", FLAG_BOOL, &bf16_emulate, "the same bf16 rounding in fp32 arithmetic (any CPU; slow; tests)"},
        {"fp16", FLAG_BOOL, &fp16, "mixed precision with dynamic loss scaling: products' operands in fp16. This CPU has "
                                   "no fp16 arithmetic: fp16 storage, fp32 arithmetic (the scaling logic a GPU needs)"},
        {"init_loss_scale", FLAG_DOUBLE, &o.init_loss_scale, "fp16: the first dynamic loss scale; default 2^20 (NVIDIA's)"},
        {"loss_scale", FLAG_DOUBLE, &o.loss_scale, "fp16: a static loss scale instead (0: dynamic, the default)"},
        {"allreduce_post_accumulation", FLAG_BOOL, &o.allreduce_post_accumulation,
         "under mpirun: average the gradients once per step, not after every micro-batch"},
        {"allreduce_post_accumulation_fp16", FLAG_BOOL, &wire_fp16,
         "... sending them as fp16 (half the bytes; for --fp16 runs: small unscaled gradients would underflow)"},
        {"allreduce_post_accumulation_bf16", FLAG_BOOL, &wire_bf16, "... sending them as bf16 (half the bytes)"},
        {"shard_optimizer", FLAG_BOOL, &o.shard_optimizer,
         "under mpirun: each process holds and updates 1/P of the optimizer state (ZeRO-1; reduces once per step)"},
        {"bucket_cap_mb", FLAG_DOUBLE, &o.bucket_cap_mb, "gradients are reduced in buckets of this size; default 25"},
        {"consecutive_micro_batches", FLAG_BOOL, &o.consecutive_micro_batches,
         "micro-batches of consecutive rows as read (NVIDIA's), not the step's rows dealt so that every micro-batch "
         "and process has the same work (the default; docs/distributed.md)"},
        {"comm_timeout", FLAG_DOUBLE, &o.comm_timeout,
         "seconds a process waits for the others before it ends the job (a rank died or hangs); default 1800"},
    };
    const FlagSpec spec = {"pretrain", "pretrain --input_dir SHARDS --output_dir OUT [--bert_model bert-base | "
                                       "--config_file config.json | --init_checkpoint MODEL] [flags]   (NVIDIA "
                                       "run_pretraining.py's flags)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "input_dir,output_dir") != 0) return 2;
    if (flags_use_device("pretrain", device, tf32) != 0) return 2;
    char init_checkpoint[4096];   /* a run folder: its newest complete checkpoint, as every command takes it */
    if (o.init_checkpoint && flags_init_checkpoint("pretrain", &o.init_checkpoint, init_checkpoint,
                                                   sizeof init_checkpoint) != 0)
        return 2;
    if (bf16 + bf16_emulate + fp16 > 1) {
        fprintf(stderr, "bert pretrain: give one of --bf16, --bf16_emulate and --fp16\n");
        return 2;
    }
    if (wire_fp16 && wire_bf16) {
        fprintf(stderr, "bert pretrain: give one of --allreduce_post_accumulation_fp16 and _bf16\n");
        return 2;
    }
    o.allreduce_wire = wire_fp16 ? COMM_WIRE_FP16 : wire_bf16 ? COMM_WIRE_BF16 : COMM_WIRE_FP32;
    o.precision = bf16 ? BERT_BF16 : bf16_emulate ? BERT_BF16_EMULATED : fp16 ? BERT_FP16 : BERT_FP32;
    flags_note_gpu_fp32("pretrain", o.precision == BERT_FP32, tf32);
    o.max_steps = (long)max_steps, o.steps_this_run = (long)steps_this_run, o.seed = (long)seed;
    if (resume_step != LLONG_MIN && resume_step < 0) {
        fprintf(stderr, "bert pretrain: --resume_step %lld: a checkpoint's step is >= 0 (leave it out for the newest)\n",
                resume_step);
        return 2;
    }
    o.phase1_end_step = (long)phase1_end_step, o.resume_step = resume_step == LLONG_MIN ? -1 : (long)resume_step;
    o.num_steps_per_checkpoint = (long)ckpt_every, o.eval_steps = (long)eval_steps, o.log_freq = (long)log_freq;
    PretrainSummary s;
    BertError err;
    if (pretrain_run(&o, &s, &err) != 0) {
        fprintf(stderr, "bert pretrain: %s\n", err.msg);
        return 1;
    }
    if (s.rank != 0) return 0;   /* process 0 reports for the job */
    if (s.already_finished) {
        printf("bert pretrain: phase %d already finished at step %ld: nothing to do\n", s.phase, s.last_step);
        return 0;
    }
    printf("bert pretrain: steps %ld -> %ld, %ld sequences in %.1f s (%.2f seq/s, %.0f real tokens/s), mean loss %.4f, "
           "final loss %.4f", s.first_step, s.last_step, s.sequences, s.seconds, s.sequences_per_second,
           s.tokens_per_second, s.mean_loss, s.final_loss);
    if (!isnan(s.final_mlm_accuracy)) printf(", held-out MLM accuracy %.4f", s.final_mlm_accuracy);
    if (o.precision == BERT_FP16) printf(", loss scale %g, %ld steps skipped for fp16 overflow", s.loss_scale, s.skipped_steps);
    printf("\n");
    if (s.seconds > 0)
        printf("bert pretrain: %.1f%% of the time in the model and optimizer, %.1f%% in the loop (data, logs, "
               "evaluation, checkpoints)\n", 100 * s.model_seconds / s.seconds, 100 * (1 - s.model_seconds / s.seconds));
    if (s.processes > 1)
        printf("bert pretrain: %d processes; waiting for gradient reductions the backward did not hide: %.1f s in "
               "all (%.1f%% of the time); waiting for slower processes: %.1f s (%.1f%%); %.2f GB sent per process\n",
               s.processes, s.comm_exposed_seconds, s.seconds > 0 ? 100 * s.comm_exposed_seconds / s.seconds : 0,
               s.comm_imbalance_seconds, s.seconds > 0 ? 100 * s.comm_imbalance_seconds / s.seconds : 0,
               s.comm_bytes / 1e9);
    if (s.processes > 1)
        printf("bert pretrain: the busiest process's work over the mean, per step: %.3f (%.3f had the micro-batches "
               "not been dealt by work)\n", s.work_spread, s.work_spread_consecutive);
    if (s.last_checkpoint[0]) printf("bert pretrain: last checkpoint %s\n", s.last_checkpoint);
    if (s.stopped_by_signal && !o.skip_checkpoint)
        printf("bert pretrain: stopped by a signal after the checkpoint above; rerun with --resume_from_checkpoint "
               "to continue\n");
    else if (s.stopped_by_signal)   /* issue 35, D14: there is no checkpoint to continue from */
        printf("bert pretrain: stopped by a signal at step %ld; nothing was saved (--skip_checkpoint)\n", s.last_step);
    return 0;
}
