/* `bert prepare`: raw corpus -> phase-1 and phase-2 HDF5 pre-training shards in one
 * command, NVIDIA's recipe and folder names (see data/prepare.h). */
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/bundled.h"
#include "data/prepare.h"

static int parse_steps(const char *steps, PrepareOptions *o) {
    o->do_format = strstr(steps, "format") != NULL;
    o->do_shard = strstr(steps, "shard") != NULL;
    o->do_hdf5 = strstr(steps, "hdf5") != NULL;
    return o->do_format || o->do_shard || o->do_hdf5 ? 0 : -1;
}

static void print_summary(const PrepareOptions *o, const PrepareStats *st, double seconds) {
    fprintf(stderr, "\nprepare: done in %.1f s (format %.1f s, shard %.1f s, hdf5 %.1f s), peak RSS %.0f MB\n",
            seconds, st->seconds_format, st->seconds_shard, st->seconds_hdf5, peak_rss_bytes() / 1e6);
    if (o->do_shard)
        fprintf(stderr, "  sharded: %lld documents, %lld sentences, %.1f MB -> %d training + %d test shards\n",
                st->documents, st->sentences, st->formatted_bytes / 1e6, st->n_training_shards,
                st->n_test_shards);
    for (int p = 0; p < 2 && o->do_hdf5; p++) {
        if (p == 1 && o->phase2_seq_length <= 0) break;
        fprintf(stderr, "  phase %d: %lld instances, %.1f MB in %s/\n", p + 1, st->instances[p],
                st->hdf5_bytes[p] / 1e6, st->hdf5_dir[p]);
    }
    if (o->do_hdf5 && st->seconds_hdf5 > 0)
        fprintf(stderr, "  create_pretraining_data: %d shard jobs (%d already done), %.0f instances/s\n",
                st->jobs_done, st->jobs_skipped, (st->instances[0] + st->instances[1]) / st->seconds_hdf5);
}

int cmd_prepare(int argc, char **argv) {
    PrepareOptions o = prepare_default_options();
    char *wiki = NULL, *books = NULL, *formatted = NULL, *text = NULL;
    const char *steps = "format,shard,hdf5", *text_documents = "blank_line";
    long long seed = o.base.random_seed;
    int lower = FLAG_UNSET;
    const Flag flags[] = {
        {"text", FLAG_STRING, &text, "plain-text files, comma-separated or listed after the flags: a blank line ends a document, a line break inside one is a space (hard-wrapped paragraphs joined); Project Gutenberg licence text left out"},
        {"text_documents", FLAG_STRING, &text_documents, "what a --text document is: blank_line (default: a blank line ends one) or file (each file one document, its paragraphs joined, as --books)"},
        {"wikipedia", FLAG_STRING, &wiki, "MediaWiki pages-articles dumps (.xml or .xml.bz2), comma-separated"},
        {"books", FLAG_STRING, &books, "folders of plain-text books, comma-separated (default: the bundled data/corpus/books when no corpus is given)"},
        {"formatted", FLAG_STRING, &formatted, "files with one whole document per line (NVIDIA's formatted layout), comma-separated; for ordinary text use --text"},
        {"output_dir", FLAG_STRING, &o.work_dir, "working folder (NVIDIA's BERT_PREP_WORKING_DIR); default prepared"},
        {"vocab_file", FLAG_STRING, &o.vocab_file, "WordPiece vocabulary; default the bundled data/vocab/bert-base-uncased-vocab.txt"},
        {"dataset", FLAG_STRING, &o.dataset, "dataset name in folder/file names; default from the inputs: NVIDIA's wikicorpus_en, bookscorpus, books_wiki_en_corpus, a --text/--formatted file's name"},
        {"steps", FLAG_STRING, &steps, "which of format,shard,hdf5 to run; default all three"},
        {"n_training_shards", FLAG_INT, &o.n_training_shards, "default: from the data size (about 8 MB each, at most 256, at most documents/4; said when chosen)"},
        {"n_test_shards", FLAG_INT, &o.n_test_shards, "0 = no test shards; default: as big as the training shards for --fraction_test_set"},
        {"fraction_test_set", FLAG_DOUBLE, &o.fraction_test_set, "share of sentences for the test shards; default 0.1"},
        {"max_shard_mb", FLAG_DOUBLE, &o.max_shard_mb, "more training shards if one would be bigger (bounds memory); default 256, 0 = off"},
        {"strip_gutenberg", FLAG_BOOL, &o.strip_gutenberg, "drop Project Gutenberg licence header/footer from books; default true"},
        {"do_lower_case", FLAG_TRIBOOL, &lower, "lower-case and strip accents (uncased models); default from the vocabulary: true when no token holds an upper-case letter (an uncased vocabulary), as pretrain records it"},
        {"do_whole_word_mask", FLAG_BOOL, &o.base.do_whole_word_mask, "default false"},
        {"random_seed", FLAG_INT64, &seed, "default 12345 (every shard uses it, as NVIDIA's recipe)"},
        {"dupe_factor", FLAG_INT, &o.base.dupe_factor, "default 5 (bertPrep.py)"},
        {"masked_lm_prob", FLAG_DOUBLE, &o.base.masked_lm_prob, "default 0.15"},
        {"short_seq_prob", FLAG_DOUBLE, &o.base.short_seq_prob, "default 0.1"},
        {"phase1_max_seq_length", FLAG_INT, &o.phase1_seq_length, "default 128"},
        {"phase1_max_predictions_per_seq", FLAG_INT, &o.phase1_predictions, "default 20"},
        {"phase2_max_seq_length", FLAG_INT, &o.phase2_seq_length, "default 512; 0 skips phase 2"},
        {"phase2_max_predictions_per_seq", FLAG_INT, &o.phase2_predictions, "default 80"},
        {"max_input_chars_per_word", FLAG_INT, &o.max_input_chars_per_word, "default 200 (Google's tokenizer)"},
        {"spool_memory_mb", FLAG_DOUBLE, &o.base.spool_memory_mb, "per shard job: instances in memory up to this, then on disk; default 256"},
        {"threads", FLAG_INT, &o.threads, "shards processed at once; default all cores"},
        {"rank", FLAG_INT, &o.rank, "this process's rank for a multi-machine hdf5 step (default: from mpirun's environment)"},
        {"world_size", FLAG_INT, &o.world_size, "number of ranks (default: from mpirun's environment, else 1)"},
        {"resume", FLAG_BOOL, &o.resume, "skip the steps (formatting, sharding, each HDF5 shard) whose recorded inputs, outputs and options are all unchanged (size and modification time of every file, in a manifest beside the outputs); anything changed runs again"},
        {"quiet", FLAG_BOOL, &o.quiet, "no progress or summary"},
    };
    const FlagSpec spec = {"prepare",
                           "prepare [--text FILE ...] [--books DIR] [--wikipedia DUMP.xml.bz2] [--output_dir WORK] [flags]\n"
                           "  (corpus -> formatted text -> sentence shards -> phase-1/phase-2 HDF5, NVIDIA's layout)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, PREPARE_MAX_SOURCES};
    char *files[PREPARE_MAX_SOURCES];   /* FILE ... after the flags: more --text files */
    int n_files = 0;
    int prc = flags_parse(&spec, argc, argv, files, &n_files);
    if (prc != 0) return prc > 0 ? 0 : 2;
    o.base.random_seed = (int64_t)seed;
    if ((wiki && (o.n_wikipedia = split_list(wiki, o.wikipedia, PREPARE_MAX_SOURCES)) < 0) ||
        (books && (o.n_books = split_list(books, o.books, PREPARE_MAX_SOURCES)) < 0) ||
        (formatted && (o.n_formatted = split_list(formatted, o.formatted, PREPARE_MAX_SOURCES)) < 0) ||
        (text && (o.n_text = split_list(text, o.text, PREPARE_MAX_SOURCES)) < 0) ||
        o.n_text + n_files > PREPARE_MAX_SOURCES) {
        fprintf(stderr, "bert prepare: at most %d sources of each kind\n", PREPARE_MAX_SOURCES);
        return 2;
    }
    if (o.threads < 0 || o.threads > FLAGS_MAX_THREADS || o.max_input_chars_per_word < 1 || !(o.max_shard_mb >= 0) ||
        o.phase2_seq_length < 0) {
        fprintf(stderr, "bert prepare: --threads must be in [0, %d], --max_input_chars_per_word >= 1, "
                        "--max_shard_mb and --phase2_max_seq_length >= 0\n", FLAGS_MAX_THREADS);
        return 2;
    }
    if (strcmp(text_documents, "blank_line") && strcmp(text_documents, "file")) {
        fprintf(stderr, "bert prepare: --text_documents takes blank_line or file, got '%s'\n", text_documents);
        return 2;
    }
    o.text_whole_files = !strcmp(text_documents, "file");
    if (parse_steps(steps, &o) != 0) {
        fprintf(stderr, "bert prepare: --steps takes format, shard and/or hdf5, got '%s'\n", steps);
        return 2;
    }
    for (int k = 0; k < n_files; k++) o.text[o.n_text++] = files[k];
    if (o.do_hdf5 && flags_vocab_casing("prepare", o.vocab_file, lower, o.quiet, &o.base.do_lower_case) != 0) return 1;
    if (o.n_wikipedia + o.n_books + o.n_formatted + o.n_text == 0) {
        static char books_dir[4096];
        bundled_data_path("corpus/books", books_dir, sizeof books_dir);
        o.books[o.n_books++] = books_dir;
        if (!o.quiet) fprintf(stderr, "prepare: no corpus given, using the bundled books in %s\n", books_dir);
    }
    PrepareStats st;
    BertError err;
    double t0 = now_seconds();
    if (prepare_run(&o, &st, &err) != 0) {
        fprintf(stderr, "bert prepare: %s\n", err.msg);
        return 1;
    }
    if (!o.quiet) print_summary(&o, &st, now_seconds() - t0);
    return 0;
}
