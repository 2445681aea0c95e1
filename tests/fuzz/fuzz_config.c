/* config.json parsing: any bytes give a config or a clear error. */
#include "fuzz_util.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    BertConfig c;
    BertError err;
    bert_config_load(fuzz_input_file(data, size, ".json"), &c, &err);
    return 0;
}
