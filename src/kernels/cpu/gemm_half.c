#include "kernels/cpu/gemm_half.h"

#include <immintrin.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/strmap.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/team.h"
#include "kernels/cpu/vec16.h"

void bf16_from_floats(bf16 *restrict dst, const float *restrict src, long n) {
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n; i++) dst[i] = bf16_from_float(src[i]);
}

void floats_from_bf16(float *restrict dst, const bf16 *restrict src, long n) {
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n; i++) dst[i] = float_from_bf16(src[i]);
}

/* IEEE binary16 by bit manipulation (clang has no _Float16 on x86 before version 15): round
 * to nearest even, overflow to infinity from 65520 (the midpoint past 65504) up, subnormals
 * below 2^-14, NaN kept quiet with the top of its payload: the bits of x86's F16C
 * instructions (vcvtps2ph, vcvtph2ps), for every input. */
fp16 fp16_from_float(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    const uint32_t sign = (v.u >> 16) & 0x8000u, ax = v.u & 0x7fffffffu;
    if (ax > 0x7f800000u) return (fp16)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));   /* NaN, made quiet */
    if (ax >= 0x477ff000u) return (fp16)(sign | 0x7c00u);          /* >= 65520: infinity */
    if (ax < 0x38800000u) {                                        /* below 2^-14: a multiple of 2^-24 */
        union { uint32_t u; float f; } a = {.u = ax};
        return (fp16)(sign | (uint32_t)nearbyintf(a.f * 16777216.0f));   /* exact scaling; ties to even */
    }
    uint32_t h = ax - 0x38000000u;                                 /* rebias the exponent: 127 -> 15 */
    h += 0xfffu + ((h >> 13) & 1u);                                /* round the 13 dropped bits, ties to even */
    return (fp16)(sign | (h >> 13));
}

float float_from_fp16(fp16 bits) {
    const uint32_t sign = (uint32_t)(bits & 0x8000u) << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    union { uint32_t u; float f; } v;
    if (e == 0) {                                                  /* zero, subnormal: m * 2^-24 */
        float x = (float)m * (1.0f / 16777216.0f);
        return sign ? -x : x;
    }
    if (e == 31) v.u = sign | 0x7f800000u | (m ? 0x400000u : 0) | (m << 13);   /* infinity; NaN, made quiet */
    else v.u = sign | ((e + 112u) << 23) | (m << 13);
    return v.f;
}

/* Eight at a time on F16C where the compiler targets it (every AVX2 CPU): the same bits as
 * the functions above, several times faster. */
void fp16_from_floats(fp16 *restrict dst, const float *restrict src, long n) {
#ifdef __F16C__
    const long n8 = n / 8 * 8;
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n8; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (long i = n8; i < n; i++) dst[i] = fp16_from_float(src[i]);
#else
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n; i++) dst[i] = fp16_from_float(src[i]);
#endif
}

void floats_from_fp16(float *restrict dst, const fp16 *restrict src, long n) {
#ifdef __F16C__
    const long n8 = n / 8 * 8;
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n8; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (long i = n8; i < n; i++) dst[i] = float_from_fp16(src[i]);
#else
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n; i++) dst[i] = float_from_fp16(src[i]);
#endif
}

void halves_from_floats(HalfMode mode, uint16_t *dst, const float *src, long n) {
    if (mode == HALF_FP16) fp16_from_floats(dst, src, n);
    else bf16_from_floats(dst, src, n);
}

void floats_from_halves(HalfMode mode, float *dst, const uint16_t *src, long n) {
    if (mode == HALF_FP16) floats_from_fp16(dst, src, n);
    else floats_from_bf16(dst, src, n);
}

bool gemm_bf16_native_available(void) {
    /* oneDNN's ISA values nest (each adds bits to the one below) */
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), bf16_isa = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    return (isa & bf16_isa) == bf16_isa;
}

/* ---- widened: to fp32, multiplied by sgemm (bf16 emulated, fp16) ---- */

/* The fp32 copy of the rows x cols block a stored matrix spans (row length ld). */
static float *widen(HalfMode mode, const uint16_t *x, int rows, int cols, int ld) {
    const size_t span = (size_t)(rows - 1) * ld + cols;
    float *w = xmalloc(sizeof(float) * span);
    floats_from_halves(mode, w, x, (long)span);
    return w;
}

static void gemm_widened(HalfMode mode, bool ta, bool tb, int M, int N, int K, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, const float *bias, float beta, float *C, int ldc) {
    float *a = ta ? widen(mode, A, K, M, lda) : widen(mode, A, M, K, lda);
    float *b = tb ? widen(mode, B, N, K, ldb) : widen(mode, B, K, N, ldb);
    if (bias)
        for (int i = 0; i < M; i++) memcpy(C + (size_t)i * ldc, bias, sizeof(float) * N);
    sgemm(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, bias ? 1.0f : beta, C, ldc);
    free(a);
    free(b);
}

/* ---- native: oneDNN matmul primitives, one per shape ---- */

typedef struct {   /* all int: no padding, compared with memcmp */
    int ta, tb, bias, accumulate;
    int packed;   /* B in the packed layout of find_packed_layout(K, N, f32) (ldb, tb unused) */
    int f32;      /* A and B in fp32 (only packed products): an fp32 product with packed weights */
    int post;     /* GemmPost: an element-wise function of each result (only packed products) */
    int c16;      /* C stored in bf16 (only packed products) */
    int M, N, K, lda, ldb, ldc;
    int batch;    /* above 1: that many independent products, each operand dense after the other (serial fixed-shape products) */
} GemmShape;

typedef struct {
    GemmShape shape;
    dnnl_primitive_t primitive;   /* NULL: oneDNN has no fast product for this packed shape */
    dnnl_memory_desc_t a, b, bias, c;
} CachedGemm;

/* A weight's packed layout: the one oneDNN's matmul picks for B [K, N] (bf16 or fp32) when
 * left free to choose (format "any"), for a reference product of PACK_REFERENCE_ROWS rows.
 * On the CPUs measured here the layout depends on K and N only; products of other row counts
 * are created with this layout fixed and, should oneDNN pick a slower kernel for one, run
 * with the plain weight instead (gemm_packed). */
enum { PACK_REFERENCE_ROWS = 4096, PACKED_LAYOUT_CAPACITY = 32 };
typedef struct {
    int K, N, f32;
    bool is_plain;              /* oneDNN keeps the plain layout here: nothing to pack */
    dnnl_memory_desc_t md;
    dnnl_primitive_t reorder;   /* plain W [N, K] -> packed */
    char impl[64];              /* the reference product's implementation */
} PackedLayout;

/* A training step runs a few dozen shapes; inference at batch 1 one set per sequence length
 * (6 products x up to 512 lengths). Entries are found by the shape's bytes in a string map;
 * past the capacity the cache starts again (each entry is some KB of oneDNN state and JIT
 * code). */
enum { GEMM_CACHE_CAPACITY = 2048 };
static struct {
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    CachedGemm entries[GEMM_CACHE_CAPACITY];
    int count;
    StrMap table;   /* a shape's bytes (borrowed from entries[i].shape) -> i */
    PackedLayout layouts[PACKED_LAYOUT_CAPACITY];
    int layout_count;
} g_bf16 = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void check(dnnl_status_t s, const char *what, const GemmShape *k) {
    if (s != dnnl_success)
        die("oneDNN bf16 matmul: %s failed (status %d) for %c%c M=%d N=%d K=%d lda=%d ldb=%d ldc=%d", what, (int)s,
            k->ta ? 'T' : 'N', k->tb ? 'T' : 'N', k->M, k->N, k->K, k->lda, k->ldb, k->ldc);
}

static void matrix_md(dnnl_memory_desc_t *md, dnnl_dim_t rows, dnnl_dim_t cols, dnnl_dim_t ld, bool stored_transposed, dnnl_data_type_t t,
                      const GemmShape *k) {
    if (k->batch > 1) {   /* k->batch matrices, each stored right after the one before */
        dnnl_dims_t dims = {k->batch, rows, cols};
        dnnl_dims_t strides = {(stored_transposed ? cols : rows) * ld, stored_transposed ? 1 : ld, stored_transposed ? ld : 1};
        check(dnnl_memory_desc_init_by_strides(md, 3, dims, t, strides), "memory descriptor", k);
        return;
    }
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {stored_transposed ? 1 : ld, stored_transposed ? ld : 1};
    check(dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides), "memory descriptor", k);
}

static void ensure_engine(const GemmShape *k) {
    if (g_bf16.engine) return;
    check(dnnl_engine_create(&g_bf16.engine, dnnl_cpu, 0), "engine", k);
    check(dnnl_stream_create(&g_bf16.stream, g_bf16.engine, dnnl_stream_default_flags), "stream", k);
}

static const PackedLayout *find_packed_layout(int K, int N, bool f32);

static CachedGemm *create_gemm(const GemmShape *k) {
    ensure_engine(k);
    CachedGemm *e = &g_bf16.entries[g_bf16.count++];
    e->shape = *k;
    e->primitive = NULL;
    const PackedLayout *layout = k->packed ? find_packed_layout(k->K, k->N, k->f32) : NULL;
    matrix_md(&e->a, k->M, k->K, k->lda, k->ta, k->f32 ? dnnl_f32 : dnnl_bf16, k);
    if (layout) e->b = layout->md;
    else matrix_md(&e->b, k->K, k->N, k->ldb, k->tb, dnnl_bf16, k);
    matrix_md(&e->c, k->M, k->N, k->ldc, false, k->c16 ? dnnl_bf16 : dnnl_f32, k);
    if (k->bias) matrix_md(&e->bias, 1, k->N, k->N, false, dnnl_f32, k);
    dnnl_matmul_desc_t desc;
    check(dnnl_matmul_desc_init(&desc, &e->a, &e->b, k->bias ? &e->bias : NULL, &e->c), "matmul descriptor", k);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    if (k->accumulate || k->post != GEMM_POST_NONE) {
        check(dnnl_primitive_attr_create(&attr), "attributes", k);
        check(dnnl_post_ops_create(&post_ops), "post-ops", k);
        if (k->accumulate)   /* C += ...: a "sum" post-op adds the old C */
            check(dnnl_post_ops_append_sum(post_ops, 1.0f), "sum post-op", k);
        if (k->post != GEMM_POST_NONE)
            check(dnnl_post_ops_append_eltwise(post_ops, 1.0f,
                                               k->post == GEMM_POST_GELU_ERF ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh,
                                               0.0f, 0.0f),
                  "eltwise post-op", k);
        check(dnnl_primitive_attr_set_post_ops(attr, post_ops), "set post-ops", k);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t created = dnnl_primitive_desc_create(&pd, &desc, attr, g_bf16.engine, NULL);
    if (!layout) check(created, "primitive descriptor", k);
    if (created == dnnl_success) {
        const char *impl = "?";
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        /* a packed product only where it runs on the kernel the layout was made for */
        if (!layout || !strcmp(impl, layout->impl)) check(dnnl_primitive_create(&e->primitive, pd), "primitive", k);
        dnnl_primitive_desc_destroy(pd);
    }
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return e;
}

static CachedGemm *find_gemm(const GemmShape *k) {
    pthread_mutex_lock(&g_bf16.lock);
    if (!g_bf16.table.slots) strmap_init(&g_bf16.table, GEMM_CACHE_CAPACITY, false);
    const StrMapEntry *found = strmap_find(&g_bf16.table, (const char *)k, sizeof *k);
    if (found) {
        CachedGemm *e = &g_bf16.entries[found->value];
        pthread_mutex_unlock(&g_bf16.lock);
        return e;
    }
    if (g_bf16.count == GEMM_CACHE_CAPACITY) {   /* full: start again */
        for (int i = 0; i < g_bf16.count; i++)
            if (g_bf16.entries[i].primitive) dnnl_primitive_destroy(g_bf16.entries[i].primitive);
        g_bf16.count = 0;
        strmap_free(&g_bf16.table);
        strmap_init(&g_bf16.table, GEMM_CACHE_CAPACITY, false);
    }
    CachedGemm *e = create_gemm(k);   /* appended: index count - 1 */
    strmap_intern(&g_bf16.table, (const char *)&e->shape, sizeof e->shape, NULL)->value = g_bf16.count - 1;
    pthread_mutex_unlock(&g_bf16.lock);
    return e;
}

/* Under g_bf16.lock. */
static const PackedLayout *find_packed_layout(int K, int N, bool f32) {
    for (int i = 0; i < g_bf16.layout_count; i++)
        if (g_bf16.layouts[i].K == K && g_bf16.layouts[i].N == N && g_bf16.layouts[i].f32 == f32)
            return &g_bf16.layouts[i];
    const dnnl_data_type_t t = f32 ? dnnl_f32 : dnnl_bf16;
    GemmShape k = {.tb = 1, .M = PACK_REFERENCE_ROWS, .N = N, .K = K, .lda = K, .ldb = K, .ldc = N};
    if (g_bf16.layout_count == PACKED_LAYOUT_CAPACITY)
        die("gemm_half: more than %d packed weight shapes", PACKED_LAYOUT_CAPACITY);
    ensure_engine(&k);
    PackedLayout *l = &g_bf16.layouts[g_bf16.layout_count];
    dnnl_memory_desc_t a, c, plain;
    dnnl_dims_t dims = {K, N};
    matrix_md(&a, k.M, K, K, false, t, &k);
    matrix_md(&c, k.M, N, N, false, dnnl_f32, &k);
    matrix_md(&plain, K, N, K, true, t, &k);
    check(dnnl_memory_desc_init_by_tag(&l->md, 2, dims, t, dnnl_format_tag_any), "packed descriptor", &k);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd, reorder_pd;
    check(dnnl_matmul_desc_init(&desc, &a, &l->md, NULL, &c), "matmul descriptor", &k);
    check(dnnl_primitive_desc_create(&pd, &desc, NULL, g_bf16.engine, NULL), "primitive descriptor", &k);
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(l->impl, sizeof l->impl, "%s", impl);
    l->md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    l->is_plain = dnnl_memory_desc_equal(&l->md, &plain);
    dnnl_primitive_desc_destroy(pd);
    check(dnnl_reorder_primitive_desc_create(&reorder_pd, &plain, g_bf16.engine, &l->md, g_bf16.engine, NULL),
          "reorder descriptor", &k);
    check(dnnl_primitive_create(&l->reorder, reorder_pd), "reorder", &k);
    dnnl_primitive_desc_destroy(reorder_pd);
    l->K = K, l->N = N, l->f32 = f32;
    g_bf16.layout_count++;
    return l;
}

static dnnl_memory_t wrap(const dnnl_memory_desc_t *md, const void *data, const GemmShape *k) {
    dnnl_memory_t mem;
    check(dnnl_memory_create(&mem, md, g_bf16.engine, (void *)data), "memory", k);
    return mem;
}

static void run_gemm(const CachedGemm *e, const GemmShape *k, const void *A, const void *B, const float *bias,
                     void *C) {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, wrap(&e->a, A, k)}, {DNNL_ARG_WEIGHTS, wrap(&e->b, B, k)},
                               {DNNL_ARG_DST, wrap(&e->c, C, k)}, {DNNL_ARG_BIAS, NULL}};
    int nargs = 3;
    if (bias) args[nargs++].memory = wrap(&e->bias, bias, k);
    const int team = library_team_begin();
    check(dnnl_primitive_execute(e->primitive, g_bf16.stream, nargs, args), "execute", k);
    library_team_end(team);
    check(dnnl_stream_wait(g_bf16.stream), "stream wait", k);
    for (int i = 0; i < nargs; i++) dnnl_memory_destroy(args[i].memory);
}

void gemm_half(HalfMode mode, bool trans_a, bool trans_b, int M, int N, int K, const uint16_t *A, int lda,
               const uint16_t *B, int ldb, const float *bias, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if ((beta != 0.0f && beta != 1.0f) || (bias && beta != 0.0f))
        die("gemm_half: beta must be 0 or 1, and 0 with a bias (got %g%s)", beta, bias ? " with a bias" : "");
    if (K <= 0) {   /* an empty sum: C = bias (+ C) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = (bias ? bias[j] : 0.0f) + beta * C[(size_t)i * ldc + j];
        return;
    }
    if (mode != HALF_BF16) {
        gemm_widened(mode, trans_a, trans_b, M, N, K, A, lda, B, ldb, bias, beta, C, ldc);
        return;
    }
    if (!gemm_bf16_native_available())
        die("gemm_half: this CPU has no bf16 instructions oneDNN can use (callers check "
            "gemm_bf16_native_available first)");
    GemmShape k = (GemmShape){.ta = trans_a, .tb = trans_b, .bias = bias != NULL, .accumulate = beta != 0.0f, .M = M, .N = N,
                    .K = K, .lda = lda, .ldb = ldb, .ldc = ldc};
    run_gemm(find_gemm(&k), &k, A, B, bias, C);
}

/* ---- products of any size on the calling thread (inside OpenMP workers) ---- */

/* One primitive per transpose pair and accumulate flag, its sizes and strides given at each
 * call (oneDNN's runtime dimensions), so the many shapes of attention's per-sequence, per-head
 * products share a handful of primitives instead of filling the cache. Each thread executes
 * on its own stream with its own scratchpad: oneDNN's are not shared between concurrent
 * calls, and a primitive executed inside an OpenMP worker runs on that thread alone. */
enum { SERIAL_KINDS = 8 };
static struct {
    pthread_mutex_t lock;
    dnnl_primitive_t primitive[SERIAL_KINDS];
    size_t scratch_bytes[SERIAL_KINDS];
} g_serial = {.lock = PTHREAD_MUTEX_INITIALIZER};
/* A fixed-shape primitive's memory objects on this thread (its shape's descriptors; the data
 * pointers set at each call): making and freeing four per product was a tenth of attention's
 * time on 128-token blocks. */
enum { SERIAL_BOUND = 8 };
typedef struct {
    dnnl_primitive_t primitive;   /* NULL: empty */
    dnnl_memory_t a, b, c, scratch;   /* scratch NULL where the primitive needs none */
    void *scratch_at;   /* the scratchpad it was made on (the thread's may have grown since) */
} SerialBound;
/* Each thread's stream and scratchpad for the serial products, released when the thread ends
 * (a server's compute worker is a thread that ends before the process). */
typedef struct {
    dnnl_stream_t stream;
    void *scratch;
    size_t capacity;
    void *dense;            /* plain copies of strided operands for the fixed-shape products */
    size_t dense_capacity;
    void *padded;           /* row-padded copies of a packed product's A and C (gemm_packed_post) */
    size_t padded_capacity;
    bool registered;        /* with thread_at_exit: released when the thread ends */
    SerialBound bound[SERIAL_BOUND];
    int next_bound;         /* the slot replaced next when none matches */
} SerialScratch;
static _Thread_local SerialScratch t_serial;

static void bound_release(SerialBound *b) {
    if (!b->primitive) return;
    dnnl_memory_destroy(b->a), dnnl_memory_destroy(b->b), dnnl_memory_destroy(b->c);
    if (b->scratch) dnnl_memory_destroy(b->scratch);
    memset(b, 0, sizeof *b);
}

static void t_serial_release(void *scratch) {
    SerialScratch *s = scratch;
    for (int i = 0; i < SERIAL_BOUND; i++) bound_release(&s->bound[i]);
    if (s->stream) dnnl_stream_destroy(s->stream);
    free(s->scratch);
    free(s->dense);
    free(s->padded);
    memset(s, 0, sizeof *s);
}

/* Before a thread's first allocation in t_serial. */
static void t_serial_register(void) {
    if (t_serial.registered) return;
    thread_at_exit(t_serial_release, &t_serial);
    t_serial.registered = true;
}

/* This thread's stream, and its scratchpad of at least scratch_bytes. */
static void serial_thread_ready(size_t scratch_bytes, const GemmShape *k) {
    t_serial_register();
    if (!t_serial.stream) {   /* the thread's first serial product */
        check(dnnl_stream_create(&t_serial.stream, g_bf16.engine, dnnl_stream_default_flags), "stream", k);
    }
    if (t_serial.capacity < scratch_bytes) {
        free(t_serial.scratch);
        t_serial.scratch = xmalloc(scratch_bytes);
        t_serial.capacity = scratch_bytes;
    }
}

/* The memory objects of k's shape: A, B, C and the thread's scratchpad (NULL without one). */
static void serial_memories(dnnl_memory_t mem[4], size_t scratch_bytes, const GemmShape *k, const void *A,
                            const void *B, float *C) {
    dnnl_memory_desc_t a, b, c, scratch_md;
    matrix_md(&a, k->M, k->K, k->lda, k->ta, dnnl_bf16, k);
    matrix_md(&b, k->K, k->N, k->ldb, k->tb, dnnl_bf16, k);
    matrix_md(&c, k->M, k->N, k->ldc, false, dnnl_f32, k);
    mem[0] = wrap(&a, A, k), mem[1] = wrap(&b, B, k), mem[2] = wrap(&c, C, k), mem[3] = NULL;
    if (!scratch_bytes) return;
    dnnl_dims_t scratch_dims = {(dnnl_dim_t)scratch_bytes};
    check(dnnl_memory_desc_init_by_tag(&scratch_md, 1, scratch_dims, dnnl_u8, dnnl_a), "scratchpad descriptor", k);
    mem[3] = wrap(&scratch_md, t_serial.scratch, k);
}

static void serial_run(dnnl_primitive_t p, dnnl_memory_t mem[4], const GemmShape *k) {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]},
                               {DNNL_ARG_SCRATCHPAD, mem[3]}};
    const int team = library_team_begin();
    check(dnnl_primitive_execute(p, t_serial.stream, mem[3] ? 4 : 3, args), "execute", k);
    library_team_end(team);
    check(dnnl_stream_wait(t_serial.stream), "stream wait", k);
}

/* Runs a runtime-size serial product's primitive (the call's descriptors) on this thread's
 * stream and scratchpad. */
static void serial_execute(dnnl_primitive_t p, size_t scratch_bytes, const GemmShape *k, const void *A,
                           const void *B, float *C) {
    serial_thread_ready(scratch_bytes, k);
    dnnl_memory_t mem[4];
    serial_memories(mem, scratch_bytes, k, A, B, C);
    serial_run(p, mem, k);
    for (int i = 0; i < 4; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
}

/* The same for a fixed-shape primitive, on memory objects kept for it (see SerialBound). */
static void serial_execute_fixed(dnnl_primitive_t p, size_t scratch_bytes, const GemmShape *k, const void *A,
                                 const void *B, float *C) {
    serial_thread_ready(scratch_bytes, k);
    SerialBound *b = NULL;
    for (int i = 0; i < SERIAL_BOUND && !b; i++)
        if (t_serial.bound[i].primitive == p && t_serial.bound[i].scratch_at == t_serial.scratch) b = &t_serial.bound[i];
    if (b) {
        check(dnnl_memory_set_data_handle(b->a, (void *)A), "memory handle", k);
        check(dnnl_memory_set_data_handle(b->b, (void *)B), "memory handle", k);
        check(dnnl_memory_set_data_handle(b->c, C), "memory handle", k);
    } else {
        b = &t_serial.bound[t_serial.next_bound];
        t_serial.next_bound = (t_serial.next_bound + 1) % SERIAL_BOUND;
        bound_release(b);
        dnnl_memory_t mem[4];
        serial_memories(mem, scratch_bytes, k, A, B, C);
        *b = (SerialBound){.primitive = p, .a = mem[0], .b = mem[1], .c = mem[2], .scratch = mem[3],
                           .scratch_at = t_serial.scratch};
    }
    serial_run(p, (dnnl_memory_t[4]){b->a, b->b, b->c, b->scratch}, k);
}

/* A serial product's primitive for k's transposes and accumulate flag, on the shape's sizes and
 * strides or, with runtime, on sizes and strides given at each call; the user's scratchpad
 * (each thread brings its own). */
static dnnl_primitive_t make_serial_primitive(const GemmShape *k, bool runtime, size_t *scratch_bytes) {
    const dnnl_dim_t any = DNNL_RUNTIME_DIM_VAL;
    dnnl_memory_desc_t a, b, c;
    matrix_md(&a, runtime ? any : k->M, runtime ? any : k->K, runtime ? any : k->lda, k->ta, dnnl_bf16, k);
    matrix_md(&b, runtime ? any : k->K, runtime ? any : k->N, runtime ? any : k->ldb, k->tb, dnnl_bf16, k);
    matrix_md(&c, runtime ? any : k->M, runtime ? any : k->N, runtime ? any : k->ldc, false, dnnl_f32, k);
    dnnl_matmul_desc_t desc;
    check(dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c), "serial matmul descriptor", k);
    dnnl_primitive_attr_t attr;
    check(dnnl_primitive_attr_create(&attr), "attributes", k);
    check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad mode", k);
    dnnl_post_ops_t post_ops = NULL;
    if (k->accumulate) {
        check(dnnl_post_ops_create(&post_ops), "post-ops", k);
        check(dnnl_post_ops_append_sum(post_ops, 1.0f), "sum post-op", k);
        check(dnnl_primitive_attr_set_post_ops(attr, post_ops), "set post-ops", k);
    }
    dnnl_primitive_desc_t pd;
    check(dnnl_primitive_desc_create(&pd, &desc, attr, g_bf16.engine, NULL), "serial primitive", k);
    *scratch_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    dnnl_primitive_t p;
    check(dnnl_primitive_create(&p, pd), "primitive", k);
    dnnl_primitive_desc_destroy(pd);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    dnnl_primitive_attr_destroy(attr);
    return p;
}

static dnnl_primitive_t serial_primitive(const GemmShape *k, size_t *scratch_bytes) {
    const int kind = k->ta + 2 * k->tb + 4 * k->accumulate;
    pthread_mutex_lock(&g_serial.lock);
    if (!g_serial.primitive[kind]) {
        pthread_mutex_lock(&g_bf16.lock);
        ensure_engine(k);
        pthread_mutex_unlock(&g_bf16.lock);
        g_serial.primitive[kind] = make_serial_primitive(k, true, &g_serial.scratch_bytes[kind]);
    }
    *scratch_bytes = g_serial.scratch_bytes[kind];
    dnnl_primitive_t p = g_serial.primitive[kind];
    pthread_mutex_unlock(&g_serial.lock);
    return p;
}

/* Fixed-shape serial products: for a known shape on plain (dense) operands oneDNN picks its
 * fastest kernel (AMX's brgemm where the CPU has it: 2-3x the runtime-size primitive on
 * attention's 128 x 128 x 64 blocks, measured on one core; bert-base int8 inference at batch
 * 32 x 128 on one thread: attention 264-275 -> 234-243 ms), where the runtime-size primitive runs a
 * generic one. A primitive costs ~0.4 ms and ~130 KB (oneDNN's JIT code) to make, so sizes
 * are rounded up to buckets (16, then multiples of 32 up to 512: at most 17 per dimension)
 * and the operands zero-padded to them: a few primitives serve every length, and
 * a product's bits depend on its own sizes only, never on which shapes ran before (a server's
 * answer equals the batch command's). The zeros add exact zeros to the sums. Sizes past 512
 * run the runtime-size primitive. Primitives are made on first use and never destroyed
 * (other threads may be running them). */
enum { SERIAL_FIXED_MAX = 512, SERIAL_FIXED_SHAPES = 4096 };
static struct {
    pthread_mutex_t lock;
    StrMap table;   /* a padded shape's bytes (borrowed from shapes[i]) -> i */
    GemmShape shapes[SERIAL_FIXED_SHAPES];
    dnnl_primitive_t primitive[SERIAL_FIXED_SHAPES];
    size_t scratch_bytes[SERIAL_FIXED_SHAPES];
    int count;
} g_serial_fixed = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int serial_bucket(int n) { return n <= 16 ? 16 : (n + 31) / 32 * 32; }

/* The fixed-shape primitive of a padded plain-layout shape, made on first use (NULL past
 * SERIAL_FIXED_SHAPES shapes). */
static dnnl_primitive_t serial_fixed_primitive(const GemmShape *k, size_t *scratch_bytes) {
    pthread_mutex_lock(&g_serial_fixed.lock);
    if (!g_serial_fixed.table.slots) strmap_init(&g_serial_fixed.table, SERIAL_FIXED_SHAPES, false);
    const StrMapEntry *found = strmap_find(&g_serial_fixed.table, (const char *)k, sizeof *k);
    int i = found ? (int)found->value : -1;
    if (i < 0) {   /* a kind's shapes are few in practice (attention: T = L mostly); the bound is far */
        if (g_serial_fixed.count == SERIAL_FIXED_SHAPES) {   /* unreachable with BERT's shapes: the runtime-size one */
            pthread_mutex_unlock(&g_serial_fixed.lock);
            return NULL;
        }
        pthread_mutex_lock(&g_bf16.lock);
        ensure_engine(k);
        pthread_mutex_unlock(&g_bf16.lock);
        i = g_serial_fixed.count++;
        g_serial_fixed.shapes[i] = *k;
        g_serial_fixed.primitive[i] = make_serial_primitive(k, false, &g_serial_fixed.scratch_bytes[i]);
        strmap_intern(&g_serial_fixed.table, (const char *)&g_serial_fixed.shapes[i], sizeof *k, NULL)->value = i;
    }
    dnnl_primitive_t p = g_serial_fixed.primitive[i];
    *scratch_bytes = g_serial_fixed.scratch_bytes[i];
    pthread_mutex_unlock(&g_serial_fixed.lock);
    return p;
}


/* rows x cols values of elem bytes stored with row length ld, into a plain [prows, pcols]
 * array, zero past them. */
static void padded_rows(void *dst, const void *src, int rows, int cols, int ld, int prows, int pcols, size_t elem) {
    char *d = dst;
    const char *s = src;
    const size_t row_bytes = (size_t)cols * elem, pad_bytes = (size_t)(pcols - cols) * elem;
    for (int r = 0; r < rows; r++) {
        copy_short(d + (size_t)r * pcols * elem, s + (size_t)r * ld * elem, row_bytes);
        if (pad_bytes) memset(d + (size_t)r * pcols * elem + row_bytes, 0, pad_bytes);
    }
    memset(d + (size_t)rows * pcols * elem, 0, (size_t)(prows - rows) * pcols * elem);
}

static void *thread_dense(size_t bytes) {
    if (t_serial.dense_capacity < bytes) {
        free(t_serial.dense);
        t_serial.dense = xmalloc(bytes);
        t_serial.dense_capacity = bytes;
    }
    return t_serial.dense;
}

static void *thread_padded(size_t bytes) {
    t_serial_register();
    if (t_serial.padded_capacity < bytes) {
        free(t_serial.padded);
        t_serial.padded = xmalloc(bytes);
        t_serial.padded_capacity = bytes;
    }
    return t_serial.padded;
}

/* gemm_half_serial on the fixed-shape primitive of its padded sizes: A, B (and C when
 * accumulating) copied into zero-padded plain arrays, C's real part copied out. false where a
 * size is past SERIAL_FIXED_MAX. */
static bool serial_fixed(const GemmShape *shape, const uint16_t *A, const uint16_t *B, float *C) {
    if (shape->M > SERIAL_FIXED_MAX || shape->N > SERIAL_FIXED_MAX || shape->K > SERIAL_FIXED_MAX) return false;
    GemmShape k = *shape;
    k.M = serial_bucket(shape->M), k.N = serial_bucket(shape->N), k.K = serial_bucket(shape->K);
    const int ar = shape->ta ? shape->K : shape->M, ac = shape->ta ? shape->M : shape->K;   /* as stored */
    const int br = shape->tb ? shape->N : shape->K, bc = shape->tb ? shape->K : shape->N;
    const int arp = shape->ta ? k.K : k.M, acp = shape->ta ? k.M : k.K;
    const int brp = shape->tb ? k.N : k.K, bcp = shape->tb ? k.K : k.N;
    k.lda = acp, k.ldb = bcp, k.ldc = k.N;
    size_t scratch_bytes = 0;
    dnnl_primitive_t p = serial_fixed_primitive(&k, &scratch_bytes);
    if (!p) return false;
    /* an operand already plain and of its bucket's size is used in place (the same primitive,
     * the same bits): only strided or padded ones are copied */
    const bool a_copy = shape->lda != ac || ar != arp || ac != acp, b_copy = shape->ldb != bc || br != brp || bc != bcp;
    const bool c_copy = shape->ldc != shape->N || shape->M != k.M || shape->N != k.N;
    const size_t a_bytes = a_copy ? (size_t)arp * acp * 2 : 0, b_bytes = b_copy ? (size_t)brp * bcp * 2 : 0;
    char *dense = thread_dense(a_bytes + b_bytes + (c_copy ? (size_t)k.M * k.N * sizeof(float) : 0) + 1);
    const uint16_t *a = A, *b = B;
    float *c = c_copy ? (float *)(dense + a_bytes + b_bytes) : C;
    if (a_copy) padded_rows(dense, A, ar, ac, shape->lda, arp, acp, 2), a = (const uint16_t *)dense;
    if (b_copy) padded_rows(dense + a_bytes, B, br, bc, shape->ldb, brp, bcp, 2), b = (const uint16_t *)(dense + a_bytes);
    if (c_copy && shape->accumulate) padded_rows(c, C, shape->M, shape->N, shape->ldc, k.M, k.N, sizeof(float));
    serial_execute_fixed(p, scratch_bytes, &k, a, b, c);
    if (c_copy)
        for (int r = 0; r < shape->M; r++)
            copy_short(C + (size_t)r * shape->ldc, c + (size_t)r * k.N, sizeof(float) * (size_t)shape->N);
    return true;
}

int gemm_half_serial_bucket(int n) { return n > SERIAL_FIXED_MAX ? n : serial_bucket(n); }

bool gemm_half_serial_batched(int batch, bool trans_b, int M, int N, int K, const uint16_t *A, const uint16_t *B,
                              float *C) {
    if (batch < 1 || M > SERIAL_FIXED_MAX || N > SERIAL_FIXED_MAX || K > SERIAL_FIXED_MAX || !gemm_bf16_native_available())
        return false;
    if (M != serial_bucket(M) || N != serial_bucket(N) || K != serial_bucket(K))
        die("gemm_half_serial_batched: sizes %d x %d x %d are not the buckets' (gemm_half_serial_bucket)", M, N, K);
    GemmShape k = {.tb = trans_b, .M = M, .N = N, .K = K, .lda = K, .ldb = trans_b ? K : N, .ldc = N, .batch = batch};
    size_t scratch_bytes = 0;
    dnnl_primitive_t p = serial_fixed_primitive(&k, &scratch_bytes);
    if (!p) return false;
    serial_execute_fixed(p, scratch_bytes, &k, A, B, C);
    return true;
}

void gemm_half_serial(HalfMode mode, bool trans_a, bool trans_b, int M, int N, int K, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (mode != HALF_BF16 || K <= 0) {   /* widened: sgemm runs on this thread inside a worker */
        gemm_half(mode, trans_a, trans_b, M, N, K, A, lda, B, ldb, NULL, beta, C, ldc);
        return;
    }
    if (beta != 0.0f && beta != 1.0f) die("gemm_half_serial: beta must be 0 or 1 (got %g)", beta);
    GemmShape k = {.ta = trans_a, .tb = trans_b, .accumulate = beta != 0.0f, .M = M, .N = N, .K = K, .lda = lda,
                   .ldb = ldb, .ldc = ldc};
    if (serial_fixed(&k, A, B, C)) return;
    size_t scratch_bytes;
    dnnl_primitive_t p = serial_primitive(&k, &scratch_bytes);
    serial_execute(p, scratch_bytes, &k, A, B, C);
}


/* ---- packed weights ---- */

size_t gemm_packed_bytes(bool f32, int K, int N) {
    if ((!f32 && !gemm_bf16_native_available()) || K <= 0 || N <= 0) return 0;
    pthread_mutex_lock(&g_bf16.lock);
    const PackedLayout *l = find_packed_layout(K, N, f32);
    size_t bytes = l->is_plain ? 0 : dnnl_memory_desc_get_size(&l->md);
    pthread_mutex_unlock(&g_bf16.lock);
    return bytes;
}

void gemm_pack(bool f32, void *packed, const void *W, int K, int N) {
    pthread_mutex_lock(&g_bf16.lock);
    const PackedLayout *l = find_packed_layout(K, N, f32);
    pthread_mutex_unlock(&g_bf16.lock);
    GemmShape k = {.N = N, .K = K, .f32 = f32};
    dnnl_memory_desc_t plain;
    matrix_md(&plain, K, N, K, true, f32 ? dnnl_f32 : dnnl_bf16, &k);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, wrap(&plain, W, &k)}, {DNNL_ARG_TO, wrap(&l->md, packed, &k)}};
    check(dnnl_primitive_execute(l->reorder, g_bf16.stream, 2, args), "packing reorder", &k);
    check(dnnl_stream_wait(g_bf16.stream), "stream wait", &k);
    for (int i = 0; i < 2; i++) dnnl_memory_destroy(args[i].memory);
}

/* A packed product of M rows, M not a multiple of 16, through row-padded copies of A and C.
 * oneDNN 2.6's brgemm matmul ran some row counts 2-5x slower than their neighbours (bf16,
 * K 768, N 3072, one thread: 53 rows 184 GFLOP/s, 52 rows 866, 64 rows 958; 51, 57-59, 61,
 * 62, 115, 117, 121-126 alike; multiples of 16 and counts under 16 never), which a sequence's
 * rows at batch 1 hit. Up to PAD_ROWS_MAX rows the product runs on M rounded up to a multiple
 * of 16, zero rows added (copying A and C costs little next to the weight's pass); above, on
 * the rows down to a multiple of 16 in place, then the rest (one more pass over the weight,
 * small next to the first). Each row's result is its own row times the weight either way. */
enum { PAD_ROWS_MAX = 256 };

static const CachedGemm *packed_gemm(bool f32, int M, int N, int K, bool bias, GemmPost post, bool c_bf16, int lda,
                                     int ldc, GemmShape *k) {
    *k = (GemmShape){.bias = bias, .packed = 1, .f32 = f32, .post = post, .c16 = c_bf16, .M = M, .N = N, .K = K,
                     .lda = lda, .ldc = ldc};
    return find_gemm(k);
}

bool gemm_packed_post(bool f32, int M, int N, int K, const void *A, int lda, const void *packed, const float *bias,
                      GemmPost post, void *C, bool c_bf16, int ldc) {
    if (M <= 0) return true;
    const size_t a_elem = f32 ? 4 : 2, c_elem = c_bf16 ? 2 : 4;
    GemmShape k;
    if (M % 16 && M > 16 && M <= PAD_ROWS_MAX) {
        const int mp = (M + 15) / 16 * 16;
        const CachedGemm *e = packed_gemm(f32, mp, N, K, bias != NULL, post, c_bf16, K, N, &k);
        if (!e->primitive) return false;
        const size_t a_bytes = (size_t)mp * K * a_elem;
        char *pad = thread_padded(a_bytes + (size_t)mp * N * c_elem);
        for (int r = 0; r < M; r++) memcpy(pad + (size_t)r * K * a_elem, (const char *)A + (size_t)r * lda * a_elem, K * a_elem);
        memset(pad + (size_t)M * K * a_elem, 0, (size_t)(mp - M) * K * a_elem);
        run_gemm(e, &k, pad, packed, bias, pad + a_bytes);
        for (int r = 0; r < M; r++)
            memcpy((char *)C + (size_t)r * ldc * c_elem, pad + a_bytes + (size_t)r * N * c_elem, N * c_elem);
        return true;
    }
    const int head = M > 16 ? M / 16 * 16 : M, tail = M - head;
    for (int part = 0; part < 1 + (tail > 0); part++) {
        const CachedGemm *e = packed_gemm(f32, part ? tail : head, N, K, bias != NULL, post, c_bf16, lda, ldc, &k);
        if (!e->primitive) return false;   /* the caller recomputes every row with the plain weight */
        run_gemm(e, &k, (const char *)A + (part ? (size_t)head * lda * a_elem : 0), packed, bias,
                 (char *)C + (part ? (size_t)head * ldc * c_elem : 0));
    }
    return true;
}

bool gemm_packed(bool f32, int M, int N, int K, const void *A, int lda, const void *packed, const float *bias,
                 float *C, int ldc) {
    return gemm_packed_post(f32, M, N, K, A, lda, packed, bias, GEMM_POST_NONE, C, false, ldc);
}

void gemm_bf16_describe(char *out, size_t n) {
    const dnnl_version_t *v = dnnl_version();
    if (!gemm_bf16_native_available()) {
        snprintf(out, n, "oneDNN %d.%d.%d: no bf16 instructions on this CPU (emulated in fp32)", v->major, v->minor,
                 v->patch);
        return;
    }
    /* the implementation oneDNN picks for bert-base's feed-forward product */
    dnnl_engine_t engine;
    dnnl_memory_desc_t a, b, c;
    GemmShape k = {.M = 4096, .N = 3072, .K = 768, .lda = 768, .ldb = 768, .ldc = 3072, .tb = true};
    check(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine", &k);
    matrix_md(&a, k.M, k.K, k.lda, false, dnnl_bf16, &k);
    matrix_md(&b, k.K, k.N, k.ldb, true, dnnl_bf16, &k);
    matrix_md(&c, k.M, k.N, k.ldc, false, dnnl_f32, &k);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd;
    const char *impl = "?";
    check(dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c), "matmul descriptor", &k);
    check(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL), "primitive descriptor", &k);
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(out, n, "oneDNN %d.%d.%d matmul %s", v->major, v->minor, v->patch, impl);
    dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(engine);
}
