/* `bert vocab`: learn a WordPiece vocabulary (BERT vocab.txt layout) from text files. */

#include "cli/commands.h"
#include "cli/flags.h"
#include "text/wordpiece_files.h"

int cmd_vocab(int argc, char **argv) {
    const char *input = NULL, *output = NULL;
    VocabTrainOptions opt = vocab_train_default_options();
    Flag flags[] = {
        {"input_file", FLAG_STRING, &input, "comma-separated text files or globs (one document or sentence per line)"},
        {"o", FLAG_STRING, &output, "output vocab.txt"},
        {"output_file", FLAG_STRING, &output, "same as -o"},
        {"vocab_size", FLAG_INT, &opt.vocab_size, "lines of vocab.txt, special and unused included (default 30522)"},
        {"do_lower_case", FLAG_BOOL, &opt.do_lower_case, "uncased: lower-case and strip accents first (default true)"},
        {"min_frequency", FLAG_INT, &opt.min_frequency, "pairs seen fewer times are not merged (default 2)"},
        {"num_unused", FLAG_INT, &opt.num_unused, "[unusedN] slots, as BERT's vocabularies (default 994)"},
        {"limit_alphabet", FLAG_INT, &opt.limit_alphabet, "most frequent characters kept; 0 keeps all (default 1000)"},
        {"max_input_chars_per_word", FLAG_INT, &opt.max_input_chars_per_word, "longer words are skipped (default 100)"},
        {"threads", FLAG_INT, &opt.threads, "counting threads (default: all cores)"},
    };
    FlagSpec spec = {"vocab", "vocab --input_file FILES --vocab_size N -o vocab.txt [flags]", flags,
                     (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "input_file,o") != 0) return 2;
    if (opt.min_frequency < 1 || opt.num_unused < 0 || opt.limit_alphabet < 0 || opt.threads < 1 ||
        opt.max_input_chars_per_word < 1) {
        fprintf(stderr, "bert vocab: --min_frequency, --threads, --max_input_chars_per_word must be >= 1; "
                        "--num_unused, --limit_alphabet >= 0\n");
        return 2;
    }
    if (opt.threads > FLAGS_MAX_THREADS) {
        fprintf(stderr, "bert vocab: --threads must be at most %d\n", FLAGS_MAX_THREADS);
        return 2;
    }
    double t0 = now_seconds();
    BertError err;
    WordpieceFilesStats st;
    rc = wordpiece_train_files(input, output, &opt, &st, &err);
    if (rc == 0) {
        fprintf(stderr, "bert vocab: %d files, %.1f MB, %lld words (%ld distinct) -> %d tokens in %s (%.1f s)\n",
                st.files, (double)st.bytes / 1e6, st.words, st.distinct, st.tokens, output, now_seconds() - t0);
        if (st.tokens < opt.vocab_size)
            fprintf(stderr, "bert vocab: note: stopped at %d of %d tokens: no pair left that occurs %d times or more\n",
                    st.tokens, opt.vocab_size, opt.min_frequency);
    } else
        fprintf(stderr, "bert vocab: %s\n", err.msg);
    return rc == 0 ? 0 : 1;
}
