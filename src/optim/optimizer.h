/* Optimizers over a set of parameter tensors (the model's BertParamInfo table): LAMB as
 * NVIDIA's BERT recipe runs it (apex FusedLAMB with its defaults) and AdamW. The optimizer
 * owns its state: the step count and the two moments of every tensor in one allocation laid
 * out like the parameters, saved to and restored from a safetensors file for checkpoints.
 *
 * LAMB (apex csrc/multi_tensor_lamb.cu, read for its semantics), per step t:
 *   clip  = max(||g||_global / max_grad_norm, 1)       g' = g / clip
 *   m = b1 m + (1 - b1) g'     v = b2 v + (1 - b2) g'^2
 *   u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * w      (decoupled decay)
 *   w -= lr * r * u,  r = ||w|| / ||u|| per tensor (1 where either norm is 0), and r = 1
 *        for tensors without weight decay (biases, LayerNorm): apex applies the trust ratio
 *        only where decay != 0 unless use_nvlamb is set, which the recipe does not set.
 * AdamW (torch.optim.AdamW, the recipe's fine-tuning optimizer):
 *   w *= 1 - lr wd;  w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 *   with the gradient clipped to max_grad_norm first when max_grad_norm > 0 (as the
 *   fine-tuning scripts call clip_grad_norm_).
 * Weight decay applies to tensors whose `decay` flag is set (not biases or LayerNorm).
 * Every reduction (norms) is ordered the same way for any thread count. */
#ifndef BERT_OPTIM_OPTIMIZER_H
#define BERT_OPTIM_OPTIMIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"
#include "model/bert.h"

typedef enum { OPTIMIZER_LAMB, OPTIMIZER_ADAMW } OptimizerKind;

typedef struct {
    OptimizerKind kind;
    float beta1, beta2, eps, weight_decay;
    float max_grad_norm;   /* LAMB: 1.0 (apex's default); AdamW: <= 0 for no clipping */
} OptimizerConfig;

typedef struct Optimizer Optimizer;

/* NVIDIA's settings: LAMB b1 0.9, b2 0.999, eps 1e-6, decay 0.01, clip 1.0; AdamW the same
 * betas with eps 1e-6, decay 0.01, clip 1.0. */
OptimizerConfig optimizer_defaults(OptimizerKind kind);
/* "lamb" / "adamw" -> kind; -1 for anything else. */
int optimizer_kind_from_name(const char *name);
const char *optimizer_kind_name(OptimizerKind kind);

/* Over the n tensors of `tensors` (views stay owned by the caller and must outlive the
 * optimizer); the moments start at zero and the step count at 0. */
int optimizer_create(Optimizer **out, const OptimizerConfig *c, const BertParamInfo *tensors, int n, BertError *err);

/* Optimizer state sharded across the processes of a data-parallel run (ZeRO stage 1, as
 * llm.c does it): this process holds the moments of floats [lo, hi) of the flat parameter
 * vector (the tensors' offsets, which must tile it) and updates only those parameters; the
 * caller has reduced their gradients here and gathers the updated parameters afterwards.
 * What needs every part (the global gradient norm, LAMB's per-tensor ||w|| and ||u||) is
 * summed across the processes by `sum`; `gather` collects each process's [lo, hi) floats
 * into `full` (numel floats) on the writing process (full is NULL elsewhere). Results equal
 * the unsharded optimizer's up to the order of the norms' float64 sums. */
typedef struct {
    size_t lo, hi;
    bool writer;   /* this process writes the state file */
    void *ctx;
    void (*sum)(void *ctx, double *x, int n);
    void (*gather)(void *ctx, const float *mine, float *full);
} OptimizerShard;
int optimizer_create_sharded(Optimizer **out, const OptimizerConfig *c, const BertParamInfo *tensors, int n,
                             const OptimizerShard *shard, BertError *err);
void optimizer_free(Optimizer *o);

/* One update with learning rate lr from the tensors' gradients (left as they are).
 * Returns the global gradient norm before clipping (NaN/inf if a gradient is). */
double optimizer_step(Optimizer *o, double lr);
/* The same update when the caller has just computed the gradient's global norm the way
 * optimizer_step does (tensors_grad_norm over every tensor, unsharded): no second pass. */
double optimizer_step_with_norm(Optimizer *o, double lr, double grad_norm);

long optimizer_step_count(const Optimizer *o);
/* NVIDIA's phase 2 restarts the count (the bias corrections) while keeping the moments. */
void optimizer_set_step_count(Optimizer *o, long steps);
size_t optimizer_state_bytes(const Optimizer *o);   /* this process's */

/* The state as safetensors: "<param>.exp_avg", "<param>.exp_avg_sq" for every tensor, the
 * step count and the configuration in the header's metadata. Written atomically. Loading
 * checks every name and shape against this optimizer's tensors and its kind. The file is
 * the same sharded or not (a sharded optimizer loads its part), so a run can resume with
 * another number of processes. Sharded, every process calls optimizer_collect first (it
 * gathers the parts on the writer, which alone then calls optimizer_save). */
int optimizer_collect(Optimizer *o);
int optimizer_save(Optimizer *o, const char *path, BertError *err);
int optimizer_load(Optimizer *o, const char *path, BertError *err);   /* NaN or infinite moments: refused */

/* The global L2 norm of the tensors' gradients (or parameters), summed in float64 in a fixed
 * order of fixed-size chunks, so the result is the same for any thread count. */
double tensors_grad_norm(const BertParamInfo *tensors, int n);
/* Multiplies every gradient by s (e.g. 1/accumulation steps). */
void tensors_scale_grads(const BertParamInfo *tensors, int n, float s);

#endif
