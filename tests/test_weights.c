/* Weights: BERT initialisation, safetensors save/load round trip with HF names, an
 * encoder-only checkpoint (BertModel names, TF-style gamma/beta) loading with the heads
 * initialised, and clear errors naming the tensor for a missing tensor, a wrong shape or
 * dtype, and a truncated or garbage file. */
#include <unistd.h>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/bert.h"
#include "test.h"

static BertConfig small_config(void) {
    BertConfig c;
    BertError err;
    bert_config_preset("bert-tiny", &c, &err);
    c.vocab_size = 211, c.hidden_size = 32, c.num_attention_heads = 4, c.intermediate_size = 64;
    c.max_position_embeddings = 24;
    return c;
}

static BertModel *new_model(uint64_t seed) {
    BertConfig c = small_config();
    BertModel *m = NULL;
    BertError err;
    if (bert_model_create(&m, &c, 2, 8, 2, &err)) CHECKF(0, "%s", err.msg);
    if (m) bert_init_weights(m, seed);
    return m;
}

static void tmp_path(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "/tmp/bert_test_weights_%d_%s.safetensors", (int)getpid(), tag);
}

/* Writes the model's tensors under other names / minus some, for checkpoint variants.
 * rename(name) returns the name to write, or NULL to leave the tensor out. */
static int write_variant(const BertModel *m, const char *path, const char *(*rename)(const char *, char *),
                         StDtype first_dtype, int64_t word_rows) {
    int n = bert_num_param_tensors(m), k = 0;
    StWriteTensor *out = calloc(n, sizeof *out);
    char (*names)[128] = calloc(n, 128);
    for (int i = 0; i < n; i++) {
        const BertParamInfo *t = bert_param_info(m, i);
        const char *name = rename(t->name, names[i]);
        if (!name) continue;
        out[k] = (StWriteTensor){.name = name, .dtype = ST_F32, .ndim = t->ndim, .data = t->data};
        out[k].shape[0] = t->shape[0], out[k].shape[1] = t->shape[1];
        if (i == 0) out[k].dtype = first_dtype, out[k].shape[0] = word_rows;  /* word embeddings */
        k++;
    }
    BertError err;
    int rc = safetensors_write(path, out, k, NULL, &err);
    if (rc) CHECKF(0, "%s", err.msg);
    free(out), free(names);
    return rc;
}

static const char *keep_all(const char *name, char *buf) { (void)buf; return name; }

/* BertModel checkpoint: no "bert." prefix, no heads (pooler kept), LayerNorm gamma/beta. */
static const char *encoder_only(const char *name, char *buf) {
    if (strncmp(name, "bert.", 5)) return NULL;
    snprintf(buf, 128, "%s", name + 5);
    char *ln = strstr(buf, "LayerNorm.");
    if (ln) strcpy(ln + 10, !strcmp(ln + 10, "weight") ? "gamma" : "beta");
    return buf;
}

static const char *drop_one(const char *name, char *buf) {
    (void)buf;
    return strcmp(name, "bert.encoder.layer.1.output.dense.weight") ? name : NULL;
}

static void test_init_statistics(void) {
    BertModel *m = new_model(7);
    if (!m) return;
    const BertParamInfo *w = bert_find_param(m, "bert.encoder.layer.0.intermediate.dense.weight");
    double sum = 0, sq = 0, bound = 0;
    for (size_t i = 0; i < w->numel; i++) sum += w->data[i], sq += w->data[i] * w->data[i], bound = fmax(bound, fabs(w->data[i]));
    double mean = sum / w->numel, sd = sqrt(sq / w->numel - mean * mean);
    /* truncated at 2 sd: std = 0.8796 * 0.02 */
    CHECKF(fabs(sd - 0.8796 * 0.02) < 0.0015, "std %.5f", sd);
    CHECKF(fabs(mean) < 0.002, "mean %.5f", mean);
    CHECKF(bound <= 0.04 + 1e-7, "max |w| %.5f exceeds 2 std", bound);
    const BertParamInfo *lnw = bert_find_param(m, "bert.embeddings.LayerNorm.weight");
    const BertParamInfo *b = bert_find_param(m, "cls.predictions.bias");
    CHECK(lnw->data[0] == 1.0f && lnw->data[31] == 1.0f && b->data[0] == 0.0f && !b->decay && !lnw->decay);
    CHECK(w->decay && bert_find_param(m, "cls.seq_relationship.weight")->is_head);
    BertModel *m2 = new_model(7), *m3 = new_model(8);
    CHECK(memcmp(bert_params(m), bert_params(m2), bert_num_parameters(m) * 4) == 0);  /* deterministic */
    CHECK(memcmp(bert_params(m), bert_params(m3), bert_num_parameters(m) * 4) != 0);
    bert_model_free(m), bert_model_free(m2), bert_model_free(m3);
}

static void test_round_trip(void) {
    char path[256];
    tmp_path(path, sizeof path, "rt");
    BertModel *a = new_model(1), *b = new_model(2);
    BertError err;
    CHECK(bert_save_safetensors(a, path, &err) == 0);
    CHECK(bert_load_weights(b, path, &err) == 0);
    CHECK(memcmp(bert_params(a), bert_params(b), bert_num_parameters(a) * sizeof(float)) == 0);
    SafeTensors st;
    if (safetensors_open(&st, path, &err) == 0) {  /* HF names, tied decoder not duplicated */
        CHECK(st.n == bert_num_param_tensors(a));
        CHECK(safetensors_find(&st, "bert.embeddings.word_embeddings.weight") != NULL);
        CHECK(safetensors_find(&st, "cls.predictions.transform.LayerNorm.bias") != NULL);
        CHECK(safetensors_find(&st, "bert.encoder.layer.1.attention.self.value.weight") != NULL);
        CHECK(safetensors_find(&st, "cls.predictions.decoder.weight") == NULL);
        safetensors_close(&st);
    }
    unlink(path);
    bert_model_free(a), bert_model_free(b);
}

static void test_encoder_only_checkpoint(void) {
    char path[256];
    tmp_path(path, sizeof path, "enc");
    BertModel *a = new_model(1), *b = new_model(2);
    if (write_variant(a, path, encoder_only, ST_F32, 211)) return;
    int initialised = -1;
    BertError err;
    CHECKF(bert_load_weights_ex(b, path, 5, &initialised, &err) == 0, "%s", err.msg);
    CHECKF(initialised == 7, "%d head tensors initialised, expected 7 (cls.*)", initialised);
    for (int i = 0; i < bert_num_param_tensors(a); i++) {
        const BertParamInfo *ta = bert_param_info(a, i), *tb = bert_param_info(b, i);
        int same = memcmp(ta->data, tb->data, ta->numel * sizeof(float)) == 0;
        if (!strncmp(ta->name, "bert.", 5)) CHECKF(same, "%s not loaded", ta->name);
    }
    const BertParamInfo *ln = bert_find_param(b, "cls.predictions.transform.LayerNorm.weight");
    const BertParamInfo *dense = bert_find_param(b, "cls.predictions.transform.dense.weight");
    CHECK(ln->data[0] == 1.0f);
    double sq = 0;
    for (size_t i = 0; i < dense->numel; i++) sq += dense->data[i] * dense->data[i];
    CHECKF(fabs(sqrt(sq / dense->numel) - 0.0176) < 0.003, "head init rms %.4f", sqrt(sq / dense->numel));
    unlink(path);
    bert_model_free(a), bert_model_free(b);
}

static void expect_load_error(const char *path, const char *needle1, const char *needle2) {
    BertModel *m = new_model(3);
    BertError err = {{0}};
    CHECK(bert_load_weights(m, path, &err) != 0);
    CHECKF(strstr(err.msg, needle1) && (!needle2 || strstr(err.msg, needle2)), "message: %s", err.msg);
    bert_model_free(m);
}

static void test_missing_tensor(void) {
    char path[256];
    tmp_path(path, sizeof path, "missing");
    BertModel *a = new_model(1);
    if (write_variant(a, path, drop_one, ST_F32, 211) == 0)
        expect_load_error(path, "bert.encoder.layer.1.output.dense.weight", "missing");
    unlink(path);
    bert_model_free(a);
}

static void test_wrong_shape_and_dtype(void) {
    char path[256];
    tmp_path(path, sizeof path, "shape");
    BertModel *a = new_model(1);
    /* a vocabulary of 200 rows stored where the model has 211: shape error */
    if (write_variant(a, path, keep_all, ST_F32, 200) == 0)
        expect_load_error(path, "bert.embeddings.word_embeddings.weight", "211");
    /* integers where floats belong: dtype error (same byte size as F32) */
    if (write_variant(a, path, keep_all, ST_I32, 211) == 0)
        expect_load_error(path, "bert.embeddings.word_embeddings.weight", "I32");
    unlink(path);
    bert_model_free(a);
}

static void test_truncated_and_garbage(void) {
    char path[256];
    tmp_path(path, sizeof path, "trunc");
    BertModel *a = new_model(1);
    BertError err;
    CHECK(bert_save_safetensors(a, path, &err) == 0);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    CHECK(truncate(path, size / 2) == 0);
    expect_load_error(path, path, "truncated");
    CHECK(truncate(path, 5) == 0);
    expect_load_error(path, path, NULL);
    f = fopen(path, "wb");
    fputs("this is not a safetensors file at all, just text that goes on for a while", f);
    fclose(f);
    expect_load_error(path, path, NULL);
    unlink(path);
    expect_load_error("/nonexistent/model.safetensors", "/nonexistent/model.safetensors", NULL);
    bert_model_free(a);
}

int main(void) {
    RUN_TEST(test_init_statistics);
    RUN_TEST(test_round_trip);
    RUN_TEST(test_encoder_only_checkpoint);
    RUN_TEST(test_missing_tensor);
    RUN_TEST(test_wrong_shape_and_dtype);
    RUN_TEST(test_truncated_and_garbage);
    return test_summary();
}
