/* Training logs for people and for tools.
 *  - people: one line per --log_freq steps on stdout; on a terminal a progress line on stderr
 *    redrawn in place (\r) between them, which a file or pipe never gets;
 *  - tools: NVIDIA's DLLogger JSON lines (dllogger's JSONStreamBackend format, read for it:
 *    `DLLL {"timestamp": "<unix s>", "datetime": "<local time>", "elapsedtime": "<s>",
 *    "type": "LOG", "step": ..., "data": {...}}`), step "PARAMETER" for settings, [epoch,
 *    step] for training records, [] for the final summary; what NVIDIA's log tools and
 *    `bert plot` read. A resumed run appends to the same file; every line is flushed. */
#ifndef BERT_TRAIN_LOGGER_H
#define BERT_TRAIN_LOGGER_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "core/common.h"

typedef struct Logger Logger;

/* json_path may be NULL (no JSON log); append keeps what a previous run wrote. Nothing is
 * written, created or truncated here: the file is opened at the first record (after the run's
 * setup), and a new log replaces an old one (written to a temporary, renamed) only once its
 * first record is written. Refused here: a folder, an unwritable place, and an existing file
 * that is not empty and not a DLLogger log (an input named by mistake: issue 35, D3). A device
 * or FIFO is written through. */
int logger_open(Logger **out, const char *json_path, bool append, bool progress_bar, BertError *err);
void logger_close(Logger *l);
/* The first write to the JSON log that failed (then the log stopped; the failure was also
 * noted with note_write_error, so `bert` exits non-zero), or NULL. */
const char *logger_error(const Logger *l);
/* No lines for people from now on (the ranks other than 0 of a data-parallel run). */
void logger_silence(Logger *l);

/* JSON records; each takes ownership of `data` (an object). */
void logger_parameters(Logger *l, cJSON *data);               /* step "PARAMETER" */
void logger_step(Logger *l, long epoch, long step, cJSON *data);  /* step [epoch, step] */
void logger_summary(Logger *l, cJSON *data);                  /* step [] */

/* A line for people on stdout (the progress line, if shown, is cleared first). */
void logger_print(Logger *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The progress line (terminals only, at most ~4 redraws a second). */
void logger_progress(Logger *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The progress line of a count: "predicting: 40/408 sequences, ETA 3s", the time left from
 * the rate since `start` (now_seconds()). l may be NULL (nothing shown). */
void logger_count_progress(Logger *l, const char *what, long done, long total, const char *unit, double start);

/* "1h02m", "3m05s", "12s": durations for people. */
void format_duration(double seconds, char *out, int n);

#endif
