/* io/pytorch_checkpoint.h: torch.save archives read without executing anything. The
 * fixtures come from tools/make_pytorch_fixtures.py: valid archives written by torch.save,
 * each with a manifest and the values torch reads back; hostile ones made by hand. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pytorch_checkpoint.h"
#include "test.h"

#define DIR "tests/data/pytorch/"

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

/* Every tensor of <name>.manifest, in its order, with its dtype, shape and the bytes of
 * <name>.expected. */
static void check_against_manifest(const char *pt, const char *name) {
    char path[256], tname[256], dtype[16];
    PtCheckpoint ck;
    BertError err;
    if (pt_checkpoint_open(&ck, pt, &err)) { CHECKF(0, "%s", err.msg); return; }
    snprintf(path, sizeof path, DIR "%s.expected", name);
    size_t exp_len = 0, at = 0;
    unsigned char *expected = slurp(path, &exp_len);
    snprintf(path, sizeof path, DIR "%s.manifest", name);
    FILE *m = fopen(path, "r");
    CHECK(expected && m);
    int i = 0, ndim;
    while (m && expected && fscanf(m, "%255s %15s %d", tname, dtype, &ndim) == 3) {
        CHECKF(i < ck.n, "%s: only %d tensors", pt, ck.n);
        if (i >= ck.n) break;
        const PtTensor *t = &ck.tensors[i++];
        CHECKF(!strcmp(t->name, tname), "tensor %d is '%s', expected '%s'", i - 1, t->name, tname);
        CHECKF(!strcmp(st_dtype_name(t->dtype), dtype), "%s: dtype %s, expected %s", tname, st_dtype_name(t->dtype), dtype);
        CHECK(t->ndim == ndim);
        size_t numel = 1;
        for (int d = 0; d < ndim; d++) {
            long long dim = -1;
            CHECK(fscanf(m, "%lld", &dim) == 1 && d < t->ndim && t->shape[d] == dim);
            numel *= (size_t)dim;
        }
        size_t bytes = numel * st_dtype_size(t->dtype);
        unsigned char *got = malloc(bytes + 1);
        CHECKF(pt_checkpoint_read(&ck, i - 1, got, bytes, &err) == 0, "%s", err.msg);
        CHECKF(at + bytes <= exp_len && !memcmp(got, expected + at, bytes), "%s: values differ from torch's", tname);
        at += bytes;
        free(got);
    }
    CHECKF(i == ck.n, "%s: %d tensors, manifest lists %d", pt, ck.n, i);
    CHECK(at == exp_len);
    if (m) fclose(m);
    free(expected);
    pt_checkpoint_close(&ck);
}

static void test_plain_state_dict(void) { check_against_manifest(DIR "plain.pt", "plain"); }
static void test_protocol_4(void) { check_against_manifest(DIR "proto4.pt", "plain"); }
/* Another prefix, a byteorder "little" entry (torch >= 2.1) and deflated storages. */
static void test_little_endian_deflated(void) { check_against_manifest(DIR "little.pt", "plain"); }
static void test_nvidia_checkpoint(void) { check_against_manifest(DIR "nvidia.pt", "nvidia"); }

/* Tied weights and views: the transposed view and the original share one storage. */
static void test_shared_storage(void) {
    PtCheckpoint ck;
    BertError err;
    if (pt_checkpoint_open(&ck, DIR "plain.pt", &err)) { CHECKF(0, "%s", err.msg); return; }
    float w[12], wt[12], tied[12];
    CHECK(!strcmp(ck.tensors[0].name, "w") && !strcmp(ck.tensors[1].name, "w_t") && !strcmp(ck.tensors[2].name, "tied"));
    CHECK(pt_checkpoint_read(&ck, 0, w, sizeof w, &err) == 0);
    CHECK(pt_checkpoint_read(&ck, 1, wt, sizeof wt, &err) == 0);
    CHECK(pt_checkpoint_read(&ck, 2, tied, sizeof tied, &err) == 0);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) CHECK(wt[c * 3 + r] == w[r * 4 + c] && tied[r * 4 + c] == w[r * 4 + c]);
    CHECK(ck.tensors[0].storage == ck.tensors[1].storage);
    CHECK(pt_checkpoint_read(&ck, 0, w, sizeof w - 1, &err) != 0 && strstr(err.msg, "needs 48 bytes"));
    CHECK(pt_checkpoint_read(&ck, ck.n, w, sizeof w, &err) != 0 && strstr(err.msg, "no tensor"));
    pt_checkpoint_close(&ck);
}

/* Each hostile file fails to open, with a message naming the file and the cause. */
static void expect_error(const char *file, const char *cause) {
    char path[256];
    PtCheckpoint ck;
    BertError err = {{0}};
    snprintf(path, sizeof path, DIR "%s", file);
    int rc = pt_checkpoint_open(&ck, path, &err);
    CHECKF(rc != 0, "%s opened", file);
    if (rc == 0) { pt_checkpoint_close(&ck); return; }
    CHECKF(strstr(err.msg, path) && strstr(err.msg, cause) && !strchr(err.msg, '\n'),
           "%s: message '%s' lacks '%s'", file, err.msg, cause);
}

static void test_refuses_code(void) {
    expect_error("os_system.pt", "refuses pickle global os.system (only tensors, storages and OrderedDict are allowed)");
    expect_error("builtins_eval.pt", "refuses pickle global builtins.eval");
    expect_error("builtin_exec.pt", "refuses pickle global __builtin__.exec");
    expect_error("evil_extra.pt", "refuses pickle global posix.system");   /* os.system's module on Linux */
}

static void test_bad_views(void) {
    expect_error("outside.pt", "lies outside its 4-element storage '0'");
    expect_error("outside_stride.pt", "lies outside its 4-element storage '0'");
    expect_error("overflow.pt", "too many elements");
    expect_error("negative.pt", "negative size");
    expect_error("wrong_size.pt", "has 12 bytes, but its 4 F32 elements need 16");
    expect_error("missing_storage.pt", "storage entry archive/data/1 is missing");
}

static void test_bad_pickles(void) {
    expect_error("unknown_opcode.pt", "unsupported pickle opcode 0xff");
    expect_error("deep_marks.pt", "nesting too deep");
    expect_error("deep_lists.pt", "nesting too deep");
    expect_error("no_stop.pt", "no STOP");
    expect_error("no_state_dict.pt", "no state dict");
    expect_error("duplicate.pt", "tensor 'dupA_' appears twice");
}

static void test_bad_archives(void) {
    expect_error("truncated.pt", "damaged zip archive");
    expect_error("big_endian.pt", "big-endian");
    expect_error("legacy.pt", "not a zip archive");
    expect_error("no_such_file.pt", "no_such_file.pt");
}

static void test_sniff(void) {
    CHECK(pt_checkpoint_sniff((const unsigned char *)"PK\3\4rest", 8));
    CHECK(!pt_checkpoint_sniff((const unsigned char *)"PK\3", 3));
    CHECK(!pt_checkpoint_sniff((const unsigned char *)"\x80\x02}q", 4));
}

int main(void) {
    RUN_TEST(test_plain_state_dict);
    RUN_TEST(test_protocol_4);
    RUN_TEST(test_little_endian_deflated);
    RUN_TEST(test_nvidia_checkpoint);
    RUN_TEST(test_shared_storage);
    RUN_TEST(test_refuses_code);
    RUN_TEST(test_bad_views);
    RUN_TEST(test_bad_pickles);
    RUN_TEST(test_bad_archives);
    RUN_TEST(test_sniff);
    return test_summary();
}
