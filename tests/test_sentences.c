/* Sentence splitting: hand-written cases (what nltk.sent_tokenize gives for each, quirks
 * included), then parity with NLTK's punkt on ~270 real documents
 * (tests/data/corpus/sentences_*.txt, made by tools/make_corpus_fixtures.py). */
#include "core/utf8.h"
#include "data/corpus.h"
#include "test.h"

static SentenceSplitter *splitter;

/* Checks that text splits into exactly the NULL-terminated list of sentences. */
static void expect_split(const char *text, const char *const *want) {
    SentenceList sl;
    sentence_list_init(&sl);
    int n = split_sentences(splitter, text, strlen(text), &sl);
    int n_want = 0;
    while (want[n_want]) n_want++;
    CHECKF(n == n_want, "'%s': %d sentences, want %d", text, n, n_want);
    for (int i = 0; i < n && i < n_want; i++) {
        size_t len = sl.spans[i].end - sl.spans[i].start;
        CHECKF(len == strlen(want[i]) && !memcmp(text + sl.spans[i].start, want[i], len),
               "'%s': sentence %d is '%.*s', want '%s'", text, i, (int)len, text + sl.spans[i].start, want[i]);
    }
    sentence_list_free(&sl);
}

#define SPLIT(text, ...) expect_split(text, (const char *const[]){__VA_ARGS__, NULL})

static void test_abbreviations(void) {
    SPLIT("Mr. Smith met Dr. Jones at 5 p.m. yesterday. They talked.",
          "Mr. Smith met Dr. Jones at 5 p.m. yesterday.", "They talked.");
    SPLIT("It cost $4.99 in St. Louis. Cheap!", "It cost $4.99 in St. Louis.", "Cheap!");
    SPLIT("The U.S. economy grew. Prices rose.", "The U.S. economy grew.", "Prices rose.");
    /* punkt's English model does not know "etc." or "e.g." before a lower-case word */
    SPLIT("Apples, pears, etc. are fruit. Bananas too.", "Apples, pears, etc.", "are fruit.", "Bananas too.");
}

static void test_initials_and_numbers(void) {
    SPLIT("J. R. R. Tolkien wrote The Hobbit. It sold well.", "J. R. R. Tolkien wrote The Hobbit.", "It sold well.");
    SPLIT("Growth was 3.14 percent in 2019. Prices rose.", "Growth was 3.14 percent in 2019.", "Prices rose.");
    SPLIT("The value was 1.5. The next value was 2.", "The value was 1.5.", "The next value was 2.");
}

static void test_quotes_brackets_ellipses(void) {
    SPLIT("He said, \"Stop.\" Then he left.", "He said, \"Stop.\"", "Then he left.");
    SPLIT("(This is in brackets.) This is not.", "(This is in brackets.)", "This is not.");
    SPLIT("\xE2\x80\x9C" "Curly quotes work." "\xE2\x80\x9D Do they?",
          "\xE2\x80\x9C" "Curly quotes work." "\xE2\x80\x9D", "Do they?");
    SPLIT("She paused... Then she spoke again.", "She paused... Then she spoke again.");
    SPLIT("What?! Are you serious? Yes!", "What?!", "Are you serious?", "Yes!");
}

static void test_edges(void) {
    SPLIT("no split here", "no split here");
    SPLIT("  Leading spaces. Second sentence.   ", "  Leading spaces.", "Second sentence.");
    SentenceList sl;
    sentence_list_init(&sl);
    CHECK(split_sentences(splitter, "", 0, &sl) == 0);
    CHECK(split_sentences(splitter, " \t \xC2\xA0 ", 6, &sl) == 0); /* blank, NBSP included */
    /* invalid UTF-8 and a NUL byte: no crash, spans stay inside the text */
    const char bad[] = "Bad \xFF\xFE bytes. And \x00 a NUL. End";
    int n = split_sentences(splitter, bad, sizeof bad - 1, &sl);
    CHECK(n == 3);
    for (int i = 0; i < n; i++) CHECK(sl.spans[i].start < sl.spans[i].end && sl.spans[i].end <= sizeof bad - 1);
    sentence_list_free(&sl);
}

/* Splits every line of input the way `bert sentences` does, compares with the file. */
static void test_nltk_parity(void) {
    char *in, *want;
    size_t in_len, want_len;
    BertError err;
    if (read_file("tests/data/corpus/sentences_input.txt", &in, &in_len, &err) != 0 ||
        read_file("tests/data/corpus/sentences_expected.txt", &want, &want_len, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    char *got = NULL;
    size_t got_len = 0;
    FILE *out = open_memstream(&got, &got_len);
    SentenceList sl;
    sentence_list_init(&sl);
    int docs = 0;
    for (char *line = in, *nl; line < in + in_len; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(in + in_len - line));
        if (!nl) nl = in + in_len;
        size_t n = utf8_rstrip_len(line, (size_t)(nl - line));
        if (n == 0) continue;
        write_document_sentences(out, splitter, &sl, line, n);
        docs++;
    }
    fclose(out);
    int lines = 0, same = 0;
    for (const char *g = got, *w = want; g < got + got_len && w < want + want_len; lines++) {
        const char *ge = memchr(g, '\n', (size_t)(got + got_len - g)), *we = memchr(w, '\n', (size_t)(want + want_len - w));
        if (!ge || !we) break;
        same += ge - g == we - w && !memcmp(g, w, (size_t)(ge - g));
        g = ge + 1;
        w = we + 1;
    }
    printf("    %d documents; %d of %d output lines equal to NLTK's\n", docs, same, lines);
    CHECK(docs > 250);
    CHECKF(got_len == want_len && !memcmp(got, want, want_len), "output differs from nltk.sent_tokenize");
    sentence_list_free(&sl);
    free(got);
    free(in);
    free(want);
}

/* Punkt is linear in the text: 10x the input, at most 15x the work (tests/test.h), for
 * ordinary text and for what makes a splitter backtrack or rescan -- no sentence end at
 * all, runs of abbreviations, periods and ellipses, stops glued to brackets (every one a
 * candidate whose context reaches back to the first), closing quotes, lines, dashes. */
static void test_sentences_scale_linearly(void) {
    const struct { const char *what, *unit; } cases[] = {
        {"ordinary text", "Mr. Smith met Dr. Jones at 5 p.m. yesterday. They talked, \"Why?\" he asked. "},
        {"no sentence end", "words without any end "},
        {"abbreviations e.g.", "e.g. "},
        {"abbreviations Dr.", "Dr. "},
        {"initials", "J. "},
        {"numbers", "1.5. "},
        {"periods", "."},
        {"spaced ellipses", ". . . "},
        {"periods inside one word", "a.b"},
        {"stops glued to brackets", "a.)"},
        {"stops then closing quotes", "Stop.\") "},
        {"question and exclamation marks", "?!"},
        {"dashes", "a--b,---"},
        {"one sentence per line", "A line.\n"},
        {"stop then long whitespace", ".       "},
        {"curly quotes", "\xe2\x80\x9cQuoted.\xe2\x80\x9d "},
    };
    SentenceList sl;
    sentence_list_init(&sl);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        long long work[2], bytes[2];
        for (int big = 0; big < 2; big++) {
            size_t len;
            char *text = repeat_text("", cases[k].unit, big ? 20000 : 2000, " End.", &len);
            const long long before = test_work();
            split_sentences(splitter, text, len, &sl);
            work[big] = test_work() - before;
            bytes[big] = (long long)len;
            free(text);
        }
        CHECK_SCALES_LINEARLY(cases[k].what, work[0], work[1], bytes[0]);  /* each byte is a candidate */
    }
    sentence_list_free(&sl);
}

int main(void) {
    splitter = sentence_splitter_new();
    RUN_TEST(test_abbreviations);
    RUN_TEST(test_initials_and_numbers);
    RUN_TEST(test_quotes_brackets_ellipses);
    RUN_TEST(test_edges);
    RUN_TEST(test_nltk_parity);
    RUN_TEST(test_sentences_scale_linearly);
    sentence_splitter_free(splitter);
    return test_summary();
}
