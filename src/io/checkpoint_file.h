/* A checkpoint's named tensors, whichever format holds them: safetensors (io/safetensors.h),
 * PyTorch's torch.save zip archives (io/pytorch_checkpoint.h: NVIDIA's .pt, HuggingFace's
 * pytorch_model.bin) or TensorFlow's TensorBundle (io/tf_checkpoint.h: Google's
 * bert_model.ckpt). The format is told by the content, never by the file's name. Names are
 * as stored: mapping them to a model's is the model's business (model/bert_weights.c). */
#ifndef BERT_CHECKPOINT_FILE_H
#define BERT_CHECKPOINT_FILE_H

#include <stdint.h>

#include "core/common.h"
#include "io/safetensors.h"

typedef enum { CKPT_SAFETENSORS, CKPT_PYTORCH, CKPT_TENSORFLOW } CkptFormat;

typedef struct {
    const char *name;
    StDtype dtype;
    int ndim;
    const int64_t *shape;
} CkptTensorInfo;

typedef struct CheckpointFile CheckpointFile;

/* path: a safetensors file, a torch.save file, or a TensorFlow checkpoint's prefix or its
 * .index file. */
int ckpt_file_open(CheckpointFile **out, const char *path, BertError *err);
void ckpt_file_close(CheckpointFile *f);
CkptFormat ckpt_file_format(const CheckpointFile *f);
const char *ckpt_format_name(CkptFormat format);   /* "safetensors", "PyTorch", "TensorFlow" */
const char *ckpt_file_path(const CheckpointFile *f);
int ckpt_file_count(const CheckpointFile *f);
CkptTensorInfo ckpt_file_tensor(const CheckpointFile *f, int i);
int64_t ckpt_tensor_numel(CkptTensorInfo t);
/* Tensor i as n float32s, row-major (n must be its element count; a floating-point dtype). */
int ckpt_file_read_f32(const CheckpointFile *f, int i, float *dst, int64_t n, BertError *err);

#endif
