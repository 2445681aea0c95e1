/* Vocabulary files: any bytes load or fail clearly. */
#include "fuzz_util.h"
#include "text/vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Vocab *v;
    BertError err;
    if (vocab_load(&v, fuzz_input_file(data, size, ".txt"), &err) == 0) vocab_free(v);
    return 0;
}
