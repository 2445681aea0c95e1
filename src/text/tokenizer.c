/* BERT's FullTokenizer (BasicTokenizer + WordpieceTokenizer) in one pass over the bytes.
 *
 * The reference transforms the whole string several times (_clean_text, spaces around
 * CJK, split on whitespace, lower + NFD + drop Mn per piece, split on punctuation,
 * WordPiece per word). Here each whitespace-delimited piece is gathered as code points
 * with their source byte spans, transformed only when it holds a character that the
 * transform can change (ASCII upper case is lowered inline), split on punctuation, and
 * each word goes straight to the longest-match search. Nothing is allocated per token:
 * all working memory lives in the caller's TokenList and only grows. */
#include "text/tokenizer.h"
#include "core/utf8.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/test_hooks.h"
#include "text/unicode_class.h"
#include "text/vocab_internal.h"

struct Tokenizer {
    const Vocab *vocab;
    bool do_lower_case;
    int max_input_chars_per_word;
    char **never_split;            /* valid UTF-8 entries of opt->never_split */
    size_t *never_split_len;
    int n_never_split;
    bool starts_never_split[256];  /* first bytes of never_split entries */
    int unk_id;
    uint8_t bmp_class[0x10000];    /* uc_classify() of every BMP code point */
};

/* One code point of the text being tokenized, with the source bytes it came from. */
typedef struct {
    int32_t cp;
    int start, end;
    uint8_t ccc;  /* canonical combining class, for NFD reordering */
} Char;

typedef struct {
    Char *piece;        /* the current whitespace-delimited piece */
    size_t piece_n, piece_cap;
    Char *out;          /* the piece after lower-casing and accent stripping */
    size_t out_n, out_cap;
    char *bytes;        /* the current word in UTF-8 */
    int *byte_at;       /* byte offset of each code point of the word (+1 at the end) */
    uint64_t *prefix_hash;
    int *piece_id, *piece_end;  /* WordPiece result of the current word */
    size_t word_cap;    /* capacity of bytes/4 and the arrays above (in code points) */
    Char *sorted;       /* canonical_reorder's output for a long run of marks */
    size_t sorted_cap;
} Scratch;

typedef void (*WordSink)(const Tokenizer *t, Scratch *s, const Char *w, size_t n, void *ctx);

/* TEST_COUNT_WORK: steps of the scanning loops, what the scaling tests count. Added once
 * per loop where the loop's length is known, so the hot paths pay one add per piece, not
 * per byte. */

/* ---- creation ---- */

TokenizerOptions tokenizer_default_options(void) {
    TokenizerOptions o = {.do_lower_case = true, .max_input_chars_per_word = 100};
    return o;
}

Tokenizer *tokenizer_new(const Vocab *vocab, const TokenizerOptions *opt) {
    int unk = vocab ? vocab_lookup(vocab, "[UNK]", 5) : -1;
    if (vocab && unk < 0) return NULL;
    Tokenizer *t = xcalloc(1, sizeof *t);
    t->vocab = vocab;
    t->unk_id = unk;
    t->do_lower_case = opt->do_lower_case;
    t->max_input_chars_per_word = opt->max_input_chars_per_word;
    int n = opt->never_split ? opt->n_never_split : 0;
    t->never_split = xcalloc((size_t)n + 1, sizeof *t->never_split);
    t->never_split_len = xcalloc((size_t)n + 1, sizeof *t->never_split_len);
    for (int i = 0; i < n; i++) {
        const char *ns = opt->never_split[i];
        if (!ns[0] || utf8proc_decompose((const utf8proc_uint8_t *)ns, -1, NULL, 0, UTF8PROC_NULLTERM) < 0)
            continue;  /* empty or invalid UTF-8: could never be matched sensibly */
        t->never_split[t->n_never_split] = xstrdup(ns);
        t->never_split_len[t->n_never_split++] = strlen(ns);
        t->starts_never_split[(unsigned char)ns[0]] = true;
    }
    for (int32_t cp = 0; cp < 0x10000; cp++)
        t->bmp_class[cp] = (cp >= 0xD800 && cp <= 0xDFFF) ? UC_DROP : uc_classify(cp);
    return t;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_never_split; i++) free(t->never_split[i]);
    free(t->never_split);
    free(t->never_split_len);
    free(t);
}

const Vocab *tokenizer_vocab(const Tokenizer *t) { return t->vocab; }

static uint8_t class_of(const Tokenizer *t, int32_t cp) {
    return cp < 0x10000 ? t->bmp_class[cp] : uc_classify(cp);
}

/* ---- token lists and scratch memory ---- */

void token_list_init(TokenList *l) { memset(l, 0, sizeof *l); }

static void scratch_free(Scratch *s) {
    if (!s) return;
    free(s->piece);
    free(s->out);
    free(s->bytes);
    free(s->byte_at);
    free(s->prefix_hash);
    free(s->piece_id);
    free(s->piece_end);
    free(s->sorted);
    free(s);
}

void token_list_free(TokenList *l) {
    free(l->tokens);
    scratch_free(l->scratch);
    memset(l, 0, sizeof *l);
}

static Scratch *scratch_of(TokenList *l) {
    if (!l->scratch) l->scratch = xcalloc(1, sizeof(Scratch));
    return l->scratch;
}

static void push_char(Char **arr, size_t *n, size_t *cap, Char c) {
    ARRAY_RESERVE(*arr, *cap, *n + 1, 256);
    (*arr)[(*n)++] = c;
}

static void push_token(TokenList *l, int id, int start, int end) {
    ARRAY_RESERVE(l->tokens, l->cap, (size_t)l->n + 1, 256);
    l->tokens[l->n++] = (Token){id, start, end};
}

/* ---- lower-casing and accent stripping (uncased only) ---- */

/* Python's str.lower() maps U+03A3 to final sigma U+03C2 when a cased letter precedes
 * it and none follows, skipping case-ignorable characters both ways (CPython's
 * handle_capital_sigma), within the whitespace-delimited piece being lowered. */
static bool is_final_sigma(const Char *w, size_t n, size_t i) {
    size_t j = i;
    while (j > 0 && uc_is_case_ignorable(w[j - 1].cp)) j--;
    TEST_COUNT_WORK((long long)(i - j) + 1);
    if (j == 0 || !uc_is_cased(w[j - 1].cp)) return false;
    for (j = i + 1; j < n && uc_is_case_ignorable(w[j].cp); j++) {}
    TEST_COUNT_WORK((long long)(j - i));
    return j == n || !uc_is_cased(w[j].cp);
}

/* Runs of marks up to this long are sorted in place by insertion (real text has one to
 * three marks per letter); longer ones by counting, whose cost does not grow with the
 * square of the run. */
#define INSERTION_SORT_MAX_RUN 32

/* A stable counting sort of the run c[0..n) by combining class (1..254). */
static void counting_sort_by_class(Scratch *s, Char *c, size_t n) {
    size_t start[257] = {0};
    for (size_t i = 0; i < n; i++) start[c[i].ccc + 1]++;
    for (int k = 1; k < 257; k++) start[k] += start[k - 1];
    ARRAY_RESERVE(s->sorted, s->sorted_cap, n, 256);
    for (size_t i = 0; i < n; i++) s->sorted[start[c[i].ccc]++] = c[i];
    memcpy(c, s->sorted, n * sizeof *c);
    TEST_COUNT_WORK(3 * (long long)n + 257);
}

/* NFD's canonical ordering: within each run of non-starters (combining class > 0), a
 * stable sort by combining class. Any stable sort gives the one NFD order, so the two
 * methods below give the same result; insertion alone was quadratic in a run's length
 * (a letter followed by thousands of alternating marks of classes 230 and 220). */
static void canonical_reorder(Scratch *s, Char *c, size_t n) {
    for (size_t run = 0; run < n;) {
        if (c[run].ccc == 0) {
            run++;
            continue;
        }
        size_t end = run + 1;
        while (end < n && c[end].ccc != 0) end++;
        TEST_COUNT_WORK((long long)(end - run));
        if (end - run > INSERTION_SORT_MAX_RUN) {
            counting_sort_by_class(s, c + run, end - run);
        } else {
            for (size_t i = run + 1; i < end; i++) {
                Char x = c[i];
                size_t j = i;
                while (j > run && c[j - 1].ccc > x.ccc) {
                    c[j] = c[j - 1];
                    j--;
                }
                TEST_COUNT_WORK((long long)(i - j));
                c[j] = x;
            }
        }
        run = end;
    }
}

/* The reference's token.lower() then _run_strip_accents (NFD, drop Mn), into s->out. */
static void lower_and_strip_accents(Scratch *s) {
    s->out_n = 0;
    for (size_t i = 0; i < s->piece_n; i++) {
        Char src = s->piece[i];
        int32_t lowered[2];
        int nl = src.cp == 0x3A3 ? (lowered[0] = is_final_sigma(s->piece, s->piece_n, i) ? 0x3C2 : 0x3C3, 1)
                                 : uc_lower_full(src.cp, lowered);
        for (int k = 0; k < nl; k++) {
            int32_t decomposed[8];
            int nd = uc_decompose(lowered[k], decomposed, 8);
            for (int d = 0; d < nd; d++) {
                Char c = {decomposed[d], src.start, src.end, (uint8_t)uc_combining_class(decomposed[d])};
                push_char(&s->out, &s->out_n, &s->out_cap, c);
            }
        }
    }
    canonical_reorder(s, s->out, s->out_n);
    TEST_COUNT_WORK((long long)s->piece_n + 2 * (long long)s->out_n);  /* lowering, decomposing, dropping marks */
    size_t kept = 0;
    for (size_t i = 0; i < s->out_n; i++)
        if (!uc_is_nonspacing_mark(s->out[i].cp)) s->out[kept++] = s->out[i];
    s->out_n = kept;
}

/* ---- basic tokenization ---- */

static void grow_word_buffers(Scratch *s, size_t n) {
    size_t cap = grow_capacity(s->word_cap, n + 1, 64);
    s->bytes = xrealloc(s->bytes, cap * 4);
    s->byte_at = xrealloc(s->byte_at, cap * sizeof *s->byte_at);
    s->prefix_hash = xrealloc(s->prefix_hash, cap * sizeof *s->prefix_hash);
    s->piece_id = xrealloc(s->piece_id, cap * sizeof *s->piece_id);
    s->piece_end = xrealloc(s->piece_end, cap * sizeof *s->piece_end);
    s->word_cap = cap;
}

static inline void ensure_word_capacity(Scratch *s, size_t n) {
    if (n + 1 > s->word_cap) grow_word_buffers(s, n);
}

/* UTF-8 of w[0..n) into s->bytes, with s->byte_at[i] the offset of code point i. */
static size_t encode_word(Scratch *s, const Char *w, size_t n) {
    ensure_word_capacity(s, n);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        s->byte_at[i] = (int)len;
        if (w[i].cp < 0x80) s->bytes[len++] = (char)w[i].cp;
        else len += (size_t)utf8proc_encode_char(w[i].cp, (utf8proc_uint8_t *)s->bytes + len);
    }
    s->byte_at[n] = (int)len;
    TEST_COUNT_WORK((long long)n);
    return len;
}

/* The longest never_split entry that text[pos..len) starts with, or -1. */
static int match_never_split(const Tokenizer *t, const char *text, size_t len, size_t pos) {
    int best = -1;
    TEST_COUNT_WORK(t->n_never_split);
    for (int i = 0; i < t->n_never_split; i++) {
        size_t n = t->never_split_len[i];
        if (n <= len - pos && memcmp(text + pos, t->never_split[i], n) == 0 &&
            (best < 0 || n > t->never_split_len[best]))
            best = i;
    }
    return best;
}

/* A never_split entry found at text[pos..): one word, exactly as written. */
static void emit_never_split(const Tokenizer *t, Scratch *s, const char *text, size_t pos, int which,
                             WordSink sink, void *ctx) {
    const utf8proc_uint8_t *u = (const utf8proc_uint8_t *)text;
    size_t end = pos + t->never_split_len[which];
    s->piece_n = 0;
    while (pos < end) {
        int k;
        int32_t cp = utf8_decode(u + pos, end - pos, &k);   /* never-split tokens come from valid text */
        Char c = {cp < 0 ? 0xFFFD : cp, (int)pos, (int)(pos + (size_t)k), 0};
        push_char(&s->piece, &s->piece_n, &s->piece_cap, c);
        pos += (size_t)k;
    }
    TEST_COUNT_WORK((long long)s->piece_n);
    sink(t, s, s->piece, s->piece_n, ctx);
    s->piece_n = 0;
}

/* One whitespace-delimited piece: lower-case and strip accents if uncased, then split
 * on punctuation (_run_split_on_punc) and hand each word to the sink. */
static void finish_piece(const Tokenizer *t, Scratch *s, bool needs_transform, WordSink sink, void *ctx) {
    if (s->piece_n == 0) return;
    Char *w = s->piece;
    size_t n = s->piece_n;
    if (t->do_lower_case && needs_transform) {
        lower_and_strip_accents(s);
        w = s->out;
        n = s->out_n;
    } else if (t->do_lower_case) {
        for (size_t i = 0; i < n; i++)
            if (w[i].cp >= 'A' && w[i].cp <= 'Z') w[i].cp += 'a' - 'A';
    }
    size_t word_start = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(class_of(t, w[i].cp) & UC_PUNCT)) continue;
        if (i > word_start) sink(t, s, w + word_start, i - word_start, ctx);
        sink(t, s, w + i, 1, ctx);
        word_start = i + 1;
    }
    if (n > word_start) sink(t, s, w + word_start, n - word_start, ctx);
    TEST_COUNT_WORK(2 * (long long)n);  /* lower-casing and the punctuation split */
    s->piece_n = 0;
}

static void wordpiece_sink(const Tokenizer *t, Scratch *s, const Char *w, size_t n, void *ctx);
static void wordpiece_ascii_piece(const Tokenizer *t, Scratch *s, const char *text, size_t n, int base, TokenList *out);

/* If the whitespace-delimited piece starting at pos is all ASCII, has nothing to drop
 * and no never_split entry, and ends at ASCII whitespace or the end of the text: its
 * end. Otherwise pos (the general path handles it). */
static size_t ascii_piece_end(const Tokenizer *t, const unsigned char *u, size_t len, size_t pos) {
    size_t e = pos;
    while (e < len && u[e] < 0x80 && !(t->bmp_class[u[e]] & (UC_SPACE | UC_DROP)) && !t->starts_never_split[u[e]]) e++;
    TEST_COUNT_WORK((long long)(e - pos) + 1);
    if (e == len || (u[e] < 0x80 && (t->bmp_class[u[e]] & UC_SPACE))) return e;
    return pos;  /* a character to drop, a never_split start or a non-ASCII character follows */
}

/* _clean_text, _tokenize_chinese_chars and whitespace_tokenize in one scan of the
 * bytes; each piece goes to finish_piece, or, when tokenizing and the piece is plain
 * ASCII, straight to wordpiece_ascii_piece. Returns the count of invalid sequences. */
static long run_basic(const Tokenizer *t, Scratch *s, const char *text, size_t len, WordSink sink, void *ctx) {
    const unsigned char *u = (const unsigned char *)text;
    long invalid = 0;
    bool needs_transform = false, ascii_fast = sink == wordpiece_sink;
    s->piece_n = 0;
    for (size_t pos = 0; pos < len;) {
        int32_t cp;
        int nbytes = 1;
        uint8_t cls;
        TEST_COUNT_WORK(1);
        int special = t->starts_never_split[u[pos]] ? match_never_split(t, text, len, pos) : -1;
        if (special >= 0) {
            finish_piece(t, s, needs_transform, sink, ctx);
            needs_transform = false;
            emit_never_split(t, s, text, pos, special, sink, ctx);
            pos += t->never_split_len[special];
            continue;
        }
        if (ascii_fast && s->piece_n == 0 && u[pos] < 0x80 && !(t->bmp_class[u[pos]] & (UC_SPACE | UC_DROP))) {
            size_t end = ascii_piece_end(t, u, len, pos);
            if (end > pos) {
                wordpiece_ascii_piece(t, s, text + pos, end - pos, (int)pos, ctx);
                pos = end;
                continue;
            }
        }
        if (u[pos] < 0x80) {
            cp = u[pos];
            cls = t->bmp_class[cp];
        } else {
            cp = utf8_decode(u + pos, len - pos, &nbytes);
            if (cp < 0) {
                invalid++;  /* U+FFFD, which _clean_text drops */
                pos += (size_t)nbytes;
                continue;
            }
            cls = class_of(t, cp);
        }
        Char c = {cp, (int)pos, (int)(pos + (size_t)nbytes), 0};
        pos += (size_t)nbytes;
        if (cls & UC_DROP) continue;
        if (cls & (UC_SPACE | UC_CJK)) {
            finish_piece(t, s, needs_transform, sink, ctx);
            needs_transform = false;
            if (cls & UC_CJK) {  /* a piece of its own; its NFD may still differ */
                push_char(&s->piece, &s->piece_n, &s->piece_cap, c);
                finish_piece(t, s, (cls & UC_UNCASED_CHANGES) != 0, sink, ctx);
            }
            continue;
        }
        if ((cls & UC_UNCASED_CHANGES) && cp >= 0x80) needs_transform = true;
        push_char(&s->piece, &s->piece_n, &s->piece_cap, c);
    }
    finish_piece(t, s, needs_transform, sink, ctx);
    return invalid;
}

/* ---- WordPiece ---- */

static void span_of(const Char *w, size_t n, int *start, int *end) {
    TEST_COUNT_WORK((long long)n);
    *start = w[0].start;
    *end = w[0].end;
    for (size_t i = 1; i < n; i++) {  /* NFD reordering can move marks within a word */
        if (w[i].start < *start) *start = w[i].start;
        if (w[i].end > *end) *end = w[i].end;
    }
}

/* Greedy longest-match-first, as WordpieceTokenizer.tokenize, over a word of n code
 * points in UTF-8 `bytes`, code point i starting at byte_at[i] (byte_at NULL: one byte
 * per code point). The pieces go to s->piece_id / s->piece_end (end code point index);
 * returns their count, or -1 when the word becomes one [UNK] (longer than
 * max_input_chars_per_word, or a remainder no vocabulary piece covers). */
static int wordpiece_split(const Tokenizer *t, Scratch *s, const char *bytes, const int *byte_at, size_t n) {
    if (n > (size_t)t->max_input_chars_per_word) return -1;
    const Vocab *v = t->vocab;
#define AT(i) (byte_at ? (size_t)byte_at[i] : (size_t)(i))
    size_t nbytes = AT(n);
    /* A word can start with "##" only if it is a never_split entry; its first piece is
     * then looked up literally (as "##..." tokens), off the fast path. */
    bool literal_first = nbytes > 2 && bytes[0] == '#' && bytes[1] == '#';
    int npieces = 0;
    for (size_t i = 0; i < n;) {
        bool cont = i > 0;
        size_t limit = cont ? v->max_cont_bytes : literal_first ? nbytes : v->max_word_bytes;
        uint64_t h = STRMAP_HASH_START;
        size_t longest = i;
        for (size_t j = i + 1; j <= n && AT(j) - AT(i) <= limit; j++) {
            h = strmap_hash_extend(h, bytes + AT(j - 1), AT(j) - AT(j - 1));
            s->prefix_hash[j] = h;
            longest = j;
        }
        int id = -1;
        size_t j = longest;
        for (; j > i; j--) {
            const char *piece = bytes + AT(i);
            size_t len = AT(j) - AT(i);
            id = !cont && literal_first ? vocab_lookup(v, piece, len)
                                        : vocab_lookup_piece(v, s->prefix_hash[j], cont, piece, len);
            if (id >= 0) break;
        }
        TEST_COUNT_WORK((long long)(longest - i) + (long long)(longest - j) + 1);  /* prefixes hashed, look-ups */
        if (id < 0) return -1;
        s->piece_id[npieces] = id;
        s->piece_end[npieces++] = (int)j;
        i = j;
    }
#undef AT
    return npieces;
}

static void wordpiece_sink(const Tokenizer *t, Scratch *s, const Char *w, size_t n, void *ctx) {
    TokenList *out = ctx;
    encode_word(s, w, n);
    int npieces = wordpiece_split(t, s, s->bytes, s->byte_at, n), start, end;
    if (npieces < 0) {
        span_of(w, n, &start, &end);
        push_token(out, t->unk_id, start, end);
        return;
    }
    for (int k = 0, i = 0; k < npieces; i = s->piece_end[k++]) {
        span_of(w + i, (size_t)(s->piece_end[k] - i), &start, &end);
        push_token(out, s->piece_id[k], start, end);
    }
}

/* One ASCII word w[0..n) at source offset base (fast path below). */
static void wordpiece_ascii_word(const Tokenizer *t, Scratch *s, const char *w, size_t n, int base, TokenList *out) {
    int npieces = wordpiece_split(t, s, w, NULL, n);
    if (npieces < 0) {
        push_token(out, t->unk_id, base, base + (int)n);
        return;
    }
    for (int k = 0, from = 0; k < npieces; from = s->piece_end[k++])
        push_token(out, s->piece_id[k], base + from, base + s->piece_end[k]);
}

/* The common case, on bytes: a whitespace-delimited piece text[0..n) that is all ASCII
 * with nothing to drop, so code point i is byte i, at source offset base + i. Same steps
 * as finish_piece + wordpiece_sink without the per-character records. */
static void wordpiece_ascii_piece(const Tokenizer *t, Scratch *s, const char *text, size_t n, int base, TokenList *out) {
    ensure_word_capacity(s, n);
    char *b = s->bytes;
    for (size_t i = 0; i < n; i++)
        b[i] = (char)(t->do_lower_case && text[i] >= 'A' && text[i] <= 'Z' ? text[i] + ('a' - 'A') : text[i]);
    size_t word_start = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(t->bmp_class[(unsigned char)b[i]] & UC_PUNCT)) continue;
        if (i > word_start) wordpiece_ascii_word(t, s, b + word_start, i - word_start, base + (int)word_start, out);
        wordpiece_ascii_word(t, s, b + i, 1, base + (int)i, out);
        word_start = i + 1;
    }
    if (n > word_start) wordpiece_ascii_word(t, s, b + word_start, n - word_start, base + (int)word_start, out);
    TEST_COUNT_WORK(2 * (long long)n);  /* lower-casing and the punctuation split */
}

int tokenize(const Tokenizer *t, const char *text, size_t len, TokenList *out) {
    out->n = 0;
    out->invalid_utf8 = 0;
    if (!t->vocab || len > (size_t)INT_MAX) return -1;
    out->invalid_utf8 = run_basic(t, scratch_of(out), text, len, wordpiece_sink, out);
    return out->n;
}

/* ---- BasicTokenizer alone ---- */

typedef struct {
    BasicWordFn fn;
    void *ctx;
    long words;
} BasicCallback;

static void basic_sink(const Tokenizer *t, Scratch *s, const Char *w, size_t n, void *ctx) {
    BasicCallback *cb = ctx;
    size_t len = encode_word(s, w, n);
    int start, end;
    span_of(w, n, &start, &end);
    cb->fn(s->bytes, len, start, end, cb->ctx);
    cb->words++;
}

long basic_tokenize(const Tokenizer *t, const char *text, size_t len, TokenList *work, BasicWordFn fn, void *ctx) {
    work->invalid_utf8 = 0;
    if (len > (size_t)INT_MAX) return -1;
    BasicCallback cb = {fn, ctx, 0};
    work->invalid_utf8 = run_basic(t, scratch_of(work), text, len, basic_sink, &cb);
    return cb.words;
}
