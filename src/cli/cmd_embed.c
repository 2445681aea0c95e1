/* `bert embed`: sentences on stdin (one per line) -> mean-pooled, L2-normalised embeddings
 * (sentence-transformers' pooling), as text on stdout or a .npy file. */
#include <stdio.h>
#include <omp.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/common.h"
#include "io/npy.h"
#include "io/tokenizer_files.h"
#include "model/bert.h"
#include "tasks/embed_run.h"

/* Each chunk of vectors, as it comes: a line of floats per sentence on stdout. */
static int emit_text(void *ctx, const float *v, int n, int hidden, BertError *err) {
    (void)ctx;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < hidden; h++) printf("%.7g%c", v[(size_t)i * hidden + h], h + 1 < hidden ? ' ' : '\n');
    return ferror(stdout) ? bert_fail(err, "error writing the standard output") : 0;
}

/* ... or rows of the .npy file, whose header says the count at the end. */
static int emit_npy(void *ctx, const float *v, int n, int hidden, BertError *err) {
    NpyWriter *w = ctx;
    w->h = hidden;
    return npy_writer_append(w, v, n, err);
}

int cmd_embed(int argc, char **argv) {
    const char *init = NULL, *config = NULL, *vocab_file = NULL, *output = NULL;
    int max_seq = 0, batch = 32, threads = 0;
    const char *device = NULL;
    bool tf32 = false;
    int lower = FLAG_UNSET;
    bool no_normalize = false, bf16 = false, strict = false, int8 = false;
    const Flag flags[] = {
        {"init_checkpoint", FLAG_STRING, &init,
         "a model folder (model.safetensors, config.json, vocab.txt), a weights file, or a bert pretrain "
         "--output_dir (its newest complete ckpt_<step>) (required)"},
        {"config_file", FLAG_STRING, &config, "config.json when --init_checkpoint is a file"},
        {"vocab_file", FLAG_STRING, &vocab_file, "default: the model folder's vocab.txt"},
        {"do_lower_case", FLAG_TRIBOOL, &lower,
         "lower-case and strip accents (uncased models); default what the model folder's tokenizer_config.json "
         "says, else whether its vocabulary has upper-case tokens"},
        {"max_seq_length", FLAG_INT, &max_seq,
         "tokens per sentence, [CLS] and [SEP] included; default 256 (sentence-transformers') or the model's positions"},
        {"batch_size", FLAG_INT, &batch, "sentences per forward; default 32"},
        {"no_normalize", FLAG_BOOL, &no_normalize, "mean-pooled vectors without L2 normalisation"},
        {"output", FLAG_STRING, &output, "write a .npy file (float32 [n, hidden]) instead of text on stdout"},
        {"threads", FLAG_INT, &threads, "OpenMP threads (0: all cores)"},
        {"device", FLAG_STRING, &device, FLAGS_DEVICE_HELP},
        {"tf32", FLAG_BOOL, &tf32, FLAGS_TF32_HELP},
        {"bf16", FLAG_BOOL, &bf16, "matrix products in bf16 (needs avx512_bf16)"},
        {"strict", FLAG_BOOL, &strict, "refuse weights holding NaN or Inf (default: a warning)"},
        {"int8", FLAG_BOOL, &int8, "the encoder's linear layers in int8 (weights per channel, inputs per row, "
                                   "quantized on the fly; VNNI/AMX where the CPU has them)"},
    };
    const FlagSpec spec = {"embed", "embed --init_checkpoint MODEL_DIR|RUN_DIR [flags] < sentences.txt   (one sentence per line)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "init_checkpoint") != 0) return 2;
    if (batch < 1 || max_seq < 0)   /* was "bert_model_create: bad sizes batch=0 ..." (issue 35, D20) */
        return fprintf(stderr, "bert embed: --batch_size %d must be at least 1 and --max_seq_length %d not negative\n",
                       batch, max_seq), 2;
    if (flags_use_device("embed", device, tf32) != 0) return 2;
    if (bf16 && int8) return fprintf(stderr, "bert embed: give at most one of --bf16 and --int8\n"), 2;
    if (int8 && flags_int8("embed") != 0) return 2;
    if (threads > 0) omp_set_num_threads(threads);
    char init_checkpoint[4096 + 64];   /* a run folder's newest checkpoint */
    if (flags_init_checkpoint("embed", &init, init_checkpoint, sizeof init_checkpoint) != 0) return 1;
    char weights[4096], config_found[4096];
    BertError err;
    /* named by their flags: read later, a folder was only "error reading FOLDER" */
    if ((config && check_input_file(config, "--config_file", &err) != 0) ||
        (vocab_file && check_input_file(vocab_file, "--vocab_file", &err) != 0))
        return fprintf(stderr, "bert embed: %s\n", err.msg), 1;
    if (bert_checkpoint_locate(init, config, weights, sizeof weights, config_found, sizeof config_found, &err) != 0)
        return fprintf(stderr, "bert embed: --init_checkpoint %s\n", err.msg), 1;
    /* the casing: the flag, else what the model folder says (io/tokenizer_files.h) */
    TokenizerFolder folder;
    tokenizer_folder_read(init, &folder);
    if (!vocab_file && !folder.vocab_file[0])
        return fprintf(stderr, "bert embed: %s has no vocab.txt: give --vocab_file\n", folder.dir), 1;
    if (!vocab_file) vocab_file = folder.vocab_file;
    int tokens, cased;
    char note[1024];
    if (tokenizer_vocab_scan(vocab_file, &tokens, &cased, &err) != 0)
        return fprintf(stderr, "bert embed: %s\n", err.msg), 1;
    const bool do_lower_case = tokenizer_casing(lower, "--do_lower_case", &folder, vocab_file, cased, note, sizeof note);
    if (note[0]) fprintf(stderr, "bert embed: %s\n", note);
    const EmbedRunOptions eo = {.init_checkpoint = init, .config_file = config, .vocab_file = vocab_file,
                                .do_lower_case = do_lower_case, .normalize = !no_normalize, .bf16 = bf16, .int8 = int8,
                                .max_seq_length = max_seq, .batch_size = batch, .strict = strict};
    EmbedRunResult r;
    NpyWriter npy;
    if (output && npy_writer_open(&npy, output, 1, &err) != 0)   /* the width is known once the model is */
        return fprintf(stderr, "bert embed: %s\n", err.msg), 1;
    EmbedRunOptions run = eo;
    run.emit = output ? emit_npy : emit_text, run.emit_ctx = output ? &npy : NULL;
    rc = embed_run(&run, stdin, &r, &err);
    if (output) {
        npy.h = r.hidden;   /* (also when there were no sentences: shape (0, hidden)) */
        if (rc == 0) rc = npy_writer_commit(&npy, &err);
        else npy_writer_abort(&npy);
    }
    if (rc == 0 && r.nonfinite)
        fprintf(stderr, "bert embed: warning: %s: %zu weights are NaN or infinite (the first in %s); --strict refuses "
                        "such weights\n", init, r.nonfinite, r.nonfinite_tensor);
    if (rc != 0) fprintf(stderr, "bert embed: %s\n", err.msg);
    else fprintf(stderr, "bert embed: %ld sentences (%ld tokens) in %.2f s: %.1f sentences/s\n", r.n, r.tokens,
                 r.seconds, r.seconds > 0 ? r.n / r.seconds : 0);
    return rc ? 1 : 0;
}
