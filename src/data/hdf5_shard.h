/* Pre-training shards in the HDF5 layout NVIDIA's PyTorch BERT recipe reads
 * (DeepLearningExamples/PyTorch/LanguageModeling/BERT, create_pretraining_data.py and
 * run_pretraining.py), N instances per file:
 *
 *   input_ids             int32  N x max_seq_length        (0-padded)
 *   input_mask            int8   N x max_seq_length        (1 for real tokens)
 *   segment_ids           int8   N x max_seq_length
 *   masked_lm_positions   int32  N x max_predictions_per_seq (0-padded)
 *   masked_lm_ids         int32  N x max_predictions_per_seq (0-padded)
 *   next_sentence_labels  int8   N                         (1 = random next)
 *
 * every dataset chunked and gzip-compressed (level 1; the int32 datasets also through
 * HDF5's byte-shuffle filter, which h5py and every HDF5 reader undo transparently).
 * Chunks are compressed with ISA-L's igzip by the calling thread and stored with
 * H5Dwrite_chunk, so shards written from several threads compress in parallel;
 * libhdf5's global lock only covers the I/O. The file is written under a temporary
 * name and renamed when complete. */
#ifndef BERT_HDF5_SHARD_H
#define BERT_HDF5_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "data/pretraining.h"

typedef struct Hdf5ShardWriter Hdf5ShardWriter;

/* Opens a temporary beside path (core/common.h: atomic_tmp_name) for exactly n_instances rows. */
int hdf5_shard_create(Hdf5ShardWriter **out, const char *path, size_t n_instances,
                      int max_seq_length, int max_predictions_per_seq, BertError *err);
/* Appends the next row (pads it). Fails on a shape mismatch or a write error. */
int hdf5_shard_append(Hdf5ShardWriter *w, const Instance *inst, BertError *err);
/* Flushes, closes and renames the file into place; frees w in every case. Fails if
 * fewer rows than announced were appended. */
int hdf5_shard_finish(Hdf5ShardWriter *w, BertError *err);
/* Closes and deletes the temporary file; frees w. */
void hdf5_shard_abort(Hdf5ShardWriter *w);

/* Writing chunks from several threads: each thread fills its own Hdf5Chunk with the
 * rows of chunk i (rows [i * chunk_rows, ...), in order) and stores it; compression runs
 * on the calling thread, only the file write is serialised. Chunks may be stored in any
 * order; every chunk but the last must be full. Do not mix with hdf5_shard_append. */
typedef struct Hdf5Chunk Hdf5Chunk;
size_t hdf5_shard_chunk_rows(const Hdf5ShardWriter *w);
Hdf5Chunk *hdf5_chunk_new(const Hdf5ShardWriter *w);
void hdf5_chunk_free(Hdf5Chunk *c);
int hdf5_chunk_add(const Hdf5ShardWriter *w, Hdf5Chunk *c, const Instance *inst, BertError *err);
int hdf5_shard_store_chunk(Hdf5ShardWriter *w, Hdf5Chunk *c, size_t chunk_index, BertError *err);

/* Whether libhdf5 was built thread-safe (Debian's is). If not, shard files must not be
 * created or closed from several threads at once. */
bool hdf5_library_threadsafe(void);

/* A whole shard in memory (what NVIDIA's loader does with each file). */
typedef struct {
    size_t n;
    int max_seq_length, max_predictions_per_seq;
    int32_t *input_ids;          /* n x max_seq_length */
    int8_t *input_mask, *segment_ids;
    int32_t *masked_lm_positions, *masked_lm_ids; /* n x max_predictions_per_seq */
    int8_t *next_sentence_labels;                 /* n */
} PretrainingShard;

/* Reads and validates a shard (dataset names, ranks, integer types, matching shapes). */
int hdf5_shard_load(const char *path, PretrainingShard *out, BertError *err);
void pretraining_shard_free(PretrainingShard *s);

/* The values a trainer relies on: ids within the vocabulary, masks and segments 0/1, masked
 * positions within the sequence, NSP labels 0/1; and the shape, when max_seq_length /
 * max_predictions are > 0. Errors name the file (path) and the row. */
int pretraining_shard_validate(const PretrainingShard *s, const char *path, int max_seq_length, int max_predictions,
                               int vocab_size, BertError *err);

/* hdf5_shard_load + pretraining_shard_validate in a child process, so that libhdf5 crashing
 * on a corrupt file (it can: tests/fuzz/known/) becomes a message naming the file instead of
 * taking the caller down. *rows (if non-NULL) gets the shard's row count. Call it before the
 * process starts OpenMP threads where possible (the child uses none). */
int hdf5_shard_check(const char *path, int max_seq_length, int max_predictions, int vocab_size, size_t *rows,
                     BertError *err);

/* hdf5_shard_check on every file list_dir_files finds in dir (names containing name_filter
 * and ending in suffix; either may be NULL), in name order. Each bad file's message goes to
 * on_bad (if non-NULL). Returns the number of bad files, or -1 (err) when the folder cannot
 * be read; *files and *rows count what was checked and the good files' sequences. */
typedef struct { long files, bad; size_t rows; } ShardCheck;
long hdf5_check_shard_folder(const char *dir, const char *name_filter, const char *suffix, int max_seq_length,
                             int max_predictions, int vocab_size, ShardCheck *out,
                             void (*on_bad)(const char *msg, void *ctx), void *ctx, BertError *err);

#endif
