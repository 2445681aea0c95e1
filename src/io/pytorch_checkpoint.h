/* PyTorch checkpoints: the zip archives torch.save writes (torch >= 1.6), read without
 * executing anything from the file.
 *
 * The archive holds <prefix>/data.pkl (a pickle of the saved object, whose tensors name their
 * storages by persistent id), <prefix>/data/<key> (each storage's raw bytes) and, from newer
 * torch, <prefix>/byteorder. The pickle is read by a restricted unpickler
 * (torch_pickle_internal.h) that knows dicts, lists, tuples, strings, numbers, None,
 * OrderedDict and torch's tensor and storage rebuilders, and refuses every other global by
 * name: a pickle that asks for os.system is an error, never a call.
 *
 * The tensors listed are the state dict's: the saved object itself when it is a dict of
 * tensors (HuggingFace's pytorch_model.bin), else its entry "model" or "state_dict"
 * (NVIDIA's {'model': state_dict, 'optimizer': ..., 'epoch': ..., 'files': [...]}). Other
 * entries are parsed (and checked) but not listed. Tensors may share a storage (tied
 * weights) and may be strided views of it. Not thread-safe: one reader at a time. */
#ifndef BERT_IO_PYTORCH_CHECKPOINT_H
#define BERT_IO_PYTORCH_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "io/safetensors.h"   /* StDtype, ST_MAX_DIMS, st_dtype_size */

typedef struct {
    char *name;                 /* state-dict key, e.g. "bert.embeddings.word_embeddings.weight" */
    StDtype dtype;              /* F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    /* private: */
    int storage;                /* index into the checkpoint's storages */
    int64_t offset;             /* first element, in the storage's elements */
    int64_t stride[ST_MAX_DIMS];
    int64_t numel;
} PtTensor;

typedef struct PtStorage PtStorage;

typedef struct {
    PtTensor *tensors;
    int n;
    /* private: */
    void *zip;                  /* zip_t */
    PtStorage *storages;
    int n_storages;
    char path[1024];
} PtCheckpoint;

int pt_checkpoint_open(PtCheckpoint *ck, const char *path, BertError *err);
/* Writes tensor i as numel * st_dtype_size(dtype) bytes, row-major contiguous, little-endian
 * (gathers strided views, honours storage_offset). dst_bytes must be at least that. */
int pt_checkpoint_read(const PtCheckpoint *ck, int i, void *dst, size_t dst_bytes, BertError *err);
void pt_checkpoint_close(PtCheckpoint *ck);
/* 1 if the file starts like a zip archive (PK\3\4) — used for format sniffing. */
int pt_checkpoint_sniff(const unsigned char *head, size_t n);

#endif
