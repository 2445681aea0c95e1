/* Learning a WordPiece vocabulary from a corpus, the way HuggingFace's WordPieceTrainer
 * does (BPE merges over words split by BERT's BasicTokenizer, with "##" marking pieces
 * that continue a word), written out in BERT's vocab.txt layout:
 *   [PAD], [unused0]..[unused98], [UNK], [CLS], [SEP], [MASK], [unused99].., then single
 *   characters, whole-word tokens, and "##" continuation pieces.
 * The result is a vocabulary for tokenizer.h (greedy longest-match-first WordPiece). */
#ifndef BERT_WORDPIECE_TRAINER_H
#define BERT_WORDPIECE_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"

typedef struct {
    int vocab_size;               /* total lines of vocab.txt, specials and unused included */
    bool do_lower_case;
    int min_frequency;            /* a pair seen fewer times than this is never merged */
    int num_unused;               /* [unusedN] slots; BERT's vocabularies have 994 */
    int limit_alphabet;           /* keep this many most frequent characters (0: all) */
    int max_input_chars_per_word; /* longer words are skipped: the tokenizer makes them [UNK] */
    int threads;
} VocabTrainOptions;

VocabTrainOptions vocab_train_default_options(void); /* 30522, lower, 2, 994, 1000, 100, all */

typedef struct WordCounts WordCounts;

/* Counting: basic-tokenizes text (one document or many lines) and adds its words. */
WordCounts *word_counts_new(bool do_lower_case, int max_input_chars_per_word);
void word_counts_add_text(WordCounts *wc, const char *text, size_t len, int threads);
long word_counts_distinct(const WordCounts *wc);
long long word_counts_total(const WordCounts *wc);
void word_counts_free(WordCounts *wc);

/* Runs the merges and returns the vocabulary as token strings in vocab.txt order
 * (caller frees each and the array). Fails if vocab_size cannot hold the special
 * tokens, unused slots and at least one character. */
int wordpiece_train(const WordCounts *wc, const VocabTrainOptions *opt, char ***tokens, int *ntokens,
                    BertError *err);

#endif
