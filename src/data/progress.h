/* Progress lines on stderr for long data-preparation runs: bytes done of a total,
 * documents, MB/s and ETA. On a terminal the line is redrawn about twice a second;
 * otherwise (logs) a line is printed every 10 seconds. Thread-safe: updates from
 * several OpenMP threads are serialised. */
#ifndef BERT_PROGRESS_H
#define BERT_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "data/pretraining.h"

typedef struct {
    const char *label;
    double total_bytes;   /* 0: unknown, no ETA */
    double start, last_print;
    bool quiet, tty, printed;
    double bytes;
    size_t documents;
} Progress;

void progress_init(Progress *p, const char *label, double total_bytes, bool quiet);
/* Records absolute figures (not increments) and prints if a line is due. */
void progress_update(Progress *p, double bytes, size_t documents);
/* Ends a redrawn line so later output starts on a fresh one. */
void progress_done(Progress *p);

/* ReadProgress adapter for create_pretraining_data: ctx is a Progress. */
void progress_read_callback(void *ctx, const ReadStats *stats);

/* Total size in bytes of the files a comma-separated glob list names (0 if none). */
double input_bytes_of(const char *patterns);

#endif
