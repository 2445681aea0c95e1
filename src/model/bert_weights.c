/* BERT weights <-> safetensors with HuggingFace tensor names.
 *
 * Loading accepts the spellings found in real checkpoints: names with or without the
 * "bert." prefix (BertModel vs BertForPreTraining), LayerNorm "gamma"/"beta" (TF-converted
 * checkpoints such as bert-base-uncased), and cls.predictions.decoder.bias for
 * cls.predictions.bias. The tied decoder weight, if present, is ignored (it is the word
 * embedding). Tensors unknown to the model (position_ids, task heads) are ignored, as HF
 * does. A missing encoder tensor is an error; missing pre-training heads (pooler, cls.*)
 * are initialised, so an encoder-only checkpoint loads for fine-tuning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/config.h"
#include "io/safetensors.h"
#include "model/bert_internal.h"

enum { MAX_ALIASES = 4 };

static void replace_suffix(char *out, size_t n, const char *name, const char *suffix, const char *with) {
    size_t len = strlen(name), slen = strlen(suffix);
    out[0] = '\0';
    if (len >= slen && !strcmp(name + len - slen, suffix))
        snprintf(out, n, "%.*s%s", (int)(len - slen), name, with);
}

/* The checkpoint spellings of one model tensor, preferred first; returns how many. */
static int aliases(const char *name, char out[MAX_ALIASES * 2][128]) {
    int n = 0;
    snprintf(out[n++], 128, "%s", name);
    char alt[128];
    replace_suffix(alt, sizeof alt, name, "LayerNorm.weight", "LayerNorm.gamma");
    if (alt[0]) snprintf(out[n++], 128, "%s", alt);
    replace_suffix(alt, sizeof alt, name, "LayerNorm.bias", "LayerNorm.beta");
    if (alt[0]) snprintf(out[n++], 128, "%s", alt);
    if (!strcmp(name, "cls.predictions.bias")) snprintf(out[n++], 128, "cls.predictions.decoder.bias");
    int with_prefix = n;
    for (int i = 0; i < with_prefix; i++)  /* BertModel checkpoints have no "bert." prefix */
        if (!strncmp(out[i], "bert.", 5)) memmove(out[n++], out[i] + 5, strlen(out[i] + 5) + 1);
    return n;
}

int bert_load_safetensors_ex(BertModel *m, const char *path, uint64_t head_seed, int *num_initialised,
                             BertError *err) {
    SafeTensors st;
    if (safetensors_open(&st, path, err)) return -1;
    m->params16_stale = true;
    int initialised = 0, rc = 0;
    for (int i = 0; i < m->num_tensors && rc == 0; i++) {
        const BertParamInfo *t = &m->info[i];
        char names[MAX_ALIASES * 2][128];
        int n = aliases(t->name, names);
        const char *found = NULL;
        for (int k = 0; k < n && !found; k++)
            if (safetensors_find(&st, names[k])) found = names[k];
        if (found) {   /* read into the host's view of the tensor's backend memory */
            float *host = k_map(t->data, sizeof(float) * t->numel, false);
            rc = safetensors_read_f32(&st, found, t->shape, t->ndim, host, err);
            k_unmap(t->data, host, sizeof(float) * t->numel, rc == 0);
        } else if (t->is_head) {
            bert_init_tensor(t, m->cfg.initializer_range, head_seed, i);
            initialised++;
        } else {
            rc = bert_fail(err, "%s: missing tensor '%s' (required by the encoder)", path, t->name);
        }
    }
    safetensors_close(&st);
    if (num_initialised) *num_initialised = initialised;
    return rc;
}

int bert_load_safetensors(BertModel *m, const char *path, BertError *err) {
    return bert_load_safetensors_ex(m, path, 0, NULL, err);
}

int bert_save_safetensors(const BertModel *m, const char *path, BertError *err) {
    StWriteTensor *out = xcalloc(m->num_tensors, sizeof *out);
    float *host = k_map(m->params, sizeof(float) * m->num_params, true);   /* the host's view of every weight */
    for (int i = 0; i < m->num_tensors; i++) {
        const BertParamInfo *t = &m->info[i];
        out[i] = (StWriteTensor){.name = t->name, .dtype = ST_F32, .ndim = t->ndim, .data = host + (t->data - m->params)};
        out[i].shape[0] = t->shape[0];
        out[i].shape[1] = t->shape[1];
    }
    const char *metadata[] = {"format", "pt", "producer", "bert.c", NULL};
    int rc = safetensors_write(path, out, m->num_tensors, metadata, err);
    k_unmap(m->params, host, sizeof(float) * m->num_params, false);
    free(out);
    return rc;
}

/* ---- a model from a checkpoint folder or file ---- */

int bert_open_checkpoint(BertModel **out, const char *init_checkpoint, const char *config_file, BertHeads heads,
                         int max_batch, int max_seq, uint64_t head_seed, int *num_initialised, BertError *err) {
    *out = NULL;
    struct stat st;
    char weights[4096], config[4096] = "";
    if (stat(init_checkpoint, &st) != 0) return bert_fail(err, "%s: no such file or folder", init_checkpoint);
    if (S_ISDIR(st.st_mode)) {
        snprintf(weights, sizeof weights, "%s/model.safetensors", init_checkpoint);
        snprintf(config, sizeof config, "%s/config.json", init_checkpoint);
    } else {
        snprintf(weights, sizeof weights, "%s", init_checkpoint);
    }
    if (config_file) snprintf(config, sizeof config, "%s", config_file);
    if (!config[0]) return bert_fail(err, "%s is a weights file: give its config.json (--config_file)", init_checkpoint);
    BertConfig cfg;
    if (bert_config_load(config, &cfg, err) != 0) return -1;
    if (max_seq > cfg.max_position_embeddings)
        return bert_fail(err, "a sequence length of %d exceeds the model's %d positions (%s)", max_seq,
                         cfg.max_position_embeddings, config);
    BertModel *m;
    if (bert_model_create_with_heads(&m, &cfg, heads, max_batch, max_seq, 0, err) != 0) return -1;
    if (bert_load_safetensors_ex(m, weights, head_seed, num_initialised, err) != 0) {
        bert_model_free(m);
        return -1;
    }
    *out = m;
    return 0;
}
