/* int8 helpers the tests share (test_int8.c, test_embed.c): the smoothing factors a model's
 * int8 products should have, computed from its parameter table as the model computes them.
 * Include after test.h. */
#ifndef BERT_TEST_INT8_UTIL_H
#define BERT_TEST_INT8_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_int8.h"
#include "model/bert.h"
#include "model/config.h"

/* Layer l's smoothed product (ffn: FFN in, else QKV): its factors t [H] as the model should
 * make them, and the weight the model multiplies (QKV's: the query's, the fused weight's
 * start). False where a tensor is missing. */
static inline bool expected_factors(const BertModel *m, int l, bool ffn, float *t, const float **weight) {
    const BertConfig *c = bert_model_config(m);
    char ln[128], lb[160], w[128], wq[128];
    if (ffn) snprintf(ln, sizeof ln, "bert.encoder.layer.%d.attention.output.LayerNorm", l);
    else if (l) snprintf(ln, sizeof ln, "bert.encoder.layer.%d.output.LayerNorm", l - 1);
    else snprintf(ln, sizeof ln, "bert.embeddings.LayerNorm");
    snprintf(w, sizeof w, ffn ? "bert.encoder.layer.%d.intermediate.dense.weight" : "bert.encoder.layer.%d.attention.self.value.weight", l);
    snprintf(wq, sizeof wq, ffn ? "bert.encoder.layer.%d.intermediate.dense.weight" : "bert.encoder.layer.%d.attention.self.query.weight", l);
    snprintf(lb, sizeof lb, "%s.bias", ln);
    strcat(ln, ".weight");
    const BertParamInfo *g = bert_find_param(m, ln), *b = bert_find_param(m, lb), *W = bert_find_param(m, w);
    const BertParamInfo *Wq = bert_find_param(m, wq);
    if (!g || !b || !W || !Wq) { CHECKF(0, "no %s, %s, %s or %s", ln, lb, w, wq); return false; }
    gemm_int8_smoothing(t, g->data, b->data, W->data, c->hidden_size, ffn ? c->intermediate_size : c->hidden_size);
    *weight = Wq->data;
    return true;
}

/* The smoothed products (QKV, its factors from the value projection's rows; FFN in) quantize
 * x / t and W t: the errors e, e' they make are x's and W's errors e t and e' / t, so the
 * bound on each operand's relative error (sqrt(K) / 2L, test_int8.c's int8_chain_tolerance)
 * grows by at most max t / min t. The largest such spread of the model's factors,
 * computed as the model computes them (gemm_int8_smoothing over the LayerNorm that makes the
 * input and the weight's rows). */
static inline double smoothing_spread(const BertModel *m) {
    const BertConfig *c = bert_model_config(m);
    const int H = c->hidden_size;
    float *t = malloc(sizeof(float) * H);
    double spread = 1;
    for (int l = 0; l < c->num_hidden_layers; l++)
        for (int ffn = 0; ffn < 2; ffn++) {
            const float *w;
            if (!expected_factors(m, l, ffn, t, &w)) continue;
            float lo = t[0], hi = t[0];
            for (int k = 1; k < H; k++) lo = fminf(lo, t[k]), hi = fmaxf(hi, t[k]);
            spread = fmax(spread, (double)hi / lo);
        }
    free(t);
    return spread;
}

#endif
