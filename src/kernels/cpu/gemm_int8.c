#include "kernels/cpu/gemm_int8.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_half.h"   /* bf16_from_float */
#include "kernels/cpu/layernorm_row.h"
#include "kernels/cpu/team.h"
#include "kernels/cpu/vec16.h"

/* The layout a weight is packed in: the one oneDNN's int8 matmul picks for B [K, N] s8 when
 * free to choose, for a product of PACK_ROWS s8 rows (on VNNI CPUs it carries oneDNN's s8 x s8
 * compensation after the blocks). Products of every row count are created with it. */
enum { PACK_ROWS = 4096, LAYOUT_CAPACITY = 256, CACHE_SLOTS = 4096 };
typedef struct {
    int K, N;
    dnnl_memory_desc_t md;
    dnnl_primitive_t reorder;   /* plain q [N, K] -> packed */
    bool amx;   /* packed as amx_int8_product reads it (BA16a64b4a, nothing after the blocks) */
} Int8Layout;
typedef struct {
    int M, N, K;   /* M 0: empty slot */
    dnnl_primitive_t primitive;   /* NULL: amx_int8_product runs it */
    dnnl_memory_desc_t a, c;
    size_t scratch_bytes;   /* its scratchpad, the caller's (see t8) */
} Int8Gemm;

static struct {
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    Int8Layout layouts[LAYOUT_CAPACITY];
    int layout_count;
    Int8Gemm slots[CACHE_SLOTS];   /* open addressing on (M, N, K); emptied when 3/4 full */
    int used;
    int amx_generation;   /* amx_generation() when the cached products were made */
    double product_seconds, product_ops;   /* gemm_int8_product_counters, added under omp atomic */
} g8 = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void check(dnnl_status_t s, const char *what, int M, int N, int K) {
    if (s != dnnl_success) die("oneDNN int8 matmul: %s failed (status %d) for M=%d N=%d K=%d", what, (int)s, M, N, K);
}

static void plain_md(dnnl_memory_desc_t *md, int rows, int cols, dnnl_data_type_t t, bool transposed) {
    dnnl_dims_t dims = {rows, cols}, strides = {transposed ? 1 : cols, transposed ? rows : 1};
    check(dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides), "memory descriptor", rows, cols, 0);
}

static void ensure_engine(void) {
    if (g8.engine) return;
    check(dnnl_engine_create(&g8.engine, dnnl_cpu, 0), "engine", 0, 0, 0);
    check(dnnl_stream_create(&g8.stream, g8.engine, dnnl_stream_default_flags), "stream", 0, 0, 0);
}

/* VNNI as oneDNN 2.6 uses it: AVX-512 VNNI (and AMX above it). AVX-VNNI (256-bit, on client
 * CPUs) is counted as none: whether this oneDNN's int8 kernels use it was not verified, and
 * counting it would risk the saturating path with 8-bit weights. */
int gemm_int8_support(void) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned vnni512 = (unsigned)dnnl_cpu_isa_avx512_core_vnni;
    if ((isa & vnni512) == vnni512) return 2;
    const unsigned avx2 = (unsigned)dnnl_cpu_isa_avx2;
    return (isa & avx2) == avx2 ? 1 : 0;
}

/* The matmul descriptor of an M-row product: s8 A [M, K] x s8 B [K, N] (b: its layout) -> s32. */
static void int8_desc(dnnl_matmul_desc_t *desc, dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b,
                      dnnl_memory_desc_t *c, int M, int N, int K) {
    plain_md(a, M, K, dnnl_s8, false);
    plain_md(c, M, N, dnnl_s32, false);
    check(dnnl_matmul_desc_init(desc, a, b, NULL, c), "matmul descriptor", M, N, K);
}

/* Under g8.lock. */
static const Int8Layout *find_layout(int K, int N) {
    for (int i = 0; i < g8.layout_count; i++)
        if (g8.layouts[i].K == K && g8.layouts[i].N == N) return &g8.layouts[i];
    if (g8.layout_count == LAYOUT_CAPACITY) die("gemm_int8: more than %d packed weight shapes", LAYOUT_CAPACITY);
    ensure_engine();
    Int8Layout *l = &g8.layouts[g8.layout_count];
    dnnl_memory_desc_t a, c, any, plain;
    dnnl_dims_t dims = {K, N};
    check(dnnl_memory_desc_init_by_tag(&any, 2, dims, dnnl_s8, dnnl_format_tag_any), "packed descriptor", PACK_ROWS, N, K);
    dnnl_matmul_desc_t desc;
    int8_desc(&desc, &a, &any, &c, PACK_ROWS, N, K);
    dnnl_primitive_desc_t pd, reorder_pd;
    check(dnnl_primitive_desc_create(&pd, &desc, NULL, g8.engine, NULL), "primitive descriptor", PACK_ROWS, N, K);
    l->md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_primitive_desc_destroy(pd);
    plain_md(&plain, K, N, dnnl_s8, true);   /* q [N, K] row-major is B [K, N] transposed */
    check(dnnl_reorder_primitive_desc_create(&reorder_pd, &plain, g8.engine, &l->md, g8.engine, NULL),
          "reorder descriptor", 0, N, K);
    check(dnnl_primitive_create(&l->reorder, reorder_pd), "reorder", 0, N, K);
    dnnl_primitive_desc_destroy(reorder_pd);
    l->K = K, l->N = N;
    dnnl_memory_desc_t amx_md;
    l->amx = dnnl_memory_desc_init_by_tag(&amx_md, 2, dims, dnnl_s8, dnnl_BA16a64b4a) == dnnl_success &&
             dnnl_memory_desc_equal(&l->md, &amx_md) && dnnl_memory_desc_get_size(&l->md) == (size_t)K * N;
    g8.layout_count++;
    return l;
}

/* Under g8.lock. */
static void empty_cache(void) {
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (g8.slots[i].M && g8.slots[i].primitive) dnnl_primitive_destroy(g8.slots[i].primitive);
        g8.slots[i].M = 0;
    }
    g8.used = 0;
}

/* Under g8.lock: whether products on layout l of M rows run on amx_int8_product. */
static bool own_amx(const Int8Layout *l, int M) {
    return amx_enabled() && l->amx && amx_int8_shape_ok(M, l->N, l->K) && amx_int8_available();
}

bool gemm_int8_own_amx(void) {
    pthread_mutex_lock(&g8.lock);
    const bool yes = own_amx(find_layout(768, 768), 64);
    pthread_mutex_unlock(&g8.lock);
    return yes;
}

/* Under g8.lock: makes room for `entries` more cached products, emptying the cache where it
 * is 3/4 full (each entry holds JIT code). A product found before is invalid after this. */
static void room_for(int entries) {
    if (g8.used + entries < CACHE_SLOTS / 4 * 3 && g8.amx_generation == amx_generation()) return;
    empty_cache();   /* also when amx_set_enabled changed which kernel runs them */
    g8.amx_generation = amx_generation();
}

/* Under g8.lock, after room_for: the cached M-row product on the weight layout of (K, N). */
static const Int8Gemm *find_gemm(int M, int N, int K) {
    unsigned h = ((unsigned)M * 2654435761u) ^ ((unsigned)N * 40503u) ^ ((unsigned)K * 2246822519u);
    for (;; h++) {
        Int8Gemm *e = &g8.slots[h % CACHE_SLOTS];
        if (e->M == M && e->N == N && e->K == K) return e;
        if (e->M) continue;
        if (g8.used >= CACHE_SLOTS / 4 * 3) die("gemm_int8: the product cache is full (room_for missed)");
        const Int8Layout *l = find_layout(K, N);
        if (own_amx(l, M)) {
            *e = (Int8Gemm){.M = M, .N = N, .K = K};
            g8.used++;
            return e;
        }
        dnnl_matmul_desc_t desc;
        int8_desc(&desc, &e->a, &l->md, &e->c, M, N, K);
        /* the scratchpad is the calling thread's, so that products run concurrently on
         * different threads (gemm_int8_rows: each OpenMP worker its own blocks of rows) */
        dnnl_primitive_attr_t attr;
        check(dnnl_primitive_attr_create(&attr), "attributes", M, N, K);
        check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad mode", M, N, K);
        dnnl_primitive_desc_t pd;
        check(dnnl_primitive_desc_create(&pd, &desc, attr, g8.engine, NULL), "primitive descriptor", M, N, K);
        e->scratch_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
        check(dnnl_primitive_create(&e->primitive, pd), "primitive", M, N, K);
        dnnl_primitive_desc_destroy(pd);
        dnnl_primitive_attr_destroy(attr);
        e->M = M, e->N = N, e->K = K;
        g8.used++;
        return e;
    }
}

/* ---- quantization ---- */

/* Rounds v (|v| < 2^22) to the nearest integer, ties to even, in the default rounding mode:
 * adding and subtracting 1.5 2^23 leaves no fraction bits. Unlike nearbyintf, the compiler
 * vectorizes it. */
static inline float round_even(float v) {
    const float magic = 12582912.0f;   /* the build has no -ffast-math, which would fold this */
    return (v + magic) - magic;
}

#if VEC16
/* A row's largest magnitude so far, 16 values at a time into four accumulators (a maximum is
 * exact in any order; four keep each chain of dependent maxima short: quantize_row of 768
 * values 92 ns with one, 66 with four), and whether a value was not finite. */
typedef struct {
    __m512 m[4];
    __mmask16 bad;
} RowMax16;
static inline RowMax16 rowmax16_start(void) {
    return (RowMax16){{_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()}, 0};
}
/* v's lanes l (the others 0) into accumulator g. */
static inline void rowmax16_add(RowMax16 *r, int g, __m512 v, __mmask16 l) {
    const __m512 a = _mm512_abs_ps(v);
    r->m[g] = _mm512_max_ps(a, r->m[g]);   /* a NaN in a: the accumulator kept (the second operand) */
    r->bad |= _mm512_mask_cmp_ps_mask(l, a, _mm512_set1_ps(3.402823466e38f), _CMP_NLE_UQ);
}
static inline float rowmax16_value(const RowMax16 *r, int *finite) {
    *finite = !r->bad;
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(r->m[0], r->m[1]), _mm512_max_ps(r->m[2], r->m[3])));
}
#endif

/* A row's largest magnitude, and whether every value is finite (a max is exact in any order:
 * the compiler does not vectorize this reduction itself). */
static float row_amax(const float *restrict x, int cols, int *finite) {
    float amax = 0.0f;
    int ok = 1, k = 0;
#if VEC16
    RowMax16 r = rowmax16_start();
    for (int k0 = 0; k0 < cols; k0 += 64)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {   /* unrolled: the accumulators stay in registers */
            const int c = k0 + 16 * g;
            if (c >= cols) break;
            const __mmask16 l = lanes(cols - c);
            rowmax16_add(&r, g, _mm512_maskz_loadu_ps(l, x + c), l);
        }
    k = cols;
    amax = rowmax16_value(&r, &ok);
#elif defined(__AVX2__)
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.402823466e38f);
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps(), all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (; k + 16 <= cols; k += 16) {
        const __m256 a0 = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), a1 = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k + 8));
        m0 = _mm256_max_ps(a0, m0), m1 = _mm256_max_ps(a1, m1);
        all = _mm256_and_ps(all, _mm256_and_ps(_mm256_cmp_ps(a0, big, _CMP_LE_OQ), _mm256_cmp_ps(a1, big, _CMP_LE_OQ)));
    }
    float lane[8];
    _mm256_storeu_ps(lane, _mm256_max_ps(m0, m1));
    for (int l = 0; l < 8; l++) amax = lane[l] > amax ? lane[l] : amax;
    ok = _mm256_movemask_ps(all) == 0xff;
#endif
    for (; k < cols; k++) {
        const float a = fabsf(x[k]);
        amax = a > amax ? a : amax;
        ok &= a <= 3.402823466e38f;   /* 0 for an infinity or NaN */
    }
    *finite = ok;
    return amax;
}

/* The row's rounded multiples of amax / levels, given its largest magnitude; returns the scale. */
static float quantize_with(int8_t *restrict q, const float *restrict x, int cols, float levels, float amax, int finite) {
    if (!finite || amax == 0.0f) {   /* NaN scale: the row's results are NaN, not a quiet 0 */
        memset(q, 0, (size_t)cols);
        return finite ? 0.0f : NAN;
    }
    const float inv = levels / amax;
    int k = 0;
#if VEC16
    /* The conversion rounds to nearest even as round_even does (the default rounding mode), and
     * the clamps cannot act: |x| <= amax, so |x inv| <= levels (1 + 2^-24)^2 < levels + 1/2
     * rounds to at most levels. The same values, in 3 operations where the loop below takes 7. */
    const __m512 vinv = _mm512_set1_ps(inv);
    for (; k < cols; k += 16) {
        const __mmask16 l = lanes(cols - k);
        const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(l, x + k), vinv));
        _mm_mask_storeu_epi8(q + k, l, _mm512_cvtsepi32_epi8(v));
    }
#endif
    for (; k < cols; k++) {
        float v = round_even(x[k] * inv);
        v = v > levels ? levels : v;
        v = v < -levels ? -levels : v;
        q[k] = (int8_t)(int)v;
    }
    return amax / levels;
}

/* One row: its largest magnitude (NaN if a value is not finite), then the rounded multiples. */
static float quantize_row(int8_t *restrict q, const float *restrict x, int cols, float levels) {
    int finite;
    const float amax = row_amax(x, cols, &finite);
    return quantize_with(q, x, cols, levels, amax, finite);
}

float gemm_int8_quantize_row(int8_t *q, const float *x, int cols, int levels) {
    return quantize_row(q, x, cols, (float)levels);
}

int gemm_int8_weight_levels(void) { return gemm_int8_support() == 2 ? 127 : 63; }

void quantize_rows_s8(int8_t *q, float *scale, const float *x, int rows, int cols, int ld, int levels) {
    if (rows <= 0 || cols <= 0) return;
    if (levels < 1 || levels > 127) die("quantize_rows_s8: levels %d outside [1, 127]", levels);
#pragma omp parallel for schedule(static) if ((long)rows * cols >= (1L << 15))
    for (int i = 0; i < rows; i++)
        scale[i] = quantize_row(q + (size_t)i * cols, x + (size_t)i * ld, cols, (float)levels);
}

/* 1 / t_k rounded to fp32, n of them, in a new array: a smoothed input is multiplied by them
 * (one division per factor and product call; a division per value cost more than the rest of
 * the LayerNorm epilogue's row together). */
static float *reciprocals(const float *t, int n) {
    float *u = xmalloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int k = 0; k < n; k++) u[k] = 1.0f / t[k];
    return u;
}

/* One row of x u (u: reciprocals of the smoothing factors; into y, cols floats of scratch)
 * quantized with 127 levels; in AVX-512 the product and the maximum in one pass. */
static float quantize_row_smoothed(int8_t *restrict q, const float *restrict x, const float *restrict u,
                                   float *restrict y, int cols) {
#if VEC16
    RowMax16 r = rowmax16_start();
    for (int k0 = 0; k0 < cols; k0 += 64)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {   /* unrolled: the accumulators stay in registers */
            const int k = k0 + 16 * g;
            if (k >= cols) break;
            const __mmask16 m = lanes(cols - k);
            const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + k), _mm512_maskz_loadu_ps(m, u + k));
            _mm512_mask_storeu_ps(y + k, m, v);
            rowmax16_add(&r, g, v, m);
        }
    int finite;
    const float amax = rowmax16_value(&r, &finite);
    return quantize_with(q, y, cols, 127.0f, amax, finite);
#else
    for (int k = 0; k < cols; k++) y[k] = x[k] * u[k];
    return quantize_row(q, y, cols, 127.0f);
#endif
}

/* ---- packed weights: [header][N scales][K smoothing factors][oneDNN's packed q], each part
 * padded to 64 bytes ---- */

typedef struct {
    int32_t smoothed, K, N;
} PackHeader;
enum { HEADER_BYTES = 64 };

static size_t floats_bytes(int n) { return ((size_t)n * sizeof(float) + 63) / 64 * 64; }
static size_t q_offset(int K, int N) { return HEADER_BYTES + floats_bytes(N) + floats_bytes(K); }
static float *weight_scales(void *packed) { return (float *)((char *)packed + HEADER_BYTES); }
static float *weight_factors(void *packed, int N) { return (float *)((char *)packed + HEADER_BYTES + floats_bytes(N)); }

size_t gemm_int8_packed_bytes(int K, int N) {
    if (K <= 0 || N <= 0 || !gemm_int8_support()) return 0;
    pthread_mutex_lock(&g8.lock);
    const size_t bytes = dnnl_memory_desc_get_size(&find_layout(K, N)->md);
    pthread_mutex_unlock(&g8.lock);
    return q_offset(K, N) + bytes;
}

const float *gemm_int8_weight_scales(const void *packed) { return weight_scales((void *)packed); }

const float *gemm_int8_weight_smoothing(const void *packed) {
    const PackHeader *h = packed;
    return h->smoothed ? weight_factors((void *)packed, h->N) : NULL;
}

void gemm_int8_smoothing(float *t, const float *ln_w, const float *ln_b, const float *W, int K, int N) {
    if (K <= 0) return;
    for (int k = 0; k < K; k++) t[k] = 0.0f;
    for (int j = 0; j < N; j++)   /* the columns' largest magnitudes, row by row (W's layout) */
        for (int k = 0; k < K; k++) t[k] = fmaxf(t[k], fabsf(W[(size_t)j * K + k]));
    double sum = 0;
    for (int k = 0; k < K; k++) {
        const double act = fabs((double)ln_w[k]) + (ln_b ? fabs((double)ln_b[k]) : 0.0);
        t[k] = (float)sqrt(fmax(act, 1e-5) / fmax((double)t[k], 1e-5));
        sum += t[k];
    }
    const double mean = sum / K;
    for (int k = 0; k < K; k++) t[k] = (float)(t[k] / mean);
}

void gemm_int8_pack(void *packed, const float *W, int K, int N, const float *smooth) {
    pthread_mutex_lock(&g8.lock);
    const Int8Layout *l = find_layout(K, N);
    pthread_mutex_unlock(&g8.lock);
    *(PackHeader *)packed = (PackHeader){.smoothed = smooth != NULL, .K = K, .N = N};
    float *scaled = NULL;
    if (smooth) {   /* W t: column k times t_k, then quantized per output channel like any weight */
        memcpy(weight_factors(packed, N), smooth, sizeof(float) * (size_t)K);
        scaled = xmalloc(sizeof(float) * (size_t)N * K);
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++) scaled[(size_t)j * K + k] = W[(size_t)j * K + k] * smooth[k];
    }
    int8_t *q = xmalloc((size_t)N * K);
    quantize_rows_s8(q, weight_scales(packed), smooth ? scaled : W, N, K, K, gemm_int8_weight_levels());   /* per output channel: W's rows */
    dnnl_memory_desc_t plain;
    plain_md(&plain, K, N, dnnl_s8, true);
    dnnl_memory_t from, to;
    check(dnnl_memory_create(&from, &plain, g8.engine, q), "memory", 0, N, K);
    check(dnnl_memory_create(&to, &l->md, g8.engine, (char *)packed + q_offset(K, N)), "memory", 0, N, K);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    check(dnnl_primitive_execute(l->reorder, g8.stream, 2, args), "packing reorder", 0, N, K);
    check(dnnl_stream_wait(g8.stream), "stream wait", 0, N, K);
    dnnl_memory_destroy(from), dnnl_memory_destroy(to);
    free(q), free(scaled);
}

void gemm_int8_unpack(int8_t *q, const void *packed, int K, int N) {
    pthread_mutex_lock(&g8.lock);
    const Int8Layout *l = find_layout(K, N);
    pthread_mutex_unlock(&g8.lock);
    dnnl_memory_desc_t plain;
    plain_md(&plain, K, N, dnnl_s8, true);
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t reorder;
    check(dnnl_reorder_primitive_desc_create(&pd, &l->md, g8.engine, &plain, g8.engine, NULL), "unpacking reorder", 0, N, K);
    check(dnnl_primitive_create(&reorder, pd), "unpacking reorder", 0, N, K);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_t from, to;
    check(dnnl_memory_create(&from, &l->md, g8.engine, (char *)packed + q_offset(K, N)), "memory", 0, N, K);
    check(dnnl_memory_create(&to, &plain, g8.engine, q), "memory", 0, N, K);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    check(dnnl_primitive_execute(reorder, g8.stream, 2, args), "unpacking reorder", 0, N, K);
    check(dnnl_stream_wait(g8.stream), "stream wait", 0, N, K);
    dnnl_memory_destroy(from), dnnl_memory_destroy(to), dnnl_primitive_destroy(reorder);
}

/* ---- products ---- */

/* Each thread's own: the stream it executes on, the primitives' scratchpad, the int32 sums of
 * its block of rows and one row of results (the epilogue's), the activations' int8 copy, grown
 * as needed (inference only), freed when its thread ends (a server's compute worker is a
 * thread that ends before the process). */
typedef struct {
    dnnl_stream_t stream;
    void *scratch;
    size_t scratch_cap;
    int32_t *acc;
    size_t acc_cap;
    float *row;
    size_t row_cap;
    int8_t *q;
    float *scale;
    size_t q_cap, rows_cap;
    float *div;   /* a row divided by smoothing factors, before it is quantized */
    size_t div_cap;
    int8_t *apad;   /* a block's rows padded to a multiple of 16 (rows_block) */
    size_t apad_cap;
    int32_t *panels;   /* a block's sums in every thread's panel, the rows' maxima (gemm_int8_panels; the caller's) */
    size_t panels_cap;
    bool registered;   /* with t8_key: released when the thread ends */
} Int8Scratch;
static _Thread_local Int8Scratch t8;

static void t8_release(void *scratch) {
    Int8Scratch *s = scratch;
    if (s->stream) dnnl_stream_destroy(s->stream);
    free(s->scratch), free(s->acc), free(s->row), free(s->q), free(s->scale), free(s->div), free(s->apad), free(s->panels);
    memset(s, 0, sizeof *s);
}

/* Before a thread's first allocation: its scratch is freed when the thread ends. */
static void t8_register(void) {
    if (t8.registered) return;
    thread_at_exit(t8_release, &t8);
    t8.registered = true;
}

static void *grow(void *p, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return p;
    free(p);
    *cap = bytes;
    return xmalloc(bytes);
}

/* The product of a cached primitive, on the calling thread's stream and scratchpad (inside an
 * OpenMP worker oneDNN runs it on that thread alone). */
static void run_gemm(const Int8Gemm *e, const Int8Layout *l, const int8_t *A, const void *weights, int32_t *C) {
    const int M = e->M, N = e->N, K = e->K;
    if (!e->primitive) {   /* outside the kernels' regions (gemm_int8_s32) the threads split its row tiles */
        const bool split = omp_get_level() == 0 && omp_get_max_threads() > 1 && (double)M * N * K >= 1 << 22;
#pragma omp parallel if (split)
        {
            const int t = omp_get_thread_num(), T = omp_get_num_threads(), tiles = M / 16;
            const int m0 = 16 * (tiles * t / T), m1 = 16 * (tiles * (t + 1) / T);
            if (m1 > m0) amx_int8_product(m1 - m0, N, K, A + (size_t)m0 * K, K, weights, C + (size_t)m0 * N, N);
        }
        return;
    }
    t8_register();
    if (!t8.stream) check(dnnl_stream_create(&t8.stream, g8.engine, dnnl_stream_default_flags), "stream", M, N, K);
    t8.scratch = grow(t8.scratch, &t8.scratch_cap, e->scratch_bytes);
    dnnl_memory_desc_t scratch_md;
    dnnl_dims_t scratch_dims = {(dnnl_dim_t)(e->scratch_bytes ? e->scratch_bytes : 1)};
    check(dnnl_memory_desc_init_by_tag(&scratch_md, 1, scratch_dims, dnnl_u8, dnnl_a), "scratchpad descriptor", M, N, K);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, NULL}, {DNNL_ARG_WEIGHTS, NULL}, {DNNL_ARG_DST, NULL},
                               {DNNL_ARG_SCRATCHPAD, NULL}};
    check(dnnl_memory_create(&args[0].memory, &e->a, g8.engine, (void *)A), "memory", M, N, K);
    check(dnnl_memory_create(&args[1].memory, &l->md, g8.engine, (void *)weights), "memory", M, N, K);
    check(dnnl_memory_create(&args[2].memory, &e->c, g8.engine, C), "memory", M, N, K);
    const int nargs = e->scratch_bytes ? 4 : 3;
    if (e->scratch_bytes) check(dnnl_memory_create(&args[3].memory, &scratch_md, g8.engine, t8.scratch), "memory", M, N, K);
    const int team = library_team_begin();
    check(dnnl_primitive_execute(e->primitive, t8.stream, nargs, args), "execute", M, N, K);
    library_team_end(team);
    check(dnnl_stream_wait(t8.stream), "stream wait", M, N, K);
    for (int i = 0; i < nargs; i++) dnnl_memory_destroy(args[i].memory);
}

/* Under g8.lock. */
static void lookup(int M, int N, int K, const Int8Gemm **e, const Int8Layout **l) {
    *e = find_gemm(M, N, K);
    *l = find_layout(K, N);
}

void gemm_int8_s32(int M, int N, int K, const int8_t *A, const void *packed, int32_t *C) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) die("gemm_int8: K must be positive (got %d)", K);
    const Int8Gemm *e;
    const Int8Layout *l;
    pthread_mutex_lock(&g8.lock);
    room_for(1);
    lookup(M, N, K, &e, &l);
    pthread_mutex_unlock(&g8.lock);
    run_gemm(e, l, A, (const char *)packed + q_offset(K, N), C);
}

/* libmvec's vector erff (as kernels/cpu/layers.c declares it), so the GELU loop vectorizes. */
float erff(float) __attribute__((simd("notinbranch")));

#if VEC16
/* GELU (erf) of 16 values: 0.5 x (1 + erf(x / sqrt 2)), erf(z) = z P(z^2) / Q(z^2) for
 * |z| <= 4 (a rational fit of degrees 5 and 5 in z^2, tools/fit_erf.py: within 3.2e-7 of erf
 * in float32 over [0, 5]), at most 1, odd in z; 1 beyond 4 (erf(4) is 1 - 1.5e-8). Measured
 * against GELU in double over [-30, 30] every 3e-5: within 2.4e-7 |x|, the result's own
 * rounding included. 1/Q by the reciprocal instruction and one Newton step (28 bits). Half the
 * operations of Abramowitz and Stegun's 7.1.26 with its exponential and division (what oneDNN's
 * GELU post-op evaluates), which the first feed-forward product's epilogue spent most of its
 * time in; libmvec's erff before that was slower still. */
static inline __m512 gelu_erf16(__m512 x) {
    static const float P[6] = {1.9748238174e-06f, 2.8804450994e-04f, 4.0037459694e-03f,
                               5.3467791528e-02f, 1.9625118375e-01f, 1.1283789873e+00f};
    static const float Q[6] = {3.7480960600e-05f, 1.2163857464e-03f, 1.5444621444e-02f,
                               1.1647735536e-01f, 5.0725424290e-01f, 1.0f};
    const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
    const __m512 a = _mm512_min_ps(_mm512_abs_ps(z), _mm512_set1_ps(4.0f)), u = _mm512_mul_ps(a, a);
    __m512 p = _mm512_set1_ps(P[0]), q = _mm512_set1_ps(Q[0]);
    for (int k = 1; k < 6; k++) {
        p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(P[k]));
        q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(Q[k]));
    }
    const __m512 r0 = _mm512_rcp14_ps(q), r = _mm512_mul_ps(r0, _mm512_fnmadd_ps(q, r0, _mm512_set1_ps(2.0f)));
    __m512 erf = _mm512_min_ps(_mm512_mul_ps(_mm512_mul_ps(a, p), r), _mm512_set1_ps(1.0f));
    erf = _mm512_mask_sub_ps(erf, _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps(), erf);
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), erf));
}
#endif

static void gelu_row(float *restrict v, int N, int gelu) {
    int j = 0;
#if VEC16
    if (gelu == 1)
        for (; j + 16 <= N; j += 16) _mm512_storeu_ps(v + j, gelu_erf16(_mm512_loadu_ps(v + j)));
#endif
    if (gelu == 1)
        for (; j < N; j++) v[j] = 0.5f * v[j] * (1.0f + erff(v[j] * 0.70710678118654752f));
    else if (gelu == 2)
        for (; j < N; j++) {
            const float x = v[j];
            v[j] = 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
        }
}

/* The quantized row of v, 127 levels (v times the reciprocals u of e->q_smooth where the next
 * weight is smoothed). */
static float quantize_output(const Int8Epilogue *e, size_t i, const float *v, const float *u, int N) {
    int8_t *q = e->q + i * N;
    return e->q_smooth ? quantize_row_smoothed(q, v, u, t8.div, N) : gemm_int8_quantize_row(q, v, N, 127);
}

#if VEC16
/* 16 sums dequantized: float(sum) (r s_j) + bias_j (+ residual_j), the scalar loop's operations
 * in its order (no contraction into FMAs in this build). */
static inline __m512 dequant16(const int32_t *acc, const float *col_scale, const float *bias, const float *res,
                               __m512 r, __mmask16 m) {
    const __m512 s = _mm512_mul_ps(r, _mm512_maskz_loadu_ps(m, col_scale));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, acc)), s);
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias));
    if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res));
    return v;
}

/* 16 results stored: where stream is set and the whole aligned vector goes, by a non-temporal
 * store past the caches (no read of the line first, and the caches keep the product's working
 * set: a batch's output is read again only by a later kernel, from memory either way), else as
 * usual. gemm_int8_rows ends each thread's stores with a fence. */
static inline void store_floats16(float *p, __mmask16 m, __m512 v, bool stream) {
    if (stream && m == 0xffff && !((uintptr_t)p & 63)) _mm512_stream_ps(p, v);
    else _mm512_mask_storeu_ps(p, m, v);
}
static inline void store_bf16x16(uint16_t *p, __mmask16 m, __m512 v, bool stream) {
    if (stream && m == 0xffff && !((uintptr_t)p & 31)) _mm256_stream_si256((__m256i *)p, bf16x16(v));
    else _mm256_mask_storeu_epi16(p, m, bf16x16(v));
}

/* The row v's LayerNorm (sum: its values' sum, in ln_sum's lanes) into e->out, and quantized
 * (times the reciprocals u of e->q_smooth where given) in the same pass over the normalised
 * values: what layernorm_row_summed and then quantize_output compute, the same values (the
 * maximum of the quantized values is the same in any order). Returns the row's scale. */
static float layernorm_quantize16(const Int8Epilogue *e, size_t i, const float *restrict v, float sum,
                                  const float *restrict u, int N) {
    float m, rs;
    ln_stats(v, sum, N, e->ln_eps, &m, &rs);
    e->ln_mean[i] = m, e->ln_rstd[i] = rs;
    float *restrict out = e->out + i * N, *restrict y = u ? t8.div : out;
    const float *restrict w = e->ln_w, *restrict b = e->ln_b;
    const __m512 vm = _mm512_set1_ps(m), vrs = _mm512_set1_ps(rs);
    RowMax16 mx = rowmax16_start();
    for (int j0 = 0; j0 < N; j0 += 64)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {   /* unrolled: the accumulators stay in registers */
            const int j = j0 + 16 * g;
            if (j >= N) break;
            const __mmask16 k = lanes(N - j);
            __m512 o = ln_apply16(_mm512_maskz_loadu_ps(k, v + j), vm, vrs, _mm512_maskz_loadu_ps(k, w + j),
                                  _mm512_maskz_loadu_ps(k, b + j));
            store_floats16(out + j, k, o, e->stream);
            if (u) {   /* as quantize_row_smoothed */
                o = _mm512_mul_ps(o, _mm512_maskz_loadu_ps(k, u + j));
                _mm512_mask_storeu_ps(y + j, k, o);
            }
            rowmax16_add(&mx, g, o, k);   /* the tail's other lanes are 0 */
        }
    int finite;
    const float amax = rowmax16_value(&mx, &finite);
    return quantize_with(e->q + i * N, y, N, 127.0f, amax, finite);
}

/* The LayerNorm row's first pass: n sums dequantized, + bias, + residual (GELU), into v, and
 * their sum in ln_sum's lanes (value j into accumulator (j / 16) mod 4). Inlined with constants
 * for the model's case (bias and residual both given, no GELU). */
static inline __attribute__((always_inline)) float ln_values16(float *restrict v, const int32_t *acc, const float *cs,
                                                               const float *bias, const float *res, float r, bool gelu,
                                                               int N) {
    const __m512 vr = _mm512_set1_ps(r);
    __m512 ln_acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int j0 = 0; j0 < N; j0 += 64)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {   /* unrolled: the accumulators stay in registers */
            const int j = j0 + 16 * g;
            if (j >= N) break;
            const __mmask16 m = lanes(N - j);
            __m512 x = dequant16(acc + j, cs + j, bias ? bias + j : NULL, res ? res + j : NULL, vr, m);
            if (gelu) x = gelu_erf16(x);
            _mm512_mask_storeu_ps(v + j, m, x);
            ln_acc[g] = _mm512_add_ps(ln_acc[g], x);   /* the tail's other lanes are +0 */
        }
    return ln_lanes_total(ln_acc);
}

/* epilogue_row's row in one pass over the sums: dequantized, GELU, then stored in bf16 or
 * kept (with its largest magnitude, when it is quantized next as it is), 16 values at a time;
 * then LayerNorm and the quantization as the scalar row does them. The same values. */
static void epilogue_row16(const Int8Epilogue *e, size_t i, const int32_t *acc, const float *col_scale,
                           const float *bias, float r, const float *smooth_inv, int N) {
    const float *res = e->residual ? e->residual + i * N : NULL;
    if (e->ln_w) {   /* the attention output's and second feed-forward's products */
        float *v = t8.row;
        const float sum = bias && res && !e->gelu ? ln_values16(v, acc, col_scale, bias, res, r, false, N)
                                                  : ln_values16(v, acc, col_scale, bias, res, r, e->gelu, N);
        if (e->q)
            e->q_scale[i] = layernorm_quantize16(e, i, v, sum, e->q_smooth ? smooth_inv : NULL, N);
        else
            layernorm_row_summed(e->out + i * N, e->ln_mean + i, e->ln_rstd + i, v, sum, e->ln_w, e->ln_b, N,
                                 e->ln_eps);
        return;
    }
    float *v = e->out ? e->out + i * N : t8.row;
    uint16_t *o16 = e->out16 ? e->out16 + i * N : NULL;   /* never with q */
    const bool amax_here = e->q && !e->q_smooth;
    const __m512 vr = _mm512_set1_ps(r);
    RowMax16 amax = rowmax16_start();
    for (int j0 = 0; j0 < N; j0 += 64)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {   /* unrolled: the accumulators stay in registers */
            const int j = j0 + 16 * g;
            if (j >= N) break;
            const __mmask16 m = lanes(N - j);
            __m512 x = dequant16(acc + j, col_scale + j, bias ? bias + j : NULL, res ? res + j : NULL, vr, m);
            if (e->gelu) x = gelu_erf16(x);
            if (o16) {
                store_bf16x16(o16 + j, m, x, e->stream);
                continue;
            }
            store_floats16(v + j, m, x, e->stream);   /* stream: v is e->out (a q-only output never streams) */
            if (amax_here) rowmax16_add(&amax, g, x, m);   /* the tail's other lanes are 0 */
        }
    if (o16) return;
    if (amax_here) {
        int finite;
        const float a = rowmax16_value(&amax, &finite);
        e->q_scale[i] = quantize_with(e->q + i * N, v, N, 127.0f, a, finite);
    }
    else if (e->q) e->q_scale[i] = quantize_output(e, i, v, smooth_inv, N);
}
#endif

/* n sums -> v_j = float(sum_j) (r s_j) + bias_j (+ residual_j), then GELU as e says, and v in
 * bf16 into o16 where given: the scalar rows' operations (epilogue_row, panel_values), one
 * pass each way (no contraction into FMAs in this build: the same roundings). */
static void values_row(float *restrict v, const Int8Epilogue *e, const int32_t *restrict acc,
                       const float *restrict col_scale, const float *restrict bias, const float *restrict res, float r,
                       uint16_t *restrict o16, int n) {
    if (bias && res)
        for (int j = 0; j < n; j++) v[j] = (float)acc[j] * (r * col_scale[j]) + bias[j] + res[j];
    else if (bias)
        for (int j = 0; j < n; j++) v[j] = (float)acc[j] * (r * col_scale[j]) + bias[j];
    else if (res)
        for (int j = 0; j < n; j++) v[j] = (float)acc[j] * (r * col_scale[j]) + res[j];
    else
        for (int j = 0; j < n; j++) v[j] = (float)acc[j] * (r * col_scale[j]);
    gelu_row(v, n, e->gelu);
    if (o16)   /* here, not bf16_from_floats: that one forks threads, and this runs inside a worker */
        for (int j = 0; j < n; j++) o16[j] = bf16_from_float(v[j]);
}

/* One row of int32 sums -> float(sum) (r s_j) + bias_j (+ residual_j), GELU, stored as e says.
 * The same float operations, in the same order, whatever the destination. */
static void epilogue_row(const Int8Epilogue *e, size_t i, const int32_t *restrict acc, const float *restrict col_scale,
                         const float *restrict bias, float r, const float *smooth_inv, int N) {
#if VEC16
    if (e->gelu != 2) {   /* the tanh GELU has no vector form here */
        epilogue_row16(e, i, acc, col_scale, bias, r, smooth_inv, N);
        return;
    }
#endif
    float *v = e->out && !e->ln_w ? e->out + i * N : t8.row;
    values_row(v, e, acc, col_scale, bias, e->residual ? e->residual + i * N : NULL, r,
               e->out16 ? e->out16 + i * N : NULL, N);
    if (e->ln_w) {
        layernorm_row(e->out + i * N, e->ln_mean + i, e->ln_rstd + i, v, e->ln_w, e->ln_b, N, e->ln_eps);
        v = e->out + i * N;
    }
    if (e->q) e->q_scale[i] = quantize_output(e, i, v, smooth_inv, N);
}

/* The M rows at a as g's product takes them: in place, or where g is made for more rows (a
 * multiple of 16, see gemm_int8_rows), copied into this thread's scratch with zero rows after
 * them, whose sums are not used. */
static const int8_t *rows_for(const Int8Gemm *g, const int8_t *a, int M) {
    if (g->M == M) return a;
    t8.apad = grow(t8.apad, &t8.apad_cap, (size_t)g->M * g->K);
    memcpy(t8.apad, a, (size_t)M * g->K);
    memset(t8.apad + (size_t)M * g->K, 0, (size_t)(g->M - M) * g->K);
    return t8.apad;
}

/* ---- column panels (gemm_int8_panels) ---- */

#if VEC16
/* One vector of panel_row16: 16 sums dequantized (GELU), then stored in bf16 (o16), fp32 (out)
 * or, times u where given, in place of their sums (keep) with their maximum into mx's g. */
static inline __attribute__((always_inline)) void panel_step16(int j, __mmask16 m, int g, const int32_t *acc,
                                                               const float *cs, const float *bias, const float *res,
                                                               __m512 vr, bool gelu, uint16_t *o16, float *out,
                                                               float *keep, const float *u, RowMax16 *mx,
                                                               bool stream) {
    __m512 x = dequant16(acc + j, cs + j, bias ? bias + j : NULL, res ? res + j : NULL, vr, m);
    if (gelu) x = gelu_erf16(x);
    if (o16)
        store_bf16x16(o16 + j, m, x, stream);
    else if (out)
        store_floats16(out + j, m, x, stream);
    else {
        if (u) x = _mm512_mul_ps(x, _mm512_maskz_loadu_ps(m, u + j));   /* as quantize_row_smoothed */
        _mm512_mask_storeu_ps(keep + j, m, x);
        rowmax16_add(mx, g, x, m);   /* the tail's other lanes are 0 */
    }
}

/* panel_values's row in vectors, the epilogue's choices as arguments: inlined into calls with
 * constants for the common cases (QKV: bias, bf16 out; the first feed-forward product: bias,
 * GELU, quantized), so their loops carry no test of them and no reload of the epilogue. Whole
 * 64-value steps unmasked, then the tail 16 at a time. */
static inline __attribute__((always_inline)) void panel_row16(const int32_t *acc, const float *cs, const float *bias,
                                                              const float *res, float r, bool gelu, uint16_t *o16,
                                                              float *out, const float *u, RowMax16 *mx, int W,
                                                              bool stream) {
    const __m512 vr = _mm512_set1_ps(r);
    float *keep = (float *)acc;
    int j = 0;
    for (; j + 64 <= W; j += 64)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++)   /* unrolled: the accumulators stay in registers */
            panel_step16(j + 16 * g, 0xffff, g, acc, cs, bias, res, vr, gelu, o16, out, keep, u, mx, stream);
    for (; j < W; j += 16)
        panel_step16(j, lanes(W - j), 0, acc, cs, bias, res, vr, gelu, o16, out, keep, u, mx, stream);
}
#endif

/* Columns c0 .. c0 + W - 1 of row i (acc: their sums), epilogue_row's operations where there is
 * no LayerNorm: dequantized, GELU, then into out16 or out; or, where the row is quantized, the
 * values (times the reciprocals u of the smoothing factors, if any) kept in place of their sums
 * for panel_quantize, with their largest magnitude in *amax (*finite 0 if a value is not). */
static void panel_values(const Int8Epilogue *e, size_t i, int c0, int W, int N, int32_t *acc, const float *col_scale,
                         const float *bias, float r, const float *u, float *amax, int *finite) {
    const float *res = e->residual ? e->residual + i * N + c0 : NULL;
#if VEC16
    if (e->gelu != 2) {   /* the tanh GELU has no vector form here */
        const float *cs = col_scale + c0, *b = bias ? bias + c0 : NULL, *uc = u ? u + c0 : NULL;
        uint16_t *o16 = e->out16 ? e->out16 + i * N + c0 : NULL;
        float *out = e->out ? e->out + i * N + c0 : NULL;
        RowMax16 mx = rowmax16_start();
        if (o16 && b && !res && !e->gelu)   /* QKV */
            panel_row16(acc, cs, b, NULL, r, false, o16, NULL, NULL, NULL, W, e->stream);
        else if (!o16 && !out && b && !res && e->gelu && !uc)   /* the first feed-forward product */
            panel_row16(acc, cs, b, NULL, r, true, NULL, NULL, NULL, &mx, W, e->stream);
        else
            panel_row16(acc, cs, b, res, r, e->gelu, o16, out, uc, &mx, W, e->stream);
        if (e->q) *amax = rowmax16_value(&mx, finite);
        return;
    }
#endif
    float *v = t8.row;
    values_row(v, e, acc, col_scale + c0, bias ? bias + c0 : NULL, res, r, e->out16 ? e->out16 + i * N + c0 : NULL, W);
    if (e->out16) return;
    if (e->out)
        memcpy(e->out + i * N + c0, v, sizeof(float) * (size_t)W);
    else {
        if (u)
            for (int j = 0; j < W; j++) v[j] *= u[c0 + j];
        *amax = row_amax(v, W, finite);
        memcpy(acc, v, sizeof(float) * (size_t)W);
    }
}

/* The columns' share of row i's quantized values, given the whole row's largest magnitude (the
 * same levels for every panel, so the same values as quantize_with over the whole row). */
static void panel_quantize(const Int8Epilogue *e, size_t i, int c0, int W, int N, const void *vals, float amax,
                           int finite) {
    const float scale = quantize_with(e->q + i * N + c0, vals, W, 127.0f, amax, finite);
    if (c0 == 0) e->q_scale[i] = scale;
}

/* One product's time and operations into the counters (gemm_int8_product_counters): a few
 * tens of nanoseconds against a product's tens of microseconds. */
static void count_product(const Int8Gemm *g, double seconds) {
    const double ops = 2.0 * g->M * g->N * g->K;
#pragma omp atomic
    g8.product_seconds += seconds;
#pragma omp atomic
    g8.product_ops += ops;
}

void gemm_int8_product_counters(double *thread_seconds, double *ops, bool reset) {
    double s, n;
#pragma omp atomic read
    s = g8.product_seconds;
#pragma omp atomic read
    n = g8.product_ops;
    if (thread_seconds) *thread_seconds = s;
    if (ops) *ops = n;
    if (reset) {
#pragma omp atomic write
        g8.product_seconds = 0;
#pragma omp atomic write
        g8.product_ops = 0;
    }
}

/* Rows m0 .. m0 + M - 1: their sums into this thread's block, then the epilogue while the
 * block is in cache (smooth_inv: the reciprocals of e->q_smooth, or NULL). g's product has M
 * rows rounded up to a multiple of 16 (rows_for). */
static void rows_block(const Int8Gemm *g, const Int8Layout *l, int m0, int M, const int8_t *A, const float *row_scale,
                       const void *packed, const float *bias, const Int8Epilogue *e, const float *smooth_inv) {
    const int N = g->N, K = g->K;
    t8_register();
    t8.acc = grow(t8.acc, &t8.acc_cap, sizeof(int32_t) * (size_t)g->M * N);
    t8.row = grow(t8.row, &t8.row_cap, sizeof(float) * (size_t)N);
    if (e->q_smooth) t8.div = grow(t8.div, &t8.div_cap, sizeof(float) * (size_t)N);
    const int8_t *a = rows_for(g, A + (size_t)m0 * K, M);
    const double t0 = omp_get_wtime();
    run_gemm(g, l, a, (const char *)packed + q_offset(K, N), t8.acc);
    count_product(g, omp_get_wtime() - t0);
    const float *col_scale = gemm_int8_weight_scales(packed);
    for (int i = 0; i < M; i++)
        epilogue_row(e, (size_t)m0 + i, t8.acc + (size_t)i * N, col_scale, bias, row_scale[m0 + i], smooth_inv, N);
#if VEC16
    if (e->stream) _mm_sfence();   /* the streamed rows visible before the threads meet */
#endif
}

/* Blocks of rows, each thread its own: a block's product and its epilogue run on one core
 * while the sums are in its cache, and the threads meet once per product, not once per block.
 * (One thread, bert-base's products at 4096 rows, a loaded machine: the old epilogue over sums
 * written in place into the whole fp32 output cost up to as much as the product; from a block
 * in cache, a third of that.) Each block reads the whole weight again, so the rows per block
 * grow with K: bert-base's products (4096 rows, 2 threads, AMX, oneDNN's 16-row tiles) ran
 * fastest with 64 rows where K is 768 (32 to 256 within 15%; 80 rows, what the earlier rule of
 * 256 KiB of sums gave for N = 768, up to 10% slower) and with 256 rows where K is 3072 (64
 * rows 8% and 80 rows 25% slower: the weight, 2.4 MB, does not stay in a 2 MiB L2). */
static int block_rows(int K) { return K > 1536 ? 256 : 64; }
/* The rows a product is made for: a multiple of 16. oneDNN 2.6's AMX int8 kernel ran some row
 * counts 2-5x slower than the next multiple of 16 (K 768, N 3072, one thread: 53 rows 687 us,
 * 64 rows 164 us; 51, 57-59, 61, 62, 115, 117, 121-126 alike; multiples of 16 all 1.0-2.1
 * TOP/s), which a sequence's rows at batch 1 hit; and a few products serve every row count. */
static int padded_rows16(int M) { return (M + 15) / 16 * 16; }

/* Under g8.lock: the columns each of T threads takes when they split a (K, N) weight's columns
 * between them (gemm_int8_panels), 0 where they cannot. A thread's columns are one run of the
 * packed bytes only in oneDNN's AMX layout (BA16a64b4a: blocks of 64 columns outermost), not
 * where a VNNI-only CPU's layout carries its s8 x s8 compensation after the blocks; and they
 * must be whole blocks. *offset: the bytes from one thread's columns to the next's. */
static int panel_width(int K, int N, int T, size_t *offset) {
    if (T < 2 || N % (64 * T)) return 0;
    const int W = N / T;
    const Int8Layout *whole = find_layout(K, N), *part = find_layout(K, W);
    dnnl_memory_desc_t tag_whole, tag_part;
    dnnl_dims_t dims_whole = {K, N}, dims_part = {K, W};
    if (dnnl_memory_desc_init_by_tag(&tag_whole, 2, dims_whole, dnnl_s8, dnnl_BA16a64b4a) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&tag_part, 2, dims_part, dnnl_s8, dnnl_BA16a64b4a) != dnnl_success)
        return 0;
    if (!dnnl_memory_desc_equal(&whole->md, &tag_whole) || !dnnl_memory_desc_equal(&part->md, &tag_part)) return 0;
    const size_t k_padded = (size_t)whole->md.padded_dims[0];
    if (dnnl_memory_desc_get_size(&whole->md) != k_padded * N) return 0;
    *offset = k_padded * W;
    return W;
}

/* Each thread's count of blocks whose values and row maxima it has published, one cache line
 * apiece (gemm_int8_panels). */
typedef struct {
    _Alignas(64) atomic_int blocks;
} Published;

/* Until every one of the team's threads has published `blocks` blocks: spinning (the wait is
 * usually short: one thread a little behind the other), yielding the core after a while (a
 * loaded machine, more threads than cores). */
static void wait_published(Published *published, int threads, int blocks) {
    for (int u = 0; u < threads; u++)
        for (long spins = 0; atomic_load_explicit(&published[u].blocks, memory_order_acquire) < blocks; spins++) {
            if (spins < (1 << 14)) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
            } else
                sched_yield();
        }
}

/* A block of rows of the column panels, its values and every panel's row maxima in place. */
typedef struct {
    const int32_t *sums;     /* the T panels' values (kept in place of their sums), panel_sums apart */
    size_t panel_sums;
    const float *maxima;     /* [T][R]: each panel's largest magnitude per row */
    const int *finite;       /* [T][R]: whether its values were finite */
    int m0, rows, R, W, N, T;
} PanelBlock;

/* Panel p's share of the block's rows quantized with each row's largest magnitude over every
 * panel (a maximum is exact in any order: the same levels as over the whole row). */
static void quantize_panel_block(const Int8Epilogue *e, const PanelBlock *k, int p) {
    for (int r = 0; r < k->rows; r++) {
        float amax = 0.0f;
        int ok = 1;
        for (int o = 0; o < k->T; o++) {
            const float m = k->maxima[(size_t)o * k->R + r];
            amax = m > amax ? m : amax;
            ok &= k->finite[(size_t)o * k->R + r];
        }
        panel_quantize(e, (size_t)(k->m0 + r), p * k->W, k->W, k->N,
                       k->sums + (size_t)p * k->panel_sums + (size_t)r * k->W, amax, ok);
    }
}

/* The product with the threads splitting the weight's columns instead of its rows, where the
 * epilogue has no LayerNorm: each keeps its panel of the weight (N / T columns) in its own cache
 * for every row, block after block of R rows, and runs the epilogue on them while their sums are
 * in cache. Measured (bert-base's first feed-forward product, one thread, 64-row blocks): 1.8
 * TOP/s with the whole 2.4 MB weight streamed again from L3 for every block, 3.0-3.2 with its
 * half resident. A quantized output needs each row's largest magnitude over all the columns:
 * each thread publishes its panels' maxima for a block, goes on to the next block's product, and
 * only then quantizes the block before, once every thread has published it. A thread waits only
 * where another is a whole block behind, not at every small difference between them as at a
 * barrier per block (bert-base at 32 x 128, 2 threads, alternating pairs against the barrier's
 * version: ten at 64 rows -4% to +8%, median +3.8%; four of this version at 32 rows +3% to +8%;
 * batch 1 the same). So a thread keeps two
 * blocks' values (its own), and four blocks' maxima go round (a thread may publish block b + 1
 * while another still reads block b - 2's). */
/* 32 rows: a thread's two blocks of values then take the room one block of 64 took beside its
 * panel of the weight in L2 (bert-base at 32 x 128, 2 threads, five alternating pairs: 32 rows
 * -0.5% to +5.9% over 64, median +3.9%; with the barrier instead, 32 and 128 were no faster). */
enum { PANEL_ROWS = 32 };
enum { MAXIMA_SLOTS = 4, VALUE_SLOTS = 2 };
static void gemm_int8_panels(int M, int N, int K, const int8_t *A, const float *row_scale, const void *packed,
                             const float *bias, const Int8Epilogue *e, const float *u, int T, int W,
                             size_t panel_bytes) {
    const int R = M < PANEL_ROWS ? M : PANEL_ROWS, blocks = (M + R - 1) / R, tail = M - (blocks - 1) * R;
    const Int8Gemm *g, *g_tail;
    const Int8Layout *l;
    pthread_mutex_lock(&g8.lock);   /* both primitives before the workers run them */
    room_for(2);
    lookup(padded_rows16(R), W, K, &g, &l);
    lookup(padded_rows16(tail), W, K, &g_tail, &l);
    pthread_mutex_unlock(&g8.lock);
    const size_t panel_sums = (size_t)g->M * W, maxima_count = (size_t)MAXIMA_SLOTS * T * R;
    const int slots = e->q ? VALUE_SLOTS : 1;
    t8_register();
    t8.panels = grow(t8.panels, &t8.panels_cap, sizeof(int32_t) * slots * T * panel_sums +
                                                    maxima_count * (sizeof(float) + sizeof(int)) +
                                                    sizeof(Published) * (T + 1));
    int32_t *sums = t8.panels;   /* [slots][T][panel_sums] */
    float *maxima = (float *)(sums + slots * T * panel_sums);   /* [MAXIMA_SLOTS][T][R], then their finiteness */
    int *finite = (int *)(maxima + maxima_count);
    Published *published = (Published *)(((uintptr_t)(finite + maxima_count) + 63) / 64 * 64);
    for (int t = 0; t < T; t++) atomic_store_explicit(&published[t].blocks, 0, memory_order_relaxed);
    const char *weights = (const char *)packed + q_offset(K, N);
    const float *col_scale = gemm_int8_weight_scales(packed);
#pragma omp parallel num_threads(T)   /* the region's start orders the counters' zeros before it */
    {
        const int t = omp_get_thread_num(), threads = omp_get_num_threads();
        t8_register();
        t8.row = grow(t8.row, &t8.row_cap, sizeof(float) * (size_t)W);
        for (int b = 0; b <= blocks; b++) {
            if (b < blocks) {   /* block b's product and values, its maxima published */
                const int m0 = b * R, rows = b + 1 < blocks ? R : tail;
                const Int8Gemm *gb = b + 1 < blocks ? g : g_tail;
                const int8_t *a = rows_for(gb, A + (size_t)m0 * K, rows);
                const size_t mx = (size_t)(b % MAXIMA_SLOTS) * T * R;
                for (int p = t; p < T; p += threads) {   /* all T panels, whatever the team's size */
                    int32_t *panel = sums + ((size_t)(b % slots) * T + p) * panel_sums;
                    const double t0 = omp_get_wtime();
                    run_gemm(gb, l, a, weights + p * panel_bytes, panel);
                    count_product(gb, omp_get_wtime() - t0);
                    for (int r = 0; r < rows; r++)
                        panel_values(e, (size_t)(m0 + r), p * W, W, N, panel + (size_t)r * W, col_scale, bias,
                                     row_scale[m0 + r], u, &maxima[mx + (size_t)p * R + r], &finite[mx + (size_t)p * R + r]);
                }
                if (!e->q) continue;
                atomic_store_explicit(&published[t].blocks, b + 1, memory_order_release);
            }
            if (!e->q || b == 0) continue;
            const int q = b - 1;   /* block b - 1 quantized, once every thread has published it */
            const size_t mx = (size_t)(q % MAXIMA_SLOTS) * T * R;
            const PanelBlock done = {.sums = sums + (size_t)(q % slots) * T * panel_sums, .panel_sums = panel_sums,
                                     .maxima = maxima + mx, .finite = finite + mx, .m0 = q * R,
                                     .rows = q + 1 < blocks ? R : tail, .R = R, .W = W, .N = N, .T = T};
            wait_published(published, threads, b);
            for (int p = t; p < T; p += threads) quantize_panel_block(e, &done, p);
        }
#if VEC16
        if (e->stream) _mm_sfence();   /* the streamed rows visible before the threads meet */
#endif
    }
}

/* gemm_int8_rows with the threads splitting the rows (rows_block). */
static void gemm_int8_row_blocks(int M, int N, int K, const int8_t *A, const float *row_scale, const void *packed,
                                 const float *bias, const Int8Epilogue *e, const float *smooth_inv, int threads) {
    int rows = block_rows(K);
    const int per_thread = (M + threads - 1) / threads;   /* every thread gets work where there is some */
    if (rows > per_thread) rows = (per_thread + 15) / 16 * 16;
    if (rows > M) rows = M;
    const int blocks = M / rows, tail = M - blocks * rows;
    const Int8Gemm *g, *g_tail = NULL;
    const Int8Layout *l;
    pthread_mutex_lock(&g8.lock);   /* both primitives before the workers run them */
    room_for(2);
    lookup(padded_rows16(rows), N, K, &g, &l);
    if (tail) lookup(padded_rows16(tail), N, K, &g_tail, &l);
    pthread_mutex_unlock(&g8.lock);
#pragma omp parallel for schedule(dynamic, 1) if (blocks + (tail > 0) > 1)
    for (int b = 0; b < blocks + (tail > 0); b++)
        rows_block(b < blocks ? g : g_tail, l, b * rows, b < blocks ? rows : tail, A, row_scale, packed, bias, e,
                   smooth_inv);
}

bool gemm_int8_column_panels(int K, int N, int threads) {
    size_t offset;
    pthread_mutex_lock(&g8.lock);
    const bool yes = gemm_int8_support() && panel_width(K, N, threads, &offset) > 0;
    pthread_mutex_unlock(&g8.lock);
    return yes;
}

/* Outputs above this many bytes are stored past the caches (Int8Epilogue.stream): the threads'
 * L2 caches together (2 MiB a core here), which such an output cannot stay in. bert-base at 32 x
 * 128 (2 threads): the QKV output (19 MB bf16) and the two LayerNorms' fp32 rows (13 MB each)
 * streamed, the forward 350 -> 323 ms (five alternating pairs); at batch 1 (0.4-0.6 MB) none is. */
static size_t stream_min_bytes(int threads) { return l2_cache_bytes() * (size_t)threads; }

void gemm_int8_rows(int M, int N, int K, const int8_t *A, const float *row_scale, const void *packed, const float *bias,
                    const Int8Epilogue *e) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) die("gemm_int8: K must be positive (got %d)", K);
    if (e->ln_w ? !e->out || e->out16 : (e->out != NULL) + (e->out16 != NULL) + (e->q != NULL) != 1)
        die("gemm_int8_rows: give one destination (out, out16 or q; out, and q or not, with LayerNorm)");
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    size_t panel_bytes = 0;
    pthread_mutex_lock(&g8.lock);
    /* Not with LayerNorm, which needs a whole row: a version that gathered the row's values from
     * the panels into one thread (two meetings per block) ran batch 1 (MRPC) 10% slower. */
    const int W = e->ln_w ? 0 : panel_width(K, N, threads, &panel_bytes);
    const size_t stream_min = stream_min_bytes(threads);
    pthread_mutex_unlock(&g8.lock);
    float *smooth_inv = e->q_smooth ? reciprocals(e->q_smooth, N) : NULL;
    Int8Epilogue ep = *e;
    ep.stream = VEC16 && (size_t)M * N * (e->out16 ? 2 : e->out ? 4 : 0) > stream_min;
    if (W) gemm_int8_panels(M, N, K, A, row_scale, packed, bias, &ep, smooth_inv, threads, W, panel_bytes);
    else gemm_int8_row_blocks(M, N, K, A, row_scale, packed, bias, &ep, smooth_inv, threads);
    free(smooth_inv);
}

/* Each thread's row of x (1/t) in its own scratch. */
void quantize_rows_s8_smoothed(int8_t *q, float *scale, const float *x, const float *smooth, int rows, int cols) {
    if (!smooth) {
        quantize_rows_s8(q, scale, x, rows, cols, cols, 127);
        return;
    }
    if (rows <= 0 || cols <= 0) return;
    float *u = reciprocals(smooth, cols);
#pragma omp parallel for schedule(static) if ((long)rows * cols >= (1L << 15))
    for (int i = 0; i < rows; i++) {
        t8_register();
        t8.div = grow(t8.div, &t8.div_cap, sizeof(float) * (size_t)cols);
        scale[i] = quantize_row_smoothed(q + (size_t)i * cols, x + (size_t)i * cols, u, t8.div, cols);
    }
    free(u);
}

void gemm_int8_forward(int M, int N, int K, const float *A, const void *packed, const float *bias, int gelu,
                       float *C) {
    if (M <= 0 || N <= 0) return;
    t8_register();
    t8.q = grow(t8.q, &t8.q_cap, (size_t)M * K);
    t8.scale = grow(t8.scale, &t8.rows_cap, sizeof(float) * (size_t)M);
    quantize_rows_s8_smoothed(t8.q, t8.scale, A, gemm_int8_weight_smoothing(packed), M, K);
    const Int8Epilogue e = {.out = C, .gelu = gelu};
    gemm_int8_rows(M, N, K, t8.q, t8.scale, packed, bias, &e);
}

void gemm_int8_describe(char *out, size_t n) {
    const dnnl_version_t *v = dnnl_version();
    const int support = gemm_int8_support();
    if (!support) {
        snprintf(out, n, "oneDNN %d.%d.%d: no int8 products on this CPU (needs AVX2)", v->major, v->minor, v->patch);
        return;
    }
    /* the implementation oneDNN picks for bert-base's feed-forward product */
    pthread_mutex_lock(&g8.lock);
    const Int8Layout *l = find_layout(768, 3072);
    dnnl_memory_desc_t a, c;
    dnnl_matmul_desc_t desc;
    int8_desc(&desc, &a, &l->md, &c, PACK_ROWS, 3072, 768);
    dnnl_primitive_desc_t pd;
    check(dnnl_primitive_desc_create(&pd, &desc, NULL, g8.engine, NULL), "primitive descriptor", PACK_ROWS, 3072, 768);
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    const bool own = own_amx(l, 64);
    if (own)
        snprintf(out, n, "bert.c's AMX tile loop (tdpbssd) on weights in oneDNN %d.%d.%d's AMX packing; oneDNN's %s "
                 "where a shape does not suit it", v->major, v->minor, v->patch, impl);
    else
        snprintf(out, n, "oneDNN %d.%d.%d int8 matmul %s%s", v->major, v->minor, v->patch, impl,
                 support == 1 ? " (no VNNI here: 7-bit weights, slower)" : "");
    dnnl_primitive_desc_destroy(pd);
    pthread_mutex_unlock(&g8.lock);
    const int threads = omp_get_max_threads();
    if (threads > 1 && gemm_int8_column_panels(768, 3072, threads)) {
        const size_t len = strlen(out);
        snprintf(out + len, n - len, "; threads split the weight's columns where no LayerNorm follows");
    }
}
