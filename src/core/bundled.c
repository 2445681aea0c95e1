#include "core/bundled.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int bundled_data_path(const char *relative, char *out, size_t n) {
    const char *env = getenv("BERT_DATA_DIR");
    if (env && *env) {
        snprintf(out, n, "%s/%s", env, relative);
        if (exists(out)) return 0;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        snprintf(out, n, "data/%s", relative);
        return exists(out) ? 0 : -1;
    }
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    /* tests/ binaries live in <tree>/<build>/tests: their tree is two levels up */
    const char *const layouts[] = {"%s/data/%s", "%s/../share/bert/%s", "%s/../../data/%s", "%s/../data/%s"};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        snprintf(out, n, layouts[i], exe, relative);
        if (exists(out)) return 0;
    }
    snprintf(out, n, "%s/data/%s", exe, relative);
    return -1;
}
