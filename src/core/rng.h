/* Counter-based random numbers: every value is a pure function of (key, counter), so a
 * result never depends on how work is split across threads or in which order it runs.
 * Dropout keys each site by (seed, site id) and counts by the element's logical index.
 *
 * rng_bits32 is two rounds of a 32-bit bijective integer hash ("lowbias32", Wellons) with
 * the two halves of a 64-bit key, cheap enough to recompute dropout masks in backward and
 * vectorisable (32-bit multiplies only). Keys themselves come from splitmix64. */
#ifndef BERT_RNG_H
#define BERT_RNG_H

#include <math.h>
#include <stdint.h>

/* The integer functions are also a CUDA device's (kernels/cuda/): the same masks there. */
#ifdef __CUDACC__
#define RNG_HD __host__ __device__
#else
#define RNG_HD
#endif

RNG_HD static inline uint64_t rng_splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A 64-bit key for one random stream (e.g. one dropout site of one step). */
RNG_HD static inline uint64_t rng_key(uint64_t seed, uint64_t stream) {
    return rng_splitmix64(rng_splitmix64(seed) ^ rng_splitmix64(stream + 0x632be59bd9b4e019ull));
}

RNG_HD static inline uint32_t rng_hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

RNG_HD static inline uint32_t rng_bits32(uint64_t key, uint32_t counter) {
    return rng_hash32(rng_hash32(counter ^ (uint32_t)key) + (uint32_t)(key >> 32));
}

/* Uniform in [0, 1) with 24 random bits. */
RNG_HD static inline float rng_uniform(uint64_t key, uint32_t counter) {
    return (float)(rng_bits32(key, counter) >> 8) * (1.0f / 16777216.0f);
}

/* Standard normal from two counters (Box-Muller), in double for initialisation. */
static inline double rng_normal(uint64_t key, uint64_t counter) {
    uint64_t a = rng_splitmix64(key ^ rng_splitmix64(2 * counter));
    uint64_t b = rng_splitmix64(key ^ rng_splitmix64(2 * counter + 1));
    double u1 = ((double)(a >> 11) + 0.5) * (1.0 / 9007199254740992.0);  /* (0, 1) */
    double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Element i of a tensor drawn from a normal of standard deviation std truncated to [-2 std,
 * 2 std] by redrawing (TF's truncated_normal_initializer): up to 64 draws (key, i 64 +
 * attempt), 0 if none falls inside. */
static inline float rng_truncated_normal(uint64_t key, uint64_t i, float std) {
    double z = 0.0;
    for (uint64_t attempt = 0; attempt < 64; attempt++) {
        z = rng_normal(key, i * 64 + attempt);
        if (fabs(z) <= 2.0) break;
    }
    return (float)(fabs(z) <= 2.0 ? z * std : 0.0);
}

/* Dropout keeps an element when its 32 random bits reach this threshold (P(keep) = 1 - p). */
RNG_HD static inline uint32_t rng_dropout_threshold(float p) {
    double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

#endif
