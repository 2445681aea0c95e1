/* A model folder's tokenizer files: see tokenizer_files.h. */
#include "io/tokenizer_files.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "io/json_util.h"

void tokenizer_folder_read(const char *path, TokenizerFolder *out) {
    memset(out, 0, sizeof *out);
    out->do_lower_case = -1;
    struct stat st;
    snprintf(out->dir, sizeof out->dir, "%s", path);
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {   /* a file: its folder */
        char *slash = strrchr(out->dir, '/');
        if (slash == out->dir) slash[1] = '\0';
        else if (slash) *slash = '\0';
        else snprintf(out->dir, sizeof out->dir, ".");
    }
    char p[4096 + 32];
    snprintf(p, sizeof p, "%s/vocab.txt", out->dir);
    if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) snprintf(out->vocab_file, sizeof out->vocab_file, "%s", p);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", out->dir);
    char *text = NULL;
    BertError err;
    if (read_file(p, &text, NULL, &err) != 0) return;
    cJSON *j = cJSON_Parse(text);
    const cJSON *v = json_get_last(j, "do_lower_case");
    if (cJSON_IsBool(v)) out->do_lower_case = cJSON_IsTrue(v);
    cJSON_Delete(j), free(text);
}

int tokenizer_vocab_scan(const char *vocab_file, int *tokens, int *cased, BertError *err) {
    char *data;
    size_t len;
    *tokens = 0, *cased = 0;
    if (read_file(vocab_file, &data, &len, err) != 0) return -1;
    const size_t start = len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3) ? 3 : 0;   /* a byte-order mark */
    for (size_t pos = start; pos < len;) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t a = pos, b = nl ? (size_t)(nl - data) : len;
        pos = b + 1;
        ++*tokens;
        while (a < b && (data[a] == ' ' || data[a] == '\t' || data[a] == '\r')) a++;
        while (b > a && (data[b - 1] == ' ' || data[b - 1] == '\t' || data[b - 1] == '\r')) b--;
        if (*cased || (b > a && data[a] == '[' && data[b - 1] == ']')) continue;   /* [CLS], [unused7] */
        for (size_t i = a; i < b && !*cased; i++) *cased = data[i] >= 'A' && data[i] <= 'Z';
    }
    free(data);
    return 0;
}

bool tokenizer_casing(int flag, const char *flag_name, const TokenizerFolder *folder, const char *vocab_file,
                      int vocab_cased, char *note, size_t note_size) {
    note[0] = '\0';
    const int says = folder ? folder->do_lower_case : -1;
    if (flag >= 0) {
        if (says >= 0 && says != flag)
            snprintf(note, note_size, "warning: %s %s, but %s/tokenizer_config.json says do_lower_case %s: %s as the flag says",
                     flag_name, flag ? "true" : "false", folder->dir, says ? "true" : "false",
                     flag ? "lower-casing" : "keeping the case");
        else if (says < 0 && vocab_cased >= 0 && vocab_cased == flag)
            snprintf(note, note_size, "warning: %s %s, but the vocabulary %s %s upper-case tokens (%s model?): %s as the flag says",
                     flag_name, flag ? "true" : "false", vocab_file, vocab_cased ? "has" : "has no",
                     vocab_cased ? "a cased" : "an uncased", flag ? "lower-casing" : "keeping the case");
        return flag;
    }
    if (says >= 0) return says;
    const bool lower = vocab_cased == 0;
    if (!folder) {   /* a command that tokenizes with a vocabulary alone (prepare, tokenize) */
        snprintf(note, note_size, "note: %s, as the vocabulary %s %s upper-case tokens (%s true|false to choose)",
                 lower ? "lower-casing" : "keeping the case", vocab_file, lower ? "has no" : "has", flag_name);
        return lower;
    }
    snprintf(note, note_size, "note: %s has no tokenizer_config.json saying do_lower_case: %s, as the vocabulary %s %s "
                              "upper-case tokens (%s true|false to choose)",
             folder ? folder->dir : "the model", lower ? "lower-casing" : "keeping the case", vocab_file,
             lower ? "has no" : "has", flag_name);
    return lower;
}

int tokenizer_folder_write_text(const char *dir, const char *vocab, size_t vocab_len, bool do_lower_case,
                                int model_max_length, BertError *err) {
    char path[4096 + 32];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) return -1;
    if (fwrite(vocab, 1, vocab_len, af.fp) != vocab_len) {
        atomic_abort(&af);
        return bert_fail(err, "%s: cannot write", path);
    }
    if (atomic_commit(&af, err) != 0) return -1;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "do_lower_case", do_lower_case);
    cJSON_AddNumberToObject(j, "model_max_length", model_max_length);
    cJSON_AddStringToObject(j, "tokenizer_class", "BertTokenizer");
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (atomic_open(&af, path, err) != 0) {
        free(text);
        return -1;
    }
    fputs(text, af.fp), fputc('\n', af.fp);
    free(text);
    return atomic_commit(&af, err);
}

int tokenizer_folder_write(const char *dir, const char *vocab_file, bool do_lower_case, int model_max_length,
                           BertError *err) {
    char *data;
    size_t len;
    if (read_file(vocab_file, &data, &len, err) != 0) return -1;
    const int rc = tokenizer_folder_write_text(dir, data, len, do_lower_case, model_max_length, err);
    free(data);
    return rc;
}
