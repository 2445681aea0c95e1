/* `bert classify`: sequence classification (single-label, regression, multi-label) on any
 * CSV / TSV / JSONL data, with HuggingFace run_classification.py's flags (and the fine-tuning
 * flags NVIDIA's scripts share). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/finetune_flags.h"
#include "cli/flags.h"
#include "tasks/classify_run.h"

enum { OWN_FLAGS = 11 };

int cmd_classify(int argc, char **argv) {
    ClassifyOptions o;
    classify_default_options(&o);
    bool regression = false, multi_label = false;
    FinetuneFlagState ft;
    Flag flags[OWN_FLAGS + FINETUNE_FLAG_COUNT + 1] = {
        {"train_file", FLAG_STRING, &o.train_file, "training data: .csv, .tsv or .jsonl, a header row / keys naming the "
                                                   "columns (--do_train)"},
        {"validation_file", FLAG_STRING, &o.validation_file, "data to score into eval_results.json (--do_eval)"},
        {"test_file", FLAG_STRING, &o.test_file, "data to predict into predict_results.tsv/.jsonl, labels optional "
                                                 "(--do_predict)"},
        {"output_dir", FLAG_STRING, &o.ft.output_dir, "the model, eval_results.json, predictions (required)"},
        {"format", FLAG_STRING, &o.format, "csv, tsv or jsonl for every file (default: each file's extension)"},
        {"text_column_names", FLAG_STRING, &o.columns.text_columns, "the text column, or two for a pair "
            "(\"sentence1,sentence2\"); default sentence, else text, else sentence1,sentence2, else the first column"},
        {"label_column_name", FLAG_STRING, &o.columns.label_column, "the label column (default label)"},
        {"labels", FLAG_STRING, &o.labels, "the labels in id order, comma-separated; default the training file's sorted, "
                                           "or the --init_checkpoint model's id2label"},
        {"do_regression", FLAG_BOOL, &regression, "numeric labels, one output, mean squared error"},
        {"multi_label", FLAG_BOOL, &multi_label, "several labels a row (a JSON list, or joined by --label_separator): "
                                                 "a sigmoid per label, binary cross-entropy"},
        {"label_separator", FLAG_STRING, &o.columns.label_separator, "between a multi-label CSV/TSV cell's labels "
                                                                     "(default \",\")"},
    };
    int n = OWN_FLAGS + finetune_flags(flags + OWN_FLAGS, &o.ft, &ft, "sequences", "eval_batch_size");
    const FlagSpec spec = {"classify", "classify --output_dir O --init_checkpoint C [--do_train --train_file F] "
                                       "[--do_eval --validation_file F] [--do_predict --test_file F] [flags]   "
                                       "(HF run_classification.py's flags)",
                           flags, n, 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "output_dir,init_checkpoint") != 0) return 2;
    if (finetune_flags_finish("classify", &o.ft, &ft) != 0) return 2;
    if (regression && multi_label) {
        fprintf(stderr, "bert classify: --do_regression or --multi_label, not both\n");
        return 2;
    }
    o.columns.problem = regression ? CLS_REGRESSION : multi_label ? CLS_MULTI_LABEL : CLS_SINGLE_LABEL;
    o.problem_given = regression || multi_label;
    char init_checkpoint[4096 + 64];   /* a run folder's newest checkpoint */
    if (flags_init_checkpoint("classify", &o.ft.init_checkpoint, init_checkpoint, sizeof init_checkpoint) != 0) return 1;
    ClassifyResult r;
    BertError err;
    if (classify_run(&o, &r, &err) != 0) {
        fprintf(stderr, "bert classify: %s\n", err.msg);
        return 1;
    }
    char prefix[96];
    snprintf(prefix, sizeof prefix, "bert classify: %s:", cls_problem_name(r.problem));
    finetune_print_training(prefix, "sequences", &r.train, ft.fp16);
    if (r.evaluated) {
        char *json = cls_scores_json(&r.dev);
        printf("bert classify: eval %s\n", json);
        free(json);
    }
    if (r.predictions[0]) printf("bert classify: predictions in %s (%ld rows)\n", r.predictions, r.predicted);
    finetune_print_saved("classify", r.model_dir);
    return 0;
}
