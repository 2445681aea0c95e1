/* The classification readers (tasks/classify.h): any bytes as a CSV, TSV or JSONL file give
 * a table or a clear error; a table goes through the label map (its last column as the
 * labels), the examples, the features and the metrics. The first byte picks the format and
 * the problem. */
#include <string.h>

#include "fuzz_util.h"
#include "tasks/classify.h"
#include "tasks/glue.h"

static Tokenizer *tok;

static void setup(void) {
    static const char *tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "##s", "is", ".", "0", "1"};
    Vocab *v = vocab_from_tokens(tokens, (int)(sizeof tokens / sizeof tokens[0]));
    TokenizerOptions o = tokenizer_default_options();
    tok = tokenizer_new(v, &o);   /* kept for the process's life, as the vocabulary */
}

static void examples(const ClsTable *t, const char *path, ClsProblem p, int pick) {
    ClsColumns c = {.label_column = t->names[t->n_cols - 1], .label_separator = pick & 1 ? "|" : NULL, .problem = p};
    ClsLabels l = {0};
    BertError err;
    if (p != CLS_REGRESSION && cls_labels_collect(t, path, t->n_cols - 1, p, c.label_separator ? "|" : ",", &l, &err))
        return;
    ClsExamples e;
    if (cls_examples(t, path, &c, &l, pick & 2, &e, &err) == 0) {
        const GlueExamples view = {.n = e.n, .text_a = e.text_a, .text_b = e.text_b};
        GlueFeatures f;
        if (glue_features(&view, tok, 4 + pick % 20, &f, &err) == 0) glue_features_free(&f);
        if (e.labelled) {
            int *label = calloc((size_t)e.n, sizeof(int));
            float *value = calloc((size_t)e.n, sizeof(float)), *multi = calloc((size_t)e.n * e.num_labels, sizeof(float));
            ClsScores s;
            cls_score(p, &e, label, value, multi, &s);
            free(cls_scores_json(&s));
            free(label), free(value), free(multi);
        }
        cls_examples_free(&e);
    }
    cls_labels_free(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) setup();
    if (size < 1) return 0;
    static const ClsFormat formats[] = {CLS_FORMAT_CSV, CLS_FORMAT_TSV, CLS_FORMAT_JSONL};
    const char *path = fuzz_input_file(data + 1, size - 1, ".data");
    ClsTable t;
    BertError err;
    if (cls_read_table(path, formats[data[0] % 3], &t, &err) == 0) {
        examples(&t, path, (ClsProblem)((data[0] / 3) % 3), data[0] / 9);
        cls_table_free(&t);
    }
    unlink(path);
    return 0;
}
