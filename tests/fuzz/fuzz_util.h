/* Shared by the libFuzzer targets: the input as a temporary file, for parsers that read files. */
#ifndef BERT_FUZZ_UTIL_H
#define BERT_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Writes data to a per-process temporary file and returns its path (static storage). */
static inline const char *fuzz_input_file(const uint8_t *data, size_t size, const char *suffix) {
    static char path[128];
    snprintf(path, sizeof path, "/tmp/bert-fuzz-%ld%s", (long)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    return path;
}

#endif
