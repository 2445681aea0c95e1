/* The CUDA backend's parameter-memory kernels (src/kernels/cuda/optim.cu) against the CPU
 * backend's (src/kernels/cpu/optim.c) on the same inputs: bit for bit, since both sum in the
 * same order and neither contracts into fused multiply-adds. The CUDA backend is a shared
 * library (make GPU=cuda cuda-test builds build-cuda/libbert_cuda.so, linked -Bsymbolic), loaded
 * here beside the CPU functions this program links, so the two run side by side. Skips, passing,
 * with a message where no GPU is present. */
#include <dlfcn.h>
#include <stdint.h>

#include "test.h"

#include "core/rng.h"
#include "kernels/kernels.h"

typedef struct {
    int (*devices)(void);
    void *(*alloc)(size_t);
    void (*release)(void *);
    void (*upload)(void *, const void *, size_t);
    void (*download)(void *, const void *, size_t);
    double (*sum_squares)(const float *, size_t);
    void (*scale)(float *, size_t, float);
    size_t (*count_nonfinite)(const float *, size_t);
    double (*lamb_moments)(float *, float *, const float *, const float *, size_t, const LambArgs *);
    void (*lamb_update)(float *, const float *, const float *, size_t, float, const LambArgs *);
    void (*adamw_update)(float *, float *, float *, const float *, size_t, const AdamWArgs *);
    void (*fill)(float *, size_t, float);
    void (*truncated_normal)(float *, size_t, float, uint64_t);
    long (*count_argmax_matches)(const float *, const int32_t *, int, int, long *);
} Cuda;

static Cuda cuda;

static int load(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("  skip: %s\n", dlerror()); return -1; }
#define SYM(field, name) if (!(*(void **)&cuda.field = dlsym(h, name))) { printf("  missing %s\n", name); return -2; }
    SYM(devices, "k_cuda_devices") SYM(alloc, "k_alloc") SYM(release, "k_free") SYM(upload, "k_upload")
    SYM(download, "k_download") SYM(sum_squares, "k_sum_squares") SYM(scale, "k_scale")
    SYM(count_nonfinite, "k_count_nonfinite") SYM(lamb_moments, "k_lamb_moments") SYM(lamb_update, "k_lamb_update")
    SYM(adamw_update, "k_adamw_update") SYM(fill, "k_fill") SYM(truncated_normal, "k_truncated_normal")
    SYM(count_argmax_matches, "k_count_argmax_matches")
#undef SYM
    return 0;
}

/* n floats of a roughly normal spread at scale s (the same for a seed). */
static float *values(size_t n, uint64_t seed, float s) {
    float *x = malloc(sizeof(float) * (n + 1));
    for (size_t i = 0; i < n; i++) x[i] = s * (float)(rng_uniform(seed, (uint32_t)i) - 0.5f) * 3.0f;
    return x;
}

static float *device_copy(const float *x, size_t n) {
    float *d = cuda.alloc(sizeof(float) * (n + 1));
    cuda.upload(d, x, sizeof(float) * n);
    return d;
}

static bool same_floats(const float *host, const float *device, size_t n) {
    float *back = malloc(sizeof(float) * (n + 1));
    cuda.download(back, device, sizeof(float) * n);
    const bool same = memcmp(host, back, sizeof(float) * n) == 0;
    free(back);
    return same;
}

static const size_t SIZES[] = {1, 15, 16, 17, 1000, K_SUM_CHUNK, K_SUM_CHUNK + 1, 3 * K_SUM_CHUNK + 5, 1 << 20};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

static void test_sums_and_scale(void) {
    for (int s = 0; s < N_SIZES; s++) {
        const size_t n = SIZES[s];
        float *x = values(n, 11 + s, 1.0f), *d = device_copy(x, n);
        const double cpu = k_sum_squares(x, n), gpu = cuda.sum_squares(d, n);
        CHECKF(cpu == gpu, "n %zu: sum of squares %.17g on the CPU, %.17g on the GPU", n, cpu, gpu);
        k_scale(x, n, 0.37f), cuda.scale(d, n, 0.37f);
        CHECKF(same_floats(x, d, n), "n %zu: k_scale differs", n);
        x[n / 2] = NAN, x[n - 1] = INFINITY;
        cuda.upload(d, x, sizeof(float) * n);
        CHECK(k_count_nonfinite(x, n) == cuda.count_nonfinite(d, n));
        k_fill(x, n, 0.25f), cuda.fill(d, n, 0.25f);
        CHECK(same_floats(x, d, n));
        k_truncated_normal(x, n, 0.02f, 99), cuda.truncated_normal(d, n, 0.02f, 99);
        CHECKF(same_floats(x, d, n), "n %zu: initial weights differ", n);
        cuda.release(d), free(x);
    }
}

static void test_lamb_and_adamw(void) {
    for (int s = 0; s < N_SIZES; s++) {
        const size_t n = SIZES[s];
        float *w = values(n, 1, 0.05f), *g = values(n, 2, 0.01f), *m = values(n, 3, 0.001f), *v = values(n, 4, 1e-4f);
        for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
        float *dw = device_copy(w, n), *dg = device_copy(g, n), *dm = device_copy(m, n), *dv = device_copy(v, n);
        const LambArgs a = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = 0.01f, .clip = 1.5f,
                            .bc1 = 0.1f, .bc2 = 0.001f};
        const double cpu = k_lamb_moments(m, v, g, w, n, &a), gpu = cuda.lamb_moments(dm, dv, dg, dw, n, &a);
        CHECKF(cpu == gpu, "n %zu: LAMB's sum(u^2) %.17g on the CPU, %.17g on the GPU", n, cpu, gpu);
        CHECKF(same_floats(m, dm, n) && same_floats(v, dv, n), "n %zu: LAMB's moments differ", n);
        k_lamb_update(w, m, v, n, 1e-3f, &a), cuda.lamb_update(dw, dm, dv, n, 1e-3f, &a);
        CHECKF(same_floats(w, dw, n), "n %zu: LAMB's update differs", n);
        const AdamWArgs b = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .clip_scale = 0.8f, .step_size = 1e-4f,
                             .bc2_sqrt = 0.03f, .decay_factor = 0.9999f};
        k_adamw_update(w, m, v, g, n, &b), cuda.adamw_update(dw, dm, dv, dg, n, &b);
        CHECKF(same_floats(w, dw, n) && same_floats(m, dm, n) && same_floats(v, dv, n), "n %zu: AdamW differs", n);
        cuda.release(dw), cuda.release(dg), cuda.release(dm), cuda.release(dv);
        free(w), free(g), free(m), free(v);
    }
}

static void test_argmax_counts(void) {
    enum { M = 37, V = 1000 };
    float *logits = values((size_t)M * V, 5, 1.0f);
    int32_t labels[M];
    for (int k = 0; k < M; k++) {
        labels[k] = k % 5 == 4 ? -1 : (int32_t)(rng_bits32(6, (uint32_t)k) % V);
        if (k % 3 == 0) logits[(size_t)k * V + labels[k < 0 ? 0 : k] % V] = 10.0f;   /* some rows right */
        if (k % 7 == 0) logits[(size_t)k * V + 3] = logits[(size_t)k * V + 900] = 20.0f;   /* a tie: the first wins */
    }
    float *d = device_copy(logits, (size_t)M * V);
    long cpu_labelled, gpu_labelled;
    const long cpu = k_count_argmax_matches(logits, labels, M, V, &cpu_labelled);
    const long gpu = cuda.count_argmax_matches(d, labels, M, V, &gpu_labelled);
    CHECKF(cpu == gpu && cpu_labelled == gpu_labelled, "%ld of %ld right on the CPU, %ld of %ld on the GPU", cpu,
           cpu_labelled, gpu, gpu_labelled);
    CHECK(cpu > 0);
    cuda.release(d), free(logits);
}

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : "build-cuda/libbert_cuda.so";
    if (load(lib) != 0 || cuda.devices() == 0) {
        printf("  skip: no CUDA backend library or no GPU here (%s)\n", lib);
        return test_summary();
    }
    RUN_TEST(test_sums_and_scale);
    RUN_TEST(test_lamb_and_adamw);
    RUN_TEST(test_argmax_counts);
    return test_summary();
}
