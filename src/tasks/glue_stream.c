/* GLUE predictions over a stream (tasks/glue_stream.h). */
#include "tasks/glue_stream.h"

#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "tasks/glue_run.h"

static bool valid_utf8(const char *s, size_t len) {
    for (size_t k = 0; k < len;) {
        int nbytes;
        if (utf8_decode((const unsigned char *)s + k, len - k, &nbytes) <= 0) return false;
        k += (size_t)nbytes;
    }
    return true;
}

/* Line number `index` (its newline gone) into example i of e: the texts point into it. */
static int split_line(const GlueTask *t, char *line, long index, GlueExamples *e, int i, BertError *err) {
    size_t len = strlen(line);
    if (len && line[len - 1] == '\r') line[--len] = '\0';
    if (!len) return bert_fail(err, "line %ld is empty", index + 1);
    if (!valid_utf8(line, len)) return bert_fail(err, "line %ld is not UTF-8 text", index + 1);
    char *tab = strchr(line, '\t');
    const bool pair = t->text_b[GLUE_TEST] >= 0;
    if (pair && (!tab || strchr(tab + 1, '\t') || tab == line || !tab[1]))
        return bert_fail(err, "line %ld: %s takes a pair a line, text_a TAB text_b", index + 1, t->name);
    if (!pair && tab) return bert_fail(err, "line %ld: %s takes one text a line, without a TAB", index + 1, t->name);
    if (tab) *tab = '\0';
    e->text_a[i] = line, e->text_b[i] = tab ? tab + 1 : NULL;
    return 0;
}

/* The predictions of the n examples of e, numbered from `first`. */
static int predict_block(InferModel *m, const GlueStreamOptions *o, GlueExamples *e, long first, GlueBatchInputs *buf,
                         FILE *out, BertError *err) {
    const int NL = o->task->num_labels;
    GlueFeatures f;
    if (glue_features(e, m->tok, m->max_seq, &f, err) != 0) return -1;
    float *logits = xmalloc(sizeof(float) * (size_t)e->n * NL);
    double seconds;
    const int rc = glue_predict_logits(m->model, &f, o->batch, NL, buf, logits, &seconds, NULL, err);
    for (int i = 0; rc == 0 && i < e->n; i++) {
        const float *row = logits + (size_t)i * NL;
        int best = 0;
        for (int k = 1; k < NL; k++) best = row[k] > row[best] ? k : best;
        if (NL == 1) fprintf(out, "%ld\t%.3f\n", first + i, row[0]);
        else fprintf(out, "%ld\t%s\n", first + i, o->task->labels[best]);
    }
    fflush(out);
    free(logits), glue_features_free(&f);
    return rc;
}

int glue_predict_stream(const GlueStreamOptions *o, FILE *in, FILE *out, long *lines, const char **precision,
                        BertError *err) {
    *lines = 0;
    *precision = "";
    InferModel m;
    const BertHeads heads = {BERT_HEADS_CLASSIFIER, o->task->num_labels};
    if (infer_model_open(&o->model, heads, o->batch, &m, err) != 0) return -1;
    *precision = bert_precision_name(bert_precision(m.model));
    if (m.heads_initialised) {
        infer_model_close(&m);
        return bert_fail(err, "%s has no classifier weights: not a model bert glue fine-tuned", o->model.init_checkpoint);
    }
    bert_set_unpadding(m.model, true);   /* as bert glue's evaluation runs */
    GlueBatchInputs buf;
    glue_batch_inputs_alloc(&buf, o->batch, m.max_seq);
    char **text = xcalloc((size_t)o->batch, sizeof(char *));
    size_t *cap = xcalloc((size_t)o->batch, sizeof(size_t));
    GlueExamples e = {.text_a = xcalloc((size_t)o->batch, sizeof(char *)), .text_b = xcalloc((size_t)o->batch, sizeof(char *))};
    int rc = 0;
    fputs("index\tprediction\n", out);
    for (bool end = false; rc == 0 && !end;) {
        e.n = 0;
        while (e.n < o->batch && !(end = getline(&text[e.n], &cap[e.n], in) < 0)) {
            text[e.n][strcspn(text[e.n], "\n")] = '\0';
            if ((rc = split_line(o->task, text[e.n], *lines + e.n, &e, e.n, err)) != 0) break;
            e.n++;
        }
        if (rc == 0 && e.n) rc = predict_block(&m, o, &e, *lines, &buf, out, err);
        if (rc == 0) *lines += e.n;
    }
    for (int i = 0; i < o->batch; i++) free(text[i]);
    free(text), free(cap), free(e.text_a), free(e.text_b);
    glue_batch_inputs_free(&buf), infer_model_close(&m);
    return rc;
}
