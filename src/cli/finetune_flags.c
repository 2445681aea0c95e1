/* The shared fine-tuning flags: see finetune_flags.h. */
#include "cli/finetune_flags.h"

#include <stdio.h>

#include "io/tokenizer_files.h"
#include "model/bert.h"

int finetune_flags(Flag *out, FinetuneArgs *a, FinetuneFlagState *st, const char *rows, const char *eval_flag) {
    st->max_steps = a->max_steps, st->seed = a->seed, st->log_freq = a->log_freq;
    st->eval_steps = a->eval_steps, st->save_steps = a->save_steps;
    st->bf16 = st->fp16 = st->int8 = false;
    snprintf(st->help[0], sizeof st->help[0], "longer inputs are cut; default %d", a->max_seq_length);
    snprintf(st->help[1], sizeof st->help[1], "%s per optimizer step; default %d", rows, a->train_batch_size);
    snprintf(st->help[2], sizeof st->help[2], "%s per prediction batch; default %d", rows, a->eval_batch_size);
    snprintf(st->help[3], sizeof st->help[3], "head initialisation, data order, dropout; default %ld", a->seed);
    const Flag flags[FINETUNE_FLAG_COUNT] = {
        {"init_checkpoint", FLAG_STRING, &a->init_checkpoint,
         "weights: a folder with model.safetensors + config.json (HF model or bert pretrain checkpoint), a file, or "
         "a bert pretrain --output_dir (its newest complete ckpt_<step>) (required)"},
        {"config_file", FLAG_STRING, &a->config_file, "config.json when --init_checkpoint is a file"},
        {"vocab_file", FLAG_STRING, &a->vocab_file, "the checkpoint's vocab.txt; default the --init_checkpoint folder's"},
        {"do_lower_case", FLAG_TRIBOOL, &a->do_lower_case,
         "lower-case and strip accents (uncased models); default what the --init_checkpoint folder's "
         "tokenizer_config.json says, else whether its vocabulary has upper-case tokens"},
        {"do_train", FLAG_BOOL, &a->do_train, "fine-tune on the training data"},
        {"do_eval", FLAG_BOOL, &a->do_eval, "the task's official metrics on the evaluation data"},
        {"do_predict", FLAG_BOOL, &a->do_predict, "predictions for the prediction data"},
        {"max_seq_length", FLAG_INT, &a->max_seq_length, st->help[0]},
        {"train_batch_size", FLAG_INT, &a->train_batch_size, st->help[1]},
        {eval_flag, FLAG_INT, &a->eval_batch_size, st->help[2]},
        {"gradient_accumulation_steps", FLAG_INT, &a->gradient_accumulation_steps, "micro-batches per step; default 1"},
        {"learning_rate", FLAG_DOUBLE, &a->learning_rate, "peak learning rate (AdamW); default 5e-5"},
        {"num_train_epochs", FLAG_DOUBLE, &a->num_train_epochs, "default 3"},
        {"max_steps", FLAG_INT64, &st->max_steps, "optimizer steps instead of epochs (> 0)"},
        {"warmup_proportion", FLAG_DOUBLE, &a->warmup_proportion, "share of the steps for linear warmup; default 0.1"},
        {"weight_decay", FLAG_DOUBLE, &a->weight_decay, "AdamW's decoupled decay on matrices; default 0.01"},
        {"adam_epsilon", FLAG_DOUBLE, &a->adam_epsilon, "default 1e-6 (NVIDIA's; HF's Trainer uses 1e-8)"},
        {"seed", FLAG_INT64, &st->seed, st->help[3]},
        {"threads", FLAG_INT, &a->threads, "OpenMP threads (0: all cores)"},
        {"device", FLAG_STRING, &st->device, FLAGS_DEVICE_HELP},
        {"tf32", FLAG_BOOL, &st->tf32, FLAGS_TF32_HELP},
        {"bf16", FLAG_BOOL, &st->bf16, "matrix products in bf16 with fp32 accumulation (needs avx512_bf16)"},
        {"fp16", FLAG_BOOL, &st->fp16, "operands stored in IEEE fp16 with dynamic loss scaling; this CPU has no fp16 "
                                       "arithmetic, so the arithmetic stays fp32 (exercises the scaling a GPU needs)"},
        {"int8", FLAG_BOOL, &st->int8, "prediction only (--do_eval / --do_predict without --do_train): the encoder's "
                                       "linear layers in int8 (weights per channel, inputs per row, quantized on the "
                                       "fly; VNNI/AMX where the CPU has them)"},
        {"loss_scale", FLAG_DOUBLE, &a->loss_scale, "with --fp16: 0 dynamic (from 2^16; default), > 0 a static scale"},
        {"skip_checkpoint", FLAG_BOOL, &a->skip_checkpoint, "do not save the fine-tuned model"},
        {"strict", FLAG_BOOL, &a->strict, "refuse --init_checkpoint weights holding NaN or Inf (default: a warning)"},
        {"overwrite_output_dir", FLAG_BOOL, &a->overwrite_output_dir,
         "--do_train into an --output_dir that holds a finished run (model.safetensors): replace it"},
        {"json-summary", FLAG_STRING, &a->json_summary, "DLLogger JSON lines to this file"},
        {"log_freq", FLAG_INT64, &st->log_freq, "log every N steps; default 50"},
        {"eval_steps", FLAG_INT64, &st->eval_steps,
         "with --do_train --do_eval: evaluate every N optimizer steps (and at the last) during training"},
        {"save_best", FLAG_BOOL, &a->save_best,
         "with --eval_steps: OUTPUT_DIR/best/ holds the model of the best evaluation (best.json: its step, metric)"},
        {"save_steps", FLAG_INT64, &st->save_steps,
         "a checkpoint OUTPUT_DIR/checkpoint-<step>/ every N steps (model, optimizer, data position); a stop "
         "signal (SIGTERM, Ctrl-C) then writes one and exits 0"},
        {"save_total_limit", FLAG_INT, &a->save_total_limit, "checkpoints kept, the newest; default 2 (0: all)"},
        {"resume_from_checkpoint", FLAG_OPT_STRING, &a->resume_from_checkpoint,
         "[DIR] continue an interrupted --do_train exactly: from DIR, or alone the newest complete "
         "checkpoint-<step> in --output_dir (none: from the start)"},
    };
    for (int i = 0; i < FINETUNE_FLAG_COUNT; i++) out[i] = flags[i];
    return FINETUNE_FLAG_COUNT;
}

int finetune_flags_finish(const char *command, FinetuneArgs *a, const FinetuneFlagState *st) {
    a->max_steps = (long)st->max_steps, a->seed = (long)st->seed, a->log_freq = (long)st->log_freq;
    a->eval_steps = (long)st->eval_steps, a->save_steps = (long)st->save_steps;
    a->precision = st->bf16 ? BERT_BF16 : st->fp16 ? BERT_FP16 : st->int8 ? BERT_INT8 : BERT_FP32;
    if (st->bf16 + st->fp16 + st->int8 > 1 || a->loss_scale < 0) {
        fprintf(stderr, "bert %s: give at most one of --bf16, --fp16 and --int8; --loss_scale must be >= 0\n", command);
        return 2;
    }
    if (st->int8 && a->do_train) {
        fprintf(stderr, "bert %s: --int8 is for prediction only (--do_eval / --do_predict): fine-tune without it "
                        "(fp32 or --bf16), then predict from the saved model with --int8\n", command);
        return 2;
    }
    const int rc = flags_use_device(command, st->device, st->tf32);
    if (!rc && a->do_train) flags_note_gpu_fp32(command, a->precision == BERT_FP32, st->tf32);
    return rc || !st->int8 ? rc : flags_int8(command);
}

int finetune_flags_tokenizer(const char *command, const FinetuneArgs *a, char *vocab, size_t size, bool *lower) {
    TokenizerFolder folder;
    tokenizer_folder_read(a->init_checkpoint, &folder);
    if (!a->vocab_file && !folder.vocab_file[0])
        return fprintf(stderr, "bert %s: %s has no vocab.txt: give --vocab_file\n", command, folder.dir), 1;
    snprintf(vocab, size, "%s", a->vocab_file ? a->vocab_file : folder.vocab_file);
    BertError err;
    int tokens, cased;
    char note[1024];
    if (tokenizer_vocab_scan(vocab, &tokens, &cased, &err) != 0) return fprintf(stderr, "bert %s: %s\n", command, err.msg), 1;
    *lower = tokenizer_casing(a->do_lower_case, "--do_lower_case", &folder, vocab, cased, note, sizeof note);
    if (note[0]) fprintf(stderr, "bert %s: %s\n", command, note);
    return 0;
}

void finetune_print_training(const char *prefix, const char *rows, const FinetuneTrainResult *t, bool fp16) {
    if (!t->steps) return;
    char steps[96];   /* a resumed run: its own steps apart from the step it reached */
    if (t->resumed_step) snprintf(steps, sizeof steps, "step %ld (%ld this run)", t->steps, t->steps - t->resumed_step);
    else snprintf(steps, sizeof steps, "%ld steps", t->steps);
    printf("%s %s, %ld %s in %.1f s (%.1f %s/s), final loss %.4f\n", prefix, steps, t->train_sequences, rows,
           t->train_seconds, t->train_sequences / t->train_seconds, rows, t->final_loss);
    if (fp16)
        printf("%s fp16: %ld steps skipped for overflow, loss scale %g at the end\n", prefix, t->skipped_steps,
               t->loss_scale);
    if (t->resumed_step) printf("%s resumed at step %ld\n", prefix, t->resumed_step);
    if (t->best_step) printf("%s best evaluation at step %ld (of %ld evaluations): %.4f\n", prefix, t->best_step,
                             t->evaluations, t->best_metric);
    if (t->stopped_by_signal)
        printf("%s stopped by signal %d at step %ld after checkpoint %s; rerun with --resume_from_checkpoint to "
               "continue\n", prefix, t->stopped_by_signal, t->steps, t->last_checkpoint);
}

void finetune_print_saved(const char *command, const char *model_dir) {
    if (model_dir[0])
        printf("bert %s: fine-tuned model in %s (model.safetensors, config.json, vocab.txt, tokenizer_config.json)\n",
               command, model_dir);
}
