/* AdamW exactly as torch.optim.AdamW (decoupled weight decay, bias correction), one loop
 * over the parameter table. The m and v state is one allocation, created on first use.
 * Tensors flagged decay=false (biases, LayerNorm) get no weight decay, as in BERT. */
#include <math.h>
#include <stdlib.h>

#include "model/bert_internal.h"

/* One tensor's update; called inside the step's parallel region, so the loop is shared
 * among the threads without a barrier per tensor (nowait): with ~200 tensors in bert-base,
 * barriers would cost more than the arithmetic when a core is busy with something else. */
static void adamw_tensor(float *restrict p, const float *restrict g, float *restrict mom, float *restrict vel,
                         size_t n, const AdamWConfig *c, float decay_factor, float step_size, float bc2_sqrt) {
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
#pragma omp for simd schedule(static) nowait
    for (size_t i = 0; i < n; i++) {
        float grad = g[i];
        mom[i] = mom[i] * b1 + grad * (1.0f - b1);
        vel[i] = vel[i] * b2 + grad * grad * (1.0f - b2);
        float denom = sqrtf(vel[i]) / bc2_sqrt + eps;
        p[i] = p[i] * decay_factor - step_size * (mom[i] / denom);
    }
}

void bert_adamw_step(BertModel *m, const AdamWConfig *c, int step) {
    if (!m->adam_state) m->adam_state = xcalloc(2 * m->num_params, sizeof(float));
    /* Scalars in double, as PyTorch computes them in Python. */
    const double bc1 = 1.0 - pow(c->beta1, step), bc2 = 1.0 - pow(c->beta2, step);
    const float step_size = (float)(c->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float *mom = m->adam_state, *vel = m->adam_state + m->num_params;
#pragma omp parallel if (m->num_params >= 32768)
    for (int i = 0; i < m->num_tensors; i++) {
        const BertParamInfo *t = &m->info[i];
        float decay_factor = t->decay ? (float)(1.0 - (double)c->lr * c->weight_decay) : 1.0f;
        adamw_tensor(t->data, t->grad, mom + t->offset, vel + t->offset, t->numel, c, decay_factor, step_size,
                     bc2_sqrt);
    }
}
