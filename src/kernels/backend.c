/* The kernels' dispatch: each kernels.h function forwards to the backend in use, a table of
 * function pointers (ggml's backend interface, reduced to one table). The CPU backend's
 * functions are linked in as cpu_k_* (kernels/cpu/cpu_names.h); the CUDA backend's are found by
 * their kernels.h names in its shared library. */
#include "kernels/backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/launcher.h"
#include "core/test_hooks.h"
#include "kernels/backend_functions.h"
#include "kernels/kernels.h"

/* The CPU backend's names (kernels/cpu/ defines them through cpu_names.h). */
#define K_DECLARE_CPU_R(ret, name, params, args) ret cpu_##name params;
#define K_DECLARE_CPU_V(name, params, args) void cpu_##name params;
K_FUNCTIONS(K_DECLARE_CPU_R, K_DECLARE_CPU_V)
#undef K_DECLARE_CPU_R
#undef K_DECLARE_CPU_V

typedef struct {
#define K_FIELD_R(ret, name, params, args) ret(*name) params;
#define K_FIELD_V(name, params, args) void(*name) params;
    K_FUNCTIONS(K_FIELD_R, K_FIELD_V)
#undef K_FIELD_R
#undef K_FIELD_V
} KernelTable;

static const KernelTable CPU_TABLE = {
#define K_CPU_R(ret, name, params, args) .name = cpu_##name,
#define K_CPU_V(name, params, args) .name = cpu_##name,
    K_FUNCTIONS(K_CPU_R, K_CPU_V)
#undef K_CPU_R
#undef K_CPU_V
};

static KernelTable cuda_table;
static const KernelTable *active = &CPU_TABLE;
static const char *active_name = "cpu";
static void (*cuda_describe)(char *, size_t);
static void (*cuda_sync)(void);
/* the CUDA library's event profile (optional: a library without it is timed by synchronising) */
static void (*cuda_profile_begin)(int id);
static void (*cuda_profile_end)(void);
static void (*cuda_profile_collect)(double *seconds, int count);
static void (*cuda_notes)(char *out, size_t n);   /* optional: which paths the products took */
/* the CUDA library's collectives (optional: a library built before them has none, as the CPU) */
static KCollectives cuda_collectives;
#ifdef BERT_TEST_HOOKS
const KCollectives *test_hook_collectives;
#endif

/* The kernel profile (k_profile_*): per kernel, calls and seconds. On the CPU each call is timed
 * to its return (its work is done then); on the GPU by events around it on the stream (the
 * library's k_cuda_profile_*), without waiting, else by synchronising after each call. */
enum {
#define K_ID_R(ret, name, params, args) K_ID_##name,
#define K_ID_V(name, params, args) K_ID_##name,
    K_FUNCTIONS(K_ID_R, K_ID_V)
#undef K_ID_R
#undef K_ID_V
    K_COUNT
};
static const char *const K_NAMES[K_COUNT] = {
#define K_NAME_R(ret, name, params, args) #name,
#define K_NAME_V(name, params, args) #name,
    K_FUNCTIONS(K_NAME_R, K_NAME_V)
#undef K_NAME_R
#undef K_NAME_V
};
static bool profiling;
/* calls under way: a kernel can call back into the model (KWeight's 16-bit copy), which calls
 * kernels; those count in the outer call's time, and the event pairs stay paired */
static int profile_depth;
static long profile_calls[K_COUNT];
static double profile_seconds[K_COUNT];

static double profile_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static bool profile_by_events(void) { return active == &cuda_table && cuda_profile_begin; }
static double profile_begin(int id) {
    if (profile_by_events()) cuda_profile_begin(id);
    return profile_now();
}
static void profile_end(int id, double start) {
    profile_calls[id]++;
    if (profile_by_events()) {
        cuda_profile_end();   /* its time is added when collected */
        return;
    }
    if (active == &cuda_table && cuda_sync) cuda_sync();
    profile_seconds[id] += profile_now() - start;
}

#define K_FORWARD_R(ret, name, params, args)                        \
    ret name params {                                               \
        if (!profiling || profile_depth) return active->name args;  \
        profile_depth++;                                            \
        const double start = profile_begin(K_ID_##name);            \
        ret result = active->name args;                             \
        profile_end(K_ID_##name, start);                            \
        profile_depth--;                                            \
        return result;                                              \
    }
#define K_FORWARD_V(name, params, args)                             \
    void name params {                                              \
        if (!profiling || profile_depth) { active->name args; return; } \
        profile_depth++;                                            \
        const double start = profile_begin(K_ID_##name);            \
        active->name args;                                          \
        profile_end(K_ID_##name, start);                            \
        profile_depth--;                                            \
    }
K_FUNCTIONS(K_FORWARD_R, K_FORWARD_V)
#undef K_FORWARD_R
#undef K_FORWARD_V

void k_profile_start(void) {
    memset(profile_calls, 0, sizeof profile_calls), memset(profile_seconds, 0, sizeof profile_seconds);
    profiling = true;
}

void k_profile_stop(void) {
    if (profiling && profile_by_events()) cuda_profile_collect(profile_seconds, K_COUNT);
    profiling = false;
}

void k_profile_print(FILE *out, int per) {
    int order[K_COUNT], n = 0;
    double total = 0;
    for (int i = 0; i < K_COUNT; i++)
        if (profile_calls[i]) order[n++] = i, total += profile_seconds[i];
    for (int i = 1; i < n; i++)   /* by time, largest first */
        for (int j = i; j > 0 && profile_seconds[order[j]] > profile_seconds[order[j - 1]]; j--) {
            const int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    if (per < 1) per = 1;
    fprintf(out, "kernels   %-34s %8s %10s %7s  (per step; %s)\n", "kernel", "calls", "ms", "share",
            profile_by_events() ? "GPU time between events around each call, not synchronised"
                                : "each call timed to the end of its work");
    for (int k = 0; k < n; k++) {
        const int i = order[k];
        fprintf(out, "kernels   %-34s %8.1f %10.3f %6.1f%%\n", K_NAMES[i], (double)profile_calls[i] / per,
                1e3 * profile_seconds[i] / per, total > 0 ? 100 * profile_seconds[i] / total : 0);
    }
    fprintf(out, "kernels   %-34s %8s %10.3f\n", "all", "", 1e3 * total / per);
    if (active == &cuda_table && cuda_notes) {
        char note[1024];
        cuda_notes(note, sizeof note);
        fprintf(out, "kernels   note: %s\n", note);
    }
}

/* The CUDA library to load: $BERT_CUDA_LIB, else beside the executable, else the build's. */
static void cuda_library_path(char *path, size_t n) {
    const char *env = getenv("BERT_CUDA_LIB");
    if (env && *env) { snprintf(path, n, "%s", env); return; }
    char exe[PATH_MAX];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            slash[1] = '\0';
            snprintf(path, n, "%slibbert_cuda.so", exe);
            if (access(path, R_OK) == 0) return;
            snprintf(path, n, "%sbuild-cuda/libbert_cuda.so", exe);
            if (access(path, R_OK) == 0) return;
        }
    }
    snprintf(path, n, "build-cuda/libbert_cuda.so");
}

static void find_collectives(void *lib) {
    void **f[] = {(void **)&cuda_collectives.id_bytes, (void **)&cuda_collectives.new_id,
                  (void **)&cuda_collectives.open, (void **)&cuda_collectives.close, (void **)&cuda_collectives.sum,
                  (void **)&cuda_collectives.share_parts, (void **)&cuda_collectives.test,
                  (void **)&cuda_collectives.abort};
    static const char *const names[] = {"k_collectives_id_bytes", "k_collectives_new_id", "k_collectives_open",
                                        "k_collectives_close", "k_collective_sum", "k_collective_share_parts",
                                        "k_collective_test", "k_collectives_abort"};
    bool all = true;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) all = (*f[i] = dlsym(lib, names[i])) != NULL && all;
    if (!all) memset(&cuda_collectives, 0, sizeof cuda_collectives);
}

/* Functions added to the interface after a library was built that such a library may lack (an
 * older version kept as a speed baseline: scripts/gpu_check.sh), with what it would answer, or
 * made of the functions it has (cuda_table is set by the time they run). */
static bool older_set_tf32(bool on) { return !on; }   /* no TF32 before k_set_tf32 existed */
static void older_dropout(float *x, const KDropout *drop, int N, int C) {
    if (drop->rows) cuda_table.k_dropout_rows(x, drop->rows, N, C, drop->p, drop->key);
    else cuda_table.k_dropout(x, (long)N * C, drop->p, drop->key, 0);
}
/* k_dropout_layernorm_forward_to's forerunner (sessions 14 to 17, without out16), where the
 * library has it */
static void (*older_library_dropout_layernorm)(float *out, float *sum_out, float *mean, float *rstd, const float *a,
                                               const KDropout *drop, const float *residual, const float *w,
                                               const float *b, int N, int C, float eps);
static void older_dropout_layernorm_forward_to(float *out, uint16_t *out16, HalfMode mode, float *sum_out, float *mean,
                                               float *rstd, const float *a, const KDropout *drop,
                                               const float *residual, const float *w, const float *b, int N, int C,
                                               float eps) {
    if (older_library_dropout_layernorm) {
        older_library_dropout_layernorm(out, sum_out, mean, rstd, a, drop, residual, w, b, N, C, eps);
    } else {
        if (drop && drop->p > 0.0f) {
            if (sum_out != a) cuda_table.k_copy(sum_out, a, (long)N * C);
            older_dropout(sum_out, drop, N, C);
            a = sum_out;
        }
        cuda_table.k_layernorm_forward(out, sum_out, mean, rstd, a, residual, w, b, N, C, eps);
    }
    if (out16) cuda_table.k_to_half(mode, out16, out, (long)N * C);
}
static void older_layernorm_dropout_backward(float *dinp, float *dinp_dropped, const KDropout *drop, float *dw,
                                             float *db, const float *dout, const float *inp, const float *mean,
                                             const float *rstd, const float *w, int N, int C) {
    cuda_table.k_layernorm_backward(dinp, dw, db, dout, inp, mean, rstd, w, N, C);
    if (!dinp_dropped) return;
    cuda_table.k_copy(dinp_dropped, dinp, (long)N * C);
    if (drop && drop->p > 0.0f) older_dropout(dinp_dropped, drop, N, C);
}
static void older_attention_forward_to(float *ctx, uint16_t *ctx16, float *probs, const float *qkv,
                                       const AttentionArgs *a) {
    cuda_table.k_attention_forward(ctx, probs, qkv, a);
    if (!ctx16 || !a->half) return;
    long end = 0;   /* one pass over the rows up to the last sequence's end (what lies between is not read) */
    for (int b = 0; b < a->B; b++) {
        const long row = a->seq_row ? a->seq_row[b] : (long)b * a->T, rows = a->seq_rows ? a->seq_rows[b] : a->T;
        if (row + rows > end) end = row + rows;
    }
    cuda_table.k_to_half(a->half_mode, ctx16, ctx, end * a->A * a->d);
}
static size_t older_memory_bytes(void) { return 0; }   /* unknown: no check up front */
static void older_to_half_each(HalfMode mode, uint16_t *const *dst, const float *const *src, const size_t *n,
                               int count) {   /* a launch per tensor, as before */
    for (int i = 0; i < count; i++) cuda_table.k_to_half(mode, dst[i], src[i], (long)n[i]);
}
static void *older_library_stub(void *lib, const char *name) {
    if (!strcmp(name, "k_set_tf32")) return (void *)older_set_tf32;
    if (!strcmp(name, "k_attention_forward_to")) return (void *)older_attention_forward_to;
    /* libraries before these kept the probabilities, as the CPU backend keeps them */
    if (!strcmp(name, "k_attention_keeps_probs")) return (void *)cpu_k_attention_keeps_probs;
    if (!strcmp(name, "k_attention_state_floats")) return (void *)cpu_k_attention_state_floats;
    if (!strcmp(name, "k_memory_bytes")) return (void *)older_memory_bytes;
    if (!strcmp(name, "k_to_half_each")) return (void *)older_to_half_each;
    if (!strcmp(name, "k_dropout_layernorm_forward_to")) {
        *(void **)&older_library_dropout_layernorm = dlsym(lib, "k_dropout_layernorm_forward");
        return (void *)older_dropout_layernorm_forward_to;
    }
    if (!strcmp(name, "k_layernorm_dropout_backward")) return (void *)older_layernorm_dropout_backward;
    return NULL;
}

static bool load_cuda(char *err, size_t errlen) {
    if (cuda_table.k_alloc) return true;   /* loaded before */
    char path[PATH_MAX + 32];
    cuda_library_path(path, sizeof path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "--device cuda: cannot load the CUDA backend (%s); build it with make GPU=cuda, or set "
                 "BERT_CUDA_LIB", dlerror());
        return false;
    }
    KernelTable t;
#define K_LOOKUP(name)                                                                                   \
    if (!(*(void **)&t.name = dlsym(lib, #name)) && !(*(void **)&t.name = older_library_stub(lib, #name))) {   \
        snprintf(err, errlen, "--device cuda: %s lacks %s (built from another version of bert.c?)", path, #name); \
        dlclose(lib);                                                                                    \
        return false;                                                                                    \
    }
#define K_LOOKUP_R(ret, name, params, args) K_LOOKUP(name)
#define K_LOOKUP_V(name, params, args) K_LOOKUP(name)
    K_FUNCTIONS(K_LOOKUP_R, K_LOOKUP_V)
#undef K_LOOKUP_R
#undef K_LOOKUP_V
#undef K_LOOKUP
    int (*devices)(void);
    *(void **)&devices = dlsym(lib, "k_cuda_devices");
    *(void **)&cuda_describe = dlsym(lib, "k_cuda_describe");
    *(void **)&cuda_sync = dlsym(lib, "k_cuda_sync");
    *(void **)&cuda_profile_begin = dlsym(lib, "k_cuda_profile_begin");
    *(void **)&cuda_profile_end = dlsym(lib, "k_cuda_profile_end");
    *(void **)&cuda_profile_collect = dlsym(lib, "k_cuda_profile_collect");
    *(void **)&cuda_notes = dlsym(lib, "k_cuda_notes");
    if (!cuda_profile_begin || !cuda_profile_end || !cuda_profile_collect) cuda_profile_begin = NULL;
    find_collectives(lib);
    /* why the library cannot run here (no driver, an older one, no GPU, one it has no code for);
     * an older library has no k_cuda_check: no GPU is then all it can say */
    int (*check)(char *why, size_t n);
    *(void **)&check = dlsym(lib, "k_cuda_check");
    char why[768] = "no CUDA GPU is visible to this process (nvidia-smi?)";
    if (!devices || devices() < 1) {
        if (check) check(why, sizeof why);
        snprintf(err, errlen, "--device cuda: %s", devices ? why : "the CUDA backend library lacks k_cuda_devices");
        dlclose(lib);
        return false;
    }
    /* one process per GPU: the node's processes take its GPUs in turn (the launcher's local
     * rank), before anything is allocated; a GPU chosen for each process (CUDA_VISIBLE_DEVICES)
     * is its device 0 */
    int (*use_device)(int ordinal);
    *(void **)&use_device = dlsym(lib, "k_cuda_use_device");
    if (use_device && use_device(launcher_local_rank() % devices()) != 0) {
        snprintf(err, errlen, "--device cuda: cannot use GPU %d of %d (local rank %d)",
                 launcher_local_rank() % devices(), devices(), launcher_local_rank());
        dlclose(lib);
        return false;
    }
    if (check && check(why, sizeof why) != 0) {
        snprintf(err, errlen, "--device cuda: %s", why);
        dlclose(lib);
        return false;
    }
    cuda_table = t;
    return true;
}

bool k_backend_use(const char *name, char *err, size_t errlen) {
    if (!name || !strcmp(name, "cpu")) {
        active = &CPU_TABLE, active_name = "cpu";
        return true;
    }
    if (!strcmp(name, "cuda")) {
        if (!load_cuda(err, errlen)) return false;
        active = &cuda_table, active_name = "cuda";
        return true;
    }
    snprintf(err, errlen, "--device %s: the devices are cpu and cuda", name);
    return false;
}

const char *k_backend_name(void) { return active_name; }

void k_backend_describe(char *out, size_t n) {
    if (active == &cuda_table && cuda_describe) cuda_describe(out, n);
    else k_bf16_describe(out, n);
}

/* ---- the collectives (kernels.h): the CUDA library's where it has them; the CPU has none ---- */

/* The collectives in use: the CUDA library's when it runs the kernels and has them; none on the
 * CPU (a test build's stand-in aside). */
static const KCollectives *collectives(void) {
    if (active == &cuda_table) return cuda_collectives.id_bytes ? &cuda_collectives : NULL;
#ifdef BERT_TEST_HOOKS
    return test_hook_collectives;
#else
    return NULL;
#endif
}

size_t k_collectives_id_bytes(void) { return collectives() ? collectives()->id_bytes() : 0; }

bool k_collectives_new_id(void *id, char *err, size_t errlen) {
    if (collectives()) return collectives()->new_id(id, err, errlen);
    snprintf(err, errlen, "the %s backend has no collectives of its own (MPI reads its memory)", active_name);
    return false;
}

bool k_collectives_open(const void *id, int rank, int size, char *err, size_t errlen) {
    if (collectives()) return collectives()->open(id, rank, size, err, errlen);
    snprintf(err, errlen, "the %s backend has no collectives of its own (MPI reads its memory)", active_name);
    return false;
}

void k_collectives_close(void) {
    if (collectives()) collectives()->close();
}

/* Without collectives nothing is ever opened, so these are not reached: a caller's bug. */
static const KCollectives *opened(const char *what) {
    if (collectives()) return collectives();
    fprintf(stderr, "bert: %s called on the %s backend, which has no collectives\n", what, active_name);
    abort();
}

int k_collective_sum(float *buf, size_t count, int wire, int root) {
    return opened("k_collective_sum")->sum(buf, count, wire, root);
}

int k_collective_share_parts(float *x, const size_t *lo) {
    return opened("k_collective_share_parts")->share_parts(x, lo);
}

int k_collective_test(int ticket, char *err, size_t errlen) {
    return opened("k_collective_test")->test(ticket, err, errlen);
}

void k_collectives_abort(void) {
    if (collectives()) collectives()->abort();
}
