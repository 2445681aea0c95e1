/* Minimal test harness: each tests/test_*.c is one binary with several TEST cases.
 * A case fails if any CHECK in it fails; the binary prints "N passed, N failed" last and
 * exits non-zero on any failure. Tests run from the repository root (fixtures are in
 * tests/data/). */
#ifndef BERT_TEST_H
#define BERT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_passed_count, test_failed_count, test_case_failed;

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

/* Runs one case and records it. */
#define RUN_TEST(fn)                                                        \
    do {                                                                    \
        test_case_failed = 0;                                               \
        fn();                                                               \
        if (test_case_failed) { test_failed_count++; printf("  FAIL %s\n", #fn); } \
        else { test_passed_count++; printf("  ok   %s\n", #fn); }           \
        fflush(stdout);                                                     \
    } while (0)

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", test_passed_count, test_failed_count);
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

#endif
