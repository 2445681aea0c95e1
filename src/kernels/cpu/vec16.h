/* 16 floats at a time in AVX-512, for the CPU kernels' rows that oneDNN does not cover: the
 * softmax row (kernels/cpu/layers.c) and the int8 products' epilogue (kernels/cpu/gemm_int8.c).
 * VEC16 is 1 where the build has AVX-512 (F, BW, VL); the callers keep a portable loop for
 * the other builds. */
#ifndef BERT_KERNELS_CPU_VEC16_H
#define BERT_KERNELS_CPU_VEC16_H

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define VEC16 1
#include <immintrin.h>

/* The lanes of a 16-wide step with `left` values to go: all, or the tail's. */
static inline __mmask16 lanes(int left) { return left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1); }

/* e^x for 16 floats: x = n ln2 + r (n = round(x log2 e), Cody-Waite's two-part ln2, |r| <=
 * ln2/2), e^r by its Taylor polynomial to r^7 (truncation below 1e-8 relative), times 2^n by
 * scalef: within 0.93 ulp of e^x over [-87, 5] (all 2^24 points of a sweep against double exp;
 * glibc's expf 0.50; CUDA's 2; tests/cuda/test_cuda_attention.c allows 2-4 for each side).
 * Exactly 1 at 0, exactly 0 below -87.3 (e^x would be subnormal) and at -inf (masked keys).
 * 7x the speed of the loop over glibc's vector expf it replaced in the softmax. */
static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.3f);
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(x, lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);   /* ln2's high part: n x it exact */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    static const float taylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    __m512 e = _mm512_set1_ps(taylor[0]);
    for (int k = 1; k < 8; k++) e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(taylor[k]));
    return _mm512_maskz_mov_ps((__mmask16)~tiny, _mm512_scalef_ps(e, n));
}

/* bf16 bits of 16 floats: bf16_from_float's rounding (to nearest even, NaN kept quiet). Where
 * the build has AVX512_BF16, its conversion instruction: the same bits, except that it takes
 * subnormal inputs (below 1.2e-38) as zero. */
static inline __m256i bf16x16(__m512 x) {
#ifdef __AVX512BF16__
    return (__m256i)_mm512_cvtneps_pbh(x);
#endif
    const __m512i u = _mm512_castps_si512(x);
    const __m512i even = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), even)), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    h = _mm512_mask_mov_epi32(h, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(h);
}
#else
#define VEC16 0
#endif

#include <stddef.h>
#include <string.h>

/* `bytes` bytes from s to d, a short row (an attention block's: 128 or 256 bytes), by masked
 * vector moves where the build has AVX-512: libc's memcpy call per row was a quarter of
 * attention's time at these sizes. */
static inline void copy_short(void *d, const void *s, size_t bytes) {
#if VEC16
    for (size_t o = 0; o < bytes; o += 64) {
        const __mmask64 m = bytes - o >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (bytes - o)) - 1;
        _mm512_mask_storeu_epi8((char *)d + o, m, _mm512_maskz_loadu_epi8(m, (const char *)s + o));
    }
#else
    memcpy(d, s, bytes);
#endif
}

#endif
