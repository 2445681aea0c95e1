/* Bundled data (vocabularies, the default corpus) is found from the program's location, not
 * the current directory: `bert prepare` with its defaults works when run from another
 * folder, from the source tree's binary and from an installed layout (PREFIX/bin/bert with
 * PREFIX/share/bert, what `make install` writes). */
#include "test.h"
#include "test_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/bundled.h"

static char bert[1024], cwd[512], tmp[64];

static int run_prepare_from(const char *binary, const char *where) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && cd %s && %s prepare --output_dir p --phase2_max_seq_length 0 --n_training_shards 1 "
             "--n_test_shards 1 --dupe_factor 1 --quiet > out 2>&1 && test -s p/hdf5_lower_case_1_seq_len_128_max_pred_"
             "20_masked_lm_prob_0.15_random_seed_12345_dupe_factor_1/bookscorpus/bookscorpus_training_0.hdf5",
             where, where, binary);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_found_from_the_binary(void) {
    char path[4096];
    CHECK(bundled_data_path("vocab/bert-base-uncased-vocab.txt", path, sizeof path) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 100000);
    CHECK(bundled_data_path("vocab/no-such-vocab.txt", path, sizeof path) == -1 && strstr(path, "no-such-vocab"));
    /* BERT_DATA_DIR wins when it has the file */
    char dir[128];
    snprintf(dir, sizeof dir, "%s/custom/vocab", tmp);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && echo '[UNK]' > %s/bert-base-uncased-vocab.txt", dir, dir);
    CHECK(system(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/custom", tmp);
    setenv("BERT_DATA_DIR", dir, 1);
    CHECK(bundled_data_path("vocab/bert-base-uncased-vocab.txt", path, sizeof path) == 0 && strstr(path, "/custom/"));
    unsetenv("BERT_DATA_DIR");
}

static void test_prepare_from_another_folder(void) {
    char where[128];
    snprintf(where, sizeof where, "%s/elsewhere", tmp);
    CHECKF(run_prepare_from(bert, where) == 0, "%s prepare from %s failed", bert, where);
}

static void test_installed_layout(void) {
    char cmd[4096], where[128];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/inst/bin %s/inst/share/bert && cp %s %s/inst/bin/bert && "
                              "cp -R %s/data/vocab %s/data/corpus %s/inst/share/bert/",
             tmp, tmp, bert, tmp, cwd, cwd, tmp);
    CHECK(system(cmd) == 0);
    snprintf(where, sizeof where, "%s/elsewhere2", tmp);
    snprintf(cmd, sizeof cmd, "%s/inst/bin/bert", tmp);
    CHECKF(run_prepare_from(cmd, where) == 0, "installed bert prepare from %s failed", where);
}

int main(int argc, char **argv) {
    (void)argc;
    if (!getcwd(cwd, sizeof cwd) || test_bert_binary(argv[0], bert, sizeof bert) != 0) return 1;
    snprintf(tmp, sizeof tmp, "/tmp/bert-bundled-XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    RUN_TEST(test_found_from_the_binary);
    RUN_TEST(test_prepare_from_another_folder);
    RUN_TEST(test_installed_layout);
    char cleanup[128];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", tmp);
    if (system(cleanup) != 0) return 1;
    return test_summary();
}
