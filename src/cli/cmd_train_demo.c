/* bert train_demo: the Quick-start job until the real pre-training pipeline lands. Trains a
 * small BERT (bert-tiny's layers with a 256-token vocabulary by default) with MLM + NSP and
 * AdamW on generated data, printing step, loss, throughput and ETA, then saves a safetensors
 * checkpoint (HF names) and its config.json atomically.
 *
 * The generated "language" is learnable, so the loss visibly falls below what word
 * frequencies alone give: every document is about one of NUM_TOPICS topics and draws its
 * words from that topic's TOPIC_WORDS-word list, so a masked word is predictable from the
 * other words (MLM loss can fall from ln(NUM_WORDS) = 5.3 towards ln(TOPIC_WORDS) = 2.3);
 * segment B is either from A's document (NSP label 0, "is next") or from a random
 * document, nearly always of another topic (label 1). With the defaults (300 steps, ~30 s)
 * the MLM loss goes from ~5.4 to ~2.5 and NSP from 0.69 to ~0.3 after the usual plateau.
 */
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/rng.h"
#include "io/config.h"
#include "model/bert.h"
#include "optim/optimizer.h"

/* The demo's own small vocabulary: 4 special tokens, then the words. */
enum { TOK_PAD = 0, TOK_CLS = 1, TOK_SEP = 2, TOK_MASK = 3, FIRST_WORD = 4, NUM_TOPICS = 20, TOPIC_WORDS = 10,
       NUM_WORDS = NUM_TOPICS * TOPIC_WORDS };

typedef struct {
    int B, T, P;
    int32_t *ids, *types, *mask, *positions, *labels, *nsp;
    BertBatch batch;
} DemoBatch;

static void demo_batch_alloc(DemoBatch *d, int B, int T, int P) {
    *d = (DemoBatch){.B = B, .T = T, .P = P};
    d->ids = xcalloc((size_t)B * T, sizeof(int32_t)), d->types = xcalloc((size_t)B * T, sizeof(int32_t));
    d->mask = xcalloc((size_t)B * T, sizeof(int32_t)), d->positions = xcalloc((size_t)B * P, sizeof(int32_t));
    d->labels = xcalloc((size_t)B * P, sizeof(int32_t)), d->nsp = xcalloc(B, sizeof(int32_t));
    d->batch = (BertBatch){.batch = B, .seq_len = T, .max_predictions = P, .input_ids = d->ids,
                           .token_type_ids = d->types, .attention_mask = d->mask, .masked_positions = d->positions,
                           .masked_labels = d->labels, .next_sentence_labels = d->nsp};
}

static void demo_batch_free(DemoBatch *d) {
    free(d->ids), free(d->types), free(d->mask), free(d->positions), free(d->labels), free(d->nsp);
}

/* Small deterministic generator over a counter-based stream. */
typedef struct { uint64_t key; uint32_t counter; } Stream;
static int draw(Stream *s, int n) { return (int)(rng_bits32(s->key, s->counter++) % (uint32_t)n); }

static int topic_word(Stream *rs, int topic) { return FIRST_WORD + topic * TOPIC_WORDS + draw(rs, TOPIC_WORDS); }

/* One sequence: [CLS] A [SEP] B [SEP] [PAD]..., then up to P masked slots (BERT's 80/10/10). */
static void make_sequence(DemoBatch *d, int s, Stream *rs) {
    int32_t *ids = d->ids + (size_t)s * d->T, *types = d->types + (size_t)s * d->T, *mask = d->mask + (size_t)s * d->T;
    const int room = d->T - 3, len = room / 2 + draw(rs, room / 2 + 1);  /* some padding */
    const int len_a = 1 + draw(rs, len - 1), len_b = len - len_a;
    int topic = draw(rs, NUM_TOPICS), is_random = draw(rs, 2), topic_b = is_random ? draw(rs, NUM_TOPICS) : topic;
    int t = 0;
    ids[t++] = TOK_CLS;
    for (int i = 0; i < len_a; i++) ids[t++] = topic_word(rs, topic);
    ids[t++] = TOK_SEP;
    for (int i = 0; i < len_b; i++, t++) ids[t] = topic_word(rs, topic_b), types[t] = 1;
    types[t] = 1, ids[t++] = TOK_SEP;
    for (int i = 0; i < d->T; i++) mask[i] = i < t;
    d->nsp[s] = is_random;
    int32_t *pos = d->positions + (size_t)s * d->P, *lab = d->labels + (size_t)s * d->P;
    int want = (len * 15 + 99) / 100, k = 0;
    if (want > d->P) want = d->P;
    for (int i = 1; i < t - 1 && k < want; i++) {
        if (ids[i] == TOK_SEP || draw(rs, len) >= want * 2) continue;
        pos[k] = i, lab[k] = ids[i], k++;
        int r = draw(rs, 10);
        ids[i] = r < 8 ? TOK_MASK : r < 9 ? FIRST_WORD + draw(rs, NUM_WORDS) : ids[i];
    }
    for (; k < d->P; k++) pos[k] = 0, lab[k] = -1;
}

static void make_batch(DemoBatch *d, uint64_t seed, int step) {
    memset(d->types, 0, sizeof(int32_t) * d->B * d->T);
    for (int s = 0; s < d->B; s++) {
        Stream rs = {rng_key(seed, (uint64_t)step * d->B + s), 0};
        make_sequence(d, s, &rs);
    }
}

/* BERT's schedule: linear warmup then linear decay to 0. */
static float learning_rate(float peak, int step, int steps, int warmup) {
    if (step <= warmup) return peak * step / (float)warmup;
    return peak * (float)(steps - step) / (float)(steps - warmup > 0 ? steps - warmup : 1);
}

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
    DemoBatch d;
    demo_batch_alloc(&d, o->batch, o->seq, o->preds);
    /* AdamW (b1 0.9, b2 0.999, eps 1e-6, decay 0.01), the global gradient norm clipped to 1 */
    OptimizerConfig oc = optimizer_defaults(OPTIMIZER_ADAMW);
    Optimizer *opt;
    if (optimizer_create(&opt, &oc, bert_param_info(m, 0), bert_num_param_tensors(m), &err)) {
        fprintf(stderr, "bert train_demo: %s\n", err.msg);
        bert_model_free(m);
        return 1;
    }
    const int warmup = o->steps / 10 > 0 ? o->steps / 10 : 1;
    double t0 = now_seconds(), loss_sum = 0, mlm_sum = 0, nsp_sum = 0;
    int window = 0, rc = 0;
    for (int step = 1; step <= o->steps && rc == 0; step++) {
        make_batch(&d, (uint64_t)o->seed, step);
        bert_zero_grad(m);
        float loss = bert_forward(m, &d.batch, true, rng_key((uint64_t)o->seed, (uint64_t)step));
        if (!isfinite(loss)) {
            fprintf(stderr, "bert train_demo: step %d: %s\n", step, bert_last_error(m)[0] ? bert_last_error(m) : "loss is not finite");
            rc = 1;
            break;
        }
        bert_backward(m, &d.batch);
        const float lr = learning_rate(o->lr, step, o->steps, warmup);
        optimizer_step(opt, lr);
        loss_sum += loss, mlm_sum += bert_last_mlm_loss(m), nsp_sum += bert_last_nsp_loss(m), window++;
        if (step % o->log_every == 0 || step == o->steps) {
            double el = now_seconds() - t0, rate = step * o->batch / el;
            printf("step %5d/%d  loss %.4f (mlm %.4f, nsp %.4f)  lr %.2e  %.1f seq/s  elapsed %.1fs  ETA %.1fs\n",
                   step, o->steps, loss_sum / window, mlm_sum / window, nsp_sum / window, lr, rate, el,
                   (o->steps - step) * o->batch / rate);
            fflush(stdout);
            loss_sum = mlm_sum = nsp_sum = 0, window = 0;
        }
    }
    if (rc == 0) rc = save_outputs(m, cfg, o->out);
    demo_batch_free(&d);
    optimizer_free(opt);
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
    if (o.threads > 0) omp_set_num_threads(o.threads);
    BertConfig cfg;
    BertError err;
    if (bert_config_resolve(o.model, &cfg, &err)) {
        fprintf(stderr, "bert train_demo: %s\n", err.msg);
        return 2;
    }
    if (o.vocab_size > 0) cfg.vocab_size = o.vocab_size;
    if (cfg.vocab_size < FIRST_WORD + NUM_WORDS) {
        fprintf(stderr, "bert train_demo: the generated data needs vocab_size >= %d\n", FIRST_WORD + NUM_WORDS);
        return 2;
    }
    return train(&o, &cfg);
}
