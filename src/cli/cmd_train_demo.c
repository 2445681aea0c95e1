/* bert train_demo: a short training run of a small BERT (bert-tiny's layers with a 256-token
 * vocabulary by default) with MLM + NSP and AdamW on generated data (the toy topic language
 * of train/synthetic.h, which a model can learn: with the defaults, 300 steps in ~30 s, the
 * MLM loss goes from ~5.4 to ~2.5 and NSP from 0.69 to ~0.3 after the usual plateau),
 * printing step, loss, throughput and ETA, then saving a safetensors checkpoint (HF names)
 * and its config.json atomically. Pre-training on real text is `bert pretrain`. */
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/bert.h"
#include "train/synthetic.h"
#include "train/trainer.h"

typedef struct {
    const char *model, *out;
    int steps, batch, seq, preds, log_every, threads, vocab_size;
    long long seed;
    float lr;
} DemoOptions;

static int save_outputs(BertModel *m, const BertConfig *cfg, const char *out) {
    BertError err;
    char cfg_path[4200];
    const char *slash = strrchr(out, '/');
    snprintf(cfg_path, sizeof cfg_path, "%.*sconfig.json", slash ? (int)(slash - out + 1) : 0, out);
    char dir[4200];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
    if (slash && slash != out && make_dirs(dir, &err)) {
        fprintf(stderr, "bert train_demo: %s\n", err.msg);
        return 1;
    }
    if (bert_save_safetensors(m, out, &err) || bert_config_save(cfg_path, cfg, &err)) {
        fprintf(stderr, "bert train_demo: %s\n", err.msg);
        return 1;
    }
    printf("saved %s and %s\n", out, cfg_path);
    return 0;
}

/* The trainer's batches (train/trainer.h): each step a fresh batch of the toy language. */
typedef struct {
    SyntheticBatch *d;
    const DemoOptions *o;
    BertModel *model;
    int step;
    double mlm_sum, nsp_sum;
} DemoSteps;

static int demo_batch(void *ctx, int micro, BertBatch *b, uint64_t *dropout_key, BertError *err) {
    DemoSteps *c = ctx;
    synthetic_batch_topics(c->d, (uint64_t)c->o->seed, c->step);
    *b = c->d->train;
    *dropout_key = rng_key((uint64_t)c->o->seed, (uint64_t)c->step);
    return 1;
}

static void read_losses(void *ctx, int micro, const BertBatch *b, float loss) {
    DemoSteps *c = ctx;
    c->mlm_sum += bert_last_mlm_loss(c->model), c->nsp_sum += bert_last_nsp_loss(c->model);
}

static int train(const DemoOptions *o, const BertConfig *cfg) {
    BertError err;
    BertModel *m;
    if (bert_model_create(&m, cfg, o->batch, o->seq, o->preds, &err)) {
        fprintf(stderr, "bert train_demo: %s\n", err.msg);
        return 1;
    }
    bert_init_weights(m, (uint64_t)o->seed);
    bert_set_last_layer_pruning(m, true);   /* pre-training reads only the heads' rows of the last layer */
    bert_set_unpadding(m, true);            /* and nothing past a sequence's last real token */
    printf("model %s: %zu parameters; batch %d x seq %d, %d masked slots; %d steps, %d threads\n", o->model,
           bert_num_parameters(m), o->batch, o->seq, o->preds, o->steps, omp_get_max_threads());
    SyntheticBatch d;
    synthetic_batch_alloc(&d, o->batch, o->seq, o->preds);
    /* AdamW (b1 0.9, b2 0.999, eps 1e-6, decay 0.01), the global gradient norm clipped to 1;
     * BERT's schedule: linear warmup over the first 10% of the steps, then linear decay to 0 */
    const TrainerOptions to = {.optimizer = optimizer_defaults(OPTIMIZER_ADAMW),
                               .schedule = {SCHEDULE_LINEAR_WARMUP, o->lr, 0.1, o->steps, 0}, .accumulation = 1};
    Trainer *trainer;
    if (trainer_create(&trainer, m, &to, &err)) {
        fprintf(stderr, "bert train_demo: %s\n", err.msg);
        synthetic_batch_free(&d);
        bert_model_free(m);
        return 1;
    }
    DemoSteps steps = {&d, o, m, 0, 0, 0};
    const TrainerHooks hooks = {.ctx = &steps, .next_batch = demo_batch, .after_forward = read_losses};
    double t0 = now_seconds(), loss_sum = 0;
    int window = 0, rc = 0;
    for (int step = 1; step <= o->steps && rc == 0; step++) {
        steps.step = step;
        TrainerStep s;
        if (trainer_step(trainer, &hooks, &s, &err)) {
            fprintf(stderr, "bert train_demo: step %d: %s\n", step, err.msg);
            rc = 1;
            break;
        }
        loss_sum += s.loss, window++;
        if (step % o->log_every == 0 || step == o->steps) {
            double el = now_seconds() - t0, rate = step * o->batch / el;
            printf("step %5d/%d  loss %.4f (mlm %.4f, nsp %.4f)  lr %.2e  %.1f seq/s  elapsed %.1fs  ETA %.1fs\n",
                   step, o->steps, loss_sum / window, steps.mlm_sum / window, steps.nsp_sum / window, s.lr, rate, el,
                   (o->steps - step) * o->batch / rate);
            fflush(stdout);
            loss_sum = steps.mlm_sum = steps.nsp_sum = 0, window = 0;
        }
    }
    if (rc == 0) rc = save_outputs(m, cfg, o->out);
    synthetic_batch_free(&d);
    trainer_free(trainer);
    bert_model_free(m);
    return rc;
}

int cmd_train_demo(int argc, char **argv) {
    DemoOptions o = {.model = "bert-tiny", .out = "out/train_demo/model.safetensors", .steps = 300, .batch = 32,
                     .seq = 32, .preds = 5, .log_every = 25, .threads = 0, .seed = 12345, .lr = 2e-3f,
                     .vocab_size = 256};
    const Flag flags[] = {
        {"model", FLAG_STRING, &o.model, "preset name (bert-tiny, bert-mini, ...) or a config.json"},
        {"vocab_size", FLAG_INT, &o.vocab_size, "vocabulary size (0 = the preset's; the data uses ids < 204)"},
        {"out", FLAG_STRING, &o.out, "checkpoint path (config.json is written beside it)"},
        {"steps", FLAG_INT, &o.steps, "optimizer steps"},
        {"batch", FLAG_INT, &o.batch, "sequences per step"},
        {"seq", FLAG_INT, &o.seq, "sequence length"},
        {"preds", FLAG_INT, &o.preds, "masked slots per sequence"},
        {"lr", FLAG_FLOAT, &o.lr, "peak learning rate (10% linear warmup, then linear decay)"},
        {"seed", FLAG_INT64, &o.seed, "seed for weights, data and dropout"},
        {"log_every", FLAG_INT, &o.log_every, "print every N steps"},
        {"threads", FLAG_INT, &o.threads, "OpenMP threads (0 = all cores)"},
    };
    const FlagSpec spec = {"train_demo", "train_demo [flags]   (a short training run of a small BERT on generated data)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if (o.steps < 1 || o.steps > 100000000 || o.batch < 1 || o.seq < 8 || o.preds < 1 || o.log_every < 1 ||
        !(o.lr > 0)) {
        fprintf(stderr, "bert train_demo: --steps must be in [1, 1e8], --batch, --preds, --log_every >= 1, --seq >= 8, "
                        "--lr > 0\n");
        return 2;
    }
    if (o.threads < 0 || o.threads > FLAGS_MAX_THREADS || o.vocab_size < 0) {
        fprintf(stderr, "bert train_demo: --threads must be in [0, %d], --vocab_size >= 0\n", FLAGS_MAX_THREADS);
        return 2;
    }
    const char *base = strrchr(o.out, '/') ? strrchr(o.out, '/') + 1 : o.out;
    if (!strcmp(base, "config.json")) {   /* the config written beside it would replace the checkpoint */
        fprintf(stderr, "bert train_demo: --out %s: the checkpoint cannot be named config.json (its config.json is "
                        "written beside it)\n", o.out);
        return 2;
    }
    if (o.threads > 0) omp_set_num_threads(o.threads);
    BertConfig cfg;
    BertError err;
    if (bert_config_resolve(o.model, &cfg, &err)) {
        fprintf(stderr, "bert train_demo: %s\n", err.msg);
        return 2;
    }
    if (o.vocab_size > 0) cfg.vocab_size = o.vocab_size;
    if (cfg.vocab_size < SYNTHETIC_TOPIC_VOCAB) {
        fprintf(stderr, "bert train_demo: the generated data needs vocab_size >= %d\n", SYNTHETIC_TOPIC_VOCAB);
        return 2;
    }
    return train(&o, &cfg);
}
