/* `bert embed`'s run (tasks/embed_run.h). */
#include "tasks/embed_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/bert.h"
#include "tasks/embed.h"
#include "tasks/infer_model.h"
#include "text/tokenizer.h"

/* Sentences are read and embedded a chunk at a time, so memory follows the chunk, not the
 * input (issue 35, D16: 1 MB of empty lines took 1.6 GB when every vector was kept). */
enum { CHUNK_LINES = 8192, CHUNK_BYTES = 8 << 20 };

typedef struct {
    char *text;          /* the chunk's lines, each NUL-terminated */
    size_t len, cap;
    size_t *starts;      /* where each line begins in text */
    int n;
    bool pending_cr;     /* the last chunk ended at a CR: an LF first in the next is part of that line end */
} LineChunk;

static void chunk_add_line_end(LineChunk *c) {
    if (c->len + 1 >= c->cap) c->text = xrealloc(c->text, c->cap = 2 * c->cap + 64);
    c->text[c->len++] = '\0';
}

/* The next lines of `in` (at most CHUNK_LINES or about CHUNK_BYTES), ends as Python's text
 * mode reads them: \n, \r\n or a lone \r; a last line without an end counts. 0: none left; -1
 * with err: a NUL byte (not text) or a read error (a directory on stdin, say). */
static int read_chunk(FILE *in, LineChunk *c, BertError *err) {
    c->len = 0, c->n = 0;
    if (!c->starts) c->starts = xmalloc(sizeof(size_t) * CHUNK_LINES);
    bool open_line = false;
    int ch;
    while (c->n < CHUNK_LINES && (c->len < CHUNK_BYTES || open_line) && (ch = getc(in)) != EOF) {
        if (c->pending_cr) {
            c->pending_cr = false;
            if (ch == '\n') continue;
        }
        if (ch == '\0') return bert_fail(err, "the input holds a NUL byte: not text (one sentence per line)");
        if (!open_line) c->starts[c->n] = c->len, open_line = true;
        if (ch == '\n' || ch == '\r') {
            chunk_add_line_end(c);
            c->n++, open_line = false, c->pending_cr = ch == '\r';
            continue;
        }
        if (c->len + 1 >= c->cap) c->text = xrealloc(c->text, c->cap = 2 * c->cap + 64);
        c->text[c->len++] = (char)ch;
    }
    if (ferror(in)) return bert_fail(err, "cannot read the input: %s", strerror(errno));
    if (open_line) chunk_add_line_end(c), c->n++;
    return c->n;
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
    const int H = bert_model_config(m)->hidden_size;
    const EmbedOptions eo = {.max_seq_length = em.max_seq, .batch_size = o->batch_size, .normalize = o->normalize,
                             .sort_by_length = true};
    LineChunk chunk = {0};
    const char **lines = xmalloc(sizeof(char *) * CHUNK_LINES);
    float *out = xmalloc(sizeof(float) * ((size_t)CHUNK_LINES * H));
    int rc = 0, got;
    while (rc == 0 && (got = read_chunk(in, &chunk, err)) > 0) {   /* embedded and handed on a chunk at a time */
        for (int i = 0; i < got; i++) lines[i] = chunk.text + chunk.starts[i];
        const double t0 = now_seconds();
        long tokens = 0;
        rc = embed_sentences(m, em.tok, lines, got, &eo, out, &tokens, err);
        r->tokens += tokens;
        r->seconds += now_seconds() - t0;
        if (rc == 0) rc = o->emit(o->emit_ctx, out, got, H, err);
        r->n += got;
    }
    if (rc == 0 && got < 0) rc = -1;
    free(lines), free(out), free(chunk.text), free(chunk.starts);
    infer_model_close(&em);
    r->hidden = H;
    return rc;
}

