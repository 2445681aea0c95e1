/* File helpers the tests share: existence, writing, reading back, comparing, deleting. */
#ifndef BERT_TEST_UTIL_H
#define BERT_TEST_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"

static inline bool file_exists(const char *path) { return access(path, F_OK) == 0; }

/* A folder of this process's own for a test's files (/tmp/<name>.<pid>: two runs of the suite
 * at once never share one), made by test_tmp_begin and removed by the test's remove_tree;
 * test_tmp_path gives a path under it from a ring of buffers, so that several can be used in
 * one expression. */
static char test_tmp_root[96];
static inline const char *test_tmp_begin(const char *name) {
    snprintf(test_tmp_root, sizeof test_tmp_root, "/tmp/%s.%d", name, (int)getpid());
    mkdir(test_tmp_root, 0777);
    return test_tmp_root;
}
static inline const char *test_tmp_path(const char *rest) {
    static char ring[64][512];
    static int next;
    char *p = ring[next++ % 64];
    snprintf(p, sizeof ring[0], "%s%s", test_tmp_root, rest);
    return p;
}

/* The absolute path of the program of the build a test binary belongs to: build/tests/x ->
 * <cwd>/bert, build-asan/tests/x -> <cwd>/build-asan/bert (so sanitized tests drive the
 * sanitized program). */
static inline int test_bert_binary(const char *argv0, char *out, size_t n) {
    char build[256], cwd[256];
    snprintf(build, sizeof build, "%s", argv0);
    char *slash = strstr(build, "/tests/");
    if (slash) *slash = 0;
    if (!getcwd(cwd, sizeof cwd)) return -1;
    const int len = !strcmp(build, "build") || !strcmp(build, "./build") ? snprintf(out, n, "%s/bert", cwd)
                                                                        : snprintf(out, n, "%s/%s/bert", cwd, build);
    return len > 0 && (size_t)len < n ? 0 : -1;
}

static inline void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static inline void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

/* The whole file as a NUL-terminated string (caller frees); "" when it cannot be read. */
static inline char *read_text(const char *path) {
    char *text = NULL;
    BertError err;
    return read_file(path, &text, NULL, &err) == 0 ? text : xstrdup("");
}

/* Both files readable and byte for byte the same. */
static inline bool files_equal(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    BertError err;
    if (read_file(a, &x, &nx, &err) != 0) return false;
    if (read_file(b, &y, &ny, &err) != 0) {
        free(x);
        return false;
    }
    bool same = nx == ny && memcmp(x, y, nx) == 0;
    free(x), free(y);
    return same;
}

/* Deletes a file or a folder with everything below it (symbolic links are not followed). */
static inline void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *sub = malloc(n);
        snprintf(sub, n, "%s/%s", path, e->d_name);
        remove_tree(sub);
        free(sub);
    }
    if (d) closedir(d);
    rmdir(path);
}

#endif
