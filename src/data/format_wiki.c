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
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/utf8.h"
#include "core/test_hooks.h"
#include "data/bz2_streams.h"
#include "data/doc_writer.h"
#include "data/wikitext.h"

/* TEST_COUNT_WORK: steps of the reader's loops (bytes expat scans, an unfinished token
 * again on each call; page text copied and grown, namespaces checked, text sanitized; the
 * cleaning counts its own), what the scaling tests count. */

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->p = xrealloc(b->p, b->cap);
        TEST_COUNT_WORK((long long)b->n);  /* realloc may copy what is there */
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    TEST_COUNT_WORK((long long)n + 1);
}

typedef enum { FIELD_NONE, FIELD_TITLE, FIELD_NS, FIELD_TEXT } Field;

typedef struct {
    DocWriter *writer;
    Field field;
    bool in_page, redirect, too_large;
    size_t max_text;    /* bytes of page text kept at most (FormatOptions.max_page_mb) */
    Buf title, ns, text;
    char *clean;  /* sanitized text */
    size_t clean_cap;
} WikiReader;

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs) {
    WikiReader *r = ud;
    (void)attrs;
    TEST_COUNT_WORK(1);
    if (!strcmp(name, "page")) {
        r->in_page = true;
        r->redirect = r->too_large = false;
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
    if (b && b->n + (size_t)len > r->max_text) {   /* stop growing: the page will be skipped */
        r->too_large = true;
        return;
    }
    if (b) buf_add(b, s, (size_t)len);
}

static void emit_paragraph(const char *text, size_t len, void *ctx) {
    size_t kept = utf8_rstrip_len(text, len);
    TEST_COUNT_WORK((long long)len + 1);  /* stripped from the end, the rest written */
    doc_writer_line(ctx, text, kept);
}

static void XMLCALL on_end(void *ud, const XML_Char *name) {
    WikiReader *r = ud;
    r->field = FIELD_NONE;
    TEST_COUNT_WORK(1);
    if (strcmp(name, "page") != 0) return;
    r->in_page = false;
    bool numeric_ns = r->ns.n > 0;
    for (size_t i = 0; i < r->ns.n; i++) numeric_ns = numeric_ns && r->ns.p[i] >= '0' && r->ns.p[i] <= '9';
    TEST_COUNT_WORK((long long)r->ns.n);
    bool article = r->ns.n == 1 && r->ns.p[0] == '0' && !r->redirect;
    FormatStats *st = r->writer->stats;   /* why a page is not kept, counted */
    if (r->too_large) {
        st->pages_too_large++;
        r->text.n = 0, article = false;
    } else if (!numeric_ns) st->pages_bad_namespace++;
    else if (!article && !r->redirect) st->pages_other_namespace++;
    else if (r->redirect) st->pages_redirect++;
    if (article && r->text.n) {
        /* expat hands over valid UTF-8 only; sanitizing is cheap insurance */
        size_t n = utf8_sanitize(r->text.p, r->text.n, &r->clean, &r->clean_cap,
                                 &r->writer->stats->invalid_utf8_bytes);
        TEST_COUNT_WORK((long long)r->text.n);
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

/* expat before 2.6 (Debian 12 has 2.5.0) starts an unfinished token -- a tag, a comment,
 * an attribute value -- from its beginning again on every XML_Parse call: a token spanning
 * many 1 MiB chunks was scanned once per chunk, so a 64 MiB comment took 2 s and a 1 GiB
 * one hours. While a token is unfinished, input is held back until as many new bytes wait
 * as the token already has: each re-scan is then paid for by as many new bytes, and the
 * reading stays linear. expat receives the same bytes in the same order, in fewer calls. */
typedef struct {
    XML_Parser parser;
    char *held;            /* bytes not yet given to expat */
    size_t n_held, cap;
    long long fed;         /* bytes given to expat */
} XmlFeed;

/* Most bytes held back at once: XML_Parse takes an int length. */
#define XML_FEED_MAX_HELD (1u << 30)

static void xml_feed_init(XmlFeed *f, XML_Parser parser) {
    memset(f, 0, sizeof *f);
    f->parser = parser;
}

static void xml_feed_free(XmlFeed *f) { free(f->held); }

/* Gives data[0..n) to expat, now or with later input (final: the document ends here).
 * Returns XML_Parse's status (a held chunk is XML_STATUS_OK until it is parsed). */
static enum XML_Status xml_feed(XmlFeed *f, const char *data, size_t n, bool final) {
    /* Outside a handler expat reports the position just past its last parse event: what
     * lies beyond is the unfinished token it will scan again. */
    long long parsed = XML_GetCurrentByteIndex(f->parser);
    size_t unfinished = (size_t)(f->fed - (parsed > 0 ? parsed : 0));
    size_t waiting = f->n_held + n;
    if (!final && waiting < unfinished && waiting < XML_FEED_MAX_HELD) {
        ARRAY_RESERVE(f->held, f->cap, waiting, 1 << 20);
        if (n) memcpy(f->held + f->n_held, data, n);
        f->n_held = waiting;
        TEST_COUNT_WORK((long long)n);
        return XML_STATUS_OK;
    }
    if (f->n_held) {  /* the held bytes and these, in one call */
        ARRAY_RESERVE(f->held, f->cap, waiting, 1 << 20);
        if (n) memcpy(f->held + f->n_held, data, n);  /* the final call has no data */
        TEST_COUNT_WORK((long long)n);
        data = f->held;
        n = waiting;
        f->n_held = 0;
    }
    TEST_COUNT_WORK((long long)(unfinished + n) + 1);  /* what expat scans */
    f->fed += (long long)n;
    return XML_Parse(f->parser, data, (int)n, final);
}

static void source_close(Source *s) {
    int bzerr;
    if (s->bz) BZ2_bzReadClose(&bzerr, s->bz);
    if (s->fp) fclose(s->fp);
}

/* Decompression runs in its own thread, a few chunks ahead of parsing and cleaning (the
 * two take about as long), through a small ring of buffers. */
enum { CHUNK = 1 << 20, N_CHUNKS = 4 };

typedef struct {
    Source *src;
    const char *path;
    char *data[N_CHUNKS];
    long len[N_CHUNKS];   /* bytes in the chunk; 0 = end of input; -1 = read error */
    int head, count;
    bool stop;            /* the consumer gave up */
    BertError err;
    pthread_mutex_t mu;
    pthread_cond_t changed;
} ChunkRing;

static void *produce_chunks(void *arg) {
    ChunkRing *r = arg;
    for (int slot = 0;; slot = (slot + 1) % N_CHUNKS) {
        pthread_mutex_lock(&r->mu);
        while (r->count == N_CHUNKS && !r->stop) pthread_cond_wait(&r->changed, &r->mu);
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop) return NULL;
        long n = source_read(r->src, r->data[slot], CHUNK, r->path, &r->err);
        pthread_mutex_lock(&r->mu);
        r->len[slot] = n;
        r->count++;
        pthread_cond_broadcast(&r->changed);
        pthread_mutex_unlock(&r->mu);
        if (n <= 0) return NULL;
    }
}

/* Waits for the next chunk; returns its slot. */
static int next_chunk(ChunkRing *r) {
    pthread_mutex_lock(&r->mu);
    while (r->count == 0) pthread_cond_wait(&r->changed, &r->mu);
    int slot = r->head;
    pthread_mutex_unlock(&r->mu);
    return slot;
}

static void release_chunk(ChunkRing *r, bool stop) {
    pthread_mutex_lock(&r->mu);
    r->head = (r->head + 1) % N_CHUNKS;
    r->count--;
    r->stop |= stop;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
}

static int parse_dump(Source *src, XmlFeed *feed, FormatStats *st, const char *dump, BertError *err) {
    XML_Parser parser = feed->parser;
    ChunkRing ring;
    memset(&ring, 0, sizeof ring);
    ring.src = src;
    ring.path = dump;
    for (int i = 0; i < N_CHUNKS; i++) ring.data[i] = xmalloc(CHUNK);
    pthread_mutex_init(&ring.mu, NULL);
    pthread_cond_init(&ring.changed, NULL);
    pthread_t producer;
    if (pthread_create(&producer, NULL, produce_chunks, &ring) != 0) die("cannot start a thread");
    int rc = 0;
    for (;;) {
        int slot = next_chunk(&ring);
        long n = ring.len[slot];
        if (n < 0) {
            rc = bert_fail(err, "%s", ring.err.msg);
            release_chunk(&ring, true);
            break;
        }
        st->input_bytes += n;
        if (xml_feed(feed, ring.data[slot], (size_t)n, n == 0) == XML_STATUS_ERROR) {
            enum XML_Error code = XML_GetErrorCode(parser);
            bool truncated = n == 0 && (code == XML_ERROR_NO_ELEMENTS || code == XML_ERROR_UNCLOSED_TOKEN ||
                                        code == XML_ERROR_PARTIAL_CHAR || code == XML_ERROR_UNCLOSED_CDATA_SECTION);
            rc = bert_fail(err, "'%s': %s XML at line %lu: %s", dump, truncated ? "truncated" : "malformed",
                           (unsigned long)XML_GetCurrentLineNumber(parser), XML_ErrorString(code));
            release_chunk(&ring, true);
            break;
        }
        release_chunk(&ring, n == 0);
        if (n == 0) break;
    }
    pthread_join(producer, NULL);
    pthread_mutex_destroy(&ring.mu);
    pthread_cond_destroy(&ring.changed);
    for (int i = 0; i < N_CHUNKS; i++) free(ring.data[i]);
    return rc;
}

/* An expat parser that hands each article of the dump to w. */
static XML_Parser wiki_parser_new(WikiReader *r, DocWriter *w, double max_page_mb) {
    memset(r, 0, sizeof *r);
    r->writer = w;
    r->max_text = max_page_mb > 0 ? (size_t)(max_page_mb * 1048576.0) : SIZE_MAX;
    XML_Parser parser = XML_ParserCreate("UTF-8");
    XML_SetUserData(parser, r);
    XML_SetElementHandler(parser, on_start, on_end);
    XML_SetCharacterDataHandler(parser, on_text);
    return parser;
}

static void wiki_parser_free(XML_Parser parser, WikiReader *r) {
    XML_ParserFree(parser);
    free(r->title.p);
    free(r->ns.p);
    free(r->text.p);
    free(r->clean);
}

/* Streams one dump's articles into w. */
static int format_dump_into(DocWriter *w, const char *dump, double max_page_mb, BertError *err) {
    Source src;
    if (source_open(&src, dump, err) != 0) {
        source_close(&src);
        return -1;
    }
    WikiReader r;
    XmlFeed feed;
    xml_feed_init(&feed, wiki_parser_new(&r, w, max_page_mb));
    int rc = parse_dump(&src, &feed, w->stats, dump, err);
    wiki_parser_free(feed.parser, &r);
    xml_feed_free(&feed);
    source_close(&src);
    return rc;
}

/* Streams the articles of bytes [start, end) of a multi-stream dump into w. Ranges after
 * the first lack the <mediawiki> opening and ranges before the last its closing: they
 * are supplied, so each range parses as a document of whole pages. */
static int format_range_into(DocWriter *w, const char *dump, long long start, long long end,
                             bool first, bool last, double max_page_mb, BertError *err) {
    Bz2Range *range = bz2_range_open(dump, start, end, err);
    if (!range) return -1;
    WikiReader r;
    XmlFeed feed;
    xml_feed_init(&feed, wiki_parser_new(&r, w, max_page_mb));
    char *buf = xmalloc(CHUNK);
    int rc = first ? 0 : (xml_feed(&feed, "<mediawiki>", 11, false) == XML_STATUS_ERROR ? -1 : 0);
    for (long n; rc == 0 && (n = bz2_range_read(range, buf, CHUNK, err)) != 0;) {
        if (n < 0) rc = -1;
        else if (xml_feed(&feed, buf, (size_t)n, false) == XML_STATUS_ERROR) rc = bert_fail(err, "XML error in a range");
        else w->stats->input_bytes += n;
    }
    if (rc == 0 && !last && xml_feed(&feed, "</mediawiki>", 12, false) == XML_STATUS_ERROR) rc = -1;
    if (rc == 0 && xml_feed(&feed, NULL, 0, true) == XML_STATUS_ERROR) rc = bert_fail(err, "XML error at a range end");
    free(buf);
    wiki_parser_free(feed.parser, &r);
    xml_feed_free(&feed);
    bz2_range_close(range);
    return rc;
}

/* Appends file src to fp and deletes it. */
static int append_and_remove(FILE *fp, const char *src, BertError *err) {
    FILE *in = fopen(src, "rb");
    if (!in) return bert_fail(err, "cannot reopen '%s'", src);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, fp);
    int bad = ferror(in);
    fclose(in);
    unlink(src);
    return bad ? bert_fail(err, "error reading '%s'", src) : 0;
}

/* Work split over threads: job k writes "<out>.part<k>"; the parts are then joined in
 * order into out (or, if any failed, deleted). */
typedef struct {
    const char *dump;
    long long start, end; /* a byte range of one dump, or end < 0: the whole dump */
    bool first, last;
    char path[4200];
    double max_page_mb;
    FormatStats stats;
    int rc;
    BertError err;
} PartJob;

static void run_part(PartJob *j) {
    DocWriter w;
    j->rc = doc_writer_open_scratch(&w, j->path, &j->stats, &j->err);
    if (j->rc != 0) return;
    j->rc = j->end < 0 ? format_dump_into(&w, j->dump, j->max_page_mb, &j->err)
                       : format_range_into(&w, j->dump, j->start, j->end, j->first, j->last, j->max_page_mb, &j->err);
    if (j->rc == 0) j->rc = doc_writer_commit(&w, &j->err);
    else doc_writer_abort(&w);
}

/* Runs the jobs in parallel; returns the index of the first failed job, or -1. */
static int run_parts(PartJob *jobs, int n, const char *out, const FormatOptions *opt) {
    int threads = opt->n_threads > 0 ? opt->n_threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int k = 0; k < n; k++) {
        snprintf(jobs[k].path, sizeof jobs[k].path, "%s.part%d", out, k);
        run_part(&jobs[k]);
        if (jobs[k].rc == 0 && opt->progress && jobs[k].end < 0) {
#pragma omp critical(format_progress)
            fprintf(stderr, "format wikipedia: %s: %lld documents\n", jobs[k].dump, jobs[k].stats.documents_written);
        }
    }
    for (int k = 0; k < n; k++)
        if (jobs[k].rc != 0) return k;
    return -1;
}

static int join_parts(PartJob *jobs, int n, const char *out, FormatStats *st, BertError *err) {
    AtomicFile af;
    int rc = atomic_open(&af, out, err);
    for (int k = 0; k < n; k++) {
        if (rc == 0) rc = append_and_remove(af.fp, jobs[k].path, err);
        else unlink(jobs[k].path);
        st->documents_written += jobs[k].stats.documents_written;
        st->documents_skipped += jobs[k].stats.documents_skipped;
        st->input_bytes += jobs[k].stats.input_bytes;
        st->output_bytes += jobs[k].stats.output_bytes;
        st->invalid_utf8_bytes += jobs[k].stats.invalid_utf8_bytes;
        st->pages_redirect += jobs[k].stats.pages_redirect;
        st->pages_other_namespace += jobs[k].stats.pages_other_namespace;
        st->pages_bad_namespace += jobs[k].stats.pages_bad_namespace;
        st->pages_too_large += jobs[k].stats.pages_too_large;
    }
    if (rc == 0) return atomic_commit(&af, err);
    if (af.fp) atomic_abort(&af);
    return rc;
}

static void remove_parts(PartJob *jobs, int n) {
    for (int k = 0; k < n; k++)
        if (jobs[k].rc == 0) unlink(jobs[k].path);
}

/* One multi-stream .bz2 dump decompressed and formatted by all threads, a range of whole
 * streams each. Returns 1 when the dump does not lend itself to it (one stream, one
 * thread, or stream boundaries inside pages): the caller then reads it serially. */
static int format_streams_parallel(const char *dump, const char *out, const FormatOptions *opt,
                                   FormatStats *st, BertError *err) {
    int threads = opt->n_threads > 0 ? opt->n_threads : omp_get_max_threads(), n_streams;
    long long *offsets, size;
    Source probe;
    bool is_bz2 = source_open(&probe, dump, err) == 0 && probe.is_bz2;
    source_close(&probe);
    if (threads < 2 || !is_bz2 || bz2_find_streams(dump, &offsets, &n_streams, &size, err) != 0) return 1;
    if (n_streams < 2 || offsets[0] != 0) {
        free(offsets);
        return 1;
    }
    int n_jobs = n_streams < 4 * threads ? n_streams : 4 * threads, made = 0;
    PartJob *jobs = xcalloc((size_t)n_jobs, sizeof *jobs);
    for (int k = 0, s = 0; k < n_jobs && s < n_streams; k++) { /* ~equal compressed bytes */
        long long target = size * (k + 1) / n_jobs;
        int e = s + 1;
        while (e < n_streams && offsets[e] < target) e++;
        jobs[made] = (PartJob){.dump = dump, .max_page_mb = opt->max_page_mb, .start = offsets[s], .end = e < n_streams ? offsets[e] : size,
                               .first = s == 0, .last = e == n_streams};
        made++;
        s = e;
    }
    free(offsets);
    int rc;
    if (made < 2) { /* one range: the serial reader overlaps decompression better */
        rc = 1;
    } else if (run_parts(jobs, made, out, opt) >= 0) { /* e.g. a stream boundary inside a page */
        remove_parts(jobs, made);
        rc = 1;
    } else {
        rc = join_parts(jobs, made, out, st, err);
        st->parallel_ranges = made;
    }
    free(jobs);
    return rc;
}

int format_wikipedia_dumps(const char *const *dumps, int n_dumps, const char *out,
                           const FormatOptions *opt_in, FormatStats *stats, BertError *err) {
    FormatOptions opt = opt_in ? *opt_in : format_default_options();
    FormatStats st;
    memset(&st, 0, sizeof st);
    double t0 = now_seconds();
    if (n_dumps < 1) return bert_fail(err, "no Wikipedia dump given");
    int rc = 1;
    if (n_dumps > 1) { /* parts in parallel, one dump each */
        PartJob *jobs = xcalloc((size_t)n_dumps, sizeof *jobs);
        for (int k = 0; k < n_dumps; k++) jobs[k] = (PartJob){.dump = dumps[k], .end = -1, .max_page_mb = opt.max_page_mb};
        int bad = run_parts(jobs, n_dumps, out, &opt);
        if (bad >= 0) {
            remove_parts(jobs, n_dumps);
            rc = bert_fail(err, "%s", jobs[bad].err.msg);
        } else {
            rc = join_parts(jobs, n_dumps, out, &st, err);
        }
        free(jobs);
    } else {
        rc = format_streams_parallel(dumps[0], out, &opt, &st, err);
    }
    if (rc == 1) { /* one dump, read as one stream of bytes */
        memset(&st, 0, sizeof st);
        DocWriter w;
        if (doc_writer_open(&w, out, &st, opt.progress, "wikipedia", err) != 0) return -1;
        rc = format_dump_into(&w, dumps[0], opt.max_page_mb, err);
        if (rc == 0) rc = doc_writer_commit(&w, err);
        else doc_writer_abort(&w);
    }
    st.seconds = now_seconds() - t0;
    if (stats) *stats = st;
    return rc;
}

int format_wikipedia(const char *dump, const char *out, const FormatOptions *opt,
                     FormatStats *stats, BertError *err) {
    return format_wikipedia_dumps(&dump, 1, out, opt, stats, err);
}
