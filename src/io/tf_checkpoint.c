/* TensorBundle reader: the .index SSTable (footer -> index block -> data blocks -> entries)
 * is mapped and walked once at open, every entry checked and kept; the data files are only
 * stat'ed then (existence, size) and read with pread by tf_checkpoint_read. Layout as
 * TensorFlow writes it: tensorflow/core/lib/io/{format,block,table_builder}.cc,
 * tensorflow/core/util/tensor_bundle/tensor_bundle.cc and tensor_bundle.proto. */
#include "io/tf_checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FOOTER_BYTES 48          /* two BlockHandles padded to 40 bytes, then the magic */
#define TRAILER_BYTES 5          /* after each block: compression type, masked crc32c */
#define TABLE_MAGIC 0xdb4775248b80fb57ull

typedef unsigned long long ull;

/* CRC-32C (Castagnoli). ISA-L's crc32_iscsi neither inverts the initial value nor the
 * result, so the standard CRC is ~crc32_iscsi(.., ~0); its length is an int, hence chunks. */
static uint32_t crc32c(const void *data, size_t n) {
    const unsigned char *p = data;
    unsigned int c = 0xFFFFFFFFu;
    while (n > 0) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        c = crc32_iscsi((unsigned char *)p, chunk, c);
        p += chunk, n -= (size_t)chunk;
    }
    return ~c;
}

/* LevelDB and TensorFlow store CRCs "masked" (rotated and offset), so that the CRC of a
 * string holding CRCs is not degenerate: masked = rotr15(crc) + 0xa282ead8. */
static uint32_t crc_unmask(uint32_t masked) {
    uint32_t r = masked - 0xa282ead8u;
    return (r >> 17) | (r << 15);
}

static uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A byte range being decoded; every read checks it against end. */
typedef struct {
    const uint8_t *p, *end;
} Cursor;

/* A base-128 varint of at most 64 bits: 0, or -1 when it runs past the end or is longer. */
static int get_varint(Cursor *c, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) return -1;
        uint8_t b = *c->p++;
        if (shift == 63 && b > 1) return -1;
        x |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) { *v = x; return 0; }
    }
    return -1;
}

/* ---- protobuf: the few fields of BundleHeaderProto and BundleEntryProto ---- */

typedef struct {
    uint32_t field;
    int wire;          /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
    uint64_t v;        /* wire types 0, 1, 5 */
    Cursor sub;        /* wire type 2 */
} PbField;

/* The next field of a message: 1, 0 at its end, -1 when malformed. */
static int pb_next(Cursor *c, PbField *f) {
    if (c->p >= c->end) return 0;
    uint64_t tag, len;
    if (get_varint(c, &tag) != 0 || tag >> 3 == 0 || tag >> 3 > UINT32_MAX) return -1;
    f->field = (uint32_t)(tag >> 3), f->wire = (int)(tag & 7);
    size_t left = (size_t)(c->end - c->p);
    switch (f->wire) {
    case 0: return get_varint(c, &f->v) == 0 ? 1 : -1;
    case 1:
        if (left < 8) return -1;
        f->v = load32(c->p) | (uint64_t)load32(c->p + 4) << 32, c->p += 8;
        return 1;
    case 5:
        if (left < 4) return -1;
        f->v = load32(c->p), c->p += 4;
        return 1;
    case 2:
        if (get_varint(c, &len) != 0 || len > (uint64_t)(c->end - c->p)) return -1;
        f->sub.p = c->p, f->sub.end = c->p + len, c->p += len;
        return 1;
    default: return -1;   /* groups (3, 4) and reserved types: never in these messages */
    }
}

/* A varint field holding an int32 or int64 that must be >= 0 and <= max. */
static int pb_nonneg(const PbField *f, uint64_t max, uint64_t *out) {
    if (f->wire != 0 || (int64_t)f->v < 0 || f->v > max) return -1;
    *out = f->v;
    return 0;
}

/* ---- the bundle's two messages ---- */

/* TensorFlow's DataType enum (types.proto) -> ours; -1: a type we leave out. */
static int map_dtype(uint64_t dt, StDtype *out) {
    switch (dt) {
    case 1: *out = ST_F32; return 0;   /* DT_FLOAT */
    case 2: *out = ST_F64; return 0;   /* DT_DOUBLE */
    case 3: *out = ST_I32; return 0;   /* DT_INT32 */
    case 4: *out = ST_U8; return 0;    /* DT_UINT8 */
    case 5: *out = ST_I16; return 0;   /* DT_INT16 */
    case 6: *out = ST_I8; return 0;    /* DT_INT8 */
    case 9: *out = ST_I64; return 0;   /* DT_INT64 */
    case 10: *out = ST_BOOL; return 0; /* DT_BOOL */
    case 14: *out = ST_BF16; return 0; /* DT_BFLOAT16 */
    case 19: *out = ST_F16; return 0;  /* DT_HALF */
    default: return -1;                /* strings, resources, variants, complex, quantized, unsigned */
    }
}

typedef struct {
    uint64_t dtype, shard, offset, size;
    uint32_t crc;
    int ndim, has_slices;
    int64_t shape[ST_MAX_DIMS];
} Entry;

/* The shape message (TensorShapeProto): dims appended to e->shape. 0, or -1 with why. */
static int parse_shape(Cursor c, Entry *e, const char **why) {
    PbField f, g;
    int r;
    while ((r = pb_next(&c, &f)) == 1) {
        if (f.field == 3 && f.wire == 0 && f.v) return *why = "unknown rank", -1;
        if (f.field != 2) continue;
        if (f.wire != 2) return *why = "malformed shape", -1;
        if (e->ndim == ST_MAX_DIMS) return *why = "too many dimensions", -1;
        uint64_t size = 0;
        while ((r = pb_next(&f.sub, &g)) == 1)
            if (g.field == 1 && (g.wire != 0 || (int64_t)g.v < 0)) return *why = "negative or malformed dimension", -1;
            else if (g.field == 1) size = g.v;
        if (r < 0) return *why = "malformed dimension", -1;
        e->shape[e->ndim++] = (int64_t)size;
    }
    return r < 0 ? (*why = "malformed shape", -1) : 0;
}

/* A BundleEntryProto. 0, or -1 with why. */
static int parse_entry(Cursor c, Entry *e, const char **why) {
    memset(e, 0, sizeof *e);
    PbField f;
    int r, bad = 0;
    while ((r = pb_next(&c, &f)) == 1) {
        switch (f.field) {
        case 1: bad = pb_nonneg(&f, INT32_MAX, &e->dtype); break;
        case 2:
            if (f.wire != 2) return *why = "malformed shape", -1;
            if (parse_shape(f.sub, e, why) != 0) return -1;
            break;
        case 3: bad = pb_nonneg(&f, INT32_MAX, &e->shard); break;
        case 4: bad = pb_nonneg(&f, INT64_MAX, &e->offset); break;
        case 5: bad = pb_nonneg(&f, INT64_MAX, &e->size); break;
        case 6: bad = f.wire != 5, e->crc = (uint32_t)f.v; break;
        case 7: e->has_slices = 1; break;
        default: break;   /* fields added later: skipped, as protobuf does */
        }
        if (bad) return *why = "malformed or negative field", -1;
    }
    return r < 0 ? (*why = "malformed entry", -1) : 0;
}

/* The BundleHeaderProto under key "": shard count and byte order. */
static int parse_header(Cursor c, int *num_shards, const char *path, BertError *err) {
    PbField f;
    int r;
    uint64_t shards = 0, endian = 0;
    while ((r = pb_next(&c, &f)) == 1) {
        if ((f.field == 1 && pb_nonneg(&f, INT32_MAX, &shards) != 0) || (f.field == 2 && pb_nonneg(&f, 1, &endian) != 0))
            return bert_fail(err, "%s: malformed bundle header", path);
    }
    if (r < 0) return bert_fail(err, "%s: malformed bundle header", path);
    if (endian == 1) return bert_fail(err, "%s: big-endian checkpoint, not supported", path);
    *num_shards = (int)shards;
    return 0;
}

/* ---- the SSTable ---- */

typedef struct {
    TfCheckpoint *ck;
    const char *path;            /* the index file, for messages */
    const uint8_t *file;
    size_t len;
    size_t cap;                  /* of ck->tensors */
    char *prev;                  /* the last tensor key, for the order check */
    size_t prev_len, prev_cap;
    int seen_first;
    uint64_t next_block;         /* data blocks come in file order without overlapping */
    BertError *err;
} Parser;

/* Up to 120 bytes of a key, with control bytes as '?': messages stay one line. */
static const char *printable(const char *key, size_t n, char *out, size_t outn) {
    size_t k = 0;
    for (; k < n && k + 4 < outn && k < 120; k++) out[k] = (unsigned char)key[k] < 0x20 || key[k] == 0x7f ? '?' : key[k];
    if (k < n) out[k++] = '.', out[k++] = '.', out[k++] = '.';
    out[k] = 0;
    return out;
}

typedef struct {
    uint64_t offset, size;
} Handle;

static int get_handle(Cursor *c, Handle *h) {
    return get_varint(c, &h->offset) == 0 && get_varint(c, &h->size) == 0 ? 0 : -1;
}

/* The contents of the block at h, after checking it lies before the footer, its crc32c (over
 * the contents and the type byte) and that it is stored uncompressed. */
static int read_block(Parser *ps, Handle h, const char *what, Cursor *out) {
    const uint64_t limit = ps->len - FOOTER_BYTES;
    if (h.offset > limit || h.size > limit - h.offset || TRAILER_BYTES > limit - h.offset - h.size)
        return bert_fail(ps->err, "%s: %s block [offset %llu, %llu bytes] lies outside the file (truncated?)", ps->path,
                         what, (ull)h.offset, (ull)h.size);
    const uint8_t *b = ps->file + h.offset;
    if (crc32c(b, h.size + 1) != crc_unmask(load32(b + h.size + 1)))
        return bert_fail(ps->err, "%s: %s block at offset %llu: checksum mismatch (corrupted file)", ps->path, what,
                         (ull)h.offset);
    if (b[h.size] != 0)
        return bert_fail(ps->err, "%s: %s block at offset %llu is compressed (type %d): only uncompressed "
                         "checkpoints are supported", ps->path, what, (ull)h.offset, b[h.size]);
    out->p = b, out->end = b + h.size;
    return 0;
}

typedef int (*EntryFn)(Parser *ps, const char *key, size_t key_len, Cursor value);

/* Calls fn on each entry of a block: prefix-compressed keys (shared, non_shared, value
 * length varints, the key's new bytes, the value), then the restart offsets (uint32 each)
 * and their count, which a sequential walk does not need beyond bounding the entries. */
static int for_each_entry(Parser *ps, Cursor blk, const char *what, EntryFn fn) {
    size_t size = (size_t)(blk.end - blk.p);
    if (size < 4 || load32(blk.end - 4) > (size - 4) / 4)
        return bert_fail(ps->err, "%s: bad %s block (restart array)", ps->path, what);
    Cursor c = {blk.p, blk.end - 4 * (1 + (size_t)load32(blk.end - 4))};
    char *key = xmalloc(64);
    size_t key_len = 0, key_cap = 64;
    int rc = 0;
    while (rc == 0 && c.p < c.end) {
        uint64_t shared, non_shared, value_len;
        if (get_varint(&c, &shared) || get_varint(&c, &non_shared) || get_varint(&c, &value_len) ||
            shared > key_len || non_shared > (uint64_t)(c.end - c.p) || value_len > (uint64_t)(c.end - c.p) - non_shared) {
            rc = bert_fail(ps->err, "%s: bad entry in %s block", ps->path, what);
            break;
        }
        ARRAY_RESERVE(key, key_cap, shared + non_shared + 1, 64);   /* bounded by the block's size */
        memcpy(key + shared, c.p, non_shared);
        key_len = shared + non_shared, key[key_len] = 0;
        Cursor value = {c.p + non_shared, c.p + non_shared + value_len};
        c.p = value.end;
        rc = fn(ps, key, key_len, value);
    }
    free(key);
    return rc;
}

/* Keys must rise strictly, as TensorFlow writes them: no tensor twice, and the header ("")
 * first. */
static int check_order(Parser *ps, const char *key, size_t n) {
    if (ps->seen_first) {
        size_t m = n < ps->prev_len ? n : ps->prev_len;
        int c = memcmp(ps->prev, key, m);
        if (c > 0 || (c == 0 && ps->prev_len >= n)) {
            char shown[128];
            return bert_fail(ps->err, "%s: keys out of order or repeated at '%s'", ps->path, printable(key, n, shown, sizeof shown));
        }
    }
    ARRAY_RESERVE(ps->prev, ps->prev_cap, n + 1, 64);
    memcpy(ps->prev, key, n), ps->prev_len = n, ps->seen_first = 1;
    return 0;
}

/* An entry's shape and size agree with its dtype: element count and bytes without overflow. */
static int check_entry_size(Parser *ps, const Entry *e, size_t dsize, const char *name) {
    uint64_t numel = 1, bytes;
    for (int d = 0; d < e->ndim; d++)
        if (__builtin_mul_overflow(numel, (uint64_t)e->shape[d], &numel) || numel > INT64_MAX)
            return bert_fail(ps->err, "%s: tensor '%s': shape's element count overflows", ps->path, name);
    if (__builtin_mul_overflow(numel, (uint64_t)dsize, &bytes) || bytes > INT64_MAX)
        return bert_fail(ps->err, "%s: tensor '%s': shape's byte size overflows", ps->path, name);
    if (bytes != e->size)
        return bert_fail(ps->err, "%s: tensor '%s': entry size %llu bytes does not match its shape and dtype (%llu bytes)",
                         ps->path, name, (ull)e->size, (ull)bytes);
    if (e->shard >= (uint64_t)ps->ck->num_shards)
        return bert_fail(ps->err, "%s: tensor '%s': data shard %llu out of range (the checkpoint has %d)", ps->path, name,
                         (ull)e->shard, ps->ck->num_shards);
    return 0;
}

static int on_entry(Parser *ps, const char *key, size_t n, Cursor value) {
    char name[128];
    printable(key, n, name, sizeof name);
    if (check_order(ps, key, n) != 0) return -1;
    if (n == 0) return parse_header(value, &ps->ck->num_shards, ps->path, ps->err);
    if (ps->ck->num_shards < 0) return bert_fail(ps->err, "%s: no bundle header (first key '%s')", ps->path, name);
    Entry e;
    const char *why = "";
    if (parse_entry(value, &e, &why) != 0) return bert_fail(ps->err, "%s: tensor '%s': %s", ps->path, name, why);
    if (e.has_slices) return bert_fail(ps->err, "%s: partitioned variable %s not supported", ps->path, name);
    StDtype dt;
    /* Left out: dtypes we cannot hold, and keys with NUL bytes (the binary keys of a
     * partitioned variable's slices, whose variable itself is refused above). */
    if (map_dtype(e.dtype, &dt) != 0 || memchr(key, 0, n)) return 0;
    if (check_entry_size(ps, &e, st_dtype_size(dt), name) != 0) return -1;
    TfCheckpoint *ck = ps->ck;
    if (ck->n == INT_MAX) return bert_fail(ps->err, "%s: too many tensors", ps->path);
    ARRAY_RESERVE(ck->tensors, ps->cap, (size_t)ck->n + 1, 64);
    TfTensor *t = &ck->tensors[ck->n++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(key), t->dtype = dt, t->ndim = e.ndim;
    memcpy(t->shape, e.shape, sizeof e.shape);
    t->shard = (int)e.shard, t->offset = e.offset, t->size = e.size, t->crc32c = crc_unmask(e.crc);
    return 0;
}

/* An index block entry: separator key -> the handle of a data block. */
static int on_index_entry(Parser *ps, const char *key, size_t n, Cursor value) {
    Handle h;
    Cursor blk;
    if (get_handle(&value, &h) != 0) return bert_fail(ps->err, "%s: bad block handle in the index block", ps->path);
    if (h.offset < ps->next_block)
        return bert_fail(ps->err, "%s: data block at offset %llu overlaps the one before it", ps->path, (ull)h.offset);
    if (read_block(ps, h, "data", &blk) != 0) return -1;
    ps->next_block = h.offset + h.size + TRAILER_BYTES;
    return for_each_entry(ps, blk, "data", on_entry);
}

static char *data_path(const TfCheckpoint *ck, int shard) {
    size_t n = strlen(ck->prefix) + 64;
    char *p = xmalloc(n);
    snprintf(p, n, "%s.data-%05d-of-%05d", ck->prefix, shard, ck->num_shards);
    return p;
}

/* Each data file a tensor lies in exists and holds the tensor's byte range. The shards seen
 * are remembered (id, size) so each is stat'ed once. */
static int check_shards(TfCheckpoint *ck, BertError *err) {
    int *ids = xmalloc(sizeof *ids * (size_t)(ck->n ? ck->n : 1)), n_ids = 0, rc = 0;
    uint64_t *sizes = xmalloc(sizeof *sizes * (size_t)(ck->n ? ck->n : 1));
    for (int i = 0; i < ck->n && rc == 0; i++) {
        const TfTensor *t = &ck->tensors[i];
        char *path = data_path(ck, t->shard);
        int k = 0;
        while (k < n_ids && ids[k] != t->shard) k++;
        if (k == n_ids) {
            struct stat sb;
            if (stat(path, &sb) != 0)
                rc = bert_fail(err, "%s: missing data shard %s (%s)", ck->index_path, path, strerror(errno));
            else if (!S_ISREG(sb.st_mode))
                rc = bert_fail(err, "%s: data shard %s is not a regular file", ck->index_path, path);
            else
                ids[n_ids] = t->shard, sizes[n_ids++] = (uint64_t)sb.st_size;
        }
        if (rc == 0 && (t->offset > sizes[k] || t->size > sizes[k] - t->offset))
            rc = bert_fail(err, "%s: tensor '%s' [offset %llu, %llu bytes] runs past the end of %s (%llu bytes; truncated?)",
                           ck->index_path, t->name, (ull)t->offset, (ull)t->size, path, (ull)sizes[k]);
        free(path);
    }
    free(ids), free(sizes);
    return rc;
}

/* The footer's magic and the index block, walked with every data block it names. */
static int parse_table(Parser *ps) {
    const uint8_t *footer = ps->file + ps->len - FOOTER_BYTES;
    if ((load32(footer + 40) | (uint64_t)load32(footer + 44) << 32) != TABLE_MAGIC)
        return bert_fail(ps->err, "%s: bad magic number: not a TensorFlow checkpoint index (or truncated)", ps->path);
    Cursor c = {footer, footer + 40};
    Handle meta, index;
    Cursor blk;
    if (get_handle(&c, &meta) != 0 || get_handle(&c, &index) != 0)
        return bert_fail(ps->err, "%s: bad block handle in the footer", ps->path);
    if (read_block(ps, index, "index", &blk) != 0 || for_each_entry(ps, blk, "index", on_index_entry) != 0) return -1;
    if (ps->ck->num_shards < 0) return bert_fail(ps->err, "%s: no bundle header (empty index)", ps->path);
    return 0;
}

/* Maps the index file and parses it into ck->tensors. */
static int load_index(TfCheckpoint *ck, BertError *err) {
    int fd = open(ck->index_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bert_fail(err, "cannot open %s: %s", ck->index_path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return bert_fail(err, "%s: not a regular file", ck->index_path);
    }
    if ((uint64_t)sb.st_size < FOOTER_BYTES) {
        close(fd);
        return bert_fail(err, "%s: %lld bytes, too short for a checkpoint index (truncated?)", ck->index_path,
                         (long long)sb.st_size);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return bert_fail(err, "cannot map %s: %s", ck->index_path, strerror(errno));
    Parser ps = {.ck = ck, .path = ck->index_path, .file = map, .len = (size_t)sb.st_size, .err = err};
    int rc = parse_table(&ps);
    free(ps.prev);
    munmap(map, (size_t)sb.st_size);
    return rc;
}

int tf_checkpoint_open(TfCheckpoint *ck, const char *path, BertError *err) {
    memset(ck, 0, sizeof *ck);
    ck->num_shards = -1;   /* until the header is read */
    size_t n = strlen(path);
    ck->prefix = xstrdup(path);
    if (n >= 6 && !strcmp(path + n - 6, ".index")) ck->prefix[n - 6] = 0;
    ck->index_path = xmalloc(strlen(ck->prefix) + 7);
    sprintf(ck->index_path, "%s.index", ck->prefix);
    if (load_index(ck, err) != 0 || check_shards(ck, err) != 0) {
        tf_checkpoint_close(ck);
        return -1;
    }
    return 0;
}

/* pread until n bytes or the end of the file: the count read. */
static size_t pread_full(int fd, void *dst, size_t n, uint64_t offset) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)dst + got, n - got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

int tf_checkpoint_read(const TfCheckpoint *ck, int i, void *dst, size_t dst_bytes, BertError *err) {
    if (i < 0 || i >= ck->n) return bert_fail(err, "%s: no tensor %d (the checkpoint lists %d)", ck->index_path, i, ck->n);
    const TfTensor *t = &ck->tensors[i];
    if (dst_bytes != t->size)
        return bert_fail(err, "%s: tensor '%s' is %llu bytes, not %zu", ck->index_path, t->name, (ull)t->size, dst_bytes);
    char *path = data_path(ck, t->shard);
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    if (fd < 0) {
        rc = bert_fail(err, "cannot open data shard %s: %s", path, strerror(errno));
    } else {
        if (pread_full(fd, dst, dst_bytes, t->offset) != dst_bytes)
            rc = bert_fail(err, "%s: tensor '%s': short read (file truncated?)", path, t->name);
        else if (crc32c(dst, dst_bytes) != t->crc32c)
            rc = bert_fail(err, "%s: tensor '%s': crc32c mismatch (corrupted data)", path, t->name);
        close(fd);
    }
    free(path);
    return rc;
}

void tf_checkpoint_close(TfCheckpoint *ck) {
    for (int i = 0; i < ck->n; i++) free(ck->tensors[i].name);
    free(ck->tensors), free(ck->prefix), free(ck->index_path);
    memset(ck, 0, sizeof *ck);
}

int tf_checkpoint_sniff(const char *path) {
    size_t n = strlen(path);
    struct stat sb;
    if (n < 6 || strcmp(path + n - 6, ".index")) {
        char *index = xmalloc(n + 7);
        sprintf(index, "%s.index", path);
        int found = stat(index, &sb) == 0 && S_ISREG(sb.st_mode);
        free(index);
        return found;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint8_t magic[8];
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= FOOTER_BYTES &&
             pread_full(fd, magic, 8, (uint64_t)sb.st_size - 8) == 8 &&
             (load32(magic) | (uint64_t)load32(magic + 4) << 32) == TABLE_MAGIC;
    close(fd);
    return ok;
}
