/* LAMB and AdamW over a tensor table: see optimizer.h. */
#include "optim/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

/* Norms sum squares over chunks of this many floats in a fixed order (thread-count
 * independent); the same chunking for gradients, parameters and updates. */
enum { NORM_CHUNK = 1 << 16 };

struct Optimizer {
    OptimizerConfig cfg;
    const BertParamInfo *tensors;
    int n;
    size_t numel;        /* floats over all tensors */
    /* this process's floats [lo, hi) of the flat vector (all of them unless sharded): tensor
     * i's elements [own_begin[i], own_end[i]), whose moments start at offset[i] in state */
    bool sharded;
    OptimizerShard shard;
    size_t lo, hi;
    size_t *offset, *own_begin, *own_end;
    float *state;        /* m then v: 2 * (hi - lo) floats, one allocation */
    float *full;         /* sharded: the gathered state (2 * numel) on the writer, until saved */
    long steps;
};

OptimizerConfig optimizer_defaults(OptimizerKind kind) {
    return (OptimizerConfig){.kind = kind, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = 0.01f,
                             .max_grad_norm = 1.0f};
}

int optimizer_kind_from_name(const char *name) {
    if (strcmp(name, "lamb") == 0) return OPTIMIZER_LAMB;
    if (strcmp(name, "adamw") == 0) return OPTIMIZER_ADAMW;
    return -1;
}

const char *optimizer_kind_name(OptimizerKind kind) { return kind == OPTIMIZER_LAMB ? "lamb" : "adamw"; }

static int create(Optimizer **out, const OptimizerConfig *c, const BertParamInfo *tensors, int n,
                  const OptimizerShard *shard, BertError *err) {
    *out = NULL;
    if (n < 1) return bert_fail(err, "optimizer: no tensors to optimise");
    if (!(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1 && c->eps > 0 && c->weight_decay >= 0))
        return bert_fail(err, "optimizer: betas must be in [0, 1), eps > 0 and weight decay >= 0");
    size_t numel = 0;
    for (int i = 0; i < n; i++) {
        if (shard && tensors[i].offset != numel)
            return bert_fail(err, "optimizer: sharding needs tensors that tile the parameter vector (%s)", tensors[i].name);
        numel += tensors[i].numel;
    }
    const size_t lo = shard ? shard->lo : 0, hi = shard ? shard->hi : numel;
    if (lo > hi || hi > numel) return bert_fail(err, "optimizer: shard [%zu, %zu) outside %zu parameters", lo, hi, numel);
    Optimizer *o = xcalloc(1, sizeof *o);
    o->cfg = *c, o->tensors = tensors, o->n = n, o->numel = numel, o->lo = lo, o->hi = hi;
    if (shard) o->sharded = true, o->shard = *shard;
    o->offset = xmalloc(sizeof(size_t) * 3 * (size_t)n), o->own_begin = o->offset + n, o->own_end = o->offset + 2 * n;
    size_t flat = 0, state = 0;
    for (int i = 0; i < n; i++) {
        const size_t len = tensors[i].numel;
        o->own_begin[i] = lo > flat ? (lo - flat < len ? lo - flat : len) : 0;
        o->own_end[i] = hi > flat ? (hi - flat < len ? hi - flat : len) : 0;
        if (o->own_end[i] < o->own_begin[i]) o->own_end[i] = o->own_begin[i];
        o->offset[i] = state;
        state += o->own_end[i] - o->own_begin[i], flat += len;
    }
    o->state = xcalloc(2 * (hi - lo) + 1, sizeof(float));
    *out = o;
    return 0;
}

int optimizer_create(Optimizer **out, const OptimizerConfig *c, const BertParamInfo *tensors, int n, BertError *err) {
    return create(out, c, tensors, n, NULL, err);
}

int optimizer_create_sharded(Optimizer **out, const OptimizerConfig *c, const BertParamInfo *tensors, int n,
                             const OptimizerShard *shard, BertError *err) {
    return create(out, c, tensors, n, shard, err);
}

void optimizer_free(Optimizer *o) {
    if (!o) return;
    free(o->offset), free(o->state), free(o->full), free(o);
}

long optimizer_step_count(const Optimizer *o) { return o->steps; }
void optimizer_set_step_count(Optimizer *o, long steps) { o->steps = steps; }
const OptimizerConfig *optimizer_config(const Optimizer *o) { return &o->cfg; }
size_t optimizer_state_bytes(const Optimizer *o) { return 2 * (o->hi - o->lo) * sizeof(float); }

/* Sum of squares of x[0..n) in double, in SUM_LANES interleaved partial sums added in a fixed
 * order: one running sum would be a chain of dependent additions (one per element, scalar);
 * the lanes are independent, so the loop vectorises, and the order is the same on every CPU. */
enum { SUM_LANES = 16 };
static double block_sum_squares(const float *x, size_t n) {
    double lane[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) lane[k] += (double)x[i + k] * x[i + k];
    double s = 0;
    for (int k = 0; k < SUM_LANES; k++) s += lane[k];
    for (; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

/* Sum of squares of x[0..n) in chunks added in order: the same bits for any thread count. */
static double sum_squares(const float *x, size_t n) {
    const size_t chunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    if (chunks <= 1) return block_sum_squares(x, n);
    double total = 0;
    double *partial = xmalloc(sizeof(double) * chunks);
#pragma omp parallel for schedule(static) if (n >= 4 * (size_t)NORM_CHUNK)
    for (size_t c = 0; c < chunks; c++) {
        size_t end = (c + 1) * NORM_CHUNK < n ? (c + 1) * NORM_CHUNK : n;
        partial[c] = block_sum_squares(x + c * NORM_CHUNK, end - c * NORM_CHUNK);
    }
    for (size_t c = 0; c < chunks; c++) total += partial[c];
    free(partial);
    return total;
}

double tensors_grad_norm(const BertParamInfo *tensors, int n) {
    double total = 0;
    for (int i = 0; i < n; i++) total += sum_squares(tensors[i].grad, tensors[i].numel);
    return sqrt(total);
}

void tensors_scale_grads(const BertParamInfo *tensors, int n, float s) {
    for (int i = 0; i < n; i++) {
        float *g = tensors[i].grad;
        const size_t len = tensors[i].numel;
#pragma omp parallel for simd schedule(static) if (len >= 4 * (size_t)NORM_CHUNK)
        for (size_t k = 0; k < len; k++) g[k] *= s;
    }
}

/* LAMB's update of one element: m, v advanced, u = m^ / (sqrt(v^) + eps) + wd w returned. */
static inline float lamb_element(float g, float w, float *m, float *v, float b1, float b2, float eps, float wd,
                                 float clip, float bc1, float bc2) {
    const float grad = g / clip;
    *m = b1 * *m + (1.0f - b1) * grad;
    *v = b2 * *v + (1.0f - b2) * grad * grad;
    return (*m / bc1) / (sqrtf(*v / bc2) + eps) + wd * w;
}

/* LAMB's first stage for one tensor: the moments advanced and ||u||^2 summed over the same
 * chunks, in the same order, as the norms (no buffer for u: the second stage recomputes it
 * from the new moments, which gives the same floats). */
static double lamb_moments(const OptimizerConfig *c, const BertParamInfo *t, size_t begin, size_t len,
                           float *restrict m, float *restrict v, float clip, float bc1, float bc2) {
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps, wd = t->decay ? c->weight_decay : 0.0f;
    const float *restrict g = t->grad + begin, *restrict w = t->data + begin;
    const size_t chunks = (len + NORM_CHUNK - 1) / NORM_CHUNK;
    double *partial = xmalloc(sizeof(double) * (chunks + 1)), total = 0;
#pragma omp parallel for schedule(static) if (len >= 4 * (size_t)NORM_CHUNK)
    for (size_t ch = 0; ch < chunks; ch++) {
        const size_t end = (ch + 1) * NORM_CHUNK < len ? (ch + 1) * NORM_CHUNK : len;
        double lane[SUM_LANES] = {0}, s = 0;   /* lanes as in block_sum_squares: vectorised */
        size_t k = ch * NORM_CHUNK;
        for (; k + SUM_LANES <= end; k += SUM_LANES)
            for (int j = 0; j < SUM_LANES; j++) {
                const size_t e = k + j;
                const float u = lamb_element(g[e], w[e], &m[e], &v[e], b1, b2, eps, wd, clip, bc1, bc2);
                lane[j] += (double)u * u;
            }
        for (int j = 0; j < SUM_LANES; j++) s += lane[j];
        for (; k < end; k++) {
            const float u = lamb_element(g[k], w[k], &m[k], &v[k], b1, b2, eps, wd, clip, bc1, bc2);
            s += (double)u * u;
        }
        partial[ch] = s;
    }
    for (size_t ch = 0; ch < chunks; ch++) total += partial[ch];
    free(partial);
    return total;
}

/* Sums x[0..n) across the processes of a sharded optimizer. */
static void sum_across(Optimizer *o, double *x, int n) {
    if (o->sharded && o->shard.sum) o->shard.sum(o->shard.ctx, x, n);
}

/* LAMB in two passes: the moments and each tensor's ||w||^2, ||u||^2 over this process's
 * part, then (once summed across the processes) the trust ratios and the update. */
static void lamb_step(Optimizer *o, double lr, double grad_norm) {
    const OptimizerConfig *c = &o->cfg;
    const float clip = grad_norm > c->max_grad_norm && c->max_grad_norm > 0 ? (float)(grad_norm / c->max_grad_norm)
                                                                            : 1.0f;
    const float bc1 = (float)(1.0 - pow(c->beta1, (double)o->steps)), bc2 = (float)(1.0 - pow(c->beta2, (double)o->steps));
    const size_t own = o->hi - o->lo;
    double *sq = xcalloc(2 * (size_t)o->n, sizeof(double));   /* ||w||^2 (before the update), ||u||^2 */
    for (int i = 0; i < o->n; i++) {
        const BertParamInfo *t = &o->tensors[i];
        const size_t begin = o->own_begin[i], len = o->own_end[i] - begin;
        float *m = o->state + o->offset[i], *v = o->state + own + o->offset[i];
        sq[2 * i] = sum_squares(t->data + begin, len);
        sq[2 * i + 1] = lamb_moments(c, t, begin, len, m, v, clip, bc1, bc2);
    }
    sum_across(o, sq, 2 * o->n);
    for (int i = 0; i < o->n; i++) {
        const BertParamInfo *t = &o->tensors[i];
        const double w_norm = sqrt(sq[2 * i]), u_norm = sqrt(sq[2 * i + 1]);
        float ratio = (float)lr;
        if (t->decay && c->weight_decay != 0 && w_norm != 0 && u_norm != 0)   /* apex: only where decay != 0 */
            ratio = (float)(lr * (w_norm / u_norm));
        const float eps = c->eps, wd = t->decay ? c->weight_decay : 0.0f;
        const size_t begin = o->own_begin[i], len = o->own_end[i] - begin;
        const float *m = o->state + o->offset[i], *v = o->state + own + o->offset[i];
        float *restrict w = t->data + begin;
#pragma omp parallel for simd schedule(static) if (len >= 4 * (size_t)NORM_CHUNK)
        for (size_t k = 0; k < len; k++) {   /* u again, from the moments just written */
            const float u = (m[k] / bc1) / (sqrtf(v[k] / bc2) + eps) + wd * w[k];
            w[k] -= ratio * u;
        }
    }
    free(sq);
}

static void adamw_step(Optimizer *o, double lr, double grad_norm) {
    const OptimizerConfig *c = &o->cfg;
    /* torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when above */
    const float clip_scale = c->max_grad_norm > 0 && grad_norm > c->max_grad_norm
                                 ? (float)(c->max_grad_norm / (grad_norm + 1e-6)) : 1.0f;
    /* scalars in double, as PyTorch computes them in Python */
    const double bc1 = 1.0 - pow(c->beta1, (double)o->steps), bc2 = 1.0 - pow(c->beta2, (double)o->steps);
    const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2), b1 = c->beta1, b2 = c->beta2,
                eps = c->eps;
    const size_t own = o->hi - o->lo;
    for (int i = 0; i < o->n; i++) {
        const BertParamInfo *t = &o->tensors[i];
        const size_t begin = o->own_begin[i], len = o->own_end[i] - begin;
        float *restrict m = o->state + o->offset[i], *restrict v = o->state + own + o->offset[i];
        float *restrict w = t->data + begin;
        const float *restrict g = t->grad + begin;
        const float decay_factor = t->decay ? (float)(1.0 - lr * c->weight_decay) : 1.0f;
#pragma omp parallel for simd schedule(static) if (len >= 4 * (size_t)NORM_CHUNK)
        for (size_t k = 0; k < len; k++) {
            float grad = g[k] * clip_scale;
            m[k] = m[k] * b1 + grad * (1.0f - b1);
            v[k] = v[k] * b2 + grad * grad * (1.0f - b2);
            w[k] = w[k] * decay_factor - step_size * (m[k] / (sqrtf(v[k]) / bc2_sqrt + eps));
        }
    }
}

double optimizer_step(Optimizer *o, double lr) {
    double norm;
    if (o->sharded) {   /* this process's part of every tensor, summed across the processes */
        double sq = 0;
        for (int i = 0; i < o->n; i++)
            sq += sum_squares(o->tensors[i].grad + o->own_begin[i], o->own_end[i] - o->own_begin[i]);
        sum_across(o, &sq, 1);
        norm = sqrt(sq);
    } else {
        norm = tensors_grad_norm(o->tensors, o->n);
    }
    o->steps++;
    if (o->cfg.kind == OPTIMIZER_LAMB) lamb_step(o, lr, norm);
    else adamw_step(o, lr, norm);
    return norm;
}

/* ---- state files ---- */

static char *state_name(const BertParamInfo *t, const char *suffix) {
    size_t len = strlen(t->name) + strlen(suffix) + 1;
    char *s = xmalloc(len);
    snprintf(s, len, "%s%s", t->name, suffix);
    return s;
}

int optimizer_collect(Optimizer *o) {
    if (!o->sharded) return 0;
    if (o->shard.writer && !o->full) o->full = xmalloc(sizeof(float) * 2 * o->numel + 1);
    const size_t own = o->hi - o->lo;
    o->shard.gather(o->shard.ctx, o->state, o->full);                        /* m */
    o->shard.gather(o->shard.ctx, o->state + own, o->full ? o->full + o->numel : NULL);   /* v */
    return 0;
}

int optimizer_save(Optimizer *o, const char *path, BertError *err) {
    /* the whole state, laid out like the parameters: m of every tensor, then v */
    const float *state = o->sharded ? o->full : o->state;
    if (!state) return bert_fail(err, "optimizer_save: a sharded optimizer's state is saved by the writing process "
                                      "after optimizer_collect");
    const int n = 2 * o->n + 2;
    StWriteTensor *w = xcalloc((size_t)n, sizeof *w);
    char **names = xcalloc((size_t)n, sizeof *names);
    int64_t step = o->steps;
    int32_t kind = (int32_t)o->cfg.kind;
    size_t flat = 0;
    for (int i = 0; i < o->n; i++) {
        const BertParamInfo *t = &o->tensors[i];
        for (int which = 0; which < 2; which++) {
            StWriteTensor *x = &w[2 * i + which];
            x->name = names[2 * i + which] = state_name(t, which ? ".exp_avg_sq" : ".exp_avg");
            x->dtype = ST_F32, x->ndim = t->ndim;
            for (int d = 0; d < t->ndim; d++) x->shape[d] = t->shape[d];
            x->data = state + (which ? o->numel : 0) + flat;
        }
        flat += t->numel;
    }
    w[n - 2] = (StWriteTensor){.name = "optimizer.step", .dtype = ST_I64, .ndim = 1, .shape = {1}, .data = &step};
    w[n - 1] = (StWriteTensor){.name = "optimizer.kind", .dtype = ST_I32, .ndim = 1, .shape = {1}, .data = &kind};
    char hyper[256];
    snprintf(hyper, sizeof hyper, "beta1=%.9g beta2=%.9g eps=%.9g weight_decay=%.9g max_grad_norm=%.9g",
             o->cfg.beta1, o->cfg.beta2, o->cfg.eps, o->cfg.weight_decay, o->cfg.max_grad_norm);
    const char *meta[] = {"optimizer", optimizer_kind_name(o->cfg.kind), "hyperparameters", hyper, NULL};
    int rc = safetensors_write(path, w, n, meta, err);
    for (int i = 0; i < 2 * o->n; i++) free(names[i]);
    free(names), free(w);
    if (o->sharded) free(o->full), o->full = NULL;   /* the writer holds the whole state only to save it */
    return rc;
}

int optimizer_load(Optimizer *o, const char *path, BertError *err) {
    SafeTensors st;
    if (safetensors_open(&st, path, err) != 0) return -1;
    int rc = 0;
    int32_t kind = -1, step32[2] = {0, 0};
    const int64_t one[1] = {1};
    if (safetensors_read_i32(&st, "optimizer.kind", one, 1, &kind, err) != 0 ||
        safetensors_read_i32(&st, "optimizer.step", one, 1, step32, err) != 0) {
        rc = -1;
    } else if (kind != (int32_t)o->cfg.kind) {
        rc = bert_fail(err, "%s holds %s state, not %s", path, kind == OPTIMIZER_LAMB ? "LAMB" : "AdamW",
                       o->cfg.kind == OPTIMIZER_LAMB ? "LAMB" : "AdamW");
    } else if (st.n != 2 * o->n + 2) {
        rc = bert_fail(err, "%s has %d tensors; this model's optimizer state has %d", path, st.n, 2 * o->n + 2);
    }
    /* sharded: each tensor read whole, this process's part kept */
    const size_t own = o->hi - o->lo;
    float *whole = NULL;
    for (int i = 0; rc == 0 && i < o->n; i++) {
        const BertParamInfo *t = &o->tensors[i];
        const size_t begin = o->own_begin[i], len = o->own_end[i] - begin;
        if (o->sharded) whole = xrealloc(whole, sizeof(float) * t->numel + 1);
        for (int which = 0; rc == 0 && which < 2; which++) {
            char *name = state_name(t, which ? ".exp_avg_sq" : ".exp_avg");
            float *mine = o->state + (which ? own : 0) + o->offset[i];
            rc = safetensors_read_f32(&st, name, t->shape, t->ndim, o->sharded ? whole : mine, err);
            if (rc == 0 && o->sharded) memcpy(mine, whole + begin, sizeof(float) * len);
            free(name);
        }
    }
    free(whole);
    if (rc == 0) o->steps = step32[0];
    safetensors_close(&st);
    return rc;
}
