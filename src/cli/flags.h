/* Command-line flags in the style of NVIDIA's / Google's Python scripts:
 *   --name=value, --name value, -o value; booleans as --flag, --flag=true|false|1|0.
 * Unknown flags, missing values and malformed numbers are clear errors. A FLAG_TRIBOOL is a
 * boolean whose destination also says whether it was given: an int left as the caller set it
 * (FLAG_UNSET) when absent, 1 or 0 when given (a default taken from elsewhere, e.g. a model
 * folder's tokenizer_config.json, that the flag overrides). A FLAG_OPT_STRING is a string whose
 * value may be left out (HF's --resume_from_checkpoint [DIR]): alone, or followed by another
 * flag, it is "" (the caller's default meaning); --name VALUE and --name=VALUE give VALUE. */
#ifndef BERT_FLAGS_H
#define BERT_FLAGS_H

#include <stdbool.h>
#include <stdio.h>

typedef enum { FLAG_STRING, FLAG_INT, FLAG_INT64, FLAG_FLOAT, FLAG_DOUBLE, FLAG_BOOL, FLAG_TRIBOOL, FLAG_OPT_STRING } FlagKind;

/* A FLAG_TRIBOOL's value before it is given. */
#define FLAG_UNSET (-1)

typedef struct {
    const char *name;   /* without dashes, e.g. "vocab_file" or "o" */
    FlagKind kind;
    void *dest;         /* const char **, int *, long long *, float *, double *, bool *, int * (tri-state) */
    const char *help;
} Flag;

typedef struct {
    const char *command;   /* "tokenize" */
    const char *synopsis;  /* one line shown under usage */
    const Flag *flags;
    int nflags;
    int min_positional, max_positional;
} FlagSpec;

/* Parses argv[0..argc) (argv[0] is the first argument after the subcommand name).
 * Positional arguments are stored in positional[] (at most spec->max_positional).
 * Returns 0 on success, 1 if --help was given (usage printed to stdout), -1 on error
 * (message and usage hint printed to stderr). */
int flags_parse(const FlagSpec *spec, int argc, char **argv, char **positional, int *npositional);

/* The required flags among names (comma-separated, e.g. "input_file,o"; string flags of spec)
 * that were not given, all named in one message: "bert CMD: --a is required" or "--a, --b and
 * -o are required". 0 when all were given, -1 (message printed) otherwise. */
int flags_require(const FlagSpec *spec, const char *names);

void flags_usage(const FlagSpec *spec, FILE *out);

/* Largest value any --threads flag accepts: libgomp keeps a team's bookkeeping on the
 * stack, so a team of ~100000 threads overflows it (a crash, not an error message). */
#define FLAGS_MAX_THREADS 1024

/* --device: the backend a command's kernels run on (kernels/backend.h), a FLAG_STRING. */
#define FLAGS_DEVICE_HELP "where the kernels run: cpu (default) or cuda (a GPU: the CUDA backend, make GPU=cuda)"
/* --tf32, a FLAG_BOOL beside --device (kernels.h: k_set_tf32). */
#define FLAGS_TF32_HELP \
    "with --device cuda: fp32 products on tensor cores in TF32 (10-bit mantissa operands, fp32 sums; NVIDIA's " \
    "\"TF32\" runs); by default they are true fp32"
/* Selects device's backend (NULL: the CPU) for command, with TF32 products or without: 0, or 2
 * with the reason printed. */
int flags_use_device(const char *command, const char *device, bool tf32);
/* After flags_use_device, for a command that trains: on a GPU, fp32 without --tf32 runs its
 * products in true fp32, off the tensor cores (several times slower than --bf16): said once. */
void flags_note_gpu_fp32(const char *command, bool fp32, bool tf32);
/* For --int8, after flags_use_device: 2 with the message on stderr where the backend has no
 * int8 products; else 0, having said once per process where they run without VNNI (slower). */
int flags_int8(const char *command);
/* --init_checkpoint made the model to load (train/checkpoint.h's checkpoint_resolve_model): a
 * `bert pretrain` run folder becomes its newest complete checkpoint, said in one line on stderr
 * ("bert glue: --init_checkpoint RUN: the newest checkpoint, RUN/ckpt_300"), and *path then
 * points into `buf`. 0, or 1 with the message on stderr. Called before anything reads *path. */
int flags_init_checkpoint(const char *command, const char **path, char *buf, size_t size);
/* The casing of a command that tokenizes with a vocabulary and no model folder (prepare,
 * create_pretraining_data, tokenize): --do_lower_case when given (flag 1 or 0, a FLAG_TRIBOOL),
 * else the vocabulary's (io/tokenizer_files.h's tokenizer_casing: lower-casing when no token
 * holds an upper-case letter), as every command that reads a model infers it, so data is
 * prepared with the casing pretrain records for the model. The choice is said on stderr unless
 * quiet (a warning always). 0, or 1 with the message on stderr. */
int flags_vocab_casing(const char *command, const char *vocab_file, int flag, bool quiet, bool *lower);

#endif
