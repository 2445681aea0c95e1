/* `bert prepare`: NVIDIA's data recipe (bertPrep.py + create_datasets_from_start.sh)
 * in one process, from raw corpus to phase-1 and phase-2 HDF5 shards:
 *
 *   format    Wikipedia dumps, book folders and plain-text files -> one document per line
 *             <work>/formatted_one_article_per_line/{wikicorpus_en_one_article_per_line,
 *                                                    bookscorpus_one_book_per_line,
 *                                                    <stem>_one_document_per_line}.txt
 *   shard     -> sentence shards, balanced by sentence count
 *             <work>/sharded_training_shards_<N>_test_shards_<M>_fraction_<F>/<dataset>/
 *                 <dataset>_{training,test}_<i>.txt
 *   hdf5      -> create_pretraining_data on every shard, for each phase
 *             <work>/hdf5_lower_case_<0|1>_seq_len_<S>_max_pred_<P>_masked_lm_prob_<p>
 *                 _random_seed_<seed>_dupe_factor_<d>/<dataset>/<dataset>_{training,test}_<i>.hdf5
 *
 * <dataset> names what went in: NVIDIA's wikicorpus_en, bookscorpus or books_wiki_en_corpus
 * for dumps and book folders, a --text or --formatted file's stem ("pg1342", "wiki_train";
 * "<stem>_and_<n>_more" for several), joined by "_" when kinds are mixed. The data loader
 * tells training from test files by "training" / "test" in their names, so a stem's "test"
 * or "training" is written "tst" / "trn". As in NVIDIA's recipe every shard is processed
 * with the same random_seed.
 *
 * Parallelism: shards are independent jobs spread over OpenMP threads (each thread one
 * shard at a time, so memory is threads x one shard). Across machines, ranks take
 * disjoint shards: rank r of R does jobs r, r+R, r+2R, ... (R and r from the flags or
 * from the MPI launcher's environment: OMPI_COMM_WORLD_*, PMI_*, SLURM_*), which needs
 * no MPI library; run the format and shard steps once, then the hdf5 step under mpirun.
 *
 * Memory does not grow with the corpus: formatting and sharding stream, and each
 * create_pretraining_data job holds one shard's tokens (see data/pretraining.h). When
 * asked, the shard count grows so no shard exceeds max_shard_mb. */
#ifndef BERT_PREPARE_H
#define BERT_PREPARE_H

#include <stdbool.h>

#include "core/common.h"
#include "data/pretraining.h"

#define PREPARE_MAX_SOURCES 64
#define PREPARE_AUTO (-1)
/* Automatic shard counts: training shards of about this much text, at most NVIDIA's 256 of
 * them (more only past max_shard_mb). */
#define PREPARE_SHARD_MB 8.0
#define PREPARE_NVIDIA_SHARDS 256

typedef struct {
    const char *wikipedia[PREPARE_MAX_SOURCES]; /* .xml / .xml.bz2 dumps */
    int n_wikipedia;
    const char *books[PREPARE_MAX_SOURCES];     /* folders of .txt books */
    int n_books;
    const char *formatted[PREPARE_MAX_SOURCES]; /* already one-document-per-line files */
    int n_formatted;
    const char *text[PREPARE_MAX_SOURCES];      /* plain text, blank lines between documents */
    int n_text;
    bool text_whole_files;        /* each text file one document (formatted as a book) */
    const char *work_dir;
    const char *vocab_file;
    const char *dataset;          /* NULL: NVIDIA's name from the sources */
    bool do_format, do_shard, do_hdf5;
    /* sharding */
    /* PREPARE_AUTO: from the data (prepare_choose_shards); n_test_shards 0: no test shards */
    int n_training_shards, n_test_shards;
    double fraction_test_set;
    double max_shard_mb;          /* > 0: more training shards if any would be bigger */
    bool strip_gutenberg;
    /* create_pretraining_data; phase 2 is skipped when phase2_seq_length is 0 */
    PretrainingOptions base;      /* lower case, seed, dupe factor, probabilities, wwm */
    int phase1_seq_length, phase1_predictions;
    int phase2_seq_length, phase2_predictions;
    int max_input_chars_per_word;
    int threads;                  /* <= 0: OpenMP default */
    int rank, world_size;         /* world_size <= 0: from the environment, else 1 */
    bool quiet;
    /* Skip shard jobs whose HDF5 file exists and is newer than its text shard (files
     * appear only when complete, so an interrupted run can be resumed). */
    bool resume;
} PrepareOptions;

PrepareOptions prepare_default_options(void);

typedef struct {
    long long documents, sentences, formatted_bytes, shard_bytes;
    int n_training_shards, n_test_shards;
    long long instances[2];       /* per phase */
    long long hdf5_bytes[2];
    int jobs_done, jobs_skipped;
    bool shard_step_skipped;   /* --resume found the shards as the last run left them */
    double seconds_format, seconds_shard, seconds_hdf5;
    char hdf5_dir[2][4096];
} PrepareStats;

int prepare_run(const PrepareOptions *opt, PrepareStats *stats, BertError *err);

/* The shard counts for a corpus of `documents` (non-blank lines of the formatted files) and
 * `bytes`: the options' where given, else training shards of about PREPARE_SHARD_MB (1 to
 * 256, more when one would pass max_shard_mb), test shards of the same size for
 * fraction_test_set (at least one when the fraction is not 0 and there are 2 documents),
 * and never more shards than documents / 4 (create_pretraining_data runs on each shard
 * alone, and a random next sentence needs another document): at least 1 + 1 from two
 * documents, 1 + 0 from one. Shards asked for beyond the documents are an error naming the
 * flags. `why` (may be NULL) gets one line saying what was chosen and why. */
int prepare_choose_shards(const PrepareOptions *opt, long long documents, long long bytes, int *n_train,
                          int *n_test, char *why, size_t why_len, BertError *err);

/* The <dataset> name of the files and folders (above), into out. */
void prepare_dataset_name(const PrepareOptions *opt, char *out, size_t len);

/* Python's str() of a float, as NVIDIA's folder names use it ("0.15", "0.1", "1e-05"). */
void python_float_str(double x, char *out, size_t outlen);

#endif
