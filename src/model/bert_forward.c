/* BERT forward pass: embeddings, post-LN encoder layers, pooler + NSP head, MLM head at the
 * masked positions only, and the losses. */
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "core/test_hooks.h"
#include "kernels/kernels.h"
#include "model/bert_internal.h"

/* The encoder's rows: all B*T, or (unpadding) each sequence's up to the last one attention
 * or a head reads: its last real token, or a masked position past it. */
static void plan_encoder_rows(BertModel *m) {
    const int B = m->B, T = m->T, N = B * T;
    /* pre-training, classification and the bare encoder skip rows (their heads read the [CLS]
     * rows and masked positions; the encoder's rows are read with bert_token_output); the QA
     * head returns a logit for every row, padding included, as HF's */
    m->unpadded = m->unpad && m->cfg.num_hidden_layers > 0 && m->heads.kind != BERT_HEADS_QA;
    if (!m->unpadded) {
        m->rows = N;
        return;
    }
    for (int s = 0; s < B; s++) m->seq_rows[s] = m->kv_len[s];
    for (int k = 0; k < m->mlm_count; k++) {
        int s = m->mlm_src_row[k] / T, t = m->mlm_src_row[k] % T;
        if (t + 1 > m->seq_rows[s]) m->seq_rows[s] = t + 1;
    }
    for (int n = 0; m->token_labels && n < N; n++)   /* a labelled padding token is computed too */
        if (m->token_labels[n] != -100 && n % T + 1 > m->seq_rows[n / T]) m->seq_rows[n / T] = n % T + 1;
    int rows = 0;
    for (int n = 0; n < N; n++) m->row_map[n] = -1;
    for (int s = 0; s < B; s++) {
        m->seq_row[s] = rows;
        for (int t = 0; t < m->seq_rows[s]; t++) m->full_row[rows] = s * T + t, m->row_map[s * T + t] = rows++;
    }
    m->rows = rows;
    if (rows == N) m->unpadded = false;   /* nothing to skip: keep the plain layout */
}

/* Where the heads read the last layer's output: every layout row of it, or (pruning) only
 * the [CLS] rows and the labelled masked positions, kept in ascending order. */
static void plan_last_layer_rows(BertModel *m) {
    const int B = m->B, T = m->T, M = m->mlm_count, R = m->rows;
    const int32_t *layout = m->unpadded ? m->row_map : NULL;   /* full row -> layout row */
#define LAYOUT_ROW(n) (layout ? layout[n] : (n))
    m->pruned = m->prune_last_layer && m->cfg.num_hidden_layers > 0 && m->heads.kind == BERT_HEADS_PRETRAINING;
    if (!m->pruned) {
        for (int s = 0; s < B; s++) m->cls_row[s] = LAYOUT_ROW(s * T);
        for (int k = 0; k < M; k++) m->mlm_out_row[k] = LAYOUT_ROW(m->mlm_src_row[k]);
        m->kept_count = R;
        return;
    }
    for (int r = 0; r < R; r++) m->out_map[r] = -1;
    for (int s = 0; s < B; s++) m->out_map[LAYOUT_ROW(s * T)] = 0;
    for (int k = 0; k < M; k++) m->out_map[LAYOUT_ROW(m->mlm_src_row[k])] = 0;
    int kept = 0;
    for (int r = 0; r < R; r++)
        if (m->out_map[r] == 0) {
            m->kept_row[kept] = r;
            m->kept_full[kept] = m->unpadded ? m->full_row[r] : r;
            m->out_map[r] = kept++;
        }
    m->kept_count = kept;
    for (int s = 0; s < B; s++) m->cls_row[s] = m->out_map[LAYOUT_ROW(s * T)];
    for (int k = 0; k < M; k++) m->mlm_out_row[k] = m->out_map[LAYOUT_ROW(m->mlm_src_row[k])];
#undef LAYOUT_ROW
}

/* The task head's labels. QA as HF: positions clamped to [0, T], and T is ignored (the
 * start and the end separately). */
static void prepare_task_labels(BertModel *m, const BertBatch *b) {
    const int B = m->B, T = m->T;
    m->have_task_labels = m->multi_label = false;
    if (m->heads.kind == BERT_HEADS_QA && b->start_positions) {
        m->have_task_labels = true;
        for (int side = 0; side < 2; side++) {
            const int32_t *pos = side ? b->end_positions : b->start_positions;
            m->qa_count[side] = 0;
            for (int s = 0; s < B; s++) {
                int p = pos[s] < 0 ? 0 : pos[s] > T ? T : pos[s];
                if (p == T) continue;
                m->qa_seq[side][m->qa_count[side]] = s, m->qa_label[side][m->qa_count[side]++] = p;
            }
        }
    } else if (m->heads.kind == BERT_HEADS_CLASSIFIER && b->multi_label_targets) {
        m->have_task_labels = m->multi_label = true;
        k_upload(m->target, b->multi_label_targets, sizeof(float) * B * m->heads.num_labels);
    } else if (m->heads.kind == BERT_HEADS_CLASSIFIER && m->heads.num_labels >= 2 && b->class_labels) {
        m->have_task_labels = true;
        memcpy(m->class_label, b->class_labels, sizeof(int32_t) * B);
    } else if (m->heads.kind == BERT_HEADS_CLASSIFIER && m->heads.num_labels == 1 && b->regression_targets) {
        m->have_task_labels = true;
        k_upload(m->target, b->regression_targets, sizeof(float) * B);
    } else if (m->heads.kind == BERT_HEADS_TOKEN_CLASSIFIER && b->token_labels) {
        m->have_task_labels = true;   /* the labelled tokens, at their layout rows (plan_encoder_rows kept them) */
        m->tok_count = 0;
        for (int n = 0; n < B * T; n++)
            if (b->token_labels[n] != -100)
                m->tok_row[m->tok_count] = m->unpadded ? m->row_map[n] : n, m->tok_label[m->tok_count++] = b->token_labels[n];
    }
}

/* Per-sequence attention range (everything after the last real token is skipped), the
 * compact list of labelled MLM slots, and the labels. */
static void prepare_batch(BertModel *m, const BertBatch *b) {
    const int B = b->batch, T = b->seq_len, P = b->max_predictions;
    m->B = B, m->T = T, m->P = P;
    for (int s = 0; s < B; s++) {
        const int32_t *mask = b->attention_mask ? b->attention_mask + (size_t)s * T : NULL;
        int last = T - 1, holes = 0;
        if (mask) {
            while (last > 0 && !mask[last]) last--;
            for (int t = 0; t < last; t++) holes |= !mask[t];
        }
        m->kv_len[s] = last + 1;
        m->has_holes[s] = (uint8_t)holes;
    }
    m->mlm_count = 0;
    m->token_labels = m->heads.kind == BERT_HEADS_TOKEN_CLASSIFIER ? b->token_labels : NULL;
    for (int k = 0; k < B * P; k++) {
        int32_t label = b->masked_labels ? b->masked_labels[k] : 0;
        if (label == -1) continue;
        m->mlm_src_row[m->mlm_count] = (k / P) * T + b->masked_positions[k];
        m->mlm_slot[m->mlm_count] = k;
        m->mlm_label[m->mlm_count] = label;
        m->mlm_count++;
    }
    plan_encoder_rows(m);
    plan_last_layer_rows(m);
    m->have_mlm_labels = b->masked_labels != NULL && P > 0;
    m->have_nsp_labels = b->next_sentence_labels != NULL && m->heads.kind == BERT_HEADS_PRETRAINING;
    if (m->have_nsp_labels) memcpy(m->nsp_label, b->next_sentence_labels, sizeof(int32_t) * B);
    prepare_task_labels(m, b);
}

void bert_attention_args(const BertModel *m, AttentionArgs *a, const int32_t *mask, int layer) {
    const BertConfig *c = &m->cfg;
    *a = (AttentionArgs){.B = m->B, .T = m->T, .A = c->num_attention_heads,
                         .d = c->hidden_size / c->num_attention_heads, .kv_len = m->kv_len, .mask = mask,
                         .has_holes = m->has_holes,
                         .seq_row = m->unpadded ? m->seq_row : NULL, .seq_rows = m->unpadded ? m->seq_rows : NULL,
                         .half = bert_attention_half(m)};
    if (a->half) a->half_mode = bert_half_mode(m), a->qkv16 = m->act.layers[layer].qkv16;
    if (m->training) {
        a->dropout_p = c->attention_probs_dropout_prob;
        a->dropout_key = rng_key(m->dropout_seed, dropout_site(layer, SITE_ATTN_PROBS));
    }
}

static float hidden_dropout_p(const BertModel *m) { return m->training ? m->cfg.hidden_dropout_prob : 0.0f; }

KDropout bert_hidden_dropout_of(const BertModel *m, const int32_t *rows, int layer, int site) {
    return (KDropout){.p = hidden_dropout_p(m), .key = rng_key(m->dropout_seed, dropout_site(layer, site)),
                      .rows = rows};
}

void bert_hidden_dropout(const BertModel *m, float *x, int R, const int32_t *rows, int layer, int site) {
    const KDropout d = bert_hidden_dropout_of(m, rows, layer, site);
    if (rows) k_dropout_rows(x, rows, R, m->cfg.hidden_size, d.p, d.key);
    else k_dropout(x, (long)R * m->cfg.hidden_size, d.p, d.key, 0);
}

/* On the encoder's m->rows rows. With prune (the last layer under
 * bert_set_last_layer_pruning), everything after attention runs on the kept rows only: ctx
 * is compacted in place and the residual input gathered. */
static void layer_forward(BertModel *m, int l, const float *x, const int32_t *mask, bool prune) {
    const BertConfig *c = &m->cfg;
    const int N = m->rows, H = c->hidden_size, I = c->intermediate_size;
    const LayerParams *p = &m->p.layers[l];
    LayerActs *a = &m->act.layers[l];
    AttentionArgs args;
    bert_attention_args(m, &args, mask, l);

    /* In 16 bits each product's input is written rounded by the kernel before it, which then
     * takes its fp32 input NULL: QKV's by the previous layer's LayerNorm 2 (all but the first
     * layer), the attention output's by attention (but on the pruned layer's gathered rows), the
     * first feed-forward's by LayerNorm 1, the second's by GELU. */
    const bool half = bert_is_half(m->precision), ctx16_ready = half && !prune;
    /* QKV where attention reads it: fp32, or rounded to 16 bits (attention's products' operands) */
    bert_linear_forward_to(m, a->qkv, a->qkv16, half && l > 0 ? NULL : x, a->x16, p->qkv_w, p->qkv_b, N, H, 3 * H);
    /* inference keeps no probabilities (nothing reads them): their blocks stay in cache */
    k_attention_forward_to(a->ctx, ctx16_ready ? a->ctx16 : NULL, bert_lean_forward(m) ? NULL : a->probs, a->qkv,
                           &args);
    const int R = prune ? m->kept_count : N;
    const int32_t *rows = prune ? m->kept_full : layout_rows(m);   /* for the dropout masks */
    const float *residual = x;
    if (prune) {
        k_gather_rows(a->ctx, a->ctx, m->kept_row, R, H);
        k_gather_rows(m->act.kept_x, x, m->kept_row, R, H);
        residual = m->act.kept_x;
    }
    /* each sublayer's output: its dropout, the residual and the LayerNorm in one pass */
    bert_linear_forward(m, a->attn_sum, ctx16_ready ? NULL : a->ctx, a->ctx16, p->attn_out_w, p->attn_out_b, R, H, H);
    const KDropout attn_drop = bert_hidden_dropout_of(m, rows, l, SITE_ATTN_OUT);
    k_dropout_layernorm_forward_to(a->h1, half ? a->h1_16 : NULL, bert_half_mode(m), a->attn_sum, a->ln1_mean,
                                   a->ln1_rstd, a->attn_sum, &attn_drop, residual, p->ln1_w, p->ln1_b, R, H,
                                   c->layer_norm_eps);
    const float *h1 = half ? NULL : a->h1;

    /* the feed-forward's activation: into ffn_act (fp32), or into act16, the next product's
     * 16-bit input (mixed precision: the pre-activation kept in 16 bits, as the product
     * stores it, for GELU and its backward) */
    const bool fused = bert_linear_gelu_forward(m, a->ffn_act, a->act16, h1, a->h1_16, p->ffn_in_w, p->ffn_in_b, R, H,
                                                I);
    if (!fused) {
        bert_linear_forward_to(m, a->ffn_pre, a->pre16, h1, a->h1_16, p->ffn_in_w, p->ffn_in_b, R, H, I);
        bert_gelu_forward_to(m, a->ffn_act, a->act16, a->ffn_pre, a->pre16, (long)R * I);
    }
    /* ffn_act is NULL in 16 bits: the product reads act16, already rounded */
    bert_linear_forward(m, a->ffn_sum, a->ffn_act, a->act16, p->ffn_out_w, p->ffn_out_b, R, I, H);
    const KDropout ffn_drop = bert_hidden_dropout_of(m, rows, l, SITE_FFN_OUT);
    uint16_t *next16 = half && l + 1 < c->num_hidden_layers ? m->act.layers[l + 1].x16 : NULL;
    k_dropout_layernorm_forward_to(a->out, next16, bert_half_mode(m), a->ffn_sum, a->ln2_mean, a->ln2_rstd, a->ffn_sum,
                                   &ffn_drop, a->h1, p->ln2_w, p->ln2_b, R, H, c->layer_norm_eps);
}

/* int8 (inference only): each product's input quantized by the kernel that produces it, in
 * its pass over the rows (the products' epilogues: LayerNorm, GELU; attention, each sequence
 * once its heads are done), and each product's result stored
 * in the form the next kernel reads: QKV in bf16 where attention runs in bf16, the
 * feed-forward's activation quantized; the residual and the LayerNorm after the attention
 * output and second feed-forward products are done in their epilogues, row by row (no
 * attn_sum / ffn_sum written). The
 * layer's input x is given quantized in the layer's x8; with quantize_out, LayerNorm 2 leaves
 * the output quantized in the next layer's. */
static void layer_forward_int8(BertModel *m, int l, const float *x, const int32_t *mask, bool prune,
                               bool quantize_out) {
    const BertConfig *c = &m->cfg;
    const int N = m->rows, H = c->hidden_size, I = c->intermediate_size;
    const LayerParams *p = &m->p.layers[l];
    LayerActs *a = &m->act.layers[l];
    AttentionArgs args;
    bert_attention_args(m, &args, mask, l);
    const KInt8Output qkv = {.out = args.half ? NULL : a->qkv, .out16 = args.half ? a->qkv16 : NULL};
    TEST_HOOK_INT8_INPUT(p->qkv_w, x, a->x8.q, a->x8.scale, N, H);
    bert_linear_int8(m, &qkv, a->x8, p->qkv_w, p->qkv_b, N, H, 3 * H);
    if (!prune) args.ctx_q8 = a->ctx8.q, args.ctx_q8_scale = a->ctx8.scale;   /* pruned: the kept rows, below */
    args.ctx_q8_only = !prune && !TEST_HOOK_INT8_SET();   /* the fp32 context: the pruned rows' gather, a test's check */
    k_attention_forward(a->ctx, bert_lean_forward(m) ? NULL : a->probs, a->qkv, &args);
    const int R = prune ? m->kept_count : N;
    const float *residual = x;
    if (prune) {
        k_gather_rows(a->ctx, a->ctx, m->kept_row, R, H);
        k_gather_rows(m->act.kept_x, x, m->kept_row, R, H);
        residual = m->act.kept_x;
        k_quantize_rows_int8(a->ctx8.q, a->ctx8.scale, a->ctx, NULL, R, H);   /* attention output: not smoothed */
    }
    /* + residual, LayerNorm 1, quantized for the feed-forward, in the product's pass */
    const KInt8Output ln1 = {.out = a->h1, .residual = residual, .q8 = a->h1_8.q, .q8_scale = a->h1_8.scale,
                             .q8_smooth = bert_int8_smoothing(m, p->ffn_in_w), .ln_w = p->ln1_w, .ln_b = p->ln1_b, .ln_eps = c->layer_norm_eps, .ln_mean = a->ln1_mean,
                             .ln_rstd = a->ln1_rstd};
    TEST_HOOK_INT8_INPUT(p->attn_out_w, a->ctx, a->ctx8.q, a->ctx8.scale, R, H);
    bert_linear_int8(m, &ln1, a->ctx8, p->attn_out_w, p->attn_out_b, R, H, H);
    const KInt8Output act = {.q8 = a->act8.q, .q8_scale = a->act8.scale, .act_on = true, .act = c->hidden_act};
    TEST_HOOK_INT8_INPUT(p->ffn_in_w, a->h1, a->h1_8.q, a->h1_8.scale, R, H);
    bert_linear_int8(m, &act, a->h1_8, p->ffn_in_w, p->ffn_in_b, R, H, I);
    const Rows8 next = quantize_out ? m->act.layers[l + 1].x8 : (Rows8){0};
    const float *next_smooth = quantize_out ? bert_int8_smoothing(m, m->p.layers[l + 1].qkv_w) : NULL;
    const KInt8Output ln2 = {.out = a->out, .residual = a->h1, .q8 = next.q, .q8_scale = next.scale,
                             .q8_smooth = next_smooth, .ln_w = p->ln2_w, .ln_b = p->ln2_b, .ln_eps = c->layer_norm_eps, .ln_mean = a->ln2_mean,
                             .ln_rstd = a->ln2_rstd};
    TEST_HOOK_INT8_INPUT(p->ffn_out_w, NULL, a->act8.q, a->act8.scale, R, I);
    bert_linear_int8(m, &ln2, a->act8, p->ffn_out_w, p->ffn_out_b, R, I, H);
}

static void embeddings_forward(BertModel *m, const BertBatch *b) {
    const BertConfig *c = &m->cfg;
    const int N = m->B * m->T, H = c->hidden_size;
    Activations *a = &m->act;
    const int32_t *types = b->token_type_ids ? b->token_type_ids : m->zero_types;
    k_embeddings_forward(a->emb_sum, b->input_ids, types, m->p.word, m->p.pos, m->p.type, m->B, m->T, H);
    k_layernorm_forward(a->emb_out, NULL, a->emb_mean, a->emb_rstd, a->emb_sum, NULL, m->p.emb_ln_w, m->p.emb_ln_b, N,
                        H, c->layer_norm_eps);
    if (m->unpadded) k_gather_rows(a->emb_out, a->emb_out, m->full_row, m->rows, H);   /* in place: ascending */
    bert_hidden_dropout(m, a->emb_out, m->rows, layout_rows(m), 0, SITE_EMBEDDINGS);
}

/* Pooler: tanh of the dense layer on each sequence's [CLS] row. */
static void pooler_forward(BertModel *m, const float *seq_out) {
    const int B = m->B, H = m->cfg.hidden_size;
    Activations *a = &m->act;
    k_gather_rows(a->cls_in, seq_out, m->cls_row, B, H);
    bert_linear_forward(m, a->pooled, a->cls_in, a->cls_in16, m->p.pool_w, m->p.pool_b, B, H, H);
    k_tanh_forward(a->pooled, (long)B * H);
}

/* The NSP logits from the pooled output; returns the NSP mean loss or 0. */
static float nsp_forward(BertModel *m) {
    const int B = m->B, H = m->cfg.hidden_size;
    Activations *a = &m->act;
    bert_linear_forward(m, a->nsp_logits, a->pooled, a->pooled16, m->p.nsp_w, m->p.nsp_b, B, H, 2);
    if (!m->have_nsp_labels) return 0.0f;
    k_xent_forward(a->losses + LOSS_NSP, a->nsp_row_loss, a->d_nsp_logits, a->nsp_logits, NULL, m->nsp_label, B, 2);
    return k_read_scalar(a->losses + LOSS_NSP);
}

/* MLM head on the labelled masked positions only; returns the MLM mean loss or 0. */
static float mlm_forward(BertModel *m, const float *seq_out) {
    const BertConfig *c = &m->cfg;
    const int M = m->mlm_count, H = c->hidden_size, V = c->vocab_size;
    Activations *a = &m->act;
    float loss = 0.0f;
    if (M > 0) {
        k_gather_rows(a->mlm_in, seq_out, m->mlm_out_row, M, H);
        bert_linear_forward(m, a->mlm_pre, a->mlm_in, a->mlm_in16, m->p.mlm_dense_w, m->p.mlm_dense_b, M, H, H);
        k_gelu_forward(a->mlm_act, a->mlm_pre, (long)M * H, c->hidden_act);
        k_layernorm_forward(a->mlm_ln, NULL, a->mlm_mean, a->mlm_rstd, a->mlm_act, NULL, m->p.mlm_ln_w, m->p.mlm_ln_b,
                            M, H, c->layer_norm_eps);
        bert_linear_forward(m, a->mlm_logits, a->mlm_ln, a->mlm_ln16, m->p.word, m->p.mlm_bias, M, H, V);  /* tied decoder */
        if (m->have_mlm_labels) {   /* the softmax goes to d_mlm_logits, where backward wants it */
            k_xent_forward(a->losses + LOSS_MLM, a->mlm_row_loss, a->d_mlm_logits, a->mlm_logits, NULL, m->mlm_label,
                           M, V);
            loss = k_read_scalar(a->losses + LOSS_MLM);
        }
    }
    /* the compact rows to their slots of [B*P, V], unlabelled slots zero */
    k_scatter_rows(a->mlm_logits, a->mlm_logits, m->mlm_slot, M, m->B * m->P, V);   /* in place */
    return loss;
}

/* QA head: start and end logits per token (two one-output products, so each side's logits
 * are [B, T] rows for the cross-entropy); loss = mean of the two sides' mean CE. */
static float qa_forward(BertModel *m, const float *seq_out) {
    const int B = m->B, T = m->T, N = B * T, H = m->cfg.hidden_size;
    Activations *a = &m->act;
    bert_linear_forward(m, a->qa_start, seq_out, a->seq_out16, m->p.qa_w, m->p.qa_b, N, H, 1);
    bert_linear_forward(m, a->qa_end, seq_out, a->seq_out16, m->p.qa_w + H, m->p.qa_b + 1, N, H, 1);
    if (!m->have_task_labels) return 0.0f;
    float loss = 0;
    for (int side = 0; side < 2; side++) {
        const int M = m->qa_count[side];
        if (!M) continue;   /* every position ignored: HF's mean over nothing is NaN; bert.c adds 0 */
        float *out = a->losses + (side ? LOSS_QA_END : LOSS_QA_START);
        k_xent_forward(out, a->qa_row_loss, side ? a->qa_probs_end : a->qa_probs_start, side ? a->qa_end : a->qa_start,
                       m->qa_seq[side], m->qa_label[side], M, T);
        loss += k_read_scalar(out);
    }
    return loss / 2;
}

/* Classifier head: dropout on the pooled output, then the linear layer; CE (N >= 2
 * labels) or MSE (1 label, regression), both means over the batch. */
static float classifier_forward(BertModel *m) {
    const int B = m->B, H = m->cfg.hidden_size, NL = m->heads.num_labels;
    Activations *a = &m->act;
    k_copy(a->cls_dropped, a->pooled, (long)B * H);
    k_dropout(a->cls_dropped, (long)B * H, hidden_dropout_p(m),
              rng_key(m->dropout_seed, classifier_dropout_site(m->cfg.num_hidden_layers)), 0);
    bert_linear_forward(m, a->cls_logits, a->cls_dropped, a->cls_dropped16, m->p.cls_w, m->p.cls_b, B, H, NL);
    if (!m->have_task_labels) return 0.0f;
    if (m->multi_label) k_bce_forward(a->losses + LOSS_CLASSIFIER, a->cls_logits, m->target, B * NL);
    else if (NL == 1) k_mse_forward(a->losses + LOSS_CLASSIFIER, a->cls_logits, m->target, B);
    else k_xent_forward(a->losses + LOSS_CLASSIFIER, a->cls_row_loss, a->cls_probs, a->cls_logits, NULL, m->class_label,
                        B, NL);
    return k_read_scalar(a->losses + LOSS_CLASSIFIER);
}

/* Token classifier (HF's BertForTokenClassification): dropout on the sequence output, then
 * the linear layer on every row the encoder ran; loss = mean CE over the labelled tokens
 * (none labelled: 0, where HF's mean over nothing is NaN). */
static float token_classifier_forward(BertModel *m, const float *seq_out) {
    const int R = m->rows, H = m->cfg.hidden_size, NL = m->heads.num_labels;
    Activations *a = &m->act;
    k_copy(a->tok_dropped, seq_out, (long)R * H);
    const uint64_t key = rng_key(m->dropout_seed, classifier_dropout_site(m->cfg.num_hidden_layers));
    if (m->unpadded) k_dropout_rows(a->tok_dropped, m->full_row, R, H, hidden_dropout_p(m), key);
    else k_dropout(a->tok_dropped, (long)R * H, hidden_dropout_p(m), key, 0);
    bert_linear_forward(m, a->tok_logits, a->tok_dropped, a->tok_dropped16, m->p.cls_w, m->p.cls_b, R, H, NL);
    if (!m->have_task_labels || m->tok_count == 0) return 0.0f;
    k_xent_forward(a->losses + LOSS_TOKEN, a->tok_row_loss, a->tok_probs, a->tok_logits, m->tok_row, m->tok_label,
                   m->tok_count, NL);
    return k_read_scalar(a->losses + LOSS_TOKEN);
}

float bert_forward(BertModel *m, const BertBatch *b, bool training, uint64_t dropout_seed) {
    BertError err;
    if (!bert_place_activations(m)) {
        m->backward_ready = false;
        return NAN;
    }
    if (bert_batch_validate(m, b, &err)) {
        snprintf(m->error, sizeof m->error, "%s", err.msg);
        m->backward_ready = false;
        return NAN;
    }
    if (training && m->mode == BERT_MODE_FORWARD_ONLY) {
        snprintf(m->error, sizeof m->error, "bert_forward: a training forward on a forward-only model "
                                            "(BERT_MODE_FORWARD_ONLY: its layers share their activations)");
        m->backward_ready = false;
        return NAN;
    }
    if (training && m->precision == BERT_INT8) {
        snprintf(m->error, sizeof m->error, "bert_forward: a training forward in int8 (BERT_INT8 is for inference "
                                            "only: train in fp32 or bf16, then infer in int8)");
        m->backward_ready = false;
        return NAN;
    }
    m->error[0] = '\0';
    m->training = training;
    m->dropout_seed = dropout_seed;
    bert_refresh_weights(m);
    prepare_batch(m, b);
    embeddings_forward(m, b);
    const float *x = m->act.emb_out;
    const int L = m->cfg.num_hidden_layers;
    const bool int8 = m->precision == BERT_INT8;
    if (int8 && L > 0)   /* layer 0's input, the embeddings' LayerNorm output, divided by its QKV's factors */
        k_quantize_rows_int8(m->act.layers[0].x8.q, m->act.layers[0].x8.scale, x,
                             bert_int8_smoothing(m, m->p.layers[0].qkv_w), m->rows, m->cfg.hidden_size);
    for (int l = 0; l < L; l++) {
        const bool prune = m->pruned && l == L - 1;
        if (int8) layer_forward_int8(m, l, x, b->attention_mask, prune, l + 1 < L);
        else layer_forward(m, l, x, b->attention_mask, prune);
        x = m->act.layers[l].out;
    }
    m->nsp_loss = m->mlm_loss = m->task_loss = 0.0f;
    if (m->p.pool_w) pooler_forward(m, x);
    switch (m->heads.kind) {
    case BERT_HEADS_PRETRAINING:
        m->nsp_loss = nsp_forward(m);
        m->mlm_loss = m->P > 0 ? mlm_forward(m, x) : 0.0f;
        break;
    case BERT_HEADS_QA: m->task_loss = qa_forward(m, x); break;
    case BERT_HEADS_CLASSIFIER: m->task_loss = classifier_forward(m); break;
    case BERT_HEADS_TOKEN_CLASSIFIER: m->task_loss = token_classifier_forward(m, x); break;
    case BERT_HEADS_NONE: break;
    }
    m->backward_ready = true;
    return m->mlm_loss + m->nsp_loss + m->task_loss;
}
