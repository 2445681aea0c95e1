/* The data bert.c ships (data/vocab, data/corpus) found from the program's own location,
 * never from the current directory, so `bert prepare` works when run from anywhere:
 *   1. $BERT_DATA_DIR, when set;
 *   2. <dir of the executable>/data            (the source tree: ./bert at its root);
 *   3. <dir of the executable>/../share/bert   (after `make install PREFIX=...`).
 * The first that holds the file wins. */
#ifndef BERT_CORE_BUNDLED_H
#define BERT_CORE_BUNDLED_H

#include <stddef.h>

/* Writes the path of bundled file `relative` (e.g. "vocab/bert-base-uncased-vocab.txt") to
 * out; returns 0 when found, -1 when not (out then holds the source-tree candidate, for the
 * error message). */
int bundled_data_path(const char *relative, char *out, size_t n);

#endif
