/* The `bert` program: one binary, one subcommand per stage of the BERT system. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/commands.h"
#include "core/common.h"
#include "core/version.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/kernels.h"
#include "train/comm.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} Command;

static const Command COMMANDS[] = {
    {"tokenize", cmd_tokenize, "BERT BasicTokenizer + WordPiece: text on stdin -> tokens or ids"},
    {"vocab", cmd_vocab, "learn a WordPiece vocabulary from a corpus"},
    {"format", cmd_format, "Wikipedia XML dump or a folder of books -> plain-text documents"},
    {"shard", cmd_shard, "one-document-per-line text -> NVIDIA-style training/test sentence shards"},
    {"sentences", cmd_sentences, "one document per line -> one sentence per line (NLTK punkt, English)"},
    {"create_pretraining_data", cmd_create_pretraining_data, "Google's MLM+NSP example creation -> HDF5 shard"},
    {"prepare", cmd_prepare, "corpus -> sentences -> shards -> phase-1/phase-2 HDF5 (the whole chain)"},
    {"train_demo", cmd_train_demo, "short training run of a small model on generated data"},
    {"convert", cmd_convert, "a checkpoint (NVIDIA .pt, HF .bin, Google TensorFlow, safetensors) -> an HF model folder"},
    {"embed", cmd_embed, "sentence embeddings (mean-pooled, L2-normalised) of stdin's lines, text or .npy"},
    {"serve", cmd_serve, "the model behind HTTP: OpenAI /v1/embeddings, TEI /embed and /predict, dynamic batching, /metrics"},
    {"squad", cmd_squad, "SQuAD v1.1/v2.0 fine-tuning and prediction (NVIDIA run_squad.py's flags)"},
    {"bench_infer", cmd_bench_infer, "inference speed and latency on a task's real lengths: padded, dynamic, packed"},
    {"glue", cmd_glue, "GLUE fine-tuning, dev metrics and test predictions (NVIDIA run_glue.py's flags)"},
    {"classify", cmd_classify, "sequence classification on CSV/TSV/JSONL: single-label, regression, multi-label (HF run_classification.py's flags)"},
    {"ner", cmd_ner, "token classification (NER) on CoNLL files: fine-tuning, entity F1, predictions (HF run_ner.py's flags)"},
    {"pretrain", cmd_pretrain, "pre-training from HDF5 shards: LAMB, two phases, accumulation, exact resume"},
    {"bench", cmd_bench, "training and inference throughput of a preset (seq/s, GFLOP/s, memory)"},
    {"bench_allreduce", cmd_bench_allreduce, "bert.c's bucketed gradient reduction timed alone under mpirun (GB/s)"},
    {"check_shards", cmd_check_shards, "read and validate HDF5 shards, each in a child process: corrupt files named"},
    {"squad_eval", cmd_squad_eval, "official SQuAD v1.1 / v2.0 metrics (exact match, F1) of a predictions file"},
    {"plot", cmd_plot, "training curves (loss, accuracy, learning rate) from DLLogger logs -> SVG"},
};
static const int NCOMMANDS = (int)(sizeof COMMANDS / sizeof COMMANDS[0]);

static void print_help(FILE *out) {
    fprintf(out, "bert.c: BERT data preparation, pre-training, fine-tuning and inference in C\n\n"
                 "usage: bert <command> [flags]   (bert <command> --help for its flags)\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-26s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(out, "  %-26s %s\n", "help", "this list");
    fprintf(out, "  %-26s %s\n", "--version", "the version and the build: GEMM library, ISA, MPI, CUDA");
}

/* The instruction sets the compiler was allowed (-march=native: the building machine's). */
static const char *compiled_isa(void) {
    return ""
#ifdef __AVX512F__
           " avx512f"
#endif
#ifdef __AVX512BW__
           " avx512bw"
#endif
#ifdef __AVX512VNNI__
           " avx512vnni"
#endif
#ifdef __AVX512BF16__
           " avx512bf16"
#endif
#ifdef __AMX_TILE__
           " amx"
#endif
#ifdef __AVX2__
           " avx2"
#endif
#ifdef __FMA__
           " fma"
#endif
           "";
}

/* `bert --version`: the version and what this build runs on, as the reports of `bert bench`
 * name them (sgemm_describe: the GEMM library and the ISA it picked on this CPU). */
static void print_version(void) {
    char gemm[256], bf16[256], mpi[128];
    sgemm_describe(gemm, sizeof gemm), k_bf16_describe(bf16, sizeof bf16), comm_describe(mpi, sizeof mpi);
    const char *isa = compiled_isa();
    printf("bert.c %s\n", BERT_VERSION);
    printf("  GEMM      %s\n", gemm);
    printf("  ISA       compiled for x86-64%s; bf16 products: %s\n", *isa ? isa : " (baseline)", bf16);
    printf("  MPI       %s (used only when started by mpirun or srun)\n", mpi);
    printf("  CUDA      a backend loaded at run time by --device cuda: libbert_cuda.so beside bert, build-cuda/ or "
           "$BERT_CUDA_LIB (make GPU=cuda cuda-build; docs/gpu.md)\n");
#if defined(__clang__)
    const char *compiler = "clang " __clang_version__;
#else
    const char *compiler = "gcc " __VERSION__;
#endif
#if defined(__SANITIZE_ADDRESS__)
    printf("  compiler  %s, AddressSanitizer\n", compiler);
#else
    printf("  compiler  %s\n", compiler);
#endif
}

/* Every write to the standard output is checked (issue 35, D11: embed and squad_eval lost
 * their output to a full disk with exit status 0), and so are the logs written along the way
 * (note_write_error): a command that succeeded otherwise exits 1 naming the failure. */
static int check_writes(const char *command, int rc) {
    const int flushed = fflush(stdout), e = errno;
    if (rc != 0) return rc;   /* the command has said what went wrong */
    if (flushed != 0 || ferror(stdout)) {
        fprintf(stderr, "bert %s: error writing the standard output%s%s\n", command, flushed ? ": " : "",
                flushed ? strerror(e) : "");
        return 1;
    }
    if (noted_write_error()) {
        fprintf(stderr, "bert %s: %s\n", command, noted_write_error());
        return 1;
    }
    return 0;
}

/* A closed standard stream (`>&-`) gets /dev/null, so that no file the command opens takes its
 * number: a closed standard output is opened read-only, so writes to it fail and are reported. */
static void keep_standard_streams(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int got = open("/dev/null", fd == 2 ? O_WRONLY : O_RDONLY);
        if (got >= 0 && got != fd) dup2(got, fd), close(got);
    }
}

/* `bert serve` shares the cores between its compute worker's OpenMP team and the threads that
 * read requests: idle OpenMP threads that spin (libgomp's default) take the cores from them
 * (measured: 25 against 100 requests/s at concurrency 8 on 2 cores, bench/run_serve_bench.sh).
 * libgomp reads OMP_WAIT_POLICY when it loads, before main, so the server runs itself again
 * with it set to passive, unless the user chose a policy. */
static void serve_with_passive_waiting(char **argv) {
    if (getenv("OMP_WAIT_POLICY")) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);   /* on failure: serve as it is */
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "serve")) serve_with_passive_waiting(argv);
    keep_standard_streams();
    signals_start();   /* first, before any thread: stop signals go to one thread, never a handler (core/common.h) */
    if (argc >= 3 && !strcmp(argv[1], "help")) {   /* bert help COMMAND: the command's own help */
        char *help_args[] = {(char *)"--help", NULL};
        for (int i = 0; i < NCOMMANDS; i++)
            if (!strcmp(argv[2], COMMANDS[i].name)) return check_writes(argv[2], COMMANDS[i].run(1, help_args));
    }
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        print_help(stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        print_version();
        return check_writes("--version", 0);
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return check_writes(argv[1], COMMANDS[i].run(argc - 2, argv + 2));
    const char *names[sizeof COMMANDS / sizeof COMMANDS[0] + 2] = {"help", "--version"};
    for (int i = 0; i < NCOMMANDS; i++) names[2 + i] = COMMANDS[i].name;
    char hint[256];
    if (suggest_names(argv[1], strlen(argv[1]), names, 2 + NCOMMANDS, hint, sizeof hint) > 0)
        fprintf(stderr, "bert: unknown command '%s': %s\n\n", argv[1], hint);
    else
        fprintf(stderr, "bert: unknown command '%s'\n\n", argv[1]);
    print_help(stderr);
    return 2;
}
