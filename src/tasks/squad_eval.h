/* SQuAD's official evaluation, v1.1 and v2.0: the numbers evaluate-v1.1.py and
 * evaluate-v2.0.py print, to the last digit, for the same files.
 *
 * What the official scripts do, and so what this does:
 *  - normalize_answer: Python's str.lower() (full Unicode mapping, not casefold), then every
 *    character of string.punctuation (ASCII only) removed, then the words "a", "an", "the"
 *    replaced by a space where re's \b (Unicode: alphanumerics and '_' are word characters)
 *    stands on both sides, then str.split() (Unicode whitespace) and one space between words.
 *  - exact match compares normalized strings; F1 counts the tokens common to both (a
 *    multiset intersection) and takes 2PR/(P+R); each question scores its best gold answer.
 *  - v1.1: a question without a prediction scores 0 and is named ("Unanswered question ...
 *    will receive score 0."); exact_match and f1 are percentages of all questions.
 *  - v2.0: a question whose "answers" list is empty has the one gold answer "" (gold answers
 *    that normalize to nothing are dropped, and "" stands in when none is left); F1 against
 *    an empty answer is 1 when both are empty, else 0. A no-answer probability above the
 *    threshold turns a prediction into "no answer" (apply_no_ans_threshold); with a
 *    probability file, best_exact/best_f1 and their thresholds are find_all_best_thresh's.
 *    Question ids count once (a repeated id keeps its first place and its last answers).
 *  - Sums run in dataset order with Python 3.11's float arithmetic (the fixtures' Python;
 *    Python 3.12 changed sum() to a compensated sum, which can move the last printed digit
 *    of v2.0's f1 numbers). The JSON is what json.dumps prints: Python's shortest float
 *    repr, the official key order, v2.0 with indent=2 on stdout.
 *
 * Where the official scripts crash, this returns a clear error instead: a file that is not
 * JSON or not UTF-8, a wrong structure (named by its path in the file, e.g.
 * data[3].paragraphs[0].qas[2].answers), a prediction that is not a string, a v1.1 question
 * with a prediction but no answers, and, for v2.0, any question without a prediction (the
 * official v2.0 script prints "Missing prediction for ..." and then stops with a KeyError)
 * or without a no-answer probability when a probability file is given.
 * Checked against the official scripts by tests/test_squad_eval.c
 * (fixtures: tools/make_squad_eval_fixtures.py). */
#ifndef BERT_SQUAD_EVAL_H
#define BERT_SQUAD_EVAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"
#include "tasks/squad_file.h"

typedef enum { SQUAD_V1_1 = 1, SQUAD_V2_0 = 2 } SquadVersion;

typedef struct {
    char *id;
    char **answers;   /* the gold answers' "text", in file order */
    int n_answers;
} SquadQuestion;

typedef struct {
    char *name;           /* the file, for messages */
    char *version;        /* the top-level "version" string; NULL if absent */
    bool version_bad;     /* "version" present but not a string */
    SquadQuestion *questions;  /* every qas entry of every paragraph of every article, in order */
    size_t n;
} SquadDataset;

typedef struct SquadPredictions SquadPredictions;  /* question id -> predicted answer */
typedef struct SquadNaProbs SquadNaProbs;          /* question id -> no-answer probability */

/* Readers. The _parse forms take text[0..len) with text[len] == '\0' (the file's bytes) and
 * name it `name` in messages. Files must be UTF-8 JSON (no byte order mark, which Python's
 * json refuses too); a string containing \u0000 is refused (cJSON's strings end at NUL). */
int squad_dataset_load(const char *path, SquadDataset *d, BertError *err);
int squad_dataset_parse(const char *text, size_t len, const char *name, SquadDataset *d, BertError *err);
/* The same from a file already read (squad_file.h; the two above read it with
 * SQUAD_JSON_PYTHON), named f->name. */
int squad_dataset_from_file(const SquadFile *f, SquadDataset *d, BertError *err);
void squad_dataset_free(SquadDataset *d);

/* A JSON object {id: answer}. Values that are not strings are an error only for ids the
 * dataset asks for (the official scripts never read the others). */
int squad_predictions_load(const char *path, SquadPredictions **p, BertError *err);
int squad_predictions_parse(const char *text, size_t len, const char *name, SquadPredictions **p, BertError *err);
void squad_predictions_free(SquadPredictions *p);
size_t squad_predictions_count(const SquadPredictions *p);
/* Predictions made in memory (what the file would hold): none yet, named `name` in
 * messages; then id -> answer, a repeated id keeping its first place and taking the last
 * answer, as the file's reader (a Python dict) does. */
SquadPredictions *squad_predictions_new(const char *name);
void squad_predictions_set(SquadPredictions *p, const char *id, const char *answer);

/* A JSON object {id: number}; every value must be a number written as JSON writes one (an
 * integer stays an integer: a threshold taken from it prints as Python prints it, "1" not
 * "1.0"). Integers beyond 2^53 are refused (they would not compare exactly). */
int squad_na_probs_load(const char *path, SquadNaProbs **p, BertError *err);
int squad_na_probs_parse(const char *text, size_t len, const char *name, SquadNaProbs **p, BertError *err);
void squad_na_probs_free(SquadNaProbs *p);

typedef struct {
    SquadVersion version;
    const SquadNaProbs *na_probs;  /* v2.0 only; NULL: every probability 0.0 */
    double na_prob_thresh;         /* v2.0: "no answer" when the probability exceeds it; 1.0 */
    /* Each line the official script prints about the data, in its order: v1.1's version
     * warning and "Unanswered question ID will receive score 0.", v2.0's "Missing prediction
     * for ID". May be NULL. */
    void (*note)(const char *line, void *ctx);
    void *note_ctx;
    const char *v2_hint;           /* how to evaluate a v2.0 file, for messages; NULL: "use --version 2.0" */
} SquadEvalOptions;

SquadEvalOptions squad_eval_default_options(SquadVersion version);

typedef struct {
    SquadVersion version;
    double exact, f1;   /* v1.1's exact_match and f1; v2.0's exact and f1 (percentages) */
    long total;         /* questions counted (v1.1: all; v2.0: its "total") */
    long unanswered;    /* v1.1: questions without a prediction (scored 0) */
    bool has_ans, no_ans, best;  /* which v2.0 groups are present (as the script prints them) */
    double has_ans_exact, has_ans_f1, no_ans_exact, no_ans_f1;
    long has_ans_total, no_ans_total;
    double best_exact, best_f1;
    char best_exact_thresh[40], best_f1_thresh[40];  /* as Python prints them: "0.0", "0.35", "1" */
} SquadMetrics;

int squad_evaluate(const SquadDataset *d, const SquadPredictions *p, const SquadEvalOptions *opt, SquadMetrics *m,
                   BertError *err);

/* The metrics as json.dumps prints them: indent 0 gives one line ({"exact_match": ..., "f1":
 * ...} for v1.1; json.dump's form for v2.0), indent 2 the v2.0 script's stdout. No final
 * newline. Caller frees. */
char *squad_metrics_json(const SquadMetrics *m, int indent);

/* normalize_answer of UTF-8 text (invalid bytes read as U+FFFD). Caller frees. */
char *squad_normalize_answer(const char *text, size_t len);

/* Python's repr() of a float as json.dumps writes it ("Infinity", "NaN" for those). */
void squad_float_repr(double x, char out[40]);

#endif
