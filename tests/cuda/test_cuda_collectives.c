/* The CUDA backend's collectives (src/kernels/cuda/collectives.cu: NCCL on device memory) in a
 * group of one process, the most one GPU can hold (NCCL refuses two ranks on one device). A
 * sum over one process is its own buffer, so what this checks is everything around NCCL's
 * arithmetic: the buffers and counts handed to it (a wrong offset or length changes elements),
 * the 16-bit wire (the sum comes back as the CPU backend's conversion there and back gives:
 * k_to_half then k_from_half, bit for bit, NaN, infinities and fp16 overflow included), the
 * ordering (a collective reads what the kernels called before it wrote, and the kernels called
 * after its test returned 1 see its result, with nothing synchronised by hand), many tickets in
 * flight at once, and a group closed and opened again. The arithmetic across processes is
 * NCCL's own; train/comm.c's use of it is checked on the CPU (tests/test_distributed.c's group
 * of one through the parallel path). Needs NCCL (libnccl.so.2 on the library path, or
 * BERT_NCCL_LIB); skips, passing, where no GPU is present. */
#include "cuda_test.h"

#include <string.h>

#include "core/common.h"

static char why[256];

/* Waits for the ticket (the test's own deadline: 60 s). */
static bool wait_for(int ticket) {
    const double start = now_seconds();
    for (;;) {
        const int done = CUDA_FN(k_collective_test)(ticket, why, sizeof why);
        if (done == 1) return true;
        if (done < 0) { printf("    collective failed: %s\n", why); return false; }
        if (now_seconds() - start > 60) { printf("    collective did not finish in 60 s\n"); return false; }
    }
}

static bool open_group(void) {
    unsigned char id[512];
    const size_t bytes = CUDA_FN(k_collectives_id_bytes)();
    if (bytes == 0 || bytes > sizeof id) { printf("    id of %zu bytes\n", bytes); return false; }
    if (!CUDA_FN(k_collectives_new_id)(id, why, sizeof why) || !CUDA_FN(k_collectives_open)(id, 0, 1, why, sizeof why)) {
        printf("    cannot open the collectives: %s\n", why);
        return false;
    }
    return true;
}

/* Values that exercise the wire: ordinary ones, NaN, infinities, fp16's overflow and subnormals. */
static float *wire_values(size_t n, uint64_t seed) {
    float *x = cuda_test_values(n, seed, 1.0f);
    if (n > 8) x[1] = NAN, x[2] = INFINITY, x[3] = -INFINITY, x[4] = 70000.0f, x[5] = 65519.0f, x[6] = 3e-7f, x[7] = -1e-8f;
    return x;
}

/* The sum over one process, for each wire and as all-reduce and reduce to root 0, over slices
 * at odd offsets of one allocation: the slice comes back (rounded through the wire), the floats
 * around it untouched. */
static void test_sum_over_one_process(void) {
    const size_t total = (1 << 20) + 77;
    const size_t offsets[] = {0, 3, 1000}, counts[] = {0, 1, 17, (1 << 20) + 5};
    const int wires[] = {-1, HALF_BF16, HALF_FP16};
    const char *wire_names[] = {"fp32", "bf16", "fp16"};
    float *x = wire_values(total, 7);
    float *d = cuda_copy_in(x, sizeof(float) * total);
    for (int w = 0; w < 3; w++)
        for (int root = -1; root <= 0; root++)
            for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
                for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                    const size_t at = offsets[o], n = counts[c];
                    if (at + n > total) continue;
                    CUDA_FN(k_upload)(d, x, sizeof(float) * total);
                    CHECK(wait_for(CUDA_FN(k_collective_sum)(d + at, n, wires[w], root)));
                    float *want = malloc(sizeof(float) * total);
                    memcpy(want, x, sizeof(float) * total);
                    if (wires[w] >= 0 && n) {
                        uint16_t *h = malloc(sizeof(uint16_t) * n);
                        k_to_half((HalfMode)wires[w], h, x + at, (long)n);
                        k_from_half((HalfMode)wires[w], want + at, h, (long)n);
                        free(h);
                    }
                    float *got = cuda_copy_out(d, total);
                    CHECKF(cuda_same(wire_names[w], want, got, sizeof(float) * total),
                           "%s wire, root %d, %zu floats at %zu", wire_names[w], root, n, at);
                    free(got), free(want);
                }
    cuda_release(d), free(x);
}

/* A kernel writes the buffer, the collective is asked for at once, a kernel scales it after
 * the test said done: the result is the written values, rounded by the wire, then scaled. A
 * collective that ran before the writing kernel finished, or a scale that ran before the
 * wire's values came back, leaves other values (64 M floats: each kernel takes ~0.1 ms).
 * Only the 16-bit wires test the first ordering (a one-process fp32 sum in place touches
 * nothing); every wire tests the second. The polls before done also check that a "not ready"
 * poll leaves no error behind for the next launch's check. */
static void test_ordering_with_kernels(void) {
    /* the emulator runs each call to its end before the next: the ordering holds whatever the
     * size, and 64 M threads a kernel would take it hours */
    const size_t n = cuda_test_emulated() ? (size_t)1 << 16 : (size_t)64 << 20;
    float *d = CUDA_FN(k_alloc)(sizeof(float) * n);
    const int wires[] = {-1, HALF_BF16, HALF_FP16};
    for (int w = 0; w < 3; w++)
        for (int round = 0; round < 3; round++) {
            const float value = 1.0f + 1.0f / 3.0f + (float)round;   /* not exact in 16 bits */
            CUDA_FN(k_fill)(d, n, -5.0f);
            CUDA_FN(k_fill)(d, n, value);
            CHECK(wait_for(CUDA_FN(k_collective_sum)(d, n, wires[w], -1)));
            CUDA_FN(k_scale)(d, n, 2.0f);
            float want = value;
            if (wires[w] >= 0) {
                uint16_t h;
                k_to_half((HalfMode)wires[w], &h, &value, 1);
                k_from_half((HalfMode)wires[w], &want, &h, 1);
            }
            want *= 2.0f;
            float *got = cuda_copy_out(d, n);
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < n; i++)
                if (got[i] != want && bad++ == 0) first = i;
            CHECKF(bad == 0, "wire %d, round %d: %zu of %zu elements wrong, first %zu: %.9g, want %.9g", wires[w],
                   round, bad, n, first, got[first], want);
            free(got);
        }
    cuda_release(d);
}

/* Gradient buckets as the backward sends them: many in flight, finished in another order; the
 * parameters' parts shared (one part: the whole buffer stays as it is). */
static void test_many_in_flight_and_parts(void) {
    const size_t n = 3 * 1000003;
    float *x = wire_values(n, 21);
    float *d = cuda_copy_in(x, sizeof(float) * n);
    int tickets[40];
    const size_t bucket = n / 40;
    for (int b = 0; b < 40; b++) {
        const size_t lo = (size_t)b * bucket, hi = b == 39 ? n : lo + bucket;
        tickets[b] = CUDA_FN(k_collective_sum)(d + lo, hi - lo, b % 2 ? HALF_BF16 : -1, b % 3 ? -1 : 0);
    }
    for (int b = 39; b >= 0; b--) CHECK(wait_for(tickets[b]));
    CHECK(CUDA_FN(k_collective_test)(tickets[0], why, sizeof why) == 1);   /* a finished ticket stays done */
    float *want = malloc(sizeof(float) * n);
    memcpy(want, x, sizeof(float) * n);
    for (int b = 1; b < 40; b += 2) {
        const size_t lo = (size_t)b * bucket, hi = b == 39 ? n : lo + bucket;
        uint16_t *h = malloc(sizeof(uint16_t) * (hi - lo));
        k_to_half(HALF_BF16, h, x + lo, (long)(hi - lo));
        k_from_half(HALF_BF16, want + lo, h, (long)(hi - lo));
        free(h);
    }
    float *got = cuda_copy_out(d, n);
    CHECK(cuda_same("buckets", want, got, sizeof(float) * n));
    free(got);
    const size_t lo[2] = {0, n};
    CHECK(wait_for(CUDA_FN(k_collective_share_parts)(d, lo)));
    got = cuda_copy_out(d, n);
    CHECK(cuda_same("parts shared", want, got, sizeof(float) * n));
    free(got), free(want), free(x);
    cuda_release(d);
}

/* Closed and opened again (a second run in the same process), and opening twice refused. */
static void test_reopen(void) {
    unsigned char id[512];
    CHECK(CUDA_FN(k_collectives_new_id)(id, why, sizeof why));
    CHECKF(!CUDA_FN(k_collectives_open)(id, 0, 1, why, sizeof why), "opened twice");
    CUDA_FN(k_collectives_close)();
    CHECK(open_group());
    float one = 0.5f, *d = cuda_copy_in(&one, sizeof one);
    CHECK(wait_for(CUDA_FN(k_collective_sum)(d, 1, -1, -1)));
    float *got = cuda_copy_out(d, 1);
    CHECK(got[0] == 0.5f);
    free(got), cuda_release(d);
}

int main(int argc, char **argv) {
    if (!cuda_open(argc, argv)) return test_summary();
    if (!open_group()) {
        CHECKF(false, "NCCL is needed for these tests (put libnccl.so.2 on LD_LIBRARY_PATH or set BERT_NCCL_LIB)");
        return test_summary();
    }
    RUN_TEST(test_sum_over_one_process);
    RUN_TEST(test_ordering_with_kernels);
    RUN_TEST(test_many_in_flight_and_parts);
    RUN_TEST(test_reopen);
    CUDA_FN(k_collectives_close)();
    return test_summary();
}
