/* Sequence classification at inference (tasks/classify.h). */
#include "tasks/classify_infer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int classify_rows(BertModel *m, const ClassifyRow *rows, int n, BertError *err) {
    int T = 1;   /* the batch as long as its longest row, as bert glue's batches */
    for (int i = 0; i < n; i++) T = rows[i].length > T ? rows[i].length : T;
    int32_t *ids = xcalloc((size_t)n * T, sizeof(int32_t)), *types = xcalloc((size_t)n * T, sizeof(int32_t));
    int32_t *mask = xcalloc((size_t)n * T, sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        memcpy(ids + (size_t)i * T, rows[i].ids, sizeof(int32_t) * rows[i].length);
        memcpy(types + (size_t)i * T, rows[i].types, sizeof(int32_t) * rows[i].length);
        for (int t = 0; t < rows[i].length; t++) mask[(size_t)i * T + t] = 1;
    }
    bert_set_unpadding(m, true);
    const BertBatch b = {.batch = n, .seq_len = T, .input_ids = ids, .token_type_ids = types, .attention_mask = mask};
    int rc = 0;
    if (!isfinite(bert_forward(m, &b, false, 0))) rc = bert_fail(err, "classify: %s", bert_last_error(m));
    float *logits = NULL;
    if (rc == 0) {
        const BertParamInfo *w = bert_find_param(m, "classifier.bias");
        const int labels = w ? (int)w->numel : 0;
        logits = xmalloc(sizeof(float) * (size_t)n * (labels ? labels : 1));
        if (!labels || !bert_read_classifier_logits(m, logits)) rc = bert_fail(err, "classify: the model has no classifier");
        for (int i = 0; rc == 0 && i < n; i++)
            memcpy(rows[i].logits, logits + (size_t)i * labels, sizeof(float) * labels);
    }
    free(logits), free(ids), free(types), free(mask);
    return rc;
}

void classify_softmax(const float *logits, int n, float *p) {
    double top = logits[0], sum = 0;
    for (int k = 1; k < n; k++) top = logits[k] > top ? logits[k] : top;
    for (int k = 0; k < n; k++) sum += exp((double)logits[k] - top);
    for (int k = 0; k < n; k++) p[k] = (float)(exp((double)logits[k] - top) / sum);
}
