/* The tokenizer against fixtures from Google's reference (tokens, ids), HuggingFace
 * tokenizers (byte offsets) and Python's UTF-8 decoder (invalid sequence counts), both
 * casings: tests/data/tokenizer/cases.tsv, made by tools/make_tokenizer_fixtures.py.
 * Plus vocabulary loading, bad input, threads. */
#include <omp.h>
#include <stdint.h>

#include "test.h"
#include "text/tokenizer.h"

#define UNCASED_VOCAB "data/vocab/bert-base-uncased-vocab.txt"
#define CASED_VOCAB "data/vocab/bert-base-cased-vocab.txt"

static Vocab *uncased_vocab, *cased_vocab;

static int hex_decode(const char *hex, char *out) {
    int n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (char)v;
    }
    return n;
}

/* Splits line on tabs in place; returns the number of fields. */
static int split_tabs(char *line, char **fields, int max) {
    int n = 0;
    fields[n++] = line;
    for (char *p = line; *p && n < max; p++)
        if (*p == '\t') {
            *p = 0;
            fields[n++] = p + 1;
        }
    return n;
}

/* Joins the tokens (as vocabulary strings), ids, or start:end spans with spaces. */
static void render(const Vocab *v, const TokenList *l, int what, char *out, size_t cap) {
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < l->n && len + 64 < cap; i++) {
        const Token *t = &l->tokens[i];
        const char *sep = i ? " " : "";
        if (what == 0) len += (size_t)snprintf(out + len, cap - len, "%s%s", sep, vocab_token(v, t->id));
        else if (what == 1) len += (size_t)snprintf(out + len, cap - len, "%s%d", sep, t->id);
        else len += (size_t)snprintf(out + len, cap - len, "%s%d:%d", sep, t->start, t->end);
    }
}

/* Copies "a,b,c" into storage and points list[] at the parts. */
static int parse_never_split(const char *field, char *storage, const char **list) {
    if (!strcmp(field, "-")) return 0;
    strcpy(storage, field);
    int n = 0;
    for (char *save = NULL, *s = strtok_r(storage, ",", &save); s; s = strtok_r(NULL, ",", &save)) list[n++] = s;
    return n;
}

static void test_reference_cases(void) {
    FILE *f = fopen("tests/data/tokenizer/cases.tsv", "r");
    CHECK(f != NULL);
    if (!f) return;
    static char line[1 << 16], input[1 << 15], got[1 << 16];
    int cases = 0, with_offsets = 0;
    TokenList l;
    token_list_init(&l);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *fld[9];
        if (split_tabs(line, fld, 9) != 9) {
            CHECKF(0, "malformed fixture line %d", cases + 1);
            continue;
        }
        bool lower = !strcmp(fld[0], "uncased");
        char storage[256];
        const char *never_split[16];
        TokenizerOptions opt = tokenizer_default_options();
        opt.do_lower_case = lower;
        opt.max_input_chars_per_word = atoi(fld[2]);
        opt.n_never_split = parse_never_split(fld[3], storage, never_split);
        opt.never_split = never_split;
        const Vocab *v = lower ? uncased_vocab : cased_vocab;
        Tokenizer *t = tokenizer_new(v, &opt);
        int len = hex_decode(fld[4], input);
        tokenize(t, input, (size_t)len, &l);
        render(v, &l, 0, got, sizeof got);
        CHECKF(!strcmp(got, fld[5]), "%s %s case %s:\n      got  %s\n      want %s", fld[0], fld[1], fld[4], got, fld[5]);
        render(v, &l, 1, got, sizeof got);
        CHECKF(!strcmp(got, fld[6]), "%s %s ids differ for %s", fld[0], fld[1], fld[4]);
        if (strcmp(fld[7], "-")) {
            render(v, &l, 2, got, sizeof got);
            CHECKF(!strcmp(got, fld[7]), "%s %s offsets for %s:\n      got  %s\n      want %s", fld[0], fld[1], fld[4], got,
                   fld[7]);
            with_offsets++;
        }
        CHECKF(l.invalid_utf8 == atol(fld[8]), "%s: %ld invalid UTF-8 sequences, Python finds %s", fld[4], l.invalid_utf8,
               fld[8]);
        for (int i = 0; i < l.n; i++)
            CHECKF(l.tokens[i].start >= 0 && l.tokens[i].start < l.tokens[i].end && l.tokens[i].end <= len &&
                       (i == 0 || l.tokens[i].start >= l.tokens[i - 1].start),
                   "bad span %d:%d in %s", l.tokens[i].start, l.tokens[i].end, fld[4]);
        tokenizer_free(t);
        cases++;
    }
    fclose(f);
    token_list_free(&l);
    CHECKF(cases >= 100, "only %d fixture cases", cases);
    CHECKF(with_offsets >= 90, "only %d cases with offsets", with_offsets);
    printf("  %d reference cases, %d with offsets\n", cases, with_offsets);
}

static void test_vocab_basics(void) {
    CHECK(vocab_size(uncased_vocab) == 30522 && vocab_size(cased_vocab) == 28996);
    CHECK(vocab_lookup(uncased_vocab, "[UNK]", 5) == 100 && vocab_lookup(uncased_vocab, "[MASK]", 6) == 103);
    CHECK(vocab_lookup(uncased_vocab, "##ing", 5) >= 0 && vocab_lookup(uncased_vocab, "notaword", 8) == -1);
    CHECK(!strcmp(vocab_token(uncased_vocab, 101), "[CLS]") && vocab_token(uncased_vocab, 30522) == NULL &&
          vocab_token(uncased_vocab, -1) == NULL);
    const char *toks[] = {"[UNK]", "a", "b", "a", "##b"};  /* duplicate: the last line wins, as in a dict */
    Vocab *v = vocab_from_tokens(toks, 5);
    CHECK(vocab_lookup(v, "a", 1) == 3 && vocab_lookup(v, "##b", 3) == 4 && vocab_lookup(v, "##", 2) == -1);
    vocab_free(v);
}

static int write_temp(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fwrite(data, 1, len, f);
    return fclose(f);
}

static void test_vocab_errors(void) {
    Vocab *v = NULL;
    BertError err;
    CHECK(vocab_load(&v, "tests/data/tokenizer/no-such-vocab.txt", &err) == -1 && v == NULL);
    CHECK(strstr(err.msg, "no-such-vocab.txt") != NULL);
    const char *path = "build/test_tokenizer_vocab.tmp";
    write_temp(path, "[UNK]\nok\n\xff\xfe\n", 12);
    CHECK(vocab_load(&v, path, &err) == -1 && strstr(err.msg, "line 3") != NULL);
    write_temp(path, "", 0);
    CHECK(vocab_load(&v, path, &err) == -1 && strstr(err.msg, "empty") != NULL);
    write_temp(path, "a\r\n b \r\n\r\n[PAD]", 15);  /* CRLF, surrounding spaces, blank line, no final newline */
    CHECK(vocab_load(&v, path, &err) == 0 && vocab_size(v) == 4);
    if (v) {
        CHECK(vocab_lookup(v, "b", 1) == 1 && vocab_lookup(v, "", 0) == 2 && vocab_lookup(v, "[PAD]", 5) == 3);
        TokenizerOptions opt = tokenizer_default_options();
        CHECK(tokenizer_new(v, &opt) == NULL);  /* no [UNK] */
        vocab_free(v);
    }
    remove(path);
}

/* Random bytes: never a crash, every span inside the text, every id valid. */
static void test_random_bytes(void) {
    TokenizerOptions opt = tokenizer_default_options();
    Tokenizer *t = tokenizer_new(uncased_vocab, &opt);
    TokenList l;
    token_list_init(&l);
    uint64_t state = 12345;
    char buf[512];
    long invalid = 0;
    for (int iter = 0; iter < 20000; iter++) {
        int len = (int)(state % sizeof buf);
        for (int i = 0; i < len; i++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            unsigned r = (unsigned)(state >> 33);
            /* Mix ASCII, UTF-8 lead/continuation bytes and spaces. */
            buf[i] = (char)(r % 4 == 0 ? 0x80 + r % 0x80 : r % 4 == 1 ? ' ' + r % 95 : r % 4 == 2 ? 0xC0 + r % 0x40 : r % 256);
        }
        tokenize(t, buf, (size_t)len, &l);
        invalid += l.invalid_utf8;
        for (int i = 0; i < l.n; i++) {
            const Token *k = &l.tokens[i];
            if (!(k->start >= 0 && k->start < k->end && k->end <= len && k->id >= 0 && k->id < 30522)) {
                CHECKF(0, "iteration %d: bad token %d [%d,%d)", iter, k->id, k->start, k->end);
                break;
            }
        }
    }
    CHECK(invalid > 0);
    token_list_free(&l);
    tokenizer_free(t);
}

static void test_invalid_utf8_counts(void) {
    TokenizerOptions opt = tokenizer_default_options();
    Tokenizer *t = tokenizer_new(uncased_vocab, &opt);
    TokenList l;
    token_list_init(&l);
    /* As Python's decode(errors="replace"): \xe2\x82 (truncated) is one, \xff one, each
     * stray continuation byte one, \xed\xa0\x80 (a surrogate) three. */
    struct { const char *s; long invalid; int tokens; } cases[] = {
        {"ab\xe2\x82", 1, 1}, {"\xff", 1, 0}, {"\x80\x80", 2, 0}, {"\xed\xa0\x80x", 3, 1}, {"ok \xef\xbf\xbd", 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tokenize(t, cases[i].s, strlen(cases[i].s), &l);
        CHECKF(l.invalid_utf8 == cases[i].invalid && l.n == cases[i].tokens, "case %zu: %ld invalid, %d tokens", i,
               l.invalid_utf8, l.n);
    }
    token_list_free(&l);
    tokenizer_free(t);
}

/* A long text tokenized whole equals its lines tokenized one by one (offsets shifted),
 * and concurrent calls on one tokenizer give the sequential result. */
static void test_long_text_and_threads(void) {
    char *text;
    size_t len;
    BertError err;
    CHECK(read_file("tests/data/tokenizer/cases.tsv", &text, &len, &err) == 0);
    if (!text) return;
    TokenizerOptions opt = tokenizer_default_options();
    Tokenizer *t = tokenizer_new(uncased_vocab, &opt);
    TokenList whole;
    token_list_init(&whole);
    tokenize(t, text, len, &whole);
    CHECK(whole.n > 1000);
    enum { NTHREADS = 4 };
    int mismatches = 0, pieces_total = 0;
#pragma omp parallel num_threads(NTHREADS) reduction(+ : mismatches, pieces_total)
    {
        TokenList l;
        token_list_init(&l);
        for (int round = 0; round < 3; round++) {
            int at = 0;  /* index into whole.tokens, valid because lines end at whitespace */
            for (size_t pos = 0; pos < len;) {
                const char *nl = memchr(text + pos, '\n', len - pos);
                size_t end = nl ? (size_t)(nl - text) : len;
                tokenize(t, text + pos, end - pos, &l);
                for (int i = 0; i < l.n; i++, at++) {
                    const Token *a = &l.tokens[i], *b = at < whole.n ? &whole.tokens[at] : NULL;
                    if (!b || a->id != b->id || a->start + (int)pos != b->start || a->end + (int)pos != b->end) mismatches++;
                }
                pieces_total += l.n;
                pos = end + 1;
            }
        }
        token_list_free(&l);
    }
    CHECKF(mismatches == 0, "%d tokens differ between whole-text and per-line/threaded tokenization", mismatches);
    CHECK(pieces_total == whole.n * 3 * NTHREADS);
    token_list_free(&whole);
    tokenizer_free(t);
    free(text);
}

/* NFD orders each run of combining marks by class, stably, which only shows in what
 * survives accent stripping: spacing marks (Mc) such as U+1D16D (class 226) and U+1D165
 * (216); the U+0301 between them (Mn) is dropped. Short runs are sorted by insertion, long
 * ones (over 32 marks) by counting: both must give Python's unicodedata.normalize order. */
static void collect_word(const char *word, size_t len, int start, int end, void *ctx) {
    (void)start, (void)end;
    char *out = ctx;
    size_t have = strlen(out);
    if (have + len + 2 < 4096) memcpy(out + have, word, len), out[have + len] = '|', out[have + len + 1] = 0;
}

static void test_long_mark_runs_reordered(void) {
    TokenizerOptions opt = tokenizer_default_options();
    Tokenizer *t = tokenizer_new(NULL, &opt);
    TokenList work;
    token_list_init(&work);
    for (int marks = 3; marks <= 60; marks += 57) {
        size_t len;
        char *text = repeat_text("A", "\xf0\x9d\x85\xad\xcc\x81\xf0\x9d\x85\xa5", marks, "", &len);
        char *want = repeat_text("a", "\xf0\x9d\x85\xa5", marks, "", NULL), *high = repeat_text("", "\xf0\x9d\x85\xad", marks, "|", NULL);
        char got[4096] = "", expected[4096];
        snprintf(expected, sizeof expected, "%s%s", want, high);
        basic_tokenize(t, text, len, &work, collect_word, got);
        CHECKF(!strcmp(got, expected), "%d pairs of marks: reordered wrongly", marks);
        free(text), free(want), free(high);
    }
    token_list_free(&work);
    tokenizer_free(t);
}

/* Work of tokenizing `copies` copies of unit (between prefix and suffix), counted by
 * tokenizer_work; *bytes receives the input's length. */
static long long tokenizing_work(const Tokenizer *t, const char *prefix, const char *unit, long copies,
                                 const char *suffix, long long *bytes) {
    size_t len;
    char *text = repeat_text(prefix, unit, copies, suffix, &len);
    TokenList l;
    token_list_init(&l);
    const long long before = test_work();
    tokenize(t, text, len, &l);
    const long long work = test_work() - before;
    token_list_free(&l);
    free(text);
    *bytes = (long long)len;
    return work;
}

/* BasicTokenizer and WordPiece are linear in the text: 10x the input, at most 15x the work
 * (tests/test.h), for ordinary text and for what could make them quadratic. WordPiece's
 * greedy longest match is capped by the vocabulary's longest token per position, and a word
 * longer than max_input_chars_per_word is [UNK] before any search; both are checked with
 * the cap lifted too. The letter followed by alternating marks of combining classes 230 and
 * 220 was quadratic (NFD's canonical reordering by insertion: 2.4 s for 64,000 marks). */
static void test_tokenizer_scales_linearly(void) {
    TokenizerOptions capped = tokenizer_default_options(), uncapped = capped, with_specials = capped;
    uncapped.max_input_chars_per_word = INT32_MAX;
    const char *specials[] = {"[MASK]", "[SEP]"};
    with_specials.never_split = specials;
    with_specials.n_never_split = 2;
    Tokenizer *tok[3] = {tokenizer_new(uncased_vocab, &capped), tokenizer_new(uncased_vocab, &uncapped),
                         tokenizer_new(uncased_vocab, &with_specials)};
    Tokenizer *cased = tokenizer_new(cased_vocab, &uncapped);
    const struct {
        const char *what, *prefix, *unit;
        int tokenizer;  /* index into tok; 3: cased, uncapped */
    } cases[] = {
        {"ordinary text", "", "The 3rd quick brown fox jumped over 12 lazy dogs, didn't it? ", 0},
        {"one huge word (capped: [UNK])", "", "abcdefghij", 0},
        {"one huge word, greedy search", "", "abcdefghij", 1},
        {"one huge word, no piece matches", "", "\xe2\x98\x83\xe2\x98\x83", 1},
        {"one huge word of distinct numbers", "", "%06ld", 1},
        {"punctuation run", "", "!?.,;:-", 0},
        {"CJK run", "", "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97", 0},
        {"accented words", "", "caf\xc3\xa9 Cr\xc3\xa8me na\xc3\xafve ", 0},
        {"combining marks in one word", "", "e\xcc\x81", 1},
        {"letter, then marks of classes 230, 220", "a", "\xcc\x81\xcc\x96", 1},
        {"capital sigmas between apostrophes", "\xce\x91", "\xce\xa3'", 1},
        {"never_split entries back to back", "", "[MASK][SEP]x", 2},
        {"never_split openers that never match", "", "[[[[[MAS", 2},
        {"invalid bytes and controls", "", "\xff\x01\xc3", 0},
        {"whitespace run", "x", " \t\n\xc2\xa0", 0},
        {"cased: one huge word", "", "Abcdefghij", 3},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const Tokenizer *t = cases[k].tokenizer == 3 ? cased : tok[cases[k].tokenizer];
        long long bytes, bytes10;
        long long small = tokenizing_work(t, cases[k].prefix, cases[k].unit, 2000, "", &bytes);
        long long large = tokenizing_work(t, cases[k].prefix, cases[k].unit, 20000, "", &bytes10);
        CHECK_SCALES_LINEARLY(cases[k].what, small, large, bytes / 4);  /* at least a step per code point */
    }
    for (int i = 0; i < 3; i++) tokenizer_free(tok[i]);
    tokenizer_free(cased);
}

static void test_no_vocab_and_too_long(void) {
    TokenizerOptions opt = tokenizer_default_options();
    Tokenizer *basic_only = tokenizer_new(NULL, &opt);
    TokenList l;
    token_list_init(&l);
    CHECK(tokenize(basic_only, "hello", 5, &l) == -1 && l.n == 0);
    tokenizer_free(basic_only);
    Tokenizer *t = tokenizer_new(uncased_vocab, &opt);
    CHECK(tokenize(t, "x", (size_t)INT32_MAX + 1, &l) == -1);
    tokenizer_free(t);
    token_list_free(&l);
}

int main(void) {
    BertError err;
    if (vocab_load(&uncased_vocab, UNCASED_VOCAB, &err) != 0 || vocab_load(&cased_vocab, CASED_VOCAB, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    RUN_TEST(test_vocab_basics);
    RUN_TEST(test_vocab_errors);
    RUN_TEST(test_reference_cases);
    RUN_TEST(test_invalid_utf8_counts);
    RUN_TEST(test_random_bytes);
    RUN_TEST(test_long_text_and_threads);
    RUN_TEST(test_no_vocab_and_too_long);
    RUN_TEST(test_long_mark_runs_reordered);
    RUN_TEST(test_tokenizer_scales_linearly);
    vocab_free(uncased_vocab);
    vocab_free(cased_vocab);
    return test_summary();
}
