/* safetensors: 8-byte little-endian header length, a JSON header
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
 * then the raw little-endian tensor bytes. Read with mmap; every offset, shape and size is
 * validated so a truncated or corrupt file is an error naming the tensor, never a crash. */
#ifndef BERT_SAFETENSORS_H
#define BERT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

typedef enum { ST_F64, ST_F32, ST_F16, ST_BF16, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL } StDtype;

#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t begin, end;  /* byte range inside the data section */
} StTensor;

typedef struct {
    StTensor *tensors;
    int n;
    int *sorted;                /* tensor indices in name order (look-ups, duplicates) */
    const unsigned char *data;  /* start of the data section */
    size_t data_len;
    void *map;                  /* the whole mapped file */
    size_t map_len;
    char path[1024];
} SafeTensors;

const char *st_dtype_name(StDtype d);
size_t st_dtype_size(StDtype d);
int64_t st_numel(const StTensor *t);
/* n elements of a floating-point dtype (F32, F64, F16, BF16; little-endian, unaligned) as
 * float32: exact for all but F64. -1 for another dtype. */
int st_to_f32(StDtype dtype, const void *src, int64_t n, float *dst);

int safetensors_open(SafeTensors *st, const char *path, BertError *err);
void safetensors_close(SafeTensors *st);
const StTensor *safetensors_find(const SafeTensors *st, const char *name);

/* Copies tensor `name` into dst as float32 after checking it exists and has exactly the
 * expected shape (F32, F16, BF16 and F64 are converted). Errors name the tensor. */
int safetensors_read_f32(const SafeTensors *st, const char *name, const int64_t *shape, int ndim,
                         float *dst, BertError *err);
/* Same for integer tensors (I64, I32, I16, I8, U8, BOOL) into int32. */
int safetensors_read_i32(const SafeTensors *st, const char *name, const int64_t *shape, int ndim,
                         int32_t *dst, BertError *err);

typedef struct {
    const char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
} StWriteTensor;

/* Writes the tensors (in the given order) atomically. metadata: NULL or a NULL-terminated
 * list of key, value, key, value, ... strings stored under "__metadata__". */
int safetensors_write(const char *path, const StWriteTensor *tensors, int n, const char *const *metadata,
                      BertError *err);

#endif
