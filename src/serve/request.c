/* Request bodies (serve/request.h). */
#include "serve/request.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "io/json_util.h"

/* The message into err, and the HTTP status it answers with. */
__attribute__((format(printf, 3, 4))) static int status_fail(BertError *err, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return status;
}

bool serve_valid_utf8(const char *s, size_t len) {
    for (size_t k = 0; k < len;) {
        int nbytes;
        const int32_t c = utf8_decode((const unsigned char *)s + k, len - k, &nbytes);
        if (c <= 0) return false;   /* invalid, or a NUL byte: no C string could carry it */
        k += (size_t)nbytes;
    }
    return true;
}

/* A text of the input: a non-empty string. */
static int take_text(const cJSON *item, const char *what, int index, char **out, BertError *err) {
    if (!cJSON_IsString(item) || !item->valuestring)
        return index < 0 ? bert_fail(err, "'%s' must be a string or a list of strings", what)
                         : bert_fail(err, "'%s'[%d] must be a string", what, index);
    if (!item->valuestring[0])
        return index < 0 ? bert_fail(err, "'%s' is an empty string", what)
                         : bert_fail(err, "'%s'[%d] is an empty string", what, index);
    *out = xstrdup(item->valuestring);
    return 0;
}

/* /predict's item: a string, or a pair [a, b] of strings. */
static int take_pair(const cJSON *item, int index, char **a, char **b, BertError *err) {
    if (cJSON_IsString(item)) return take_text(item, "inputs", index, a, err);
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) < 1 || cJSON_GetArraySize(item) > 2)
        return bert_fail(err, "'inputs'[%d] must be a string or a pair [text, text]", index);
    if (take_text(cJSON_GetArrayItem(item, 0), "inputs", index, a, err) != 0) return -1;
    return cJSON_GetArraySize(item) == 2 ? take_text(cJSON_GetArrayItem(item, 1), "inputs", index, b, err) : 0;
}

/* /predict: "inputs" is one text, one pair [a, b], or a list of texts or pairs. A list of two
 * strings is a pair (TEI reads it so); a list holding lists is a batch. */
static int parse_predict_inputs(const cJSON *in, const ServeLimits *lim, ServeRequest *r, BertError *err) {
    const bool batch = cJSON_IsArray(in) && cJSON_GetArraySize(in) > 0 && !cJSON_IsString(cJSON_GetArrayItem(in, 0));
    const int n = batch ? cJSON_GetArraySize(in) : 1;
    if (n > lim->max_inputs) return status_fail(err, 413, "%d inputs: at most %d in one request", n, lim->max_inputs);
    r->text_a = xcalloc((size_t)n, sizeof(char *)), r->text_b = xcalloc((size_t)n, sizeof(char *));
    r->n = n, r->input_is_list = batch;
    if (!batch) return take_pair(in, 0, &r->text_a[0], &r->text_b[0], err) ? 400 : 0;
    for (int i = 0; i < n; i++)
        if (take_pair(cJSON_GetArrayItem(in, i), i, &r->text_a[i], &r->text_b[i], err) != 0) return 400;
    return 0;
}

/* Embeddings: a string or a non-empty list of strings. */
static int parse_texts(const cJSON *in, const char *what, const ServeLimits *lim, ServeRequest *r, BertError *err) {
    if (cJSON_IsString(in)) {
        r->n = 1, r->text_a = xcalloc(1, sizeof(char *));
        return take_text(in, what, -1, &r->text_a[0], err) ? 400 : 0;
    }
    if (!cJSON_IsArray(in)) return status_fail(err, 400, "'%s' must be a string or a list of strings", what);
    const int n = cJSON_GetArraySize(in);
    if (n == 0) return status_fail(err, 400, "'%s' is an empty list", what);
    if (n > lim->max_inputs) return status_fail(err, 413, "%d inputs: at most %d in one request", n, lim->max_inputs);
    if (cJSON_IsNumber(cJSON_GetArrayItem(in, 0)) || cJSON_IsArray(cJSON_GetArrayItem(in, 0)))
        return status_fail(err, 400, "'%s' as token ids is not supported: send text", what);
    r->n = n, r->input_is_list = true, r->text_a = xcalloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++)
        if (take_text(cJSON_GetArrayItem(in, i), what, i, &r->text_a[i], err) != 0) return 400;
    return 0;
}

static int optional_bool(const cJSON *root, const char *key);

/* An optional integer member in [lo, hi] into *out (absent or null: unchanged). */
static int optional_int(const cJSON *root, const char *key, int lo, int hi, int *out, BertError *err) {
    const cJSON *v = json_get_last(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    /* the range first: converting a number past long's range is undefined (found by fuzz_serve_request) */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != (double)(long)v->valuedouble)
        return bert_fail(err, "'%s' must be an integer from %d to %d", key, lo, hi);
    *out = (int)v->valuedouble;
    return 0;
}

/* /v1/qa: {"question", "context"}, or HuggingFace's {"inputs": {"question", "context"}};
 * "top_k" (or "n_best") entries of the n-best list to show. */
static int parse_qa(const cJSON *root, ServeRequest *r, BertError *err) {
    const cJSON *inputs = json_get_last(root, "inputs");
    const cJSON *src = cJSON_IsObject(inputs) ? inputs : root;
    const cJSON *question = json_get_last(src, "question"), *context = json_get_last(src, "context");
    if (!question || !context) return status_fail(err, 400, "'%s' is missing", question ? "context" : "question");
    r->n = 1, r->text_a = xcalloc(1, sizeof(char *)), r->text_b = xcalloc(1, sizeof(char *));
    if (take_text(question, "question", -1, &r->text_a[0], err) || take_text(context, "context", -1, &r->text_b[0], err))
        return 400;
    if (optional_int(root, "top_k", 0, 1000, &r->top_k, err) || optional_int(root, "n_best", 0, 1000, &r->top_k, err))
        return 400;
    return 0;
}

/* /rerank (TEI): {"query": text, "texts": [text, ...], "return_text", "truncate", "raw_scores"}. */
static int parse_rerank(const cJSON *root, const ServeLimits *lim, ServeRequest *r, BertError *err) {
    const cJSON *query = json_get_last(root, "query"), *texts = json_get_last(root, "texts");
    if (!query || !texts) return status_fail(err, 400, "'%s' is missing", query ? "texts" : "query");
    if (take_text(query, "query", -1, &r->query, err) != 0) return 400;
    if (!cJSON_IsArray(texts)) return status_fail(err, 400, "'texts' must be a list of strings");
    const int status = parse_texts(texts, "texts", lim, r, err);
    if (status) return status;
    const int ret = optional_bool(root, "return_text");
    if (ret == -2) return status_fail(err, 400, "'return_text' must be true or false");
    r->return_text = ret == 1;
    return 0;
}

/* An optional boolean member: -1 absent, else 0/1; -2 for another type. */
static int optional_bool(const cJSON *root, const char *key) {
    const cJSON *v = json_get_last(root, key);
    if (!v || cJSON_IsNull(v)) return -1;
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -2;
}

static int parse_options(ServeEndpoint ep, const cJSON *root, ServeRequest *r, BertError *err) {
    if (ep == SERVE_QA) return 0;
    if (ep == SERVE_OPENAI_EMBEDDINGS) {
        const cJSON *model = json_get_last(root, "model"), *fmt = json_get_last(root, "encoding_format");
        if (model && !cJSON_IsNull(model)) {
            if (!cJSON_IsString(model)) return bert_fail(err, "'model' must be a string");
            snprintf(r->model, sizeof r->model, "%s", model->valuestring);
        }
        if (fmt && !cJSON_IsNull(fmt)) {
            if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64")))
                return bert_fail(err, "'encoding_format' must be \"float\" or \"base64\"");
            r->base64 = !strcmp(fmt->valuestring, "base64");
        }
        return 0;
    }
    static const char *const keys[] = {"normalize", "truncate", "raw_scores"};
    int v[3];
    for (int k = 0; k < 3; k++)
        if ((v[k] = optional_bool(root, keys[k])) == -2) return bert_fail(err, "'%s' must be true or false", keys[k]);
    r->normalize = v[0], r->truncate = v[1], r->raw_scores = v[2] == 1;
    return 0;
}

int serve_request_parse(ServeEndpoint ep, const char *body, size_t len, const ServeLimits *lim, ServeRequest *r,
                        BertError *err) {
    memset(r, 0, sizeof *r);
    r->normalize = r->truncate = -1;
    if (!serve_valid_utf8(body, len)) return status_fail(err, 400, "the body is not UTF-8 text");
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) return status_fail(err, 400, "the body is not valid JSON");
    int status = 0;
    const char *key = ep == SERVE_OPENAI_EMBEDDINGS ? "input" : "inputs";
    const cJSON *in = cJSON_IsObject(root) ? json_get_last(root, key) : NULL;
    if (!cJSON_IsObject(root)) status = status_fail(err, 400, "the body must be a JSON object");
    else if (parse_options(ep, root, r, err) != 0) status = 400;
    else if (ep == SERVE_QA) status = parse_qa(root, r, err);
    else if (ep == SERVE_TEI_RERANK) status = parse_rerank(root, lim, r, err);
    else if (!in) status = status_fail(err, 400, "'%s' is missing", key);
    else if (ep == SERVE_TEI_PREDICT) status = parse_predict_inputs(in, lim, r, err);
    else status = parse_texts(in, key, lim, r, err);
    cJSON_Delete(root);
    if (status) serve_request_free(r);
    return status;
}

void serve_request_free(ServeRequest *r) {
    for (int i = 0; i < r->n; i++) {
        if (r->text_a) free(r->text_a[i]);
        if (r->text_b) free(r->text_b[i]);
    }
    free(r->text_a), free(r->text_b), free(r->query);
    const int normalize = r->normalize, truncate = r->truncate;
    memset(r, 0, sizeof *r);
    r->normalize = normalize, r->truncate = truncate;
}
