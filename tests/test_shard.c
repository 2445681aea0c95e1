/* Sharding: byte-for-byte parity with NVIDIA's TextSharding.py (two configurations,
 * fixtures from tools/make_corpus_fixtures.py), determinism of the seeded order, and bad
 * input: too few documents, missing input, unwritable output, blank and invalid lines. */
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/corpus.h"
#include "test.h"
#include "test_util.h"

static const char *const FIXTURE_INPUTS[] = {"tests/data/corpus/shard_input_a.txt",
                                             "tests/data/corpus/shard_input_b.txt"};

static char *make_tmpdir(void) {
    char tmpl[] = "/tmp/bert_test_shard_XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? xstrdup(d) : NULL;
}


static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}


static void check_parity(const char *config, int n_train, int n_test, double fraction) {
    char *dir = make_tmpdir();
    ShardOptions opt = shard_default_options();
    opt.input_files = FIXTURE_INPUTS;
    opt.n_input_files = 2;
    opt.output_dir = dir;
    opt.n_training_shards = n_train;
    opt.n_test_shards = n_test;
    opt.fraction_test_set = fraction;
    ShardStats st;
    BertError err;
    int rc = shard_corpus(&opt, &st, &err);
    CHECKF(rc == 0, "%s: %s", config, err.msg);
    CHECK(st.documents == 266);
    CHECK(count_files(dir) == n_train + n_test);
    int same = 0;
    for (int i = 0; i < n_train + n_test; i++) {
        char ours[4096], ref[4096], refdir[512];
        bool is_test = i >= n_train;
        shard_path(&opt, is_test, is_test ? i - n_train : i, ours, sizeof ours);
        snprintf(refdir, sizeof refdir, "tests/data/corpus/shard_expected/%s", config);
        ShardOptions r = opt;
        r.output_dir = refdir;
        shard_path(&r, is_test, is_test ? i - n_train : i, ref, sizeof ref);
        bool eq = files_equal(ours, ref);
        CHECKF(eq, "%s differs from NVIDIA's %s", ours, ref);
        same += eq;
    }
    printf("    %s: %d of %d shards identical to NVIDIA's (%lld sentences)\n", config, same,
           n_train + n_test, st.sentences);
    remove_tree(dir);
    free(dir);
}

static void test_nvidia_parity(void) {
    check_parity("t4_e2_f0.1", 4, 2, 0.1);
    check_parity("t16_e5_f0.3", 16, 5, 0.3);
}

/* Concatenation of all shard files of dir (for comparing runs). */
static char *slurp_shards(const ShardOptions *opt, size_t *len) {
    char *all = NULL;
    FILE *m = open_memstream(&all, len);
    for (int i = 0; i < opt->n_training_shards + opt->n_test_shards; i++) {
        char path[4096], *data;
        size_t n;
        BertError err;
        bool is_test = i >= opt->n_training_shards;
        shard_path(opt, is_test, is_test ? i - opt->n_training_shards : i, path, sizeof path);
        if (read_file(path, &data, &n, &err) == 0) {
            fwrite(data, 1, n, m);
            free(data);
        }
        fputs("=====\n", m);
    }
    fclose(m);
    return all;
}

static void test_seeded_order(void) {
    char *d1 = make_tmpdir(), *d2 = make_tmpdir(), *d3 = make_tmpdir();
    ShardOptions opt = shard_default_options();
    opt.input_files = FIXTURE_INPUTS;
    opt.n_input_files = 2;
    opt.n_training_shards = 5;
    opt.n_test_shards = 2;
    BertError err;
    size_t n1, n2, n3;
    opt.random_seed = 7;
    opt.output_dir = d1;
    CHECK(shard_corpus(&opt, NULL, &err) == 0);
    char *a = slurp_shards(&opt, &n1);
    opt.output_dir = d2;
    opt.n_threads = 1;
    CHECK(shard_corpus(&opt, NULL, &err) == 0);
    char *b = slurp_shards(&opt, &n2);
    opt.random_seed = 8;
    opt.output_dir = d3;
    CHECK(shard_corpus(&opt, NULL, &err) == 0);
    char *c = slurp_shards(&opt, &n3);
    CHECK(n1 == n2 && !memcmp(a, b, n1));       /* same seed, any thread count: same shards */
    CHECK(n1 == n3 && memcmp(a, c, n1) != 0);   /* another seed: same text, other order */
    free(a), free(b), free(c);
    remove_tree(d1), remove_tree(d2), remove_tree(d3);
    free(d1), free(d2), free(d3);
}


static void test_bad_input(void) {
    char *dir = make_tmpdir(), in[4096], out[4096];
    snprintf(in, sizeof in, "%s/in.txt", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    const char *inputs[] = {in};
    ShardOptions opt = shard_default_options();
    opt.input_files = inputs;
    opt.n_input_files = 1;
    opt.output_dir = out;
    opt.n_training_shards = 2;
    opt.n_test_shards = 1;
    BertError err;
    /* fewer documents than shards: blank and whitespace-only lines are not documents */
    const char few[] = "One doc. Two sentences.\n\n   \t\n\xC2\xA0\nSecond doc.\n";
    write_bytes(in, few, sizeof few - 1);
    CHECK(shard_corpus(&opt, NULL, &err) != 0);
    CHECKF(strstr(err.msg, "fewer documents (2) than shards (3)"), "%s", err.msg);
    CHECK(count_files(out) == 0);
    /* invalid UTF-8, CR LF, a long line without any stop: replaced, kept, no crash */
    char text[20000];
    int n = snprintf(text, sizeof text, "Bad \xFF byte here. Fine.\r\nThird doc\r\n");
    memset(text + n, 'x', 15000);
    n += 15000;
    text[n++] = '\n';
    write_bytes(in, text, (size_t)n);
    ShardStats st;
    CHECKF(shard_corpus(&opt, &st, &err) == 0, "%s", err.msg);
    CHECK(st.documents == 3 && st.sentences == 4 && st.invalid_utf8_bytes == 1);
    char path[4096], *data;
    size_t len;
    shard_path(&opt, false, 0, path, sizeof path);
    CHECK(read_file(path, &data, &len, &err) == 0);
    if (len) CHECK(!strchr(data, '\r'));
    free(data);
    /* missing input file */
    const char *missing[] = {"tests/data/corpus/no_such_file.txt"};
    opt.input_files = missing;
    CHECK(shard_corpus(&opt, NULL, &err) != 0 && strstr(err.msg, "no_such_file.txt"));
    /* unwritable output: a file where the folder should be */
    opt.input_files = FIXTURE_INPUTS;
    opt.n_input_files = 2;
    opt.output_dir = in;
    CHECK(shard_corpus(&opt, NULL, &err) != 0 && strstr(err.msg, "in.txt"));
    /* bad options */
    opt.output_dir = out;
    opt.n_test_shards = -1;  /* 0 is allowed: no test shards */
    CHECK(shard_corpus(&opt, NULL, &err) != 0);
    opt.n_test_shards = 1;
    opt.fraction_test_set = 1.5;
    CHECK(shard_corpus(&opt, NULL, &err) != 0);
    opt.fraction_test_set = 0.1;
    opt.n_training_shards = 2147483647;  /* training + test overflowed an int */
    CHECK(shard_corpus(&opt, NULL, &err) != 0 && strstr(err.msg, "at most"));
    remove_tree(dir);
    free(dir);
}

/* Documents i = 0..n-1 of 1 + i % 20 sentences each: sizes from one sentence to twenty, so
 * the distribution over shards has many sizes to choose from (caller frees). */
static char *documents_of_many_sizes(long n, size_t *len) {
    char *text = NULL;
    FILE *m = open_memstream(&text, len);
    for (long i = 0; i < n; i++) {
        for (long k = 0; k <= i % 20; k++) fprintf(m, "Sentence %06ld.%02ld here. ", i, k);
        fputc('\n', m);
    }
    fclose(m);
    return text;
}

/* Work of sharding text into 4 training and 2 test shards on one thread: the sharder's
 * own steps plus sentence splitting's. */
static long long sharding_work(const char *dir, const char *text, size_t len) {
    char input[4200];
    snprintf(input, sizeof input, "%s/input.txt", dir);
    write_bytes(input, text, len);
    const char *inputs[] = {input};
    ShardOptions opt = shard_default_options();
    opt.input_files = inputs;
    opt.n_input_files = 1;
    opt.output_dir = dir;
    opt.n_training_shards = 4;
    opt.n_test_shards = 2;
    opt.n_threads = 1;  /* the counters are per thread */
    ShardStats st;
    BertError err;
    const long long before = test_work();
    int rc = shard_corpus(&opt, &st, &err);
    const long long work = test_work() - before;
    CHECKF(rc == 0, "%s", err.msg);
    return work;
}

/* Sharding is linear in its input: 10x the input, at most 15x the work (tests/test.h) --
 * both passes, the distribution over shards and the sentence splitting -- for an ordinary
 * corpus, one huge document among a few small ones, many tiny documents, documents
 * without a sentence end, blank lines, and documents of twenty different sizes. */
static void test_shard_scales_linearly(void) {
    char *dir = make_tmpdir();
    const struct { const char *what, *prefix, *unit; long docs; } cases[] = {
        {"ordinary documents", "", "Doc %06ld begins here. It has a second sentence. And a third one!\n\n", 300},
        {"one huge document", "A.\nB.\nC.\nD.\nE.\nF.\n", "Sentence %06ld of the one long document. ", 1000},
        {"many tiny documents", "", "A%06ld.\n", 4000},
        {"documents without a sentence end", "", "words and words and more words %06ld\n", 1000},
        {"blank lines between documents", "", "Doc %06ld.\n \t \n\n\n\n\n\n", 2000},
        {"documents of many sizes", NULL, NULL, 200},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        long long work[2], bytes[2];
        for (int big = 0; big < 2; big++) {
            long docs = big ? 10 * cases[k].docs : cases[k].docs;
            size_t len;
            char *text = cases[k].unit ? repeat_text(cases[k].prefix, cases[k].unit, docs, "", &len)
                                       : documents_of_many_sizes(docs, &len);
            work[big] = sharding_work(dir, text, len);
            bytes[big] = (long long)len;
            free(text);
        }
        CHECK_SCALES_LINEARLY(cases[k].what, work[0], work[1], 2 * bytes[0]);  /* read twice */
    }
    remove_tree(dir);
    free(dir);
}

/* n_test_shards 0: no test files, and every sentence in the training shards (the fraction
 * for a test set is moot). */
static void test_no_test_shards(void) {
    char *dir = make_tmpdir();
    ShardOptions opt = shard_default_options();
    opt.input_files = FIXTURE_INPUTS;
    opt.n_input_files = 2;
    opt.output_dir = dir;
    opt.n_training_shards = 4;
    opt.n_test_shards = 1;
    ShardStats with_test, without;
    BertError err;
    CHECKF(shard_corpus(&opt, &with_test, &err) == 0, "%s", err.msg);
    remove_tree(dir);
    opt.n_test_shards = 0;
    CHECKF(shard_corpus(&opt, &without, &err) == 0, "%s", err.msg);
    CHECK(count_files(dir) == 4 && without.documents == 266);
    CHECKF(without.sentences == with_test.sentences && without.sentences > 0, "%lld sentences, %lld with a test shard",
           without.sentences, with_test.sentences);
    long long in_training = 0;
    for (int i = 0; i < 4; i++) {
        char path[4096];
        shard_path(&opt, false, i, path, sizeof path);
        char *text = read_text(path);
        for (char *p = text; *p; p++) in_training += p[0] == '\n' && p > text && p[-1] != '\n';
        free(text);
    }
    CHECKF(in_training == without.sentences, "%lld sentence lines in the training shards of %lld", in_training,
           without.sentences);
    remove_tree(dir);
    free(dir);
}

/* More shards than the process may open files: each shard is closed once written and all are
 * published at the end. Every output was held open until the end, so past the limit of open
 * files (1024 by default; prepare may ask for 2^20 shards) the run failed with "Too many open
 * files" after all of pass 2. Here 200 + 40 shards under a limit of 64, in a child process. */
static void test_more_shards_than_open_files(void) {
    char *dir = make_tmpdir();
    ShardOptions opt = shard_default_options();
    opt.input_files = FIXTURE_INPUTS;
    opt.n_input_files = 2;
    opt.output_dir = dir;
    opt.n_training_shards = 200;
    opt.n_test_shards = 40;
    opt.n_threads = 2;
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit lim = {64, 64};
        if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(2);
        BertError err;
        if (shard_corpus(&opt, NULL, &err) != 0) {
            fprintf(stderr, "    shard under 64 open files: %s\n", err.msg);
            _exit(1);
        }
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    CHECKF(count_files(dir) == 240, "%d of 240 shards", count_files(dir));
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) CHECKF(strncmp(e->d_name, ".bert-tmp.", 10), "left %s", e->d_name);
    if (d) closedir(d);
    remove_tree(dir);
    free(dir);
}

int main(void) {
    RUN_TEST(test_more_shards_than_open_files);   /* forks: before this process runs OpenMP threads (libgomp) */
    RUN_TEST(test_nvidia_parity);
    RUN_TEST(test_seeded_order);
    RUN_TEST(test_bad_input);
    RUN_TEST(test_no_test_shards);
    RUN_TEST(test_shard_scales_linearly);
    return test_summary();
}
