/* Sentence embeddings (src/tasks/embed.h, `bert embed`) against tests/data/embed/expected.json:
 * a small random HF BertModel and sentence-transformers' recipe (HF tokenizer, truncation,
 * mean over the attention mask, L2 normalisation) computed by transformers
 * (tools/make_embed_fixture.py). Batched packed (unpadded, sorted by length) and batched
 * padded-in-order give the reference's vectors; the command writes them as .npy. */
#include "test.h"
#include "test_util.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "kernels/kernels.h"
#include "model/bert.h"
#include "tasks/embed.h"
#include "test_int8_util.h"

#define DIR "tests/data/embed"

static cJSON *expected;
static char bert_bin[512];   /* the build's own ./bert (sanitized in build-asan) */

/* Largest |a - b| over the n x H values of `key` in the fixture. */
static double worst_diff(const float *got, const char *key, int n, int H) {
    const cJSON *rows = cJSON_GetObjectItem(expected, key);
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            const double d = fabs(got[(size_t)i * H + h] - cJSON_GetArrayItem(cJSON_GetArrayItem(rows, i), h)->valuedouble);
            worst = d > worst ? d : worst;
        }
    return worst;
}

static void test_embeddings_equal_reference(void) {
    BertError err;
    BertModel *m;
    Vocab *v;
    int init;
    const int max_seq = cJSON_GetObjectItem(expected, "max_seq_length")->valueint;
    if (vocab_load(&v, DIR "/vocab.txt", &err) != 0 ||
        bert_open_checkpoint(&m, DIR, NULL, (BertHeads){BERT_HEADS_NONE, 0}, 3, max_seq, 0, &init, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    CHECK(init == 0);   /* every tensor, the pooler included, came from the file */
    TokenizerOptions to = tokenizer_default_options();
    Tokenizer *tok = tokenizer_new(v, &to);
    char *text = read_text(DIR "/sentences.txt");
    const char *lines[16];
    int n = 0;
    for (char *p = text, *nl; (nl = strchr(p, '\n')); p = nl + 1) *nl = '\0', lines[n++] = p;
    const int H = bert_model_config(m)->hidden_size;
    float *out = malloc(sizeof(float) * n * H);
    /* vectors are O(1) (normalised) or O(hidden values): float32 sums over 2 layers of width
     * 32-64 agree to ~1e-6; a wrong token, row or mask moves them by ~1e-1 */
    for (int variant = 0; variant < 3; variant++) {
        EmbedOptions o = {.max_seq_length = max_seq, .batch_size = 3, .normalize = variant != 2,
                          .sort_by_length = variant == 0};
        long tokens = 0;
        CHECKF(embed_sentences(m, tok, lines, n, &o, out, &tokens, &err) == 0, "%s", err.msg);
        long want_tokens = 0;
        for (const cJSON *t = cJSON_GetObjectItem(expected, "tokens")->child; t; t = t->next) want_tokens += t->valueint;
        CHECKF(tokens == want_tokens, "%ld tokens, HF %ld (truncation or special tokens differ)", tokens, want_tokens);
        const double d = worst_diff(out, variant == 2 ? "mean" : "normalized", n, H);
        printf("    %s: worst difference %.2g over %d sentences\n",
               variant == 0 ? "packed, sorted by length" : variant == 1 ? "in input order" : "mean, not normalised", d, n);
        CHECKF(d < 1e-5, "variant %d: embeddings differ by %.3g", variant, d);
    }
    free(out), free(text);
    tokenizer_free(tok), vocab_free(v), bert_model_free(m);
}

static void test_command_writes_npy(void) {
    char path[64], cmd[2048];   /* this process's own file: suites may run side by side */
    snprintf(path, sizeof path, "/tmp/bert_test_embed_%d.npy", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint %s --max_seq_length %d --batch_size 2 --threads 1 "
                              "--output %s < %s/sentences.txt 2>/dev/null", bert_bin, DIR,
             cJSON_GetObjectItem(expected, "max_seq_length")->valueint, path, DIR);
    CHECKF(system(cmd) == 0, "%s", cmd);
    char *data;
    size_t len;
    BertError err;
    if (read_file(path, &data, &len, &err) != 0) { CHECKF(0, "%s", err.msg); return; }
    CHECK(len > 10 && !memcmp(data, "\x93NUMPY\x01\x00", 8));
    const size_t header = 10 + (size_t)(unsigned char)data[8] + 256 * (size_t)(unsigned char)data[9];
    CHECKF(header % 64 == 0 && strstr(data + 10, "'shape': (8, 32)"), "header: %.*s", (int)(header - 10), data + 10);
    CHECK(len == header + 8 * 32 * sizeof(float));
    if (len == header + 8 * 32 * sizeof(float)) CHECK(worst_diff((const float *)(data + header), "normalized", 8, 32) < 1e-5);
    free(data);
    unlink(path);
    /* a missing model is a clear error */
    snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint /nonexistent < /dev/null 2>/dev/null", bert_bin);
    CHECK(system(cmd) != 0);
    /* a folder for a file: named with its flag (was "error reading tests/data") */
    const char *flag[2] = {"--vocab_file", "--config_file"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint %s %s tests/data < /dev/null 2>&1 | "
                                  "grep -qx 'bert embed: %s tests/data: a folder, not a file'", bert_bin, DIR, flag[k], flag[k]);
        CHECKF(system(cmd) == 0, "%s", cmd);
    }
}

/* `bert embed --int8`: each normalised vector within the int8 model's bound of the reference
 * (tests/test_int8.c's derivation: each product's two operands perturbed by at most sqrt(K)/2L
 * relative, L = 127 for the inputs and at worst 63 for the weights, adding along the chain of 2
 * layers x (QKV, attention output, feed-forward in: K = H; feed-forward out: K = I), the
 * smoothed QKV and feed-forward in times the spread of their factors (test_int8_util.h); mean
 * pooling and normalisation do not add to it to first order), and not equal to it (int8 ran);
 * --int8 with --bf16 is refused. */
static void test_command_int8(void) {
    if (!k_int8_support()) {
        TEST_SKIP("this machine has no int8 products");
        return;
    }
    char path[96], cmd[2048];   /* per process: two runs of the suite never share it */
    snprintf(path, sizeof path, "/tmp/bert_test_embed_int8_%d.npy", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint %s --max_seq_length %d --batch_size 3 --threads 1 --int8 "
                              "--output %s < %s/sentences.txt 2>/dev/null", bert_bin, DIR,
             cJSON_GetObjectItem(expected, "max_seq_length")->valueint, path, DIR);
    CHECKF(system(cmd) == 0, "%s", cmd);
    char *data;
    size_t len;
    BertError err;
    if (read_file(path, &data, &len, &err) != 0) { CHECKF(0, "%s", err.msg); return; }
    const size_t header = 10 + (size_t)(unsigned char)data[8] + 256 * (size_t)(unsigned char)data[9];
    CHECK(len == header + 8 * 32 * sizeof(float));
    BertModel *m;
    int init;
    if (bert_open_checkpoint(&m, DIR, NULL, (BertHeads){BERT_HEADS_NONE, 0}, 1, 8, 0, &init, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        free(data);
        return;
    }
    const double spread = smoothing_spread(m);
    bert_model_free(m);
    const double step = 1.0 / 254 + 1.0 / 126, tol = 2 * ((2 * spread + 1) * sqrt(32.0) + sqrt(64.0)) * step;
    const cJSON *rows = cJSON_GetObjectItem(expected, "normalized");
    double worst = 0, least = INFINITY;
    for (int i = 0; len == header + 8 * 32 * sizeof(float) && i < 8; i++) {
        float want[32];
        for (int h = 0; h < 32; h++) want[h] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(rows, i), h)->valuedouble;
        const double e = rel_norm_error((const float *)(data + header) + 32 * i, want, 32);
        worst = fmax(worst, e), least = fmin(least, e);
    }
    CHECKF(worst <= tol && least > 1e-6, "int8 vectors: %.3g to %.3g relative to fp32's (tolerance %.3g)", least, worst,
           tol);
    printf("    int8: vectors within %.2g of fp32's (tolerance %.2g; factors' spread %.2f)\n", worst, tol, spread);
    free(data);
    unlink(path);
    snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint %s --int8 --bf16 < /dev/null 2>/dev/null", bert_bin, DIR);
    CHECK(system(cmd) != 0);
}

/* Issue 35, D11: vectors written to a full or closed standard output were lost with exit
 * status 0. Now the command exits 1 and says so. */
static void test_command_reports_a_failed_stdout(void) {
    char err_path[96];
    snprintf(err_path, sizeof err_path, "/tmp/bert_test_embed_%d.err", (int)getpid());
    for (int closed = 0; closed < 2; closed++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint %s --threads 1 < %s/sentences.txt %s 2> %s", bert_bin, DIR,
                 DIR, closed ? ">&-" : "> /dev/full", err_path);
        const int st = system(cmd);
        char *text = read_text(err_path);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(text, "bert embed: error writing the standard output"),
               "%s: status %d, stderr: %s", closed ? "closed" : "/dev/full", st, text);
        free(text);
    }
    unlink(err_path);
}

#if !defined(__SANITIZE_ADDRESS__)   /* used only there (test_command_streams) */
/* The peak resident memory (KiB) of `bert embed` over n empty lines (each [CLS] [SEP]), or -1. */
static long embed_peak_kib(long n) {
    char input[128];
    snprintf(input, sizeof input, "/tmp/bert_test_embed_lines_%d.txt", (int)getpid());
    FILE *f = fopen(input, "w");
    if (!f) return -1;
    for (long i = 0; i < n; i++) fputc('\n', f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        freopen(input, "r", stdin), freopen("/dev/null", "w", stdout), freopen("/dev/null", "w", stderr);
        execl(bert_bin, bert_bin, "embed", "--init_checkpoint", DIR, "--threads", "1", (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage ru;
    const bool ok = wait4(pid, &status, 0, &ru) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    unlink(input);
    return ok ? ru.ru_maxrss : -1;
}
#endif

/* Issue 35, D16: embed streams its input a chunk of lines at a time, so 10 times the lines
 * takes no more memory (it took ~1.6 GB for 1 MB of empty lines when every vector was kept:
 * here 400k lines of a 32-wide model held 51 MB of vectors and ids alone). Line ends as
 * Python's text mode reads them (a lone CR ends a line), and a directory on stdin is an error. */
static void test_command_streams(void) {
#if defined(__SANITIZE_ADDRESS__)
    printf("    (memory not compared under AddressSanitizer: its quarantine holds freed chunks)\n");
#else
    const long small = embed_peak_kib(40000), large = embed_peak_kib(400000);
    CHECKF(small > 0 && large > 0 && large - small < 16 * 1024, "peak %ld KiB for 40k lines, %ld KiB for 400k", small,
           large);
#endif
    char cmd[2048], out[256];
    snprintf(out, sizeof out, "/tmp/bert_test_embed_cr_%d.txt", (int)getpid());
    snprintf(cmd, sizeof cmd, "printf 'a\\rb\\r\\nc\\r' | %s embed --init_checkpoint %s > %s 2>/dev/null", bert_bin, DIR, out);
    CHECKF(system(cmd) == 0, "%s", cmd);
    char *text = read_text(out);
    int lines = 0;
    for (char *p = text; *p; p++) lines += *p == '\n';
    CHECKF(lines == 3, "a\\rb\\r\\nc\\r gave %d sentences, 3 expected", lines);
    free(text), unlink(out);
    snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint %s < /tmp > /dev/null 2>&1", bert_bin, DIR);
    CHECK(system(cmd) != 0);   /* was "0 sentences", exit 0 */
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert_bin, sizeof bert_bin) != 0) return 1;
    char *text = read_text(DIR "/expected.json");
    expected = cJSON_Parse(text);
    free(text);
    if (!expected) return fprintf(stderr, "fixture missing\n"), 1;
    RUN_TEST(test_embeddings_equal_reference);
    RUN_TEST(test_command_writes_npy);
    RUN_TEST(test_command_reports_a_failed_stdout);
    RUN_TEST(test_command_int8);
    RUN_TEST(test_command_streams);
    cJSON_Delete(expected);
    return test_summary();
}
