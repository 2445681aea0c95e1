/* CPython's `random` module, bit for bit (checked against Python 3.11).
 *
 * Google's create_pretraining_data.py draws every decision from random.Random(seed);
 * reproducing its output exactly means reproducing this stream: the MT19937 generator,
 * CPython's way of seeding it from an integer (init_by_array over the integer's 32-bit
 * words), and the exact recipes of random(), getrandbits(), randint() and shuffle().
 * A PyRandom is plain data: copy it to snapshot the stream. */
#ifndef BERT_PYRANDOM_H
#define BERT_PYRANDOM_H

#include <stddef.h>
#include <stdint.h>

#define PYRANDOM_N 624

typedef struct {
    uint32_t mt[PYRANDOM_N];
    /* The next PYRANDOM_N outputs, tempered all at once when mt[] is regenerated (a
     * loop the compiler vectorises), so that drawing a word is one load. */
    uint32_t tempered[PYRANDOM_N];
    /* Next word of tempered[]; PYRANDOM_N means "regenerate". A size_t rather than an
     * int so that stores through the int32_t arrays the callers fill cannot alias it
     * and the compiler may keep it in a register across them. */
    size_t index;
} PyRandom;

/* random.Random(seed) / rng.seed(seed) for an int seed (negative seeds use |seed|). */
void pyrandom_seed(PyRandom *r, int64_t seed);

/* Refills r->mt with the next 624 words and tempers them into r->tempered (internal;
 * pyrandom_uint32 calls it). */
void pyrandom_regenerate(PyRandom *r);

/* One raw 32-bit output of MT19937 (genrand_uint32). Inline: it is the innermost call
 * of every draw the instance generator makes. */
static inline uint32_t pyrandom_uint32(PyRandom *r) {
    if (r->index >= PYRANDOM_N) pyrandom_regenerate(r);
    return r->tempered[r->index++];
}

/* rng.random(): a double in [0, 1) built from two words (27 + 26 bits). */
static inline double pyrandom_random(PyRandom *r) {
    uint32_t a = pyrandom_uint32(r) >> 5, b = pyrandom_uint32(r) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* rng.getrandbits(k) for 0 <= k <= 64. */
static inline uint64_t pyrandom_getrandbits(PyRandom *r, int k) {
    if (k <= 0) return 0;
    if (k <= 32) return pyrandom_uint32(r) >> (32 - k);
    /* Wider requests are assembled from 32-bit words, least significant word first,
     * the last word keeping only its top bits. */
    uint64_t low = pyrandom_uint32(r);
    uint64_t high = pyrandom_uint32(r) >> (64 - k);
    return low | (high << 32);
}

/* rng._randbelow(n) for n >= 1: rejection sampling on getrandbits(k) with k the bit
 * length of n itself (not n-1), as CPython 3.10+ does. */
static inline uint64_t pyrandom_randbelow(PyRandom *r, uint64_t n) {
    int k = 64 - __builtin_clzll(n);
    uint64_t x = pyrandom_getrandbits(r, k);
    while (x >= n) x = pyrandom_getrandbits(r, k);
    return x;
}

/* rng.randint(a, b) for a <= b (Python raises ValueError otherwise; callers check). */
int64_t pyrandom_randint(PyRandom *r, int64_t a, int64_t b);

/* rng.shuffle(x) on an array of n elements of elem_size bytes: Fisher-Yates
 * from the end, swapping x[i] with x[_randbelow(i + 1)]. */
void pyrandom_shuffle(PyRandom *r, void *base, size_t n, size_t elem_size);

#endif
