/* Small shared pieces: error reporting, checked allocation, timing, atomic file output.
 * Every fallible function in bert.c returns 0 on success and -1 on failure, filling a
 * caller-owned BertError with a message that names the thing that went wrong. */
#ifndef BERT_COMMON_H
#define BERT_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    char msg[1024];
} BertError;

/* Formats the message into err (if non-NULL) and returns -1, so callers can write
 * `return bert_fail(err, "...", ...);`. The message is made one line: control characters, a
 * newline among them, become '?' (a name quoted from a hostile file cannot break it). */
int bert_fail(BertError *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocation that never returns NULL: out of memory is reported and the process exits,
 * since no caller could do anything better. */
/* fn(arg) when the calling thread ends (its start routine returns or it calls pthread_exit;
 * not the main thread at the process's exit, whose memory goes with the process): for the
 * per-thread scratch a kernel keeps in _Thread_local storage, which a server's worker threads
 * would otherwise leave behind each time one ends. */
void thread_at_exit(void (*fn)(void *), void *arg);
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* The one growth rule of bert.c's growable arrays: the capacity (in elements) doubled,
 * starting from `first`, until it holds `need`; cap itself when it already does. */
size_t grow_capacity(size_t cap, size_t need, size_t first);
/* Room for `need` elements in the growable array (ptr, cap), reallocated by grow_capacity. */
#define ARRAY_RESERVE(ptr, cap, need, first)                                                    \
    do {                                                                                        \
        size_t new_cap_ = grow_capacity((size_t)(cap), (size_t)(need), (first));               \
        if (new_cap_ != (size_t)(cap)) (ptr) = xrealloc((ptr), new_cap_ * sizeof *(ptr)), (cap) = new_cap_; \
    } while (0)

/* Prints "bert: <msg>" to stderr and exits with status 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Monotonic wall-clock seconds, and the CPU seconds this process has used (all threads). */
double now_seconds(void);
double cpu_seconds(void);

/* mkdir -p: creates path and its missing parents; fails if path exists and is not a folder. */
int make_dirs(const char *path, BertError *err);
/* make_dirs that remembers what it made: `created` (n bytes) gets the outermost folder it
 * created ("" when path existed), for remove_created_dirs to undo after a failed run. */
int make_dirs_created(const char *path, char *created, size_t n, BertError *err);
/* Removes path and its parents up to `created` (from make_dirs_created) while they are empty:
 * a failed run leaves no empty folders behind it, and never a file it did not write. */
void remove_created_dirs(const char *path, const char *created);
/* An input that must be there before any work: a regular file this process can read. The
 * message names it as `what` ("--vocab_file", "test.tsv of --data_dir") and says what is wrong. */
int check_input_file(const char *path, const char *what, BertError *err);

/* Peak resident set size of this process in bytes (VmHWM; 0 if unknown), and a reset of that
 * peak to the current size (Linux's /proc/self/clear_refs; returns -1 where unsupported), so
 * a report can leave out memory that a finished phase (a measurement) used and freed. */
size_t peak_rss_bytes(void);
/* One core's L2 cache in bytes (sysconf; 1 MiB where the system does not say), for the
 * kernels' blocking and their choice of stores past the caches. */
size_t l2_cache_bytes(void);
int reset_peak_rss(void);

/* Atomic output: data goes to a temporary in <path>'s folder and is renamed over <path> only
 * on commit (after fsync), so a crash or kill leaves any previous <path> whole. Symbolic
 * links and special files are handled as resolve_output says. */
typedef struct {
    char path[4096];
    char tmp_path[4096 + 64];
    FILE *fp;
    int direct;      /* the destination is a device, FIFO or socket: written through, no rename */
} AtomicFile;

/* Where an output really goes. A symbolic link: its target (resolved) is what gets replaced,
 * atomically, and the link stays. A device, FIFO or socket (/dev/null, a pipe): returns 1, to
 * be written through, never replaced by a regular file. A folder: an error. Otherwise 0 with
 * resolved = path (which need not exist yet). */
int resolve_output(const char *path, char *resolved, size_t n, BertError *err);

int atomic_open(AtomicFile *af, const char *path, BertError *err);  /* af->fp is ready */
int atomic_commit(AtomicFile *af, BertError *err);                  /* flush, fsync, rename */
/* Flush, fsync and close, keeping the temporary (af->tmp_path) for a later
 * atomic_publish(af->tmp_path, af->path) (nothing to publish when af->direct): for a writer of
 * many files that publishes them together and cannot hold them all open. On an error the
 * temporary is removed. */
int atomic_close(AtomicFile *af, BertError *err);
void atomic_abort(AtomicFile *af);                                  /* close and unlink tmp */
/* For writers that open files by name themselves (libhdf5): the temporary name to write,
 * and the rename that publishes it. */
void atomic_tmp_name(const char *path, char *out, size_t outlen);
/* Temporaries' owners: this machine's name (names carry it), and whether the process pid of
 * machine host (NULL or "": a name without one, this machine's) is gone: on this machine and
 * no longer running; another machine's process is never judged gone (a shared folder). */
const char *this_host(void);
bool temporary_owner_gone(long pid, const char *host);
/* Renames the temporary to path and syncs path's folder (the new entry to stable storage); a
 * failed rename removes the temporary. atomic_rename is the rename alone, for a writer that
 * publishes many files into one folder and then syncs it once with sync_folder_of. */
int atomic_publish(const char *tmp_path, const char *path, BertError *err);
int atomic_rename(const char *tmp_path, const char *path, BertError *err);
/* The folder holding path to stable storage (its entries: files created, renamed or removed in
 * it); a folder this process cannot open, or a file system that cannot sync one, is passed over. */
int sync_folder_of(const char *path, BertError *err);
void atomic_tmp_discard(const char *tmp_path);   /* unlink a temporary that will not be published */
/* Opens path (open(2)'s flags: O_RDONLY, or O_RDONLY | O_DIRECTORY for a folder) and fsyncs it:
 * a file written by a library that never syncs (libhdf5) before atomic_publish, a folder after
 * its entries changed. A file system that cannot sync a folder (EINVAL) is not an error. */
int fsync_path(const char *path, int flags, BertError *err);
/* Temporaries are "<dir>/.bert-tmp.<pid>.<n>.<host>" (hidden, without the output's name: no reader
 * that picks files by name takes one). After signals_start, SIGTERM, SIGINT and SIGHUP remove
 * the live ones before the process ends; a later write in the same folder removes those of
 * processes that were killed. */

/* Stop signals (SIGTERM, SIGINT, SIGHUP) never run a handler on a thread that computes:
 * signals_start blocks them in the calling thread, which must be the first (call it at the
 * top of main, before any thread exists: threads inherit the mask), and starts one thread
 * that takes them with sigwait. There a stop signal goes to the stop handler when one is set
 * and it returns 1 (a training loop's flag: it stops at the end of its step); otherwise the
 * live temporaries are removed and the process ends by the signal, as by default. Signals
 * ignored at the start (nohup) stay ignored. A forked child takes them normally again.
 * Calling it again does nothing. */
void signals_start(void);
/* The handler runs on the signal thread (not in a signal context); NULL: none. */
void signals_set_stop_handler(int (*handler)(int sig));

/* A write that failed where the caller has no error to return (a log written along the way):
 * the first is kept, and `bert` exits non-zero naming it (cli/main.c). */
void note_write_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *noted_write_error(void);   /* the first noted, or NULL */

/* 1 when both paths name one existing file (same device and inode), else 0: an output
 * that its atomic rename would put in place of its own input. */
int is_same_file(const char *a, const char *b);
/* The identities (device, inode) of the files named in paths[0..n) that exist, each looked
 * up once and sorted: one file under two names is found among many in n log n, where
 * comparing every pair with is_same_file took n^2 / 2 pairs of stat calls. */
typedef struct FileSet FileSet;
FileSet *file_set_new(const char *const *paths, int n);
void file_set_free(FileSet *s);
/* Two names of one file in the list: 1, with *first < *second their indices (of all such
 * pairs, the one whose second name comes first in the list, and that file's first name);
 * else 0. */
int file_set_duplicate(const FileSet *s, int *first, int *second);
/* The index in the list of the first name of path's file, or -1 (also when path does not
 * exist). */
int file_set_find(const FileSet *s, const char *path);

/* Splits a comma-separated list in place (s is modified): items[] point into s. Empty items
 * (",," or a trailing ",") are skipped. Returns the count, or -1 when there are more than
 * max items. Every list flag (--input_files, --books, --input_file patterns) reads this way. */
int split_list(char *s, const char **items, int max);
/* The regular files directly in dir whose names contain name_contains and end in suffix
 * (either may be NULL), as "dir/name" paths sorted by name; hidden names (bert.c's
 * temporaries) and others' NAME.tmp.PID are left out. *paths is NULL when *n is 0; free each
 * path and the array. -1 (err) when dir cannot be read. */
int list_dir_files(const char *dir, const char *name_contains, const char *suffix, char ***paths, int *n,
                   BertError *err);
void free_paths(char **paths, int n);
/* The most items split_list can find in s: its commas plus one. */
int list_capacity(const char *s);

/* "did you mean X?" for a misspelt name: the names closest to word (its first len bytes) by
 * edit distance (insertions, deletions, substitutions and swaps of two neighbours; '-' and '_'
 * count as the same), all those at the smallest distance (up to 3), written to out as
 * "did you mean X?" or "did you mean X or Y?". out is "" (and 0 returned) when no name is close
 * enough: 1 edit for words of up to 4 letters (leading dashes not counted), 2 up to 8, else 3. */
int suggest_names(const char *word, size_t len, const char *const *names, int n, char *out, size_t outn);

/* Reads a whole file into a NUL-terminated buffer (caller frees). */
int read_file(const char *path, char **data, size_t *len, BertError *err);

#endif
