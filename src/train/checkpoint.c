/* Checkpoint folders written whole or not at all: see checkpoint.h. */
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "core/test_hooks.h"
#include "model/bert.h"

/* A run's checkpoint folders are <prefix><step>: pre-training's ckpt_<step>, fine-tuning's
 * checkpoint-<step> (HuggingFace's Trainer's name). */
#define PRETRAIN_PREFIX "ckpt_"

/* "<prefix><digits>" exactly: the step, or -1 for any other name. */
static long checkpoint_step_of(const char *prefix, const char *name) {
    const size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || !name[n]) return -1;
    long step = 0;
    for (const char *c = name + n; *c; c++) {
        if (*c < '0' || *c > '9' || step > (long)1e15) return -1;
        step = step * 10 + (*c - '0');
    }
    return step;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)ftw;
    TEST_HOOK_BEFORE_DELETE(path);
    return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

int fs_remove_tree(const char *path, BertError *err) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : bert_fail(err, "cannot stat %s: %s", path, strerror(errno));
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return bert_fail(err, "cannot delete %s: %s", path, strerror(errno));
    return 0;
}

/* Every regular file directly in dir, then dir itself, to stable storage. */
static int fsync_folder(const char *dir, BertError *err) {
    DIR *d = opendir(dir);
    if (!d) return bert_fail(err, "cannot open %s: %s", dir, strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4096 + 352 + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) rc = fsync_path(path, O_RDONLY, err);
    }
    closedir(d);
    return rc ? rc : fsync_path(dir, O_RDONLY | O_DIRECTORY, err);
}

/* The hidden folders a killed process left: ".ckpt_<step>.tmp.<pid>.<host>" (a checkpoint being
 * written), ".ckpt_<step>.del.<pid>.<host>" (one being deleted) and ".ckpt_<step>.old.<pid>.<host>" (one
 * being replaced by a rerun of its step: put back when no ckpt_<step> took its place); the
 * same with another prefix. With restore_only, the replaced ones are put back and nothing is
 * deleted: what every listing does, so that a resume after a kill between a replacement's two
 * renames finds that step's checkpoint, not an older one (or none). */
static void restore_or_remove_stale(const char *output_dir, const char *prefix, bool restore_only) {
    DIR *d = opendir(output_dir);
    if (!d) return;
    const size_t n = strlen(prefix);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] != '.' || strncmp(e->d_name + 1, prefix, n) != 0) continue;
        char *end;
        const long step = strtol(e->d_name + 1 + n, &end, 10);
        if (end == e->d_name + 1 + n || step < 0) continue;
        const bool old = !strncmp(end, ".old.", 5);
        if (!old && (restore_only || (strncmp(end, ".tmp.", 5) && strncmp(end, ".del.", 5)))) continue;
        char *rest;   /* <pid>.<host>, or <pid> as named before the host was added */
        const long pid = strtol(end + 5, &rest, 10);
        if (!temporary_owner_gone(pid, *rest == '.' ? rest + 1 : NULL)) continue;   /* still running, or elsewhere */
        char path[4096 + 256], final_path[4096 + 64];
        snprintf(path, sizeof path, "%s/%s", output_dir, e->d_name);
        snprintf(final_path, sizeof final_path, "%s/%s%ld", output_dir, prefix, step);
        struct stat st;
        if (old && stat(final_path, &st) != 0 && rename(path, final_path) == 0) continue;
        BertError ignored;
        if (!restore_only) fs_remove_tree(path, &ignored);
    }
    closedir(d);
}

static void remove_stale_temporaries(const char *output_dir, const char *prefix) {
    restore_or_remove_stale(output_dir, prefix, false);
}

/* Renamed to a hidden name first: no folder named <prefix><step> is ever incomplete, even when
 * a kill stops the deletion half-way (issue 35, D9). */
int checkpoint_remove_named(const char *output_dir, const char *prefix, long step, BertError *err) {
    char path[4096 + 64], hidden[4096 + 352];
    snprintf(path, sizeof path, "%s/%s%ld", output_dir, prefix, step);
    snprintf(hidden, sizeof hidden, "%s/.%s%ld.del.%ld.%s", output_dir, prefix, step, (long)getpid(), this_host());
    if (rename(path, hidden) != 0)
        return errno == ENOENT ? 0 : bert_fail(err, "cannot delete %s (moving it aside): %s", path, strerror(errno));
    return fs_remove_tree(hidden, err);
}

static int compare_steps(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int checkpoint_list_named(const char *output_dir, const char *prefix, long **steps, int *count, BertError *err) {
    *steps = NULL, *count = 0;
    restore_or_remove_stale(output_dir, prefix, true);   /* a replaced checkpoint a kill left aside */
    DIR *d = opendir(output_dir);
    if (!d) return errno == ENOENT ? 0 : bert_fail(err, "cannot open %s: %s", output_dir, strerror(errno));
    int cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        long step = checkpoint_step_of(prefix, e->d_name);
        if (step < 0) continue;
        ARRAY_RESERVE(*steps, cap, (size_t)*count + 1, 16);
        (*steps)[(*count)++] = step;
    }
    closedir(d);
    if (*count) qsort(*steps, (size_t)*count, sizeof(long), compare_steps);
    return 0;
}

int checkpoint_list(const char *output_dir, long **steps, int *count, BertError *err) {
    return checkpoint_list_named(output_dir, PRETRAIN_PREFIX, steps, count, err);
}

static void checkpoint_path(char *out, size_t n, const char *output_dir, const char *prefix, long step) {
    snprintf(out, n, "%s/%s%ld", output_dir, prefix, step);
}

void checkpoint_history_add(CheckpointHistory *h, long step) {
    int k = 0;
    for (int i = 0; i < h->count; i++)
        if (h->steps[i] != step) h->steps[k++] = h->steps[i];
    h->count = k;
    ARRAY_RESERVE(h->steps, h->cap, (size_t)h->count + 1, 8);
    h->steps[h->count++] = step;
}

void checkpoint_history_free(CheckpointHistory *h) {
    free(h->steps);
    *h = (CheckpointHistory){0};
}

int checkpoint_save(const char *output_dir, long step, int keep_last, CheckpointHistory *written,
                    CheckpointWriter write, void *ctx, char *saved_path, size_t saved_path_len, BertError *err) {
    return checkpoint_save_named(output_dir, PRETRAIN_PREFIX, step, keep_last, written, write, ctx, saved_path,
                                 saved_path_len, err);
}

int checkpoint_save_named(const char *output_dir, const char *prefix, long step, int keep_last,
                          CheckpointHistory *written, CheckpointWriter write, void *ctx, char *saved_path,
                          size_t saved_path_len, BertError *err) {
    if (step < 0) return bert_fail(err, "checkpoint step %ld is negative", step);
    if (make_dirs(output_dir, err) != 0) return -1;
    remove_stale_temporaries(output_dir, prefix);
    char tmp[4096 + 352], final_path[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s%ld.tmp.%ld.%s", output_dir, prefix, step, (long)getpid(), this_host());
    checkpoint_path(final_path, sizeof final_path, output_dir, prefix, step);
    if (fs_remove_tree(tmp, err) != 0) return -1;
    if (mkdir(tmp, 0777) != 0) return bert_fail(err, "cannot create %s: %s", tmp, strerror(errno));
    if (write(tmp, ctx, err) != 0 || fsync_folder(tmp, err) != 0) {
        BertError ignored;
        fs_remove_tree(tmp, &ignored);
        return -1;
    }
    /* A checkpoint of the same step (a rerun) is replaced: moved aside first, so that some
     * complete ckpt_<step> exists at every moment but the instant between the renames; a kill
     * in that instant leaves it aside, and every listing (resume's) puts it back. */
    char old[4096 + 352] = "";
    struct stat st;
    if (stat(final_path, &st) == 0) {
        snprintf(old, sizeof old, "%s/.%s%ld.old.%ld.%s", output_dir, prefix, step, (long)getpid(), this_host());
        if (rename(final_path, old) != 0) return bert_fail(err, "cannot move %s aside: %s", final_path, strerror(errno));
        TEST_HOOK_MOVED_ASIDE(old);   /* a kill here: the next listing puts it back */
    }
    if (rename(tmp, final_path) != 0) {
        int e = errno;
        if (old[0]) rename(old, final_path);
        BertError ignored;
        fs_remove_tree(tmp, &ignored);
        return bert_fail(err, "cannot rename %s to %s: %s", tmp, final_path, strerror(e));
    }
    if (fsync_path(output_dir, O_RDONLY | O_DIRECTORY, err) != 0) return -1;
    if (old[0] && fs_remove_tree(old, err) != 0) return -1;
    if (saved_path) snprintf(saved_path, saved_path_len, "%s", final_path);
    if (!written) return 0;
    checkpoint_history_add(written, step);
    if (keep_last <= 0) return 0;
    int drop = written->count - keep_last;
    if (drop <= 0) return 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < drop; i++) rc = checkpoint_remove_named(output_dir, prefix, written->steps[i], err);
    memmove(written->steps, written->steps + drop, sizeof(long) * (size_t)(written->count - drop));
    written->count -= drop;
    return rc;
}

int checkpoint_find_latest(const char *output_dir, const char *required_file, char *path, size_t path_len,
                           long *step, BertError *err) {
    return checkpoint_find_latest_named(output_dir, PRETRAIN_PREFIX, required_file, path, path_len, step, err);
}

int checkpoint_find_latest_named(const char *output_dir, const char *prefix, const char *required_file, char *path,
                                 size_t path_len, long *step, BertError *err) {
    long *steps;
    int count;
    if (checkpoint_list_named(output_dir, prefix, &steps, &count, err) != 0) return -1;
    int found = 0;
    for (int i = count - 1; i >= 0 && !found; i--) {
        char dir[4096], file[4096 + 256];
        checkpoint_path(dir, sizeof dir, output_dir, prefix, steps[i]);
        snprintf(file, sizeof file, "%s/%s", dir, required_file);
        struct stat st;
        if (stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
            snprintf(path, path_len, "%s", dir);
            *step = steps[i], found = 1;
        }
    }
    free(steps);
    return found;
}

int checkpoint_resolve_model(const char *path, char *out, size_t out_len, long *step, BertError *err) {
    struct stat st;
    char file[4096 + 64], config[4096];
    snprintf(file, sizeof file, "%s.index", path);   /* a TensorFlow checkpoint's prefix names no file */
    if (stat(path, &st) != 0 && stat(file, &st) != 0)
        return bert_fail(err, "--init_checkpoint %s: no such file or folder", path);
    BertError not_model;
    if (!S_ISDIR(st.st_mode) ||   /* a weights file, or a model folder: HF's, NVIDIA's, Google's */
        bert_checkpoint_locate(path, NULL, file, sizeof file, config, sizeof config, &not_model) == 0) {
        if ((size_t)snprintf(out, out_len, "%s", path) >= out_len)
            return bert_fail(err, "--init_checkpoint %s: the path is too long", path);
        return 0;
    }
    char run[4096];   /* the run folder, without trailing slashes: RUN/ckpt_<N>, not RUN//ckpt_<N> */
    snprintf(run, sizeof run, "%s", path);
    for (size_t n = strlen(run); n > 1 && run[n - 1] == '/';) run[--n] = '\0';
    long *steps;
    int count;
    if (checkpoint_list(run, &steps, &count, err) != 0) return -1;
    int found = 0;
    for (int i = count - 1; i >= 0 && !found; i--) {
        char dir[4096 + 32];
        checkpoint_path(dir, sizeof dir, run, PRETRAIN_PREFIX, steps[i]);
        snprintf(file, sizeof file, "%s/model.safetensors", dir);
        if (stat(file, &st) != 0 || !S_ISREG(st.st_mode)) continue;   /* not complete */
        snprintf(file, sizeof file, "%s/state.json", dir);
        char *text;
        BertError ignored;
        if (read_file(file, &text, NULL, &ignored) != 0) continue;
        cJSON *state = cJSON_ParseWithOpts(text, NULL, 1);
        free(text);
        if (!state) continue;   /* cut short: not complete */
        cJSON_Delete(state);
        if ((size_t)snprintf(out, out_len, "%s", dir) >= out_len) {
            free(steps);
            return bert_fail(err, "--init_checkpoint %s: the path is too long", dir);
        }
        if (step) *step = steps[i];
        found = 1;
    }
    free(steps);
    if (found) return 1;
    if (count)
        return bert_fail(err, "--init_checkpoint %s: no model.safetensors, and none of its %d ckpt_<step> folders is a "
                              "complete checkpoint (model.safetensors and a whole state.json)", path, count);
    return bert_fail(err, "--init_checkpoint %s: neither a model folder (model.safetensors, config.json) nor a bert "
                          "pretrain run folder (ckpt_<step>/ checkpoints)", path);
}

int checkpoint_write_json(const char *dir, const char *name, const cJSON *json, BertError *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = cJSON_Print(json);
    if (!text) return bert_fail(err, "cannot format %s", path);
    AtomicFile af;
    int rc = atomic_open(&af, path, err);
    if (rc == 0) {
        if (fputs(text, af.fp) < 0 || fputc('\n', af.fp) == EOF) {
            atomic_abort(&af);
            rc = bert_fail(err, "cannot write %s: %s", path, strerror(errno));
        } else {
            rc = atomic_commit(&af, err);
        }
    }
    free(text);
    return rc;
}

int checkpoint_read_json(const char *dir, const char *name, cJSON **out, BertError *err) {
    char path[4096], *text;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (read_file(path, &text, NULL, err) != 0) return -1;
    const char *end = NULL;
    *out = cJSON_ParseWithOpts(text, &end, 1);
    free(text);
    if (!*out) return bert_fail(err, "%s is not valid JSON", path);
    return 0;
}

int file_crc32(const char *path, uint32_t *crc, uint64_t *bytes, BertError *err) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bert_fail(err, "cannot open %s: %s", path, strerror(errno));
    enum { CHUNK = 1 << 22 };
    unsigned char *buf = xmalloc(CHUNK);
    uint32_t c = 0;
    uint64_t n = 0;
    ssize_t got;
    while ((got = read(fd, buf, CHUNK)) > 0 || (got < 0 && errno == EINTR))
        if (got > 0) c = crc32_gzip_refl(c, buf, (uint64_t)got), n += (uint64_t)got;
    const int e = errno;
    free(buf);
    close(fd);
    if (got < 0) return bert_fail(err, "cannot read %s: %s", path, strerror(e));
    *crc = c, *bytes = n;
    return 0;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

cJSON *checkpoint_digest_files(const char *dir, const char *except, BertError *err) {
    DIR *d = opendir(dir);
    if (!d) return bert_fail(err, "cannot open %s: %s", dir, strerror(errno)), NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (e->d_name[0] == '.' || (except && !strcmp(e->d_name, except)) || lstat(path, &st) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        ARRAY_RESERVE(names, cap, n + 1, 8);
        names[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, compare_names);   /* the same order every time */
    cJSON *out = cJSON_CreateObject();
    for (size_t i = 0; i < n && out; i++) {
        char path[4096 + 256], hex[16];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        uint32_t crc;
        uint64_t bytes;
        if (file_crc32(path, &crc, &bytes, err) != 0) {
            cJSON_Delete(out), out = NULL;
            break;
        }
        snprintf(hex, sizeof hex, "%08x", crc);
        cJSON *f = cJSON_AddObjectToObject(out, names[i]);
        cJSON_AddNumberToObject(f, "bytes", (double)bytes);
        cJSON_AddStringToObject(f, "crc32", hex);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return out;
}

int checkpoint_verify_files(const char *dir, const cJSON *digests, BertError *err) {
    if (!cJSON_IsObject(digests)) return bert_fail(err, "%s: the recorded file digests are not a JSON object", dir);
    for (const cJSON *f = digests->child; f; f = f->next) {
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(f, "bytes"), *crc = cJSON_GetObjectItemCaseSensitive(f, "crc32");
        if (!f->string || strchr(f->string, '/') || !cJSON_IsNumber(bytes) || !cJSON_IsString(crc))
            return bert_fail(err, "%s: a bad file digest", dir);
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", dir, f->string);
        uint32_t got;
        uint64_t n;
        if (file_crc32(path, &got, &n, err) != 0) return -1;
        char hex[16];
        snprintf(hex, sizeof hex, "%08x", got);
        if ((double)n != bytes->valuedouble)
            return bert_fail(err, "%s holds %llu bytes, not the %.0f written: the file is damaged", path,
                             (unsigned long long)n, bytes->valuedouble);
        if (strcmp(hex, crc->valuestring) != 0)
            return bert_fail(err, "%s does not match its checksum (CRC-32 %s, written %s): the file is damaged", path,
                             hex, crc->valuestring);
    }
    return 0;
}
