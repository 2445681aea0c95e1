/* bert.c's own loops around the AMX tile instructions (Intel Sapphire Rapids and later), where
 * Debian's oneDNN 2.6 left most of the instructions' rate unused: the int8 products of
 * --int8 inference, and attention's two bf16 products in inference.
 *
 * int8 products: C [M, N] int32 = A [M, K] s8 (rows lda bytes apart) x B, with B [K, N] s8 in
 * oneDNN's AMX packed layout BA16a64b4a (blocks of 64 columns outermost, then blocks of 64 of
 * K; inside one: 16 groups of 4 K values x 64 columns x the 4 values), the layout gemm_int8
 * packs its weights in on these CPUs, so the same packed weight serves both.
 *
 * Why not oneDNN's own: Debian's oneDNN 2.6 ran bert-base's int8 products at 3.4-3.8 TOP/s on
 * 2 cores here in 64-row blocks, a third of what the tile instruction does (tdpbssd alone: 11.2
 * TOP/s); this loop, with each 32-row pair of A tiles kept in L1 while the B tiles stream past
 * (or, for weights too large for L2, each 32-column strip of B kept while the rows stream),
 * ran the same blocks at 5-7 TOP/s (`BERT_AMX=0 bert bench --int8` runs oneDNN's for comparison:
 * bert-base 32 x 128, the forward 17-20% faster with this loop). Exact either way: int32
 * sums of the same products, compared element by element in tests/test_int8.c. */
#ifndef BERT_KERNELS_CPU_AMX_H
#define BERT_KERNELS_CPU_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The CPU has AMX-TILE and AMX-INT8 (AMX-BF16), and the kernel let this process use the tiles. */
bool amx_int8_available(void);
bool amx_bf16_available(void);
/* Whether the loops below are used where they apply: yes unless BERT_AMX=0 is in the
 * environment (oneDNN's kernels then run everything, to compare), oneDNN's ISA cap
 * (ONEDNN_MAX_CPU_ISA) is set below AMX, or amx_set_enabled said no.
 * amx_generation() changes with every amx_set_enabled (caches of the decision compare it). */
bool amx_enabled(void);
void amx_set_enabled(bool on);
int amx_generation(void);

/* Whether amx_int8_product takes these sizes: M a multiple of 16, N of 32, K of 64. */
bool amx_int8_shape_ok(int M, int N, int K);
/* C = A B on the calling thread (see above); amx_int8_available() and amx_int8_shape_ok()
 * must hold. B: the packed weight's first byte; ldc: C's row length in int32. */
void amx_int8_product(int M, int N, int K, const int8_t *A, int lda, const int8_t *B, int32_t *C, int ldc);

/* The tile instruction back to back on operands in tiles (no memory): `iters` x 4 tdpbssd, each
 * 2 x 16 x 16 x 64 ops, on the calling thread, for the benchmarks' instruction peak. Returns a
 * sum of the results, so that the work is not removed. */
int amx_int8_instruction_loop(long iters);

/* Attention for one head of one sequence in bf16 (inference), the two products on tiles:
 * scores S = Q K^T (32 query rows at a time against every key), then the caller's softmax
 * turns those rows into probabilities P in bf16, then the context C = P V, fp32 [T, d]. q, k,
 * v: the head's first query/key/value (bf16), rows ld apart (the QKV product's rows); T query
 * rows, L keys, d 32 or 64 (amx_attention_ok). The keys are rearranged first into the tiles'
 * layouts (K^T as pairs of d values per key; V as pairs of keys per d), once per head, in
 * `scratch` (amx_attention_scratch_bytes, 64-byte aligned). Each product sums in fp32 on the
 * tile instruction (tdpbf16ps) over d (scores) or the keys (context) in order, 32 at a time,
 * as oneDNN's AMX kernels for these shapes do. softmax(arg, s, lds, p, ldp, row0, rows): rows
 * row0 .. row0 + rows - 1 of S (s, row length lds, unscaled) into P (p, row length ldp; its
 * first L values of each row; the rest stay 0). */
typedef void (*AmxSoftmax)(void *arg, float *s, int lds, uint16_t *p, int ldp, int row0, int rows);
bool amx_attention_ok(int L, int d);
size_t amx_attention_scratch_bytes(int L, int d);
void amx_attention_head(const uint16_t *q, const uint16_t *k, const uint16_t *v, int ld, int T, int L, int d,
                        float *c, int ldc, void *scratch, AmxSoftmax softmax, void *arg);

#endif
