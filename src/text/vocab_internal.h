/* Vocab internals shared by vocab.c and tokenizer.c (not part of the public contract). */
#ifndef BERT_VOCAB_INTERNAL_H
#define BERT_VOCAB_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/strmap.h"
#include "text/vocab.h"

/* Tokens are keyed by (is continuation, piece): "##ing" is the piece "ing" in conts, "ing"
 * the piece "ing" in words, so the WordPiece search compares only the piece's bytes. */
struct Vocab {
    int n;
    char **tokens;          /* NUL-terminated, by id */
    size_t *lens;
    StrMap words;           /* piece -> id of the tokens that are not continuations ... */
    StrMap conts;           /* ... and of the continuations (keys: the tokens' bytes, borrowed) */
    size_t max_word_bytes;  /* longest token that is not a continuation */
    size_t max_cont_bytes;  /* longest piece after "##" among continuation tokens */
};

/* Id of the token (continuation ? "##" : "") + piece, given h = strmap_hash(piece, len)
 * (the WordPiece search extends it a code point at a time); -1 if absent. */
static inline int vocab_lookup_piece(const Vocab *v, uint64_t h, bool continuation, const char *piece, size_t len) {
    const StrMapEntry *e = strmap_find_hashed(continuation ? &v->conts : &v->words, h, piece, len);
    return e ? (int)e->value : -1;
}

#endif
