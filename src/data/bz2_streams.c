/* See bz2_streams.h. */
#include <bzlib.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "data/bz2_streams.h"

/* "BZh" + level + the 48-bit block header magic 0x314159265359. */
static bool stream_start_at(const unsigned char *p) {
    return p[0] == 'B' && p[1] == 'Z' && p[2] == 'h' && p[3] >= '1' && p[3] <= '9' &&
           !memcmp(p + 4, "\x31\x41\x59\x26\x53\x59", 6);
}

int bz2_find_streams(const char *path, long long **offsets, int *n, long long *file_size,
                     BertError *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return bert_fail(err, "cannot open '%s': %s", path, strerror(errno));
    enum { BLOCK = 1 << 20, SIG = 10 };
    unsigned char *buf = xmalloc(BLOCK + SIG);
    size_t keep = 0, cap = 64;
    long long base = 0; /* file offset of buf[0] */
    *offsets = xmalloc(cap * sizeof **offsets);
    *n = 0;
    for (;;) {
        size_t got = fread(buf + keep, 1, BLOCK, fp), have = keep + got;
        for (size_t i = 0; i + SIG <= have; i++) {
            if (buf[i] != 'B' || !stream_start_at(buf + i)) continue;
            ARRAY_RESERVE(*offsets, cap, (size_t)*n + 1, 64);
            (*offsets)[(*n)++] = base + (long long)i;
        }
        if (got == 0) {
            *file_size = base + (long long)have;
            break;
        }
        keep = have < SIG - 1 ? have : SIG - 1; /* a signature may straddle two reads */
        memmove(buf, buf + have - keep, keep);
        base += (long long)(have - keep);
    }
    int bad = ferror(fp);
    fclose(fp);
    free(buf);
    if (bad) return bert_fail(err, "error reading '%s'", path);
    return 0;
}

struct Bz2Range {
    FILE *fp;
    long long left;     /* compressed bytes of the range not yet read */
    bz_stream zs;
    bool in_stream;     /* zs is initialised */
    char in[1 << 16];
};

Bz2Range *bz2_range_open(const char *path, long long start, long long end, BertError *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp || fseeko(fp, start, SEEK_SET) != 0) {
        if (fp) fclose(fp);
        bert_fail(err, "cannot read '%s' at byte %lld", path, start);
        return NULL;
    }
    Bz2Range *r = xcalloc(1, sizeof *r);
    r->fp = fp;
    r->left = end - start;
    return r;
}

long bz2_range_read(Bz2Range *r, char *buf, size_t cap, BertError *err) {
    r->zs.next_out = buf;
    r->zs.avail_out = (unsigned)cap;
    while (r->zs.avail_out == cap) {
        if (r->zs.avail_in == 0 && r->left > 0) {
            size_t want = r->left < (long long)sizeof r->in ? (size_t)r->left : sizeof r->in;
            size_t got = fread(r->in, 1, want, r->fp);
            if (got == 0) return bert_fail(err, "bzip2 range: unexpected end of file");
            r->left -= (long long)got;
            r->zs.next_in = r->in;
            r->zs.avail_in = (unsigned)got;
        }
        if (!r->in_stream) {
            if (r->zs.avail_in == 0) return 0; /* the range ends between streams */
            if (BZ2_bzDecompressInit(&r->zs, 0, 0) != BZ_OK) return bert_fail(err, "bzip2: out of memory");
            r->in_stream = true;
        }
        int rc = BZ2_bzDecompress(&r->zs);
        if (rc == BZ_STREAM_END) {
            BZ2_bzDecompressEnd(&r->zs);
            r->in_stream = false;
        } else if (rc != BZ_OK) {
            return bert_fail(err, "corrupt bzip2 data");
        } else if (r->zs.avail_in == 0 && r->left == 0 && r->zs.avail_out == cap) {
            return bert_fail(err, "truncated bzip2 file (ends inside a compressed block)");
        }
    }
    return (long)(cap - r->zs.avail_out);
}

void bz2_range_close(Bz2Range *r) {
    if (!r) return;
    if (r->in_stream) BZ2_bzDecompressEnd(&r->zs);
    fclose(r->fp);
    free(r);
}
