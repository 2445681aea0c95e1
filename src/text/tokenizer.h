/* BERT's tokenizer: BasicTokenizer + WordpieceTokenizer, token-for-token identical to
 * google-research/bert tokenization.py (FullTokenizer), uncased and cased.
 *
 * Contract used by data/ (create_pretraining_data), tasks/ (SQuAD, GLUE) and inference:
 *  - A Vocab and a Tokenizer are immutable after creation; tokenize() may be called
 *    concurrently from several threads on one Tokenizer, each with its own TokenList.
 *  - Offsets are byte offsets into the original input text: token i covers
 *    text[start, end). A "##" continuation covers only the bytes of its own piece; an
 *    [UNK] word covers the whole word.
 *  - Invalid UTF-8 never crashes: each bad byte counts as U+FFFD (which the reference
 *    then drops) and is counted in TokenList.invalid_utf8.
 */
#ifndef BERT_TOKENIZER_H
#define BERT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"

typedef struct Vocab Vocab;

/* vocab.txt: one token per line, id = line number (0-based). */
int vocab_load(Vocab **out, const char *path, BertError *err);
Vocab *vocab_from_tokens(const char *const *tokens, int n);
void vocab_free(Vocab *v);
int vocab_size(const Vocab *v);
const char *vocab_token(const Vocab *v, int id);              /* NULL if out of range */
int vocab_lookup(const Vocab *v, const char *tok, size_t len); /* -1 if absent */

typedef struct {
    bool do_lower_case;            /* true: uncased (lower + strip accents) */
    int max_input_chars_per_word;  /* longer words become [UNK]; default 100 (NVIDIA/HF) */
    const char *const *never_split;/* tokens kept whole, e.g. "[MASK]" (may be NULL) */
    int n_never_split;
} TokenizerOptions;

TokenizerOptions tokenizer_default_options(void); /* lower case, 100, no never_split */

typedef struct Tokenizer Tokenizer;
Tokenizer *tokenizer_new(const Vocab *vocab, const TokenizerOptions *opt);
void tokenizer_free(Tokenizer *t);
const Vocab *tokenizer_vocab(const Tokenizer *t);

typedef struct {
    int id;          /* vocabulary id ([UNK]'s id for uncoverable words) */
    int start, end;  /* byte span in the input text */
} Token;

typedef struct {
    Token *tokens;
    int n, cap;
    long invalid_utf8; /* bad bytes seen in the last call */
    void *scratch;     /* per-list working memory owned by the tokenizer; freed below */
} TokenList;

void token_list_init(TokenList *l);
void token_list_free(TokenList *l);

/* Tokenizes text[0..len) into out (previous contents replaced). Returns out->n. */
int tokenize(const Tokenizer *t, const char *text, size_t len, TokenList *out);

#endif
