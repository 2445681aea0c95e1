/* A model from a checkpoint wherever and however it is stored (model/bert.h): which files a
 * folder or a path stands for, the configuration beside them, the vocabulary padding of
 * NVIDIA's checkpoints, and `bert convert`'s HF-named copy. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io/tokenizer_files.h"
#include "model/bert_internal.h"
#include "model/config.h"

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* dir/name when that file exists (a TensorFlow prefix: when name.index does). */
static bool try_weights(char *out, size_t n, const char *dir, const char *name, bool tf_prefix) {
    char probe[4096 + 300];
    snprintf(probe, sizeof probe, "%s/%s%s", dir, name, tf_prefix ? ".index" : "");
    if (!is_file(probe)) return false;
    snprintf(out, n, "%s/%s", dir, name);
    return true;
}

/* The weights of a folder: the file names HF, NVIDIA and Google use, else its only .pt or
 * .index file. */
static int folder_weights(const char *dir, char *out, size_t n, BertError *err) {
    if (try_weights(out, n, dir, "model.safetensors", false) || try_weights(out, n, dir, "pytorch_model.bin", false) ||
        try_weights(out, n, dir, "bert_model.ckpt", true) || try_weights(out, n, dir, "model.ckpt", true))
        return 0;
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        bool pt = len > 3 && !strcmp(e->d_name + len - 3, ".pt");
        bool index = len > 6 && !strcmp(e->d_name + len - 6, ".index");
        if (!pt && !index) continue;
        char name[300];
        snprintf(name, sizeof name, "%.*s", (int)(index ? len - 6 : len), e->d_name);
        if (try_weights(out, n, dir, name, index)) found++;
    }
    if (d) closedir(d);
    if (found == 1) return 0;
    return bert_fail(err, "%s: %s", dir,
                     found ? "holds several .pt / TensorFlow checkpoints: name the one to read"
                           : "holds no weights (model.safetensors, pytorch_model.bin, a .pt file, or a TensorFlow "
                             "checkpoint such as bert_model.ckpt.index)");
}

int bert_checkpoint_locate(const char *init_checkpoint, const char *config_file, char *weights, size_t weights_size,
                           char *config, size_t config_size, BertError *err) {
    struct stat st;
    char dir[4096], probe[4096 + 16];
    snprintf(probe, sizeof probe, "%s.index", init_checkpoint);
    if (stat(init_checkpoint, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (folder_weights(init_checkpoint, weights, weights_size, err) != 0) return -1;
        snprintf(dir, sizeof dir, "%s", init_checkpoint);
    } else if (is_file(init_checkpoint) || is_file(probe)) {   /* a file, or a TensorFlow prefix */
        snprintf(weights, weights_size, "%s", init_checkpoint);
        const char *slash = strrchr(init_checkpoint, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - init_checkpoint) : 1, slash ? init_checkpoint : ".");
        if (slash == init_checkpoint) snprintf(dir, sizeof dir, "/");
    } else {
        return bert_fail(err, "%s: no such file or folder", init_checkpoint);
    }
    /* the configuration: given, else the one beside the weights (HF's name, then Google's and NVIDIA's) */
    config[0] = '\0';
    if (config_file) {
        snprintf(config, config_size, "%s", config_file);
        return 0;
    }
    static const char *const names[] = {"config.json", "bert_config.json"};
    for (int i = 0; i < 2 && !config[0]; i++) {
        snprintf(probe, sizeof probe, "%s/%s", dir, names[i]);
        if (is_file(probe)) snprintf(config, config_size, "%s", probe);
    }
    return 0;
}

int bert_load_weights_ex(BertModel *m, const char *path, uint64_t head_seed, int *num_initialised, BertError *err) {
    char weights[4096], config[4096];
    NamedTensors nt;
    if (bert_checkpoint_locate(path, NULL, weights, sizeof weights, config, sizeof config, err) != 0 ||
        bert_named_open(&nt, weights, err) != 0)
        return -1;
    int rc = bert_load_named(m, &nt, head_seed, num_initialised, NULL, err);
    bert_named_close(&nt);
    return rc;
}

int bert_load_weights(BertModel *m, const char *path, BertError *err) {
    return bert_load_weights_ex(m, path, 0, NULL, err);
}

/* The word embedding's rows: the model's vocabulary, which may exceed the configuration's
 * (NVIDIA pads it to a multiple of 8; their bert_config.json keeps the tokenizer's count). */
static int embedding_rows(const NamedTensors *nt, const BertConfig *cfg) {
    int i = bert_named_find(nt, "bert.embeddings.word_embeddings.weight");
    if (i < 0) return -1;
    CkptTensorInfo t = ckpt_file_tensor(nt->file, i);
    return t.ndim == 2 && t.shape[1] == cfg->hidden_size && t.shape[0] <= (1 << 24) ? (int)t.shape[0] : -1;
}

int bert_checkpoint_embedding_rows(const char *init_checkpoint, int hidden_size) {
    char weights[4096], config[4096];
    NamedTensors nt;
    BertError ignored;
    if (bert_checkpoint_locate(init_checkpoint, NULL, weights, sizeof weights, config, sizeof config, &ignored) != 0 ||
        bert_named_open(&nt, weights, &ignored) != 0)
        return -1;
    BertConfig cfg = {.hidden_size = hidden_size};
    int rows = embedding_rows(&nt, &cfg);
    bert_named_close(&nt);
    return rows;
}

/* Locates, reads the configuration, opens the weights (left open in *nt). */
static int inspect_open(const char *init_checkpoint, const char *config_file, BertCheckpointInfo *info,
                        NamedTensors *nt, BertError *err) {
    memset(info, 0, sizeof *info);
    if (bert_checkpoint_locate(init_checkpoint, config_file, info->weights, sizeof info->weights, info->config,
                               sizeof info->config, err) != 0)
        return -1;
    if (!info->config[0])
        return bert_fail(err, "%s: no config.json or bert_config.json beside the weights: give the model's "
                              "configuration (--config_file)", init_checkpoint);
    if (bert_config_load(info->config, &info->cfg, err) != 0) return -1;
    info->config_vocab_size = info->cfg.vocab_size;
    if (bert_named_open(nt, info->weights, err) != 0) return -1;
    int rows = embedding_rows(nt, &info->cfg);
    if (rows > info->cfg.vocab_size) info->cfg.vocab_size = rows;
    return 0;
}

int bert_checkpoint_inspect(const char *init_checkpoint, const char *config_file, BertCheckpointInfo *info,
                            BertError *err) {
    NamedTensors nt;
    if (inspect_open(init_checkpoint, config_file, info, &nt, err) != 0) return -1;
    bert_named_close(&nt);
    return 0;
}

bool bert_vocab_fits(int tokens, int model_vocab) {
    /* padding to a multiple of 8 (NVIDIA), 64 or 128 (Megatron): never more than 127 rows */
    return tokens == model_vocab || (tokens > 0 && tokens < model_vocab && model_vocab - tokens < 128);
}

int bert_open_checkpoint(BertModel **out, const char *init_checkpoint, const char *config_file, BertHeads heads,
                         int max_batch, int max_seq, uint64_t head_seed, int *num_initialised, BertError *err) {
    *out = NULL;
    BertCheckpointInfo info;
    NamedTensors nt;
    if (inspect_open(init_checkpoint, config_file, &info, &nt, err) != 0) return -1;
    BertModel *m = NULL;
    int rc = 0;
    if (max_seq > info.cfg.max_position_embeddings)
        rc = bert_fail(err, "a sequence length of %d exceeds the model's %d positions (%s)", max_seq,
                       info.cfg.max_position_embeddings, info.config);
    if (rc == 0) rc = bert_model_create_with_heads(&m, &info.cfg, heads, max_batch, max_seq, 0, err);
    if (rc == 0) rc = bert_load_named(m, &nt, head_seed, num_initialised, NULL, err);
    bert_named_close(&nt);
    if (rc != 0) {
        bert_model_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

/* ---- bert convert ---- */

/* The heads a checkpoint holds, by their tensors, and the HF class that has them. */
static BertHeads held_heads(const NamedTensors *nt, const char **architecture) {
    int i = bert_named_find(nt, "classifier.weight");
    if (bert_named_find(nt, "qa_outputs.weight") >= 0) {
        *architecture = "BertForQuestionAnswering";
        return (BertHeads){BERT_HEADS_QA, 0};
    }
    if (i >= 0 && ckpt_file_tensor(nt->file, i).ndim == 2) {   /* a token classifier has no pooler */
        bool token = bert_named_find(nt, "bert.pooler.dense.weight") < 0;
        *architecture = token ? "BertForTokenClassification" : "BertForSequenceClassification";
        return (BertHeads){token ? BERT_HEADS_TOKEN_CLASSIFIER : BERT_HEADS_CLASSIFIER,
                           (int)ckpt_file_tensor(nt->file, i).shape[0]};
    }
    if (bert_named_find(nt, "cls.predictions.transform.dense.weight") >= 0) {
        *architecture = "BertForPreTraining";
        return (BertHeads){BERT_HEADS_PRETRAINING, 0};
    }
    *architecture = "BertModel";
    return (BertHeads){BERT_HEADS_NONE, 0};
}

/* The source configuration's label names ("id2label" and "label2id" members, as JSON text
 * after a comma) when it names num_labels of them, else "". */
static char *source_labels(const char *config, int num_labels) {
    char *text = NULL, *out = xcalloc(1, 1);
    BertError ignored;
    if (read_file(config, &text, NULL, &ignored) != 0) return out;
    cJSON *root = cJSON_Parse(text), *members = cJSON_CreateObject();
    const cJSON *id2label = cJSON_GetObjectItemCaseSensitive(root, "id2label");
    const cJSON *label2id = cJSON_GetObjectItemCaseSensitive(root, "label2id");
    if (cJSON_IsObject(id2label) && cJSON_GetArraySize(id2label) == num_labels && cJSON_IsObject(label2id)) {
        cJSON_AddItemToObject(members, "id2label", cJSON_Duplicate(id2label, 1));
        cJSON_AddItemToObject(members, "label2id", cJSON_Duplicate(label2id, 1));
        char *json = cJSON_PrintUnformatted(members);
        free(out);
        out = xmalloc(strlen(json) + 2);
        sprintf(out, ",%.*s", (int)strlen(json) - 2, json + 1);   /* the members without their braces */
        free(json);
    }
    cJSON_Delete(members), cJSON_Delete(root);
    free(text);
    return out;
}

/* config.json with the class the tensors are for; a classifier's labels as the source names
 * them, else LABEL_i (transformers' names), so that transformers makes a head of the stored size. */
static int write_config(const char *dir, const BertCheckpointInfo *info, const char *architecture, BertHeads heads,
                        BertError *err) {
    const bool labels = heads.kind == BERT_HEADS_CLASSIFIER || heads.kind == BERT_HEADS_TOKEN_CLASSIFIER;
    char *named = labels ? source_labels(info->config, heads.num_labels) : xcalloc(1, 1);
    size_t cap = 256 + strlen(named) + 32 * (size_t)(labels ? heads.num_labels : 0);
    char *extra = xmalloc(cap), path[4096 + 16];
    size_t len = (size_t)snprintf(extra, cap, "{\"architectures\": [\"%s\"]%s", architecture, named);
    if (labels && !named[0]) {
        len += (size_t)snprintf(extra + len, cap - len, ", \"id2label\": {");
        for (int i = 0; i < heads.num_labels; i++)
            len += (size_t)snprintf(extra + len, cap - len, "%s\"%d\": \"LABEL_%d\"", i ? ", " : "", i, i);
        len += (size_t)snprintf(extra + len, cap - len, "}");
    }
    snprintf(extra + len, cap - len, "}");
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = bert_config_save_ex(path, &info->cfg, extra, err);
    free(extra), free(named);
    return rc;
}

/* The vocabulary to copy: its bytes (read now, so that nothing about it can fail once the
 * folder is being written) and the casing to record. */
static int read_vocab(const char *vocab_file, int do_lower_case, const BertConfig *cfg, char **text, size_t *len,
                      bool *lower, BertError *err) {
    int tokens, cased;
    if (tokenizer_vocab_scan(vocab_file, &tokens, &cased, err) != 0) return -1;
    if (!bert_vocab_fits(tokens, cfg->vocab_size))
        return bert_fail(err, "the vocabulary %s has %d tokens but the model has %d rows: not its vocabulary",
                         vocab_file, tokens, cfg->vocab_size);
    *lower = do_lower_case >= 0 ? do_lower_case : !cased;
    return read_file(vocab_file, text, len, err);
}

/* The files bert convert writes, model.safetensors last: its presence says the folder is whole. */
static const char *const CONVERT_FILES[] = {"config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors"};
enum { CONVERT_NFILES = (int)(sizeof CONVERT_FILES / sizeof *CONVERT_FILES) };

/* Writes the folder: config.json and the tokenizer's files, then model.safetensors (each
 * published with its folder synced: atomic_commit). A failure removes what this run wrote (and the folders it made); a kill
 * leaves no model.safetensors, so the folder is no model and running again finishes it. */
static int write_converted(const char *output_dir, const BertModel *m, const bool *found,
                           const BertCheckpointInfo *info, const char *architecture, BertHeads heads,
                           const char *vocab, size_t vocab_len, bool lower, BertError *err) {
    char created[4096], path[4096 + 32];
    bool existed[CONVERT_NFILES];
    for (int i = 0; i < CONVERT_NFILES; i++) {
        snprintf(path, sizeof path, "%s/%s", output_dir, CONVERT_FILES[i]);
        struct stat st;
        existed[i] = lstat(path, &st) == 0;
    }
    if (make_dirs_created(output_dir, created, sizeof created, err) != 0) return -1;
    int rc = write_config(output_dir, info, architecture, heads, err);
    if (rc == 0 && vocab)
        rc = tokenizer_folder_write_text(output_dir, vocab, vocab_len, lower, info->cfg.max_position_embeddings, err);
    snprintf(path, sizeof path, "%s/model.safetensors", output_dir);
    if (rc == 0) rc = bert_save_tensors(m, found, path, err);
    if (rc == 0) return 0;
    for (int i = 0; i < CONVERT_NFILES; i++) {   /* never a file that was there before */
        snprintf(path, sizeof path, "%s/%s", output_dir, CONVERT_FILES[i]);
        if (!existed[i]) unlink(path);
    }
    remove_created_dirs(output_dir, created);
    return -1;
}

int bert_convert_checkpoint(const char *init_checkpoint, const char *config_file, const char *vocab_file,
                            const char *output_dir, BertConvertResult *r, BertError *err) {
    memset(r, 0, sizeof *r);
    char path[4096 + 32];
    snprintf(path, sizeof path, "%s/model.safetensors", output_dir);
    if (is_file(path)) return bert_fail(err, "%s exists: convert into another folder (nothing is overwritten)", path);
    struct stat st;
    if (stat(output_dir, &st) == 0 && !S_ISDIR(st.st_mode)) return bert_fail(err, "%s exists and is not a folder", output_dir);
    NamedTensors nt;
    BertCheckpointInfo *info = &r->source;
    if (inspect_open(init_checkpoint, config_file, info, &nt, err) != 0) return -1;
    r->format = ckpt_format_name(ckpt_file_format(nt.file));
    BertHeads heads = held_heads(&nt, &r->architecture);
    /* everything is read and checked before anything is written: the vocabulary (given, else
     * the checkpoint folder's), then the tensors */
    TokenizerFolder folder;
    tokenizer_folder_read(init_checkpoint, &folder);
    if (!vocab_file && folder.vocab_file[0]) vocab_file = folder.vocab_file;
    char *vocab = NULL;
    size_t vocab_len = 0;
    bool lower = true;
    int rc = vocab_file ? read_vocab(vocab_file, folder.do_lower_case, &info->cfg, &vocab, &vocab_len, &lower, err) : 0;
    BertModel *m = NULL;
    bool *found = NULL;
    if (rc == 0) rc = bert_model_create_with_heads(&m, &info->cfg, heads, 1, 8, 0, err);
    if (rc == 0) {
        found = xcalloc((size_t)m->num_tensors, sizeof *found);
        rc = bert_load_named(m, &nt, 0, NULL, found, err);
    }
    bert_named_close(&nt);
    for (int i = 0; rc == 0 && i < m->num_tensors; i++) r->tensors += found[i];
    if (rc == 0) rc = write_converted(output_dir, m, found, info, r->architecture, heads, vocab, vocab_len, lower, err);
    if (rc == 0) r->num_labels = heads.num_labels;
    free(vocab);
    free(found);
    bert_model_free(m);
    return rc;
}
