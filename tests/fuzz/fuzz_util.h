/* Shared by the libFuzzer targets: the input as a temporary file, for parsers that read files. */
#ifndef BERT_FUZZ_UTIL_H
#define BERT_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A per-process temporary path ending in suffix, in $TMPDIR (tests/fuzz/run.sh gives each run a
 * folder of its own and removes it afterwards, crashes included), else /tmp. */
static inline void fuzz_temp_path(char *path, size_t size, const char *suffix) {
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/bert-fuzz-%ld%s", dir && *dir ? dir : "/tmp", (long)getpid(), suffix);
}

/* Writes data to a per-process temporary file and returns its path (static storage). */
static inline const char *fuzz_input_file(const uint8_t *data, size_t size, const char *suffix) {
    static char path[512];
    fuzz_temp_path(path, sizeof path, suffix);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    return path;
}

#endif
