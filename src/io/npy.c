/* NumPy's .npy format (io/npy.h). */
#include "io/npy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Every header is this long (magic and length included): room for a count of 19 digits, and
 * the data starts 64-aligned, so the count can be rewritten in place. */
enum { HEADER_BYTES = 128 };

static int write_header(FILE *fp, long n, int h) {
    char dict[HEADER_BYTES];
    const int body = HEADER_BYTES - 10;   /* after the 8-byte magic and the 2-byte length */
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%ld, %d), }", n, h);
    while (len < body - 1) dict[len++] = ' ';
    dict[len++] = '\n';
    const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const unsigned char hl[2] = {(unsigned char)(body & 0xff), (unsigned char)(body >> 8)};
    return fwrite(magic, 1, 8, fp) == 8 && fwrite(hl, 1, 2, fp) == 2 && fwrite(dict, 1, (size_t)body, fp) == (size_t)body
               ? 0 : -1;
}

int npy_writer_open(NpyWriter *w, const char *path, int h, BertError *err) {
    memset(w, 0, sizeof *w);
    w->h = h;
    if (atomic_open(&w->af, path, err) != 0) return -1;
    if (write_header(w->af.fp, 0, h) != 0) {
        npy_writer_abort(w);
        return bert_fail(err, "%s: cannot write: %s", path, strerror(errno));
    }
    return 0;
}

int npy_writer_append(NpyWriter *w, const float *x, int n, BertError *err) {
    const size_t count = (size_t)n * (size_t)w->h;
    if (count && fwrite(x, sizeof(float), count, w->af.fp) != count)
        return bert_fail(err, "cannot write the .npy file: %s", strerror(errno));
    w->rows += n;
    return 0;
}

int npy_writer_commit(NpyWriter *w, BertError *err) {
    if (fseek(w->af.fp, 0, SEEK_SET) != 0 || write_header(w->af.fp, w->rows, w->h) != 0) {
        npy_writer_abort(w);
        return bert_fail(err, "cannot write the .npy header: %s", strerror(errno));
    }
    return atomic_commit(&w->af, err);
}

void npy_writer_abort(NpyWriter *w) { atomic_abort(&w->af); }

int npy_write_f32(const char *path, const float *x, int n, int h, BertError *err) {
    NpyWriter w;
    if (npy_writer_open(&w, path, h, err) != 0) return -1;
    if (npy_writer_append(&w, x, n, err) != 0) {
        npy_writer_abort(&w);
        return -1;
    }
    return npy_writer_commit(&w, err);
}
