/* CPython's Mersenne Twister and the Random methods Google's script uses.
 * Follows Modules/_randommodule.c and Lib/random.py of CPython 3.11 (the algorithm is
 * the published MT19937 of Matsumoto and Nishimura, 2002 seeding). */
#include "data/pyrandom.h"

#include <stdbool.h>

#define MT_M 397
#define MATRIX_A 0x9908b0dfU
#define UPPER_MASK 0x80000000U
#define LOWER_MASK 0x7fffffffU

static void init_genrand(PyRandom *r, uint32_t s) {
    r->mt[0] = s;
    for (int i = 1; i < PYRANDOM_N; i++)
        r->mt[i] = 1812433253U * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->index = PYRANDOM_N;
}

static void init_by_array(PyRandom *r, const uint32_t *key, int key_length) {
    init_genrand(r, 19650218U);
    int i = 1, j = 0;
    for (int k = PYRANDOM_N > key_length ? PYRANDOM_N : key_length; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1664525U)) + key[j] + (uint32_t)j;
        i++, j++;
        if (i >= PYRANDOM_N) { r->mt[0] = r->mt[PYRANDOM_N - 1]; i = 1; }
        if (j >= key_length) j = 0;
    }
    for (int k = PYRANDOM_N - 1; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1566083941U)) - (uint32_t)i;
        i++;
        if (i >= PYRANDOM_N) { r->mt[0] = r->mt[PYRANDOM_N - 1]; i = 1; }
    }
    r->mt[0] = 0x80000000U; /* non-zero initial state is guaranteed */
}

void pyrandom_seed(PyRandom *r, int64_t seed) {
    /* CPython takes abs(seed) and feeds its 32-bit words, least significant first; the
     * key has as many words as the number needs, and at least one (so 0 -> [0]). */
    uint64_t n = seed < 0 ? (uint64_t)0 - (uint64_t)seed : (uint64_t)seed;
    uint32_t key[2] = {(uint32_t)n, (uint32_t)(n >> 32)};
    init_by_array(r, key, key[1] ? 2 : 1);
}

void pyrandom_regenerate(PyRandom *r) {
    uint32_t *mt = r->mt;
    int kk;
    for (kk = 0; kk < PYRANDOM_N - MT_M; kk++) {
        uint32_t y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + MT_M] ^ (y >> 1) ^ ((y & 1U) ? MATRIX_A : 0U);
    }
    for (; kk < PYRANDOM_N - 1; kk++) {
        uint32_t y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + (MT_M - PYRANDOM_N)] ^ (y >> 1) ^ ((y & 1U) ? MATRIX_A : 0U);
    }
    uint32_t y = (mt[PYRANDOM_N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
    mt[PYRANDOM_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ ((y & 1U) ? MATRIX_A : 0U);
    for (int i = 0; i < PYRANDOM_N; i++) { /* genrand_uint32's tempering */
        uint32_t t = mt[i];
        t ^= (t >> 11);
        t ^= (t << 7) & 0x9d2c5680U;
        t ^= (t << 15) & 0xefc60000U;
        t ^= (t >> 18);
        r->tempered[i] = t;
    }
    r->index = 0;
}

int64_t pyrandom_randint(PyRandom *r, int64_t a, int64_t b) {
    uint64_t width = (uint64_t)b - (uint64_t)a + 1; /* randrange(a, b + 1) */
    return (int64_t)((uint64_t)a + pyrandom_randbelow(r, width));
}

void pyrandom_shuffle(PyRandom *r, void *base, size_t n, size_t elem_size) {
    /* Fast path for what the data pipeline shuffles (4-byte indices, fewer than 2^32):
     * _randbelow(i + 1) needs k <= 32 bits, one word per try, and the word index lives
     * in a register for the whole loop. */
    if (elem_size == 4 && n <= UINT32_MAX) {
        uint32_t *x = base;
        size_t next = r->index;
        for (size_t i = n; i-- > 1;) {
            uint64_t bound = (uint64_t)i + 1;
            int shift = __builtin_clzll(bound) - 32; /* 32 - bit_length(bound) */
            uint64_t j = bound;
            if (next + 2 <= PYRANDOM_N) {
                /* Rejection (about 3 tries in 10) is a coin flip the branch predictor
                 * loses, so the first two tries are decided with selects; only when
                 * both fail does the loop below run. */
                uint64_t first = r->tempered[next] >> shift, second = r->tempered[next + 1] >> shift;
                bool take_first = first < bound;
                j = take_first ? first : second;
                next += take_first ? 1 : 2;
            }
            while (j >= bound) {
                if (next >= PYRANDOM_N) pyrandom_regenerate(r), next = 0;
                j = r->tempered[next++] >> shift;
            }
            uint32_t t = x[i];
            x[i] = x[j], x[j] = t;
        }
        r->index = next;
        return;
    }
    unsigned char *bytes = base;
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)pyrandom_randbelow(r, (uint64_t)i + 1);
        unsigned char *x = bytes + i * elem_size, *y = bytes + j * elem_size;
        for (size_t b = 0; j != i && b < elem_size; b++) {
            unsigned char t = x[b];
            x[b] = y[b];
            y[b] = t;
        }
    }
}
