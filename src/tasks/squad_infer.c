/* One question over one context (tasks/squad_infer.h). */
#include "tasks/squad_infer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/squad_file.h"
#include "tasks/squad_internal.h"

SquadInferOptions squad_infer_default_options(void) {
    return (SquadInferOptions){squad_feature_default_options(), squad_predict_default_options()};
}

Tokenizer *squad_infer_tokenizer(const Vocab *vocab, bool do_lower_case) {
    TokenizerOptions to = tokenizer_default_options();
    to.do_lower_case = do_lower_case, to.max_input_chars_per_word = 200;   /* as bert squad (Google's FullTokenizer) */
    return tokenizer_new(vocab, &to);
}

/* A SQuAD file of one article, one paragraph, one question: what bert squad would read. */
static cJSON *one_question_file(const char *question, const char *context) {
    cJSON *root = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(root, "data");
    cJSON *article = cJSON_CreateObject(), *paras = cJSON_AddArrayToObject(article, "paragraphs");
    cJSON *para = cJSON_CreateObject(), *qas = cJSON_CreateArray(), *qa = cJSON_CreateObject();
    cJSON_AddItemToArray(data, article), cJSON_AddItemToArray(paras, para);
    cJSON_AddStringToObject(para, "context", context);
    cJSON_AddItemToObject(para, "qas", qas), cJSON_AddItemToArray(qas, qa);
    cJSON_AddStringToObject(qa, "id", "0"), cJSON_AddStringToObject(qa, "question", question);
    return root;
}

static bool blank(const char *s) {   /* only the whitespace the reader splits on */
    for (; *s; s++)
        if (!strchr(" \t\r\n", *s)) return false;
    return true;
}

int squad_query_open(const Tokenizer *tok, const char *question, const char *context, const SquadInferOptions *o,
                     SquadQuery *q, BertError *err) {
    memset(q, 0, sizeof *q);
    if (blank(question)) return bert_fail(err, "the question is empty");
    if (blank(context)) return bert_fail(err, "the context is empty");
    SquadFile file = {.name = "the question", .root = one_question_file(question, context)};
    const SquadReadOptions ro = {.version_2_with_negative = o->predict.version_2_with_negative};
    int rc = squad_read_file(&file, &ro, &q->d, err);
    cJSON_Delete(file.root);
    if (rc == 0) rc = squad_convert(&q->d, tok, &o->features, &q->f, err);
    if (rc != 0) {
        squad_query_free(q);
        return -1;
    }
    const size_t cells = (size_t)q->f.n_features * (size_t)o->features.max_seq_length + 1;
    q->start_logits = xcalloc(cells, sizeof(float)), q->end_logits = xcalloc(cells, sizeof(float));
    return 0;
}

void squad_query_free(SquadQuery *q) {
    squad_features_free(&q->f), squad_data_free(&q->d);
    free(q->start_logits), free(q->end_logits);
    memset(q, 0, sizeof *q);
}

int squad_query_inputs(const SquadQuery *q, int i, int32_t *ids, int32_t *types) {
    squad_feature_inputs(&q->d, &q->f, i, ids, NULL, types);
    return q->f.features[i].n_tokens;
}

int squad_qa_rows(BertModel *m, int seq_len, const SquadQaRow *rows, int n, BertError *err) {
    const size_t cells = (size_t)n * seq_len;
    int32_t *ids = xmalloc(sizeof(int32_t) * cells), *types = xmalloc(sizeof(int32_t) * cells);
    int32_t *mask = xcalloc(cells, sizeof(int32_t));
    float *start = xmalloc(sizeof(float) * cells), *end = xmalloc(sizeof(float) * cells);
    for (int i = 0; i < n; i++) {
        memcpy(ids + (size_t)i * seq_len, rows[i].ids, sizeof(int32_t) * seq_len);
        memcpy(types + (size_t)i * seq_len, rows[i].types, sizeof(int32_t) * seq_len);
        for (int t = 0; t < rows[i].length; t++) mask[(size_t)i * seq_len + t] = 1;
    }
    const BertBatch b = {.batch = n, .seq_len = seq_len, .input_ids = ids, .token_type_ids = types,
                         .attention_mask = mask};
    int rc = 0;
    if (!isfinite(bert_forward(m, &b, false, 0))) rc = bert_fail(err, "question answering: %s", bert_last_error(m));
    else if (!bert_read_qa_logits(m, start, end)) rc = bert_fail(err, "question answering: the model has no QA head");
    for (int i = 0; rc == 0 && i < n; i++) {
        memcpy(rows[i].start, start + (size_t)i * seq_len, sizeof(float) * seq_len);
        memcpy(rows[i].end, end + (size_t)i * seq_len, sizeof(float) * seq_len);
    }
    free(ids), free(types), free(mask), free(start), free(end);
    return rc;
}

int squad_query_answer(const SquadQuery *q, const Tokenizer *tok, const SquadInferOptions *o, SquadResults *out,
                       BertError *err) {
    return squad_predict(&q->d, &q->f, q->start_logits, q->end_logits, tok, &o->predict, out, err);
}

int squad_infer_one(BertModel *m, int max_batch, const Tokenizer *tok, const char *question, const char *context,
                    const SquadInferOptions *o, SquadResults *out, BertError *err) {
    memset(out, 0, sizeof *out);
    SquadQuery q;
    if (squad_query_open(tok, question, context, o, &q, err) != 0) return -1;
    const int T = o->features.max_seq_length, n = q.f.n_features;
    int32_t *ids = xmalloc(sizeof(int32_t) * (size_t)n * T + 1), *types = xmalloc(sizeof(int32_t) * (size_t)n * T + 1);
    SquadQaRow *rows = xmalloc(sizeof(SquadQaRow) * (size_t)n + 1);
    for (int i = 0; i < n; i++) {
        const size_t at = (size_t)i * T;
        const int len = squad_query_inputs(&q, i, ids + at, types + at);
        rows[i] = (SquadQaRow){ids + at, types + at, len, q.start_logits + at, q.end_logits + at};
    }
    int rc = 0;
    for (int s = 0; rc == 0 && s < n; s += max_batch)
        rc = squad_qa_rows(m, T, rows + s, n - s < max_batch ? n - s : max_batch, err);
    if (rc == 0) rc = squad_query_answer(&q, tok, o, out, err);
    free(ids), free(types), free(rows);
    squad_query_free(&q);
    return rc;
}

static void put_offset(FILE *fp, const char *key, int x) {
    if (x >= 0) fprintf(fp, ", \"%s\": %d", key, x);
    else fprintf(fp, ", \"%s\": null", key);
}

static void put_float(FILE *fp, const char *key, double x) {
    fprintf(fp, ", \"%s\": ", key);
    squad_json_float(fp, x);
}

/* Written as bert squad writes its files (Python's json: floats as repr, so the numbers are
 * the double values exactly, ASCII with \u escapes). */
char *squad_answer_json(const SquadResults *out, int n_best) {
    char *text = NULL;
    size_t size = 0;
    FILE *fp = open_memstream(&text, &size);
    if (!fp) die("squad: out of memory");
    const int a = out->answer_entry[0];
    const SquadNbestEntry *best = a >= 0 ? &out->nbest[0][a] : NULL;
    double score = best ? best->probability : 0;
    for (int i = 0; !best && i < out->n_nbest[0]; i++)   /* no answer: the null entry's probability */
        if (!out->nbest[0][i].text[0]) score = out->nbest[0][i].probability;
    fputs("{\"answer\": ", fp);
    squad_json_string(fp, out->answer[0]);
    put_offset(fp, "start", best ? best->start_char : -1), put_offset(fp, "end", best ? best->end_char : -1);
    put_float(fp, "score", score);
    if (out->version_2_with_negative) put_float(fp, "null_odds", out->null_odds[0]);
    if (n_best > 0) {
        fputs(", \"nbest\": [", fp);
        for (int i = 0; i < out->n_nbest[0] && i < n_best; i++) {
            const SquadNbestEntry *e = &out->nbest[0][i];
            fputs(i ? ", {\"text\": " : "{\"text\": ", fp);
            squad_json_string(fp, e->text);
            put_float(fp, "probability", e->probability);
            put_float(fp, "start_logit", e->start_logit), put_float(fp, "end_logit", e->end_logit);
            put_offset(fp, "start", e->start_char), put_offset(fp, "end", e->end_char);
            fputs("}", fp);
        }
        fputs("]", fp);
    }
    fputs("}", fp);
    fclose(fp);
    return text;
}

int squad_ask(const SquadAskOptions *o, const char *question, const char *context, char **json, BertError *err) {
    *json = NULL;
    InferModelOptions mo = o->model;
    if (mo.max_seq_length <= 0) mo.max_seq_length = 384;
    const int max_batch = o->max_batch > 0 ? o->max_batch : 1;
    InferModel m;
    if (infer_model_open(&mo, (BertHeads){BERT_HEADS_QA, 0}, max_batch, &m, err) != 0) return -1;
    if (m.heads_initialised) {   /* random span logits would still "answer" */
        infer_model_close(&m);
        return bert_fail(err, "%s has no question-answering weights (qa_outputs): not a fine-tuned SQuAD model",
                         mo.init_checkpoint);
    }
    SquadInferOptions so = o->squad;
    so.features.max_seq_length = m.max_seq;
    Tokenizer *tok = squad_infer_tokenizer(m.vocab, mo.do_lower_case);
    SquadResults res;
    const int rc = squad_infer_one(m.model, max_batch, tok, question, context, &so, &res, err);
    if (rc == 0) *json = squad_answer_json(&res, res.n_nbest[0]);
    if (rc == 0) squad_results_free(&res);
    tokenizer_free(tok), infer_model_close(&m);
    return rc;
}
