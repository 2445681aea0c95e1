#include "core/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int bert_fail(BertError *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* one line, whatever the message quotes: a name read from a hostile file may hold a
         * newline or a terminal's control bytes (fuzz_pytorch_checkpoint: a dict key) */
        for (char *c = err->msg; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    }
    return -1;
}

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("bert: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory allocating %zu bytes", n);
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) die("out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die("out of memory reallocating %zu bytes", n);
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t l2_cache_bytes(void) {
    static _Atomic long l2;   /* the same value whichever thread writes it first */
    if (!l2) {
        const long got = sysconf(_SC_LEVEL2_CACHE_SIZE);
        l2 = got > 0 ? got : 1L << 20;
    }
    return (size_t)l2;
}

size_t peak_rss_bytes(void) {
    /* VmHWM rather than getrusage's ru_maxrss: only the former can be reset */
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kib = -1;
        while (kib < 0 && fgets(line, sizeof line, f))
            if (!strncmp(line, "VmHWM:", 6)) kib = strtol(line + 6, NULL, 10);
        fclose(f);
        if (kib >= 0) return (size_t)kib * 1024;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024;  /* Linux reports KiB */
}

int reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;   /* 5: reset the peak RSS (VmHWM) to the current RSS */
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* ---- temporary names: never mistaken for outputs, never left behind ----
 * A temporary is "<dir>/.bert-tmp.<pid>.<n>.<host>": hidden, and without the output's name, so no
 * reader that picks files by name (NVIDIA's trainer takes every name containing "training")
 * takes a half-written one. Live temporaries are listed so that SIGTERM, SIGINT and SIGHUP
 * remove them before the process ends (signals_start); those of processes that
 * died anyway (SIGKILL) are removed the next time a file is written in that folder. */

enum { TMP_NAME_MAX = 4096 + 320, MAX_SCANNED_DIRS = 64 };
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static char scanned_dirs[MAX_SCANNED_DIRS][4096];
static int scanned_count;

/* The live temporaries: a set of names that grows as needed (open addressing, linear
 * probing), so none is ever dropped. A fixed list of 256 dropped the rest, which SIGTERM then
 * left behind: `bert shard` into 400 training and 200 test shards holds 600. Guarded by
 * live_lock, which the signal thread also takes (die_of_signal) and keeps while the process
 * ends, so no name is added or freed while it removes them. */
static char **live_slots;       /* NULL: an empty slot */
static size_t live_capacity;    /* a power of two, or 0 */
static size_t live_count;

static size_t name_hash(const char *s) {   /* FNV-1a */
    size_t h = 14695981039346656037ull & SIZE_MAX;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * (size_t)1099511628211ull;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t live_slot_of(const char *name) {
    const size_t mask = live_capacity - 1;
    size_t i = name_hash(name) & mask;
    while (live_slots[i] && strcmp(live_slots[i], name) != 0) i = (i + 1) & mask;
    return i;
}

static void forget_temporary(const char *tmp_path) {
    pthread_mutex_lock(&live_lock);
    size_t i = live_capacity ? live_slot_of(tmp_path) : 0;
    if (live_capacity && live_slots[i]) {
        free(live_slots[i]);
        live_slots[i] = NULL;
        live_count--;
        /* backward-shift deletion: every name after the hole stays reachable from its home */
        const size_t mask = live_capacity - 1;
        for (size_t j = (i + 1) & mask; live_slots[j]; j = (j + 1) & mask) {
            const size_t home = name_hash(live_slots[j]) & mask;
            if (((j - home) & mask) >= ((j - i) & mask)) live_slots[i] = live_slots[j], live_slots[j] = NULL, i = j;
        }
    }
    pthread_mutex_unlock(&live_lock);
}

static void remember_temporary(const char *tmp_path) {
    pthread_mutex_lock(&live_lock);
    if ((live_count + 1) * 4 > live_capacity * 3) {   /* at most three quarters full */
        char **old = live_slots;
        const size_t old_capacity = live_capacity;
        live_capacity = old_capacity ? 2 * old_capacity : 64;
        live_slots = xcalloc(live_capacity, sizeof *live_slots);
        for (size_t k = 0; k < old_capacity; k++)
            if (old[k]) live_slots[live_slot_of(old[k])] = old[k];
        free(old);
    }
    const size_t i = live_slot_of(tmp_path);
    if (!live_slots[i]) live_slots[i] = xstrdup(tmp_path), live_count++;
    pthread_mutex_unlock(&live_lock);
}

/* ---- stop signals: taken by one thread, never by a handler on a computing thread ----
 * oneDNN's JIT GEMM kernels point the stack pointer into a heap workspace, so a signal
 * handler that ran on a thread inside one wrote its frame over the heap (issue 35, D10:
 * pretrain aborted with heap corruption on about half its SIGTERMs). So SIGTERM, SIGINT and
 * SIGHUP are blocked in the thread that starts the others, before it does (OpenMP's, oneDNN's
 * and the loader's threads inherit the mask), and one thread takes them with sigwait. */

static sigset_t stop_set;            /* the stop signals taken (those not ignored at the start) */
static sigset_t mask_at_start;       /* the starting thread's mask before they were blocked */
static pthread_t signal_thread;
static int signals_started;          /* in this process (a forked child starts again) */
static pthread_mutex_t signals_lock = PTHREAD_MUTEX_INITIALIZER;
static int (*stop_handler)(int sig); /* read and written with __atomic builtins */

/* Removes the live temporaries and keeps their lock: the process is about to end, and no
 * other thread may add one (and create it after this) or free a name being read. */
static void remove_live_temporaries(void) {
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < live_capacity; i++)
        if (live_slots[i]) unlink(live_slots[i]);
}

/* The signal's default action (the process ends by it), its temporaries removed first. */
static void die_of_signal(int sig) {
    remove_live_temporaries();
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one), sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);   /* to this thread, which now takes it: the default action ends the process */
    _exit(128 + sig);
}

static void *take_stop_signals(void *unused) {
    (void)unused;
    for (;;) {
        int sig;
        if (sigwait(&stop_set, &sig) != 0) continue;
        int (*handler)(int) = __atomic_load_n(&stop_handler, __ATOMIC_ACQUIRE);
        if (!handler || !handler(sig)) die_of_signal(sig);
    }
    return NULL;
}

/* A stop signal that reached a thread which ran before the mask was set (a library
 * constructor's thread pool) is passed on to the signal thread: this handler does nothing
 * else, and runs only on such threads. */
static void pass_to_signal_thread(int sig) { pthread_kill(signal_thread, sig); }

/* A forked child has no signal thread: it takes the stop signals as a process normally does. */
static void signals_in_child(void) {
    if (!signals_started) return;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&stop_set, sig) == 1) signal(sig, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &mask_at_start, NULL);
    signals_started = 0;
    __atomic_store_n(&stop_handler, NULL, __ATOMIC_RELEASE);
}

void signals_start(void) {
    pthread_mutex_lock(&signals_lock);
    if (signals_started) {
        pthread_mutex_unlock(&signals_lock);
        return;
    }
    const int signals[] = {SIGTERM, SIGINT, SIGHUP};
    sigemptyset(&stop_set);
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        struct sigaction old;
        /* an ignored one stays ignored (nohup; a shell's background job ignores SIGINT) */
        if (sigaction(signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&stop_set, signals[i]);
    }
    pthread_sigmask(SIG_BLOCK, &stop_set, &mask_at_start);
    static int atfork_registered;
    if (!atfork_registered) atfork_registered = 1, pthread_atfork(NULL, NULL, signals_in_child);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    if (pthread_create(&signal_thread, &attr, take_stop_signals, NULL) != 0) {
        /* no thread: the signals act as by default (no temporaries removed, no clean stop) */
        pthread_sigmask(SIG_SETMASK, &mask_at_start, NULL);
    } else {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = pass_to_signal_thread;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        for (int sig = 1; sig < NSIG; sig++)
            if (sigismember(&stop_set, sig) == 1) sigaction(sig, &sa, NULL);
        signals_started = 1;
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_unlock(&signals_lock);
}

void signals_set_stop_handler(int (*handler)(int sig)) {
    __atomic_store_n(&stop_handler, handler, __ATOMIC_RELEASE);
}

/* This machine's name as temporaries carry it (gethostname; "localhost" if it has none), so
 * that a process on another machine writing into the same shared folder never takes them for
 * a dead process's: a process id means something only on its own machine. */
static char host_name[256];
static void read_host_name(void) {
    if (gethostname(host_name, sizeof host_name - 1) != 0 || !host_name[0]) snprintf(host_name, sizeof host_name, "localhost");
    for (char *c = host_name; *c; c++)
        if (*c == '/' || (unsigned char)*c < 0x21) *c = '_';   /* a file name's part */
}
const char *this_host(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_host_name);
    return host_name;
}

bool temporary_owner_gone(long pid, const char *host) {
    if (host && *host && strcmp(host, this_host()) != 0) return false;   /* another machine's: not ours to judge */
    return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes the temporaries of processes that no longer run from dir (once per folder). */
static void remove_stale_temporaries(const char *dir) {
    static pid_t scanned_by;
    pthread_mutex_lock(&live_lock);
    if (scanned_by != getpid()) scanned_by = getpid(), scanned_count = 0;   /* a forked child looks again */
    for (int i = 0; i < scanned_count; i++)
        if (strcmp(scanned_dirs[i], dir) == 0) {
            pthread_mutex_unlock(&live_lock);
            return;
        }
    if (scanned_count < MAX_SCANNED_DIRS) snprintf(scanned_dirs[scanned_count++], sizeof scanned_dirs[0], "%s", dir);
    pthread_mutex_unlock(&live_lock);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, ".bert-tmp.", 10) != 0) continue;
        char *rest;   /* <pid>.<n>.<host>, or <pid>.<n> as named before the host was added */
        const long pid = strtol(e->d_name + 10, &rest, 10);
        const char *host = *rest == '.' ? strchr(rest + 1, '.') : NULL;
        if (!temporary_owner_gone(pid, host ? host + 1 : NULL)) continue;
        char stale[TMP_NAME_MAX];
        snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
        unlink(stale);
    }
    if (d) closedir(d);
}

void atomic_tmp_name(const char *path, char *out, size_t outlen) {
    static unsigned long counter;
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (slash) snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    remove_stale_temporaries(dir);
    unsigned long n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    snprintf(out, outlen, "%s/.bert-tmp.%ld.%lu.%s", strcmp(dir, "/") ? dir : "", (long)getpid(), n, this_host());
    remember_temporary(out);
}

void atomic_tmp_discard(const char *tmp_path) {
    unlink(tmp_path);
    forget_temporary(tmp_path);
}

int atomic_rename(const char *tmp_path, const char *path, BertError *err) {
    if (rename(tmp_path, path) != 0) {
        int e = errno;
        atomic_tmp_discard(tmp_path);
        return bert_fail(err, "cannot rename %s to %s: %s", tmp_path, path, strerror(e));
    }
    forget_temporary(tmp_path);
    return 0;
}

int sync_folder_of(const char *path, BertError *err) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    /* a folder this process may write in but not read (open): nothing more to do there */
    return access(dir, R_OK) != 0 ? 0 : fsync_path(dir, O_RDONLY | O_DIRECTORY, err);
}

int atomic_publish(const char *tmp_path, const char *path, BertError *err) {
    /* the rename itself to stable storage too: the folder's entry, else a crash may bring back
     * the old file or none though the output was reported written */
    return atomic_rename(tmp_path, path, err) != 0 ? -1 : sync_folder_of(path, err);
}

int fsync_path(const char *path, int flags, BertError *err) {
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return bert_fail(err, "cannot open %s to sync it: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    /* some file systems cannot sync a folder (EINVAL): nothing more can be done there */
    if (rc != 0 && e != EINVAL) return bert_fail(err, "cannot sync %s: %s", path, strerror(e));
    return 0;
}

int resolve_output(const char *path, char *resolved, size_t n, BertError *err) {
    struct stat st;
    if (strlen(path) >= n) return bert_fail(err, "output path too long: %s", path);
    snprintf(resolved, n, "%s", path);
    if (lstat(path, &st) != 0) return 0;   /* a new file */
    if (S_ISLNK(st.st_mode)) {
        char *target = realpath(path, NULL);
        if (!target) {   /* a dangling link: create its target */
            char link[4096];
            ssize_t len = readlink(path, link, sizeof link - 1);
            if (len <= 0) return bert_fail(err, "cannot read the link %s: %s", path, strerror(errno));
            link[len] = '\0';
            const char *slash = strrchr(path, '/');
            if (link[0] == '/' || !slash) snprintf(resolved, n, "%s", link);
            else snprintf(resolved, n, "%.*s/%s", (int)(slash - path), path, link);
            return 0;
        }
        snprintf(resolved, n, "%s", target);
        free(target);
        if (stat(resolved, &st) != 0) return 0;
    }
    if (S_ISDIR(st.st_mode)) return bert_fail(err, "output %s is a folder", path);
    return S_ISREG(st.st_mode) ? 0 : 1;
}

int atomic_open(AtomicFile *af, const char *path, BertError *err) {
    int kind = resolve_output(path, af->path, sizeof af->path, err);
    if (kind < 0) return -1;
    af->direct = kind == 1;
    if (af->direct) {   /* a device or pipe: written through */
        af->tmp_path[0] = '\0';
        af->fp = fopen(af->path, "wb");
        if (!af->fp) return bert_fail(err, "cannot write %s: %s", path, strerror(errno));
        return 0;
    }
    atomic_tmp_name(af->path, af->tmp_path, sizeof af->tmp_path);
    af->fp = fopen(af->tmp_path, "wb");
    if (!af->fp) {
        int e = errno;
        forget_temporary(af->tmp_path);
        return bert_fail(err, "cannot write %s (a temporary beside %s): %s", af->tmp_path, path, strerror(e));
    }
    return 0;
}

int atomic_close(AtomicFile *af, BertError *err) {
    int bad = ferror(af->fp);
    if (fflush(af->fp) != 0) bad = 1;
    if (!bad && fsync(fileno(af->fp)) != 0 && errno != EINVAL) bad = 1;
    int e = errno;
    if (fclose(af->fp) != 0) bad = 1;
    af->fp = NULL;
    if (bad) {
        if (!af->direct) atomic_tmp_discard(af->tmp_path);
        return bert_fail(err, "error writing %s: %s", af->path, strerror(e));
    }
    return 0;
}

int atomic_commit(AtomicFile *af, BertError *err) {
    if (atomic_close(af, err) != 0) return -1;
    return af->direct ? 0 : atomic_publish(af->tmp_path, af->path, err);
}

void atomic_abort(AtomicFile *af) {
    if (af->fp) fclose(af->fp);
    af->fp = NULL;
    if (!af->direct) atomic_tmp_discard(af->tmp_path);
}

static char first_write_error[4096 + 1024 + 64];
static pthread_mutex_t write_error_lock = PTHREAD_MUTEX_INITIALIZER;

void note_write_error(const char *fmt, ...) {
    pthread_mutex_lock(&write_error_lock);
    if (!first_write_error[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(first_write_error, sizeof first_write_error, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&write_error_lock);
}

const char *noted_write_error(void) { return first_write_error[0] ? first_write_error : NULL; }

int is_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

typedef struct {
    dev_t dev;
    ino_t ino;
    int index;  /* in the list given to file_set_new */
} FileId;

struct FileSet {
    FileId *ids;  /* the files that exist, by (device, inode, index) */
    int n;
};

static int cmp_file_ids(const void *x, const void *y) {
    const FileId *a = x, *b = y;
    if (a->dev != b->dev) return a->dev < b->dev ? -1 : 1;
    if (a->ino != b->ino) return a->ino < b->ino ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

FileSet *file_set_new(const char *const *paths, int n) {
    FileSet *s = xcalloc(1, sizeof *s);
    s->ids = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *s->ids);
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0) s->ids[s->n++] = (FileId){st.st_dev, st.st_ino, i};
    }
    qsort(s->ids, (size_t)s->n, sizeof *s->ids, cmp_file_ids);
    return s;
}

void file_set_free(FileSet *s) {
    if (!s) return;
    free(s->ids);
    free(s);
}

int file_set_duplicate(const FileSet *s, int *first, int *second) {
    /* The names of one file are neighbours, in list order: a file's first two names are
     * the pair it offers. */
    int found = 0;
    for (int k = 1; k < s->n; k++) {
        const FileId *a = &s->ids[k - 1], *b = &s->ids[k];
        int second_name = a->dev == b->dev && a->ino == b->ino &&
                           (k == 1 || s->ids[k - 2].dev != a->dev || s->ids[k - 2].ino != a->ino);
        if (second_name && (!found || b->index < *second)) *first = a->index, *second = b->index, found = 1;
    }
    return found;
}

int file_set_find(const FileSet *s, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    FileId key = {st.st_dev, st.st_ino, -1};  /* sorts before every name of that file */
    int lo = 0, hi = s->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cmp_file_ids(&s->ids[mid], &key) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->n && s->ids[lo].dev == st.st_dev && s->ids[lo].ino == st.st_ino ? s->ids[lo].index : -1;
}

int read_file(const char *path, char **data, size_t *len, BertError *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return bert_fail(err, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {   /* fopen opens a folder; reading it fails */
        fclose(f);
        return bert_fail(err, "%s: a folder, not a file", path);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) cap = grow_capacity(cap, cap + 1, 1 << 16), buf = xrealloc(buf, cap + 1);   /* + 1: the NUL */
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f), e = errno;
    fclose(f);
    if (bad) { free(buf); return bert_fail(err, "error reading %s: %s", path, strerror(e)); }
    buf[n] = 0;
    *data = buf;
    if (len) *len = n;
    return 0;
}

double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int make_dirs(const char *path, BertError *err) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return bert_fail(err, "path too long: %s", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p) continue;
        char saved = *p;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return bert_fail(err, "cannot create %s: %s", buf, strerror(errno));
        *p = saved;
        if (!saved) break;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return bert_fail(err, "%s exists and is not a folder", path);
    return 0;
}

int make_dirs_created(const char *path, char *created, size_t n, BertError *err) {
    char buf[4096];
    if (n) created[0] = '\0';
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return bert_fail(err, "path too long: %s", path);
    struct stat sb;
    for (char *p = buf + 1;; p++) {   /* the first missing folder on the way down is the outermost one made */
        if (*p != '/' && *p) continue;
        const char saved = *p;
        *p = 0;
        if (stat(buf, &sb) != 0) {
            if (n) snprintf(created, n, "%s", buf);
            break;
        }
        *p = saved;
        if (!saved) break;
    }
    return make_dirs(path, err);
}

void remove_created_dirs(const char *path, const char *created) {
    if (!created || !created[0]) return;
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return;
    const size_t stop = strlen(created);
    for (size_t len = strlen(buf); len >= stop && len > 0;) {
        while (len > stop && buf[len - 1] == '/') buf[--len] = '\0';   /* "a/b/" is "a/b" */
        if (rmdir(buf) != 0) return;   /* not empty (or gone): what is left above stays too */
        if (len == stop) return;
        char *slash = strrchr(buf, '/');
        if (!slash) return;
        *slash = '\0', len = (size_t)(slash - buf);
    }
}

int check_input_file(const char *path, const char *what, BertError *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) return bert_fail(err, "%s %s: %s", what, path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return bert_fail(err, "%s %s: a folder, not a file", what, path);
    FILE *f = fopen(path, "rb");
    if (!f) return bert_fail(err, "%s %s: cannot read it: %s", what, path, strerror(errno));
    fclose(f);
    return 0;
}

int split_list(char *s, const char **items, int max) {
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max) return -1;
        items[n++] = tok;
    }
    return n;
}

int list_capacity(const char *s) {
    int n = 1;
    for (; *s; s++) n += *s == ',';
    return n;
}

size_t grow_capacity(size_t cap, size_t need, size_t first) {
    if (need <= cap) return cap;
    size_t c = cap ? cap : first;
    while (c < need) c *= 2;
    return c;
}

static int compare_paths(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int list_dir_files(const char *dir, const char *name_contains, const char *suffix, char ***paths, int *n,
                   BertError *err) {
    *paths = NULL, *n = 0;
    DIR *d = opendir(dir);
    if (!d) return bert_fail(err, "cannot open folder '%s': %s", dir, strerror(errno));
    const size_t suffix_len = suffix ? strlen(suffix) : 0;
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp.") ||
            (name_contains && !strstr(e->d_name, name_contains)) ||
            (suffix && (len < suffix_len || strcmp(e->d_name + len - suffix_len, suffix) != 0)))
            continue;
        const size_t size = strlen(dir) + len + 2;
        char *path = xmalloc(size);
        snprintf(path, size, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(path);
            continue;
        }
        ARRAY_RESERVE(*paths, cap, (size_t)*n + 1, 64);
        (*paths)[(*n)++] = path;
    }
    closedir(d);
    if (*n) qsort(*paths, (size_t)*n, sizeof **paths, compare_paths);
    return 0;
}

void free_paths(char **paths, int n) {
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

static int same_letter(char a, char b) {
    return a == b || ((a == '-' || a == '_') && (b == '-' || b == '_'));
}

/* Optimal string alignment distance between a[0..la) and b[0..lb), or limit + 1 once over limit. */
static int edit_distance(const char *a, size_t la, const char *b, size_t lb, int limit) {
    if ((la > lb ? la - lb : lb - la) > (size_t)limit) return limit + 1;
    int *d = xmalloc((la + 1) * (lb + 1) * sizeof *d);
#define D(i, j) d[(i) * (lb + 1) + (j)]
    for (size_t i = 0; i <= la; i++) D(i, 0) = (int)i;
    for (size_t j = 0; j <= lb; j++) D(0, j) = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = D(i - 1, j - 1) + !same_letter(a[i - 1], b[j - 1]);
            if (D(i - 1, j) + 1 < best) best = D(i - 1, j) + 1;
            if (D(i, j - 1) + 1 < best) best = D(i, j - 1) + 1;
            if (i > 1 && j > 1 && same_letter(a[i - 1], b[j - 2]) && same_letter(a[i - 2], b[j - 1]) &&
                D(i - 2, j - 2) + 1 < best)
                best = D(i - 2, j - 2) + 1;
            D(i, j) = best;
        }
    const int r = D(la, lb);
#undef D
    free(d);
    return r;
}

int suggest_names(const char *word, size_t len, const char *const *names, int n, char *out, size_t outn) {
    if (outn) out[0] = 0;
    size_t letters = len;
    for (size_t i = 0; i < len && word[i] == '-'; i++) letters--;
    const int limit = letters <= 4 ? 1 : letters <= 8 ? 2 : 3;
    int best = limit + 1, picked[3], npicked = 0;
    for (int i = 0; i < n; i++) {
        const int dist = edit_distance(word, len, names[i], strlen(names[i]), limit);
        if (dist > limit || dist > best) continue;
        if (dist < best) best = dist, npicked = 0;
        if (npicked < 3) picked[npicked++] = i;
    }
    /* none close: the names the word begins (--input: --input_file), for a word long enough */
    if (npicked == 0 && letters >= 3)
        for (int i = 0; i < n && npicked < 3; i++)
            if (strlen(names[i]) > len && !strncmp(names[i], word, len)) picked[npicked++] = i;
    if (npicked == 0 || outn == 0) return 0;
    size_t used = (size_t)snprintf(out, outn, "did you mean ");
    for (int k = 0; k < npicked && used < outn; k++)
        used += (size_t)snprintf(out + used, outn - used, "%s%s", k == 0 ? "" : k + 1 == npicked ? " or " : ", ",
                                 names[picked[k]]);
    if (used < outn) snprintf(out + used, outn - used, "?");
    return npicked;
}

/* ---- thread_at_exit: one pthread key whose value is the thread's list of callbacks ---- */

typedef struct ThreadExitCall {
    void (*fn)(void *);
    void *arg;
    struct ThreadExitCall *next;
} ThreadExitCall;

static pthread_key_t thread_exit_key;
static pthread_once_t thread_exit_once = PTHREAD_ONCE_INIT;

static void thread_exit_run(void *list) {
    for (ThreadExitCall *c = list, *next; c; c = next) {
        next = c->next;
        c->fn(c->arg);
        free(c);
    }
}

static void thread_exit_key_create(void) {
    if (pthread_key_create(&thread_exit_key, thread_exit_run) != 0) die("thread_at_exit: cannot create a thread key");
}

void thread_at_exit(void (*fn)(void *), void *arg) {
    pthread_once(&thread_exit_once, thread_exit_key_create);
    ThreadExitCall *c = xmalloc(sizeof *c);
    *c = (ThreadExitCall){fn, arg, pthread_getspecific(thread_exit_key)};
    pthread_setspecific(thread_exit_key, c);
}
