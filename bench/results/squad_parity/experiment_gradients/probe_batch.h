/* The two experiments' batch: B sequences of T (every third shorter, padded), random tokens
 * from bert.c's counter hash, [CLS] / [SEP] where BERT puts them, token types 1 after the
 * "question", span labels inside the real tokens (sequence 1: the [CLS] "no answer" label). */
#include "core/rng.h"
#include "model/bert.h"
#include <stdlib.h>

typedef struct { int32_t *ids, *types, *mask, starts[64], ends[64]; } ProbeBatch;

static BertBatch probe_batch(ProbeBatch *p, int B, int T) {
    p->ids = calloc((size_t)B * T, 4), p->types = calloc((size_t)B * T, 4), p->mask = calloc((size_t)B * T, 4);
    for (int b = 0; b < B; b++) {
        int len = (b % 3 == 2) ? 150 + 37 * b : T;
        for (int t = 0; t < len; t++) {
            uint32_t r = rng_bits32(rng_key(7, b), t);
            p->ids[b * T + t] = t == 0 ? 101 : (t == len - 1 || t == 20) ? 102 : 1000 + r % 28000;
            p->types[b * T + t] = t > 20, p->mask[b * T + t] = 1;
        }
        p->starts[b] = 25 + (b * 13) % (len - 40), p->ends[b] = p->starts[b] + b % 5;
        if (b == 1) p->starts[b] = p->ends[b] = 0;
    }
    return (BertBatch){.batch = B, .seq_len = T, .input_ids = p->ids, .token_type_ids = p->types,
                       .attention_mask = p->mask, .start_positions = p->starts, .end_positions = p->ends};
}
