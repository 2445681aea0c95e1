/* BertModel: parameter table and memory layout, creation, initialisation, batch checks.
 * Forward and backward are in bert_forward.c / bert_backward.c. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/config.h"
#include "model/bert_internal.h"

/* ---------------------------------------------------------------- parameter layout */

/* One walk over the parameters in memory order. Called once to build the table
 * (info != NULL) and once per allocation (parameters, gradients) to bind the views. */
typedef struct {
    BertParamInfo *info;  /* filled when non-NULL */
    float *base;          /* views are set when non-NULL */
    size_t cursor;
    int count;
} Layout;

static float *add(Layout *lo, bool head, int64_t rows, int64_t cols, const char *fmt, ...) {
    size_t numel = (size_t)rows * (size_t)(cols ? cols : 1);
    if (lo->info) {
        BertParamInfo *t = &lo->info[lo->count];
        memset(t, 0, sizeof *t);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->name, sizeof t->name, fmt, ap);
        va_end(ap);
        t->ndim = cols ? 2 : 1;
        t->shape[0] = rows;
        t->shape[1] = cols;
        t->numel = numel;
        t->offset = lo->cursor;
        t->decay = cols != 0;  /* matrices decay; biases and LayerNorm vectors do not */
        t->is_head = head;
    }
    float *view = lo->base ? lo->base + lo->cursor : NULL;
    lo->cursor += numel;
    lo->count++;
    return view;
}

static void layout_layer(Layout *lo, LayerParams *v, int l, int H, int I) {
    const char *pre = "bert.encoder.layer";
    v->qkv_w = add(lo, false, H, H, "%s.%d.attention.self.query.weight", pre, l);
    add(lo, false, H, H, "%s.%d.attention.self.key.weight", pre, l);
    add(lo, false, H, H, "%s.%d.attention.self.value.weight", pre, l);
    v->qkv_b = add(lo, false, H, 0, "%s.%d.attention.self.query.bias", pre, l);
    add(lo, false, H, 0, "%s.%d.attention.self.key.bias", pre, l);
    add(lo, false, H, 0, "%s.%d.attention.self.value.bias", pre, l);
    v->attn_out_w = add(lo, false, H, H, "%s.%d.attention.output.dense.weight", pre, l);
    v->attn_out_b = add(lo, false, H, 0, "%s.%d.attention.output.dense.bias", pre, l);
    v->ln1_w = add(lo, false, H, 0, "%s.%d.attention.output.LayerNorm.weight", pre, l);
    v->ln1_b = add(lo, false, H, 0, "%s.%d.attention.output.LayerNorm.bias", pre, l);
    v->ffn_in_w = add(lo, false, I, H, "%s.%d.intermediate.dense.weight", pre, l);
    v->ffn_in_b = add(lo, false, I, 0, "%s.%d.intermediate.dense.bias", pre, l);
    v->ffn_out_w = add(lo, false, H, I, "%s.%d.output.dense.weight", pre, l);
    v->ffn_out_b = add(lo, false, H, 0, "%s.%d.output.dense.bias", pre, l);
    v->ln2_w = add(lo, false, H, 0, "%s.%d.output.LayerNorm.weight", pre, l);
    v->ln2_b = add(lo, false, H, 0, "%s.%d.output.LayerNorm.bias", pre, l);
}

static void layout_params(Layout *lo, ParamViews *v, const BertConfig *c, BertHeads heads) {
    const int H = c->hidden_size;
    v->word = add(lo, false, c->vocab_size, H, "bert.embeddings.word_embeddings.weight");
    v->pos = add(lo, false, c->max_position_embeddings, H, "bert.embeddings.position_embeddings.weight");
    v->type = add(lo, false, c->type_vocab_size, H, "bert.embeddings.token_type_embeddings.weight");
    v->emb_ln_w = add(lo, false, H, 0, "bert.embeddings.LayerNorm.weight");
    v->emb_ln_b = add(lo, false, H, 0, "bert.embeddings.LayerNorm.bias");
    for (int l = 0; l < c->num_hidden_layers; l++) layout_layer(lo, &v->layers[l], l, H, c->intermediate_size);
    /* HF's question-answering and token-classification models have no pooler */
    if (heads.kind != BERT_HEADS_QA && heads.kind != BERT_HEADS_TOKEN_CLASSIFIER) {
        v->pool_w = add(lo, true, H, H, "bert.pooler.dense.weight");
        v->pool_b = add(lo, true, H, 0, "bert.pooler.dense.bias");
    }
    if (heads.kind == BERT_HEADS_QA) {
        v->qa_w = add(lo, true, 2, H, "qa_outputs.weight");
        v->qa_b = add(lo, true, 2, 0, "qa_outputs.bias");
    } else if (heads.kind == BERT_HEADS_CLASSIFIER || heads.kind == BERT_HEADS_TOKEN_CLASSIFIER) {
        v->cls_w = add(lo, true, heads.num_labels, H, "classifier.weight");
        v->cls_b = add(lo, true, heads.num_labels, 0, "classifier.bias");
    }
    if (heads.kind != BERT_HEADS_PRETRAINING) return;
    v->mlm_bias = add(lo, true, c->vocab_size, 0, "cls.predictions.bias");
    v->mlm_dense_w = add(lo, true, H, H, "cls.predictions.transform.dense.weight");
    v->mlm_dense_b = add(lo, true, H, 0, "cls.predictions.transform.dense.bias");
    v->mlm_ln_w = add(lo, true, H, 0, "cls.predictions.transform.LayerNorm.weight");
    v->mlm_ln_b = add(lo, true, H, 0, "cls.predictions.transform.LayerNorm.bias");
    v->nsp_w = add(lo, true, 2, H, "cls.seq_relationship.weight");
    v->nsp_b = add(lo, true, 2, 0, "cls.seq_relationship.bias");
}

/* ---------------------------------------------------------------- activation layout */

/* Named views into one allocation: a counting pass (base NULL) sizes it, a second lays the
 * views out. cursor counts bytes; every view starts 64-byte aligned. */
typedef struct {
    char *base;
    size_t cursor;
} Arena;

static void *take_bytes(Arena *a, size_t bytes) {
    void *p = a->base ? a->base + a->cursor : NULL;
    a->cursor += (bytes + 63) & ~(size_t)63;
    return p;
}
static float *take(Arena *a, size_t n) { return take_bytes(a, n * sizeof(float)); }
static uint16_t *take16(Arena *a, size_t n) { return take_bytes(a, n * sizeof(uint16_t)); }

/* The floats each layer keeps of attention for the backward at any batch up to the largest
 * (none forward-only): the backend's say (k_attention_state_floats), on the arguments
 * bert_attention_args gives */
static size_t attention_state_floats(const BertModel *m) {
    if (m->mode == BERT_MODE_FORWARD_ONLY) return 0;
    const BertConfig *c = &m->cfg;
    const AttentionArgs a = {.B = m->max_batch, .T = m->max_seq, .A = c->num_attention_heads,
                             .d = c->hidden_size / c->num_attention_heads, .half = bert_attention_half(m)};
    return k_attention_state_floats(&a);
}

static void layout_activations(Arena *a, Activations *v, const BertModel *m) {
    const BertConfig *c = &m->cfg;
    const size_t B = m->max_batch, T = m->max_seq, N = B * T, H = c->hidden_size, I = c->intermediate_size;
    const size_t BP = B * (size_t)m->max_preds, V = c->vocab_size, state = attention_state_floats(m);
    v->emb_sum = take(a, N * H), v->emb_mean = take(a, N), v->emb_rstd = take(a, N), v->emb_out = take(a, N * H);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        LayerActs *L = &v->layers[l];
        /* 16 bits: the backward reads the 16-bit copies of qkv, ctx, h1 and the feed-forward's
         * activation, so the layers share one fp32 scratch each, and need no fp32 activation.
         * Forward-only: nothing is kept for a backward, so every layer uses layer 0's buffers
         * (a layer's input, the previous layer's out, is last read by LayerNorm 1, before
         * LayerNorm 2 writes out) and keeps no probabilities */
        const bool fp32 = !bert_is_half(m->precision), own = l == 0 || fp32, mine = l == 0 || m->mode != BERT_MODE_FORWARD_ONLY;
        LayerActs *first = &v->layers[0];
        if (!mine) {
            *L = *first;
            continue;
        }
        L->qkv = own ? take(a, N * 3 * H) : first->qkv, L->probs = take(a, state);
        L->ctx = own ? take(a, N * H) : first->ctx;
        L->attn_sum = take(a, N * H), L->ln1_mean = take(a, N), L->ln1_rstd = take(a, N);
        L->h1 = own ? take(a, N * H) : first->h1;
        L->ffn_pre = own ? take(a, N * I) : first->ffn_pre, L->ffn_act = fp32 ? take(a, N * I) : NULL;
        L->ffn_sum = take(a, N * H);
        L->ln2_mean = take(a, N), L->ln2_rstd = take(a, N), L->out = take(a, N * H);
    }
    v->cls_in = take(a, B * H), v->pooled = take(a, B * H), v->nsp_logits = take(a, B * 2);
    v->mlm_in = take(a, BP * H), v->mlm_pre = take(a, BP * H), v->mlm_act = take(a, BP * H);
    v->mlm_ln = take(a, BP * H), v->mlm_mean = take(a, BP), v->mlm_rstd = take(a, BP);
    v->mlm_row_loss = take(a, BP), v->nsp_row_loss = take(a, B), v->mlm_logits = take(a, BP * V);
    v->d_x = take(a, N * H), v->d_sum = take(a, N * H), v->d_h1 = take(a, N * H), v->d_ctx = take(a, N * H);
    v->d_qkv = take(a, N * 3 * H), v->d_ffn = take(a, N * I), v->d_mlm_logits = take(a, BP * V);
    v->d_mlm_a = take(a, BP * H), v->d_mlm_b = take(a, BP * H);
    v->d_pooled = take(a, B * H), v->d_cls = take(a, B * H), v->d_nsp_logits = take(a, B * 2);
    v->kept_x = take(a, (BP + B) * H);
    const size_t NL = m->heads.kind == BERT_HEADS_CLASSIFIER ? (size_t)m->heads.num_labels : 0;
    const size_t QA = m->heads.kind == BERT_HEADS_QA ? N : 0;
    v->qa_start = take(a, QA), v->qa_end = take(a, QA), v->d_qa_start = take(a, QA), v->d_qa_end = take(a, QA);
    v->qa_probs_start = take(a, QA), v->qa_probs_end = take(a, QA), v->qa_row_loss = take(a, B);
    v->cls_dropped = take(a, NL ? B * H : 0), v->cls_logits = take(a, B * NL), v->cls_probs = take(a, B * NL);
    v->cls_row_loss = take(a, B), v->d_cls_logits = take(a, B * NL), v->d_cls_in = take(a, NL ? B * H : 0);
    const size_t TN = m->heads.kind == BERT_HEADS_TOKEN_CLASSIFIER ? N : 0, TL = TN ? (size_t)m->heads.num_labels : 0;
    v->tok_dropped = take(a, TN * H), v->tok_logits = take(a, TN * TL), v->tok_probs = take(a, TN * TL);
    v->tok_row_loss = take(a, TN), v->d_tok_logits = take(a, TN * TL), v->d_tok_in = take(a, TN * H);
    v->losses = take(a, LOSS_SLOTS);
}

/* 16-bit precisions' activations: the products' rounded inputs (see LayerActs) and the
 * rounded output gradient, sized for the largest product (N*OC). */
static void layout_half_activations(Arena *a, Activations *v, const BertModel *m) {
    const BertConfig *c = &m->cfg;
    const size_t B = m->max_batch, N = B * m->max_seq, H = c->hidden_size, I = c->intermediate_size;
    const size_t BP = B * (size_t)m->max_preds, V = c->vocab_size;
    const bool pretraining = m->heads.kind == BERT_HEADS_PRETRAINING, qa = m->heads.kind == BERT_HEADS_QA;
    const bool classifier = m->heads.kind == BERT_HEADS_CLASSIFIER, token = m->heads.kind == BERT_HEADS_TOKEN_CLASSIFIER;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        LayerActs *L = &v->layers[l];
        if (l > 0 && m->mode == BERT_MODE_FORWARD_ONLY) {   /* layer 0's, as layout_activations */
            const LayerActs *first = &v->layers[0];
            L->x16 = first->x16, L->ctx16 = first->ctx16, L->h1_16 = first->h1_16, L->act16 = first->act16;
            L->pre16 = first->pre16, L->qkv16 = first->qkv16;
            continue;
        }
        L->x16 = take16(a, N * H), L->ctx16 = take16(a, N * H), L->h1_16 = take16(a, N * H), L->act16 = take16(a, N * I);
        L->pre16 = take16(a, N * I), L->qkv16 = take16(a, N * 3 * H);
    }
    v->cls_in16 = take16(a, B * H), v->pooled16 = take16(a, B * H);
    v->mlm_in16 = take16(a, pretraining ? BP * H : 0), v->mlm_ln16 = take16(a, pretraining ? BP * H : 0);
    v->seq_out16 = take16(a, qa ? N * H : 0), v->cls_dropped16 = take16(a, classifier ? B * H : 0);
    v->tok_dropped16 = take16(a, token ? N * H : 0);
    size_t dout = N * (I > 3 * H ? I : 3 * H);
    if (pretraining && BP * V > dout) dout = BP * V;
    if (classifier && B * (size_t)m->heads.num_labels > dout) dout = B * (size_t)m->heads.num_labels;
    if (token && N * (size_t)m->heads.num_labels > dout) dout = N * (size_t)m->heads.num_labels;
    v->dout16 = take16(a, dout);
}

/* int8's activations (inference only: one set that every layer uses): the products' quantized
 * inputs and, where attention runs in bf16, the QKV product's bf16 output. */
static void layout_int8_activations(Arena *a, Activations *v, const BertModel *m) {
    const BertConfig *c = &m->cfg;
    const size_t N = (size_t)m->max_batch * m->max_seq, H = c->hidden_size, I = c->intermediate_size;
    LayerActs first = {0};
    Rows8 *rows[] = {&first.x8, &first.ctx8, &first.h1_8, &first.act8};
    for (int k = 0; k < 4; k++) {
        rows[k]->q = take_bytes(a, N * (k == 3 ? I : H));
        rows[k]->scale = take(a, N);
    }
    uint16_t *qkv16 = bert_int8_bf16_attention(m) ? take16(a, N * 3 * H) : NULL;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        LayerActs *L = &v->layers[l];
        L->x8 = first.x8, L->ctx8 = first.ctx8, L->h1_8 = first.h1_8, L->act8 = first.act8, L->qkv16 = qkv16;
    }
}

static void free_packed_weights(BertModel *m) {
    free(m->packed), k_free(m->packed_memory);
    m->packed = NULL, m->packed_memory = NULL, m->packed_count = 0, m->packed_bytes = 0;
    m->packed_allocated = false;
}

/* The weights the forward multiplies many rows by (each layer's four, the pooler's, the MLM
 * transform's), packed where the precision has a packed form here: native bf16 (for every
 * forward) and fp32 (for inference; made at the first forward that is not training, so a
 * training run never holds them). */
static void allocate_packed_weights(BertModel *m) {
    free_packed_weights(m);
    m->packed_allocated = true;
    const bool f32 = m->precision == BERT_FP32, int8 = m->precision == BERT_INT8;
    if (!int8 && (f32 ? !m->pack_fp32 : (m->precision != BERT_BF16 || !m->pack_bf16))) return;
    const int L = m->cfg.num_hidden_layers, H = m->cfg.hidden_size, I = m->cfg.intermediate_size;
    m->packed = xcalloc((size_t)4 * L + 2, sizeof(PackedWeight));
    int n = 0;
    for (int l = 0; l < L; l++) {
        const LayerParams *p = &m->p.layers[l];
        /* int8 smooths the products whose input is a LayerNorm's output: QKV (the embeddings'
         * LayerNorm, or the previous layer's second) with factors from the value projection's
         * rows alone (one quantized input for the three projections: bench/int8_emulate.py
         * measured V's ranges as good as each projection its own factors and input, the
         * three's largest worse), and FFN in (this layer's first) */
        const KInt8Smoothing qkv_smooth = {.ln_w = l == 0 ? m->p.emb_ln_w : m->p.layers[l - 1].ln2_w,
                                           .ln_b = l == 0 ? m->p.emb_ln_b : m->p.layers[l - 1].ln2_b,
                                           .row0 = 2 * H, .rows = H};
        const KInt8Smoothing ffn_smooth = {.ln_w = p->ln1_w, .ln_b = p->ln1_b};
        m->packed[n++] = (PackedWeight){p->qkv_w, NULL, H, 3 * H, int8, qkv_smooth};
        m->packed[n++] = (PackedWeight){p->attn_out_w, NULL, H, H, false, {0}};
        m->packed[n++] = (PackedWeight){p->ffn_in_w, NULL, H, I, int8, ffn_smooth};
        m->packed[n++] = (PackedWeight){p->ffn_out_w, NULL, I, H, false, {0}};
    }
    if (m->p.pool_w) m->packed[n++] = (PackedWeight){m->p.pool_w, NULL, H, H, false, {0}};
    if (m->p.mlm_dense_w) m->packed[n++] = (PackedWeight){m->p.mlm_dense_w, NULL, H, H, false, {0}};
    size_t total = 0, offset[n > 0 ? n : 1], bytes[n > 0 ? n : 1];
    for (int i = 0; i < n; i++) {
        offset[i] = total;
        const int C = m->packed[i].C, OC = m->packed[i].OC;
        bytes[i] = int8  ? k_packed_weight_bytes_int8(C, OC)
                   : f32 ? k_packed_weight_bytes_f32(C, OC)
                         : k_packed_weight_bytes(HALF_BF16, C, OC);
        total += (bytes[i] + 63) / 64 * 64;
    }
    if (total == 0) {   /* no packed form here */
        free(m->packed), m->packed = NULL;
        return;
    }
    m->packed_memory = k_alloc(total);
    for (int i = 0; i < n; i++)   /* none where oneDNN keeps a shape's layout plain: nothing to pack */
        m->packed[i].packed = bytes[i] ? (char *)m->packed_memory + offset[i] : NULL;
    m->packed_count = n;
    m->packed_bytes = total;
}

/* The activations' sizes for the model's precision and mode: the layouts' counting passes. */
static void count_activations(BertModel *m) {
    Arena a = {0}, q = {0};
    layout_activations(&a, &m->act, m);
    m->act_floats = a.cursor / sizeof(float);
    if (bert_is_half(m->precision)) layout_half_activations(&q, &m->act, m);
    else if (m->precision == BERT_INT8) layout_int8_activations(&q, &m->act, m);
    m->act16_len = q.cursor / sizeof(uint16_t);   /* 64-byte multiples */
}

/* Lays the activations out again for the model's precision and mode (16 bits share some fp32
 * buffers between layers and add their own), their contents lost: the memory is released now
 * and taken at the next forward (bert_place_activations), so that a model made in fp32 and
 * switched to 16 bits before its first forward never holds fp32's larger layout (a GPU's
 * allocations take their memory at once; a batch that fits in 16 bits may not in fp32). */
static void relayout_activations(BertModel *m) {
    k_free(m->act_memory), k_free(m->act16_memory), k_free(m->params16);
    m->act_memory = NULL, m->act16_memory = NULL, m->params16 = NULL;
    count_activations(m);
    m->act_placed = false;
}

/* Only the 16-bit layout's views: fp32 and int8 have none of the others. */
static void clear_half_views(Activations *v, int layers) {
    for (int l = 0; l < layers; l++) {
        LayerActs *L = &v->layers[l];
        L->x16 = L->ctx16 = L->h1_16 = L->act16 = L->pre16 = L->qkv16 = NULL;
        L->x8 = L->ctx8 = L->h1_8 = L->act8 = (Rows8){0};
    }
    v->cls_in16 = v->pooled16 = v->mlm_in16 = v->mlm_ln16 = v->seq_out16 = v->cls_dropped16 = NULL;
    v->tok_dropped16 = v->dout16 = NULL;
}

/* The activations' bytes in the 16-bit layout (with the 16-bit weights), the least a training
 * model lays out; the model's counts left as they were. */
static size_t least_activation_bytes(BertModel *m) {
    const BertPrecision kept = m->precision;
    m->precision = BERT_BF16;
    count_activations(m);
    const size_t bytes = m->act_floats * sizeof(float) + (m->act16_len + m->num_params) * sizeof(uint16_t);
    m->precision = kept;
    count_activations(m);
    return bytes;
}

bool bert_place_activations(BertModel *m) {
    if (m->act_placed) return true;
    const double need = (double)bert_model_bytes(m), memory = (double)k_memory_bytes();
    if (memory > 0 && need > memory) {
        snprintf(m->error, sizeof m->error, "the model needs %.1f GiB in %s (parameters, gradients, activations; batch "
                 "%d x seq %d), more than the %.1f GiB there is (the machine's, or on a GPU the device's): a smaller "
                 "batch, with --gradient_accumulation_steps for the same global batch", need / 1073741824.0,
                 bert_precision_name(m->precision), m->max_batch, m->max_seq, memory / 1073741824.0);
        return false;
    }
    m->act_memory = k_alloc(m->act_floats * sizeof(float));
    Arena a = {.base = (char *)m->act_memory};
    layout_activations(&a, &m->act, m);
    m->act_placed = true;
    if (!bert_is_half(m->precision)) {
        clear_half_views(&m->act, m->cfg.num_hidden_layers);
        if (m->precision != BERT_INT8) return true;
        m->act16_memory = k_alloc(m->act16_len * sizeof(uint16_t));
        Arena q = {.base = (char *)m->act16_memory};
        layout_int8_activations(&q, &m->act, m);
        return true;
    }
    m->act16_memory = k_alloc(m->act16_len * sizeof(uint16_t));
    Arena h = {.base = (char *)m->act16_memory};
    layout_half_activations(&h, &m->act, m);
    m->params16 = k_alloc(m->num_params * sizeof(uint16_t));
    memset(m->half_fresh, 0, sizeof(bool) * (size_t)m->num_tensors);   /* none of it made yet */
    return true;
}

/* ---------------------------------------------------------------- create / free */

/* A config or batch shape whose largest parts pass 2^40 floats (4 TiB) could never be
 * allocated; refusing it here, with the numbers, also keeps the size_t sums of the
 * layouts from wrapping round to a small allocation. */
static int check_model_size(const BertConfig *c, int B, int T, int P, BertError *err) {
    const double H = c->hidden_size, I = c->intermediate_size, L = c->num_hidden_layers, V = c->vocab_size;
    const double N = (double)B * T, limit = 1099511627776.0;
    const double parts[] = {V * H, (double)c->max_position_embeddings * H, (double)c->type_vocab_size * H,
                            L * H * (4 * H + 2 * I + 16),                              /* layer weights */
                            L * ((double)B * c->num_attention_heads * T * T + N * (8 * H + 2 * I)),  /* activations */
                            (double)B * P * V};                                        /* MLM logits */
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i] > limit)
            return bert_fail(err, "bert_model_create: config (vocab %d, hidden %d, layers %d, intermediate %d) with "
                             "batch %d x seq %d needs over 2^40 floats; it cannot be allocated", c->vocab_size,
                             c->hidden_size, c->num_hidden_layers, c->intermediate_size, B, T);
    return 0;
}

int bert_model_create(BertModel **out, const BertConfig *cfg, int max_batch, int max_seq, int max_predictions,
                      BertError *err) {
    BertHeads pretraining = {BERT_HEADS_PRETRAINING, 0};
    return bert_model_create_with_heads(out, cfg, pretraining, max_batch, max_seq, max_predictions, err);
}

int bert_model_create_with_heads(BertModel **out, const BertConfig *cfg, BertHeads heads, int max_batch, int max_seq,
                                 int max_predictions, BertError *err) {
    *out = NULL;
    if (bert_config_validate(cfg, err)) return -1;
    if (heads.kind < BERT_HEADS_PRETRAINING || heads.kind > BERT_HEADS_TOKEN_CLASSIFIER)
        return bert_fail(err, "bert_model_create: unknown head kind %d", (int)heads.kind);
    if (heads.kind == BERT_HEADS_CLASSIFIER && (heads.num_labels < 1 || heads.num_labels > 100000))
        return bert_fail(err, "bert_model_create: a classifier needs 1 (regression) to 100000 labels, not %d",
                         heads.num_labels);
    if (heads.kind == BERT_HEADS_TOKEN_CLASSIFIER && (heads.num_labels < 1 || heads.num_labels > 100000))
        return bert_fail(err, "bert_model_create: a token classifier needs 1 to 100000 labels, not %d",
                         heads.num_labels);
    if (heads.kind != BERT_HEADS_PRETRAINING && max_predictions != 0)
        return bert_fail(err, "bert_model_create: masked-token slots (%d) need the pre-training heads",
                         max_predictions);
    if (heads.kind != BERT_HEADS_CLASSIFIER && heads.kind != BERT_HEADS_TOKEN_CLASSIFIER) heads.num_labels = 0;
    if (max_batch < 1 || max_seq < 1 || max_predictions < 0)
        return bert_fail(err, "bert_model_create: bad sizes batch=%d seq=%d predictions=%d", max_batch, max_seq,
                         max_predictions);
    if (max_seq > cfg->max_position_embeddings)
        return bert_fail(err, "bert_model_create: max_seq %d exceeds max_position_embeddings %d", max_seq,
                         cfg->max_position_embeddings);
    if (cfg->hidden_size % cfg->num_attention_heads)
        return bert_fail(err, "bert_model_create: hidden_size %d is not a multiple of num_attention_heads %d",
                         cfg->hidden_size, cfg->num_attention_heads);
    if ((double)max_batch * cfg->num_attention_heads * max_seq * max_seq >= 4294967295.0)
        return bert_fail(err, "bert_model_create: batch*heads*seq^2 too large for the dropout counters");
    if (check_model_size(cfg, max_batch, max_seq, max_predictions, err)) return -1;
    BertModel *m = xcalloc(1, sizeof *m);
    m->cfg = *cfg;
    m->heads = heads;
    m->max_batch = max_batch, m->max_seq = max_seq, m->max_preds = max_predictions;
    m->loss_scale = 1.0f;
    m->pack_bf16 = true;   /* fp32: bert_set_packed_weights (its weights may change unannounced) */
    const int L = cfg->num_hidden_layers;
    m->p.layers = xcalloc(L, sizeof(LayerParams));
    m->g.layers = xcalloc(L, sizeof(LayerParams));
    m->act.layers = xcalloc(L, sizeof(LayerActs));

    Layout lo = {0};
    layout_params(&lo, &m->p, cfg, heads);  /* count */
    m->num_tensors = lo.count;
    m->num_params = lo.cursor;
    /* Buffers that each fit can still add up past the machine (100,000 layers): refuse with
     * the total instead of meeting the OOM killer half-way through the allocations. The
     * activations' layout is the precision's and the mode's, set after this: here the least of
     * them (16 bits'); bert_place_activations checks the one it takes. */
    const double need = (double)m->num_params * 2 * sizeof(float) + (double)least_activation_bytes(m);
    const double memory = (double)k_memory_bytes();   /* the machine's, or the device's */
    if (memory > 0 && need > memory) {
        bert_model_free(m);
        return bert_fail(err, "bert_model_create: the model needs at least %.1f GiB for parameters, gradients and "
                              "activations (batch %d x seq %d), more than the %.1f GiB there is (the machine's, or "
                              "on a GPU the device's)", need / 1073741824.0, max_batch, max_seq, memory / 1073741824.0);
    }
    m->info = xcalloc(m->num_tensors, sizeof(BertParamInfo));
    m->half_fresh = xcalloc(m->num_tensors, sizeof(bool));
    m->half_used = xcalloc(m->num_tensors, sizeof(bool));
    m->params = k_alloc(m->num_params * sizeof(float));   /* backend memory */
    m->grads = k_alloc(m->num_params * sizeof(float));
    lo = (Layout){.info = m->info, .base = m->params};
    layout_params(&lo, &m->p, cfg, heads);
    lo = (Layout){.base = m->grads};
    layout_params(&lo, &m->g, cfg, heads);
    for (int i = 0; i < m->num_tensors; i++) {
        m->info[i].data = m->params + m->info[i].offset;
        m->info[i].grad = m->grads + m->info[i].offset;
    }

    relayout_activations(m);   /* the memory taken at the first forward */

    const size_t N = (size_t)max_batch * max_seq, BP = (size_t)max_batch * max_predictions;
    m->kv_len = xcalloc(max_batch, sizeof(int32_t));
    m->has_holes = xcalloc(max_batch, 1);
    m->zero_types = xcalloc(N, sizeof(int32_t));
    m->mlm_src_row = xcalloc(BP + 1, sizeof(int32_t));
    m->mlm_slot = xcalloc(BP + 1, sizeof(int32_t));
    m->mlm_label = xcalloc(BP + 1, sizeof(int32_t));
    m->nsp_label = xcalloc(max_batch, sizeof(int32_t));
    m->seq_row = xcalloc(max_batch, sizeof(int32_t));
    m->seq_rows = xcalloc(max_batch, sizeof(int32_t));
    m->full_row = xcalloc(N, sizeof(int32_t));
    m->row_map = xcalloc(N, sizeof(int32_t));
    m->out_map = xcalloc(N, sizeof(int32_t));
    m->kept_row = xcalloc(BP + max_batch, sizeof(int32_t));
    m->kept_full = xcalloc(BP + max_batch, sizeof(int32_t));
    m->cls_row = xcalloc(max_batch, sizeof(int32_t));
    m->mlm_out_row = xcalloc(BP + 1, sizeof(int32_t));
    for (int side = 0; side < 2; side++)
        m->qa_seq[side] = xcalloc(max_batch, sizeof(int32_t)), m->qa_label[side] = xcalloc(max_batch, sizeof(int32_t));
    m->tok_row = xcalloc(N, sizeof(int32_t)), m->tok_label = xcalloc(N, sizeof(int32_t));
    m->class_label = xcalloc(max_batch, sizeof(int32_t));
    /* regression or multi-label targets [B, N], read by kernels: backend memory */
    m->target = k_alloc(sizeof(float) * (size_t)max_batch * (size_t)(heads.num_labels > 1 ? heads.num_labels : 1));
    *out = m;
    return 0;
}

void bert_model_free(BertModel *m) {
    if (!m) return;
    free(m->p.layers), free(m->g.layers), free(m->act.layers);
    free(m->info), free(m->half_fresh), free(m->half_used), k_free(m->params), k_free(m->grads), k_free(m->act_memory);
    free(m->kv_len), free(m->has_holes), free(m->zero_types);
    free(m->mlm_src_row), free(m->mlm_slot), free(m->mlm_label), free(m->nsp_label);
    free(m->seq_row), free(m->seq_rows), free(m->full_row), free(m->row_map), free(m->out_map);
    free(m->kept_row), free(m->kept_full), free(m->cls_row), free(m->mlm_out_row);
    free(m->qa_seq[0]), free(m->qa_seq[1]), free(m->qa_label[0]), free(m->qa_label[1]);
    free(m->class_label), k_free(m->target), free(m->tok_row), free(m->tok_label);
    k_free(m->params16), k_free(m->act16_memory), free(m->packed), k_free(m->packed_memory);
    free(m);
}

/* ---------------------------------------------------------------- accessors */

size_t bert_num_parameters(const BertModel *m) { return m->num_params; }
int bert_num_param_tensors(const BertModel *m) { return m->num_tensors; }
const BertParamInfo *bert_param_info(const BertModel *m, int i) {
    return i >= 0 && i < m->num_tensors ? &m->info[i] : NULL;
}
const BertParamInfo *bert_find_param(const BertModel *m, const char *hf_name) {
    for (int i = 0; i < m->num_tensors; i++)
        if (!strcmp(m->info[i].name, hf_name)) return &m->info[i];
    return NULL;
}
float *bert_params(BertModel *m) {
    m->params16_stale = true;   /* the caller may write through it */
    return m->params;
}
float *bert_grads(BertModel *m) { return m->grads; }
const BertConfig *bert_model_config(const BertModel *m) { return &m->cfg; }
const char *bert_last_error(const BertModel *m) { return m->error; }
float bert_last_mlm_loss(const BertModel *m) { return m->mlm_loss; }
float bert_last_nsp_loss(const BertModel *m) { return m->nsp_loss; }
const float *bert_qa_start_logits(const BertModel *m) { return m->heads.kind == BERT_HEADS_QA ? m->act.qa_start : NULL; }
const float *bert_qa_end_logits(const BertModel *m) { return m->heads.kind == BERT_HEADS_QA ? m->act.qa_end : NULL; }
const float *bert_classifier_logits(const BertModel *m) {
    return m->heads.kind == BERT_HEADS_CLASSIFIER ? m->act.cls_logits : NULL;
}
const float *bert_mlm_logits(const BertModel *m) { return m->act.mlm_logits; }
const float *bert_nsp_logits(const BertModel *m) { return m->p.nsp_w ? m->act.nsp_logits : NULL; }
const float *bert_pooled_output(const BertModel *m) { return m->p.pool_w ? m->act.pooled : NULL; }
const float *bert_sequence_output(const BertModel *m) {
    int L = m->cfg.num_hidden_layers;
    if (m->pruned || m->unpadded) return NULL;
    return L > 0 ? m->act.layers[L - 1].out : m->act.emb_out;
}
const float *bert_token_output(const BertModel *m, int s, int t) {
    const int L = m->cfg.num_hidden_layers;
    if (m->pruned || s < 0 || s >= m->B || t < 0 || t >= m->T) return NULL;
    const float *out = L > 0 ? m->act.layers[L - 1].out : m->act.emb_out;
    if (!m->unpadded) return out + ((size_t)s * m->T + t) * m->cfg.hidden_size;
    return t < m->seq_rows[s] ? out + ((size_t)m->seq_row[s] + t) * m->cfg.hidden_size : NULL;
}
/* Copies n floats of backend memory at src to dst; false when there is nothing there. */
static bool read_floats(float *dst, const float *src, size_t n) {
    if (!src) return false;
    k_download(dst, src, n * sizeof(float));
    return true;
}
bool bert_read_nsp_logits(const BertModel *m, float *dst) { return read_floats(dst, bert_nsp_logits(m), 2 * (size_t)m->B); }
bool bert_read_qa_logits(const BertModel *m, float *start, float *end) {
    const size_t n = (size_t)m->B * m->T;
    return read_floats(start, bert_qa_start_logits(m), n) && read_floats(end, bert_qa_end_logits(m), n);
}
bool bert_read_classifier_logits(const BertModel *m, float *dst) {
    return read_floats(dst, bert_classifier_logits(m), (size_t)m->B * m->heads.num_labels);
}
/* The logits are on the encoder's layout rows: placed at their full rows, skipped rows 0. */
bool bert_read_token_logits(const BertModel *m, float *dst) {
    if (m->heads.kind != BERT_HEADS_TOKEN_CLASSIFIER) return false;
    const size_t NL = (size_t)m->heads.num_labels, N = (size_t)m->B * m->T;
    if (!m->unpadded) return read_floats(dst, m->act.tok_logits, N * NL);
    float *rows = xmalloc(sizeof(float) * (size_t)m->rows * NL);
    k_download(rows, m->act.tok_logits, sizeof(float) * (size_t)m->rows * NL);
    memset(dst, 0, sizeof(float) * N * NL);
    for (int r = 0; r < m->rows; r++) memcpy(dst + (size_t)m->full_row[r] * NL, rows + (size_t)r * NL, sizeof(float) * NL);
    free(rows);
    return true;
}
bool bert_read_token_output(const BertModel *m, int s, int t, float *dst) {
    return read_floats(dst, bert_token_output(m, s, t), (size_t)m->cfg.hidden_size);
}
long bert_count_mlm_correct(const BertModel *m, const BertBatch *b, long *labelled) {
    if (labelled) *labelled = 0;
    if (!m->p.mlm_dense_w || !b->masked_labels) return 0;
    return k_count_argmax_matches(bert_mlm_logits(m), b->masked_labels, b->batch * b->max_predictions,
                                  m->cfg.vocab_size, labelled);
}
void bert_set_last_layer_pruning(BertModel *m, bool on) { m->prune_last_layer = on; }
void bert_set_unpadding(BertModel *m, bool on) { m->unpad = on; }
void bert_set_grad_ready_hook(BertModel *m, BertGradReadyFn fn, void *ctx) { m->grad_ready = fn, m->grad_ready_ctx = ctx; }
int bert_encoder_rows(const BertModel *m) { return m->rows; }
int bert_last_layer_rows(const BertModel *m) { return m->kept_count; }
void bert_zero_grad(BertModel *m) { k_zero(m->grads, (long)m->num_params); }

size_t bert_model_bytes(const BertModel *m) {
    return (m->num_params * 2 + m->act_floats) * sizeof(float) +
           (bert_is_half(m->precision) ? m->num_params : 0) * sizeof(uint16_t) + m->act16_len * sizeof(uint16_t) +
           m->packed_bytes;
}

size_t bert_nonfinite_params(const BertModel *m, const char **first_tensor) {
    size_t count = 0;
    if (first_tensor) *first_tensor = NULL;
    for (int i = 0; i < m->num_tensors; i++) {
        const BertParamInfo *t = &m->info[i];
        const size_t bad = k_count_nonfinite(t->data, t->numel);
        if (bad && first_tensor && !*first_tensor) *first_tensor = t->name;
        count += bad;
    }
    return count;
}

/* ---------------------------------------------------------------- precision */

const char *bert_precision_name(BertPrecision precision) {
    switch (precision) {
    case BERT_FP32: return "fp32";
    case BERT_BF16: return "bf16";
    case BERT_BF16_EMULATED: return "bf16-emulated";
    case BERT_FP16: return "fp16";
    case BERT_INT8: return "int8";
    }
    return "?";
}

BertPrecision bert_precision(const BertModel *m) { return m->precision; }
void bert_params_changed(BertModel *m) { m->params16_stale = true; }
void bert_set_loss_scale(BertModel *m, float scale) { m->loss_scale = scale; }

int bert_set_precision(BertModel *m, BertPrecision precision, BertError *err) {
    if (precision != BERT_FP32 && precision != BERT_BF16 && precision != BERT_BF16_EMULATED && precision != BERT_FP16 &&
        precision != BERT_INT8)
        return bert_fail(err, "bert_set_precision: unknown precision %d", (int)precision);
    if (precision == BERT_INT8 && k_int8_support() == 0)
        return bert_fail(err, "int8: this backend has no int8 products (the CPU backend's need AVX2; the CUDA "
                              "backend has none)");
    if (precision == BERT_BF16 && !k_bf16_native_available())
        return bert_fail(err, "bf16: this CPU has no bf16 instructions that oneDNN can use (no avx512_bf16, or "
                              "ONEDNN_MAX_CPU_ISA caps them); --bf16_emulate runs the same rounding in fp32, slowly");
    const bool layout_changes = bert_is_half(precision) != bert_is_half(m->precision) ||
                                (precision == BERT_INT8) != (m->precision == BERT_INT8);
    m->precision = precision;
    m->int8_bf16 = precision == BERT_INT8 && k_bf16_native_available();
    if (layout_changes) relayout_activations(m);
    free_packed_weights(m);
    if (precision == BERT_BF16 || precision == BERT_INT8) allocate_packed_weights(m);   /* fp32's at the first inference */
    m->params16_stale = true;
    memset(m->half_used, 0, sizeof(bool) * (size_t)m->num_tensors);   /* the new precision's products will say */
    m->backward_ready = false;   /* the activations may have moved */
    return 0;
}

/* The 16-bit copy of weight [OC, C] (a pointer into m->params), its tensors' copies made now
 * where stale: a product's weight may span several tensors (QKV: query, key and value). */
static const uint16_t *half_weight(BertModel *m, const float *weight, int C, int OC) {
    const float *end = weight + (size_t)C * OC;
    for (int i = 0; i < m->num_tensors; i++) {
        const BertParamInfo *t = &m->info[i];
        if (m->half_fresh[i] || t->data >= end || t->data + t->numel <= weight) continue;
        k_to_half(bert_half_mode(m), m->params16 + (t->data - m->params), t->data, (long)t->numel);
        m->half_fresh[i] = m->half_used[i] = true;
    }
    return m->params16 + (weight - m->params);
}

/* fp32 packs for inference only: training's forward keeps k_matmul_forward's numbers (and
 * a step would repack every weight for one forward). */
static bool fp32_packs(const BertModel *m) { return m->precision == BERT_FP32 && !m->training && m->pack_fp32; }

static size_t max_packed_numel(const BertModel *m) {
    size_t most = 0;
    for (int i = 0; i < m->packed_count; i++)
        if ((size_t)m->packed[i].C * m->packed[i].OC > most) most = (size_t)m->packed[i].C * m->packed[i].OC;
    return most;
}

/* A training model's 16-bit copies after an update: every tensor whose copy a product has read
 * since the precision was set (the same each step), remade in one call (k_to_half_each: on a
 * GPU one launch, where half_weight's one tensor at a time took a launch each), the same bits. */
static void remake_used_half_copies(BertModel *m) {
    if (!bert_is_half(m->precision) || m->mode == BERT_MODE_FORWARD_ONLY || !m->params16) return;
    int count = 0;
    for (int i = 0; i < m->num_tensors; i++) count += m->half_used[i];
    if (count == 0) return;
    uint16_t **dst = xmalloc(sizeof(uint16_t *) * (size_t)count);
    const float **src = xmalloc(sizeof(float *) * (size_t)count);
    size_t *n = xmalloc(sizeof(size_t) * (size_t)count);
    for (int i = 0, k = 0; i < m->num_tensors; i++) {
        if (!m->half_used[i]) continue;
        const BertParamInfo *t = &m->info[i];
        dst[k] = m->params16 + (t->data - m->params), src[k] = t->data, n[k++] = t->numel;
        m->half_fresh[i] = true;
    }
    k_to_half_each(bert_half_mode(m), dst, src, n, count);
    free(dst), free(src), free(n);
}

void bert_refresh_weights(BertModel *m) {
    if (fp32_packs(m) && !m->packed_allocated) allocate_packed_weights(m);
    if (!m->params16_stale || (m->precision == BERT_FP32 && !fp32_packs(m))) return;
    memset(m->half_fresh, 0, sizeof(bool) * (size_t)m->num_tensors);
    remake_used_half_copies(m);
    /* a forward-only model reads the packed copies only (or, on a shape the packed product
     * does not run, the plain copy, made then): they are rounded through one scratch */
    uint16_t *scratch = NULL;
    for (int i = 0; i < m->packed_count; i++) {
        const PackedWeight *w = &m->packed[i];
        if (!w->packed) continue;
        if (m->precision == BERT_INT8) {   /* quantized from the fp32 master copy (smoothed from its LayerNorm's) */
            k_pack_weight_int8(w->packed, w->weight, w->smoothed ? &w->smooth : NULL, w->C, w->OC);
        } else if (m->precision == BERT_FP32) {
            k_pack_weight_f32(w->packed, w->weight, w->C, w->OC);
        } else if (m->mode == BERT_MODE_FORWARD_ONLY) {
            if (!scratch) scratch = xmalloc(sizeof(uint16_t) * max_packed_numel(m));
            k_to_half(HALF_BF16, scratch, w->weight, (long)w->C * w->OC);
            k_pack_weight(HALF_BF16, w->packed, scratch, w->C, w->OC);
        } else {
            k_pack_weight(HALF_BF16, w->packed, half_weight(m, w->weight, w->C, w->OC), w->C, w->OC);
        }
    }
    free(scratch);
    m->params16_stale = false;
}

void bert_set_packed_weights(BertModel *m, bool on) {
    m->pack_bf16 = m->pack_fp32 = on;
    free_packed_weights(m);
    if (m->precision == BERT_BF16 || m->precision == BERT_INT8) allocate_packed_weights(m);   /* int8's always */
    m->params16_stale = true;
}

static const void *packed_weight(const BertModel *m, const float *weight) {
    for (int i = 0; i < m->packed_count; i++)
        if (m->packed[i].weight == weight) return m->packed[i].packed;
    return NULL;
}

void bert_set_mode(BertModel *m, BertMode mode) {
    if (m->mode == mode) return;
    const bool sharing_changes = (m->mode == BERT_MODE_FORWARD_ONLY) != (mode == BERT_MODE_FORWARD_ONLY);
    m->mode = mode;
    if (sharing_changes)
        relayout_activations(m);   /* the layers' buffers shared, or each its own again; the packed weights
                                      stay valid, the plain 16-bit copies are made again as read */
    m->backward_ready = false;     /* the last forward's kept activations are the old mode's */
}

/* ---- the products: the backend picks the arithmetic (kernels.h, KPrecision) and the weight's
 * form (KWeight: fp32, packed, or the 16-bit copy made here when a product first needs it) */

static const uint16_t *half_copy(void *ctx, const float *weight, int C, int OC) { return half_weight(ctx, weight, C, OC); }

static KPrecision precision_of(const BertModel *m) {
    return (KPrecision){.half = bert_is_half(m->precision), .half_mode = bert_half_mode(m), .pack_f32 = !m->training,
                        .int8 = m->precision == BERT_INT8};
}

static KWeight weight_of(BertModel *m, const float *weight, int C, int OC) {
    return (KWeight){.f32 = weight, .packed = packed_weight(m, weight), .half = half_copy, .ctx = m, .C = C, .OC = OC};
}

void bert_linear_forward(BertModel *m, float *out, const float *inp, uint16_t *inp16, const float *weight,
                         const float *bias, int N, int C, int OC) {
    const KPrecision p = precision_of(m);
    const KWeight w = weight_of(m, weight, C, OC);
    k_linear_forward(&p, out, inp, inp16, &w, bias, N);
}

void bert_linear_forward_to(BertModel *m, float *out, uint16_t *out16, const float *inp, uint16_t *inp16,
                            const float *weight, const float *bias, int N, int C, int OC) {
    const KPrecision p = precision_of(m);
    const KWeight w = weight_of(m, weight, C, OC);
    k_linear_forward_to(&p, out, out16, inp, inp16, &w, bias, N);
}

const float *bert_int8_smoothing(const BertModel *m, const float *weight) {
    return k_int8_smoothing(packed_weight(m, weight));
}

void bert_linear_int8(BertModel *m, const KInt8Output *out, Rows8 inp, const float *weight, const float *bias, int N,
                      int C, int OC) {
    k_matmul_forward_int8_rows(out, inp.q, inp.scale, packed_weight(m, weight), bias, N, C, OC);
}

/* Lean inference only (bert_lean_forward): the product and the activation in one pass. */
bool bert_linear_gelu_forward(BertModel *m, float *out, uint16_t *out16, const float *inp, uint16_t *inp16,
                              const float *weight, const float *bias, int N, int C, int OC) {
    if (!bert_lean_forward(m)) return false;
    const KPrecision p = precision_of(m);
    const KWeight w = weight_of(m, weight, C, OC);
    return k_linear_act_forward(&p, out, out16, inp, inp16, &w, bias, N, m->cfg.hidden_act);
}

void bert_gelu_forward_to(BertModel *m, float *out, uint16_t *out16, const float *pre, const uint16_t *pre16, long n) {
    const KPrecision p = precision_of(m);
    k_activation_forward_to(&p, out, out16, pre, pre16, n, m->cfg.hidden_act);
}

void bert_linear_backward(BertModel *m, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const uint16_t *inp16, const float *weight, int N, int C, int OC, bool accumulate_dinp) {
    const KPrecision p = precision_of(m);
    const KWeight w = weight_of(m, weight, C, OC);
    k_linear_backward(&p, dinp, dweight, dbias, dout, inp, inp16, &w, N, accumulate_dinp, m->act.dout16);
}

void bert_gelu_linear_backward(BertModel *m, float *dinp, float *dweight, float *dbias, float *dout, const float *pre,
                               const uint16_t *pre16, const float *inp, const uint16_t *inp16, const float *weight,
                               int N, int C, int OC) {
    const KPrecision p = precision_of(m);
    const KWeight w = weight_of(m, weight, C, OC);
    k_linear_act_backward(&p, dinp, dweight, dbias, dout, pre, pre16, inp, inp16, &w, N, m->cfg.hidden_act,
                          m->act.dout16);
}

/* ---------------------------------------------------------------- initialisation */

void bert_init_tensor(const BertParamInfo *t, float initializer_range, uint64_t seed, int tensor_index) {
    if (t->ndim == 1) {  /* biases 0; LayerNorm weight 1 */
        k_fill(t->data, t->numel, strstr(t->name, "LayerNorm.weight") ? 1.0f : 0.0f);
        return;
    }
    /* Truncated normal on [-2 std, 2 std] by redrawing, as TF's truncated_normal_initializer. */
    k_truncated_normal(t->data, t->numel, initializer_range, rng_key(seed, (uint64_t)tensor_index));
}

void bert_init_tensor_normal(const BertParamInfo *t, float std, uint64_t seed, int tensor_index) {
    if (t->ndim == 1) {
        bert_init_tensor(t, std, seed, tensor_index);
        return;
    }
    /* drawn on the host's view, as a checkpoint's values are loaded (a one-time draw) */
    const uint64_t key = rng_key(seed, (uint64_t)tensor_index);
    float *host = k_map(t->data, sizeof(float) * t->numel, false);
    for (size_t i = 0; i < t->numel; i++) host[i] = (float)(rng_normal(key, i) * std);
    k_unmap(t->data, host, sizeof(float) * t->numel, true);
}

void bert_init_weights(BertModel *m, uint64_t seed) {
    m->params16_stale = true;
    for (int i = 0; i < m->num_tensors; i++) bert_init_tensor(&m->info[i], m->cfg.initializer_range, seed, i);
}

/* ---------------------------------------------------------------- batch checks */

static int check_ids(const int32_t *ids, size_t n, int32_t lo, int32_t hi, const char *what, BertError *err) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < lo || ids[i] >= hi)
            return bert_fail(err, "batch: %s[%zu] = %d is outside [%d, %d)", what, i, ids[i], lo, hi);
    return 0;
}

int bert_batch_validate(const BertModel *m, const BertBatch *b, BertError *err) {
    const BertConfig *c = &m->cfg;
    if (b->batch < 1 || b->batch > m->max_batch)
        return bert_fail(err, "batch: batch size %d outside [1, %d]", b->batch, m->max_batch);
    if (b->seq_len < 1 || b->seq_len > m->max_seq)
        return bert_fail(err, "batch: seq_len %d outside [1, %d]", b->seq_len, m->max_seq);
    if (b->max_predictions < 0 || b->max_predictions > m->max_preds)
        return bert_fail(err, "batch: max_predictions %d outside [0, %d]", b->max_predictions, m->max_preds);
    if (!b->input_ids) return bert_fail(err, "batch: input_ids missing");
    if (b->max_predictions > 0 && !b->masked_positions) return bert_fail(err, "batch: masked_positions missing");
    const size_t N = (size_t)b->batch * b->seq_len, BP = (size_t)b->batch * b->max_predictions;
    if (check_ids(b->input_ids, N, 0, c->vocab_size, "input_ids", err)) return -1;
    if (b->token_type_ids && check_ids(b->token_type_ids, N, 0, c->type_vocab_size, "token_type_ids", err)) return -1;
    if (b->attention_mask) {
        if (check_ids(b->attention_mask, N, 0, 2, "attention_mask", err)) return -1;
        for (int s = 0; s < b->batch; s++) {
            int real = 0;
            for (int t = 0; t < b->seq_len; t++) real += b->attention_mask[(size_t)s * b->seq_len + t];
            if (!real) return bert_fail(err, "batch: sequence %d has no real token (attention_mask all 0)", s);
        }
    }
    for (size_t k = 0; k < BP; k++) {
        int32_t label = b->masked_labels ? b->masked_labels[k] : 0;
        if (label < -1 || label >= c->vocab_size)
            return bert_fail(err, "batch: masked_labels[%zu] = %d is outside [-1, %d)", k, label, c->vocab_size);
        if (label != -1 && (b->masked_positions[k] < 0 || b->masked_positions[k] >= b->seq_len))
            return bert_fail(err, "batch: masked_positions[%zu] = %d is outside [0, %d)", k, b->masked_positions[k],
                             b->seq_len);
    }
    if (b->next_sentence_labels && check_ids(b->next_sentence_labels, b->batch, 0, 2, "next_sentence_labels", err))
        return -1;
    if (!b->start_positions != !b->end_positions)
        return bert_fail(err, "batch: give both start_positions and end_positions, or neither");
    if (b->class_labels && m->heads.num_labels >= 2 &&
        check_ids(b->class_labels, b->batch, 0, m->heads.num_labels, "class_labels", err))
        return -1;
    if (m->heads.kind == BERT_HEADS_CLASSIFIER && m->heads.num_labels == 1 && b->class_labels)
        return bert_fail(err, "batch: a regression head (1 label) takes regression_targets, not class_labels");
    if (m->heads.kind == BERT_HEADS_CLASSIFIER && m->heads.num_labels >= 2 && b->regression_targets)
        return bert_fail(err, "batch: a %d-label classifier takes class_labels, not regression_targets",
                         m->heads.num_labels);
    if (b->multi_label_targets && m->heads.kind != BERT_HEADS_CLASSIFIER)
        return bert_fail(err, "batch: multi_label_targets need a sequence-classification head");
    if (b->multi_label_targets && (b->class_labels || b->regression_targets))
        return bert_fail(err, "batch: multi_label_targets with class_labels or regression_targets: give one kind");
    for (long k = 0; b->multi_label_targets && k < (long)b->batch * m->heads.num_labels; k++)
        if (!(b->multi_label_targets[k] >= 0.0f && b->multi_label_targets[k] <= 1.0f))
            return bert_fail(err, "batch: multi_label_targets[%ld] = %g is outside [0, 1]", k, b->multi_label_targets[k]);
    for (int s = 0; b->regression_targets && s < b->batch; s++)
        if (!isfinite(b->regression_targets[s]))
            return bert_fail(err, "batch: regression_targets[%d] is not finite", s);
    if (b->token_labels && m->heads.kind != BERT_HEADS_TOKEN_CLASSIFIER)
        return bert_fail(err, "batch: token_labels need a token-classification head");
    for (size_t k = 0; b->token_labels && k < N; k++)
        if (b->token_labels[k] != -100 && (b->token_labels[k] < 0 || b->token_labels[k] >= m->heads.num_labels))
            return bert_fail(err, "batch: token_labels[%zu] = %d is neither -100 nor in [0, %d)", k, b->token_labels[k],
                             m->heads.num_labels);
    return 0;
}

/* ---------------------------------------------------------------- FLOPs */

/* Matmul FLOPs (2*M*N*K) of one forward over one sequence batch, MLM head at `preds`
 * positions per sequence (same formula as bench/ and the notes). */
static double forward_flops(const BertConfig *c, int batch, int seq, int preds) {
    const double T = seq, H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, P = preds;
    double layer = 2 * T * H * 3 * H + 2 * T * T * H * 2 + 2 * T * H * H + 2 * 2 * T * H * I;
    double per_seq = c->num_hidden_layers * layer + 2 * H * H /* pooler */ + 2 * H * 2 /* NSP */;
    if (preds > 0) per_seq += 2 * P * H * H + 2 * P * H * V;
    return per_seq * batch;
}

double bert_train_flops(const BertConfig *cfg, int batch, int seq, int preds) {
    return 3.0 * forward_flops(cfg, batch, seq, preds);
}

double bert_infer_flops(const BertConfig *cfg, int batch, int seq) { return forward_flops(cfg, batch, seq, 0); }

/* What the last forward ran, from its row plan: the encoder's linear layers on m->rows rows
 * (the last layer's output projection and feed-forward on the kept rows), attention per
 * sequence on its query rows x kv_len keys, the heads on their rows; backward twice that. */
double bert_executed_train_flops(const BertModel *m) {
    const BertConfig *c = &m->cfg;
    const double H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, L = c->num_hidden_layers;
    const double rows = m->rows, kept = m->kept_count, after_attention = 2 * H * H + 4 * H * I;
    double attention = 0;   /* Q K^T and P V: 2 * 2 * queries * keys * H per sequence */
    for (int s = 0; s < m->B; s++) attention += 4.0 * (m->unpadded ? m->seq_rows[s] : m->T) * m->kv_len[s] * H;
    double f = L * (rows * 2 * H * 3 * H + attention);
    if (L > 0) f += (L - 1) * rows * after_attention + kept * after_attention;
    f += m->B * (2 * H * H + 2 * H * 2) + m->mlm_count * (2 * H * H + 2 * H * V);   /* pooler, NSP, MLM */
    return 3.0 * f;
}
