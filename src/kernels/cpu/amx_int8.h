/* int8 products on AMX tiles (Intel Sapphire Rapids and later), our own loop around the tile
 * instructions: C [M, N] int32 = A [M, K] s8 (rows lda bytes apart) x B, with B [K, N] s8 in
 * oneDNN's AMX packed layout BA16a64b4a (blocks of 64 columns outermost, then blocks of 64 of
 * K; inside one: 16 groups of 4 K values x 64 columns x the 4 values), the layout gemm_int8
 * packs its weights in on these CPUs, so the same packed weight serves both.
 *
 * Why not oneDNN's own: Debian's oneDNN 2.6 ran bert-base's int8 products at 3.4-3.8 TOP/s on
 * 2 cores here in 64-row blocks, a third of what the tile instruction does (tdpbssd alone: 11.2
 * TOP/s); this loop, with each 32-row pair of A tiles kept in L1 while the B tiles stream past
 * (or, for weights too large for L2, each 32-column strip of B kept while the rows stream),
 * ran the same blocks at 5-7 TOP/s (tools: bench/amx_int8_block.c). Exact either way: int32
 * sums of the same products, compared element by element in tests/test_int8.c. */
#ifndef BERT_KERNELS_CPU_AMX_INT8_H
#define BERT_KERNELS_CPU_AMX_INT8_H

#include <stdbool.h>
#include <stdint.h>

/* The CPU has AMX-TILE and AMX-INT8, and the kernel let this process use the tiles. */
bool amx_int8_available(void);
/* Whether amx_int8_product takes these sizes: M a multiple of 16, N of 32, K of 64. */
bool amx_int8_shape_ok(int M, int N, int K);
/* C = A B on the calling thread (see above); amx_int8_available() and amx_int8_shape_ok()
 * must hold. B: the packed weight's first byte; ldc: C's row length in int32. */
void amx_int8_product(int M, int N, int K, const int8_t *A, int lda, const int8_t *B, int32_t *C, int ldc);

/* The tile instruction back to back on operands in tiles (no memory): `iters` x 4 tdpbssd, each
 * 2 x 16 x 16 x 64 ops, on the calling thread, for the benchmarks' instruction peak. Returns a
 * sum of the results, so that the work is not removed. */
int amx_int8_instruction_loop(long iters);

#endif
