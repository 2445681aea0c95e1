/* NumPy's .npy format, version 1.0, for a float32 matrix (what `bert embed --output`
 * writes): the magic, a header dict padded so the data starts 64-aligned, then the values
 * little-endian, row-major. */
#ifndef BERT_IO_NPY_H
#define BERT_IO_NPY_H

#include "core/common.h"

/* x: n rows of h floats, written to path atomically. */
int npy_write_f32(const char *path, const float *x, int n, int h, BertError *err);

#endif
