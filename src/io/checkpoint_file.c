/* One interface over the three checkpoint readers (io/checkpoint_file.h). */
#include "io/checkpoint_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/pytorch_checkpoint.h"
#include "io/tf_checkpoint.h"

struct CheckpointFile {
    CkptFormat format;
    char path[4096];
    union {
        SafeTensors st;
        PtCheckpoint pt;
        TfCheckpoint tf;
    } u;
};

const char *ckpt_format_name(CkptFormat format) {
    return format == CKPT_SAFETENSORS ? "safetensors" : format == CKPT_PYTORCH ? "PyTorch" : "TensorFlow";
}

/* The format from the first bytes: a zip archive is torch.save's; a TensorBundle is a prefix
 * with an .index table; safetensors begins with its header's length and '{'. */
static int sniff(const char *path, CkptFormat *format, BertError *err) {
    if (tf_checkpoint_sniff(path)) { *format = CKPT_TENSORFLOW; return 0; }
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        size_t n = strlen(path);
        if (n < 6 || strcmp(path + n - 6, ".index"))
            return bert_fail(err, "%s: no such file (nor a TensorFlow checkpoint %s.index)", path, path);
        return bert_fail(err, "%s: cannot open", path);
    }
    unsigned char head[9] = {0};
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    if (got >= 4 && pt_checkpoint_sniff(head, (size_t)got)) { *format = CKPT_PYTORCH; return 0; }
    if (got == 9 && head[8] == '{') { *format = CKPT_SAFETENSORS; return 0; }
    if (got >= 2 && head[0] == 0x80 && head[1] <= 5)
        return bert_fail(err, "%s: a PyTorch file in the legacy (pre-1.6) format: re-save it with torch.save from "
                              "PyTorch 1.6 or later, which writes the zip format bert.c reads", path);
    return bert_fail(err, "%s: not a checkpoint bert.c reads (safetensors, PyTorch .pt/.bin, TensorFlow .index)", path);
}

int ckpt_file_open(CheckpointFile **out, const char *path, BertError *err) {
    *out = NULL;
    CheckpointFile *f = xcalloc(1, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    int rc = sniff(path, &f->format, err);
    if (rc == 0) {
        switch (f->format) {
        case CKPT_SAFETENSORS: rc = safetensors_open(&f->u.st, path, err); break;
        case CKPT_PYTORCH: rc = pt_checkpoint_open(&f->u.pt, path, err); break;
        case CKPT_TENSORFLOW: rc = tf_checkpoint_open(&f->u.tf, path, err); break;
        }
    }
    if (rc != 0) {
        free(f);
        return -1;
    }
    *out = f;
    return 0;
}

void ckpt_file_close(CheckpointFile *f) {
    if (!f) return;
    switch (f->format) {
    case CKPT_SAFETENSORS: safetensors_close(&f->u.st); break;
    case CKPT_PYTORCH: pt_checkpoint_close(&f->u.pt); break;
    case CKPT_TENSORFLOW: tf_checkpoint_close(&f->u.tf); break;
    }
    free(f);
}

CkptFormat ckpt_file_format(const CheckpointFile *f) { return f->format; }
const char *ckpt_file_path(const CheckpointFile *f) { return f->path; }

int ckpt_file_count(const CheckpointFile *f) {
    return f->format == CKPT_SAFETENSORS ? f->u.st.n : f->format == CKPT_PYTORCH ? f->u.pt.n : f->u.tf.n;
}

CkptTensorInfo ckpt_file_tensor(const CheckpointFile *f, int i) {
    switch (f->format) {
    case CKPT_SAFETENSORS: {
        const StTensor *t = &f->u.st.tensors[i];
        return (CkptTensorInfo){t->name, t->dtype, t->ndim, t->shape};
    }
    case CKPT_PYTORCH: {
        const PtTensor *t = &f->u.pt.tensors[i];
        return (CkptTensorInfo){t->name, t->dtype, t->ndim, t->shape};
    }
    default: {
        const TfTensor *t = &f->u.tf.tensors[i];
        return (CkptTensorInfo){t->name, t->dtype, t->ndim, t->shape};
    }
    }
}

int64_t ckpt_tensor_numel(CkptTensorInfo t) {
    int64_t n = 1;
    for (int d = 0; d < t.ndim; d++) n *= t.shape[d];
    return n;
}

int ckpt_file_read_f32(const CheckpointFile *f, int i, float *dst, int64_t n, BertError *err) {
    CkptTensorInfo t = ckpt_file_tensor(f, i);
    if (ckpt_tensor_numel(t) != n)
        return bert_fail(err, "%s: tensor '%s' has %lld elements, %lld expected", f->path, t.name,
                         (long long)ckpt_tensor_numel(t), (long long)n);
    if (t.dtype != ST_F32 && t.dtype != ST_F64 && t.dtype != ST_F16 && t.dtype != ST_BF16)
        return bert_fail(err, "%s: tensor '%s' has dtype %s, expected a floating-point type", f->path, t.name,
                         st_dtype_name(t.dtype));
    if (f->format == CKPT_SAFETENSORS) {
        const StTensor *s = &f->u.st.tensors[i];
        st_to_f32(s->dtype, f->u.st.data + s->begin, n, dst);
        return 0;
    }
    size_t bytes = (size_t)n * st_dtype_size(t.dtype);
    void *raw = t.dtype == ST_F32 ? (void *)dst : xmalloc(bytes ? bytes : 1);
    int rc = f->format == CKPT_PYTORCH ? pt_checkpoint_read(&f->u.pt, i, raw, bytes, err)
                                       : tf_checkpoint_read(&f->u.tf, i, raw, bytes, err);
    if (rc == 0 && raw != dst) st_to_f32(t.dtype, raw, n, dst);
    if (raw != dst) free(raw);
    return rc;
}
