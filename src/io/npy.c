/* NumPy's .npy format (io/npy.h). */
#include "io/npy.h"

#include <stdio.h>

int npy_write_f32(const char *path, const float *x, int n, int h, BertError *err) {
    char header[128];
    int len = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", n, h);
    while ((10 + len + 1) % 64) header[len++] = ' ';   /* padded so the data starts 64-aligned */
    header[len++] = '\n';
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) return -1;
    const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const unsigned char hl[2] = {(unsigned char)(len & 0xff), (unsigned char)(len >> 8)};
    fwrite(magic, 1, 8, af.fp), fwrite(hl, 1, 2, af.fp), fwrite(header, 1, (size_t)len, af.fp);
    fwrite(x, sizeof(float), (size_t)n * h, af.fp);
    return atomic_commit(&af, err);
}
