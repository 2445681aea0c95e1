/* Inference on real length distributions: the token counts of a task's dev examples (GLUE
 * rows, SQuAD features) and a timing of the encoder over them, batch by batch in arrival
 * order, three ways:
 *   padded  every batch at max_seq_length (static shapes, as a fixed-shape export runs)
 *   dynamic every batch as long as its longest sequence, padding computed
 *   packed  the same batches with the padding never computed (bert_set_unpadding)
 * Latency is per batch (mean, p50/p90/p95/p99 and max over the batches); throughput over all
 * of them. Without a task, every sequence is max_seq_length long (fixed shapes). */
#ifndef BERT_TASKS_INFER_BENCH_H
#define BERT_TASKS_INFER_BENCH_H

#include <stdint.h>

#include "core/common.h"
#include "model/bert.h"
#include "text/tokenizer.h"

/* [CLS] a [SEP] b [SEP] lengths of a GLUE task's dev rows (cut to max_seq_length). */
int glue_dev_lengths(const char *task, const char *data_dir, const Tokenizer *tok, int max_seq_length,
                     int32_t **lengths, int *n, BertError *err);
/* [CLS] text [SEP] lengths of a file's lines (cut to max_seq_length) as bert embed and
 * bert serve's embedding endpoints encode them, one text a line, empty lines skipped: the
 * texts a server's load sends, for its batch-1 latency next to bench_infer's. */
int text_file_lengths(const char *path, const Tokenizer *tok, int max_seq_length, int32_t **lengths, int *n,
                      BertError *err);
/* n_tokens of every SQuAD feature of a file (doc_stride 128, max_query_length 64). */
int squad_feature_lengths(const char *path, const Tokenizer *tok, int max_seq_length, int32_t **lengths, int *n,
                          BertError *err);

typedef enum { INFER_PADDED, INFER_DYNAMIC, INFER_PACKED } InferMode;

typedef struct {
    int batches, sequences;
    long tokens_real, tokens_computed;   /* real tokens, and the rows the encoder ran */
    double seconds, sequences_per_second;
    double avg_ms, p50_ms, p90_ms, p95_ms, p99_ms, max_ms;   /* per batch */
} InferTiming;

/* Runs the model (created for batch x max_seq_length) over lengths[0..n) in batches of
 * `batch`, after `warmup` untimed batches. */
int infer_bench_run(BertModel *m, const int32_t *lengths, int n, int batch, int max_seq_length, InferMode mode,
                    int warmup, InferTiming *t, BertError *err);

#endif
