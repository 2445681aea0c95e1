/* The gradient reduction of a data-parallel run timed on its own, without the backward it
 * normally hides behind: the model's gradient ranges are reported to train/grad_sync.h in
 * the order bert_backward reports them (the heads, the last layer, ..., the embeddings), all
 * at once, and grad_sync_finish waits for the buckets. Beside it, the same gradient buffer
 * summed by one non-blocking all-reduce (MPI's own algorithm on one call). The bandwidths
 * follow nccl-tests' definitions (algbw = bytes / time; busbw = algbw * 2(P-1)/P for an
 * all-reduce, (P-1)/P for a reduction onto owners), so they compare with a plain
 * MPI_Allreduce loop on the same byte counts (bench/mpi_allreduce_bench.c) and across P. */
#ifndef BERT_TRAIN_SYNC_BENCH_H
#define BERT_TRAIN_SYNC_BENCH_H

#include "model/bert.h"
#include "train/grad_sync.h"

typedef struct {
    int iters, warmup;          /* timed and untimed repetitions, >= 1 and >= 0 */
    GradSyncOptions sync;
} SyncBenchOptions;

typedef struct {
    double seconds_min, seconds_median;   /* slowest rank per repetition, then min / median */
    double grad_bytes;                    /* the fp32 gradient: numel * 4 */
    double wire_bytes;                    /* what each process put into collectives per repetition */
    double algbw_gbs, busbw_gbs;          /* of seconds_min, GB/s = 1e9 B/s, on grad_bytes */
    int buckets;                          /* collectives per repetition */
} SyncBenchTiming;

typedef struct {
    SyncBenchTiming bucketed;   /* grad_sync: buckets as the backward would start them */
    SyncBenchTiming one_call;   /* the whole buffer in one all-reduce (fp32), for comparison */
    int ranges;                 /* ranges reported per repetition (heads + layers + embeddings) */
} SyncBenchResult;

/* Every process of c calls it with a model of the same configuration. */
int sync_bench_run(Comm *c, BertModel *m, const SyncBenchOptions *o, SyncBenchResult *r, BertError *err);

#endif
