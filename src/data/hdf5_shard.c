/* HDF5 pre-training shards: writer (pre-compressed chunks) and whole-file loader. */
#include "data/hdf5_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <isa-l/igzip_lib.h>

enum { DS_INPUT_IDS, DS_INPUT_MASK, DS_SEGMENT_IDS, DS_MLM_POSITIONS, DS_MLM_IDS, DS_NSP, DS_COUNT };

static const char *const dataset_name[DS_COUNT] = {
    "input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
    "next_sentence_labels"};
static const int dataset_bytes[DS_COUNT] = {4, 1, 1, 4, 4, 1};

/* Deflate level 1 (ISA-L's igzip) with the byte-shuffle filter on the int32 datasets.
 * Measured on a 2.8 MB Gutenberg+Wikipedia shard (35,621 rows at seq 128, one core):
 * igzip level 1 compresses the shard's 33 MB of arrays in 44 ms, libdeflate level 1 in
 * 138 ms, for an 8% larger file (8.4 vs 7.7 MB; h5py's default gzip 4 without shuffle
 * makes 9 MB, 7 times slower). The level recorded in the dataset's gzip filter is only
 * a hint to writers: any inflate reads the stream. */
#define GZIP_LEVEL 1
#define IGZIP_LEVEL 1
#define CHUNK_TARGET_VALUES 65536   /* about 256 KB of input_ids per chunk */

/* One chunk's rows for every dataset, and the scratch to filter and compress them.
 * The writer owns one for sequential appends; parallel writers make one per thread. */
struct Hdf5Chunk {
    size_t rows;
    unsigned char *data[DS_COUNT];
    unsigned char *shuffled;          /* byte planes of a 4-byte dataset's chunk */
    unsigned char *compressed;
    size_t compressed_cap;
    unsigned char *igzip_work;        /* igzip's level buffer (hash tables) */
};

struct Hdf5ShardWriter {
    char path[4096], tmp_path[4096 + 64];
    hid_t file, dataset[DS_COUNT];
    size_t n_instances, rows_appended, rows_stored;
    int seq, pred;
    size_t chunk_rows;
    size_t width[DS_COUNT];           /* values per row */
    Hdf5Chunk *own;                   /* for hdf5_shard_append */
};

Hdf5Chunk *hdf5_chunk_new(const Hdf5ShardWriter *w) {
    Hdf5Chunk *c = xcalloc(1, sizeof *c);
    size_t widest = 0;
    for (int k = 0; k < DS_COUNT; k++) {
        size_t bytes = w->chunk_rows * w->width[k] * (size_t)dataset_bytes[k];
        c->data[k] = xcalloc(bytes, 1);
        if (bytes > widest) widest = bytes;
    }
    c->igzip_work = xmalloc(ISAL_DEF_LVL1_DEFAULT);
    /* Stored blocks bound the output: 5 bytes per 64 KB block, plus the zlib wrapper. */
    c->compressed_cap = widest + widest / 1024 + 1024;
    c->compressed = xmalloc(c->compressed_cap);
    c->shuffled = xmalloc(widest);
    return c;
}

void hdf5_chunk_free(Hdf5Chunk *c) {
    if (!c) return;
    for (int k = 0; k < DS_COUNT; k++) free(c->data[k]);
    free(c->shuffled);
    free(c->compressed);
    free(c->igzip_work);
    free(c);
}

size_t hdf5_shard_chunk_rows(const Hdf5ShardWriter *w) { return w->chunk_rows; }

static void close_handles(Hdf5ShardWriter *w) {
    for (int k = 0; k < DS_COUNT; k++)
        if (w->dataset[k] >= 0) H5Dclose(w->dataset[k]), w->dataset[k] = -1;
    if (w->file >= 0) H5Fclose(w->file), w->file = -1;
}

static void writer_free(Hdf5ShardWriter *w) {
    close_handles(w);
    hdf5_chunk_free(w->own);
    free(w);
}

static int create_dataset(Hdf5ShardWriter *w, int k, BertError *err) {
    int rank = k == DS_NSP ? 1 : 2;
    hsize_t dims[2] = {w->n_instances, w->width[k]};
    /* An empty shard still needs a chunk shape, which may not exceed fixed dimensions. */
    hsize_t maxdims[2] = {w->n_instances ? w->n_instances : H5S_UNLIMITED, w->width[k]};
    hsize_t chunk[2] = {w->chunk_rows, w->width[k]};
    hid_t space = H5Screate_simple(rank, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t type = dataset_bytes[k] == 4 ? H5T_STD_I32LE : H5T_STD_I8LE;
    int rc = -1;
    if (space >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, rank, chunk) >= 0 &&
        (dataset_bytes[k] == 1 || H5Pset_shuffle(dcpl) >= 0) && H5Pset_deflate(dcpl, GZIP_LEVEL) >= 0 &&
        H5Pset_fletcher32(dcpl) >= 0 && H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0) {
        w->dataset[k] = H5Dcreate2(w->file, dataset_name[k], type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        rc = w->dataset[k] >= 0 ? 0 : -1;
    }
    if (space >= 0) H5Sclose(space);
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc == 0 ? 0 : bert_fail(err, "cannot create dataset %s in %s", dataset_name[k], w->tmp_path);
}

/* Before the first HDF5 call of the process: no library shutdown at exit. After a write
 * that failed for lack of space, H5Fclose fails and leaves the file open inside the library,
 * whose exit handler then crashes closing it again (libhdf5 1.10: SIGSEGV in
 * H5F__close_cb); the process has discarded the file by then, and the OS reclaims the rest. */
static void hdf5_no_shutdown_at_exit(void) {
    static int done;
    if (!__atomic_exchange_n(&done, 1, __ATOMIC_SEQ_CST)) H5dont_atexit();
}

int hdf5_shard_create(Hdf5ShardWriter **out, const char *path, size_t n_instances,
                      int max_seq_length, int max_predictions_per_seq, BertError *err) {
    *out = NULL;
    if (strlen(path) >= 4096) return bert_fail(err, "output path too long: %s", path);
    if (max_seq_length < 1 || max_predictions_per_seq < 1)
        return bert_fail(err, "bad shard shape %d x %d", max_seq_length, max_predictions_per_seq);
    hdf5_no_shutdown_at_exit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported through err instead */
    char resolved[4096];
    int kind = resolve_output(path, resolved, sizeof resolved, err);
    if (kind < 0) return -1;
    if (kind == 1)   /* HDF5 seeks and rewrites: a pipe or device cannot hold it */
        return bert_fail(err, "%s is a device, pipe or socket: an HDF5 shard needs a regular file", path);
    Hdf5ShardWriter *w = xcalloc(1, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", resolved);
    atomic_tmp_name(resolved, w->tmp_path, sizeof w->tmp_path);
    w->file = -1;
    for (int k = 0; k < DS_COUNT; k++) w->dataset[k] = -1;
    w->n_instances = n_instances;
    w->seq = max_seq_length, w->pred = max_predictions_per_seq;
    w->width[DS_INPUT_IDS] = w->width[DS_INPUT_MASK] = w->width[DS_SEGMENT_IDS] = (size_t)max_seq_length;
    w->width[DS_MLM_POSITIONS] = w->width[DS_MLM_IDS] = (size_t)max_predictions_per_seq;
    w->width[DS_NSP] = 1;
    size_t rows = CHUNK_TARGET_VALUES / (size_t)max_seq_length;
    if (rows < 1) rows = 1;
    if (n_instances && rows > n_instances) rows = n_instances;
    w->chunk_rows = rows;
    w->own = hdf5_chunk_new(w);
    w->file = H5Fcreate(w->tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) {
        bert_fail(err, "cannot create HDF5 file %s (is the folder writable?)", w->tmp_path);
        atomic_tmp_discard(w->tmp_path);
        writer_free(w);
        return -1;
    }
    for (int k = 0; k < DS_COUNT; k++) {
        if (create_dataset(w, k, err) != 0) {
            hdf5_shard_abort(w);
            return -1;
        }
    }
    *out = w;
    return 0;
}

int hdf5_chunk_add(const Hdf5ShardWriter *w, Hdf5Chunk *c, const Instance *inst, BertError *err) {
    if (c->rows >= w->chunk_rows) return bert_fail(err, "%s: chunk overfilled", w->path);
    if (inst->n_tokens < 0 || inst->n_tokens > w->seq || inst->n_masked < 0 ||
        inst->n_masked > w->pred || inst->n_segment_a < 0 || inst->n_segment_a > inst->n_tokens)
        return bert_fail(err, "%s: instance of %d tokens / %d predictions does not fit %d / %d",
                         w->path, inst->n_tokens, inst->n_masked, w->seq, w->pred);
    size_t r = c->rows, seq = (size_t)w->seq, pred = (size_t)w->pred;
    int32_t *ids = (int32_t *)c->data[DS_INPUT_IDS] + r * seq;
    int8_t *mask = (int8_t *)c->data[DS_INPUT_MASK] + r * seq;
    int8_t *seg = (int8_t *)c->data[DS_SEGMENT_IDS] + r * seq;
    int32_t *pos = (int32_t *)c->data[DS_MLM_POSITIONS] + r * pred;
    int32_t *mids = (int32_t *)c->data[DS_MLM_IDS] + r * pred;
    size_t n = (size_t)inst->n_tokens, m = (size_t)inst->n_masked, a = (size_t)inst->n_segment_a;
    memcpy(ids, inst->input_ids, n * 4);
    memset(ids + n, 0, (seq - n) * 4);
    memset(mask, 1, n);
    memset(mask + n, 0, seq - n);
    memset(seg, 0, seq);
    memset(seg + a, 1, n - a);
    memcpy(pos, inst->masked_positions, m * 4);
    memset(pos + m, 0, (pred - m) * 4);
    memcpy(mids, inst->masked_ids, m * 4);
    memset(mids + m, 0, (pred - m) * 4);
    ((int8_t *)c->data[DS_NSP])[r] = (int8_t)(inst->is_random_next ? 1 : 0);
    c->rows++;
    return 0;
}

/* HDF5's shuffle filter on 4-byte elements: byte b of element i goes to b * n + i.
 * (A fixed element size lets the compiler keep the four planes in registers.) */
static void shuffle_bytes4(const unsigned char *in, unsigned char *out, size_t n) {
    unsigned char *p0 = out, *p1 = out + n, *p2 = out + 2 * n, *p3 = out + 3 * n;
    for (size_t i = 0; i < n; i++) {
        p0[i] = in[4 * i], p1[i] = in[4 * i + 1], p2[i] = in[4 * i + 2], p3[i] = in[4 * i + 3];
    }
}

/* One zlib stream (what HDF5's gzip filter inflates) of in[0..n) into c->compressed;
 * returns its size, 0 on failure. */
static size_t zlib_compress(Hdf5Chunk *c, const unsigned char *in, size_t n) {
    struct isal_zstream z;
    isal_deflate_stateless_init(&z);
    z.level = IGZIP_LEVEL;
    z.level_buf = c->igzip_work;
    z.level_buf_size = ISAL_DEF_LVL1_DEFAULT;
    z.gzip_flag = IGZIP_ZLIB;
    z.end_of_stream = 1;
    z.flush = NO_FLUSH;
    z.next_in = (uint8_t *)in; /* igzip does not write its input */
    z.avail_in = (uint32_t)n;
    z.next_out = c->compressed;
    z.avail_out = (uint32_t)(c->compressed_cap - 4);   /* room for the Fletcher-32 checksum */
    return isal_deflate_stateless(&z) == COMP_OK ? z.total_out : 0;
}

/* HDF5's Fletcher-32 checksum of a filtered chunk (the last filter of the pipeline, stored
 * after the chunk's bytes): two running sums of the data read as big-endian 16-bit words
 * (an odd last byte as the high half of one), folded to 16 bits as they grow. */
static uint32_t fletcher32(const unsigned char *p, size_t len) {
    uint32_t sum1 = 0, sum2 = 0;
    for (size_t words = len / 2; words > 0;) {
        size_t block = words > 360 ? 360 : words;   /* 360 sums cannot overflow 32 bits */
        words -= block;
        for (; block > 0; block--, p += 2) sum1 += (uint32_t)p[0] << 8 | p[1], sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16), sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    if (len % 2) {
        sum1 += (uint32_t)p[0] << 8, sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16), sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16), sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    return sum2 << 16 | sum1;
}

/* Filters one dataset's part of the chunk (shuffle for int32, then deflate in the zlib
 * format HDF5's gzip filter reads) into c->compressed; returns its size, 0 on failure.
 * A partial last chunk is zero-padded, as HDF5 stores edge chunks whole. */
static size_t filter_dataset(const Hdf5ShardWriter *w, Hdf5Chunk *c, int k) {
    size_t size = (size_t)dataset_bytes[k], row_bytes = w->width[k] * size;
    size_t full = w->chunk_rows * row_bytes;
    memset(c->data[k] + c->rows * row_bytes, 0, full - c->rows * row_bytes);
    const unsigned char *data = c->data[k];
    if (size == 4) {
        shuffle_bytes4(c->data[k], c->shuffled, full / size);
        data = c->shuffled;
    }
    size_t n = zlib_compress(c, data, full);
    if (n == 0) return 0;
    const uint32_t sum = fletcher32(c->compressed, n);   /* appended little-endian, as HDF5 stores it */
    for (int b = 0; b < 4; b++) c->compressed[n + (size_t)b] = (unsigned char)(sum >> (8 * b));
    return n + 4;
}

int hdf5_shard_store_chunk(Hdf5ShardWriter *w, Hdf5Chunk *c, size_t chunk_index, BertError *err) {
    if (c->rows == 0) return 0;
    size_t first = chunk_index * w->chunk_rows;
    if (first + c->rows > w->n_instances || (c->rows < w->chunk_rows && first + c->rows != w->n_instances))
        return bert_fail(err, "%s: chunk %zu of %zu rows does not fit %zu rows", w->path, chunk_index,
                         c->rows, w->n_instances);
    hsize_t offset[2] = {first, 0};
    int rc = 0;
    for (int k = 0; k < DS_COUNT && rc == 0; k++) {
        size_t csize = filter_dataset(w, c, k);
        if (csize == 0) return bert_fail(err, "deflate failed on %s", dataset_name[k]);
        /* Filters ran on this thread; only the file write is serialised. HDF5's automatic
         * error printing is per thread: off on this one too (err carries the one line). */
#pragma omp critical(bert_hdf5_write)
        {
            H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
            if (H5Dwrite_chunk(w->dataset[k], H5P_DEFAULT, 0, offset, csize, c->compressed) < 0)
                rc = bert_fail(err, "cannot write %s of %s (disk full?)", dataset_name[k], w->path);
        }
    }
#pragma omp atomic
    w->rows_stored += c->rows;
    c->rows = 0;
    return rc;
}

int hdf5_shard_append(Hdf5ShardWriter *w, const Instance *inst, BertError *err) {
    if (w->rows_appended >= w->n_instances)
        return bert_fail(err, "%s: more rows than the %zu announced", w->path, w->n_instances);
    if (hdf5_chunk_add(w, w->own, inst, err) != 0) return -1;
    w->rows_appended++;
    if (w->own->rows < w->chunk_rows) return 0;
    return hdf5_shard_store_chunk(w, w->own, (w->rows_appended - 1) / w->chunk_rows, err);
}

int hdf5_shard_finish(Hdf5ShardWriter *w, BertError *err) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* per thread: this may not be the creating one */
    int rc = w->own->rows ? hdf5_shard_store_chunk(w, w->own, w->rows_appended / w->chunk_rows, err) : 0;
    if (rc == 0 && w->rows_stored != w->n_instances)
        rc = bert_fail(err, "%s: %zu rows written of %zu announced", w->path, w->rows_stored, w->n_instances);
    if (rc != 0) {
        hdf5_shard_abort(w);
        return -1;
    }
    int bad = 0;
    for (int k = 0; k < DS_COUNT; k++) {
        if (H5Dclose(w->dataset[k]) < 0) bad = 1;
        w->dataset[k] = -1;
    }
    if (H5Fclose(w->file) < 0) bad = 1;
    w->file = -1;
    if (bad) {
        bert_fail(err, "cannot finish writing %s (disk full?)", w->tmp_path);
        hdf5_shard_abort(w);
        return -1;
    }
    /* libhdf5 never fsyncs: the file is synced here, as every other output is, before the
     * rename makes it the shard (else a crash could publish a shard whose data never reached
     * the disk) */
    if (fsync_path(w->tmp_path, O_RDONLY, err) != 0) {
        hdf5_shard_abort(w);
        return -1;
    }
    rc = atomic_publish(w->tmp_path, w->path, err);
    writer_free(w);
    return rc;
}

void hdf5_shard_abort(Hdf5ShardWriter *w) {
    if (!w) return;
    close_handles(w);
    atomic_tmp_discard(w->tmp_path);
    writer_free(w);
}

bool hdf5_library_threadsafe(void) {
    hbool_t safe = 0;
    return H5is_library_threadsafe(&safe) >= 0 && safe;
}

/* ---- Loading ----------------------------------------------------------------------- */

/* A 64-bit or unsigned 32-bit dataset read into int32: libhdf5's conversion saturates
 * (2^32 - 1 would read as 2^31 - 1 and be reported as that), so it is read as int64 and
 * narrowed here, a value outside int32 named as it is stored (issue 35, D21). */
static int32_t *read_narrowed(hid_t ds, bool is_unsigned, const char *path, const char *name, size_t rows,
                              size_t width, BertError *err) {
    const size_t n = rows * width;
    uint64_t *wide = xmalloc((n + 1) * sizeof *wide);   /* uint64 or int64 values, as stored */
    int32_t *buf = NULL;
    if (n && H5Dread(ds, is_unsigned ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                     wide) < 0) {
        bert_fail(err, "%s: cannot read %s (corrupt file?)", path, name);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const int64_t v = (int64_t)wide[i];
        if (is_unsigned ? wide[i] > INT32_MAX : (v < INT32_MIN || v > INT32_MAX)) {
            char value[32];
            if (is_unsigned) snprintf(value, sizeof value, "%llu", (unsigned long long)wide[i]);
            else snprintf(value, sizeof value, "%lld", (long long)v);
            bert_fail(err, "%s: row %zu: %s holds %s, beyond 32-bit signed values (no vocabulary or sequence "
                           "reaches it)", path, i / width, name, value);
            goto done;
        }
    }
    buf = xmalloc((n + 1) * sizeof *buf);
    for (size_t i = 0; i < n; i++) buf[i] = (int32_t)(int64_t)wide[i];
done:
    free(wide);
    return buf;
}

/* Reads dataset `name` into a new buffer of n_rows x width values of `bytes` each
 * (4: int32, 1: int8), checking its rank and shape. n_rows may be set (-1: take it). */
static void *load_dataset(hid_t file, off_t file_bytes, const char *path, const char *name, int rank,
                          size_t *n_rows, size_t *width, int bytes, BertError *err) {
    void *buf = NULL;
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT), space = -1, type = -1;
    hsize_t dims[2] = {0, 1};
    if (ds < 0) { bert_fail(err, "%s: no dataset %s", path, name); goto done; }
    space = H5Dget_space(ds);
    type = H5Dget_type(ds);
    const size_t type_bytes = type >= 0 ? H5Tget_size(type) : 0;
    if (H5Sget_simple_extent_ndims(space) != rank || H5Tget_class(type) != H5T_INTEGER ||
        (type_bytes != 1 && type_bytes != 2 && type_bytes != 4 && type_bytes != 8)) {
        /* a corrupt file can declare, say, a 249-byte integer, whose conversion overflows
         * inside libhdf5 (found by fuzz_hdf5): only the machine's integer sizes are read */
        bert_fail(err, "%s: %s should be a rank-%d dataset of 1-, 2-, 4- or 8-byte integers", path, name, rank);
        goto done;
    }
    H5Sget_simple_extent_dims(space, dims, NULL);
    /* A dataset declares its shape; a crafted or corrupt file can declare any (2 x 2^61 in a
     * 3 KB file, chunked and never written). Bound each dimension and the product before
     * anything is allocated: no real shard comes near. */
    const hsize_t max_rows = (hsize_t)1 << 31, max_width = (hsize_t)1 << 16, max_elements = (hsize_t)1 << 30;
    if (dims[0] > max_rows || (rank == 2 && (dims[1] < 1 || dims[1] > max_width)) ||
        (rank == 2 && dims[0] > max_elements / dims[1])) {
        bert_fail(err, "%s: %s declares a shape of %llu x %llu, beyond any pre-training shard (at most 2^30 values, "
                       "rows of 1 to 65536)", path, name, (unsigned long long)dims[0],
                  (unsigned long long)(rank == 2 ? dims[1] : 1));
        goto done;
    }
    if (*n_rows != (size_t)-1 && dims[0] != *n_rows) {
        bert_fail(err, "%s: %s has %llu rows, input_ids has %zu", path, name,
                  (unsigned long long)dims[0], *n_rows);
        goto done;
    }
    *n_rows = dims[0];
    *width = rank == 2 ? dims[1] : 1;
    /* A corrupt chunk index can declare a chunk of 4 GiB, which libhdf5 allocates before it
     * finds the file too short (found by fuzz_hdf5 as an out-of-memory): the data a dataset
     * says it stores (its chunks' sizes summed) must fit in the file. */
    const hsize_t stored = H5Dget_storage_size(ds);
    if (file_bytes > 0 && stored > (hsize_t)file_bytes) {
        bert_fail(err, "%s: %s declares %llu bytes of stored data in a file of %lld bytes (corrupt file)", path, name,
                  (unsigned long long)stored, (long long)file_bytes);
        goto done;
    }
    if (bytes == 4 && (type_bytes == 8 || (type_bytes == 4 && H5Tget_sign(type) == H5T_SGN_NONE))) {
        buf = read_narrowed(ds, H5Tget_sign(type) == H5T_SGN_NONE, path, name, *n_rows, *width, err);
        goto done;
    }
    buf = xmalloc((*n_rows * *width + 1) * (size_t)bytes);
    hid_t mem = bytes == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT8;
    if (*n_rows && H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        bert_fail(err, "%s: cannot read %s (corrupt file?)", path, name);
        free(buf);
        buf = NULL;
    }
done:
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    if (ds >= 0) H5Dclose(ds);
    return buf;
}

int hdf5_shard_load(const char *path, PretrainingShard *s, BertError *err) {
    memset(s, 0, sizeof *s);
    hdf5_no_shutdown_at_exit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    struct stat st;
    if (access(path, R_OK) != 0 || stat(path, &st) != 0) return bert_fail(err, "cannot read %s", path);
    if (!S_ISREG(st.st_mode)) st.st_size = 0;   /* no size to hold the datasets to */
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return bert_fail(err, "%s is not an HDF5 file", path);
    size_t n = (size_t)-1, seq = 0, pred = 0, w_mask = 0, w_seg = 0, w_ids = 0, w_nsp = 0;
    int ok = (s->input_ids = load_dataset(file, st.st_size, path, "input_ids", 2, &n, &seq, 4, err)) &&
             (s->input_mask = load_dataset(file, st.st_size, path, "input_mask", 2, &n, &w_mask, 1, err)) &&
             (s->segment_ids = load_dataset(file, st.st_size, path, "segment_ids", 2, &n, &w_seg, 1, err)) &&
             (s->masked_lm_positions = load_dataset(file, st.st_size, path, "masked_lm_positions", 2, &n, &pred, 4, err)) &&
             (s->masked_lm_ids = load_dataset(file, st.st_size, path, "masked_lm_ids", 2, &n, &w_ids, 4, err)) &&
             (s->next_sentence_labels = load_dataset(file, st.st_size, path, "next_sentence_labels", 1, &n, &w_nsp, 1, err));
    H5Fclose(file);
    if (ok && (w_mask != seq || w_seg != seq || w_ids != pred)) {
        bert_fail(err, "%s: datasets disagree on their widths", path);
        ok = 0;
    }
    if (!ok) {
        pretraining_shard_free(s);
        return -1;
    }
    s->n = n;
    s->max_seq_length = (int)seq;
    s->max_predictions_per_seq = (int)pred;
    return 0;
}

void pretraining_shard_free(PretrainingShard *s) {
    free(s->input_ids);
    free(s->input_mask);
    free(s->segment_ids);
    free(s->masked_lm_positions);
    free(s->masked_lm_ids);
    free(s->next_sentence_labels);
    memset(s, 0, sizeof *s);
}

/* ---- Checking ---------------------------------------------------------------------- */

/* Row r's checks. `seen` (T entries) holds, per position, the last row + 1 that masked it:
 * duplicate masked positions are found in O(T + P) per row. */
static int validate_row(const PretrainingShard *s, size_t r, const char *path, int vocab_size, size_t *seen,
                        BertError *err) {
    const int T = s->max_seq_length, P = s->max_predictions_per_seq;
    int real = 0;
    for (int t = 0; t < T; t++) {
        size_t i = r * (size_t)T + (size_t)t;
        if (s->input_ids[i] < 0 || s->input_ids[i] >= vocab_size)
            return bert_fail(err, "%s: row %zu: input_ids holds %d, outside the vocabulary of %d", path, r,
                             s->input_ids[i], vocab_size);
        if ((s->input_mask[i] & ~1) || (s->segment_ids[i] & ~1))
            return bert_fail(err, "%s: row %zu: input_mask and segment_ids must be 0 or 1", path, r);
        real |= s->input_mask[i];
    }
    if (!real) return bert_fail(err, "%s: row %zu: input_mask is all 0 (a sequence with no real token)", path, r);
    /* slots in use run up to the first position 0 (NVIDIA's padding; [CLS] is never masked) */
    for (int k = 0, used = 1; k < P; k++) {
        size_t i = r * (size_t)P + (size_t)k;
        const int32_t pos = s->masked_lm_positions[i];
        if (pos < 0 || pos >= T)
            return bert_fail(err, "%s: row %zu: masked position %d outside the sequence", path, r, pos);
        if (s->masked_lm_ids[i] < 0 || s->masked_lm_ids[i] >= vocab_size)
            return bert_fail(err, "%s: row %zu: masked_lm_ids holds %d, outside the vocabulary of %d", path, r,
                             s->masked_lm_ids[i], vocab_size);
        used = used && pos != 0;
        if (used && seen[pos] == r + 1)
            return bert_fail(err, "%s: row %zu: position %d is masked twice", path, r, pos);
        if (used) seen[pos] = r + 1;
    }
    if (s->next_sentence_labels[r] & ~1)
        return bert_fail(err, "%s: row %zu: next_sentence_labels must be 0 or 1", path, r);
    return 0;
}

/* The one validation of a loaded shard, for the trainer's loader and for check_shards
 * (`bert check_shards`, `pretrain --check_shards`): what passes here trains (issue 35, D15). */
int pretraining_shard_validate(const PretrainingShard *s, const char *path, int max_seq_length, int max_predictions,
                               int vocab_size, BertError *err) {
    if ((max_seq_length > 0 && s->max_seq_length != max_seq_length) ||
        (max_predictions > 0 && s->max_predictions_per_seq != max_predictions))
        return bert_fail(err, "%s holds sequences of %d tokens with %d masked slots; this run was given "
                              "--max_seq_length %d and --max_predictions_per_seq %d", path, s->max_seq_length,
                         s->max_predictions_per_seq, max_seq_length, max_predictions);
    if (s->n == 0) return bert_fail(err, "%s holds no sequences", path);
    size_t *seen = xcalloc((size_t)s->max_seq_length + 1, sizeof *seen);
    int rc = 0;
    for (size_t r = 0; rc == 0 && r < s->n; r++) rc = validate_row(s, r, path, vocab_size, seen, err);
    free(seen);
    return rc;
}

int hdf5_shard_check(const char *path, int max_seq_length, int max_predictions, int vocab_size, size_t *rows,
                     BertError *err) {
    int fds[2];
    if (pipe(fds) != 0) return bert_fail(err, "cannot check %s: pipe: %s", path, strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return bert_fail(err, "cannot check %s: fork: %s", path, strerror(errno));
    }
    if (pid == 0) {   /* the child: load, validate, send the row count or the message */
        close(fds[0]);
        PretrainingShard s;
        BertError e = {{0}};
        int rc = hdf5_shard_load(path, &s, &e);
        if (rc == 0) rc = pretraining_shard_validate(&s, path, max_seq_length, max_predictions, vocab_size, &e);
        char msg[sizeof e.msg + 32];
        int len = rc == 0 ? snprintf(msg, sizeof msg, "ok %zu", s.n) : snprintf(msg, sizeof msg, "error %s", e.msg);
        if (write(fds[1], msg, (size_t)len) < 0) _exit(3);
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    char reply[sizeof err->msg + 32];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof reply - 1 && ((n = read(fds[0], reply + got, sizeof reply - 1 - got)) > 0 || errno == EINTR))
        if (n > 0) got += (size_t)n;
    reply[got] = 0;
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status))
        return bert_fail(err, "%s: reading it crashed inside libhdf5 (signal %d, %s): the file is corrupt", path,
                         WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (!strncmp(reply, "ok ", 3) && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (rows) *rows = (size_t)strtoull(reply + 3, NULL, 10);
        return 0;
    }
    if (!strncmp(reply, "error ", 6)) return bert_fail(err, "%s", reply + 6);
    return bert_fail(err, "%s: the check ended with status %d and no answer", path,
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

long hdf5_check_shard_folder(const char *dir, const char *name_filter, const char *suffix, int max_seq_length,
                             int max_predictions, int vocab_size, ShardCheck *out,
                             void (*on_bad)(const char *msg, void *ctx), void *ctx, BertError *err) {
    char **paths;
    int n;
    if (list_dir_files(dir, name_filter, suffix, &paths, &n, err) != 0) return -1;
    for (int i = 0; i < n; i++) {
        BertError e;
        size_t rows = 0;
        out->files++;
        if (hdf5_shard_check(paths[i], max_seq_length, max_predictions, vocab_size, &rows, &e) != 0) {
            out->bad++;
            if (on_bad) on_bad(e.msg, ctx);
        } else {
            out->rows += rows;
        }
    }
    free_paths(paths, n);
    return out->bad;
}
