/* The tokenizer files of a HuggingFace model folder, which bert.c reads, and writes beside
 * model.safetensors and config.json, so that a folder stands alone in bert.c (`embed`,
 * `glue`, `squad` need nothing but --init_checkpoint) and in transformers
 * (AutoTokenizer.from_pretrained): vocab.txt, one WordPiece token a line, and
 * tokenizer_config.json with do_lower_case, model_max_length and tokenizer_class
 * "BertTokenizer" (BertTokenizer's defaults for the rest: [UNK], [SEP], [PAD], [CLS], [MASK];
 * accents stripped when lower-casing, as bert.c's tokenizer does). */
#ifndef BERT_IO_TOKENIZER_FILES_H
#define BERT_IO_TOKENIZER_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"

/* What a model folder says about its tokenizer. */
typedef struct {
    char dir[4096];              /* the folder looked at */
    char vocab_file[4096 + 32];  /* dir/vocab.txt when it is there, else "" */
    int do_lower_case;           /* tokenizer_config.json's: 1 or 0; -1 when it has none or it does not say */
} TokenizerFolder;

/* `path` is a model folder, or a file in one (a weights file: the folder holding it). */
void tokenizer_folder_read(const char *path, TokenizerFolder *out);

/* A vocabulary file's tokens (its lines, as text/vocab.h counts them) and whether it is cased:
 * 1 when a token other than the bracketed special ones ([CLS], [unused7]) holds an upper-case
 * ASCII letter (bert-base-cased's has thousands), 0 when none does (an uncased model's). */
int tokenizer_vocab_scan(const char *vocab_file, int *tokens, int *cased, BertError *err);

/* The casing a run uses: the flag when it was given (flag 0 or 1; < 0: not given), else what
 * the folder's tokenizer_config.json says, else what the vocabulary shows (vocab_cased from
 * tokenizer_vocab_scan: lower-casing when it holds no upper-case token). `note` gets one line
 * for the user, "" when there is nothing to say: "warning: ..." for the flag contradicting the
 * folder or the vocabulary (the flag wins), "note: ..." for the casing taken from the
 * vocabulary for want of a tokenizer_config.json (folder NULL: for want of the flag, a command without a model
 * folder). `flag_name` names the flag in it ("--do_lower_case"). */
bool tokenizer_casing(int flag, const char *flag_name, const TokenizerFolder *folder, const char *vocab_file,
                      int vocab_cased, char *note, size_t note_size);

/* dir/vocab.txt (a copy of vocab_file, read first: it may be that file) and
 * dir/tokenizer_config.json, each written atomically. */
int tokenizer_folder_write(const char *dir, const char *vocab_file, bool do_lower_case, int model_max_length,
                           BertError *err);
/* The same from the vocabulary's bytes (a run that outlives the file it read them from: a
 * checkpoint's vocab.txt is deleted when newer checkpoints replace it). */
int tokenizer_folder_write_text(const char *dir, const char *vocab, size_t vocab_len, bool do_lower_case,
                                int model_max_length, BertError *err);

#endif
