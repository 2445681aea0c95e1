/* Global gradient norm and clipping (BERT clips the global norm to 1.0 before the update).
 * The sum of squares runs over fixed-size chunks whose partial sums are added in chunk
 * order, so the result does not depend on the thread count. */
#include <math.h>

#include "model/bert_internal.h"

#define NORM_CHUNK ((size_t)GRAD_NORM_CHUNK)

double bert_grad_norm(const BertModel *m) {
    const size_t n = m->num_params, nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *partial = m->norm_partial;  /* allocated with the model: nothing per step */
    const float *g = m->grads;
#pragma omp parallel for schedule(static) if (n >= 4 * NORM_CHUNK)
    for (size_t c = 0; c < nchunks; c++) {
        size_t end = (c + 1) * NORM_CHUNK < n ? (c + 1) * NORM_CHUNK : n;
        double s = 0.0;
        for (size_t i = c * NORM_CHUNK; i < end; i++) s += (double)g[i] * g[i];
        partial[c] = s;
    }
    double total = 0.0;
    for (size_t c = 0; c < nchunks; c++) total += partial[c];
    return sqrt(total);
}

double bert_clip_grad_norm(BertModel *m, double max_norm) {
    double norm = bert_grad_norm(m);
    if (max_norm > 0 && norm > max_norm) {
        const float scale = (float)(max_norm / (norm + 1e-6));  /* torch.nn.utils.clip_grad_norm_ */
        float *g = m->grads;
        const size_t n = m->num_params;
#pragma omp parallel for simd schedule(static) if (n >= 4 * NORM_CHUNK)
        for (size_t i = 0; i < n; i++) g[i] *= scale;
    }
    return norm;
}
