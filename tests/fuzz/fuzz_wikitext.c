/* Wikipedia markup cleaning (WikiExtractor's rules) on any text. */
#include "data/wikitext.h"

static void ignore(const char *text, size_t len, void *ctx) { (void)text, (void)len, (void)ctx; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wikitext_paragraphs((const char *)data, size, ignore, NULL);
    return 0;
}
