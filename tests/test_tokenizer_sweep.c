/* Every Unicode code point against Google's reference BasicTokenizer.
 *
 * tests/data/tokenizer/sweep.json (made by tools/tokenizer_sweep.py from the reference
 * running on Python's unicodedata) holds, for every code point, the reference's output
 * on probe strings that expose dropping, whitespace, punctuation, CJK spacing, Python's
 * lower() (including final sigma's Cased / Case_Ignorable), NFD and Mn stripping. The
 * only differences allowed are at code points that Python's Unicode version leaves
 * unassigned and utf8proc's newer one assigns; they are counted and printed. */
#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "test.h"
#include "text/tokenizer.h"

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->data = xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

static void join_word(const char *word, size_t len, int start, int end, void *ctx) {
    Buf *b = ctx;
    if (b->len) buf_add(b, " ", 1);
    buf_add(b, word, len);
}

/* Copies fmt into out with each occurrence of `hole` (a string) replaced by the UTF-8 of cp. */
static void fill(Buf *out, const char *fmt, const char *hole, int32_t cp) {
    char utf8[4];
    size_t n = (size_t)utf8proc_encode_char(cp, (utf8proc_uint8_t *)utf8), hole_len = strlen(hole);
    out->len = 0;
    buf_add(out, "", 0);
    for (const char *p = fmt; *p;) {
        if (!strncmp(p, hole, hole_len)) {
            buf_add(out, utf8, n);
            p += hole_len;
        } else {
            buf_add(out, p++, 1);
        }
    }
}

static bool in_ranges(const cJSON *ranges, int32_t cp) {
    const cJSON *r;
    cJSON_ArrayForEach(r, ranges) {
        int a = cJSON_GetArrayItem(r, 0)->valueint, b = cJSON_GetArrayItem(r, 1)->valueint;
        if (cp >= a && cp <= b) return true;
    }
    return false;
}

static cJSON *load_sweep(void) {
    char *text;
    size_t len;
    BertError err;
    if (read_file("tests/data/tokenizer/sweep.json", &text, &len, &err) != 0) {
        fprintf(stderr, "    %s\n", err.msg);
        return NULL;
    }
    cJSON *doc = cJSON_Parse(text);
    free(text);
    return doc;
}

/* Prints code points as merged ranges: "U+1234 U+2000..U+2005". */
static void print_ranges(const int32_t *cps, long n) {
    for (long i = 0; i < n;) {
        long j = i;
        while (j + 1 < n && cps[j + 1] == cps[j] + 1) j++;
        if (j > i) printf(" U+%04X..U+%04X", (unsigned)cps[i], (unsigned)cps[j]);
        else printf(" U+%04X", (unsigned)cps[i]);
        i = j + 1;
    }
    printf("\n");
}

/* Sweeps one casing; returns the number of code points checked. The allowed
 * differences (Unicode-version changes) go to diffs[0..*allowed_diffs). */
static long sweep(const cJSON *doc, bool lower, int32_t *diffs, long *allowed_diffs) {
    const cJSON *probes = cJSON_GetObjectItem(doc, lower ? "uncased_probes" : "cased_probes");
    const cJSON *table = cJSON_GetObjectItem(doc, lower ? "uncased" : "cased");
    const cJSON *unassigned = cJSON_GetObjectItem(doc, "unassigned");
    CHECK(probes && table && unassigned);
    if (!probes || !table || !unassigned) return 0;
    TokenizerOptions opt = tokenizer_default_options();
    opt.do_lower_case = lower;
    Tokenizer *t = tokenizer_new(NULL, &opt);
    TokenList work;
    token_list_init(&work);
    Buf probe = {0}, expected = {0}, got = {0};
    long checked = 0, bad = 0;
    int nprobes = cJSON_GetArraySize(probes);
    const cJSON *row;
    cJSON_ArrayForEach(row, table) {
        int first = cJSON_GetArrayItem(row, 0)->valueint, last = cJSON_GetArrayItem(row, 1)->valueint;
        const cJSON *patterns = cJSON_GetArrayItem(row, 2);
        for (int32_t cp = first; cp <= last; cp++) {
            if (cp == '\n' || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
            checked++;
            bool differs = false;
            for (int k = 0; k < nprobes && !differs; k++) {
                fill(&probe, cJSON_GetArrayItem(probes, k)->valuestring, "{}", cp);
                fill(&expected, cJSON_GetArrayItem(patterns, k)->valuestring, "\x01", cp);
                got.len = 0;
                buf_add(&got, "", 0);
                basic_tokenize(t, probe.data, probe.len, &work, join_word, &got);
                differs = strcmp(got.data, expected.data) != 0;
                if (differs && !(in_ranges(unassigned, cp) && utf8proc_category(cp) != UTF8PROC_CATEGORY_CN)) {
                    if (bad++ < 20)
                        fprintf(stderr, "    %s U+%04X probe %d: got '%s' want '%s'\n", lower ? "uncased" : "cased",
                                (unsigned)cp, k, got.data, expected.data);
                    differs = false;  /* counted as bad, not as allowed */
                }
            }
            if (differs) diffs[(*allowed_diffs)++] = cp;  /* bad ones are dropped below */
        }
    }
    CHECKF(bad == 0, "%ld code points differ from the reference outside Unicode-version changes", bad);
    free(probe.data);
    free(expected.data);
    free(got.data);
    token_list_free(&work);
    tokenizer_free(t);
    return checked;
}

static void test_every_code_point(void) {
    cJSON *doc = load_sweep();
    CHECK(doc != NULL);
    if (!doc) return;
    int32_t *diffs = xmalloc(0x110000 * sizeof *diffs);
    for (int lower = 1; lower >= 0; lower--) {
        long allowed = 0;
        long checked = sweep(doc, lower, diffs, &allowed);
        CHECKF(checked == 0x110000 - 0x800 - 1, "checked %ld code points", checked);
        printf("  %s: %ld code points; %ld differ only because Unicode %s (Python) lacks what %s (utf8proc) assigns:\n   ",
               lower ? "uncased" : "cased", checked, allowed,
               cJSON_GetObjectItem(doc, "unicode_version")->valuestring, utf8proc_unicode_version());
        print_ranges(diffs, allowed);
    }
    free(diffs);
    cJSON_Delete(doc);
}

int main(void) {
    RUN_TEST(test_every_code_point);
    return test_summary();
}
