/* data/prepare: the whole chain (books -> formatted -> shards -> phase-1/phase-2 HDF5)
 * on a small generated book folder: NVIDIA's folder and file names, every shard present
 * and equal to create_pretraining_data run on its text shard alone, rank splitting, the
 * hdf5-only step finding existing shards, and Python's float formatting in names. Then
 * one's own text (issue 36, point 6): --text's documents and Gutenberg stripping, shard
 * counts chosen from the data, --n_test_shards 0, dataset names after the inputs, and
 * `bert prepare --text` run as a user runs it, from another folder, checked by
 * `bert check_shards`. */
#include <dirent.h>
#include <math.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/corpus.h"
#include "data/hdf5_shard.h"
#include "data/prepare.h"
#include "test.h"
#include "test_util.h"

#define WORK "build/test_prepare_work"
#define BOOKS "build/test_prepare_books"
#define PHASE1 WORK "/hdf5_lower_case_1_seq_len_32_max_pred_5_masked_lm_prob_0.15_random_seed_12345_dupe_factor_2/bookscorpus"
#define PHASE2 WORK "/hdf5_lower_case_1_seq_len_64_max_pred_10_masked_lm_prob_0.15_random_seed_12345_dupe_factor_2/bookscorpus"
#define SHARDS WORK "/sharded_training_shards_3_test_shards_1_fraction_0.1/bookscorpus"


/* Four "books" cut from the committed fixture text, so the test needs no other data. */
static void make_books(void) {
    remove_tree(BOOKS);
    mkdir(BOOKS, 0777);
    char *text = NULL;
    size_t len = 0;
    BertError err;
    CHECK(read_file("tests/data/pretraining/docs_b1.txt", &text, &len, &err) == 0);
    if (!text) return;
    for (int b = 0; b < 4; b++) {
        char path[256];
        snprintf(path, sizeof path, BOOKS "/book%d.txt", b);
        FILE *f = fopen(path, "wb");
        size_t part = len / 4;
        fwrite(text + b * part, 1, part, f);
        fclose(f);
    }
    free(text);
}

static PrepareOptions small_options(void) {
    PrepareOptions o = prepare_default_options();
    o.books[o.n_books++] = BOOKS;
    o.work_dir = WORK;
    o.n_training_shards = 3, o.n_test_shards = 1;
    o.phase1_seq_length = 32, o.phase1_predictions = 5;
    o.phase2_seq_length = 64, o.phase2_predictions = 10;
    o.base.dupe_factor = 2;
    o.quiet = true;
    return o;
}


/* The shard prepare wrote equals create_pretraining_data run alone on its text shard. */
static void check_shard_matches_direct_run(const PrepareOptions *o, const char *txt, const char *hdf5,
                                           int seq, int pred) {
    Vocab *vocab;
    BertError err;
    CHECK(vocab_load(&vocab, o->vocab_file, &err) == 0);
    TokenizerOptions topt = tokenizer_default_options();
    topt.max_input_chars_per_word = 200;
    Tokenizer *tok = tokenizer_new(vocab, &topt);
    PretrainingOptions po = o->base;
    po.max_seq_length = seq, po.max_predictions_per_seq = pred;
    PretrainingStats st;
    const char *direct = "build/test_prepare_direct.hdf5";
    CHECKF(create_pretraining_data(&po, txt, direct, tok, &st, NULL, NULL, &err) == 0, "%s", err.msg);
    PretrainingShard a, b;
    CHECKF(hdf5_shard_load(hdf5, &a, &err) == 0, "%s", err.msg);
    CHECKF(hdf5_shard_load(direct, &b, &err) == 0, "%s", err.msg);
    CHECK(a.n == b.n && a.n > 0 && a.max_seq_length == seq && a.max_predictions_per_seq == pred);
    if (a.n == b.n) {
        CHECK(!memcmp(a.input_ids, b.input_ids, a.n * (size_t)seq * 4));
        CHECK(!memcmp(a.masked_lm_ids, b.masked_lm_ids, a.n * (size_t)pred * 4));
        CHECK(!memcmp(a.next_sentence_labels, b.next_sentence_labels, a.n));
    }
    pretraining_shard_free(&a);
    pretraining_shard_free(&b);
    unlink(direct);
    tokenizer_free(tok);
    vocab_free(vocab);
}

static void test_whole_chain_with_nvidia_names(void) {
    make_books();
    remove_tree(WORK);
    PrepareOptions o = small_options();
    PrepareStats st;
    BertError err;
    CHECKF(prepare_run(&o, &st, &err) == 0, "%s", err.msg);
    CHECK(file_exists(WORK "/formatted_one_article_per_line/bookscorpus_one_book_per_line.txt"));
    CHECK(st.n_training_shards == 3 && st.n_test_shards == 1);
    CHECK(st.instances[0] > 0 && st.instances[1] > 0 && st.jobs_done == 8);
    const char *names[] = {"training_0", "training_1", "training_2", "test_0"};
    for (int k = 0; k < 4; k++) {
        char txt[512], h1[512], h2[512];
        snprintf(txt, sizeof txt, SHARDS "/bookscorpus_%s.txt", names[k]);
        snprintf(h1, sizeof h1, PHASE1 "/bookscorpus_%s.hdf5", names[k]);
        snprintf(h2, sizeof h2, PHASE2 "/bookscorpus_%s.hdf5", names[k]);
        CHECKF(file_exists(txt) && file_exists(h1) && file_exists(h2), "missing %s", names[k]);
    }
    check_shard_matches_direct_run(&o, SHARDS "/bookscorpus_training_1.txt", PHASE1 "/bookscorpus_training_1.hdf5", 32, 5);
    check_shard_matches_direct_run(&o, SHARDS "/bookscorpus_test_0.txt", PHASE2 "/bookscorpus_test_0.hdf5", 64, 10);
}

/* Rank 1 of 2 does jobs 1, 3, 5, 7: phase 1 training_1 and test_0, phase 2 the same;
 * then --resume does the rest and skips what rank 1 wrote. */
static void test_ranks_take_disjoint_shards(void) {
    PrepareOptions o = small_options();
    remove_tree(WORK "/hdf5_lower_case_1_seq_len_32_max_pred_5_masked_lm_prob_0.15_random_seed_12345_dupe_factor_2");
    remove_tree(WORK "/hdf5_lower_case_1_seq_len_64_max_pred_10_masked_lm_prob_0.15_random_seed_12345_dupe_factor_2");
    o.do_format = o.do_shard = false;
    o.n_training_shards = o.n_test_shards = PREPARE_AUTO; /* found from the sharded folder */
    o.rank = 1, o.world_size = 2;
    PrepareStats st;
    BertError err;
    CHECKF(prepare_run(&o, &st, &err) == 0, "%s", err.msg);
    CHECK(st.jobs_done == 4);
    CHECK(!file_exists(PHASE1 "/bookscorpus_training_0.hdf5") && file_exists(PHASE1 "/bookscorpus_training_1.hdf5"));
    CHECK(!file_exists(PHASE1 "/bookscorpus_training_2.hdf5") && file_exists(PHASE1 "/bookscorpus_test_0.hdf5"));
    CHECK(!file_exists(PHASE2 "/bookscorpus_training_0.hdf5") && file_exists(PHASE2 "/bookscorpus_training_1.hdf5"));
    o.rank = 2;
    CHECK(prepare_run(&o, &st, &err) == -1);
    /* --resume: rank 1's shards are done; a full run now does only rank 0's. */
    o.rank = 0, o.world_size = 1, o.resume = true;
    CHECKF(prepare_run(&o, &st, &err) == 0, "%s", err.msg);
    CHECK(st.jobs_done == 4 && st.jobs_skipped == 4);
    CHECK(file_exists(PHASE1 "/bookscorpus_training_0.hdf5") && file_exists(PHASE2 "/bookscorpus_training_2.hdf5"));
    remove_tree(WORK);
    remove_tree(BOOKS);
}

/* Issue 14, defect 6: after a kill, `prepare --resume` redid everything: the format and
 * shard steps rewrote their outputs, and every finished HDF5 shard then looked stale. Now
 * each step's manifest records its inputs and outputs (size, nanosecond time), so a resumed
 * run skips what is unchanged, whole chain included, and redoes what changed. */
static void test_resume_skips_what_is_unchanged(void) {
    make_books();
    remove_tree(WORK);
    PrepareOptions o = small_options();
    PrepareStats st;
    BertError err;
    CHECKF(prepare_run(&o, &st, &err) == 0 && st.jobs_done == 8, "%s", err.msg);
    /* a run killed before two shards were written */
    unlink(PHASE1 "/bookscorpus_training_2.hdf5"), unlink(PHASE2 "/bookscorpus_test_0.hdf5");
    o.resume = true;
    CHECKF(prepare_run(&o, &st, &err) == 0, "%s", err.msg);
    CHECKF(st.shard_step_skipped && st.jobs_skipped == 6 && st.jobs_done == 2, "shard step skipped %d, %d skipped, "
           "%d done", st.shard_step_skipped, st.jobs_skipped, st.jobs_done);
    CHECK(file_exists(PHASE1 "/bookscorpus_training_2.hdf5") && file_exists(PHASE2 "/bookscorpus_test_0.hdf5"));
    /* nothing left: everything skipped */
    CHECKF(prepare_run(&o, &st, &err) == 0 && st.jobs_skipped == 8 && st.jobs_done == 0, "%s", err.msg);
    /* a shard text changed (same size): its two HDF5 shards are made again, the rest kept */
    char *text = read_text(SHARDS "/bookscorpus_training_1.txt");
    CHECK(text && strlen(text) > 10);
    text[0] = text[0] == 'a' ? 'b' : 'a';
    write_text(SHARDS "/bookscorpus_training_1.txt", text);
    free(text);
    o.do_format = o.do_shard = false, o.n_training_shards = o.n_test_shards = PREPARE_AUTO;
    CHECKF(prepare_run(&o, &st, &err) == 0 && st.jobs_done == 2 && st.jobs_skipped == 6, "%s (done %d, skipped %d)",
           err.msg, st.jobs_done, st.jobs_skipped);
    /* another option (dupe factor) is another shard: nothing is taken as done */
    o.base.dupe_factor = 3;
    CHECKF(prepare_run(&o, &st, &err) == 0 && st.jobs_skipped == 0, "%s", err.msg);
    remove_tree(WORK);
    remove_tree(BOOKS);
}

static void test_bad_requests_are_clear_errors(void) {
    PrepareOptions o = prepare_default_options();
    PrepareStats st;
    BertError err;
    o.work_dir = WORK;
    CHECK(prepare_run(&o, &st, &err) == -1); /* no corpus */
    CHECKF(strstr(err.msg, "no corpus") != NULL, "%s", err.msg);
    o.books[o.n_books++] = "build/no-such-books-folder";
    o.phase2_seq_length = 3;
    CHECK(prepare_run(&o, &st, &err) == -1);
    CHECKF(strstr(err.msg, "max_seq_length") != NULL, "%s", err.msg);
    o.phase2_seq_length = 512;
    CHECK(prepare_run(&o, &st, &err) == -1);
    CHECKF(strstr(err.msg, "no-such-books-folder") != NULL, "%s", err.msg);
    remove_tree(WORK);
    /* a vocabulary without [UNK] refused before anything runs: it failed at the hdf5 step,
     * after formatting and sharding */
    make_books();
    PrepareOptions bad = small_options();
    write_text("build/test_prepare_no_unk.txt", "[PAD]\n[CLS]\n[SEP]\nthe\n");
    bad.vocab_file = "build/test_prepare_no_unk.txt";
    CHECK(prepare_run(&bad, &st, &err) == -1);
    CHECKF(strstr(err.msg, "build/test_prepare_no_unk.txt has no [UNK] token") != NULL, "%s", err.msg);
    struct stat sb;
    CHECKF(stat(WORK, &sb) != 0, "%s was made before the vocabulary was refused", WORK);
    unlink("build/test_prepare_no_unk.txt");
    remove_tree(WORK);
}

static void test_python_float_str(void) {
    char s[32];
    python_float_str(0.15, s, sizeof s);
    CHECK(!strcmp(s, "0.15"));
    python_float_str(0.1, s, sizeof s);
    CHECK(!strcmp(s, "0.1"));
    python_float_str(1.0, s, sizeof s);
    CHECK(!strcmp(s, "1.0"));
    python_float_str(0.2 + 0.1, s, sizeof s);
    CHECK(!strcmp(s, "0.30000000000000004"));
}


/* ---- One's own text ---------------------------------------------------------------- */

#define TEXT_DIR "build/test_prepare_text"

/* A hard-wrapped Project Gutenberg file: licence header and footer, a title line, two
 * paragraphs wrapped mid-sentence, CRLF on one line, several blank lines in a row. */
static const char GUTENBERG_TEXT[] =
    "\xEF\xBB\xBFThe Project Gutenberg eBook of Small Tales\n"
    "\n"
    "This eBook is for the use of anyone anywhere in the United States.\n"
    "\n"
    "*** START OF THE PROJECT GUTENBERG EBOOK SMALL TALES ***\n"
    "\n"
    "CHAPTER ONE\n"
    "\n"
    "The miller walked down to the river on a\n"
    "grey morning. His dog followed him as far\r\n"
    "as the bridge.\n"
    "\n"
    "\n"
    "   \n"
    "  The water was high that spring, and the\n"
    "wheel turned faster than it had for years.\n"
    "\n"
    "*** END OF THE PROJECT GUTENBERG EBOOK SMALL TALES ***\n"
    "\n"
    "Updated editions will replace the previous one.\n";

/* The formatted layout (data/corpus.h): a document per line, every source line followed by
 * one space, a blank line after each document. */
static const char GUTENBERG_FORMATTED[] =
    "CHAPTER ONE \n\n"
    "The miller walked down to the river on a grey morning. His dog followed him as far as the bridge. \n\n"
    "The water was high that spring, and the wheel turned faster than it had for years. \n\n";

static void test_text_documents_without_the_licence(void) {
    remove_tree(TEXT_DIR);
    mkdir(TEXT_DIR, 0777);
    write_text(TEXT_DIR "/small_tales.txt", GUTENBERG_TEXT);
    FormatStats fs;
    BertError err;
    CHECKF(format_text(TEXT_DIR "/small_tales.txt", TEXT_DIR "/formatted.txt", NULL, &fs, &err) == 0, "%s", err.msg);
    char *got = read_text(TEXT_DIR "/formatted.txt");
    CHECKF(!strcmp(got, GUTENBERG_FORMATTED), "formatted:\n%s", got);
    CHECK(fs.documents_written == 3 && fs.documents_skipped == 0);
    free(got);
    /* the licence kept when asked */
    FormatOptions keep = format_default_options();
    keep.strip_gutenberg = false;
    CHECK(format_text(TEXT_DIR "/small_tales.txt", TEXT_DIR "/kept.txt", &keep, &fs, &err) == 0);
    got = read_text(TEXT_DIR "/kept.txt");
    CHECKF(strstr(got, "The Project Gutenberg eBook of Small Tales \n\n") == got && fs.documents_written == 8,
           "%lld documents:\n%s", fs.documents_written, got);
    free(got);
    /* a folder is --books' job; a missing file is named */
    CHECK(format_text(TEXT_DIR, TEXT_DIR "/x.txt", NULL, NULL, &err) != 0 && strstr(err.msg, "--books"));
    CHECK(format_text(TEXT_DIR "/missing.txt", TEXT_DIR "/x.txt", NULL, NULL, &err) != 0 && strstr(err.msg, "missing.txt"));

    /* the whole chain: 3 documents -> 1 training + 1 test shard, named after the file */
    PrepareOptions o = prepare_default_options();
    o.text[o.n_text++] = TEXT_DIR "/small_tales.txt";
    o.work_dir = TEXT_DIR "/work";
    o.phase2_seq_length = 0, o.base.dupe_factor = 1, o.quiet = true;
    PrepareStats st;
    CHECKF(prepare_run(&o, &st, &err) == 0, "%s", err.msg);
    CHECK(st.n_training_shards == 1 && st.n_test_shards == 1 && st.documents == 3);
    CHECK(files_equal(TEXT_DIR "/formatted.txt",
                      TEXT_DIR "/work/formatted_one_article_per_line/small_tales_one_document_per_line.txt"));
    /* the sentences the shards hold: the wrapped ones whole, the title alone, no licence */
    const char *dir = TEXT_DIR "/work/sharded_training_shards_1_test_shards_1_fraction_0.1/small_tales/";
    char train[512], test[512];
    snprintf(train, sizeof train, "%ssmall_tales_training_0.txt", dir);
    snprintf(test, sizeof test, "%ssmall_tales_test_0.txt", dir);
    char *a = read_text(train), *b = read_text(test);
    size_t n = strlen(a) + strlen(b) + 1;
    char *both = xmalloc(n);
    snprintf(both, n, "%s%s", a, b);
    CHECK(strstr(both, "CHAPTER ONE\n\n"));
    CHECK(strstr(both, "The miller walked down to the river on a grey morning.\n"
                       "His dog followed him as far as the bridge.\n\n"));
    CHECK(strstr(both, "The water was high that spring, and the wheel turned faster than it had for years.\n\n"));
    CHECK(!strstr(both, "Gutenberg") && !strstr(both, "eBook"));
    free(a), free(b), free(both);
    /* --text_documents file: the file is one document, its paragraphs joined as a book's */
    o.text_whole_files = true, o.resume = true;
    CHECKF(prepare_run(&o, &st, &err) == 0, "%s", err.msg);
    CHECK(st.documents == 1 && st.n_training_shards == 1 && st.n_test_shards == 0);
    got = read_text(TEXT_DIR "/work/formatted_one_article_per_line/small_tales_one_document_per_line.txt");
    CHECKF(!strcmp(got, "CHAPTER ONE The miller walked down to the river on a grey morning. His dog followed him as "
                        "far as the bridge. The water was high that spring, and the wheel turned faster than it had "
                        "for years. \n\n"), "%s", got);
    free(got);
    CHECK(file_exists(TEXT_DIR "/work/hdf5_lower_case_1_seq_len_32_max_pred_5_masked_lm_prob_0.15_random_seed_12345"
                                "_dupe_factor_1/small_tales/small_tales_training_0.hdf5") ||
          file_exists(TEXT_DIR "/work/hdf5_lower_case_1_seq_len_128_max_pred_20_masked_lm_prob_0.15_random_seed_12345"
                                "_dupe_factor_1/small_tales/small_tales_training_0.hdf5"));
    remove_tree(TEXT_DIR);
}

/* One book with no blank line is one document: 1 training shard, no test shard, and
 * instances (create_pretraining_data's random next sentence comes from the same document). */
static void test_one_document_and_no_test_shards(void) {
    remove_tree(TEXT_DIR);
    mkdir(TEXT_DIR, 0777);
    char *book = read_text("tests/data/pretraining/docs_b1.txt"), *one = xstrdup(book);
    size_t k = 0;
    for (size_t i = 0; book[i]; i++)   /* its blank lines dropped: one document */
        if (!(book[i] == '\n' && (i == 0 || book[i - 1] == '\n'))) one[k++] = book[i];
    one[k] = 0;
    write_text(TEXT_DIR "/one.txt", one);
    free(book), free(one);
    PrepareOptions o = prepare_default_options();
    o.text[o.n_text++] = TEXT_DIR "/one.txt";
    o.work_dir = TEXT_DIR "/work";
    o.phase2_seq_length = 0, o.base.dupe_factor = 1, o.quiet = true;
    PrepareStats st;
    BertError err;
    CHECKF(prepare_run(&o, &st, &err) == 0, "%s", err.msg);
    CHECK(st.documents == 1 && st.n_training_shards == 1 && st.n_test_shards == 0 && st.instances[0] > 0);
    CHECK(file_exists(TEXT_DIR "/work/sharded_training_shards_1_test_shards_0_fraction_0.0/one/one_training_0.txt"));
    /* a test shard asked for where there is no document for it */
    o.n_test_shards = 1;
    CHECK(prepare_run(&o, &st, &err) != 0);
    CHECKF(strstr(err.msg, "--n_test_shards") && strstr(err.msg, "1 document") && !strstr(err.msg, "--n_training"),
           "%s", err.msg);
    /* --n_test_shards 0 on a corpus that would have a test shard: none, every sentence trained on */
    o.text[0] = "tests/data/pretraining/docs_b1.txt", o.n_test_shards = 0, o.n_training_shards = 2;
    CHECKF(prepare_run(&o, &st, &err) == 0, "%s", err.msg);
    CHECK(st.n_training_shards == 2 && st.n_test_shards == 0);
    CHECK(file_exists(TEXT_DIR "/work/sharded_training_shards_2_test_shards_0_fraction_0.0/docs_b1/docs_b1_training_1.txt"));
    o.n_test_shards = -2;
    CHECK(prepare_run(&o, &st, &err) != 0 && strstr(err.msg, "--n_test_shards"));
    o.n_test_shards = 0, o.n_training_shards = 0;
    CHECK(prepare_run(&o, &st, &err) != 0 && strstr(err.msg, "--n_training_shards must be at least 1"));
    remove_tree(TEXT_DIR);
}

static void check_choice(long long docs, double mb, int want_train, int want_test) {
    PrepareOptions o = prepare_default_options();
    int train, test;
    char why[512];
    BertError err;
    CHECKF(prepare_choose_shards(&o, docs, (long long)(mb * 1e6), &train, &test, why, sizeof why, &err) == 0, "%s",
           err.msg);
    CHECKF(train == want_train && test == want_test, "%lld documents, %g MB: %d + %d, expected %d + %d (%s)", docs, mb,
           train, test, want_train, want_test, why);
    CHECKF(strstr(why, "--n_training_shards") && train + test <= docs, "%s", why);
}

/* The counts follow prepare.h's rules; each expectation is that rule's arithmetic. */
static void test_shard_counts_from_the_data(void) {
    const double f = 0.1, s = PREPARE_SHARD_MB;
    check_choice(1, 0.5, 1, 0);                        /* one document: no test shard */
    check_choice(3, 0.9, 1, 1);                        /* the bundled books (Quick start): as before */
    check_choice(2000, 0.5, 1, 1);                     /* a book of paragraphs: not 256 + 256 */
    const int t100 = (int)ceil(100 * (1 - f) / s);     /* 100 MB: shards of about 8 MB */
    check_choice(100000, 100, t100, (int)llround(t100 * f / (1 - f)));
    check_choice(10000000, 20000, PREPARE_NVIDIA_SHARDS, (int)llround(PREPARE_NVIDIA_SHARDS * f / (1 - f)));
    const int big = (int)ceil(200000 * (1 - f) / 256); /* 256 shards would pass --max_shard_mb 256 */
    check_choice(100000000, 200000, big, (int)llround(big * f / (1 - f)));
    check_choice(40, 100, 40 / 4 - (int)llround(40 / 4 * f), (int)llround(40 / 4 * f));  /* documents / 4 */
    check_choice(13, 100, 2, 1);                       /* 13 / 4 = 3 shards: 0.3 test rounds to 0, at least 1 */

    PrepareOptions o = prepare_default_options();
    int train, test;
    BertError err;
    o.fraction_test_set = 0;                           /* no test set asked for: no test shard */
    CHECK(prepare_choose_shards(&o, 100, 1e6, &train, &test, NULL, 0, &err) == 0 && train == 1 && test == 0);
    o = prepare_default_options();
    o.n_training_shards = 4, o.n_test_shards = 2;      /* given: kept, or an error naming both */
    CHECK(prepare_choose_shards(&o, 6, 1e6, &train, &test, NULL, 0, &err) == 0 && train == 4 && test == 2);
    CHECK(prepare_choose_shards(&o, 5, 1e6, &train, &test, NULL, 0, &err) != 0);
    CHECKF(strstr(err.msg, "--n_training_shards and --n_test_shards ask for 6 shards") && strstr(err.msg, "5 documents"),
           "%s", err.msg);
    o.n_test_shards = PREPARE_AUTO;                    /* only one given: the other fits around it */
    CHECK(prepare_choose_shards(&o, 20, 1e6, &train, &test, NULL, 0, &err) == 0 && train == 4 && test == 1);
    CHECK(prepare_choose_shards(&o, 4, 1e6, &train, &test, NULL, 0, &err) == 0 && train == 4 && test == 0);
    CHECK(prepare_choose_shards(&o, 0, 0, &train, &test, NULL, 0, &err) != 0 && strstr(err.msg, "no text"));
}

static void check_name(const PrepareOptions *o, const char *want) {
    char name[1024];
    prepare_dataset_name(o, name, sizeof name);
    CHECKF(!strcmp(name, want), "dataset '%s', expected '%s'", name, want);
}

static void test_dataset_named_after_the_inputs(void) {
    PrepareOptions o = prepare_default_options();
    o.books[o.n_books++] = "data/corpus/books";
    check_name(&o, "bookscorpus");
    o.wikipedia[o.n_wikipedia++] = "enwiki.xml.bz2";
    check_name(&o, "books_wiki_en_corpus");
    o.formatted[o.n_formatted++] = "../shared/wikitext-2-raw/wiki.valid.raw";
    check_name(&o, "books_wiki_en_corpus_wiki_valid");
    o = prepare_default_options();
    o.wikipedia[o.n_wikipedia++] = "enwiki.xml.bz2";
    check_name(&o, "wikicorpus_en");
    o = prepare_default_options();
    o.text[o.n_text++] = "/books/pg1342.txt";
    check_name(&o, "pg1342");
    o.text[o.n_text++] = "b.txt", o.text[o.n_text++] = "c.txt";
    check_name(&o, "pg1342_and_2_more");
    o = prepare_default_options();  /* the loader's words kept out of the name */
    o.formatted[o.n_formatted++] = "wiki.test.raw";
    check_name(&o, "wiki_tst");
    o.formatted[0] = "my training set (v2).txt";
    check_name(&o, "my_trn_set__v2_");
    o.dataset = "held_test";
    PrepareStats st;
    BertError err;
    CHECK(prepare_run(&o, &st, &err) != 0 && strstr(err.msg, "--dataset"));
}

static char bert[1024];

static int shell(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* As a user runs it: the built program, from another folder, files after --text; the
 * chosen counts said; shards `bert check_shards` accepts; too many shards asked for. */
static void test_prepare_text_as_a_user(void) {
    char tmp[] = "/tmp/bert-prepare-text-XXXXXX", cmd[8192];
    if (!mkdtemp(tmp)) { CHECK(0); return; }
    snprintf(cmd, sizeof cmd, "cp tests/data/pretraining/docs_b1.txt %s/my_book.txt", tmp);
    CHECK(shell(cmd) == 0);
    char path[512];
    snprintf(path, sizeof path, "%s/tales.txt", tmp);
    write_text(path, GUTENBERG_TEXT);
    snprintf(cmd, sizeof cmd, "cd %s && %s prepare --text my_book.txt tales.txt --phase2_max_seq_length 0 "
                              "--dupe_factor 1 > out 2> err", tmp, bert);
    CHECK(shell(cmd) == 0);
    snprintf(path, sizeof path, "%s/err", tmp);
    char *err = read_text(path);
    CHECKF(strstr(err, "prepare: 1 training + 1 test shards for") && strstr(err, "--n_training_shards"), "%s", err);
    free(err);
    const char *hdf5 = "prepared/hdf5_lower_case_1_seq_len_128_max_pred_20_masked_lm_prob_0.15_random_seed_12345_"
                       "dupe_factor_1/my_book_and_1_more";
    snprintf(cmd, sizeof cmd, "cd %s && test -s %s/my_book_and_1_more_training_0.hdf5 && "
                              "test -s %s/my_book_and_1_more_test_0.hdf5 && %s check_shards %s --max_seq_length 128 "
                              "> check 2>&1 && grep -q '2 files, .* 0 bad' check", tmp, hdf5, hdf5, bert, hdf5);
    CHECKF(shell(cmd) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "cd %s && %s prepare --text tales.txt --n_training_shards 4 --output_dir p2 > out 2> err",
             tmp, bert);
    CHECK(shell(cmd) == 1);
    err = read_text(path);
    CHECKF(strstr(err, "--n_training_shards asks for 4 shards in all (4 training + 0 test)") && strstr(err, "3 documents"), "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(shell(cmd) == 0);
}

/* bert prepare's casing is its vocabulary's, as pretrain infers and records it (its
 * tokenizer_config.json): a cased vocabulary writes cased ids under hdf5_lower_case_0_...,
 * said on stderr; --do_lower_case still wins. It lower-cased by default: a cased model was
 * pre-trained on lower-cased text, then fine-tuned cased. */
static void test_casing_from_the_vocabulary(void) {
    char tmp[] = "/tmp/bert-prepare-casing-XXXXXX", cmd[8192], path[512];
    if (!mkdtemp(tmp)) { CHECK(0); return; }
    char *cwd = getcwd(NULL, 0);
    snprintf(cmd, sizeof cmd, "cp tests/data/pretraining/docs_b1.txt %s/my_book.txt", tmp);
    CHECK(shell(cmd) == 0);
    const char *hdf5 = "hdf5_lower_case_%d_seq_len_128_max_pred_20_masked_lm_prob_0.15_random_seed_12345_dupe_factor_1/"
                       "my_book/my_book_training_0.hdf5";
    for (int lower = 0; lower < 2; lower++) {
        snprintf(cmd, sizeof cmd, "cd %s && %s prepare --text my_book.txt --phase2_max_seq_length 0 --dupe_factor 1 "
                                  "--vocab_file %s/data/vocab/bert-base-cased-vocab.txt --output_dir p%d %s > out 2> err",
                 tmp, bert, cwd, lower, lower ? "--do_lower_case" : "");
        CHECK(shell(cmd) == 0);
        snprintf(path, sizeof path, "%s/err", tmp);
        char *err = read_text(path);
        CHECKF(lower ? strstr(err, "warning: --do_lower_case true, but the vocabulary") != NULL
                     : strstr(err, "prepare: note: keeping the case, as the vocabulary") != NULL, "%s", err);
        free(err);
        char shard[1024];
        snprintf(path, sizeof path, "%s/p%d/", tmp, lower);
        snprintf(shard, sizeof shard, "%s", path);
        snprintf(shard + strlen(shard), sizeof shard - strlen(shard), hdf5, lower);
        PretrainingShard s;
        BertError e;
        CHECKF(hdf5_shard_load(shard, &s, &e) == 0, "%s", e.msg);
        /* the masked tokens (as they were in the text, not the random ones put in their place)
         * hold capitals, or none */
        Vocab *vocab;
        CHECK(vocab_load(&vocab, "data/vocab/bert-base-cased-vocab.txt", &e) == 0);
        long capitals = 0;
        for (size_t i = 0; i < s.n * (size_t)s.max_predictions_per_seq; i++) {
            const char *t = vocab_token(vocab, s.masked_lm_ids[i]);
            for (; t && *t != '[' && *t; t++) capitals += *t >= 'A' && *t <= 'Z';
        }
        CHECKF(lower ? capitals == 0 : capitals > 0, "%ld upper-case letters in the masked tokens", capitals);
        vocab_free(vocab);
        pretraining_shard_free(&s);
    }
    free(cwd);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(shell(cmd) == 0);
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert, sizeof bert) != 0) return 1;
    RUN_TEST(test_whole_chain_with_nvidia_names);
    RUN_TEST(test_ranks_take_disjoint_shards);
    RUN_TEST(test_resume_skips_what_is_unchanged);
    RUN_TEST(test_bad_requests_are_clear_errors);
    RUN_TEST(test_python_float_str);
    RUN_TEST(test_text_documents_without_the_licence);
    RUN_TEST(test_one_document_and_no_test_shards);
    RUN_TEST(test_shard_counts_from_the_data);
    RUN_TEST(test_dataset_named_after_the_inputs);
    RUN_TEST(test_prepare_text_as_a_user);
    RUN_TEST(test_casing_from_the_vocabulary);
    return test_summary();
}
