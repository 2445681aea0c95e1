/* `bert vocab`'s run (text/wordpiece_files.h). */
#include "text/wordpiece_files.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

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

int wordpiece_train_files(const char *input_globs, const char *output, const VocabTrainOptions *opt,
                          WordpieceFilesStats *st, BertError *err) {
    *st = (WordpieceFilesStats){0};
    WordCounts *wc = word_counts_new(opt->do_lower_case, opt->max_input_chars_per_word);
    char **tokens = NULL;
    int n = 0;
    int rc = count_inputs(input_globs, output, wc, opt->threads, &st->bytes, &st->files, err);
    if (rc == 0) rc = wordpiece_train(wc, opt, &tokens, &n, err);
    if (rc == 0) rc = write_vocab(output, tokens, n, err);
    st->words = word_counts_total(wc), st->distinct = word_counts_distinct(wc), st->tokens = n;
    for (int i = 0; i < n; i++) free(tokens[i]);
    free(tokens);
    word_counts_free(wc);
    return rc;
}
