/* `bert squad`: SQuAD fine-tuning and prediction with NVIDIA run_squad.py's flags. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "model/bert.h"
#include "tasks/squad_run.h"

int cmd_squad(int argc, char **argv) {
    SquadOptions o;
    squad_default_options(&o);
    long long max_steps = o.max_steps, seed = o.seed, log_freq = o.log_freq;
    bool bf16 = false, fp16 = false;
    const Flag flags[] = {
        {"init_checkpoint", FLAG_STRING, &o.init_checkpoint,
         "weights: a folder with model.safetensors + config.json (HF model or bert pretrain checkpoint) or a file (required)"},
        {"config_file", FLAG_STRING, &o.config_file, "config.json when --init_checkpoint is a file"},
        {"vocab_file", FLAG_STRING, &o.vocab_file, "the checkpoint's vocab.txt (required)"},
        {"do_lower_case", FLAG_BOOL, &o.do_lower_case, "uncased model: lower-case and strip accents"},
        {"train_file", FLAG_STRING, &o.train_file, "SQuAD JSON to train on (train-v1.1.json, train-v2.0.json)"},
        {"predict_file", FLAG_STRING, &o.predict_file, "SQuAD JSON to predict (dev-v1.1.json, dev-v2.0.json)"},
        {"output_dir", FLAG_STRING, &o.output_dir, "model, predictions.json, nbest_predictions.json, null_odds.json (required)"},
        {"do_train", FLAG_BOOL, &o.do_train, "fine-tune on --train_file"},
        {"do_predict", FLAG_BOOL, &o.do_predict, "predict --predict_file"},
        {"do_eval", FLAG_BOOL, &o.do_eval, "then print the official metrics of the predictions"},
        {"train_batch_size", FLAG_INT, &o.train_batch_size, "features per optimizer step; default 32"},
        {"predict_batch_size", FLAG_INT, &o.predict_batch_size, "features per prediction batch; default 8"},
        {"gradient_accumulation_steps", FLAG_INT, &o.gradient_accumulation_steps, "micro-batches per step; default 1"},
        {"learning_rate", FLAG_DOUBLE, &o.learning_rate, "peak learning rate (AdamW); default 5e-5"},
        {"num_train_epochs", FLAG_DOUBLE, &o.num_train_epochs, "default 3"},
        {"max_steps", FLAG_INT64, &max_steps, "optimizer steps instead of epochs (> 0)"},
        {"warmup_proportion", FLAG_DOUBLE, &o.warmup_proportion, "share of the steps for linear warmup; default 0.1"},
        {"weight_decay", FLAG_DOUBLE, &o.weight_decay, "AdamW's decoupled decay on matrices; default 0.01"},
        {"adam_epsilon", FLAG_DOUBLE, &o.adam_epsilon, "default 1e-6"},
        {"max_seq_length", FLAG_INT, &o.max_seq_length, "default 384"},
        {"doc_stride", FLAG_INT, &o.doc_stride, "between document windows; default 128"},
        {"max_query_length", FLAG_INT, &o.max_query_length, "question tokens kept; default 64"},
        {"n_best_size", FLAG_INT, &o.n_best_size, "candidates kept per question; default 20"},
        {"max_answer_length", FLAG_INT, &o.max_answer_length, "longest answer in tokens; default 30"},
        {"version_2_with_negative", FLAG_BOOL, &o.version_2_with_negative, "SQuAD v2.0: questions may have no answer"},
        {"null_score_diff_threshold", FLAG_DOUBLE, &o.null_score_diff_threshold,
         "v2.0: answer \"\" when null score - best score exceeds this; default 0"},
        {"train_articles", FLAG_INT, &o.train_articles, "train on the first N articles of --train_file only"},
        {"predict_skip_articles", FLAG_INT, &o.predict_skip_articles, "predict --predict_file's articles from the Nth on"},
        {"seed", FLAG_INT64, &seed, "head initialisation, data order, dropout; default 42"},
        {"threads", FLAG_INT, &o.threads, "OpenMP threads (0: all cores)"},
        {"bf16", FLAG_BOOL, &bf16, "matrix products in bf16 with fp32 accumulation (needs avx512_bf16)"},
        {"fp16", FLAG_BOOL, &fp16, "operands stored in IEEE fp16 with dynamic loss scaling; this CPU has no fp16 "
                                   "arithmetic, so the arithmetic stays fp32 (exercises the scaling a GPU needs)"},
        {"loss_scale", FLAG_DOUBLE, &o.loss_scale, "with --fp16: 0 dynamic (from 2^16; default), > 0 a static scale"},
        {"skip_checkpoint", FLAG_BOOL, &o.skip_checkpoint, "do not save the fine-tuned model"},
        {"json-summary", FLAG_STRING, &o.json_summary, "DLLogger JSON lines to this file"},
        {"log_freq", FLAG_INT64, &log_freq, "log every N steps; default 50"},
    };
    const FlagSpec spec = {"squad", "squad --init_checkpoint C --vocab_file V --output_dir O [--do_train --train_file F] "
                                    "[--do_predict --predict_file F [--do_eval]] [flags]   (NVIDIA run_squad.py's flags)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    o.max_steps = (long)max_steps, o.seed = (long)seed, o.log_freq = (long)log_freq;
    o.precision = bf16 ? BERT_BF16 : fp16 ? BERT_FP16 : BERT_FP32;
    if ((bf16 && fp16) || o.loss_scale < 0) {
        fprintf(stderr, "bert squad: give at most one of --bf16 and --fp16; --loss_scale must be >= 0\n");
        return 2;
    }
    SquadResult r;
    BertError err;
    if (squad_run(&o, &r, &err) != 0) {
        fprintf(stderr, "bert squad: %s\n", err.msg);
        return 1;
    }
    if (r.steps)
        printf("bert squad: %ld steps, %ld features in %.1f s (%.1f features/s), final loss %.4f\n", r.steps,
               r.train_sequences, r.train_seconds, r.train_sequences / r.train_seconds, r.final_loss);
    if (r.predict_features)
        printf("bert squad: %ld questions, %ld features predicted in %.1f s\n", r.predict_examples, r.predict_features,
               r.predict_seconds);
    if (fp16 && r.steps)
        printf("bert squad: fp16: %ld steps skipped for overflow, loss scale %g at the end\n", r.skipped_steps,
               r.loss_scale);
    if (r.evaluated) printf("%s\n", r.metrics_json);
    if (r.model_dir[0]) printf("bert squad: fine-tuned model in %s (model.safetensors, config.json)\n", r.model_dir);
    return 0;
}
