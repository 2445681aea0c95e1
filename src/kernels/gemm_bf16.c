#include "kernels/gemm_bf16.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/sgemm.h"

void bf16_from_floats(bf16 *restrict dst, const float *restrict src, long n) {
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n; i++) dst[i] = bf16_from_float(src[i]);
}

void floats_from_bf16(float *restrict dst, const bf16 *restrict src, long n) {
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n; i++) dst[i] = float_from_bf16(src[i]);
}

bool gemm_bf16_native_available(void) {
    /* oneDNN's ISA values nest (each adds bits to the one below) */
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), bf16_isa = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    return (isa & bf16_isa) == bf16_isa;
}

/* ---- emulated: widen to fp32, multiply with sgemm ---- */

/* The fp32 copy of the rows x cols block a stored matrix spans (row length ld). */
static float *widen(const bf16 *x, int rows, int cols, int ld) {
    const size_t span = (size_t)(rows - 1) * ld + cols;
    float *w = xmalloc(sizeof(float) * span);
    floats_from_bf16(w, x, (long)span);
    return w;
}

static void gemm_emulated(bool ta, bool tb, int M, int N, int K, const bf16 *A, int lda, const bf16 *B, int ldb,
                          const float *bias, float beta, float *C, int ldc) {
    float *a = ta ? widen(A, K, M, lda) : widen(A, M, K, lda);
    float *b = tb ? widen(B, N, K, ldb) : widen(B, K, N, ldb);
    if (bias)
        for (int i = 0; i < M; i++) memcpy(C + (size_t)i * ldc, bias, sizeof(float) * N);
    sgemm(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, bias ? 1.0f : beta, C, ldc);
    free(a);
    free(b);
}

/* ---- native: oneDNN matmul primitives, one per shape ---- */

typedef struct {   /* all int: no padding, compared with memcmp */
    int ta, tb, bias, accumulate;
    int M, N, K, lda, ldb, ldc;
} GemmShape;

typedef struct {
    GemmShape shape;
    dnnl_primitive_t primitive;
    dnnl_memory_desc_t a, b, bias, c;
} CachedGemm;

/* BERT runs a few dozen shapes (per layer kind, head, and the batch's row count); past the
 * capacity the cache starts again (each entry is a few KB of oneDNN state). */
enum { GEMM_CACHE_CAPACITY = 256 };
static struct {
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    CachedGemm entries[GEMM_CACHE_CAPACITY];
    int count;
} g_bf16 = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void check(dnnl_status_t s, const char *what, const GemmShape *k) {
    if (s != dnnl_success)
        die("oneDNN bf16 matmul: %s failed (status %d) for %c%c M=%d N=%d K=%d lda=%d ldb=%d ldc=%d", what, (int)s,
            k->ta ? 'T' : 'N', k->tb ? 'T' : 'N', k->M, k->N, k->K, k->lda, k->ldb, k->ldc);
}

static void matrix_md(dnnl_memory_desc_t *md, int rows, int cols, int ld, bool stored_transposed, dnnl_data_type_t t,
                      const GemmShape *k) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {stored_transposed ? 1 : ld, stored_transposed ? ld : 1};
    check(dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides), "memory descriptor", k);
}

static CachedGemm *create_gemm(const GemmShape *k) {
    if (!g_bf16.engine) {
        check(dnnl_engine_create(&g_bf16.engine, dnnl_cpu, 0), "engine", k);
        check(dnnl_stream_create(&g_bf16.stream, g_bf16.engine, dnnl_stream_default_flags), "stream", k);
    }
    if (g_bf16.count == GEMM_CACHE_CAPACITY) {
        for (int i = 0; i < g_bf16.count; i++) dnnl_primitive_destroy(g_bf16.entries[i].primitive);
        g_bf16.count = 0;
    }
    CachedGemm *e = &g_bf16.entries[g_bf16.count];
    e->shape = *k;
    matrix_md(&e->a, k->M, k->K, k->lda, k->ta, dnnl_bf16, k);
    matrix_md(&e->b, k->K, k->N, k->ldb, k->tb, dnnl_bf16, k);
    matrix_md(&e->c, k->M, k->N, k->ldc, false, dnnl_f32, k);
    if (k->bias) matrix_md(&e->bias, 1, k->N, k->N, false, dnnl_f32, k);
    dnnl_matmul_desc_t desc;
    check(dnnl_matmul_desc_init(&desc, &e->a, &e->b, k->bias ? &e->bias : NULL, &e->c), "matmul descriptor", k);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    if (k->accumulate) {   /* C += ...: a "sum" post-op adds the old C */
        check(dnnl_primitive_attr_create(&attr), "attributes", k);
        check(dnnl_post_ops_create(&post_ops), "post-ops", k);
        check(dnnl_post_ops_append_sum(post_ops, 1.0f), "sum post-op", k);
        check(dnnl_primitive_attr_set_post_ops(attr, post_ops), "set post-ops", k);
    }
    dnnl_primitive_desc_t pd;
    check(dnnl_primitive_desc_create(&pd, &desc, attr, g_bf16.engine, NULL), "primitive descriptor", k);
    check(dnnl_primitive_create(&e->primitive, pd), "primitive", k);
    dnnl_primitive_desc_destroy(pd);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    g_bf16.count++;
    return e;
}

static CachedGemm *find_gemm(const GemmShape *k) {
    pthread_mutex_lock(&g_bf16.lock);
    CachedGemm *found = NULL;
    for (int i = 0; i < g_bf16.count && !found; i++)
        if (!memcmp(&g_bf16.entries[i].shape, k, sizeof *k)) found = &g_bf16.entries[i];
    if (!found) found = create_gemm(k);
    pthread_mutex_unlock(&g_bf16.lock);
    return found;
}

static dnnl_memory_t wrap(const dnnl_memory_desc_t *md, const void *data, const GemmShape *k) {
    dnnl_memory_t mem;
    check(dnnl_memory_create(&mem, md, g_bf16.engine, (void *)data), "memory", k);
    return mem;
}

static void gemm_native(const GemmShape *k, const bf16 *A, const bf16 *B, const float *bias, float *C) {
    CachedGemm *e = find_gemm(k);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, wrap(&e->a, A, k)}, {DNNL_ARG_WEIGHTS, wrap(&e->b, B, k)},
                               {DNNL_ARG_DST, wrap(&e->c, C, k)}, {DNNL_ARG_BIAS, NULL}};
    int nargs = 3;
    if (bias) args[nargs++].memory = wrap(&e->bias, bias, k);
    check(dnnl_primitive_execute(e->primitive, g_bf16.stream, nargs, args), "execute", k);
    check(dnnl_stream_wait(g_bf16.stream), "stream wait", k);
    for (int i = 0; i < nargs; i++) dnnl_memory_destroy(args[i].memory);
}

void gemm_bf16(bool emulate, bool trans_a, bool trans_b, int M, int N, int K, const bf16 *A, int lda, const bf16 *B,
               int ldb, const float *bias, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if ((beta != 0.0f && beta != 1.0f) || (bias && beta != 0.0f))
        die("gemm_bf16: beta must be 0 or 1, and 0 with a bias (got %g%s)", beta, bias ? " with a bias" : "");
    if (K <= 0) {   /* an empty sum: C = bias (+ C) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = (bias ? bias[j] : 0.0f) + beta * C[(size_t)i * ldc + j];
        return;
    }
    if (emulate) {
        gemm_emulated(trans_a, trans_b, M, N, K, A, lda, B, ldb, bias, beta, C, ldc);
        return;
    }
    if (!gemm_bf16_native_available())
        die("gemm_bf16: this CPU has no bf16 instructions oneDNN can use (callers check "
            "gemm_bf16_native_available first)");
    GemmShape k = (GemmShape){.ta = trans_a, .tb = trans_b, .bias = bias != NULL, .accumulate = beta != 0.0f, .M = M, .N = N,
                    .K = K, .lda = lda, .ldb = ldb, .ldc = ldc};
    gemm_native(&k, A, B, bias, C);
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
