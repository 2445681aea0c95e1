/* A BERT model's shape and hyperparameters (HuggingFace's config.json fields). Reading and
 * writing config.json, and the named presets, are io/config.h's. */
#ifndef BERT_MODEL_CONFIG_H
#define BERT_MODEL_CONFIG_H

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

#endif
