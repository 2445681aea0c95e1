/* The CUDA backend's parameter-memory kernels (src/kernels/cuda/optim.cu) against the CPU
 * backend's (src/kernels/cpu/optim.c) on the same inputs: bit for bit, since both sum in the
 * same order (chunks of K_SUM_CHUNK, 16 lanes, the chunks added in order on the host) and
 * neither contracts into fused multiply-adds; the element-wise updates are the same float
 * operations. So every comparison here is exact (cuda_same, ==). The many-tensor forms (k_*_each)
 * are checked on tables that mix awkward sizes (0, 1, 16, 17, K_SUM_CHUNK, K_SUM_CHUNK + 1,
 * 3 K_SUM_CHUNK + 5) placed at odd offsets in one allocation, as the sharded optimizer's parts
 * are, and on repeated calls (the staged tables: the same table again, another of the same size,
 * a ring of asynchronous copies). Skips, passing, where no GPU is present. */
#include "cuda_test.h"

#include <string.h>

static float *device_copy(const float *x, size_t n) { return cuda_copy_in(x, sizeof(float) * n); }

/* Whether device memory holds exactly the host's n floats; prints what differs. */
static bool same_floats(const char *what, const float *host, const float *device, size_t n) {
    float *back = cuda_copy_out(device, n);
    const bool same = cuda_same(what, host, back, sizeof(float) * n);
    if (!same)
        for (size_t i = 0; i < n; i++)
            if (memcmp(&host[i], &back[i], sizeof(float))) {
                printf("    %s: first at element %zu of %zu: cpu %.9g cuda %.9g\n", what, i, n, host[i], back[i]);
                break;
            }
    free(back);
    return same;
}

/* Whether two double arrays hold the same bits; prints each that differs. */
static bool same_doubles(const char *what, const double *cpu, const double *gpu, const size_t *n, int count) {
    bool same = true;
    for (int i = 0; i < count; i++)
        if (memcmp(&cpu[i], &gpu[i], sizeof(double))) {
            printf("    %s: tensor %d (%zu floats): cpu %.17g cuda %.17g\n", what, i, n[i], cpu[i], gpu[i]);
            same = false;
        }
    return same;
}

static const size_t SIZES[] = {1, 15, 16, 17, 1000, K_SUM_CHUNK, K_SUM_CHUNK + 1, 3 * K_SUM_CHUNK + 5, 1 << 20};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

static void test_sums_and_scale(void) {
    for (int s = 0; s < N_SIZES; s++) {
        const size_t n = SIZES[s];
        float *x = cuda_test_values(n, 11 + s, 1.0f), *d = device_copy(x, n);
        const double cpu = k_sum_squares(x, n), gpu = CUDA_FN(k_sum_squares)(d, n);
        CHECKF(cpu == gpu, "n %zu: sum of squares %.17g on the CPU, %.17g on the GPU", n, cpu, gpu);
        k_scale(x, n, 0.37f), CUDA_FN(k_scale)(d, n, 0.37f);
        CHECKF(same_floats("k_scale", x, d, n), "n %zu: k_scale differs", n);
        x[n / 2] = NAN, x[n - 1] = INFINITY;
        CUDA_FN(k_upload)(d, x, sizeof(float) * n);
        CHECK(k_count_nonfinite(x, n) == CUDA_FN(k_count_nonfinite)(d, n));
        k_fill(x, n, 0.25f), CUDA_FN(k_fill)(d, n, 0.25f);
        CHECK(same_floats("k_fill", x, d, n));
        k_truncated_normal(x, n, 0.02f, 99), CUDA_FN(k_truncated_normal)(d, n, 0.02f, 99);
        CHECKF(same_floats("k_truncated_normal", x, d, n), "n %zu: initial weights differ", n);
        cuda_release(d), free(x);
    }
    CHECK(CUDA_FN(k_sum_squares)(NULL, 0) == 0.0);   /* nothing to read */
}

static void test_lamb_and_adamw(void) {
    for (int s = 0; s < N_SIZES; s++) {
        const size_t n = SIZES[s];
        float *w = cuda_test_values(n, 1, 0.05f), *g = cuda_test_values(n, 2, 0.01f),
              *m = cuda_test_values(n, 3, 0.001f), *v = cuda_test_values(n, 4, 1e-4f);
        for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
        float *dw = device_copy(w, n), *dg = device_copy(g, n), *dm = device_copy(m, n), *dv = device_copy(v, n);
        const LambArgs a = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = 0.01f, .clip = 1.5f,
                            .bc1 = 0.1f, .bc2 = 0.001f};
        const double cpu = k_lamb_moments(m, v, g, w, n, &a), gpu = CUDA_FN(k_lamb_moments)(dm, dv, dg, dw, n, &a);
        CHECKF(cpu == gpu, "n %zu: LAMB's sum(u^2) %.17g on the CPU, %.17g on the GPU", n, cpu, gpu);
        CHECKF(same_floats("LAMB m", m, dm, n) && same_floats("LAMB v", v, dv, n), "n %zu: LAMB's moments differ", n);
        k_lamb_update(w, m, v, n, 1e-3f, &a), CUDA_FN(k_lamb_update)(dw, dm, dv, n, 1e-3f, &a);
        CHECKF(same_floats("LAMB w", w, dw, n), "n %zu: LAMB's update differs", n);
        const AdamWArgs b = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .clip_scale = 0.8f, .step_size = 1e-4f,
                             .bc2_sqrt = 0.03f, .decay_factor = 0.9999f};
        k_adamw_update(w, m, v, g, n, &b), CUDA_FN(k_adamw_update)(dw, dm, dv, dg, n, &b);
        CHECKF(same_floats("AdamW w", w, dw, n) && same_floats("AdamW m", m, dm, n) &&
                   same_floats("AdamW v", v, dv, n), "n %zu: AdamW differs", n);
        cuda_release(dw), cuda_release(dg), cuda_release(dm), cuda_release(dv);
        free(w), free(g), free(m), free(v);
    }
}

/* ---- the many-tensor forms ---- */

/* A table of tensors: tensor i is n[i] floats at offset[i] of one array (host) and of its device
 * copy, for each of w, g, m, v; the offsets are odd (a tensor's part starts anywhere). */
typedef struct {
    int count;
    size_t n[400], offset[400], total;
    float *host[4], *device[4];   /* w, g, m, v */
} Table;

enum { W, G, M, V };

static void table_make(Table *t, const size_t *n, int count, uint64_t seed) {
    t->count = count, t->total = 3;   /* the first tensor at float 3 */
    for (int i = 0; i < count; i++) {
        t->n[i] = n[i], t->offset[i] = t->total;
        t->total += n[i] + 1 + (size_t)(i % 3);   /* gaps of 1 to 3 floats, which nothing may touch */
    }
    const float scale[4] = {0.05f, 0.01f, 0.001f, 1e-4f};
    for (int k = 0; k < 4; k++) {
        t->host[k] = cuda_test_values(t->total, seed + (uint64_t)k, scale[k]);
        if (k == V)
            for (size_t e = 0; e < t->total; e++) t->host[k][e] = fabsf(t->host[k][e]);
        t->device[k] = device_copy(t->host[k], t->total);
    }
}

static void table_free(Table *t) {
    for (int k = 0; k < 4; k++) free(t->host[k]), cuda_release(t->device[k]);
}

/* Tensor pointers into array k of the table, host or device. */
static void pointers(const Table *t, int k, bool device, float **out) {
    for (int i = 0; i < t->count; i++) out[i] = (device ? t->device[k] : t->host[k]) + t->offset[i];
}

/* Whether the device copies hold the host's bits, all four arrays, gaps included. */
static bool table_same(const char *what, const Table *t) {
    static const char *name[4] = {"w", "g", "m", "v"};
    bool same = true;
    for (int k = 0; k < 4; k++) {
        char label[160];
        snprintf(label, sizeof label, "%s: %s", what, name[k]);
        same &= same_floats(label, t->host[k], t->device[k], t->total);
    }
    return same;
}

static const size_t AWKWARD[] = {0, 1, 17, 0, K_SUM_CHUNK + 1, 16, 3 * K_SUM_CHUNK + 5, K_SUM_CHUNK, 15, 1000, 0};
enum { N_AWKWARD = sizeof AWKWARD / sizeof AWKWARD[0] };

static LambArgs lamb_args(int i, int step) {
    return (LambArgs){.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = i % 2 ? 0.01f : 0.0f,
                      .clip = 1.0f + 0.25f * (float)(i % 4), .bc1 = 1.0f - powf(0.9f, (float)step),
                      .bc2 = 1.0f - powf(0.999f, (float)step)};
}

static AdamWArgs adamw_args(int i, int step) {
    return (AdamWArgs){.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .clip_scale = 0.5f + 0.1f * (float)(i % 5),
                       .step_size = 1e-4f * (float)step, .bc2_sqrt = sqrtf(1.0f - powf(0.999f, (float)step)),
                       .decay_factor = i % 2 ? 0.9999f : 1.0f};
}

/* k_sum_squares_each on both backends over array k of the table; compares the sums and checks
 * the CPU's against its one-tensor k_sum_squares. */
static bool sums_agree(const char *what, const Table *t, int k) {
    float *host[400], *device[400];
    double cpu[400], gpu[400], one[400];
    pointers(t, k, false, host), pointers(t, k, true, device);
    k_sum_squares_each(cpu, (const float *const *)host, t->n, t->count);
    for (int i = 0; i < t->count; i++) gpu[i] = -1;
    CUDA_FN(k_sum_squares_each)(gpu, (const float *const *)device, t->n, t->count);
    for (int i = 0; i < t->count; i++) one[i] = k_sum_squares(host[i], t->n[i]);
    const bool ok = same_doubles(what, cpu, gpu, t->n, t->count);
    return same_doubles("the CPU's k_sum_squares_each against k_sum_squares", one, cpu, t->n, t->count) && ok;
}

static void test_sum_squares_each(void) {
    Table a, b;
    table_make(&a, AWKWARD, N_AWKWARD, 21);
    table_make(&b, AWKWARD, N_AWKWARD, 31);   /* another table of the same size: other pointers */
    CHECK(sums_agree("sum of squares, table a", &a, W));
    CHECK(sums_agree("sum of squares, table a again", &a, W));   /* the same staged table */
    CHECK(sums_agree("sum of squares, table b", &b, G));         /* a new one of the same size */
    CHECK(sums_agree("sum of squares, table a's m", &a, M));
    CHECK(table_same("sums read only", &a) && table_same("sums read only", &b));
    /* one tensor, and none */
    Table one;
    const size_t n1[] = {3 * K_SUM_CHUNK + 5};
    table_make(&one, n1, 1, 41);
    CHECK(sums_agree("sum of squares, one tensor", &one, V));
    double out = -1;
    CUDA_FN(k_sum_squares_each)(&out, NULL, NULL, 0);
    CHECK(out == -1);   /* count 0: nothing written */
    table_free(&a), table_free(&b), table_free(&one);
}

/* Many small tensors and a few large ones, as a model's parameter list: the table grows past the
 * sizes of the calls before it. */
static void many_sizes(size_t *n, int count) {
    for (int i = 0; i < count; i++)
        n[i] = i % 50 == 7 ? 2 * K_SUM_CHUNK + (size_t)i : i % 13 == 5 ? 0 : (size_t)(1 + (i * 7919) % 3000);
}

static void lamb_steps(Table *t, int steps, const char *what) {
    float *hw[400], *hg[400], *hm[400], *hv[400], *dw[400], *dg[400], *dm[400], *dv[400], ratio[400];
    LambArgs args[400];
    double cpu[400], gpu[400];
    pointers(t, W, false, hw), pointers(t, G, false, hg), pointers(t, M, false, hm), pointers(t, V, false, hv);
    pointers(t, W, true, dw), pointers(t, G, true, dg), pointers(t, M, true, dm), pointers(t, V, true, dv);
    for (int step = 1; step <= steps; step++) {
        for (int i = 0; i < t->count; i++) args[i] = lamb_args(i, step), gpu[i] = -1;
        k_lamb_moments_each(cpu, hm, hv, (const float *const *)hg, (const float *const *)hw, t->n, args, t->count);
        CUDA_FN(k_lamb_moments_each)(gpu, dm, dv, (const float *const *)dg, (const float *const *)dw, t->n, args,
                                     t->count);
        char label[96];
        snprintf(label, sizeof label, "%s, step %d: LAMB's sum(u^2)", what, step);
        CHECK(same_doubles(label, cpu, gpu, t->n, t->count));
        snprintf(label, sizeof label, "%s, step %d: LAMB's moments", what, step);
        CHECK(table_same(label, t));
        for (int i = 0; i < t->count; i++) ratio[i] = 1e-3f * (float)(1 + i % 7) / (float)step;
        k_lamb_update_each(hw, (const float *const *)hm, (const float *const *)hv, t->n, ratio, args, t->count);
        CUDA_FN(k_lamb_update_each)(dw, (const float *const *)dm, (const float *const *)dv, t->n, ratio, args,
                                    t->count);
        snprintf(label, sizeof label, "%s, step %d: LAMB's update", what, step);
        CHECK(table_same(label, t));
    }
}

static void test_lamb_each(void) {
    Table a, b;
    table_make(&a, AWKWARD, N_AWKWARD, 51);
    lamb_steps(&a, 3, "awkward sizes");
    static size_t n[300];
    many_sizes(n, 300);
    table_make(&b, n, 300, 61);
    lamb_steps(&b, 2, "300 tensors");
    table_free(&a), table_free(&b);
}

/* Updates only, queued back to back with nothing that waits between them: each call stages a new
 * table through the ring of pinned buffers (more calls than the ring holds), then one comparison. */
static void test_updates_queued(void) {
    Table t;
    static size_t n[300];
    many_sizes(n, 300);
    table_make(&t, n, 300, 71);
    float *hw[400], *hg[400], *hm[400], *hv[400], *dw[400], *dg[400], *dm[400], *dv[400], ratio[400];
    AdamWArgs adamw[400];
    LambArgs lamb[400];
    pointers(&t, W, false, hw), pointers(&t, G, false, hg), pointers(&t, M, false, hm), pointers(&t, V, false, hv);
    pointers(&t, W, true, dw), pointers(&t, G, true, dg), pointers(&t, M, true, dm), pointers(&t, V, true, dv);
    for (int step = 1; step <= 20; step++) {
        for (int i = 0; i < t.count; i++) adamw[i] = adamw_args(i, step);
        k_adamw_update_each(hw, hm, hv, (const float *const *)hg, t.n, adamw, t.count);
        CUDA_FN(k_adamw_update_each)(dw, dm, dv, (const float *const *)dg, t.n, adamw, t.count);
        for (int i = 0; i < t.count; i++) lamb[i] = lamb_args(i, step), ratio[i] = 1e-4f * (float)(step + i % 3);
        k_lamb_update_each(hw, (const float *const *)hm, (const float *const *)hv, t.n, ratio, lamb, t.count);
        CUDA_FN(k_lamb_update_each)(dw, (const float *const *)dm, (const float *const *)dv, t.n, ratio, lamb,
                                    t.count);
    }
    CHECK(table_same("20 AdamW and LAMB updates queued", &t));
    table_free(&t);
}

static void test_adamw_each(void) {
    Table t;
    table_make(&t, AWKWARD, N_AWKWARD, 81);
    float *hw[400], *hg[400], *hm[400], *hv[400], *dw[400], *dg[400], *dm[400], *dv[400];
    AdamWArgs args[400];
    pointers(&t, W, false, hw), pointers(&t, G, false, hg), pointers(&t, M, false, hm), pointers(&t, V, false, hv);
    pointers(&t, W, true, dw), pointers(&t, G, true, dg), pointers(&t, M, true, dm), pointers(&t, V, true, dv);
    for (int step = 1; step <= 3; step++) {
        for (int i = 0; i < t.count; i++) args[i] = adamw_args(i, step);
        k_adamw_update_each(hw, hm, hv, (const float *const *)hg, t.n, args, t.count);
        CUDA_FN(k_adamw_update_each)(dw, dm, dv, (const float *const *)dg, t.n, args, t.count);
        char label[64];
        snprintf(label, sizeof label, "AdamW, step %d", step);
        CHECK(table_same(label, &t));
    }
    CUDA_FN(k_adamw_update_each)(NULL, NULL, NULL, NULL, NULL, NULL, 0);   /* count 0: nothing */
    CUDA_FN(k_lamb_update_each)(NULL, NULL, NULL, NULL, NULL, NULL, 0);
    CHECK(table_same("after count-0 calls", &t));
    table_free(&t);
}

static void test_argmax_counts(void) {
    enum { MR = 37, VOCAB = 1000 };
    float *logits = cuda_test_values((size_t)MR * VOCAB, 5, 1.0f);
    int32_t labels[MR];
    for (int k = 0; k < MR; k++) {
        labels[k] = k % 5 == 4 ? -1 : (int32_t)(rng_bits32(6, (uint32_t)k) % VOCAB);
        if (k % 3 == 0) logits[(size_t)k * VOCAB + labels[k < 0 ? 0 : k] % VOCAB] = 10.0f;   /* some rows right */
        if (k % 7 == 0) logits[(size_t)k * VOCAB + 3] = logits[(size_t)k * VOCAB + 900] = 20.0f;   /* a tie: the first wins */
    }
    float *d = device_copy(logits, (size_t)MR * VOCAB);
    long cpu_labelled, gpu_labelled;
    const long cpu = k_count_argmax_matches(logits, labels, MR, VOCAB, &cpu_labelled);
    const long gpu = CUDA_FN(k_count_argmax_matches)(d, labels, MR, VOCAB, &gpu_labelled);
    CHECKF(cpu == gpu && cpu_labelled == gpu_labelled, "%ld of %ld right on the CPU, %ld of %ld on the GPU", cpu,
           cpu_labelled, gpu, gpu_labelled);
    CHECK(cpu > 0);
    cuda_release(d), free(logits);
}

int main(int argc, char **argv) {
    if (!cuda_open(argc, argv)) return test_summary();
    RUN_TEST(test_sums_and_scale);
    RUN_TEST(test_lamb_and_adamw);
    RUN_TEST(test_sum_squares_each);
    RUN_TEST(test_lamb_each);
    RUN_TEST(test_adamw_each);
    RUN_TEST(test_updates_queued);
    RUN_TEST(test_argmax_counts);
    return test_summary();
}
