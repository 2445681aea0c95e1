/* data/prepare: the whole chain (books -> formatted -> shards -> phase-1/phase-2 HDF5)
 * on a small generated book folder: NVIDIA's folder and file names, every shard present
 * and equal to create_pretraining_data run on its text shard alone, rank splitting, the
 * hdf5-only step finding existing shards, and Python's float formatting in names. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

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

int main(void) {
    RUN_TEST(test_whole_chain_with_nvidia_names);
    RUN_TEST(test_ranks_take_disjoint_shards);
    RUN_TEST(test_resume_skips_what_is_unchanged);
    RUN_TEST(test_bad_requests_are_clear_errors);
    RUN_TEST(test_python_float_str);
    return test_summary();
}
