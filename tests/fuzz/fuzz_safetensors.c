/* safetensors headers: any file opens with every tensor inside the data, or fails clearly. */
#include <string.h>

#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SafeTensors st;
    BertError err;
    if (safetensors_open(&st, fuzz_input_file(data, size, ".safetensors"), &err) == 0) {
        for (int i = 0; i < st.n; i++)   /* every range the header claims is readable */
            if (st.tensors[i].end > st.data_len || !safetensors_find(&st, st.tensors[i].name)) abort();
        safetensors_close(&st);
    }
    return 0;
}
