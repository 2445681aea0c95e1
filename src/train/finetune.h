/* Fine-tuning a task head on a pre-trained encoder, as NVIDIA's run_glue.py / run_squad.py
 * and HuggingFace's Trainer do: the weights from --init_checkpoint (a safetensors file or a
 * folder with model.safetensors + config.json: a HuggingFace model folder or a `bert
 * pretrain` checkpoint; the task head, absent there, drawn from the seed), AdamW (decoupled
 * weight decay on matrices only, the gradient's global norm clipped to 1), the learning rate
 * warmed up linearly over warmup_proportion of the steps and then decayed linearly to 0
 * (NVIDIA's LinearWarmUpScheduler: train/schedulers.h), gradient accumulation. Batches run
 * unpadded (each sequence's real tokens only through the encoder). In FP16 the loss is scaled
 * dynamically (optim/loss_scaler.h) as NVIDIA's run_squad.py / run_glue.py do with apex's
 * dynamic scaling (initial scale 2^16): a step whose gradients overflowed is skipped.
 *
 * The task (tasks/glue.h, tasks/squad.h) makes the batches and reads the outputs; this file
 * owns the model, the optimizer and the step. */
#ifndef BERT_TRAIN_FINETUNE_H
#define BERT_TRAIN_FINETUNE_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "train/logger.h"

typedef struct {
    const char *init_checkpoint;    /* required */
    const char *config_file;        /* NULL: init_checkpoint's folder's config.json */
    BertHeads heads;
    int max_batch, max_seq_length;
    double learning_rate, warmup_proportion, weight_decay, adam_epsilon;
    long total_steps;               /* optimizer steps of the whole run (the schedule's length) */
    int gradient_accumulation_steps;
    long seed;
    int precision;                  /* BertPrecision */
    double loss_scale;              /* FP16 only: 0 dynamic (from 2^16, GradScaler's rule), > 0 static */
    bool strict;                    /* refuse NaN/Inf weights */
    int vocab_size_expected;        /* > 0: the vocabulary file's size, which the checkpoint must match */
    bool forward_only;              /* no training in this run (predict / evaluate only): the layers
                                       share their activations (bert_set_forward_only) */
} FinetuneOptions;

typedef struct Finetuner Finetuner;

/* Loads the weights and prepares the optimizer; says where the weights came from in `what`. */
int finetune_open(Finetuner **out, const FinetuneOptions *o, char *what, size_t what_size, BertError *err);
void finetune_close(Finetuner *f);
BertModel *finetune_model(Finetuner *f);
const BertConfig *finetune_config(const Finetuner *f);

/* One micro-batch's forward and backward (training); *loss its loss. */
int finetune_micro_batch(Finetuner *f, const BertBatch *b, float *loss, BertError *err);
/* After gradient_accumulation_steps micro-batches: the update. Returns the learning rate used
 * (*grad_norm: the gradient's norm before clipping; not finite for an FP16 step skipped for
 * an overflow). */
double finetune_step(Finetuner *f, double *grad_norm);
long finetune_steps_done(const Finetuner *f);
/* FP16: steps skipped for an overflow (they do not count as steps done: the next batches
 * make the step again, as pre-training does) and the loss scale now; 0 and 1 otherwise. */
long finetune_skipped_steps(const Finetuner *f);
double finetune_loss_scale(const Finetuner *f);

/* A training run's progress for its log: the time it started, the sequences so far, and the
 * steps and loss since the last line. */
typedef struct {
    double start;
    long sequences;
    double window_loss;
    long window;
} FinetuneProgress;

/* After each update: every log_freq steps (and at the last) a line with the step, the mean
 * loss since the last line, the rate, the throughput and the time left, and the same as a
 * DLLogger record; a redrawn progress line in between. */
void finetune_report(const Finetuner *f, Logger *log, FinetuneProgress *p, long total_steps, long epoch,
                     long log_freq, double step_loss, long step_sequences, double lr, double grad_norm);

/* The fine-tuned model as HuggingFace names it: dir/model.safetensors + dir/config.json, the
 * config carrying `extra` (a JSON object's members, e.g. the label map and architectures;
 * NULL: none). Written atomically. */
int finetune_save(Finetuner *f, const char *dir, const char *extra_json, BertError *err);

#endif
