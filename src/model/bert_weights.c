/* BERT weights in and out, under HuggingFace's tensor names, from any checkpoint format
 * io/checkpoint_file.h reads: safetensors, PyTorch (NVIDIA's .pt, HF's pytorch_model.bin),
 * TensorFlow (Google's bert_model.ckpt).
 *
 * Stored names are first brought to HF's (bert_checkpoint_tensor_name): Google's
 * "bert/encoder/layer_0/.../kernel" (kernels are [in, out]: transposed, as HF's converter
 * does), NVIDIA's "dense_act" (their fused bias-GELU layers), DDP's "module." prefix.
 * Loading then accepts the spellings found in real checkpoints: names with or without the
 * "bert." prefix (BertModel vs BertForPreTraining), LayerNorm "gamma"/"beta", and
 * cls.predictions.decoder.bias for cls.predictions.bias. The tied decoder weight, if present,
 * is ignored (it is the word embedding). Tensors unknown to the model (position_ids, other
 * heads, optimizer state) are ignored, as HF does; any other unused tensor (encoder layers past
 * the configuration's, names of another model) gets a warning. A missing encoder tensor is an error;
 * missing heads are initialised, so an encoder-only checkpoint loads for fine-tuning. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/launcher.h"
#include "io/safetensors.h"
#include "model/bert_internal.h"
#include "model/config.h"

enum { MAX_ALIASES = 4 };

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* ---- stored names -> HF names ---- */

/* Google's TensorFlow names: '/' separated scopes, "layer_N", kernel/gamma/beta,
 * output_weights/output_bias; the optimizer's slots and counters are not model tensors. */
static int tf_name(const char *stored, char *out, size_t n, bool *transpose) {
    static const char *const not_model[] = {"/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum", "/LAMB", "/LAMB_1"};
    for (size_t i = 0; i < sizeof not_model / sizeof *not_model; i++)
        if (ends_with(stored, not_model[i])) return 0;
    if (strstr(stored, ".ATTRIBUTES") || strstr(stored, "_CHECKPOINTABLE_OBJECT_GRAPH")) return 0;
    char buf[NAME_LEN] = "";
    size_t len = 0;
    const char *p = stored;
    while (*p && len < sizeof buf - 16) {
        const char *slash = strchr(p, '/');
        size_t part = slash ? (size_t)(slash - p) : strlen(p);
        char comp[NAME_LEN];
        snprintf(comp, sizeof comp, "%.*s", (int)part, p);
        const char *last = slash ? NULL : comp;
        if (!strncmp(comp, "layer_", 6)) snprintf(comp, sizeof comp, "layer.%.*s", (int)part - 6, p + 6);
        if (last) {   /* the variable itself */
            if (!strcmp(comp, "kernel")) snprintf(comp, sizeof comp, "weight"), *transpose = true;
            else if (!strcmp(comp, "gamma") || !strcmp(comp, "output_weights")) snprintf(comp, sizeof comp, "weight");
            else if (!strcmp(comp, "beta") || !strcmp(comp, "output_bias")) snprintf(comp, sizeof comp, "bias");
            else if (ends_with(comp, "_embeddings")) snprintf(comp + strlen(comp), sizeof comp - strlen(comp), ".weight");
        }
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? "." : "", comp);
        p = slash ? slash + 1 : p + part;
    }
    /* the heads of Google's run_squad.py and run_classifier.py */
    if (!strncmp(buf, "cls.squad.", 10)) snprintf(out, n, "qa_outputs.%s", buf + 10);
    else if (!strcmp(buf, "weight") || !strcmp(buf, "bias")) snprintf(out, n, "classifier.%s", buf);
    else snprintf(out, n, "%s", buf);
    return 1;
}

int bert_checkpoint_tensor_name(const char *stored, char *out, size_t n, bool *transpose) {
    *transpose = false;
    if (!strcmp(stored, "global_step") || ends_with(stored, "position_ids")) return 0;
    if (strchr(stored, '/') || !strcmp(stored, "output_weights") || !strcmp(stored, "output_bias"))
        return tf_name(stored, out, n, transpose);   /* Google's (run_classifier.py's head is unscoped) */
    if (!strncmp(stored, "module.", 7)) stored += 7;   /* saved from a DistributedDataParallel wrapper */
    snprintf(out, n, "%s", stored);
    char *act = strstr(out, ".dense_act.");              /* NVIDIA's fused bias + GELU layers */
    if (act) memmove(act + 6, act + 10, strlen(act + 10) + 1);
    return 1;
}

/* ---- a checkpoint file with its tensors' HF names ---- */

void bert_named_close(NamedTensors *nt) {
    ckpt_file_close(nt->file);
    free(nt->names);
    free(nt->transpose);
    memset(nt, 0, sizeof *nt);
}

int bert_named_open(NamedTensors *nt, const char *path, BertError *err) {
    memset(nt, 0, sizeof *nt);
    if (ckpt_file_open(&nt->file, path, err) != 0) return -1;
    nt->n = ckpt_file_count(nt->file);
    nt->names = xcalloc((size_t)nt->n + 1, sizeof *nt->names);
    nt->transpose = xcalloc((size_t)nt->n + 1, sizeof *nt->transpose);
    for (int i = 0; i < nt->n; i++) {
        CkptTensorInfo t = ckpt_file_tensor(nt->file, i);
        if (!bert_checkpoint_tensor_name(t.name, nt->names[i], NAME_LEN, &nt->transpose[i])) nt->names[i][0] = '\0';
        if (nt->transpose[i] && t.ndim != 2) nt->transpose[i] = false;   /* only matrices are stored [in, out] */
        for (int j = 0; j < i && nt->names[i][0]; j++)
            if (!strcmp(nt->names[i], nt->names[j])) {
                bert_fail(err, "%s: tensors '%s' and '%s' both stand for %s", path, ckpt_file_tensor(nt->file, j).name,
                          t.name, nt->names[i]);
                bert_named_close(nt);
                return -1;
            }
    }
    return 0;
}

static void replace_suffix(char *out, size_t n, const char *name, const char *suffix, const char *with) {
    out[0] = '\0';
    if (ends_with(name, suffix)) snprintf(out, n, "%.*s%s", (int)(strlen(name) - strlen(suffix)), name, with);
}

/* The checkpoint spellings of one model tensor, preferred first; returns how many. */
static int aliases(const char *name, char out[MAX_ALIASES * 2][NAME_LEN]) {
    int n = 0;
    snprintf(out[n++], NAME_LEN, "%s", name);
    char alt[NAME_LEN];
    replace_suffix(alt, sizeof alt, name, "LayerNorm.weight", "LayerNorm.gamma");
    if (alt[0]) snprintf(out[n++], NAME_LEN, "%s", alt);
    replace_suffix(alt, sizeof alt, name, "LayerNorm.bias", "LayerNorm.beta");
    if (alt[0]) snprintf(out[n++], NAME_LEN, "%s", alt);
    if (!strcmp(name, "cls.predictions.bias")) snprintf(out[n++], NAME_LEN, "cls.predictions.decoder.bias");
    int with_prefix = n;
    for (int i = 0; i < with_prefix; i++)  /* BertModel checkpoints have no "bert." prefix */
        if (!strncmp(out[i], "bert.", 5)) memmove(out[n++], out[i] + 5, strlen(out[i] + 5) + 1);
    return n;
}

/* The checkpoint's tensor for model tensor `name`, or -1. */
int bert_named_find(const NamedTensors *nt, const char *name) {
    char names[MAX_ALIASES * 2][NAME_LEN];
    int n = aliases(name, names);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < nt->n; i++)
            if (!strcmp(nt->names[i], names[k])) return i;
    return -1;
}

static void shape_string(char *out, size_t n, const int64_t *shape, int ndim) {
    out[0] = '\0';
    for (int d = 0; d < ndim; d++) snprintf(out + strlen(out), n - strlen(out), "%s%lld", d ? ", " : "", (long long)shape[d]);
}

/* Reads checkpoint tensor i into model tensor t's host view, transposed where stored [in, out]. */
static int read_tensor(const NamedTensors *nt, int i, const BertParamInfo *t, float *dst, BertError *err) {
    CkptTensorInfo s = ckpt_file_tensor(nt->file, i);
    bool tr = nt->transpose[i];
    int64_t want[2] = {tr ? t->shape[1] : t->shape[0], tr ? t->shape[0] : t->shape[1]};
    bool same = s.ndim == t->ndim;
    for (int d = 0; same && d < s.ndim; d++) same = s.shape[d] == want[d];
    if (!same) {
        char got[128], exp[128];
        shape_string(got, sizeof got, s.shape, s.ndim);
        shape_string(exp, sizeof exp, want, t->ndim);
        return bert_fail(err, "%s: tensor '%s' has shape [%s], expected [%s] (the configuration's shape for %s)",
                         ckpt_file_path(nt->file), s.name, got, exp, t->name);
    }
    if (!tr) return ckpt_file_read_f32(nt->file, i, dst, t->numel, err);
    float *stored = xmalloc(sizeof(float) * (size_t)t->numel);
    int rc = ckpt_file_read_f32(nt->file, i, stored, t->numel, err);
    for (int64_t r = 0; rc == 0 && r < t->shape[0]; r++)
        for (int64_t c = 0; c < t->shape[1]; c++) dst[r * t->shape[1] + c] = stored[c * t->shape[0] + r];
    free(stored);
    return rc;
}

/* Checkpoint tensors a model passes over as transformers does, without a word: another task's
 * heads (a pre-trained checkpoint's cls.* when fine-tuning, a fine-tuned classifier's head when
 * embedding; transformers only logs those, at info level, when the checkpoint's class differs
 * from the model's) and the pooler of a model without one (HF's token-classification and QA
 * models list it in _keys_to_ignore_on_load_unexpected). The tied decoder weight is a cls.*
 * tensor; optimizer slots, global_step and position_ids are named "" by the reader. */
static bool unused_is_expected(const char *name) {
    if (!strncmp(name, "bert.", 5)) name += 5;
    static const char *const heads[] = {"cls.", "classifier.", "qa_outputs.", "pooler."};
    for (size_t i = 0; i < sizeof heads / sizeof *heads; i++)
        if (!strncmp(name, heads[i], strlen(heads[i]))) return true;
    return false;
}

/* One line on stderr naming the checkpoint tensors the model did not use (transformers' "Some
 * weights of the model checkpoint ... were not used"): how many, the first three, and when
 * they are encoder layers past the configuration's, that the configuration has fewer layers
 * than the weights (a config.json of another model beside them loaded 4 of 6 layers unsaid). */
static void warn_unused(const BertModel *m, const NamedTensors *nt, const bool *used) {
    int count = 0, layers = 0;
    char first[3 * NAME_LEN + 16] = "";
    for (int i = 0; i < nt->n; i++) {
        const char *name = nt->names[i];
        if (used[i] || !name[0] || unused_is_expected(name)) continue;
        if (++count <= 3)
            snprintf(first + strlen(first), sizeof first - strlen(first), "%s%s", count > 1 ? ", " : "",
                     ckpt_file_tensor(nt->file, i).name);
        const char *layer = strstr(name, "encoder.layer.");
        int k;
        if (layer && sscanf(layer, "encoder.layer.%d.", &k) == 1 && k >= m->cfg.num_hidden_layers && k + 1 > layers)
            layers = k + 1;
    }
    int rank, world;
    launcher_rank(&rank, &world);
    if (!count || rank != 0) return;   /* one line per job, not one per process */
    char why[200] = "";
    if (layers)
        snprintf(why, sizeof why, "; the configuration has %d encoder layers but the weights at least %d: is it "
                                  "their configuration?", m->cfg.num_hidden_layers, layers);
    fprintf(stderr, "warning: %s: %d of its tensors are not used by the model (%s%s)%s\n", ckpt_file_path(nt->file),
            count, first, count > 3 ? ", ..." : "", why);
}

/* found (optional, one per model tensor): whether the checkpoint held it. */
int bert_load_named(BertModel *m, const NamedTensors *nt, uint64_t head_seed, int *num_initialised, bool *found,
                      BertError *err) {
    m->params16_stale = true;
    int initialised = 0, rc = 0;
    bool *used = xcalloc((size_t)nt->n + 1, sizeof *used);   /* per checkpoint tensor */
    for (int i = 0; i < m->num_tensors && rc == 0; i++) {
        const BertParamInfo *t = &m->info[i];
        int k = bert_named_find(nt, t->name);
        if (found) found[i] = k >= 0;
        if (k >= 0) {
            used[k] = true;   /* read into the host's view of the tensor's backend memory */
            float *host = k_map(t->data, sizeof(float) * t->numel, false);
            rc = read_tensor(nt, k, t, host, err);
            k_unmap(t->data, host, sizeof(float) * t->numel, rc == 0);
        } else if (t->is_head) {
            /* A head the checkpoint lacks. The token classifier is drawn as transformers'
             * BertForTokenClassification draws it (run_ner.py is that task's reference: normal,
             * not truncated; a same-start NER run showed the truncated draw's smaller weights
             * learning more slowly in the first epoch); the heads of Google's recipes (GLUE,
             * SQuAD, pre-training) from TF's truncated normal, as Google's scripts draw them. */
            if (m->heads.kind == BERT_HEADS_TOKEN_CLASSIFIER) bert_init_tensor_normal(t, m->cfg.initializer_range, head_seed, i);
            else bert_init_tensor(t, m->cfg.initializer_range, head_seed, i);
            initialised++;
        } else {
            rc = bert_fail(err, "%s: missing tensor '%s' (required by the encoder)", ckpt_file_path(nt->file), t->name);
        }
    }
    if (rc == 0) warn_unused(m, nt, used);
    free(used);
    if (num_initialised) *num_initialised = initialised;
    return rc;
}

/* The tensors of m for which keep[i] (all when NULL) as HF-named float32 safetensors. */
int bert_save_tensors(const BertModel *m, const bool *keep, const char *path, BertError *err) {
    StWriteTensor *out = xcalloc(m->num_tensors, sizeof *out);
    float *host = k_map(m->params, sizeof(float) * m->num_params, true);   /* the host's view of every weight */
    int n = 0;
    for (int i = 0; i < m->num_tensors; i++) {
        const BertParamInfo *t = &m->info[i];
        if (keep && !keep[i]) continue;
        out[n] = (StWriteTensor){.name = t->name, .dtype = ST_F32, .ndim = t->ndim, .data = host + (t->data - m->params)};
        out[n].shape[0] = t->shape[0];
        out[n++].shape[1] = t->shape[1];
    }
    const char *metadata[] = {"format", "pt", "producer", "bert.c", NULL};
    int rc = safetensors_write(path, out, n, metadata, err);
    k_unmap(m->params, host, sizeof(float) * m->num_params, false);
    free(out);
    return rc;
}

int bert_save_safetensors(const BertModel *m, const char *path, BertError *err) {
    return bert_save_tensors(m, NULL, path, err);
}
