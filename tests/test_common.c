/* Core utilities: atomic file output keeps the old file whole until commit. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/common.h"
#include "test.h"

static void test_atomic_file_replaces_only_on_commit(void) {
    const char *path = "build/test_atomic.txt";
    BertError err;
    AtomicFile af;
    CHECK(atomic_open(&af, path, &err) == 0);
    fputs("old", af.fp);
    CHECK(atomic_commit(&af, &err) == 0);
    CHECK(atomic_open(&af, path, &err) == 0);
    fputs("new but abandoned", af.fp);
    atomic_abort(&af);
    char *data = NULL;
    CHECK(read_file(path, &data, NULL, &err) == 0);
    CHECK(data && strcmp(data, "old") == 0);
    CHECK(access(af.tmp_path, F_OK) != 0);  /* the temporary is gone */
    free(data);
    unlink(path);
}

static void test_unwritable_output_is_an_error(void) {
    BertError err;
    AtomicFile af;
    CHECK(atomic_open(&af, "/nonexistent-dir/x.bin", &err) == -1);
    CHECK(strstr(err.msg, "cannot write") != NULL);
}

/* Different spellings of one file are one file; a missing path is no file. */
static void test_is_same_file(void) {
    CHECK(is_same_file("tests/test.h", "./tests/../tests/test.h"));
    CHECK(!is_same_file("tests/test.h", "tests/test_common.c"));
    CHECK(!is_same_file("tests/test.h", "tests/no-such-file.h"));
    CHECK(!is_same_file("tests/no-such-file.h", "tests/no-such-file.h"));
}

/* The peak RSS follows memory touched, and a reset brings it back to the current size, so a
 * phase that freed its buffers (bench's sgemm-peak measurement) leaves no trace in it. */
static void test_peak_rss_reset(void) {
    const size_t n = 96u << 20;
    size_t before = peak_rss_bytes();
    /* mmap, not malloc: a sanitizer's allocator keeps freed blocks in quarantine */
    volatile char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { CHECK(0); return; }
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;   /* volatile: the stores must happen */
    size_t during = peak_rss_bytes();
    CHECKF(before > 0 && during >= before + n / 2, "peak %zu -> %zu after touching %zu bytes", before, during, n);
    munmap((void *)p, n);
    if (reset_peak_rss() != 0) return;   /* no /proc/self/clear_refs here: nothing more to check */
    size_t after = peak_rss_bytes();
    CHECKF(after + n / 2 <= during, "peak %zu after the reset, %zu before it", after, during);
}

/* The one list splitter every list flag uses: empty items skipped, too many refused. */
static void test_split_list(void) {
    char a[] = "x,,y,z,";
    const char *items[3];
    CHECK(list_capacity("x,,y,z,") == 5);
    CHECK(split_list(a, items, 3) == 3 && !strcmp(items[0], "x") && !strcmp(items[1], "y") && !strcmp(items[2], "z"));
    char b[] = "p,q,r,s";
    CHECK(split_list(b, items, 3) == -1);
    char c[] = ",,";
    CHECK(split_list(c, items, 3) == 0);
}

int main(void) {
    RUN_TEST(test_atomic_file_replaces_only_on_commit);
    RUN_TEST(test_unwritable_output_is_an_error);
    RUN_TEST(test_is_same_file);
    RUN_TEST(test_peak_rss_reset);
    RUN_TEST(test_split_list);
    return test_summary();
}
