/* HDF5 shard loading: corrupt or crafted files are refused, never read out of bounds. */
#include "data/hdf5_shard.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    PretrainingShard s;
    BertError err;
    if (hdf5_shard_load(fuzz_input_file(data, size, ".hdf5"), &s, &err) == 0) pretraining_shard_free(&s);
    return 0;
}
