/* SQuAD post-processing: run_squad.py's write_predictions, get_final_text,
 * _get_best_indexes and _compute_softmax, and the three JSON files it writes (see
 * squad.h for the contract). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "tasks/squad.h"
#include "tasks/squad_internal.h"

SquadPredictOptions squad_predict_default_options(void) {
    return (SquadPredictOptions){.n_best_size = 20, .max_answer_length = 30, .null_score_diff_threshold = 0.0};
}

/* ---- get_final_text --------------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    ARRAY_RESERVE(b->s, b->cap, b->n + n + 1, 256);
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void join_word(const char *word, size_t len, int start, int end, void *ctx) {
    Buf *b = ctx;
    if (b->n) buf_add(b, " ", 1);
    buf_add(b, word, len);
}

/* The index among the non-space characters of the code point at cp_index of s (the
 * reference's tok_s_to_ns_map), or -1 when that character is a space or out of range. */
static long nonspace_index(const char *s, long cp_index) {
    size_t n = strlen(s), i = 0;
    long ns = 0;
    for (long k = 0; i < n; k++) {
        int32_t c = squad_next_cp(s, n, &i);
        if (k == cp_index) return c == ' ' ? -1 : ns;
        if (c != ' ') ns++;
    }
    return -1;
}

/* Byte span [*begin, *end) of the k-th non-space character of s (orig_ns_to_s_map);
 * false if s has fewer. */
static bool nth_nonspace(const char *s, long k, size_t *begin, size_t *end) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t at = i;
        if (squad_next_cp(s, n, &i) == ' ') continue;
        if (k-- == 0) {
            *begin = at, *end = i;
            return true;
        }
    }
    return false;
}

static long count_nonspace(const char *s) {
    size_t n = strlen(s), i = 0;
    long k = 0;
    while (i < n) k += squad_next_cp(s, n, &i) != ' ';
    return k;
}

/* get_final_text with the caller's scratch (tl for the BasicTokenizer, tb for its text).
 * Python's find and slicing count characters; byte search finds the same first match in
 * valid UTF-8, and the positions are converted to characters where the reference counts.
 * *at: the byte offset in orig where the returned text starts (0 when it is orig). */
static char *final_text(const Tokenizer *tok, TokenList *tl, Buf *tb, const char *pred, const char *orig, size_t *at) {
    *at = 0;
    tb->n = 0;
    buf_add(tb, "", 0);
    basic_tokenize(tok, orig, strlen(orig), tl, join_word, tb);
    const char *tok_text = tb->s;
    const char *hit = strstr(tok_text, pred);
    if (!hit || count_nonspace(orig) != count_nonspace(tok_text)) return xstrdup(orig);
    long start_cp = (long)squad_count_cps(tok_text, (size_t)(hit - tok_text));
    long end_cp = start_cp + (long)squad_count_cps(pred, strlen(pred)) - 1;
    long ns_start = nonspace_index(tok_text, start_cp), ns_end = nonspace_index(tok_text, end_cp);
    size_t b0, e0, b1, e1;
    if (ns_start < 0 || !nth_nonspace(orig, ns_start, &b0, &e0)) return xstrdup(orig);
    if (ns_end < 0 || !nth_nonspace(orig, ns_end, &b1, &e1)) return xstrdup(orig);
    if (e1 <= b0) return xstrdup("");  /* Python's empty slice; the alignment is monotonic, so never */
    *at = b0;
    char *out = xmalloc(e1 - b0 + 1);
    memcpy(out, orig + b0, e1 - b0);
    out[e1 - b0] = 0;
    return out;
}

char *squad_final_text(const Tokenizer *tok, const char *pred_text, const char *orig_text) {
    TokenList tl;
    token_list_init(&tl);
    Buf tb = {0};
    size_t at;
    char *out = final_text(tok, &tl, &tb, pred_text, orig_text, &at);
    token_list_free(&tl);
    free(tb.s);
    return out;
}

/* ---- ranking ------------------------------------------------------------------------- */

/* Strictly before in a descending sort. NaN goes last (Python's order with NaN depends
 * on the input order; no real model gives NaN logits that are still worth ranking). */
static bool precedes(double x, double y) { return !isnan(x) && (isnan(y) || x > y); }

/* _get_best_indexes: the k positions with the largest logits, largest first, equal
 * logits in position order (Python's sort is stable). Returns how many (min(k, n)). */
static int best_indexes(const float *logits, int n, int k, int *out) {
    int m = 0;
    for (int i = 0; i < n && k > 0; i++) {
        int pos = m;
        while (pos > 0 && precedes(logits[i], logits[out[pos - 1]])) pos--;
        if (pos >= k) continue;
        int last = m < k ? m : k - 1;
        memmove(out + pos + 1, out + pos, (size_t)(last - pos) * sizeof *out);
        out[pos] = i;
        if (m < k) m++;
    }
    return m;
}

typedef struct {
    int feature;                  /* global feature index (the null prediction: start = end = 0) */
    int start, end;
    double start_logit, end_logit;
} Prelim;

/* Stable sort of prelims by start_logit + end_logit, largest first (a merge sort: the
 * reference's sorted() keeps equal scores in the order they were found). */
static void sort_prelims(Prelim *p, Prelim *tmp, int n) {
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int a = lo, b = mid, o = lo;
            while (a < mid && b < hi) {
                bool right_first = precedes(p[b].start_logit + p[b].end_logit, p[a].start_logit + p[a].end_logit);
                tmp[o++] = right_first ? p[b++] : p[a++];
            }
            while (a < mid) tmp[o++] = p[a++];
            while (b < hi) tmp[o++] = p[b++];
        }
        memcpy(p, tmp, (size_t)n * sizeof *p);
    }
}

/* _compute_softmax over the entries' start_logit + end_logit, in double as Python does. */
static void softmax(SquadNbestEntry *e, int n) {
    double max = 0, sum = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || e[i].start_logit + e[i].end_logit > max) max = e[i].start_logit + e[i].end_logit;
    for (int i = 0; i < n; i++) {
        e[i].probability = exp(e[i].start_logit + e[i].end_logit - max);
        sum += e[i].probability;
    }
    for (int i = 0; i < n; i++) e[i].probability /= sum;
}

/* ---- one example ------------------------------------------------------------------------ */

typedef struct {
    const SquadData *d;
    const SquadFeatures *f;
    const float *start_logits, *end_logits;
    const Tokenizer *tok;
    const SquadPredictOptions *opt;
    int *start_idx, *end_idx;     /* n_best_size each */
    Prelim *prelims, *tmp;
    size_t n_prelims, cap_prelims, cap_tmp;
    int32_t *ids;                 /* one feature's input_ids */
    TokenList tl;
    Buf text, tok_text;
    /* the null score of the example: minimum over its features of start[0] + end[0] */
    double score_null, null_start, null_end;
    int null_feature;
} Predictor;

static void add_prelim(Predictor *p, Prelim pr) {
    ARRAY_RESERVE(p->prelims, p->cap_prelims, p->n_prelims + 1, 256);
    p->prelims[p->n_prelims++] = pr;
}

/* The validity rules of the reference for a (start, end) pair of feature fi. */
static bool valid_span(const Predictor *p, int fi, int s, int e) {
    const SquadFeature *ft = &p->f->features[fi];
    if (s >= ft->n_tokens || e >= ft->n_tokens) return false;
    if (squad_token_to_orig(p->d, p->f, fi, s) < 0 || squad_token_to_orig(p->d, p->f, fi, e) < 0) return false;
    if (!squad_token_is_max_context(p->f, fi, s)) return false;
    return e >= s && e - s + 1 <= p->opt->max_answer_length;
}

/* The candidate spans of feature fi (and, for v2.0, its share of the null score). */
static void feature_prelims(Predictor *p, int fi) {
    int seq = p->f->max_seq_length, k = p->opt->n_best_size;
    const float *sl = p->start_logits + (size_t)fi * seq, *el = p->end_logits + (size_t)fi * seq;
    int ns = best_indexes(sl, seq, k, p->start_idx), ne = best_indexes(el, seq, k, p->end_idx);
    if (p->opt->version_2_with_negative) {
        double null = (double)sl[0] + (double)el[0];
        if (null < p->score_null) {
            p->score_null = null, p->null_feature = fi;
            p->null_start = sl[0], p->null_end = el[0];
        }
    }
    for (int a = 0; a < ns; a++)
        for (int b = 0; b < ne; b++) {
            int s = p->start_idx[a], e = p->end_idx[b];
            if (valid_span(p, fi, s, e)) add_prelim(p, (Prelim){fi, s, e, sl[s], el[e]});
        }
}

/* s.replace(pat, "") in place: one pass, left to right, as Python's str.replace. */
static void remove_all(char *s, const char *pat) {
    size_t m = strlen(pat);
    char *w = s;
    for (const char *r = s; *r;)
        if (!strncmp(r, pat, m)) r += m;
        else *w++ = *r++;
    *w = 0;
}

/* The context's byte offset of byte k of " ".join(words w0..w1) (k on a word, not a space
 * between two). */
static size_t context_offset(const SquadParagraph *para, int w0, int w1, size_t k) {
    for (int w = w0; w <= w1; w++) {
        const size_t len = (size_t)(para->word_end[w] - para->word_start[w]);
        if (k < len || w == w1) return (size_t)para->word_start[w] + k;
        k -= len + 1;
    }
    return 0;
}

/* The final text of a non-null prelim: its WordPieces de-tokenized (joined by spaces,
 * " ##" and then "##" removed, whitespace normalised as " ".join(text.split())), then
 * get_final_text against the original words they came from, joined by spaces. Where that
 * text lies in the context goes in *start_char, *end_char (code points, end exclusive). */
static char *prelim_text(Predictor *p, const Prelim *pr, int *start_char, int *end_char) {
    const Vocab *v = tokenizer_vocab(p->tok);
    squad_feature_inputs(p->d, p->f, pr->feature, p->ids, NULL, NULL);
    p->text.n = 0;
    buf_add(&p->text, "", 0);
    for (int t = pr->start; t <= pr->end; t++) {
        const char *piece = vocab_token(v, p->ids[t]);
        if (t > pr->start) buf_add(&p->text, " ", 1);
        buf_add(&p->text, piece ? piece : "", piece ? strlen(piece) : 0);
    }
    remove_all(p->text.s, " ##");
    remove_all(p->text.s, "##");
    char *pred = xmalloc(strlen(p->text.s) + 1);
    squad_normalize_spaces(p->text.s, pred);
    const SquadFeature *ft = &p->f->features[pr->feature];
    const SquadParagraph *para = &p->d->paragraphs[p->d->examples[ft->example_index].paragraph];
    int w0 = squad_token_to_orig(p->d, p->f, pr->feature, pr->start);
    int w1 = squad_token_to_orig(p->d, p->f, pr->feature, pr->end);
    p->text.n = 0;
    for (int w = w0; w <= w1; w++) {
        if (w > w0) buf_add(&p->text, " ", 1);
        buf_add(&p->text, para->context + para->word_start[w], (size_t)(para->word_end[w] - para->word_start[w]));
    }
    size_t at;
    char *out = final_text(p->tok, &p->tl, &p->tok_text, pred, p->text.s, &at);
    free(pred);
    *start_char = *end_char = -1;
    const size_t len = strlen(out);
    if (len) {   /* the text is a slice of the joined words, which are slices of the context */
        const size_t b0 = context_offset(para, w0, w1, at), b1 = context_offset(para, w0, w1, at + len - 1) + 1;
        *start_char = (int)squad_count_cps(para->context, b0);
        *end_char = *start_char + (int)squad_count_cps(para->context + b0, b1 - b0);
    }
    return out;
}

static bool seen_text(const SquadNbestEntry *nbest, int n, const char *text) {
    for (int i = 0; i < n; i++)
        if (!strcmp(nbest[i].text, text)) return true;
    return false;
}

/* The n-best list from the sorted prelims: distinct final texts, at most n_best_size
 * (then, for v2.0, "" if not yet there; and "empty" if nothing at all). */
static int build_nbest(Predictor *p, SquadNbestEntry **out) {
    int cap = p->opt->n_best_size > 0 ? p->opt->n_best_size + 2 : 2, n = 0;
    SquadNbestEntry *nbest = xcalloc((size_t)cap, sizeof *nbest);
    bool seen_empty = false;
    for (size_t i = 0; i < p->n_prelims && n < p->opt->n_best_size; i++) {
        const Prelim *pr = &p->prelims[i];
        char *text;
        int c0 = -1, c1 = -1;
        if (pr->start > 0) {
            text = prelim_text(p, pr, &c0, &c1);
            if (seen_text(nbest, n, text)) {
                free(text);
                continue;
            }
        } else text = xstrdup(""), seen_empty = true;
        nbest[n++] = (SquadNbestEntry){text, 0, pr->start_logit, pr->end_logit, c0, c1};
    }
    if (p->opt->version_2_with_negative && !seen_empty)
        nbest[n++] = (SquadNbestEntry){xstrdup(""), 0, p->null_start, p->null_end, -1, -1};
    if (n == 0) nbest[n++] = (SquadNbestEntry){xstrdup("empty"), 0, 0.0, 0.0, -1, -1};  /* "nonce prediction" */
    softmax(nbest, n);
    *out = nbest;
    return n;
}

/* write_predictions' body for example e, whose features are [f0, f1). */
static void predict_example(Predictor *p, int e, int f0, int f1, SquadResults *out) {
    p->n_prelims = 0;
    p->score_null = 1000000;  /* the reference's "large and positive" start */
    p->null_start = p->null_end = 0;
    p->null_feature = f0;
    for (int fi = f0; fi < f1; fi++) feature_prelims(p, fi);
    if (p->opt->version_2_with_negative) add_prelim(p, (Prelim){p->null_feature, 0, 0, p->null_start, p->null_end});
    ARRAY_RESERVE(p->tmp, p->cap_tmp, p->n_prelims, 256);
    sort_prelims(p->prelims, p->tmp, (int)p->n_prelims);
    out->n_nbest[e] = build_nbest(p, &out->nbest[e]);
    const SquadNbestEntry *best = NULL;
    for (int i = 0; i < out->n_nbest[e] && !best; i++)
        if (out->nbest[e][i].text[0]) best = &out->nbest[e][i];
    out->answer_entry[e] = -1;
    if (!p->opt->version_2_with_negative) {
        out->answer[e] = xstrdup(out->nbest[e][0].text);
        out->answer_entry[e] = 0;
    } else if (!best) {
        out->n_without_non_null++;  /* the reference crashes here (best_non_null_entry is None) */
        out->null_odds[e] = 1000000.0;
        out->answer[e] = xstrdup("");
    } else {
        out->null_odds[e] = p->score_null - best->start_logit - best->end_logit;
        const bool null = out->null_odds[e] > p->opt->null_score_diff_threshold;
        out->answer[e] = xstrdup(null ? "" : best->text);
        if (!null) out->answer_entry[e] = (int)(best - out->nbest[e]);
    }
}

/* The features come from squad_convert over the same data: each example's features are
 * consecutive, in example order. */
static int check_features(const SquadData *d, const SquadFeatures *f, BertError *err) {
    for (int i = 0; i < f->n_features; i++) {
        int e = f->features[i].example_index;
        if (e < 0 || e >= d->n_examples || (i && e < f->features[i - 1].example_index))
            return bert_fail(err, "squad: feature %d does not belong to these examples", i);
    }
    return 0;
}

int squad_predict(const SquadData *d, const SquadFeatures *f, const float *start_logits, const float *end_logits,
                  const Tokenizer *tok, const SquadPredictOptions *opt, SquadResults *out, BertError *err) {
    memset(out, 0, sizeof *out);
    if (check_features(d, f, err) != 0) return -1;
    if (!tokenizer_vocab(tok)) return bert_fail(err, "squad: the tokenizer has no vocabulary");
    int k = opt->n_best_size > 0 ? opt->n_best_size : 0;
    Predictor p = {.d = d, .f = f, .start_logits = start_logits, .end_logits = end_logits, .tok = tok, .opt = opt,
                   .start_idx = xmalloc(((size_t)k + 1) * sizeof(int)),
                   .end_idx = xmalloc(((size_t)k + 1) * sizeof(int)),
                   .ids = xmalloc(((size_t)f->max_seq_length + 1) * sizeof(int32_t))};
    token_list_init(&p.tl);
    size_t n = (size_t)d->n_examples + 1;
    out->n_examples = d->n_examples;
    out->version_2_with_negative = opt->version_2_with_negative;
    out->answer = xcalloc(n, sizeof *out->answer);
    out->nbest = xcalloc(n, sizeof *out->nbest);
    out->n_nbest = xcalloc(n, sizeof *out->n_nbest);
    out->null_odds = xcalloc(n, sizeof *out->null_odds);
    out->answer_entry = xcalloc(n, sizeof *out->answer_entry);
    for (int e = 0, fi = 0; e < d->n_examples; e++) {
        int f0 = fi;
        while (fi < f->n_features && f->features[fi].example_index == e) fi++;
        predict_example(&p, e, f0, fi, out);
    }
    free(p.start_idx), free(p.end_idx), free(p.ids), free(p.prelims), free(p.tmp);
    free(p.text.s), free(p.tok_text.s);
    token_list_free(&p.tl);
    return 0;
}

void squad_results_free(SquadResults *p) {
    for (int e = 0; e < p->n_examples; e++) {
        for (int i = 0; i < p->n_nbest[e]; i++) free(p->nbest[e][i].text);
        free(p->nbest[e]), free(p->answer[e]);
    }
    free(p->answer), free(p->nbest), free(p->n_nbest), free(p->null_odds), free(p->answer_entry);
    memset(p, 0, sizeof *p);
}

/* ---- the JSON files, as Python's json.dumps(obj, indent=4) --------------------------- */

/* A string with json's default ensure_ascii: printable ASCII as is, the usual short
 * escapes, everything else as \uXXXX (lower-case hex; UTF-16 pairs above U+FFFF). */
void squad_json_string(FILE *fp, const char *s) {
    size_t n = strlen(s);
    fputc('"', fp);
    for (size_t i = 0; i < n;) {
        int32_t c = squad_next_cp(s, n, &i);
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (c < 0) c = 0xFFFD;
        if (esc) fputs(esc, fp);
        else if (c >= 0x20 && c < 0x7f) fputc(c, fp);
        else if (c < 0x10000) fprintf(fp, "\\u%04x", (unsigned)c);
        else fprintf(fp, "\\u%04x\\u%04x", 0xD800u + ((unsigned)(c - 0x10000) >> 10), 0xDC00u + ((unsigned)c & 0x3FFu));
    }
    fputc('"', fp);
}

/* Python's repr(float) into out (48 bytes): the shortest digits that read back to x,
 * positional for 1e-4 <= |x| < 1e16 (always with a fraction, ".0" at least), else
 * d.ddde+XX; NaN and the infinities as json writes them. */
static void py_float_repr(double x, char *out) {
    if (isnan(x) || isinf(x) || x == 0) {
        strcpy(out, isnan(x) ? "NaN" : isinf(x) ? (x > 0 ? "Infinity" : "-Infinity") : signbit(x) ? "-0.0" : "0.0");
        return;
    }
    /* the fewest significant digits (1 to 17) that read back to x; more digits never stop
     * reading back, so a binary search finds it */
    char buf[40], digits[24];
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        snprintf(buf, sizeof buf, "%.*e", mid - 1, x);
        if (strtod(buf, NULL) == x) hi = mid;
        else lo = mid + 1;
    }
    snprintf(buf, sizeof buf, "%.*e", lo - 1, x);
    int nd = 0, exp10 = atoi(strchr(buf, 'e') + 1);
    for (const char *c = buf + (x < 0); *c != 'e'; c++)
        if (*c != '.') digits[nd++] = *c;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1;  /* x = 0.DIGITS * 10^decpt */
    char *o = out + (x < 0);
    out[0] = '-';
    if (decpt > 16 || decpt < -3) {
        o += sprintf(o, "%c%s%s", digits[0], nd > 1 ? "." : "", digits + 1);
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (decpt <= 0) {
        o += sprintf(o, "0.");
        for (int z = 0; z < -decpt; z++) *o++ = '0';
        strcpy(o, digits);
    } else if (decpt >= nd) {
        o += sprintf(o, "%s", digits);
        for (int z = 0; z < decpt - nd; z++) *o++ = '0';
        strcpy(o, ".0");
    } else sprintf(o, "%.*s.%s", decpt, digits, digits + decpt);
}

void squad_json_float(FILE *fp, double x) {
    char buf[48];
    py_float_repr(x, buf);
    fputs(buf, fp);
}

/* Python dict semantics for the question ids: a repeated id keeps the place of its first
 * example and the value of its last. Returns, per example, the example whose value goes
 * in its place, or -1 when it is not the first with its id. */
typedef struct {
    const char *id;
    int index;
} IdAt;

static int cmp_id_at(const void *a, const void *b) {
    const IdAt *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int *dict_slots(const SquadData *d) {
    int n = d->n_examples, *slot = xmalloc(((size_t)n + 1) * sizeof *slot);
    IdAt *order = xmalloc(((size_t)n + 1) * sizeof *order);
    for (int i = 0; i < n; i++) order[i] = (IdAt){d->examples[i].qas_id, i}, slot[i] = -1;
    qsort(order, (size_t)n, sizeof *order, cmp_id_at);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && !strcmp(order[j + 1].id, order[i].id)) j++;
        slot[order[i].index] = order[j].index;
        i = j + 1;
    }
    free(order);
    return slot;
}

typedef enum { OUT_ANSWER, OUT_NBEST, OUT_NULL_ODDS } OutKind;

static void write_nbest(FILE *fp, const SquadNbestEntry *nb, int n) {
    fputs("[\n", fp);
    for (int i = 0; i < n; i++) {
        fputs("        {\n            \"text\": ", fp);
        squad_json_string(fp, nb[i].text);
        fputs(",\n            \"probability\": ", fp);
        squad_json_float(fp, nb[i].probability);
        fputs(",\n            \"start_logit\": ", fp);
        squad_json_float(fp, nb[i].start_logit);
        fputs(",\n            \"end_logit\": ", fp);
        squad_json_float(fp, nb[i].end_logit);
        fputs(i + 1 < n ? "\n        },\n" : "\n        }\n", fp);
    }
    fputs("    ]", fp);
}

/* One of the three files: {"id": value, ...} with indent 4, and a final newline. */
static int write_dict(const char *path, const SquadData *d, const SquadResults *p, const int *slot, OutKind kind,
                      BertError *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) return -1;
    FILE *fp = af.fp;
    bool first = true;
    for (int e = 0; e < d->n_examples; e++) {
        if (slot[e] < 0) continue;
        int v = slot[e];
        fputs(first ? "{\n    " : ",\n    ", fp);
        first = false;
        squad_json_string(fp, d->examples[e].qas_id);
        fputs(": ", fp);
        if (kind == OUT_ANSWER) squad_json_string(fp, p->answer[v]);
        else if (kind == OUT_NBEST) write_nbest(fp, p->nbest[v], p->n_nbest[v]);
        else squad_json_float(fp, p->null_odds[v]);
    }
    fputs(first ? "{}\n" : "\n}\n", fp);
    return atomic_commit(&af, err);
}

int squad_write_predictions(const SquadData *d, const SquadResults *p, const char *prediction_file,
                            const char *nbest_file, const char *null_odds_file, BertError *err) {
    if (p->n_examples != d->n_examples) return bert_fail(err, "squad: the predictions are not of these examples");
    int *slot = dict_slots(d);
    int rc = write_dict(prediction_file, d, p, slot, OUT_ANSWER, err);
    if (rc == 0 && nbest_file) rc = write_dict(nbest_file, d, p, slot, OUT_NBEST, err);
    if (rc == 0 && null_odds_file && p->version_2_with_negative)
        rc = write_dict(null_odds_file, d, p, slot, OUT_NULL_ODDS, err);
    free(slot);
    return rc;
}
