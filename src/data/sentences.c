/* Sentence splitting: NLTK's PunktSentenceTokenizer (nltk/tokenize/punkt.py, the version
 * whose tokenize() finds candidate breaks with period_context_re and decides each one by
 * annotating the words around it), reimplemented over UTF-8 bytes with the English model
 * compiled in. The goal is the same spans as nltk.sent_tokenize, so shards match NVIDIA's.
 *
 * Outline of one call:
 *  1. every '.', '?' or '!' followed by a non-word character or by whitespace and a token
 *     is a candidate; its context is the word before it, itself and what follows;
 *  2. a candidate is a break if the context, word-tokenized and annotated (first pass:
 *     abbreviations / ellipses / stops; second pass: collocations, orthography,
 *     sentence starters, initials and numbers), has a break before its last token;
 *  3. closing quotes and brackets after a break are moved onto the sentence before it.
 *
 * Python semantics kept on purpose: \s is str.isspace(), \d is a decimal digit (Nd), the
 * "last whitespace" search uses string.whitespace (ASCII) and treats index 0 as "none". */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/strmap.h"
#include "core/test_hooks.h"
#include "core/utf8.h"
#include "data/corpus.h"
#include "data/punkt_model.h"

/* TEST_COUNT_WORK: steps of the scanning loops, what the scaling tests count. Most loops
 * decode code points through decode_at, which counts each one. */

/* ---- The model's sets and the ortho table: string maps (core/strmap.h) ---------------- */

/* key -> value; a key put twice keeps the last value. */
static void map_put(StrMap *m, const char *key, size_t len, int value) {
    strmap_intern(m, key, len, NULL)->value = value;
}

/* Returns the value, or -1 if absent. */
static int map_get(const StrMap *m, const char *key, size_t len) {
    const StrMapEntry *e = strmap_find(m, key, len);
    return e ? (int)e->value : -1;
}

struct SentenceSplitter {
    StrMap abbrevs, starters, collocations, ortho;
};

/* Collocation keys are "first\tsecond"; no type contains a tab. */
static void colloc_key(char *buf, size_t cap, const char *a, size_t alen, const char *b,
                       size_t blen, size_t *len) {
    *len = 0;
    if (alen + blen + 1 > cap) return;
    memcpy(buf, a, alen);
    buf[alen] = '\t';
    memcpy(buf + alen + 1, b, blen);
    *len = alen + blen + 1;
}

SentenceSplitter *sentence_splitter_new(void) {
    const PunktModelData *d = &PUNKT_ENGLISH;
    SentenceSplitter *s = xcalloc(1, sizeof *s);
    strmap_init(&s->abbrevs, (size_t)d->n_abbrev_types, false);   /* the model's strings: static */
    for (int i = 0; i < d->n_abbrev_types; i++)
        map_put(&s->abbrevs, d->abbrev_types[i], strlen(d->abbrev_types[i]), 1);
    strmap_init(&s->starters, (size_t)d->n_sent_starters, false);
    for (int i = 0; i < d->n_sent_starters; i++)
        map_put(&s->starters, d->sent_starters[i], strlen(d->sent_starters[i]), 1);
    strmap_init(&s->collocations, (size_t)d->n_collocations, true);   /* keys made here */
    for (int i = 0; i < d->n_collocations; i++) {
        char key[512];
        size_t len;
        const char *a = d->collocations[i][0], *b = d->collocations[i][1];
        colloc_key(key, sizeof key, a, strlen(a), b, strlen(b), &len);
        if (len) map_put(&s->collocations, key, len, 1);
    }
    strmap_init(&s->ortho, (size_t)d->n_ortho_context, false);
    for (int i = 0; i < d->n_ortho_context; i++)
        map_put(&s->ortho, d->ortho_context[i].type, strlen(d->ortho_context[i].type),
                d->ortho_context[i].flags);
    return s;
}

void sentence_splitter_free(SentenceSplitter *s) {
    if (!s) return;
    strmap_free(&s->abbrevs);
    strmap_free(&s->starters);
    strmap_free(&s->collocations);
    strmap_free(&s->ortho);
    free(s);
}

void sentence_list_init(SentenceList *l) { memset(l, 0, sizeof *l); }
void sentence_list_free(SentenceList *l) { free(l->spans); sentence_list_init(l); }

static void sentence_list_push(SentenceList *l, size_t start, size_t end) {
    ARRAY_RESERVE(l->spans, l->cap, (size_t)l->n + 1, 64);
    l->spans[l->n++] = (SentenceSpan){start, end};
}

/* ---- Characters, with Python's definitions ------------------------------------------ */

/* Decodes the code point at text[i] (i < len); an invalid byte is U+FFFD of length 1. */
static int decode_at(const char *text, size_t len, size_t i, int32_t *cp) {
    TEST_COUNT_WORK(1);
    int n;
    *cp = utf8_decode((const unsigned char *)text + i, len - i, &n);
    if (*cp < 0) {   /* an invalid byte reads as U+FFFD, one byte at a time */
        *cp = 0xFFFD;
        return 1;
    }
    return n;
}

/* \s of the `regex` module that NLTK compiles punkt's patterns with (Unicode White_Space:
 * unlike str.isspace(), not the separators U+001C..U+001F). */
static bool rx_isspace(int32_t c) { return py_isspace(c) && !(c >= 0x1c && c <= 0x1f); }

static bool is_rx_space_at(const char *t, size_t len, size_t i) {
    int32_t c;
    decode_at(t, len, i, &c);
    return rx_isspace(c);
}

static bool is_decimal(int32_t c) { return utf8proc_category(c) == UTF8PROC_CATEGORY_ND; }

/* [^\W\d] in the `regex` module: word characters (Alphabetic, marks, connector punctuation,
 * joiners) that are not decimal digits. Unlike Python's re, '\u00b2' or '\u00bd' are not. */
static bool is_word_nondigit(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || k == UTF8PROC_CATEGORY_NL ||
           (k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_PC ||
           c == 0x200C || c == 0x200D;
}

/* ASCII character classes of punkt's patterns, as bits of a table. */
enum { NON_WORD = 1, CLOSING = 2, NO_WORD_START = 4 };

static const unsigned char ASCII_CLASS[128] = {
    [')'] = NON_WORD | CLOSING | NO_WORD_START, ['"'] = NON_WORD | CLOSING | NO_WORD_START,
    ['}'] = NON_WORD | CLOSING | NO_WORD_START, [']'] = NON_WORD | CLOSING | NO_WORD_START,
    [';'] = NON_WORD | NO_WORD_START, ['*'] = NON_WORD | NO_WORD_START, [':'] = NON_WORD | NO_WORD_START,
    ['@'] = NON_WORD | NO_WORD_START, ['('] = NON_WORD | NO_WORD_START, ['{'] = NON_WORD | NO_WORD_START,
    ['['] = NON_WORD | NO_WORD_START, ['\''] = NON_WORD | CLOSING, ['?'] = NON_WORD, ['!'] = NON_WORD,
    ['`'] = NO_WORD_START, ['&'] = NO_WORD_START, ['#'] = NO_WORD_START, ['-'] = NO_WORD_START,
    [','] = NO_WORD_START,
};

static unsigned char ascii_class(int32_t c) { return c > 0 && c < 128 ? ASCII_CLASS[c] : 0; }

static bool is_curly_quote(int32_t c) {
    return c == 0x2018 || c == 0x2019 || c == 0x201c || c == 0x201d || c == 0xab || c == 0xbb;
}

/* The characters that cannot appear inside words (_re_non_word_chars). */
static bool is_non_word(int32_t c) { return (ascii_class(c) & NON_WORD) || is_curly_quote(c); }

/* Closing punctuation moved onto the previous sentence (re_boundary_realignment). */
static bool is_closing(int32_t c) { return (ascii_class(c) & CLOSING) || is_curly_quote(c); }

/* Characters a word may not start with (_re_word_start). */
static bool is_word_start(int32_t c) { return !(ascii_class(c) & NO_WORD_START); }

/* ---- Punkt word tokenization (PunktLanguageVars.word_tokenize) ---------------------- */

/* Length of multi-character punctuation at t[i] ("--", "..", ". . ."), 0 if none. */
static size_t multichar_len(const char *t, size_t end, size_t i) {
    if (i + 1 >= end) return 0;
    if ((t[i] == '-' || t[i] == '.') && t[i + 1] == t[i]) {
        size_t j = i;
        while (j < end && t[j] == t[i]) j++;
        TEST_COUNT_WORK((long long)(j - i));
        return j - i;
    }
    if (t[i] != '.') return 0;
    /* (?:\.\s){2,}\. -- greedy repetitions, then backtrack one if no '.' follows. */
    long reps = 0;
    size_t j = i, before_last = i; /* end of the repetitions, and of all but the last */
    while (j + 1 < end && t[j] == '.') {
        int32_t c;
        int n = decode_at(t, end, j + 1, &c);
        if (!rx_isspace(c)) break;
        before_last = j;
        j += 1 + (size_t)n;
        reps++;
    }
    if (reps >= 2 && j < end && t[j] == '.') return j + 1 - i;
    if (reps >= 3) return before_last + 1 - i; /* the last repetition's '.' closes it */
    return 0;
}

/* The lookahead that ends a word token at t[i]. */
static bool word_ends_at(const char *t, size_t end, size_t i) {
    if (i >= end) return true;
    int32_t c;
    decode_at(t, end, i, &c);
    if (rx_isspace(c) || is_non_word(c) || multichar_len(t, end, i)) return true;
    if (c != ',') return false;
    if (i + 1 >= end) return true;
    int32_t d;
    decode_at(t, end, i + 1, &d);
    return rx_isspace(d) || is_non_word(d) || multichar_len(t, end, i + 1) > 0;
}

typedef struct {
    size_t start, end;          /* token bytes in the text */
    size_t lower, lower_len;    /* tok.lower() in the scratch buffer */
    const char *type;           /* lower, or "##number##" */
    size_t type_len;
    bool period_final, sentbreak, abbr, ellipsis, initial, first_upper, first_lower;
} Word;

typedef struct {
    Word *words;
    int n, cap;
    char *buf;  /* lowercased tokens */
    size_t buf_len, buf_cap;
    SentenceSpan *slices;
    int n_slices, cap_slices;
} Scratch;

static void scratch_free(Scratch *s) {
    free(s->words);
    free(s->buf);
    free(s->slices);
}

static bool is_numeric(const char *t, size_t s, size_t e) { /* ^-?[\.,]?\d[\d,\.-]*\.?$ */
    size_t i = s;
    if (i < e && t[i] == '-') i++;
    if (i < e && (t[i] == '.' || t[i] == ',')) i++;
    int32_t c;
    if (i >= e) return false;
    i += (size_t)decode_at(t, e, i, &c);
    if (!is_decimal(c)) return false;
    while (i < e) {
        i += (size_t)decode_at(t, e, i, &c);
        if (!(is_decimal(c) || c == ',' || c == '.' || c == '-')) return false;
    }
    return true;
}

static void add_word(Scratch *sc, const char *t, size_t s, size_t e) {
    ARRAY_RESERVE(sc->words, sc->cap, (size_t)sc->n + 1, 16);
    Word *w = &sc->words[sc->n++];
    memset(w, 0, sizeof *w);
    w->start = s;
    w->end = e;
    if (sc->buf_len + 4 * (e - s) + 1 > sc->buf_cap) {
        sc->buf_cap = 2 * (sc->buf_len + 4 * (e - s) + 1);
        sc->buf = xrealloc(sc->buf, sc->buf_cap);
    }
    w->lower = sc->buf_len;
    int32_t c;
    for (size_t i = s; i < e;) {
        i += (size_t)decode_at(t, e, i, &c);
        sc->buf_len += (size_t)utf8proc_encode_char(utf8proc_tolower(c),
                                                     (utf8proc_uint8_t *)sc->buf + sc->buf_len);
    }
    w->lower_len = sc->buf_len - w->lower;
    int n0 = decode_at(t, e, s, &c);
    utf8proc_category_t k = utf8proc_category(c);
    w->first_upper = k == UTF8PROC_CATEGORY_LU;
    w->first_lower = k == UTF8PROC_CATEGORY_LL;
    w->period_final = t[e - 1] == '.';
    w->initial = e - s == (size_t)n0 + 1 && t[e - 1] == '.' && is_word_nondigit(c);
}

/* Is t[s, e) blank by str.strip()? */
static bool is_blank(const char *t, size_t s, size_t e) {
    for (size_t i = s; i < e;) {
        int32_t c;
        i += (size_t)decode_at(t, e, i, &c);
        if (!py_isspace(c)) return false;
    }
    return true;
}

/* Splits t[s, e) at '\n' and word-tokenizes each non-blank line into sc->words. */
static void tokenize_words(Scratch *sc, const char *t, size_t s, size_t e) {
    sc->n = 0;
    sc->buf_len = 0;
    for (size_t line = s; line < e;) {
        const char *nl = memchr(t + line, '\n', e - line);
        size_t line_end = nl ? (size_t)(nl - t) : e;
        TEST_COUNT_WORK((long long)(line_end - line) + 1);
        bool blank = is_blank(t, line, line_end);
        for (size_t i = line; i < line_end && !blank;) {
            int32_t c;
            int n = decode_at(t, line_end, i, &c);
            if (rx_isspace(c)) {
                i += (size_t)n;
                continue;
            }
            size_t m = multichar_len(t, line_end, i);
            size_t j = m ? i + m : i + (size_t)n;
            if (!m && is_word_start(c))
                while (!word_ends_at(t, line_end, j)) j += (size_t)decode_at(t, line_end, j, &c);
            add_word(sc, t, i, j);
            i = j;
        }
        line = line_end + 1;
    }
    for (int k = 0; k < sc->n; k++) { /* resolve types now that buf no longer moves */
        Word *w = &sc->words[k];
        if (is_numeric(t, w->start, w->end)) {
            w->type = "##number##";
            w->type_len = 10;
        } else {
            w->type = sc->buf + w->lower;
            w->type_len = w->lower_len;
        }
    }
}

/* ---- Annotation (first and second pass) -------------------------------------------- */

static size_t type_no_period_len(const Word *w) {
    return w->type_len > 1 && w->type[w->type_len - 1] == '.' ? w->type_len - 1 : w->type_len;
}
static size_t type_no_sentperiod_len(const Word *w) {
    return w->sentbreak ? type_no_period_len(w) : w->type_len;
}

static void first_pass(const SentenceSplitter *sp, const Scratch *sc, const char *t, Word *w) {
    size_t len = w->end - w->start;
    const char *tok = t + w->start;
    if (len == 1 && (*tok == '.' || *tok == '?' || *tok == '!')) {
        w->sentbreak = true;
        return;
    }
    bool all_dots = len >= 2;
    for (size_t i = 0; i < len && all_dots; i++) all_dots = tok[i] == '.';
    TEST_COUNT_WORK((long long)len);
    if (all_dots) {
        w->ellipsis = true;
        return;
    }
    if (!w->period_final || (len >= 2 && tok[len - 2] == '.')) return;
    const char *low = sc->buf + w->lower; /* lower(tok) ends with the '.' too */
    size_t low_len = w->lower_len - 1;
    size_t tail = low_len;
    while (tail > 0 && low[tail - 1] != '-') tail--;
    TEST_COUNT_WORK((long long)(low_len - tail));
    if (map_get(&sp->abbrevs, low, low_len) >= 0 ||
        map_get(&sp->abbrevs, low + tail, low_len - tail) >= 0)
        w->abbr = true;
    else
        w->sentbreak = true;
}

typedef enum { ORTHO_NO, ORTHO_YES, ORTHO_UNKNOWN } Ortho;

static int ortho_flags(const SentenceSplitter *sp, const Word *w) {
    int f = map_get(&sp->ortho, w->type, type_no_sentperiod_len(w));
    return f < 0 ? 0 : f;
}

/* Is w the first word of a sentence, on orthographic evidence? */
static Ortho ortho_heuristic(const SentenceSplitter *sp, const char *t, const Word *w) {
    if (w->end - w->start == 1 && strchr(";:,.!?", t[w->start])) return ORTHO_NO;
    int oc = ortho_flags(sp, w);
    if (w->first_upper && (oc & PUNKT_ORTHO_LC) && !(oc & PUNKT_ORTHO_MID_UC)) return ORTHO_YES;
    if (w->first_lower && ((oc & PUNKT_ORTHO_UC) || !(oc & PUNKT_ORTHO_BEG_LC))) return ORTHO_NO;
    return ORTHO_UNKNOWN;
}

static void second_pass(const SentenceSplitter *sp, const char *t, Word *w1, const Word *w2) {
    if (!w1->period_final) return;
    size_t typ_len = type_no_period_len(w1), next_len = type_no_sentperiod_len(w2);
    char key[512];
    size_t klen;
    colloc_key(key, sizeof key, w1->type, typ_len, w2->type, next_len, &klen);
    if (klen && map_get(&sp->collocations, key, klen) >= 0) {
        w1->sentbreak = false;
        w1->abbr = true;
        return;
    }
    if ((w1->abbr || w1->ellipsis) && !w1->initial) {
        if (ortho_heuristic(sp, t, w2) == ORTHO_YES) {
            w1->sentbreak = true;
            return;
        }
        if (w2->first_upper && map_get(&sp->starters, w2->type, next_len) >= 0) {
            w1->sentbreak = true;
            return;
        }
    }
    bool is_number = typ_len == 10 && !memcmp(w1->type, "##number##", 10);
    if (w1->initial || is_number) {
        Ortho o = ortho_heuristic(sp, t, w2);
        if (o == ORTHO_NO) {
            w1->sentbreak = false;
            w1->abbr = true;
            return;
        }
        if (o == ORTHO_UNKNOWN && w1->initial && w2->first_upper &&
            !(ortho_flags(sp, w2) & PUNKT_ORTHO_LC)) {
            w1->sentbreak = false;
            w1->abbr = true;
        }
    }
}

/* text_contains_sentbreak: is some word before the last of t[s, e) a sentence break? */
static bool contains_sentbreak(const SentenceSplitter *sp, Scratch *sc, const char *t, size_t s,
                               size_t e) {
    tokenize_words(sc, t, s, e);
    for (int i = 0; i < sc->n; i++) first_pass(sp, sc, t, &sc->words[i]);
    for (int i = 0; i + 1 < sc->n; i++) {
        second_pass(sp, t, &sc->words[i], &sc->words[i + 1]);
        if (sc->words[i].sentbreak) return true;
    }
    return false;
}

/* ---- Candidates, slices and realignment -------------------------------------------- */

typedef struct {
    size_t at;          /* the '.', '?' or '!' */
    size_t after_end;   /* end of the lookahead (non-word char, or whitespace + token) */
    size_t next_tok;    /* start of the following token, or 0 when none was matched */
    bool has_next_tok;
} Candidate;

/* period_context_re at t[i]: a stop followed by a non-word char or by whitespace + token. */
static bool candidate_at(const char *t, size_t len, size_t i, Candidate *c) {
    if (!(t[i] == '.' || t[i] == '?' || t[i] == '!') || i + 1 >= len) return false;
    int32_t cp;
    size_t q = i + 1;
    int n = decode_at(t, len, q, &cp);
    c->at = i;
    c->has_next_tok = false;
    if (is_non_word(cp)) {
        c->after_end = q + (size_t)n;
        return true;
    }
    if (!rx_isspace(cp)) return false;
    while (q < len && is_rx_space_at(t, len, q)) q += (size_t)decode_at(t, len, q, &cp);
    if (q >= len) return false;
    c->next_tok = q;
    c->has_next_tok = true;
    while (q < len && !is_rx_space_at(t, len, q)) q += (size_t)decode_at(t, len, q, &cp);
    c->after_end = q;
    return true;
}

static void push_slice(Scratch *sc, size_t start, size_t end) {
    ARRAY_RESERVE(sc->slices, sc->cap_slices, (size_t)sc->n_slices + 1, 64);
    sc->slices[sc->n_slices++] = (SentenceSpan){start, end};
}

/* Decides a candidate whose context is t[ctx, c->after_end); records the slice it ends. */
static void decide(const SentenceSplitter *sp, Scratch *sc, const char *t, size_t ctx,
                   const Candidate *c, size_t *last_break) {
    if (!contains_sentbreak(sp, sc, t, ctx, c->after_end)) return;
    push_slice(sc, *last_break, c->at + 1);
    *last_break = c->has_next_tok ? c->next_tok : c->at + 1;
}

/* _match_potential_end_contexts + _slices_from_text. */
static void find_slices(const SentenceSplitter *sp, Scratch *sc, const char *t, size_t len) {
    size_t last_break = 0, prev_start = 0, prev_stop = 0;
    Candidate prev = {0}, cur;
    bool have_prev = false;
    TEST_COUNT_WORK((long long)len);  /* each byte tried as a candidate */
    for (size_t i = 0; i < len; i++) {
        if (!candidate_at(t, len, i, &cur)) continue;
        size_t ws = 0; /* last ASCII whitespace in t[prev_stop, i), relative; 0 = none */
        for (size_t j = i; j > prev_stop; j--) {
            TEST_COUNT_WORK(1);
            if (strchr(" \t\n\r\v\f", t[j - 1]) && t[j - 1]) {
                ws = j - 1 - prev_stop;
                break;
            }
        }
        size_t word_start = ws ? prev_stop + ws + 1 : prev_start;
        if (have_prev && prev_stop <= word_start) decide(sp, sc, t, prev_start, &prev, &last_break);
        prev = cur;
        have_prev = true;
        prev_start = word_start;
        prev_stop = i;
    }
    if (have_prev) decide(sp, sc, t, prev_start, &prev, &last_break);
    push_slice(sc, last_break, utf8_rstrip_len(t, len)); /* len(text.rstrip()) */
}

/* re_boundary_realignment.match(t[s, e)): closing chars (lazily) then whitespace, "--" or
 * the end. Returns false if no match; else *kept = the closing chars' length and
 * *consumed = the whole match's length. */
static bool realign_match(const char *t, size_t s, size_t e, size_t *kept, size_t *consumed) {
    size_t p = s;
    while (p < e) {
        int32_t cp;
        p += (size_t)decode_at(t, e, p, &cp);
        if (!is_closing(cp)) return false;
        size_t q = p;
        while (q < e && is_rx_space_at(t, e, q)) q += (size_t)decode_at(t, e, q, &cp);
        if (q > p || (p + 1 < e && t[p] == '-' && t[p + 1] == '-') || p == e) {
            *kept = p - s;
            *consumed = q - s;
            return true;
        }
    }
    return false;
}

int split_sentences(const SentenceSplitter *sp, const char *text, size_t len, SentenceList *out) {
    out->n = 0;
    Scratch sc = {0};
    find_slices(sp, &sc, text, len);
    size_t realign = 0;
    for (int k = 0; k < sc.n_slices; k++) {
        size_t start = sc.slices[k].start + realign, stop = sc.slices[k].end;
        size_t kept, consumed;
        if (k + 1 < sc.n_slices &&
            realign_match(text, sc.slices[k + 1].start, sc.slices[k + 1].end, &kept, &consumed)) {
            sentence_list_push(out, start, sc.slices[k + 1].start + kept);
            realign = consumed;
            continue;
        }
        realign = 0;
        if (start < stop) sentence_list_push(out, start, stop);
    }
    scratch_free(&sc);
    return out->n;
}
