/* `bert tokenize` and `bert vocab` as programs: output format, long lines in bounded
 * blocks, threads, bad flags and bad input; and the other subcommands' answers to the
 * hostile flags and inputs that once crashed them. Runs the bert binary of the same build
 * (./bert for build/, build-asan/bert for build-asan/). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/common.h"
#include "test.h"
#include "test_util.h"

#define VOCAB "data/vocab/bert-base-uncased-vocab.txt"
#define CASED_VOCAB "data/vocab/bert-base-cased-vocab.txt"

static char bert[1024], dir[64];

static void write_file(const char *name, const char *data, size_t len) {
    char path[640];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

/* Contents of dir/name (NUL-terminated; caller frees), or NULL. */
static char *slurp(const char *name) {
    char path[640], *data = NULL;
    size_t len;
    BertError err;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return read_file(path, &data, &len, &err) == 0 ? data : NULL;
}

static bool exists(const char *name) {
    char path[640];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Runs `bert <args> < dir/in > dir/out 2> dir/err`; returns the exit status. */
static int run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s < in > out 2> err", dir, bert, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run_on(const char *input, const char *args, char **out) {
    write_file("in", input, strlen(input));
    int rc = run(args);
    *out = slurp("out");
    return rc;
}

static void test_output_formats(void) {
    char *out;
    CHECK(run_on("Hello, World!\n\nunaffable", "tokenize --vocab_file " VOCAB, &out) == 0);
    CHECKF(out && !strcmp(out, "hello , world !\n\nuna ##ffa ##ble\n"), "got '%s'", out);
    free(out);
    CHECK(run_on("Hello, World!\n", "tokenize --vocab_file " VOCAB " --ids", &out) == 0);
    CHECKF(out && !strcmp(out, "7592 1010 2088 999\n"), "got '%s'", out);
    free(out);
    CHECK(run_on("Héllo x\n", "tokenize --vocab_file=" VOCAB " --offsets", &out) == 0);
    CHECKF(out && !strcmp(out, "hello@0:6 x@7:8\n"), "got '%s'", out);
    free(out);
    CHECK(run_on("Héllo [MASK].\n", "tokenize --vocab_file " VOCAB " --do_lower_case=false --never_split [MASK]", &out) == 0);
    CHECKF(out && !strcmp(out, "[UNK] [MASK] .\n"), "got '%s'", out);  /* uncased vocab has no "H..." */
    free(out);
    CHECK(run_on("Ünïcödé Words\n", "tokenize --basic", &out) == 0);
    CHECKF(out && !strcmp(out, "unicode words\n"), "got '%s'", out);
    free(out);
    CHECK(run_on("", "tokenize --vocab_file " VOCAB, &out) == 0);
    CHECKF(out && !strcmp(out, ""), "got '%s'", out);
    free(out);
}

/* Long lines read in 8 KiB blocks (cut at whitespace or punctuation) give exactly what
 * the whole line gives; so does tokenizing on 1 or 2 threads. */
static void test_long_lines_and_threads(void) {
    size_t cap = 1 << 21, len = 0;
    char *text = xmalloc(cap + 64);
    const char *words[] = {"Ελληνικά ΣΟΦΟΣ.", "naïve café", "中文字", "unaffable,", "x\xffy", "İstanbul", "a.b:c'd", "\t"};
    for (int i = 0; len < cap - 600000; i++) {
        const char *w = words[i % 8];
        memcpy(text + len, w, strlen(w));
        len += strlen(w);
        text[len++] = i % 1000 == 999 ? '\n' : ' ';
    }
    for (int i = 0; i < 100000; i++, len += 5) memcpy(text + len, "abcd,", 5);  /* 500 KB, no spaces */
    text[len++] = '\n';
    text[len] = 0;
    write_file("in", text, len);
    CHECK(run("tokenize --vocab_file " VOCAB " --threads 1") == 0);
    char *whole = slurp("out");
    CHECK(run("tokenize --vocab_file " VOCAB " --block_kib 8 --threads 2") == 0);
    char *blocks = slurp("out");
    CHECK(whole && blocks && strlen(whole) > 1000000 && !strcmp(whole, blocks));
    char *err = slurp("err");
    CHECKF(err && strstr(err, "invalid UTF-8"), "stderr: %s", err);
    free(err);
    free(whole);
    free(blocks);
    /* No whitespace or punctuation at all for more than a block: cut anyway, and said so. */
    memset(text, 'a', 5000);
    text[5000] = '\n';
    write_file("in", text, 5001);
    CHECK(run("tokenize --vocab_file " VOCAB " --block_kib 1") == 0);
    err = slurp("err");
    CHECKF(err && strstr(err, "were cut"), "stderr: %s", err);
    free(err);
    free(text);
}

static void test_bad_flags_and_files(void) {
    char *out, *err;
    CHECK(run_on("x\n", "tokenize --vocab_file " VOCAB " --nope", &out) == 2);
    free(out);
    CHECK(run_on("x\n", "tokenize", &out) == 2);
    free(out);
    CHECK(run_on("x\n", "tokenize --vocab_file " VOCAB " --max_input_chars_per_word 0", &out) == 2);
    free(out);
    CHECK(run_on("x\n", "tokenize --vocab_file missing-vocab.txt", &out) == 1);
    err = slurp("err");
    CHECKF(err && strstr(err, "missing-vocab.txt"), "stderr: %s", err);
    free(err);
    free(out);
    CHECK(run_on("x\n", "tokenize --vocab_file " VOCAB " --never_split $(printf '[MASK],\\377')", &out) == 2);
    err = slurp("err");
    CHECKF(err && strstr(err, "entry 2 is not valid UTF-8"), "stderr: %s", err);
    free(err);
    free(out);
    write_file("novocab.txt", "a\nb\n", 4);
    CHECK(run_on("x\n", "tokenize --vocab_file novocab.txt", &out) == 1);
    err = slurp("err");
    CHECKF(err && strstr(err, "[UNK]"), "stderr: %s", err);
    free(err);
    free(out);
}

static void test_vocab_command(void) {
    char cwd[512], args[2048];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(args, sizeof args, "vocab --input_file %s/tests/data/tokenizer/vocab_corpus.txt --vocab_size 1500 --num_unused 110 -o v.txt", cwd);
    write_file("in", "", 0);
    CHECK(run(args) == 0);
    char *got = slurp("v.txt"), *want = NULL;
    size_t len;
    BertError e;
    CHECK(read_file("tests/data/tokenizer/vocab_uncased_1500.txt", &want, &len, &e) == 0);
    CHECK(got && want && !strcmp(got, want));
    free(got);
    free(want);
    snprintf(args, sizeof args, "vocab --input_file %s/tests/data/tokenizer/vocab_corpus.txt --vocab_size 50 -o small.txt", cwd);
    CHECK(run(args) == 1);
    char *err = slurp("err"), *none = slurp("small.txt");
    CHECKF(err && strstr(err, "vocab_size 50"), "stderr: %s", err);
    CHECK(none == NULL);  /* nothing written on failure */
    free(err);
    CHECK(run("vocab --input_file no-such-corpus.txt -o x.txt") == 1);
    CHECK(run("vocab --vocab_size 10") == 2);
}

/* Each of these crashed (libgomp stack overflow, int overflow, division by zero), ran on
 * silently, or wrote garbage; now each is a usage error (2) or a clear failure (1). */
static void test_hostile_flags_and_inputs(void) {
    write_file("in", "x\n", 2);
    CHECK(run("tokenize --vocab_file " VOCAB " --threads 100000") == 2);
    CHECK(run("tokenize --vocab_file " VOCAB " --block_kib 2147483647") == 2);
    write_file("corpus.txt", "a b c\n", 6);
    CHECK(run("vocab --input_file corpus.txt -o v.txt --threads 100000") == 2);
    CHECK(run("vocab --input_file corpus.txt -o v.txt --num_unused 2147483647") == 1);
    char *err = slurp("err");
    CHECKF(err && strstr(err, "leaves no room"), "stderr: %s", err);
    free(err);
    /* a folder as input is a read error, not an empty corpus; no output appears */
    CHECK(run("sentences . -o sentences.txt") == 1);
    char *none = slurp("sentences.txt");
    CHECK(none == NULL);
    free(none);
    CHECK(run("create_pretraining_data --input_file corpus.txt --output_file x.hdf5 --vocab_file " VOCAB
              " --max_input_chars_per_word 0") == 2);  /* every word would have been [UNK] */
    CHECK(run("shard --input_files corpus.txt --output_dir shards --threads 100000") == 2);
    CHECK(run("shard --input_files corpus.txt --output_dir shards --n_training_shards 2147483647") == 1);
    CHECK(run("prepare --formatted corpus.txt --output_dir prep --threads 100000") == 2);
    CHECK(run("train_demo --threads 100000") == 2);
    CHECK(run("train_demo --vocab_size -1") == 2);
    CHECK(run("train_demo --lr 1e300") == 2);  /* a float flag: would have been inf */
    CHECK(run("train_demo --steps 2147483647") == 2);  /* the step counter would overflow */
    CHECK(run("bench --warmup 2147483647") == 2);
    /* a line starting with more than a block of spaces: the first output chunk is empty
     * (fwrite(NULL, ...) under UBSan before the fix) */
    size_t big = (size_t)5 << 20;
    char *spaces = malloc(big + 3);
    memset(spaces, ' ', big), memcpy(spaces + big, "a\n", 3);
    write_file("in", spaces, big + 2);
    free(spaces);
    CHECK(run("tokenize --vocab_file " VOCAB) == 0);
    char *tokens = slurp("out");
    CHECKF(tokens && strcmp(tokens, "a\n") == 0, "tokens: %.40s", tokens ? tokens : "(none)");
    free(tokens);
    write_file("in", "x\n", 2);
    write_file("inf.json", "{\"layer_norm_eps\": 1e400}", 25);  /* saved back, it became null */
    CHECK(run("train_demo --model inf.json --steps 1") == 2);
    /* output = input: the atomic rename would have replaced the input with the output */
    CHECK(run("sentences corpus.txt -o ./corpus.txt") == 2);
    CHECK(run("vocab --input_file 'corpus*' -o corpus.txt") == 1);
    CHECK(run("format books corpus.txt -o corpus.txt") == 2);
    CHECK(run("create_pretraining_data --input_file corpus.txt --output_file corpus.txt --vocab_file " VOCAB) == 2);
    char *kept = slurp("corpus.txt");
    CHECKF(kept && !strcmp(kept, "a b c\n"), "corpus.txt now '%s'", kept ? kept : "(gone)");
    free(kept);
}

/* Runs a shell command in the test folder; returns the exit status. */
static int shell(const char *cmd) {
    char full[4096];
    snprintf(full, sizeof full, "cd %s && %s", dir, cmd);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool err_has(const char *text) {
    char *err = slurp("err");
    bool has = err && strstr(err, text);
    if (!has) printf("    stderr: %s\n", err ? err : "(none)");
    free(err);
    return has;
}

static bool out_has(const char *text) {
    char *out = slurp("out");
    bool has = out && strstr(out, text);
    if (!has) printf("    stdout: %s\n", out ? out : "(none)");
    free(out);
    return has;
}

static bool err_has_quiet(const char *text) {
    char *err = slurp("err");
    bool has = err && strstr(err, text);
    free(err);
    return has;
}

/* Without --do_lower_case, the casing is the vocabulary's, as every command that reads a model
 * infers it (and pretrain records it): a cased vocabulary keeps the case, said on stderr; the
 * flag still wins. Both lower-cased by default before, so a cased model's data was prepared
 * lower-cased. create_pretraining_data the same (Google's script always defaults to true). */
static void test_casing_from_the_vocabulary(void) {
    char *out;
    CHECK(run_on("Hello World\n", "tokenize --vocab_file " CASED_VOCAB, &out) == 0);
    CHECKF(out && !strcmp(out, "Hello World\n"), "got '%s'", out);
    free(out);
    char *err = slurp("err");
    CHECKF(err && strstr(err, "keeping the case, as the vocabulary " CASED_VOCAB " has upper-case tokens"), "%s", err);
    free(err);
    CHECK(run_on("Hello World\n", "tokenize --vocab_file " CASED_VOCAB " --do_lower_case", &out) == 0);
    CHECKF(out && !strcmp(out, "hello world\n"), "got '%s'", out);
    free(out);
    CHECK(run_on("Hello World\n", "tokenize --vocab_file " VOCAB, &out) == 0);
    CHECKF(out && !strcmp(out, "hello world\n"), "got '%s'", out);
    free(out);
    const char *doc = "Hello World.\nAnother Sentence.\n\nA Second Document.\nWith Two.\n";
    write_file("doc.txt", doc, strlen(doc));
    CHECK(run("create_pretraining_data --input_file doc.txt --output_file c.hdf5 --dupe_factor 1 --vocab_file "
              CASED_VOCAB) == 0);
    CHECK(err_has("keeping the case"));
    CHECK(run("create_pretraining_data --input_file doc.txt --output_file c.hdf5 --dupe_factor 1 --do_lower_case=false "
              "--quiet --vocab_file " VOCAB) == 0);
    CHECK(err_has("warning: --do_lower_case false, but the vocabulary " VOCAB " has no upper-case tokens"));
}

/* Issue 14, defect 11: failures that were silent, empty, buried or hung now say one clear
 * line each. */
static void test_messages(void) {
    char cmd[2048];
    write_file("corpus.txt", "One sentence. And another one.\n", 31);
    /* a full stdout: was exit 1 with nothing said */
    snprintf(cmd, sizeof cmd, "%s sentences corpus.txt > /dev/full 2> err", bert);
    CHECK(shell(cmd) == 1 && err_has("writing to standard output failed"));
    /* a diverging bench: was "bert bench: " and nothing else */
    snprintf(cmd, sizeof cmd, "%s bench --preset bert-tiny --batch 2 --seq 16 --preds 2 --steps 2 --mode train "
                              "--sgemm_peak 100 --learning_rate 1e30 > out 2> err", bert);
    CHECK(shell(cmd) == 1 && err_has("diverged"));
    /* a vocabulary starting with a byte-order mark: was "no [UNK] token" */
    write_file("bom.txt", "\xef\xbb\xbf[UNK]\n[PAD]\nhello\n", 21);
    char *out;
    CHECK(run_on("hello world\n", "tokenize --vocab_file bom.txt --ids", &out) == 0);
    CHECKF(out && !strcmp(out, "2 0\n"), "ids '%s'", out ? out : "(none)");
    free(out);
    /* a FIFO named *.txt among the books: format hung reading it */
    snprintf(cmd, sizeof cmd, "mkdir -p books && printf 'A book.\\n' > books/a.txt && rm -f books/b.txt && "
                              "mkfifo books/b.txt && timeout 60 %s format books books -o all.txt > out 2> err", bert);
    CHECK(shell(cmd) == 1 && err_has("not a regular file"));
    /* a full disk under create_pretraining_data: one line, not HDF5's 23-line error stack
     * (--do_lower_case given: no note of the casing chosen)
     * (the file-size limit stands in for the full disk: writes fail with EFBIG) */
    char *text = malloc(1 << 20);
    size_t n = 0;
    for (int i = 0; n + 80 < (1u << 20); i++)
        n += (size_t)snprintf(text + n, 80, "Sentence number %d says something new.%s\n", i, i % 7 ? "" : "\n");
    write_file("big.txt", text, n);
    free(text);
    snprintf(cmd, sizeof cmd, "(trap '' XFSZ; ulimit -f 64; %s create_pretraining_data --input_file big.txt "
                              "--output_file full.hdf5 --vocab_file " VOCAB " --do_lower_case --dupe_factor 2 > out 2> err)", bert);
    CHECK(shell(cmd) == 1 && err_has("cannot write"));
    char *err = slurp("err");
    CHECKF(err && !strstr(err, "HDF5-DIAG") && strchr(err, '\n') == strrchr(err, '\n'), "stderr: %s", err);
    free(err);
}

/* Issue 14, defect 9: outputs that are inputs by another name, found by device and inode
 * (or, for a books folder, by the folder's identity): each refused and the input kept. */
static void test_output_is_input_by_identity(void) {
    char cmd[2048];
    write_file("corpus.txt", "One sentence. And another one.\n\nA second document here.\n", 56);
    /* the vocabulary as the output */
    snprintf(cmd, sizeof cmd, "cp " VOCAB " v.txt && %s create_pretraining_data --input_file corpus.txt "
                              "--output_file ./v.txt --vocab_file v.txt > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("is also an input"));
    char *v = slurp("v.txt");
    CHECKF(v && !strncmp(v, "[PAD]", 5), "the vocabulary was replaced");
    free(v);
    /* an input glob that matches the output */
    snprintf(cmd, sizeof cmd, "cp corpus.txt c_out.txt && %s create_pretraining_data --input_file 'c*' "
                              "--output_file c_out.txt --vocab_file v.txt > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("is also an input"));
    /* a *.txt output inside the books folder: the next run would read it as a book */
    snprintf(cmd, sizeof cmd, "mkdir -p bk && cp corpus.txt bk/a.txt && %s format books bk -o bk/all.txt > out 2> err",
             bert);
    CHECK(shell(cmd) == 1 && err_has("books folder"));
    /* a checkpoint named like the config written beside it */
    snprintf(cmd, sizeof cmd, "%s train_demo --steps 1 --out d/config.json > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("cannot be named config.json"));
    /* one file listed twice under two names */
    snprintf(cmd, sizeof cmd, "%s sentences corpus.txt ./corpus.txt > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("are the same file"));
    /* shard: an input that has one of the output shards' names */
    snprintf(cmd, sizeof cmd, "mkdir -p sh && cp corpus.txt sh/corpus_test_0.txt && %s shard --input_files "
                              "sh/corpus_test_0.txt --output_dir sh --n_training_shards 1 --n_test_shards 1 > out 2> err",
             bert);
    CHECK(shell(cmd) == 1 && err_has("would be replaced"));
    char *kept = slurp("sh/corpus_test_0.txt");
    CHECKF(kept && !strncmp(kept, "One sentence.", 13), "the shard input was replaced");
    free(kept);
    /* shard: one input under two names would be sharded twice */
    snprintf(cmd, sizeof cmd, "%s shard --input_files corpus.txt,./corpus.txt --output_dir sh2 --n_training_shards 1 "
                              "--n_test_shards 1 > out 2> err", bert);
    CHECK(shell(cmd) == 1 && err_has("are the same file"));
    /* vocab: one input under two names, or matched by two patterns, would be counted twice;
     * the output as an input would be replaced */
    snprintf(cmd, sizeof cmd, "%s vocab --input_file corpus.txt,./corpus.txt --vocab_size 1200 -o v2.txt > out 2> err",
             bert);
    CHECK(shell(cmd) == 1 && err_has("'corpus.txt' and './corpus.txt' are the same file") && !exists("v2.txt"));
    snprintf(cmd, sizeof cmd, "ln -sf corpus.txt also.txt && %s vocab --input_file 'corpus.txt,also.*' --vocab_size 1200 "
                              "-o v2.txt > out 2> err", bert);
    CHECK(shell(cmd) == 1 && err_has("are the same file") && !exists("v2.txt"));
    snprintf(cmd, sizeof cmd, "%s vocab --input_file 'corpus.txt,v.txt' --vocab_size 1200 -o ./v.txt > out 2> err", bert);
    CHECK(shell(cmd) == 1 && err_has("output './v.txt' is input 'v.txt'"));
}

/* Issue 36, point 4: a misspelt flag, preset or command is answered with the closest names;
 * a name far from all of them gets no guess. */
static void test_suggestions(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s glue --task_nme mrpc > out 2> err", bert);
    CHECK(shell(cmd) != 0 && err_has("unknown flag '--task_nme': did you mean --task_name?"));
    snprintf(cmd, sizeof cmd, "%s pretrain --train-batch-size=8 > out 2> err", bert);   /* dashes for underscores */
    CHECK(shell(cmd) != 0 && err_has("'--train-batch-size': did you mean --train_batch_size?"));
    snprintf(cmd, sizeof cmd, "%s tokenize --vocab_fiel x > out 2> err", bert);   /* two letters swapped */
    CHECK(shell(cmd) != 0 && err_has("did you mean --vocab_file?"));
    snprintf(cmd, sizeof cmd, "%s tokenize --xyzzy > out 2> err", bert);
    CHECK(shell(cmd) != 0 && err_has("unknown flag '--xyzzy' (see") && !err_has_quiet("did you mean"));
    snprintf(cmd, sizeof cmd, "%s vocab --input x > out 2> err", bert);   /* nothing close: the flags it begins */
    CHECK(shell(cmd) != 0 && err_has("unknown flag '--input': did you mean --input_file?"));
    snprintf(cmd, sizeof cmd, "%s help glue > out 2> err", bert);   /* the command's own help */
    CHECK(shell(cmd) == 0 && out_has("usage: bert glue"));
    snprintf(cmd, sizeof cmd, "%s bench --preset bert-bsae > out 2> err", bert);
    CHECK(shell(cmd) != 0 && err_has("unknown preset 'bert-bsae': did you mean bert-base?"));
    snprintf(cmd, sizeof cmd, "%s train_demo --model bert-lagre > out 2> err", bert);
    CHECK(shell(cmd) != 0 && err_has("'bert-lagre' is neither a preset nor a config file: did you mean bert-large?"));
    snprintf(cmd, sizeof cmd, "%s pretrain --input_dir x --output_dir y --bert_model bert-tinny > out 2> err", bert);
    CHECK(shell(cmd) != 0 && err_has("did you mean bert-tiny?"));
    snprintf(cmd, sizeof cmd, "%s tokenise > out 2> err", bert);
    CHECK(shell(cmd) != 0 && err_has("unknown command 'tokenise': did you mean tokenize?"));
    /* one vocabulary: a flag another command names otherwise is the command's own flag */
    snprintf(cmd, sizeof cmd, "%s bench --bert_model bert-bsae --train_batch_size 2 > out 2> err", bert);   /* --preset, --batch */
    CHECK(shell(cmd) != 0 && err_has("unknown preset 'bert-bsae'") && !err_has_quiet("unknown flag"));
    snprintf(cmd, sizeof cmd, "%s train_demo --preset bert-lagre --batch_size 2 > out 2> err", bert);   /* --model, --batch */
    CHECK(shell(cmd) != 0 && err_has("did you mean bert-large?") && !err_has_quiet("unknown flag"));
    snprintf(cmd, sizeof cmd, "%s bench --help > out 2> err", bert);
    CHECK(shell(cmd) == 0 && out_has("--bert_model                   same as --preset"));
}

/* Issue 36, point 4: a command run without its required flags names every one missing, and
 * only those; one without its positional arguments shows its usage line. */
static void test_required_flags(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s glue > out 2> err", bert);
    CHECK(shell(cmd) == 2 &&
          err_has("bert glue: --task_name, --data_dir, --output_dir and --init_checkpoint are required (see"));
    snprintf(cmd, sizeof cmd, "%s glue --task_name mrpc --init_checkpoint m --output_dir o > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("bert glue: --data_dir is required (see 'bert glue --help')"));
    snprintf(cmd, sizeof cmd, "%s squad --output_dir o > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("bert squad: --init_checkpoint is required"));
    snprintf(cmd, sizeof cmd, "%s pretrain --input_dir x > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("bert pretrain: --output_dir is required"));
    snprintf(cmd, sizeof cmd, "%s vocab --vocab_size 100 > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("bert vocab: --input_file and -o are required"));
    snprintf(cmd, sizeof cmd, "%s create_pretraining_data --vocab_file v.txt > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("--input_file and --output_file are required"));
    snprintf(cmd, sizeof cmd, "%s embed < /dev/null > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("bert embed: --init_checkpoint is required"));
    /* --phase2 without --phase1_end_step: said before any work, no hidden 7038 */
    snprintf(cmd, sizeof cmd, "mkdir -p shards && %s pretrain --input_dir shards --output_dir p2 --bert_model bert-tiny "
                              "--phase2 --resume_from_checkpoint > out 2> err", bert);
    CHECK(shell(cmd) == 1 && err_has("--phase2 needs --phase1_end_step") && !exists("p2"));
    snprintf(cmd, sizeof cmd, "%s squad_eval data.json > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("missing argument: usage: bert squad_eval DATASET.json PREDICTIONS.json"));
}

/* Issue 36, point 4: `bert --version` names the version and the build: the GEMM library with
 * the ISA it runs, the compiled instruction sets, MPI and CUDA. */
static void test_version(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s --version > out 2> err", bert);
    CHECK(shell(cmd) == 0);
    char *out = slurp("out");
    CHECKF(out && !strncmp(out, "bert.c ", 7) && strstr(out, "\n  GEMM      ") &&
           (strstr(out, "oneDNN ") || strstr(out, "OpenBLAS ")) && strstr(out, "\n  ISA       compiled for x86-64") &&
           strstr(out, "\n  MPI       ") && strstr(out, "\n  CUDA      a backend loaded at run time by --device cuda"), "got '%s'", out ? out : "(none)");
    free(out);
    snprintf(cmd, sizeof cmd, "%s --verison > out 2> err", bert);
    CHECK(shell(cmd) == 2 && err_has("unknown command '--verison': did you mean --version?"));
    snprintf(cmd, sizeof cmd, "%s --version > /dev/full 2> err", bert);   /* a lost output is an error */
    CHECK(shell(cmd) == 1);
}

int main(int argc, char **argv) {
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd) || test_bert_binary(argv[0], bert, sizeof bert) != 0) return 1;
    snprintf(dir, sizeof dir, "/tmp/bert-tok-cli-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char link[1800];  /* relative --vocab_file paths resolve inside the temp dir */
    snprintf(link, sizeof link, "mkdir -p %s/data && ln -s %s/data/vocab %s/data/vocab", dir, cwd, dir);
    if (system(link) != 0) return 1;
    RUN_TEST(test_output_formats);
    RUN_TEST(test_long_lines_and_threads);
    RUN_TEST(test_casing_from_the_vocabulary);
    RUN_TEST(test_bad_flags_and_files);
    RUN_TEST(test_vocab_command);
    RUN_TEST(test_hostile_flags_and_inputs);
    RUN_TEST(test_messages);
    RUN_TEST(test_output_is_input_by_identity);
    RUN_TEST(test_suggestions);
    RUN_TEST(test_required_flags);
    RUN_TEST(test_version);
    char cleanup[600];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
    if (system(cleanup) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_summary();
}
