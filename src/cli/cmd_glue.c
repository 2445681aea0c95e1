/* `bert glue`: fine-tuning and evaluation on a GLUE task, with NVIDIA's run_glue.py flags. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "model/bert.h"
#include "tasks/glue_run.h"

int cmd_glue(int argc, char **argv) {
    GlueOptions o;
    glue_default_options(&o);
    long long max_steps = o.max_steps, seed = o.seed, train_examples = 0, log_freq = o.log_freq;
    bool bf16 = false, fp16 = false;
    const Flag flags[] = {
        {"task_name", FLAG_STRING, &o.task_name, "cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte or wnli (required)"},
        {"data_dir", FLAG_STRING, &o.data_dir, "the task's folder in the GLUE layout: train.tsv, dev.tsv, test.tsv (required)"},
        {"output_dir", FLAG_STRING, &o.output_dir, "the fine-tuned model, eval_results.json, test predictions (required)"},
        {"init_checkpoint", FLAG_STRING, &o.init_checkpoint,
         "weights: a folder with model.safetensors + config.json (HF model or bert pretrain checkpoint) or a file (required)"},
        {"config_file", FLAG_STRING, &o.config_file, "config.json when --init_checkpoint is a file"},
        {"vocab_file", FLAG_STRING, &o.vocab_file, "the checkpoint's vocab.txt (required)"},
        {"do_lower_case", FLAG_BOOL, &o.do_lower_case, "uncased model: lower-case and strip accents"},
        {"do_train", FLAG_BOOL, &o.do_train, "fine-tune on train.tsv"},
        {"do_eval", FLAG_BOOL, &o.do_eval, "the task's metrics on the dev set"},
        {"do_predict", FLAG_BOOL, &o.do_predict, "test.tsv predictions in the GLUE submission format"},
        {"max_seq_length", FLAG_INT, &o.max_seq_length, "longer pairs are cut; default 128"},
        {"train_batch_size", FLAG_INT, &o.train_batch_size, "sequences per optimizer step; default 32"},
        {"eval_batch_size", FLAG_INT, &o.eval_batch_size, "sequences per prediction batch; default 32"},
        {"gradient_accumulation_steps", FLAG_INT, &o.gradient_accumulation_steps, "micro-batches per step; default 1"},
        {"learning_rate", FLAG_DOUBLE, &o.learning_rate, "peak learning rate (AdamW); default 5e-5"},
        {"num_train_epochs", FLAG_DOUBLE, &o.num_train_epochs, "default 3"},
        {"max_steps", FLAG_INT64, &max_steps, "optimizer steps instead of epochs (> 0)"},
        {"warmup_proportion", FLAG_DOUBLE, &o.warmup_proportion, "share of the steps for linear warmup; default 0.1"},
        {"weight_decay", FLAG_DOUBLE, &o.weight_decay, "AdamW's decoupled decay on matrices; default 0.01"},
        {"adam_epsilon", FLAG_DOUBLE, &o.adam_epsilon, "default 1e-6 (NVIDIA's; HF's Trainer uses 1e-8)"},
        {"train_examples", FLAG_INT64, &train_examples, "train on the first N rows of train.tsv only"},
        {"seed", FLAG_INT64, &seed, "head initialisation, data order, dropout; default 1"},
        {"threads", FLAG_INT, &o.threads, "OpenMP threads (0: all cores)"},
        {"bf16", FLAG_BOOL, &bf16, "matrix products in bf16 with fp32 accumulation (needs avx512_bf16)"},
        {"fp16", FLAG_BOOL, &fp16, "operands stored in IEEE fp16 with dynamic loss scaling; this CPU has no fp16 "
                                   "arithmetic, so the arithmetic stays fp32 (exercises the scaling a GPU needs)"},
        {"loss_scale", FLAG_DOUBLE, &o.loss_scale, "with --fp16: 0 dynamic (from 2^16; default), > 0 a static scale"},
        {"skip_checkpoint", FLAG_BOOL, &o.skip_checkpoint, "do not save the fine-tuned model"},
        {"json-summary", FLAG_STRING, &o.json_summary, "DLLogger JSON lines to this file"},
        {"log_freq", FLAG_INT64, &log_freq, "log every N steps; default 50"},
    };
    const FlagSpec spec = {"glue", "glue --task_name T --data_dir D --output_dir O --init_checkpoint C --vocab_file V "
                                   "[--do_train] [--do_eval] [--do_predict] [flags]   (NVIDIA run_glue.py's flags)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    o.max_steps = (long)max_steps, o.seed = (long)seed, o.train_examples = (long)train_examples;
    o.log_freq = (long)log_freq, o.precision = bf16 ? BERT_BF16 : fp16 ? BERT_FP16 : BERT_FP32;
    if ((bf16 && fp16) || o.loss_scale < 0) {
        fprintf(stderr, "bert glue: give at most one of --bf16 and --fp16; --loss_scale must be >= 0\n");
        return 2;
    }
    GlueResult r;
    BertError err;
    if (glue_run(&o, &r, &err) != 0) {
        fprintf(stderr, "bert glue: %s\n", err.msg);
        return 1;
    }
    if (r.steps)
        printf("bert glue: %s: %ld steps, %ld sequences in %.1f s (%.1f seq/s), final loss %.4f\n", r.task->name,
               r.steps, r.train_sequences, r.train_seconds, r.train_sequences / r.train_seconds, r.final_loss);
    if (fp16 && r.steps)
        printf("bert glue: fp16: %ld steps skipped for overflow, loss scale %g at the end\n", r.skipped_steps,
               r.loss_scale);
    if (r.evaluated) {
        char *json = glue_scores_json(r.task, &r.dev);
        printf("%s\n", json);
        free(json);
    }
    if (r.model_dir[0]) printf("bert glue: fine-tuned model in %s (model.safetensors, config.json)\n", r.model_dir);
    return 0;
}
