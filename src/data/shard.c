/* Sharding one-document-per-line files into sentence shards, as NVIDIA's TextSharding.py
 * does (distribute_articles_over_shards), in bounded memory:
 *
 *   pass 1  read every document, count its sentences (in parallel), remember where it is;
 *   plan    NVIDIA's greedy distribution by sentence count, on the counts alone;
 *   pass 2  write each shard (in parallel over shards), re-reading its documents by offset
 *           and splitting them again, in the order NVIDIA appends them.
 *
 * Memory is O(documents) small integers, never the text. */
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/test_hooks.h"
#include "core/utf8.h"
#include "data/corpus.h"

/* Far more than any corpus needs; keeps training + test shards within an int. */
#define MAX_SHARDS (1 << 20)

/* TEST_COUNT_WORK: steps of the sharder's own loops (bytes read, sanitized and stripped,
 * and the distribution's steps; sentence splitting counts its own), what the scaling tests
 * count. */

/* Bytes utf8_rstrip_len scanned to find that text[0..len) keeps `kept`. */
#define RSTRIP_STEPS(len, kept) ((long long)((len) - (kept)) + 1)

ShardOptions shard_default_options(void) {
    ShardOptions o;
    memset(&o, 0, sizeof o);
    o.output_name_prefix = "corpus";
    o.n_training_shards = 256;
    o.n_test_shards = 256;
    o.fraction_test_set = 0.1;
    o.random_seed = -1;
    return o;
}

void shard_path(const ShardOptions *opt, bool is_test, int i, char *out, size_t outlen) {
    snprintf(out, outlen, "%s/%s_%s_%d.txt", opt->output_dir, opt->output_name_prefix,
             is_test ? "test" : "training", i);
}

/* ---- Documents: reading, cleaning, splitting ---------------------------------------- */

size_t utf8_sanitize(const char *in, size_t len, char **buf, size_t *cap, long long *n_invalid) {
    if (*cap < 3 * len + 1) {
        *cap = 3 * len + 1;
        *buf = xrealloc(*buf, *cap);
    }
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned char b = (unsigned char)in[i];
        if (b < 0x80) {
            (*buf)[o++] = (char)b;
            i++;
            continue;
        }
        int n;
        if (utf8_decode((const unsigned char *)in + i, len - i, &n) < 0) {
            memcpy(*buf + o, "\xEF\xBF\xBD", 3); /* U+FFFD */
            o += 3;
            i++;
            if (n_invalid) (*n_invalid)++;
            continue;
        }
        memcpy(*buf + o, in + i, (size_t)n);
        o += (size_t)n;
        i += (size_t)n;
    }
    (*buf)[o] = 0;
    return o;
}

long long write_document_sentences(FILE *out, const SentenceSplitter *sp, SentenceList *sl,
                                   const char *doc, size_t len) {
    split_sentences(sp, doc, len, sl);
    long long bytes = 0;
    for (int i = 0; i < sl->n; i++) {
        size_t n = sl->spans[i].end - sl->spans[i].start;
        fwrite(doc + sl->spans[i].start, 1, n, out);
        fputc('\n', out);
        bytes += (long long)n + 1;
    }
    fputc('\n', out);
    return bytes + 1;
}

/* Where a document is: enough to re-read it in pass 2. */
typedef struct {
    uint64_t offset;
    uint32_t length;
    uint16_t file;
} DocRef;

typedef struct {
    DocRef *refs;
    int32_t *sentences;
    long long n, cap;
} DocTable;

static void doc_table_push(DocTable *t, DocRef r) {
    if (t->n == t->cap) {
        t->cap = grow_capacity(t->cap, t->cap + 1, 4096);
        t->refs = xrealloc(t->refs, (size_t)t->cap * sizeof *t->refs);
        t->sentences = xrealloc(t->sentences, (size_t)t->cap * sizeof *t->sentences);
    }
    t->refs[t->n++] = r;
}

/* A batch of documents read in pass 1, split in parallel. */
typedef struct {
    char **lines;
    size_t *lens;
    int n, cap;
    size_t bytes;
} Batch;

static void count_batch(const SentenceSplitter *sp, Batch *b, int32_t *counts, int n_threads,
                        long long *invalid) {
    long long bad = 0;
#pragma omp parallel num_threads(n_threads) reduction(+ : bad)
    {
        SentenceList sl;
        sentence_list_init(&sl);
        char *clean = NULL;
        size_t cap = 0;
#pragma omp for schedule(dynamic, 16)
        for (int i = 0; i < b->n; i++) {
            size_t n = utf8_sanitize(b->lines[i], b->lens[i], &clean, &cap, &bad), kept = utf8_rstrip_len(clean, n);
            counts[i] = split_sentences(sp, clean, kept, &sl);
            TEST_COUNT_WORK((long long)b->lens[i] + RSTRIP_STEPS(n, kept));
        }
        free(clean);
        sentence_list_free(&sl);
    }
    *invalid += bad;
}

static int open_inputs(const ShardOptions *opt, int *fds, BertError *err) {
    for (int f = 0; f < opt->n_input_files; f++) {
        fds[f] = open(opt->input_files[f], O_RDONLY);
        if (fds[f] < 0) {
            for (int g = 0; g < f; g++) close(fds[g]);
            return bert_fail(err, "cannot open input file '%s': %s", opt->input_files[f],
                             strerror(errno));
        }
    }
    return 0;
}

/* Pass 1 state: the batch being filled, progress, and where the documents are. */
typedef struct {
    const ShardOptions *opt;
    const SentenceSplitter *sp;
    DocTable *docs;
    ShardStats *st;
    Batch batch;
    double t0, last_report;
    long long total_bytes; /* of all inputs, for the ETA */
} Pass1;

/* Counts the sentences of the batched documents, then empties the batch. */
static void flush_batch(Pass1 *p) {
    Batch *b = &p->batch;
    count_batch(p->sp, b, p->docs->sentences + (p->docs->n - b->n), p->opt->n_threads,
                &p->st->invalid_utf8_bytes);
    for (int i = 0; i < b->n; i++) free(b->lines[i]);
    b->n = 0;
    b->bytes = 0;
    double now = now_seconds();
    /* a terminal gets one line redrawn each second; a log or pipe a plain line every 10 s */
    const bool tty = isatty(STDERR_FILENO);
    if (p->opt->progress && now - p->last_report > (tty ? 1 : 10)) {
        p->last_report = now;
        double rate = p->st->input_bytes / (now - p->t0);
        fprintf(stderr, "%sshard: pass 1 of 2: %lld documents, %.1f of %.1f MB, %.1f MB/s, ETA %.0f s%s",
                tty ? "\r" : "", p->docs->n, p->st->input_bytes / 1e6, p->total_bytes / 1e6, rate / 1e6,
                rate > 0 ? (double)(p->total_bytes - p->st->input_bytes) / rate : 0.0, tty ? "   " : "\n");
    }
}

/* Records one input line as a document if it is not blank. */
static int add_line(Pass1 *p, int file, uint64_t offset, const char *line, size_t len, BertError *err) {
    size_t kept = utf8_rstrip_len(line, len);
    TEST_COUNT_WORK((long long)len + RSTRIP_STEPS(len, kept));  /* read by getline, then stripped */
    if (kept == 0) return 0;
    if (len > UINT32_MAX)
        return bert_fail(err, "%s: a line of %zu bytes is longer than 4 GiB", p->opt->input_files[file], len);
    doc_table_push(p->docs, (DocRef){offset, (uint32_t)len, (uint16_t)file});
    Batch *b = &p->batch;
    b->lines[b->n] = xmalloc(len);
    memcpy(b->lines[b->n], line, len);
    b->lens[b->n++] = len;
    b->bytes += len;
    if (b->n == b->cap || b->bytes > (8u << 20)) flush_batch(p);
    return 0;
}

static int read_file_documents(Pass1 *p, int f, BertError *err) {
    const char *path = p->opt->input_files[f];
    FILE *fp = fopen(path, "rb");
    if (!fp) return bert_fail(err, "cannot open input file '%s': %s", path, strerror(errno));
    uint64_t offset = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    int rc = 0;
    while (rc == 0 && (got = getline(&line, &line_cap, fp)) >= 0) {
        p->st->input_bytes += got;
        rc = add_line(p, f, offset, line, (size_t)got, err);
        offset += (uint64_t)got;
    }
    if (rc == 0 && ferror(fp)) rc = bert_fail(err, "error reading '%s'", path);
    free(line);
    fclose(fp);
    return rc;
}

/* Pass 1: every non-blank line is a document; its sentence count and position. */
static int read_documents(const ShardOptions *opt, const SentenceSplitter *sp, DocTable *docs,
                          ShardStats *st, BertError *err) {
    Pass1 p = {.opt = opt, .sp = sp, .docs = docs, .st = st};
    p.batch.cap = 4096;
    p.batch.lines = xcalloc((size_t)p.batch.cap, sizeof *p.batch.lines);
    p.batch.lens = xcalloc((size_t)p.batch.cap, sizeof *p.batch.lens);
    p.t0 = p.last_report = now_seconds();
    for (int f = 0; f < opt->n_input_files; f++) {
        struct stat sb;
        if (stat(opt->input_files[f], &sb) == 0) p.total_bytes += sb.st_size;
    }
    int rc = 0;
    for (int f = 0; f < opt->n_input_files && rc == 0; f++) rc = read_file_documents(&p, f, err);
    if (rc == 0 && p.batch.n) flush_batch(&p);
    for (int i = 0; i < p.batch.n; i++) free(p.batch.lines[i]);
    free(p.batch.lines);
    free(p.batch.lens);
    if (opt->progress) fprintf(stderr, "\n");
    return rc;
}

/* ---- NVIDIA's distribution of documents over shards --------------------------------- */

typedef struct {
    int32_t *docs; /* in the order NVIDIA appends them */
    long long n, cap;
    long long sentences;
} Shard;

static void shard_append(Shard *s, int32_t doc, int32_t sentences) {
    ARRAY_RESERVE(s->docs, s->cap, (size_t)s->n + 1, 64);
    s->docs[s->n++] = doc;
    s->sentences += sentences;
}

/* TextSharding's sentence_counts: for each count c, a stack of documents with c sentences,
 * plus, for the "step down to the next non-empty count" loops, a union-find pointer to
 * the largest count <= c whose stack is not empty (stacks only shrink). */
typedef struct {
    int32_t *ids;       /* documents sorted by count, stable */
    long long *start;   /* stack c is ids[start[c] .. start[c] + len[c]) */
    long long *len;
    int32_t *down;      /* down[c] == c while stack c is non-empty */
    int32_t max_count;
} CountStacks;

static int32_t stacks_find(CountStacks *cs, int32_t c) { /* largest non-empty <= c, or 0 */
    if (c <= 0) return c;
    int32_t root = c;
    while (root > 0 && cs->len[root] == 0) root = cs->down[root], TEST_COUNT_WORK(1);
    while (c != root) { /* path compression */
        int32_t next = cs->down[c];
        cs->down[c] = root;
        c = next;
        TEST_COUNT_WORK(1);
    }
    return root;
}

static int32_t stacks_pop(CountStacks *cs, int32_t c) {
    int32_t doc = cs->ids[cs->start[c] + --cs->len[c]];
    if (cs->len[c] == 0 && c > 0) cs->down[c] = c - 1;
    return doc;
}

static void stacks_build(CountStacks *cs, const int32_t *counts, long long n, long long seed) {
    int32_t *order = xmalloc((size_t)(n ? n : 1) * sizeof *order);
    for (long long i = 0; i < n; i++) order[i] = (int32_t)i;
    if (seed >= 0) { /* Fisher-Yates with splitmix64: a seeded, reproducible order */
        uint64_t x = (uint64_t)seed;
        for (long long i = n - 1; i > 0; i--) {
            uint64_t z = (x += 0x9E3779B97F4A7C15ull);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            long long j = (long long)(z % (uint64_t)(i + 1));
            int32_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    cs->max_count = 0;
    for (long long i = 0; i < n; i++)
        if (counts[i] > cs->max_count) cs->max_count = counts[i];
    size_t nb = (size_t)cs->max_count + 1;
    cs->start = xcalloc(nb, sizeof *cs->start);
    cs->len = xcalloc(nb, sizeof *cs->len);
    cs->down = xmalloc(nb * sizeof *cs->down);
    for (long long i = 0; i < n; i++) cs->len[counts[i]]++;
    for (size_t c = 1; c < nb; c++) cs->start[c] = cs->start[c - 1] + cs->len[c - 1];
    long long *fill = xcalloc(nb, sizeof *fill);
    cs->ids = xmalloc((size_t)(n ? n : 1) * sizeof *cs->ids);
    for (long long i = 0; i < n; i++) {
        int32_t d = order[i], c = counts[d];
        cs->ids[cs->start[c] + fill[c]++] = d;
    }
    for (size_t c = 0; c < nb; c++) cs->down[c] = cs->len[c] || c == 0 ? (int32_t)c : (int32_t)c - 1;
    TEST_COUNT_WORK(3 * n + 3 * (long long)nb);
    free(fill);
    free(order);
}

static void stacks_free(CountStacks *cs) {
    free(cs->ids);
    free(cs->start);
    free(cs->len);
    free(cs->down);
}

static int cmp_ll(const void *a, const void *b) {
    TEST_COUNT_WORK(1);
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* statistics.median of the shards' sentence counts (stale[] receives them). */
static double shards_median(const Shard *s, int n, long long *stale, long long *tmp) {
    if (n == 0) return 0;   /* no test shards */
    for (int i = 0; i < n; i++) stale[i] = tmp[i] = s[i].sentences;
    TEST_COUNT_WORK(n);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_ll);
    return n % 2 ? (double)tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2.0;
}

/* One round over a set of shards: each below the median takes the largest document that
 * fits its nominal size, judged on the counts at the start of the round. */
static long long fill_round(CountStacks *cs, const int32_t *counts, Shard *s, int n,
                            const long long *stale, double median, long long nominal) {
    long long placed = 0;
    TEST_COUNT_WORK(n);
    for (int i = 0; i < n; i++) {
        long long want = nominal - stale[i];
        int32_t next = (int32_t)(want < cs->max_count ? want : cs->max_count);
        cs->max_count = stacks_find(cs, cs->max_count);
        next = stacks_find(cs, next);
        /* next < 0 would make NVIDIA's script fail (pop from an empty list); skip it */
        if (next <= 0 || (double)stale[i] > median || cs->len[next] == 0) continue;
        int32_t doc = stacks_pop(cs, next);
        shard_append(&s[i], doc, counts[doc]);
        placed++;
    }
    return placed;
}

/* Places each document in one shard exactly as TextSharding.distribute_articles_over_shards. */
static void plan_shards(const int32_t *counts, long long n_docs, const ShardOptions *opt,
                        Shard *train, Shard *test) {
    int nt = opt->n_training_shards, ne = opt->n_test_shards;
    CountStacks cs;
    stacks_build(&cs, counts, n_docs, opt->random_seed);
    long long total = 0;
    for (long long i = 0; i < n_docs; i++) total += counts[i];
    /* without test shards every sentence is for training */
    long long train_sentences = ne ? (long long)((1.0 - opt->fraction_test_set) * (double)total) : total;
    long long nominal_train = train_sentences / nt, nominal_test = ne ? (total - train_sentences) / ne : 0;
    long long consumed = 0;
    for (int pass = 0; pass < 2; pass++) { /* one (largest) document per shard first */
        Shard *s = pass ? test : train;
        long long *nominal = pass ? &nominal_test : &nominal_train;
        for (int i = 0; i < (pass ? ne : nt); i++) {
            int32_t doc = stacks_pop(&cs, cs.max_count);
            cs.max_count = stacks_find(&cs, cs.max_count);
            shard_append(&s[i], doc, counts[doc]);
            consumed++;
            if (counts[doc] > *nominal) *nominal = counts[doc];
        }
    }
    int most = nt > ne ? nt : ne;
    long long *stale_train = xmalloc((size_t)nt * sizeof(long long));
    long long *stale_test = xmalloc((size_t)ne * sizeof(long long));
    long long *tmp = xmalloc((size_t)most * sizeof(long long));
    double median_train = shards_median(train, nt, stale_train, tmp);
    double median_test = shards_median(test, ne, stale_test, tmp);
    long long history[4];
    int n_history = 0, idle_rounds = 0;
    while (consumed < n_docs) {
        long long placed = fill_round(&cs, counts, train, nt, stale_train, median_train, nominal_train);
        placed += fill_round(&cs, counts, test, ne, stale_test, median_test, nominal_test);
        consumed += placed;
        if (n_history == 4) memmove(history, history + 1, 3 * sizeof *history), n_history--;
        history[n_history++] = n_docs - consumed;
        bool same = true;
        for (int i = 1; i < n_history; i++) same = same && history[i - 1] == history[i];
        if (same) nominal_train++;
        median_train = shards_median(train, nt, stale_train, tmp);
        median_test = shards_median(test, ne, stale_test, tmp);
        idle_rounds = placed ? 0 : idle_rounds + 1;
        if (idle_rounds > 1000 && stacks_find(&cs, cs.max_count) == 0) {
            /* only sentence-less documents are left, which NVIDIA's loop never places */
            for (int i = 0; consumed < n_docs; i = (i + 1) % nt, consumed++)
                shard_append(&train[i], stacks_pop(&cs, 0), 0);
        }
    }
    free(stale_train);
    free(stale_test);
    free(tmp);
    stacks_free(&cs);
}

/* ---- Pass 2: writing the shards ----------------------------------------------------- */

/* Writes one shard to af (already open), reading its documents back from fds. */
static int write_shard(const Shard *s, const DocTable *docs, const int *fds,
                       const SentenceSplitter *sp, AtomicFile *af, long long *bytes, BertError *err) {
    SentenceList sl;
    sentence_list_init(&sl);
    char *raw = NULL, *clean = NULL;
    size_t raw_cap = 0, clean_cap = 0;
    int rc = 0;
    for (long long k = 0; k < s->n && rc == 0; k++) {
        const DocRef *r = &docs->refs[s->docs[k]];
        if (raw_cap < r->length) raw = xrealloc(raw, raw_cap = r->length);
        ssize_t got = pread(fds[r->file], raw, r->length, (off_t)r->offset);
        if (got != (ssize_t)r->length) {
            rc = bert_fail(err, "input file changed while sharding (short read at byte %llu)",
                           (unsigned long long)r->offset);
            break;
        }
        size_t n = utf8_sanitize(raw, r->length, &clean, &clean_cap, NULL), kept = utf8_rstrip_len(clean, n);
        long long written = write_document_sentences(af->fp, sp, &sl, clean, kept);
        *bytes += written;
        TEST_COUNT_WORK(2 * (long long)r->length + RSTRIP_STEPS(n, kept) + written);  /* read, sanitized, stripped, written */
    }
    if (rc == 0 && ferror(af->fp)) rc = bert_fail(err, "error writing '%s'", af->path);
    free(raw);
    free(clean);
    sentence_list_free(&sl);
    return rc;
}

/* A shard written, synced and closed, waiting to be published: its temporary and its output.
 * Only the names are kept, not the file, so a million shards need no million open files
 * (holding every shard open until the end failed past the usual limit of 1024 descriptors,
 * after the whole of pass 2 had run). */
typedef struct {
    char *tmp_path, *path;   /* NULL: nothing to publish (not written, or a device written through) */
} WrittenShard;

static int write_all_shards(const ShardOptions *opt, const Shard *train, const Shard *test,
                            const DocTable *docs, const SentenceSplitter *sp, ShardStats *st,
                            BertError *err) {
    int nt = opt->n_training_shards, n_all = nt + opt->n_test_shards;
    int *fds = xmalloc((size_t)opt->n_input_files * sizeof *fds);
    if (open_inputs(opt, fds, err) != 0) {
        free(fds);
        return -1;
    }
    WrittenShard *written = xcalloc((size_t)n_all, sizeof *written);
    int failed = 0, shards_done = 0;
    long long bytes = 0;
    BertError first_err = {{0}};
#pragma omp parallel for schedule(dynamic, 1) num_threads(opt->n_threads) reduction(+ : bytes)
    for (int i = 0; i < n_all; i++) {
        bool is_test = i >= nt;
        int idx = is_test ? i - nt : i;
        char path[4096];
        shard_path(opt, is_test, idx, path, sizeof path);
        BertError e;
        int rc;
        int stop;
#pragma omp atomic read
        stop = failed;
        if (stop) continue;
        AtomicFile af;
        rc = atomic_open(&af, path, &e);
        if (rc == 0) {
            setvbuf(af.fp, NULL, _IOFBF, 1 << 20);
            rc = write_shard(is_test ? &test[idx] : &train[idx], docs, fds, sp, &af, &bytes, &e);
            if (rc != 0) atomic_abort(&af);
            else rc = atomic_close(&af, &e);   /* on an error it removed the temporary */
            if (rc == 0 && !af.direct) written[i] = (WrittenShard){xstrdup(af.tmp_path), xstrdup(af.path)};
        }
        if (rc == 0 && opt->progress) {
            int done;
#pragma omp atomic capture
            done = ++shards_done;
            /* redrawn on a terminal; in a log one line per tenth of the shards */
            if (isatty(STDERR_FILENO))
                fprintf(stderr, "\rshard: pass 2 of 2: %d of %d shards written   %s", done, n_all,
                        done == n_all ? "\n" : "");
            else if (done == n_all || done * 10 / n_all != (done - 1) * 10 / n_all)
                fprintf(stderr, "shard: pass 2 of 2: %d of %d shards written\n", done, n_all);
        }
        if (rc != 0) {
#pragma omp critical(shard_error)
            {
                if (!failed) first_err = e;
#pragma omp atomic write
                failed = 1;
            }
        }
    }
    char published[4096 + 64] = "";   /* one shard's path, for its folder */
    for (int i = 0; i < n_all; i++) { /* published only when every shard is whole */
        if (written[i].tmp_path) {
            if (failed) atomic_tmp_discard(written[i].tmp_path);
            else if (atomic_rename(written[i].tmp_path, written[i].path, &first_err) != 0) failed = 1;   /* it removed the temporary */
            else if (!published[0]) snprintf(published, sizeof published, "%s", written[i].path);
        }
        free(written[i].tmp_path);
        free(written[i].path);
    }
    /* the renames to stable storage: the shards' folder synced once, not once a shard */
    if (!failed && published[0] && sync_folder_of(published, &first_err) != 0) failed = 1;
    for (int f = 0; f < opt->n_input_files; f++) close(fds[f]);
    free(fds);
    free(written);
    st->output_bytes = bytes;
    if (failed) return bert_fail(err, "%s", first_err.msg);
    return 0;
}

static int check_options(const ShardOptions *opt, BertError *err) {
    if (!opt->input_files || opt->n_input_files < 1) return bert_fail(err, "no input files given");
    if (opt->n_input_files > UINT16_MAX) return bert_fail(err, "too many input files (%d)", opt->n_input_files);
    if (!opt->output_dir || !*opt->output_dir) return bert_fail(err, "no output directory given");
    if (!opt->output_name_prefix || !*opt->output_name_prefix || strchr(opt->output_name_prefix, '/'))
        return bert_fail(err, "output name prefix must be a non-empty file name, got '%s'",
                         opt->output_name_prefix ? opt->output_name_prefix : "");
    if (opt->n_training_shards < 1 || opt->n_test_shards < 0)
        return bert_fail(err, "need at least one training shard and no negative count of test shards (got %d and %d)",
                         opt->n_training_shards, opt->n_test_shards);
    if (opt->n_training_shards > MAX_SHARDS || opt->n_test_shards > MAX_SHARDS)
        return bert_fail(err, "at most %d training and %d test shards (got %d and %d)", MAX_SHARDS, MAX_SHARDS,
                         opt->n_training_shards, opt->n_test_shards);
    if (!(opt->fraction_test_set >= 0 && opt->fraction_test_set < 1))
        return bert_fail(err, "fraction_test_set must be in [0, 1), got %g", opt->fraction_test_set);
    /* Inputs by identity (device and inode), looked up once each: there may be thousands of
     * inputs and a million shards. */
    FileSet *inputs = file_set_new(opt->input_files, opt->n_input_files);
    int first, second, rc = 0;
    if (file_set_duplicate(inputs, &first, &second))  /* one file under two names would be sharded twice */
        rc = bert_fail(err, "input files '%s' and '%s' are the same file", opt->input_files[first],
                       opt->input_files[second]);
    /* an input that is one of the outputs would be replaced by it */
    char path[4200];
    for (int t = 0; t < 2 && rc == 0; t++)
        for (int i = 0; i < (t ? opt->n_test_shards : opt->n_training_shards) && rc == 0; i++) {
            shard_path(opt, t == 1, i, path, sizeof path);
            int k = file_set_find(inputs, path);
            if (k >= 0)
                rc = bert_fail(err, "input '%s' is output shard '%s': it would be replaced; move it out of %s",
                               opt->input_files[k], path, opt->output_dir);
        }
    file_set_free(inputs);
    return rc;
}

int shard_corpus(const ShardOptions *opt_in, ShardStats *stats, BertError *err) {
    ShardOptions opt = *opt_in;
    if (opt.n_threads <= 0) opt.n_threads = omp_get_max_threads();
    ShardStats st;
    memset(&st, 0, sizeof st);
    double t0 = now_seconds();
    if (check_options(&opt, err) != 0) return -1;
    SentenceSplitter *sp = sentence_splitter_new();
    DocTable docs = {0};
    int rc = read_documents(&opt, sp, &docs, &st, err);
    int n_shards = opt.n_training_shards + opt.n_test_shards;
    if (rc == 0 && docs.n < n_shards)
        rc = bert_fail(err, "there are fewer documents (%lld) than shards (%d): add data or ask "
                       "for fewer shards (--n_training_shards, --n_test_shards)", docs.n, n_shards);
    if (rc == 0 && docs.n >= INT32_MAX) rc = bert_fail(err, "too many documents (%lld)", docs.n);
    Shard *train = xcalloc((size_t)opt.n_training_shards, sizeof *train);
    Shard *test = xcalloc((size_t)opt.n_test_shards, sizeof *test);
    if (rc == 0) {
        plan_shards(docs.sentences, docs.n, &opt, train, test);
        rc = make_dirs(opt.output_dir, err);
    }
    if (rc == 0) rc = write_all_shards(&opt, train, test, &docs, sp, &st, err);
    if (rc == 0) {
        st.documents = docs.n;
        st.min_shard_sentences = train[0].sentences;
        for (int i = 0; i < opt.n_training_shards; i++) {
            st.sentences += train[i].sentences;
            if (train[i].sentences < st.min_shard_sentences) st.min_shard_sentences = train[i].sentences;
            if (train[i].sentences > st.max_shard_sentences) st.max_shard_sentences = train[i].sentences;
        }
        for (int i = 0; i < opt.n_test_shards; i++) st.sentences += test[i].sentences;
    }
    for (int i = 0; i < opt.n_training_shards; i++) free(train[i].docs);
    for (int i = 0; i < opt.n_test_shards; i++) free(test[i].docs);
    free(train);
    free(test);
    free(docs.refs);
    free(docs.sentences);
    sentence_splitter_free(sp);
    st.seconds = now_seconds() - t0;
    if (stats) *stats = st;
    return rc;
}
