/* io/tf_checkpoint: TensorFlow checkpoints written by TensorFlow itself (TF1 Saver, TF2
 * tf.train.Checkpoint, tools/make_tf_fixtures.py) read to the bytes TensorFlow reads, and
 * damaged or crafted ones refused with a one-line message that says why (TF_TEST_VERBOSE=1 prints them). */
#include <isa-l/crc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/tf_checkpoint.h"
#include "test.h"
#include "test_util.h"

#define V1 "tests/data/tf/v1/model.ckpt"
#define V1_DATA V1 ".data-00000-of-00001"

static char dir[64];   /* build/test_tf_<pid>: this run's scratch copies */

static const char *dtype_name(StDtype d) { return st_dtype_name(d); }

/* The data bytes of a .npy file (versions 1 to 3: the header length is 2 or 4 bytes). */
static int npy_data(const char *path, char **file, const char **data, size_t *n) {
    size_t len;
    BertError err;
    if (read_file(path, file, &len, &err) != 0 || len < 12 || memcmp(*file, "\x93NUMPY", 6) != 0) return -1;
    const unsigned char *p = (const unsigned char *)*file;
    size_t hdr = p[6] == 1 ? 10 + (size_t)(p[8] | p[9] << 8) : 12 + (size_t)(p[8] | p[9] << 8 | p[10] << 16 | p[11] << 24);
    if (hdr > len) return -1;
    *data = *file + hdr, *n = len - hdr;
    return 0;
}

static int find(const TfCheckpoint *ck, const char *name) {
    for (int i = 0; i < ck->n; i++)
        if (!strcmp(ck->tensors[i].name, name)) return i;
    return -1;
}

/* Every line of expected.txt (name, dtype, shape, .npy) is a tensor of the checkpoint with
 * that dtype and shape whose bytes are the .npy's; and the checkpoint lists nothing else. */
static void check_against_expected(const char *ckpt, const char *folder) {
    TfCheckpoint ck;
    BertError err;
    CHECKF(tf_checkpoint_open(&ck, ckpt, &err) == 0, "%s: %s", ckpt, err.msg);
    char path[512], *text;
    snprintf(path, sizeof path, "%s/expected.txt", folder);
    CHECK(read_file(path, &text, NULL, &err) == 0);
    int lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char name[256], dtype[8], shape[64], npy[32];
        CHECK(sscanf(line, "%255[^\t]\t%7[^\t]\t%63[^\t]\t%31s", name, dtype, shape, npy) == 4);
        int i = find(&ck, name);
        CHECKF(i >= 0, "%s: no tensor %s", ckpt, name);
        if (i < 0) continue;
        const TfTensor *t = &ck.tensors[i];
        char got[64] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "", (long long)t->shape[d]);
        CHECKF(!strcmp(dtype_name(t->dtype), dtype) && !strcmp(t->ndim ? got : "-", shape), "%s: %s %s vs %s %s", name,
               dtype_name(t->dtype), got, dtype, shape);
        char *file = NULL;
        const char *want = NULL;
        size_t n = 0;
        snprintf(path, sizeof path, "%s/%s", folder, npy);
        CHECKF(npy_data(path, &file, &want, &n) == 0, "%s: not a .npy file", path);
        if (!want) { free(file); continue; }
        char *buf = xmalloc(n + 1);
        CHECKF(tf_checkpoint_read(&ck, i, buf, n, &err) == 0, "%s", err.msg);
        CHECKF(memcmp(buf, want, n) == 0, "%s: bytes differ from TensorFlow's", name);
        free(buf), free(file);
    }
    CHECKF(lines == ck.n && lines > 0, "%s: %d tensors, TensorFlow lists %d", ckpt, ck.n, lines);
    free(text);
    tf_checkpoint_close(&ck);
}

static void test_tf1_saver_checkpoint(void) {
    check_against_expected(V1, "tests/data/tf/v1");
    check_against_expected(V1 ".index", "tests/data/tf/v1");   /* the index file's name works too */
    TfCheckpoint ck;
    BertError err;
    CHECK(tf_checkpoint_open(&ck, V1, &err) == 0);
    int q = find(&ck, "bert/encoder/layer_0/attention/self/query/kernel"), g = find(&ck, "global_step");
    CHECK(q >= 0 && ck.tensors[q].dtype == ST_F32 && ck.tensors[q].ndim == 2 && ck.tensors[q].shape[0] == 8);
    CHECK(g >= 0 && ck.tensors[g].dtype == ST_I64 && ck.tensors[g].ndim == 0);
    if (g >= 0) {   /* a wrong destination size and a wrong index are errors, not overflows */
        int64_t step[2];
        CHECK(tf_checkpoint_read(&ck, g, step, sizeof step, &err) == -1 && strstr(err.msg, "global_step"));
        CHECK(tf_checkpoint_read(&ck, ck.n, step, 8, &err) == -1 && strstr(err.msg, "no tensor"));
    }
    tf_checkpoint_close(&ck);
}

/* TF2's object-graph checkpoint: its string tensor _CHECKPOINTABLE_OBJECT_GRAPH is left out. */
static void test_tf2_checkpoint(void) {
    check_against_expected("tests/data/tf/v2/ckpt", "tests/data/tf/v2");
    TfCheckpoint ck;
    BertError err;
    CHECK(tf_checkpoint_open(&ck, "tests/data/tf/v2/ckpt", &err) == 0);
    CHECK(find(&ck, "_CHECKPOINTABLE_OBJECT_GRAPH") < 0);
    tf_checkpoint_close(&ck);
}

/* v1's index rewritten with 96-byte blocks, restarts every 2 entries (TensorFlow reads it to
 * the same values in tools/make_tf_fixtures.py). */
static void test_many_data_blocks(void) {
    check_against_expected("tests/data/tf/small_blocks/model.ckpt", "tests/data/tf/v1");
}

/* Saver(sharded=True) over two devices: two data files, each tensor read from its own. */
static void test_two_shards(void) {
    check_against_expected("tests/data/tf/sharded/model.ckpt", "tests/data/tf/sharded");
    TfCheckpoint ck;
    BertError err;
    CHECK(tf_checkpoint_open(&ck, "tests/data/tf/sharded/model.ckpt", &err) == 0);
    int b = find(&ck, "bert/shard1/bias");
    CHECK(ck.n == 2 && b >= 0 && ck.tensors[b].shard == 1);
    tf_checkpoint_close(&ck);
    /* Without its second data file: an error naming that file. */
    char prefix[128], *data;
    size_t n;
    snprintf(prefix, sizeof prefix, "%s/sharded.ckpt", dir);
    const char *suffix[] = {".index", ".data-00000-of-00002"};
    for (int k = 0; k < 2; k++) {
        char src[192], dst[192];
        snprintf(src, sizeof src, "tests/data/tf/sharded/model.ckpt%s", suffix[k]);
        snprintf(dst, sizeof dst, "%s%s", prefix, suffix[k]);
        if (read_file(src, &data, &n, &err) == 0) write_bytes(dst, data, n), free(data);
    }
    CHECK(tf_checkpoint_open(&ck, prefix, &err) == -1 && strstr(err.msg, "missing data shard") &&
          strstr(err.msg, "sharded.ckpt.data-00001-of-00002"));
    for (int k = 0; k < 2; k++) {
        char dst[192];
        snprintf(dst, sizeof dst, "%s%s", prefix, suffix[k]);
        unlink(dst);
    }
}

static void test_sniff(void) {
    CHECK(tf_checkpoint_sniff(V1) == 1);
    CHECK(tf_checkpoint_sniff(V1 ".index") == 1);
    CHECK(tf_checkpoint_sniff("tests/data/tf/v1/nothing") == 0);
    CHECK(tf_checkpoint_sniff("tests/data/io/reference.safetensors") == 0);
    CHECK(tf_checkpoint_sniff("tests/data/tf/v1/expected.txt") == 0);
    write_text("build/not_a_table.index", "just text, and more than forty-eight bytes of it, really");
    CHECK(tf_checkpoint_sniff("build/not_a_table.index") == 0);
    unlink("build/not_a_table.index");
}

/* ---- damaged and crafted files ---- */

/* A fresh copy of v1 as <dir>/model.ckpt.*; returns the prefix. */
static const char *v1_copy(void) {
    static char prefix[128];
    char *data;
    size_t n;
    BertError err;
    snprintf(prefix, sizeof prefix, "%s/model.ckpt", dir);
    const char *src[] = {V1 ".index", V1_DATA}, *suffix[] = {".index", ".data-00000-of-00001"};
    for (int k = 0; k < 2; k++) {
        char path[192];
        snprintf(path, sizeof path, "%s%s", prefix, suffix[k]);
        if (read_file(src[k], &data, &n, &err) == 0) write_bytes(path, data, n), free(data);
    }
    return prefix;
}

/* Rewrites file `suffix` of the copy: bytes [0, keep) then, at `at`, one byte `value` (at < 0: none). */
static void edit(const char *prefix, const char *suffix, size_t keep, long at, int value) {
    char path[192], *data;
    size_t n;
    BertError err;
    snprintf(path, sizeof path, "%s%s", prefix, suffix);
    if (read_file(path, &data, &n, &err) != 0) return;
    if (at >= 0 && (size_t)at < n) data[at] = (char)value;
    write_bytes(path, data, keep < n ? keep : n);
    free(data);
}

/* Opening fails with a one-line message naming the file and containing `cause`. */
static void expect_open_error(const char *prefix, const char *cause, const char *what) {
    TfCheckpoint ck;
    BertError err;
    int rc = tf_checkpoint_open(&ck, prefix, &err);
    CHECKF(rc == -1, "%s: opened", what);
    if (rc == 0) { tf_checkpoint_close(&ck); return; }
    CHECKF(strstr(err.msg, cause) && strstr(err.msg, prefix) && !strchr(err.msg, '\n'), "%s: message '%s'", what, err.msg);
    if (getenv("TF_TEST_VERBOSE")) printf("    %s: %s\n", what, err.msg);
}

static size_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (size_t)sb.st_size : 0;
}

/* Marks the index block compressed (type 1) and fixes its checksum, so only the type is wrong. */
static void make_index_block_compressed(const char *prefix) {
    char path[192], *data;
    size_t n;
    BertError err;
    snprintf(path, sizeof path, "%s.index", prefix);
    if (read_file(path, &data, &n, &err) != 0) return;
    const unsigned char *p = (unsigned char *)data + n - 48;
    uint64_t h[4] = {0};
    for (int k = 0, shift = 0; k < 4; p++) {   /* the footer's four varints */
        h[k] |= (uint64_t)(*p & 0x7F) << shift;
        shift += 7;
        if (*p < 0x80) k++, shift = 0;
    }
    unsigned char *blk = (unsigned char *)data + h[2];
    blk[h[3]] = 1;
    uint32_t crc = ~crc32_iscsi(blk, (int)h[3] + 1, 0xFFFFFFFFu);
    uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
    for (int b = 0; b < 4; b++) blk[h[3] + 1 + (size_t)b] = (unsigned char)(masked >> (8 * b));
    write_bytes(path, data, n);
    free(data);
}

static void test_damaged_files(void) {
    const size_t index_len = file_size(V1 ".index"), data_len = file_size(V1_DATA);
    const char *p = v1_copy();
    edit(p, ".index", 30, -1, 0);
    expect_open_error(p, "truncated", "index cut to 30 bytes");
    p = v1_copy(), edit(p, ".index", index_len - 7, -1, 0);
    expect_open_error(p, "truncated", "index cut by 7 bytes");
    p = v1_copy(), edit(p, ".index", index_len, (long)index_len - 1, 0x12);
    expect_open_error(p, "bad magic", "bad magic");
    p = v1_copy(), edit(p, ".index", index_len, 40, 'X');   /* inside the data block (a tensor name) */
    expect_open_error(p, "checksum mismatch", "corrupted block");
    p = v1_copy(), make_index_block_compressed(p);
    expect_open_error(p, "compressed", "compressed block");
    p = v1_copy(), edit(p, ".data-00000-of-00001", data_len - 100, -1, 0);
    expect_open_error(p, "runs past the end", "short data file");
    p = v1_copy();
    char data[192];
    snprintf(data, sizeof data, "%s.data-00000-of-00001", p);
    unlink(data);
    expect_open_error(p, "missing data shard", "missing data shard");
    CHECK(strstr(data, "data-00000-of-00001"));

    /* Damaged tensor bytes: the index opens, the read of that tensor fails its crc32c. */
    p = v1_copy(), edit(p, ".data-00000-of-00001", data_len, 0, 0x7f);
    TfCheckpoint ck;
    BertError err;
    CHECK(tf_checkpoint_open(&ck, p, &err) == 0);
    int bad = 0;
    for (int i = 0; i < ck.n; i++) {
        const TfTensor *t = &ck.tensors[i];
        void *buf = xmalloc(t->size + 1);
        if (tf_checkpoint_read(&ck, i, buf, t->size, &err) != 0) {
            bad++;
            CHECKF(t->offset == 0 && strstr(err.msg, "crc32c mismatch") && strstr(err.msg, t->name), "%s", err.msg);
        }
        free(buf);
    }
    CHECK(bad == 1);
    tf_checkpoint_close(&ck);
}

/* Entries TensorFlow's writer never makes (tools/make_tf_fixtures.py, hostile/). */
static void test_crafted_entries(void) {
    expect_open_error("tests/data/tf/hostile/overflow.ckpt", "overflows", "shape overflow");
    expect_open_error("tests/data/tf/hostile/size_mismatch.ckpt", "does not match its shape", "entry size");
    expect_open_error("tests/data/tf/hostile/partitioned.ckpt", "partitioned variable bert/x not supported", "sliced");
    expect_open_error("tests/data/tf/hostile/big_endian.ckpt", "big-endian", "big-endian header");
}

int main(void) {
    snprintf(dir, sizeof dir, "build/test_tf_%ld", (long)getpid());
    mkdir("build", 0755);
    mkdir(dir, 0755);
    RUN_TEST(test_tf1_saver_checkpoint);
    RUN_TEST(test_tf2_checkpoint);
    RUN_TEST(test_many_data_blocks);
    RUN_TEST(test_two_shards);
    RUN_TEST(test_sniff);
    RUN_TEST(test_damaged_files);
    RUN_TEST(test_crafted_entries);
    char path[128];
    snprintf(path, sizeof path, "%s/model.ckpt.index", dir), unlink(path);
    snprintf(path, sizeof path, "%s/model.ckpt.data-00000-of-00001", dir), unlink(path);
    rmdir(dir);
    return test_summary();
}
