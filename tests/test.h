/* Minimal test harness: each tests/test_*.c is one binary with several TEST cases.
 * A case fails if any CHECK in it fails; the binary prints "N passed, N failed" last and
 * exits non-zero on any failure. Tests run from the repository root (fixtures are in
 * tests/data/). */
#ifndef BERT_TEST_H
#define BERT_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/test_hooks.h"   /* test_work(): tests build with BERT_TEST_HOOKS */

static int test_passed_count, test_failed_count, test_skipped_count, test_case_failed, test_case_skipped;

#define CHECK(cond) CHECKF(cond, "%s", #cond)
#define CHECKF(cond, ...)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            test_case_failed = 1;                                           \
        }                                                                   \
    } while (0)

/* A case that cannot run here (a missing tool, data outside the repository, an instruction
 * set this CPU lacks) says so and why: it is counted as skipped, not passed. */
#define TEST_SKIP(...)                                                      \
    do {                                                                    \
        printf("    skipped: ");                                            \
        printf(__VA_ARGS__);                                                \
        putchar('\n');                                                      \
        test_case_skipped = 1;                                              \
    } while (0)

/* Runs one case and records it; BERT_TEST_ONLY=substring runs only the cases whose names
 * hold it (a quick rerun of one case of a long test). */
#define RUN_TEST(fn)                                                        \
    do {                                                                    \
        const char *only_ = getenv("BERT_TEST_ONLY");                       \
        if (only_ && !strstr(#fn, only_)) break;                            \
        test_case_failed = test_case_skipped = 0;                           \
        fn();                                                               \
        if (test_case_failed) { test_failed_count++; printf("  FAIL %s\n", #fn); } \
        else if (test_case_skipped) { test_skipped_count++; printf("  skip %s\n", #fn); } \
        else { test_passed_count++; printf("  ok   %s\n", #fn); }           \
        fflush(stdout);                                                     \
    } while (0)

/* "N passed, N failed" (tests/run.sh reads it), then ", N skipped" when any was. */
static inline int test_summary(void) {
    printf("%d passed, %d failed", test_passed_count, test_failed_count);
    if (test_skipped_count) printf(", %d skipped", test_skipped_count);
    putchar('\n');
    return test_failed_count ? 1 : 0;
}

/* Largest |a-b| / max(|b|, floor) over n floats, for comparing against a reference b.
 * The floor keeps near-zero reference values from turning noise into huge ratios. */
static inline double max_rel_error(const float *a, const float *b, size_t n, double floor_) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double s = fabs((double)b[i]);
        double r = d / (s > floor_ ? s : floor_);
        if (r > worst || r != r) worst = r != r ? INFINITY : r;
    }
    return worst;
}

/* ---- Tolerances from the arithmetic ------------------------------------------------------
 * Comparing two float32 evaluations of the same mathematical result that sum in different
 * orders (another GEMM library or kernel, another blocking of K, another thread split or row
 * count): bit-identity is not promised by anything but the same code on the same shape, so
 * such comparisons take a bound derived from the arithmetic instead of one machine's result.
 *
 * A sum of K products, accumulated in float32 in ANY order, is within gamma_K * sum|a_i b_i|
 * of the exact sum, gamma_K = K u / (1 - K u), u = 2^-24 the unit roundoff (Higham, Accuracy
 * and Stability of Numerical Algorithms, sec. 3.1; fused multiply-adds only lower it). Two
 * evaluations therefore differ by at most 2 gamma_K sum|a_i b_i|. */
#define F32_UNIT_ROUNDOFF (1.0 / 16777216.0)

static inline double gamma_k(double k) {
    double ku = k * F32_UNIT_ROUNDOFF;
    return ku / (1.0 - ku);
}

/* Worst |c1 - c2| / (2 gamma_K (|A| |B|^T)_ij) over C = A[M,K] B[N,K]^T (row-major, as sgemm
 * with trans_b), with a bias b[N] one more term of each sum (K + 1 terms, |b_j| added to the
 * magnitudes; b may be NULL): <= 1 when the two products differ only by the order of their
 * sums. The bound is per element, so it holds for any data and any library. */
static inline double gemm_reorder_ratio_bias(const float *c1, const float *c2, const float *A, const float *B,
                                             const float *b, int M, int N, int K) {
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double abs_sum = b ? fabs((double)b[j]) : 0;
            for (int k = 0; k < K; k++) abs_sum += fabs((double)A[(size_t)i * K + k] * B[(size_t)j * K + k]);
            double diff = fabs((double)c1[(size_t)i * N + j] - c2[(size_t)i * N + j]);
            double bound = 2 * gamma_k(K + (b != NULL)) * abs_sum + 1e-45;
            if (diff / bound > worst || diff != diff) worst = diff != diff ? INFINITY : diff / bound;
        }
    return worst;
}
static inline double gemm_reorder_ratio(const float *c1, const float *c2, const float *A, const float *B, int M,
                                        int N, int K) {
    return gemm_reorder_ratio_bias(c1, c2, A, B, NULL, M, N, K);
}

/* A product and its GELU computed in one pass (the activation a post-op of the product)
 * against GELU of the exact sum, both in double (act 0: erf GELU, 1: tanh GELU). Each result
 * may be off by GELU's slope (|GELU'| < 1.13 everywhere) times the product's rounding
 * (gamma_n sum|terms| over its n nonzero terms, the bias one: zeros add exactly), plus the activation's own error: erf or tanh
 * within 1e-6 absolute (oneDNN's polynomial: Abramowitz & Stegun 7.1.26's 1.5e-7 plus its
 * fp32 evaluation; measured 5.2e-7 for erf, 2.4e-7 for tanh, glibc's erff 2.9e-7), i.e.
 * 0.5 |s| 1e-6, and 3 fp32 roundings of the result; then, where the result is stored
 * rounded to a shorter format with unit roundoff round_u (bf16: 2^-8), one more rounding.
 * erf's and tanh's GELU differ by up to 1.8e-4 |s| (at s = 2.6): where the product is exact
 * (one nonzero term), 300 times the allowance, so the wrong function fails. Returns the
 * worst difference over its bound. */
static inline double gelu_product_ratio(const float *out, const float *A, const float *B, const float *b, int M,
                                        int N, int K, int act, double round_u) {
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = b ? b[j] : 0, abs_sum = b ? fabs((double)b[j]) : 0;
            int terms = b && b[j] != 0;
            for (int k = 0; k < K; k++) {
                double t = (double)A[(size_t)i * K + k] * B[(size_t)j * K + k];
                s += t, abs_sum += fabs(t), terms += t != 0;
            }
            double g = act == 0 ? 0.5 * s * (1 + erf(s / sqrt(2.0)))
                                : 0.5 * s * (1 + tanh(0.7978845608028654 * (s + 0.044715 * s * s * s)));
            double e = 1.13 * gamma_k(terms) * abs_sum + 0.5e-6 * fabs(s) + 3 * F32_UNIT_ROUNDOFF * fabs(g);
            double bound = e + round_u * (fabs(g) + e) + 1e-45;
            double diff = fabs((double)out[(size_t)i * N + j] - g);
            if (diff / bound > worst || diff != diff) worst = diff != diff ? INFINITY : diff / bound;
        }
    return worst;
}

/* Norm-wise relative difference ||a - b|| / ||b|| of two evaluations (0 when both are 0). */
static inline double rel_norm_error(const float *a, const float *b, size_t n) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        diff += d * d, norm += (double)b[i] * b[i];
    }
    if (diff != diff) return INFINITY;
    return diff == 0 ? 0 : sqrt(diff / fmax(norm, 1e-300));
}

/* Bound for a norm-wise comparison of two evaluations of a deeper computation (a network).
 * The worst case above grows with K and with every stage; real rounding errors do not line
 * up like that. Higham & Mary's probabilistic analysis (SIAM J. Sci. Comput. 41(5), 2019:
 * rounding errors modelled as independent, mean zero) bounds a K-term sum by
 * lambda sqrt(K) u sum|terms| with probability at least 1 - 2 exp(-lambda^2 / 2) (about
 * 4e-22 for lambda = 10). To first order the errors of the reductions along the chain add,
 * for well-conditioned stages (BERT's are: LayerNorm renormalises every sublayer), so two
 * evaluations differ norm-wise by at most 2 lambda u sum_i sqrt(K_i). The caller passes
 * that sum over the chain's reduction lengths. A wrong row, mask or index is off by 1e-3 or
 * more even for a single row of a small model; this stays near 5e-4 for the test models. */
#define REORDER_LAMBDA 10.0
static inline double chain_reorder_tolerance(double sum_sqrt_reduction_lengths) {
    return 2 * REORDER_LAMBDA * F32_UNIT_ROUNDOFF * sum_sqrt_reduction_lengths;
}

/* ---- Scaling: every text pass is linear in its input, by counted work ---------------------
 * Each pass counts the steps of its scanning loops (test_work(), core/test_hooks.h: per thread,
 * so a pass runs on one thread to be counted whole).
 * A scaling test runs the pass on an input of size n and on one of size 10n made of the same
 * unit (ordinary text, or a pattern that would make a careless pass quadratic) and requires
 *   work(n) >= a floor (the counter counts what the pass scans), and
 *   work(10n) <= SCALING_SLACK * 10 * work(n).
 * A slack of 1.5 leaves room for a logarithmic factor (a sort or a heap over the items:
 * log(10n) / log(n) <= 1.34 from n = 1000 on), while a quadratic pass gives about 100x.
 * Fixed costs only lower the ratio. Work is counted, not timed: the same on every machine,
 * build and load. BERT_SCALING_REPORT=1 prints each ratio. */
#define SCALING_SLACK 1.5

static inline bool scales_linearly(const char *what, long long small, long long large, long long floor_, double slack) {
    double ratio = (double)large / (double)(small > 0 ? small : 1);
    if (getenv("BERT_SCALING_REPORT")) printf("    scaling: %-44s %11lld -> %12lld  %6.2fx\n", what, small, large, ratio);
    return small >= floor_ && (double)large <= slack * 10 * (double)small;
}

/* The check with a slack of its own, for a pass whose work per byte varies by a known
 * bounded factor (the caller says why). */
#define CHECK_SCALES_LINEARLY_WITHIN(what, small, large, floor_, slack)                             \
    CHECKF(scales_linearly(what, small, large, floor_, slack),                                     \
           "%s: work %lld at n (at least %lld expected), %lld at 10n: %.1fx, more than %.0fx", what, \
           (long long)(small), (long long)(floor_), (long long)(large),                          \
           (double)(large) / (double)((small) > 0 ? (small) : 1), (slack) * 10)
#define CHECK_SCALES_LINEARLY(what, small, large, floor_) \
    CHECK_SCALES_LINEARLY_WITHIN(what, small, large, floor_, SCALING_SLACK)

/* prefix, `copies` copies of unit, then suffix, as one malloc'ed NUL-terminated string of
 * *len bytes. A unit containing '%' is a printf format given the copy's number (a long), so
 * that copies can differ ("w%ld " makes distinct words). */
static inline char *repeat_text(const char *prefix, const char *unit, long copies, const char *suffix, size_t *len) {
    const bool numbered = strchr(unit, '%') != NULL;
    size_t cap = strlen(prefix) + strlen(suffix) + (size_t)copies * (strlen(unit) + 24) + 1, n = 0;
    char *text = malloc(cap);
    n += (size_t)snprintf(text, cap, "%s", prefix);
    const size_t unit_len = strlen(unit);
    for (long i = 0; i < copies; i++) {
        if (numbered) {
            n += (size_t)snprintf(text + n, cap - n, unit, i);
        } else {
            memcpy(text + n, unit, unit_len);
            n += unit_len;
        }
    }
    n += (size_t)snprintf(text + n, cap - n, "%s", suffix);
    if (len) *len = n;
    return text;
}

#endif
