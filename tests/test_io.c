/* io/: config.json and presets, safetensors reading (against a file written by the
 * official safetensors package, tools/make_io_fixtures.py) and writing, and the errors
 * for missing tensors, wrong shapes and truncated or corrupt files. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/config.h"
#include "io/safetensors.h"
#include "io/tokenizer_files.h"
#include "test.h"
#include "test_util.h"



static void test_presets(void) {
    static const struct { const char *name; int L, H, A; } want[] = {
        {"bert-tiny", 2, 128, 2}, {"bert-mini", 4, 256, 4}, {"bert-small", 4, 512, 8},
        {"bert-medium", 8, 512, 8}, {"bert-base", 12, 768, 12}, {"bert-large", 24, 1024, 16}};
    BertError err;
    for (int i = 0; i < 6; i++) {
        BertConfig c;
        CHECK(bert_config_preset(want[i].name, &c, &err) == 0);
        CHECKF(c.num_hidden_layers == want[i].L && c.hidden_size == want[i].H && c.num_attention_heads == want[i].A &&
                   c.intermediate_size == 4 * want[i].H && c.vocab_size == 30522,
               "preset %s", want[i].name);
        CHECK(bert_config_validate(&c, &err) == 0);
    }
    BertConfig c;
    CHECK(bert_config_preset("bert-huge", &c, &err) == -1 && strstr(err.msg, "bert-huge"));
}

static void test_config_json_load_save(void) {
    BertError err;
    BertConfig c;
    write_text("build/test_config.json",
               "{\"architectures\": [\"BertModel\"], \"hidden_size\": 384, \"num_hidden_layers\": 6,"
               " \"num_attention_heads\": 12, \"intermediate_size\": 1536, \"hidden_act\": \"gelu_new\","
               " \"layer_norm_eps\": 1e-12, \"vocab_size\": 30522, \"max_position_embeddings\": 512,"
               " \"type_vocab_size\": 2, \"hidden_dropout_prob\": 0.1, \"attention_probs_dropout_prob\": 0.1,"
               " \"initializer_range\": 0.02, \"model_type\": \"bert\", \"transformers_version\": \"4.8\"}");
    CHECK(bert_config_load("build/test_config.json", &c, &err) == 0);
    CHECK(c.hidden_size == 384 && c.num_hidden_layers == 6 && c.num_attention_heads == 12);
    CHECK(c.intermediate_size == 1536 && c.hidden_act == ACT_GELU_NEW && c.layer_norm_eps == 1e-12f);
    CHECK(bert_config_save("build/test_config2.json", &c, &err) == 0);
    BertConfig d;
    CHECK(bert_config_load("build/test_config2.json", &d, &err) == 0);
    CHECK(memcmp(&c, &d, sizeof c) == 0);
    char *text = NULL;
    CHECK(read_file("build/test_config2.json", &text, NULL, &err) == 0);
    CHECK(text && strstr(text, "\"hidden_dropout_prob\":\t0.1,"));  /* written as 0.1, not 0.100000001 */
    free(text);
    unlink("build/test_config.json");
    unlink("build/test_config2.json");
}

static void test_config_errors(void) {
    BertError err;
    BertConfig c;
    CHECK(bert_config_load("build/no-such-config.json", &c, &err) == -1 && strstr(err.msg, "no-such-config"));
    write_text("build/test_bad.json", "{\"hidden_size\": \"big\"}");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "hidden_size"));
    write_text("build/test_bad.json", "{\"hidden_size\": 100, \"num_attention_heads\": 12}");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "multiple"));
    write_text("build/test_bad.json", "{\"hidden_act\": \"relu6\"}");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "relu6"));
    write_text("build/test_bad.json", "{\"hidden_size\": 768,");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "JSON"));
    /* a broken file says where, as the project's other JSON readers do (was "not a JSON object") */
    write_text("build/test_bad.json", "{\"hidden_size\": 384,\n \"num_hidden_layers\": 6,");
    CHECKF(bert_config_load("build/test_bad.json", &c, &err) == -1 &&
               strstr(err.msg, "test_bad.json: not valid JSON at line 2, column 25"), "%s", err.msg);
    write_text("build/test_bad.json", "[1, 2]");
    CHECKF(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "not a JSON object"), "%s", err.msg);
    /* issue 14, defect 12: trailing text refused; of duplicate keys the last wins (Python's
     * json, so HuggingFace); a trailing newline is fine */
    write_text("build/test_bad.json", "{\"hidden_size\": 256} junk");
    CHECKF(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "after the JSON"), "%s", err.msg);
    write_text("build/test_bad.json", "{\"num_hidden_layers\": 3, \"num_hidden_layers\": 5}\n");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == 0 && c.num_hidden_layers == 5);
    CHECK(bert_config_resolve("bert-mini", &c, &err) == 0 && c.hidden_size == 256);
    /* out of int's range: was an undefined double -> int conversion */
    write_text("build/test_bad.json", "{\"vocab_size\": 1e20}");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "vocab_size"));
    write_text("build/test_bad.json", "{\"num_hidden_layers\": -3e9}");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "num_hidden_layers"));
    /* 1e400 parses as infinity; saved back it became "layer_norm_eps": null */
    write_text("build/test_bad.json", "{\"layer_norm_eps\": 1e400}");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "layer_norm_eps"));
    write_text("build/test_bad.json", "{\"initializer_range\": 1e400}");
    CHECK(bert_config_load("build/test_bad.json", &c, &err) == -1 && strstr(err.msg, "initializer_range"));
    unlink("build/test_bad.json");
}

static void test_reads_official_safetensors(void) {
    SafeTensors st;
    BertError err;
    CHECKF(safetensors_open(&st, "tests/data/io/reference.safetensors", &err) == 0, "%s", err.msg);
    CHECK(st.n == 6);
    float f32[6];
    CHECK(safetensors_read_f32(&st, "bert.f32", (int64_t[]){2, 3}, 2, f32, &err) == 0);
    for (int i = 0; i < 6; i++) CHECK(f32[i] == (float)(i - 3) * 0.25f);
    float f16[4];
    CHECK(safetensors_read_f32(&st, "bert.f16", (int64_t[]){4}, 1, f16, &err) == 0);
    CHECK(f16[0] == 1.5f && f16[1] == -2.0f && f16[2] == 6.103515625e-05f / 4 && f16[3] == 0.0f && signbit(f16[3]));
    float bf16[3];
    CHECK(safetensors_read_f32(&st, "bert.bf16", (int64_t[]){3}, 1, bf16, &err) == 0);
    CHECK(bf16[0] == 1.0f && bf16[1] == -3.5f && bf16[2] == 256.0f);
    float f64[2];
    CHECK(safetensors_read_f32(&st, "bert.f64", (int64_t[]){2}, 1, f64, &err) == 0);
    CHECK(f64[0] == 0.1f && f64[1] == -1e-3f);
    int32_t i64[5];
    CHECK(safetensors_read_i32(&st, "bert.i64", (int64_t[]){5}, 1, i64, &err) == 0);
    CHECK(i64[0] == 0 && i64[1] == -1 && i64[2] == 2 && i64[3] == -3 && i64[4] == 4);
    const StTensor *e = safetensors_find(&st, "bert.empty");
    CHECK(e && e->ndim == 2 && st_numel(e) == 0);
    /* errors name the tensor */
    CHECK(safetensors_read_f32(&st, "bert.missing", (int64_t[]){1}, 1, f32, &err) == -1 && strstr(err.msg, "bert.missing"));
    CHECK(safetensors_read_f32(&st, "bert.f32", (int64_t[]){3, 2}, 2, f32, &err) == -1 && strstr(err.msg, "bert.f32") &&
          strstr(err.msg, "[2, 3]"));
    CHECK(safetensors_read_f32(&st, "bert.i64", (int64_t[]){5}, 1, f32, &err) == -1 && strstr(err.msg, "I64"));
    safetensors_close(&st);
}

static void test_write_read_roundtrip(void) {
    BertError err;
    float a[12];
    for (int i = 0; i < 12; i++) a[i] = 0.5f * (float)i - 1.0f;
    int32_t ids[3] = {7, -8, 9};
    StWriteTensor t[2] = {
        {.name = "encoder.weight", .dtype = ST_F32, .ndim = 2, .shape = {3, 4}, .data = a},
        {.name = "ids", .dtype = ST_I32, .ndim = 1, .shape = {3}, .data = ids},
    };
    const char *meta[] = {"format", "pt", NULL};
    char path[96];   /* per process, removed at the end */
    snprintf(path, sizeof path, "/tmp/bert_test_rt_%d.safetensors", (int)getpid());
    CHECK(safetensors_write(path, t, 2, meta, &err) == 0);
    SafeTensors st;
    CHECK(safetensors_open(&st, path, &err) == 0);
    CHECK(st.n == 2);
    CHECK(((uintptr_t)st.data & 7) == 0);  /* data section 8-byte aligned */
    float b[12];
    int32_t ids2[3];
    CHECK(safetensors_read_f32(&st, "encoder.weight", (int64_t[]){3, 4}, 2, b, &err) == 0 && !memcmp(a, b, sizeof a));
    CHECK(safetensors_read_i32(&st, "ids", (int64_t[]){3}, 1, ids2, &err) == 0 && !memcmp(ids, ids2, sizeof ids));
    safetensors_close(&st);
    unlink(path);
}

/* Copies the first n bytes of src to dst. */
static void truncate_copy(const char *src, const char *dst, long n) {
    char *data = NULL;
    size_t len = 0;
    BertError err;
    read_file(src, &data, &len, &err);
    FILE *f = fopen(dst, "wb");
    fwrite(data, 1, (size_t)n < len ? (size_t)n : len, f);
    fclose(f);
    free(data);
}

static void test_truncated_and_corrupt_files(void) {
    BertError err;
    SafeTensors st;
    char *data = NULL;
    size_t len = 0;
    CHECK(read_file("tests/data/io/reference.safetensors", &data, &len, &err) == 0);
    free(data);
    /* every truncation point is an error, never a crash */
    int all_fail = 1;
    for (long n = 0; n < (long)len; n += 7) {
        truncate_copy("tests/data/io/reference.safetensors", "build/test_trunc.safetensors", n);
        if (safetensors_open(&st, "build/test_trunc.safetensors", &err) == 0) {
            all_fail = 0;
            safetensors_close(&st);
        }
    }
    CHECK(all_fail);
    truncate_copy("tests/data/io/reference.safetensors", "build/test_trunc.safetensors", (long)len - 4);
    CHECK(safetensors_open(&st, "build/test_trunc.safetensors", &err) == -1 && strstr(err.msg, "truncated"));
    write_bytes("build/test_trunc.safetensors", "\x10\0\0\0\0\0\0\0{not json at all", 24);
    CHECK(safetensors_open(&st, "build/test_trunc.safetensors", &err) == -1 && strstr(err.msg, "JSON"));
    write_bytes("build/test_trunc.safetensors", "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10);
    CHECK(safetensors_open(&st, "build/test_trunc.safetensors", &err) == -1 && strstr(err.msg, "header length"));
    CHECK(safetensors_open(&st, "build/does-not-exist.safetensors", &err) == -1 && strstr(err.msg, "does-not-exist"));
    unlink("build/test_trunc.safetensors");
}

/* A safetensors file of one header and `data_len` zero bytes of data. */
static void write_safetensors_header(const char *path, const char *header, size_t data_len) {
    size_t hlen = strlen(header);
    char *buf = xcalloc(8 + hlen + data_len, 1);
    for (int i = 0; i < 8; i++) buf[i] = (char)(hlen >> (8 * i));
    memcpy(buf + 8, header, hlen);
    write_bytes(path, buf, 8 + hlen + data_len);
    free(buf);
}

/* Headers that are valid JSON but hostile: each is an error, never undefined behaviour. */
static void test_hostile_headers(void) {
    const char *bad[][2] = {
        /* needs no bytes, but the product of its dimensions overflowed int64 in st_numel */
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [1099511627776, 1099511627776, 0], \"data_offsets\": [0, 0]}}", "shape"},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [1e300], \"data_offsets\": [0, 4]}}", "shape"},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", "shape"},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [\"a\", \"b\"]}}", "data_offsets"},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 1e300]}}", "outside"},
        {"{\"t\": {\"dtype\": \"Q4\", \"shape\": [2], \"data_offsets\": [0, 8]}}", "dtype"},
        {"{\"t\": 5}", "malformed"},
    };
    BertError err;
    SafeTensors st;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_safetensors_header("build/test_hostile.safetensors", bad[i][0], 8);
        int rc = safetensors_open(&st, "build/test_hostile.safetensors", &err);
        CHECKF(rc == -1 && strstr(err.msg, bad[i][1]), "case %zu: rc %d, '%s'", i, rc, rc ? err.msg : "");
        if (rc == 0) safetensors_close(&st);
    }
    /* the same layout with sane numbers opens */
    write_safetensors_header("build/test_hostile.safetensors",
                             "{\"t\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8);
    CHECK(safetensors_open(&st, "build/test_hostile.safetensors", &err) == 0 && st.n == 1 && st_numel(&st.tensors[0]) == 2);
    safetensors_close(&st);
    unlink("build/test_hostile.safetensors");
}

/* A header of n empty tensors ("t<i>": F32 [0]), optionally with one name twice. */
static void write_many_tensors(const char *path, int n, bool duplicate) {
    size_t cap = (size_t)n * 64 + 64, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(h + len, cap - len, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}",
                                i ? "," : "", duplicate && i == n - 1 ? 0 : i);
    len += (size_t)snprintf(h + len, cap - len, "}");
    FILE *f = fopen(path, "wb");
    unsigned char le[8];
    for (int k = 0; k < 8; k++) le[k] = (unsigned char)((uint64_t)len >> (8 * k));
    fwrite(le, 1, 8, f), fwrite(h, 1, len, f), fclose(f);
    free(h);
}

/* Issue 14, defect 8: the duplicate-name check was quadratic (12 s at 80k names). Counted
 * in comparisons, 10x the names must cost under 15x the work (n log n: ~12.5x; n^2: 100x). */
static void test_many_tensor_names_scale(void) {
    const char *path = "build/test_io_many.safetensors";
    size_t work[2];
    const int sizes[2] = {10000, 100000};
    for (int k = 0; k < 2; k++) {
        write_many_tensors(path, sizes[k], false);
        SafeTensors st;
        BertError err;
        size_t before = (size_t)test_work();
        CHECKF(safetensors_open(&st, path, &err) == 0, "%s", err.msg);
        work[k] = (size_t)test_work() - before;
        CHECK(st.n == sizes[k] && safetensors_find(&st, "t0") && safetensors_find(&st, "t99") &&
              !safetensors_find(&st, "t-1"));
        safetensors_close(&st);
    }
    CHECKF(work[1] < 15 * work[0], "10x the names cost %.1fx the comparisons", (double)work[1] / work[0]);
    write_many_tensors(path, 100000, true);
    SafeTensors st;
    BertError err;
    CHECK(safetensors_open(&st, path, &err) != 0 && strstr(err.msg, "'t0' appears twice"));
    unlink(path);
}

static void write_header_file(const char *path, const char *header, size_t data_bytes) {
    size_t len = strlen(header);
    unsigned char le[8];
    for (int k = 0; k < 8; k++) le[k] = (unsigned char)((uint64_t)len >> (8 * k));
    FILE *f = fopen(path, "wb");
    fwrite(le, 1, 8, f), fwrite(header, 1, len, f);
    for (size_t k = 0; k < data_bytes; k++) fputc(0, f);
    fclose(f);
}

/* Issue 14, defect 12: fractional, overlapping or gapped data offsets were accepted. The
 * format wants whole numbers and ranges that tile the data section. */
static void test_offsets_must_tile_the_data(void) {
    const char *path = "build/test_io_offsets.safetensors";
    const struct { const char *header; size_t data; const char *why; } bad[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "overlapping"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "gap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "cover"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.5,4.5]}}", 8, "whole"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        write_header_file(path, bad[k].header, bad[k].data);
        SafeTensors st;
        BertError err;
        CHECKF(safetensors_open(&st, path, &err) != 0 && strstr(err.msg, bad[k].why), "case %zu: %s", k, err.msg);
    }
    write_header_file(path, "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                            "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8);
    SafeTensors st;
    BertError err;
    CHECKF(safetensors_open(&st, path, &err) == 0, "%s", err.msg);   /* any order in the header is fine */
    safetensors_close(&st);
    unlink(path);
}

/* A model folder's tokenizer files: the vocabularies' sizes and casing, the casing rules
 * (flag, tokenizer_config.json, vocabulary; the notes), and a written folder read back. */
static void test_tokenizer_files(void) {
    int tokens, cased;
    BertError err;
    CHECK(tokenizer_vocab_scan("data/vocab/bert-base-uncased-vocab.txt", &tokens, &cased, &err) == 0 &&
          tokens == 30522 && cased == 0);   /* [CLS], [unused0] ... do not count as upper case */
    CHECK(tokenizer_vocab_scan("data/vocab/bert-base-cased-vocab.txt", &tokens, &cased, &err) == 0 &&
          tokens == 28996 && cased == 1);
    char dir[96], path[160], want[400];   /* per process: two runs of the suite never share it */
    snprintf(dir, sizeof dir, "/tmp/bert_test_tokenizer_files.%d", (int)getpid());
    remove_tree(dir);
    mkdir(dir, 0777);
    TokenizerFolder f;
    tokenizer_folder_read(dir, &f);
    CHECK(f.do_lower_case == -1 && f.vocab_file[0] == '\0');
    char note[1024];
    snprintf(want, sizeof want, "note: %s has no tokenizer_config.json", dir);
    CHECK(tokenizer_casing(-1, "--do_lower_case", &f, "v.txt", 0, note, sizeof note) == true && strstr(note, want) == note);
    CHECK(tokenizer_casing(-1, "--do_lower_case", &f, "v.txt", 1, note, sizeof note) == false && strstr(note, "keeping the case"));
    CHECKF(tokenizer_casing(1, "--do_lower_case", &f, "v.txt", 1, note, sizeof note) == true &&
           !strcmp(note, "warning: --do_lower_case true, but the vocabulary v.txt has upper-case tokens (a cased model?): "
                         "lower-casing as the flag says"), "%s", note);
    CHECK(tokenizer_casing(0, "--do_lower_case", &f, "v.txt", 1, note, sizeof note) == false && note[0] == '\0');
    CHECK(tokenizer_folder_write(dir, "data/vocab/bert-base-cased-vocab.txt", false, 512, &err) == 0);
    tokenizer_folder_read(dir, &f);
    CHECK(f.do_lower_case == 0 && files_equal(f.vocab_file, "data/vocab/bert-base-cased-vocab.txt"));
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    char *config = read_text(path);
    CHECKF(!strcmp(config, "{\n\t\"do_lower_case\":\tfalse,\n\t\"model_max_length\":\t512,\n\t\"tokenizer_class\":\t"
                           "\"BertTokenizer\"\n}\n"), "%s", config);
    free(config);
    CHECK(tokenizer_folder_write(dir, f.vocab_file, false, 512, &err) == 0);   /* its own vocab.txt: kept whole */
    CHECK(files_equal(f.vocab_file, "data/vocab/bert-base-cased-vocab.txt"));
    snprintf(want, sizeof want, "warning: --do_lower_case true, but %s/tokenizer_config.json says do_lower_case false",
             dir);
    CHECKF(tokenizer_casing(1, "--do_lower_case", &f, f.vocab_file, 1, note, sizeof note) == true && strstr(note, want),
           "%s", note);
    CHECK(tokenizer_casing(-1, "--do_lower_case", &f, f.vocab_file, 0, note, sizeof note) == false && note[0] == '\0');
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    tokenizer_folder_read(path, &f);   /* a file: its folder */
    CHECK(!strcmp(f.dir, dir) && f.do_lower_case == 0);
    remove_tree(dir);
}

int main(void) {
    RUN_TEST(test_presets);
    RUN_TEST(test_config_json_load_save);
    RUN_TEST(test_config_errors);
    RUN_TEST(test_reads_official_safetensors);
    RUN_TEST(test_write_read_roundtrip);
    RUN_TEST(test_truncated_and_corrupt_files);
    RUN_TEST(test_hostile_headers);
    RUN_TEST(test_many_tensor_names_scale);
    RUN_TEST(test_offsets_must_tile_the_data);
    RUN_TEST(test_tokenizer_files);
    return test_summary();
}
