/* Fine-tuning a task head on a pre-trained encoder, as NVIDIA's run_glue.py / run_squad.py
 * and HuggingFace's Trainer do: the weights from --init_checkpoint (a safetensors file or a
 * folder with model.safetensors + config.json: a HuggingFace model folder or a `bert
 * pretrain` checkpoint; a `bert pretrain` run folder is made its newest checkpoint by the
 * command, train/checkpoint.h's checkpoint_resolve_model; the task head, absent there, drawn
 * from the seed), AdamW (decoupled
 * weight decay on matrices only, the gradient's global norm clipped to 1), the learning rate
 * warmed up linearly over warmup_proportion of the steps and then decayed linearly to 0
 * (NVIDIA's LinearWarmUpScheduler: train/schedulers.h), gradient accumulation, all through
 * the one training step of train/trainer.h. Each sequence's real tokens only run through the
 * encoder (bert_set_unpadding). In FP16 the loss is scaled
 * dynamically (optim/loss_scaler.h) as NVIDIA's run_squad.py / run_glue.py do with apex's
 * dynamic scaling (initial scale 2^16): a step whose gradients overflowed is skipped.
 *
 * The task (tasks/glue_run.c, tasks/squad_run.c) makes the batches and reads the outputs;
 * this file owns the model, the trainer and the training loop. */
#ifndef BERT_TRAIN_FINETUNE_H
#define BERT_TRAIN_FINETUNE_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "train/logger.h"

/* What every fine-tuning command takes, with NVIDIA's run_glue.py / run_squad.py names
 * (cli/finetune_flags.h makes them flags); the task adds its own data and settings. */
typedef struct {
    const char *init_checkpoint, *config_file, *output_dir;
    const char *vocab_file;    /* NULL: the --init_checkpoint folder's vocab.txt */
    int do_lower_case;         /* 1 or 0; < 0 (the default): what the model folder says (finetune_prepare_args) */
    bool do_train, do_eval, do_predict;
    bool overwrite_output_dir; /* --do_train into a folder holding a finished run (model.safetensors) */
    int max_seq_length, train_batch_size, eval_batch_size, gradient_accumulation_steps;
    double learning_rate, num_train_epochs, warmup_proportion, weight_decay, adam_epsilon;
    long max_steps;            /* > 0: overrides the epochs */
    long seed, log_freq;
    int threads;
    BertPrecision precision;
    double loss_scale;         /* --fp16: 0 dynamic, > 0 static (NVIDIA's --loss_scale) */
    bool skip_checkpoint;      /* do not save the fine-tuned model */
    bool strict;               /* refuse --init_checkpoint weights holding NaN or Inf (else a warning) */
    const char *json_summary;  /* DLLogger JSON lines */
    /* HuggingFace Trainer's names: */
    long eval_steps;           /* > 0 (with --do_train and --do_eval): evaluate every N optimizer steps */
    bool save_best;            /* with eval_steps: OUTPUT_DIR/best/ holds the best evaluation's model */
    long save_steps;           /* > 0: a checkpoint OUTPUT_DIR/checkpoint-<step>/ every N steps (and on SIGTERM) */
    int save_total_limit;      /* the checkpoints kept (default 2; <= 0: all) */
    const char *resume_from_checkpoint;   /* NULL: start afresh; "": the newest complete checkpoint-<step> in
                                             output_dir (none yet: start afresh); else that checkpoint folder */
} FinetuneArgs;

/* The two scripts' common defaults: batch 32 in one micro-batch, AdamW at 5e-5 with decay
 * 0.01 and epsilon 1e-6, 3 epochs, 10% warmup, a log line every 50 steps, seed 42; the
 * vocabulary and the casing the model folder's. */
void finetune_default_args(FinetuneArgs *a);
/* The checks every task makes that read no file: the flags named, something to do, batch sizes. */
int finetune_check_args(const FinetuneArgs *a, BertError *err);

/* What the model folder gives a run that did not say (finetune_prepare_args). */
typedef struct {
    char vocab_file[4096 + 32];   /* --vocab_file, else the --init_checkpoint folder's vocab.txt */
    bool do_lower_case;           /* --do_lower_case, else its tokenizer_config.json, else its vocabulary's casing */
    char note[1024];              /* "warning: ..." (the flag contradicts the folder) or "note: ..." (the casing
                                     guessed from the vocabulary) for the run's log; "" when none */
} FinetuneInputs;

/* Everything a run needs checked before any work (in the first second, before the output
 * folder is made): finetune_check_args; the checkpoint (a folder with model.safetensors and
 * config.json, or a weights file with --config_file), its configuration, the vocabulary (as
 * many tokens as the model's) and --max_seq_length within the model's positions; the output
 * folder (a folder if it exists, and with --do_train no finished run's, model.safetensors,
 * unless overwrite_output_dir). The task checks its own data files as well. Fills `in`
 * with the vocabulary and casing the run uses (io/tokenizer_files.h's rules). */
int finetune_prepare_args(const FinetuneArgs *a, FinetuneInputs *in, BertError *err);
/* The run's optimizer steps over n_rows training rows: max_steps, else the epochs' steps
 * (each epoch's last step may be short). */
long finetune_total_steps(const FinetuneArgs *a, long n_rows);
/* The most rows a batch holds: a training micro-batch or an evaluation batch. */
int finetune_max_batch(const FinetuneArgs *a);

typedef struct {
    const char *init_checkpoint;    /* required */
    const char *vocab_file;         /* the run's vocabulary, copied into saved model folders (NULL: none) */
    bool do_lower_case;             /* the run's casing, for the saved folders' tokenizer_config.json */
    const char *config_file;        /* NULL: init_checkpoint's folder's config.json */
    BertHeads heads;
    int max_batch, max_seq_length;
    double learning_rate, warmup_proportion, weight_decay, adam_epsilon;
    long total_steps;               /* optimizer steps of the whole run (the schedule's length) */
    int gradient_accumulation_steps;
    int train_batch_size;           /* rows per step, over gradient_accumulation_steps micro-batches */
    long log_freq;                  /* a log line every log_freq steps */
    long seed;
    BertPrecision precision;
    double loss_scale;              /* FP16 only: 0 dynamic (from 2^16, GradScaler's rule), > 0 static */
    bool strict;                    /* refuse NaN/Inf weights */
    int vocab_size_expected;        /* > 0: the vocabulary file's size, which the checkpoint must match */
    bool forward_only;              /* no training in this run (predict / evaluate only): the layers
                                       share their activations (BERT_MODE_FORWARD_ONLY) */
    const char *output_dir;         /* where checkpoints and best/ go (eval_steps, save_steps) */
    long eval_steps, save_steps;    /* as FinetuneArgs's */
    bool save_best;
    int save_total_limit;
    const char *resume_from_checkpoint;
} FinetuneOptions;

typedef struct Finetuner Finetuner;

/* Loads the weights and prepares the optimizer; says where the weights came from in `what`. */
int finetune_open(Finetuner **out, const FinetuneOptions *o, char *what, size_t what_size, BertError *err);
/* finetune_open for a task's command: the options from the args (the vocabulary and casing
 * from `in`), a model for micro-batches and evaluation batches, the checkpoint's vocabulary
 * checked against vocab_size, no training state unless a->do_train. */
int finetune_open_args(Finetuner **out, const FinetuneArgs *a, const FinetuneInputs *in, BertHeads heads,
                       long total_steps, int vocab_size, char *what, size_t what_size, BertError *err);
void finetune_close(Finetuner *f);
BertModel *finetune_model(Finetuner *f);
const BertConfig *finetune_config(const Finetuner *f);

/* The task's side of training: its training rows (features), and a batch of any of them. */
typedef struct {
    int n_rows;
    const char *rows;              /* what a row is, for the log ("examples", "features") */
    /* The n rows `rows` (indices below n_rows) as one training batch, with their labels. The
     * batch's memory is the task's and may be reused at the next call. */
    BertBatch (*make_batch)(void *ctx, const int *rows, int n);
    /* Evaluation during training (the options' eval_steps): the task's metrics on its
     * validation data as a JSON object's text (caller frees), NULL with err set on an error;
     * `metric` names the member that decides the best model (higher is better). NULL: the
     * task cannot evaluate. It only reads the model. */
    char *(*evaluate)(void *ctx, BertError *err);
    const char *metric;
    const char *config_json;       /* config.json's task members for the folders training saves
                                      (checkpoints, best/): finetune_save's extra_json */
    void *ctx;
    Logger *log;
} FinetuneData;

typedef struct {
    long steps, train_sequences;   /* sequences: those of this process's steps (a resumed run's since it resumed) */
    long skipped_steps;        /* fp16: steps skipped for an overflow */
    double loss_scale;         /* fp16: the scale at the end (1 otherwise) */
    double train_seconds, final_loss;   /* final_loss: the last step's */
    double mean_loss;          /* all_results.json's train_loss: the mean loss of this run's optimizer steps (a
                                  resumed run's since it resumed; fp16's skipped steps not counted); NAN: none */
    long resumed_step;         /* the checkpoint's step a resumed run started from (0: none) */
    long evaluations;          /* evaluations during training (eval_steps) */
    long best_step;            /* the best evaluation's step (0: none) and its metric */
    double best_metric;
    int stopped_by_signal;     /* the signal that stopped training early (0: none); then a checkpoint
                                  holds the state (last_checkpoint) and the task writes nothing more */
    char last_checkpoint[4096 + 64];   /* the last checkpoint-<step> written ("" if none) */
} FinetuneTrainResult;

/* Trains for the options' total_steps: each epoch the rows in a fresh order drawn from the
 * seed, each step up to gradient_accumulation_steps micro-batches of train_batch_size /
 * gradient_accumulation_steps rows (an epoch's last step may have fewer, as HF's Trainer
 * steps at each epoch's end), through the trainer (train/trainer.h); a log line every
 * log_freq steps with the loss, rate, throughput and time left, and a DLLogger record.
 *
 * As HuggingFace's Trainer (its flags' names):
 *  - every eval_steps steps (and at the last) d->evaluate: a log line and a DLLogger record
 *    {"eval_<metric>": ...}; with save_best, a better d->metric than before replaces
 *    OUTPUT_DIR/best/ (a model folder, finetune_save's, and best.json: {"step", "metric",
 *    "value"}), swapped in whole (load_best_model_at_end + metric_for_best_model, but the
 *    final model stays the last step's, as NVIDIA's scripts leave it);
 *  - every save_steps steps, OUTPUT_DIR/checkpoint-<step>/ (train/checkpoint.h: written
 *    whole or not at all; the last save_total_limit kept): the model folder, the optimizer's
 *    state (optimizer.safetensors) and trainer_state.json (step, data order position,
 *    dropout counter, loss scaler, best so far, the settings an exact resume needs, the
 *    other files' digests), written last;
 *  - resume_from_checkpoint: training goes on from a checkpoint exactly as if never stopped
 *    (the same final weights, byte for byte), refused when the settings differ;
 *  - with save_steps, SIGTERM / SIGINT / SIGHUP stop training after the step: a checkpoint,
 *    then 0 with res->stopped_by_signal set. */
int finetune_train(Finetuner *f, const FinetuneData *d, FinetuneTrainResult *res, BertError *err);

/* The fine-tuned model as HuggingFace names it, a folder that stands alone: dir/config.json,
 * carrying `extra_json` (a JSON object's members, e.g. the label map and architectures; NULL:
 * none), the tokenizer's files (io/tokenizer_files.h: vocab.txt, tokenizer_config.json; when
 * the options name a vocabulary) and dir/model.safetensors last, so that it marks a finished
 * run. Each file written atomically. */
int finetune_save(Finetuner *f, const char *dir, const char *extra_json, BertError *err);

/* config.json's task members as transformers writes them (a JSON object's text for
 * finetune_save; caller frees): architectures [architecture], finetuning_task, problem_type
 * (NULL: none), id2label / label2id over names[0..n) (NULL: one output named LABEL_0, a
 * regression's). */
char *finetune_task_config_json(const char *architecture, const char *task, const char *problem_type,
                                const char *const *names, int n);

/* What one fine-tuning command did, for dir/all_results.json (finetune_write_results). */
typedef struct {
    const FinetuneTrainResult *train;   /* NULL: no training */
    const char *eval_json;              /* the task's metrics, a JSON object (NULL: no evaluation) */
    long eval_samples, predict_samples; /* rows evaluated / predicted (0: none) */
    double eval_seconds, predict_seconds;
} FinetuneResults;

/* dir/all_results.json, written atomically, under HF Trainer's keys: train_runtime,
 * train_samples, train_steps, train_samples_per_second, train_loss (the mean loss of the run's
 * steps, FinetuneTrainResult's mean_loss, as HF's is its steps' mean); eval_<metric> for each of
 * the task's metrics, eval_runtime, eval_samples, eval_samples_per_second; the same for
 * predict_; peak_memory_mb (the process's peak resident memory) and runtime (the whole
 * command). Each command writes one, whatever --do_* it ran. */
int finetune_write_results(const char *dir, const FinetuneResults *r, double command_seconds, BertError *err);

#endif
