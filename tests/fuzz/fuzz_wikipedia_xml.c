/* The Wikipedia dump reader (expat, pages, namespaces) on any XML bytes. */
#include <unistd.h>

#include "data/corpus.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char out[512];
    fuzz_temp_path(out, sizeof out, ".out.txt");
    FormatOptions o = format_default_options();
    o.progress = false, o.n_threads = 1;
    FormatStats st;
    BertError err;
    format_wikipedia(fuzz_input_file(data, size, ".xml"), out, &o, &st, &err);
    unlink(out);
    return 0;
}
