/* One training step, written once: pre-training (train/pretrain.c), fine-tuning
 * (train/finetune.c, for GLUE and SQuAD), `bert bench` and `bert train_demo` all step
 * through here.
 *
 * A step is:
 *   zero the gradients (and set the fp16 loss scale)
 *   for each micro-batch the caller's source gives (up to `accumulation`):
 *       forward (training) -> [after_forward: the caller reads outputs, e.g. accuracy]
 *       -> [before_backward] backward [after_backward: e.g. wait for a gradient reduction]
 *   gradients x 1/accumulation (NVIDIA divides each micro-batch's loss by the count; an
 *       epoch's short last step is divided by it too, as NVIDIA's scripts do)
 *   fp16: unscale, and skip the step when any gradient is not finite (optim/loss_scaler.h)
 *   the optimizer at the schedule's rate for the steps done -> [after_update: e.g. the
 *       sharded optimizer's parameter all-gather] -> the model told its weights changed.
 *
 * The caller supplies batches and reads what it wants between the calls; it never calls
 * the optimizer or bert_params_changed itself. */
#ifndef BERT_TRAIN_TRAINER_H
#define BERT_TRAIN_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"
#include "model/bert.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "train/schedulers.h"

typedef struct {
    OptimizerConfig optimizer;
    const OptimizerShard *shard;   /* ZeRO-1 across processes; NULL: this process holds it all */
    Schedule schedule;
    int accumulation;              /* micro-batches per step (>= 1) */
    bool loss_scaling;             /* fp16: the backward computes scale x loss */
    double loss_scale;             /* the starting scale (loss_scaling only) */
    bool dynamic_loss_scale;       /* false: loss_scale never changes */
} TrainerOptions;

/* What the caller plugs in; every function but next_batch may be NULL. */
typedef struct {
    void *ctx;
    /* Micro-batch `micro` (0-based) of the step: 1 with *b and the dropout key set, 0 when
     * the step has no more (an epoch's end; never for micro 0), -1 on an error (err set). */
    int (*next_batch)(void *ctx, int micro, BertBatch *b, uint64_t *dropout_key, BertError *err);
    /* After a micro-batch's forward, before its backward: the outputs are readable (their
     * time is not counted as the model's). */
    void (*after_forward)(void *ctx, int micro, const BertBatch *b, float loss);
    void (*before_backward)(void *ctx, int micro);
    void (*after_backward)(void *ctx, int micro);
    /* The global gradient norm when this process holds only part of the reduced gradient
     * (a sharded optimizer); NULL: the norm of the whole gradient here. */
    double (*grad_norm)(void *ctx);
    void (*after_update)(void *ctx);
} TrainerHooks;

typedef struct {
    int micro_batches;
    long sequences;                /* rows of the step's micro-batches */
    double loss;                   /* the sum of the micro-batches' loss / accumulation */
    double lr;                     /* the rate the step used (or would have, when skipped) */
    double grad_norm;              /* before clipping; not finite when skipped */
    bool skipped;                  /* fp16: the gradients overflowed, no update (scale backed off) */
    double forward_seconds, backward_seconds, update_seconds;   /* the model's time (hooks' included
                                                                    but for next_batch / after_forward) */
} TrainerStep;

typedef struct Trainer Trainer;

/* Over the model's parameter table; the model must outlive the trainer. */
int trainer_create(Trainer **out, BertModel *m, const TrainerOptions *o, BertError *err);
void trainer_free(Trainer *t);

/* One step. -1 (err set, without the step's number: the caller knows it) when a loss or,
 * without loss scaling, the gradient is not finite, when the backward fails, when a batch
 * cannot be made, or after LOSS_SCALER_MAX_OVERFLOWS_IN_A_ROW skipped steps in a row. */
int trainer_step(Trainer *t, const TrainerHooks *h, TrainerStep *out, BertError *err);

/* Optimizer steps done (the schedule's position); skipped steps do not count. */
long trainer_steps_done(const Trainer *t);
/* The optimizer's state (checkpoints: save, load, the step count of a new phase) and the
 * loss scaler's (NULL without loss scaling), owned by the trainer. */
Optimizer *trainer_optimizer(Trainer *t);
LossScaler *trainer_loss_scaler(Trainer *t);
/* The scale the backward multiplies the loss by (1 without loss scaling). */
double trainer_loss_scale(const Trainer *t);
long trainer_skipped_steps(const Trainer *t);

#endif
