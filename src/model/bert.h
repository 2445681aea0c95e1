/* The BERT model (HuggingFace BertForPreTraining architecture and tensor names) on the CPU:
 * forward, backward, safetensors load/save.
 *
 * Memory layout, in the llm.c manner: all parameters live in one float allocation, all
 * gradients in a second with the same layout (the optimizer keeps its moments in a third,
 * src/optim/optimizer.h); a table of
 * BertParamInfo {HF name, shape, data, grad, decay} makes save/load/optimizer/all-reduce
 * plain loops. Activations are one allocation sized at create time for
 * (max_batch, max_seq, max_predictions): no allocation happens per step. */
#ifndef BERT_MODEL_H
#define BERT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "model/config.h"

typedef struct {                 /* one training/inference batch; all arrays row-major */
    int batch, seq_len;          /* B, T (T <= max_position_embeddings) */
    int max_predictions;         /* P: masked slots per sequence (0 = no MLM head) */
    const int32_t *input_ids;        /* [B*T] */
    const int32_t *token_type_ids;   /* [B*T] */
    const int32_t *attention_mask;   /* [B*T] 1 real token, 0 padding */
    const int32_t *masked_positions; /* [B*P] position in the sequence of each masked slot */
    const int32_t *masked_labels;    /* [B*P] vocab id, or -1 for an unused slot (ignored in the loss) */
    const int32_t *next_sentence_labels; /* [B] 0/1, or NULL for no NSP loss */
    /* task heads' labels (NULL: no loss); unused by the pre-training heads */
    const int32_t *start_positions, *end_positions; /* [B] question answering: token index of the
                                                        answer's start / end (clamped to [0, T] as
                                                        HF does; T itself is ignored) */
    const int32_t *class_labels;         /* [B] classification with N >= 2 labels: 0 .. N-1 */
    const float *regression_targets;     /* [B] regression (a classifier head with 1 label) */
    const float *multi_label_targets;    /* [B, N] multi-label classification: 1 where the label applies, else 0
                                            (a classifier head: sigmoid per label, binary cross-entropy mean over
                                            B*N, as HF's problem_type "multi_label_classification") */
    const int32_t *token_labels;         /* [B*T] token classification: 0 .. N-1, or -100 (HF's ignore_index:
                                            not in the loss, e.g. a word's second word piece) */
} BertBatch;

/* The heads a model is created with; their tensors are ordinary parameters with
 * HuggingFace's names (loaded, saved, decayed and optimised like the encoder's):
 *   PRETRAINING  bert.pooler.* + cls.* (MLM, tied to the word embeddings; NSP): BertForPreTraining
 *   QA           qa_outputs.weight [2, H], .bias [2], no pooler: BertForQuestionAnswering
 *   CLASSIFIER   bert.pooler.* + classifier.weight [N, H], .bias [N]: BertForSequenceClassification
 *                (class_labels: cross-entropy, N >= 2; regression_targets: N == 1, mean squared
 *                error; multi_label_targets: any N, sigmoid binary cross-entropy)
 *   NONE         bert.pooler.* only (HF's BertModel with its default pooling layer)
 *   TOKEN_CLASSIFIER  classifier.weight [N, H], .bias [N] on every token after dropout, no
 *                pooler: BertForTokenClassification (cross-entropy, mean over the labelled tokens)
 * Only PRETRAINING allocates cls.*; last-layer pruning applies to it alone, unpadding to every
 * kind but QA (whose logits cover every row; the token classifier's cover the rows up to each
 * sequence's last real or labelled token, and padding after them reads as zero logits). */
typedef enum {
    BERT_HEADS_PRETRAINING = 0, BERT_HEADS_QA, BERT_HEADS_CLASSIFIER, BERT_HEADS_NONE, BERT_HEADS_TOKEN_CLASSIFIER
} BertHeadKind;
typedef struct {
    BertHeadKind kind;
    int num_labels;   /* CLASSIFIER and TOKEN_CLASSIFIER only */
} BertHeads;

/* A pre-training (or unlabelled) batch: the first nine fields, no task labels. */
static inline BertBatch bert_pretraining_batch(int batch, int seq_len, int max_predictions, const int32_t *input_ids,
                                               const int32_t *token_type_ids, const int32_t *attention_mask,
                                               const int32_t *masked_positions, const int32_t *masked_labels,
                                               const int32_t *next_sentence_labels) {
    return (BertBatch){.batch = batch, .seq_len = seq_len, .max_predictions = max_predictions,
                       .input_ids = input_ids, .token_type_ids = token_type_ids, .attention_mask = attention_mask,
                       .masked_positions = masked_positions, .masked_labels = masked_labels,
                       .next_sentence_labels = next_sentence_labels};
}

typedef struct BertModel BertModel;

/* Allocates everything for batches up to (max_batch, max_seq, max_predictions). The weights
 * start at zero: follow with bert_init_weights or bert_load_weights. */
int   bert_model_create(BertModel **out, const BertConfig *cfg, int max_batch, int max_seq, int max_predictions,
                        BertError *err);   /* with the pre-training heads */
int   bert_model_create_with_heads(BertModel **out, const BertConfig *cfg, BertHeads heads, int max_batch, int max_seq,
                                   int max_predictions, BertError *err);
void  bert_model_free(BertModel *m);
void  bert_init_weights(BertModel *m, uint64_t seed);     /* BERT init: truncated normal std=initializer_range, LN 1/0, biases 0 */
int   bert_load_weights(BertModel *m, const char *path, BertError *err); /* HF names; missing heads initialised */
int   bert_save_safetensors(const BertModel *m, const char *path, BertError *err);
size_t bert_num_parameters(const BertModel *m);

/* Forward. training=true applies dropout with the counter-based RNG keyed by dropout_seed
 * (pass e.g. rng_key(seed, step)); the masks do not depend on the thread count. Returns the
 * total loss (MLM mean over non-ignored slots + NSP mean) when labels are given, else 0.
 * The MLM head runs only on slots whose label is not -1 (all slots when masked_labels is
 * NULL); the positions of ignored slots are not read. Attention skips the keys after each
 * sequence's last real token; padding before it gets probability 0 (HF's semantics). A
 * batch that fails bert_batch_validate returns NAN and leaves the message in
 * bert_last_error(). The outputs stay readable (bert_read_*) until the next forward. */
float bert_forward(BertModel *m, const BertBatch *b, bool training, uint64_t dropout_seed);

/* The last forward's outputs, copied into host memory: the model's memory is the compute
 * backend's (kernels/kernels.h), and these are how the host reads it. Sizes are the last
 * batch's: B sequences of T positions, P prediction slots. Each returns false, copying
 * nothing, where the model has no such output (no such head; rows not computed). */
bool bert_read_nsp_logits(const BertModel *m, float *dst);    /* [B, 2] */
bool bert_read_qa_logits(const BertModel *m, float *start, float *end);   /* [B, T] each */
bool bert_read_classifier_logits(const BertModel *m, float *dst);         /* [B, num_labels] */
/* [B, T, num_labels]; rows the encoder skipped (unpadding: after a sequence's last real or
 * labelled token) read as 0. */
bool bert_read_token_logits(const BertModel *m, float *dst);
/* The last layer's output (hidden_size floats) for token t of sequence s, packed or not;
 * false for a row that was not computed (padding after the last real token when unpadded,
 * anything but the heads' rows when pruned). */
bool bert_read_token_output(const BertModel *m, int s, int t, float *dst);
/* MLM accuracy of the last forward on batch b: how many labelled slots' logits have their
 * argmax (the first of equal maxima) at the label; *labelled: how many slots had a label.
 * Counted by the backend, without moving the logits. */
long bert_count_mlm_correct(const BertModel *m, const BertBatch *b, long *labelled);
void  bert_zero_grad(BertModel *m);
/* Accumulates into grads (for gradient accumulation). Runs once per successful bert_forward,
 * on the same batch; the gradient is d(loss returned by forward). Misuse (no successful
 * forward, a second backward, a lean forward: bert_set_mode) leaves the gradients as they
 * are and returns -1 with the message in bert_last_error(), as every misuse of the model API
 * does; 0 otherwise. */
int   bert_backward(BertModel *m, const BertBatch *b);

/* Optimizers (LAMB, AdamW), gradient norms and clipping live in src/optim/optimizer.h and
 * work on the parameter table below (bert_param_info): the model holds no optimizer state. */

/* FLOPs of one training step / one inference forward (matmuls, 2*M*N*K), for throughput reports. */
double bert_train_flops(const BertConfig *cfg, int batch, int seq, int preds);
double bert_infer_flops(const BertConfig *cfg, int batch, int seq);

/* ---- the parameter table, row plans and other details ---- */

/* One named parameter tensor: views into the parameter and gradient allocations. */
typedef struct {
    char name[96];       /* HuggingFace name, e.g. "bert.encoder.layer.0.attention.self.query.weight" */
    int ndim;
    int64_t shape[2];
    size_t numel;
    size_t offset;       /* in floats, from the start of the parameter allocation */
    float *data;
    float *grad;
    bool decay;          /* weight decay applies (false for biases and LayerNorm) */
    bool is_head;        /* pre-training head (cls.*, pooler): initialised if absent from a checkpoint */
} BertParamInfo;

int   bert_num_param_tensors(const BertModel *m);
const BertParamInfo *bert_param_info(const BertModel *m, int i);
const BertParamInfo *bert_find_param(const BertModel *m, const char *hf_name);  /* NULL if unknown */
/* The whole parameter and gradient allocations (bert_num_parameters floats each, the table's
 * layout): backend memory, for kernels and collectives (e.g. the gradient all-reduce), never
 * dereferenced outside the model and the backend; data and grad in BertParamInfo likewise. */
float *bert_params(BertModel *m);
float *bert_grads(BertModel *m);
const BertConfig *bert_model_config(const BertModel *m);

/* Checks shapes against the model's maxima and every id/position/label against its range. */
int   bert_batch_validate(const BertModel *m, const BertBatch *b, BertError *err);
const char *bert_last_error(const BertModel *m);
/* The two parts of the last forward's loss (0 where not computed). */
float bert_last_mlm_loss(const BertModel *m);
float bert_last_nsp_loss(const BertModel *m);
/* bert_load_weights with control over the heads it initialises: missing pre-training
 * heads are drawn from head_seed; *num_initialised (if non-NULL) says how many tensors.
 * On failure the model's weights are partly overwritten: reinitialise or discard it. */
int   bert_load_weights_ex(BertModel *m, const char *path, uint64_t head_seed, int *num_initialised,
                               BertError *err);
/* Pre-training only reads the last layer's output at the [CLS] rows (NSP) and the labelled
 * masked positions (MLM). With pruning on, bert_forward runs the last encoder layer's
 * attention over every token (its keys and values are needed) but everything after it (output
 * projection, LayerNorms, feed-forward) only at those rows: 1 + P of T rows per sequence, ~63%
 * of the last layer's work saved at seq 128 / 20 predictions. Losses, logits and gradients
 * are the full model's (to float rounding: the products have other shapes), dropout masks
 * included. The sequence output (model/bert_views.h) is then not there: fine-tuning leaves
 * it off. Off by default. */
void  bert_set_last_layer_pruning(BertModel *m, bool on);
/* Pre-training also never reads the rows after each sequence's last real token (attention
 * skips them as keys, the heads do not read them). With unpadding on, bert_forward packs the
 * encoder's rows: per sequence only up to its last real token (or a masked position past it),
 * so the linear layers, LayerNorms and attention queries skip trailing padding. The numbers
 * are the full model's, as with pruning; the sequence output is then not there (unless the
 * batch had no trailing padding: nothing was skipped). Off by default.
 * bert_encoder_rows: the rows the encoder ran on in the last forward (B*T unless unpadded). */
void  bert_set_unpadding(BertModel *m, bool on);
/* Called by bert_backward each time a contiguous range of the gradient allocation is final
 * for this backward, [offset, offset + count) floats (bert_grads layout), in decreasing
 * order: the heads, each layer from the last down, then the embeddings (last: the tied MLM
 * decoder adds into the word embeddings). A data-parallel trainer starts reducing a range
 * while the backward goes on. fn NULL: no calls. */
typedef void (*BertGradReadyFn)(void *ctx, size_t offset, size_t count);
void  bert_set_grad_ready_hook(BertModel *m, BertGradReadyFn fn, void *ctx);
int   bert_encoder_rows(const BertModel *m);
/* Rows the last layer ran on after attention in the last forward (the encoder's rows unless
 * pruned), and the matmul FLOPs a training step on that forward's batch executes: what
 * bert_train_flops counts, less the rows and keys that unpadding, pruning and attention's
 * skipping of padded keys left out. */
int   bert_last_layer_rows(const BertModel *m);
double bert_executed_train_flops(const BertModel *m);
/* Precision of the matrix products (every linear layer and head, and attention's QK^T and PV
 * with their gradients). FP32 is the default and unchanged. BF16: inputs rounded to bf16, fp32
 * accumulation (kernels/cpu/gemm_half.h) on the CPU's bf16 instructions; the weights' fp32
 * master copy stays the one the optimizer updates, and its 16-bit copy is made again at the
 * first forward after it changed. LayerNorm, softmax, GELU, the losses and every gradient
 * outside the products stay fp32. BF16_EMULATED: the same rounding, fp32 arithmetic (any CPU;
 * for tests). FP16: operands in IEEE fp16 (11 significant bits, overflow past 65504), fp32
 * arithmetic, since these CPUs have no fp16 arithmetic: fp16 storage, which needs loss
 * scaling (bert_set_loss_scale, optim/loss_scaler.h) as fp16 on a GPU does.
 * bert_set_precision refuses BF16 (-1, message in err) where the CPU has no bf16
 * instructions: it never falls back silently.
 * INT8 (inference only: forwards with training=false): the encoder's and pooler's linear
 * layers on int8 weights (symmetric per output channel, quantized from the fp32 master copy at
 * the first forward after it changed) and int8 inputs quantized per row at each product,
 * int32 sums, dequantized into fp32 (bias, GELU); attention, LayerNorm, softmax and the task
 * heads in fp32 (kernels.h, k_matmul_forward_int8). Refused (-1) where the backend has no int8
 * products; a training forward, and a backward, of an INT8 model are refused. */
typedef enum { BERT_FP32 = 0, BERT_BF16, BERT_BF16_EMULATED, BERT_FP16, BERT_INT8 } BertPrecision;
int   bert_set_precision(BertModel *m, BertPrecision precision, BertError *err);
/* The encoder's, pooler's and MLM transform's weights also kept packed in the layout the
 * CPU's GEMM reads fastest (as ONNX Runtime and OpenVINO keep constant weights): in BF16 for
 * every forward, remade with the bf16 copy (once per optimizer step in training); in FP32 for
 * inference forwards only (training=false; made at the first one and after the weights
 * change, so training forwards neither use them nor change their numbers). The products then
 * run up to 15% (bf16) and 35% (fp32, few rows) faster, with the same terms summed in another
 * order. BF16 packs by default (its 16-bit copy already needs every weight change announced);
 * FP32 only after bert_set_packed_weights(m, true), and from then on a weight written other
 * than through bert_params must be announced with bert_params_changed before the next
 * inference forward. Off keeps only the plain weights, in both. */
void  bert_set_packed_weights(BertModel *m, bool on);
/* What the forwards keep, by what the model is for:
 *   BERT_MODE_FULL            (the default) every forward keeps what its backward needs,
 *                             training=false ones too: tests and tools take gradients after them.
 *   BERT_MODE_LEAN_INFERENCE  a model that trains and infers (fine-tuning with evaluations):
 *                             forwards with training=false are lean, keeping only what the
 *                             outputs need: the feed-forward's first product and its GELU run as
 *                             one pass on the packed weights (the activation applied inside the
 *                             product, no pre-activation matrix stored) and attention keeps no
 *                             probabilities, so such a forward has no backward (bert_backward
 *                             says so). Forwards with training=true keep everything, as in FULL.
 *   BERT_MODE_FORWARD_ONLY    a model that will only ever infer (a server, bench_infer, embed):
 *                             lean forwards, and every encoder layer uses the same activation
 *                             buffers, so the activation memory no longer grows with the number
 *                             of layers (bert-base, batch 32, seq 384, bf16: about a twelfth).
 *                             Forwards with training=true are refused (NaN and bert_last_error).
 * A change of mode ends the last forward's backward (as bert_set_precision does); to or from
 * FORWARD_ONLY it moves the activations: call it before a forward, not between a forward and
 * reading its outputs. */
typedef enum { BERT_MODE_FULL = 0, BERT_MODE_LEAN_INFERENCE, BERT_MODE_FORWARD_ONLY } BertMode;
void  bert_set_mode(BertModel *m, BertMode mode);
BertPrecision bert_precision(const BertModel *m);
const char *bert_precision_name(BertPrecision precision);   /* "fp32", "bf16", "bf16-emulated", "fp16", "int8" */
/* The backward computes the gradient of scale * loss (default 1): loss scaling for fp16, so
 * small gradients survive fp16's range; the caller divides the gradients by it again
 * (optim/loss_scaler.h). External d_sequence_output / d_pooled are taken as given. */
void  bert_set_loss_scale(BertModel *m, float scale);
/* Says the fp32 weights were changed from outside (an optimizer step, a direct write): the
 * 16-bit copy is remade at the next forward. bert_init_weights and the loaders say it
 * themselves; so does bert_params(), since its caller may write through it. */
void  bert_params_changed(BertModel *m);
/* Parameters that are NaN or infinite (a damaged or diverged checkpoint), and the first
 * tensor holding one (NULL when none). */
size_t bert_nonfinite_params(const BertModel *m, const char **first_tensor);
/* ---- checkpoints as users hold them (model/bert_checkpoint.c, model/bert_weights.c) ----
 * --init_checkpoint names a folder (HF's model.safetensors or pytorch_model.bin, a `bert
 * pretrain` or fine-tuning output, Google's bert_model.ckpt, a folder's only .pt) or a file
 * (safetensors, a torch.save .pt/.bin, a TensorFlow prefix or .index), told apart by content.
 * The configuration is config_file, else config.json or bert_config.json beside the weights. */
typedef struct {
    char weights[4096];      /* the weights file (a TensorFlow checkpoint: its prefix) */
    char config[4096];       /* the configuration read */
    BertConfig cfg;          /* with vocab_size = the word embedding's rows */
    int config_vocab_size;   /* what the configuration says (NVIDIA's: fewer, the rows are padded to 8) */
} BertCheckpointInfo;
/* Where init_checkpoint's weights and configuration are (config "" when none was found). */
int bert_checkpoint_locate(const char *init_checkpoint, const char *config_file, char *weights, size_t weights_size,
                           char *config, size_t config_size, BertError *err);
int bert_checkpoint_inspect(const char *init_checkpoint, const char *config_file, BertCheckpointInfo *info,
                            BertError *err);
/* The rows of init_checkpoint's word embedding when its width is hidden_size, else -1. */
int bert_checkpoint_embedding_rows(const char *init_checkpoint, int hidden_size);
/* The HF name a stored tensor stands for (Google's TensorFlow names, NVIDIA's dense_act,
 * DDP's module. prefix); *transpose when stored [in, out]. 0 when it is not a model tensor
 * (optimizer slots, global_step, position_ids). */
int bert_checkpoint_tensor_name(const char *stored, char *out, size_t n, bool *transpose);
/* Whether a vocabulary file of `tokens` serves a model of model_vocab rows: the same count,
 * or rows padded past it (NVIDIA: to a multiple of 8; never 128 or more). */
bool bert_vocab_fits(int tokens, int model_vocab);
/* A model from a checkpoint, with the given heads (those the file lacks drawn from head_seed)
 * and room for batches up to max_batch x max_seq. */
int bert_open_checkpoint(BertModel **out, const char *init_checkpoint, const char *config_file, BertHeads heads,
                         int max_batch, int max_seq, uint64_t head_seed, int *num_initialised, BertError *err);
typedef struct {
    BertCheckpointInfo source;
    const char *format;         /* "safetensors", "PyTorch", "TensorFlow" */
    const char *architecture;   /* the HF class whose tensors were found: "BertForPreTraining", ... */
    int tensors, num_labels;
} BertConvertResult;
/* `bert convert`: init_checkpoint's model tensors, HF-named, as output_dir/model.safetensors
 * (float32, the model's shape: padded vocabularies stay padded) + config.json (+ vocab.txt and
 * tokenizer_config.json from vocab_file, else from the checkpoint's folder). */
int bert_convert_checkpoint(const char *init_checkpoint, const char *config_file, const char *vocab_file,
                            const char *output_dir, BertConvertResult *r, BertError *err);
/* Bytes of parameters + grads + activations allocated by the model (the optimizer reports its own). */
size_t bert_model_bytes(const BertModel *m);

#endif
