/* The CUDA backend's matrix products (kernels.h): fp32 and 16-bit products on cuBLAS, the bias
 * add and the bias gradient as small kernels, and the typed layer (the CPU's kernels/cpu/linear.c,
 * the same decisions). Everything runs on the default stream.
 *
 * Row-major to cuBLAS's column-major: a row-major X [R, C] (row length ld) is the column-major
 * X^T [C, R] with the same ld, so each row-major product Y = A B is issued as Y^T = B^T A^T.
 *
 * fp32 products are true fp32 (cublasSgemm, default math mode: no TF32), so they differ from
 * the CPU's only by the order of their sums; k_set_tf32 runs them in TF32 (NVIDIA's "TF32").
 * 16-bit products take bf16 (both bf16 modes: the GPU has bf16 instructions) or fp16 operands and accumulate in fp32 (cublasGemmEx,
 * CUBLAS_COMPUTE_32F). The forward products run on cuBLASLt where it has an algorithm
 * (lt_matmul.cu): the bias in the epilogue, and a 16-bit result stored rounded by the product
 * itself, not through an fp32 copy. There are no packed weights on the GPU (k_packed_weight_bytes* return 0):
 * the packed entry points run the plain products, and the fused product + GELU reports "not
 * here" so that the caller runs the two kernels. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_blas.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/half_bits.cuh"
#include "kernels/cuda/ordered_sum.cuh"

extern "C" {
#include "kernels/kernels.h"
}

static bool tf32_products;   /* k_set_tf32 */
static cublasHandle_t blas_handle;

/* fp32 products in fp32 or TF32; reduced-precision split-K reductions refused either way. */
static void set_math_mode(void) {
    const cublasMath_t mode = tf32_products ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    CUBLAS_CHECK(cublasSetMathMode(blas_handle, (cublasMath_t)(mode | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
}

cublasHandle_t cuda_cublas(void) {
    if (!blas_handle) {
        CUBLAS_CHECK(cublasCreate(&blas_handle));
        CUBLAS_CHECK(cublasSetStream(blas_handle, 0));
        set_math_mode();
    }
    return blas_handle;
}

bool cuda_tf32(void) { return tf32_products; }

static cudaDataType half_type(HalfMode mode) { return mode == HALF_FP16 ? CUDA_R_16F : CUDA_R_16BF; }

/* Column-major C[m, n] = op(A) op(B) + beta C in fp32 arithmetic: operands of `type` (fp32, or
 * the 16-bit formats with fp32 accumulation), C fp32. */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A, int lda,
                 const void *B, int ldb, float beta, float *C, int ldc, cudaDataType type) {
    if (cuda_lt_backward_enabled() &&
        cuda_lt_gemm(ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k, A, lda, B, ldb, beta, C, ldc, type))
        return;
    const float one = 1.0f;
    if (type == CUDA_R_32F)
        CUBLAS_CHECK(cublasSgemm(cuda_cublas(), ta, tb, m, n, k, &one, (const float *)A, lda, (const float *)B, ldb, &beta,
                                 C, ldc));
    else
        CUBLAS_CHECK(cublasGemmEx(cuda_cublas(), ta, tb, m, n, k, &one, A, type, lda, B, type, ldb, &beta, C, CUDA_R_32F,
                                  ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* The three products of a linear layer, row-major, with operands of `type`. Read column-major,
 * the row-major inp [N, C] is inp^T [C, N] (ld C), W [OC, C] is W^T [C, OC] (ld C), dout [N, OC]
 * is dout^T [OC, N] (ld OC), and each product is issued transposed:
 *   forward  out[N, OC] = inp @ W^T (+ beta out)   ->  out^T [OC, N] = op_T(W^T) inp^T,  k = C
 *   dinp     dinp[N, C] = dout @ W (+ beta dinp)   ->  dinp^T [C, N] = W^T dout^T,       k = OC
 *   dweight  dW[OC, C] += dout^T @ inp             ->  dW^T [C, OC] += inp^T op_T(dout^T), k = N */
static void product_forward(float *out, const void *inp, const void *weight, float beta, int N, int C, int OC,
                            cudaDataType type) {
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, C, inp, C, beta, out, OC, type);
}
static void product_dinp(float *dinp, const void *dout, const void *weight, float beta, int N, int C, int OC,
                         cudaDataType type) {
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, C, dout, OC, beta, dinp, C, type);
}
static void product_dweight(float *dweight, const void *dout, const void *inp, int N, int C, int OC,
                            cudaDataType type) {
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 1.0f, dweight, C, type);
}

/* out[n, o] = bias[o] for every row: the product then adds onto it (beta 1), as the CPU does. */
__global__ static void broadcast_rows(float *out, const float *bias, size_t total, int OC) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] = bias[i % OC];
}

/* The forward: through cuBLASLt with the bias in the epilogue (lt_matmul.cu), else the plain
 * product with the bias as its initial value (beta 1), or none (beta 0: out not read). */
static void forward(float *out, const void *inp, const void *weight, const float *bias, int N, int C, int OC,
                    cudaDataType type) {
    if (cuda_lt_forward(out, CUDA_R_32F, inp, weight, bias, N, C, OC, type)) return;
    if (bias && N > 0) {
        const size_t total = (size_t)N * OC;
        broadcast_rows<<<cuda_blocks(total), CUDA_THREADS>>>(out, bias, total, OC);
        CUDA_LAUNCHED();
    }
    product_forward(out, inp, weight, bias ? 1.0f : 0.0f, N, C, OC, type);
}

/* ---------------------------------------------------------------- bias gradient */

/* The column sums db[c] += sum_n x[n, c] in slices (ordered_sum.cuh), each column of each slice
 * summed by one thread (neighbouring threads, neighbouring columns: coalesced). The fp32 backward's: the CPU sums whole columns in row order (one slice), which would leave
 * one thread per column; more slices keep the GPU busy, at the price of another order. */
enum { FP32_SLICES = 64 };

__global__ static void slice_column_sums(float *partial, const float *x, int N, int C, int slices) {
    const size_t total = (size_t)slices * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int slice = (int)(i / C), c = (int)(i % C);
        partial[i] = ordered_sum(0.0f, slice_row(N, slice, slices), slice_row(N, slice + 1, slices),
                                 [&](int n) { return x[(size_t)n * C + c]; });
    }
}

/* The 16-bit backward's gradient: rounded into x16 and its columns summed as above (ROW_SLICES),
 * in one pass over x (the CPU's halves_and_column_sums), where a rounding pass and then the
 * sums would read x twice. The CPU's order leaves a thread per (slice, column), 12,288 at
 * bert-base's 768 columns: so blocks of SLICE_BLOCK threads, spread over every SM (256-thread
 * blocks had 48 of them at work), and CHUNK rows fetched ahead, more the fewer the columns
 * (the choice in k_matmul_backward_half). */
enum { SLICE_BLOCK = 64 };
template <int CHUNK>
__global__ static void halves_and_slice_sums(uint16_t *x16, float *partial, const float *x, int N, int C, bool fp16) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, slice = blockIdx.y;
    if (c >= C) return;
    partial[(size_t)slice * C + c] = ordered_sum<CHUNK>(
        0.0f, slice_row(N, slice, ROW_SLICES), slice_row(N, slice + 1, ROW_SLICES),
        [&](int n) { return x[(size_t)n * C + c]; },
        [&](int n, float v) {
            x16[(size_t)n * C + c] = fp16 ? fp16_from_float_bits(v) : bf16_from_float_bits(v);
            return v;
        });
}

static void column_sums_accumulate(float *db, const float *x, int N, int C, int slices) {
    if (C <= 0) return;
    float *partial = (float *)cuda_scratch(0, sizeof(float) * (size_t)slices * C);
    slice_column_sums<<<cuda_blocks((size_t)slices * C), CUDA_THREADS>>>(partial, x, N, C, slices);
    CUDA_LAUNCHED();
    add_slice_sums<<<cuda_blocks((size_t)C), CUDA_THREADS>>>(db, partial, C, slices);
    CUDA_LAUNCHED();
}

/* ---------------------------------------------------------------- fp32 */

extern "C" void k_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C,
                                 int OC) {
    forward(out, inp, weight, bias, N, C, OC, CUDA_R_32F);
}

extern "C" size_t k_packed_weight_bytes_f32(int C, int OC) { return 0; }   /* no packed form on the GPU */
extern "C" void k_pack_weight_f32(void *packed, const float *weight, int C, int OC) {}   /* never called (0 bytes) */
extern "C" void k_matmul_forward_packed(float *out, const float *inp, const float *weight, const void *packed,
                                        const float *bias, int N, int C, int OC) {
    k_matmul_forward(out, inp, weight, bias, N, C, OC);
}

extern "C" void k_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                  const float *weight, int N, int C, int OC, bool accumulate_dinp) {
    if (dinp) product_dinp(dinp, dout, weight, accumulate_dinp ? 1.0f : 0.0f, N, C, OC, CUDA_R_32F);
    product_dweight(dweight, dout, inp, N, C, OC, CUDA_R_32F);
    if (dbias) column_sums_accumulate(dbias, dout, N, OC, FP32_SLICES);
}

/* ---------------------------------------------------------------- 16-bit */

/* The current device's compute capability (0: no device). */
static int device_major(void) {
    int devices = 0, device = 0, major = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        cudaGetLastError();   /* clear it */
        return 0;
    }
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major;
}

/* bf16 tensor cores from Ampere (8.x) on; the library is built for sm_80 and sm_90. */
extern "C" bool k_bf16_native_available(void) { return device_major() >= 8; }

/* TF32 from Ampere on too: the handle's math mode (cublasSgemm*: the linear layers' products
 * and fp32 attention's) and the cuBLASLt plans' compute type (lt_matmul.cu). */
extern "C" bool k_set_tf32(bool on) {
    if (on && device_major() < 8) return false;
    tf32_products = on;
    if (blas_handle) set_math_mode();
    return true;
}

extern "C" void k_bf16_describe(char *out, size_t n) {
    if (!k_bf16_native_available()) {
        snprintf(out, n, "no CUDA device with bf16 (compute capability 8.0 or later)");
        return;
    }
    int device = 0;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    snprintf(out, n, "cuBLAS bf16 on %s", prop.name);
}

/* int8 inference is the CPU backend's (oneDNN's int8 matmul): here k_int8_support says there
 * is none, so bert_set_precision refuses BERT_INT8 before any of these could be called. */
extern "C" int k_int8_support(void) { return 0; }
extern "C" void k_int8_describe(char *out, size_t n) { snprintf(out, n, "no int8 products on the CUDA backend"); }
extern "C" void k_int8_product_counters(double *thread_seconds, double *ops, bool reset) {
    if (thread_seconds) *thread_seconds = 0;
    if (ops) *ops = 0;
}
extern "C" size_t k_packed_weight_bytes_int8(int C, int OC) { return 0; }
extern "C" void k_pack_weight_int8(void *packed, const float *weight, const KInt8Smoothing *smooth, int C, int OC) {
    fprintf(stderr, "bert: int8 weights are not supported on the CUDA backend\n");
    exit(1);
}
extern "C" const float *k_int8_smoothing(const void *packed) { return NULL; }
extern "C" void k_matmul_forward_int8(float *out, const float *inp, const void *packed, const float *bias, int N,
                                      int C, int OC, bool gelu, Activation act) {
    fprintf(stderr, "bert: int8 products are not supported on the CUDA backend\n");
    exit(1);
}
extern "C" void k_quantize_rows_int8(int8_t *q, float *scale, const float *x, const float *smooth, int N, int C) {
    fprintf(stderr, "bert: int8 activations are not supported on the CUDA backend\n");
    exit(1);
}
extern "C" void k_matmul_forward_int8_rows(const KInt8Output *o, const int8_t *q, const float *scale,
                                           const void *packed, const float *bias, int N, int C, int OC) {
    fprintf(stderr, "bert: int8 products are not supported on the CUDA backend\n");
    exit(1);
}

extern "C" bool k_matmul_forward_half(float *out, const float *inp, uint16_t *inp16, const uint16_t *weight,
                                      const void *packed, const float *bias, int N, int C, int OC, HalfMode mode) {
    if (inp) k_to_half(mode, inp16, inp, (long)N * C);
    if (!weight) return false;   /* packed is never made here: the plain weight is needed */
    forward(out, inp16, weight, bias, N, C, OC, half_type(mode));
    return true;
}

extern "C" bool k_matmul_forward_half_out16(uint16_t *out16, float *out, const float *inp, uint16_t *inp16,
                                            const uint16_t *weight, const void *packed, const float *bias, int N,
                                            int C, int OC, HalfMode mode) {
    /* stored rounded by the product's epilogue (fp32 sums and bias, then one rounding: the value
     * the CPU rounds), else the product in fp32 into out (scratch) and then rounded */
    if (inp) k_to_half(mode, inp16, inp, (long)N * C);
    if (!weight) return false;   /* packed is never made here: the plain weight is needed */
    if (cuda_lt_forward(out16, half_type(mode), inp16, weight, bias, N, C, OC, half_type(mode))) return true;
    forward(out, inp16, weight, bias, N, C, OC, half_type(mode));
    k_to_half(mode, out16, out, (long)N * OC);
    return true;
}

extern "C" size_t k_packed_weight_bytes(HalfMode mode, int C, int OC) { return 0; }
extern "C" void k_pack_weight(HalfMode mode, void *packed, const uint16_t *weight, int C, int OC) {}

extern "C" bool k_matmul_gelu_forward_packed(float *out, const float *inp, const void *packed, const float *bias,
                                             int N, int C, int OC, Activation act) {
    return false;
}
extern "C" bool k_matmul_gelu_forward_half_packed(uint16_t *out16, const float *inp, uint16_t *inp16,
                                                  const void *packed, const float *bias, int N, int C, int OC,
                                                  Activation act) {
    return false;
}

extern "C" void k_matmul_backward_half(float *dinp, float *dweight, float *dbias, const float *dout,
                                       const uint16_t *inp16, const uint16_t *weight, int N, int C, int OC,
                                       bool accumulate_dinp, uint16_t *dout16, HalfMode mode) {
    if (dout && dbias && OC > 0) {   /* dbias from the fp32 values (N 0: + 0, as the CPU) */
        float *partial = (float *)cuda_scratch(0, sizeof(float) * ROW_SLICES * (size_t)OC);
        const dim3 grid((unsigned)((OC + SLICE_BLOCK - 1) / SLICE_BLOCK), ROW_SLICES);
        /* about 4 MB of loads in flight at most: 64 rows a thread to 1024 columns, 32 to 2560 */
        decltype(&halves_and_slice_sums<16>) kernel = OC <= 1024   ? halves_and_slice_sums<64>
                                                      : OC <= 2560 ? halves_and_slice_sums<32>
                                                                   : halves_and_slice_sums<16>;
        kernel<<<grid, SLICE_BLOCK>>>(dout16, partial, dout, N, OC, mode == HALF_FP16);
        CUDA_LAUNCHED();
        add_slice_sums<<<cuda_blocks((size_t)OC), CUDA_THREADS>>>(dbias, partial, OC, ROW_SLICES);
        CUDA_LAUNCHED();
    } else if (dout) {
        k_to_half(mode, dout16, dout, (long)N * OC);
    } else if (dbias) {
        fprintf(stderr, "bert: k_matmul_backward_half: with dout NULL the caller adds the bias gradient (dbias NULL)\n");
        exit(1);
    }
    const cudaDataType type = half_type(mode);
    if (dinp) product_dinp(dinp, dout16, weight, accumulate_dinp ? 1.0f : 0.0f, N, C, OC, type);
    product_dweight(dweight, dout16, inp16, N, C, OC, type);
}

/* ---------------------------------------------------------------- typed products
 * kernels/cpu/linear.c's decisions, unchanged: on the GPU w->packed is always NULL (nothing is
 * packed), so the 16-bit forward's first call only rounds inp and the second multiplies. */

static const uint16_t *half_of(const KWeight *w) { return w->half(w->ctx, w->f32, w->C, w->OC); }

extern "C" void k_linear_forward(const KPrecision *p, float *out, const float *inp, uint16_t *inp16,
                                 const KWeight *w, const float *bias, int N) {
    if (p->half) {   /* the plain 16-bit weight only where the packed one does not run */
        if (!k_matmul_forward_half(out, inp, inp16, NULL, w->packed, bias, N, w->C, w->OC, p->half_mode))
            k_matmul_forward_half(out, NULL, inp16, half_of(w), NULL, bias, N, w->C, w->OC, p->half_mode);
        return;
    }
    const void *packed = p->pack_f32 ? w->packed : NULL;
    if (packed) k_matmul_forward_packed(out, inp, w->f32, packed, bias, N, w->C, w->OC);
    else k_matmul_forward(out, inp, w->f32, bias, N, w->C, w->OC);
}

extern "C" void k_linear_forward_to(const KPrecision *p, float *out, uint16_t *out16, const float *inp,
                                    uint16_t *inp16, const KWeight *w, const float *bias, int N) {
    if (!p->half) {
        k_linear_forward(p, out, inp, inp16, w, bias, N);
        return;
    }
    if (!k_matmul_forward_half_out16(out16, out, inp, inp16, NULL, w->packed, bias, N, w->C, w->OC, p->half_mode))
        k_matmul_forward_half_out16(out16, out, NULL, inp16, half_of(w), NULL, bias, N, w->C, w->OC, p->half_mode);
}

extern "C" bool k_linear_act_forward(const KPrecision *p, float *out, uint16_t *out16, const float *inp,
                                     uint16_t *inp16, const KWeight *w, const float *bias, int N, Activation act) {
    if (!w->packed) return false;
    if (!p->half) return k_matmul_gelu_forward_packed(out, inp, w->packed, bias, N, w->C, w->OC, act);
    return p->half_mode == HALF_BF16 &&
           k_matmul_gelu_forward_half_packed(out16, inp, inp16, w->packed, bias, N, w->C, w->OC, act);
}

extern "C" void k_activation_forward_to(const KPrecision *p, float *out, uint16_t *out16, const float *pre,
                                        const uint16_t *pre16, long n, Activation act) {
    if (p->half) k_gelu_forward_half(out16, pre16, n, act, p->half_mode);
    else k_gelu_forward(out, pre, n, act);
}

extern "C" void k_linear_backward(const KPrecision *p, float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const uint16_t *inp16, const KWeight *w, int N,
                                  bool accumulate_dinp, uint16_t *dout16) {
    if (!p->half) k_matmul_backward(dinp, dweight, dbias, dout, inp, w->f32, N, w->C, w->OC, accumulate_dinp);
    else k_matmul_backward_half(dinp, dweight, dbias, dout, inp16, half_of(w), N, w->C, w->OC, accumulate_dinp,
                                dout16, p->half_mode);
}

extern "C" void k_linear_act_backward(const KPrecision *p, float *dinp, float *dweight, float *dbias, float *dout,
                                      const float *pre, const uint16_t *pre16, const float *inp,
                                      const uint16_t *inp16, const KWeight *w, int N, Activation act,
                                      uint16_t *dout16) {
    if (!p->half) {
        k_gelu_backward(dout, dout, pre, (long)N * w->OC, act);
        k_matmul_backward(dinp, dweight, dbias, dout, inp, w->f32, N, w->C, w->OC, true);
        return;
    }
    /* GELU's backward writes the product's rounded operand and the bias gradient itself */
    k_gelu_backward_half_out16(dout16, dbias, dout, pre16, N, w->OC, act, p->half_mode);
    k_matmul_backward_half(dinp, dweight, NULL, NULL, inp16, half_of(w), N, w->C, w->OC, true, dout16, p->half_mode);
}
