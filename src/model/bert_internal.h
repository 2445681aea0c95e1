/* The inside of BertModel, shared by the files of src/model/ (and nothing else). */
#ifndef BERT_MODEL_INTERNAL_H
#define BERT_MODEL_INTERNAL_H

#include "kernels/kernels.h"
#include "model/bert.h"
#include "model/bert_views.h"

/* Named views of one encoder layer's parameters (or gradients: the same layout). The query,
 * key and value weights are adjacent, so qkv_w is one [3H, H] matrix and qkv_b one [3H]. */
typedef struct {
    float *qkv_w, *qkv_b;
    float *attn_out_w, *attn_out_b, *ln1_w, *ln1_b;
    float *ffn_in_w, *ffn_in_b, *ffn_out_w, *ffn_out_b, *ln2_w, *ln2_b;
} LayerParams;

typedef struct {
    float *word, *pos, *type, *emb_ln_w, *emb_ln_b;
    LayerParams *layers;
    float *pool_w, *pool_b;
    float *mlm_bias, *mlm_dense_w, *mlm_dense_b, *mlm_ln_w, *mlm_ln_b;
    float *nsp_w, *nsp_b;
    float *qa_w, *qa_b;            /* QA head: [2, H], [2] */
    float *cls_w, *cls_b;          /* classifier head (per sequence or per token): [N, H], [N] */
} ParamViews;

/* Rows quantized for an int8 product (k_quantize_rows_int8): q [N, C], scale [N]. */
typedef struct {
    int8_t *q;
    float *scale;
} Rows8;

/* Activations of one encoder layer kept for backward (N = B*T rows). */
typedef struct {
    float *qkv;                 /* [N, 3H] */
    float *probs;               /* [B, A, T, T] softmax before dropout, or the backend's own state
                                   (k_attention_state_floats) */
    float *ctx;                 /* [N, H] attention output before the projection */
    float *attn_sum;            /* [N, H] dropout(ctx Wo + bo) + x: LayerNorm 1's input */
    float *ln1_mean, *ln1_rstd; /* [N] */
    float *h1;                  /* [N, H] LayerNorm 1's output */
    float *ffn_pre, *ffn_act;   /* [N, I] before / after GELU */
    float *ffn_sum;             /* [N, H] dropout(act W2 + b2) + h1: LayerNorm 2's input */
    float *ln2_mean, *ln2_rstd; /* [N] */
    float *out;                 /* [N, H] the layer's output */
    /* 16-bit precisions: the four products' inputs rounded to 16 bits as the forward made them,
     * the backward's operands (layer input, ctx, h1, ffn_act), and GELU's input in 16 bits (as
     * PyTorch's autocast keeps it: the output of a 16-bit product, which GELU and its backward
     * read), and the QKV product's output, which attention reads in 16 bits; the fp32 ctx
     * and h1 are then only needed within the forward, qkv and ffn_pre only as scratch where
     * the product cannot store its result in 16 bits (ffn_act not at all), and all layers
     * share layer 0's */
    uint16_t *x16, *ctx16, *h1_16, *act16, *pre16;
    uint16_t *qkv16;   /* [N, 3H]: the QKV product stored in 16 bits, attention's operands */
    /* int8 (inference only, every layer sharing layer 0's): the four products' inputs as the
     * kernels before them leave them quantized (the layer's input, ctx, h1, the feed-forward's
     * activation [N, I]); qkv16 where attention runs in bf16 (bert_int8_bf16_attention) */
    Rows8 x8, ctx8, h1_8, act8;
} LayerActs;

typedef struct {
    float *emb_sum, *emb_mean, *emb_rstd, *emb_out;  /* emb_out: layer 0's input (after dropout) */
    LayerActs *layers;
    float *cls_in, *pooled, *nsp_logits;              /* [B, H], [B, H], [B, 2] */
    float *mlm_in, *mlm_pre, *mlm_act, *mlm_ln;       /* [BP, H] (compact rows) */
    float *mlm_mean, *mlm_rstd, *mlm_row_loss, *nsp_row_loss;
    float *mlm_logits;                                /* [BP, V] */
    /* backward scratch, reused by every layer */
    float *d_x, *d_sum, *d_h1, *d_ctx, *d_qkv;        /* [N, H] ..., d_qkv [N, 3H] */
    float *d_ffn;                                     /* [N, I] */
    float *d_mlm_logits;                              /* [BP, V] compact */
    float *d_mlm_a, *d_mlm_b;                         /* [BP, H] */
    float *d_pooled, *d_cls, *d_nsp_logits;           /* [B, H], [B, H], [B, 2] */
    float *kept_x;                                    /* [B(P+1), H] last layer's input at the kept rows */
    /* task heads */
    float *qa_start, *qa_end, *d_qa_start, *d_qa_end; /* [B*T] logits and their gradients */
    float *qa_probs_start, *qa_probs_end;             /* [B, T] softmax of the labelled sequences (compact) */
    float *qa_row_loss;                               /* [B] */
    float *cls_dropped, *cls_logits, *cls_probs;      /* [B, H], [B, N], [B, N] */
    float *cls_row_loss, *d_cls_logits, *d_cls_in;    /* [B], [B, N], [B, H] */
    /* token classifier, on the encoder's layout rows (R = m->rows of N = B*T) */
    float *tok_dropped, *tok_logits, *tok_probs;      /* [N, H], [N, NL], [N, NL] (probs: compact, labelled) */
    float *tok_row_loss, *d_tok_logits, *d_tok_in;    /* [N], [N, NL], [N, H] */
    float *losses;                                    /* [LOSS_SLOTS] the kernels' loss outputs */
    /* 16-bit precisions: the heads' product inputs in 16 bits (as LayerActs), and the rounded
     * output gradient of the product being differentiated */
    uint16_t *cls_in16, *pooled16, *mlm_in16, *mlm_ln16, *seq_out16, *cls_dropped16, *tok_dropped16, *dout16;
} Activations;

enum { LOSS_NSP, LOSS_MLM, LOSS_QA_START, LOSS_QA_END, LOSS_CLASSIFIER, LOSS_TOKEN, LOSS_SLOTS };

/* One weight of params and where its packed copy lives in packed_memory; int8: smooth (where
 * smoothed) the LayerNorm whose output is the product's input (QKV, FFN in) and the rows that
 * set the factors (k_pack_weight_int8). */
typedef struct {
    const float *weight;
    void *packed;
    int C, OC;
    bool smoothed;
    KInt8Smoothing smooth;
} PackedWeight;

struct BertModel {
    BertConfig cfg;
    BertHeads heads;
    int max_batch, max_seq, max_preds;
    int num_tensors;
    BertParamInfo *info;
    size_t num_params;
    float *params, *grads;
    ParamViews p, g;
    Activations act;
    float *act_memory;
    size_t act_floats;
    bool act_placed;            /* act_memory (and act16_memory, params16) taken and the views in it */
    /* derived from the current batch */
    int32_t *kv_len, *zero_types, *mlm_src_row, *mlm_slot, *mlm_label, *nsp_label;
    uint8_t *has_holes;
    int mlm_count;
    /* Which rows run (bert_set_unpadding, bert_set_last_layer_pruning). The encoder runs on
     * `rows` rows: all B*T, or (unpadded) sequence s's first seq_rows[s] only (up to its last
     * real token or read position), packed from row seq_row[s] on; layout row k is full row
     * full_row[k], row_map the inverse (-1: skipped). After attention the last layer runs on
     * every layout row, or (pruned) on the kept_count rows the heads read: layout rows
     * kept_row[k], full rows kept_full[k]. cls_row / mlm_out_row say where the heads find
     * their rows in the last layer's output. */
    BertGradReadyFn grad_ready;    /* bert_set_grad_ready_hook */
    void *grad_ready_ctx;
    bool unpad, prune_last_layer;  /* the options */
    bool unpadded, pruned;         /* what the last forward did */
    int rows, kept_count;
    int32_t *seq_row, *seq_rows, *full_row, *row_map, *out_map, *kept_row, *kept_full, *cls_row, *mlm_out_row;
    int B, T, P;
    bool have_mlm_labels, have_nsp_labels, training;
    bool backward_ready;  /* a forward succeeded and its backward has not run yet */
    uint64_t dropout_seed;
    float mlm_loss, nsp_loss, task_loss;
    /* task labels of the current batch. QA, for side 0 (start) and 1 (end): the sequences
     * whose position is not ignored (qa_seq, compact) and that position (qa_label); then
     * classes, regression targets or multi-label targets ([B, N] when multi_label) */
    int32_t *qa_seq[2], *qa_label[2], *class_label;
    float *target;
    bool multi_label;
    int qa_count[2];
    /* token classification: the batch's labels [B*T] (for the row plan), and the labelled
     * tokens, compact: their layout rows (tok_row) and labels */
    const int32_t *token_labels;
    int32_t *tok_row, *tok_label;
    int tok_count;
    bool have_task_labels;
    char error[1024];
    /* mixed precision (bert_set_precision): the 16-bit copy of params (same layout), each
     * tensor's made when a product first reads it after params16_stale (half_fresh[tensor]:
     * made since; half_weight), so the pages of a copy nothing reads (the embeddings' but the
     * word embeddings' while the MLM head runs; the packed weights of a FORWARD_ONLY model)
     * are never touched; the 16-bit activations (one allocation) */
    BertPrecision precision;
    bool int8_bf16;     /* bf16 instructions here, for int8's attention (set with the precision) */
    float loss_scale;   /* the backward's seed: d(loss scale * loss) (bert_set_loss_scale) */
    uint16_t *params16, *act16_memory;   /* act16_memory: int8's activations too */
    size_t act16_len;
    bool params16_stale;
    bool *half_fresh;
    bool *half_used;    /* a product has read the tensor's copy since the precision was set:
                           remade in one call after each update (bert_refresh_weights) */
    /* bert_set_packed_weights: the encoder's, pooler's and MLM transform's weights also
     * packed for the forward product (k_pack_weight, k_pack_weight_f32), one allocation,
     * remade with params16 (native bf16) or at an inference forward (fp32), when
     * params16_stale (which then means: any derived copy is stale) */
    bool pack_bf16, pack_fp32, packed_allocated;
    /* bert_set_mode: which forwards are lean (training=false ones, unless FULL: neither the
     * feed-forward's pre-activation nor attention's probabilities is stored, no backward), and
     * whether the layers share one set of activation buffers (FORWARD_ONLY) */
    BertMode mode;
    PackedWeight *packed;
    int packed_count;
    void *packed_memory;
    size_t packed_bytes;
};

/* Dropout sites: one RNG stream per site per step. */
enum { SITE_EMBEDDINGS = 0, SITE_ATTN_PROBS = 1, SITE_ATTN_OUT = 2, SITE_FFN_OUT = 3, SITES_PER_LAYER = 3 };
static inline uint64_t dropout_site(int layer, int kind) {
    return kind == SITE_EMBEDDINGS ? 0 : 1 + (uint64_t)layer * SITES_PER_LAYER + (uint64_t)(kind - 1);
}
/* The classifier head's dropout (on the pooled output): the site after the last layer's. */
static inline uint64_t classifier_dropout_site(int layers) { return 1 + (uint64_t)layers * SITES_PER_LAYER; }
/* The token classifier's dropout (on the sequence output) uses the same site: a model has one
 * head. Its masks are keyed by full row (row * H + column), packed or not. */

/* The attention kernel's arguments for layer `layer` of the current batch (dropout keyed
 * by the forward's seed when training). */
void bert_attention_args(const BertModel *m, AttentionArgs *a, const int32_t *mask, int layer);

/* Dropout of a hidden-state site on R rows of H: all rows in order when rows is NULL, else
 * row k is full row rows[k] and gets that row's mask, so packed and pruned layouts draw the
 * same masks as the full one. Forward and backward (applied to the gradient) alike.
 * bert_hidden_dropout_of gives its arguments (the probability while training, else 0) for the
 * kernels that apply it in their own pass (k_dropout_layernorm_forward_to and its backward). */
KDropout bert_hidden_dropout_of(const BertModel *m, const int32_t *rows, int layer, int site);
void bert_hidden_dropout(const BertModel *m, float *x, int R, const int32_t *rows, int layer, int site);

/* This forward (or, in bert_backward, the last one: the mode and m->training have not changed
 * since, or backward_ready would be false) keeps only what the outputs need: training=false
 * outside BERT_MODE_FULL. */
static inline bool bert_lean_forward(const BertModel *m) { return m->mode != BERT_MODE_FULL && !m->training; }

/* The full rows of the encoder's layout, for dropout masks (NULL: all B*T rows in order). */
static inline const int32_t *layout_rows(const BertModel *m) { return m->unpadded ? m->full_row : NULL; }

/* Every linear layer and head of the model goes through these, which hand the backend's typed
 * products (k_linear_*, kernels.h) the model's precision and the weight in its forms (weight:
 * a view into m->params; its packed copy; its 16-bit copy, made when first needed): the
 * backend picks the kernels. inp16: where the 16-bit forward keeps its rounded input for the
 * backward (unused in fp32); the backward reads inp in fp32, inp16 in 16 bits. The _to forms
 * store their result where the next kernel reads it (out in fp32, out16 in 16 bits). */
void bert_linear_forward_to(BertModel *m, float *out, uint16_t *out16, const float *inp, uint16_t *inp16,
                            const float *weight, const float *bias, int N, int C, int OC);
void bert_gelu_forward_to(BertModel *m, float *out, uint16_t *out16, const float *pre, const uint16_t *pre16, long n);
bool bert_linear_gelu_forward(BertModel *m, float *out, uint16_t *out16, const float *inp, uint16_t *inp16,
                              const float *weight, const float *bias, int N, int C, int OC);
/* The activations' memory taken and their views laid out in it, where a layout change (creation,
 * bert_set_precision, bert_set_mode) left them to be: bert_forward's first step. false (m->error
 * set, nothing taken) where the model would need more than the backend's memory. */
bool bert_place_activations(BertModel *m);

void bert_linear_forward(BertModel *m, float *out, const float *inp, uint16_t *inp16, const float *weight,
                         const float *bias, int N, int C, int OC);
void bert_linear_backward(BertModel *m, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const uint16_t *inp16, const float *weight, int N, int C, int OC, bool accumulate_dinp);
void bert_gelu_linear_backward(BertModel *m, float *dinp, float *dweight, float *dbias, float *dout, const float *pre,
                               const uint16_t *pre16, const float *inp, const uint16_t *inp16, const float *weight,
                               int N, int C, int OC);
/* int8 (BERT_INT8): the product of rows already quantized with the weight's packed int8 copy,
 * stored as out says (k_matmul_forward_int8_rows). */
/* The smoothing factors of weight's int8 copy (k_int8_smoothing): what the kernel producing
 * its input divides the rows by before quantizing them; NULL where it is not smoothed. */
const float *bert_int8_smoothing(const BertModel *m, const float *weight);
void bert_linear_int8(BertModel *m, const KInt8Output *out, Rows8 inp, const float *weight, const float *bias, int N,
                      int C, int OC);
/* If the weights changed: repacks the packed copies and marks every plain 16-bit copy stale
 * (each is made when a product first reads it). At the start of a forward, after m->training
 * is set. */
void bert_refresh_weights(BertModel *m);
/* Whether the model's products take 16-bit operands (BF16, BF16_EMULATED, FP16); FP32 and
 * INT8 keep fp32 activations. */
static inline bool bert_is_half(BertPrecision p) { return p == BERT_BF16 || p == BERT_BF16_EMULATED || p == BERT_FP16; }
/* int8 runs attention as native bf16 runs it (its products in bf16, on the QKV product's
 * output stored in bf16) where the CPU has bf16 instructions; in fp32 where not. */
static inline bool bert_int8_bf16_attention(const BertModel *m) { return m->precision == BERT_INT8 && m->int8_bf16; }
/* attention's products in 16 bits (AttentionArgs.half) */
static inline bool bert_attention_half(const BertModel *m) {
    return bert_is_half(m->precision) || bert_int8_bf16_attention(m);
}
/* The kernels' 16-bit format for the model's precision (not FP32). */
static inline HalfMode bert_half_mode(const BertModel *m) {
    return m->precision == BERT_FP16 ? HALF_FP16 : m->precision == BERT_BF16_EMULATED ? HALF_BF16_EMULATED : HALF_BF16;
}

/* Initialises one parameter tensor (BERT rules) from the counter-based RNG. */
void bert_init_tensor(const BertParamInfo *t, float initializer_range, uint64_t seed, int tensor_index);
/* The same with a plain normal of standard deviation std (transformers' _init_weights for a
 * Linear; biases 0, LayerNorm weights 1 as above). */
void bert_init_tensor_normal(const BertParamInfo *t, float std, uint64_t seed, int tensor_index);

/* ---- a checkpoint's tensors under HF's names (bert_weights.c) ---- */
#include "io/checkpoint_file.h"
enum { NAME_LEN = 256 };
typedef struct {
    CheckpointFile *file;
    int n;
    char (*names)[NAME_LEN];   /* each tensor's HF name; "" for those that are not the model's */
    bool *transpose;           /* stored [in, out] (TensorFlow's kernels) */
} NamedTensors;
int  bert_named_open(NamedTensors *nt, const char *path, BertError *err);
void bert_named_close(NamedTensors *nt);
/* The checkpoint's tensor for model tensor `name` (any accepted spelling), or -1. */
int  bert_named_find(const NamedTensors *nt, const char *name);
/* Loads every tensor of m (found[i], optional: whether the checkpoint held tensor i; heads it
 * lacks are initialised from head_seed, an encoder tensor it lacks is an error). */
int  bert_load_named(BertModel *m, const NamedTensors *nt, uint64_t head_seed, int *num_initialised, bool *found,
                BertError *err);
/* m's tensors for which keep[i] (all when NULL) as float32 safetensors. */
int  bert_save_tensors(const BertModel *m, const bool *keep, const char *path, BertError *err);

#endif
