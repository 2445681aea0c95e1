/* Core utilities: atomic file output keeps the old file whole until commit. */
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

int main(void) {
    RUN_TEST(test_atomic_file_replaces_only_on_commit);
    RUN_TEST(test_unwritable_output_is_an_error);
    RUN_TEST(test_is_same_file);
    return test_summary();
}
