/* `bert tokenize`: UTF-8 text on stdin, one text per line -> one line of WordPiece tokens
 * (or ids) per input line, exactly as google-research/bert's FullTokenizer; the streaming,
 * multi-threaded tokenization is text/tokenize_stream.h. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "text/tokenize_stream.h"
#include "text/tokenizer.h"

/* The input block is one allocation; beyond this it could not be had anyway. */
#define MAX_BLOCK_KIB (1 << 20)

/* "a,b,c" -> {"a","b","c"} (pointers into a copy owned by *storage). */
static int split_commas(const char *list, char **storage, const char ***out) {
    int n = 0;
    *out = NULL;
    *storage = NULL;
    if (!list || !*list) return 0;
    *storage = xstrdup(list);
    *out = xmalloc((strlen(list) + 1) * sizeof **out);
    for (char *save = NULL, *s = strtok_r(*storage, ",", &save); s; s = strtok_r(NULL, ",", &save)) (*out)[n++] = s;
    return n;
}

int cmd_tokenize(int argc, char **argv) {
    const char *vocab_file = NULL, *never_split = NULL;
    bool ids = false, offsets = false, basic = false, bench = false;
    int lower_flag = FLAG_UNSET;
    int max_chars = 100, threads = omp_get_max_threads(), block_kib = 4096, repeat = 3;
    Flag flags[] = {
        {"vocab_file", FLAG_STRING, &vocab_file, "vocab.txt, one token per line (required unless --basic)"},
        {"do_lower_case", FLAG_TRIBOOL, &lower_flag, "uncased model: lower-case and strip accents (default from the vocabulary: true when no token holds an upper-case letter; true with --basic and no vocabulary)"},
        {"ids", FLAG_BOOL, &ids, "print vocabulary ids instead of tokens"},
        {"max_input_chars_per_word", FLAG_INT, &max_chars, "longer words become [UNK] (default 100, as NVIDIA/HF; Google uses 200)"},
        {"never_split", FLAG_STRING, &never_split, "comma-separated tokens kept whole, e.g. [MASK],[CLS],[SEP]"},
        {"offsets", FLAG_BOOL, &offsets, "append @start:end (byte span in the input line) to each token"},
        {"basic", FLAG_BOOL, &basic, "BasicTokenizer words only (no WordPiece)"},
        {"threads", FLAG_INT, &threads, "tokenizing threads (default: all cores)"},
        {"block_kib", FLAG_INT, &block_kib, "input block size; longer lines are cut at whitespace (default 4096)"},
        {"bench", FLAG_BOOL, &bench, "time tokenization of all of stdin and print MB/s instead of tokens"},
        {"repeat", FLAG_INT, &repeat, "timed rounds for --bench; the best is reported (default 3)"},
    };
    FlagSpec spec = {"tokenize", "tokenize --vocab_file V [flags] < text > tokens", flags,
                     (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!basic && flags_require(&spec, "vocab_file") != 0) return 2;   /* --basic needs no vocabulary */
    if (max_chars < 1 || threads < 1 || block_kib < 1 || repeat < 1) {
        fprintf(stderr, "bert tokenize: --max_input_chars_per_word, --threads, --block_kib and --repeat must be >= 1\n");
        return 2;
    }
    if (threads > FLAGS_MAX_THREADS || block_kib > MAX_BLOCK_KIB) {
        fprintf(stderr, "bert tokenize: --threads must be at most %d and --block_kib at most %d (1 GiB)\n",
                FLAGS_MAX_THREADS, MAX_BLOCK_KIB);
        return 2;
    }
    bool lower = lower_flag != 0;   /* --basic without a vocabulary: lower-casing unless told not to */
    if (vocab_file && flags_vocab_casing("tokenize", vocab_file, lower_flag, false, &lower) != 0) return 1;
    Vocab *vocab = NULL;
    BertError err;
    if (vocab_file && vocab_load(&vocab, vocab_file, &err) != 0) {
        fprintf(stderr, "bert tokenize: %s\n", err.msg);
        return 1;
    }
    char *never_split_storage;
    const char **never_split_list;
    TokenizerOptions opt = tokenizer_default_options();
    opt.do_lower_case = lower;
    opt.max_input_chars_per_word = max_chars;
    opt.n_never_split = split_commas(never_split, &never_split_storage, &never_split_list);
    opt.never_split = never_split_list;
    for (int i = 0; i < opt.n_never_split; i++)
        if (utf8proc_decompose((const utf8proc_uint8_t *)never_split_list[i], -1, NULL, 0, UTF8PROC_NULLTERM) < 0) {
            fprintf(stderr, "bert tokenize: --never_split entry %d is not valid UTF-8\n", i + 1);
            vocab_free(vocab);
            free(never_split_storage);
            free(never_split_list);
            return 2;
        }
    Tokenizer *tok = tokenizer_new(vocab, &opt);
    if (!tok) {
        fprintf(stderr, "bert tokenize: %s has no [UNK] token\n", vocab_file);
        vocab_free(vocab);
        free(never_split_storage);
        free(never_split_list);
        return 1;
    }
    int status = 0;
    if (bench) {
        TokenizeBenchResult b;
        tokenize_bench(tok, STDIN_FILENO, threads, repeat, &b);
        /* CPU seconds too: on a shared machine wall time includes waiting for a core. */
        printf("threads=%d lines=%d bytes=%zu tokens=%ld seconds=%.4f MB/s=%.2f cpu_seconds=%.4f MB/cpu_s=%.2f\n",
               threads, b.lines, b.bytes, b.tokens, b.seconds, (double)b.bytes / b.seconds / 1e6, b.cpu_seconds,
               (double)b.bytes / b.cpu_seconds / 1e6);
    } else {
        const TokenizeStreamOptions so = {ids, offsets, basic, threads, (size_t)block_kib * 1024};
        TokenizeStreamStats st;
        tokenize_stream(tok, &so, STDIN_FILENO, stdout, &st);
        if (st.invalid_utf8)
            fprintf(stderr, "bert tokenize: warning: %ld invalid UTF-8 sequences replaced by U+FFFD (dropped)\n",
                    st.invalid_utf8);
        if (st.forced_cuts)
            fprintf(stderr, "bert tokenize: warning: %ld line fragments of %d KiB had no whitespace or punctuation and were cut there\n",
                    st.forced_cuts, block_kib);
        if (st.read_error) {
            fprintf(stderr, "bert tokenize: error reading standard input\n");
            status = 1;
        }
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "bert tokenize: error writing output\n");
            status = 1;
        }
    }
    tokenizer_free(tok);
    vocab_free(vocab);
    free(never_split_storage);
    free(never_split_list);
    return status;
}
