/* create_pretraining_data: masked-LM + next-sentence training instances, exactly as
 * Google's create_pretraining_data.py (google-research/bert) makes them.
 *
 * For the same input text, vocabulary, flags and seed, the instances and their order
 * are identical to the reference's: every random decision is drawn from a PyRandom
 * stream in the reference's order (document shuffle, then per dupe pass and document:
 * target length, A/B split, random-next choice, truncation side, masking), and the final
 * shuffle of all instances is the same Fisher-Yates permutation.
 *
 * Memory: the reference holds every instance in RAM before its final shuffle. Here
 * instances are written, as they are made, compactly to a spool: in memory up to
 * spool_memory_mb, then to an unlinked file beside the output. A record is where its
 * segments A and B lie in the tokenized input plus its masked positions and their
 * replacement ids (about 110 bytes at seq 128); only record offsets are kept besides
 * (8 bytes per instance). The permutation is computed from the count and the instances
 * are rebuilt from the spool in shuffled order while the HDF5 shard is written.
 * What stays in memory is the tokenized input (4 bytes per token, plus 8 bytes per
 * sentence and document), as the reference needs random access to any document for
 * its random next sentences; `bert prepare` keeps that bounded by sharding the corpus.
 *
 * Known deliberate choices (documented in docs/pretraining_data.md):
 *  - Lines are split on \n, \r\n and lone \r (Python's universal newlines, which is how
 *    the reference's GFile stub and NVIDIA's copy, using open(), read them).
 *  - Invalid UTF-8 does not stop the run (Python would raise UnicodeDecodeError): each
 *    bad byte is dropped by the tokenizer, counted, and reported in the stats.
 */
#ifndef BERT_PRETRAINING_H
#define BERT_PRETRAINING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "data/pyrandom.h"
#include "text/tokenizer.h"

typedef struct {
    bool do_lower_case;           /* default true */
    bool do_whole_word_mask;      /* default false */
    int max_seq_length;           /* default 128 */
    int max_predictions_per_seq;  /* default 20 */
    int64_t random_seed;          /* default 12345 */
    int dupe_factor;              /* default 10 */
    double masked_lm_prob;        /* default 0.15 */
    double short_seq_prob;        /* default 0.1 */
    /* Not the reference's: instances are kept in memory up to this many MB, then
     * spooled to disk (0: disk from the start). Default 256. */
    double spool_memory_mb;
} PretrainingOptions;

/* The defaults of Google's script. */
PretrainingOptions pretraining_default_options(void);

/* Checks ranges the reference would trip over (e.g. max_seq_length < 5 makes it fail an
 * assertion); returns -1 with a message naming the flag. */
int pretraining_check_options(const PretrainingOptions *opt, BertError *err);

/* ---- Documents: sentences of token ids --------------------------------------------- */

typedef struct {
    int32_t *tokens;          /* all tokens, sentence after sentence */
    size_t n_tokens, cap_tokens;
    size_t *sentence_start;   /* sentence s = tokens[sentence_start[s], sentence_start[s+1]) */
    size_t n_sentences, cap_sentences;
    size_t *document_start;   /* document d = sentences [document_start[d], document_start[d+1]) */
    size_t n_documents, cap_documents;
    bool document_open;       /* the last document may still receive sentences */
} DocumentSet;

void documents_init(DocumentSet *d);
void documents_free(DocumentSet *d);
/* Appends a sentence of n >= 1 ids to the current document (opening one if needed). */
void documents_add_sentence(DocumentSet *d, const int32_t *ids, size_t n);
/* A blank line: the next sentence starts a new document. Empty documents never exist. */
void documents_break(DocumentSet *d);
size_t document_sentence_count(const DocumentSet *d, size_t doc);

typedef struct {
    size_t files, lines, bytes;
    size_t documents;         /* documents so far (the last may still be growing) */
    long invalid_utf8;        /* bytes of invalid UTF-8 dropped */
} ReadStats;

/* Reads one-sentence-per-line text (blank line between documents) and tokenizes it
 * into d, as the reference does; documents continue across file boundaries just as in
 * the reference. Lines are tokenized in parallel (OpenMP) when called outside a
 * parallel region. progress may be NULL. */
typedef void (*ReadProgress)(void *ctx, const ReadStats *stats);
int documents_read_text(DocumentSet *d, const char *path, const Tokenizer *tok,
                        ReadStats *stats, ReadProgress progress, void *progress_ctx,
                        BertError *err);

/* Expands "a.txt,b*.txt" as the reference does (split on commas, glob each pattern in
 * sorted order). A pattern matching nothing is an error (the reference would silently
 * skip it; naming it is kinder). Caller frees each string and the array. */
int expand_input_patterns(const char *patterns, char ***files, int *n_files, BertError *err);

/* ---- Instances --------------------------------------------------------------------- */

/* One training instance, unpadded: [CLS] A [SEP] B [SEP] after masking. */
typedef struct {
    int n_tokens;             /* tokens incl. [CLS] and the two [SEP] */
    int n_segment_a;          /* tokens with segment id 0: [CLS] A [SEP] */
    int is_random_next;       /* next_sentence_label */
    int n_masked;
    int32_t *input_ids;       /* [max_seq_length] */
    int32_t *masked_positions;/* [max_predictions_per_seq], ascending */
    int32_t *masked_ids;      /* [max_predictions_per_seq], the original ids */
    /* Where A and B were taken from: DocumentSet tokens [a_lo, a_lo + n_segment_a - 2)
     * and [b_lo, b_lo + n_tokens - n_segment_a - 1). With the masked positions and
     * their replacements that is the whole instance, which lets the spool store a
     * fraction of its bytes. Set by generate_instances(). */
    size_t a_lo, b_lo;
} Instance;

/* What masking needs from the vocabulary, resolved once. */
typedef struct {
    int32_t cls_id, sep_id, mask_id;
    int32_t *words;           /* the reference's vocab_words list, as ids */
    int n_words;
    bool *is_continuation;    /* id -> token starts with "##" */
    int vocab_size;
} MaskVocab;

int mask_vocab_init(MaskVocab *mv, const Vocab *vocab, BertError *err);
void mask_vocab_free(MaskVocab *mv);

/* Receives each instance in the order the reference creates them (before the final
 * shuffle). Returns 0, or -1 with err filled to stop generation. */
typedef int (*InstanceSink)(void *ctx, const Instance *inst, BertError *err);

/* The reference's create_training_instances() minus its final shuffle: shuffles the
 * documents with rng, then makes dupe_factor passes over them. rng continues from
 * wherever the caller left it (seeded with random_seed for the reference's stream). */
int generate_instances(const DocumentSet *docs, const PretrainingOptions *opt,
                       const MaskVocab *mv, PyRandom *rng, InstanceSink sink, void *ctx,
                       BertError *err);

/* ---- The whole tool ---------------------------------------------------------------- */

typedef struct {
    ReadStats read;
    size_t documents, sentences, tokens;
    size_t instances;
    double seconds_read, seconds_generate, seconds_write;
} PretrainingStats;

/* create_pretraining_data.py end to end: reads input_files (comma-separated globs),
 * tokenizes with tok (its lower-casing must match opt->do_lower_case), generates and
 * shuffles the instances and writes the HDF5 shard output_file (atomically: a partial
 * shard never appears under that name; a comma-separated list deals the shuffled
 * instances round-robin over several files, as the reference does). progress (may be
 * NULL) is called while reading. */
int create_pretraining_data(const PretrainingOptions *opt, const char *input_files,
                            const char *output_file, const Tokenizer *tok,
                            PretrainingStats *stats, ReadProgress progress,
                            void *progress_ctx, BertError *err);

#endif
