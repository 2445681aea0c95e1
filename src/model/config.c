#include "model/config.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/json_util.h"

typedef struct {
    const char *name;
    int layers, hidden, heads;
} Preset;

static const Preset PRESETS[] = {
    {"bert-tiny", 2, 128, 2},   {"bert-mini", 4, 256, 4},    {"bert-small", 4, 512, 8},
    {"bert-medium", 8, 512, 8}, {"bert-base", 12, 768, 12}, {"bert-large", 24, 1024, 16},
};
#define NPRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

static BertConfig base_defaults(void) {
    return (BertConfig){
        .vocab_size = 30522, .hidden_size = 768, .num_hidden_layers = 12, .num_attention_heads = 12,
        .intermediate_size = 3072, .hidden_act = ACT_GELU, .max_position_embeddings = 512,
        .type_vocab_size = 2, .layer_norm_eps = 1e-12f, .hidden_dropout_prob = 0.1f,
        .attention_probs_dropout_prob = 0.1f, .initializer_range = 0.02f,
    };
}

int bert_config_preset(const char *name, BertConfig *cfg, BertError *err) {
    for (int i = 0; i < NPRESETS; i++) {
        if (strcmp(PRESETS[i].name, name) != 0) continue;
        *cfg = base_defaults();
        cfg->num_hidden_layers = PRESETS[i].layers;
        cfg->hidden_size = PRESETS[i].hidden;
        cfg->num_attention_heads = PRESETS[i].heads;
        cfg->intermediate_size = 4 * PRESETS[i].hidden;
        return 0;
    }
    const char *names[NPRESETS];
    for (int i = 0; i < NPRESETS; i++) names[i] = PRESETS[i].name;
    char hint[128];
    if (suggest_names(name, strlen(name), names, NPRESETS, hint, sizeof hint) > 0)
        return bert_fail(err, "unknown preset '%s': %s (known: bert-tiny, bert-mini, bert-small, bert-medium, bert-base, bert-large)", name, hint);
    return bert_fail(err, "unknown preset '%s' (known: bert-tiny, bert-mini, bert-small, bert-medium, bert-base, bert-large)", name);
}

int bert_config_validate(const BertConfig *c, BertError *err) {
    if (c->vocab_size < 1) return bert_fail(err, "config: vocab_size must be positive (got %d)", c->vocab_size);
    if (c->hidden_size < 1) return bert_fail(err, "config: hidden_size must be positive (got %d)", c->hidden_size);
    if (c->num_hidden_layers < 1) return bert_fail(err, "config: num_hidden_layers must be positive (got %d)", c->num_hidden_layers);
    if (c->num_attention_heads < 1 || c->hidden_size % c->num_attention_heads != 0)
        return bert_fail(err, "config: hidden_size %d is not a multiple of num_attention_heads %d", c->hidden_size, c->num_attention_heads);
    if (c->intermediate_size < 1) return bert_fail(err, "config: intermediate_size must be positive (got %d)", c->intermediate_size);
    if (c->max_position_embeddings < 1) return bert_fail(err, "config: max_position_embeddings must be positive (got %d)", c->max_position_embeddings);
    if (c->type_vocab_size < 1) return bert_fail(err, "config: type_vocab_size must be positive (got %d)", c->type_vocab_size);
    if (!(c->layer_norm_eps > 0 && isfinite(c->layer_norm_eps)))  /* 1e400 reads as inf; saved, it would be null */
        return bert_fail(err, "config: layer_norm_eps must be positive and finite");
    if (!(c->hidden_dropout_prob >= 0 && c->hidden_dropout_prob < 1)) return bert_fail(err, "config: hidden_dropout_prob must be in [0, 1)");
    if (!(c->attention_probs_dropout_prob >= 0 && c->attention_probs_dropout_prob < 1)) return bert_fail(err, "config: attention_probs_dropout_prob must be in [0, 1)");
    if (!(c->initializer_range > 0 && isfinite(c->initializer_range)))
        return bert_fail(err, "config: initializer_range must be positive and finite");
    return 0;
}

/* Reads an optional integer key; a present key of the wrong type is an error. */
static int get_int(const cJSON *root, const char *key, int *dst, const char *path, BertError *err) {
    const cJSON *v = json_get_last(root, key);
    if (!v) return 0;
    /* range first: converting a double outside int's range to int is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= INT_MIN && v->valuedouble <= INT_MAX) ||
        v->valuedouble != (double)(int)v->valuedouble)
        return bert_fail(err, "%s: \"%s\" must be an integer", path, key);
    *dst = (int)v->valuedouble;
    return 0;
}

static int get_float(const cJSON *root, const char *key, float *dst, const char *path, BertError *err) {
    const cJSON *v = json_get_last(root, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v)) return bert_fail(err, "%s: \"%s\" must be a number", path, key);
    *dst = (float)v->valuedouble;
    return 0;
}

static int get_activation(const cJSON *root, Activation *dst, const char *path, BertError *err) {
    const cJSON *v = json_get_last(root, "hidden_act");
    if (!v) return 0;
    if (!cJSON_IsString(v)) return bert_fail(err, "%s: \"hidden_act\" must be a string", path);
    if (!strcmp(v->valuestring, "gelu")) *dst = ACT_GELU;
    else if (!strcmp(v->valuestring, "gelu_new") || !strcmp(v->valuestring, "gelu_pytorch_tanh")) *dst = ACT_GELU_NEW;
    else return bert_fail(err, "%s: hidden_act \"%s\" is not supported (gelu, gelu_new)", path, v->valuestring);
    return 0;
}

int bert_config_load(const char *path, BertConfig *cfg, BertError *err) {
    char *text = NULL;
    size_t len = 0;
    if (read_file(path, &text, &len, err) != 0) return -1;
    /* the whole file must be the object: trailing text is refused, as Python's json does */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        cJSON *prefix = cJSON_Parse(text);   /* an object followed by junk, or just broken? */
        cJSON_Delete(prefix);
        int rc = prefix ? bert_fail(err, "%s: text after the JSON object", path)
                        : json_fail_at(err, path, text, len, end);   /* where, as the other JSON readers say */
        free(text);
        return rc;
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return bert_fail(err, "%s: not a JSON object", path);
    }
    BertConfig c = base_defaults();
    int rc = 0;
    rc |= get_int(root, "vocab_size", &c.vocab_size, path, err);
    rc |= get_int(root, "hidden_size", &c.hidden_size, path, err);
    rc |= get_int(root, "num_hidden_layers", &c.num_hidden_layers, path, err);
    rc |= get_int(root, "num_attention_heads", &c.num_attention_heads, path, err);
    rc |= get_int(root, "intermediate_size", &c.intermediate_size, path, err);
    rc |= get_int(root, "max_position_embeddings", &c.max_position_embeddings, path, err);
    rc |= get_int(root, "type_vocab_size", &c.type_vocab_size, path, err);
    rc |= get_float(root, "layer_norm_eps", &c.layer_norm_eps, path, err);
    rc |= get_float(root, "hidden_dropout_prob", &c.hidden_dropout_prob, path, err);
    rc |= get_float(root, "attention_probs_dropout_prob", &c.attention_probs_dropout_prob, path, err);
    rc |= get_float(root, "initializer_range", &c.initializer_range, path, err);
    rc |= get_activation(root, &c.hidden_act, path, err);
    cJSON_Delete(root);
    if (rc) return -1;
    if (bert_config_validate(&c, err) != 0) return -1;
    *cfg = c;
    return 0;
}

int bert_config_resolve(const char *name_or_path, BertConfig *cfg, BertError *err) {
    for (int i = 0; i < NPRESETS; i++)
        if (!strcmp(PRESETS[i].name, name_or_path)) return bert_config_preset(name_or_path, cfg, err);
    if (access(name_or_path, F_OK) != 0) {   /* neither a preset nor a file: a misspelt preset? */
        const char *names[NPRESETS];
        for (int i = 0; i < NPRESETS; i++) names[i] = PRESETS[i].name;
        char hint[128];
        const bool near = suggest_names(name_or_path, strlen(name_or_path), names, NPRESETS, hint, sizeof hint) > 0;
        /* the presets listed, as bench lists them (issue 35, D20: "cannot open bert-huge") */
        return bert_fail(err, "'%s' is neither a preset nor a config file%s%s (presets: bert-tiny, bert-mini, "
                              "bert-small, bert-medium, bert-base, bert-large)", name_or_path, near ? ": " : "",
                         near ? hint : "");
    }
    return bert_config_load(name_or_path, cfg, err);
}

/* The shortest decimal that reads back as the same float, so 0.1f is written as 0.1
 * rather than 0.10000000149011612. */
static double clean_float(float f) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if ((float)strtod(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

int bert_config_save(const char *path, const BertConfig *c, BertError *err) {
    return bert_config_save_ex(path, c, NULL, err);
}

/* Each member of extra_json (an object) added to root, replacing one of the same name. */
static int merge_members(cJSON *root, const char *extra_json, BertError *err) {
    cJSON *extra = cJSON_Parse(extra_json);
    if (!cJSON_IsObject(extra)) {
        cJSON_Delete(extra);
        return bert_fail(err, "config.json: the extra members are not a JSON object");
    }
    while (extra->child) {
        cJSON *item = cJSON_DetachItemViaPointer(extra, extra->child);
        cJSON_DeleteItemFromObjectCaseSensitive(root, item->string);
        cJSON_AddItemToObject(root, item->string, item);
    }
    cJSON_Delete(extra);
    return 0;
}

int bert_config_save_ex(const char *path, const BertConfig *c, const char *extra_json, BertError *err) {
    if (bert_config_validate(c, err) != 0) return -1;
    cJSON *root = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(root, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("BertForPreTraining"));
    cJSON_AddStringToObject(root, "model_type", "bert");
    cJSON_AddNumberToObject(root, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(root, "hidden_size", c->hidden_size);
    cJSON_AddNumberToObject(root, "num_hidden_layers", c->num_hidden_layers);
    cJSON_AddNumberToObject(root, "num_attention_heads", c->num_attention_heads);
    cJSON_AddNumberToObject(root, "intermediate_size", c->intermediate_size);
    cJSON_AddStringToObject(root, "hidden_act", c->hidden_act == ACT_GELU ? "gelu" : "gelu_new");
    cJSON_AddNumberToObject(root, "max_position_embeddings", c->max_position_embeddings);
    cJSON_AddNumberToObject(root, "type_vocab_size", c->type_vocab_size);
    cJSON_AddNumberToObject(root, "layer_norm_eps", clean_float(c->layer_norm_eps));
    cJSON_AddNumberToObject(root, "hidden_dropout_prob", clean_float(c->hidden_dropout_prob));
    cJSON_AddNumberToObject(root, "attention_probs_dropout_prob", clean_float(c->attention_probs_dropout_prob));
    cJSON_AddNumberToObject(root, "initializer_range", clean_float(c->initializer_range));
    if (extra_json && merge_members(root, extra_json, err) != 0) {
        cJSON_Delete(root);
        return -1;
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) { free(text); return -1; }
    fputs(text, af.fp);
    fputc('\n', af.fp);
    free(text);
    return atomic_commit(&af, err);
}

int bert_config_labels(const char *path, char ***names, int *n, BertError *err) {
    *names = NULL, *n = 0;
    char *text;
    size_t len;
    if (read_file(path, &text, &len, err)) return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    const cJSON *map = root ? json_get_last(root, "id2label") : NULL;
    const int count = cJSON_IsObject(map) ? cJSON_GetArraySize(map) : 0;
    int rc = count > 0 ? 0 : bert_fail(err, "%s has no id2label (not a fine-tuned classifier)", path);
    char **out = rc ? NULL : xcalloc((size_t)count, sizeof(char *));
    for (int k = 0; rc == 0 && k < count; k++) {
        char key[16];
        snprintf(key, sizeof key, "%d", k);
        const cJSON *name = json_get_last(map, key);
        if (!cJSON_IsString(name)) rc = bert_fail(err, "%s: id2label lacks \"%s\" (ids 0 .. %d expected)", path, key, count - 1);
        else out[k] = xstrdup(name->valuestring);
    }
    cJSON_Delete(root), free(text);
    if (rc) {
        for (int k = 0; out && k < count; k++) free(out[k]);
        free(out);
        return -1;
    }
    *names = out, *n = count;
    return 0;
}
