/* A SQuAD JSON file read once (see squad_file.h). */
#include "tasks/squad_file.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "io/json_util.h"

/* The bytes Python's json.load would take and cJSON reads the same way; the parsed tree. */
static int parse_python(const char *text, size_t len, const char *name, cJSON **out, BertError *err) {
    const unsigned char *u = (const unsigned char *)text;
    if (len >= 3 && u[0] == 0xEF && u[1] == 0xBB && u[2] == 0xBF)
        return bert_fail(err, "%s: starts with a UTF-8 byte order mark, which Python's json (and so the official "
                              "script) refuses; remove it", name);
    for (size_t i = 0; i < len;) {
        int k;
        if (u[i] == 0) return bert_fail(err, "%s: a NUL byte at offset %zu: not JSON text", name, i);
        if (utf8_decode(u + i, len - i, &k) < 0) return bert_fail(err, "%s: not valid UTF-8 at byte %zu", name, i);
        i += (size_t)k;
    }
    /* A backslash in valid JSON is always inside a string and starts an escape. */
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\') continue;
        if (text[i + 1] == 'u' && i + 5 < len && !strncmp(text + i + 2, "0000", 4))
            return bert_fail(err, "%s: a string holds \\u0000 (byte %zu), which is not supported", name, i);
        i++;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) return json_fail_at(err, name, text, len, end);
    *out = root;
    return 0;
}

int squad_json_parse(const char *text, size_t len, const char *name, SquadJsonRules rules, cJSON **out,
                     BertError *err) {
    *out = NULL;
    if (rules == SQUAD_JSON_PYTHON) return parse_python(text, len, name, out, err);
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!*out) return bert_fail(err, "%s: not valid JSON (at byte %ld)", name, end ? (long)(end - text) : -1L);
    return 0;
}

void squad_file_free(SquadFile *f) {
    free(f->name);
    cJSON_Delete(f->root);
    memset(f, 0, sizeof *f);
}

int squad_file_parse(const char *text, size_t len, const char *name, SquadJsonRules rules, SquadFile *f,
                     BertError *err) {
    memset(f, 0, sizeof *f);
    if (squad_json_parse(text, len, name, rules, &f->root, err) != 0) return -1;
    f->name = xstrdup(name);
    return 0;
}

int squad_file_load(const char *path, SquadJsonRules rules, SquadFile *f, BertError *err) {
    char *text;
    size_t len;
    memset(f, 0, sizeof *f);
    if (read_file(path, &text, &len, err) != 0) return -1;   /* its message names the file and the reason */
    int rc = squad_file_parse(text, len, path, rules, f, err);
    free(text);
    return rc;
}

/* Each question's answers cut to the first; returns how many were cut. */
static long keep_first_answers(const cJSON *articles) {
    long cut = 0;
    const cJSON *article, *paragraph, *qa;
    cJSON_ArrayForEach(article, articles) {
        cJSON_ArrayForEach(paragraph, json_get_last(article, "paragraphs")) {
            cJSON_ArrayForEach(qa, json_get_last(paragraph, "qas")) {
                cJSON *answers = (cJSON *)json_get_last(qa, "answers");
                if (!cJSON_IsArray(answers)) continue;
                for (int n = cJSON_GetArraySize(answers); n > 1; n--) cJSON_DeleteItemFromArray(answers, n - 1), cut++;
            }
        }
    }
    return cut;
}

int squad_file_slice(SquadFile *f, int skip, int count, bool first_answers, int *kept, long *cut, BertError *err) {
    cJSON *data = (cJSON *)json_get_last(f->root, "data");
    if (!cJSON_IsArray(data)) return bert_fail(err, "%s: not a SQuAD file (no \"data\" array)", f->name);
    const int n = cJSON_GetArraySize(data);
    if (skip >= n) return bert_fail(err, "%s has %d articles: none left after skipping %d", f->name, n, skip);
    const int end = count > 0 && skip + count < n ? skip + count : n;
    for (int i = n - 1; i >= end; i--) cJSON_DeleteItemFromArray(data, i);
    for (int i = 0; i < skip; i++) cJSON_DeleteItemFromArray(data, 0);
    *kept = end - skip;
    *cut = first_answers ? keep_first_answers(data) : 0;
    return 0;
}

int squad_file_write(SquadFile *f, const char *path, BertError *err) {
    char *out = cJSON_PrintUnformatted(f->root);
    AtomicFile af;
    int rc = atomic_open(&af, path, err);
    if (rc == 0) fputs(out, af.fp), rc = atomic_commit(&af, err);
    free(out);
    if (rc == 0) free(f->name), f->name = xstrdup(path);
    return rc;
}
