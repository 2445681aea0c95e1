/* BERT backward pass: the exact reverse of bert_forward.c, accumulating into the gradient
 * allocation. Dropout masks are recomputed from the counter-based RNG, not stored. */
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "model/bert_internal.h"

/* Classifier head: d(pooled output) from the CE or MSE loss, through the head's dropout. */
static void classifier_backward(BertModel *m, float *d_pooled) {
    const int B = m->B, H = m->cfg.hidden_size, NL = m->heads.num_labels;
    Activations *a = &m->act;
    if (m->multi_label) k_bce_backward(a->d_cls_logits, a->cls_logits, m->target, B * NL, m->loss_scale / (B * NL));
    else if (NL == 1) k_mse_backward(a->d_cls_logits, a->cls_logits, m->target, B, m->loss_scale / B);
    else k_xent_backward(a->cls_probs, m->class_label, B, NL, m->loss_scale / B);
    /* cross-entropy's softmax became dlogits in place */
    const float *d_logits = m->multi_label || NL == 1 ? a->d_cls_logits : a->cls_probs;
    bert_linear_backward(m, d_pooled, m->g.cls_w, m->g.cls_b, d_logits, a->cls_dropped, a->cls_dropped16, m->p.cls_w, B, H, NL, false);
    k_dropout(d_pooled, (long)B * H, m->training ? m->cfg.hidden_dropout_prob : 0.0f,
              rng_key(m->dropout_seed, classifier_dropout_site(m->cfg.num_hidden_layers)), 0);
}

/* QA head: the start and end logits' gradients (0 at ignored sequences) through their
 * one-output products, added into d_out. */
static void qa_backward(BertModel *m, float *d_out) {
    const int B = m->B, T = m->T, N = B * T, H = m->cfg.hidden_size;
    Activations *a = &m->act;
    for (int side = 0; side < 2; side++) {
        const int M = m->qa_count[side];
        float *d_logits = side ? a->d_qa_end : a->d_qa_start, *probs = side ? a->qa_probs_end : a->qa_probs_start;
        if (M) k_xent_backward(probs, m->qa_label[side], M, T, 0.5f * m->loss_scale / M);
        k_scatter_rows(d_logits, probs, m->qa_seq[side], M, B, T);   /* ignored sequences get 0 */
        bert_linear_backward(m, d_out, m->g.qa_w + (size_t)side * H, m->g.qa_b + side, d_logits, bert_sequence_output(m), a->seq_out16,
                          m->p.qa_w + (size_t)side * H, N, H, 1, true);
    }
}

/* Token classifier: the labelled tokens' logit gradients (0 elsewhere) through the linear
 * layer and the head's dropout, added into d_out (layout rows). */
static void token_classifier_backward(BertModel *m, float *d_out) {
    const int R = m->rows, H = m->cfg.hidden_size, NL = m->heads.num_labels, M = m->tok_count;
    Activations *a = &m->act;
    if (M == 0) return;   /* the loss was 0 whatever the weights */
    k_xent_backward(a->tok_probs, m->tok_label, M, NL, m->loss_scale / M);
    k_scatter_rows(a->d_tok_logits, a->tok_probs, m->tok_row, M, R, NL);   /* unlabelled rows get 0 */
    bert_linear_backward(m, a->d_tok_in, m->g.cls_w, m->g.cls_b, a->d_tok_logits, a->tok_dropped, a->tok_dropped16,
                         m->p.cls_w, R, H, NL, false);
    const uint64_t key = rng_key(m->dropout_seed, classifier_dropout_site(m->cfg.num_hidden_layers));
    const float p = m->training ? m->cfg.hidden_dropout_prob : 0.0f;
    if (m->unpadded) k_dropout_rows(a->d_tok_in, m->full_row, R, H, p, key);
    else k_dropout(a->d_tok_in, (long)R * H, p, key, 0);
    k_add(d_out, a->d_tok_in, (long)R * H);
}

/* Pooler, fed by the NSP or classifier loss (when labelled) and/or an external d(pooled
 * output); adds the gradient of the [CLS] rows into d_out. */
static void pooler_backward(BertModel *m, float *d_out, const float *d_pooled_ext) {
    const int B = m->B, H = m->cfg.hidden_size;
    Activations *a = &m->act;
    const bool classifier = m->heads.kind == BERT_HEADS_CLASSIFIER && m->have_task_labels;
    if (!m->p.pool_w || (!m->have_nsp_labels && !classifier && !d_pooled_ext)) return;
    if (m->have_nsp_labels) {
        k_xent_backward(a->d_nsp_logits, m->nsp_label, B, 2, m->loss_scale / B);
        bert_linear_backward(m, a->d_pooled, m->g.nsp_w, m->g.nsp_b, a->d_nsp_logits, a->pooled, a->pooled16, m->p.nsp_w, B, H, 2, false);
    } else if (classifier) {
        classifier_backward(m, a->d_pooled);
    } else {
        k_zero(a->d_pooled, (long)B * H);
    }
    if (d_pooled_ext) k_add(a->d_pooled, d_pooled_ext, (long)B * H);
    k_tanh_backward(a->d_pooled, a->d_pooled, a->pooled, (long)B * H);
    bert_linear_backward(m, a->d_cls, m->g.pool_w, m->g.pool_b, a->d_pooled, a->cls_in, a->cls_in16, m->p.pool_w, B, H, H, false);
    k_scatter_add_rows(d_out, a->d_cls, m->cls_row, B, H);
}

/* MLM head: adds the gradient of the gathered rows into d_out. */
static void mlm_backward(BertModel *m, float *d_out) {
    const BertConfig *c = &m->cfg;
    const int M = m->mlm_count, H = c->hidden_size, V = c->vocab_size;
    Activations *a = &m->act;
    k_xent_backward(a->d_mlm_logits, m->mlm_label, M, V, m->loss_scale / M);
    bert_linear_backward(m, a->d_mlm_a, m->g.word, m->g.mlm_bias, a->d_mlm_logits, a->mlm_ln, a->mlm_ln16, m->p.word, M, H, V, false);
    k_layernorm_backward(a->d_mlm_b, m->g.mlm_ln_w, m->g.mlm_ln_b, a->d_mlm_a, a->mlm_act, a->mlm_mean, a->mlm_rstd,
                         m->p.mlm_ln_w, M, H);
    k_gelu_backward(a->d_mlm_b, a->d_mlm_b, a->mlm_pre, (long)M * H, c->hidden_act);
    bert_linear_backward(m, a->d_mlm_a, m->g.mlm_dense_w, m->g.mlm_dense_b, a->d_mlm_b, a->mlm_in, a->mlm_in16, m->p.mlm_dense_w, M, H,
                      H, false);
    k_scatter_add_rows(d_out, a->d_mlm_a, m->mlm_out_row, M, H);   /* in slot order: positions may repeat */
}

/* d_x holds d(layer output) on entry (the kept rows only, compact, when prune) and d(layer
 * input) on return (all rows). */
static void layer_backward(BertModel *m, int l, const float *x, const int32_t *mask, bool prune) {
    const BertConfig *c = &m->cfg;
    const int N = m->rows, H = c->hidden_size, I = c->intermediate_size;
    const int R = prune ? m->kept_count : N;
    const int32_t *rows = prune ? m->kept_full : layout_rows(m);   /* for the dropout masks */
    const LayerParams *p = &m->p.layers[l];
    LayerParams *g = &m->g.layers[l];
    const LayerActs *a = &m->act.layers[l];
    Activations *d = &m->act;

    /* out = LN2(dropout(FFN(h1)) + h1): the residual branch's gradient into d_h1, the feed-forward's
     * (through the dropout) into d_sum */
    const KDropout ffn_drop = bert_hidden_dropout_of(m, rows, l, SITE_FFN_OUT);
    k_layernorm_dropout_backward(d->d_h1, d->d_sum, &ffn_drop, g->ln2_w, g->ln2_b, d->d_x, a->ffn_sum, a->ln2_mean,
                                 a->ln2_rstd, p->ln2_w, R, H);
    bert_linear_backward(m, d->d_ffn, g->ffn_out_w, g->ffn_out_b, d->d_sum, a->ffn_act, a->act16, p->ffn_out_w, R, I, H, false);
    bert_gelu_linear_backward(m, d->d_h1, g->ffn_in_w, g->ffn_in_b, d->d_ffn, a->ffn_pre, a->pre16, a->h1, a->h1_16,
                              p->ffn_in_w, R, H, I);

    /* h1 = LN1(dropout(Attention(x) Wo + bo) + x): likewise into d_x and d_sum (pruned: the kept
     * rows' residual gradient scattered to their places in d_x) */
    if (prune) {
        k_layernorm_backward(d->d_sum, g->ln1_w, g->ln1_b, d->d_h1, a->attn_sum, a->ln1_mean, a->ln1_rstd, p->ln1_w, R,
                             H);
        k_scatter_rows(d->d_x, d->d_sum, m->kept_row, R, N, H);
        bert_hidden_dropout(m, d->d_sum, R, rows, l, SITE_ATTN_OUT);
    } else {
        const KDropout attn_drop = bert_hidden_dropout_of(m, rows, l, SITE_ATTN_OUT);
        k_layernorm_dropout_backward(d->d_x, d->d_sum, &attn_drop, g->ln1_w, g->ln1_b, d->d_h1, a->attn_sum,
                                     a->ln1_mean, a->ln1_rstd, p->ln1_w, R, H);
    }
    /* pruned: d(ctx) of the kept rows goes through d_h1 (free now), the other rows' is zero */
    float *d_ctx_rows = prune ? d->d_h1 : d->d_ctx;
    bert_linear_backward(m, d_ctx_rows, g->attn_out_w, g->attn_out_b, d->d_sum, a->ctx, a->ctx16, p->attn_out_w, R, H, H, false);
    if (prune) k_scatter_rows(d->d_ctx, d_ctx_rows, m->kept_row, R, N, H);
    AttentionArgs args;
    bert_attention_args(m, &args, mask, l);
    k_attention_backward(d->d_qkv, d->d_ctx, a->qkv, a->probs, &args);
    bert_linear_backward(m, d->d_x, g->qkv_w, g->qkv_b, d->d_qkv, x, a->x16, p->qkv_w, N, H, 3 * H, true);
}

/* Tells the hook that gradients [begin, end) (pointers into m->grads) are final. */
static void grads_ready(BertModel *m, const float *begin, const float *end) {
    if (m->grad_ready) m->grad_ready(m->grad_ready_ctx, (size_t)(begin - m->grads), (size_t)(end - begin));
}

int bert_backward_with(BertModel *m, const BertBatch *b, const float *d_sequence_output, const float *d_pooled) {
    if (!m->backward_ready) {   /* the gradients are left as they are */
        snprintf(m->error, sizeof m->error, "bert_backward: no successful bert_forward to go back through (none, a "
                                            "rejected batch, its backward ran already, or the precision or mode "
                                            "changed since)");
        return -1;
    }
    if (m->precision == BERT_INT8) {
        snprintf(m->error, sizeof m->error, "bert_backward: the model is in int8 (BERT_INT8 is for inference only)");
        return -1;
    }
    if (bert_lean_forward(m)) {
        snprintf(m->error, sizeof m->error, "bert_backward: the last forward was a lean one (training=false in "
                                            "BERT_MODE_LEAN_INFERENCE or FORWARD_ONLY: the feed-forward's "
                                            "pre-activations and attention's probabilities were not kept)");
        return -1;
    }
    if (d_sequence_output && (m->pruned || m->unpadded)) {
        snprintf(m->error, sizeof m->error, "bert_backward_with: a d_sequence_output after a forward with last-layer "
                                            "pruning or unpadding: not every row was computed");
        return -1;
    }
    m->backward_ready = false;       /* the softmax buffers are consumed in place */
    const BertConfig *c = &m->cfg;
    const int N = m->B * m->T, H = c->hidden_size, L = c->num_hidden_layers;
    Activations *a = &m->act;
    if (d_sequence_output) k_copy(a->d_x, d_sequence_output, (long)N * H);
    else k_zero(a->d_x, (long)N * H);
    pooler_backward(m, a->d_x, d_pooled);
    if (m->heads.kind == BERT_HEADS_PRETRAINING && m->have_mlm_labels && m->mlm_count > 0) mlm_backward(m, a->d_x);
    if (m->heads.kind == BERT_HEADS_QA && m->have_task_labels) qa_backward(m, a->d_x);
    if (m->heads.kind == BERT_HEADS_TOKEN_CLASSIFIER && m->have_task_labels) token_classifier_backward(m, a->d_x);
    const float *heads_begin = m->g.layers[L - 1].ln2_b + H;   /* the heads follow the last layer */
    grads_ready(m, heads_begin, m->grads + m->num_params);
    for (int l = L - 1; l >= 0; l--) {
        layer_backward(m, l, l ? a->layers[l - 1].out : a->emb_out, b->attention_mask, m->pruned && l == L - 1);
        grads_ready(m, m->g.layers[l].qkv_w, m->g.layers[l].ln2_b + H);
    }
    bert_hidden_dropout(m, a->d_x, m->rows, layout_rows(m), 0, SITE_EMBEDDINGS);
    const float *d_emb = a->d_x;   /* the embeddings ran on all B*T rows: skipped ones get 0 */
    if (m->unpadded) k_scatter_rows(a->d_h1, a->d_x, m->full_row, m->rows, N, H), d_emb = a->d_h1;
    k_layernorm_backward(a->d_sum, m->g.emb_ln_w, m->g.emb_ln_b, d_emb, a->emb_sum, a->emb_mean, a->emb_rstd,
                         m->p.emb_ln_w, N, H);
    const int32_t *types = b->token_type_ids ? b->token_type_ids : m->zero_types;
    k_embeddings_backward(m->g.word, m->g.pos, m->g.type, a->d_sum, b->input_ids, types, m->B, m->T, H);
    grads_ready(m, m->grads, m->g.layers[0].qkv_w);
    return 0;
}

int bert_backward(BertModel *m, const BertBatch *b) { return bert_backward_with(m, b, NULL, NULL); }
