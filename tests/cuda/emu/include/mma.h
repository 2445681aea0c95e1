/* wmma (16 x 16 x 16 tiles, 16-bit operands, fp32 sums) on the emulator. Each lane holds the
 * whole tile: a load reads all of it (stricter than the hardware, whose lanes read parts, so a
 * tile must be whole when any lane loads it); a store writes the lane's share (lane l the
 * elements e with e % 32 == l, so another lane's read before __syncwarp sees a missing value);
 * mma_sync computes the tile once per warp call (the lanes must pass the same operands) with
 * exact products and the sums in the order EMU_MMA_ORDER picks (runtime.cpp). */
#ifndef BERT_CUDA_EMU_MMA_H
#define BERT_CUDA_EMU_MMA_H
#include <type_traits>
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"

float emu_float(const __half *p);
float emu_float(const __nv_bfloat16 *p);
void emu_mma(float *d, const float *a, const float *b, const float *c);
/* the hardware's conditions on a tile in memory: 256-bit aligned, rows a multiple of 16 bytes apart */
void emu_check_tile(const void *p, unsigned ld, size_t element_bytes);

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/* v: the tile as the product reads it, [row][column] (a: [i][k], b: [k][j], accumulator: [i][j]) */
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulator has 16 x 16 x 16 tiles only");
    float v[256];
};
template <typename F> static inline void fill_fragment(F &f, float x) {
    for (int e = 0; e < 256; e++) f.v[e] = x;
}
/* A tile as the product reads it, v[r][c], from memory in rows (row_major) or in columns. */
template <typename T> static inline void load_tile(float *v, const T *p, unsigned ld, bool rows) {
    emu_check_tile(p, ld, sizeof(T));
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) v[r * 16 + c] = emu_float(rows ? p + (size_t)r * ld + c : p + (size_t)c * ld + r);
}
template <typename Use, typename T, typename L>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ld) {
    load_tile(f.v, p, ld, std::is_same<L, row_major>::value);
}
template <typename T, typename La, typename Lb>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, La> &a,
                            const fragment<matrix_b, 16, 16, 16, T, Lb> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c) {
    emu_mma(d.v, a.v, b.v, c.v);
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ld,
                                     layout_t layout) {
    emu_check_tile(p, ld, sizeof(float));
    for (int e = emu_lane(); e < 256; e += 32) {
        const int i = e / 16, j = e % 16;
        if (layout == mem_row_major) p[(size_t)i * ld + j] = f.v[e];
        else p[(size_t)j * ld + i] = f.v[e];
    }
}
}  // namespace wmma
}  // namespace nvcuda
#endif
