/* PyTorch checkpoints (torch.save zip archives): any file opens with every tensor's view
 * inside its storage and readable, or fails with a one-line message; nothing is executed.
 *
 * An input starting "PK" is the archive itself. Any other input is a data.pkl, put into an
 * archive with storage entries archive/data/0 .. archive/data/7 of 64 bytes each: a mutated
 * pickle inside a real archive would mostly fail the zip's CRC check and never reach the
 * unpickler. The *.pkl seeds name only such storages. */
#include <stdio.h>
#include <string.h>
#include <zip.h>

#include "fuzz_util.h"
#include "io/pytorch_checkpoint.h"

static const char *wrap_pickle(const uint8_t *data, size_t size) {
    static char path[512];
    static unsigned char storage[64];
    fuzz_temp_path(path, sizeof path, "-wrapped.pt");
    for (int i = 0; i < 64; i++) storage[i] = (unsigned char)(i * 37 + 11);
    int code;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &code);
    if (!z) abort();
    zip_source_t *s = zip_source_buffer(z, data, size, 0);
    if (!s || zip_file_add(z, "archive/data.pkl", s, ZIP_FL_OVERWRITE) < 0) abort();
    for (int k = 0; k < 8; k++) {
        char name[32];
        snprintf(name, sizeof name, "archive/data/%d", k);
        s = zip_source_buffer(z, storage, sizeof storage, 0);
        zip_int64_t idx = s ? zip_file_add(z, name, s, ZIP_FL_OVERWRITE) : -1;
        if (idx < 0 || zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0)) abort();
    }
    if (zip_close(z)) abort();
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    PtCheckpoint ck;
    BertError err;
    const char *path = size >= 2 && !memcmp(data, "PK", 2) ? fuzz_input_file(data, size, ".pt") : wrap_pickle(data, size);
    if (pt_checkpoint_open(&ck, path, &err) != 0) {
        if (strchr(err.msg, '\n')) abort();
        return 0;
    }
    for (int i = 0; i < ck.n; i++) {
        const PtTensor *t = &ck.tensors[i];
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        if (numel < 0) abort();
        if (numel > (1 << 20)) continue;   /* an expanded (stride 0) view may be large: not read */
        size_t bytes = (size_t)numel * st_dtype_size(t->dtype);
        void *dst = malloc(bytes + 1);
        /* checked at open: must read, unless the archive's stored bytes are damaged (zip's CRC,
         * known only when the data is read; a mutated archive found it, issue 35 D25 run) */
        if (pt_checkpoint_read(&ck, i, dst, bytes, &err) != 0 && (!strstr(err.msg, "CRC error") || strchr(err.msg, '\n')))
            abort();
        free(dst);
    }
    pt_checkpoint_close(&ck);
    return 0;
}
