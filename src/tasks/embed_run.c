/* `bert embed`'s run (tasks/embed_run.h). */
#include "tasks/embed_run.h"

#include <stdlib.h>
#include <string.h>

#include "model/bert.h"
#include "tasks/embed.h"
#include "tasks/infer_model.h"
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
    const InferModelOptions mo = {.init_checkpoint = o->init_checkpoint, .config_file = o->config_file,
                                  .vocab_file = o->vocab_file, .do_lower_case = o->do_lower_case, .bf16 = o->bf16, .int8 = o->int8,
                                  .max_seq_length = o->max_seq_length};
    InferModel em;
    if (infer_model_open(&mo, (BertHeads){BERT_HEADS_NONE, 0}, o->batch_size, &em, err) != 0) return -1;
    BertModel *m = em.model;
    /* NaN or Inf weights: refused with strict, else counted for a warning, as pretrain and
     * fine-tuning do (issue 35, D22: embed did not check) */
    const char *bad_tensor;
    r->nonfinite = bert_nonfinite_params(m, &bad_tensor);
    if (r->nonfinite) snprintf(r->nonfinite_tensor, sizeof r->nonfinite_tensor, "%s", bad_tensor);
    if (r->nonfinite && o->strict) {
        bert_fail(err, "%s: %zu weights are NaN or infinite (the first in %s); refused (--strict)", o->init_checkpoint,
                  r->nonfinite, bad_tensor);
        infer_model_close(&em);
        return -1;
    }
    char *text;
    int n;
    char **lines = read_lines(in, &text, &n);
    if (!lines) {
        free(text), infer_model_close(&em);
        return bert_fail(err, "the input holds a NUL byte: not text (one sentence per line)");
    }
    const int H = bert_model_config(m)->hidden_size;
    float *out = xmalloc(sizeof(float) * ((size_t)n * H + 1));
    const EmbedOptions eo = {.max_seq_length = em.max_seq, .batch_size = o->batch_size, .normalize = o->normalize,
                             .sort_by_length = true};
    long tokens = 0;
    const double t0 = now_seconds();
    int rc = embed_sentences(m, em.tok, (const char *const *)lines, n, &eo, out, &tokens, err);
    const double seconds = now_seconds() - t0;
    free(lines), free(text);
    infer_model_close(&em);
    if (rc != 0) {
        free(out);
        return -1;
    }
    r->vectors = out, r->n = n, r->hidden = H, r->tokens = tokens, r->seconds = seconds;
    return 0;
}
