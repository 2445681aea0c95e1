/* One optimizer step's micro-batches, dealt so that every process and every micro-batch has
 * about the same work.
 *
 * bert.c computes only the real tokens of a sequence (unpadded), so a micro-batch's cost is
 * its tokens, not its row count, and real shards differ: some hold only full-length rows,
 * others 13-29% padding. Dealt file by file (NVIDIA's loader), the process reading a full
 * file computes up to 30% more and the others wait for it at every all-reduce.
 *
 * So: each process reads its own k*B rows, as NVIDIA's loader deals the files (the data
 * position and exact resume are the loader's), the rows' lengths are shared (an all-gather of
 * P*k*B ints), and the P*k*B rows of the global batch are dealt into the step's P*k
 * micro-batches of B rows each: the heaviest row first, each to the micro-batch with the
 * least work so far that still has room (longest-processing-time first, with B rows per
 * micro-batch). Micro-batch g goes to process g / k as its micro-batch g mod k; one
 * all-to-all moves the rows (a few KB each, against the hundreds of MB of gradients).
 *
 * The deal depends on the global batch alone, never on P: P processes with k micro-batches
 * each run exactly the micro-batches one process with P*k runs (same rows, same dropout
 * keys, which pre-training draws from the global micro-batch index).
 *
 * A row's work: t (6H + t) for t real tokens, in units of 4H FLOPs per layer: the linear
 * layers' 24 t H^2 and attention's 4 t^2 H (QK^T and PV). The heads' work is the same for
 * every row (20 or 80 masked slots, one NSP row) and every micro-batch holds B rows.
 *
 * `consecutive` turns the deal off: micro-batch m of process r is its rows m*B .. m*B+B-1 in
 * reading order, as NVIDIA's loader gives them. */
#ifndef BERT_TRAIN_STEP_BATCHES_H
#define BERT_TRAIN_STEP_BATCHES_H

#include <stdbool.h>

#include "core/common.h"
#include "model/bert.h"
#include "train/comm.h"
#include "train/dataloader.h"

/* The deal itself: rows 0..n-1 of work[i] into n / per_bin bins of per_bin rows each (n a
 * multiple of per_bin). position[i] = bin * per_bin + slot. Deterministic: ties go to the
 * lower row and the lower bin. */
void deal_by_work(const double *work, int n, int per_bin, int *position);

/* A row's work for a model of hidden size H (see above). */
double row_work(int tokens, int hidden_size);

typedef struct {
    int micro_batch;          /* B rows per micro-batch */
    int accumulation;         /* k micro-batches per process per step */
    int seq_len, max_predictions;
    int hidden_size;
    bool consecutive;         /* no deal: NVIDIA's consecutive micro-batches */
} StepBatchOptions;

typedef struct StepBatches StepBatches;

StepBatches *step_batches_create(const StepBatchOptions *o, int rank, int world);
void step_batches_free(StepBatches *s);

/* Reads this process's k*B rows from `train` (opened with micro_batch = k*B) and deals the
 * step (a collective: every process calls it once per step). -1 on a loader error. */
int step_batches_load(StepBatches *s, DataLoader *train, Comm *comm, BertError *err);

/* Micro-batch m (0 <= m < k) of this process, valid until the next load. */
BertBatch step_batches_micro(const StepBatches *s, int m);

/* The last step's real tokens, over all processes. */
long step_batches_tokens(const StepBatches *s);

/* The last step's work of the busiest process over the mean of the processes' work, as
 * dealt and as it would have been with consecutive micro-batches (1 = even). */
void step_batches_spread(const StepBatches *s, double *dealt, double *consecutive);

#endif
