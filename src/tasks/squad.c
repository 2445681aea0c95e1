/* SQuAD examples and features: run_squad.py's read_squad_examples and
 * convert_examples_to_features (see squad.h for the contract). */
#include "tasks/squad.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/test_hooks.h"
#include "core/utf8.h"
#include "io/json_util.h"
#include "tasks/squad_internal.h"

/* ---- small text helpers ---------------------------------------------------------------- */

/* The reference's is_whitespace in read_squad_examples: only these five characters split
 * the context into words (a no-break space, for one, stays inside a word). */
static bool squad_is_whitespace(int32_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F; }

int32_t squad_next_cp(const char *s, size_t n, size_t *i) {
    int len = 1;
    int32_t c = utf8_decode((const unsigned char *)s + *i, n - *i, &len);
    *i += (size_t)len;
    return c;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;)
        if (squad_next_cp(s, n, &i) < 0) return false;
    return true;
}

size_t squad_count_cps(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; k++) squad_next_cp(s, n, &i);
    return k;
}

/* True when s has no character outside Python's str.isspace() (str.split() finds no word). */
static bool py_blank(const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;)
        if (!py_isspace(squad_next_cp(s, n, &i))) return false;
    return true;
}

/* tokenization.whitespace_tokenize, joined by spaces. */
void squad_normalize_spaces(const char *s, char *out) {
    size_t n = strlen(s), o = 0;
    bool in_word = false;
    for (size_t i = 0; i < n;) {
        size_t at = i;
        if (py_isspace(squad_next_cp(s, n, &i))) {
            in_word = false;
            continue;
        }
        if (!in_word && o) out[o++] = ' ';
        in_word = true;
        memcpy(out + o, s + at, i - at);
        o += i - at;
    }
    out[o] = 0;
}

/* ---- reading the JSON ------------------------------------------------------------------ */

typedef struct {
    const char *path;
    const SquadReadOptions *opt;
    SquadData *d;
    int cap_paragraphs, cap_examples;
    int32_t *char_to_word;  /* the current paragraph's char_to_word_offset ... */
    size_t n_chars, cap_chars; /* ... over its code points */
    BertError *err;
} Reader;

/* A string field, checked for UTF-8 (Python's decoder would refuse anything else). `where`
 * names the object in messages. */
static const char *get_string(Reader *r, const cJSON *obj, const char *key, const char *where) {
    const cJSON *v = json_get_last(obj, key);
    const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
    if (!s) bert_fail(r->err, "%s: %s: no \"%s\" string", r->path, where, key);
    else if (!valid_utf8(s, strlen(s))) {
        bert_fail(r->err, "%s: %s: \"%s\" is not valid UTF-8", r->path, where, key);
        s = NULL;
    }
    return s;
}

/* Splits the context into words and fills char_to_word_offset: the word each code point
 * belongs to (whitespace belongs to the word before it; -1 before the first word). */
static void split_words(Reader *r, SquadParagraph *p) {
    const char *s = p->context;
    size_t n = strlen(s), cap = 0;
    bool prev_ws = true;
    r->n_chars = 0;
    for (size_t i = 0; i < n;) {
        size_t at = i;
        int32_t c = squad_next_cp(s, n, &i);
        if (squad_is_whitespace(c)) prev_ws = true;
        else {
            if (prev_ws) {
                if ((size_t)p->n_words == cap) {
                    cap = grow_capacity(cap, cap + 1, 64);
                    p->word_start = xrealloc(p->word_start, cap * sizeof *p->word_start);
                    p->word_end = xrealloc(p->word_end, cap * sizeof *p->word_end);
                }
                p->word_start[p->n_words++] = (int32_t)at;
            }
            p->word_end[p->n_words - 1] = (int32_t)i;
            prev_ws = false;
        }
        ARRAY_RESERVE(r->char_to_word, r->cap_chars, r->n_chars + 1, 1024);
        r->char_to_word[r->n_chars++] = p->n_words - 1;
    }
}

/* " ".join(doc_tokens[a..b]) (a <= b) as a new string. */
static char *join_words(const SquadParagraph *p, int a, int b) {
    size_t len = 0;
    for (int w = a; w <= b; w++) len += (size_t)(p->word_end[w] - p->word_start[w]) + 1;
    char *out = xmalloc(len + 1), *o = out;
    for (int w = a; w <= b; w++) {
        if (w > a) *o++ = ' ';
        memcpy(o, p->context + p->word_start[w], (size_t)(p->word_end[w] - p->word_start[w]));
        o += p->word_end[w] - p->word_start[w];
    }
    *o = 0;
    return out;
}

/* Training: the answer's word span. Returns 1 to keep the example, 0 to leave it out (its
 * text is not where answer_start says: the reference's "Could not find answer"), -1 on
 * error. */
static int locate_answer(Reader *r, const SquadParagraph *p, const cJSON *qa, const char *id, SquadExample *ex) {
    const cJSON *answers = json_get_last(qa, "answers");
    if (!cJSON_IsArray(answers)) return bert_fail(r->err, "%s: question %.200s: no \"answers\" list", r->path, id);
    int n = cJSON_GetArraySize(answers);
    if (n != 1)
        return bert_fail(r->err, "%s: question %.200s: %d answers; for training each question should have exactly 1",
                         r->path, id, n);
    const cJSON *a = answers->child;
    char where[256];
    snprintf(where, sizeof where, "question %.200s, its answer", id);
    const char *text = get_string(r, a, "text", where);
    if (!text) return -1;
    const cJSON *st = json_get_last(a, "answer_start");
    double start = cJSON_IsNumber(st) ? st->valuedouble : NAN;
    if (!(start == floor(start)))
        return bert_fail(r->err, "%s: question %.200s: no integer \"answer_start\"", r->path, id);
    if (py_blank(text)) return bert_fail(r->err, "%s: question %.200s: the answer text is empty", r->path, id);
    size_t len = squad_count_cps(text, strlen(text));
    if (start < 0 || start >= (double)r->n_chars || (size_t)start + len - 1 >= r->n_chars)
        return bert_fail(r->err, "%s: question %.200s: answer_start %.17g with %zu characters of answer is outside the "
                         "context (%zu characters)", r->path, id, start, len, r->n_chars);
    ex->start_position = r->char_to_word[(size_t)start];
    ex->end_position = r->char_to_word[(size_t)start + len - 1];
    ex->orig_answer_text = xstrdup(text);
    /* The reference compares the words of the span with the answer's whitespace-split
     * text. An answer starting in the context's leading whitespace (word -1) would index
     * Python's list from its end; it is taken as not found. */
    char *actual = ex->start_position >= 0 ? join_words(p, ex->start_position, ex->end_position) : xstrdup("");
    char *cleaned = xmalloc(strlen(text) + 1);
    squad_normalize_spaces(text, cleaned);
    bool found = strstr(actual, cleaned) != NULL;
    if (!found && r->opt->log)
        fprintf(r->opt->log, "squad: %s: question %s: could not find answer: '%s' vs. '%s'; left out\n", r->path, id,
                actual, cleaned);
    free(actual), free(cleaned);
    return found ? 1 : 0;
}

static void example_clear(SquadExample *ex) {
    free(ex->qas_id), free(ex->question_text), free(ex->orig_answer_text);
    memset(ex, 0, sizeof *ex);
}

/* One question of paragraph pi: appended to the examples unless training leaves it out. */
static int read_qa(Reader *r, int pi, const cJSON *qa, const char *para_where) {
    if (!cJSON_IsObject(qa)) return bert_fail(r->err, "%s: %s: a question is not an object", r->path, para_where);
    char where[256];
    snprintf(where, sizeof where, "%s, a question", para_where);
    const char *id = get_string(r, qa, "id", where);
    if (!id) return -1;
    snprintf(where, sizeof where, "question %.200s", id);
    const char *question = get_string(r, qa, "question", where);
    if (!question) return -1;
    if (py_blank(question)) return bert_fail(r->err, "%s: question %.200s: the question is empty", r->path, id);
    SquadExample ex = {.qas_id = xstrdup(id), .question_text = xstrdup(question), .paragraph = pi,
                       .start_position = -1, .end_position = -1};
    int keep = 1;
    if (r->opt->is_training) {
        if (r->opt->version_2_with_negative) {
            const cJSON *imp = json_get_last(qa, "is_impossible");
            if (!cJSON_IsBool(imp)) {
                example_clear(&ex);
                return bert_fail(r->err, "%s: question %.200s: no \"is_impossible\" true/false (SQuAD 2.0)", r->path,
                                 id);
            }
            ex.is_impossible = cJSON_IsTrue(imp);
        }
        if (ex.is_impossible) ex.orig_answer_text = xstrdup("");
        else keep = locate_answer(r, &r->d->paragraphs[pi], qa, id, &ex);
    }
    if (keep != 1) {
        example_clear(&ex);
        if (keep == 0) r->d->n_answers_not_found++;
        return keep;
    }
    SquadData *d = r->d;
    ARRAY_RESERVE(d->examples, r->cap_examples, (size_t)d->n_examples + 1, 256);
    d->examples[d->n_examples++] = ex;
    return 0;
}

static int read_paragraph(Reader *r, int article, int index, const cJSON *para) {
    char where[64];
    snprintf(where, sizeof where, "article %d, paragraph %d", article, index);
    const char *context = get_string(r, para, "context", where);
    if (!context) return -1;
    if (strlen(context) > INT32_MAX) return bert_fail(r->err, "%s: %s: the context is over 2 GB", r->path, where);
    const cJSON *qas = json_get_last(para, "qas");
    if (!cJSON_IsArray(qas)) return bert_fail(r->err, "%s: %s: no \"qas\" list", r->path, where);
    SquadData *d = r->d;
    ARRAY_RESERVE(d->paragraphs, r->cap_paragraphs, (size_t)d->n_paragraphs + 1, 64);
    SquadParagraph *p = &d->paragraphs[d->n_paragraphs++];
    memset(p, 0, sizeof *p);
    p->context = xstrdup(context);
    split_words(r, p);
    if (p->n_words == 0 && qas->child) {  /* the reference gives it no features, or crashes in training */
        const cJSON *q0 = json_get_last(qas->child, "id");
        return bert_fail(r->err, "%s: %s%s%.200s: the context is empty", r->path, where,
                         cJSON_IsString(q0) ? ", question " : "", cJSON_IsString(q0) ? q0->valuestring : "");
    }
    for (const cJSON *qa = qas->child; qa; qa = qa->next)
        if (read_qa(r, d->n_paragraphs - 1, qa, where) < 0) return -1;
    return 0;
}

static int read_articles(Reader *r, const cJSON *root) {
    const cJSON *data = json_get_last(root, "data");
    if (!cJSON_IsArray(data)) return bert_fail(r->err, "%s: no \"data\" list at the top", r->path);
    int article = 0;
    for (const cJSON *entry = data->child; entry; entry = entry->next, article++) {
        const cJSON *paras = json_get_last(entry, "paragraphs");
        if (!cJSON_IsArray(paras)) return bert_fail(r->err, "%s: article %d: no \"paragraphs\" list", r->path, article);
        int index = 0;
        for (const cJSON *para = paras->child; para; para = para->next, index++)
            if (read_paragraph(r, article, index, para) < 0) return -1;
    }
    return 0;
}

int squad_read_file(const SquadFile *f, const SquadReadOptions *opt, SquadData *out, BertError *err) {
    memset(out, 0, sizeof *out);
    out->is_training = opt->is_training;
    out->version_2_with_negative = opt->version_2_with_negative;
    Reader r = {.path = f->name, .opt = opt, .d = out, .err = err};
    int rc = read_articles(&r, f->root);
    free(r.char_to_word);
    if (rc != 0) squad_data_free(out);
    return rc;
}

int squad_read(const char *path, const SquadReadOptions *opt, SquadData *out, BertError *err) {
    memset(out, 0, sizeof *out);
    SquadFile f;
    if (squad_file_load(path, SQUAD_JSON_PYTHON, &f, err) != 0) return -1;
    int rc = squad_read_file(&f, opt, out, err);
    squad_file_free(&f);
    return rc;
}

void squad_data_free(SquadData *d) {
    for (int i = 0; i < d->n_paragraphs; i++) {
        SquadParagraph *p = &d->paragraphs[i];
        free(p->context), free(p->word_start), free(p->word_end);
        free(p->sub_ids), free(p->tok_to_orig), free(p->orig_to_tok);
    }
    for (int i = 0; i < d->n_examples; i++) example_clear(&d->examples[i]);
    free(d->paragraphs), free(d->examples);
    memset(d, 0, sizeof *d);
}

/* ---- features ------------------------------------------------------------------------- */

SquadFeatureOptions squad_feature_default_options(void) {
    return (SquadFeatureOptions){.max_seq_length = 384, .doc_stride = 128, .max_query_length = 64};
}

/* all_doc_tokens, tok_to_orig_index and orig_to_tok_index of a paragraph: WordPiece of
 * each whitespace word on its own, as the reference tokenizes them. */
static void tokenize_paragraph(SquadParagraph *p, const Tokenizer *tok, TokenList *tl) {
    size_t cap = 0;
    p->n_sub = 0;
    p->orig_to_tok = xmalloc(((size_t)p->n_words + 1) * sizeof *p->orig_to_tok);
    for (int w = 0; w < p->n_words; w++) {
        p->orig_to_tok[w] = p->n_sub;
        int n = tokenize(tok, p->context + p->word_start[w], (size_t)(p->word_end[w] - p->word_start[w]), tl);
        if ((size_t)p->n_sub + (size_t)(n > 0 ? n : 0) > cap) {
            cap = grow_capacity(cap, (size_t)p->n_sub + (size_t)n, 256);
            p->sub_ids = xrealloc(p->sub_ids, cap * sizeof *p->sub_ids);
            p->tok_to_orig = xrealloc(p->tok_to_orig, cap * sizeof *p->tok_to_orig);
        }
        for (int k = 0; k < n; k++) {
            p->sub_ids[p->n_sub] = tl->tokens[k].id;
            p->tok_to_orig[p->n_sub++] = w;
        }
    }
}

/* _improve_answer_span: the first (leftmost start, then longest) sub-span of
 * [*start, *end] whose tokens are exactly the answer's tokens. The reference compares
 * the tokens joined by spaces; WordPiece tokens hold no spaces, so comparing the id
 * sequences is the same test. */
static void improve_answer_span(const SquadParagraph *p, const Tokenizer *tok, TokenList *tl, const char *answer,
                                int *start, int *end) {
    int n = tokenize(tok, answer, strlen(answer), tl);
    for (int s = *start; s <= *end; s++)
        for (int e = *end; e >= s; e--) {
            if (e - s + 1 != n) continue;
            int k = 0;
            while (k < n && p->sub_ids[s + k] == tl->tokens[k].id) k++;
            if (k == n) {
                *start = s, *end = e;
                return;
            }
        }
}

/* The answer's sub-token span (tok_start_position, tok_end_position) of a training
 * example; -1, -1 when impossible. */
static void answer_token_span(const SquadExample *ex, const SquadParagraph *p, const Tokenizer *tok, TokenList *tl,
                              int *start, int *end) {
    *start = *end = -1;
    if (ex->is_impossible) return;
    *start = p->orig_to_tok[ex->start_position];
    *end = ex->end_position < p->n_words - 1 ? p->orig_to_tok[ex->end_position + 1] - 1 : p->n_sub - 1;
    improve_answer_span(p, tok, tl, ex->orig_answer_text, start, end);
}

typedef struct {
    int start, length;
} DocSpan;

/* The sliding windows (_DocSpan) over n sub tokens, max_len tokens each; the next starts
 * min(length, stride) after the previous until one reaches the end. */
static int doc_spans(int n, int max_len, int stride, DocSpan **spans, int *cap) {
    int count = 0;
    for (int start = 0; start < n;) {
        int length = n - start < max_len ? n - start : max_len;
        ARRAY_RESERVE(*spans, *cap, (size_t)count + 1, 16);
        (*spans)[count++] = (DocSpan){start, length};
        if (start + length == n) break;
        start += length < stride ? length : stride;
    }
    return count;
}

/* _check_is_max_context: whether span cur gives token `position` its most context
 * (min(left, right) + 0.01 * length, first best span on ties). The score is computed in
 * double in the reference's order, in two statements so that no compiler fuses it into
 * one multiply-add and changes a tie. */
static int span_end(DocSpan s) { return s.start + s.length - 1; }

static bool is_max_context(const DocSpan *spans, int n_spans, int cur, int position, int first) {
    double best = 0;
    int best_index = -1;
    for (int i = first; i < n_spans && spans[i].start <= position; i++) {
        TEST_COUNT_WORK(1);
        int end = span_end(spans[i]);
        if (end < position) continue;
        int left = position - spans[i].start, right = end - position;
        double frac = 0.01 * spans[i].length;
        double score = (double)(left < right ? left : right) + frac;
        if (best_index < 0 || score > best) best = score, best_index = i;
    }
    return best_index == cur;
}

/* is_max_context for every token of window cur. The windows' starts increase and so do
 * their ends (start + min(max_len, n - start)), so the windows holding a token are a run
 * from the first whose end reaches it, and that first one only moves forward along the
 * window: only the run is looked at, in the reference's order (issue 35, D18: every
 * window for every token was quadratic in the context's length). */
static void window_max_context(const DocSpan *spans, int n_spans, int cur, uint8_t *out) {
    const DocSpan sp = spans[cur];
    int first = cur;
    while (first > 0 && span_end(spans[first - 1]) >= sp.start) first--, TEST_COUNT_WORK(1);
    for (int i = 0; i < sp.length; i++) {
        while (span_end(spans[first]) < sp.start + i) first++, TEST_COUNT_WORK(1);
        out[i] = is_max_context(spans, n_spans, cur, sp.start + i, first);
    }
}

/* Appends one window's feature; positions as the reference sets them in training. */
static void add_feature(SquadFeatures *f, const SquadData *d, int e, int span_index, const DocSpan *spans, int n_spans,
                        int query_len, int tok_start, int tok_end) {
    ARRAY_RESERVE(f->features, f->cap_features, (size_t)f->n_features + 1, 256);
    DocSpan sp = spans[span_index];
    SquadFeature *ft = &f->features[f->n_features];
    *ft = (SquadFeature){.unique_id = 1000000000LL + f->n_features, .example_index = e, .doc_span_index = span_index,
                         .doc_start = sp.start, .doc_length = sp.length, .query_length = query_len,
                         .n_tokens = query_len + sp.length + 3, .start_position = -1, .end_position = -1,
                         .max_context_at = f->n_max_context};
    f->n_features++;
    ARRAY_RESERVE(f->max_context, f->cap_max_context, f->n_max_context + (size_t)sp.length, 4096);
    window_max_context(spans, n_spans, span_index, f->max_context + f->n_max_context);
    f->n_max_context += (size_t)sp.length;
    if (!d->is_training) return;
    const SquadExample *ex = &d->examples[e];
    ft->start_position = ft->end_position = 0;  /* impossible, or the answer is not in this window */
    if (!ex->is_impossible && tok_start >= sp.start && tok_end <= sp.start + sp.length - 1) {
        ft->start_position = tok_start - sp.start + query_len + 2;
        ft->end_position = tok_end - sp.start + query_len + 2;
    }
}

/* The (truncated) query tokens of example e, stored for squad_feature_inputs. */
static int add_query(SquadFeatures *f, const SquadExample *ex, const Tokenizer *tok, TokenList *tl, int max_query) {
    int n = tokenize(tok, ex->question_text, strlen(ex->question_text), tl);
    if (n > max_query) n = max_query;
    if (n < 0) n = 0;
    ARRAY_RESERVE(f->query_ids, f->cap_query_ids, f->n_query_ids + (size_t)n, 4096);
    for (int k = 0; k < n; k++) f->query_ids[f->n_query_ids + k] = tl->tokens[k].id;
    f->n_query_ids += (size_t)n;
    return n;
}

static int check_feature_options(const SquadFeatureOptions *o, const Tokenizer *tok, SquadFeatures *f, BertError *err) {
    if (o->max_query_length < 0 || o->max_seq_length <= o->max_query_length + 3)
        return bert_fail(err, "max_seq_length (%d) must be greater than max_query_length (%d) + 3", o->max_seq_length,
                         o->max_query_length);
    if (o->doc_stride < 1) return bert_fail(err, "doc_stride must be at least 1 (it is %d)", o->doc_stride);
    const Vocab *v = tokenizer_vocab(tok);
    f->cls_id = v ? vocab_lookup(v, "[CLS]", 5) : -1;
    f->sep_id = v ? vocab_lookup(v, "[SEP]", 5) : -1;
    if (f->cls_id < 0 || f->sep_id < 0) return bert_fail(err, "the vocabulary has no [CLS] or no [SEP] token");
    return 0;
}

int squad_convert(SquadData *d, const Tokenizer *tok, const SquadFeatureOptions *o, SquadFeatures *out,
                  BertError *err) {
    memset(out, 0, sizeof *out);
    out->max_seq_length = o->max_seq_length;
    if (check_feature_options(o, tok, out, err) != 0) return -1;
    TokenList tl;
    token_list_init(&tl);
    for (int i = 0; i < d->n_paragraphs; i++) {
        SquadParagraph *p = &d->paragraphs[i];
        free(p->sub_ids), free(p->tok_to_orig), free(p->orig_to_tok);
        p->sub_ids = p->tok_to_orig = NULL;
        tokenize_paragraph(p, tok, &tl);
    }
    out->query_start = xmalloc(((size_t)d->n_examples + 1) * sizeof *out->query_start);
    DocSpan *spans = NULL;
    int cap_spans = 0;
    for (int e = 0; e < d->n_examples; e++) {
        const SquadExample *ex = &d->examples[e];
        const SquadParagraph *p = &d->paragraphs[ex->paragraph];
        out->query_start[e] = out->n_query_ids;
        int query_len = add_query(out, ex, tok, &tl, o->max_query_length);
        int tok_start = -1, tok_end = -1;
        if (d->is_training) answer_token_span(ex, p, tok, &tl, &tok_start, &tok_end);
        int n_spans = doc_spans(p->n_sub, o->max_seq_length - query_len - 3, o->doc_stride, &spans, &cap_spans);
        for (int s = 0; s < n_spans; s++) add_feature(out, d, e, s, spans, n_spans, query_len, tok_start, tok_end);
    }
    out->query_start[d->n_examples] = out->n_query_ids;
    free(spans);
    token_list_free(&tl);
    return 0;
}

void squad_features_free(SquadFeatures *f) {
    free(f->features), free(f->query_ids), free(f->query_start), free(f->max_context);
    memset(f, 0, sizeof *f);
}

void squad_feature_inputs(const SquadData *d, const SquadFeatures *f, int i, int32_t *input_ids,
                          int32_t *input_mask, int32_t *segment_ids) {
    const SquadFeature *ft = &f->features[i];
    const SquadParagraph *p = &d->paragraphs[d->examples[ft->example_index].paragraph];
    const int32_t *query = f->query_ids + f->query_start[ft->example_index];
    int doc0 = ft->query_length + 2;
    for (int t = 0; t < f->max_seq_length; t++) {
        int32_t id = 0;
        if (t == 0) id = f->cls_id;
        else if (t < doc0 - 1) id = query[t - 1];
        else if (t == doc0 - 1 || t == ft->n_tokens - 1) id = f->sep_id;
        else if (t < ft->n_tokens) id = p->sub_ids[ft->doc_start + t - doc0];
        if (input_ids) input_ids[t] = id;
        if (input_mask) input_mask[t] = t < ft->n_tokens;
        if (segment_ids) segment_ids[t] = t >= doc0 && t < ft->n_tokens;
    }
}

int squad_token_to_orig(const SquadData *d, const SquadFeatures *f, int i, int pos) {
    const SquadFeature *ft = &f->features[i];
    int k = pos - (ft->query_length + 2);
    if (k < 0 || k >= ft->doc_length) return -1;
    return d->paragraphs[d->examples[ft->example_index].paragraph].tok_to_orig[ft->doc_start + k];
}

bool squad_token_is_max_context(const SquadFeatures *f, int i, int pos) {
    const SquadFeature *ft = &f->features[i];
    int k = pos - (ft->query_length + 2);
    return k >= 0 && k < ft->doc_length && f->max_context[ft->max_context_at + k];
}
