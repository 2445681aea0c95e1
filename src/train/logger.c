#include "train/logger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct Logger {
    FILE *json;
    /* The JSON log is opened at its first record, never before: a run that fails before it
     * starts (a flag, a model, a shard) leaves an existing log as it was. A new log (not
     * appended to) is written into a temporary beside it and renamed over the old one once
     * its first record is written, so a full disk leaves the old log, not an empty file. */
    char json_path[4096];     /* as given, for messages */
    char json_target[4096];   /* where it goes (a link's target) */
    bool json_wanted, json_append, json_direct;   /* direct: a device or FIFO, written through */
    char json_error[4096 + 1024 + 64];   /* the first failed write; the log stops there */
    bool progress;        /* stderr is a terminal and the bar is wanted */
    bool progress_shown;
    bool silent;          /* logger_silence */
    double start, last_progress;
};

void logger_silence(Logger *l) { l->silent = true, l->progress = false; }

/* An existing regular file that is not empty and does not start as a DLLogger log ("DLLL "):
 * not ours to replace or append to (issue 35, D3: --json-summary naming a shard emptied it). */
static int check_existing_log(const char *path, const char *target, BertError *err) {
    struct stat st;
    if (stat(target, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return 0;
    char head[5] = {0};
    const int fd = open(target, O_RDONLY | O_CLOEXEC);
    const ssize_t got = fd >= 0 ? read(fd, head, sizeof head) : -1;
    if (fd >= 0) close(fd);
    if (got == (ssize_t)sizeof head && memcmp(head, "DLLL ", sizeof head) == 0) return 0;
    return bert_fail(err, "--json-summary %s: the file exists and is not a DLLogger log (it does not start with "
                          "\"DLLL \"): not overwritten (is it an input?); name a new file", path);
}

int logger_open(Logger **out, const char *json_path, bool append, bool progress_bar, BertError *err) {
    *out = NULL;
    Logger *l = xcalloc(1, sizeof *l);
    if (json_path) {
        const int kind = resolve_output(json_path, l->json_target, sizeof l->json_target, err);
        if (kind < 0 || (kind == 0 && check_existing_log(json_path, l->json_target, err) != 0)) {
            free(l);
            return -1;
        }
        /* writable now (or its folder): a typo fails before the run, not at its first record */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", l->json_target);
        char *slash = strrchr(dir, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == dir) dir[1] = '\0';
        else *slash = '\0';
        if (access(l->json_target, F_OK) == 0 ? access(l->json_target, W_OK) != 0 : access(dir, W_OK | X_OK) != 0) {
            const int e = errno;
            free(l);
            return bert_fail(err, "cannot write the JSON log %s: %s", json_path, strerror(e));
        }
        snprintf(l->json_path, sizeof l->json_path, "%s", json_path);
        l->json_wanted = true, l->json_append = append, l->json_direct = kind == 1;
    }
    l->progress = progress_bar && isatty(STDERR_FILENO);
    l->start = now_seconds();
    *out = l;
    return 0;
}

/* The first failed write: said once, the log closed, and the command's exit status made
 * non-zero (note_write_error) even where the caller does not ask logger_error. */
static void json_failed(Logger *l, const char *why) {
    if (!l->json_error[0]) {
        snprintf(l->json_error, sizeof l->json_error, "cannot write the JSON log %s: %s", l->json_path, why);
        note_write_error("%s", l->json_error);
        fprintf(stderr, "bert: warning: %s; the log stops here\n", l->json_error);
    }
    if (l->json) fclose(l->json);
    l->json = NULL;
}

void logger_close(Logger *l) {
    if (!l) return;
    if (l->progress_shown) fputs("\r\033[K", stderr);
    if (l->json && fclose(l->json) != 0) l->json = NULL, json_failed(l, strerror(errno));
    free(l);
}

const char *logger_error(const Logger *l) { return l && l->json_error[0] ? l->json_error : NULL; }

/* Writes `line` as the log's first record: a new log goes to a temporary renamed over the
 * old one only once the record is in it. */
static void json_first_line(Logger *l, const char *line) {
    char tmp[4096 + 320] = "";
    const bool replace = !l->json_append && !l->json_direct;
    if (replace) atomic_tmp_name(l->json_target, tmp, sizeof tmp);
    l->json = fopen(replace ? tmp : l->json_target, l->json_append ? "a" : "w");
    if (!l->json) {
        const int e = errno;
        if (replace) atomic_tmp_discard(tmp);
        json_failed(l, strerror(e));
        return;
    }
    errno = 0;
    /* a new log is synced before it is renamed over the old one, as every output is */
    if (fputs(line, l->json) < 0 || fflush(l->json) != 0 || (replace && fsync(fileno(l->json)) != 0 && errno != EINVAL)) {
        const int e = errno ? errno : EIO;
        if (replace) atomic_tmp_discard(tmp);   /* the old log stays as it was */
        json_failed(l, strerror(e));
        return;
    }
    BertError err;
    if (replace && atomic_publish(tmp, l->json_target, &err) != 0) json_failed(l, err.msg);
}

/* One DLLL line: the fields in dllogger's order, the step and data as given. */
static void write_record(Logger *l, cJSON *step, cJSON *data) {
    if (!l->json_wanted || l->json_error[0]) {
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
    cJSON_Delete(rec);
    if (!text) return;
    const size_t n = strlen(text);
    char *line = xmalloc(n + 7);
    memcpy(line, "DLLL ", 5), memcpy(line + 5, text, n), memcpy(line + 5 + n, "\n", 2);
    free(text);
    if (!l->json) {
        json_first_line(l, line);
    } else {
        errno = 0;
        if (fputs(line, l->json) < 0 || fflush(l->json) != 0) json_failed(l, strerror(errno ? errno : EIO));
    }
    free(line);
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

void logger_count_progress(Logger *l, const char *what, long done, long total, const char *unit, double start) {
    if (!l || !l->progress) return;
    char eta[32];
    const double elapsed = now_seconds() - start;
    format_duration(done > 0 ? elapsed / done * (double)(total - done) : -1, eta, sizeof eta);
    logger_progress(l, "%s: %ld/%ld %s, ETA %s", what, done, total, unit, eta);
}

void format_duration(double s, char *out, int n) {
    if (!(s >= 0) || s > 1e9) snprintf(out, (size_t)n, "?");
    else if (s >= 3600) snprintf(out, (size_t)n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60) snprintf(out, (size_t)n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(out, (size_t)n, "%.0fs", s);
}
