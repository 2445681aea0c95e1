/* Named-entity recognition (token classification) data and metric, as HuggingFace's
 * run_ner.py prepares and scores it:
 *  - CoNLL files: one word a line, its first column the word and its last the tag (so
 *    CoNLL-2003's "word POS chunk NER" and plain "word tag" both read), columns split by
 *    spaces or tabs; a blank line ends a sentence; "-DOCSTART-" lines are document marks and
 *    no words. Tags of any scheme (IOB2, BIOES, ...): the metric says which it reads.
 *  - The label list: the training file's tags, sorted (run_ner.py's get_label_list: Python's
 *    sort, i.e. by code point = byte order in UTF-8), or a file of labels, one a line
 *    (run_ner.py's --labels of the older script).
 *  - Features: [CLS] + each word's word pieces (the word tokenized alone, as a fast tokenizer
 *    with is_split_into_words=True does) + [SEP], cut to max_seq_length; the label on a word's
 *    first piece, -100 (ignored) on the others and on [CLS]/[SEP], or with label_all_tokens
 *    every piece labelled, B-X turned into I-X after the first (run_ner.py's b_to_i_label).
 *  - The entity-level metric of seqeval (micro-averaged precision, recall, F1 over entities,
 *    and token accuracy): its default mode, whose chunk rules are conlleval's (a chunk starts
 *    at B/S, or at I/E after O or after a chunk of another type; it ends before O, B, S, a
 *    change of type, and after E/S), and its strict mode (mode="strict") with the IOB2 or
 *    IOBES scheme (only well-formed chunks count: IOBES needs B..E or S). Tags are compared as
 *    seqeval splits them; conlleval gives the same numbers for tags of the form "O" or
 *    "P-TYPE" (it reads a tag without a dash whole as a prefix, seqeval its first letter). */
#ifndef BERT_TASKS_NER_H
#define BERT_TASKS_NER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"
#include "core/strmap.h"
#include "text/tokenizer.h"

typedef struct {
    int n_sentences;
    long n_words;
    long *start;          /* [n_sentences + 1]: sentence s is words start[s] .. start[s+1]-1 */
    char **word, **tag;   /* [n_words]; tag NULL where the file has none (a one-column line) */
    long untagged;        /* words without a tag */
    long *line;           /* [n_words] the file's line number of each word, for messages */
    char *storage;        /* the file's text, which the strings point into */
} NerData;

/* Reads a CoNLL file. A one-column line (a word, no tag) is an error unless allow_untagged
 * (a test file to predict). Empty sentences are never made (several blank lines, a
 * -DOCSTART- between them). */
int ner_read_conll(const char *path, bool allow_untagged, NerData *out, BertError *err);
void ner_data_free(NerData *d);

typedef struct {
    int n;
    char **name;   /* in label-id order */
    StrMap index;  /* name -> id: a word's label found in one hash lookup */
} NerLabels;

/* The sorted distinct tags of d (every word must have one). */
int ner_labels_from_data(const NerData *d, NerLabels *out, BertError *err);
/* A labels file: one label a line, blank lines skipped, no duplicates. */
int ner_labels_read(const char *path, NerLabels *out, BertError *err);
/* From names in id order (a model's id2label); a repeated name keeps its first id. */
void ner_labels_from_names(char *const *names, int n, NerLabels *out);
int ner_label_id(const NerLabels *l, const char *tag);   /* -1 if absent (or tag NULL) */
void ner_labels_free(NerLabels *l);
/* Every tag of d is one of the labels (a clear error naming the file's line if not). */
int ner_check_tags(const NerData *d, const NerLabels *l, const char *path, BertError *err);

typedef struct {
    int n, max_seq_length;
    int32_t *input_ids, *input_mask;   /* [n, max_seq_length], zero-padded; segment ids are all 0 */
    int32_t *labels;                   /* [n, max_seq_length]: label id or -100 */
    int32_t *length;                   /* [n] real tokens of each row */
    int32_t *first_piece;              /* [n_words]: position of each word's first piece in its row, -1
                                          when the word has none (no pieces, or cut by max_seq_length) */
    long truncated;                    /* sentences cut to fit */
    long words_cut;                    /* words left without a piece */
} NerFeatures;

/* One row per sentence. Untagged words (or labels NULL) get -100 everywhere. */
int ner_features(const NerData *d, const NerLabels *labels, const Tokenizer *tok, int max_seq_length,
                 bool label_all_tokens, NerFeatures *out, BertError *err);
void ner_features_free(NerFeatures *f);

typedef enum { NER_METRIC_DEFAULT = 0, NER_METRIC_STRICT_IOB2, NER_METRIC_STRICT_IOBES } NerMetricMode;

typedef struct {
    double precision, recall, f1, accuracy;   /* 0 where a denominator is 0, as seqeval */
    long true_entities, predicted_entities, correct_entities, tokens;
} NerScores;

/* Gold against predicted tags, n_sentences sentences of words start[s] .. start[s+1]-1 (the
 * same shape on both sides). Strict modes refuse a tag whose prefix the scheme lacks, as
 * seqeval does. */
int ner_score(const char *const *gold, const char *const *pred, const long *start, int n_sentences, NerMetricMode mode,
              NerScores *out, BertError *err);
/* "default", "strict-iob2", "strict-iobes" -> the mode; -1 for another name. */
int ner_metric_mode(const char *name);

#endif
