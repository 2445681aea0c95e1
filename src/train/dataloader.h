/* Micro-batches for training and evaluation from a folder of HDF5 shards in NVIDIA's layout
 * (data/hdf5_shard.h), the way NVIDIA's run_pretraining.py reads them, on the CPU:
 *
 *  - files: those whose name contains `name_filter` ("training" / "test"), sorted, then for
 *    training shuffled each epoch exactly as random.Random(seed + epoch).shuffle(files)
 *    (CPython's generator, data/pyrandom.h), as NVIDIA does;
 *  - processes: rank r of W takes, in epoch order, files (k W + r) mod N for k = 0 .. ceil(N/W)-1:
 *    disjoint and complete when W divides N; otherwise (and when N < W) some files are read
 *    twice in an epoch, so that every rank reads the same number of files (ranks stay in
 *    lock step for the all-reduce);
 *  - sequences: within a file, training reads them in a random order drawn from (seed,
 *    epoch, file) with the counter-based RNG (NVIDIA: a RandomSampler per file); micro-batches
 *    run on across file ends, so every micro-batch is full;
 *  - labels: as NVIDIA's pretraining_dataset: the masked slots up to the first position 0
 *    carry their ids, the rest are unused (-1); int8 arrays widened to int32;
 *  - dynamic masking (LDDL / RoBERTa; not in NVIDIA's PyTorch recipe): the stored masks are
 *    undone and new ones drawn each time a sequence is read, Google's way (15% of the tokens,
 *    at least 1, at most max_predictions; never [CLS] or [SEP]; 80% [MASK], 10% a random
 *    token, 10% unchanged; positions ascending), from (seed, epoch, file, row). The [MASK]
 *    id is learnt from the shard (the input id most often found at masked positions);
 *  - a background thread loads and checks the next file while the current one is used, so
 *    memory holds two files at most, whatever the corpus size;
 *  - the position (epoch, file k of the epoch, offset in it) is saved in checkpoints and
 *    restored exactly.
 * Every file is checked when loaded: its shapes against max_seq_length/max_predictions,
 * ids below vocab_size, positions inside the sequence, 0/1 masks, segments and labels. A bad
 * file stops the run with a message naming it. */
#ifndef BERT_TRAIN_DATALOADER_H
#define BERT_TRAIN_DATALOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"
#include "model/bert.h"

typedef struct {
    const char *dir;
    const char *name_filter;     /* "training" or "test" */
    int micro_batch;
    int max_seq_length, max_predictions;
    int vocab_size;
    uint64_t seed;
    bool training;               /* shuffle files and rows, loop over epochs; else one ordered pass */
    bool dynamic_masking;
    int rank, world_size;
} LoaderOptions;

typedef struct {
    long epoch;
    int file;        /* index into this rank's file order of the epoch */
    long offset;     /* next row in that file's order */
} LoaderPosition;

typedef struct DataLoader DataLoader;

int loader_open(DataLoader **out, const LoaderOptions *o, BertError *err);
void loader_close(DataLoader *l);

/* The next micro-batch: 1 with *batch filled (its arrays stay valid until the next call),
 * 0 at the end of an evaluation pass, -1 on an error (a bad or unreadable file). */
int loader_next(DataLoader *l, BertBatch *batch, BertError *err);

/* Where the next sequence comes from; loader_seek goes back there (checkpoint resume). */
LoaderPosition loader_position(const DataLoader *l);
int loader_seek(DataLoader *l, const LoaderPosition *p, BertError *err);
/* Back to the start of an evaluation pass. */
int loader_rewind(DataLoader *l, BertError *err);

int loader_file_count(const DataLoader *l);        /* files in the folder that match */

#endif
