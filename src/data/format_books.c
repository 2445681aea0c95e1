/* `bert format books`: a folder of plain-text books -> one book per line, as NVIDIA's
 * BookscorpusTextFormatting.py writes bookscorpus_one_book_per_line.txt: each non-blank
 * line stripped and followed by a space, "\n\n" after each book. Differences, all on
 * purpose: books are read in sorted name order (NVIDIA's glob order is the file
 * system's), invalid UTF-8 bytes become U+FFFD (NVIDIA's script stops with an error), and
 * by default the Project Gutenberg licence header and footer are left out. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/test_hooks.h"
#include "data/doc_writer.h"

/* TEST_COUNT_WORK: steps of the books formatter's loops (bytes read, sanitized, searched for
 * line ends and stripped, marker checks), what the scaling tests count. */

/* Bytes utf8_strip looked at to find that text[0..len) keeps `kept` bytes once stripped:
 * the leading whitespace forwards, the trailing backwards. */
#define STRIP_STEPS(len, kept) ((long long)((len) - (kept)) + 1)

FormatOptions format_default_options(void) {
    FormatOptions o = {.strip_gutenberg = true, .progress = false, .max_page_mb = 32};
    return o;
}

/* A Project Gutenberg marker line: "*** START OF THE PROJECT GUTENBERG EBOOK ... ***"
 * (or END OF; "THIS" instead of "THE", any spacing and case). */
static bool is_gutenberg_marker(const char *line, size_t len, const char *word) {
    size_t i = 0;
    while (i < len && line[i] == '*') i++;
    TEST_COUNT_WORK((long long)i + 1);
    if (i < 3) return false;
    while (i < len && line[i] == ' ') i++;
    size_t wl = strlen(word);
    if (len - i < wl || strncasecmp(line + i, word, wl) != 0) return false;
    for (size_t j = i + wl; j + 9 <= len; j++) {
        TEST_COUNT_WORK(1);
        if (!strncasecmp(line + j, "GUTENBERG", 9)) return true;
    }
    return false;
}

static bool starts_with_ci(const char *line, size_t len, const char *prefix) {
    size_t n = strlen(prefix);
    return len >= n && !strncasecmp(line, prefix, n);
}

/* Byte range [*from, *to) of the book's own text: after the START marker line and before
 * the END marker line, when present -- and before an "End of (the) Project Gutenberg..."
 * line that precedes the END marker. */
static void gutenberg_body(const char *text, size_t len, size_t *from, size_t *to) {
    *from = 0;
    *to = len;
    bool started = false;
    size_t end_note = len; /* start of an "End of Project Gutenberg" line, if seen */
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - text) : len, s, n = utf8_strip(text + i, end - i, &s);
        TEST_COUNT_WORK((long long)(end - i) + STRIP_STEPS(end - i, n));
        const char *line = text + i + s;
        if (!started && is_gutenberg_marker(line, n, "START OF")) {
            *from = nl ? end + 1 : len;
            started = true;
        } else if (is_gutenberg_marker(line, n, "END OF")) {
            *to = end_note < i ? end_note : i;
            return;
        } else if (end_note == len && (starts_with_ci(line, n, "End of the Project Gutenberg") ||
                                       starts_with_ci(line, n, "End of Project Gutenberg"))) {
            end_note = i;
        }
        i = end + 1;
    }
}

/* One file: a book (every line one paragraph of one document), or plain text whose blank
 * lines end documents (blank_line_ends_document: each of its lines then joins the current
 * document, a hard-wrapped line break becoming the space doc_writer_line writes). */
static int format_one_file(DocWriter *w, const char *path, const FormatOptions *opt,
                           bool blank_line_ends_document, BertError *err) {
    char *raw, *text = NULL;
    size_t raw_len, cap = 0;
    if (read_file(path, &raw, &raw_len, err) != 0) return -1;
    w->stats->input_bytes += (long long)raw_len;
    size_t len = utf8_sanitize(raw, raw_len, &text, &cap, &w->stats->invalid_utf8_bytes);
    TEST_COUNT_WORK(2 * (long long)raw_len);  /* read, sanitized */
    free(raw);
    size_t from = 0, to = len;
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) from = 3; /* utf-8-sig */
    if (opt->strip_gutenberg) {
        size_t f, t;
        gutenberg_body(text + from, len - from, &f, &t);
        to = from + t;
        from += f;
    }
    for (size_t i = from; i < to;) {
        const char *nl = memchr(text + i, '\n', to - i);
        size_t end = nl ? (size_t)(nl - text) : to, s, n = utf8_strip(text + i, end - i, &s);
        TEST_COUNT_WORK((long long)(end - i) + STRIP_STEPS(end - i, n) + (long long)n);  /* found, stripped, written */
        if (n == 0 && blank_line_ends_document && w->in_document) doc_writer_end_document(w);
        else doc_writer_line(w, text + i + s, n);
        i = end + 1;
    }
    if (!blank_line_ends_document || w->in_document) doc_writer_end_document(w);
    free(text);
    return 0;
}

static int has_txt_suffix(const char *name) {
    size_t n = strlen(name);
    return n > 4 && !strcmp(name + n - 4, ".txt");
}

static int cmp_names(const void *a, const void *b) {
    TEST_COUNT_WORK(1);
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* An output *.txt in the books folder would be read as a book by the next run (whatever is
 * there now): refused, by the folder's identity rather than its name. */
static int output_would_be_a_book(const char *dir, const char *out, BertError *err) {
    struct stat d, o;
    if (stat(dir, &d) != 0 || !S_ISDIR(d.st_mode) || !has_txt_suffix(out)) return 0;
    const char *slash = strrchr(out, '/');
    char parent[4096];
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - out) + (slash == out) : 1, slash ? out : ".");
    if (stat(parent, &o) != 0 || o.st_dev != d.st_dev || o.st_ino != d.st_ino) return 0;
    return bert_fail(err, "output '%s' is a *.txt in the books folder '%s': the next run would read it as a book; "
                          "write it elsewhere", out, dir);
}

int format_list_books(const char *dir, char ***out, int *n_out, BertError *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0) return bert_fail(err, "cannot read '%s': %s", dir, strerror(errno));
    *n_out = 0;
    *out = NULL;
    if (!S_ISDIR(sb.st_mode)) {
        *out = xmalloc(sizeof **out);
        (*out)[(*n_out)++] = xstrdup(dir);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) return bert_fail(err, "cannot open folder '%s': %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        TEST_COUNT_WORK(1);
        if (e->d_name[0] == '.' || !has_txt_suffix(e->d_name)) continue;
        ARRAY_RESERVE(*out, cap, (size_t)*n_out + 1, 64);
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        (*out)[*n_out] = xmalloc(n);
        snprintf((*out)[(*n_out)++], n, "%s/%s", dir, e->d_name);
        struct stat book;   /* a FIFO or device named *.txt would block or never end the read */
        if (stat((*out)[*n_out - 1], &book) != 0 || !S_ISREG(book.st_mode)) {
            bert_fail(err, "'%s' is not a regular file (a FIFO, device, socket or folder named *.txt): books must be "
                           "files", (*out)[*n_out - 1]);
            closedir(d);
            for (int i = 0; i < *n_out; i++) free((*out)[i]);
            free(*out), *out = NULL, *n_out = 0;
            return -1;
        }
    }
    closedir(d);
    if (*n_out == 0) return bert_fail(err, "no *.txt books in folder '%s'", dir);
    qsort(*out, (size_t)*n_out, sizeof **out, cmp_names);
    return 0;
}

int format_books(const char *dir, const char *out, const FormatOptions *opt_in,
                 FormatStats *stats, BertError *err) {
    FormatOptions opt = opt_in ? *opt_in : format_default_options();
    FormatStats st;
    memset(&st, 0, sizeof st);
    double t0 = now_seconds();
    char **books = NULL;
    int n_books = 0;
    if (output_would_be_a_book(dir, out, err) != 0) return -1;
    if (format_list_books(dir, &books, &n_books, err) != 0) return -1;
    DocWriter w;
    int rc = doc_writer_open(&w, out, &st, opt.progress, "books", err);
    for (int i = 0; i < n_books && rc == 0; i++) rc = format_one_file(&w, books[i], &opt, false, err);
    if (rc == 0) rc = doc_writer_commit(&w, err);
    else if (w.fp) doc_writer_abort(&w);
    for (int i = 0; i < n_books; i++) free(books[i]);
    free(books);
    st.seconds = now_seconds() - t0;
    if (stats) *stats = st;
    return rc;
}

int format_text(const char *path, const char *out, const FormatOptions *opt_in, FormatStats *stats, BertError *err) {
    FormatOptions opt = opt_in ? *opt_in : format_default_options();
    FormatStats st;
    memset(&st, 0, sizeof st);
    double t0 = now_seconds();
    struct stat sb;   /* a folder is --books' job; a FIFO or device would block or never end */
    if (stat(path, &sb) != 0) return bert_fail(err, "cannot read '%s': %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return bert_fail(err, "'%s' is not a plain file%s", path,
                         S_ISDIR(sb.st_mode) ? " (a folder of books: --books)" : "");
    DocWriter w;
    int rc = doc_writer_open(&w, out, &st, opt.progress, "text", err);
    if (rc == 0) rc = format_one_file(&w, path, &opt, true, err);
    if (rc == 0) rc = doc_writer_commit(&w, err);
    else if (w.fp) doc_writer_abort(&w);
    st.seconds = now_seconds() - t0;
    if (stats) *stats = st;
    return rc;
}
