/* What every fine-tuning command (glue, squad, ner, classify) opens before its task's work and
 * closes after it: the output folder (made, and removed again after a failed run while it is
 * empty), the log (with the note the model folder's defaults left), the vocabulary and its
 * tokenizer (the casing FinetuneInputs resolved), and the time the run began. */
#ifndef BERT_TASKS_TASK_SESSION_H
#define BERT_TASKS_TASK_SESSION_H

#include "core/common.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "train/finetune.h"
#include "train/logger.h"

typedef struct {
    double start;          /* now_seconds() when the run began */
    char created[4096];    /* the folders make_dirs_created made */
    Logger *log;
    Vocab *vocab;
    Tokenizer *tok;
} TaskSession;

/* max_input_chars_per_word: the tokenizer's (100, Google's FullTokenizer 200 for SQuAD). On
 * failure *s is still closed by task_session_close. */
int task_session_open(TaskSession *s, const FinetuneArgs *ft, const FinetuneInputs *in, int max_input_chars_per_word,
                      BertError *err);
/* rc: the run's result; a failed run's empty output folders are removed. */
void task_session_close(TaskSession *s, const char *output_dir, int rc);

#endif
