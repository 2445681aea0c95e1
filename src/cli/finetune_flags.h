/* The flags every fine-tuning command shares (train/finetune.h's FinetuneArgs, NVIDIA's
 * run_glue.py / run_squad.py names), one fragment for `bert glue` and `bert squad`. */
#ifndef BERT_CLI_FINETUNE_FLAGS_H
#define BERT_CLI_FINETUNE_FLAGS_H

#include <stdbool.h>

#include "cli/flags.h"
#include "train/finetune.h"

enum { FINETUNE_FLAG_COUNT = 35 };

/* What the fragment parses besides the args themselves, and its help texts (they name the
 * task's defaults). Lives as long as the flags. */
typedef struct {
    long long max_steps, seed, log_freq, eval_steps, save_steps;
    bool bf16, fp16, int8;
    const char *device;
    bool tf32;
    char help[4][96];
} FinetuneFlagState;

/* Writes the shared flags into out (room for FINETUNE_FLAG_COUNT) over a, whose values are the
 * task's defaults; returns how many. rows names what a batch holds ("sequences", "features"),
 * eval_flag the prediction batch's flag (run_glue.py: eval_batch_size, run_squad.py:
 * predict_batch_size). */
int finetune_flags(Flag *out, FinetuneArgs *a, FinetuneFlagState *st, const char *rows, const char *eval_flag);
/* After parsing: the 64-bit values and the precision into a. 0, or 2 with the message on stderr. */
int finetune_flags_finish(const char *command, FinetuneArgs *a, const FinetuneFlagState *st);
/* For a command that only predicts (bert squad --question, bert glue --predict_file -): the
 * vocabulary (--vocab_file, else the model folder's vocab.txt) into vocab and the casing (the
 * flag, else the folder's tokenizer files, else the vocabulary's), as a run finds them. 0, or 1
 * with the message on stderr. */
int finetune_flags_tokenizer(const char *command, const FinetuneArgs *a, char *vocab, size_t size, bool *lower);
/* The training summary lines every fine-tuning command prints ("bert glue: mrpc: 10 steps, ..."). */
void finetune_print_training(const char *prefix, const char *rows, const FinetuneTrainResult *t, bool fp16);
/* The line naming the saved model folder and its files, when one was saved (model_dir not ""). */
void finetune_print_saved(const char *command, const char *model_dir);

#endif
