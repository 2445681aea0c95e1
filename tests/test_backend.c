/* The kernels' dispatch (kernels/backend.h): the CPU by default, clear errors for an unknown
 * device and for a CUDA backend library that cannot be loaded or lacks a kernel, and nothing
 * changed by a failed choice. (Every other test runs the CPU backend through the dispatch; the
 * CUDA backend itself is tested on a GPU: tests/cuda/, scripts/gpu_check.sh.) */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "kernels/backend.h"
#include "kernels/kernels.h"

static void test_cpu_by_default(void) {
    char err[512] = "";
    CHECK(!strcmp(k_backend_name(), "cpu"));
    CHECK(k_backend_use(NULL, err, sizeof err) && k_backend_use("cpu", err, sizeof err));
    CHECK(!strcmp(k_backend_name(), "cpu"));
    float *x = k_alloc(sizeof(float) * 3);
    k_fill(x, 3, 2.0f);
    CHECK(k_sum_squares(x, 3) == 12.0);
    k_free(x);
}

static void test_unknown_device(void) {
    char err[512] = "";
    CHECK(!k_backend_use("gpu", err, sizeof err));
    CHECKF(strstr(err, "--device gpu") && strstr(err, "cpu and cuda"), "%s", err);
    CHECK(!strcmp(k_backend_name(), "cpu"));
}

static void test_cuda_library_missing_or_incomplete(void) {
    char err[512] = "";
    setenv("BERT_CUDA_LIB", "/nonexistent/libbert_cuda.so", 1);
    CHECK(!k_backend_use("cuda", err, sizeof err));
    CHECKF(strstr(err, "cannot load the CUDA backend") && strstr(err, "make GPU=cuda"), "%s", err);
    CHECK(!strcmp(k_backend_name(), "cpu"));
    /* a library that loads but is not a backend: the first missing kernel is named */
    setenv("BERT_CUDA_LIB", "libm.so.6", 1);
    err[0] = '\0';
    CHECK(!k_backend_use("cuda", err, sizeof err));
    CHECKF(strstr(err, "lacks k_"), "%s", err);
    CHECK(!strcmp(k_backend_name(), "cpu"));
    unsetenv("BERT_CUDA_LIB");
    float *x = k_alloc(sizeof(float));   /* the CPU's kernels still run */
    k_fill(x, 1, 3.0f);
    CHECK(k_read_scalar(x) == 3.0f);
    k_free(x);
}

/* The kernel profile counts each call of each kernel while on, and nothing while off. */
static void test_kernel_profile(void) {
    float *x = k_alloc(sizeof(float) * 1000);
    k_profile_start();
    for (int i = 0; i < 4; i++) k_fill(x, 1000, 1.0f);
    (void)k_sum_squares(x, 1000);
    k_profile_stop();
    k_fill(x, 1000, 2.0f);   /* not counted */
    char text[4096] = "";
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    k_profile_print(f, 2);   /* per 2 steps */
    fclose(f);
    CHECKF(strstr(text, "k_fill") && strstr(text, " 2.0 "), "%s", text);
    CHECKF(strstr(text, "k_sum_squares") && strstr(text, " 0.5 "), "%s", text);
    CHECKF(!strstr(text, "k_copy"), "%s", text);
    k_free(x);
}

int main(void) {
    RUN_TEST(test_cpu_by_default);
    RUN_TEST(test_unknown_device);
    RUN_TEST(test_cuda_library_missing_or_incomplete);
    RUN_TEST(test_kernel_profile);
    return test_summary();
}
