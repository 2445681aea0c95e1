/* `bert ner`: token classification (named entities) on CoNLL files, with HuggingFace
 * run_ner.py's flags (and the fine-tuning flags NVIDIA's scripts share). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/finetune_flags.h"
#include "cli/flags.h"
#include "tasks/ner_run.h"

static void print_scores(const char *what, const NerScores *s) {
    char *json = ner_scores_json(s);
    printf("bert ner: %s %s\n", what, json);
    free(json);
}

int cmd_ner(int argc, char **argv) {
    NerOptions o;
    ner_default_options(&o);
    const char *metric = "default";
    FinetuneFlagState ft;
    Flag flags[7 + FINETUNE_FLAG_COUNT + 1] = {
        {"train_file", FLAG_STRING, &o.train_file, "CoNLL training file: word [columns] tag lines, blank lines "
                                                   "between sentences, -DOCSTART- lines skipped (--do_train)"},
        {"validation_file", FLAG_STRING, &o.validation_file, "CoNLL file for the entity metrics (--do_eval)"},
        {"test_file", FLAG_STRING, &o.test_file, "CoNLL file to predict, tags optional (--do_predict)"},
        {"output_dir", FLAG_STRING, &o.ft.output_dir, "the model, eval_results.json, predictions.txt (required)"},
        {"labels", FLAG_STRING, &o.labels, "file of labels, one a line; default the training file's tags sorted, or "
                                           "the --init_checkpoint model's id2label"},
        {"label_all_tokens", FLAG_BOOL, &o.label_all_tokens, "label every word piece (B-X -> I-X after the first), "
                                                             "not only a word's first"},
        {"metric_mode", FLAG_STRING, &metric, "default (seqeval's default = conlleval's rules, run_ner.py's), "
                                              "strict-iob2 or strict-iobes (seqeval mode=\"strict\")"},
    };
    int n = 7 + finetune_flags(flags + 7, &o.ft, &ft, "sentences", "eval_batch_size");
    const FlagSpec spec = {"ner", "ner --output_dir O --init_checkpoint C [--do_train --train_file F] [--do_eval "
                                  "--validation_file F] [--do_predict --test_file F] [flags]   (HF run_ner.py's flags)",
                           flags, n, 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "output_dir,init_checkpoint") != 0) return 2;
    if (finetune_flags_finish("ner", &o.ft, &ft) != 0) return 2;
    const int mode = ner_metric_mode(metric);
    if (mode < 0) {
        fprintf(stderr, "bert ner: --metric_mode %s: one of default, strict-iob2, strict-iobes\n", metric);
        return 2;
    }
    o.metric = (NerMetricMode)mode;
    char init_checkpoint[4096 + 64];   /* a run folder's newest checkpoint */
    if (flags_init_checkpoint("ner", &o.ft.init_checkpoint, init_checkpoint, sizeof init_checkpoint) != 0) return 1;
    NerResult r;
    BertError err;
    if (ner_run(&o, &r, &err) != 0) {
        fprintf(stderr, "bert ner: %s\n", err.msg);
        return 1;
    }
    finetune_print_training("bert ner:", "sentences", &r.train, ft.fp16);
    if (r.evaluated) print_scores("eval", &r.dev);
    if (r.test_scored) print_scores("test", &r.test);
    if (r.predicted_sentences) printf("bert ner: predictions in %s/predictions.txt\n", o.ft.output_dir);
    finetune_print_saved("ner", r.model_dir);
    return 0;
}
