/* `bert squad`: SQuAD fine-tuning and prediction with NVIDIA run_squad.py's flags. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/finetune_flags.h"
#include "cli/flags.h"
#include "tasks/squad_infer.h"
#include "tasks/squad_run.h"

/* --question Q --context C: one question answered with the fine-tuned model, the n-best list
 * as JSON on stdout (NVIDIA's inference.py), through the server's path (tasks/squad_infer.h). */
static int ask(const SquadOptions *o, const char *question, const char *context) {
    char vocab[4096 + 32];
    bool lower;
    if (finetune_flags_tokenizer("squad", &o->ft, vocab, sizeof vocab, &lower) != 0) return 1;
    BertError err;
    SquadAskOptions a = {.model = {.init_checkpoint = o->ft.init_checkpoint, .config_file = o->ft.config_file,
                                   .vocab_file = vocab, .do_lower_case = lower, .bf16 = o->ft.precision == BERT_BF16,
                                   .int8 = o->ft.precision == BERT_INT8,
                                   .max_seq_length = o->ft.max_seq_length},
                         .squad = squad_infer_default_options(), .max_batch = o->ft.eval_batch_size};
    a.squad.features = (SquadFeatureOptions){o->ft.max_seq_length, o->doc_stride, o->max_query_length};
    a.squad.predict = (SquadPredictOptions){o->n_best_size, o->max_answer_length, o->version_2_with_negative,
                                            o->null_score_diff_threshold};
    char *json;
    if (squad_ask(&a, question, context, &json, &err) != 0) return fprintf(stderr, "bert squad: %s\n", err.msg), 1;
    printf("%s\n", json);
    free(json);
    return 0;
}

int cmd_squad(int argc, char **argv) {
    SquadOptions o;
    squad_default_options(&o);
    FinetuneFlagState ft;
    const char *question = NULL, *context = NULL;
    Flag flags[3 + FINETUNE_FLAG_COUNT + 11] = {
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
        {"question", FLAG_STRING, &question, "with --context: answer this question with the model, the n-best answers "
                                             "as JSON on stdout (no --output_dir)"},
        {"context", FLAG_STRING, &context, "the text --question is asked about"},
    };
    for (size_t i = 0; i < sizeof squad_flags / sizeof squad_flags[0]; i++) flags[n++] = squad_flags[i];
    const FlagSpec spec = {"squad", "squad --init_checkpoint C --output_dir O [--do_train --train_file F] "
                                    "[--do_predict --predict_file F [--do_eval]] [flags]   (NVIDIA run_squad.py's flags)\n"
                                    "       squad --init_checkpoint C --question Q --context C   (the n-best answers as JSON)",
                           flags, n, 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    const bool asking = question || context;
    if (asking && (!question || !context || o.ft.do_train || o.ft.do_predict))
        return fprintf(stderr, "bert squad: --question and --context go together, without --do_train or --do_predict\n"), 2;
    if (flags_require(&spec, asking ? "init_checkpoint" : "init_checkpoint,output_dir") != 0) return 2;
    if (finetune_flags_finish("squad", &o.ft, &ft) != 0) return 2;
    char init_checkpoint[4096 + 64];   /* a run folder's newest checkpoint */
    if (flags_init_checkpoint("squad", &o.ft.init_checkpoint, init_checkpoint, sizeof init_checkpoint) != 0) return 1;
    if (asking) return ask(&o, question, context);
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
