/* What the CUDA backend's tests share: the backend loaded as a shared library beside the CPU
 * backend this program links (its k_* functions are the reference), inputs made the same for a
 * seed, and comparisons that print where two results part. Each test program takes the
 * library's path (build-cuda/libbert_cuda.so) and passes, with a message, where it cannot be
 * loaded or no GPU is present. */
#ifndef BERT_TESTS_CUDA_TEST_H
#define BERT_TESTS_CUDA_TEST_H

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.h"

#include "core/rng.h"
#include "kernels/kernels.h"

static void *cuda_lib;

/* The CUDA backend's function of that name (a kernels.h name: the same signature); exits if absent. */
static inline void *cuda_fn(const char *name) {
    void *f = dlsym(cuda_lib, name);
    if (!f) { printf("  the CUDA backend has no %s\n", name); exit(1); }
    return f;
}
#define CUDA_FN(name) ((__typeof__(&name))cuda_fn(#name))

/* Loads the library; false (the caller skips, passing) without it or without a GPU, saying why. A
 * GPU the library cannot run on (k_cuda_check: compute capability, no code for it) is a failure. */
static inline bool cuda_open(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "build-cuda/libbert_cuda.so";
    cuda_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!cuda_lib) { printf("  skip: %s\n", dlerror()); return false; }
    int (*devices)(void) = (int (*)(void))cuda_fn("k_cuda_devices");
    int (*check)(char *, size_t) = (int (*)(char *, size_t))cuda_fn("k_cuda_check");
    char why[768];
    if (devices() < 1) {
        check(why, sizeof why);
        printf("  skip: %s\n", why);
        return false;
    }
    if (check(why, sizeof why) != 0) {
        printf("  FAIL: %s\n", why);
        exit(1);
    }
    return true;
}

/* Whether the library is the host emulator's (tests/cuda/emu: make cuda-emulate), where a test
 * may take smaller sizes for what only a GPU's timing can show (it runs every thread in turn). */
static inline bool cuda_test_emulated(void) { return dlsym(cuda_lib, "bert_cuda_emulator") != NULL; }

/* n floats spread roughly uniformly over [-1.5 s, 1.5 s), the same for a seed. */
static inline float *cuda_test_values(size_t n, uint64_t seed, float s) {
    float *x = malloc(sizeof(float) * (n + 1));
    for (size_t i = 0; i < n; i++) x[i] = s * (float)(rng_uniform(seed, (uint32_t)i) - 0.5f) * 3.0f;
    return x;
}

/* Device copies of host arrays and back (the CUDA backend's memory functions). */
static inline void *cuda_copy_in(const void *host, size_t bytes) {
    void *d = CUDA_FN(k_alloc)(bytes + 4);
    CUDA_FN(k_upload)(d, host, bytes);
    return d;
}
static inline float *cuda_copy_out(const void *device, size_t n_floats) {
    float *h = malloc(sizeof(float) * (n_floats + 1));
    CUDA_FN(k_download)(h, device, sizeof(float) * n_floats);
    return h;
}
static inline void cuda_release(void *device) { CUDA_FN(k_free)(device); }

static inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Whether got is within tol of want, element by element: |got - want| <= abs_tol + rel_tol |want|
 * (NaN and infinities must match exactly). Prints the worst element and the first failure. */
static inline bool cuda_close(const char *what, const float *want, const float *got, size_t n, double abs_tol,
                       double rel_tol) {
    double worst = 0;
    size_t worst_at = 0, bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double w = want[i], g = got[i];
        bool ok;
        if (!isfinite(w) || !isfinite(g)) ok = (isnan(w) && isnan(g)) || w == g;
        else {
            const double err = fabs(g - w);
            ok = err <= abs_tol + rel_tol * fabs(w);
            if (err > worst) { worst = err; worst_at = i; }
        }
        if (!ok && bad++ == 0) first_bad = i;
    }
    if (bad)
        printf("    %s: %zu of %zu differ; first at %zu: cpu %.9g cuda %.9g; worst |diff| %.3g at %zu\n", what, bad,
               n, first_bad, want[first_bad], got[first_bad], worst, worst_at);
    return bad == 0;
}

/* The same, bit for bit. */
static inline bool cuda_same(const char *what, const void *want, const void *got, size_t bytes) {
    const unsigned char *a = want, *b = got;
    for (size_t i = 0; i < bytes; i++)
        if (a[i] != b[i]) {
            printf("    %s: first differing byte %zu of %zu\n", what, i, bytes);
            return false;
        }
    return true;
}

#endif
