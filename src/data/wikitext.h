/* Wikitext -> plain text, following WikiExtractor (the extractor NVIDIA's recipe runs)
 * step by step; see wikitext.c. */
#ifndef BERT_WIKITEXT_H
#define BERT_WIKITEXT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    int32_t codepoint;
} HtmlEntity;

extern const HtmlEntity HTML_ENTITIES[]; /* sorted by name (html_entities.c, generated) */
extern const int N_HTML_ENTITIES;

/* Called once per output paragraph (no newline inside, not blank). */
typedef void (*ParagraphFn)(const char *text, size_t len, void *ctx);

/* Cleans one article's wikitext (XML entities already decoded) and emits its paragraphs
 * in order, section headings included as "Heading." lines as WikiExtractor keeps them. */
void wikitext_paragraphs(const char *wikitext, size_t len, ParagraphFn emit, void *ctx);

#endif
