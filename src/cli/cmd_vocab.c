/* `bert vocab`: learn a WordPiece vocabulary (BERT vocab.txt layout) from text files. */
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "text/wordpiece_trainer.h"

/* The files named by the comma-separated globs in list, in order (a pattern that matches
 * nothing stays as written, so reading it names it). Free with free_paths, also on error. */
static int expand_inputs(const char *list, char ***paths, int *n, BertError *err) {
    char *copy = xstrdup(list);
    int cap = 0, rc = 0;
    *paths = NULL;
    *n = 0;
    for (char *save = NULL, *pat = strtok_r(copy, ",", &save); pat && rc == 0; pat = strtok_r(NULL, ",", &save)) {
        glob_t g;
        if (glob(pat, GLOB_NOCHECK, NULL, &g) != 0) {
            rc = bert_fail(err, "cannot expand --input_file pattern '%s'", pat);
            break;
        }
        for (size_t i = 0; i < g.gl_pathc; i++) {
            ARRAY_RESERVE(*paths, cap, (size_t)*n + 1, 16);
            (*paths)[(*n)++] = xstrdup(g.gl_pathv[i]);
        }
        globfree(&g);
    }
    free(copy);
    return rc;
}

/* Counts the words of every file matched by the comma-separated globs in list. */
static int count_inputs(const char *list, const char *output, WordCounts *wc, int threads, size_t *bytes, int *files,
                        BertError *err) {
    char **paths;
    int n, first, second, rc = expand_inputs(list, &paths, &n, err);
    FileSet *inputs = file_set_new((const char *const *)paths, n);
    if (rc == 0 && file_set_duplicate(inputs, &first, &second))  /* its words would be counted twice */
        rc = bert_fail(err, "input files '%s' and '%s' are the same file", paths[first], paths[second]);
    else if (rc == 0 && (first = file_set_find(inputs, output)) >= 0)  /* the rename at the end would replace it */
        rc = bert_fail(err, "output '%s' is input '%s'", output, paths[first]);
    file_set_free(inputs);
    for (int i = 0; i < n && rc == 0; i++) {
        char *data;
        size_t len;
        if (read_file(paths[i], &data, &len, err) != 0) {
            rc = -1;
            break;
        }
        word_counts_add_text(wc, data, len, threads);
        free(data);
        *bytes += len;
        (*files)++;
    }
    free_paths(paths, n);
    return rc;
}

static int write_vocab(const char *path, char **tokens, int n, BertError *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) return -1;
    for (int i = 0; i < n; i++) fprintf(af.fp, "%s\n", tokens[i]);
    return atomic_commit(&af, err);
}

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
    if (!input || !output) {
        fprintf(stderr, "bert vocab: --input_file and -o are required\n");
        return 2;
    }
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
    WordCounts *wc = word_counts_new(opt.do_lower_case, opt.max_input_chars_per_word);
    size_t bytes = 0;
    int files = 0;
    char **tokens = NULL;
    int n = 0;
    rc = count_inputs(input, output, wc, opt.threads, &bytes, &files, &err);
    if (rc == 0) rc = wordpiece_train(wc, &opt, &tokens, &n, &err);
    if (rc == 0) rc = write_vocab(output, tokens, n, &err);
    if (rc == 0) {
        fprintf(stderr, "bert vocab: %d files, %.1f MB, %lld words (%ld distinct) -> %d tokens in %s (%.1f s)\n", files,
                (double)bytes / 1e6, word_counts_total(wc), word_counts_distinct(wc), n, output, now_seconds() - t0);
        if (n < opt.vocab_size)
            fprintf(stderr, "bert vocab: note: stopped at %d of %d tokens: no pair left that occurs %d times or more\n", n,
                    opt.vocab_size, opt.min_frequency);
    } else
        fprintf(stderr, "bert vocab: %s\n", err.msg);
    for (int i = 0; i < n; i++) free(tokens[i]);
    free(tokens);
    word_counts_free(wc);
    return rc == 0 ? 0 : 1;
}
