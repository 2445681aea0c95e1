#include "kernels/cpu/gemm_int8.h"

#include <immintrin.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

/* The layout a weight is packed in: the one oneDNN's int8 matmul picks for B [K, N] s8 when
 * free to choose, for a product of PACK_ROWS s8 rows (on VNNI CPUs it carries oneDNN's s8 x s8
 * compensation after the blocks). Products of every row count are created with it. */
enum { PACK_ROWS = 4096, LAYOUT_CAPACITY = 32, CACHE_SLOTS = 4096 };
#define CHUNK_BYTES (1L << 20)
typedef struct {
    int K, N;
    dnnl_memory_desc_t md;
    dnnl_primitive_t reorder;   /* plain q [N, K] -> packed */
} Int8Layout;
typedef struct {
    int M, N, K;   /* M 0: empty slot */
    dnnl_primitive_t primitive;
    dnnl_memory_desc_t a, c;
} Int8Gemm;

static struct {
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    Int8Layout layouts[LAYOUT_CAPACITY];
    int layout_count;
    Int8Gemm slots[CACHE_SLOTS];   /* open addressing on (M, N, K); emptied when 3/4 full */
    int used;
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
    g8.layout_count++;
    return l;
}

/* Under g8.lock: the cached M-row product on the weight layout of (K, N). */
static const Int8Gemm *find_gemm(int M, int N, int K) {
    unsigned h = ((unsigned)M * 2654435761u) ^ ((unsigned)N * 40503u) ^ ((unsigned)K * 2246822519u);
    for (;; h++) {
        Int8Gemm *e = &g8.slots[h % CACHE_SLOTS];
        if (e->M == M && e->N == N && e->K == K) return e;
        if (e->M) continue;
        if (g8.used >= CACHE_SLOTS / 4 * 3) {   /* full: start again (each entry holds JIT code) */
            for (int i = 0; i < CACHE_SLOTS; i++)
                if (g8.slots[i].M) dnnl_primitive_destroy(g8.slots[i].primitive), g8.slots[i].M = 0;
            g8.used = 0;
        }
        const Int8Layout *l = find_layout(K, N);
        dnnl_matmul_desc_t desc;
        int8_desc(&desc, &e->a, &l->md, &e->c, M, N, K);
        dnnl_primitive_desc_t pd;
        check(dnnl_primitive_desc_create(&pd, &desc, NULL, g8.engine, NULL), "primitive descriptor", M, N, K);
        check(dnnl_primitive_create(&e->primitive, pd), "primitive", M, N, K);
        dnnl_primitive_desc_destroy(pd);
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

/* One row: its largest magnitude (NaN if a value is not finite), then the rounded multiples. */
static float quantize_row(int8_t *restrict q, const float *restrict x, int cols, float levels) {
    float amax = 0.0f;
    int finite = 1, k = 0;
#ifdef __AVX2__   /* the compiler does not vectorize this reduction itself (a max is exact in any order) */
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.402823466e38f);
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (; k + 16 <= cols; k += 16) {
        const __m256 a0 = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), a1 = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k + 8));
        m0 = _mm256_max_ps(a0, m0), m1 = _mm256_max_ps(a1, m1);   /* a NaN in a: m kept (the second operand) */
        ok = _mm256_and_ps(ok, _mm256_and_ps(_mm256_cmp_ps(a0, big, _CMP_LE_OQ), _mm256_cmp_ps(a1, big, _CMP_LE_OQ)));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_max_ps(m0, m1));
    for (int l = 0; l < 8; l++) amax = lanes[l] > amax ? lanes[l] : amax;
    finite = _mm256_movemask_ps(ok) == 0xff;
#endif
    for (; k < cols; k++) {
        const float a = fabsf(x[k]);
        amax = a > amax ? a : amax;
        finite &= a <= 3.402823466e38f;   /* 0 for an infinity or NaN */
    }
    if (!finite || amax == 0.0f) {   /* NaN scale: the row's results are NaN, not a quiet 0 */
        for (int j = 0; j < cols; j++) q[j] = 0;
        return finite ? 0.0f : NAN;
    }
    const float inv = levels / amax;
    for (k = 0; k < cols; k++) {
        float v = round_even(x[k] * inv);
        v = v > levels ? levels : v;
        v = v < -levels ? -levels : v;
        q[k] = (int8_t)(int)v;
    }
    return amax / levels;
}

int gemm_int8_weight_levels(void) { return gemm_int8_support() == 2 ? 127 : 63; }

void quantize_rows_s8(int8_t *q, float *scale, const float *x, int rows, int cols, int ld, int levels) {
    if (rows <= 0 || cols <= 0) return;
    if (levels < 1 || levels > 127) die("quantize_rows_s8: levels %d outside [1, 127]", levels);
#pragma omp parallel for schedule(static) if ((long)rows * cols >= (1L << 15))
    for (int i = 0; i < rows; i++)
        scale[i] = quantize_row(q + (size_t)i * cols, x + (size_t)i * ld, cols, (float)levels);
}

/* ---- packed weights: [N scales, padded to 64 bytes][oneDNN's packed q] ---- */

static size_t scales_bytes(int N) { return ((size_t)N * sizeof(float) + 63) / 64 * 64; }

size_t gemm_int8_packed_bytes(int K, int N) {
    if (K <= 0 || N <= 0 || !gemm_int8_support()) return 0;
    pthread_mutex_lock(&g8.lock);
    const size_t bytes = dnnl_memory_desc_get_size(&find_layout(K, N)->md);
    pthread_mutex_unlock(&g8.lock);
    return scales_bytes(N) + bytes;
}

const float *gemm_int8_weight_scales(const void *packed) { return packed; }

void gemm_int8_pack(void *packed, const float *W, int K, int N) {
    pthread_mutex_lock(&g8.lock);
    const Int8Layout *l = find_layout(K, N);
    pthread_mutex_unlock(&g8.lock);
    int8_t *q = xmalloc((size_t)N * K);
    quantize_rows_s8(q, packed, W, N, K, K, gemm_int8_weight_levels());   /* per output channel: W's rows */
    dnnl_memory_desc_t plain;
    plain_md(&plain, K, N, dnnl_s8, true);
    dnnl_memory_t from, to;
    check(dnnl_memory_create(&from, &plain, g8.engine, q), "memory", 0, N, K);
    check(dnnl_memory_create(&to, &l->md, g8.engine, (char *)packed + scales_bytes(N)), "memory", 0, N, K);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    check(dnnl_primitive_execute(l->reorder, g8.stream, 2, args), "packing reorder", 0, N, K);
    check(dnnl_stream_wait(g8.stream), "stream wait", 0, N, K);
    dnnl_memory_destroy(from), dnnl_memory_destroy(to);
    free(q);
}

/* ---- products ---- */

void gemm_int8_s32(int M, int N, int K, const int8_t *A, const void *packed, int32_t *C) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) die("gemm_int8: K must be positive (got %d)", K);
    pthread_mutex_lock(&g8.lock);
    const Int8Gemm *e = find_gemm(M, N, K);
    const Int8Layout *l = find_layout(K, N);
    pthread_mutex_unlock(&g8.lock);
    dnnl_memory_t a, b, c;
    check(dnnl_memory_create(&a, &e->a, g8.engine, (void *)A), "memory", M, N, K);
    check(dnnl_memory_create(&b, &l->md, g8.engine, (char *)packed + scales_bytes(N)), "memory", M, N, K);
    check(dnnl_memory_create(&c, &e->c, g8.engine, C), "memory", M, N, K);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    check(dnnl_primitive_execute(e->primitive, g8.stream, 3, args), "execute", M, N, K);
    check(dnnl_stream_wait(g8.stream), "stream wait", M, N, K);
    dnnl_memory_destroy(a), dnnl_memory_destroy(b), dnnl_memory_destroy(c);
}

/* The activations' int8 copy: per-thread scratch, grown as needed (inference only), freed
 * when its thread ends (a server's compute worker is a thread that ends before the process). */
typedef struct {
    int8_t *q;
    float *scale;
    size_t q_cap, rows_cap;
} Int8Scratch;
static _Thread_local Int8Scratch t8;
static pthread_key_t t8_key;
static pthread_once_t t8_key_once = PTHREAD_ONCE_INIT;

static void t8_release(void *scratch) {
    Int8Scratch *s = scratch;
    free(s->q), free(s->scale);
    memset(s, 0, sizeof *s);
}

static void t8_key_create(void) {
    if (pthread_key_create(&t8_key, t8_release) != 0) die("gemm_int8: cannot create the scratch's thread key");
}

/* The first allocation of a thread: its scratch is freed when the thread ends. */
static void t8_register(void) {
    if (t8.q || t8.scale) return;
    pthread_once(&t8_key_once, t8_key_create);
    pthread_setspecific(t8_key, &t8);
}

/* libmvec's vector erff (as kernels/cpu/layers.c declares it), so the GELU loop vectorizes. */
float erff(float) __attribute__((simd("notinbranch")));

/* C (holding the int32 sums in place) -> float(sum) (r_i s_j) + bias_j, then GELU, row by
 * row while the row is in cache. Each element's sum is read before its float is written at
 * the same address, and no other element's is. */
static void dequantize_row(float *restrict out, const float *restrict col_scale, const float *restrict bias, float r,
                           int N, int gelu) {
    const int32_t *acc = (const int32_t *)(void *)out;
    for (int j = 0; j < N; j++) out[j] = (float)acc[j] * (r * col_scale[j]);
    if (bias)
        for (int j = 0; j < N; j++) out[j] += bias[j];
    if (gelu == 1)
        for (int j = 0; j < N; j++) out[j] = 0.5f * out[j] * (1.0f + erff(out[j] * 0.70710678118654752f));
    else if (gelu == 2)
        for (int j = 0; j < N; j++) {
            const float x = out[j];
            out[j] = 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
        }
}

static void dequantize(float *C, const float *row_scale, const float *col_scale, const float *bias, int M, int N,
                       int gelu) {
#pragma omp parallel for schedule(static) if ((long)M * N >= (1L << 15))
    for (int i = 0; i < M; i++) dequantize_row(C + (size_t)i * N, col_scale, bias, row_scale[i], N, gelu);
}

void gemm_int8_forward(int M, int N, int K, const float *A, const void *packed, const float *bias, int gelu,
                       float *C) {
    if (M <= 0 || N <= 0) return;
    t8_register();
    if ((size_t)M * K > t8.q_cap) {
        free(t8.q);
        t8.q_cap = (size_t)M * K;
        t8.q = xmalloc(t8.q_cap);
    }
    if ((size_t)M > t8.rows_cap) {
        free(t8.scale);
        t8.rows_cap = (size_t)M;
        t8.scale = xmalloc(sizeof(float) * t8.rows_cap);
    }
    quantize_rows_s8(t8.q, t8.scale, A, M, K, K, 127);
    _Static_assert(sizeof(int32_t) == sizeof(float), "the int32 sums are written where their floats go");
    /* In blocks of rows whose int32 sums (about CHUNK_BYTES) are still in cache when the
     * epilogue reads them, instead of a pass over the whole output through memory (one
     * thread, 4096 x 3072 x 768: 60-89 ms whole, 31-52 ms in 1 MiB blocks; the product
     * alone 35-48 ms, on a loaded machine) */
    int rows = (int)(CHUNK_BYTES / (4L * N)) / 32 * 32;
    if (rows < 64) rows = 64;
    for (int m0 = 0; m0 < M; m0 += rows) {
        const int m = M - m0 < rows ? M - m0 : rows;
        float *c = C + (size_t)m0 * N;
        gemm_int8_s32(m, N, K, t8.q + (size_t)m0 * K, packed, (int32_t *)(void *)c);
        dequantize(c, t8.scale + m0, gemm_int8_weight_scales(packed), bias, m, N, gelu);
    }
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
    snprintf(out, n, "oneDNN %d.%d.%d int8 matmul %s%s", v->major, v->minor, v->patch, impl,
             support == 1 ? " (no VNNI here: 7-bit weights, slower)" : "");
    dnnl_primitive_desc_destroy(pd);
    pthread_mutex_unlock(&g8.lock);
}
