/* `bert tokenize`'s engine (text/tokenize_stream.h). */
#include "text/tokenize_stream.h"

#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char *data;
    size_t len, cap;
} OutBuf;

static void out_append(OutBuf *o, const char *s, size_t n) {
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2 + 256;
        o->data = xrealloc(o->data, o->cap);
    }
    memcpy(o->data + o->len, s, n);
    o->len += n;
}

typedef struct {
    const Tokenizer *tok;
    bool ids, offsets, basic;
} Format;

/* State of the output line being written: base is the byte offset of the current
 * chunk within its line (for --offsets); any says whether a token was written yet. */
typedef struct {
    OutBuf *out;
    const Format *fmt;
    long base;
    bool any;
} LineOut;

/* Decimal digits of v >= 0 at the end of buf[0..24); returns where they start. */
static char *format_decimal(long v, char *buf_end) {
    char *p = buf_end;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

static void write_item(LineOut *lo, const char *text, size_t len, long start, long end) {
    if (lo->any) out_append(lo->out, " ", 1);
    lo->any = true;
    out_append(lo->out, text, len);
    if (lo->fmt->offsets) {
        char num[64];
        int k = snprintf(num, sizeof num, "@%ld:%ld", lo->base + start, lo->base + end);
        out_append(lo->out, num, (size_t)k);
    }
}

static void write_basic_word(const char *word, size_t len, int start, int end, void *ctx) {
    write_item(ctx, word, len, start, end);
}

/* Tokenizes one line or chunk of a line into lo->out; returns invalid UTF-8 count. */
static long format_chunk(LineOut *lo, const char *text, size_t len, TokenList *work) {
    const Format *f = lo->fmt;
    if (f->basic) {
        basic_tokenize(f->tok, text, len, work, write_basic_word, lo);
        return work->invalid_utf8;
    }
    tokenize(f->tok, text, len, work);
    const Vocab *v = tokenizer_vocab(f->tok);
    for (int i = 0; i < work->n; i++) {
        const Token *t = &work->tokens[i];
        if (f->ids) {  /* snprintf would cost more than tokenizing */
            char num[24], *digits = format_decimal(t->id, num + sizeof num);
            write_item(lo, digits, (size_t)(num + sizeof num - digits), t->start, t->end);
        } else {
            const char *s = vocab_token(v, t->id);
            write_item(lo, s, strlen(s), t->start, t->end);
        }
    }
    return work->invalid_utf8;
}

/* Where a too-long line may be cut without changing the reference's tokens: after the
 * last ASCII whitespace, else after the last ASCII punctuation that no Final_Sigma
 * context can see through (not ' . :), else (no such byte at all) at the last
 * UTF-8 boundary, which is reported. */
static size_t safe_cut(const char *b, size_t n, bool *forced) {
    *forced = false;
    for (size_t i = n; i > 0; i--)
        if (b[i - 1] == ' ' || b[i - 1] == '\t' || b[i - 1] == '\r') return i;
    for (size_t i = n; i > 0; i--) {
        unsigned char c = (unsigned char)b[i - 1];
        bool punct = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
        if (punct && c != '\'' && c != '.' && c != ':') return i;
    }
    *forced = true;
    size_t i = n;
    while (i > 1 && ((unsigned char)b[i - 1] & 0xC0) == 0x80) i--;  /* back to a lead byte */
    return i > 1 ? i - 1 : n;
}

typedef struct {
    const char *text;
    size_t len;
    int thread;
    size_t out_off, out_len;
} Line;

/* Per-thread working memory, each on its own cache lines: the counters that every
 * token updates (TokenList.n, OutBuf.len) must not share a line with a neighbour's. */
typedef struct {
    _Alignas(64) TokenList work;
    OutBuf out;
} PerThread;

static PerThread *per_thread_new(int threads) {
    size_t size = (size_t)threads * sizeof(PerThread);
    PerThread *p = aligned_alloc(64, size);
    if (!p) die("out of memory allocating %zu bytes", size);
    memset(p, 0, size);
    return p;
}

static void per_thread_free(PerThread *p, int threads) {
    for (int t = 0; t < threads; t++) {
        token_list_free(&p[t].work);
        free(p[t].out.data);
    }
    free(p);
}

/* Tokenizes complete lines in parallel, then writes them in order. */
static long run_batch(const Format *f, Line *lines, int n, PerThread *pt, int threads, FILE *out) {
    long invalid = 0;
    for (int t = 0; t < threads; t++) pt[t].out.len = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16) reduction(+ : invalid)
    for (int i = 0; i < n; i++) {
        PerThread *me = &pt[omp_get_thread_num()];
        LineOut lo = {&me->out, f, 0, false};
        lines[i].thread = omp_get_thread_num();
        lines[i].out_off = me->out.len;
        invalid += format_chunk(&lo, lines[i].text, lines[i].len, &me->work);
        out_append(&me->out, "\n", 1);
        lines[i].out_len = me->out.len - lines[i].out_off;
    }
    for (int i = 0; i < n; i++) fwrite(pt[lines[i].thread].out.data + lines[i].out_off, 1, lines[i].out_len, out);
    return invalid;
}

/* Splits buf[0..filled) into complete lines; returns how many bytes they span. */
static size_t collect_lines(const char *buf, size_t filled, Line **lines, int *n, int *cap) {
    size_t pos = 0;
    *n = 0;
    for (const char *nl; (nl = memchr(buf + pos, '\n', filled - pos)) != NULL; pos = (size_t)(nl - buf) + 1) {
        ARRAY_RESERVE(*lines, *cap, (size_t)*n + 1, 64);
        (*lines)[(*n)++] = (Line){buf + pos, (size_t)(nl - buf) - pos, 0, 0, 0};
    }
    return pos;
}

void tokenize_stream(const Tokenizer *tok, const TokenizeStreamOptions *o, int in_fd, FILE *out,
                     TokenizeStreamStats *st) {
    const Format fmt = {tok, o->ids, o->offsets, o->basic}, *f = &fmt;
    const size_t block = o->block_bytes;
    const int threads = o->threads;
    *st = (TokenizeStreamStats){0, 0, false};
    char *buf = xmalloc(block);
    size_t filled = 0;
    int cap = 1024, n = 0;
    Line *lines = xmalloc((size_t)cap * sizeof *lines);
    PerThread *pt = per_thread_new(threads);
    OutBuf single = {0};
    LineOut partial = {&single, f, 0, false};  /* a long line written chunk by chunk */
    bool in_partial = false;
    for (bool eof = false; !eof;) {
        /* read(), not fread(): from a pipe it returns what has arrived, so a caller that
         * writes one line and waits for its tokens gets them (output is flushed below). */
        ssize_t got = read(in_fd, buf + filled, block - filled);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) st->read_error = true;
        eof = got <= 0;
        if (got > 0) filled += (size_t)got;
        size_t used = collect_lines(buf, filled, &lines, &n, &cap);
        int first = 0;
        if (in_partial && n > 0) {  /* the rest of a long line */
            single.len = 0;
            st->invalid_utf8 += format_chunk(&partial, lines[0].text, lines[0].len, &pt[0].work);
            out_append(&single, "\n", 1);
            if (single.len) fwrite(single.data, 1, single.len, out);   /* data is NULL until something is appended */
            in_partial = false;
            first = 1;
        }
        st->invalid_utf8 += run_batch(f, lines + first, n - first, pt, threads, out);
        fflush(out);
        memmove(buf, buf + used, filled - used);
        filled -= used;
        if (filled == 0 || (!eof && filled < block)) continue;
        /* Either end of input without a final newline, or a block-long line fragment. */
        bool forced = false;
        size_t cut = eof ? filled : safe_cut(buf, filled, &forced);
        st->forced_cuts += forced;
        if (!in_partial) partial = (LineOut){&single, f, 0, false};
        single.len = 0;
        st->invalid_utf8 += format_chunk(&partial, buf, cut, &pt[0].work);
        if (eof) out_append(&single, "\n", 1);
        if (single.len) fwrite(single.data, 1, single.len, out);   /* data is NULL until something is appended */
        partial.base += (long)cut;
        in_partial = !eof;
        memmove(buf, buf + cut, filled - cut);
        filled -= cut;
    }
    if (in_partial) fputc('\n', out);  /* a long last line that ended on a block edge */
    per_thread_free(pt, threads);
    free(single.data);
    free(lines);
    free(buf);
}

void tokenize_bench(const Tokenizer *tok, int in_fd, int threads, int repeat, TokenizeBenchResult *r) {
    char *data = NULL;
    size_t len = 0, cap = 0;
    for (ssize_t got;; len += (size_t)got) {
        if (len + (1 << 20) > cap) data = xrealloc(data, cap = (len + (1 << 20)) * 2);
        got = read(in_fd, data + len, cap - len);
        if (got < 0 && errno == EINTR) got = 0;
        else if (got <= 0) break;
    }
    int ncap = 1024, n = 0;
    Line *lines = xmalloc((size_t)ncap * sizeof *lines);
    collect_lines(data, len, &lines, &n, &ncap);
    PerThread *pt = per_thread_new(threads);
    long tokens = 0;
    double best = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep <= repeat; rep++) {  /* round 0 warms caches and scratch memory */
        long count = 0;
        double t0 = now_seconds(), c0 = cpu_seconds();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64) reduction(+ : count)
        for (int i = 0; i < n; i++) count += tokenize(tok, lines[i].text, lines[i].len, &pt[omp_get_thread_num()].work);
        double dt = now_seconds() - t0, dc = cpu_seconds() - c0;
        if (rep > 0 && dt < best) best = dt;
        if (rep > 0 && dc < best_cpu) best_cpu = dc;
        tokens = count;
    }
    *r = (TokenizeBenchResult){.lines = n, .bytes = len, .tokens = tokens, .seconds = best, .cpu_seconds = best_cpu};
    per_thread_free(pt, threads);
    free(lines);
    free(data);
}
