/* BERT's tokenizer: BasicTokenizer + WordpieceTokenizer, token-for-token identical to
 * google-research/bert tokenization.py (FullTokenizer), uncased and cased.
 *
 * Contract used by data/ (create_pretraining_data), tasks/ (SQuAD, GLUE) and inference:
 *  - A Vocab and a Tokenizer are immutable after creation; tokenize() may be called
 *    concurrently from several threads on one Tokenizer, each with its own TokenList.
 *  - Offsets are byte offsets into the original input text: token i covers
 *    text[start, end). A "##" continuation covers only the bytes of its own piece; an
 *    [UNK] word covers the whole word.
 *  - Invalid UTF-8 never crashes: it decodes as Python's bytes.decode("utf-8",
 *    "replace") does, each maximal invalid subsequence becoming one U+FFFD (which the
 *    reference then drops), counted in TokenList.invalid_utf8 (so a truncated
 *    "\xE2\x82" counts 1, a stray continuation byte 1, an encoded surrogate 3).
 *  - Unicode data comes from utf8proc (Debian 12: Unicode 15.0); the reference, run on
 *    Python 3.11, has Unicode 14.0. They differ only at 134 code points (uncased; 30
 *    cased) first assigned in 15.0, none of which occur in the parity corpora;
 *    tests/test_tokenizer_sweep.c checks all 1,112,063 code points and lists them.
 *  - max_input_chars_per_word defaults to 100, as NVIDIA's and HuggingFace's BERT code
 *    use; Google's tokenization.py uses 200. It counts code points after lower-casing
 *    and accent stripping, as the reference does.
 *  - never_split follows HuggingFace's BertTokenizer, which splits the text around its
 *    special tokens before basic tokenization: each occurrence of one of these strings
 *    (leftmost, longest first; anywhere, e.g. "x[MASK]." -> x [MASK] .) is one word,
 *    neither lower-cased nor split, looked up whole in the vocabulary. Entries must be
 *    non-empty valid UTF-8 (others are ignored). Google's reference has no such
 *    option; with none given the output is the reference's.
 */
#ifndef BERT_TOKENIZER_H
#define BERT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"
#include "text/vocab.h"

typedef struct {
    bool do_lower_case;            /* true: uncased (lower + strip accents) */
    int max_input_chars_per_word;  /* longer words become [UNK]; default 100 (NVIDIA/HF) */
    const char *const *never_split;/* tokens kept whole, e.g. "[MASK]" (may be NULL) */
    int n_never_split;
} TokenizerOptions;

TokenizerOptions tokenizer_default_options(void); /* lower case, 100, no never_split */

typedef struct Tokenizer Tokenizer;
/* Returns NULL if the vocabulary has no "[UNK]" token. vocab may be NULL for a
 * tokenizer used only with basic_tokenize(). The options' strings are copied. */
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

/* Tokenizes text[0..len) into out (previous contents replaced). Returns out->n, or -1
 * (out->n == 0) if the tokenizer has no vocabulary or len exceeds INT_MAX. */
int tokenize(const Tokenizer *t, const char *text, size_t len, TokenList *out);

/* BasicTokenizer alone (no vocabulary needed): calls fn once per word, in order, with
 * the word as the reference's BasicTokenizer returns it (UTF-8, lower-cased and
 * accent-stripped when uncased; not NUL-terminated) and its byte span in text. `work`
 * provides the scratch memory and receives invalid_utf8; its tokens are untouched.
 * Returns the number of words, or -1 if len exceeds INT_MAX. */
typedef void (*BasicWordFn)(const char *word, size_t len, int start, int end, void *ctx);
long basic_tokenize(const Tokenizer *t, const char *text, size_t len, TokenList *work,
                    BasicWordFn fn, void *ctx);

#endif
