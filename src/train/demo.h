/* `bert train_demo`'s run: a short training run of a small BERT with MLM + NSP and AdamW on
 * generated data (the toy topic language of train/synthetic.h, which a model can learn: with
 * the command's defaults, 300 steps in ~30 s, the MLM loss goes from ~5.4 to ~2.5 and NSP from
 * 0.69 to ~0.3 after the usual plateau), through train/trainer.h, then a safetensors
 * checkpoint (HF names) and its config.json written atomically. Pre-training on real text is
 * train/pretrain.h. */
#ifndef BERT_TRAIN_DEMO_H
#define BERT_TRAIN_DEMO_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "model/config.h"

/* What the run reports every log_every steps and at the last: the means over the steps
 * since the previous report. */
typedef struct {
    int step, steps;
    double loss, mlm_loss, nsp_loss;
    double lr;                               /* the step's */
    double seq_per_s, elapsed_s, eta_s;      /* since the first step */
} TrainDemoProgress;

typedef struct {
    BertConfig config;      /* vocab_size >= SYNTHETIC_TOPIC_VOCAB */
    const char *out;        /* checkpoint path; config.json is written beside it (folders made) */
    int steps, batch, seq, preds, log_every;   /* >= 1, seq >= 8 */
    uint64_t seed;          /* weights, data and dropout */
    float lr;               /* peak: 10% linear warmup, then linear decay to 0 */
    /* Each may be NULL: once the model exists, and every log_every steps and at the last. */
    void *ctx;
    void (*started)(void *ctx, size_t parameters);
    void (*progress)(void *ctx, const TrainDemoProgress *p);
} TrainDemoOptions;

typedef struct {
    char config_path[4200];   /* the config.json written beside o->out */
} TrainDemoResult;

/* -1 (err set) when the model cannot be made, a step fails ("step N: ...") or the outputs
 * cannot be written. */
int train_demo_run(const TrainDemoOptions *o, TrainDemoResult *r, BertError *err);

#endif
