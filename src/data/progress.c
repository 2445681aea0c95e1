/* Progress reporting for `bert create_pretraining_data` and `bert prepare`. */
#include "data/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

void progress_init(Progress *p, const char *label, double total_bytes, bool quiet) {
    *p = (Progress){.label = label, .total_bytes = total_bytes, .quiet = quiet,
                    .tty = isatty(2) == 1, .start = now_seconds()};
    p->last_print = p->start;
}

static void print_line(Progress *p, double now) {
    double elapsed = now - p->start, rate = elapsed > 0 ? p->bytes / elapsed : 0;
    char eta[48] = "";
    if (p->total_bytes > 0 && rate > 0 && p->bytes <= p->total_bytes)
        snprintf(eta, sizeof eta, ", ETA %.0f s", (p->total_bytes - p->bytes) / rate);
    char of[48] = "";
    if (p->total_bytes > 0) snprintf(of, sizeof of, " of %.1f", p->total_bytes / 1e6);
    fprintf(stderr, "%s%s: %.1f%s MB, %zu documents, %.1f MB/s%s%s", p->tty ? "\r" : "",
            p->label, p->bytes / 1e6, of, p->documents, rate / 1e6, eta, p->tty ? "   " : "\n");
    fflush(stderr);
    p->printed = true;
    p->last_print = now;
}

void progress_update(Progress *p, double bytes, size_t documents) {
    if (p->quiet) return;
#pragma omp critical(bert_progress)
    {
        p->bytes = bytes;
        p->documents = documents;
        double now = now_seconds();
        if (now - p->last_print >= (p->tty ? 0.5 : 10.0)) print_line(p, now);
    }
}

void progress_done(Progress *p) {
    if (p->quiet || !p->printed || !p->tty) return;
    fputc('\n', stderr);
}

void progress_read_callback(void *ctx, const ReadStats *stats) {
    progress_update(ctx, (double)stats->bytes, stats->documents);
}

double input_bytes_of(const char *patterns) {
    char **files;
    int n;
    BertError err;
    if (expand_input_patterns(patterns, &files, &n, &err) != 0) return 0;
    double total = 0;
    for (int k = 0; k < n; k++) {
        struct stat sb;
        if (stat(files[k], &sb) == 0) total += (double)sb.st_size;
        free(files[k]);
    }
    free(files);
    return total;
}
