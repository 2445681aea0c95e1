/* `bert create_pretraining_data`: Google's create_pretraining_data.py, same flags, same
 * instances, written as an NVIDIA-layout HDF5 shard. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "data/progress.h"
#include "data/pretraining.h"

static void print_summary(const PretrainingStats *st, const char *output_file, double seconds) {
    double per = seconds > 0 ? seconds : 1;
    fprintf(stderr,
            "wrote %zu instances to %s: %zu documents, %zu sentences, %zu tokens from %.1f MB in %.2f s "
            "(%.1f MB/s, %.0f instances/s; read %.2f s, generate %.2f s, write %.2f s; peak RSS %.0f MB)\n",
            st->instances, output_file, st->documents, st->sentences, st->tokens, st->read.bytes / 1e6,
            seconds, st->read.bytes / 1e6 / per, st->instances / per, st->seconds_read,
            st->seconds_generate, st->seconds_write, peak_rss_bytes() / 1e6);
    if (st->read.invalid_utf8)
        fprintf(stderr, "warning: %ld bytes of invalid UTF-8 were dropped (Python would have stopped)\n",
                st->read.invalid_utf8);
}

/* Whether an output is also an input (the comma-separated names, globs expanded as the
 * reader expands them), which the final rename would replace; its name goes to found. */
static bool output_among_inputs(const char *inputs, const char *outputs, char *found, size_t found_len) {
    char *in = xstrdup(inputs), *out = xstrdup(outputs), *save_in = NULL, *save_out = NULL;
    found[0] = 0;
    for (char *o = strtok_r(out, ",", &save_out); o && !found[0]; o = strtok_r(NULL, ",", &save_out)) {
        strcpy(in, inputs);
        for (char *i = strtok_r(in, ",", &save_in); i && !found[0]; i = strtok_r(NULL, ",", &save_in)) {
            glob_t g;
            if (strpbrk(i, "*?[") && glob(i, 0, NULL, &g) == 0) {
                for (size_t k = 0; k < g.gl_pathc && !found[0]; k++)
                    if (is_same_file(g.gl_pathv[k], o)) snprintf(found, found_len, "%s", o);
                globfree(&g);
            } else if (is_same_file(i, o)) {
                snprintf(found, found_len, "%s", o);
            }
        }
    }
    free(in);
    free(out);
    return found[0] != 0;
}

int cmd_create_pretraining_data(int argc, char **argv) {
    PretrainingOptions opt = pretraining_default_options();
    const char *input_file = NULL, *output_file = NULL, *vocab_file = NULL;
    long long seed = opt.random_seed;
    int max_chars = 200;
    bool quiet = false;
    int lower = FLAG_UNSET;
    const Flag flags[] = {
        {"input_file", FLAG_STRING, &input_file, "input text, one sentence per line, blank line between documents (comma-separated, globs)"},
        {"output_file", FLAG_STRING, &output_file, "output HDF5 shard (comma-separated: instances dealt round-robin)"},
        {"vocab_file", FLAG_STRING, &vocab_file, "WordPiece vocabulary (vocab.txt)"},
        {"do_lower_case", FLAG_TRIBOOL, &lower, "lower-case and strip accents (uncased models); default from the vocabulary: true when no token holds an upper-case letter (Google's script: always true), as pretrain records it"},
        {"do_whole_word_mask", FLAG_BOOL, &opt.do_whole_word_mask, "mask all WordPieces of a word together; default false"},
        {"max_seq_length", FLAG_INT, &opt.max_seq_length, "tokens per instance; default 128"},
        {"max_predictions_per_seq", FLAG_INT, &opt.max_predictions_per_seq, "masked positions per instance; default 20"},
        {"random_seed", FLAG_INT64, &seed, "seed of Python's random.Random; default 12345"},
        {"dupe_factor", FLAG_INT, &opt.dupe_factor, "passes over the data with different masks; default 10"},
        {"masked_lm_prob", FLAG_DOUBLE, &opt.masked_lm_prob, "fraction of tokens masked; default 0.15"},
        {"short_seq_prob", FLAG_DOUBLE, &opt.short_seq_prob, "probability of a shorter target length; default 0.1"},
        {"max_input_chars_per_word", FLAG_INT, &max_chars, "longer words become [UNK]; default 200 (Google's tokenization.py)"},
        {"spool_memory_mb", FLAG_DOUBLE, &opt.spool_memory_mb, "instances kept in memory up to this, then spooled to disk; default 256"},
        {"quiet", FLAG_BOOL, &quiet, "no progress or summary on stderr"},
    };
    const FlagSpec spec = {"create_pretraining_data",
                           "create_pretraining_data --input_file A.txt[,B*.txt] --output_file X.hdf5 --vocab_file vocab.txt [flags]\n"
                           "  (sentence-per-line text -> masked-LM/next-sentence instances, identical to Google's script)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int prc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (prc != 0) return prc > 0 ? 0 : 2;
    if (flags_require(&spec, "input_file,output_file,vocab_file") != 0) return 2;
    opt.random_seed = (int64_t)seed;
    char clash[4096];
    if (output_among_inputs(input_file, output_file, clash, sizeof clash) ||   /* the shard would replace its text */
        output_among_inputs(vocab_file, output_file, clash, sizeof clash)) {     /* ... or its vocabulary */
        fprintf(stderr, "bert create_pretraining_data: output '%s' is also an input\n", clash);
        return 2;
    }
    if (max_chars < 1) {  /* 0 would make every word [UNK]; a negative one no word */
        fprintf(stderr, "bert create_pretraining_data: --max_input_chars_per_word must be >= 1, got %d\n", max_chars);
        return 2;
    }
    BertError err;
    if (pretraining_check_options(&opt, &err) != 0) {
        fprintf(stderr, "bert create_pretraining_data: %s\n", err.msg);
        return 2;
    }
    if (flags_vocab_casing("create_pretraining_data", vocab_file, lower, quiet, &opt.do_lower_case) != 0) return 1;
    Vocab *vocab;
    if (vocab_load(&vocab, vocab_file, &err) != 0) {
        fprintf(stderr, "bert create_pretraining_data: %s\n", err.msg);
        return 1;
    }
    TokenizerOptions topt = tokenizer_default_options();
    topt.do_lower_case = opt.do_lower_case;
    topt.max_input_chars_per_word = max_chars;
    Tokenizer *tok = tokenizer_new(vocab, &topt);
    if (!tok) {
        fprintf(stderr, "bert create_pretraining_data: %s has no [UNK] token\n", vocab_file);
        vocab_free(vocab);
        return 1;
    }
    Progress progress;
    progress_init(&progress, "reading", input_bytes_of(input_file), quiet);
    PretrainingStats st;
    double t0 = now_seconds();
    int rc = create_pretraining_data(&opt, input_file, output_file, tok, &st,
                                     progress_read_callback, &progress, &err);
    progress_done(&progress);
    double seconds = now_seconds() - t0;
    if (rc != 0) {
        fprintf(stderr, "bert create_pretraining_data: %s\n", err.msg);
    } else if (!quiet) {
        print_summary(&st, output_file, seconds);
    }
    tokenizer_free(tok);
    vocab_free(vocab);
    return rc == 0 ? 0 : 1;
}
