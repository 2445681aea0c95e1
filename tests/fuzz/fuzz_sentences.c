/* Punkt sentence splitting on any text: spans stay inside it, in order. */
#include <stdlib.h>

#include "data/corpus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static SentenceSplitter *sp;
    static SentenceList sl;
    if (!sp) sp = sentence_splitter_new(), sentence_list_init(&sl);
    split_sentences(sp, (const char *)data, size, &sl);
    for (int i = 0; i < sl.n; i++)
        if (sl.spans[i].start > sl.spans[i].end || sl.spans[i].end > size || (i && sl.spans[i].start < sl.spans[i - 1].end))
            abort();
    return 0;
}
