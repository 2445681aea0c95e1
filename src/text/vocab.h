/* A WordPiece vocabulary (vocab.txt): tokens by id and ids by token; what the tokenizer
 * (text/tokenizer.h) looks words up in. Immutable after creation, so one may be shared by
 * threads. */
#ifndef BERT_VOCAB_H
#define BERT_VOCAB_H

#include <stddef.h>

#include "core/common.h"

typedef struct Vocab Vocab;

/* vocab.txt: one token per line, id = line number (0-based). As the reference's
 * load_vocab: surrounding (ASCII) whitespace is stripped, and a token listed twice maps
 * to its last line. A line that is not valid UTF-8 is an error naming the line. */
int vocab_load(Vocab **out, const char *path, BertError *err);
Vocab *vocab_from_tokens(const char *const *tokens, int n);
void vocab_free(Vocab *v);
int vocab_size(const Vocab *v);
const char *vocab_token(const Vocab *v, int id);              /* NULL if out of range */
int vocab_lookup(const Vocab *v, const char *tok, size_t len); /* -1 if absent */

#endif
