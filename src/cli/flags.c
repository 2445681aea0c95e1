#include "cli/flags.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/launcher.h"
#include "io/tokenizer_files.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "train/checkpoint.h"

static const Flag *find_flag(const FlagSpec *spec, const char *name, size_t len) {
    for (int i = 0; i < spec->nflags; i++)
        if (strlen(spec->flags[i].name) == len && strncmp(spec->flags[i].name, name, len) == 0)
            return &spec->flags[i];
    return NULL;
}

/* One vocabulary of flags across the commands: the names of a group stand for each other, so
 * the name a user learnt in one command works in the next (the command's own flag is used when
 * it has exactly one of the group). NVIDIA's and Google's names stay the commands' own. */
static const char *const SYNONYMS[][6] = {
    {"bert_model", "preset", "model", NULL},                        /* a preset name */
    {"config_file", "config", NULL},                                /* a config.json */
    {"train_batch_size", "batch_size", "batch", NULL},              /* sequences per step */
    {"o", "output_file", "output", "out", NULL},                    /* the file written */
};

/* The command's flag that `name` stands for through a synonym group, or NULL. */
static const Flag *find_synonym(const FlagSpec *spec, const char *name, size_t len) {
    for (size_t g = 0; g < sizeof SYNONYMS / sizeof SYNONYMS[0]; g++) {
        bool in_group = false;
        for (int k = 0; SYNONYMS[g][k] && !in_group; k++)
            in_group = strlen(SYNONYMS[g][k]) == len && !strncmp(SYNONYMS[g][k], name, len);
        if (!in_group) continue;
        const Flag *found = NULL;
        int count = 0;
        for (int k = 0; SYNONYMS[g][k]; k++) {
            const Flag *f = find_flag(spec, SYNONYMS[g][k], strlen(SYNONYMS[g][k]));
            if (f) found = f, count++;
        }
        return count == 1 ? found : NULL;
    }
    return NULL;
}

static int parse_bool(const char *s, bool *out) {
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "1") || !strcmp(s, "yes")) { *out = true; return 0; }
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "0") || !strcmp(s, "no")) { *out = false; return 0; }
    return -1;
}

static int set_value(const FlagSpec *spec, const Flag *f, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (f->kind) {
    case FLAG_STRING: case FLAG_OPT_STRING: *(const char **)f->dest = v; return 0;
    case FLAG_BOOL:
        if (parse_bool(v, (bool *)f->dest) == 0) return 0;
        break;
    case FLAG_TRIBOOL: {
        bool b;
        if (parse_bool(v, &b) == 0) { *(int *)f->dest = b; return 0; }
        break;
    }
    case FLAG_INT: {
        long x = strtol(v, &end, 10);
        if (*v && !*end && errno == 0 && x >= INT_MIN && x <= INT_MAX) { *(int *)f->dest = (int)x; return 0; }
        break;
    }
    case FLAG_INT64: {
        long long x = strtoll(v, &end, 10);
        if (*v && !*end && errno == 0) { *(long long *)f->dest = x; return 0; }
        break;
    }
    case FLAG_FLOAT: case FLAG_DOUBLE: {
        double x = strtod(v, &end);
        bool fits = f->kind == FLAG_DOUBLE || fabs(x) <= FLT_MAX;  /* 1e300 as a float would be inf */
        if (*v && !*end && errno == 0 && isfinite(x) && fits) {
            if (f->kind == FLAG_FLOAT) *(float *)f->dest = (float)x; else *(double *)f->dest = x;
            return 0;
        }
        break;
    }
    }
    static const char *kinds[] = {"a string", "an integer", "an integer", "a number", "a number", "true or false",
                                  "true or false", "a string"};
    fprintf(stderr, "bert %s: --%s expects %s, got '%s'\n", spec->command, f->name, kinds[f->kind], v);
    return -1;
}

/* "unknown flag", with the command's closest flag names when one is close (a[0..len) is the
 * flag as typed, dashes included, without its "=value"). */
static void unknown_flag(const FlagSpec *spec, const char *a, size_t len) {
    char (*names)[64] = xmalloc((size_t)(spec->nflags ? spec->nflags : 1) * sizeof *names);
    const char **list = xmalloc((size_t)(spec->nflags ? spec->nflags : 1) * sizeof *list);
    for (int i = 0; i < spec->nflags; i++) {
        snprintf(names[i], sizeof names[i], "%s%s", strlen(spec->flags[i].name) == 1 ? "-" : "--", spec->flags[i].name);
        list[i] = names[i];
    }
    char hint[256];
    if (suggest_names(a, len, list, spec->nflags, hint, sizeof hint) > 0)
        fprintf(stderr, "bert %s: unknown flag '%.*s': %s (see 'bert %s --help')\n", spec->command, (int)len, a, hint,
                spec->command);
    else
        fprintf(stderr, "bert %s: unknown flag '%s' (see 'bert %s --help')\n", spec->command, a, spec->command);
    free(list);
    free(names);
}

int flags_parse(const FlagSpec *spec, int argc, char **argv, char **positional, int *npositional) {
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) {
            if (npos >= spec->max_positional) {
                fprintf(stderr, "bert %s: unexpected argument '%s' (see 'bert %s --help')\n", spec->command, a, spec->command);
                return -1;
            }
            positional[npos++] = argv[i];
            continue;
        }
        const char *name = a + (a[1] == '-' ? 2 : 1);
        if (!strcmp(name, "help") || !strcmp(name, "h")) { flags_usage(spec, stdout); return 1; }
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const Flag *f = find_flag(spec, name, len);
        if (!f) f = find_synonym(spec, name, len);
        if (!f) {
            unknown_flag(spec, a, (size_t)(name - a) + len);
            return -1;
        }
        const char *value;
        if (eq) {
            value = eq + 1;
        } else if (f->kind == FLAG_BOOL || f->kind == FLAG_TRIBOOL) {
            bool b;  /* a following true/false is consumed, otherwise the flag alone means true */
            if (i + 1 < argc && parse_bool(argv[i + 1], &b) == 0) value = argv[++i];
            else value = "true";
        } else if (f->kind == FLAG_OPT_STRING) {   /* the value is the next argument unless it is a flag */
            value = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "";
        } else {
            if (i + 1 >= argc) {
                fprintf(stderr, "bert %s: --%s needs a value\n", spec->command, f->name);
                return -1;
            }
            value = argv[++i];
        }
        if (set_value(spec, f, value) != 0) return -1;
    }
    if (npos < spec->min_positional) {
        fprintf(stderr, "bert %s: missing argument: usage: bert %.*s (see 'bert %s --help')\n", spec->command,
                (int)strcspn(spec->synopsis, "\n"), spec->synopsis, spec->command);
        return -1;
    }
    if (npositional) *npositional = npos;
    return 0;
}

int flags_require(const FlagSpec *spec, const char *names) {
    const Flag *missing[16];
    int n = 0;
    for (const char *p = names; *p;) {
        const size_t len = strcspn(p, ",");
        const Flag *f = find_flag(spec, p, len);
        if (!f || f->kind != FLAG_STRING) die("flags_require: '%.*s' is not a string flag of %s", (int)len, p, spec->command);
        if (!*(const char **)f->dest && n < 16) missing[n++] = f;
        p += len + (p[len] == ',');
    }
    if (n == 0) return 0;
    fprintf(stderr, "bert %s: ", spec->command);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s%s%s", i == 0 ? "" : i + 1 == n ? " and " : ", ", strlen(missing[i]->name) == 1 ? "-" : "--",
                missing[i]->name);
    fprintf(stderr, " %s required (see 'bert %s --help')\n", n == 1 ? "is" : "are", spec->command);
    return -1;
}

void flags_usage(const FlagSpec *spec, FILE *out) {
    fprintf(out, "usage: bert %s\n\n", spec->synopsis);
    for (int i = 0; i < spec->nflags; i++) {
        const Flag *f = &spec->flags[i];
        char left[64];
        snprintf(left, sizeof left, "%s%s", strlen(f->name) == 1 ? "-" : "--", f->name);
        fprintf(out, "  %-30s %s\n", left, f->help);
    }
    bool header = false;   /* the other names the command's flags answer to */
    for (size_t g = 0; g < sizeof SYNONYMS / sizeof SYNONYMS[0]; g++)
        for (int k = 0; SYNONYMS[g][k]; k++) {
            const char *alias = SYNONYMS[g][k];
            const Flag *f = find_flag(spec, alias, strlen(alias)) ? NULL : find_synonym(spec, alias, strlen(alias));
            if (!f) continue;
            if (!header) fprintf(out, "\nalso accepted (the same flag under the name other commands use):\n"), header = true;
            char left[64];
            snprintf(left, sizeof left, "%s%s", strlen(alias) == 1 ? "-" : "--", alias);
            fprintf(out, "  %-30s same as %s%s\n", left, strlen(f->name) == 1 ? "-" : "--", f->name);
        }
}

void flags_note_gpu_fp32(const char *command, bool fp32, bool tf32) {
    int rank, world;
    launcher_rank(&rank, &world);   /* said by the first process of a job, not by each */
    if (fp32 && !tf32 && rank == 0 && strcmp(k_backend_name(), "cpu") != 0)
        fprintf(stderr, "bert %s: note: fp32 on the GPU is true fp32, off the tensor cores: --bf16 or --fp16 for "
                        "mixed precision (as NVIDIA's recipe trains), or --tf32 for fp32 on tensor cores\n", command);
}

int flags_use_device(const char *command, const char *device, bool tf32) {
    char err[1024];
    if (!k_backend_use(device, err, sizeof err)) {
        fprintf(stderr, "bert %s: %s\n", command, err);
        return 2;
    }
    if (!k_set_tf32(tf32)) {
        fprintf(stderr, "bert %s: --tf32: the %s backend has no TF32 products (a GPU's: --device cuda)\n", command,
                k_backend_name());
        return 2;
    }
    return 0;
}

int flags_int8(const char *command) {
    static bool said;
    const int support = k_int8_support();
    if (support == 0) {
        fprintf(stderr, "bert %s: --int8: this backend has no int8 products (the CPU backend needs AVX2; the CUDA "
                        "backend has none)\n", command);
        return 2;
    }
    if (support == 1 && !said) {   /* once per process */
        char what[160];
        k_int8_describe(what, sizeof what);
        fprintf(stderr, "bert %s: --int8: this CPU has no int8 dot-product instructions (VNNI) that oneDNN uses, or "
                        "ONEDNN_MAX_CPU_ISA caps them: the int8 products run on older ones, slower, with the "
                        "weights in 7 bits (8-bit ones would saturate there) (%s)\n", command, what);
        said = true;
    }
    return 0;
}

int flags_init_checkpoint(const char *command, const char **path, char *buf, size_t size) {
    BertError err;
    const int rc = checkpoint_resolve_model(*path, buf, size, NULL, &err);
    if (rc < 0) {
        fprintf(stderr, "bert %s: %s\n", command, err.msg);
        return 1;
    }
    if (rc == 1) fprintf(stderr, "bert %s: --init_checkpoint %s: the newest checkpoint, %s\n", command, *path, buf);
    *path = buf;
    return 0;
}

int flags_vocab_casing(const char *command, const char *vocab_file, int flag, bool quiet, bool *lower) {
    int tokens, cased;
    BertError err;
    if (check_input_file(vocab_file, "--vocab_file", &err) != 0 || tokenizer_vocab_scan(vocab_file, &tokens, &cased, &err) != 0)
        return fprintf(stderr, "bert %s: %s\n", command, err.msg), 1;
    char note[1024];
    *lower = tokenizer_casing(flag, "--do_lower_case", NULL, vocab_file, cased, note, sizeof note);
    if (note[0] && (!quiet || !strncmp(note, "warning:", 8))) fprintf(stderr, "bert %s: %s\n", command, note);
    return 0;
}
