/* `bert embed`'s run (tasks/embed_run.h). */
#include "tasks/embed_run.h"

#include <stdlib.h>
#include <string.h>

#include "io/tokenizer_files.h"
#include "model/bert.h"
#include "model/config.h"
#include "tasks/embed.h"
#include "text/tokenizer.h"

/* in's lines (without their \n or \r\n) as strings pointing into *text; NULL (*n -1) when
 * the input holds a NUL byte. */
static char **read_lines(FILE *in, char **text, int *n) {
    size_t len = 0, cap = 1 << 16;
    *text = xmalloc(cap);
    for (size_t got; (got = fread(*text + len, 1, cap - len - 1, in)) > 0;)
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

int embed_run(const EmbedRunOptions *o, FILE *in, EmbedRunResult *r, BertError *err) {
    memset(r, 0, sizeof *r);
    int max_seq = o->max_seq_length;
    if (max_seq <= 0) {   /* sentence-transformers' 256, within the model's positions */
        BertCheckpointInfo ck;
        BertError cerr;
        max_seq = bert_checkpoint_inspect(o->init_checkpoint, o->config_file, &ck, &cerr) == 0 &&
                          ck.cfg.max_position_embeddings < 256
                      ? ck.cfg.max_position_embeddings : 256;
    }
    TokenizerFolder folder;   /* the vocabulary: the flag's, else the model folder's */
    tokenizer_folder_read(o->init_checkpoint, &folder);
    const char *vocab_path = o->vocab_file ? o->vocab_file : folder.vocab_file[0] ? folder.vocab_file : NULL;
    if (!vocab_path) return bert_fail(err, "--vocab_file is required: %s has no vocab.txt", folder.dir);
    Vocab *vocab = NULL;
    BertModel *m = NULL;
    int dummy;
    if (vocab_load(&vocab, vocab_path, err) != 0 ||
        bert_open_checkpoint(&m, o->init_checkpoint, o->config_file, (BertHeads){BERT_HEADS_NONE, 0}, o->batch_size,
                             max_seq, 0, &dummy, err) != 0 ||
        bert_set_precision(m, o->bf16 ? BERT_BF16 : o->int8 ? BERT_INT8 : BERT_FP32, err) != 0) {
        vocab_free(vocab), bert_model_free(m);
        return -1;
    }
    /* a vocabulary of another model (a cased one with an uncased model, say) would give other
     * vectors without an error: its size must be the model's, as glue and squad require */
    if (!bert_vocab_fits(vocab_size(vocab), bert_model_config(m)->vocab_size)) {
        bert_fail(err, "the vocabulary %s has %d tokens but %s's model has %d: not the checkpoint's vocabulary",
                  vocab_path, vocab_size(vocab), o->init_checkpoint,
                  bert_model_config(m)->vocab_size);
        vocab_free(vocab), bert_model_free(m);
        return -1;
    }
    /* the weights never change here, and the model only infers: its layers share their activations */
    bert_set_packed_weights(m, true), bert_set_mode(m, BERT_MODE_FORWARD_ONLY);
    TokenizerOptions to = tokenizer_default_options();
    to.do_lower_case = o->do_lower_case;
    Tokenizer *tok = tokenizer_new(vocab, &to);
    char *text;
    int n;
    char **lines = read_lines(in, &text, &n);
    if (!lines) {
        free(text), tokenizer_free(tok), vocab_free(vocab), bert_model_free(m);
        return bert_fail(err, "the input holds a NUL byte: not text (one sentence per line)");
    }
    const int H = bert_model_config(m)->hidden_size;
    float *out = xmalloc(sizeof(float) * ((size_t)n * H + 1));
    const EmbedOptions eo = {.max_seq_length = max_seq, .batch_size = o->batch_size, .normalize = o->normalize,
                             .sort_by_length = true};
    long tokens = 0;
    const double t0 = now_seconds();
    int rc = embed_sentences(m, tok, (const char *const *)lines, n, &eo, out, &tokens, err);
    const double seconds = now_seconds() - t0;
    free(lines), free(text);
    tokenizer_free(tok), vocab_free(vocab), bert_model_free(m);
    if (rc != 0) {
        free(out);
        return -1;
    }
    *r = (EmbedRunResult){.vectors = out, .n = n, .hidden = H, .tokens = tokens, .seconds = seconds};
    return 0;
}
