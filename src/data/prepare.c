/* `bert prepare`: format -> shard -> create_pretraining_data, NVIDIA's folder layout. */
#include "data/prepare.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bundled.h"
#include "core/launcher.h"
#include "data/corpus.h"
#include "data/hdf5_shard.h"
#include "data/progress.h"
#include "data/step_manifest.h"

PrepareOptions prepare_default_options(void) {
    PrepareOptions o;
    memset(&o, 0, sizeof o);
    o.work_dir = "prepared";
    static char vocab[4096];   /* bundled with bert.c, found from the program's location */
    bundled_data_path("vocab/bert-base-uncased-vocab.txt", vocab, sizeof vocab);
    o.vocab_file = vocab;
    o.do_format = o.do_shard = o.do_hdf5 = true;
    o.n_training_shards = o.n_test_shards = PREPARE_AUTO;
    o.fraction_test_set = 0.1;
    o.max_shard_mb = 256;
    o.strip_gutenberg = true;
    o.base = pretraining_default_options();
    o.base.dupe_factor = 5; /* bertPrep.py's default */
    o.phase1_seq_length = 128, o.phase1_predictions = 20;
    o.phase2_seq_length = 512, o.phase2_predictions = 80;
    o.max_input_chars_per_word = 200;
    return o;
}

void python_float_str(double x, char *out, size_t outlen) {
    /* repr(float): the shortest digits that read back as the same double. */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, outlen, "%.*g", prec, x);
        if (strtod(out, NULL) == x) break;
    }
    if (!strpbrk(out, ".en")) strncat(out, ".0", outlen - strlen(out) - 1); /* 1 -> "1.0" */
}

/* ---- Step 1: formatting ------------------------------------------------------------ */

typedef enum { SOURCE_BOOKS, SOURCE_WIKIPEDIA, SOURCE_TEXT } SourceKind;

typedef struct {
    char path[4096];
    const char *source;
    SourceKind kind;
} FormatJob;

/* A file's name without folder and last extension, as a dataset name may hold it: letters,
 * digits, '-' kept, anything else '_' ("wiki.train.raw" -> "wiki_train"), and the loader's
 * "test" / "training" written "tst" / "trn" (see prepare.h). */
static void file_stem(const char *path, char *out, size_t len) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot > base ? (size_t)(dot - base) : strlen(base), k = 0;
    for (size_t i = 0; i < n && k + 4 < len;) {
        const char *word = i + 8 <= n && !strncmp(base + i, "training", 8) ? "trn"
                           : i + 4 <= n && !strncmp(base + i, "test", 4)   ? "tst" : NULL;
        if (word) {
            memcpy(out + k, word, 3), k += 3, i += word[1] == 'r' ? 8 : 4;
            continue;
        }
        unsigned char c = (unsigned char)base[i++];
        out[k++] = (char)((c < 128 && (isalnum(c) || c == '-')) ? c : '_');
    }
    out[k] = 0;
    if (!out[0]) snprintf(out, len, "text");
}

/* The stem of the first of n files, "<stem>_and_<n-1>_more" for several. */
static void files_name(const char *const *files, int n, char *out, size_t len) {
    file_stem(files[0], out, len);
    size_t k = strlen(out);
    if (n > 1) snprintf(out + k, len - k, "_and_%d_more", n - 1);
}

void prepare_dataset_name(const PrepareOptions *o, char *out, size_t len) {
    if (o->dataset) { snprintf(out, len, "%s", o->dataset); return; }
    char parts[3][256] = {"", "", ""};
    if (o->n_wikipedia && o->n_books) snprintf(parts[0], sizeof parts[0], "books_wiki_en_corpus");
    else if (o->n_wikipedia) snprintf(parts[0], sizeof parts[0], "wikicorpus_en");
    else if (o->n_books) snprintf(parts[0], sizeof parts[0], "bookscorpus");
    if (o->n_text) files_name(o->text, o->n_text, parts[1], sizeof parts[1]);
    if (o->n_formatted) files_name(o->formatted, o->n_formatted, parts[2], sizeof parts[2]);
    out[0] = 0;
    for (int p = 0; p < 3; p++) {
        if (!parts[p][0]) continue;
        size_t k = strlen(out);
        snprintf(out + k, len - k, "%s%s", k ? "_" : "", parts[p]);
    }
    if (!out[0]) snprintf(out, len, "corpus");
}

/* NVIDIA's formatted file names (a plain-text file's stem for --text); a number is appended
 * when there are several sources of a kind. */
static void formatted_name(const PrepareOptions *o, const FormatJob *j, int k, int n, char *out, size_t len) {
    char stem[300];
    if (j->kind == SOURCE_TEXT) {
        char s[256];
        file_stem(j->source, s, sizeof s);
        snprintf(stem, sizeof stem, "%s_one_document_per_line", s);
    } else {
        snprintf(stem, sizeof stem, "%s", j->kind == SOURCE_WIKIPEDIA ? "wikicorpus_en_one_article_per_line"
                                                                      : "bookscorpus_one_book_per_line");
    }
    char index[32] = "";
    if (n > 1) snprintf(index, sizeof index, "_%d", k);
    snprintf(out, len, "%s/formatted_one_article_per_line/%s%s.txt", o->work_dir, stem, index);
}

static void add_jobs(const PrepareOptions *o, const char *const *sources, int n, SourceKind kind, FormatJob *jobs,
                     int *n_jobs) {
    for (int k = 0; k < n; k++, (*n_jobs)++) {
        FormatJob *j = &jobs[*n_jobs];
        j->source = sources[k], j->kind = kind;
        formatted_name(o, j, k, n, j->path, sizeof j->path);
    }
}

/* Books first, then Wikipedia: the order bertPrep.py gives the sharder for
 * books_wiki_en_corpus, which decides how documents are dealt to shards; plain text last. */
static int list_format_jobs(const PrepareOptions *o, FormatJob *jobs) {
    int n = 0;
    add_jobs(o, o->books, o->n_books, SOURCE_BOOKS, jobs, &n);
    add_jobs(o, o->wikipedia, o->n_wikipedia, SOURCE_WIKIPEDIA, jobs, &n);
    add_jobs(o, o->text, o->n_text, SOURCE_TEXT, jobs, &n);
    return n;
}

/* A format job's inputs for the step manifest: the dump, or the books format_books will
 * read (its own list). The caller frees them (free_paths). */
static int format_inputs(const FormatJob *j, char ***names) {
    int n = 0;
    BertError ignored;   /* a folder that cannot be listed fails the format step itself */
    if (j->kind == SOURCE_BOOKS && format_list_books(j->source, names, &n, &ignored) == 0) return n;
    *names = xmalloc(sizeof **names);
    (*names)[0] = xstrdup(j->source);
    return 1;
}

static int run_format(const PrepareOptions *o, const FormatJob *jobs, int n_jobs,
                      PrepareStats *st, BertError *err) {
    char dir[4200], manifest_path[4300], pattern[4300];
    snprintf(dir, sizeof dir, "%s/formatted_one_article_per_line", o->work_dir);
    if (n_jobs && make_dirs(dir, err) != 0) return -1;
    snprintf(manifest_path, sizeof manifest_path, "%s/.bert_prepare_format.json", dir);
    snprintf(pattern, sizeof pattern, "%s", manifest_path);
    StepManifest *manifest = step_manifest_load(pattern);
    int failed = 0;
    FormatOptions fo = format_default_options();
    fo.strip_gutenberg = o->strip_gutenberg;
    fo.progress = !o->quiet && n_jobs == 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_jobs > 1 ? n_jobs : 1)
    for (int k = 0; k < n_jobs; k++) {
        FormatStats fs;
        BertError e;
        char **inputs;
        const int n_inputs = format_inputs(&jobs[k], &inputs);
        const char *output = jobs[k].path;
        /* a text file taken whole is another formatting of it */
        const bool whole = jobs[k].kind == SOURCE_TEXT && o->text_whole_files;
        char options[64];
        snprintf(options, sizeof options, "format%s%s", o->strip_gutenberg ? " strip_gutenberg" : "",
                 whole ? " whole_file" : "");
        bool done;
#pragma omp critical(prepare_format)
        done = o->resume && step_manifest_done(manifest, &output, 1, (const char *const *)inputs, n_inputs, options);
        if (done) {
            if (!o->quiet) fprintf(stderr, "format: %s unchanged since it was written (--resume)\n", output);
            free_paths(inputs, n_inputs);
            continue;
        }
        int rc = jobs[k].kind == SOURCE_WIKIPEDIA ? format_wikipedia(jobs[k].source, jobs[k].path, &fo, &fs, &e)
                 : jobs[k].kind == SOURCE_TEXT && !whole ? format_text(jobs[k].source, jobs[k].path, &fo, &fs, &e)
                                                  : format_books(jobs[k].source, jobs[k].path, &fo, &fs, &e);
#pragma omp critical(prepare_format)
        {
            if (rc == 0 && step_manifest_record(manifest, manifest_path, &output, 1, (const char *const *)inputs,
                                                n_inputs, options, &e) != 0)
                rc = -1;
            if (rc != 0 && !failed) *err = e, failed = 1;
            if (rc == 0) {
                st->documents += fs.documents_written;
                if (!o->quiet)
                    fprintf(stderr, "format: %s -> %s: %lld documents, %.1f MB in %.1f s\n", jobs[k].source,
                            jobs[k].path, fs.documents_written, fs.output_bytes / 1e6, fs.seconds);
            }
        }
        free_paths(inputs, n_inputs);
    }
    step_manifest_free(manifest);
    return failed ? -1 : 0;
}

/* ---- Step 2: sharding --------------------------------------------------------------- */

/* Documents (non-blank lines) and bytes of the formatted files. */
static int count_documents(const char *const *files, int n, long long *docs, long long *bytes, BertError *err) {
    *docs = 0, *bytes = 0;
    char *buf = xmalloc(1 << 20);
    for (int k = 0; k < n; k++) {
        FILE *f = fopen(files[k], "rb");
        if (!f) { free(buf); return bert_fail(err, "cannot open %s: %s", files[k], strerror(errno)); }
        bool blank = true;
        size_t got;
        while ((got = fread(buf, 1, 1 << 20, f)) > 0) {
            *bytes += (long long)got;
            for (size_t i = 0; i < got; i++) {
                if (buf[i] == '\n') { *docs += !blank; blank = true; }
                else if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\r') blank = false;
            }
        }
        *docs += !blank;
        fclose(f);
    }
    free(buf);
    return 0;
}

/* As many shards of one kind as `bert shard` accepts. */
#define PREPARE_MAX_SHARDS (1 << 20)

/* Training shards from the size: about PREPARE_SHARD_MB each, 1 to NVIDIA's 256, more when
 * one would pass max_shard_mb. */
static int training_shards_by_size(const PrepareOptions *o, double train_mb) {
    double want = ceil(train_mb / PREPARE_SHARD_MB);
    if (want > PREPARE_NVIDIA_SHARDS) want = PREPARE_NVIDIA_SHARDS;
    if (o->max_shard_mb > 0 && train_mb / want > o->max_shard_mb) want = ceil(train_mb / o->max_shard_mb);
    /* clamped before the cast: a tiny max_shard_mb must not overflow */
    return want < 1 ? 1 : want > PREPARE_MAX_SHARDS ? PREPARE_MAX_SHARDS : (int)want;
}

/* The automatic counts cut to documents / 4 shards (see prepare.h). */
static void fit_to_documents(const PrepareOptions *o, long long docs, bool auto_train, bool auto_test, int *n_train,
                             int *n_test) {
    long long limit = docs >= 2 ? (docs / 4 > 2 ? docs / 4 : 2) : 1;
    if (*n_train + *n_test <= limit) return;
    int min_test = o->fraction_test_set > 0 && limit >= 2 ? 1 : 0;
    if (auto_train && auto_test) {
        long long test = llround((double)limit * o->fraction_test_set);
        *n_test = (int)(test < min_test ? min_test : test);
        *n_train = (int)(limit - *n_test);
    } else if (auto_train) {
        *n_train = (int)(limit - *n_test < 1 ? 1 : limit - *n_test);
    } else if (auto_test) {
        long long room = limit - *n_train;
        *n_test = (int)(room < min_test ? (docs > *n_train ? min_test : 0) : room);
    }
}

int prepare_choose_shards(const PrepareOptions *o, long long docs, long long bytes, int *n_train, int *n_test,
                          char *why, size_t why_len, BertError *err) {
    const bool auto_train = o->n_training_shards == PREPARE_AUTO, auto_test = o->n_test_shards == PREPARE_AUTO;
    const double f = o->fraction_test_set, train_mb = (double)bytes * (1 - f) / 1e6;
    if (docs < 1) return bert_fail(err, "the corpus has no text (no document after formatting)");
    *n_train = auto_train ? training_shards_by_size(o, train_mb) : o->n_training_shards;
    if (auto_test) {
        long long test = f > 0 ? llround(*n_train * f / (1 - f)) : 0;
        *n_test = (int)(f > 0 && test < 1 ? 1 : test > PREPARE_MAX_SHARDS ? PREPARE_MAX_SHARDS : test);
    } else {
        *n_test = o->n_test_shards;
    }
    const int by_size_train = *n_train, by_size_test = *n_test;
    fit_to_documents(o, docs, auto_train, auto_test, n_train, n_test);
    if ((long long)*n_train + *n_test > docs) {
        char asked[128];
        snprintf(asked, sizeof asked, "%s%s%s", auto_train ? "" : "--n_training_shards",
                 !auto_train && !auto_test ? " and " : "", auto_test ? "" : "--n_test_shards");
        return bert_fail(err, "%s ask%s for %d shards in all (%d training + %d test) but the corpus has %lld "
                         "document%s, and each shard needs one: ask for at most %lld, or leave %s out to have "
                         "the counts chosen from the data", asked, !auto_train && !auto_test ? "" : "s",
                         *n_train + *n_test, *n_train, *n_test, docs, docs == 1 ? "" : "s", docs,
                         !auto_train && !auto_test ? "them" : "it");
    }
    if (!why || (!auto_train && !auto_test)) {
        if (why) why[0] = 0;
        return 0;
    }
    const bool cut = *n_train != by_size_train || *n_test != by_size_test;
    char size_rule[160];
    snprintf(size_rule, sizeof size_rule, "training shards of about %.0f MB (at most %d unless --max_shard_mb), test "
             "shards as big for --fraction_test_set", PREPARE_SHARD_MB, PREPARE_NVIDIA_SHARDS);
    const char *reason = !cut ? size_rule
                         : docs == 1 ? "one document makes one training shard and no test shard"
                         : !auto_train ? "test shards only where documents are left beside the training shards asked for"
                                       : "at most one shard per 4 documents, so a random next sentence can come from "
                                         "another document";
    snprintf(why, why_len, "%d training + %d test shard%s for %lld document%s, %.1f MB: %s%s", *n_train, *n_test,
             *n_train + *n_test == 1 ? "" : "s", docs, docs == 1 ? "" : "s", bytes / 1e6, reason,
             "; --n_training_shards / --n_test_shards choose them");
    return 0;
}

/* The share of sentences the test shards get: none without test shards. */
static double test_fraction(const PrepareOptions *o, int n_test) { return n_test > 0 ? o->fraction_test_set : 0; }

static void sharded_dir(const PrepareOptions *o, int n_train, int n_test, const char *dataset, char *out, size_t len) {
    char frac[32];
    python_float_str(test_fraction(o, n_test), frac, sizeof frac);
    snprintf(out, len, "%s/sharded_training_shards_%d_test_shards_%d_fraction_%s/%s", o->work_dir, n_train,
             n_test, frac, dataset);
}

/* The shard step, skipped under --resume when its manifest says the formatted inputs and
 * every shard are as it left them. */
static int run_shard(const PrepareOptions *o, const ShardOptions *so, PrepareStats *st, BertError *err) {
    const int n_out = so->n_training_shards + so->n_test_shards;
    char **outputs = xmalloc(sizeof *outputs * (size_t)n_out), manifest_path[4400], options[128];
    for (int i = 0; i < n_out; i++) {
        outputs[i] = xmalloc(4400);
        shard_path(so, i >= so->n_training_shards, i >= so->n_training_shards ? i - so->n_training_shards : i,
                   outputs[i], 4400);
    }
    snprintf(manifest_path, sizeof manifest_path, "%s/.bert_prepare_shard.json", so->output_dir);
    snprintf(options, sizeof options, "shard %d %d %.17g", so->n_training_shards, so->n_test_shards,
             so->fraction_test_set);
    StepManifest *manifest = step_manifest_load(manifest_path);
    int rc = 0;
    if (o->resume && step_manifest_done(manifest, (const char *const *)outputs, n_out, so->input_files,
                                        so->n_input_files, options)) {
        if (!o->quiet) fprintf(stderr, "shard: %s unchanged since it was written (--resume)\n", so->output_dir);
        st->shard_step_skipped = true;
    } else {
        ShardStats ss;
        rc = shard_corpus(so, &ss, err);
        st->documents = ss.documents, st->sentences = ss.sentences;
        st->formatted_bytes = ss.input_bytes, st->shard_bytes = ss.output_bytes;
        if (rc == 0)
            rc = step_manifest_record(manifest, manifest_path, (const char *const *)outputs, n_out, so->input_files,
                                      so->n_input_files, options, err);
    }
    step_manifest_free(manifest);
    free_paths(outputs, n_out);
    return rc;
}

/* Without the shard step (e.g. MPI ranks), find the shard counts from the one sharded
 * folder in the work dir. */
static int find_existing_shards(const PrepareOptions *o, int *n_train, int *n_test, BertError *err) {
    if (o->n_training_shards != PREPARE_AUTO && o->n_test_shards != PREPARE_AUTO) {
        *n_train = o->n_training_shards, *n_test = o->n_test_shards;
        return 0;
    }
    char pattern[4200], train[16] = "*", test[16] = "*";   /* a count given narrows the search */
    if (o->n_training_shards != PREPARE_AUTO) snprintf(train, sizeof train, "%d", o->n_training_shards);
    if (o->n_test_shards != PREPARE_AUTO) snprintf(test, sizeof test, "%d", o->n_test_shards);
    snprintf(pattern, sizeof pattern, "%s/sharded_training_shards_%s_test_shards_%s_*", o->work_dir, train, test);
    glob_t g;
    memset(&g, 0, sizeof g);
    int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc == 1 &&
                sscanf(g.gl_pathv[0] + strlen(o->work_dir), "/sharded_training_shards_%d_test_shards_%d",
                       n_train, n_test) == 2;
    globfree(&g);
    if (!found)
        return bert_fail(err, "cannot tell the shard counts: give --n_training_shards and --n_test_shards "
                              "(there is not exactly one %s)", pattern);
    return 0;
}

/* ---- Step 3: create_pretraining_data on every shard ---------------------------------- */

typedef struct {
    int phase;                /* 0, 1 */
    bool is_test;
    int index;
    char input[4200], output[4200];
    double bytes;             /* size of the input shard */
} Hdf5Job;

/* Largest shard first, so the last jobs to start are short and threads finish together. */
static int larger_job_first(const void *a, const void *b) {
    double x = ((const Hdf5Job *)a)->bytes, y = ((const Hdf5Job *)b)->bytes;
    return x < y ? 1 : x > y ? -1 : 0;
}

typedef struct {
    Progress *progress;
    double *job_bytes;        /* work done so far, in input bytes, per job */
    size_t *job_documents;    /* documents read so far, per job */
    int job;
    int n_jobs;
} JobProgress;

/* Reading is about a quarter of a job's time (generating and writing the rest), so a
 * job's bytes count a quarter while it reads and in full once it is written; the ETA
 * then tracks work rather than reading alone. */
#define READ_SHARE_OF_JOB 0.25

static void job_progress_set(JobProgress *jp, double job_bytes, size_t job_documents) {
    double bytes = 0;
    size_t docs = 0;
#pragma omp critical(prepare_progress)
    {
        jp->job_bytes[jp->job] = job_bytes;
        jp->job_documents[jp->job] = job_documents;
        for (int k = 0; k < jp->n_jobs; k++) bytes += jp->job_bytes[k], docs += jp->job_documents[k];
    }
    progress_update(jp->progress, bytes, docs);
}

static void job_progress(void *ctx, const ReadStats *rs) {
    job_progress_set(ctx, READ_SHARE_OF_JOB * (double)rs->bytes, rs->documents);
}

/* The options an HDF5 shard depends on besides its input and the vocabulary. */
static void hdf5_options(const PrepareOptions *o, int phase, char *out, size_t len) {
    const PretrainingOptions *b = &o->base;
    snprintf(out, len, "hdf5 seq %d preds %d dupe %d seed %lld prob %.17g short %.17g lower %d wwm %d chars %d",
             phase == 0 ? o->phase1_seq_length : o->phase2_seq_length,
             phase == 0 ? o->phase1_predictions : o->phase2_predictions, b->dupe_factor, (long long)b->random_seed,
             b->masked_lm_prob, b->short_seq_prob, b->do_lower_case, b->do_whole_word_mask,
             o->max_input_chars_per_word);
}

static void hdf5_dir(const PrepareOptions *o, int phase, char *out, size_t len) {
    char prob[32];
    python_float_str(o->base.masked_lm_prob, prob, sizeof prob);
    int seq = phase == 0 ? o->phase1_seq_length : o->phase2_seq_length;
    int pred = phase == 0 ? o->phase1_predictions : o->phase2_predictions;
    snprintf(out, len, "%s/hdf5_lower_case_%d_seq_len_%d_max_pred_%d_masked_lm_prob_%s_random_seed_%lld_dupe_factor_%d",
             o->work_dir, o->base.do_lower_case ? 1 : 0, seq, pred, prob, (long long)o->base.random_seed,
             o->base.dupe_factor);
}

static Tokenizer *make_tokenizer(const PrepareOptions *o, Vocab **vocab, BertError *err) {
    if (vocab_load(vocab, o->vocab_file, err) != 0) return NULL;
    TokenizerOptions topt = tokenizer_default_options();
    topt.do_lower_case = o->base.do_lower_case;
    topt.max_input_chars_per_word = o->max_input_chars_per_word;
    Tokenizer *tok = tokenizer_new(*vocab, &topt);
    if (!tok) {
        bert_fail(err, "%s has no [UNK] token", o->vocab_file);
        vocab_free(*vocab);
    }
    return tok;
}

/* Lists this rank's jobs: every phase x (training shards, then test shards). */
static int list_hdf5_jobs(const PrepareOptions *o, const char *shard_dir, const char *dataset, int n_train,
                          int n_test, int rank, int world, PrepareStats *st, Hdf5Job **out, BertError *err) {
    int n_phases = o->phase2_seq_length > 0 ? 2 : 1, all = 0, n = 0;
    Hdf5Job *jobs = xcalloc((size_t)(n_phases * (n_train + n_test)), sizeof *jobs);
    ShardOptions so = shard_default_options();
    so.output_dir = shard_dir, so.output_name_prefix = dataset;
    for (int phase = 0; phase < n_phases; phase++) {
        char dir[4200];
        hdf5_dir(o, phase, st->hdf5_dir[phase], sizeof st->hdf5_dir[phase]);
        snprintf(dir, sizeof dir, "%s/%s", st->hdf5_dir[phase], dataset);
        if (make_dirs(dir, err) != 0) { free(jobs); return -1; }
        for (int t = 0; t < n_train + n_test; t++, all++) {
            if (all % world != rank) continue;
            Hdf5Job *j = &jobs[n++];
            j->phase = phase, j->is_test = t >= n_train, j->index = j->is_test ? t - n_train : t;
            shard_path(&so, j->is_test, j->index, j->input, sizeof j->input);
            if (snprintf(j->output, sizeof j->output, "%s/%s_%s_%d.hdf5", dir, dataset,
                         j->is_test ? "test" : "training", j->index) >= (int)sizeof j->output) {
                free(jobs);
                return bert_fail(err, "output path too long under %s", dir);
            }
        }
    }
    *out = jobs;
    return n;
}

static int run_hdf5(const PrepareOptions *o, const Tokenizer *tok, const char *shard_dir, const char *dataset,
                    int n_train, int n_test, PrepareStats *st, BertError *err) {
    int rank = o->rank, world = o->world_size;
    if (world <= 0) launcher_rank(&rank, &world);
    if (rank < 0 || rank >= world) return bert_fail(err, "rank %d is outside [0, %d)", rank, world);
    Hdf5Job *jobs;
    int n_jobs = list_hdf5_jobs(o, shard_dir, dataset, n_train, n_test, rank, world, st, &jobs, err);
    if (n_jobs < 0) return -1;
    double total = 0;
    for (int k = 0; k < n_jobs; k++) {
        struct stat sb;
        jobs[k].bytes = stat(jobs[k].input, &sb) == 0 ? (double)sb.st_size : 0;
        total += jobs[k].bytes;
    }
    qsort(jobs, (size_t)n_jobs, sizeof *jobs, larger_job_first);
    Progress progress;
    progress_init(&progress, "create_pretraining_data", total, o->quiet);
    double *job_bytes = xcalloc((size_t)n_jobs + 1, sizeof *job_bytes);
    size_t *job_documents = xcalloc((size_t)n_jobs + 1, sizeof *job_documents);
    int failed = 0;
    if (!o->quiet && world > 1) fprintf(stderr, "rank %d of %d: %d of the shard jobs\n", rank, world, n_jobs);
    /* one manifest per rank (ranks write at once); all ranks' are read (the world may differ) */
    char manifest_path[4300], pattern[4300];
    snprintf(manifest_path, sizeof manifest_path, "%s/.bert_prepare_hdf5_rank%d.json", o->work_dir, rank);
    snprintf(pattern, sizeof pattern, "%s/.bert_prepare_hdf5_rank*.json", o->work_dir);
    StepManifest *manifest = step_manifest_load(pattern);
    int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    if (threads > 1 && !hdf5_library_threadsafe()) {
        if (!o->quiet) fprintf(stderr, "prepare: libhdf5 is not thread-safe here; writing one shard at a time\n");
        threads = 1;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int k = 0; k < n_jobs; k++) {
        if (failed) continue;
        const Hdf5Job *j = &jobs[k];
        char options[256];
        hdf5_options(o, j->phase, options, sizeof options);
        const char *output = j->output, *inputs[2] = {j->input, o->vocab_file};
        bool done;
#pragma omp critical(prepare_hdf5)
        done = o->resume && step_manifest_done(manifest, &output, 1, inputs, 2, options);
        if (done) {
#pragma omp atomic
            st->jobs_skipped++;
            continue;
        }
        PretrainingOptions po = o->base;
        po.max_seq_length = j->phase == 0 ? o->phase1_seq_length : o->phase2_seq_length;
        po.max_predictions_per_seq = j->phase == 0 ? o->phase1_predictions : o->phase2_predictions;
        JobProgress jp = {&progress, job_bytes, job_documents, k, n_jobs};
        PretrainingStats ps;
        BertError e;
        int rc = create_pretraining_data(&po, j->input, j->output, tok, &ps, job_progress, &jp, &e);
        if (rc == 0) job_progress_set(&jp, (double)ps.read.bytes, ps.documents);
        struct stat sb;
#pragma omp critical(prepare_hdf5)
        {
            if (rc == 0 && step_manifest_record(manifest, manifest_path, &output, 1, inputs, 2, options, &e) != 0)
                rc = -1;
            if (rc != 0 && !failed) *err = e, failed = 1;
            if (rc == 0) {
                st->instances[j->phase] += (long long)ps.instances;
                if (stat(j->output, &sb) == 0) st->hdf5_bytes[j->phase] += sb.st_size;
                st->jobs_done++;
            }
        }
    }
    progress_done(&progress);
    step_manifest_free(manifest);
    free(job_bytes);
    free(job_documents);
    free(jobs);
    return failed ? -1 : 0;
}

/* ---- The chain ---------------------------------------------------------------------- */

static int check_prepare_options(const PrepareOptions *o, BertError *err) {
    if (o->n_wikipedia + o->n_books + o->n_formatted + o->n_text == 0)
        return bert_fail(err, "no corpus: give --text, --books, --wikipedia or --formatted");
    if (o->n_training_shards != PREPARE_AUTO && o->n_training_shards < 1)
        return bert_fail(err, "--n_training_shards must be at least 1 (got %d); leave it out to have it chosen from "
                              "the data", o->n_training_shards);
    if (o->n_test_shards != PREPARE_AUTO && o->n_test_shards < 0)
        return bert_fail(err, "--n_test_shards must be 0 (no test shards) or more (got %d)", o->n_test_shards);
    if (o->dataset && (!*o->dataset || strchr(o->dataset, '/') || strstr(o->dataset, "test") ||
                       strstr(o->dataset, "training")))
        return bert_fail(err, "--dataset '%s' must be a file name without \"test\" or \"training\" (the loader "
                              "tells training from test shards by those words)", o->dataset);
    PretrainingOptions p = o->base;
    p.max_seq_length = o->phase1_seq_length, p.max_predictions_per_seq = o->phase1_predictions;
    if (pretraining_check_options(&p, err) != 0) return -1;
    p.max_seq_length = o->phase2_seq_length, p.max_predictions_per_seq = o->phase2_predictions;
    if (o->phase2_seq_length > 0 && pretraining_check_options(&p, err) != 0) return -1;
    if (!(o->fraction_test_set >= 0 && o->fraction_test_set < 1))
        return bert_fail(err, "--fraction_test_set must be in [0, 1), got %g", o->fraction_test_set);
    return 0;
}

int prepare_run(const PrepareOptions *o, PrepareStats *st, BertError *err) {
    memset(st, 0, sizeof *st);
    if (check_prepare_options(o, err) != 0) return -1;
    /* the vocabulary first: a bad one (no [UNK]) failed only at the hdf5 step, after
     * formatting and sharding had run */
    Vocab *vocab = NULL;
    Tokenizer *tok = NULL;
    if (o->do_hdf5 && !(tok = make_tokenizer(o, &vocab, err))) return -1;
    char dataset[1024];
    prepare_dataset_name(o, dataset, sizeof dataset);
    FormatJob *fjobs = xcalloc(PREPARE_MAX_SOURCES * 3, sizeof *fjobs);
    int n_fjobs = list_format_jobs(o, fjobs), rc = 0;
    const char *formatted[PREPARE_MAX_SOURCES * 4];
    int n_formatted = 0;
    for (int k = 0; k < n_fjobs; k++) formatted[n_formatted++] = fjobs[k].path;
    for (int k = 0; k < o->n_formatted; k++) formatted[n_formatted++] = o->formatted[k];

    double t0 = now_seconds();
    if (o->do_format) rc = run_format(o, fjobs, n_fjobs, st, err);
    double t1 = now_seconds();
    int n_train = 0, n_test = 0;
    char shard_dir[4400];
    if (rc == 0 && o->do_shard) {
        long long docs, bytes;
        rc = count_documents(formatted, n_formatted, &docs, &bytes, err);
        char why[512];
        if (rc == 0) rc = prepare_choose_shards(o, docs, bytes, &n_train, &n_test, why, sizeof why, err);
        if (rc == 0 && why[0] && !o->quiet) fprintf(stderr, "prepare: %s\n", why);
        /* one document per line is --formatted's meaning; a hard-wrapped text given to it
         * becomes a document per line (issue 36): said, not guessed around */
        if (rc == 0 && !o->quiet && n_fjobs == 0 && docs > 1 && bytes / docs < 120)
            fprintf(stderr, "prepare: note: --formatted takes one whole document per line, and these lines average "
                            "%lld bytes; for ordinary (hard-wrapped, blank-line-separated) text use --text\n",
                    bytes / docs);
        if (rc == 0) {
            sharded_dir(o, n_train, n_test, dataset, shard_dir, sizeof shard_dir);
            ShardOptions so = shard_default_options();
            so.input_files = formatted, so.n_input_files = n_formatted;
            so.output_dir = shard_dir, so.output_name_prefix = dataset;
            so.n_training_shards = n_train, so.n_test_shards = n_test;
            so.fraction_test_set = test_fraction(o, n_test);
            so.n_threads = o->threads, so.progress = !o->quiet;
            rc = run_shard(o, &so, st, err);
        }
    } else if (rc == 0 && o->do_hdf5) {
        rc = find_existing_shards(o, &n_train, &n_test, err);
        if (rc == 0) sharded_dir(o, n_train, n_test, dataset, shard_dir, sizeof shard_dir);
    }
    st->n_training_shards = n_train, st->n_test_shards = n_test;
    double t2 = now_seconds();
    if (rc == 0 && o->do_hdf5) rc = run_hdf5(o, tok, shard_dir, dataset, n_train, n_test, st, err);
    st->seconds_format = t1 - t0, st->seconds_shard = t2 - t1, st->seconds_hdf5 = now_seconds() - t2;
    free(fjobs);
    tokenizer_free(tok);
    vocab_free(vocab);
    return rc;
}
