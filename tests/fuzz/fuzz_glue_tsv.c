/* The GLUE reader and features (tasks/glue.h): any bytes as a task's train/dev/test file
 * give examples or a clear error; examples go through the features (truncation included)
 * and the metrics. The first byte picks the task and the split. */
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "tasks/glue.h"

static Tokenizer *tok;

static void setup(void) {
    static const char *tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "##s", "is", ".", "0", "1"};
    Vocab *v = vocab_from_tokens(tokens, (int)(sizeof tokens / sizeof tokens[0]));
    TokenizerOptions o = tokenizer_default_options();
    tok = tokenizer_new(v, &o);   /* kept for the process's life, as the vocabulary */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) setup();
    if (size < 1) return 0;
    static const char *names[] = {"cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "mnli-mm", "qnli", "rte", "wnli"};
    const GlueTask *t = glue_task(names[data[0] % 10]);
    const GlueSplit split = (GlueSplit)((data[0] / 10) % 3);
    char dir[512], path[640];
    fuzz_temp_path(dir, sizeof dir, "-glue");
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/%s", dir, t->files[split]);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    GlueExamples e;
    BertError err;
    if (glue_read(t, dir, split, &e, &err) == 0) {
        GlueFeatures feat;
        if (glue_features(&e, tok, 4 + data[0] % 20, &feat, &err) == 0) glue_features_free(&feat);
        if (split != GLUE_TEST) {
            int *pred = calloc((size_t)e.n, sizeof(int));
            float *value = calloc((size_t)e.n, sizeof(float));
            GlueScores s;
            glue_score(t, pred, value, &e, &s);
            free(glue_scores_json(t, &s));
            free(pred), free(value);
        }
        glue_examples_free(&e);
    }
    unlink(path);
    return 0;
}
