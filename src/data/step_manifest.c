#include "data/step_manifest.h"

#include <cjson/cJSON.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct StepManifest {
    cJSON *records;   /* array of {"outputs": [...], "inputs": [...], "options": "..."} */
};

static cJSON *identity(const char *path) {
    struct stat st;
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "path", path);
    if (stat(path, &st) == 0) {   /* as text: nanosecond times do not fit a double's 53 bits */
        char size[32], mtime[48];
        snprintf(size, sizeof size, "%lld", (long long)st.st_size);
        snprintf(mtime, sizeof mtime, "%lld%09ld", (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
        cJSON_AddStringToObject(f, "size", size);
        cJSON_AddStringToObject(f, "mtime_ns", mtime);
    }
    return f;
}

static cJSON *identities(const char *const *paths, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, identity(paths[i]));
    return a;
}

/* The recorded files are these paths, in this order, each still of the recorded size and time. */
static bool same_files(const cJSON *recorded, const char *const *paths, int n) {
    if (!cJSON_IsArray(recorded) || cJSON_GetArraySize(recorded) != n) return false;
    for (int i = 0; i < n; i++) {
        const cJSON *r = cJSON_GetArrayItem(recorded, i);
        cJSON *now = identity(paths[i]);
        const char *keys[] = {"path", "size", "mtime_ns"};
        bool same = true;
        for (int k = 0; k < 3 && same; k++) {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, keys[k]), *b = cJSON_GetObjectItemCaseSensitive(now, keys[k]);
            same = a && b && cJSON_Compare(a, b, true);
        }
        cJSON_Delete(now);
        if (!same) return false;
    }
    return true;
}

static bool same_names(const cJSON *recorded, const char *const *paths, int n) {
    if (!cJSON_IsArray(recorded) || cJSON_GetArraySize(recorded) != n) return false;
    for (int i = 0; i < n; i++) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(recorded, i), "path");
        if (!cJSON_IsString(p) || strcmp(p->valuestring, paths[i]) != 0) return false;
    }
    return true;
}

StepManifest *step_manifest_load(const char *pattern) {
    StepManifest *m = xcalloc(1, sizeof *m);
    m->records = cJSON_CreateArray();
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return m;
    for (size_t k = 0; k < g.gl_pathc; k++) {
        char *text;
        size_t len;
        BertError err;
        if (read_file(g.gl_pathv[k], &text, &len, &err) != 0) continue;
        cJSON *doc = cJSON_ParseWithLength(text, len), *r;
        free(text);
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(doc, "records"))
            cJSON_AddItemToArray(m->records, cJSON_Duplicate(r, true));
        cJSON_Delete(doc);   /* an unreadable manifest just means nothing is known done */
    }
    globfree(&g);
    return m;
}

void step_manifest_free(StepManifest *m) {
    if (!m) return;
    cJSON_Delete(m->records);
    free(m);
}

bool step_manifest_done(const StepManifest *m, const char *const *outputs, int n_outputs,
                        const char *const *inputs, int n_inputs, const char *options) {
    const cJSON *r;
    cJSON_ArrayForEach(r, m->records) {
        const cJSON *opt = cJSON_GetObjectItemCaseSensitive(r, "options");
        if (!cJSON_IsString(opt) || strcmp(opt->valuestring, options) != 0) continue;
        if (same_files(cJSON_GetObjectItemCaseSensitive(r, "outputs"), outputs, n_outputs) &&
            same_files(cJSON_GetObjectItemCaseSensitive(r, "inputs"), inputs, n_inputs))
            return true;
    }
    return false;
}

int step_manifest_record(StepManifest *m, const char *path, const char *const *outputs, int n_outputs,
                         const char *const *inputs, int n_inputs, const char *options, BertError *err) {
    for (int i = cJSON_GetArraySize(m->records) - 1; i >= 0; i--)   /* the same outputs: an older record */
        if (same_names(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(m->records, i), "outputs"), outputs,
                       n_outputs))
            cJSON_DeleteItemFromArray(m->records, i);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddItemToObject(r, "outputs", identities(outputs, n_outputs));
    cJSON_AddItemToObject(r, "inputs", identities(inputs, n_inputs));
    cJSON_AddStringToObject(r, "options", options);
    cJSON_AddItemToArray(m->records, r);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", "bert.c prepare step manifest");
    cJSON_AddItemReferenceToObject(doc, "records", m->records);
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    AtomicFile af;
    int rc = atomic_open(&af, path, err);
    if (rc == 0) {
        fputs(text, af.fp);
        rc = atomic_commit(&af, err);
    }
    free(text);
    return rc;
}
