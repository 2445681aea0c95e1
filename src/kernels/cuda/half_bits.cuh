/* The 16-bit formats' bits on the GPU: the CPU's integer and float operations (kernels/cpu/
 * gemm_half.h), so that a conversion gives the CPU's bits, NaNs included. For the backend's
 * conversions (layers_norm_act.cu) and the collectives' 16-bit wire (collectives.cu). */
#ifndef BERT_KERNELS_CUDA_HALF_BITS_CUH
#define BERT_KERNELS_CUDA_HALF_BITS_CUH

#include <stdint.h>

/* bf16: gemm_half.h's bf16_from_float / float_from_bf16. */
__device__ static inline uint16_t bf16_from_float_bits(float f) {
    const uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);   /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                   /* ties to even */
}
__device__ static inline float float_from_bf16_bits(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* IEEE binary16: gemm_half.c's fp16_from_float / float_from_fp16, operation for operation
 * (rintf rounds to nearest even as nearbyintf does in the default rounding mode). */
__device__ static inline uint16_t fp16_from_float_bits(float f) {
    const uint32_t u = __float_as_uint(f);
    const uint32_t sign = (u >> 16) & 0x8000u, ax = u & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));   /* NaN, made quiet */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                          /* >= 65520: infinity */
    if (ax < 0x38800000u)                                          /* below 2^-14: a multiple of 2^-24 */
        return (uint16_t)(sign | (uint32_t)rintf(__uint_as_float(ax) * 16777216.0f));   /* exact scaling */
    uint32_t h = ax - 0x38000000u;                                 /* rebias the exponent: 127 -> 15 */
    h += 0xfffu + ((h >> 13) & 1u);                                /* round the 13 dropped bits, ties to even */
    return (uint16_t)(sign | (h >> 13));
}
__device__ static inline float float_from_fp16_bits(uint16_t bits) {
    const uint32_t sign = (uint32_t)(bits & 0x8000u) << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0) {                                                  /* zero, subnormal: m * 2^-24 */
        const float x = (float)m * (1.0f / 16777216.0f);
        return sign ? -x : x;
    }
    if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m ? 0x400000u : 0) | (m << 13));   /* inf; NaN quiet */
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
