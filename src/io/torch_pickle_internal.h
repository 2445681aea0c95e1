/* The restricted unpickler behind io/pytorch_checkpoint.h (for io/ alone).
 *
 * It interprets the pickle of a torch.save archive (data.pkl) without executing anything:
 * the pickle's values become a tree of PkValue, calls are allowed only to the few functions
 * a state dict needs (OrderedDict, torch._utils' tensor rebuilders), whose effect is done
 * here, and every other global is refused by name. Storages (BINPERSID) and tensors become
 * entries of the result's tables, each checked against the others (shape, strides, offset
 * inside the storage); the storages' zip entries are the caller's to check. */
#ifndef BERT_IO_TORCH_PICKLE_INTERNAL_H
#define BERT_IO_TORCH_PICKLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "io/safetensors.h"

typedef enum {
    PK_NONE, PK_BOOL, PK_INT, PK_FLOAT, PK_STR, PK_BYTES, PK_TUPLE, PK_LIST, PK_DICT,
    PK_GLOBAL, PK_STORAGE, PK_TENSOR
} PkKind;

typedef struct PkValue PkValue;
struct PkValue {
    PkKind kind;
    int64_t i;              /* BOOL, INT; GLOBAL: which one; STORAGE, TENSOR: table index */
    double f;               /* FLOAT */
    const char *s;          /* STR, BYTES: inside the pickle's bytes, `len` long */
    size_t len;
    PkValue **items;        /* TUPLE, LIST; DICT: key, value, key, value, ... */
    size_t n, cap;
};

typedef struct {
    const char *key;        /* the zip entry's name under <prefix>/data/ (inside the pickle) */
    size_t key_len;
    StDtype dtype;
    int64_t numel;          /* elements of the storage, as the pickle says */
} PkStorage;

typedef struct {
    int storage;
    int64_t offset;         /* in elements of the storage */
    int ndim;
    int64_t shape[ST_MAX_DIMS], stride[ST_MAX_DIMS];
    int64_t numel;
} PkTensor;

typedef struct PkBlock PkBlock;   /* the values' allocation (private) */

typedef struct {
    PkValue *root;          /* what STOP returned */
    PkStorage *storages;
    int n_storages;
    PkTensor *tensors;
    int n_tensors;
    PkBlock *blocks;
} PkResult;

/* Interprets pickle bytes [data, data + len). Errors start with `path`. The result borrows
 * the bytes (strings point into them); free it with pk_free. */
int pk_unpickle(const unsigned char *data, size_t len, const char *path, PkResult *out, BertError *err);
void pk_free(PkResult *r);

/* The dict's value for a string key, or NULL. */
const PkValue *pk_dict_get(const PkValue *dict, const char *key);
/* "a dict", "an int", "None", ...: for messages. */
const char *pk_kind_name(PkKind k);

#endif
