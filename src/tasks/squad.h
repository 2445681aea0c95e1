/* SQuAD v1.1 / v2.0 for fine-tuning and prediction, exactly as Google's run_squad.py
 * (google-research/bert) prepares the data and post-processes the model's logits:
 *
 *   squad_read      read_squad_examples: the JSON file -> examples (questions over
 *                   paragraphs split into whitespace words)
 *   squad_convert   convert_examples_to_features: WordPiece, [CLS] query [SEP] doc [SEP]
 *                   windows of the document (doc_stride apart), training targets
 *   squad_predict   write_predictions: per example, the n-best answer spans over all its
 *                   windows -> final text, n-best list, v2.0 null-score difference
 *   squad_write_predictions   predictions.json, nbest_predictions.json, null_odds.json
 *                   byte for byte as the reference's json.dumps(indent=4) writes them
 *
 * The tokenizer passed in is the reference's FullTokenizer: use the vocabulary of the
 * model, do_lower_case as the model was trained, and max_input_chars_per_word = 200
 * (Google's tokenization.py; bert.c's default of 100 is NVIDIA's / HuggingFace's). Its
 * BasicTokenizer (with the same do_lower_case) is also what get_final_text uses.
 *
 * Positions: the reference indexes the context by Python characters (code points);
 * answer_start is such an index. Text here is UTF-8 and spans are byte offsets; the
 * conversion is done where the reference counts characters.
 *
 * Where Google's code would crash or loop, or silently keep nonsense, this reports an
 * error or counts the case instead (each is listed at its function below).
 */
#ifndef BERT_TASKS_SQUAD_H
#define BERT_TASKS_SQUAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/common.h"
#include "tasks/squad_file.h"
#include "text/tokenizer.h"

/* ---- Examples: read_squad_examples --------------------------------------------------- */

typedef struct {
    char *context;              /* the paragraph's text (UTF-8) */
    int n_words;                /* doc_tokens: maximal runs of non-whitespace characters */
    int32_t *word_start, *word_end;  /* word i is context[word_start[i], word_end[i]) */
    /* Filled by squad_convert (the WordPiece split of the words is the same for every
     * question of the paragraph, so it is done once per paragraph): */
    int n_sub;                  /* all_doc_tokens */
    int32_t *sub_ids;           /* their vocabulary ids */
    int32_t *tok_to_orig;       /* word index of each sub token */
    int32_t *orig_to_tok;       /* first sub token of each word (n_sub if it has none) */
} SquadParagraph;

typedef struct {
    char *qas_id;
    char *question_text;
    int paragraph;              /* index into SquadData.paragraphs (the doc_tokens) */
    /* Training only (NULL / -1 when reading for prediction, which ignores the answers): */
    char *orig_answer_text;     /* "" for an impossible question */
    int start_position, end_position;  /* word indices of the answer; -1 if impossible */
    bool is_impossible;         /* v2.0 training only, as in the reference */
} SquadExample;

typedef struct {
    SquadParagraph *paragraphs;
    int n_paragraphs;
    SquadExample *examples;
    int n_examples;
    bool is_training, version_2_with_negative;
    /* Training answers left out because their text is not in the document at
     * answer_start (the reference's "Could not find answer" warning). */
    long n_answers_not_found;
} SquadData;

typedef struct {
    bool is_training;               /* read the answers (run_squad's train_file) */
    bool version_2_with_negative;   /* training reads "is_impossible" */
    FILE *log;                      /* where "Could not find answer" lines go (NULL: nowhere) */
} SquadReadOptions;

/* Reads a SQuAD JSON file as read_squad_examples does. Paragraph words split on " ",
 * \t, \r, \n and U+202F only (the reference's is_whitespace). In training, each
 * possible question needs exactly one answer; its word span comes from answer_start
 * (a character index) and the answer's length, and an answer whose whitespace-
 * normalised text is not in those words is left out, counted and logged.
 * Errors (-1, err names the file and, where there is one, the question id): malformed
 * JSON, a missing or mistyped field, text that is not UTF-8, an all-whitespace question,
 * a context without words that has questions; in training also: not exactly one answer,
 * an all-whitespace answer text, answer_start or the answer's end outside the context.
 * Repeated question ids are kept (the outputs treat them as Python's dictionaries do).
 * The examples may be reordered before squad_convert (run_squad shuffles the training
 * examples with random.Random(12345)): they refer to their paragraph by index.
 * Deliberate differences from the reference:
 *  - the empty question is an error (the reference makes a query of no tokens); so is the
 *    empty context (no features; the reference crashes on it in training and in v2.0
 *    post-processing), the empty answer (the reference keeps a span that ends before it
 *    starts) and answer_start outside the context (the reference crashes, or counts a
 *    negative one from the end);
 *  - an answer starting in the context's leading whitespace is counted as not found (the
 *    reference indexes its words from the end, which almost always fails to match too);
 *  - JSON that Python reads and cJSON does not: a lone surrogate escape (\ud800) is a
 *    JSON error, and a \u0000 ends its string. */
int squad_read(const char *path, const SquadReadOptions *opt, SquadData *out, BertError *err);
/* The same from a file already read (squad_file.h; squad_read reads it with SQUAD_JSON_CJSON),
 * messages naming f->name. */
int squad_read_file(const SquadFile *f, const SquadReadOptions *opt, SquadData *out, BertError *err);
void squad_data_free(SquadData *d);

/* ---- Features: convert_examples_to_features ------------------------------------------ */

typedef struct {
    int max_seq_length;    /* 384 */
    int doc_stride;        /* 128 */
    int max_query_length;  /* 64 */
} SquadFeatureOptions;

SquadFeatureOptions squad_feature_default_options(void);

/* One window of one example: [CLS] query [SEP] doc[doc_start, doc_start+doc_length) [SEP]
 * then padding. Stored as positions; squad_feature_inputs writes the arrays. */
typedef struct {
    int64_t unique_id;       /* 1000000000 + index of the feature */
    int example_index;
    int doc_span_index;
    int doc_start, doc_length;   /* into the paragraph's sub tokens (all_doc_tokens) */
    int query_length;        /* after truncation; the document starts at query_length + 2 */
    int n_tokens;            /* query_length + doc_length + 3; the rest is padding */
    int start_position, end_position;  /* training: answer tokens in the sequence, 0 and 0
                                        * when out of this window or impossible; else -1 */
    size_t max_context_at;   /* its doc_length flags start at SquadFeatures.max_context[this] */
} SquadFeature;

/* Memory: about 48 bytes per feature and one byte per document token of its window, the
 * query ids once per example and the document's WordPiece ids (8 bytes a token) once per
 * paragraph: about 5 MB for the whole dev set at 384/128 (10,833 features), the text aside. */
typedef struct {
    SquadFeature *features;
    int n_features, cap_features;
    int max_seq_length;
    int32_t cls_id, sep_id;
    int32_t *query_ids;          /* each example's query tokens, truncated ... */
    size_t *query_start;         /* ... example e's are query_ids[query_start[e], +len) */
    uint8_t *max_context;        /* token_is_max_context of each feature's document tokens */
    size_t n_max_context, cap_max_context;
    size_t n_query_ids, cap_query_ids;
} SquadFeatures;

/* Features of every example of d, in the reference's order (unique ids from 1000000000).
 * Fills the paragraphs' WordPiece fields of d. The query is cut to max_query_length
 * tokens; the document goes in windows of max_seq_length - query - 3 tokens, each
 * starting doc_stride (or the window length, if smaller) after the previous one. The
 * answer span is refined by _improve_answer_span. A document with no WordPiece tokens
 * gets no features (as in the reference). Errors: max_seq_length <= max_query_length + 3
 * (the reference's own check), doc_stride < 1 (the reference loops forever), a
 * vocabulary without [CLS] or [SEP]. */
int squad_convert(SquadData *d, const Tokenizer *tok, const SquadFeatureOptions *opt, SquadFeatures *out,
                  BertError *err);
void squad_features_free(SquadFeatures *f);

/* Writes feature i's input_ids, input_mask and segment_ids, max_seq_length of each (any
 * of them may be NULL). */
void squad_feature_inputs(const SquadData *d, const SquadFeatures *f, int i, int32_t *input_ids,
                          int32_t *input_mask, int32_t *segment_ids);
/* token_to_orig_map: the word index of the token at position pos of feature i, or -1 if
 * pos is not a document token. */
int squad_token_to_orig(const SquadData *d, const SquadFeatures *f, int i, int pos);
/* token_is_max_context: true if pos is a document token whose window this is the one with
 * the most context (_check_is_max_context); false for any other position. */
bool squad_token_is_max_context(const SquadFeatures *f, int i, int pos);

/* ---- Post-processing: write_predictions ---------------------------------------------- */

typedef struct {
    int n_best_size;                   /* 20 */
    int max_answer_length;             /* 30 */
    bool version_2_with_negative;
    double null_score_diff_threshold;  /* 0.0 */
} SquadPredictOptions;

SquadPredictOptions squad_predict_default_options(void);

typedef struct {
    char *text;
    double probability;
    double start_logit, end_logit;
    /* Where text lies in the context, in code points [start_char, end_char) as Python (and
     * answer_start) count them; -1 for "" (no answer) and "empty". The context's slice has
     * the context's own whitespace between words, text one space. */
    int start_char, end_char;
} SquadNbestEntry;

typedef struct SquadResults {
    char **answer;               /* per example: the prediction ("" for no answer) */
    SquadNbestEntry **nbest;     /* per example: its n-best list ... */
    int *n_nbest;                /* ... of this many entries (at least 1) */
    double *null_odds;           /* v2.0, per example: score_null - best non-null score */
    int *answer_entry;           /* per example: the n-best entry that is the answer, -1 for "" */
    int n_examples;
    bool version_2_with_negative;
    /* v2.0: examples whose n-best list has no non-empty answer (every candidate span was
     * invalid, or the n-best list was full before one came). The reference crashes there
     * (best_non_null_entry is None); here the answer is "" and null_odds 1000000 (the
     * reference's own "large and positive" initial null score). */
    long n_without_non_null;
} SquadResults;

/* The reference's write_predictions over the model's logits for every feature:
 * start_logits and end_logits are [n_features, max_seq_length] (float32, as the model
 * gives them; sums and the softmax are computed in double as Python does). tok gives
 * the vocabulary strings of the tokens and the BasicTokenizer of get_final_text. Ties
 * keep the reference's order (Python's sorts are stable); NaN logits sort last. Error:
 * features that are not squad_convert's of these examples. */
int squad_predict(const SquadData *d, const SquadFeatures *f, const float *start_logits, const float *end_logits,
                  const Tokenizer *tok, const SquadPredictOptions *opt, SquadResults *out, BertError *err);
void squad_results_free(SquadResults *p);

/* predictions.json, nbest_predictions.json and (v2.0; may be NULL otherwise)
 * null_odds.json, each as the reference writes them: json.dumps(..., indent=4) + "\n"
 * (non-ASCII escaped as \uXXXX, floats as Python's repr), keyed by question id in the
 * order of the examples (a repeated id keeps its first place and its last value, as a
 * Python dict does). Each file is written atomically. */
int squad_write_predictions(const SquadData *d, const SquadResults *p, const char *prediction_file,
                            const char *nbest_file, const char *null_odds_file, BertError *err);

/* The reference's get_final_text: the part of orig_text (the original words of the
 * predicted span, joined by spaces) that corresponds to pred_text (the de-tokenized
 * WordPieces), found by aligning orig_text's BasicTokenizer output without spaces to
 * orig_text without spaces; orig_text itself when that alignment fails. Returns a new
 * string. Exposed for tests. */
char *squad_final_text(const Tokenizer *tok, const char *pred_text, const char *orig_text);

#endif
