/* SQuAD JSON (src/tasks/squad.h) on any bytes: read for prediction and for training
 * (v1.1 and v2.0), features in small windows, and the post-processing over logits made
 * from the feature ids, with its JSON written to /dev/null. Any input gives features or
 * a clear error; features stay inside their sequence; every example gets an n-best list. */
#include <stdlib.h>

#include "core/bundled.h"
#include "fuzz_util.h"
#include "tasks/squad.h"

static Tokenizer *tokenizer(void) {
    static Tokenizer *t;
    if (!t) {
        char path[4096];
        Vocab *v;
        BertError err;
        if (bundled_data_path("vocab/bert-base-uncased-vocab.txt", path, sizeof path) != 0 ||
            vocab_load(&v, path, &err) != 0)
            abort();
        TokenizerOptions o = tokenizer_default_options();
        o.max_input_chars_per_word = 200;
        t = tokenizer_new(v, &o);
    }
    return t;
}

/* Features are well-formed: inside the sequence, ids from the vocabulary. */
static void check_features(const SquadData *d, const SquadFeatures *f, const Tokenizer *t) {
    int32_t ids[24], mask[24], seg[24];
    int n_vocab = vocab_size(tokenizer_vocab(t));
    for (int i = 0; i < f->n_features; i++) {
        const SquadFeature *ft = &f->features[i];
        if (ft->n_tokens > f->max_seq_length || ft->example_index >= d->n_examples || ft->doc_length < 1) abort();
        squad_feature_inputs(d, f, i, ids, mask, seg);
        for (int k = 0; k < f->max_seq_length; k++)
            if (ids[k] < 0 || ids[k] >= n_vocab || mask[k] != (k < ft->n_tokens)) abort();
        if (d->is_training && (ft->start_position < 0 || ft->start_position >= ft->n_tokens)) abort();
    }
}

/* Post-processing over logits derived from the ids (deterministic, with ties). */
static void check_predictions(const SquadData *d, const SquadFeatures *f, const Tokenizer *t, bool v2) {
    size_t n = (size_t)f->n_features * f->max_seq_length;
    float *logits = malloc((n + 1) * sizeof *logits);
    for (int i = 0; i < f->n_features; i++) {
        int32_t ids[24];
        squad_feature_inputs(d, f, i, ids, NULL, NULL);
        for (int k = 0; k < f->max_seq_length; k++) logits[(size_t)i * f->max_seq_length + k] = (float)(ids[k] % 7);
    }
    SquadPredictOptions o = squad_predict_default_options();
    o.version_2_with_negative = v2;
    o.n_best_size = 4;
    o.max_answer_length = 5;
    SquadResults p;
    BertError err;
    if (squad_predict(d, f, logits, logits + 0, t, &o, &p, &err) == 0) {
        for (int e = 0; e < p.n_examples; e++)
            if (p.n_nbest[e] < 1 || !p.answer[e]) abort();
        squad_write_predictions(d, &p, "/dev/null", "/dev/null", "/dev/null", &err);
        squad_results_free(&p);
    }
    free(logits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const Tokenizer *t = tokenizer();
    const char *path = fuzz_input_file(data, size, ".json");
    for (int mode = 0; mode < 3; mode++) {
        SquadReadOptions ro = {.is_training = mode > 0, .version_2_with_negative = mode == 2};
        SquadData d;
        BertError err;
        if (squad_read(path, &ro, &d, &err) != 0) continue;  /* training needs more than prediction */
        SquadFeatureOptions fo = {.max_seq_length = 24, .doc_stride = 5, .max_query_length = 6};
        SquadFeatures f;
        if (squad_convert(&d, t, &fo, &f, &err) != 0) abort();
        check_features(&d, &f, t);
        if (mode != 1) check_predictions(&d, &f, t, mode == 2);
        squad_features_free(&f);
        squad_data_free(&d);
    }
    return 0;
}
