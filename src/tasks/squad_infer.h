/* Question answering at inference: one question over one context, answered as `bert squad
 * --do_predict` answers a SQuAD file holding just that question (the same reader, features,
 * forward and post-processing, tasks/squad.h), for `bert squad --question Q --context C` and
 * `bert serve --task qa` (serve/), which batches the features its own way:
 *
 *   squad_query_open    the question and context -> one example's features (windows)
 *   squad_qa_rows       one forward over feature rows (any examples'), their start/end logits
 *   squad_query_answer  the logits -> the n-best answers, text and character offsets
 *   squad_infer_one     the three in a row
 *   squad_ask           a model folder loaded, one question answered as JSON (the command) */
#ifndef BERT_TASKS_SQUAD_INFER_H
#define BERT_TASKS_SQUAD_INFER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"
#include "model/bert.h"
#include "tasks/infer_model.h"
#include "tasks/squad.h"
#include "text/tokenizer.h"

typedef struct {
    SquadFeatureOptions features;      /* 384 / 128 / 64, as bert squad */
    SquadPredictOptions predict;       /* n-best 20, answers of up to 30 tokens, v2.0 threshold */
} SquadInferOptions;

SquadInferOptions squad_infer_default_options(void);

/* The tokenizer bert squad uses over vocab (Google's FullTokenizer: words of up to 200
 * characters). Caller frees (tokenizer_free). */
Tokenizer *squad_infer_tokenizer(const Vocab *vocab, bool do_lower_case);

typedef struct {
    SquadData d;                       /* one paragraph, one question */
    SquadFeatures f;
    float *start_logits, *end_logits;  /* [f.n_features, max_seq_length]: the caller's forward fills them */
} SquadQuery;

/* The features of question over context (UTF-8). Errors (-1, err): a blank question or a
 * context without words, invalid UTF-8, options squad_convert refuses. */
int squad_query_open(const Tokenizer *tok, const char *question, const char *context, const SquadInferOptions *o,
                     SquadQuery *q, BertError *err);
void squad_query_free(SquadQuery *q);

/* Feature i's rows for squad_qa_rows: ids and segment ids (max_seq_length each, written)
 * and its real tokens. */
int squad_query_inputs(const SquadQuery *q, int i, int32_t *ids, int32_t *types);

typedef struct {
    const int32_t *ids, *types;        /* seq_len entries */
    int length;                        /* real tokens; the rest is padding */
    float *start, *end;                /* seq_len logits each, written */
} SquadQaRow;

/* One forward over n rows of seq_len positions (n <= the model's max_batch; the QA heads):
 * every position's logits, padding included, as bert squad's batches compute them. */
int squad_qa_rows(BertModel *m, int seq_len, const SquadQaRow *rows, int n, BertError *err);

/* The reference's post-processing of q's logits: out holds one example (answer[0],
 * nbest[0] with offsets, answer_entry[0], null_odds[0]). */
int squad_query_answer(const SquadQuery *q, const Tokenizer *tok, const SquadInferOptions *o, SquadResults *out,
                       BertError *err);

/* Features, forwards of up to max_batch rows, answers. */
int squad_infer_one(BertModel *m, int max_batch, const Tokenizer *tok, const char *question, const char *context,
                    const SquadInferOptions *o, SquadResults *out, BertError *err);

/* out's first example as JSON: {"answer": text ("" for none), "start", "end" (code points of
 * the context; null for no answer), "score" (the answer's n-best probability), "null_odds"
 * (v2.0), "nbest": its first n_best entries {"text", "probability", "start_logit",
 * "end_logit", "start", "end"} (no list when n_best is 0)}. A new string (one line). */
char *squad_answer_json(const SquadResults *out, int n_best);

typedef struct {
    InferModelOptions model;           /* its max_seq_length is the features' (<= 0: 384) */
    SquadInferOptions squad;
    int max_batch;                     /* windows per forward */
} SquadAskOptions;

/* Loads the model (a QA head required: a fine-tuned SQuAD model), answers question over
 * context and returns squad_answer_json with the whole n-best list in *json (caller frees). */
int squad_ask(const SquadAskOptions *o, const char *question, const char *context, char **json, BertError *err);

#endif
