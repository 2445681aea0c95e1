/* A BERT model's shape and hyperparameters (HuggingFace's config.json fields), the named
 * presets, and reading and writing config.json (model/config.c). */
#ifndef BERT_MODEL_CONFIG_H
#define BERT_MODEL_CONFIG_H

#include "core/common.h"
#include "kernels/activation.h"

typedef struct {
    int vocab_size;
    int hidden_size;
    int num_hidden_layers;
    int num_attention_heads;
    int intermediate_size;
    Activation hidden_act;
    int max_position_embeddings;
    int type_vocab_size;
    float layer_norm_eps;
    float hidden_dropout_prob;
    float attention_probs_dropout_prob;
    float initializer_range;
} BertConfig;

/* bert-tiny (L2 H128 A2), bert-mini (L4 H256 A4), bert-small (L4 H512 A8),
 * bert-medium (L8 H512 A8), bert-base (L12 H768 A12), bert-large (L24 H1024 A16);
 * all with vocab 30522, 512 positions, 2 token types, intermediate 4H, gelu. */
int bert_config_preset(const char *name, BertConfig *cfg, BertError *err);

/* Reads config.json; keys absent from the file keep BERT-base's defaults. Unknown keys
 * are ignored (HF configs carry many); present keys with wrong types are errors. */
int bert_config_load(const char *path, BertConfig *cfg, BertError *err);
/* Either a preset name or a path to a config.json. */
int bert_config_resolve(const char *name_or_path, BertConfig *cfg, BertError *err);
int bert_config_save(const char *path, const BertConfig *cfg, BertError *err);
/* With the members of extra_json (a JSON object: a task's label map, "architectures", ...)
 * added, replacing those of the same name. */
int bert_config_save_ex(const char *path, const BertConfig *cfg, const char *extra_json, BertError *err);
int bert_config_validate(const BertConfig *cfg, BertError *err);
/* A fine-tuned classifier's label names: config.json's id2label ("0" .. "N-1"), as
 * transformers writes it. *names: n malloc'd strings in a malloc'd array (free each, then
 * it). -1 (err) when the file has no id2label or it misses an id. */
int bert_config_labels(const char *path, char ***names, int *n, BertError *err);

#endif
