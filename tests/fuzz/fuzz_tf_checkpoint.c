/* TensorFlow checkpoints: any index, with any data file beside it, opens with every tensor's
 * byte range inside its data file, or fails clearly; every listed tensor reads (its crc32c may
 * fail) without a crash. A checkpoint is two files, so the input is split: a 4-byte
 * little-endian length, that many bytes of .index, the rest the data shard. */
#include <string.h>

#include "fuzz_util.h"
#include "io/tf_checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    size_t index_len = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (index_len > size - 4) index_len = size - 4;
    const uint8_t *index = data + 4, *shard = index + index_len;
    const size_t shard_len = size - 4 - index_len;
    char prefix[512], path[560];
    fuzz_temp_path(prefix, sizeof prefix, ".ckpt");
    snprintf(path, sizeof path, "%s.data-00000-of-00001", prefix);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (shard_len) fwrite(shard, 1, shard_len, f);
    fclose(f);
    snprintf(path, sizeof path, "%s.index", prefix);
    f = fopen(path, "wb");
    if (!f) abort();
    if (index_len) fwrite(index, 1, index_len, f);
    fclose(f);

    TfCheckpoint ck;
    BertError err;
    if (tf_checkpoint_open(&ck, prefix, &err) == 0) {
        for (int i = 0; i < ck.n; i++) {
            const TfTensor *t = &ck.tensors[i];
            if (t->shard != 0 || t->offset + t->size > shard_len) abort();   /* one shard, checked at open */
            void *buf = malloc(t->size + 1);
            tf_checkpoint_read(&ck, i, buf, t->size, &err);
            free(buf);
        }
        tf_checkpoint_close(&ck);
    }
    return 0;
}
