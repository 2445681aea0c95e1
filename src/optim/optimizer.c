/* LAMB and AdamW over a tensor table: see optimizer.h. */
#include "optim/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "kernels/kernels.h"

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
    /* the step's host tables for the kernels' many-tensor calls (k_*_each), n entries each:
     * tensor i's own part of the weights, moments and gradient, its length, its arguments */
    float **w, **m, **v;
    const float **g;
    size_t *len;
    double *sq;          /* 4 n: ||w||^2, ||u||^2 of tensor i at 2 i, 2 i + 1; then the kernels' outputs */
    float *ratio;
    LambArgs *lamb;
    AdamWArgs *adamw;
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
    o->state = k_alloc(sizeof(float) * (2 * (hi - lo) + 1));   /* the moments start at 0 */
    o->w = xmalloc(sizeof(float *) * 3 * (size_t)n), o->m = o->w + n, o->v = o->w + 2 * n;
    o->g = xmalloc(sizeof(const float *) * (size_t)n);
    o->len = xmalloc(sizeof(size_t) * (size_t)n);
    o->sq = xmalloc(sizeof(double) * 4 * (size_t)n);
    o->ratio = xmalloc(sizeof(float) * (size_t)n);
    o->lamb = xmalloc(sizeof(LambArgs) * (size_t)n);
    o->adamw = xmalloc(sizeof(AdamWArgs) * (size_t)n);
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
    free(o->offset), k_free(o->state), free(o->full);
    free(o->w), free(o->g), free(o->len), free(o->sq), free(o->ratio), free(o->lamb), free(o->adamw), free(o);
}

long optimizer_step_count(const Optimizer *o) { return o->steps; }
void optimizer_set_step_count(Optimizer *o, long steps) { o->steps = steps; }
size_t optimizer_state_bytes(const Optimizer *o) { return 2 * (o->hi - o->lo) * sizeof(float); }

/* The sum of the n tensors' sums of squares, in tensor order (one kernel call for them all). */
static double sum_of_squares(const float *const *x, const size_t *len, int n) {
    double *each = xmalloc(sizeof(double) * ((size_t)n + 1)), total = 0;
    k_sum_squares_each(each, x, len, n);
    for (int i = 0; i < n; i++) total += each[i];
    free(each);
    return total;
}

double tensors_grad_norm(const BertParamInfo *tensors, int n) {
    const float **x = xmalloc(sizeof(const float *) * ((size_t)n + 1));
    size_t *len = xmalloc(sizeof(size_t) * ((size_t)n + 1));
    for (int i = 0; i < n; i++) x[i] = tensors[i].grad, len[i] = tensors[i].numel;
    const double total = sum_of_squares(x, len, n);
    free(x), free(len);
    return sqrt(total);
}

void tensors_scale_grads(const BertParamInfo *tensors, int n, float s) {
    for (int i = 0; i < n; i++) k_scale(tensors[i].grad, tensors[i].numel, s);
}

/* Sums x[0..n) across the processes of a sharded optimizer. */
static void sum_across(Optimizer *o, double *x, int n) {
    if (o->sharded && o->shard.sum) o->shard.sum(o->shard.ctx, x, n);
}

/* The step's tables: tensor i's own part of the weights, gradient and moments, and its length. */
static void fill_tables(Optimizer *o) {
    const size_t own = o->hi - o->lo;
    for (int i = 0; i < o->n; i++) {
        const BertParamInfo *t = &o->tensors[i];
        const size_t begin = o->own_begin[i];
        o->w[i] = t->data + begin, o->g[i] = t->grad + begin;
        o->m[i] = o->state + o->offset[i], o->v[i] = o->state + own + o->offset[i];
        o->len[i] = o->own_end[i] - begin;
    }
}

/* A table of writable tensors passed where the kernel only reads them (C converts float ** to
 * const float *const * only with a cast; the same pointers). */
static const float *const *reading(float *const *x) { return (const float *const *)x; }

/* LAMB in two passes: the moments and each tensor's ||w||^2, ||u||^2 over this process's
 * part, then (once summed across the processes) the trust ratios and the update. Each pass is
 * one kernel call over every tensor. */
static void lamb_step(Optimizer *o, double lr, double grad_norm) {
    const OptimizerConfig *c = &o->cfg;
    const float clip = grad_norm > c->max_grad_norm && c->max_grad_norm > 0 ? (float)(grad_norm / c->max_grad_norm)
                                                                            : 1.0f;
    const float bc1 = (float)(1.0 - pow(c->beta1, (double)o->steps)), bc2 = (float)(1.0 - pow(c->beta2, (double)o->steps));
    const int n = o->n;
    fill_tables(o);
    for (int i = 0; i < n; i++)
        o->lamb[i] = (LambArgs){.beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
                                .weight_decay = o->tensors[i].decay ? c->weight_decay : 0.0f, .clip = clip, .bc1 = bc1,
                                .bc2 = bc2};
    double *sq = o->sq, *w_sq = sq + 2 * n, *u_sq = sq + 3 * n;
    k_sum_squares_each(w_sq, reading(o->w), o->len, n);   /* before the update (the moments leave w as it is) */
    k_lamb_moments_each(u_sq, o->m, o->v, o->g, reading(o->w), o->len, o->lamb, n);
    for (int i = 0; i < n; i++) sq[2 * i] = w_sq[i], sq[2 * i + 1] = u_sq[i];   /* one all-reduce, as before */
    sum_across(o, sq, 2 * n);
    for (int i = 0; i < n; i++) {
        const double w_norm = sqrt(sq[2 * i]), u_norm = sqrt(sq[2 * i + 1]);
        o->ratio[i] = (float)lr;
        if (o->tensors[i].decay && c->weight_decay != 0 && w_norm != 0 && u_norm != 0)   /* apex: only where decay != 0 */
            o->ratio[i] = (float)(lr * (w_norm / u_norm));
    }
    k_lamb_update_each(o->w, reading(o->m), reading(o->v), o->len, o->ratio, o->lamb, n);
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
    fill_tables(o);
    for (int i = 0; i < o->n; i++)
        o->adamw[i] = (AdamWArgs){.beta1 = b1, .beta2 = b2, .eps = eps, .clip_scale = clip_scale,
                                  .step_size = step_size, .bc2_sqrt = bc2_sqrt,
                                  .decay_factor = o->tensors[i].decay ? (float)(1.0 - lr * c->weight_decay) : 1.0f};
    k_adamw_update_each(o->w, o->m, o->v, o->g, o->len, o->adamw, o->n);
}

double optimizer_step(Optimizer *o, double lr) {
    double norm;
    if (o->sharded) {   /* this process's part of every tensor, summed across the processes */
        fill_tables(o);
        double sq = sum_of_squares(o->g, o->len, o->n);
        sum_across(o, &sq, 1);
        norm = sqrt(sq);
    } else {
        norm = tensors_grad_norm(o->tensors, o->n);
    }
    return optimizer_step_with_norm(o, lr, norm);
}

double optimizer_step_with_norm(Optimizer *o, double lr, double grad_norm) {
    o->steps++;
    if (o->cfg.kind == OPTIMIZER_LAMB) lamb_step(o, lr, grad_norm);
    else adamw_step(o, lr, grad_norm);
    return grad_norm;
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
    const size_t state_bytes = sizeof(float) * 2 * o->numel;
    const float *state = o->sharded ? o->full : k_map(o->state, state_bytes, true);
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
    if (!o->sharded) k_unmap(o->state, (void *)state, state_bytes, false);
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
    float *whole = NULL, *state = k_map(o->state, sizeof(float) * 2 * own, false);
    for (int i = 0; rc == 0 && i < o->n; i++) {
        const BertParamInfo *t = &o->tensors[i];
        const size_t begin = o->own_begin[i], len = o->own_end[i] - begin;
        if (o->sharded) whole = xrealloc(whole, sizeof(float) * t->numel + 1);
        for (int which = 0; rc == 0 && which < 2; which++) {
            char *name = state_name(t, which ? ".exp_avg_sq" : ".exp_avg");
            float *mine = state + (which ? own : 0) + o->offset[i];
            rc = safetensors_read_f32(&st, name, t->shape, t->ndim, o->sharded ? whole : mine, err);
            if (rc == 0 && o->sharded) memcpy(mine, whole + begin, sizeof(float) * len);
            free(name);
        }
    }
    free(whole);
    k_unmap(o->state, state, sizeof(float) * 2 * own, true);
    /* NaN or infinite moments would make the first update's weights NaN (issue 35, D6) */
    size_t bad = 0;
    const char *first = NULL, *which = NULL;
    for (int i = 0; rc == 0 && i < o->n; i++)
        for (int k = 0; k < 2; k++) {
            const size_t n = k_count_nonfinite(o->state + (k ? own : 0) + o->offset[i], o->own_end[i] - o->own_begin[i]);
            if (n && !first) first = o->tensors[i].name, which = k ? ".exp_avg_sq" : ".exp_avg";
            bad += n;
        }
    if (rc == 0 && bad)
        rc = bert_fail(err, "%s: %zu optimizer moments are NaN or infinite (the first in %s%s): refused", path, bad,
                       first, which);
    if (rc == 0) o->steps = step32[0];
    safetensors_close(&st);
    return rc;
}
