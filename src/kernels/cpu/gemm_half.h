/* Matrix products with 16-bit inputs and fp32 accumulation and output, for mixed precision:
 * C = op(A) op(B) (+ bias) (+ C), row-major, A and B in bf16 (the upper half of an fp32:
 * 8 significant bits, fp32's range) or IEEE fp16 (11 significant bits, largest 65504), C in
 * fp32.
 *
 * bf16 runs one of two ways, chosen per call:
 *   native    oneDNN's matmul primitive on the CPU's bf16 instructions (AVX512_BF16, AMX);
 *             primitives are created once per shape and kept
 *   emulated  the same inputs widened to fp32 (exactly: every bf16 is an fp32) and multiplied
 *             by sgemm.h. Products of two bf16 values are exact in fp32, so both compute the
 *             same sums of the same terms, in a different order: they agree to fp32 rounding.
 *             For machines without bf16 instructions (tests, --bf16_emulate); slow.
 * Rounding fp32 -> bf16 is to nearest, ties to even (as the instructions do); NaN stays NaN. */
#ifndef BERT_GEMM_HALF_H
#define BERT_GEMM_HALF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"   /* HalfMode */

typedef uint16_t bf16;

static inline bf16 bf16_from_float(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (bf16)((v.u >> 16) | 0x40u);   /* quiet NaN */
    return (bf16)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
static inline float float_from_bf16(bf16 h) {
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}
void bf16_from_floats(bf16 *dst, const float *src, long n);
void floats_from_bf16(float *dst, const bf16 *src, long n);

typedef uint16_t fp16;   /* IEEE binary16 bits */
fp16 fp16_from_float(float f);
float float_from_fp16(fp16 h);
void fp16_from_floats(fp16 *dst, const float *src, long n);
void floats_from_fp16(float *dst, const fp16 *src, long n);

void halves_from_floats(HalfMode mode, uint16_t *dst, const float *src, long n);
void floats_from_halves(HalfMode mode, float *dst, const uint16_t *src, long n);

/* Whether oneDNN runs bf16 matmuls on bf16 instructions here (the CPU has them and
 * ONEDNN_MAX_CPU_ISA does not cap them away). */
bool gemm_bf16_native_available(void);

/* C[M, N] = op(A)[M, K] op(B)[K, N] + bias[N] (bias may be NULL) + beta C, beta 0 or 1 (bias
 * only with beta 0). op = transpose when trans_*; lda/ldb/ldc are the stored row lengths.
 * A and B in mode's format; HALF_BF16 needs gemm_bf16_native_available(). */
void gemm_half(HalfMode mode, bool trans_a, bool trans_b, int M, int N, int K, const uint16_t *A, int lda,
               const uint16_t *B, int ldb, const float *bias, float beta, float *C, int ldc);

/* gemm_half without bias, for products too small to split, called from inside OpenMP workers
 * (attention's per-sequence, per-head products): runs on the calling thread; any sizes. Sizes
 * up to 512 run on one primitive per size bucket (zero-padded plain copies where needed: the
 * bits depend on the product's own sizes only), larger ones on a runtime-size primitive. */
void gemm_half_serial(HalfMode mode, bool trans_a, bool trans_b, int M, int N, int K, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc);

/* The size a serial product's dimension of n is padded to (n itself past the largest bucket). */
int gemm_half_serial_bucket(int n);
/* batch independent bf16 products on the calling thread, C_i = A_i op(B_i), every operand
 * dense and each of the batch right after the one before: A [batch][M][K], B [batch][N][K]
 * (trans_b) or [batch][K][N], C [batch][M][N] fp32; M, N, K bucket sizes (gemm_half_serial_bucket).
 * One fixed-shape primitive for the batch (attention's heads of a sequence). false, computing
 * nothing, where there is none: sizes past the buckets, or no native bf16. */
bool gemm_half_serial_batched(int batch, bool trans_b, int M, int N, int K, const uint16_t *A, const uint16_t *B,
                              float *C);

/* Weights packed once: C[M, N] = A[M, K] W^T + bias for a weight W [N, K] (nn.Linear's layout)
 * that is multiplied many times, stored in the blocked layout oneDNN's matmul reads fastest
 * (as ONNX Runtime and OpenVINO keep their constant weights); A and W in bf16 or (f32) fp32.
 * gemm_packed_bytes is the space a packed W takes (0: no packed form here: no native bf16,
 * or oneDNN keeps fp32 weights plain on this CPU); gemm_pack fills it from the plain W;
 * gemm_packed multiplies with it and returns true, or returns false without computing where
 * oneDNN would run a product of M rows on a slower kernel with the packed layout (the caller
 * then multiplies with the plain W). The same terms as the plain product, in another order. */
size_t gemm_packed_bytes(bool f32, int K, int N);
void gemm_pack(bool f32, void *packed, const void *W, int K, int N);
bool gemm_packed(bool f32, int M, int N, int K, const void *A, int lda, const void *packed, const float *bias,
                 float *C, int ldc);

/* gemm_packed followed by an element-wise function of each result, applied by oneDNN to the
 * fp32 sums (bias included) while they are still in registers (a post-op), and the results
 * stored in fp32 or (c_bf16) rounded to bf16: the product and the activation in one pass, no
 * pre-activation matrix written or read. The post-op's function is oneDNN's polynomial, not
 * libm's. Returns false without computing, as gemm_packed. */
typedef enum { GEMM_POST_NONE, GEMM_POST_GELU_ERF, GEMM_POST_GELU_TANH } GemmPost;
bool gemm_packed_post(bool f32, int M, int N, int K, const void *A, int lda, const void *packed, const float *bias,
                      GemmPost post, void *C, bool c_bf16, int ldc);

/* For reports: "oneDNN 2.6.3 matmul brg:avx512_core_bf16" (the implementation it picks for a
 * BERT-sized product), or why there is none. */
void gemm_bf16_describe(char *out, size_t n);

#endif
