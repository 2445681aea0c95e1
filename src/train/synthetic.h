/* Synthetic pre-training batches, generated in memory: one batch type and one generator for
 * `bert bench` (random tokens, a chosen share of padding: what the model costs) and
 * `bert train_demo` (a learnable toy language: that training works), so both exercise the
 * model the same way real shards do ([CLS] A [SEP] B [SEP], masked slots, NSP labels).
 *
 * The toy language: every document is about one of SYNTHETIC_TOPICS topics and draws its
 * words from that topic's SYNTHETIC_TOPIC_WORDS-word list, so a masked word is predictable
 * from the others (MLM loss can fall from ln(200) = 5.3 to ln(10) = 2.3); segment B is from
 * A's topic (NSP label 0) or a random topic (1). Ids: 0 [PAD], 1 [CLS], 2 [SEP], 3 [MASK],
 * then the words; it needs a vocabulary of SYNTHETIC_TOPIC_VOCAB or more. */
#ifndef BERT_TRAIN_SYNTHETIC_H
#define BERT_TRAIN_SYNTHETIC_H

#include <stdint.h>

#include "model/bert.h"

enum { SYNTHETIC_TOPICS = 20, SYNTHETIC_TOPIC_WORDS = 10, SYNTHETIC_FIRST_WORD = 4,
       SYNTHETIC_TOPIC_VOCAB = SYNTHETIC_FIRST_WORD + SYNTHETIC_TOPICS * SYNTHETIC_TOPIC_WORDS };

typedef struct {
    int B, T, P;
    int32_t *ids, *types, *mask, *positions, *labels, *nsp;   /* owned */
    int real_tokens;      /* tokens with attention_mask 1 */
    BertBatch train;      /* with MLM slots and NSP labels */
    BertBatch infer;      /* the same sequences, no slots or labels */
} SyntheticBatch;

void synthetic_batch_alloc(SyntheticBatch *s, int batch, int seq, int preds);
void synthetic_batch_free(SyntheticBatch *s);
/* Random tokens (above the special ids of BERT's vocabularies when vocab > 1000); lengths
 * spread over [T(1 - 2f), T] so that about pad_fraction f of the tokens are padding; up to P
 * distinct masked positions per sequence. */
void synthetic_batch_random(SyntheticBatch *s, int vocab_size, double pad_fraction, uint64_t seed);
/* The toy language's batch number `step` of the stream keyed by seed (BERT's 80/10/10
 * masking of about 15% of the words). */
void synthetic_batch_topics(SyntheticBatch *s, uint64_t seed, int step);

#endif
