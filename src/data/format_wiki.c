/* `bert format wikipedia`: a MediaWiki pages-articles dump (.xml or .xml.bz2) -> one
 * article per line, as NVIDIA's recipe gets it from WikiExtractor + WikicorpusTextFormatting
 * (article paragraphs without the title line, each followed by a space; "\n\n" after each
 * article).
 *
 * The dump is streamed: libbz2 decompresses a block at a time (multi-stream files too)
 * into expat, which hands over one <page> at a time; only the current page's text is held.
 * Kept: pages in namespace 0 without <redirect>. A truncated or corrupt dump is an error
 * and nothing is published (the output is written to a temporary name first). */
#include <bzlib.h>
#include <errno.h>
#include <expat.h>
#include <stdlib.h>
#include <string.h>

#include "data/doc_writer.h"
#include "data/wikitext.h"

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

typedef enum { FIELD_NONE, FIELD_TITLE, FIELD_NS, FIELD_TEXT } Field;

typedef struct {
    DocWriter *writer;
    Field field;
    bool in_page, redirect;
    Buf title, ns, text;
    char *clean;  /* sanitized text */
    size_t clean_cap;
} WikiReader;

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs) {
    WikiReader *r = ud;
    (void)attrs;
    if (!strcmp(name, "page")) {
        r->in_page = true;
        r->redirect = false;
        r->title.n = r->ns.n = r->text.n = 0;
        return;
    }
    if (!r->in_page) return;
    if (!strcmp(name, "redirect")) r->redirect = true;
    else if (!strcmp(name, "title")) r->field = FIELD_TITLE, r->title.n = 0;
    else if (!strcmp(name, "ns")) r->field = FIELD_NS, r->ns.n = 0;
    else if (!strcmp(name, "text")) r->field = FIELD_TEXT, r->text.n = 0;
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len) {
    WikiReader *r = ud;
    Buf *b = r->field == FIELD_TITLE ? &r->title : r->field == FIELD_NS ? &r->ns
           : r->field == FIELD_TEXT ? &r->text : NULL;
    if (b) buf_add(b, s, (size_t)len);
}

static void emit_paragraph(const char *text, size_t len, void *ctx) {
    doc_writer_line(ctx, text, utf8_rstrip_len(text, len));
}

static void XMLCALL on_end(void *ud, const XML_Char *name) {
    WikiReader *r = ud;
    r->field = FIELD_NONE;
    if (strcmp(name, "page") != 0) return;
    r->in_page = false;
    bool article = r->ns.n == 1 && r->ns.p[0] == '0' && !r->redirect;
    if (article && r->text.n) {
        /* expat hands over valid UTF-8 only; sanitizing is cheap insurance */
        size_t n = utf8_sanitize(r->text.p, r->text.n, &r->clean, &r->clean_cap,
                                 &r->writer->stats->invalid_utf8_bytes);
        wikitext_paragraphs(r->clean, n, emit_paragraph, r->writer);
    }
    doc_writer_end_document(r->writer);
}

/* The decompressed byte stream: plain XML or bzip2 (detected by its "BZh" magic). */
typedef struct {
    FILE *fp;
    BZFILE *bz;
    bool is_bz2, done;
} Source;

static int source_open(Source *s, const char *path, BertError *err) {
    memset(s, 0, sizeof *s);
    s->fp = fopen(path, "rb");
    if (!s->fp) return bert_fail(err, "cannot open dump '%s': %s", path, strerror(errno));
    unsigned char magic[3] = {0};
    size_t got = fread(magic, 1, 3, s->fp);
    rewind(s->fp);
    s->is_bz2 = got == 3 && !memcmp(magic, "BZh", 3);
    if (s->is_bz2) {
        int bzerr;
        s->bz = BZ2_bzReadOpen(&bzerr, s->fp, 0, 0, NULL, 0);
        if (bzerr != BZ_OK) return bert_fail(err, "'%s': cannot start bzip2 decompression", path);
    }
    return 0;
}

/* Reads up to cap bytes; returns the count (0 at the end) or -1 with err set. */
static long source_read(Source *s, char *buf, size_t cap, const char *path, BertError *err) {
    if (s->done) return 0;
    if (!s->is_bz2) {
        size_t n = fread(buf, 1, cap, s->fp);
        if (n == 0 && ferror(s->fp)) return bert_fail(err, "error reading '%s'", path);
        if (n == 0) s->done = true;
        return (long)n;
    }
    int bzerr;
    int n = BZ2_bzRead(&bzerr, s->bz, buf, (int)cap);
    if (bzerr == BZ_OK) return n;
    if (bzerr != BZ_STREAM_END) {
        return bert_fail(err, "'%s': %s", path,
                         bzerr == BZ_UNEXPECTED_EOF ? "truncated bzip2 file (ends inside a compressed block)"
                         : bzerr == BZ_DATA_ERROR || bzerr == BZ_DATA_ERROR_MAGIC ? "corrupt bzip2 data"
                         : "bzip2 read error");
    }
    /* End of one stream: a multi-stream file (pbzip2, Wikipedia's multistream dumps)
     * continues with the next one. */
    void *unused;
    int n_unused;
    BZ2_bzReadGetUnused(&bzerr, s->bz, &unused, &n_unused);
    char rest[BZ_MAX_UNUSED];
    memcpy(rest, unused, (size_t)n_unused);
    BZ2_bzReadClose(&bzerr, s->bz);
    s->bz = NULL;
    int c = n_unused ? 0 : fgetc(s->fp);
    if (!n_unused && c == EOF) {
        s->done = true;
        return n;
    }
    if (!n_unused) rest[n_unused++] = (char)c;
    s->bz = BZ2_bzReadOpen(&bzerr, s->fp, 0, 0, rest, n_unused);
    if (bzerr != BZ_OK) return bert_fail(err, "'%s': bad bzip2 stream after the first", path);
    return n;
}

static void source_close(Source *s) {
    int bzerr;
    if (s->bz) BZ2_bzReadClose(&bzerr, s->bz);
    if (s->fp) fclose(s->fp);
}

static int parse_dump(Source *src, XML_Parser parser, FormatStats *st, const char *dump, BertError *err) {
    enum { CHUNK = 1 << 20 };
    char *buf = xmalloc(CHUNK);
    int rc = 0;
    for (;;) {
        long n = source_read(src, buf, CHUNK, dump, err);
        if (n < 0) {
            rc = -1;
            break;
        }
        st->input_bytes += n;
        if (XML_Parse(parser, buf, (int)n, n == 0) == XML_STATUS_ERROR) {
            enum XML_Error code = XML_GetErrorCode(parser);
            bool truncated = n == 0 && (code == XML_ERROR_NO_ELEMENTS || code == XML_ERROR_UNCLOSED_TOKEN ||
                                        code == XML_ERROR_PARTIAL_CHAR || code == XML_ERROR_UNCLOSED_CDATA_SECTION);
            rc = bert_fail(err, "'%s': %s XML at line %lu: %s", dump, truncated ? "truncated" : "malformed",
                           (unsigned long)XML_GetCurrentLineNumber(parser), XML_ErrorString(code));
            break;
        }
        if (n == 0) break;
    }
    free(buf);
    return rc;
}

int format_wikipedia(const char *dump, const char *out, const FormatOptions *opt_in,
                     FormatStats *stats, BertError *err) {
    FormatOptions opt = opt_in ? *opt_in : format_default_options();
    FormatStats st;
    memset(&st, 0, sizeof st);
    double t0 = now_seconds();
    Source src;
    if (source_open(&src, dump, err) != 0) {
        source_close(&src);
        return -1;
    }
    DocWriter w;
    if (doc_writer_open(&w, out, &st, opt.progress, "wikipedia", err) != 0) {
        source_close(&src);
        return -1;
    }
    WikiReader r;
    memset(&r, 0, sizeof r);
    r.writer = &w;
    XML_Parser parser = XML_ParserCreate("UTF-8");
    XML_SetUserData(parser, &r);
    XML_SetElementHandler(parser, on_start, on_end);
    XML_SetCharacterDataHandler(parser, on_text);
    int rc = parse_dump(&src, parser, &st, dump, err);
    XML_ParserFree(parser);
    source_close(&src);
    free(r.title.p);
    free(r.ns.p);
    free(r.text.p);
    free(r.clean);
    if (rc == 0) rc = doc_writer_commit(&w, err);
    else doc_writer_abort(&w);
    st.seconds = now_seconds() - t0;
    if (stats) *stats = st;
    return rc;
}
