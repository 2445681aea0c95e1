/* `bert squad`: SQuAD fine-tuning and prediction with NVIDIA run_squad.py's flags. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/finetune_flags.h"
#include "cli/flags.h"
#include "tasks/squad_run.h"

int cmd_squad(int argc, char **argv) {
    SquadOptions o;
    squad_default_options(&o);
    FinetuneFlagState ft;
    Flag flags[3 + FINETUNE_FLAG_COUNT + 9] = {
        {"train_file", FLAG_STRING, &o.train_file, "SQuAD JSON to train on (train-v1.1.json, train-v2.0.json)"},
        {"predict_file", FLAG_STRING, &o.predict_file, "SQuAD JSON to predict (dev-v1.1.json, dev-v2.0.json)"},
        {"output_dir", FLAG_STRING, &o.ft.output_dir, "model, predictions.json, nbest_predictions.json, null_odds.json (required)"},
    };
    int n = 3 + finetune_flags(flags + 3, &o.ft, &ft, "features", "predict_batch_size");
    const Flag squad_flags[] = {
        {"doc_stride", FLAG_INT, &o.doc_stride, "between document windows; default 128"},
        {"max_query_length", FLAG_INT, &o.max_query_length, "question tokens kept; default 64"},
        {"n_best_size", FLAG_INT, &o.n_best_size, "candidates kept per question; default 20"},
        {"max_answer_length", FLAG_INT, &o.max_answer_length, "longest answer in tokens; default 30"},
        {"version_2_with_negative", FLAG_BOOL, &o.version_2_with_negative, "SQuAD v2.0: questions may have no answer"},
        {"null_score_diff_threshold", FLAG_DOUBLE, &o.null_score_diff_threshold,
         "v2.0: answer \"\" when null score - best score exceeds this; default 0"},
        {"train_articles", FLAG_INT, &o.train_articles, "train on the first N articles of --train_file only"},
        {"predict_skip_articles", FLAG_INT, &o.predict_skip_articles, "predict --predict_file's articles from the Nth on"},
        {"predict_articles", FLAG_INT, &o.predict_articles,
         "predict only N articles (after the skipped ones; default all); the subset is written as predict_articles.json"},
    };
    for (size_t i = 0; i < sizeof squad_flags / sizeof squad_flags[0]; i++) flags[n++] = squad_flags[i];
    const FlagSpec spec = {"squad", "squad --init_checkpoint C --output_dir O [--do_train --train_file F] "
                                    "[--do_predict --predict_file F [--do_eval]] [flags]   (NVIDIA run_squad.py's flags)",
                           flags, n, 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "init_checkpoint,output_dir") != 0) return 2;
    if (finetune_flags_finish("squad", &o.ft, &ft) != 0) return 2;
    char init_checkpoint[4096 + 64];   /* a run folder's newest checkpoint */
    if (flags_init_checkpoint("squad", &o.ft.init_checkpoint, init_checkpoint, sizeof init_checkpoint) != 0) return 1;
    SquadResult r;
    BertError err;
    if (squad_run(&o, &r, &err) != 0) {
        fprintf(stderr, "bert squad: %s\n", err.msg);
        return 1;
    }
    finetune_print_training("bert squad:", "features", &r.train, ft.fp16);
    if (r.predict_features)
        printf("bert squad: %ld questions, %ld features predicted in %.1f s\n", r.predict_examples, r.predict_features,
               r.predict_seconds);
    if (r.evaluated) printf("%s\n", r.metrics_json);
    finetune_print_saved("squad", r.model_dir);
    return 0;
}
