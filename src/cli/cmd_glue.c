/* `bert glue`: fine-tuning and evaluation on a GLUE task, with NVIDIA's run_glue.py flags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/finetune_flags.h"
#include "cli/flags.h"
#include "tasks/glue_run.h"
#include "tasks/glue_stream.h"

/* --do_predict --predict_file -: stdin's lines predicted onto stdout (tasks/glue_stream.h). */
static int predict_stdin(const GlueOptions *o) {
    const GlueTask *t = glue_task(o->task_name);
    if (!t) return fprintf(stderr, "bert glue: --task_name %s: one of %s\n", o->task_name, glue_task_names()), 2;
    char vocab[4096 + 32];
    bool lower;
    if (finetune_flags_tokenizer("glue", &o->ft, vocab, sizeof vocab, &lower) != 0) return 1;
    const GlueStreamOptions so = {.model = {.init_checkpoint = o->ft.init_checkpoint, .config_file = o->ft.config_file,
                                            .vocab_file = vocab, .do_lower_case = lower,
                                            .bf16 = o->ft.precision == BERT_BF16, .int8 = o->ft.precision == BERT_INT8,
                                            .max_seq_length = o->ft.max_seq_length},
                                  .task = t, .batch = o->ft.eval_batch_size};
    BertError err;
    long lines;
    const char *precision;
    if (glue_predict_stream(&so, stdin, stdout, &lines, &precision, &err) != 0)
        return fprintf(stderr, "bert glue: stdin: %s\n", err.msg), 1;
    fprintf(stderr, "bert glue: %s: %ld lines predicted (%s)\n", t->name, lines, precision);
    return 0;
}

int cmd_glue(int argc, char **argv) {
    GlueOptions o;
    glue_default_options(&o);
    long long train_examples = 0;
    FinetuneFlagState ft;
    const char *predict_file = NULL;
    Flag flags[3 + FINETUNE_FLAG_COUNT + 2] = {
        {"task_name", FLAG_STRING, &o.task_name, "cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte or wnli (required)"},
        {"data_dir", FLAG_STRING, &o.data_dir, "the task's folder in the GLUE layout: train.tsv, dev.tsv, test.tsv (required)"},
        {"output_dir", FLAG_STRING, &o.ft.output_dir, "the fine-tuned model, eval_results.json, test predictions (required)"},
    };
    int n = 3 + finetune_flags(flags + 3, &o.ft, &ft, "sequences", "eval_batch_size");
    flags[n++] = (Flag){"train_examples", FLAG_INT64, &train_examples, "train on the first N rows of train.tsv only"};
    flags[n++] = (Flag){"predict_file", FLAG_STRING, &predict_file,
                        "- with --do_predict: predict stdin's lines (text, or text_a TAB text_b) onto stdout "
                        "(no --data_dir, --output_dir)"};
    const FlagSpec spec = {"glue", "glue --task_name T --data_dir D --output_dir O --init_checkpoint C "
                                   "[--do_train] [--do_eval] [--do_predict] [flags]   (NVIDIA run_glue.py's flags)\n"
                                   "       glue --task_name T --init_checkpoint C --do_predict --predict_file - < pairs.tsv",
                           flags, n, 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    const bool from_stdin = predict_file != NULL;
    if (from_stdin && (strcmp(predict_file, "-") || !o.ft.do_predict || o.ft.do_train || o.ft.do_eval))
        return fprintf(stderr, "bert glue: --predict_file takes - (stdin), with --do_predict alone\n"), 2;
    if (flags_require(&spec, from_stdin ? "task_name,init_checkpoint" : "task_name,data_dir,output_dir,init_checkpoint") != 0)
        return 2;
    if (finetune_flags_finish("glue", &o.ft, &ft) != 0) return 2;
    char init_checkpoint[4096 + 64];   /* a run folder's newest checkpoint */
    if (flags_init_checkpoint("glue", &o.ft.init_checkpoint, init_checkpoint, sizeof init_checkpoint) != 0) return 1;
    if (from_stdin) return predict_stdin(&o);
    o.train_examples = (long)train_examples;
    GlueResult r;
    BertError err;
    if (glue_run(&o, &r, &err) != 0) {
        fprintf(stderr, "bert glue: %s\n", err.msg);
        return 1;
    }
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bert glue: %s:", r.task->name);
    finetune_print_training(prefix, "sequences", &r.train, ft.fp16);
    if (r.evaluated) {
        char *json = glue_scores_json(r.task, &r.dev);
        printf("%s\n", json);
        free(json);
    }
    finetune_print_saved("glue", r.model_dir);
    return 0;
}
