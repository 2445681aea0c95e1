/* bert train_demo: a short training run of a small BERT (bert-tiny's layers with a 256-token
 * vocabulary by default) with MLM + NSP and AdamW on generated data (train/demo.h), printing
 * step, loss, throughput and ETA, then saving a safetensors checkpoint (HF names) and its
 * config.json atomically. Pre-training on real text is `bert pretrain`. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "model/config.h"
#include "train/demo.h"
#include "train/synthetic.h"

typedef struct {
    const char *model, *out;
    int steps, batch, seq, preds, log_every, threads, vocab_size;
    long long seed;
    float lr;
} DemoOptions;

static void print_started(void *ctx, size_t parameters) {
    const DemoOptions *o = ctx;
    printf("model %s: %zu parameters; batch %d x seq %d, %d masked slots; %d steps, %d threads\n", o->model,
           parameters, o->batch, o->seq, o->preds, o->steps, omp_get_max_threads());
}

static void print_progress(void *ctx, const TrainDemoProgress *p) {
    printf("step %5d/%d  loss %.4f (mlm %.4f, nsp %.4f)  lr %.2e  %.1f seq/s  elapsed %.1fs  ETA %.1fs\n", p->step,
           p->steps, p->loss, p->mlm_loss, p->nsp_loss, p->lr, p->seq_per_s, p->elapsed_s, p->eta_s);
    fflush(stdout);
}

int cmd_train_demo(int argc, char **argv) {
    DemoOptions o = {.model = "bert-tiny", .out = "out/train_demo/model.safetensors", .steps = 300, .batch = 32,
                     .seq = 32, .preds = 5, .log_every = 25, .threads = 0, .seed = 42, .lr = 2e-3f,
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
    const TrainDemoOptions to = {.config = cfg, .out = o.out, .steps = o.steps, .batch = o.batch, .seq = o.seq,
                                 .preds = o.preds, .log_every = o.log_every, .seed = (uint64_t)o.seed, .lr = o.lr,
                                 .ctx = &o, .started = print_started, .progress = print_progress};
    TrainDemoResult r;
    if (train_demo_run(&to, &r, &err)) {
        fprintf(stderr, "bert train_demo: %s\n", err.msg);
        return 1;
    }
    printf("saved %s and %s\n", o.out, r.config_path);
    return 0;
}
