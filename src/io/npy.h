/* NumPy's .npy format, version 1.0, for a float32 matrix (what `bert embed --output`
 * writes): the magic, a header dict padded so the data starts 64-aligned, then the values
 * little-endian, row-major. */
#ifndef BERT_IO_NPY_H
#define BERT_IO_NPY_H

#include "core/common.h"

/* x: n rows of h floats, written to path atomically. */
int npy_write_f32(const char *path, const float *x, int n, int h, BertError *err);

/* Rows written as they come, when their count is known only at the end (`bert embed` streams
 * its input): the header is written with room for any count and rewritten by commit; the file
 * appears at path only then (atomically). */
typedef struct {
    AtomicFile af;
    int h;
    long rows;
} NpyWriter;

int npy_writer_open(NpyWriter *w, const char *path, int h, BertError *err);
int npy_writer_append(NpyWriter *w, const float *x, int n, BertError *err);
int npy_writer_commit(NpyWriter *w, BertError *err);
void npy_writer_abort(NpyWriter *w);

#endif
