/* The tokenizer (BasicTokenizer + WordPiece, uncased) on any bytes, with the bundled
 * bert-base-uncased vocabulary: token offsets stay inside the input. */
#include <stdlib.h>

#include "core/bundled.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static Tokenizer *t;
    static TokenList out;
    if (!t) {
        char path[4096];
        Vocab *v;
        BertError err;
        if (bundled_data_path("vocab/bert-base-uncased-vocab.txt", path, sizeof path) != 0 || vocab_load(&v, path, &err))
            abort();
        TokenizerOptions o = tokenizer_default_options();
        t = tokenizer_new(v, &o);
        token_list_init(&out);
    }
    tokenize(t, (const char *)data, size, &out);
    for (int i = 0; i < out.n; i++)
        if (out.tokens[i].start < 0 || out.tokens[i].end > (int)size || out.tokens[i].start > out.tokens[i].end) abort();
    return 0;
}
