/* `bert vocab`'s run: a WordPiece vocabulary (text/wordpiece_trainer.h) learned from text
 * files and written as vocab.txt. */
#ifndef BERT_TEXT_WORDPIECE_FILES_H
#define BERT_TEXT_WORDPIECE_FILES_H

#include <stddef.h>

#include "core/common.h"
#include "text/wordpiece_trainer.h"

typedef struct {
    int files;
    size_t bytes;
    long long words;    /* counted, and distinct below */
    long distinct;
    int tokens;         /* written; fewer than vocab_size when no pair was left to merge */
} WordpieceFilesStats;

/* Counts the words of every file the comma-separated globs of input_globs name, in order (a
 * pattern that matches nothing stays as written, so reading it names it; no file twice, and
 * none of them `output`), trains the vocabulary and writes it to `output` atomically, one
 * token a line. */
int wordpiece_train_files(const char *input_globs, const char *output, const VocabTrainOptions *opt,
                          WordpieceFilesStats *st, BertError *err);

#endif
