/* bert serve (src/serve/) as a client sees it: the program started on a free loopback port,
 * driven with libcurl. The answers equal `bert embed`'s vectors bit for bit (the reference is
 * the batch command run on the same model, never stored numbers) whatever batch the server
 * put a text in; tens of concurrent clients get their own answers; malformed input, size
 * limits, a missing API key, a full queue and a slow client get their status codes and the
 * server keeps serving after each; SIGTERM answers what is in flight and exits 0. --task qa's
 * answers are `bert squad --do_predict`'s files' (and `bert squad --question`'s output), and
 * /rerank's scores /predict's. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "model/bert.h"
#include "serve/textbuf.h"
#include "tasks/glue.h"
#include "test.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

#define DIR "tests/data/embed"
#define MAXSENT 16
#define H 32

static char bert_bin[512];
static float reference[MAXSENT][H];   /* bert embed's vectors of sentences[] */
static char *sentences[MAXSENT];
static int nsent;
static long reference_tokens;

typedef struct {
    pid_t pid;
    int port;
    char log[128];
} Server;

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* ./bert serve on DIR, port 0, with extra flags (NULL-terminated); waits for its port. */
static bool start_server(Server *s, const char *const *extra) {
    static int count;
    snprintf(s->log, sizeof s->log, "/tmp/bert_test_serve_%d_%d.log", (int)getpid(), count++);
    const char *argv[40] = {bert_bin, "serve", "--init_checkpoint", DIR, "--port", "0", "--threads", "1"};
    int argc = 8;
    for (int i = 0; extra && extra[i] && argc < 38; i++) argv[argc++] = extra[i];
    argv[argc] = NULL;
    s->pid = fork();
    if (s->pid == 0) {
        FILE *f = freopen(s->log, "w", stderr);
        (void)f;
        execv(bert_bin, (char *const *)argv);
        _exit(127);
    }
    for (int waited = 0; waited < 60000; waited += 20) {   /* the sanitized build starts slowly */
        char *text = read_text(s->log);
        const char *at = strstr(text, "listening on http://127.0.0.1:");
        s->port = at ? atoi(at + strlen("listening on http://127.0.0.1:")) : 0;
        free(text);
        if (s->port > 0) return true;
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) break;
        sleep_ms(20);
    }
    CHECKF(0, "the server did not start: %s", read_text(s->log));
    return false;
}

/* SIGTERM, then its exit status (-1: not a normal exit). */
static int stop_server(Server *s) {
    kill(s->pid, SIGTERM);
    int st = 0;
    waitpid(s->pid, &st, 0);
    unlink(s->log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

typedef struct {
    char *p;
    size_t len;
} Body;

static size_t collect(char *data, size_t size, size_t n, void *ctx) {
    Body *b = ctx;
    b->p = xrealloc(b->p, b->len + size * n + 1);
    memcpy(b->p + b->len, data, size * n);
    b->len += size * n, b->p[b->len] = '\0';
    return size * n;
}

/* The last answer's Server-Timing header on this thread ("" if none). */
static _Thread_local char last_timing[256];

static size_t take_header(char *data, size_t size, size_t n, void *ctx) {
    (void)ctx;
    const size_t len = size * n;
    if (len > 14 && !strncasecmp(data, "Server-Timing:", 14))
        snprintf(last_timing, sizeof last_timing, "%.*s", (int)(len - 14), data + 14);
    return len;
}

/* A Server-Timing metric's duration (ms), or -1. */
static double timing_ms(const char *name) {
    char key[64];
    snprintf(key, sizeof key, "%s;dur=", name);
    const char *at = strstr(last_timing, key);
    return at ? atof(at + strlen(key)) : -1;
}

/* One request (POST when body is non-NULL); returns the status, *answer the body (caller
 * frees; may be NULL). auth: an Authorization header value or NULL. */
static long http(int port, const char *method, const char *path, const char *body, size_t len, const char *auth,
                 char **answer) {
    CURL *c = curl_easy_init();
    char url[256], header[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (auth) snprintf(header, sizeof header, "Authorization: %s", auth), headers = curl_slist_append(headers, header);
    Body b = {xstrdup(""), 0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, take_header);
    last_timing[0] = '\0';
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    if (method) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers), curl_easy_cleanup(c);
    if (answer) *answer = b.p;
    else free(b.p);
    return status;
}

static long post(int port, const char *path, const char *json, char **answer) {
    return http(port, NULL, path, json, strlen(json), NULL, answer);
}

/* JSON numbers (%.9g: float32 exactly) equal to want[0..H) bit for bit. */
static bool vector_equals(const cJSON *v, const float *want) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != H) return false;
    int h = 0;
    for (const cJSON *x = v->child; x; x = x->next, h++)
        if (!cJSON_IsNumber(x) || (float)x->valuedouble != want[h]) return false;
    return true;
}

static bool vector_is(const cJSON *v, int sentence) { return vector_equals(v, reference[sentence]); }

static int b64_value(char c) {
    const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(a, c) : NULL;
    return p ? (int)(p - a) : -1;
}

/* base64 of the float32 bytes, equal to the reference bit for bit. */
static bool base64_is(const cJSON *v, int sentence) {
    if (!cJSON_IsString(v) || strlen(v->valuestring) != (H * 4 + 2) / 3 * 4) return false;
    unsigned char bytes[H * 4 + 3];
    size_t n = 0;
    for (const char *s = v->valuestring; s[0]; s += 4) {
        const int a = b64_value(s[0]), b = b64_value(s[1]), c = b64_value(s[2]), d = b64_value(s[3]);
        if (a < 0 || b < 0) return false;
        bytes[n++] = (unsigned char)(a << 2 | b >> 4);
        if (c >= 0) bytes[n++] = (unsigned char)((b & 15) << 4 | c >> 2);
        if (d >= 0) bytes[n++] = (unsigned char)((c & 3) << 6 | d);
    }
    return n == H * 4 && !memcmp(bytes, reference[sentence], sizeof reference[sentence]);
}

/* {"input": [...sentences idx...]} as JSON. */
static char *request_json(const char *key, const int *idx, int n, const char *extra) {
    cJSON *root = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(root, key);
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(list, cJSON_CreateString(sentences[idx[i]]));
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!extra) return text;
    char *out = xmalloc(strlen(text) + strlen(extra) + 2);
    sprintf(out, "%.*s,%s}", (int)strlen(text) - 1, text, extra);
    free(text);
    return out;
}

/* bert embed on the fixture's non-empty sentences (an empty text is a 400 here, as in
 * OpenAI's and TEI's servers): the vectors every answer must equal, and its token count. */
static bool load_reference(void) {
    char txt[64], npy[64], log[64];   /* this process's own files: suites may run side by side */
    snprintf(txt, sizeof txt, "/tmp/bert_test_serve_ref_%d.txt", (int)getpid());
    snprintf(npy, sizeof npy, "/tmp/bert_test_serve_ref_%d.npy", (int)getpid());
    snprintf(log, sizeof log, "/tmp/bert_test_serve_ref_%d.log", (int)getpid());
    char *all = read_text(DIR "/sentences.txt"), *p = all;
    FILE *f = fopen(txt, "w");
    while (*p && nsent < MAXSENT) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        if (*p) sentences[nsent++] = xstrdup(p), fprintf(f, "%s\n", p);
        p = nl ? nl + 1 : p + strlen(p);
    }
    fclose(f), free(all);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint %s --threads 1 --output %s < %s 2> %s", bert_bin, DIR, npy,
             txt, log);
    if (system(cmd) != 0) return fprintf(stderr, "failed: %s\n", cmd), false;
    char *data, *text = read_text(log);
    size_t len;
    BertError err;
    const char *tok = strstr(text, "sentences (");
    reference_tokens = tok ? atol(tok + strlen("sentences (")) : -1;
    free(text);
    if (read_file(npy, &data, &len, &err) != 0) return false;
    const size_t header = 10 + (size_t)(unsigned char)data[8] + 256 * (size_t)(unsigned char)data[9];
    const bool ok = len == header + sizeof(float) * H * (size_t)nsent;
    if (ok) memcpy(reference, data + header, sizeof(float) * H * (size_t)nsent);
    free(data), unlink(npy), unlink(log), unlink(txt);
    return ok && reference_tokens > 0 && nsent >= 4;
}

/* bert embed FLAGS on sentences[]: its vectors into out. 1, 0 on failure, -1 when FLAGS
 * asks for what this machine lacks (the log says "this backend has no"). */
static int bert_embed_vectors(const char *flags, float (*out)[H]) {
    char txt[96], npy[96], log[96];   /* per process: two runs of the suite never share them */
    snprintf(txt, sizeof txt, "/tmp/bert_test_serve_ref2_%d.txt", (int)getpid());
    snprintf(npy, sizeof npy, "/tmp/bert_test_serve_ref2_%d.npy", (int)getpid());
    snprintf(log, sizeof log, "/tmp/bert_test_serve_ref2_%d.log", (int)getpid());
    FILE *f = fopen(txt, "w");
    for (int i = 0; i < nsent; i++) fprintf(f, "%s\n", sentences[i]);
    fclose(f);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s embed --init_checkpoint %s --threads 1 %s --output %s < %s 2> %s", bert_bin, DIR,
             flags, npy, txt, log);
    const int st = system(cmd);
    char *text = read_text(log), *data = NULL;
    const bool lacking = strstr(text, "this backend has no") != NULL;
    size_t len = 0;
    BertError err;
    int ok = st == 0 && read_file(npy, &data, &len, &err) == 0;
    if (ok) {
        const size_t header = 10 + (size_t)(unsigned char)data[8] + 256 * (size_t)(unsigned char)data[9];
        ok = len == header + sizeof(float) * H * (size_t)nsent;
        if (ok) memcpy(out, data + header, sizeof(float) * H * (size_t)nsent);
    }
    if (!ok && !lacking) fprintf(stderr, "failed: %s\n%s", cmd, text);
    free(text), free(data), unlink(npy), unlink(log), unlink(txt);
    return ok ? 1 : lacking ? -1 : 0;
}

/* --int8: /v1/embeddings answers bert embed --int8's vectors bit for bit, whatever the batch
 * (rows are quantized one by one, so packing several requests' rows changes nothing), and
 * /info says int8. */
static void test_int8_equals_bert_embed_int8(void) {
    static float want[MAXSENT][H];
    const int got = bert_embed_vectors("--int8", want);
    if (got < 0) {
        TEST_SKIP("this machine has no int8 products");
        return;
    }
    CHECK(got == 1);
    if (got != 1) return;
    int differ = 0;   /* the int8 vectors are not the fp32 ones: the test tells them apart */
    for (int i = 0; i < nsent; i++) differ += memcmp(want[i], reference[i], sizeof want[i]) != 0;
    CHECK(differ > 0);
    Server s;
    const char *const flags[] = {"--int8", NULL};
    if (!start_server(&s, flags)) return;
    int all[MAXSENT];
    for (int i = 0; i < nsent; i++) all[i] = i;
    char *body = request_json("input", all, nsent, NULL), *answer;
    const long status = post(s.port, "/v1/embeddings", body, &answer);
    cJSON *root = cJSON_Parse(answer);
    const cJSON *list = cJSON_GetObjectItem(root, "data");
    CHECKF(status == 200 && cJSON_GetArraySize(list) == nsent, "%ld %s", status, answer);
    for (int i = 0; i < nsent && i < cJSON_GetArraySize(list); i++)
        CHECKF(vector_equals(cJSON_GetObjectItem(cJSON_GetArrayItem(list, i), "embedding"), want[i]),
               "sentence %d in a list differs from bert embed --int8", i);
    cJSON_Delete(root), free(answer), free(body);
    for (int i = 0; i < nsent; i++) {   /* each alone: a batch of one */
        body = request_json("input", &i, 1, NULL);
        const long st = post(s.port, "/v1/embeddings", body, &answer);
        root = cJSON_Parse(answer);
        const cJSON *v = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "data"), 0), "embedding");
        CHECKF(st == 200 && vector_equals(v, want[i]), "sentence %d alone differs from bert embed --int8: %s", i, answer);
        cJSON_Delete(root), free(answer), free(body);
    }
    CHECK(http(s.port, NULL, "/info", NULL, 0, NULL, &answer) == 200 && strstr(answer, "\"precision\":\"int8\""));
    free(answer);
    CHECK(stop_server(&s) == 0);
    /* one precision at a time */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s serve --init_checkpoint %s --int8 --bf16 2>&1 | grep -q 'at most one of --bf16 and --int8'",
             bert_bin, DIR);
    CHECK(system(cmd) == 0);
}

/* Every endpoint's answer, in every form, is bert embed's. */
/* textbuf_float: every float reads back as itself, in %.9g's notation; the text differs from
 * printf's only where the 9th digit is a hair from a rounding midpoint (rare). */
static void test_float_text(void) {
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 1e-4f, 1e-5f, 9.99999944e-5f, 123456789.0f, 1e9f,
                             999999999.0f, 3.40282347e38f, 1.17549435e-38f, 1.4e-45f, -2.5e-7f, 0.5f, 65504.0f};
    uint64_t state = 12345;
    long differ = 0, total = 0, bad = 0;
    for (int i = 0; i < 1000000 + (int)(sizeof special / sizeof *special); i++) {
        float v;
        if (i < (int)(sizeof special / sizeof *special)) {
            v = special[i];
        } else {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            uint32_t bits = (uint32_t)(state >> 32);
            if (i % 2) bits = (bits & 0x807fffffu) | ((0x70u + (bits >> 24) % 0x18u) << 23);   /* |v| ~ 1e-4 .. 1e3 */
            memcpy(&v, &bits, sizeof v);
            if (!isfinite(v)) continue;
        }
        TextBuf t;
        textbuf_init(&t);
        textbuf_float(&t, v);
        char ref[64];
        snprintf(ref, sizeof ref, "%.9g", (double)v);
        const float back = strtof(t.p, NULL);
        if (memcmp(&back, &v, sizeof v) != 0 && bad++ < 5) printf("    %s reads back as %.9g, not %s\n", t.p, back, ref);
        if (strcmp(t.p, ref) != 0 && differ++ < 3) printf("    (text %s, printf %s: the same float)\n", t.p, ref);
        total++;
        free(t.p);
    }
    CHECKF(bad == 0, "%ld of %ld floats do not read back", bad, total);
    CHECKF(differ * 10000 <= total, "%ld of %ld texts differ from printf's", differ, total);
    printf("    %ld floats: all read back; %ld texts differ from printf's %%.9g in the 9th digit\n", total, differ);
}

static void test_answers_equal_bert_embed(void) {
    Server s;
    if (!start_server(&s, NULL)) return;
    int all[MAXSENT];
    for (int i = 0; i < nsent; i++) all[i] = i;
    for (int form = 0; form < 3; form++) {   /* OpenAI float, OpenAI base64, TEI */
        char *body = request_json(form < 2 ? "input" : "inputs", all, nsent,
                                  form == 1 ? "\"encoding_format\":\"base64\",\"model\":\"m\"" : NULL);
        char *answer;
        const long status = post(s.port, form < 2 ? "/v1/embeddings" : "/embed", body, &answer);
        cJSON *root = cJSON_Parse(answer);
        CHECKF(status == 200 && root, "form %d: %ld %s", form, status, answer);
        const cJSON *list = form < 2 ? cJSON_GetObjectItem(root, "data") : root;
        CHECKF(cJSON_GetArraySize(list) == nsent, "form %d: %s", form, answer);
        if (!root || cJSON_GetArraySize(list) != nsent) {
            cJSON_Delete(root), free(answer), free(body);
            continue;
        }
        for (int i = 0; i < nsent && i < cJSON_GetArraySize(list); i++) {
            const cJSON *item = cJSON_GetArrayItem(list, i);
            const cJSON *v = form < 2 ? cJSON_GetObjectItem(item, "embedding") : item;
            CHECKF(form == 1 ? base64_is(v, i) : vector_is(v, i), "form %d: sentence %d differs from bert embed", form, i);
            if (form < 2) CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(item, "index")) == i);
        }
        if (form < 2) {
            const cJSON *usage = cJSON_GetObjectItem(root, "usage");
            CHECKF(cJSON_GetNumberValue(cJSON_GetObjectItem(usage, "prompt_tokens")) == reference_tokens &&
                       cJSON_GetNumberValue(cJSON_GetObjectItem(usage, "total_tokens")) == reference_tokens,
                   "usage wrong, bert embed ran %ld tokens: %s", reference_tokens, answer);
        }
        if (form == 1) CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(root, "model")), "m"));
        cJSON_Delete(root), free(answer), free(body);
    }
    /* one string at a time: the same vectors, whatever batch */
    for (int i = 0; i < nsent; i++) {
        cJSON *one = cJSON_CreateObject();
        cJSON_AddStringToObject(one, "input", sentences[i]);
        char *body = cJSON_PrintUnformatted(one), *answer;
        const long status = post(s.port, "/v1/embeddings", body, &answer);
        cJSON *root = cJSON_Parse(answer);
        const cJSON *v = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "data"), 0), "embedding");
        CHECKF(status == 200 && vector_is(v, i), "sentence %d alone: %ld %s", i, status, answer);
        cJSON_Delete(root), cJSON_Delete(one), free(answer), free(body);
    }
    char *answer;
    CHECK(http(s.port, NULL, "/health", NULL, 0, NULL, &answer) == 200 && strstr(answer, "ok"));
    free(answer);
    CHECK(http(s.port, NULL, "/info", NULL, 0, NULL, &answer) == 200 && strstr(answer, "\"max_input_length\":64") &&
          strstr(answer, "\"hidden_size\":32") && strstr(answer, "\"precision\":\"fp32\""));
    free(answer);
    /* three lists, each sentence alone, /health, /info: all answered 200 and counted */
    char answered[96], timed[96];
    snprintf(answered, sizeof answered, "bert_serve_responses_total{code=\"200\"} %d\n", 3 + nsent + 2);
    snprintf(timed, sizeof timed, "bert_serve_request_seconds_bucket{le=\"+Inf\"} %d\n", 3 + nsent + 2);
    CHECKF(http(s.port, NULL, "/metrics", NULL, 0, NULL, &answer) == 200 && strstr(answer, answered) &&
               strstr(answer, timed) && strstr(answer, "bert_serve_tokens_total "),
           "%s", answer);
    free(answer);
    CHECK(stop_server(&s) == 0);
}

/* Tens of clients at once, each several requests: every answer is its own texts'. */
typedef struct {
    int port, id, wrong, failed;
} Client;

static void *client_main(void *arg) {
    Client *c = arg;
    for (int k = 0; k < 6; k++) {
        const int idx[3] = {(c->id + k) % nsent, (c->id * 3 + k) % nsent, (c->id + 5 * k) % nsent};
        const int n = 1 + (c->id + k) % 3;
        char *body = request_json("input", idx, n, NULL), *answer;
        const long status = post(c->port, "/v1/embeddings", body, &answer);
        cJSON *root = cJSON_Parse(answer);
        const cJSON *data = cJSON_GetObjectItem(root, "data");
        if (status != 200 || cJSON_GetArraySize(data) != n) c->failed++;
        else
            for (int i = 0; i < n; i++)
                c->wrong += !vector_is(cJSON_GetObjectItem(cJSON_GetArrayItem(data, i), "embedding"), idx[i]);
        cJSON_Delete(root), free(answer), free(body);
    }
    return NULL;
}

static void test_concurrent_clients(void) {
    Server s;
    if (!start_server(&s, (const char *[]){"--max_wait_ms", "20", NULL})) return;
    enum { CLIENTS = 32 };
    Client c[CLIENTS];
    pthread_t t[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = (Client){.port = s.port, .id = i};
        pthread_create(&t[i], NULL, client_main, &c[i]);
    }
    int wrong = 0, failed = 0;
    for (int i = 0; i < CLIENTS; i++) pthread_join(t[i], NULL), wrong += c[i].wrong, failed += c[i].failed;
    CHECKF(failed == 0 && wrong == 0, "%d requests failed, %d vectors not the client's own", failed, wrong);
    char *metrics;
    http(s.port, NULL, "/metrics", NULL, 0, NULL, &metrics);
    /* the worker did batch several requests into one forward */
    const char *single = strstr(metrics, "bert_serve_batch_rows_bucket{le=\"1\"} "),
               *count = strstr(metrics, "bert_serve_batch_rows_count ");
    const long forwards = count ? atol(count + strlen("bert_serve_batch_rows_count ")) : 0;
    const long rows = single ? atol(strstr(metrics, "bert_serve_batch_rows_sum ") + 26) : 0;
    printf("    %d clients x 6 requests: %ld forwards for %ld texts\n", CLIENTS, forwards, rows);
    CHECKF(forwards > 0 && forwards < CLIENTS * 6, "no batching: %ld forwards", forwards);
    free(metrics);
    CHECK(stop_server(&s) == 0);
}

/* The server still answers a good request correctly. */
static bool still_serving(int port) {
    char *answer;
    const long st = post(port, "/embed", "{\"inputs\":\"hello world\"}", &answer);
    free(answer);
    return st == 200 && http(port, NULL, "/health", NULL, 0, NULL, NULL) == 200;
}

static void test_bad_requests(void) {
    Server s;
    if (!start_server(&s, (const char *[]){"--max_body_bytes", "4096", "--max_client_batch_size", "16",
                                           "--truncate", "false", NULL}))
        return;
    static const struct {
        const char *path, *body;
        long status;
    } cases[] = {
        {"/v1/embeddings", "{\"input\": [\"a\"", 400},         /* malformed JSON */
        {"/v1/embeddings", "{\"input\": \"caf\xe9\"}", 400},   /* not UTF-8 */
        {"/v1/embeddings", "{\"input\": \"a\xc0\xaf\"}", 400}, /* overlong */
        {"/v1/embeddings", "[\"a\"]", 400},                    /* not an object */
        {"/v1/embeddings", "{\"input\": 5}", 400},             /* wrong type */
        {"/v1/embeddings", "{\"input\": [\"a\", 5]}", 400},
        {"/v1/embeddings", "{\"input\": [[1, 2]]}", 400},      /* token ids */
        {"/v1/embeddings", "{\"input\": \"\"}", 400},          /* empty */
        {"/v1/embeddings", "{\"input\": []}", 400},
        {"/v1/embeddings", "{\"model\": \"m\"}", 400},         /* no input */
        {"/v1/embeddings", "{\"input\": \"a\", \"encoding_format\": \"int8\"}", 400},
        {"/embed", "{\"inputs\": \"a\", \"normalize\": \"yes\"}", 400},
        {"/embed", "", 400},
        {"/embed", "{\"inputs\": [\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
                   "\"a\",\"a\"]}", 413},                        /* 17 texts, 16 allowed */
        {"/nowhere", "{}", 404},
        {"/predict", "{\"inputs\": \"a\"}", 400},               /* not a classifier */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *answer;
        const long st = post(s.port, cases[i].path, cases[i].body, &answer);
        cJSON *root = cJSON_Parse(answer);
        const cJSON *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "error"), "message");
        CHECKF(st == cases[i].status && cJSON_IsString(msg) && msg->valuestring[0], "case %zu (%s): %ld %s", i,
               cases[i].body, st, answer);
        cJSON_Delete(root), free(answer);
        CHECKF(still_serving(s.port), "not serving after case %zu", i);
    }
    /* a body over the limit, a text longer than the model with --truncate false (unless the
     * request asks TEI's truncate), a GET where POST is needed */
    char *big = xmalloc(8192), *answer;
    memset(big, ' ', 8191), big[8191] = '\0';
    memcpy(big, "{\"input\": \"a\"}", 14);
    CHECK(post(s.port, "/v1/embeddings", big, NULL) == 413 && still_serving(s.port));
    free(big);
    char longer[1024] = "{\"inputs\": \"";
    for (int w = 0; w < 80; w++) strcat(longer, "hello ");
    strcat(longer, "\"");
    char body[1100];
    snprintf(body, sizeof body, "%s}", longer);
    CHECKF(post(s.port, "/embed", body, &answer) == 413 && strstr(answer, "truncate"), "%s", answer);
    free(answer);
    snprintf(body, sizeof body, "%s, \"truncate\": true}", longer);
    CHECK(post(s.port, "/embed", body, NULL) == 200);
    CHECK(http(s.port, "GET", "/v1/embeddings", NULL, 0, NULL, NULL) == 405 && still_serving(s.port));
    CHECK(http(s.port, "POST", "/health", "{}", 2, NULL, NULL) == 405);
    CHECK(stop_server(&s) == 0);
}

static void test_api_key(void) {
    Server s;
    if (!start_server(&s, (const char *[]){"--api_key", "s3cret", NULL})) return;
    const char *body = "{\"input\": \"hello\"}";
    CHECK(http(s.port, NULL, "/v1/embeddings", body, strlen(body), NULL, NULL) == 401);
    CHECK(http(s.port, NULL, "/v1/embeddings", body, strlen(body), "Bearer wrong", NULL) == 401);
    CHECK(http(s.port, NULL, "/v1/embeddings", body, strlen(body), "Bearer s3cre", NULL) == 401);
    CHECK(http(s.port, NULL, "/metrics", NULL, 0, NULL, NULL) == 401);
    CHECK(http(s.port, NULL, "/v1/embeddings", body, strlen(body), "Bearer s3cret", NULL) == 200);
    CHECK(http(s.port, NULL, "/health", NULL, 0, NULL, NULL) == 200);
    CHECK(stop_server(&s) == 0);
}

/* Requests sent together to a server whose worker waits long for a fuller batch. */
typedef struct {
    int port, sentence;
    long status;
    bool right;
} Sent;

static void *send_one(void *arg) {
    Sent *q = arg;
    char *body = request_json("input", &q->sentence, 1, NULL), *answer;
    q->status = post(q->port, "/v1/embeddings", body, &answer);
    cJSON *root = cJSON_Parse(answer);
    q->right = vector_is(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "data"), 0), "embedding"),
                         q->sentence);
    cJSON_Delete(root), free(answer), free(body);
    return NULL;
}

static void send_together(Sent *q, int n, int port, int sigterm_pid) {
    pthread_t t[16];
    for (int i = 0; i < n; i++) {
        q[i] = (Sent){.port = port, .sentence = i % nsent};
        pthread_create(&t[i], NULL, send_one, &q[i]);
    }
    if (sigterm_pid) sleep_ms(300), kill(sigterm_pid, SIGTERM);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

/* The worker waits --max_wait_ms for company only while an open connection may send it: a
 * lone client's requests are answered at once, and four clients sent together run as soon as
 * all four are in (one forward, or a few when they connect apart), far sooner than the 3 s
 * wait. Before, every forward waited the whole max_wait_ms. */
static void test_batching_waits_only_for_senders(void) {
    Server s;
    if (!start_server(&s, (const char *[]){"--max_wait_ms", "3000", NULL})) return;
    for (int i = 0; i < 3; i++) {
        const double t0 = now_seconds();
        Sent q = {.port = s.port, .sentence = i};
        send_one(&q);
        CHECKF(q.status == 200 && q.right && now_seconds() - t0 < 1.5, "a lone request: %ld after %.2f s", q.status,
               now_seconds() - t0);
        /* its Server-Timing: no time queued for company, a forward within the whole */
        const double queued = timing_ms("queue"), forward = timing_ms("forward"), total = timing_ms("total");
        CHECKF(queued >= 0 && queued < 1000 && forward > 0 && forward <= total && total < 1500,
               "Server-Timing: %s", last_timing);
    }
    Sent q[4];
    const double t0 = now_seconds();
    send_together(q, 4, s.port, 0);
    const double took = now_seconds() - t0;
    for (int i = 0; i < 4; i++) CHECKF(q[i].status == 200 && q[i].right, "request %d: %ld", i, q[i].status);
    CHECKF(took < 1.5, "4 requests together took %.2f s: the worker waited for a fifth", took);
    char *answer;
    CHECK(http(s.port, NULL, "/metrics", NULL, 0, NULL, &answer) == 200);
    const char *count = strstr(answer, "bert_serve_batch_rows_count ");
    const long forwards = count ? atol(count + strlen("bert_serve_batch_rows_count ")) : -1;
    CHECKF(forwards >= 4 && forwards <= 7, "%ld forwards for 3 lone requests and 4 together", forwards);
    free(answer);
    CHECK(stop_server(&s) == 0);
}

/* One request waiting fills a queue of one: the others are told 429 and later served. */
static void test_queue_full(void) {
    Server s;
    if (!start_server(&s, (const char *[]){"--max_queue", "1", "--max_wait_ms", "800", NULL})) return;
    Sent q[6];
    send_together(q, 6, s.port, 0);
    int ok = 0, full = 0;
    for (int i = 0; i < 6; i++) ok += q[i].status == 200 && q[i].right, full += q[i].status == 429;
    CHECKF(ok >= 1 && full >= 1 && ok + full == 6, "%d answered, %d refused with 429, of 6", ok, full);
    CHECK(still_serving(s.port));
    CHECK(stop_server(&s) == 0);
}

/* SIGTERM while requests wait in the queue: each gets its answer, then the server exits 0. */
static void test_sigterm_drains(void) {
    Server s;
    if (!start_server(&s, (const char *[]){"--max_wait_ms", "1000", NULL})) return;
    Sent q[8];
    send_together(q, 8, s.port, s.pid);
    for (int i = 0; i < 8; i++) CHECKF(q[i].status == 200 && q[i].right, "request %d: %ld", i, q[i].status);
    int st = 0;
    waitpid(s.pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    unlink(s.log);
}

/* A client that sends half its headers and stalls is dropped after --timeout; others are
 * served meanwhile. */
static void test_slow_client(void) {
    Server s;
    if (!start_server(&s, (const char *[]){"--timeout", "1", NULL})) return;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    const char *part = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n";
    CHECK(write(fd, part, strlen(part)) == (ssize_t)strlen(part));
    CHECK(still_serving(s.port));
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    const double t0 = now_seconds();
    const ssize_t got = read(fd, buf, sizeof buf);
    CHECKF(got <= 0 && now_seconds() - t0 < 4.5, "the stalled connection was kept (%zd bytes, %.1f s)", got,
           now_seconds() - t0);
    close(fd);
    CHECK(still_serving(s.port));
    CHECK(stop_server(&s) == 0);
}

/* The logits of every test row of RTE, by a forward of its own: the whole padded batch, no
 * packing, no packed weights (another order of the same sums as the server's path). */
static bool reference_logits(const char *model_dir, const GlueExamples *e, float *logits) {
    BertModel *m = NULL;
    Vocab *v = NULL;
    BertError err;
    char vocab_path[600];
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", model_dir);
    int initialised = 0;
    if (vocab_load(&v, vocab_path, &err) != 0 ||
        bert_open_checkpoint(&m, model_dir, NULL, (BertHeads){BERT_HEADS_CLASSIFIER, 2}, e->n, 48, 0, &initialised,
                             &err) != 0)
        return fprintf(stderr, "%s\n", err.msg), vocab_free(v), false;
    TokenizerOptions to = tokenizer_default_options();   /* lower-casing, as the folder says */
    Tokenizer *tok = tokenizer_new(v, &to);
    GlueFeatures f;
    bool ok = initialised == 0 && glue_features(e, tok, 48, &f, &err) == 0;
    if (ok) {
        const BertBatch b = {.batch = e->n, .seq_len = 48, .input_ids = f.input_ids, .token_type_ids = f.segment_ids,
                             .attention_mask = f.input_mask};
        ok = isfinite(bert_forward(m, &b, false, 0)) && bert_read_classifier_logits(m, logits);
        glue_features_free(&f);
    }
    tokenizer_free(tok), vocab_free(v), bert_model_free(m);
    return ok;
}

/* A pair's answer: [{"score", "label"}, ...] highest first; *scores in label order. */
static bool read_scores(const cJSON *list, const char *const *names, double *scores, const char **top) {
    if (cJSON_GetArraySize(list) != 2) return false;
    double last = INFINITY;
    for (const cJSON *x = list->child; x; x = x->next) {
        const double sc = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "score"));
        const char *label = cJSON_GetStringValue(cJSON_GetObjectItem(x, "label"));
        if (!label || sc > last) return false;
        if (x == list->child) *top = label;
        last = sc;
        scores[strcmp(label, names[0]) ? 1 : 0] = sc;
    }
    return true;
}

/* /rerank on the RTE classifier: the first premise as the query over the hypotheses. Each
 * score is the softmax of label 1 that /predict gives the same pair, highest first, with its
 * index and text; the first pair's is the independent forward's softmax (to float rounding). */
static void test_rerank(int port, const GlueExamples *e, const float *logits) {
    enum { K = 6 };
    const int k = e->n < K ? e->n : K;
    cJSON *rq = cJSON_CreateObject(), *pq = cJSON_CreateObject();
    cJSON *texts = cJSON_AddArrayToObject(rq, "texts"), *pairs = cJSON_AddArrayToObject(pq, "inputs");
    cJSON_AddStringToObject(rq, "query", e->text_a[0]), cJSON_AddBoolToObject(rq, "return_text", 1);
    for (int j = 0; j < k; j++) {
        cJSON_AddItemToArray(texts, cJSON_CreateString(e->text_b[j]));
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(e->text_a[0]));
        cJSON_AddItemToArray(pair, cJSON_CreateString(e->text_b[j]));
        cJSON_AddItemToArray(pairs, pair);
    }
    char *rbody = cJSON_PrintUnformatted(rq), *pbody = cJSON_PrintUnformatted(pq), *ranswer, *panswer;
    CHECK(post(port, "/rerank", rbody, &ranswer) == 200 && post(port, "/predict", pbody, &panswer) == 200);
    cJSON *ranked = cJSON_Parse(ranswer), *predicted = cJSON_Parse(panswer);
    static const char *const names[2] = {"entailment", "not_entailment"};
    CHECKF(cJSON_GetArraySize(ranked) == k && cJSON_GetArraySize(predicted) == k, "%s\n%s", ranswer, panswer);
    double last = INFINITY;
    int seen = 0;
    for (const cJSON *x = cJSON_GetArraySize(ranked) == k ? ranked->child : NULL; x; x = x->next) {
        const int j = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(x, "index"));
        const double score = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "score"));
        double sc[2];
        const char *top;
        CHECKF(j >= 0 && j < k && !(seen & 1 << j) && score <= last, "%s", ranswer);
        if (j < 0 || j >= k) continue;
        seen |= 1 << j, last = score;
        CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x, "text")), e->text_b[j]));
        CHECKF(read_scores(cJSON_GetArrayItem(predicted, j), names, sc, &top) && fabs(score - sc[1]) < 1e-6,
               "text %d: rerank %.9g, /predict %.9g", j, score, sc[1]);
        if (j == 0) CHECKF(fabs(score - 1 / (1 + exp(logits[0] - logits[1]))) < 1e-5, "rerank %.9g", score);
    }
    CHECK(post(port, "/rerank", "{\"query\": \"a\", \"texts\": \"b\"}", NULL) == 400);
    CHECK(post(port, "/rerank", "{\"texts\": [\"b\"]}", NULL) == 400);
    cJSON_Delete(ranked), cJSON_Delete(predicted), cJSON_Delete(rq), cJSON_Delete(pq);
    free(rbody), free(pbody), free(ranswer), free(panswer);
}

/* --task classify: a model bert glue fine-tuned on RTE; /predict's labels are bert glue
 * --do_predict's, its raw scores the logits of an independent forward (to float rounding),
 * its scores their softmax, and a pair alone gets the bits it gets in a batch. */
static void test_predict_equals_bert_glue(void) {
    char dir[128], cmd[4096];
    snprintf(dir, sizeof dir, "/tmp/bert_test_serve_ft_%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s glue --task_name rte --data_dir tests/data/glue/RTE --init_checkpoint %s "
                              "--output_dir %s --do_train --do_predict --max_steps 2 --train_batch_size 4 "
                              "--max_seq_length 48 --threads 1 > /dev/null 2>&1", bert_bin, DIR, dir);
    if (system(cmd) != 0) {
        CHECKF(0, "%s", cmd);
        return;
    }
    GlueExamples e;
    BertError err;
    CHECK(glue_read(glue_task("rte"), "tests/data/glue/RTE", GLUE_TEST, &e, &err) == 0);
    float logits[64];
    CHECK(e.n <= 32 && reference_logits(dir, &e, logits));
    char path[256];
    snprintf(path, sizeof path, "%s/RTE.tsv", dir);
    char *predicted = read_text(path);   /* "index\tprediction" lines */
    Server s;
    if (!start_server(&s, (const char *[]){"--task", "classify", "--init_checkpoint", dir, "--max_seq_length", "48",
                                           NULL})) {
        glue_examples_free(&e), free(predicted);
        return;
    }
    static const char *const names[2] = {"entailment", "not_entailment"};
    for (int raw = 0; raw < 2; raw++) {
        cJSON *req = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(req, "inputs");
        for (int i = 0; i < e.n; i++) {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateString(e.text_a[i]));
            cJSON_AddItemToArray(pair, cJSON_CreateString(e.text_b[i]));
            cJSON_AddItemToArray(list, pair);
        }
        cJSON_AddBoolToObject(req, "raw_scores", raw);
        char *body = cJSON_PrintUnformatted(req), *answer;
        const long st = post(s.port, "/predict", body, &answer);
        cJSON *root = cJSON_Parse(answer);
        CHECKF(st == 200 && cJSON_GetArraySize(root) == e.n, "%ld %s", st, answer);
        for (int i = 0; i < e.n && cJSON_GetArraySize(root) == e.n; i++) {
            double sc[2];
            const char *top = NULL;
            const bool ok = read_scores(cJSON_GetArrayItem(root, i), names, sc, &top);
            CHECKF(ok, "row %d: %s", i, answer);
            if (!ok) continue;
            char line[64];
            snprintf(line, sizeof line, "\n%d\t%s\n", i, top);
            CHECKF(strstr(predicted, line), "row %d: %s, bert glue said otherwise:\n%s", i, top, predicted);
            const double *z = (const double[]){logits[2 * i], logits[2 * i + 1]};
            if (raw)   /* float32 sums in another order: a few ulps of the terms */
                for (int k = 0; k < 2; k++)
                    CHECKF(fabs(sc[k] - z[k]) <= 1e-5 * (1 + fabs(z[k])), "row %d logit %d: %.9g vs %.9g", i, k, sc[k], z[k]);
            else
                CHECKF(fabs(sc[0] + sc[1] - 1) < 1e-6 && fabs(sc[0] - 1 / (1 + exp(z[1] - z[0]))) < 1e-5,
                       "row %d: scores %.9g %.9g, logits %.9g %.9g", i, sc[0], sc[1], z[0], z[1]);
            /* alone: the batch's scores to float rounding. Not always the same bits: the pooler's
             * and classifier's products have one row per text, and the GEMM library's kernel for
             * one row sums in another order than for nine (bert glue's --eval_batch_size does
             * the same); the encoder's products, with a row per token, do not change (the
             * embeddings above are checked bit for bit). */
            if (!raw) {
                cJSON *one = cJSON_CreateObject(), *pair = cJSON_AddArrayToObject(one, "inputs");
                cJSON_AddItemToArray(pair, cJSON_CreateString(e.text_a[i]));
                cJSON_AddItemToArray(pair, cJSON_CreateString(e.text_b[i]));
                char *b1 = cJSON_PrintUnformatted(one), *a1;
                CHECK(post(s.port, "/predict", b1, &a1) == 200);
                cJSON *r1 = cJSON_Parse(a1);
                double alone[2];
                const char *top1 = NULL;
                CHECKF(read_scores(r1, names, alone, &top1) && fabs(alone[0] - sc[0]) < 5e-7 &&
                           fabs(alone[1] - sc[1]) < 5e-7 && (!strcmp(top1, top) || fabs(sc[0] - sc[1]) < 1e-6),
                       "row %d alone: %s", i, a1);
                cJSON_Delete(r1), free(a1), free(b1), cJSON_Delete(one);
            }
        }
        cJSON_Delete(root), free(answer), free(body), cJSON_Delete(req);
    }
    test_rerank(s.port, &e, logits);
    char *answer;
    CHECK(post(s.port, "/embed", "{\"inputs\": \"a\"}", NULL) == 400);
    CHECK(post(s.port, "/v1/qa", "{\"question\": \"a\", \"context\": \"b\"}", NULL) == 400);
    CHECK(post(s.port, "/predict", "{\"inputs\": [[\"a\", 5]]}", NULL) == 400);
    CHECK(http(s.port, NULL, "/info", NULL, 0, NULL, &answer) == 200 && strstr(answer, "\"1\":\"not_entailment\""));
    free(answer);
    CHECK(stop_server(&s) == 0);
    /* bert glue --do_predict --predict_file -: the test rows' pairs from stdin give bert glue's
     * submission file, byte for byte; a line that is no pair is refused with its number */
    char in[160], out[160];
    snprintf(in, sizeof in, "%s/pairs.tsv", dir), snprintf(out, sizeof out, "%s/stdout.tsv", dir);
    FILE *pairs = fopen(in, "w");
    for (int i = 0; pairs && i < e.n; i++) fprintf(pairs, "%s\t%s\n", e.text_a[i], e.text_b[i]);
    if (pairs) fclose(pairs);
    snprintf(cmd, sizeof cmd, "%s glue --task_name rte --init_checkpoint %s --do_predict --predict_file - "
                              "--max_seq_length 48 --threads 1 < %s > %s 2> /dev/null", bert_bin, dir, in, out);
    char *streamed = system(cmd) == 0 ? read_text(out) : xstrdup("(failed)");
    CHECKF(!strcmp(streamed, predicted), "stdin's predictions:\n%s\nbert glue's:\n%s", streamed, predicted);
    free(streamed);
    /* and with --int8: stdin's predictions are bert glue --do_predict --int8's (the stream took
     * --int8 and dropped it once) */
    snprintf(cmd, sizeof cmd, "%s glue --task_name rte --data_dir tests/data/glue/RTE --init_checkpoint %s --output_dir "
                              "%s/int8 --do_predict --int8 --max_seq_length 48 --threads 1 > /dev/null 2>&1 && %s glue "
                              "--task_name rte --init_checkpoint %s --do_predict --predict_file - --int8 --max_seq_length "
                              "48 --threads 1 < %s > %s 2> %s.log", bert_bin, dir, dir, bert_bin, dir, in, out, out);
    char int8_file[200];
    snprintf(int8_file, sizeof int8_file, "%s/int8/RTE.tsv", dir);
    streamed = system(cmd) == 0 ? read_text(out) : xstrdup("(failed)");
    char *predicted8 = read_text(int8_file);
    CHECKF(*predicted8 && !strcmp(streamed, predicted8), "stdin's --int8 predictions:\n%s\nbert glue --int8's:\n%s",
           streamed, predicted8);
    free(streamed), free(predicted8);
    snprintf(int8_file, sizeof int8_file, "%s.log", out);   /* the model ran in int8 (equal labels alone can't tell) */
    char *said = read_text(int8_file);
    CHECKF(strstr(said, "lines predicted (int8)") != NULL, "stdin --int8: %s", said);
    free(said);
    snprintf(cmd, sizeof cmd, "printf 'a\\tb\\nno pair\\n' | %s glue --task_name rte --init_checkpoint %s --do_predict "
                              "--predict_file - --max_seq_length 48 2>&1 >/dev/null | grep -q 'line 2: rte takes a pair'",
             bert_bin, dir);
    CHECK(system(cmd) == 0);
    glue_examples_free(&e), free(predicted);
    remove_tree(dir);
    /* a model that is no classifier is refused at start, with the reason */
    snprintf(cmd, sizeof cmd, "%s serve --task classify --init_checkpoint %s --port 0 2>&1 | grep -q 'no id2label'",
             bert_bin, DIR);
    CHECK(system(cmd) == 0);
}

/* ---- --task qa ---- */

#define QA_FLAGS "--max_seq_length", "64", "--doc_stride", "16", "--max_query_length", "16", "--version_2_with_negative"
#define QA_FILE "tests/data/squad/subset_v2.json"
#define QA_MAX 64

typedef struct {
    int port;
    const char *id, *question, *context;
    char *answer;
    long status;
} QaAsk;

static char *qa_body(const char *question, const char *context, int top_k) {
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "question", question), cJSON_AddStringToObject(q, "context", context);
    cJSON_AddNumberToObject(q, "top_k", top_k);
    char *body = cJSON_PrintUnformatted(q);
    cJSON_Delete(q);
    return body;
}

static void *ask_one(void *arg) {
    QaAsk *a = arg;
    char *body = qa_body(a->question, a->context, 1000);
    a->status = post(a->port, "/v1/qa", body, &a->answer);
    free(body);
    return NULL;
}

/* The code points [start, end) of s, whitespace runs made one space (as the answer's text
 * joins the context's words). */
static char *slice_cps(const char *s, int start, int end) {
    char *out = xmalloc(strlen(s) + 1), *o = out;
    int k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; k++) {
        int n = *p < 0x80 ? 1 : *p < 0xE0 ? 2 : *p < 0xF0 ? 3 : 4;
        if (k >= start && k < end) {
            if (strchr(" \t\r\n", *p)) {
                if (o > out && o[-1] != ' ') *o++ = ' ';
            } else memcpy(o, p, (size_t)n), o += n;
        }
        p += n;
    }
    while (o > out && o[-1] == ' ') o--;
    *o = '\0';
    return out;
}

/* One answer against bert squad's files: the answer, null odds and every n-best entry's text,
 * probability and logits exactly; each offset pair spans its text in the context. */
static bool qa_matches(const char *answer, const char *id, const char *context, const cJSON *pred, const cJSON *nbest,
                       const cJSON *odds) {
    cJSON *r = cJSON_Parse(answer);
    const cJSON *list = cJSON_GetObjectItem(r, "nbest"), *want = cJSON_GetObjectItem(nbest, id);
    bool ok = r && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r, "answer")), cJSON_GetStringValue(cJSON_GetObjectItem(pred, id))) &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(r, "null_odds")) == cJSON_GetNumberValue(cJSON_GetObjectItem(odds, id)) &&
              cJSON_GetArraySize(list) == cJSON_GetArraySize(want) && cJSON_GetArraySize(want) > 0;
    for (const cJSON *x = ok ? list->child : NULL, *w = ok ? want->child : NULL; x && w; x = x->next, w = w->next) {
        static const char *const keys[3] = {"probability", "start_logit", "end_logit"};
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(x, "text"));
        ok = ok && text && !strcmp(text, cJSON_GetStringValue(cJSON_GetObjectItem(w, "text")));
        for (int k = 0; k < 3; k++)
            ok = ok && cJSON_GetNumberValue(cJSON_GetObjectItem(x, keys[k])) == cJSON_GetNumberValue(cJSON_GetObjectItem(w, keys[k]));
        const cJSON *st = cJSON_GetObjectItem(x, "start"), *en = cJSON_GetObjectItem(x, "end");
        if (ok && text[0] && strcmp(text, "empty")) {
            char *span = slice_cps(context, (int)cJSON_GetNumberValue(st), (int)cJSON_GetNumberValue(en));
            ok = cJSON_IsNumber(st) && cJSON_IsNumber(en) && !strcmp(span, text);
            if (!ok) fprintf(stderr, "    %s: offsets give '%s' for '%s'\n", id, span, text);
            free(span);
        } else ok = ok && cJSON_IsNull(st) && cJSON_IsNull(en);
    }
    cJSON_Delete(r);
    return ok;
}

/* argv's stdout (up to 1 MB), or NULL when it fails. */
static char *run_output(const char *const *argv) {
    int fd[2];
    if (pipe(fd) != 0) return NULL;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1), close(fd[0]), close(fd[1]);
        if (!freopen("/dev/null", "w", stderr)) _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    Body b = {xstrdup(""), 0};
    char buf[4096];
    ssize_t got;
    while ((got = read(fd[0], buf, sizeof buf)) > 0) collect(buf, 1, (size_t)got, &b);
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) free(b.p), b.p = NULL;
    return b.p;
}

/* --task qa: a model bert squad fine-tuned (v2.0) answers every question of the file as
 * bert squad --do_predict did, the questions sent at once (their windows share forwards);
 * bert squad --question --context prints what the server answers. */
static void test_qa_equals_bert_squad(void) {
    char dir[128], cmd[1024], path[256];
    snprintf(dir, sizeof dir, "/tmp/bert_test_serve_qa_%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s squad --init_checkpoint %s --train_file %s --predict_file %s --output_dir %s "
                              "--do_train --do_predict --max_steps 3 --train_batch_size 4 --learning_rate 1e-3 "
                              "--max_seq_length 64 --doc_stride 16 --max_query_length 16 --version_2_with_negative "
                              "--threads 1 > /dev/null 2>&1", bert_bin, DIR, QA_FILE, QA_FILE, dir);
    if (system(cmd) != 0) {
        CHECKF(0, "%s", cmd);
        return;
    }
    char *squad_text = read_text(QA_FILE);
    cJSON *files[3], *squad = cJSON_Parse(squad_text);
    free(squad_text);
    static const char *const names[3] = {"predictions.json", "nbest_predictions.json", "null_odds.json"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        char *text = read_text(path);
        files[k] = cJSON_Parse(text);
        free(text);
    }
    QaAsk asks[QA_MAX];
    int n = 0;
    for (const cJSON *a = cJSON_GetObjectItem(squad, "data")->child; a; a = a->next)
        for (const cJSON *p = cJSON_GetObjectItem(a, "paragraphs")->child; p; p = p->next)
            for (const cJSON *q = cJSON_GetObjectItem(p, "qas")->child; q && n < QA_MAX; q = q->next)
                asks[n++] = (QaAsk){.id = cJSON_GetStringValue(cJSON_GetObjectItem(q, "id")),
                                    .question = cJSON_GetStringValue(cJSON_GetObjectItem(q, "question")),
                                    .context = cJSON_GetStringValue(cJSON_GetObjectItem(p, "context"))};
    Server s;
    if (!start_server(&s, (const char *[]){"--task", "qa", "--init_checkpoint", dir, QA_FLAGS, "--max_wait_ms", "20",
                                           NULL}))
        goto done;
    pthread_t t[QA_MAX];
    for (int i = 0; i < n; i++) asks[i].port = s.port, pthread_create(&t[i], NULL, ask_one, &asks[i]);
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        const bool ok = asks[i].status == 200 && qa_matches(asks[i].answer, asks[i].id, asks[i].context, files[0],
                                                            files[1], files[2]);
        if (!ok) fprintf(stderr, "    %s: %ld %.300s\n", asks[i].id, asks[i].status, asks[i].answer);
        wrong += !ok;
    }
    CHECKF(n == 26 && wrong == 0, "%d of %d questions not answered as bert squad --do_predict", wrong, n);
    /* the one-shot command prints the server's answer, byte for byte */
    const char *argv[] = {bert_bin, "squad", "--init_checkpoint", dir, "--question", asks[3].question, "--context",
                          asks[3].context, QA_FLAGS, "--threads", "1", NULL};
    char *printed = run_output(argv);
    CHECKF(printed && !strcmp(printed, asks[3].answer), "bert squad --question printed:\n%s\nthe server:\n%s", printed,
           asks[3].answer);
    free(printed);
    /* top_k: the list cut; bad requests; the other tasks' endpoints */
    char *body = qa_body(asks[0].question, asks[0].context, 2), *answer;
    CHECK(post(s.port, "/v1/qa", body, &answer) == 200);
    cJSON *cut = cJSON_Parse(answer);
    CHECKF(cJSON_GetArraySize(cJSON_GetObjectItem(cut, "nbest")) == 2, "%s", answer);
    cJSON_Delete(cut), free(body), free(answer);
    static const char *const bad[] = {"{\"question\": \"who?\"}", "{\"question\": \"  \", \"context\": \"a b\"}",
                                      "{\"question\": \"who?\", \"context\": \" \\n \"}", "{\"question\": 5, \"context\": \"a\"}",
                                      "{\"question\": \"a\", \"context\": \"b\", \"top_k\": -1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(post(s.port, "/v1/qa", bad[i], &answer) == 400 && strstr(answer, "\"message\""), "%s: %s", bad[i], answer);
        free(answer);
    }
    CHECK(post(s.port, "/v1/embeddings", "{\"input\": \"a\"}", NULL) == 400);
    CHECK(post(s.port, "/rerank", "{\"query\": \"a\", \"texts\": [\"b\"]}", NULL) == 400);
    CHECK(http(s.port, NULL, "/info", NULL, 0, NULL, &answer) == 200 && strstr(answer, "\"question_answering\""));
    free(answer);
    CHECK(stop_server(&s) == 0);
done:
    for (int i = 0; i < n; i++) free(asks[i].answer);
    for (int k = 0; k < 3; k++) cJSON_Delete(files[k]);
    cJSON_Delete(squad);
    remove_tree(dir);
    /* a model without the span head is refused at start */
    snprintf(cmd, sizeof cmd, "%s serve --task qa --init_checkpoint %s --max_seq_length 64 --port 0 2>&1 | "
                              "grep -q 'no question-answering weights'", bert_bin, DIR);
    CHECK(system(cmd) == 0);
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert_bin, sizeof bert_bin) != 0) return 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!load_reference()) return fprintf(stderr, "bert embed failed on %s\n", DIR), 1;
    RUN_TEST(test_float_text);
    RUN_TEST(test_answers_equal_bert_embed);
    RUN_TEST(test_int8_equals_bert_embed_int8);
    RUN_TEST(test_concurrent_clients);
    RUN_TEST(test_bad_requests);
    RUN_TEST(test_api_key);
    RUN_TEST(test_batching_waits_only_for_senders);
    RUN_TEST(test_queue_full);
    RUN_TEST(test_sigterm_drains);
    RUN_TEST(test_slow_client);
    RUN_TEST(test_predict_equals_bert_glue);
    RUN_TEST(test_qa_equals_bert_squad);
    for (int i = 0; i < nsent; i++) free(sentences[i]);
    curl_global_cleanup();
    return test_summary();
}
