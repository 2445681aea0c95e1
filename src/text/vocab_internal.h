/* Vocab internals shared by vocab.c and tokenizer.c (not part of the public contract). */
#ifndef BERT_VOCAB_INTERNAL_H
#define BERT_VOCAB_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "text/vocab.h"

/* A hash slot carries what a lookup compares, so a probe touches one cache line and
 * then only the candidate's bytes in the arena. */
typedef struct {
    uint32_t tag;        /* high hash bits */
    int32_t id;          /* -1: empty slot */
    uint32_t piece_at;   /* offset of the piece (token without "##") in the arena */
    uint32_t piece_key;  /* piece length, plus CONT_BIT for "##" tokens */
} VocabSlot;

#define VOCAB_CONT_BIT 0x80000000u

/* Tokens are keyed by (is continuation, piece): "##ing" is (true, "ing"), "ing" is
 * (false, "ing"), so the WordPiece search compares only the piece's bytes. */
struct Vocab {
    int n;
    char **tokens;          /* NUL-terminated, by id */
    size_t *lens;
    bool *is_cont;          /* token is "##" + a non-empty piece */
    char *arena;            /* every token's piece, back to back */
    VocabSlot *slots;       /* open addressing, linear probing, power-of-two size */
    size_t mask;
    size_t max_word_bytes;  /* longest token that is not a continuation */
    size_t max_cont_bytes;  /* longest piece after "##" among continuation tokens */
};

/* FNV-1a with a different start for continuation pieces; extendable:
 * hash(a+b) == vocab_hash_extend(hash(a), b). */
uint64_t vocab_hash_init(bool continuation);
uint64_t vocab_hash_extend(uint64_t h, const char *bytes, size_t len);

/* Id of the token (continuation ? "##" : "") + piece, given h, the hash of piece started
 * from vocab_hash_init(continuation); -1 if absent. */
int vocab_lookup_piece(const Vocab *v, uint64_t h, bool continuation, const char *piece, size_t len);

#endif
