/* Gradients averaged across the processes of a data-parallel run, hidden behind the
 * backward pass as PyTorch DDP and Horovod hide them.
 *
 * The model reports each range of gradients as soon as its backward has finished it
 * (bert_set_grad_ready_hook: the heads, the last layer, ..., the embeddings); ranges are
 * gathered into buckets of bucket_floats (DDP's 25 MiB by default) and each bucket's sum
 * starts at once as a non-blocking MPI collective, progressed at every later report while
 * the backward computes the layers below. grad_sync_finish starts what is left (the
 * embeddings: the last gradients to be finished), waits for everything and divides by the
 * number of processes; the time it waits is the communication the backward did not hide.
 *
 * Two ways to reduce:
 *  - all-reduce: every process gets the mean of every gradient;
 *  - to owners (optimizer sharding, ZeRO stage 1): the parameters are cut into one
 *    contiguous part per process (grad_sync_parts); a bucket never crosses a part, and its
 *    sum goes only to the part's owner, which then updates that part alone.
 * On a 16-bit wire (NVIDIA's --allreduce_post_accumulation_fp16, or bf16) the buckets travel
 * rounded to 16 bits: half the bytes.
 *
 * Armed once per micro-batch (each micro-batch's gradients averaged, DDP's default) or only
 * for the last one (--allreduce_post_accumulation: once per optimizer step). Reducing the
 * accumulated buffer after every micro-batch is right because what earlier micro-batches
 * added is already the same on every process: the mean of (A + g_r) is A + mean(g_r). */
#ifndef BERT_TRAIN_GRAD_SYNC_H
#define BERT_TRAIN_GRAD_SYNC_H

#include <stdbool.h>
#include <stddef.h>

#include "train/comm.h"

typedef struct {
    size_t bucket_floats;     /* > 0 */
    enum CommWire wire;
    bool to_owners;           /* ZeRO-1: reduce each part onto its owner only */
} GradSyncOptions;

typedef struct GradSync GradSync;

/* Over grads[0..numel) (the model's gradient allocation). */
GradSync *grad_sync_create(Comm *c, float *grads, size_t numel, const GradSyncOptions *o);
void grad_sync_free(GradSync *s);

/* Rank r owns floats [parts[r], parts[r + 1]); size + 1 entries; equal parts. */
const size_t *grad_sync_parts(const GradSync *s);

/* The next backward's ranges will be reduced as they are reported. */
void grad_sync_arm(GradSync *s);
/* The model's hook (BertGradReadyFn): grads [offset, offset + count) are final. */
void grad_sync_ready(void *s, size_t offset, size_t count);
/* Starts the ranges not yet started, waits for all, and leaves the mean across processes
 * (every gradient, or the owned part when reducing to owners). Returns the seconds spent
 * here: the communication the backward did not hide. A no-op when not armed. */
double grad_sync_finish(GradSync *s);

/* Bytes this process sent into collectives so far (what the wire carried, per process). */
double grad_sync_bytes(const GradSync *s);
/* Collectives (buckets) started so far. */
long grad_sync_collectives(const GradSync *s);

#endif
