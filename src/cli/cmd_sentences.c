/* `bert sentences`: one document per line (files or stdin) -> one sentence per line, a
 * blank line after each document: the shard layout, without sharding. Sentences are
 * NLTK punkt's (English), as NVIDIA's TextSharding.py gets them from nltk.sent_tokenize. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/utf8.h"
#include "data/corpus.h"

static long long split_stream(FILE *in, FILE *out, const SentenceSplitter *sp, long long *invalid) {
    SentenceList sl;
    sentence_list_init(&sl);
    char *line = NULL, *clean = NULL;
    size_t line_cap = 0, clean_cap = 0;
    long long docs = 0;
    ssize_t got;
    while ((got = getline(&line, &line_cap, in)) >= 0) {
        size_t n = utf8_sanitize(line, (size_t)got, &clean, &clean_cap, invalid);
        n = utf8_rstrip_len(clean, n);
        if (n == 0) continue; /* blank lines separate nothing: NVIDIA skips them */
        write_document_sentences(out, sp, &sl, clean, n);
        docs++;
    }
    free(line);
    free(clean);
    sentence_list_free(&sl);
    return docs;
}

int cmd_sentences(int argc, char **argv) {
    const char *out_path = NULL;
    Flag flags[] = {{"o", FLAG_STRING, &out_path, "output file, written atomically (default stdout)"}};
    char *inputs[64];
    int n_inputs = 0;
    FlagSpec spec = {"sentences", "sentences [FILE...] [-o OUT]   (stdin when no FILE)", flags, 1, 0, 64};
    int rc = flags_parse(&spec, argc, argv, inputs, &n_inputs);
    if (rc != 0) return rc > 0 ? 0 : 2;
    AtomicFile af;
    BertError err;
    FILE *out = stdout;
    for (int i = 0; out_path && i < n_inputs; i++)
        if (is_same_file(inputs[i], out_path)) {  /* the rename at the end would replace the input */
            fprintf(stderr, "bert sentences: output '%s' is input '%s'\n", out_path, inputs[i]);
            return 2;
        }
    FileSet *files = file_set_new((const char *const *)inputs, n_inputs);
    int first, second, twice = file_set_duplicate(files, &first, &second);
    file_set_free(files);
    if (twice) {  /* the same file twice (by any name) would be split twice */
        fprintf(stderr, "bert sentences: '%s' and '%s' are the same file\n", inputs[first], inputs[second]);
        return 2;
    }
    if (out_path) {
        if (atomic_open(&af, out_path, &err) != 0) {
            fprintf(stderr, "bert sentences: %s\n", err.msg);
            return 1;
        }
        out = af.fp;
    }
    SentenceSplitter *sp = sentence_splitter_new();
    long long invalid = 0;
    rc = 0;
    for (int i = 0; i < (n_inputs ? n_inputs : 1) && rc == 0; i++) {
        const char *name = n_inputs ? inputs[i] : "standard input";
        FILE *in = n_inputs ? fopen(name, "rb") : stdin;
        if (!in) {
            fprintf(stderr, "bert sentences: cannot open '%s': %s\n", name, strerror(errno));
            rc = 1;
            break;
        }
        errno = 0;
        split_stream(in, out, sp, &invalid);
        if (ferror(in)) {  /* e.g. a directory: getline fails at once, which is not an empty file */
            fprintf(stderr, "bert sentences: error reading '%s': %s\n", name, strerror(errno));
            rc = 1;
        }
        if (n_inputs) fclose(in);
    }
    sentence_splitter_free(sp);
    if (invalid) fprintf(stderr, "bert sentences: %lld invalid UTF-8 bytes replaced by U+FFFD\n", invalid);
    if (out_path) {
        if (rc != 0) atomic_abort(&af);
        else if (atomic_commit(&af, &err) != 0) {
            fprintf(stderr, "bert sentences: %s\n", err.msg);
            rc = 1;
        }
    } else if (fflush(stdout) != 0 || ferror(stdout)) {   /* a full disk, a closed pipe: say so */
        fprintf(stderr, "bert sentences: writing to standard output failed: %s\n", strerror(errno ? errno : EIO));
        rc = 1;
    }
    return rc;
}
