/* `bert plot`: training curves from DLLogger JSON logs (the `--json-summary` file of
 * `bert pretrain`, or NVIDIA's run_pretraining.py's: lines `DLLL {...}` with "type": "LOG",
 * a step that is a number or a list whose last number is the global step, and numeric
 * "data"). Every numeric key goes into a panel by what it measures: losses, accuracies,
 * the learning rate; keys starting with "eval_" are drawn as points. Several logs are
 * overlaid (each series named after its file), e.g. fp32 against bf16. */
#ifndef BERT_TRAIN_LOG_PLOT_H
#define BERT_TRAIN_LOG_PLOT_H

#include "core/common.h"

/* Reads the logs and writes the SVG; fails when a log cannot be read or has no LOG record
 * with a numeric step. *records (if non-NULL) gets how many records were plotted. */
int training_log_plot(const char *const *logs, int count, const char *title, const char *svg_path, long *records,
                      BertError *err);

#endif
