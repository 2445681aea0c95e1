/* TensorFlow checkpoints (TensorBundle), as Google's BERT releases ship them: `<prefix>.index`,
 * an SSTable (LevelDB's table format, uncompressed) mapping each tensor name to a
 * BundleEntryProto (dtype, shape, shard, offset, size, crc32c), the key "" holding the
 * BundleHeaderProto (shard count, endianness); and `<prefix>.data-NNNNN-of-NNNNN`, the raw
 * little-endian tensor bytes. TF1's Saver and TF2's tf.train.Checkpoint both write it.
 * Every block checksum, varint, handle, shape and byte range is checked at open, so a
 * truncated or crafted file is a one-line error naming the file, never a crash. */
#ifndef BERT_TF_CHECKPOINT_H
#define BERT_TF_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "io/safetensors.h"   /* StDtype, ST_MAX_DIMS, st_dtype_size */

typedef struct {
    char *name;                 /* as stored, e.g. "bert/encoder/layer_0/attention/self/query/kernel" */
    StDtype dtype;              /* DT_FLOAT -> ST_F32, DT_HALF -> F16, DT_BFLOAT16 -> BF16, DT_DOUBLE -> F64, ... */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    /* private */
    int shard;                  /* data file number */
    uint64_t offset, size;      /* byte range in that file (size == numel * dtype size) */
    uint32_t crc32c;            /* CRC-32C of those bytes, unmasked */
} TfTensor;

typedef struct {
    TfTensor *tensors;          /* in the index's (sorted) order */
    int n;
    /* private */
    int num_shards;
    char *prefix;
    char *index_path;
} TfCheckpoint;

/* path: the prefix ("dir/bert_model.ckpt") or the index file ("dir/bert_model.ckpt.index").
 * Tensors of dtypes a StDtype cannot hold (strings, such as TF2's _CHECKPOINTABLE_OBJECT_GRAPH,
 * variants, resources, complex, quantized) are left out; partitioned variables are an error. */
int tf_checkpoint_open(TfCheckpoint *ck, const char *path, BertError *err);
/* Writes tensor i as numel * st_dtype_size bytes, row-major, little-endian, after checking the
 * entry's crc32c. dst_bytes must be exactly that size. */
int tf_checkpoint_read(const TfCheckpoint *ck, int i, void *dst, size_t dst_bytes, BertError *err);
void tf_checkpoint_close(TfCheckpoint *ck);
/* 1 if `path` names a TensorBundle: `path`.index exists, or path ends in ".index" and is an
 * SSTable (ends with the table magic number). */
int tf_checkpoint_sniff(const char *path);

#endif
