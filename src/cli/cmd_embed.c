/* `bert embed`: sentences on stdin (one per line) -> mean-pooled, L2-normalised embeddings
 * (sentence-transformers' pooling), as text on stdout or a .npy file. */
#include <stdio.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/common.h"
#include "model/config.h"
#include "model/bert.h"
#include "tasks/embed.h"

/* The model folder's tokenizer_config.json do_lower_case, or -1 when it does not say. */
static int folder_lower_case(const char *dir) {
    char path[4096 + 32], *text = NULL;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    BertError err;
    if (read_file(path, &text, NULL, &err) != 0) return -1;
    cJSON *j = cJSON_Parse(text);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "do_lower_case");
    const int r = cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
    cJSON_Delete(j), free(text);
    return r;
}

/* NumPy's .npy format, version 1.0: float32 little-endian [n, h]. */
static int write_npy(const char *path, const float *x, int n, int h, BertError *err) {
    char header[128];
    int len = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", n, h);
    while ((10 + len + 1) % 64) header[len++] = ' ';   /* padded so the data starts 64-aligned */
    header[len++] = '\n';
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) return -1;
    const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const unsigned char hl[2] = {(unsigned char)(len & 0xff), (unsigned char)(len >> 8)};
    fwrite(magic, 1, 8, af.fp), fwrite(hl, 1, 2, af.fp), fwrite(header, 1, (size_t)len, af.fp);
    fwrite(x, sizeof(float), (size_t)n * h, af.fp);
    return atomic_commit(&af, err);
}

/* stdin's lines (without their \n or \r\n) as strings pointing into *text. */
static char **read_lines(char **text, int *n) {
    size_t len = 0, cap = 1 << 16;
    *text = xmalloc(cap);
    for (size_t got; (got = fread(*text + len, 1, cap - len - 1, stdin)) > 0;)
        if ((len += got) + 1 >= cap) *text = xrealloc(*text, cap *= 2);
    (*text)[len] = '\0';
    if (memchr(*text, '\0', len)) {   /* a line would end there and the rest be lost */
        *n = -1;
        return NULL;
    }
    int count = 0;
    for (size_t k = 0; k < len; k++) count += (*text)[k] == '\n';
    count += len > 0 && (*text)[len - 1] != '\n';
    char **lines = xcalloc((size_t)count + 1, sizeof(char *));
    char *p = *text;
    for (int i = 0; i < count; i++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        if (nl && nl > p && nl[-1] == '\r') nl[-1] = '\0';
        lines[i] = p;
        p = nl ? nl + 1 : p + strlen(p);
    }
    *n = count;
    return lines;
}

int cmd_embed(int argc, char **argv) {
    const char *init = NULL, *config = NULL, *vocab_file = NULL, *output = NULL;
    int max_seq = 0, batch = 32, threads = 0;
    bool lower = true, no_normalize = false, bf16 = false;
    const Flag flags[] = {
        {"init_checkpoint", FLAG_STRING, &init, "a model folder (model.safetensors, config.json, vocab.txt) or file (required)"},
        {"config_file", FLAG_STRING, &config, "config.json when --init_checkpoint is a file"},
        {"vocab_file", FLAG_STRING, &vocab_file, "default: the model folder's vocab.txt"},
        {"do_lower_case", FLAG_BOOL, &lower, "uncased (default true; 'false' for cased models)"},
        {"max_seq_length", FLAG_INT, &max_seq,
         "tokens per sentence, [CLS] and [SEP] included; default 256 (sentence-transformers') or the model's positions"},
        {"batch_size", FLAG_INT, &batch, "sentences per forward; default 32"},
        {"no_normalize", FLAG_BOOL, &no_normalize, "mean-pooled vectors without L2 normalisation"},
        {"output", FLAG_STRING, &output, "write a .npy file (float32 [n, hidden]) instead of text on stdout"},
        {"threads", FLAG_INT, &threads, "OpenMP threads (0: all cores)"},
        {"bf16", FLAG_BOOL, &bf16, "matrix products in bf16 (needs avx512_bf16)"},
    };
    const FlagSpec spec = {"embed", "embed --init_checkpoint MODEL_DIR [flags] < sentences.txt   (one sentence per line)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if (!init) return fprintf(stderr, "bert embed: --init_checkpoint is required\n"), 2;
    if (threads > 0) omp_set_num_threads(threads);
    struct stat st;
    if (!vocab_file && stat(init, &st) == 0 && !S_ISDIR(st.st_mode))
        return fprintf(stderr, "bert embed: --init_checkpoint is a file: give --vocab_file (and --config_file)\n"), 2;
    char vocab_path[4096 + 16];
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", init);
    if (max_seq <= 0) {   /* sentence-transformers' 256, within the model's positions */
        BertConfig cfg;
        char cfg_path[4096 + 16];
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", init);
        BertError cerr;
        max_seq = bert_config_load(config ? config : cfg_path, &cfg, &cerr) == 0 && cfg.max_position_embeddings < 256
                      ? cfg.max_position_embeddings : 256;
    }
    const int says = folder_lower_case(init);
    if (says >= 0 && says != lower)
        fprintf(stderr, "bert embed: note: %s/tokenizer_config.json says do_lower_case %s; this run uses %s\n", init,
                says ? "true" : "false", lower ? "true" : "false");
    BertError err;
    Vocab *vocab = NULL;
    BertModel *m = NULL;
    int dummy;
    if (vocab_load(&vocab, vocab_file ? vocab_file : vocab_path, &err) != 0 ||
        bert_open_checkpoint(&m, init, config, (BertHeads){BERT_HEADS_NONE, 0}, batch, max_seq, 0, &dummy, &err) != 0 ||
        bert_set_precision(m, bf16 ? BERT_BF16 : BERT_FP32, &err) != 0) {
        fprintf(stderr, "bert embed: %s\n", err.msg);
        vocab_free(vocab), bert_model_free(m);
        return 1;
    }
    /* the weights never change here, and the model only infers: its layers share their activations */
    bert_set_packed_weights(m, true), bert_set_mode(m, BERT_MODE_FORWARD_ONLY);
    TokenizerOptions to = tokenizer_default_options();
    to.do_lower_case = lower;
    Tokenizer *tok = tokenizer_new(vocab, &to);
    char *text;
    int n;
    char **lines = read_lines(&text, &n);
    if (!lines) {
        fprintf(stderr, "bert embed: the input holds a NUL byte: not text (one sentence per line)\n");
        free(text), tokenizer_free(tok), vocab_free(vocab), bert_model_free(m);
        return 1;
    }
    const int H = bert_model_config(m)->hidden_size;
    float *out = xmalloc(sizeof(float) * ((size_t)n * H + 1));
    const EmbedOptions eo = {.max_seq_length = max_seq, .batch_size = batch, .normalize = !no_normalize,
                             .sort_by_length = true};
    long tokens = 0;
    const double t0 = now_seconds();
    rc = embed_sentences(m, tok, (const char *const *)lines, n, &eo, out, &tokens, &err);
    const double seconds = now_seconds() - t0;
    if (rc == 0 && output) rc = write_npy(output, out, n, H, &err);
    else if (rc == 0)
        for (int i = 0; i < n; i++)
            for (int h = 0; h < H; h++) printf("%.7g%c", out[(size_t)i * H + h], h + 1 < H ? ' ' : '\n');
    if (rc != 0) fprintf(stderr, "bert embed: %s\n", err.msg);
    else fprintf(stderr, "bert embed: %d sentences (%ld tokens) in %.2f s: %.1f sentences/s\n", n, tokens, seconds,
                 seconds > 0 ? n / seconds : 0);
    free(out), free(lines), free(text);
    tokenizer_free(tok), vocab_free(vocab), bert_model_free(m);
    return rc ? 1 : 0;
}
