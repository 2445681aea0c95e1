/* Views of the model's memory in place: pointers into the compute backend's memory
 * (kernels/kernels.h). On the CPU backend they are host pointers, which the tests read to
 * compare outputs and gradients without copies; a GPU backend's are device pointers. Library
 * code outside src/model/ reads outputs with bert_read_* (model/bert.h) instead, which works
 * on every backend. */
#ifndef BERT_MODEL_VIEWS_H
#define BERT_MODEL_VIEWS_H

#include "model/bert.h"

/* The last forward's outputs: MLM logits [B*P, vocab] (rows of ignored slots zero), NSP
 * logits [B, 2], QA start and end logits [B, T], classifier logits [B, N] (NULL for a model
 * without that head). */
const float *bert_mlm_logits(const BertModel *m);
const float *bert_nsp_logits(const BertModel *m);
const float *bert_qa_start_logits(const BertModel *m);
const float *bert_qa_end_logits(const BertModel *m);
const float *bert_classifier_logits(const BertModel *m);
/* The final hidden states [B*T, H] (NULL when unpadded or pruned rows were skipped) and the
 * pooled [CLS] output [B, H]; the output row of token t of sequence s (NULL if not computed). */
const float *bert_sequence_output(const BertModel *m);
const float *bert_pooled_output(const BertModel *m);
const float *bert_token_output(const BertModel *m, int s, int t);
/* A backward that also takes the gradient of an outside loss with respect to the sequence
 * output and the pooled output (either may be NULL; backend memory), on top of the heads'
 * losses that had labels. */
int bert_backward_with(BertModel *m, const BertBatch *b, const float *d_sequence_output, const float *d_pooled);

#endif
