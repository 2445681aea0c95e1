/* Core utilities: atomic file output keeps the old file whole until commit. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/common.h"
#include "core/strmap.h"
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "test.h"
#include "test_util.h"

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

/* One file under several names found by identity among many, as the first two names of
 * the file whose second name comes first; look-ups give a file's first name. */
static void test_file_set(void) {
    const char *paths[] = {"tests/test.h", "tests/test_common.c", "tests/no-such-file.h", "tests/no-such-file.h",
                           "./tests/test_common.c", "tests/../tests/test.h", "Makefile", "./tests/test.h"};
    FileSet *s = file_set_new(paths, 8);
    int first = -1, second = -1;
    CHECK(file_set_duplicate(s, &first, &second) && first == 1 && second == 4);
    CHECK(file_set_find(s, "./tests/../tests/test.h") == 0 && file_set_find(s, "Makefile") == 6);
    CHECK(file_set_find(s, "tests/no-such-file.h") == -1 && file_set_find(s, "README.md") == -1);
    file_set_free(s);
    FileSet *distinct = file_set_new(paths + 1, 2);  /* test_common.c and a missing file */
    CHECK(!file_set_duplicate(distinct, &first, &second));
    file_set_free(distinct);
    FileSet *none = file_set_new(NULL, 0);
    CHECK(!file_set_duplicate(none, &first, &second) && file_set_find(none, "Makefile") == -1);
    file_set_free(none);
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

static int count_dir(const char *dir, const char *prefix) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d) closedir(d);
    return n;
}

/* Issue 14, defect 7: temporaries looked like outputs ("x_training_0.hdf5.tmp.PID", which
 * NVIDIA's trainer loads) and stayed after SIGTERM, SIGINT and kills. Now hidden and without
 * the output's name, removed on SIGTERM, and a killed process's removed by the next write in
 * that folder. */
static void test_temporaries(void) {
    char dir[] = "/tmp/bert-tmpnames-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    if (test_case_failed) return;
    char out[256];
    snprintf(out, sizeof out, "%s/x_training_0.hdf5", dir);
    AtomicFile af;
    BertError err;
    CHECK(atomic_open(&af, out, &err) == 0);
    const char *base = strrchr(af.tmp_path, '/') + 1;
    CHECKF(base[0] == '.' && !strstr(base, "training"), "temporary %s", af.tmp_path);
    atomic_abort(&af);
    CHECK(count_dir(dir, ".bert-tmp.") == 0);
    for (int sig = 0; sig < 2; sig++) {
        pid_t pid = fork();
        if (pid == 0) {
            signals_start();
            AtomicFile child;
            if (atomic_open(&child, out, &err) != 0) _exit(3);
            fputs("half", child.fp), fflush(child.fp);
            /* to the process (a raise() would stay pending on this thread, which blocks it) */
            kill(getpid(), sig == 0 ? SIGTERM : SIGKILL);
            sleep(10);
            _exit(4);
        }
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status));
        int left = count_dir(dir, ".bert-tmp.");
        CHECKF(left == (sig == 0 ? 0 : 1), "%s: %d temporaries left", sig == 0 ? "SIGTERM" : "SIGKILL", left);
    }
    /* the killed writer's temporary goes when a later run writes in the folder (each process
     * looks at a folder once) */
    pid_t pid = fork();
    if (pid == 0) _exit(atomic_open(&af, out, &err) == 0 && atomic_commit(&af, &err) == 0 ? 0 : 1);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(count_dir(dir, ".bert-tmp.") == 0 && count_dir(dir, "x_training_0.hdf5") == 1);
    unlink(out);
    /* as many live temporaries as a `bert shard` of 400 + 200 shards, every other one
     * published: SIGTERM removes all that are left (a list of 256 dropped the rest, and
     * SIGTERM left them) and none of the outputs */
    pid = fork();
    if (pid == 0) {
        signals_start();
        static char tmp[600][4096 + 320];
        for (int i = 0; i < 600; i++) {
            atomic_tmp_name(out, tmp[i], sizeof tmp[i]);
            FILE *f = fopen(tmp[i], "w");
            if (!f || fclose(f) != 0) _exit(3);
        }
        for (int i = 0; i < 600; i += 2) {
            char published[300];
            snprintf(published, sizeof published, "%s/out_%03d", dir, i);
            if (atomic_publish(tmp[i], published, &err) != 0) _exit(4);
        }
        kill(getpid(), SIGTERM);
        sleep(10);
        _exit(5);
    }
    waitpid(pid, &status, 0);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %d", status);
    const int left = count_dir(dir, ".bert-tmp."), published = count_dir(dir, "out_");
    CHECKF(left == 0 && published == 300, "after SIGTERM: %d of 300 temporaries left, %d of 300 outputs", left,
           published);
    /* a dead process's temporary goes, named with this machine or (named before names carried
     * it) without a machine; another machine's stays: in a folder shared between machines its
     * process id says nothing here, and the process may be writing it now */
    pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, &status, 0);   /* a process id that no longer runs */
    char mine[512], unnamed[512], elsewhere[512];
    snprintf(mine, sizeof mine, "%s/.bert-tmp.%ld.7.%s", dir, (long)pid, this_host());
    snprintf(unnamed, sizeof unnamed, "%s/.bert-tmp.%ld.8", dir, (long)pid);
    snprintf(elsewhere, sizeof elsewhere, "%s/.bert-tmp.%ld.9.%s.elsewhere", dir, (long)pid, this_host());
    write_text(mine, "x"), write_text(unnamed, "x"), write_text(elsewhere, "x");
    pid = fork();
    if (pid == 0) _exit(atomic_open(&af, out, &err) == 0 && atomic_commit(&af, &err) == 0 ? 0 : 1);
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECKF(!file_exists(mine) && !file_exists(unnamed) && file_exists(elsewhere),
           "a dead process's temporaries: this machine's %s, unnamed %s, another machine's %s",
           file_exists(mine) ? "kept" : "removed", file_exists(unnamed) ? "kept" : "removed",
           file_exists(elsewhere) ? "kept" : "removed");
    CHECK(temporary_owner_gone(pid, NULL) && temporary_owner_gone(pid, this_host()) &&
          !temporary_owner_gone(pid, "another-machine") && !temporary_owner_gone((long)getpid(), NULL) &&
          !temporary_owner_gone(1, NULL));
    remove_tree(dir);
}

static int atomic_write_text(const char *path, const char *text, BertError *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) return -1;
    fputs(text, af.fp);
    return atomic_commit(&af, err);
}

/* Issue 14, defect 1: an output that is a device, FIFO or link was replaced by a regular file
 * (run as root, `-o /dev/null` turned the machine's /dev/null into one). Now devices and
 * FIFOs are written through, a link's target is replaced and the link kept, a folder refused. */
static void test_special_outputs(void) {
    char dir[] = "/tmp/bert-special-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    if (test_case_failed) return;
    char fifo[128], target[128], link[128], dev[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir), snprintf(target, sizeof target, "%s/target.txt", dir);
    snprintf(link, sizeof link, "%s/link.txt", dir), snprintf(dev, sizeof dev, "%s/null", dir);
    BertError err;
    struct stat st;
    /* a FIFO: a reader gets the text, the FIFO stays */
    CHECK(mkfifo(fifo, 0600) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char buf[64] = "";
        FILE *f = fopen(fifo, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        _exit(n == 6 && !memcmp(buf, "piped\n", 6) ? 0 : 1);
    }
    CHECKF(atomic_write_text(fifo, "piped\n", &err) == 0, "%s", err.msg);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    /* a link: its target replaced, the link kept */
    write_text(target, "old\n");
    CHECK(symlink("target.txt", link) == 0);
    CHECK(atomic_write_text(link, "new\n", &err) == 0);
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    char *text = read_text(target);
    CHECK(!strcmp(text, "new\n"));
    free(text);
    /* a character device (needs root to make one; /dev/null's numbers) */
    if (mknod(dev, S_IFCHR | 0600, makedev(1, 3)) == 0) {
        CHECK(atomic_write_text(dev, "gone\n", &err) == 0);
        CHECK(lstat(dev, &st) == 0 && S_ISCHR(st.st_mode));
    }
    /* a folder */
    CHECK(atomic_write_text(dir, "x", &err) != 0 && strstr(err.msg, "folder"));
    remove_tree(dir);
}

/* The string map: keys copied or borrowed, any bytes, numbered in the order first added;
 * the value rule (first or last add wins) is the caller's; the hash extends. */
/* make_dirs_created remembers the outermost folder it made; remove_created_dirs takes back
 * the empty ones up to it, never a folder that existed or holds a file; check_input_file
 * names what is wrong. */
static void test_created_dirs_and_inputs(void) {
    char root[96], path[256], created[256], at[256];   /* per process: two runs of the suite never share it */
    snprintf(root, sizeof root, "/tmp/bert_test_created_dirs.%d", (int)getpid());
    BertError err;
    remove_tree(root);
    mkdir(root, 0777);
    snprintf(path, sizeof path, "%s/a/b/c/", root);
    CHECK(make_dirs_created(path, created, sizeof created, &err) == 0);
    snprintf(at, sizeof at, "%s/a", root);
    CHECKF(!strcmp(created, at), "%s", created);
    remove_created_dirs(path, created);
    CHECK(!file_exists(at) && file_exists(root));
    CHECK(make_dirs_created(path, created, sizeof created, &err) == 0);
    char kept[256], c_dir[256];
    snprintf(kept, sizeof kept, "%s/a/b/kept.txt", root), snprintf(c_dir, sizeof c_dir, "%s/a/b/c", root);
    write_text(kept, "x");
    remove_created_dirs(path, created);   /* c goes; b holds a file, so b and a stay */
    CHECK(!file_exists(c_dir) && file_exists(kept));
    CHECK(make_dirs_created(root, created, sizeof created, &err) == 0 && created[0] == '\0');
    remove_created_dirs(root, created);   /* it existed: nothing made, nothing removed */
    CHECK(file_exists(root));
    char none[256], want[400];
    snprintf(none, sizeof none, "%s/none.tsv", root);
    snprintf(want, sizeof want, "--do_predict needs %s: No such file", none);
    CHECKF(check_input_file(none, "--do_predict needs", &err) != 0 && strstr(err.msg, want), "%s", err.msg);
    /* a folder: named with the flag and said in one line ("--do_train needs cls is a folder, not a file" was
     * classify's, "error reading F" embed's) */
    char expected[256], *data = NULL;
    snprintf(expected, sizeof expected, "--vocab_file %s: a folder, not a file", root);
    CHECKF(check_input_file(root, "--vocab_file", &err) != 0 && !strcmp(err.msg, expected), "%s", err.msg);
    snprintf(expected, sizeof expected, "%s: a folder, not a file", root);
    CHECKF(read_file(root, &data, NULL, &err) != 0 && !strcmp(err.msg, expected), "%s", err.msg);
    CHECK(check_input_file(kept, "--vocab_file", &err) == 0);
    remove_tree(root);
}

static void test_strmap(void) {
    StrMap m;
    strmap_init(&m, 0, true);
    char key[8] = "ab";
    bool added;
    StrMapEntry *e = strmap_intern(&m, key, 2, &added);
    CHECK(added && strmap_index(&m, e) == 0 && e->value == 0 && e->key != key && !strcmp(e->key, "ab"));
    e->value = 7;
    key[0] = 'x';   /* the map holds its own copy */
    CHECK(strmap_find(&m, "ab", 2) && strmap_find(&m, "ab", 2)->value == 7 && !strmap_find(&m, "xb", 2));
    CHECK(!strmap_find(&m, "a", 1) && !strmap_find(&m, "abc", 3));   /* prefixes are other keys */
    e = strmap_intern(&m, "ab", 2, &added);
    CHECK(!added && strmap_index(&m, e) == 0 && e->value == 7 && m.n == 1);
    CHECK(strmap_index(&m, strmap_intern(&m, "", 0, &added)) == 1 && added);   /* the empty key */
    CHECK(strmap_index(&m, strmap_intern(&m, "a\0b", 3, &added)) == 2 && added);   /* a NUL inside */
    CHECK(strmap_find(&m, "a\0b", 3) && !strmap_find(&m, "a\0c", 3) && strmap_find(&m, "", 0));
    /* growing keeps every entry in its place */
    char buf[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(buf, sizeof buf, "key%d", i);
        strmap_intern(&m, buf, strlen(buf), NULL)->value = i;
    }
    bool all = m.n == 20003;
    for (int i = 0; i < 20000; i++) {
        snprintf(buf, sizeof buf, "key%d", i);
        const StrMapEntry *f = strmap_find(&m, buf, strlen(buf));
        all = all && f && f->value == i && strmap_index(&m, f) == (size_t)i + 3 && !strcmp(f->key, buf);
    }
    CHECK(all);
    /* the hash extends: a word's prefixes are hashed in one pass */
    uint64_t h = strmap_hash_extend(strmap_hash("ke", 2), "y12", 3);
    CHECK(h == strmap_hash("key12", 5) && strmap_find_hashed(&m, h, "key12", 5) == strmap_find(&m, "key12", 5));
    strmap_free(&m);
    /* borrowed keys: the caller's bytes */
    static const char *const words[] = {"one", "two", "one"};
    strmap_init(&m, 3, false);
    for (int i = 0; i < 3; i++) strmap_intern(&m, words[i], 3, NULL)->value = i;   /* the last add wins */
    CHECK(m.n == 2 && m.entries[0].key == words[0] && strmap_find(&m, "one", 3)->value == 2);
    strmap_free(&m);
}

/* thread_at_exit: a thread's callbacks run when it ends, the last registered first, each
 * with its argument; another thread's are not run by this one's end. */
static int exit_order[4], exit_count;

static void record_exit(void *arg) { exit_order[exit_count++] = *(int *)arg; }

static void *register_two(void *arg) {
    static int one = 1, two = 2;
    (void)arg;
    const int before = exit_count;
    thread_at_exit(record_exit, &one);
    thread_at_exit(record_exit, &two);
    CHECK(exit_count == before);   /* not yet: when the thread ends */
    return NULL;
}

static void test_thread_at_exit(void) {
    pthread_t t;
    exit_count = 0;
    CHECK(pthread_create(&t, NULL, register_two, NULL) == 0 && pthread_join(t, NULL) == 0);
    CHECKF(exit_count == 2 && exit_order[0] == 2 && exit_order[1] == 1, "%d calls: %d, %d", exit_count, exit_order[0],
           exit_order[1]);
    CHECK(pthread_create(&t, NULL, register_two, NULL) == 0 && pthread_join(t, NULL) == 0);   /* a second thread: its own list */
    CHECK(exit_count == 4 && exit_order[2] == 2 && exit_order[3] == 1);
}

int main(void) {
    RUN_TEST(test_atomic_file_replaces_only_on_commit);
    RUN_TEST(test_unwritable_output_is_an_error);
    RUN_TEST(test_is_same_file);
    RUN_TEST(test_file_set);
    RUN_TEST(test_peak_rss_reset);
    RUN_TEST(test_split_list);
    RUN_TEST(test_temporaries);
    RUN_TEST(test_special_outputs);
    RUN_TEST(test_strmap);
    RUN_TEST(test_created_dirs_and_inputs);
    RUN_TEST(test_thread_at_exit);
    return test_summary();
}
