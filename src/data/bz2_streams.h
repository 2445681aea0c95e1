/* Multi-stream bzip2 files (Wikipedia's multistream dumps, pbzip2 output, dumps joined
 * from parts): finding where each stream starts, and decompressing a byte range of whole
 * streams on its own -- what lets several threads decompress one file. */
#ifndef BERT_BZ2_STREAMS_H
#define BERT_BZ2_STREAMS_H

#include "core/common.h"

/* Offsets of the streams in path: every byte-aligned "BZh[1-9]" followed by a block
 * header magic (within a stream blocks are bit-aligned, so these are stream starts).
 * *offsets is malloc'd; offsets[0] == 0 for a bzip2 file. */
int bz2_find_streams(const char *path, long long **offsets, int *n, long long *file_size,
                     BertError *err);

typedef struct Bz2Range Bz2Range;

/* Decompresses the streams in bytes [start, end) of path, one after another. */
Bz2Range *bz2_range_open(const char *path, long long start, long long end, BertError *err);
/* Up to cap bytes of output; 0 at the end of the range; -1 (err set) on corrupt or
 * truncated data. */
long bz2_range_read(Bz2Range *r, char *buf, size_t cap, BertError *err);
void bz2_range_close(Bz2Range *r);

#endif
