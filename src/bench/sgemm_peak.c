#include "bench/sgemm_peak.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/cpu/gemm_half.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/sgemm.h"

typedef void (*SgemmNN)(int m, int n, int k, const float *a, const float *b, float *c);

static void openblas_nn(int m, int n, int k, const float *a, const float *b, float *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

static void build_sgemm_nn(int m, int n, int k, const float *a, const float *b, float *c) {
    sgemm(false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

static void fill_uniform(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;             /* LCG: values only need to be non-trivial */
        x[i] = (float)(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

/* One product to time: fp32 a[m,k] b[k,n] through an sgemm (NN), or, with no sgemm, bf16
 * operands in the given layouts through gemm_half on bf16 instructions. */
typedef struct {
    SgemmNN sgemm;
    bool ta, tb;   /* bf16 only */
    float beta;
    const void *a, *b;
    float *c;
} Product;

static void run_product(const Product *p, int m, int n, int k) {
    if (p->sgemm) p->sgemm(m, n, k, p->a, p->b, p->c);
    else gemm_half(HALF_BF16, p->ta, p->tb, m, n, k, p->a, p->ta ? m : k, p->b, p->tb ? k : n, NULL, p->beta, p->c, n);
}

/* Repeats one product until its share of the budget is spent (at least 3 timed runs after
 * one untimed warm-up that faults the pages in, wakes the threads and makes the primitive). */
static void time_shape(SgemmShapeResult *r, const Product *p, double budget) {
    int m = r->m, n = r->n, k = r->k;
    double flops = 2.0 * m * n * k, total = 0, best = 0;
    run_product(p, m, n, k);
    int reps = 0;
    double start = now_seconds();
    while (reps < 3 || (now_seconds() - start < budget && reps < 100)) {
        double t0 = now_seconds();
        run_product(p, m, n, k);
        double gflops = flops / (now_seconds() - t0) * 1e-9;
        if (gflops > best) best = gflops;
        total += gflops;
        reps++;
    }
    r->best_gflops = best;
    r->mean_gflops = total / reps;
    r->reps = reps;
}

static void measure_in_process(SgemmPeak *out, int m, double budget_seconds) {
    const int hidden = 768, inter = 3072;
    const int shapes[SGEMM_PEAK_SHAPES][2] = {{hidden, hidden}, {inter, hidden}, {hidden, inter}}; /* n, k */
    size_t max_a = (size_t)m * inter, max_b = (size_t)inter * hidden, max_c = (size_t)m * inter;
    float *a = xmalloc(max_a * sizeof(float)), *b = xmalloc(max_b * sizeof(float));
    float *c = xmalloc(max_c * sizeof(float));
    fill_uniform(a, max_a, 1);
    fill_uniform(b, max_b, 2);
    memset(out, 0, sizeof *out);
    SgemmNN gemms[SGEMM_PEAK_MAX_LIBS] = {openblas_nn, build_sgemm_nn};
    out->libs[0] = "openblas", out->libs[1] = sgemm_library();
    out->nlibs = strcmp(out->libs[1], out->libs[0]) ? 2 : 1;   /* an OpenBLAS build: time it once */
    for (int lib = 0; lib < out->nlibs; lib++)
        for (int i = 0; i < SGEMM_PEAK_SHAPES; i++) {
            SgemmShapeResult *r = &out->shapes[lib][i];
            r->m = m, r->n = shapes[i][0], r->k = shapes[i][1];
            const Product p = {.sgemm = gemms[lib], .a = a, .b = b, .c = c};
            time_shape(r, &p, budget_seconds / (SGEMM_PEAK_SHAPES * out->nlibs));
            if (r->best_gflops > out->lib_peak_gflops[lib]) out->lib_peak_gflops[lib] = r->best_gflops;
            if (r->best_gflops > out->peak_gflops) out->peak_gflops = r->best_gflops, out->peak_lib = out->libs[lib];
        }
    free(a), free(b), free(c);
}

void sgemm_peak_measure(SgemmPeak *out, int m, double budget_seconds) {
    if (m <= 0) m = 4096;
    measure_in_process(out, m, budget_seconds);
    reset_peak_rss();   /* its ~100 MB of buffers are freed: they are not the caller's peak */
}

void bf16_gemm_peak_measure(Bf16GemmPeak *out, int m, double budget_seconds) {
    memset(out, 0, sizeof *out);
    if (!gemm_bf16_native_available()) return;
    if (m <= 0) m = 4096;
    const int hidden = 768, inter = 3072;
    const int shapes[SGEMM_PEAK_SHAPES][2] = {{hidden, hidden}, {inter, hidden}, {hidden, inter}}; /* n, k */
    const size_t max_a = (size_t)m * inter, max_b = (size_t)inter * hidden, max_c = (size_t)m * inter;
    float *fa = xmalloc(max_a * sizeof(float)), *fb = xmalloc(max_b * sizeof(float));
    bf16 *a = xmalloc(max_a * sizeof(bf16)), *b = xmalloc(max_b * sizeof(bf16));
    float *c = xmalloc(max_c * sizeof(float));
    fill_uniform(fa, max_a, 1), fill_uniform(fb, max_b, 2);
    bf16_from_floats(a, fa, (long)max_a), bf16_from_floats(b, fb, (long)max_b);
    free(fa), free(fb);
    for (int i = 0; i < SGEMM_PEAK_SHAPES; i++) {
        SgemmShapeResult *r = &out->shapes[i];
        r->m = m, r->n = shapes[i][0], r->k = shapes[i][1];
        const Product p = {.tb = true, .a = a, .b = b, .c = c};   /* weights stored [n, k], as the model's */
        time_shape(r, &p, budget_seconds / SGEMM_PEAK_SHAPES);
        if (r->best_gflops > out->peak_gflops) out->peak_gflops = r->best_gflops;
    }
    free(a), free(b), free(c);
    reset_peak_rss();
}

/* The best of 3 runs of one bf16 product (after a warm-up), in GFLOP/s. */
static double time_bf16_product(bool ta, bool tb, int M, int N, int K, float beta) {
    const size_t na = (size_t)M * K, nb = (size_t)K * N;
    bf16 *a = xcalloc(na, sizeof(bf16)), *b = xcalloc(nb, sizeof(bf16));
    float *c = xcalloc((size_t)M * N, sizeof(float));
    for (size_t i = 0; i < na; i++) a[i] = bf16_from_float((float)(i % 7) * 0.125f - 0.375f);
    for (size_t i = 0; i < nb; i++) b[i] = bf16_from_float((float)(i % 5) * 0.125f - 0.25f);
    const Product p = {.ta = ta, .tb = tb, .beta = beta, .a = a, .b = b, .c = c};
    SgemmShapeResult r = {.m = M, .n = N, .k = K};
    time_shape(&r, &p, 0);
    free(a), free(b), free(c);
    return r.best_gflops;
}

void bf16_gemm_shapes_report(int tokens, int predictions, double peak_gflops) {
    if (!gemm_bf16_native_available()) return;
    const int N = tokens, H = 768, FF = 3072, V = 30522, P = predictions;
    const struct { const char *what; bool ta, tb; int M, N, K; float beta; } shapes[] = {
        {"QKV forward", false, true, N, 3 * H, H, 0}, {"QKV input grad", false, false, N, H, 3 * H, 1},
        {"QKV weight grad", true, false, 3 * H, H, N, 1}, {"attn-out forward", false, true, N, H, H, 0},
        {"attn-out input grad", false, false, N, H, H, 0}, {"attn-out weight grad", true, false, H, H, N, 1},
        {"FFN-in forward", false, true, N, FF, H, 0}, {"FFN-in input grad", false, false, N, H, FF, 1},
        {"FFN-in weight grad", true, false, FF, H, N, 1}, {"FFN-out forward", false, true, N, H, FF, 0},
        {"FFN-out input grad", false, false, N, FF, H, 0}, {"FFN-out weight grad", true, false, H, FF, N, 1},
        {"MLM decoder forward", false, true, P, V, H, 0}, {"MLM decoder input grad", false, false, P, H, V, 0},
        {"MLM decoder weight grad", true, false, V, H, P, 1}};
    double flops = 0, seconds = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const double g = time_bf16_product(shapes[i].ta, shapes[i].tb, shapes[i].M, shapes[i].N, shapes[i].K,
                                           shapes[i].beta);
        const double f = 2.0 * shapes[i].M * shapes[i].N * shapes[i].K;
        flops += f, seconds += f / (g * 1e9);
        printf("bf16 gemm %-24s %c%c %5d x %5d x %5d: %6.1f GFLOP/s = %3.0f%% of the bf16 peak\n", shapes[i].what,
               shapes[i].ta ? 'T' : 'N', shapes[i].tb ? 'T' : 'N', shapes[i].M, shapes[i].N, shapes[i].K, g,
               100 * g / peak_gflops);
    }
    printf("bf16 gemm all of them, weighted by their FLOPs: %.1f GFLOP/s = %.0f%% of the bf16 peak\n",
           flops / seconds * 1e-9, 100 * flops / seconds * 1e-9 / peak_gflops);
    reset_peak_rss();
}

void sgemm_peak_openblas_describe(char *out, size_t n) {
    openblas_describe(out, n, openblas_get_config(), openblas_get_corename());
}

/* ---- int8 ---- */

/* The int8 dot-product instruction back to back: ACC independent accumulators (more than the
 * instruction's latency times its ports, so it issues every cycle it can), operands in
 * registers. Each vpdpbusd multiplies 4 u8 x s8 pairs per 32-bit lane and adds them: 2 x 4 x
 * lanes ops. Returns the accumulators' sum (so the loop is not removed). */
enum { VNNI_ACC = 12 };
__attribute__((target("avx512f,avx512vnni"))) static int vpdpbusd_zmm_loop(long iters) {
    __m512i acc[VNNI_ACC];
    const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x01ff01ff);
    for (int i = 0; i < VNNI_ACC; i++) acc[i] = _mm512_set1_epi32(i);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < VNNI_ACC; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __m512i s = acc[0];
    for (int i = 1; i < VNNI_ACC; i++) s = _mm512_add_epi32(s, acc[i]);
    return _mm512_reduce_add_epi32(s);
}

__attribute__((target("avx2,avxvnni"))) static int vpdpbusd_ymm_loop(long iters) {
    __m256i acc[VNNI_ACC];
    const __m256i a = _mm256_set1_epi32(0x01020304), b = _mm256_set1_epi32(0x01ff01ff);
    for (int i = 0; i < VNNI_ACC; i++) acc[i] = _mm256_set1_epi32(i);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < VNNI_ACC; i++) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
    __m256i s = acc[0];
    for (int i = 1; i < VNNI_ACC; i++) s = _mm256_add_epi32(s, acc[i]);
    int lanes[8];
    _mm256_storeu_si256((__m256i *)lanes, s);
    return lanes[0] + lanes[7];
}

/* Every thread runs loop(iters), `ops` operations each; the best of 3 timings (the first, which
 * wakes the threads and the unit, left out), in GOP/s. */
static double loop_peak(int (*loop)(long), long iters, double ops) {
    double best = 0;
    volatile int sink = 0;
    for (int rep = 0; rep < 4; rep++) {
        int threads = 1;
        const double t0 = now_seconds();
#pragma omp parallel reduction(+ : sink)
        {
#pragma omp single
            threads = omp_get_num_threads();
            sink += loop(iters);
        }
        const double gops = ops * threads / (now_seconds() - t0) * 1e-9;
        if (rep > 0 && gops > best) best = gops;
    }
    return best;
}

static double vpdpbusd_peak(bool zmm) {
    const long iters = 2000000;
    return loop_peak(zmm ? vpdpbusd_zmm_loop : vpdpbusd_ymm_loop, iters, 2.0 * 4 * (zmm ? 16 : 8) * VNNI_ACC * (double)iters);
}

/* The AMX tile instruction's peak (amx_int8_instruction_loop: 4 tdpbssd an iteration). */
static double amx_peak(void) {
    const long iters = 200000;
    return loop_peak(amx_int8_instruction_loop, iters, 4 * 2.0 * 16 * 16 * 64 * (double)iters);
}

static void run_int8_product(int m, int n, int k, const int8_t *a, const void *packed, int32_t *c) {
    gemm_int8_s32(m, n, k, a, packed, c);
}

/* The same product as the model runs it (gemm_int8_rows: blocks of rows whose sums stay in
 * cache for the epilogue, here a bf16 output into out), timed by the products' own counters:
 * their rate with nothing else running, the epilogue's time apart. The best of a few repeats. */
static double products_in_cache_gops(int m, int n, int k, const int8_t *a, const void *packed, void *out,
                                     double budget_seconds) {
    float *row_scale = xmalloc(sizeof(float) * (size_t)m);
    for (int i = 0; i < m; i++) row_scale[i] = 1.0f / 127;
    const Int8Epilogue e = {.out16 = out};
    double best = 0;   /* the counters are reset here: a bench reads its own after the peaks */
    gemm_int8_rows(m, n, k, a, row_scale, packed, NULL, &e);   /* warm-up */
    const double start = now_seconds();
    for (int reps = 0; reps < 3 || (now_seconds() - start < budget_seconds && reps < 50); reps++) {
        double seconds, ops;
        gemm_int8_product_counters(NULL, NULL, true);
        gemm_int8_rows(m, n, k, a, row_scale, packed, NULL, &e);
        gemm_int8_product_counters(&seconds, &ops, true);
        const double threads = omp_get_max_threads();
        if (seconds > 0 && ops / (seconds / threads) * 1e-9 > best) best = ops / (seconds / threads) * 1e-9;
    }
    free(row_scale);
    return best;
}

void int8_gemm_peak_measure(Int8GemmPeak *out, int m, double budget_seconds) {
    memset(out, 0, sizeof *out);
    __builtin_cpu_init();
    out->vpdpbusd_isa = __builtin_cpu_supports("avx512vnni") ? "avx512_vnni"
                        : __builtin_cpu_supports("avxvnni")  ? "avx_vnni"
                                                             : "none";
    if (strcmp(out->vpdpbusd_isa, "none")) out->vpdpbusd_gops = vpdpbusd_peak(!strcmp(out->vpdpbusd_isa, "avx512_vnni"));
    if (amx_int8_available()) out->amx_gops = amx_peak();
    if (!gemm_int8_support()) return;
    if (m <= 0) m = 4096;
    const int hidden = 768, inter = 3072;
    const int shapes[SGEMM_PEAK_SHAPES][2] = {{hidden, hidden}, {inter, hidden}, {hidden, inter}}; /* n, k */
    const size_t max_a = (size_t)m * inter, max_w = (size_t)inter * hidden;
    int8_t *a = xmalloc(max_a);
    float *w = xmalloc(max_w * sizeof(float));
    const size_t c_bytes = ((size_t)m * inter * sizeof(int32_t) + 63) / 64 * 64;
    int32_t *c = aligned_alloc(64, c_bytes);   /* aligned: the bf16 output of the in-cache runs streams */
    if (!c) die("out of memory allocating %zu bytes", c_bytes);
    fill_uniform(w, max_w, 2);
    for (size_t i = 0; i < max_a; i++) a[i] = (int8_t)((i * 2654435761u >> 13) % 255 - 127);
    for (int i = 0; i < SGEMM_PEAK_SHAPES; i++) {
        SgemmShapeResult *r = &out->shapes[i];
        const int n = shapes[i][0], k = shapes[i][1];
        r->m = m, r->n = n, r->k = k;
        void *packed = xmalloc(gemm_int8_packed_bytes(k, n) + 64);
        void *aligned = (void *)(((uintptr_t)packed + 63) & ~(uintptr_t)63);
        gemm_int8_pack(aligned, w, k, n, NULL);
        run_int8_product(m, n, k, a, aligned, c);   /* warm-up: pages, threads, primitive */
        const double ops = 2.0 * m * n * k, start = now_seconds();
        double best = 0, total = 0;
        int reps = 0;
        while (reps < 3 || (now_seconds() - start < budget_seconds / SGEMM_PEAK_SHAPES && reps < 100)) {
            const double t0 = now_seconds();
            run_int8_product(m, n, k, a, aligned, c);
            const double gops = ops / (now_seconds() - t0) * 1e-9;
            best = gops > best ? gops : best, total += gops, reps++;
        }
        r->best_gflops = best, r->mean_gflops = total / reps, r->reps = reps;
        if (best > out->peak_gops) out->peak_gops = best;
        const double in_cache = products_in_cache_gops(m, n, k, a, aligned, c, budget_seconds / SGEMM_PEAK_SHAPES / 2);
        out->in_cache_gops[i] = in_cache;
        if (in_cache > out->in_cache_peak_gops) out->in_cache_peak_gops = in_cache;
        free(packed);
    }
    free(a), free(w), free(c);
    reset_peak_rss();
}
