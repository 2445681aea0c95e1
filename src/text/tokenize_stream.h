/* `bert tokenize`'s engine: UTF-8 text from a file descriptor, one text per line -> one line
 * of WordPiece tokens (or ids, or BasicTokenizer words) per input line, exactly as
 * google-research/bert's FullTokenizer.
 *
 * Lines are read in blocks and tokenized in parallel (one TokenList per thread), then
 * written in input order. A line longer than the block is cut at its last whitespace
 * (or, failing that, after its last ASCII punctuation mark that is not case-ignorable),
 * where the reference's result cannot depend on what follows, so memory stays bounded
 * however long a line is. */
#ifndef BERT_TEXT_TOKENIZE_STREAM_H
#define BERT_TEXT_TOKENIZE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "text/tokenizer.h"

typedef struct {
    bool ids;            /* vocabulary ids instead of tokens */
    bool offsets;        /* @start:end (byte span in the input line) after each token */
    bool basic;          /* BasicTokenizer words only (no WordPiece; the vocabulary may be absent) */
    int threads;         /* tokenizing threads, >= 1 */
    size_t block_bytes;  /* the input block (one allocation), >= 1; longer lines are cut */
} TokenizeStreamOptions;

typedef struct {
    long invalid_utf8;   /* invalid UTF-8 sequences replaced by U+FFFD (dropped) */
    long forced_cuts;    /* block-long fragments with no whitespace or punctuation, cut there */
    bool read_error;     /* reading in_fd failed (what was read before is written) */
} TokenizeStreamStats;

/* Reads in_fd to its end and writes every line's tokens to out, flushed after each block:
 * read(), not fread(), so from a pipe a caller that writes one line and waits for its
 * tokens gets them. Whether writing out failed is the caller's to check (ferror). */
void tokenize_stream(const Tokenizer *tok, const TokenizeStreamOptions *o, int in_fd, FILE *out,
                     TokenizeStreamStats *st);

typedef struct {
    int lines;
    size_t bytes;
    long tokens;                  /* of one round */
    double seconds, cpu_seconds;  /* the best round's wall and process CPU time */
} TokenizeBenchResult;

/* The whole of in_fd in memory, tokenized `repeat` (>= 1) timed times on `threads` threads
 * after one untimed round: tokenization throughput only (no output formatting). */
void tokenize_bench(const Tokenizer *tok, int in_fd, int threads, int repeat, TokenizeBenchResult *r);

#endif
