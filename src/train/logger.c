#include "train/logger.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct Logger {
    FILE *json;
    bool progress;        /* stderr is a terminal and the bar is wanted */
    bool progress_shown;
    bool silent;          /* logger_silence */
    double start, last_progress;
};

void logger_silence(Logger *l) { l->silent = true, l->progress = false; }

int logger_open(Logger **out, const char *json_path, bool append, bool progress_bar, BertError *err) {
    *out = NULL;
    Logger *l = xcalloc(1, sizeof *l);
    if (json_path && !(l->json = fopen(json_path, append ? "a" : "w"))) {
        free(l);
        return bert_fail(err, "cannot write the JSON log %s: %s", json_path, strerror(errno));
    }
    l->progress = progress_bar && isatty(STDERR_FILENO);
    l->start = now_seconds();
    *out = l;
    return 0;
}

void logger_close(Logger *l) {
    if (!l) return;
    if (l->progress_shown) fputs("\r\033[K", stderr);
    if (l->json) fclose(l->json);
    free(l);
}

/* One DLLL line: the fields in dllogger's order, the step and data as given. */
static void write_record(Logger *l, cJSON *step, cJSON *data) {
    if (!l->json) {
        cJSON_Delete(step), cJSON_Delete(data);
        return;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char stamp[64], when[64], elapsed[64], day[32];
    snprintf(stamp, sizeof stamp, "%lld.%06ld", (long long)tv.tv_sec, (long)tv.tv_usec);
    strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(when, sizeof when, "%s.%06ld", day, (long)tv.tv_usec);
    snprintf(elapsed, sizeof elapsed, "%.6f", now_seconds() - l->start);
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "timestamp", stamp);
    cJSON_AddStringToObject(rec, "datetime", when);
    cJSON_AddStringToObject(rec, "elapsedtime", elapsed);
    cJSON_AddStringToObject(rec, "type", "LOG");
    cJSON_AddItemToObject(rec, "step", step);
    cJSON_AddItemToObject(rec, "data", data);
    char *text = cJSON_PrintUnformatted(rec);
    if (text) fprintf(l->json, "DLLL %s\n", text), fflush(l->json);
    free(text);
    cJSON_Delete(rec);
}

void logger_parameters(Logger *l, cJSON *data) { write_record(l, cJSON_CreateString("PARAMETER"), data); }

void logger_step(Logger *l, long epoch, long step, cJSON *data) {
    cJSON *s = cJSON_CreateArray();
    cJSON_AddItemToArray(s, cJSON_CreateNumber((double)epoch));
    cJSON_AddItemToArray(s, cJSON_CreateNumber((double)step));
    write_record(l, s, data);
}

void logger_summary(Logger *l, cJSON *data) { write_record(l, cJSON_CreateArray(), data); }

void logger_print(Logger *l, const char *fmt, ...) {
    if (l->silent) return;
    if (l->progress_shown) fputs("\r\033[K", stderr), l->progress_shown = false;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

void logger_progress(Logger *l, const char *fmt, ...) {
    double now = now_seconds();
    if (!l->progress || now - l->last_progress < 0.25) return;
    l->last_progress = now;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    l->progress_shown = true;
}

void format_duration(double s, char *out, int n) {
    if (!(s >= 0) || s > 1e9) snprintf(out, (size_t)n, "?");
    else if (s >= 3600) snprintf(out, (size_t)n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60) snprintf(out, (size_t)n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(out, (size_t)n, "%.0fs", s);
}
