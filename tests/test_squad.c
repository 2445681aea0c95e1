/* SQuAD data (src/tasks/squad.h) against Google's run_squad.py, run by
 * tools/make_squad_fixtures.py on dev-v1.1 paragraphs (tests/data/squad/):
 *  - features of every field, prediction and training mode, v1.1 and v2.0 layouts;
 *  - write_predictions over synthetic logits (the script's formula, recomputed here):
 *    texts exactly, numbers within 1e-6 relative (see NUM_TOL);
 *  - the JSON writer's formatting byte for byte against json.dumps(indent=4);
 *  - bad input: a clear error naming the file (and question), never a crash;
 *  - in the optimised build, the whole dev set (../shared/data's, else the gzipped copy in
 *    tests/data/squad/) against the script's counts and feature digests (skipped under the
 *    sanitizers: seconds there). */
#include "test.h"
#include "test_util.h"

#include <cjson/cJSON.h>
#include <stdint.h>

#include "tasks/squad.h"

#define DIR_ "tests/data/squad/"
#define UNCASED "data/vocab/bert-base-uncased-vocab.txt"
#define CASED "data/vocab/bert-base-cased-vocab.txt"
#define DEV "../shared/data/squad/v1.1/dev-v1.1.json"

/* The logits are float32 and their sums exact in both programs (multiples of 1/128), so
 * the only difference possible is exp() of another libm (within 1 ulp), amplified in the
 * softmax's division by at most a few ulp: 1e-6 relative leaves a wide margin while
 * catching any real difference (a wrong entry changes a probability by far more). */
#define NUM_TOL 1e-6

static char tmpdir[256];

static cJSON *load_json(const char *path) {
    char *text = read_text(path);
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) fprintf(stderr, "    cannot parse %s\n", path);
    return j;
}

static Tokenizer *make_tokenizer(const char *vocab_path, bool lower, Vocab **v) {
    BertError err;
    if (vocab_load(v, vocab_path, &err) != 0) {
        fprintf(stderr, "    %s\n", err.msg);
        return NULL;
    }
    TokenizerOptions o = tokenizer_default_options();
    o.do_lower_case = lower;
    o.max_input_chars_per_word = 200;  /* Google's tokenization.py */
    return tokenizer_new(*v, &o);
}

static int read_and_convert(const char *path, bool training, bool v2, const Tokenizer *tok, int seq, int stride,
                            int query, SquadData *d, SquadFeatures *f, FILE *log) {
    BertError err;
    SquadReadOptions ro = {.is_training = training, .version_2_with_negative = v2, .log = log};
    if (squad_read(path, &ro, d, &err) != 0) {
        fprintf(stderr, "    %s\n", err.msg);
        return -1;
    }
    SquadFeatureOptions fo = {.max_seq_length = seq, .doc_stride = stride, .max_query_length = query};
    if (squad_convert(d, tok, &fo, f, &err) != 0) {
        fprintf(stderr, "    %s\n", err.msg);
        squad_data_free(d);
        return -1;
    }
    return 0;
}

static int jint(const cJSON *o, const char *k) { return (int)cJSON_GetObjectItemCaseSensitive(o, k)->valuedouble; }
static const char *jstr(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k)->valuestring; }

/* ---- features ----------------------------------------------------------------------------- */

/* The tokens of feature i as the reference lists them: vocabulary strings by spaces. */
static char *feature_tokens(const Vocab *v, const int32_t *ids, int n) {
    size_t len = 1;
    for (int t = 0; t < n; t++) len += strlen(vocab_token(v, ids[t])) + 1;
    char *s = xmalloc(len), *o = s;
    for (int t = 0; t < n; t++) o += sprintf(o, "%s%s", t ? " " : "", vocab_token(v, ids[t]));
    *o = 0;
    return s;
}

/* One feature against the fixture's, field by field; returns the number of mismatches. */
static int compare_feature(const SquadData *d, const SquadFeatures *f, int i, const Vocab *v, const cJSON *want) {
    const SquadFeature *ft = &f->features[i];
    int seq = f->max_seq_length, bad = 0;
    int32_t ids[512], mask[512], seg[512];
    squad_feature_inputs(d, f, i, ids, mask, seg);
    bad += ft->unique_id != (int64_t)cJSON_GetObjectItem(want, "unique_id")->valuedouble;
    bad += ft->example_index != jint(want, "example_index") || ft->doc_span_index != jint(want, "doc_span_index");
    char *tokens = feature_tokens(v, ids, ft->n_tokens);
    bad += strcmp(tokens, jstr(want, "tokens")) != 0;
    free(tokens);
    const cJSON *want_ids = cJSON_GetObjectItem(want, "input_ids");
    bad += cJSON_GetArraySize(want_ids) != seq;
    const char *wm = jstr(want, "input_mask"), *ws = jstr(want, "segment_ids");
    for (int t = 0; t < seq; t++) {
        bad += ids[t] != (int32_t)cJSON_GetArrayItem(want_ids, t)->valuedouble;
        bad += mask[t] != wm[t] - '0' || seg[t] != ws[t] - '0';
    }
    const cJSON *map = cJSON_GetObjectItem(want, "token_to_orig_map");
    const cJSON *ctx = cJSON_GetObjectItem(want, "token_is_max_context");
    int first = cJSON_GetArrayItem(map, 0)->valueint, n_doc = cJSON_GetArraySize(map) - 1;
    for (int t = 0; t < seq; t++) {
        bool in_doc = t >= first && t < first + n_doc;
        int orig = in_doc ? cJSON_GetArrayItem(map, t - first + 1)->valueint : -1;
        bool is_max = in_doc && cJSON_GetArrayItem(ctx, t - first + 1)->valueint;
        bad += squad_token_to_orig(d, f, i, t) != orig || squad_token_is_max_context(f, i, t) != is_max;
    }
    const cJSON *sp = cJSON_GetObjectItem(want, "start_position"), *ep = cJSON_GetObjectItem(want, "end_position");
    bad += ft->start_position != (cJSON_IsNull(sp) ? -1 : sp->valueint);
    bad += ft->end_position != (cJSON_IsNull(ep) ? -1 : ep->valueint);
    return bad;
}

/* Reads and converts path, then compares every feature (and, if want_examples is given,
 * the examples' positions and answers; if not_found >= 0, the count of left-out answers)
 * with the fixture's lists. */
static void check_all_features(const char *path, bool training, bool v2, const char *vocab, int seq, int stride,
                               int query, const cJSON *want_feats, const cJSON *want_examples, long not_found) {
    Vocab *v;
    Tokenizer *tok = make_tokenizer(vocab, true, &v);
    SquadData d;
    SquadFeatures f;
    if (!tok || read_and_convert(path, training, v2, tok, seq, stride, query, &d, &f, NULL) != 0) {
        CHECKF(0, "%s: no features", path);
        return;
    }
    CHECKF(f.n_features == cJSON_GetArraySize(want_feats), "%s: %d features, want %d", path, f.n_features,
           cJSON_GetArraySize(want_feats));
    for (int i = 0; i < f.n_features && i < cJSON_GetArraySize(want_feats); i++) {
        int bad = compare_feature(&d, &f, i, v, cJSON_GetArrayItem(want_feats, i));
        CHECKF(bad == 0, "%s: feature %d: %d fields differ", path, i, bad);
    }
    CHECK(!want_examples || d.n_examples == cJSON_GetArraySize(want_examples));
    for (int e = 0; want_examples && e < d.n_examples && e < cJSON_GetArraySize(want_examples); e++) {
        const cJSON *w = cJSON_GetArrayItem(want_examples, e);
        const SquadExample *x = &d.examples[e];
        const cJSON *start = cJSON_GetArrayItem(w, 1), *end = cJSON_GetArrayItem(w, 2), *text = cJSON_GetArrayItem(w, 3);
        bool same = !strcmp(x->qas_id, cJSON_GetArrayItem(w, 0)->valuestring) &&
                    x->is_impossible == cJSON_GetArrayItem(w, 4)->valueint &&
                    x->start_position == (cJSON_IsNull(start) ? -1 : start->valueint) &&
                    x->end_position == (cJSON_IsNull(end) ? -1 : end->valueint) &&
                    (cJSON_IsNull(text) ? !x->orig_answer_text : !strcmp(x->orig_answer_text, text->valuestring));
        CHECKF(same, "%s: example %d (%s)", path, e, x->qas_id);
    }
    CHECKF(not_found < 0 || d.n_answers_not_found == not_found, "%s: %ld not found", path, d.n_answers_not_found);
    squad_features_free(&f);
    squad_data_free(&d);
    tokenizer_free(tok), vocab_free(v);
}

static void test_features_prediction_mode(void) {
    cJSON *fx = load_json(DIR_ "features.json");
    CHECK(fx != NULL);
    if (!fx) return;
    const cJSON *want = cJSON_GetObjectItem(fx, "predict_v1");
    check_all_features(DIR_ "subset_v1.json", false, false, UNCASED, 128, 64, 64, cJSON_GetObjectItem(want, "features"),
                       NULL, -1);
    cJSON_Delete(fx);
}

/* The hand-made file of awkward characters, both modes, windows of 16 - query tokens 5 apart. */
static void test_features_edge_cases(void) {
    cJSON *fx = load_json(DIR_ "features.json");
    CHECK(fx != NULL);
    if (!fx) return;
    const cJSON *edge = cJSON_GetObjectItem(fx, "edge_v2"), *cfg = cJSON_GetObjectItem(edge, "config");
    int seq = cJSON_GetArrayItem(cfg, 0)->valueint, stride = cJSON_GetArrayItem(cfg, 1)->valueint;
    int query = cJSON_GetArrayItem(cfg, 2)->valueint;
    for (int training = 0; training < 2; training++) {
        const cJSON *want = cJSON_GetObjectItem(edge, training ? "train" : "predict");
        check_all_features(DIR_ "edge_v2.json", training, true, UNCASED, seq, stride, query,
                           cJSON_GetObjectItem(want, "features"), cJSON_GetObjectItem(want, "examples"),
                           jint(want, "n_not_found"));
    }
    cJSON_Delete(fx);
}

/* Training mode: the examples (word positions, answer text, impossible) and the features'
 * positions of v1.1 or v2.0, and the left-out answer with its message. */
static void check_training(const char *subset, bool v2, const char *key) {
    cJSON *fx = load_json(DIR_ "features.json");
    Vocab *v;
    Tokenizer *tok = make_tokenizer(UNCASED, true, &v);
    FILE *log = tmpfile();
    SquadData d;
    SquadFeatures f;
    CHECK(fx && tok && log && read_and_convert(subset, true, v2, tok, 128, 64, 64, &d, &f, log) == 0);
    if (!fx || !tok || !log) return;
    const cJSON *want = cJSON_GetObjectItem(fx, key);
    const cJSON *ex = cJSON_GetObjectItem(want, "examples"), *ft = cJSON_GetObjectItem(want, "features");
    CHECKF(d.n_answers_not_found == jint(want, "n_not_found"), "%ld not found", d.n_answers_not_found);
    CHECK(d.n_examples == cJSON_GetArraySize(ex) && f.n_features == cJSON_GetArraySize(ft));
    for (int e = 0; e < d.n_examples && e < cJSON_GetArraySize(ex); e++) {
        const cJSON *w = cJSON_GetArrayItem(ex, e);
        const SquadExample *x = &d.examples[e];
        CHECKF(!strcmp(x->qas_id, cJSON_GetArrayItem(w, 0)->valuestring) &&
                   x->start_position == cJSON_GetArrayItem(w, 1)->valueint &&
                   x->end_position == cJSON_GetArrayItem(w, 2)->valueint &&
                   !strcmp(x->orig_answer_text, cJSON_GetArrayItem(w, 3)->valuestring) &&
                   x->is_impossible == cJSON_GetArrayItem(w, 4)->valueint,
               "example %d (%s)", e, x->qas_id);
    }
    for (int i = 0; i < f.n_features && i < cJSON_GetArraySize(ft); i++) {
        const cJSON *w = cJSON_GetArrayItem(ft, i);
        const SquadFeature *x = &f.features[i];
        int want_v[5];
        for (int k = 0; k < 5; k++) want_v[k] = (int)(cJSON_GetArrayItem(w, k)->valuedouble - (k ? 0 : 1e9));
        CHECKF(x->unique_id - 1000000000 == want_v[0] && x->example_index == want_v[1] &&
                   x->doc_span_index == want_v[2] && x->start_position == want_v[3] && x->end_position == want_v[4],
               "feature %d: %d %d %d %d, want %d %d %d %d", i, x->example_index, x->doc_span_index, x->start_position,
               x->end_position, want_v[1], want_v[2], want_v[3], want_v[4]);
    }
    rewind(log);
    char line[4096] = "";
    CHECKF(fgets(line, sizeof line, log) && strstr(line, "could not find answer") &&
               strstr(line, "_planted_not_found") && strstr(line, subset), "message: %s", line);
    fclose(log);
    squad_features_free(&f);
    squad_data_free(&d);
    tokenizer_free(tok), vocab_free(v);
    cJSON_Delete(fx);
}

static void test_training_v1(void) { check_training(DIR_ "subset_v1.json", false, "train_v1"); }
static void test_training_v2(void) { check_training(DIR_ "subset_v2.json", true, "train_v2"); }

/* ---- predictions ------------------------------------------------------------------------ */

/* tools/make_squad_fixtures.py's h32 / logits(), in the same 32-bit arithmetic. */
static uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    return x ^ (x >> 16);
}

static uint32_t h32(uint32_t seed, int64_t uid, int pos, int which) {
    return mix32(seed * 0x9E3779B1u + (uint32_t)(uid - 1000000000) * 0x85EBCA77u + (uint32_t)pos * 0xC2B2AE3Du +
                 (uint32_t)which);
}

static void synthetic_logits(const SquadFeatures *f, int i, uint32_t seed, bool plant_empty, bool null_boost, float *s,
                             float *e) {
    const SquadFeature *ft = &f->features[i];
    int seq = f->max_seq_length, doc0 = ft->query_length + 2, n_tok = ft->n_tokens, starts[512], n_starts = 0;
    for (int p = 0; p < seq; p++) {
        s[p] = (float)((int)(h32(seed, ft->unique_id, p, 0) % 2001) - 1000) / 128.0f;
        e[p] = (float)((int)(h32(seed, ft->unique_id, p, 1) % 2001) - 1000) / 128.0f;
    }
    for (int p = doc0; p < n_tok - 1; p++)
        if (squad_token_is_max_context(f, i, p)) starts[n_starts++] = p;
    int ps = starts[h32(seed, ft->unique_id, 0, 2) % (uint32_t)n_starts];
    int pe = ps + (int)(h32(seed, ft->unique_id, 0, 3) % 8);
    if (pe > n_tok - 2) pe = n_tok - 2;
    s[ps] += 16.0f + (float)(h32(seed, ft->unique_id, 0, 4) % 64) / 16.0f;
    e[pe] += 16.0f + (float)(h32(seed, ft->unique_id, 0, 5) % 64) / 16.0f;
    if (null_boost) s[0] += 24.0f, e[0] += 24.0f;
    for (int p = 0; plant_empty && p < seq; p++)
        if (p < doc0 || p >= n_tok - 1) s[p] += 20.0f, e[p] += 20.0f;
}

static bool close_num(double a, double b) { return fabs(a - b) <= NUM_TOL * fmax(fabs(b), 1e-300) || a == b; }

/* Two parsed JSON values: same structure and key order, strings exactly, numbers within
 * NUM_TOL. Returns the number of differences (reported with the path of the first). */
static int compare_json(const cJSON *a, const cJSON *b, const char *path) {
    if ((a->type & 0xFF) != (b->type & 0xFF)) return fprintf(stderr, "    %s: types differ\n", path), 1;
    if (cJSON_IsString(b) && strcmp(a->valuestring, b->valuestring)) {
        fprintf(stderr, "    %s: \"%s\" vs \"%s\"\n", path, a->valuestring, b->valuestring);
        return 1;
    }
    if (cJSON_IsNumber(b) && !close_num(a->valuedouble, b->valuedouble)) {
        fprintf(stderr, "    %s: %.17g vs %.17g\n", path, a->valuedouble, b->valuedouble);
        return 1;
    }
    int bad = cJSON_GetArraySize(a) != cJSON_GetArraySize(b);
    if (bad) fprintf(stderr, "    %s: %d vs %d items\n", path, cJSON_GetArraySize(a), cJSON_GetArraySize(b));
    const cJSON *x = a->child, *y = b->child;
    for (; x && y && bad < 5; x = x->next, y = y->next) {
        char sub[512];
        snprintf(sub, sizeof sub, "%.300s/%.100s", path, y->string ? y->string : "");
        if (y->string && (!x->string || strcmp(x->string, y->string))) {
            fprintf(stderr, "    %s: key %s\n", sub, x->string ? x->string : "(none)");
            bad++;
        }
        bad += compare_json(x, y, sub);
    }
    return bad;
}

static int compare_files(const char *got, const char *want) {
    cJSON *a = load_json(got), *b = load_json(want);
    int bad = a && b ? compare_json(a, b, want) : 1;
    cJSON_Delete(a), cJSON_Delete(b);
    return bad;
}

/* One run of predict_runs.json: features of its subset, the synthetic logits, and every
 * output file against the reference's. */
static void check_run(const cJSON *run, int seq, int stride, int query) {
    bool v2 = cJSON_IsTrue(cJSON_GetObjectItem(run, "v2"));
    bool lower = cJSON_IsTrue(cJSON_GetObjectItem(run, "do_lower_case"));
    const char *name = jstr(run, "name");
    char path[512];
    snprintf(path, sizeof path, DIR_ "%s", jstr(run, "subset"));
    Vocab *v;
    Tokenizer *tok = make_tokenizer(strstr(jstr(run, "vocab"), "uncased") ? UNCASED : CASED, lower, &v);
    SquadData d;
    SquadFeatures f;
    if (!tok || read_and_convert(path, false, v2, tok, seq, stride, query, &d, &f, NULL) != 0) {
        CHECKF(0, "run %s: no features", name);
        return;
    }
    size_t n = (size_t)f.n_features * seq;
    float *sl = xmalloc(n * sizeof *sl), *el = xmalloc(n * sizeof *el);
    for (int i = 0; i < f.n_features; i++) {
        int ex = f.features[i].example_index;  /* the script's choice of planted examples */
        synthetic_logits(&f, i, (uint32_t)jint(run, "seed"), !v2 && ex % 13 == 5, v2 && ex % 3 == 0,
                         sl + (size_t)i * seq, el + (size_t)i * seq);
    }
    const cJSON *files = cJSON_GetObjectItem(run, "files"), *thresholds = cJSON_GetObjectItem(run, "thresholds");
    for (int t = 0; t < cJSON_GetArraySize(thresholds); t++) {
        SquadPredictOptions po = {.n_best_size = jint(run, "n_best_size"),
                                  .max_answer_length = jint(run, "max_answer_length"),
                                  .version_2_with_negative = v2,
                                  .null_score_diff_threshold = cJSON_GetArrayItem(thresholds, t)->valuedouble};
        SquadResults p;
        BertError err;
        char got_pred[512], got_nbest[512], got_odds[512], want[512];
        snprintf(got_pred, sizeof got_pred, "%s/p.json", tmpdir);
        snprintf(got_nbest, sizeof got_nbest, "%s/n.json", tmpdir);
        snprintf(got_odds, sizeof got_odds, "%s/o.json", tmpdir);
        CHECK(squad_predict(&d, &f, sl, el, tok, &po, &p, &err) == 0);
        CHECK(squad_write_predictions(&d, &p, got_pred, got_nbest, v2 ? got_odds : NULL, &err) == 0);
        CHECKF(p.n_without_non_null == 0, "run %s: %ld without a non-null answer", name, p.n_without_non_null);
        const cJSON *pred_files = cJSON_GetObjectItem(files, "predictions");
        snprintf(want, sizeof want, DIR_ "%s", cJSON_GetArrayItem(pred_files, t)->valuestring);
        CHECKF(files_equal(got_pred, want), "run %s: %s differs", name, want);  /* only strings: exact */
        snprintf(want, sizeof want, DIR_ "%s", jstr(files, "nbest"));
        CHECKF(compare_files(got_nbest, want) == 0, "run %s: %s differs", name, want);
        if (v2) {
            snprintf(want, sizeof want, DIR_ "%s", jstr(files, "null_odds"));
            CHECKF(compare_files(got_odds, want) == 0, "run %s: %s differs", name, want);
        }
        squad_results_free(&p);
    }
    free(sl), free(el);
    squad_features_free(&f);
    squad_data_free(&d);
    tokenizer_free(tok), vocab_free(v);
}

static void test_predictions(void) {
    cJSON *runs = load_json(DIR_ "predict_runs.json");
    CHECK(runs != NULL);
    if (!runs) return;
    const cJSON *list = cJSON_GetObjectItem(runs, "runs");
    for (const cJSON *run = list->child; run; run = run->next)
        check_run(run, jint(runs, "max_seq_length"), jint(runs, "doc_stride"), jint(runs, "max_query_length"));
    cJSON_Delete(runs);
}

/* The writer's formatting: a hand-made n-best dict (awkward strings and floats) written as
 * json.dumps(indent=4) writes it, byte for byte. */
static void test_json_format(void) {
    cJSON *fx = load_json(DIR_ "json_format.json");
    CHECK(fx != NULL);
    if (!fx) return;
    const cJSON *input = cJSON_GetObjectItem(fx, "input");
    int n = cJSON_GetArraySize(input);
    SquadData d = {.n_examples = n, .examples = xcalloc((size_t)n, sizeof(SquadExample))};
    SquadResults p = {.n_examples = n,
                          .answer = xcalloc((size_t)n, sizeof(char *)),
                          .nbest = xcalloc((size_t)n, sizeof(SquadNbestEntry *)),
                          .n_nbest = xcalloc((size_t)n, sizeof(int)),
                          .null_odds = xcalloc((size_t)n, sizeof(double))};
    for (int e = 0; e < n; e++) {
        const cJSON *item = cJSON_GetArrayItem(input, e), *entries = cJSON_GetArrayItem(item, 1);
        d.examples[e].qas_id = xstrdup(cJSON_GetArrayItem(item, 0)->valuestring);
        p.n_nbest[e] = cJSON_GetArraySize(entries);
        p.nbest[e] = xcalloc((size_t)p.n_nbest[e], sizeof(SquadNbestEntry));
        for (int k = 0; k < p.n_nbest[e]; k++) {
            const cJSON *en = cJSON_GetArrayItem(entries, k);
            p.nbest[e][k] = (SquadNbestEntry){xstrdup(cJSON_GetArrayItem(en, 0)->valuestring),
                                              cJSON_GetArrayItem(en, 1)->valuedouble,
                                              cJSON_GetArrayItem(en, 2)->valuedouble,
                                              cJSON_GetArrayItem(en, 3)->valuedouble, -1, -1};
        }
        p.answer[e] = xstrdup(p.nbest[e][0].text);
    }
    char pred[512], nbest[512];
    snprintf(pred, sizeof pred, "%s/fmt_p.json", tmpdir);
    snprintf(nbest, sizeof nbest, "%s/fmt_n.json", tmpdir);
    BertError err;
    CHECK(squad_write_predictions(&d, &p, pred, nbest, NULL, &err) == 0);
    char *got = read_text(nbest);
    const char *want = jstr(fx, "expected");
    size_t k = 0;
    while (got[k] && got[k] == want[k]) k++;
    CHECKF(!strcmp(got, want), "differs at byte %zu: ...%.60s... vs ...%.60s...", k, got + (k > 20 ? k - 20 : 0),
           want + (k > 20 ? k - 20 : 0));
    free(got);
    squad_results_free(&p);
    squad_data_free(&d);
    cJSON_Delete(fx);
}

/* get_final_text's cases: its own docstring example, accents, alignment failures. */
static void test_final_text(void) {
    Vocab *v, *vc;
    Tokenizer *lower = make_tokenizer(UNCASED, true, &v), *cased = make_tokenizer(CASED, false, &vc);
    CHECK(lower && cased);
    if (!lower || !cased) return;
    /* what Python's get_final_text returns for each (checked with run_squad.py) */
    struct { Tokenizer *t; const char *pred, *orig, *want; } cases[] = {
        {lower, "steve smith", "Steve Smith's", "Steve Smith"},
        {lower, "1895", "(1895-1943).", "1895"},
        {lower, "skłodowska - curie", "Skłodowska-Curie,", "Skłodowska-Curie"},
        {lower, "sklodowska - curie", "Skłodowska-Curie,", "Skłodowska-Curie,"},  /* ł is no l + accent */
        {lower, "gaißau", "Gaißau,", "Gaißau"},
        {lower, "srodmiescie", "Śródmieście.", "Śródmieście"},
        {lower, "model", "model—\u200b\u200bmany", "model—\u200b\u200bmany"},  /* lengths differ */
        {lower, "i\u0307stanbul", "İstanbul.", "İstanbul."},    /* lower() lengthens İ */
        {lower, "a b", "A\u00a0b", "A\u00a0b"},                 /* a no-break space is no ' ' */
        {lower, "元", "元朝", "元"},
        {lower, "[UNK]", "元朝", "元朝"},                         /* not found */
        {cased, "Steve Smith", "Steve Smith's", "Steve Smith"},
        {cased, "steve", "Steve Smith's", "Steve Smith's"},
        {lower, "", "abc", "abc"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = squad_final_text(cases[i].t, cases[i].pred, cases[i].orig);
        CHECKF(!strcmp(got, cases[i].want), "case %zu: \"%s\" in \"%s\" gave \"%s\"", i, cases[i].pred,
               cases[i].orig, got);
        free(got);
    }
    tokenizer_free(lower), tokenizer_free(cased), vocab_free(v), vocab_free(vc);
}

/* ---- bad input and edge cases ----------------------------------------------------------- */

static const char *write_case(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s.json", tmpdir, name);
    write_text(path, text);
    return path;
}

#define PARA(ctx, qas) "{\"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": " ctx ", \"qas\": [" qas "]}]}]}"
#define QA(id, q, answers) "{\"id\": \"" id "\", \"question\": \"" q "\", \"answers\": [" answers "]}"

static void test_bad_input(void) {
    struct { const char *name, *text; bool training, v2; const char *expect; } cases[] = {
        {"truncated", "{\"data\": [{\"paragraphs\": [", false, false, "not valid JSON"},
        {"not_object", "[1, 2]", false, false, "no \"data\" list"},
        {"no_paragraphs", "{\"data\": [{\"title\": \"x\"}]}", false, false, "article 0: no \"paragraphs\""},
        {"no_context", "{\"data\": [{\"paragraphs\": [{\"qas\": []}]}]}", false, false, "paragraph 0: no \"context\""},
        {"context_number", "{\"data\": [{\"paragraphs\": [{\"context\": 5, \"qas\": []}]}]}", false, false,
         "no \"context\""},
        {"no_qas", "{\"data\": [{\"paragraphs\": [{\"context\": \"a b\"}]}]}", false, false, "no \"qas\" list"},
        {"no_id", PARA("\"a b\"", "{\"question\": \"q?\"}"), false, false, "no \"id\" string"},
        {"no_question", PARA("\"a b\"", "{\"id\": \"q7\"}"), false, false, "question q7: no \"question\""},
        {"empty_question", PARA("\"a b\"", QA("q8", " \\t ", "")), false, false, "question q8: the question is empty"},
        {"empty_context", PARA("\" \\n \"", QA("q9", "what?", "")), false, false, "question q9: the context is empty"},
        {"no_answer", PARA("\"a b\"", QA("q10", "what?", "")), true, false, "question q10: 0 answers"},
        {"two_answers",
         PARA("\"a b\"", QA("q11", "what?", "{\"text\": \"a\", \"answer_start\": 0}, "
                                             "{\"text\": \"b\", \"answer_start\": 2}")),
         true, false, "question q11: 2 answers"},
        {"start_negative", PARA("\"a b\"", QA("q12", "what?", "{\"text\": \"a\", \"answer_start\": -1}")), true, false,
         "question q12: answer_start -1"},
        {"start_past_end", PARA("\"a b\"", QA("q13", "what?", "{\"text\": \"a\", \"answer_start\": 3}")), true, false,
         "question q13: answer_start 3"},
        {"answer_past_end", PARA("\"a b\"", QA("q14", "what?", "{\"text\": \"b c\", \"answer_start\": 2}")), true,
         false, "is outside the context"},
        {"start_fraction", PARA("\"a b\"", QA("q15", "what?", "{\"text\": \"a\", \"answer_start\": 0.5}")), true, false,
         "question q15: no integer \"answer_start\""},
        {"empty_answer", PARA("\"a b\"", QA("q16", "what?", "{\"text\": \" \", \"answer_start\": 0}")), true, false,
         "question q16: the answer text is empty"},
        {"no_text", PARA("\"a b\"", QA("q17", "what?", "{\"answer_start\": 0}")), true, false,
         "question q17, its answer: no \"text\""},
        {"no_impossible", PARA("\"a b\"", QA("q18", "what?", "{\"text\": \"a\", \"answer_start\": 0}")), true, true,
         "question q18: no \"is_impossible\""},
        {"bad_utf8", PARA("\"a \xC3\x28 b\"", QA("q19", "what?", "")), false, false, "not valid UTF-8 at byte"},
        /* issue 35, D19: training read what prediction refused (a question cut at \u0000, a byte
         * order mark, text after the JSON); both take what Python's json takes, as the
         * reference's json.load does, and \u0000 (which cJSON cannot hold) is refused in both */
        {"nul_escape", PARA("\"a b\"", QA("q21", "wh\\u0000at?", "{\"text\": \"a\", \"answer_start\": 0}")), true,
         false, "holds \\u0000"},
        {"bom", "\xEF\xBB\xBF" PARA("\"a b\"", QA("q22", "what?", "{\"text\": \"a\", \"answer_start\": 0}")), true,
         false, "byte order mark"},
        {"trailing", PARA("\"a b\"", QA("q23", "what?", "{\"text\": \"a\", \"answer_start\": 0}")) " x", true, false,
         "not valid JSON at line 1"},
        {"start_huge", PARA("\"a b\"", QA("q24", "what?", "{\"text\": \"a\", \"answer_start\": 1e300}")), true,
         false, "answer_start 1.0000000000000001e+300 with"},  /* was printed with 301 digits */
        {"surrogate", PARA("\"a \\ud800 b\"", QA("q20", "what?", "")), false, false, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *path = write_case(cases[i].name, cases[i].text);
        SquadReadOptions ro = {.is_training = cases[i].training, .version_2_with_negative = cases[i].v2};
        SquadData d;
        BertError err = {""};
        int rc = squad_read(path, &ro, &d, &err);
        CHECKF(rc == -1 && strstr(err.msg, path) && strstr(err.msg, cases[i].expect), "%s: rc %d, \"%s\"",
               cases[i].name, rc, err.msg);
        CHECK(d.n_examples == 0 && d.examples == NULL);
    }
    SquadData d;
    BertError err;
    SquadReadOptions ro = {0};
    CHECK(squad_read("tests/data/squad/no_such_file.json", &ro, &d, &err) == -1 && strstr(err.msg, "no_such_file"));
}

static void test_option_errors(void) {
    Vocab *v;
    Tokenizer *tok = make_tokenizer(UNCASED, true, &v);
    SquadReadOptions ro = {0};
    SquadData d;
    SquadFeatures f;
    BertError err;
    CHECK(tok && squad_read(DIR_ "subset_v1.json", &ro, &d, &err) == 0);
    SquadFeatureOptions bad[] = {{67, 64, 64}, {128, 0, 64}, {128, 64, -1}};
    for (int i = 0; i < 3; i++) CHECKF(squad_convert(&d, tok, &bad[i], &f, &err) == -1, "options %d accepted", i);
    /* features of other examples */
    SquadFeatureOptions fo = {128, 64, 64};
    SquadData other;
    CHECK(squad_convert(&d, tok, &fo, &f, &err) == 0 && squad_read(DIR_ "edge_v2.json", &ro, &other, &err) == 0);
    float *logits = xcalloc((size_t)f.n_features * 128, sizeof *logits);
    SquadPredictOptions po = squad_predict_default_options();
    SquadResults p;
    CHECK(squad_predict(&other, &f, logits, logits, tok, &po, &p, &err) == -1 && strstr(err.msg, "feature"));
    free(logits);
    squad_data_free(&other), squad_features_free(&f);
    squad_data_free(&d);
    tokenizer_free(tok), vocab_free(v);
}

/* Cases the reference would crash on, or treat oddly: an answer starting in the leading
 * whitespace (left out), a document with no WordPiece token (no features; v1.1 answers
 * "empty", v2.0 "" and counts it), v2.0 with no valid span at all, repeated ids. */
static void test_edge_cases(void) {
    Vocab *v;
    Tokenizer *tok = make_tokenizer(UNCASED, true, &v);
    CHECK(tok != NULL);
    const char *path = write_case("edge", PARA("\"  Alpha beta gamma.\"",
        QA("lead", "Which?", "{\"text\": \" Alpha\", \"answer_start\": 0}") ","
        QA("ok", "Which?", "{\"text\": \"beta\", \"answer_start\": 8}")));
    SquadData d;
    SquadFeatures f;
    CHECK(read_and_convert(path, true, false, tok, 32, 8, 8, &d, &f, NULL) == 0);
    CHECK(d.n_examples == 1 && d.n_answers_not_found == 1 && !strcmp(d.examples[0].qas_id, "ok"));
    CHECK(f.n_features == 1 && f.features[0].start_position == 5 && f.features[0].end_position == 5);
    squad_features_free(&f), squad_data_free(&d);

    path = write_case("no_tokens", "{\"data\": [{\"paragraphs\": ["
        "{\"context\": \"\\u200b\", \"qas\": [" QA("q", "Why?", "") "," QA("q", "Again?", "") "]},"
        "{\"context\": \"Some text here.\", \"qas\": [" QA("r", "What?", "") "]}]}]}");
    for (int v2 = 0; v2 < 2; v2++) {
        CHECK(read_and_convert(path, false, v2, tok, 32, 8, 8, &d, &f, NULL) == 0);
        CHECK(d.n_examples == 3 && f.n_features == 1 && f.features[0].example_index == 2);
        /* [CLS] what ? [SEP] some text here . [SEP]: the 20 best logits are past the end,
         * the 21st is "text" (position 5) */
        float logits[32];
        for (int t = 0; t < 32; t++) logits[t] = t == 0 ? -2.0f : t == 5 ? 3.0f : t >= 12 ? 9.0f : -1.0f;
        SquadPredictOptions po = squad_predict_default_options();
        po.version_2_with_negative = v2;
        po.n_best_size = 21;
        SquadResults p;
        BertError err;
        CHECK(squad_predict(&d, &f, logits, logits, tok, &po, &p, &err) == 0);
        char pred[512];
        snprintf(pred, sizeof pred, "%s/edge_p.json", tmpdir);
        CHECK(squad_write_predictions(&d, &p, pred, NULL, NULL, &err) == 0);
        char *text = read_text(pred);
        /* the id "q" twice: one key, in its first place, with its last value */
        CHECKF(!strcmp(text, v2 ? "{\n    \"q\": \"\",\n    \"r\": \"text\"\n}\n"
                                 : "{\n    \"q\": \"empty\",\n    \"r\": \"text\"\n}\n"), "%s", text);
        CHECKF(p.n_without_non_null == (v2 ? 2 : 0), "%ld", p.n_without_non_null);
        if (v2) CHECK(p.null_odds[0] == 1000000.0 && p.null_odds[2] == -2.0 - 2.0 - 3.0 - 3.0);
        free(text);
        squad_results_free(&p), squad_features_free(&f), squad_data_free(&d);
    }
    tokenizer_free(tok), vocab_free(v);
}

/* ---- the whole dev set -------------------------------------------------------------------- */

static uint64_t fnv_ints(uint64_t h, const int32_t *v, int n) {
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) h = (h ^ (((uint32_t)v[i] >> (8 * b)) & 0xFF)) * 0x100000001b3ULL;
    return h;
}

/* The digest tools/make_squad_fixtures.py's feature_digest computes. */
static uint64_t feature_digest(const SquadData *d, const SquadFeatures *f, long *n_tokens) {
    uint64_t h = 0xcbf29ce484222325ULL;
    int seq = f->max_seq_length;
    int32_t *buf = xmalloc((size_t)(4 * seq + 8) * sizeof *buf);
    *n_tokens = 0;
    for (int i = 0; i < f->n_features; i++) {
        const SquadFeature *ft = &f->features[i];
        int32_t head[4] = {(int32_t)(ft->unique_id - 1000000000), ft->example_index, ft->doc_span_index, ft->n_tokens};
        h = fnv_ints(h, head, 4);
        squad_feature_inputs(d, f, i, buf, buf + seq, buf + 2 * seq);
        h = fnv_ints(h, buf, 3 * seq);
        int doc0 = ft->query_length + 2, k = 0;
        for (int t = doc0; t < doc0 + ft->doc_length; t++) buf[k++] = squad_token_to_orig(d, f, i, t);
        for (int t = doc0; t < doc0 + ft->doc_length; t++) buf[k++] = squad_token_is_max_context(f, i, t);
        buf[k++] = ft->start_position, buf[k++] = ft->end_position;
        h = fnv_ints(h, buf, k);
        *n_tokens += ft->n_tokens;
    }
    free(buf);
    return h;
}

/* dev-v1.1 with each question's first answer only (training reads exactly one). */
static void write_first_answers(const char *src, const char *dst) {
    cJSON *dev = load_json(src);
    const cJSON *data = cJSON_GetObjectItem(dev, "data");
    for (const cJSON *a = data ? data->child : NULL; a; a = a->next)
        for (const cJSON *p = cJSON_GetObjectItem(a, "paragraphs")->child; p; p = p->next)
            for (const cJSON *q = cJSON_GetObjectItem(p, "qas")->child; q; q = q->next) {
                cJSON *answers = cJSON_GetObjectItem(q, "answers");
                while (cJSON_GetArraySize(answers) > 1) cJSON_DeleteItemFromArray(answers, 1);
            }
    char *text = cJSON_PrintUnformatted(dev);
    write_text(dst, text);
    free(text);
    cJSON_Delete(dev);
}

static void check_dev(const char *path, bool training, const cJSON *want, const Tokenizer *tok) {
    SquadData d;
    SquadFeatures f;
    double t0 = now_seconds();
    CHECK(read_and_convert(path, training, false, tok, 384, 128, 64, &d, &f, NULL) == 0);
    long n_tokens;
    char digest[32];
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)feature_digest(&d, &f, &n_tokens));
    printf("    dev-v1.1 %s: %d examples, %d features, %ld tokens, %ld not found, digest %s (%.2f s)\n",
           training ? "training (first answers)" : "prediction", d.n_examples, f.n_features, n_tokens,
           d.n_answers_not_found, digest, now_seconds() - t0);
    CHECK(d.n_examples == jint(want, "n_examples") && f.n_features == jint(want, "n_features"));
    CHECK(n_tokens == (long)cJSON_GetObjectItem(want, "n_tokens")->valuedouble);
    CHECKF(!strcmp(digest, jstr(want, "digest")), "digest %s, want %s", digest, jstr(want, "digest"));
    if (training) CHECK(d.n_answers_not_found == jint(want, "n_not_found"));
    squad_features_free(&f), squad_data_free(&d);
}

static void test_whole_dev_set(void) {
#if defined(__SANITIZE_ADDRESS__)
    TEST_SKIP("under AddressSanitizer (the optimised build runs it)");
    return;
#endif
    char dev[512] = DEV;   /* the shared data beside the repository, else the repository's gzipped copy */
    if (!file_exists(dev)) {
        snprintf(dev, sizeof dev, "%s/dev-v1.1.json", tmpdir);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "gzip -dc " DIR_ "dev-v1.1.json.gz > %s", dev);
        CHECKF(system(cmd) == 0, "%s", cmd);
        if (test_case_failed) return;
    }
    cJSON *fx = load_json(DIR_ "features.json");
    Vocab *v;
    Tokenizer *tok = make_tokenizer(UNCASED, true, &v);
    CHECK(fx && tok);
    if (!fx || !tok) return;
    const cJSON *want = cJSON_GetObjectItem(fx, "dev_384");
    check_dev(dev, false, cJSON_GetObjectItem(want, "predict"), tok);
    char first[512];
    snprintf(first, sizeof first, "%s/dev_first.json", tmpdir);
    write_first_answers(dev, first);
    check_dev(first, true, cJSON_GetObjectItem(want, "train"), tok);
    tokenizer_free(tok), vocab_free(v);
    cJSON_Delete(fx);
}

/* Issue 35, D18: feature conversion is linear in the context's length. One question over
 * a context of n words, windows of 4 tokens every 2: _check_is_max_context looked at every
 * window for every token (1.6 MB: 15 s); only the windows holding the token matter. Work
 * counted (windows looked at, tokenization), never timed; seen failing before the fix. */
static long long convert_work(const Tokenizer *tok, long words) {
    size_t len;
    char *json = repeat_text("{\"version\": \"1.1\", \"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": \"",
                             "w%ld ", words, "\", \"qas\": [{\"id\": \"q\", \"question\": \"what?\"}]}]}]}", &len);
    const char *path = "build/test_squad_long_context.json";
    write_bytes(path, json, len);
    free(json);
    SquadData d;
    SquadFeatures f;
    const long long before = test_work();
    if (read_and_convert(path, false, false, tok, 8, 2, 1, &d, &f, NULL) != 0) return -1;
    const long long work = test_work() - before;
    CHECK(f.n_features > (int)(words / 2));
    squad_features_free(&f);
    squad_data_free(&d);
    unlink(path);
    return work;
}

static void test_features_scale_linearly(void) {
    Vocab *v;
    Tokenizer *tok = make_tokenizer(UNCASED, true, &v);
    if (!tok) return;
    CHECK_SCALES_LINEARLY("squad features, a long context", convert_work(tok, 2000), convert_work(tok, 20000), 2000);
    tokenizer_free(tok);
    vocab_free(v);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/bert_test_squad.%ld", (long)getpid());
    mkdir(tmpdir, 0700);
    RUN_TEST(test_features_prediction_mode);
    RUN_TEST(test_features_edge_cases);
    RUN_TEST(test_training_v1);
    RUN_TEST(test_training_v2);
    RUN_TEST(test_predictions);
    RUN_TEST(test_json_format);
    RUN_TEST(test_final_text);
    RUN_TEST(test_bad_input);
    RUN_TEST(test_option_errors);
    RUN_TEST(test_edge_cases);
    RUN_TEST(test_whole_dev_set);
    RUN_TEST(test_features_scale_linearly);
    remove_tree(tmpdir);
    return test_summary();
}
