/* The formatters' shared output (see doc_writer.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/utf8.h"
#include "data/doc_writer.h"

int doc_writer_open(DocWriter *w, const char *path, FormatStats *stats, bool progress,
                    const char *what, BertError *err) {
    memset(w, 0, sizeof *w);
    w->stats = stats;
    w->progress = progress;
    w->what = what;
    w->t0 = w->last_report = now_seconds();
    if (atomic_open(&w->af, path, err) != 0) return -1;
    w->fp = w->af.fp;
    w->atomic = true;
    setvbuf(w->fp, NULL, _IOFBF, 1 << 20);
    return 0;
}

int doc_writer_open_scratch(DocWriter *w, const char *path, FormatStats *stats, BertError *err) {
    memset(w, 0, sizeof *w);
    w->stats = stats;
    w->what = "part";
    w->fp = fopen(path, "wb");
    if (!w->fp) return bert_fail(err, "cannot write '%s': %s", path, strerror(errno));
    snprintf(w->af.path, sizeof w->af.path, "%s", path);
    setvbuf(w->fp, NULL, _IOFBF, 1 << 20);
    return 0;
}

void doc_writer_line(DocWriter *w, const char *text, size_t len) {
    if (len == 0) return;
    fwrite(text, 1, len, w->fp);
    fputc(' ', w->fp);
    w->stats->output_bytes += (long long)len + 1;
    w->in_document = true;
}

bool doc_writer_end_document(DocWriter *w) {
    bool had_text = w->in_document;
    if (had_text) {
        fputs("\n\n", w->fp);
        w->stats->output_bytes += 2;
        w->stats->documents_written++;
    } else {
        w->stats->documents_skipped++;
    }
    w->in_document = false;
    double now = now_seconds();
    if (w->progress && now - w->last_report >= 1) {
        w->last_report = now;
        fprintf(stderr, "\rformat %s: %lld documents, %.1f MB read, %.1f MB/s   ", w->what,
                w->stats->documents_written, w->stats->input_bytes / 1e6,
                w->stats->input_bytes / 1e6 / (now - w->t0));
    }
    return had_text;
}

int doc_writer_commit(DocWriter *w, BertError *err) {
    if (w->progress) fprintf(stderr, "\n");
    if (w->atomic) return atomic_commit(&w->af, err);
    int bad = ferror(w->fp);
    if (fclose(w->fp) != 0) bad = 1;
    w->fp = NULL;
    if (bad) {
        unlink(w->af.path);
        return bert_fail(err, "error writing '%s'", w->af.path);
    }
    return 0;
}

void doc_writer_abort(DocWriter *w) {
    if (w->progress) fprintf(stderr, "\n");
    if (w->atomic) {
        atomic_abort(&w->af);
    } else if (w->fp) {
        fclose(w->fp);
        unlink(w->af.path);
    }
    w->fp = NULL;
}

size_t utf8_strip(const char *text, size_t len, size_t *start) {
    size_t i = 0;
    while (i < len) {
        int n;
        int32_t cp = utf8_decode((const unsigned char *)text + i, len - i, &n);
        if (cp < 0 || !py_isspace(cp)) break;
        i += (size_t)n;
    }
    *start = i;
    return utf8_rstrip_len(text + i, len - i);
}
