#include "train/synthetic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"

void synthetic_batch_alloc(SyntheticBatch *s, int B, int T, int P) {
    *s = (SyntheticBatch){.B = B, .T = T, .P = P};
    const size_t BT = (size_t)B * T, BP = (size_t)B * P + 1;
    s->ids = xcalloc(BT, sizeof(int32_t)), s->types = xcalloc(BT, sizeof(int32_t)), s->mask = xcalloc(BT, sizeof(int32_t));
    s->positions = xcalloc(BP, sizeof(int32_t)), s->labels = xcalloc(BP, sizeof(int32_t));
    s->nsp = xcalloc((size_t)B, sizeof(int32_t));
    s->train = bert_pretraining_batch(B, T, P, s->ids, s->types, s->mask, s->positions, s->labels, s->nsp);
    s->infer = bert_pretraining_batch(B, T, 0, s->ids, s->types, s->mask, NULL, NULL, NULL);
}

void synthetic_batch_free(SyntheticBatch *s) {
    free(s->ids), free(s->types), free(s->mask), free(s->positions), free(s->labels), free(s->nsp);
}

/* ---- random tokens (bench) ---- */

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int uniform_int(uint64_t *state, int lo, int hi) {   /* in [lo, hi) */
    return lo + (int)(splitmix64(state) % (uint64_t)(hi - lo));
}

/* Synthetic ids stay clear of the special tokens (ids below 1000 in BERT's vocabularies)
 * when the vocabulary is big enough; a smaller one (a test config) is used whole. */
static int first_plain_id(int vocab) { return vocab > 1000 ? 1000 : 0; }

static int synthetic_length(uint64_t *rng, int T, double pad_fraction) {
    if (pad_fraction <= 0) return T;
    int shortest = (int)lround(T * (1.0 - 2.0 * pad_fraction));
    if (shortest < 8) shortest = T < 8 ? T : 8;
    return shortest >= T ? T : uniform_int(rng, shortest, T + 1);
}

/* Masks up to P distinct positions among 1..len-2 (never [CLS] or the final [SEP]). */
static void synthetic_masks(uint64_t *rng, int len, int P, int vocab, int32_t *pos, int32_t *labels) {
    int candidates = len - 2, used = 0;
    for (int p = 0; p < P; p++) pos[p] = 0, labels[p] = -1;
    for (int i = 1; i <= candidates && used < P; i++)   /* selection sampling: sorted, distinct */
        if (uniform_int(rng, 0, candidates - i + 1) < P - used) {
            pos[used] = i;
            labels[used++] = uniform_int(rng, first_plain_id(vocab), vocab);
        }
}

void synthetic_batch_random(SyntheticBatch *s, int vocab, double pad_fraction, uint64_t seed) {
    const int B = s->B, T = s->T, P = s->P;
    uint64_t rng = seed;
    s->real_tokens = 0;
    for (int b = 0; b < B; b++) {
        int len = synthetic_length(&rng, T, pad_fraction);
        for (int t = 0; t < T; t++) {
            const size_t i = (size_t)b * T + (size_t)t;
            s->ids[i] = t < len ? uniform_int(&rng, first_plain_id(vocab), vocab) : 0;
            s->types[i] = t < len && t >= len / 2, s->mask[i] = t < len;
        }
        s->real_tokens += len;
        synthetic_masks(&rng, len, P, vocab, s->positions + (size_t)b * P, s->labels + (size_t)b * P);
        s->nsp[b] = (int)(splitmix64(&rng) & 1);
    }
}

/* ---- the toy language (train_demo) ---- */

enum { TOK_CLS = 1, TOK_SEP = 2, TOK_MASK = 3, NUM_WORDS = SYNTHETIC_TOPICS * SYNTHETIC_TOPIC_WORDS };

typedef struct { uint64_t key; uint32_t counter; } Stream;   /* a counter-based stream */
static int draw_below(Stream *s, int n) { return (int)(rng_bits32(s->key, s->counter++) % (uint32_t)n); }

static int topic_word(Stream *rs, int topic) {
    return SYNTHETIC_FIRST_WORD + topic * SYNTHETIC_TOPIC_WORDS + draw_below(rs, SYNTHETIC_TOPIC_WORDS);
}

/* One sequence: [CLS] A [SEP] B [SEP] [PAD]..., then up to P masked slots (80/10/10). */
static int topic_sequence(SyntheticBatch *d, int s, Stream *rs) {
    int32_t *ids = d->ids + (size_t)s * d->T, *types = d->types + (size_t)s * d->T, *mask = d->mask + (size_t)s * d->T;
    const int room = d->T - 3, len = room / 2 + draw_below(rs, room / 2 + 1);  /* some padding */
    const int len_a = 1 + draw_below(rs, len - 1), len_b = len - len_a;
    int topic = draw_below(rs, SYNTHETIC_TOPICS), is_random = draw_below(rs, 2), topic_b = is_random ? draw_below(rs, SYNTHETIC_TOPICS) : topic;
    int t = 0;
    memset(ids, 0, sizeof(int32_t) * d->T), memset(types, 0, sizeof(int32_t) * d->T);
    ids[t++] = TOK_CLS;
    for (int i = 0; i < len_a; i++) ids[t++] = topic_word(rs, topic);
    ids[t++] = TOK_SEP;
    for (int i = 0; i < len_b; i++, t++) ids[t] = topic_word(rs, topic_b), types[t] = 1;
    types[t] = 1, ids[t++] = TOK_SEP;
    for (int i = 0; i < d->T; i++) mask[i] = i < t;
    d->nsp[s] = is_random;
    int32_t *pos = d->positions + (size_t)s * d->P, *lab = d->labels + (size_t)s * d->P;
    int want = (len * 15 + 99) / 100, k = 0;
    if (want > d->P) want = d->P;
    for (int i = 1; i < t - 1 && k < want; i++) {
        if (ids[i] == TOK_SEP || draw_below(rs, len) >= want * 2) continue;
        pos[k] = i, lab[k] = ids[i], k++;
        int r = draw_below(rs, 10);
        ids[i] = r < 8 ? TOK_MASK : r < 9 ? SYNTHETIC_FIRST_WORD + draw_below(rs, NUM_WORDS) : ids[i];
    }
    for (; k < d->P; k++) pos[k] = 0, lab[k] = -1;
    return t;
}

void synthetic_batch_topics(SyntheticBatch *s, uint64_t seed, int step) {
    s->real_tokens = 0;
    for (int b = 0; b < s->B; b++) {
        Stream rs = {rng_key(seed, (uint64_t)step * s->B + b), 0};
        s->real_tokens += topic_sequence(s, b, &rs);
    }
}
