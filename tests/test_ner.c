/* Token classification (NER): the head against float64 PyTorch (BertForTokenClassification)
 * and finite differences, the CoNLL reader, word-piece alignment, the entity metric against
 * seqeval, and a small `bert ner` run end to end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "io/safetensors.h"
#include "model/bert.h"
#include "model/bert_views.h"
#include "tasks/ner.h"
#include "kernels/kernels.h"
#include "tasks/ner_run.h"
#include "test.h"
#include "test_util.h"
#include "text/vocab.h"


/* ---- the metric against seqeval (tools/make_ner_fixtures.py metric) ---- */

static char **json_tags(const cJSON *sentences, long *start, int *n_sentences) {
    long n = 0;
    int s = 0;
    const cJSON *sent, *tag;
    cJSON_ArrayForEach(sent, sentences) n += cJSON_GetArraySize(sent);
    char **tags = xmalloc(sizeof(char *) * (size_t)(n + 1));
    n = 0;
    start[0] = 0;
    cJSON_ArrayForEach(sent, sentences) {
        cJSON_ArrayForEach(tag, sent) tags[n++] = tag->valuestring;
        start[++s] = n;
    }
    *n_sentences = s;
    return tags;
}

/* Every case exactly: the same counts and the same float64 divisions give the same bits. */
static void test_metric_matches_seqeval(void) {
    char *text = read_text("tests/data/ner/seqeval_cases.json");
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECKF(root != NULL, "tests/data/ner/seqeval_cases.json unreadable");
    if (!root) return free(text);
    const cJSON *c;
    int n = 0, modes[3] = {0};
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        long start[16], pstart[16];
        int ns, np;
        char **gold = json_tags(cJSON_GetObjectItem(c, "true"), start, &ns);
        char **pred = json_tags(cJSON_GetObjectItem(c, "pred"), pstart, &np);
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring, *mode = cJSON_GetObjectItem(c, "mode")->valuestring;
        const int m = ner_metric_mode(mode);
        NerScores s;
        BertError err;
        CHECKF(m >= 0 && ns == np && ner_score((const char *const *)gold, (const char *const *)pred, start, ns, m, &s,
                                               &err) == 0, "%s %s: %s", name, mode, err.msg);
        const double want[4] = {cJSON_GetObjectItem(c, "precision")->valuedouble,
                                cJSON_GetObjectItem(c, "recall")->valuedouble, cJSON_GetObjectItem(c, "f1")->valuedouble,
                                cJSON_GetObjectItem(c, "accuracy")->valuedouble};
        const double got[4] = {s.precision, s.recall, s.f1, s.accuracy};
        for (int k = 0; k < 4; k++)
            CHECKF(got[k] == want[k], "%s (%s): %s %.17g, seqeval %.17g (entities: %ld true, %ld predicted, %ld correct)",
                   name, mode, (const char *[]){"precision", "recall", "f1", "accuracy"}[k], got[k], want[k],
                   s.true_entities, s.predicted_entities, s.correct_entities);
        free(gold), free(pred);
        n++, modes[m >= 0 ? m : 0]++;
    }
    printf("    %d cases (%d default, %d strict IOB2, %d strict IOBES) equal to seqeval's\n", n, modes[0], modes[1],
           modes[2]);
    CHECK(n > 100);
    cJSON_Delete(root);
    free(text);
}

/* Strict modes refuse a prefix the scheme lacks, as seqeval raises. */
static void test_metric_strict_refuses_foreign_prefix(void) {
    const char *gold[] = {"B-PER", "E-PER"}, *pred[] = {"B-PER", "I-PER"};
    const long start[] = {0, 2};
    NerScores s;
    BertError err;
    CHECK(ner_score(gold, pred, start, 1, NER_METRIC_STRICT_IOB2, &s, &err) == -1 && strstr(err.msg, "E-PER"));
    CHECK(ner_score(gold, pred, start, 1, NER_METRIC_STRICT_IOBES, &s, &err) == 0 && s.correct_entities == 0 &&
          s.true_entities == 1 && s.predicted_entities == 0);
    CHECK(ner_metric_mode("conll") == -1);
}

/* ---- the CoNLL reader and the features ---- */

static void test_conll_reader(void) {
    const char *path = "build/test_ner_reader.txt";
    write_text(path, "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\r\n\n\n"
                     "-DOCSTART- -X- O\nPeter\tB-PER\n  Blackburn   I-PER  \n");
    NerData d;
    BertError err;
    CHECKF(ner_read_conll(path, false, &d, &err) == 0, "%s", err.msg);
    CHECK(d.n_sentences == 2 && d.n_words == 4 && d.start[1] == 2 && d.start[2] == 4 && d.untagged == 0);
    CHECK(!strcmp(d.word[0], "EU") && !strcmp(d.tag[0], "B-ORG") && !strcmp(d.tag[1], "O"));
    CHECK(!strcmp(d.word[3], "Blackburn") && !strcmp(d.tag[3], "I-PER") && d.line[3] == 9);
    NerLabels l;
    CHECK(ner_labels_from_data(&d, &l, &err) == 0 && l.n == 4);
    CHECK(!strcmp(l.name[0], "B-ORG") && !strcmp(l.name[1], "B-PER") && !strcmp(l.name[2], "I-PER") &&
          !strcmp(l.name[3], "O"));   /* sorted, as run_ner.py's get_label_list */
    ner_labels_free(&l);
    ner_data_free(&d);
    /* a word without a tag: an error naming the line, unless untagged words are allowed */
    write_text(path, "a O\nb\n");
    CHECK(ner_read_conll(path, false, &d, &err) == -1 && strstr(err.msg, ":2:") && strstr(err.msg, "without a tag"));
    CHECK(ner_read_conll(path, true, &d, &err) == 0 && d.untagged == 1 && d.tag[1] == NULL);
    CHECK(ner_labels_from_data(&d, &l, &err) == -1);
    ner_data_free(&d);
    write_text(path, "\n-DOCSTART- O\n\n");
    CHECK(ner_read_conll(path, false, &d, &err) == -1 && strstr(err.msg, "no words"));
    write_bytes(path, "a O\n\0b O\n", 9);
    CHECK(ner_read_conll(path, false, &d, &err) == -1 && strstr(err.msg, "NUL"));
    CHECK(ner_read_conll("build/no_such_ner_file.txt", false, &d, &err) == -1);
    /* a labels file; a tag outside it */
    write_text(path, "O\nB-PER\n\nI-PER\n");
    CHECK(ner_labels_read(path, &l, &err) == 0 && l.n == 3 && !strcmp(l.name[1], "B-PER"));
    write_text("build/test_ner_reader2.txt", "x B-LOC\n");
    CHECK(ner_read_conll("build/test_ner_reader2.txt", false, &d, &err) == 0);
    CHECK(ner_check_tags(&d, &l, "dev.txt", &err) == -1 && strstr(err.msg, "dev.txt:1") && strstr(err.msg, "B-LOC"));
    ner_data_free(&d), ner_labels_free(&l);
    write_text(path, "O\nO\n");
    CHECK(ner_labels_read(path, &l, &err) == -1 && strstr(err.msg, "twice"));
    remove(path), remove("build/test_ner_reader2.txt");
}

/* The work of reading n distinct labels from a labels file (its duplicate check), checking a
 * file of n words each with its own tag against them, and the label list of that file. */
static long long labels_work(long n) {
    const char *labels = "build/test_ner_labels.txt", *data = "build/test_ner_tags.txt";
    size_t len;
    char *text = repeat_text("", "T-%ld\n", n, "", &len);
    write_bytes(labels, text, len), free(text);
    text = repeat_text("", "w T-%ld\n", n, "", &len);
    write_bytes(data, text, len), free(text);
    NerLabels l, from_data;
    NerData d;
    BertError err;
    const long long before = test_work();
    CHECKF(ner_labels_read(labels, &l, &err) == 0 && l.n == n, "%s", err.msg);
    CHECKF(ner_read_conll(data, false, &d, &err) == 0 && ner_check_tags(&d, &l, data, &err) == 0, "%s", err.msg);
    CHECK(ner_labels_from_data(&d, &from_data, &err) == 0 && from_data.n == n && ner_label_id(&l, "T-7") == 7 &&
          ner_label_id(&from_data, "T-7") >= 0 && ner_label_id(&l, "T-x") == -1);
    const long long work = test_work() - before;
    ner_labels_free(&l), ner_labels_free(&from_data), ner_data_free(&d);
    remove(labels), remove(data);
    return work;
}

/* Labels are found by a hash of the tag (a StrMap, as classify's), not by a search of the
 * list for each word: 64k distinct tags took 8.4 s in the labels file's duplicate check. */
static void test_labels_scale_linearly(void) {
    CHECK_SCALES_LINEARLY("ner: labels read, tags checked, label list", labels_work(2000), labels_work(20000), 3 * 2000);
}

/* The label on each word's first piece, -100 on the rest (or B-X -> I-X with
 * label_all_tokens), a word cut by max_seq_length left without a piece. */
static void test_features_alignment(void) {
    const char *vocab_tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "john", "##son", "lives", "in", "new", "york", ".", "u", "s"};
    Vocab *v = vocab_from_tokens(vocab_tokens, 13);
    TokenizerOptions to = tokenizer_default_options();
    Tokenizer *tok = tokenizer_new(v, &to);
    const char *path = "build/test_ner_align.txt";
    write_text(path, "Johnson B-PER\nlives O\nin O\nNew B-LOC\nYork I-LOC\nU.S. B-LOC\n");
    NerData d;
    NerLabels l;
    NerFeatures f;
    BertError err;
    CHECK(ner_read_conll(path, false, &d, &err) == 0 && ner_labels_from_data(&d, &l, &err) == 0);
    /* labels sorted: B-LOC 0, B-PER 1, I-LOC 2, O 3 */
    CHECK(ner_features(&d, &l, tok, 16, false, &f, &err) == 0);
    const int32_t ids[] = {2, 4, 5, 6, 7, 8, 9, 11, 10, 12, 10, 3};
    const int32_t lab[] = {-100, 1, -100, 3, 3, 0, 2, 0, -100, -100, -100, -100};
    CHECK(f.length[0] == 12 && !memcmp(f.input_ids, ids, sizeof ids) && !memcmp(f.labels, lab, sizeof lab));
    CHECK(f.first_piece[0] == 1 && f.first_piece[5] == 7 && f.truncated == 0 && f.labels[12] == -100);
    ner_features_free(&f);
    CHECK(ner_features(&d, &l, tok, 16, true, &f, &err) == 0);
    CHECK(f.labels[2] == 1 && f.labels[8] == 2 && f.labels[9] == 2 && f.labels[10] == 2);   /* B-PER has no I-PER */
    ner_features_free(&f);
    CHECK(ner_features(&d, &l, tok, 8, false, &f, &err) == 0);   /* room for 6 pieces: "New York" fits, "U.S." not */
    CHECK(f.length[0] == 8 && f.truncated == 1 && f.words_cut == 1 && f.first_piece[4] == 6 && f.first_piece[5] == -1);
    CHECK(f.input_ids[7] == 3);
    ner_features_free(&f);
    ner_labels_free(&l), ner_data_free(&d);
    tokenizer_free(tok), vocab_free(v);
    remove(path);
}

/* ---- the head: HF's BertForTokenClassification (tools/make_ner_fixtures.py head) ---- */

enum { HB = 4, HT = 16, HNL = 5 };

typedef struct {
    SafeTensors st;
    BertModel *m;
    int32_t ids[HB * HT], types[HB * HT], mask[HB * HT], labels[HB * HT];
    BertBatch b;
} TokenFixture;

static int token_open(TokenFixture *h) {
    BertError err;
    BertConfig c;
    bert_config_preset("bert-tiny", &c, &err);
    c.vocab_size = 211, c.hidden_size = 48, c.num_hidden_layers = 2, c.num_attention_heads = 4;
    c.intermediate_size = 96, c.hidden_act = ACT_GELU, c.max_position_embeddings = 24;
    const char *path = "tests/data/model/heads_token.safetensors";
    const int64_t bt[2] = {HB, HT};
    if (safetensors_open(&h->st, path, &err) ||
        bert_model_create_with_heads(&h->m, &c, (BertHeads){BERT_HEADS_TOKEN_CLASSIFIER, HNL}, HB, HT, 0, &err)) {
        CHECKF(0, "%s", err.msg);
        return -1;
    }
    int initialised = -1;
    CHECKF(bert_load_weights_ex(h->m, path, 1, &initialised, &err) == 0 && initialised == 0, "%s (%d initialised)",
           err.msg, initialised);
    safetensors_read_i32(&h->st, "input.input_ids", bt, 2, h->ids, &err);
    safetensors_read_i32(&h->st, "input.token_type_ids", bt, 2, h->types, &err);
    safetensors_read_i32(&h->st, "input.attention_mask", bt, 2, h->mask, &err);
    safetensors_read_i32(&h->st, "input.token_labels", bt, 2, h->labels, &err);
    h->b = bert_pretraining_batch(HB, HT, 0, h->ids, h->types, h->mask, NULL, NULL, NULL);
    h->b.token_labels = h->labels;
    return 0;
}

static const float *st_floats(const SafeTensors *st, const char *name, size_t *n) {
    const StTensor *t = safetensors_find(st, name);
    if (n) *n = t ? (t->end - t->begin) / 4 : 0;
    return t ? (const float *)(st->data + t->begin) : NULL;
}

/* Every gradient against the fixture's: per entry relative to max(|ref|, 1e-2 of the
 * tensor's and 1e-4 of the model's largest), as tests/test_model.c's heads. */
static double token_grad_error(TokenFixture *h) {
    double worst = 0, global = 0;
    size_t n;
    for (int i = 0; i < bert_num_param_tensors(h->m); i++) {
        char name[160];
        snprintf(name, sizeof name, "grad.%s", bert_param_info(h->m, i)->name);
        const float *w = st_floats(&h->st, name, &n);
        for (size_t k = 0; w && k < n; k++) global = fmax(global, fabs(w[k]));
    }
    for (int i = 0; i < bert_num_param_tensors(h->m); i++) {
        const BertParamInfo *info = bert_param_info(h->m, i);
        char name[160];
        snprintf(name, sizeof name, "grad.%s", info->name);
        const float *want = st_floats(&h->st, name, &n);
        CHECKF(want && n == info->numel, "fixture lacks %s", name);
        if (!want || n != info->numel) continue;
        float *got = malloc(sizeof(float) * n);
        k_download(got, info->grad, sizeof(float) * n);
        float scale = 0;
        for (size_t k = 0; k < n; k++) scale = fmaxf(scale, fabsf(want[k]));
        worst = fmax(worst, max_rel_error(got, want, n, fmax(scale * 1e-2, global * 1e-4)));
        free(got);
    }
    return worst;
}

/* Logits, loss and every gradient against float64 PyTorch; then unpadded (the encoder skips
 * each sequence's padding after its last real or labelled token): the same numbers, the
 * skipped rows' logits read as 0. Tolerances: 1e-4 on logits and loss (float32 forward of a
 * 2-layer model), 1e-3 on gradients, as the other heads. */
/* A token classifier the checkpoint lacks is drawn as transformers' BertForTokenClassification
 * draws it: normal(0, initializer_range), bias 0; not TF's truncated normal of the GLUE/SQuAD
 * heads (bert_weights.c says why). Over n draws the sample standard deviation is sigma within
 * about sigma / sqrt(2n) (truncation at 2 sigma gives 0.88 sigma), and a fraction
 * P(|z| > 2) = 0.0455 lies beyond 2 sigma (truncation: none), within sqrt(n p (1 - p)). */
static void test_token_head_draw(void) {
    BertError err;
    BertConfig c;
    bert_config_preset("bert-tiny", &c, &err);
    c.vocab_size = 64, c.hidden_size = 128, c.num_hidden_layers = 1, c.num_attention_heads = 2;
    c.intermediate_size = 128, c.max_position_embeddings = 16;
    const int NL = 64;
    const char *path = test_tmp_path("/head_draw.safetensors");
    BertModel *encoder = NULL, *m = NULL;
    CHECKF(bert_model_create_with_heads(&encoder, &c, (BertHeads){BERT_HEADS_NONE, 0}, 1, 8, 0, &err) == 0, "%s", err.msg);
    CHECKF(bert_model_create_with_heads(&m, &c, (BertHeads){BERT_HEADS_TOKEN_CLASSIFIER, NL}, 1, 8, 0, &err) == 0, "%s",
           err.msg);
    if (!encoder || !m) return;
    bert_init_weights(encoder, 3);
    CHECKF(bert_save_safetensors(encoder, path, &err) == 0, "%s", err.msg);
    int initialised = -1;
    CHECKF(bert_load_weights_ex(m, path, 5, &initialised, &err) == 0 && initialised == 2, "%s (%d initialised)", err.msg,
           initialised);
    const float sigma = c.initializer_range;
    for (int i = 0; i < bert_num_param_tensors(m); i++) {
        const BertParamInfo *t = bert_param_info(m, i);
        if (!strcmp(t->name, "classifier.bias")) {
            double most = 0;
            for (size_t k = 0; k < t->numel; k++) most = fmax(most, fabs(t->data[k]));
            CHECKF(most == 0, "classifier.bias: max |b| %g, expected 0", most);
        }
        if (strcmp(t->name, "classifier.weight")) continue;
        const double n = (double)t->numel, p = 0.0455;
        double sum2 = 0, beyond = 0;
        for (size_t k = 0; k < t->numel; k++) sum2 += (double)t->data[k] * t->data[k], beyond += fabs(t->data[k]) > 2 * sigma;
        const double sd = sqrt(sum2 / n);
        CHECKF(fabs(sd / sigma - 1) < 5 / sqrt(2 * n), "classifier.weight: std %.5f, expected %.5f (+- %.2f%%)", sd,
               (double)sigma, 500 / sqrt(2 * n));
        CHECKF(fabs(beyond - n * p) < 5 * sqrt(n * p * (1 - p)), "classifier.weight: %.0f of %.0f beyond 2 std, expected %.0f",
               beyond, n, n * p);
    }
    remove(path);
    bert_model_free(encoder), bert_model_free(m);
}

static void test_token_head_fixture(void) {
    TokenFixture h;
    if (token_open(&h)) return;
    CHECK(bert_find_param(h.m, "bert.pooler.dense.weight") == NULL && bert_find_param(h.m, "classifier.weight"));
    const float want_loss = st_floats(&h.st, "expect.loss", NULL)[0];
    size_t n;
    const float *want_logits = st_floats(&h.st, "expect.logits0", &n);
    CHECK(n == HB * HT * HNL);
    float scale = 0, *logits = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) scale = fmaxf(scale, fabsf(want_logits[i]));
    for (int unpad = 0; unpad < 2; unpad++) {
        bert_set_unpadding(h.m, unpad);
        bert_zero_grad(h.m);
        const float loss = bert_forward(h.m, &h.b, false, 0);
        CHECKF(fabs(loss - want_loss) <= 1e-4 * fabs(want_loss), "unpad %d: loss %.7f vs %.7f (%s)", unpad, loss,
               want_loss, bert_last_error(h.m));
        CHECK(bert_read_token_logits(h.m, logits));
        double e = 0;
        int skipped = 0;
        for (int s = 0; s < HB; s++)
            for (int t = 0; t < HT; t++) {
                const size_t k = ((size_t)s * HT + t) * HNL;
                const bool computed = !unpad || bert_read_token_output(h.m, s, t, (float[48]){0});
                skipped += !computed;
                if (computed) e = fmax(e, max_rel_error(logits + k, want_logits + k, HNL, 1e-2 * scale));
                else CHECK(logits[k] == 0 && logits[k + HNL - 1] == 0);
            }
        CHECKF(e <= 1e-4, "unpad %d: logits rel err %.3g", unpad, e);
        CHECK(bert_backward(h.m, &h.b) == 0);
        const double ge = token_grad_error(&h);
        printf("    unpad %d (%d of %d rows): loss %.6f, logits rel err %.2g, gradients worst rel err %.2g\n", unpad,
               bert_encoder_rows(h.m), HB * HT, loss, e, ge);
        CHECKF(ge <= 1e-3, "unpad %d: gradients rel err %.3g", unpad, ge);
        CHECK(unpad ? skipped > 0 && bert_encoder_rows(h.m) < HB * HT : skipped == 0);
    }
    /* bf16 products (emulated: any CPU): operands rounded to 8 significant bits (2^-9
     * relative), sums over H = 48 or 96 terms in fp32: logits within ~1e-2 of the scale, the
     * loss within 1e-2 */
    BertError err;
    CHECK(bert_set_precision(h.m, BERT_BF16_EMULATED, &err) == 0);
    const float loss16 = bert_forward(h.m, &h.b, false, 0);
    CHECK(bert_read_token_logits(h.m, logits) && bert_backward(h.m, &h.b) == 0);
    double e16 = 0;
    for (int s = 0; s < HB; s++)
        for (int t = 0; t < HT; t++)
            if (bert_read_token_output(h.m, s, t, (float[48]){0}))
                e16 = fmax(e16, max_rel_error(logits + ((size_t)s * HT + t) * HNL, want_logits + ((size_t)s * HT + t) * HNL,
                                              HNL, scale));
    printf("    bf16 (emulated): loss %.6f, logits err %.2g of their scale\n", loss16, e16);
    CHECKF(loss16 != want_loss && fabs(loss16 - want_loss) <= 1e-2 * want_loss && e16 <= 2e-2, "bf16: loss %.6f, logits %.3g",
           loss16, e16);
    CHECK(bert_set_precision(h.m, BERT_FP32, &err) == 0);
    /* a label outside [0, N) and not -100 is refused; a batch with no labelled token has loss 0 */
    h.labels[3] = HNL;
    CHECK(isnan(bert_forward(h.m, &h.b, false, 0)) && strstr(bert_last_error(h.m), "token_labels[3]"));
    for (int i = 0; i < HB * HT; i++) h.labels[i] = -100;
    CHECK(bert_forward(h.m, &h.b, true, 5) == 0.0f && bert_backward(h.m, &h.b) == 0);
    free(logits);
    bert_model_free(h.m);
    safetensors_close(&h.st);
}

/* Training mode (the head's dropout and every encoder site's, fixed seed): the loss is smooth
 * in the weights, so the gradient must match central differences along it and along sign(g)
 * restricted to the head's tensors. Step h with h |g| ~ 1e-2 of the loss's change: float32
 * rounding of L ~ 2 gives ~1e-6 * 2 / 1e-2 ~ 2e-4 relative; tolerance 2e-2 (as test_model.c). */
static double train_loss(BertModel *m, const BertBatch *b) { return bert_forward(m, b, true, 91); }

static double directional(BertModel *m, const BertBatch *b, const float *dir, size_t off, size_t n, double step) {
    float *p = bert_params(m), *saved = malloc(n * sizeof(float));
    memcpy(saved, p + off, n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[off + i] = saved[i] + (float)step * dir[i];
    const double up = train_loss(m, b);
    for (size_t i = 0; i < n; i++) p[off + i] = saved[i] - (float)step * dir[i];
    const double down = train_loss(m, b);
    memcpy(p + off, saved, n * sizeof(float));
    bert_params_changed(m);
    free(saved);
    return (up - down) / (2 * step);
}

static void test_token_head_training_gradient(void) {
    TokenFixture h;
    if (token_open(&h)) return;
    for (int unpad = 0; unpad < 2; unpad++) {
        bert_set_unpadding(h.m, unpad);
        const size_t np = bert_num_parameters(h.m);
        bert_zero_grad(h.m);
        const float l0 = train_loss(h.m, &h.b);
        CHECK(isfinite(l0) && l0 == train_loss(h.m, &h.b) && l0 != bert_forward(h.m, &h.b, false, 0));
        train_loss(h.m, &h.b);
        bert_backward(h.m, &h.b);
        float *g = malloc(np * sizeof(float)), *dir = malloc(np * sizeof(float));
        memcpy(g, bert_grads(h.m), np * sizeof(float));
        double norm = 0;
        for (size_t i = 0; i < np; i++) norm += (double)g[i] * g[i];
        norm = sqrt(norm);
        for (size_t i = 0; i < np; i++) dir[i] = (float)(g[i] / norm);
        const double fd = directional(h.m, &h.b, dir, 0, np, 1e-2 / norm);
        CHECKF(fabs(fd - norm) <= 2e-2 * norm, "unpad %d: along g: fd %.6g vs |g| %.6g", unpad, fd, norm);
        const char *names[] = {"classifier.weight", "classifier.bias", "bert.encoder.layer.1.output.dense.weight",
                               "bert.embeddings.word_embeddings.weight"};
        for (int k = 0; k < 4; k++) {
            const BertParamInfo *t = bert_find_param(h.m, names[k]);
            double analytic = 0;
            for (size_t i = 0; i < t->numel; i++) {
                const float gi = g[t->offset + i];
                dir[i] = gi > 0 ? 1.0f : gi < 0 ? -1.0f : 0.0f;
                analytic += fabs(gi);
            }
            const double f = directional(h.m, &h.b, dir, t->offset, t->numel, 1e-2 / analytic);
            CHECKF(fabs(f - analytic) <= 2e-2 * analytic, "unpad %d: %s: fd %.6g vs analytic %.6g", unpad, names[k], f,
                   analytic);
        }
        printf("    unpad %d: |g| %.5f, fd along g %.5f\n", unpad, norm, fd);
        free(g), free(dir);
    }
    bert_model_free(h.m);
    safetensors_close(&h.st);
}

/* ---- `bert ner` end to end (tests/data/ner, tools/make_ner_fixtures.py conll) ---- */

#define VOCAB "data/vocab/bert-base-uncased-vocab.txt"

/* A tiny model with the real vocabulary saved as a checkpoint folder root/init. */
static void write_tiny_checkpoint(const char *root, char *init, size_t init_size) {
    remove_tree(root);
    mkdir(root, 0777);
    BertConfig c;
    BertError err;
    bert_config_preset("bert-tiny", &c, &err);
    c.num_hidden_layers = 2, c.hidden_size = 32, c.num_attention_heads = 2, c.intermediate_size = 64;
    c.max_position_embeddings = 64;
    BertModel *m;
    char path[512];
    snprintf(init, init_size, "%s/init", root);
    mkdir(init, 0777);
    if (bert_model_create(&m, &c, 1, 8, 1, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    bert_init_weights(m, 3);
    snprintf(path, sizeof path, "%s/model.safetensors", init);
    CHECKF(bert_save_safetensors(m, path, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/config.json", init);
    CHECKF(bert_config_save(path, &c, &err) == 0, "%s", err.msg);
    bert_model_free(m);
}

static void tiny_options(NerOptions *o, const char *init, const char *out) {
    ner_default_options(o);
    o->train_file = "tests/data/ner/train.txt", o->validation_file = "tests/data/ner/dev.txt";
    o->test_file = "tests/data/ner/test.txt";
    o->ft.output_dir = out, o->ft.init_checkpoint = init, o->ft.vocab_file = VOCAB, o->ft.do_lower_case = true;
    o->ft.do_train = true, o->ft.max_seq_length = 32, o->ft.train_batch_size = 8, o->ft.eval_batch_size = 3;
    o->ft.learning_rate = 2e-3, o->ft.warmup_proportion = 0, o->ft.log_freq = 1000, o->ft.seed = 5;
}

static char *read_in(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return read_text(path);
}

/* Training on 24 sentences: the loss of the first step against the last of 20 epochs (60
 * steps) at 2e-3; the model folder, eval_results.json, predictions.txt (every test word, in
 * order, a tag of the label list); the saved model evaluated and predicting alone (labels
 * from its config.json) gives the same scores and predictions; bf16 (emulated: any CPU) takes
 * the same first step to within bf16's rounding. */
static void test_ner_end_to_end(void) {
    const char *root = test_tmp_path("/run");
    char init[256], out[300], alone[300];
    write_tiny_checkpoint(root, init, sizeof init);
    snprintf(out, sizeof out, "%s/out", root), snprintf(alone, sizeof alone, "%s/alone", root);
    NerOptions o;
    NerResult first, bf16, r, pr;
    BertError err;
    tiny_options(&o, init, out);
    o.ft.max_steps = 1, o.ft.skip_checkpoint = true;
    CHECKF(ner_run(&o, &first, &err) == 0, "%s", err.msg);
    o.ft.precision = BERT_BF16_EMULATED;
    CHECKF(ner_run(&o, &bf16, &err) == 0, "%s", err.msg);
    CHECKF(first.num_labels == 5 && first.train.steps == 1 && bf16.train.final_loss != first.train.final_loss &&
               fabs(bf16.train.final_loss - first.train.final_loss) <= 1e-2 * first.train.final_loss,
           "%d labels; first step's loss fp32 %.6f, bf16 %.6f", first.num_labels, first.train.final_loss,
           bf16.train.final_loss);
    tiny_options(&o, init, out);
    o.ft.num_train_epochs = 20, o.ft.do_eval = o.ft.do_predict = true;
    CHECKF(ner_run(&o, &r, &err) == 0, "%s", err.msg);
    printf("    loss %.4f after 1 step, %.4f after %ld; dev f1 %.3f (P %.3f R %.3f, %ld entities), accuracy %.3f\n",
           first.train.final_loss, r.train.final_loss, r.train.steps, r.dev.f1, r.dev.precision, r.dev.recall,
           r.dev.true_entities, r.dev.accuracy);
    CHECKF(r.train.steps == 60 && r.train.final_loss < 0.5 * first.train.final_loss, "%ld steps, loss %.4f -> %.4f",
           r.train.steps, first.train.final_loss, r.train.final_loss);
    CHECK(r.evaluated && r.eval_sentences == 8 && r.dev.tokens > 40 && r.dev.f1 >= 0 && r.dev.f1 <= 1);
    CHECK(r.predicted_sentences == 5 && !r.test_scored);   /* one test sentence is untagged */
    char *config = read_in(out, "config.json"), *eval = read_in(out, "eval_results.json");
    char *pred = read_in(out, "predictions.txt");
    cJSON *cj = config ? cJSON_Parse(config) : NULL;
    const cJSON *id2label = cJSON_GetObjectItem(cj, "id2label"), *label2id = cJSON_GetObjectItem(cj, "label2id");
    CHECKF(config && strstr(config, "\"BertForTokenClassification\"") && cJSON_GetArraySize(id2label) == 5 &&
               !strcmp(cJSON_GetObjectItem(id2label, "4")->valuestring, "O") &&
               cJSON_GetObjectItem(label2id, "B-PER")->valueint == 1, "%s", config ? config : "no config");
    cJSON_Delete(cj);
    CHECKF(eval && strstr(eval, "\"precision\"") && strstr(eval, "\"f1\"") && strstr(eval, "\"accuracy\""), "%s",
           eval ? eval : "no eval_results.json");
    NerData test, got;
    CHECK(ner_read_conll("tests/data/ner/test.txt", true, &test, &err) == 0);
    CHECKF(ner_read_conll(test_tmp_path("/run/out/predictions.txt"), false, &got, &err) == 0, "%s", err.msg);
    CHECK(got.n_sentences == test.n_sentences && got.n_words == test.n_words);
    for (long w = 0; w < got.n_words && got.n_words == test.n_words; w++)
        CHECKF(!strcmp(got.word[w], test.word[w]) && (!strcmp(got.tag[w], "O") || got.tag[w][1] == '-'),
               "word %ld: %s %s", w, got.word[w], got.tag[w]);
    ner_data_free(&test), ner_data_free(&got);
    /* evaluating and predicting alone from the saved model (forward-only; labels from config.json) */
    NerOptions po;
    ner_default_options(&po);
    po.validation_file = o.validation_file, po.test_file = "tests/data/ner/dev.txt";
    po.ft.output_dir = alone, po.ft.init_checkpoint = out, po.ft.do_eval = po.ft.do_predict = true;
    po.ft.max_seq_length = 32, po.ft.eval_batch_size = 5;
    CHECKF(ner_run(&po, &pr, &err) == 0, "%s", err.msg);
    CHECK(pr.num_labels == 5 && pr.evaluated && pr.dev.f1 == r.dev.f1 && pr.dev.accuracy == r.dev.accuracy);
    CHECK(pr.test_scored && pr.test.f1 == r.dev.f1);   /* the tagged dev file as the test file */
    char *results = read_in(alone, "predict_results.json");
    CHECK(results && strstr(results, "\"f1\""));
    free(config), free(eval), free(pred), free(results);
    /* a validation tag outside the labels: the file and line */
    write_text(test_tmp_path("/run/bad.txt"), "Paris B-LOC\nis O\nbig B-SIZE\n");
    po.validation_file = test_tmp_path("/run/bad.txt"), po.ft.do_predict = false;
    CHECKF(ner_run(&po, &pr, &err) != 0 && strstr(err.msg, "bad.txt:3") && strstr(err.msg, "B-SIZE"), "%s", err.msg);
    po.validation_file = NULL;
    CHECKF(ner_run(&po, &pr, &err) != 0 && strstr(err.msg, "--validation_file"), "%s", err.msg);
    remove_tree(root);
}

/* Every file the run reads is read and checked before any work: a bad validation or test
 * file fails at once, naming its line, no step trained and no output folder made (it was
 * found only after the whole training, leaving a model and no all_results.json). */
static void test_bad_files_fail_before_training(void) {
    const char *root = test_tmp_path("/early");
    char init[256], out[300];
    write_tiny_checkpoint(root, init, sizeof init);
    snprintf(out, sizeof out, "%s/out", root);
    write_text(test_tmp_path("/early/dev_size.txt"), "Paris B-LOC\nis O\nbig B-SIZE\n");
    write_text(test_tmp_path("/early/dev_untagged.txt"), "Paris B-LOC\n\nis\n");
    write_text(test_tmp_path("/early/test_bad.txt"), "Paris\nis\n\nbig B-SIZE\n");
    const struct { const char *dev, *test, *message; } cases[] = {
        {test_tmp_path("/early/dev_size.txt"), NULL, "dev_size.txt:3: tag B-SIZE is not one of the 5 labels"},
        {test_tmp_path("/early/dev_untagged.txt"), NULL, "dev_untagged.txt:3: \"is\": a word without a tag"},
        {NULL, test_tmp_path("/early/test_bad.txt"), "test_bad.txt:4: tag B-SIZE is not one of the 5 labels"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        NerOptions o;
        NerResult r;
        BertError err;
        tiny_options(&o, init, out);
        o.ft.do_eval = o.ft.do_predict = true, o.ft.num_train_epochs = 2;
        if (cases[k].dev) o.validation_file = cases[k].dev;
        if (cases[k].test) o.test_file = cases[k].test;
        const int rc = ner_run(&o, &r, &err);
        CHECKF(rc != 0 && strstr(err.msg, cases[k].message), "case %zu: rc %d: %s", k, rc, rc ? err.msg : "");
        CHECKF(r.train.steps == 0 && !file_exists(out), "case %zu: %ld steps trained, the output folder %s", k,
               r.train.steps, file_exists(out) ? "made" : "not made");
        remove_tree(out);
    }
    remove_tree(root);
}

/* The command, as a user runs it: the flags named after run_ner.py's, --bf16 where the CPU
 * has bf16 instructions (else the run says so and stops), a bad --metric_mode refused. */
static char bert_bin[512];

static void test_ner_command(void) {
    const char *root = test_tmp_path("/cmd");
    char init[256], cmd[2048];
    write_tiny_checkpoint(root, init, sizeof init);
    const char *common = "--train_file tests/data/ner/train.txt --validation_file tests/data/ner/dev.txt "
                         "--test_file tests/data/ner/test.txt --vocab_file " VOCAB " --do_lower_case "
                         "--max_seq_length 32 --train_batch_size 8 --learning_rate 2e-3 --num_train_epochs 2";
    snprintf(cmd, sizeof cmd, "%s ner --init_checkpoint %s --output_dir %s/out --do_train --do_eval --do_predict %s "
             "--bf16 > %s/log.txt 2>&1", bert_bin, init, root, common, root);
    const int rc = system(cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/log.txt", root);
    char *log = read_text(path);
    const bool no_bf16 = log && strstr(log, "no bf16 instructions");
    CHECKF(rc == 0 || no_bf16, "rc %d: %s", rc, log ? log : "");
    if (rc == 0) {
        CHECKF(strstr(log, "bert ner: eval {\"precision\":") && strstr(log, "predictions.txt"), "%s", log);
        snprintf(path, sizeof path, "%s/out/model.safetensors", root);
        CHECK(file_exists(path));
        snprintf(path, sizeof path, "%s/out/predictions.txt", root);
        CHECK(file_exists(path));
    }
    free(log);
    snprintf(cmd, sizeof cmd, "%s ner --init_checkpoint %s --output_dir %s/o2 --do_eval %s --metric_mode conll "
             "> /dev/null 2>&1", bert_bin, init, root, common);
    CHECK(WEXITSTATUS(system(cmd)) == 2);
    remove_tree(root);
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert_bin, sizeof bert_bin) != 0) return 1;
    test_tmp_begin("bert_test_ner");
    RUN_TEST(test_metric_matches_seqeval);
    RUN_TEST(test_metric_strict_refuses_foreign_prefix);
    RUN_TEST(test_conll_reader);
    RUN_TEST(test_labels_scale_linearly);
    RUN_TEST(test_features_alignment);
    RUN_TEST(test_token_head_fixture);
    RUN_TEST(test_token_head_draw);
    RUN_TEST(test_token_head_training_gradient);
    RUN_TEST(test_ner_end_to_end);
    RUN_TEST(test_bad_files_fail_before_training);
    RUN_TEST(test_ner_command);
    remove_tree(test_tmp_root);
    return test_summary();
}
