/* Wikitext -> plain text, in the order of WikiExtractor's clean() and compact() (the
 * extractor NVIDIA's BERT recipe runs on the dump), one linear pass per step:
 *
 *   templates {{..}} and tables {|..|} dropped (nested)      external links [url text] -> text
 *   internal links [[target|text]]tail -> text+tail; links into other namespaces
 *   (File:, Image:, Category:, interlanguage) dropped whole  magic words __TOC__ dropped
 *   '''bold''' -> bold, ''italic'' -> "italic"               <br>/<hr> -> space, <p> -> newline
 *   comments, self-closing tags (<ref/>), markup of inline tags (<span>, <sup>..) dropped
 *   elements without prose (<ref>..</ref>, <table>, <gallery>, lists..) dropped with content
 *   entities (&amp; &nbsp; &#8212;) decoded                  <math>/<code> -> formula_N/codice_N
 *   whitespace and punctuation tidied; then per line: headings kept as "Title." when their
 *   section has text, list items and table residue dropped, indents unindented.
 *
 * Differences from WikiExtractor: templates are dropped, never expanded (WikiExtractor
 * expands those whose definitions are in the dump), unbalanced delimiters are kept as
 * text, and the output is not HTML-escaped (WikiExtractor writes &amp; &lt; &gt; into the
 * text by default). */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <utf8proc.h>

#include "core/common.h"
#include "core/strmap.h"
#include "core/test_hooks.h"
#include "core/utf8.h"
#include "data/wikitext.h"

typedef struct {
    char *p;
    size_t n, cap;
} Str;

static void str_add(Str *s, const char *t, size_t n) {
    if (s->n + n + 1 > s->cap) {
        s->cap = 2 * (s->n + n + 1);
        s->p = xrealloc(s->p, s->cap);
    }
    memcpy(s->p + s->n, t, n);
    s->n += n;
    s->p[s->n] = 0;
}
static void str_addc(Str *s, char c) { str_add(s, &c, 1); }
static void str_adds(Str *s, const char *t) { str_add(s, t, strlen(t)); }

/* Runs step(in, out) and makes out the new text (the old buffer is reused). */
typedef void (*Step)(const Str *in, Str *out);
static void apply(Str *text, Str *spare, Step step) {
    spare->n = 0;
    str_add(spare, "", 0);
    step(text, spare);
    TEST_COUNT_WORK(text->n + spare->n);   /* every pass reads its input and writes its output */
    Str t = *text;
    *text = *spare;
    *spare = t;
}

/* Length of the run at in->p[i] holding none of specials: bytes a step copies as they are. */
static size_t plain_run(const Str *in, size_t i, const char *specials) {
    return i < in->n ? strcspn(in->p + i, specials) : 0;
}

static bool starts_with(const Str *s, size_t i, const char *lit) {
    size_t n = strlen(lit);
    return i + n <= s->n && !memcmp(s->p + i, lit, n);
}

static int32_t cp_at(const char *p, size_t n, size_t i, int *len) {
    int32_t cp = utf8_decode((const unsigned char *)p + i, n - i, len);
    if (cp < 0) {   /* an invalid byte reads as U+FFFD, one byte at a time */
        *len = 1;
        return 0xFFFD;
    }
    return cp;
}

static bool is_word_cp(int32_t c) { /* Python's \w */
    if (c == '_') return true;
    utf8proc_category_t k = utf8proc_category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

static bool is_space_cp(int32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Whitespace (Python's \s) before byte i / at byte i of p, decoding whole characters. */
static bool space_before(const char *p, size_t i) {
    if (i == 0) return false;
    size_t k = i - 1;
    while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80 && i - k < 4) k--;
    int len;
    return is_space_cp(cp_at(p, i, k, &len)) && k + (size_t)len == i;
}
static size_t skip_spaces(const char *p, size_t n, size_t i) {
    int len;
    while (i < n && is_space_cp(cp_at(p, n, i, &len))) i += (size_t)len;
    return i;
}
static size_t trim_spaces_back(const char *p, size_t from, size_t end) {
    while (end > from && space_before(p, end)) {
        size_t k = end - 1;
        while (k > from && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
        end = k;
    }
    return end;
}

/* ---- Nested delimiters: templates, tables ------------------------------------------- */

typedef struct {
    size_t start, end;
} Span;

static int cmp_span(const void *x, const void *y) {
    size_t a = ((const Span *)x)->start, b = ((const Span *)y)->start;
    return (a > b) - (a < b);
}

/* The outermost balanced open..close spans of in, in order: each close matches the latest
 * unmatched open; unmatched delimiters are text. One pass, so unbalanced markup never
 * costs a rescan. Returns the count; *out is malloc'd. */
static size_t balanced_spans(const Str *in, const char *open, const char *close, Span **out) {
    size_t lo = strlen(open), lc = strlen(close), n_open = 0, n_pairs = 0, cap = 16;
    size_t *opens = xmalloc(cap * sizeof *opens);
    Span *pairs = xmalloc(cap * sizeof *pairs); /* n_open + n_pairs <= opens seen <= cap */
    const char stops[3] = {open[0], close[0], 0};
    for (size_t j = 0; j < in->n;) {
        j += strcspn(in->p + j, stops);
        if (j >= in->n) break;
        if (starts_with(in, j, open)) {
            if (n_open + n_pairs == cap) {
                cap = grow_capacity(cap, cap + 1, 16);
                opens = xrealloc(opens, cap * sizeof *opens);
                pairs = xrealloc(pairs, cap * sizeof *pairs);
            }
            opens[n_open++] = j;
            j += lo;
        } else if (starts_with(in, j, close)) {
            if (n_open) pairs[n_pairs++] = (Span){opens[--n_open], j + lc};
            j += lc;
        } else {
            j++;
        }
    }
    qsort(pairs, n_pairs, sizeof *pairs, cmp_span);
    size_t kept = 0, end = 0;
    for (size_t k = 0; k < n_pairs; k++) /* nested pairs lie inside an earlier-starting one */
        if (kept == 0 || pairs[k].start >= end) end = pairs[k].end, pairs[kept++] = pairs[k];
    free(opens);
    *out = pairs;
    return kept;
}

/* Drops every outermost balanced open..close span (templates, tables). */
static void drop_nested(const Str *in, Str *out, const char *open, const char *close) {
    Span *spans;
    size_t n = balanced_spans(in, open, close, &spans), i = 0;
    for (size_t k = 0; k < n; k++) {
        str_add(out, in->p + i, spans[k].start - i);
        i = spans[k].end;
    }
    str_add(out, in->p + i, in->n - i);
    free(spans);
}
static void drop_templates(const Str *in, Str *out) { drop_nested(in, out, "{{", "}}"); }
static void drop_tables(const Str *in, Str *out) { drop_nested(in, out, "{|", "|}"); }

/* ---- Links --------------------------------------------------------------------------- */

static const char *const URL_PROTOCOLS[] = {
    "bitcoin:", "ftp://", "ftps://", "geo:", "git://", "gopher://", "http://", "https://",
    "irc://", "ircs://", "magnet:", "mailto:", "mms://", "news:", "nntp://", "redis://",
    "sftp://", "sip:", "sips:", "sms:", "ssh://", "svn://", "tel:", "telnet://", "urn:",
    "worldwind://", "xmpp:", "//"};

static bool is_url_char(const char *p, size_t n, size_t i, int *len) {
    int32_t c = cp_at(p, n, i, len);
    if (c <= 0x20 || c == 0x7f || is_space_cp(c)) return false;
    return !(c < 128 && strchr("[]<>\"", (int)c));
}

/* [url label] -> label; [url] -> nothing (ExtLinkBracketedRegex). */
static void replace_external_links(const Str *in, Str *out) {
    /* The first ']' or control byte at or after scanned_from is at stop: a page of unclosed
     * "[http://x " then costs one scan, not one scan per bracket. */
    size_t i = 0, scanned_from = SIZE_MAX, stop = 0;
    while (i < in->n) {
        size_t run = plain_run(in, i, "[");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        size_t proto = 0;
        if (in->p[i] == '[' && i + 1 < in->n && in->p[i + 1] != '[')
            for (size_t k = 0; k < sizeof URL_PROTOCOLS / sizeof *URL_PROTOCOLS && !proto; k++) {
                size_t pl = strlen(URL_PROTOCOLS[k]);
                if (i + 1 + pl <= in->n && !strncasecmp(in->p + i + 1, URL_PROTOCOLS[k], pl)) proto = pl;
            }
        size_t j = i + 1 + proto;
        int len = 0;
        size_t url_chars = 0;
        while (proto && j < in->n && is_url_char(in->p, in->n, j, &len)) j += (size_t)len, url_chars++;
        if (!proto || !url_chars) {
            str_addc(out, in->p[i++]);
            continue;
        }
        while (j < in->n && is_space_cp(cp_at(in->p, in->n, j, &len))) j += (size_t)len;
        size_t label = j;
        if (scanned_from <= label && label <= stop) {
            j = stop;
        } else {
            while (j < in->n && in->p[j] != ']' && !((unsigned char)in->p[j] < 0x20 && in->p[j] != '\t')) j++;
            scanned_from = label, stop = j;
        }
        if (j >= in->n || in->p[j] != ']') {
            str_addc(out, in->p[i++]);
            continue;
        }
        str_add(out, in->p + label, j - label);
        i = j + 1;
    }
}

/* Namespaces whose links stay as text (WikiExtractor's acceptedNamespaces). */
static bool accepted_namespace(const char *p, size_t n) {
    return (n == 1 && *p == 'w') || (n == 10 && !memcmp(p, "wiktionary", 10)) ||
           (n == 4 && !memcmp(p, "wikt", 4));
}

/* The text a [[inner]] link shows: the label after the last top-level '|' (else the
 * target), or nothing for a link into another namespace. */
static void link_text(const char *inner, size_t n, Str *out) {
    size_t pipe = n, depth = 0, last_pipe = n;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && inner[i] == '[' && inner[i + 1] == '[') depth++, i++;
        else if (i + 1 < n && inner[i] == ']' && inner[i + 1] == ']' && depth) depth--, i++;
        else if (inner[i] == '|' && depth == 0) {
            if (pipe == n) pipe = i;
            last_pipe = i;
        }
    }
    size_t title_len = pipe;
    const char *colon = memchr(inner, ':', title_len);
    if (colon && colon > inner && !accepted_namespace(inner, (size_t)(colon - inner))) return;
    if (colon == inner) {
        const char *c2 = memchr(inner + 1, ':', title_len - 1);
        if (c2 && c2 > inner + 1 && !accepted_namespace(inner + 1, (size_t)(c2 - inner - 1))) return;
    }
    const char *label = pipe == n ? inner : inner + last_pipe + 1;
    size_t len = pipe == n ? n : n - last_pipe - 1;
    size_t start = skip_spaces(label, len, 0); /* .strip() */
    len = trim_spaces_back(label, start, len) - start;
    label += start;
    str_add(out, label, len);
}

/* [[target|label]]tail -> label + tail, nested links handled as one balanced span. */
static void replace_internal_links(const Str *in, Str *out) {
    Span *spans;
    size_t n = balanced_spans(in, "[[", "]]", &spans), i = 0;
    for (size_t k = 0; k < n; k++) {
        str_add(out, in->p + i, spans[k].start - i);
        link_text(in->p + spans[k].start + 2, spans[k].end - spans[k].start - 4, out);
        size_t j = spans[k].end;
        int len;
        while (j < in->n && is_word_cp(cp_at(in->p, in->n, j, &len))) { /* trail, e.g. [[cat]]s */
            str_add(out, in->p + j, (size_t)len);
            j += (size_t)len;
        }
        i = j;
    }
    str_add(out, in->p + i, in->n - i);
    free(spans);
}

/* __NOTOC__ and the other behaviour switches. */
static void drop_magic_words(const Str *in, Str *out) {
    size_t i = 0;
    while (i < in->n) {
        size_t run = plain_run(in, i, "_");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        if (starts_with(in, i, "__")) {
            size_t j = i + 2;
            while (j < in->n && in->p[j] >= 'A' && in->p[j] <= 'Z') j++;
            if (j > i + 2 && starts_with(in, j, "__")) {
                i = j + 2;
                continue;
            }
        }
        str_addc(out, in->p[i++]);
    }
}

/* ---- Bold and italic ----------------------------------------------------------------- */

/* re.sub(open (inner) close, pre + inner + post): inner is the shortest run up to close
 * that contains no newline (any_newline false) or no '"' (for the quote forms). */
static void sub_delimited(const Str *in, Str *out, const char *open, const char *close,
                          const char *pre, const char *post, bool quote_free) {
    size_t lo = strlen(open), lc = strlen(close), i = 0;
    const char open_first[2] = {open[0], 0};
    while (i < in->n) {
        size_t run = plain_run(in, i, open_first);
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        if (starts_with(in, i, open)) {
            size_t j = i + lo;
            while (j < in->n && !starts_with(in, j, close) && (quote_free ? in->p[j] != '"' : in->p[j] != '\n')) j++;
            if (starts_with(in, j, close)) {
                str_adds(out, pre);
                str_add(out, in->p + i + lo, j - i - lo);
                str_adds(out, post);
                i = j + lc;
                continue;
            }
        }
        str_addc(out, in->p[i++]);
    }
}
static void bold_italic(const Str *in, Str *out) { sub_delimited(in, out, "'''''", "'''''", "", "", false); }
static void bold(const Str *in, Str *out) { sub_delimited(in, out, "'''", "'''", "", "", false); }
static void italic_quote(const Str *in, Str *out) { sub_delimited(in, out, "''\"", "\"''", "\"", "\"", true); }
static void italic(const Str *in, Str *out) { sub_delimited(in, out, "''", "''", "\"", "\"", false); }
static void quote_quote(const Str *in, Str *out) { sub_delimited(in, out, "\"\"", "\"\"", "\"", "\"", true); }
static void quote_residue(const Str *in, Str *out) { /* ''' -> nothing, then '' -> " */
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, "'");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        if (starts_with(in, i, "'''")) i += 3;
        else if (starts_with(in, i, "''")) str_addc(out, '"'), i += 2;
        else str_addc(out, in->p[i++]);
    }
}

/* ---- HTML tags and comments ---------------------------------------------------------- */

typedef struct {
    size_t end;        /* just past '>' */
    const char *name;
    size_t name_len;
    bool closing;      /* </name> */
    bool self_closing; /* <name ... /> */
} Tag;

/* Where a tag's attribute scan is known to end. The scan from a given position is
 * deterministic (a quote jumps to its match, anything else steps on), so scans that meet
 * go on alike:
 * - dead: a position that a failed scan passed leads off the end again (one flag per
 *   position, set once, keeps a page of unclosed "<a " linear: it was quadratic, 45 s at 1e5);
 * - reach: where a successful scan from a position ends, and what it last saw (a tag is
 *   self-closing when that is '/'). Many unclosed "<a " openers followed by a real tag all
 *   reached that tag's '>', each scanning to it: quadratic (issue 35: 3.4 s at 10k openers
 *   then <code> elements, 13.8 s at 20k). Allocated at the first long scan, so ordinary
 *   pages keep one byte per position. */
enum { REACH_NONE = 1, REACH_SLASH = 2, REACH_OTHER = 3, REACH_SHIFT = 30, REMEMBER_AFTER = 64 };
typedef struct {
    unsigned char *dead;
    uint32_t *reach;   /* 0: unknown; else (kind << REACH_SHIFT) | (index of the '>' + 1) */
    size_t n;
} TagScan;

static TagScan tag_scan_new(size_t n) { return (TagScan){.dead = xcalloc(n + 1, 1), .n = n}; }
static void tag_scan_free(TagScan *s) { free(s->dead), free(s->reach); }

/* One step of an opening tag's attribute scan from j (p[j] != '>'). */
static size_t attribute_step(const char *p, size_t n, size_t j) {
    if (p[j] == '"' || p[j] == '\'') {
        const char *q = memchr(p + j + 1, p[j], n - j - 1);
        if (q) return (size_t)(q - p) + 1;
    }
    return j + 1;
}

/* What the step from j sets `last` to: the closing quote of a quoted span, a character
 * other than whitespace, or nothing (0). */
static char step_last(const char *p, size_t n, size_t j) {
    const size_t next = attribute_step(p, n, j);
    if (next > j + 1) return p[next - 1];
    return p[j] != ' ' && p[j] != '\t' && p[j] != '\n' ? p[j] : 0;
}

/* Records, for each position of the successful scan from `from` to the '>' at e, where it
 * ends and what it last sees; stops at a position already known (its suffix is recorded). */
static void remember_reach(TagScan *s, const char *p, size_t from, size_t e) {
    if (s->n >= ((size_t)1 << REACH_SHIFT) - 1) return;   /* beyond any page: not remembered */
    if (!s->reach) s->reach = xcalloc(s->n + 1, sizeof *s->reach);
    size_t m = 0, cap = 64, *path = xmalloc(cap * sizeof *path), k;
    for (k = from; k < e && !s->reach[k]; k = attribute_step(p, s->n, k)) {
        TEST_COUNT_WORK(1);
        if (m == cap) path = xrealloc(path, (cap *= 2) * sizeof *path);
        path[m++] = k;
    }
    uint32_t kind = k < e ? s->reach[k] >> REACH_SHIFT : REACH_NONE;
    while (m-- > 0) {
        const char c = step_last(p, s->n, path[m]);
        if (c) kind = c == '/' ? REACH_SLASH : REACH_OTHER;
        s->reach[path[m]] = (kind << REACH_SHIFT) | (uint32_t)(e + 1);
    }
    free(path);
}

/* Parses an HTML tag at p[i]: "<", an optional "/", a name, attributes, ">" (attribute
 * values may hold ">" inside quotes). */
static bool parse_tag(TagScan *scan, const char *p, size_t n, size_t i, Tag *t) {
    if (p[i] != '<') return false;
    size_t j = i + 1;
    while (j < n && (p[j] == ' ' || p[j] == '\t' || p[j] == '\n')) j++;
    t->closing = j < n && p[j] == '/';
    if (t->closing)
        for (j++; j < n && (p[j] == ' ' || p[j] == '\t'); j++) {}
    t->name = p + j;
    while (j < n && ((p[j] >= 'a' && p[j] <= 'z') || (p[j] >= 'A' && p[j] <= 'Z') || (j > (size_t)(t->name - p) && p[j] >= '0' && p[j] <= '9'))) j++;
    t->name_len = (size_t)(p + j - t->name);
    if (!t->name_len) return false;
    char last = 0;
    const size_t attributes = j;
    size_t steps = 0;
    while (j < n && p[j] != '>') {
        TEST_COUNT_WORK(1);
        if (!t->closing) {
            if (scan->dead[j]) {
                j = n;   /* this position is known to lead off the end */
                break;
            }
            if (scan->reach && scan->reach[j]) {   /* known to end at a '>' */
                const uint32_t kind = scan->reach[j] >> REACH_SHIFT;
                if (kind != REACH_NONE) last = kind == REACH_SLASH ? '/' : 'x';
                j = (scan->reach[j] & (((uint32_t)1 << REACH_SHIFT) - 1)) - 1;
                break;
            }
            steps++;
            const size_t next = attribute_step(p, n, j);
            if (next > j + 1) {   /* a quoted span */
                j = next;
                last = p[j - 1];
                continue;
            }
        }
        if (t->closing && p[j] != ' ' && p[j] != '\t') return false; /* </name junk> */
        if (p[j] != ' ' && p[j] != '\t' && p[j] != '\n') last = p[j];
        j++;
    }
    if (j >= n) {
        if (!t->closing)   /* mark the path this scan took: later scans that join it stop at once */
            for (size_t k = attributes; k < n && !scan->dead[k] && p[k] != '>'; k = attribute_step(p, n, k))
                scan->dead[k] = 1, TEST_COUNT_WORK(1);
        return false;
    }
    if (steps > REMEMBER_AFTER) remember_reach(scan, p, attributes, j);
    t->self_closing = !t->closing && last == '/';
    t->end = j + 1;
    return true;
}

static bool tag_is(const Tag *t, const char *const *names) {
    for (; *names; names++)
        if (strlen(*names) == t->name_len && !strncasecmp(t->name, *names, t->name_len)) return true;
    return false;
}

/* <br>, <hr> become a space, and <p>, <center>, <h1>..<h4> a newline, unless whitespace
 * (or the text's edge) is already on one side (substituteLineBreakTag). */
static void line_break_tags(const Str *in, Str *out) {
    TagScan scan = tag_scan_new(in->n);
    static const char *const SPACE_TAGS[] = {"br", "hr", NULL};
    static const char *const BLOCK_TAGS[] = {"p", "center", "h1", "h2", "h3", "h4", NULL};
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, "<");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        Tag t;
        if (in->p[i] == '<' && parse_tag(&scan, in->p, in->n, i, &t)) {
            bool space = tag_is(&t, SPACE_TAGS), block = tag_is(&t, BLOCK_TAGS);
            if (space || block) {
                int len;
                bool before = i == 0 || space_before(in->p, i);
                bool after = t.end >= in->n || is_space_cp(cp_at(in->p, in->n, t.end, &len));
                if (!before && !after) str_addc(out, space ? ' ' : '\n');
                i = t.end;
                continue;
            }
        }
        str_addc(out, in->p[i++]);
    }
    tag_scan_free(&scan);
}

/* Comments, self-closing tags (<ref name=x/>) and the markup (not the text) of inline
 * tags are dropped. */
static void drop_markup(const Str *in, Str *out) {
    TagScan scan = tag_scan_new(in->n);
    static const char *const SELF_CLOSING[] = {"nobr", "ref", "references", "nowiki", "templatestyles", "section", NULL};
    static const char *const IGNORED[] = {"abbr", "b", "bdi", "big", "blockquote", "cite", "div", "em",
        "font", "hiero", "i", "kbd", "nowiki", "plaintext", "poem", "s", "section", "span", "strike",
        "strong", "sub", "sup", "tt", "u", "var", "nobr", NULL};
    size_t no_comment_end_from = SIZE_MAX;  /* no "-->" at or after: unclosed comments cost one search */
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, "<");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        if (starts_with(in, i, "<!--") && i + 4 < no_comment_end_from) {
            const char *e = memmem(in->p + i + 4, in->n - i - 4, "-->", 3);
            if (e) {
                i = (size_t)(e - in->p) + 3;
                continue;
            }
            no_comment_end_from = i + 4;
        }
        Tag t;
        if (in->p[i] == '<' && parse_tag(&scan, in->p, in->n, i, &t) &&
            ((t.self_closing && tag_is(&t, SELF_CLOSING)) || tag_is(&t, IGNORED))) {
            i = t.end;
            continue;
        }
        str_addc(out, in->p[i++]);
    }
    tag_scan_free(&scan);
}

static const char *const DISCARD[] = {"gallery", "timeline", "noinclude", "pre", "table", "tr", "td",
    "th", "caption", "div", "form", "input", "select", "option", "textarea", "ul", "li", "ol", "dl",
    "dt", "dd", "menu", "dir", "ref", "references", "img", "imagemap", "source", "small", "inputbox",
    "includeonly", "categorytree", NULL};

#define NDISCARD (sizeof DISCARD / sizeof *DISCARD - 1)

/* What one failed scan for an element's end (one that ran to the end of the text) learnt:
 * every opener of the same name that it passed, and where that opener's own element ends
 * (0: never). A later scan from such an opener would walk the same tags from the same
 * place, so its answer is taken from here, and a page of unclosed <ref>s stays linear. */
typedef struct {
    size_t *open, *end;
    size_t n, cap, next;  /* next: first entry the caller has not passed yet */
} ScanMemo;

static size_t memo_push(ScanMemo *m, size_t open) {
    if (m->n == m->cap) {
        m->cap = grow_capacity(m->cap, m->cap + 1, 64);
        m->open = xrealloc(m->open, m->cap * sizeof *m->open);
        m->end = xrealloc(m->end, m->cap * sizeof *m->end);
    }
    m->open[m->n] = open, m->end[m->n] = 0;
    return m->n++;
}

/* The end of the element opened by t at i (0: never closed), from the memo if a failed
 * scan passed i, else by scanning for its closing tag (same name, nested by name). */
static size_t element_end(TagScan *scan, const Str *in, size_t i, const Tag *t, ScanMemo *memo, size_t **stack,
                          size_t *stack_cap) {
    while (memo->next < memo->n && memo->open[memo->next] < i) memo->next++;
    if (memo->next < memo->n && memo->open[memo->next] == i) return memo->end[memo->next];
    memo->n = memo->next = 0;
    size_t depth = 1, j = t->end;
    while (j < in->n && depth > 0) {
        Tag u;
        if (in->p[j] == '<' && parse_tag(scan, in->p, in->n, j, &u) && u.name_len == t->name_len &&
            !strncasecmp(u.name, t->name, t->name_len)) {
            if (u.closing) {  /* closes the innermost open one: the scan's own opener last */
                if (--depth > 0) memo->end[(*stack)[depth - 1]] = u.end;
            } else if (!u.self_closing) {
                if (depth == *stack_cap) *stack = xrealloc(*stack, (*stack_cap = 2 * depth) * sizeof **stack);
                (*stack)[depth++ - 1] = memo_push(memo, j);
            }
            j = u.end;
        } else {
            j++;
        }
    }
    if (depth > 0) return 0;
    memo->n = 0;  /* a found end: the caller jumps past everything the scan saw */
    return j;
}

/* Elements that hold no prose are dropped with their content (<ref>..</ref>, nested by
 * name); a close tag without its opener is dropped alone. */
static void drop_elements(const Str *in, Str *out) {
    TagScan scan = tag_scan_new(in->n);
    ScanMemo memo[NDISCARD] = {{0}};
    size_t stack_cap = 64, *stack = xmalloc(stack_cap * sizeof *stack);
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, "<");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        Tag t;
        if (in->p[i] != '<' || !parse_tag(&scan, in->p, in->n, i, &t) || !tag_is(&t, DISCARD)) {
            str_addc(out, in->p[i++]);
            continue;
        }
        if (t.closing || t.self_closing) { /* orphan close, or <tag/> with no content */
            i = t.end;
            continue;
        }
        size_t k = 0;
        while (!(strlen(DISCARD[k]) == t.name_len && !strncasecmp(t.name, DISCARD[k], t.name_len))) k++;
        size_t end = element_end(&scan, in, i, &t, &memo[k], &stack, &stack_cap);
        i = end ? end : t.end;  /* never closed: drop just the tag */
    }
    for (size_t k = 0; k < NDISCARD; k++) free(memo[k].open), free(memo[k].end);
    free(stack);
    tag_scan_free(&scan);
}

/* &name; &#123; &#x1F; -> the character (WikiExtractor's unescape; unknown ones stay). */
static int cmp_entity(const void *key, const void *e) {
    return strcmp((const char *)key, ((const HtmlEntity *)e)->name);
}

static void unescape_entities(const Str *in, Str *out) {
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, "&");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        if (in->p[i] == '&') {
            size_t j = i + 1;
            bool numeric = j < in->n && in->p[j] == '#';
            if (numeric) j++;
            size_t name = j;
            while (j < in->n && j - name < 32 && (isalnum((unsigned char)in->p[j]) || in->p[j] == '_')) j++;
            if (j > name && j < in->n && in->p[j] == ';') {
                char key[40];
                memcpy(key, in->p + name, j - name);
                key[j - name] = 0;
                long cp = -1;
                if (numeric) {
                    char *end;
                    cp = (key[0] == 'x' || key[0] == 'X') ? strtol(key + 1, &end, 16) : strtol(key, &end, 10);
                    if (*end || cp < 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = -1;
                } else {
                    const HtmlEntity *e = bsearch(key, HTML_ENTITIES, (size_t)N_HTML_ENTITIES, sizeof *e, cmp_entity);
                    if (e) cp = e->codepoint;
                }
                if (cp > 0) {
                    utf8proc_uint8_t buf[4];
                    str_add(out, (const char *)buf, (size_t)utf8proc_encode_char((int32_t)cp, buf));
                    i = j + 1;
                    continue;
                }
            }
        }
        str_addc(out, in->p[i++]);
    }
}

/* Numbers for placeholders: an element identical to an earlier one gets the earlier
 * one's number (WikiExtractor replaces every copy at once), yet still counts. The distinct
 * texts are found through a string map (a list searched from the start was quadratic: 21 s
 * for 1e5 distinct <code> elements). */
typedef struct {
    StrMap seen;   /* distinct element text -> its placeholder number */
    int count;
} PlaceholderCounter;

static int placeholder_number(PlaceholderCounter *c, const char *elem, size_t len) {
    const int number = ++c->count;
    bool added;
    StrMapEntry *e = strmap_intern(&c->seen, elem, len, &added);
    if (added) e->value = number;
    return (int)e->value;
}

/* <math>..</math> -> formula_N, <code>..</code> -> codice_N; << and >> -> « and ». */
static void placeholders(const Str *in, Str *out) {
    TagScan scan = tag_scan_new(in->n);
    static const char *const MATH[] = {"math", NULL}, *const CODE[] = {"code", NULL};
    PlaceholderCounter math = {0}, code = {0};
    strmap_init(&math.seen, 0, true);
    strmap_init(&code.seen, 0, true);
    size_t unclosed_from[2] = {SIZE_MAX, SIZE_MAX};  /* math, code: no closing tag at or after */
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, "<>");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        Tag t, u;
        if (in->p[i] == '<' && parse_tag(&scan, in->p, in->n, i, &t) && !t.closing && !t.self_closing &&
            (tag_is(&t, MATH) || tag_is(&t, CODE))) {
            size_t j = t.end, *unclosed = &unclosed_from[tag_is(&t, MATH) ? 0 : 1];
            if (j >= *unclosed) j = in->n;  /* an earlier scan from before here found none */
            while (j < in->n && !(in->p[j] == '<' && parse_tag(&scan, in->p, in->n, j, &u) && u.closing &&
                                  u.name_len == t.name_len && !strncasecmp(u.name, t.name, t.name_len)))
                j++;
            if (j >= in->n && t.end < *unclosed) *unclosed = t.end;
            if (j < in->n) {
                char buf[32];
                bool is_math = tag_is(&t, MATH);
                int k = placeholder_number(is_math ? &math : &code, in->p + i, u.end - i);
                snprintf(buf, sizeof buf, "%s_%d", is_math ? "formula" : "codice", k);
                str_adds(out, buf);
                i = u.end;
                continue;
            }
        }
        if (starts_with(in, i, "<<")) str_adds(out, "\xC2\xAB"), i += 2;      /* « */
        else if (starts_with(in, i, ">>")) str_adds(out, "\xC2\xBB"), i += 2; /* » */
        else str_addc(out, in->p[i++]);
    }
    strmap_free(&math.seen);
    strmap_free(&code.seen);
    tag_scan_free(&scan);
}

/* ---- Tidying whitespace and punctuation ---------------------------------------------- */

static void tidy_spaces(const Str *in, Str *out) { /* \t -> ' ', ' {2,}' -> ' ', '.{4,}' -> '...' */
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, "\t .");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        char c = in->p[i] == '\t' ? ' ' : in->p[i];
        size_t j = i + 1;
        if (c == ' ')
            while (j < in->n && (in->p[j] == ' ' || in->p[j] == '\t')) j++;
        if (c == '.')
            while (j < in->n && in->p[j] == '.') j++;
        if (c == '.' && j - i >= 4) str_adds(out, "...");
        else if (c == '.') str_add(out, in->p + i, j - i);
        else str_addc(out, c);
        i = j;
    }
}

static void tidy_punctuation(const Str *in, Str *out) {
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, " [(\xC2");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        /* ' ([,:.)\]»])' -> '\1' */
        if (in->p[i] == ' ' && i + 1 < in->n && strchr(",:.)]", in->p[i + 1]) && in->p[i + 1]) {
            str_addc(out, in->p[i + 1]);
            i += 2;
        } else if (in->p[i] == ' ' && starts_with(in, i + 1, "\xC2\xBB")) {
            str_adds(out, "\xC2\xBB");
            i += 3;
        } else if ((in->p[i] == '[' || in->p[i] == '(') && starts_with(in, i + 1, " ")) { /* '([(«]) ' */
            str_addc(out, in->p[i]);
            i += 2;
        } else if (starts_with(in, i, "\xC2\xAB ")) {
            str_adds(out, "\xC2\xAB");
            i += 3;
        } else {
            str_addc(out, in->p[i++]);
        }
    }
}

/* '\n\W+?\n' -> '\n' (lines of punctuation only), then ',,' -> ',' and ',.' -> '.'. */
static void drop_punctuation_lines(const Str *in, Str *out) {
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, "\n");
        if (run) {
            str_add(out, in->p + i, run);
            i += run;
            continue;
        }
        if (in->p[i] == '\n') {
            size_t j = i + 1;
            bool matched = false;
            while (j < in->n) {
                int len;
                if (is_word_cp(cp_at(in->p, in->n, j, &len))) break;
                j += (size_t)len;
                if (j < in->n && in->p[j] == '\n') {
                    matched = true;
                    break;
                }
            }
            if (matched) {
                str_addc(out, '\n');
                i = j + 1;
                continue;
            }
        }
        str_addc(out, in->p[i++]);
    }
}

static void tidy_commas(const Str *in, Str *out) {
    Str mid = {0};
    str_add(&mid, "", 0);
    for (size_t i = 0; i < in->n;) {
        size_t run = plain_run(in, i, ",");
        if (run) {
            str_add(&mid, in->p + i, run);
            i += run;
            continue;
        }
        if (starts_with(in, i, ",,")) str_addc(&mid, ','), i += 2;
        else str_addc(&mid, in->p[i++]);
    }
    for (size_t i = 0; i < mid.n;) {
        size_t run = plain_run(&mid, i, ",");
        if (run) {
            str_add(out, mid.p + i, run);
            i += run;
            continue;
        }
        if (starts_with(&mid, i, ",.")) str_addc(out, '.'), i += 2;
        else str_addc(out, mid.p[i++]);
    }
    free(mid.p);
}

/* ---- compact(): lines into paragraphs ------------------------------------------------ */

#define MAX_HEADING_LEVEL 16

typedef struct {
    Str heading[MAX_HEADING_LEVEL + 1]; /* pending headings by level; n == 0 and !set: none */
    bool set[MAX_HEADING_LEVEL + 1];
    bool empty_section;
    ParagraphFn emit;
    void *ctx;
} Compact;

/* "(==+)\s*(.*?)\s*\1" at the start of the line: level and title, or 0. */
static int heading(const char *line, size_t n, size_t *title, size_t *title_len) {
    size_t run = 0;
    while (run < n && line[run] == '=') run++;
    for (size_t g = run; g >= 2; g--) {
        size_t t = g;
        t = skip_spaces(line, n, t);
        for (size_t p = t; p + g <= n; p++) {
            size_t k = 0;
            while (k < g && line[p + k] == '=') k++;
            if (k < g) continue;
            size_t e = p;
            e = trim_spaces_back(line, t, e);
            *title = t;
            *title_len = e - t;
            return (int)g;
        }
    }
    return 0;
}

static void compact_line(Compact *c, const char *line, size_t n) {
    if (skip_spaces(line, n, 0) == n) return;
    size_t title, tl;
    int level = heading(line, n, &title, &tl);
    if (level) {
        if (level > MAX_HEADING_LEVEL) level = MAX_HEADING_LEVEL;
        Str *h = &c->heading[level];
        h->n = 0;
        str_add(h, line + title, tl);
        if (tl && !strchr("!?", line[title + tl - 1])) str_addc(h, '.');
        c->set[level] = true;
        for (int k = level + 1; k <= MAX_HEADING_LEVEL; k++) c->set[k] = false;
        c->empty_section = true;
        return;
    }
    char first = line[0], last = line[n - 1];
    if (n >= 4 && first == '+' && line[1] == '+') { /* "++title++" */
        Str t = {0};
        str_add(&t, line + 2, n - 4);
        if (t.n && !strchr("!?", t.p[t.n - 1])) str_addc(&t, '.');
        if (t.n) c->emit(t.p, t.n, c->ctx);
        free(t.p);
        return;
    }
    if (first == ':') {
        size_t k = 0;
        while (k < n && line[k] == ':') k++;
        if (k < n) c->emit(line + k, n - k, c->ctx);
        return;
    }
    if (strchr("*#;{|", first) || last == '}') return; /* lists and table residue */
    bool dots = true;
    for (size_t k = 0; k < n && dots; k++) dots = line[k] == '.' || line[k] == '-';
    if ((first == '(' && last == ')') || dots) return;
    bool pending = false;
    for (int k = 0; k <= MAX_HEADING_LEVEL; k++) pending |= c->set[k];
    if (pending) {
        for (int k = 0; k <= MAX_HEADING_LEVEL; k++)
            if (c->set[k]) {
                if (c->heading[k].n) c->emit(c->heading[k].p, c->heading[k].n, c->ctx);
                c->set[k] = false;
            }
        c->emit(line, n, c->ctx);
        c->empty_section = false;
    } else if (!c->empty_section) {
        c->emit(line, n, c->ctx);
    }
}

void wikitext_paragraphs(const char *wikitext, size_t len, ParagraphFn emit, void *ctx) {
    static const Step STEPS[] = {
        drop_templates, drop_tables, replace_external_links, replace_internal_links,
        drop_magic_words, bold_italic, bold, italic_quote, italic, quote_quote, quote_residue,
        line_break_tags, drop_markup, drop_elements, unescape_entities, placeholders,
        tidy_spaces, tidy_punctuation, drop_punctuation_lines, tidy_commas,
    };
    Str text = {0}, spare = {0};
    str_add(&text, wikitext, len);
    for (size_t k = 0; k < sizeof STEPS / sizeof *STEPS; k++) apply(&text, &spare, STEPS[k]);
    Compact c;
    memset(&c, 0, sizeof c);
    c.emit = emit;
    c.ctx = ctx;
    for (size_t i = 0; i < text.n;) {
        const char *nl = memchr(text.p + i, '\n', text.n - i);
        size_t end = nl ? (size_t)(nl - text.p) : text.n;
        compact_line(&c, text.p + i, end - i);
        i = end + 1;
    }
    for (int k = 0; k <= MAX_HEADING_LEVEL; k++) free(c.heading[k].p);
    free(text.p);
    free(spare.p);
}
