/* train/comm.c's paths for a device's memory (the gradient buckets, the parameters' parts, the
 * optimizer state's gather, failures and the deadline) run here, on the CPU, against a stand-in
 * for a GPU's collectives (kernels/backend.h's test_hook_collectives): a group of one shaped
 * like the CUDA library's NCCL one. Its sums round through the 16-bit wire as the GPU's do (the
 * CPU backend's conversions: the bits the GPU's are checked against in tests/cuda/), its
 * tickets finish only at their third test (so the waiting and the progress calls are
 * exercised), and it records every range it was handed. A GPU runs the same comm.c code with
 * NCCL underneath (tests/cuda/test_cuda_collectives.c checks that part on a GPU).
 *
 * What is checked: comm_use_backend_collectives opens the group (and an error in it fails the
 * call with NCCL's reason); grad_sync over the stand-in hands every gradient to exactly one
 * bucket, in the backward's order, of at most the bucket size, not crossing an owner's part,
 * rounds them through the wire exactly as the CPU's conversion does, and waits for every ticket
 * before it returns; the parameter all-gather and the state's gather go through the stand-in
 * and a host copy; a failed collective and a collective past --comm_timeout each end the
 * process with exit code 3 and a message naming it. */
#include "test.h"

#include <sys/wait.h>
#include <unistd.h>

#include "core/common.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "train/comm.h"
#include "train/grad_sync.h"

enum { MAX_CALLS = 4096, MAX_TICKETS = 4096 };

/* The stand-in's record of what it was asked. */
static struct {
    bool open, fail_open, fail_tests, never_done;
    int tests_to_finish;              /* tests a ticket needs before it is done */
    int tickets, polls[MAX_TICKETS];
    bool done[MAX_TICKETS];
    int calls;
    struct FakeCall { float *buf; size_t count; int wire, root; } call[MAX_CALLS];
    int shares;
    size_t share_lo[2];
} fake;

static size_t fake_id_bytes(void) { return 16; }
static bool fake_new_id(void *id, char *err, size_t errlen) {
    (void)err, (void)errlen;
    memset(id, 0x5a, 16);
    return true;
}
static bool fake_open(const void *id, int rank, int size, char *err, size_t errlen) {
    const unsigned char *b = id;
    if (fake.fail_open) {
        snprintf(err, errlen, "NCCL failure (the stand-in's)");
        return false;
    }
    if (rank != 0 || size != 1 || b[0] != 0x5a || b[15] != 0x5a) {
        snprintf(err, errlen, "bad id or group: rank %d of %d", rank, size);
        return false;
    }
    fake.open = true;
    return true;
}
static void fake_close(void) { fake.open = false; }
static int new_ticket(void) {
    if (fake.tickets >= MAX_TICKETS) abort();
    return fake.tickets++;
}
static int fake_sum(float *buf, size_t count, int wire, int root) {
    if (!fake.open || fake.calls >= MAX_CALLS) abort();
    fake.call[fake.calls++] = (struct FakeCall){buf, count, wire, root};
    if (wire >= 0 && count) {   /* a sum over one process, sent through the 16-bit wire */
        uint16_t *h = xmalloc(sizeof(uint16_t) * count);
        k_to_half((HalfMode)wire, h, buf, (long)count);
        k_from_half((HalfMode)wire, buf, h, (long)count);
        free(h);
    }
    return new_ticket();
}
static int fake_share_parts(float *x, const size_t *lo) {
    (void)x;
    fake.shares++, fake.share_lo[0] = lo[0], fake.share_lo[1] = lo[1];
    return new_ticket();
}
static int fake_test(int t, char *err, size_t errlen) {
    if (fake.fail_tests) {
        snprintf(err, errlen, "unhandled system error (the stand-in's)");
        return -1;
    }
    if (t < 0 || t >= fake.tickets) abort();
    if (fake.done[t]) return 1;
    if (fake.never_done || ++fake.polls[t] < fake.tests_to_finish) return 0;
    fake.done[t] = true;
    return 1;
}
static void fake_abort(void) { fake.open = false; }
static const KCollectives FAKE = {fake_id_bytes, fake_new_id, fake_open, fake_close, fake_sum, fake_share_parts,
                                  fake_test, fake_abort};

static void reset_fake(void) {
    memset(&fake, 0, sizeof fake);
    fake.tests_to_finish = 3;
}

static Comm *open_group(double timeout) {
    Comm *c = NULL;
    BertError err;
    if (comm_open(&c, timeout, &err) != 0) return NULL;
    if (comm_use_backend_collectives(c, &err) != 0) {
        printf("    %s\n", err.msg);
        comm_close(c);
        return NULL;
    }
    return c;
}

static void test_open_and_its_errors(void) {
    reset_fake();
    Comm *c = open_group(60);
    CHECK(c && comm_on_backend(c) && fake.open);
    comm_close(c);
    CHECKF(!fake.open, "comm_close did not close the backend's group");
    reset_fake();
    fake.fail_open = true;
    BertError err;
    CHECK(comm_open(&c, 60, &err) == 0);
    CHECK(comm_use_backend_collectives(c, &err) != 0 && strstr(err.msg, "NCCL failure") && !comm_on_backend(c));
    comm_close(c);
    /* without the stand-in (./bert's CPU backend): no collectives, MPI's path */
    test_hook_collectives = NULL;
    CHECK(comm_open(&c, 60, &err) == 0 && comm_use_backend_collectives(c, &err) == 0 && !comm_on_backend(c));
    comm_close(c);
    test_hook_collectives = &FAKE;
}

/* One backward's reports, as the model makes them: ranges from the end of the gradients down to
 * 0, in pieces of the given sizes (cycled). */
static void backward(GradSync *s, size_t numel, const size_t *pieces, int npieces) {
    size_t hi = numel;
    for (int i = 0; hi > 0; i++) {
        size_t n = pieces[i % npieces];
        if (n > hi) n = hi;
        grad_sync_ready(s, hi - n, n);
        hi -= n;
    }
}

static void check_buckets(const float *g, size_t numel, size_t bucket, bool owners, int wire, const char *what) {
    /* every float in exactly one bucket; buckets in the backward's order (descending), each at
     * most `bucket` floats; all in flight finished */
    size_t expect_end = numel;
    bool ok = true;
    for (int i = 0; i < fake.calls; i++) {
        const size_t lo = (size_t)(fake.call[i].buf - g), n = fake.call[i].count;
        if (lo + n != expect_end || n == 0 || n > bucket || fake.call[i].wire != wire ||
            fake.call[i].root != (owners ? 0 : -1)) {
            printf("    %s: bucket %d: [%zu, %zu), expected to end at %zu, wire %d root %d\n", what, i, lo, lo + n,
                   expect_end, fake.call[i].wire, fake.call[i].root);
            ok = false;
            break;
        }
        expect_end = lo;
    }
    CHECKF(ok && expect_end == 0, "%s: the buckets do not cover the gradients once each (down to %zu)", what,
           expect_end);
    for (int t = 0; t < fake.tickets; t++) CHECKF(fake.done[t], "%s: ticket %d not waited for", what, t);
}

static void test_gradient_buckets(void) {
    const size_t numel = 100003;
    const size_t pieces[] = {3000, 17, 9000, 1, 40000};
    const struct { size_t bucket; bool owners; int wire; const char *name; } cases[] = {
        {4096, false, -1, "fp32, small buckets"}, {1 << 20, false, -1, "fp32, one bucket"},
        {5000, true, -1, "to the owner"}, {4096, false, HALF_BF16, "bf16 wire"}, {7777, false, HALF_FP16, "fp16 wire"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        reset_fake();
        Comm *c = open_group(60);
        CHECK(c != NULL);
        if (!c) return;
        float *g = k_alloc(sizeof(float) * numel), *want = xmalloc(sizeof(float) * numel);
        for (size_t i = 0; i < numel; i++) g[i] = want[i] = (float)((i * 2654435761u) % 1000003) * 1e-3f - 500.0f;
        g[5] = want[5] = 70000.0f;   /* past fp16's range: infinity on that wire, as on the GPU's */
        if (cases[k].wire >= 0) {
            uint16_t *h = xmalloc(sizeof(uint16_t) * numel);
            k_to_half((HalfMode)cases[k].wire, h, want, (long)numel);
            k_from_half((HalfMode)cases[k].wire, want, h, (long)numel);
            free(h);
        }
        const enum CommWire wire = cases[k].wire == HALF_BF16 ? COMM_WIRE_BF16
                                   : cases[k].wire == HALF_FP16 ? COMM_WIRE_FP16 : COMM_WIRE_FP32;
        const GradSyncOptions o = {.bucket_floats = cases[k].bucket, .wire = wire, .to_owners = cases[k].owners};
        GradSync *s = grad_sync_create(c, g, numel, &o);
        CHECK(grad_sync_parts(s)[0] == 0 && grad_sync_parts(s)[1] == numel);
        grad_sync_arm(s);
        backward(s, numel, pieces, 5);
        const int started_in_backward = fake.calls;
        grad_sync_finish(s);
        CHECKF(started_in_backward > 0 || cases[k].bucket > numel, "%s: no bucket started during the backward",
               cases[k].name);
        check_buckets(g, numel, cases[k].bucket, cases[k].owners, cases[k].wire, cases[k].name);
        CHECKF(memcmp(g, want, sizeof(float) * numel) == 0, "%s: the gradients are not the wire's rounding of "
               "themselves", cases[k].name);
        CHECKF(grad_sync_collectives(s) == fake.calls, "%s: %ld collectives counted, %d made", cases[k].name,
               grad_sync_collectives(s), fake.calls);
        grad_sync_free(s);
        k_free(g), free(want);
        comm_close(c);
    }
}

/* The sharded optimizer's two collectives: the parameters' parts back to everyone (the backend's
 * share), the state's parts to the writer (a host copy, then MPI's path). */
static void test_parts_and_gather(void) {
    reset_fake();
    Comm *c = open_group(60);
    CHECK(c != NULL);
    if (!c) return;
    const size_t n = 1000, lo[2] = {0, n};
    float *x = k_alloc(sizeof(float) * n), *full = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)i;
    comm_allgather_floats(c, x, lo, "the parameter all-gather");
    CHECK(fake.shares == 1 && fake.share_lo[0] == 0 && fake.share_lo[1] == n && fake.done[0]);
    comm_gather_floats(c, x, full, lo, 0, "gathering the optimizer state");
    CHECK(memcmp(x, full, sizeof(float) * n) == 0);
    k_free(x), free(full);
    comm_close(c);
}

/* The child's group and request: held by globals, so that the leak checker of a sanitizer build
 * does not count them when the child ends in comm_abort's exit. */
static Comm *child_comm;
static CommRequest *child_request;

/* A child that waits for a collective which fails (or never finishes within timeout); its exit
 * code and stderr. */
static int child_waits(bool fail, double timeout, char *msg, size_t msglen) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], STDERR_FILENO);
        close(pipefd[0]);
        reset_fake();
        child_comm = open_group(timeout);
        if (!child_comm) _exit(99);
        fake.fail_tests = fail, fake.never_done = !fail;
        static float g[8];
        child_request = comm_start_sum(child_comm, g, 8, COMM_WIRE_FP32, -1);
        comm_wait(child_comm, child_request, "the gradient all-reduce");
        _exit(0);   /* not reached */
    }
    close(pipefd[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < msglen && (r = read(pipefd[0], msg + got, msglen - 1 - got)) > 0) got += (size_t)r;
    msg[got] = '\0';
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_failure_and_deadline_end_the_process(void) {
    char msg[1024];
    int code = child_waits(true, 60, msg, sizeof msg);
    CHECKF(code == 3 && strstr(msg, "the gradient all-reduce failed") && strstr(msg, "unhandled system error"),
           "a failed collective: exit %d, %s", code, msg);
    const double t0 = now_seconds();
    code = child_waits(false, 0.3, msg, sizeof msg);
    const double took = now_seconds() - t0;
    CHECKF(code == 3 && strstr(msg, "did not complete within") && took < 30,
           "a hung collective: exit %d after %.1f s, %s", code, took, msg);
}

int main(void) {
    test_hook_collectives = &FAKE;
    RUN_TEST(test_open_and_its_errors);
    RUN_TEST(test_gradient_buckets);
    RUN_TEST(test_parts_and_gather);
    RUN_TEST(test_failure_and_deadline_end_the_process);
    return test_summary();
}
