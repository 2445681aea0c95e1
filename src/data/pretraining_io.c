/* create_pretraining_data around the algorithm: reading and tokenizing the input as
 * the reference does, spooling instances (memory, then disk), the final shuffle, the HDF5
 * shard. */
#include "data/pretraining.h"
#include "core/utf8.h"

#include <errno.h>
#include <glob.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/test_hooks.h"
#include "data/hdf5_shard.h"

/* ---- Reading lines as Python's text mode does ---------------------------------------- */

typedef struct {
    FILE *fp;
    char *buf;
    size_t len, pos, cap;
    bool eof;
    bool skip_lf;   /* the previous line ended in \r: a following \n belongs to it */
    size_t total;   /* bytes read from the file */
} LineReader;

/* Makes sure buf[pos..len) holds at least `want` bytes unless the file ends first. */
static int reader_fill(LineReader *r, size_t want, const char *path, BertError *err) {
    if (r->len - r->pos >= want || r->eof) return 0;
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        TEST_COUNT_WORK((long long)(r->len - r->pos));
        r->len -= r->pos;
        r->pos = 0;
    }
    while (r->len - r->pos < want && !r->eof) {
        ARRAY_RESERVE(r->buf, r->cap, r->len + 1, 1 << 16);
        size_t got = fread(r->buf + r->len, 1, r->cap - r->len, r->fp);
        TEST_COUNT_WORK((long long)got + 1);
        r->len += got;
        r->total += got;
        if (got == 0) {
            if (ferror(r->fp)) return bert_fail(err, "error reading %s: %s", path, strerror(errno));
            r->eof = true;
        }
    }
    return 0;
}

/* Next line without its terminator (\n, \r\n or \r, Python's universal newlines).
 * Returns 1 with the line and its length set, 0 at end of file, -1 on a read error.
 * The line stays valid until the next call. */
static int reader_next(LineReader *r, const char **line, size_t *n, const char *path, BertError *err) {
    size_t scanned = 0;
    for (;;) {
        if (reader_fill(r, scanned + 2, path, err) != 0) return -1;
        if (r->skip_lf && r->pos < r->len) {
            if (r->buf[r->pos] == '\n') r->pos++;
            r->skip_lf = false;
            continue;
        }
        char *start = r->buf + r->pos;
        size_t avail = r->len - r->pos;
        char *end = NULL;
        size_t k = scanned;
        for (; k < avail; k++)
            if (start[k] == '\n' || start[k] == '\r') { end = start + k; break; }
        TEST_COUNT_WORK((long long)(k - scanned) + 1);
        if (end) {
            *line = start;
            *n = (size_t)(end - start);
            r->skip_lf = *end == '\r';
            r->pos += *n + 1;
            return 1;
        }
        if (r->eof) {
            if (avail == 0) return 0;
            *line = start;
            *n = avail;
            r->pos = r->len;
            return 1;
        }
        scanned = avail;
        if (reader_fill(r, avail + 1, path, err) != 0) return -1;
    }
}

/* ---- Python's str.strip() emptiness ------------------------------------------------- */

/* The reference's `if not line.strip()`: a document boundary. */
static bool line_is_blank(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        int len;
        int32_t c = utf8_decode(s + i, n - i, &len);
        TEST_COUNT_WORK(1);
        if (c < 0 || !py_isspace(c)) return false;
        i += (size_t)len;
    }
    return true;
}

/* ---- Batched, parallel tokenization ------------------------------------------------- */

/* Small enough that the batch's buffers (its text, and 4 bytes of id slots per byte)
 * stay in cache and are faulted in once, then reused for the whole input. */
#define BATCH_BYTES (256u << 10)
#define BATCH_LINES 16384

typedef struct {
    char *text;                 /* the batch's lines, back to back */
    size_t text_len, text_cap;
    size_t *line_start;         /* line k = text[line_start[k], line_start[k+1]) */
    size_t n_lines;
    int32_t *ids;               /* per line: ids[id_start[k] .. id_start[k] + id_count[k]) */
    size_t ids_cap;
    size_t *id_start, *id_count;
    bool *blank;
    long *invalid;
    long broken_line;           /* 1 + a line the tokenizer refused (or gave > 1 id per byte) */
} LineBatch;

static void batch_init(LineBatch *b) {
    memset(b, 0, sizeof *b);
    b->text_cap = BATCH_BYTES + 4096;
    b->text = xmalloc(b->text_cap);
    b->line_start = xmalloc((BATCH_LINES + 1) * sizeof *b->line_start);
    b->id_start = xmalloc(BATCH_LINES * sizeof *b->id_start);
    b->id_count = xmalloc(BATCH_LINES * sizeof *b->id_count);
    b->blank = xmalloc(BATCH_LINES * sizeof *b->blank);
    b->invalid = xmalloc(BATCH_LINES * sizeof *b->invalid);
}

static void batch_free(LineBatch *b) {
    free(b->text);
    free(b->line_start);
    free(b->ids);
    free(b->id_start);
    free(b->id_count);
    free(b->blank);
    free(b->invalid);
}

static void batch_add(LineBatch *b, const char *line, size_t n) {
    ARRAY_RESERVE(b->text, b->text_cap, b->text_len + n, 1 << 16);
    b->line_start[b->n_lines] = b->text_len;
    memcpy(b->text + b->text_len, line, n);
    TEST_COUNT_WORK((long long)n + 1);
    b->text_len += n;
    b->n_lines++;
    b->line_start[b->n_lines] = b->text_len;
}

/* Tokenizes every line of the batch. A line never yields more ids than it has bytes
 * (every WordPiece covers at least one byte, an [UNK] a whole word), so each line's
 * ids get a slot of its byte length and the lines can run in parallel. */
static void batch_tokenize(LineBatch *b, const Tokenizer *tok) {
    if (b->text_len + 1 > b->ids_cap) { /* kept across batches: no fresh pages to fault in */
        free(b->ids);
        b->ids_cap = b->text_len + 1;
        b->ids = xmalloc(b->ids_cap * sizeof *b->ids);
    }
    b->broken_line = 0;
    long n_lines = (long)b->n_lines;
#pragma omp parallel if (!omp_in_parallel() && n_lines > 64)
    {
        TokenList list;
        token_list_init(&list);
#pragma omp for schedule(dynamic, 64)
        for (long k = 0; k < n_lines; k++) {
            const char *line = b->text + b->line_start[k];
            size_t len = b->line_start[k + 1] - b->line_start[k];
            b->id_start[k] = b->line_start[k];
            b->blank[k] = line_is_blank(line, len);
            b->id_count[k] = 0;
            b->invalid[k] = 0;
            if (b->blank[k]) continue;
            int got = tokenize(tok, line, len, &list);
            b->invalid[k] = list.invalid_utf8;
            if (got < 0 || (size_t)list.n > len) { /* > 2 GiB, or against the tokenizer's contract */
#pragma omp atomic write
                b->broken_line = k + 1;
                continue;
            }
            for (int t = 0; t < list.n; t++) b->ids[b->id_start[k] + (size_t)t] = list.tokens[t].id;
            TEST_COUNT_WORK(list.n);
            b->id_count[k] = (size_t)list.n;
        }
        token_list_free(&list);
    }
}

static void batch_commit(LineBatch *b, DocumentSet *d, ReadStats *stats) {
    for (size_t k = 0; k < b->n_lines; k++) {
        if (b->blank[k]) documents_break(d);
        else documents_add_sentence(d, b->ids + b->id_start[k], b->id_count[k]);
        stats->invalid_utf8 += b->invalid[k];
    }
    stats->lines += b->n_lines;
    stats->documents = d->n_documents;
    stats->bytes += b->text_len + b->n_lines; /* + terminators; made exact per file */
    b->n_lines = 0;
    b->text_len = 0;
}

/* HDF5's format signature at offset 0 (where bert and h5py put it). Rewinds fp. */
static bool is_hdf5_file(FILE *fp) {
    static const unsigned char SIGNATURE[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8];
    bool hdf5 = fread(head, 1, 8, fp) == 8 && memcmp(head, SIGNATURE, 8) == 0;
    rewind(fp);
    return hdf5;
}

int documents_read_text(DocumentSet *d, const char *path, const Tokenizer *tok,
                        ReadStats *stats, ReadProgress progress, void *progress_ctx,
                        BertError *err) {
    LineReader r = {.cap = 1 << 20};
    r.fp = fopen(path, "rb");
    if (!r.fp) return bert_fail(err, "cannot open %s: %s", path, strerror(errno));
    if (is_hdf5_file(r.fp)) {
        fclose(r.fp);
        return bert_fail(err, "%s is an HDF5 file; --input_file takes text (one sentence per line)", path);
    }
    r.buf = xmalloc(r.cap);
    LineBatch batch;
    batch_init(&batch);
    size_t bytes_before = stats->bytes;
    int rc = 0;
    const char *line;
    size_t n;
    for (;;) {
        int got = reader_next(&r, &line, &n, path, err);
        if (got < 0) { rc = -1; break; }
        if (got == 1) batch_add(&batch, line, n);
        if (batch.n_lines > 0 && (got == 0 || batch.n_lines == BATCH_LINES || batch.text_len >= BATCH_BYTES)) {
            batch_tokenize(&batch, tok);
            if (batch.broken_line) {
                rc = bert_fail(err, "%s: line %zu cannot be tokenized (longer than 2 GiB?)",
                               path, stats->lines + (size_t)batch.broken_line);
                break;
            }
            batch_commit(&batch, d, stats);
            if (progress) progress(progress_ctx, stats);
        }
        if (got == 0) break;
    }
    stats->files++;
    stats->bytes = bytes_before + r.total;
    batch_free(&batch);
    free(r.buf);
    fclose(r.fp);
    return rc;
}

int expand_input_patterns(const char *patterns, char ***files, int *n_files, BertError *err) {
    *files = NULL;
    *n_files = 0;
    char *copy = xstrdup(patterns);
    const int capacity = list_capacity(patterns);
    const char **pats = xmalloc(sizeof(char *) * (size_t)capacity);
    const int npats = split_list(copy, pats, capacity);
    int rc = 0;
    for (int i = 0; i < npats; i++) {
        const char *pat = pats[i];
        glob_t g;
        int grc = glob(pat, 0, NULL, &g);
        if (grc != 0) {
            rc = bert_fail(err, "input file %s: %s", pat, grc == GLOB_NOMATCH ? "no such file" : "cannot expand");
            if (grc != GLOB_NOMATCH) globfree(&g);
            break;
        }
        *files = xrealloc(*files, (size_t)(*n_files + (int)g.gl_pathc) * sizeof **files);
        for (size_t k = 0; k < g.gl_pathc; k++) (*files)[(*n_files)++] = xstrdup(g.gl_pathv[k]);
        globfree(&g);
    }
    free(copy), free(pats);
    if (rc == 0 && *n_files == 0) rc = bert_fail(err, "no input files in \"%s\"", patterns);
    if (rc != 0) {
        for (int k = 0; k < *n_files; k++) free((*files)[k]);
        free(*files);
        *files = NULL;
        *n_files = 0;
    }
    return rc;
}

/* ---- The spool: instances in creation order, in memory up to a budget, then on disk -- */

/* Record: a RecordHead (where A and B lie in the tokenized input, the label, the
 * number of masked tokens), then the n_masked positions as uint16 (positions are below
 * max_seq_length <= 65536) and the n_masked ids put there by masking, as uint16 when
 * every id fits (any vocabulary of at most 65536 tokens) and int32 otherwise. The
 * original ids (the labels) and the unmasked tokens are read back from the input, which
 * stays in memory until the shard is written: about 110 bytes per instance at seq 128
 * instead of 350 for the instance itself.
 * Records stay in memory while they fit the budget (no system calls to write or read
 * them back); past it everything moves to a file beside the output. The file is created
 * at once (so an unwritable folder fails before any work) and unlinked at once (so it
 * vanishes with the process whatever happens). */
typedef struct {
    int64_t a_lo, b_lo;   /* first tokens of A and B in DocumentSet.tokens */
    int32_t len_a, len_b;
    int32_t is_random_next, n_masked;
} RecordHead;

typedef struct {
    FILE *fp;
    bool on_disk;
    bool narrow;          /* uint16 replacement ids */
    unsigned char *mem;   /* the records while in memory */
    size_t mem_len, mem_cap, budget;
    int64_t *offset;      /* offset[k] = start of record k; offset[n] = end */
    size_t n, cap;
    unsigned char *record;/* scratch for one record */
    const DocumentSet *docs; /* the tokens the records point into */
    int32_t cls_id, sep_id;
    int seq, pred;
} Spool;

static size_t record_capacity(int pred) { return sizeof(RecordHead) + (size_t)pred * (2 + 4); }

static int spool_open(Spool *s, const char *near_path, const PretrainingOptions *opt,
                      const MaskVocab *mv, const DocumentSet *docs, BertError *err) {
    memset(s, 0, sizeof *s);
    char tmpl[4200];
    snprintf(tmpl, sizeof tmpl, "%s.spool.XXXXXX", near_path);
    int fd = mkstemp(tmpl);
    if (fd < 0) return bert_fail(err, "cannot create a temporary file next to %s: %s", near_path, strerror(errno));
    unlink(tmpl);
    s->fp = fdopen(fd, "w+b");
    if (!s->fp) { close(fd); return bert_fail(err, "cannot open temporary file: %s", strerror(errno)); }
    setvbuf(s->fp, NULL, _IOFBF, 1 << 20);
    s->narrow = mv->vocab_size <= 65536;
    s->docs = docs;
    s->cls_id = mv->cls_id, s->sep_id = mv->sep_id;
    s->seq = opt->max_seq_length, s->pred = opt->max_predictions_per_seq;
    s->budget = opt->spool_memory_mb > 0 ? (size_t)(opt->spool_memory_mb * 1048576.0) : 0;
    s->cap = 1024;
    s->offset = xmalloc(s->cap * sizeof *s->offset);
    s->offset[0] = 0;
    s->record = xmalloc(record_capacity(opt->max_predictions_per_seq));
    return 0;
}

static void spool_close(Spool *s) {
    if (s->fp) fclose(s->fp);
    free(s->mem);
    free(s->offset);
    free(s->record);
    memset(s, 0, sizeof *s);
}

/* Appends bytes to memory while the budget allows, else (from then on) to the file. */
static int spool_put(Spool *s, const unsigned char *bytes, size_t n, BertError *err) {
    if (!s->on_disk && s->mem_len + n <= s->budget) {
        if (s->mem_len + n > s->mem_cap) {
            size_t cap = grow_capacity(s->mem_cap, s->mem_len + n, 1 << 20);
            s->mem_cap = cap < s->budget ? cap : s->budget;
            s->mem = xrealloc(s->mem, s->mem_cap);
        }
        memcpy(s->mem + s->mem_len, bytes, n);
        s->mem_len += n;
        return 0;
    }
    if (!s->on_disk) {
        s->on_disk = true;
        if (s->mem_len && fwrite(s->mem, 1, s->mem_len, s->fp) != s->mem_len)
            return bert_fail(err, "cannot write the instance spool: %s (disk full?)", strerror(errno));
        free(s->mem);
        s->mem = NULL;
        s->mem_len = s->mem_cap = 0;
    }
    if (fwrite(bytes, 1, n, s->fp) != n)
        return bert_fail(err, "cannot write the instance spool: %s (disk full?)", strerror(errno));
    return 0;
}

static int spool_sink(void *ctx, const Instance *in, BertError *err) {
    Spool *s = ctx;
    RecordHead head = {.a_lo = (int64_t)in->a_lo, .b_lo = (int64_t)in->b_lo,
                       .len_a = in->n_segment_a - 2, .len_b = in->n_tokens - in->n_segment_a - 1,
                       .is_random_next = in->is_random_next, .n_masked = in->n_masked};
    unsigned char *p = s->record;
    memcpy(p, &head, sizeof head);
    uint16_t *positions = (uint16_t *)(p + sizeof head);
    for (int j = 0; j < in->n_masked; j++) positions[j] = (uint16_t)in->masked_positions[j];
    p += sizeof head + (size_t)in->n_masked * 2;
    for (int j = 0; j < in->n_masked; j++) { /* what masking put at each position */
        int32_t id = in->input_ids[in->masked_positions[j]];
        if (s->narrow) {
            uint16_t narrow_id = (uint16_t)id;
            memcpy(p, &narrow_id, 2), p += 2;
        } else {
            memcpy(p, &id, 4), p += 4;
        }
    }
    size_t bytes = (size_t)(p - s->record);
    TEST_COUNT_WORK((long long)bytes);
    if (spool_put(s, s->record, bytes, err) != 0) return -1;
    ARRAY_RESERVE(s->offset, s->cap, s->n + 2, 1024);
    s->offset[s->n + 1] = s->offset[s->n] + (int64_t)bytes;
    s->n++;
    return 0;
}

/* Whether a record read back describes an instance that fits (it always should: this
 * guards the rebuild against a spool file damaged on disk). */
static bool record_fits(const Spool *s, const RecordHead *h) {
    int64_t n_tokens = (int64_t)s->docs->n_tokens;
    return h->len_a >= 0 && h->len_b >= 0 && (int64_t)h->len_a + h->len_b + 3 <= s->seq &&
           h->n_masked >= 0 && h->n_masked <= s->pred && h->a_lo >= 0 && h->b_lo >= 0 &&
           h->a_lo <= n_tokens - h->len_a && h->b_lo <= n_tokens - h->len_b;
}

/* Rebuilds instance k into in: [CLS] A [SEP] B [SEP] from the input's tokens, the
 * labels read at the masked positions, then the masking applied. Uses scratch
 * (record_capacity bytes) when the spool is on disk; safe from several threads at once
 * (pread, or plain reads of memory). */
static int spool_read(const Spool *s, size_t k, Instance *in, unsigned char *scratch, BertError *err) {
    size_t bytes = (size_t)(s->offset[k + 1] - s->offset[k]);
    const unsigned char *rec = s->mem + s->offset[k];
    if (s->on_disk) {
        ssize_t got = pread(fileno(s->fp), scratch, bytes, (off_t)s->offset[k]);
        if (got != (ssize_t)bytes) return bert_fail(err, "cannot read back the instance spool");
        rec = scratch;
    }
    RecordHead h;
    memcpy(&h, rec, sizeof h);
    if (!record_fits(s, &h)) return bert_fail(err, "the instance spool is damaged (record %zu)", k);
    const int32_t *tokens = s->docs->tokens;
    int32_t *ids = in->input_ids;
    int n = 0;
    ids[n++] = s->cls_id;
    memcpy(ids + n, tokens + h.a_lo, (size_t)h.len_a * sizeof *ids), n += h.len_a;
    ids[n++] = s->sep_id;
    in->n_segment_a = n;
    memcpy(ids + n, tokens + h.b_lo, (size_t)h.len_b * sizeof *ids), n += h.len_b;
    ids[n++] = s->sep_id;
    in->n_tokens = n;
    in->is_random_next = h.is_random_next;
    in->n_masked = h.n_masked;
    in->a_lo = (size_t)h.a_lo, in->b_lo = (size_t)h.b_lo;
    TEST_COUNT_WORK(n + h.n_masked);
    const unsigned char *positions = rec + sizeof h, *replacements = positions + (size_t)h.n_masked * 2;
    for (int j = 0; j < h.n_masked; j++) {
        uint16_t pos;
        memcpy(&pos, positions + 2 * (size_t)j, 2);
        if (pos >= n) return bert_fail(err, "the instance spool is damaged (record %zu)", k);
        int32_t id;
        if (s->narrow) {
            uint16_t narrow_id;
            memcpy(&narrow_id, replacements + 2 * (size_t)j, 2);
            id = narrow_id;
        } else {
            memcpy(&id, replacements + 4 * (size_t)j, 4);
        }
        in->masked_positions[j] = pos;
        in->masked_ids[j] = ids[pos]; /* positions are distinct: still the original */
        ids[pos] = id;
    }
    return 0;
}

/* ---- create_pretraining_data --------------------------------------------------------- */

static int read_inputs(DocumentSet *docs, const char *input_files, const Tokenizer *tok,
                       PretrainingStats *st, ReadProgress progress, void *ctx, BertError *err) {
    char **files;
    int n_files;
    if (expand_input_patterns(input_files, &files, &n_files, err) != 0) return -1;
    int rc = 0;
    for (int k = 0; k < n_files && rc == 0; k++)
        rc = documents_read_text(docs, files[k], tok, &st->read, progress, ctx, err);
    for (int k = 0; k < n_files; k++) free(files[k]);
    free(files);
    return rc;
}

/* Splits "a.hdf5,b.hdf5" into its paths (the reference's --output_file list). */
static char **split_outputs(const char *output_file, int *n) {
    char *copy = xstrdup(output_file), *save = NULL;
    char **paths = NULL;
    *n = 0;
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        paths = xrealloc(paths, (size_t)(*n + 1) * sizeof *paths);
        paths[(*n)++] = xstrdup(p);
    }
    free(copy);
    return paths;
}

typedef struct {
    Instance in;
    unsigned char *record;
} RowScratch;

static void row_scratch_init(RowScratch *r, const PretrainingOptions *opt) {
    size_t seq = (size_t)opt->max_seq_length, pred = (size_t)opt->max_predictions_per_seq;
    r->in.input_ids = xmalloc(seq * 4);
    r->in.masked_positions = xmalloc(pred * 4);
    r->in.masked_ids = xmalloc(pred * 4);
    r->record = xmalloc(record_capacity((int)pred));
}

static void row_scratch_free(RowScratch *r) {
    free(r->in.input_ids);
    free(r->in.masked_positions);
    free(r->in.masked_ids);
    free(r->record);
}

/* One output file written by every thread: chunk c holds output rows
 * [c * chunk_rows, ...), i.e. spool records perm[row]; threads take whole chunks. */
static int write_one_parallel(const Spool *spool, const uint32_t *perm, const PretrainingOptions *opt,
                              Hdf5ShardWriter *w, BertError *err) {
    size_t rows = hdf5_shard_chunk_rows(w), n_chunks = (spool->n + rows - 1) / rows;
    int failed = 0;
#pragma omp parallel
    {
        RowScratch rs;
        row_scratch_init(&rs, opt);
        Hdf5Chunk *chunk = hdf5_chunk_new(w);
        BertError e;
#pragma omp for schedule(dynamic, 1)
        for (size_t c = 0; c < n_chunks; c++) {
            int rc = 0, stop;
#pragma omp atomic read
            stop = failed;
            if (stop) continue;
            size_t end = (c + 1) * rows < spool->n ? (c + 1) * rows : spool->n;
            for (size_t k = c * rows; rc == 0 && k < end; k++) {
                rc = spool_read(spool, perm[k], &rs.in, rs.record, &e);
                if (rc == 0) rc = hdf5_chunk_add(w, chunk, &rs.in, &e);
            }
            if (rc == 0) rc = hdf5_shard_store_chunk(w, chunk, c, &e);
            if (rc != 0) {
#pragma omp critical(bert_write_error)
                if (!failed) *err = e, failed = 1;
            }
        }
        hdf5_chunk_free(chunk);
        row_scratch_free(&rs);
    }
    return failed ? -1 : 0;
}

/* Rows in output order dealt round-robin over n_out writers, as the reference's
 * writer_index does. */
static int write_round_robin(const Spool *spool, const uint32_t *perm, const PretrainingOptions *opt,
                             Hdf5ShardWriter **w, int n_out, BertError *err) {
    RowScratch rs;
    row_scratch_init(&rs, opt);
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < spool->n; k++) {
        rc = spool_read(spool, perm[k], &rs.in, rs.record, err);
        if (rc == 0) rc = hdf5_shard_append(w[k % (size_t)n_out], &rs.in, err);
    }
    row_scratch_free(&rs);
    return rc;
}

/* The reference's final rng.shuffle(instances), then the rows in that order into the
 * output file(s). One output is written by all threads (outside a parallel region). */
static int write_shuffled(Spool *spool, PyRandom *rng, const PretrainingOptions *opt,
                          const char *output_file, BertError *err) {
    if (spool->on_disk && fflush(spool->fp) != 0)
        return bert_fail(err, "cannot write the instance spool (disk full?)");
    uint32_t *perm = xmalloc((spool->n ? spool->n : 1) * sizeof *perm);
    for (size_t k = 0; k < spool->n; k++) perm[k] = (uint32_t)k;
    pyrandom_shuffle(rng, perm, spool->n, sizeof *perm);
    TEST_COUNT_WORK(2 * (long long)spool->n);
    int n_out, opened = 0, rc = 0;
    char **paths = split_outputs(output_file, &n_out);
    Hdf5ShardWriter **w = xcalloc((size_t)(n_out ? n_out : 1), sizeof *w);
    if (n_out == 0) rc = bert_fail(err, "no output file given");
    /* a shard without rows is one the trainer refuses: better no file now (issue 35, D15) */
    else if (spool->n == 0)
        rc = bert_fail(err, "no training instances (the input holds no document with a sentence); %s not written",
                       output_file);
    else if (spool->n < (size_t)n_out)
        rc = bert_fail(err, "%zu training instances for %d output files: some would be empty; nothing written",
                       spool->n, n_out);
    for (int i = 0; rc == 0 && i < n_out; i++)
        for (int j = 0; rc == 0 && j < i; j++)
            if (!strcmp(paths[i], paths[j]) || is_same_file(paths[i], paths[j]))
                rc = bert_fail(err, "--output_file names %s twice", paths[i]);
    for (; rc == 0 && opened < n_out; opened++) {
        size_t rows = spool->n / (size_t)n_out + ((size_t)opened < spool->n % (size_t)n_out);
        rc = hdf5_shard_create(&w[opened], paths[opened], rows, opt->max_seq_length,
                               opt->max_predictions_per_seq, err);
        if (rc != 0) break;
    }
    if (rc == 0 && n_out == 1 && !omp_in_parallel() && omp_get_max_threads() > 1)
        rc = write_one_parallel(spool, perm, opt, w[0], err);
    else if (rc == 0)
        rc = write_round_robin(spool, perm, opt, w, n_out, err);
    for (int k = 0; k < opened; k++) {
        if (rc == 0) rc = hdf5_shard_finish(w[k], err);
        else hdf5_shard_abort(w[k]);
    }
    for (int k = 0; k < n_out; k++) free(paths[k]);
    free(paths);
    free(w);
    free(perm);
    return rc;
}

int create_pretraining_data(const PretrainingOptions *opt, const char *input_files,
                            const char *output_file, const Tokenizer *tok,
                            PretrainingStats *st, ReadProgress progress,
                            void *progress_ctx, BertError *err) {
    memset(st, 0, sizeof *st);
    if (pretraining_check_options(opt, err) != 0) return -1;
    MaskVocab mv;
    if (mask_vocab_init(&mv, tokenizer_vocab(tok), err) != 0) return -1;
    /* The spool lives beside the (first) output, so an unwritable folder fails now. */
    char first_output[4096];
    snprintf(first_output, sizeof first_output, "%.*s", (int)strcspn(output_file, ","), output_file);
    DocumentSet docs;
    Spool spool;
    if (spool_open(&spool, first_output, opt, &mv, &docs, err) != 0) {
        mask_vocab_free(&mv);
        return -1;
    }
    documents_init(&docs);
    double t0 = now_seconds();
    int rc = read_inputs(&docs, input_files, tok, st, progress, progress_ctx, err);
    st->documents = docs.n_documents, st->sentences = docs.n_sentences, st->tokens = docs.n_tokens;
    double t1 = now_seconds();
    PyRandom rng;
    pyrandom_seed(&rng, opt->random_seed);
    if (rc == 0) rc = generate_instances(&docs, opt, &mv, &rng, spool_sink, &spool, err);
    double t2 = now_seconds();
    if (rc == 0 && spool.n > UINT32_MAX) rc = bert_fail(err, "more than 2^32 instances in one shard");
    if (rc == 0) rc = write_shuffled(&spool, &rng, opt, output_file, err); /* reads docs */
    documents_free(&docs);
    st->instances = spool.n;
    st->seconds_read = t1 - t0, st->seconds_generate = t2 - t1, st->seconds_write = now_seconds() - t2;
    spool_close(&spool);
    mask_vocab_free(&mv);
    return rc;
}
