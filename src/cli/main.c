/* The `bert` program: one binary, one subcommand per stage of the BERT system. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/common.h"

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
    {"embed", cmd_embed, "sentence embeddings (mean-pooled, L2-normalised) of stdin's lines, text or .npy"},
    {"squad", cmd_squad, "SQuAD v1.1/v2.0 fine-tuning and prediction (NVIDIA run_squad.py's flags)"},
    {"bench_infer", cmd_bench_infer, "inference speed and latency on a task's real lengths: padded, dynamic, packed"},
    {"glue", cmd_glue, "GLUE fine-tuning, dev metrics and test predictions (NVIDIA run_glue.py's flags)"},
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
}

int main(int argc, char **argv) {
    signals_start();   /* first, before any thread: stop signals go to one thread, never a handler (core/common.h) */
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        print_help(stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].run(argc - 2, argv + 2);
    fprintf(stderr, "bert: unknown command '%s'\n\n", argv[1]);
    print_help(stderr);
    return 2;
}
