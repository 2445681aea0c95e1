/* The pre-training loop: see pretrain.h. NVIDIA's run_pretraining.py, read for its
 * semantics (not its code): accumulation divides each micro-batch's loss by the count, the
 * scheduler is stepped before each optimizer step, phase 2 counts its steps from phase 1's
 * end, checkpoints are ckpt_<step> and the last 3 of the run's own kept, SIGTERM saves and exits. */
#include "train/pretrain.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/hdf5_shard.h"
#include "core/bundled.h"
#include "core/rng.h"
#include "io/tokenizer_files.h"
#include "model/config.h"
#include "kernels/kernels.h"
#include "kernels/backend.h"
#include "model/bert.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/comm.h"
#include "train/grad_sync.h"
#include "train/dataloader.h"
#include "train/logger.h"
#include "train/step_batches.h"
#include "train/trainer.h"
#include "train/stop_signal.h"

void pretrain_default_options(PretrainOptions *o) {
    memset(o, 0, sizeof *o);
    o->max_seq_length = 128, o->max_predictions_per_seq = 20;
    o->optimizer = "lamb";
    o->train_batch_size = 64, o->gradient_accumulation_steps = 1;
    o->learning_rate = 6e-3, o->warmup_proportion = 0.2843;
    o->max_steps = 7038, o->steps_this_run = 0, o->seed = 42;
    o->phase1_end_step = -1, o->resume_step = -1;   /* phase1_end_step: none; --phase2 needs it given */
    o->num_steps_per_checkpoint = 200, o->keep_checkpoints = 3;
    o->eval_steps = 0, o->eval_batches = 20, o->log_freq = 1;
    o->init_loss_scale = LOSS_SCALER_INIT_SCALE, o->loss_scale = 0;
    o->bucket_cap_mb = 25, o->comm_timeout = 1800;
    o->do_lower_case = -1;
}

static int check_options(const PretrainOptions *o, BertError *err) {
    if (!o->input_dir) return bert_fail(err, "--input_dir is required (a folder of HDF5 shards)");
    if (!o->output_dir) return bert_fail(err, "--output_dir is required");
    if (o->config_file && o->bert_model) return bert_fail(err, "give one of --config_file and --bert_model, not both");
    if (!o->config_file && !o->bert_model && !o->init_checkpoint)
        return bert_fail(err, "give one of --config_file and --bert_model (or --init_checkpoint, whose config.json or "
                              "bert_config.json beside it then is the model's)");
    if (o->train_batch_size < 1 || o->gradient_accumulation_steps < 1)
        return bert_fail(err, "--train_batch_size and --gradient_accumulation_steps must be at least 1");
    if (o->train_batch_size % o->gradient_accumulation_steps != 0)
        return bert_fail(err, "--train_batch_size %d is not divisible by --gradient_accumulation_steps %d",
                         o->train_batch_size, o->gradient_accumulation_steps);
    if (o->max_seq_length < 8 || o->max_predictions_per_seq < 1 || o->max_predictions_per_seq > o->max_seq_length - 2)
        return bert_fail(err, "--max_seq_length %d / --max_predictions_per_seq %d: need seq >= 8 and 1 <= predictions "
                              "<= seq - 2", o->max_seq_length, o->max_predictions_per_seq);
    if (!(o->learning_rate > 0) || !(o->warmup_proportion >= 0 && o->warmup_proportion < 1))
        return bert_fail(err, "--learning_rate must be > 0 and --warmup_proportion in [0, 1)");
    if (o->max_steps < 1) return bert_fail(err, "--max_steps must be at least 1");
    /* negative counts were taken silently (issue 35, D20) */
    if (o->keep_checkpoints < 0) return bert_fail(err, "--keep_checkpoints %d must be >= 0 (0: keep them all)", o->keep_checkpoints);
    if (o->eval_batches < 0) return bert_fail(err, "--eval_batches %d must be >= 0 (0: the whole set)", o->eval_batches);
    if (o->steps_this_run < 0)
        return bert_fail(err, "--steps_this_run %ld must be >= 0 (0: up to --max_steps)", o->steps_this_run);
    if (o->eval_steps < 0) return bert_fail(err, "--eval_steps %ld must be >= 0 (0: no evaluation)", o->eval_steps);
    if (o->vocab_file && check_input_file(o->vocab_file, "--vocab_file", err) != 0) return -1;
    if (o->log_freq < 1 || o->num_steps_per_checkpoint < 1)
        return bert_fail(err, "--log_freq and --num_steps_per_checkpoint must be at least 1");
    if (strcmp(o->optimizer, "lamb") != 0 && strcmp(o->optimizer, "adamw") != 0)
        return bert_fail(err, "--optimizer '%s': lamb or adamw", o->optimizer);
    if (o->phase2 && o->phase1_end_step < 0)   /* never a guess: phase-2 checkpoint names and steps count from it */
        return bert_fail(err, "--phase2 needs --phase1_end_step N >= 0: phase 1's last step (the --max_steps it ran "
                              "with), from which phase 2's checkpoints are numbered");
    if (o->threads < 0 || o->threads > 1024) return bert_fail(err, "--threads %d must be in [0, 1024]", o->threads);
    if (!(o->init_loss_scale >= 1 && o->init_loss_scale <= 1e38) || !(o->loss_scale >= 0 && o->loss_scale <= 1e38))
        return bert_fail(err, "--init_loss_scale must be in [1, 1e38] and --loss_scale in [0, 1e38] (0: dynamic)");
    if (o->allreduce_wire != COMM_WIRE_FP32 && !o->allreduce_post_accumulation)
        return bert_fail(err, "--allreduce_post_accumulation_fp16/_bf16 go with --allreduce_post_accumulation");
    if (o->allreduce_wire != COMM_WIRE_FP32 && o->allreduce_wire != COMM_WIRE_FP16 && o->allreduce_wire != COMM_WIRE_BF16)
        return bert_fail(err, "unknown all-reduce wire format");
    if (o->allreduce_wire == COMM_WIRE_FP16 && o->precision != BERT_FP16)   /* only loss-scaled gradients fit fp16's range */
        return bert_fail(err, "--allreduce_post_accumulation_fp16 goes with --fp16 (its loss scaling keeps the "
                              "gradients in fp16's range); use --allreduce_post_accumulation_bf16 otherwise");
    if (!(o->bucket_cap_mb >= 0.001 && o->bucket_cap_mb <= 4096) || !(o->comm_timeout > 0 && o->comm_timeout <= 1e6))
        return bert_fail(err, "--bucket_cap_mb must be in [0.001, 4096] and --comm_timeout in (0, 1e6] seconds");
    return 0;
}

/* ---- one run ---- */

typedef struct {
    const PretrainOptions *o;
    BertConfig cfg;
    int data_vocab_size;   /* the data's token ids: below the configuration's vocab_size (the model may pad past it) */
    BertModel *model;
    Trainer *trainer;
    Optimizer *opt;       /* the trainer's */
    DataLoader *train, *eval;
    Logger *log;
    int micro;            /* sequences per micro-batch */
    int phase;            /* 1 or 2 */
    long step;            /* optimizer steps done in this phase */
    long offset;          /* checkpoint names: phase 2 counts on from phase1_end_step */
    long epoch;           /* of the data position */
    double model_seconds; /* in forward, backward and the optimizer, this run */
    bool scaling;         /* fp16: loss scaling */
    LossScaler *scaler;   /* the trainer's (fp16) */
    char resumed_from[4096];
    char *vocab;          /* the vocabulary's bytes the checkpoints carry (NULL: none), and its casing */
    size_t vocab_len;
    bool lower_case;
    /* checkpoints: this run's id (state.json's run_id; a resume of the same phase keeps the
     * id of the run it continues) and the checkpoints it wrote, the only ones it deletes */
    char run_id[64];
    bool legacy_lineage;   /* resumed a checkpoint from before run ids: those without one are this run's */
    CheckpointHistory written;
    bool parameters_logged;   /* the JSON log's PARAMETER record */
    /* data parallelism */
    Comm *comm;
    GradSync *sync;        /* NULL for one process */
    int rank, world;
    /* gradients go through the data-parallel reduction (grad_sync.h): more than one process, or
     * one with BERT_DATA_PARALLEL_ALONE set (the path checked in a group of one) */
    bool parallel;
    int signal;            /* a stop signal any process received (agreed each step) */
    double step_wait;      /* this process's seconds waiting for reductions in the current step */
    double comm_exposed;   /* per step, the least any process waited (the communication itself), summed */
    double comm_imbalance; /* per step, the most any process waited beyond that (slower processes), summed */
    double comm_logged;    /* comm_exposed at the last log line */
    double comm_per_step;  /* exposed seconds per step over the last log window */
    double imbalance_logged, imbalance_per_step;   /* the same for comm_imbalance */
    LoaderPosition *positions;   /* [world] every process's data position, for the checkpoint */
    StepBatches *steps;    /* the step's micro-batches, dealt by work across the processes */
    double spread_dealt, spread_consecutive;   /* summed over steps: busiest process's work / mean */
    long spread_steps;
    long step_tokens;      /* the last step's real tokens over all processes (bert.c computes only those) */
} Run;

static bool same_architecture(const BertConfig *a, const BertConfig *b) {
    return a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
           a->num_hidden_layers == b->num_hidden_layers && a->num_attention_heads == b->num_attention_heads &&
           a->intermediate_size == b->intermediate_size && a->hidden_act == b->hidden_act &&
           a->max_position_embeddings == b->max_position_embeddings && a->type_vocab_size == b->type_vocab_size;
}

static void describe_config(const BertConfig *c, char *out, size_t n) {
    snprintf(out, n, "L%d H%d A%d I%d vocab %d, %d positions", c->num_hidden_layers, c->hidden_size,
             c->num_attention_heads, c->intermediate_size, c->vocab_size, c->max_position_embeddings);
}

/* ---- checkpoints: model.safetensors + config.json + optimizer.safetensors + state.json ---- */

static int write_checkpoint_files(const char *dir, void *p, BertError *err) {
    const Run *r = p;
    const PretrainOptions *o = r->o;
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (bert_save_safetensors(r->model, path, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (bert_config_save(path, &r->cfg, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    if (optimizer_save(r->opt, path, err) != 0) return -1;
    LoaderPosition pos = loader_position(r->train);
    cJSON *s = cJSON_CreateObject(), *data = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "format", "bert.c pre-training checkpoint");
    cJSON_AddNumberToObject(s, "version", 1);
    cJSON_AddNumberToObject(s, "phase", r->phase);
    cJSON_AddNumberToObject(s, "step", (double)r->step);
    cJSON_AddNumberToObject(s, "checkpoint_step", (double)(r->step + r->offset));
    cJSON_AddStringToObject(s, "run_id", r->run_id);
    cJSON_AddNumberToObject(s, "max_steps", (double)o->max_steps);
    cJSON_AddNumberToObject(s, "learning_rate", o->learning_rate);
    cJSON_AddNumberToObject(s, "warmup_proportion", o->warmup_proportion);
    cJSON_AddStringToObject(s, "optimizer", o->optimizer);
    cJSON_AddNumberToObject(s, "optimizer_step", (double)optimizer_step_count(r->opt));
    cJSON_AddNumberToObject(s, "seed", (double)o->seed);
    cJSON_AddNumberToObject(s, "train_batch_size", o->train_batch_size);
    cJSON_AddNumberToObject(s, "gradient_accumulation_steps", o->gradient_accumulation_steps);
    cJSON_AddNumberToObject(s, "max_seq_length", o->max_seq_length);
    cJSON_AddNumberToObject(s, "max_predictions_per_seq", o->max_predictions_per_seq);
    cJSON_AddBoolToObject(s, "dynamic_masking", o->dynamic_masking);
    cJSON_AddStringToObject(s, "precision", bert_precision_name(bert_precision(r->model)));
    if (r->scaling) {   /* fp16: the scaler's whole state, for an exact resume */
        cJSON *ls = cJSON_CreateObject();
        cJSON_AddNumberToObject(ls, "scale", r->scaler->scale);
        cJSON_AddNumberToObject(ls, "good_steps", (double)r->scaler->good_steps);
        cJSON_AddNumberToObject(ls, "skipped_steps", (double)r->scaler->skipped_steps);
        cJSON_AddItemToObject(s, "loss_scaler", ls);
    }
    cJSON_AddStringToObject(data, "input_dir", o->input_dir);
    cJSON_AddNumberToObject(data, "epoch", (double)pos.epoch);
    cJSON_AddNumberToObject(data, "file", pos.file);
    cJSON_AddNumberToObject(data, "offset", (double)pos.offset);
    cJSON_AddNumberToObject(data, "processes", r->world);
    cJSON *ranks = cJSON_AddArrayToObject(data, "ranks");   /* each process's [epoch, file, offset] */
    for (int k = 0; k < r->world; k++) {
        const LoaderPosition *q = &r->positions[k];
        const double v[3] = {(double)q->epoch, q->file, (double)q->offset};
        cJSON_AddItemToArray(ranks, cJSON_CreateDoubleArray(v, 3));
    }
    cJSON_AddItemToObject(s, "data", data);
    if (r->vocab && tokenizer_folder_write_text(dir, r->vocab, r->vocab_len, r->lower_case,
                                                r->cfg.max_position_embeddings, err) != 0) {
        cJSON_Delete(s);
        return -1;
    }
    /* every other file's size and CRC-32, checked when the checkpoint is resumed (issue 35, D5) */
    cJSON *files = checkpoint_digest_files(dir, "state.json", err);
    if (!files) {
        cJSON_Delete(s);
        return -1;
    }
    cJSON_AddItemToObject(s, "files", files);
    int rc = checkpoint_write_json(dir, "state.json", s, err);   /* last: its presence marks a complete folder */
    cJSON_Delete(s);
    return rc;
}

/* Every process takes part (the data positions and a sharded optimizer's state are
 * gathered); process 0 writes. */
static int save_checkpoint(Run *r, PretrainSummary *sum, BertError *err) {
    if (r->o->skip_checkpoint) return 0;
    double t0 = now_seconds();
    const LoaderPosition mine = loader_position(r->train);
    comm_allgather(r->comm, &mine, r->positions, sizeof mine, "gathering the data positions for a checkpoint");
    optimizer_collect(r->opt);
    if (r->rank != 0) return 0;
    if (checkpoint_save(r->o->output_dir, r->step + r->offset, r->o->keep_checkpoints, &r->written,
                        write_checkpoint_files, r, sum->last_checkpoint, sizeof sum->last_checkpoint, err) != 0)
        return -1;
    logger_print(r->log, "checkpoint %s (%.1f s)", sum->last_checkpoint, now_seconds() - t0);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "checkpoint_step", (double)(r->step + r->offset));
    logger_parameters(r->log, d);
    return 0;
}

static double json_number(const cJSON *o, const char *key, double fallback) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : fallback;
}

/* Where this process goes on reading. The same number of processes: each where it was.
 * Another number: the files are dealt out anew, so every process starts at the first file of
 * the epoch that some process had not finished (files read partly are read again). */
static int data_position_for_this_process(Run *r, const char *dir, const cJSON *data, LoaderPosition *pos,
                                          BertError *err) {
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(data, "ranks");
    const int saved_world = (int)json_number(data, "processes", 1);
    int n = cJSON_IsArray(ranks) ? cJSON_GetArraySize(ranks) : 0;
    if (n == 0 && saved_world == 1 && r->world == 1) return 0;   /* rank 0's position is the one given */
    if (n != saved_world && n != 0) return bert_fail(err, "%s/state.json: a bad list of data positions", dir);
    LoaderPosition *at = xcalloc((size_t)(n ? n : 1), sizeof *at);
    at[0] = *pos;   /* a checkpoint from before the list: one process, at the position given */
    for (int k = 0; k < n; k++) {
        const cJSON *q = cJSON_GetArrayItem(ranks, k);
        const cJSON *e = cJSON_GetArrayItem(q, 0), *f = cJSON_GetArrayItem(q, 1), *o = cJSON_GetArrayItem(q, 2);
        if (cJSON_GetArraySize(q) != 3 || !cJSON_IsNumber(e) || !cJSON_IsNumber(f) || !cJSON_IsNumber(o) ||
            e->valuedouble < 0 || f->valuedouble < 0 || o->valuedouble < 0) {
            free(at);
            return bert_fail(err, "%s/state.json: a bad data position for process %d", dir, k);
        }
        at[k] = (LoaderPosition){(long)e->valuedouble, (int)f->valuedouble, (long)o->valuedouble};
    }
    if (n == 0) n = 1;
    if (n == r->world) {
        *pos = at[r->rank];
    } else {   /* the earliest file slot of the earliest epoch not finished, dealt to the new processes */
        const long files = loader_file_count(r->train);
        long epoch = at[0].epoch, slot = -1;
        for (int k = 1; k < n; k++) epoch = at[k].epoch < epoch ? at[k].epoch : epoch;
        /* process k of n read slots k, k + n, ... of the epoch's file order; a slot past the last
         * file is a file read twice so that every process reads as many: that process is done */
        for (int k = 0; k < n; k++) {
            const long s = (long)at[k].file * n + k;
            if (at[k].epoch == epoch && s < files && (slot < 0 || s < slot)) slot = s;
        }
        if (slot < 0) epoch++, slot = 0;   /* every process had finished that epoch's files */
        const long per_process = (files + r->world - 1) / r->world;
        const long file = slot / r->world < per_process ? slot / r->world : per_process - 1;
        *pos = (LoaderPosition){epoch, (int)file, 0};
        logger_print(r->log, "warning: %s was written by %d processes and this run has %d: the data is dealt out "
                             "anew from file slot %ld of epoch %ld (files that were partly read are read again; "
                             "the result differs from an uninterrupted run)", dir, n, r->world, slot, epoch);
    }
    free(at);
    return 0;
}

/* Issue 35, D12: continuing a phase with another seed (another shuffle, the data position then
 * pointing into it), batch or masking would silently break the exact resume: refused, naming the
 * setting. A setting the checkpoint does not record (an older one) is not compared. */
static int check_same_settings(const PretrainOptions *o, const char *dir, const cJSON *state, BertError *err) {
    const struct { const char *key, *flag; double run; } nums[] = {
        {"seed", "--seed", (double)o->seed},
        {"train_batch_size", "--train_batch_size", o->train_batch_size},
        {"gradient_accumulation_steps", "--gradient_accumulation_steps", o->gradient_accumulation_steps}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(state, nums[i].key);
        if (cJSON_IsNumber(v) && v->valuedouble != nums[i].run)
            return bert_fail(err, "checkpoint %s was trained with %s %.17g, this run has %.17g: resume with the same "
                                  "settings, or start another --output_dir", dir, nums[i].flag, v->valuedouble,
                             nums[i].run);
    }
    const cJSON *dyn = cJSON_GetObjectItemCaseSensitive(state, "dynamic_masking");
    if (cJSON_IsBool(dyn) && cJSON_IsTrue(dyn) != o->dynamic_masking)
        return bert_fail(err, "checkpoint %s was trained %s --dynamic_masking, this run %s: resume with the same "
                              "settings, or start another --output_dir", dir, cJSON_IsTrue(dyn) ? "with" : "without",
                         o->dynamic_masking ? "has it" : "does not");
    return 0;
}

/* Restores model, optimizer and data position from dir (state already read). Starting
 * phase 2 from a phase-1 checkpoint keeps weights and moments only. */
static int restore_checkpoint(Run *r, const char *dir, const cJSON *state, BertError *err) {
    const PretrainOptions *o = r->o;
    char path[4096 + 64];
    BertConfig saved;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (bert_config_load(path, &saved, err) != 0) return -1;
    if (!same_architecture(&saved, &r->cfg)) {
        char a[160], b[160];
        describe_config(&saved, a, sizeof a), describe_config(&r->cfg, b, sizeof b);
        return bert_fail(err, "checkpoint %s holds a model of %s; this run's model is %s", dir, a, b);
    }
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(state, "optimizer");
    if (!cJSON_IsString(kind) || strcmp(kind->valuestring, o->optimizer) != 0)
        return bert_fail(err, "checkpoint %s was trained with --optimizer %s, not %s", dir,
                         cJSON_IsString(kind) ? kind->valuestring : "?", o->optimizer);
    /* the same phase continued (phase 2 from phase 1's checkpoint is a new run with its own settings) */
    if ((int)json_number(state, "phase", 1) == (o->phase2 ? 2 : 1) && check_same_settings(o, dir, state, err) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (bert_load_weights(r->model, path, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    if (optimizer_load(r->opt, path, err) != 0) return -1;
    const int saved_phase = (int)json_number(state, "phase", 1);
    const long saved_step = (long)json_number(state, "checkpoint_step", -1);
    if (saved_phase == 2 && !o->phase2)
        return bert_fail(err, "checkpoint %s is from phase 2: add --phase2 (and --phase1_end_step)", dir);
    if (o->phase2 && saved_phase == 1) {
        /* NVIDIA: global_step = resume_step - phase1_end_step, the optimizer's step set to it,
         * the data read afresh from phase 2's shards */
        r->step = saved_step - o->phase1_end_step;
        if (r->step < 0)
            return bert_fail(err, "phase-1 checkpoint %s is at step %ld, before --phase1_end_step %ld", dir,
                             saved_step, o->phase1_end_step);
        optimizer_set_step_count(r->opt, r->step);
        return 0;
    }
    r->step = (long)json_number(state, "step", -1);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(state, "loss_scaler");
    if (r->scaling && ls) {   /* fp16 resumed in fp16: the scaler goes on where it was */
        r->scaler->scale = json_number(ls, "scale", r->scaler->scale);
        r->scaler->good_steps = (long)json_number(ls, "good_steps", 0);
        r->scaler->skipped_steps = (long)json_number(ls, "skipped_steps", 0);
        if (!(r->scaler->scale > 0) || r->scaler->good_steps < 0 || r->scaler->skipped_steps < 0)
            return bert_fail(err, "%s/state.json: a bad loss_scaler state", dir);
    }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(state, "data");
    LoaderPosition pos = {(long)json_number(data, "epoch", -1), (int)json_number(data, "file", -1),
                          (long)json_number(data, "offset", -1)};
    if (r->step < 0 || pos.epoch < 0) return bert_fail(err, "%s/state.json lacks the step or data position", dir);
    if (data_position_for_this_process(r, dir, data, &pos, err) != 0) return -1;
    return loader_seek(r->train, &pos, err);
}

/* ---- training ---- */

typedef struct { double loss, mlm, nsp; long mlm_correct, mlm_count; } StepStats;

/* MLM accuracy of the last forward: argmax of each labelled slot's logits. */
static void count_mlm_correct(const Run *r, const BertBatch *b, StepStats *s) {
    long labelled;
    s->mlm_correct += bert_count_mlm_correct(r->model, b, &labelled);
    s->mlm_count += labelled;
}

/* One small all-reduce per step, so every process decides alike: the step's statistics
 * averaged over the processes (sums for the counts), whether any of them received a stop
 * signal, and each process's wait for the gradient reductions. The process that finished its
 * backward last waited only for the communication the backward did not hide (the least wait:
 * exposed communication); the others also waited for it (the most wait beyond the least:
 * imbalance, e.g. more real tokens on one process). */
static void agree_on_stats(Run *r, StepStats *s) {
    enum { FIXED = 6 };
    double *x = xcalloc((size_t)(FIXED + r->world), sizeof(double));
    const double mine[FIXED] = {s->loss, s->mlm, s->nsp, (double)s->mlm_correct, (double)s->mlm_count,
                                stop_signal_received()};
    memcpy(x, mine, sizeof mine);
    x[FIXED + r->rank] = r->step_wait;
    comm_sum_doubles(r->comm, x, FIXED + r->world, "the step's loss all-reduce");
    const double w = r->world;
    s->loss = x[0] / w, s->mlm = x[1] / w, s->nsp = x[2] / w;
    s->mlm_correct = (long)x[3], s->mlm_count = (long)x[4];
    r->signal = x[5] > 0 ? (stop_signal_received() ? stop_signal_received() : 15) : 0;
    double least = x[FIXED], most = x[FIXED];
    for (int p = 1; p < r->world; p++) least = fmin(least, x[FIXED + p]), most = fmax(most, x[FIXED + p]);
    r->comm_exposed += least, r->comm_imbalance += most - least, r->step_wait = 0;
    free(x);
}

/* The trainer's hooks (train/trainer.h): the step's micro-batches, the statistics read
 * after each forward, the gradient reduction around each backward, the sharded norm and
 * parameter all-gather. */
typedef struct {
    Run *r;
    bool with_accuracy;
    StepStats *s;
} StepContext;

static int next_micro_batch(void *ctx, int micro, BertBatch *b, uint64_t *dropout_key, BertError *err) {
    const StepContext *c = ctx;
    Run *r = c->r;
    *b = step_batches_micro(r->steps, micro);
    /* keyed by the micro-batch's place in the global batch: P processes with k micro-batches
     * each draw the masks one process with P k would */
    const uint64_t accum = (uint64_t)r->o->gradient_accumulation_steps;
    const uint64_t global_micro = ((uint64_t)r->step * (uint64_t)r->world + (uint64_t)r->rank) * accum + (uint64_t)micro;
    *dropout_key = rng_key(rng_key((uint64_t)r->o->seed, (uint64_t)r->phase), global_micro);
    return 1;
}

static void read_micro_batch_outputs(void *ctx, int micro, const BertBatch *b, float loss) {
    const StepContext *c = ctx;
    const int accum = c->r->o->gradient_accumulation_steps;
    if (c->with_accuracy) count_mlm_correct(c->r, b, c->s);
    c->s->mlm += bert_last_mlm_loss(c->r->model) / accum, c->s->nsp += bert_last_nsp_loss(c->r->model) / accum;
}

/* [the all-reduce]: after every micro-batch, or only the last (post accumulation) */
static bool reduces_after(const Run *r, int micro) {
    const PretrainOptions *o = r->o;
    return r->sync && (micro == o->gradient_accumulation_steps - 1 || !(o->allreduce_post_accumulation || o->shard_optimizer));
}
static void arm_reduction(void *ctx, int micro) {
    Run *r = ((StepContext *)ctx)->r;
    if (reduces_after(r, micro)) grad_sync_arm(r->sync);
}
static void finish_reduction(void *ctx, int micro) {
    Run *r = ((StepContext *)ctx)->r;
    if (reduces_after(r, micro)) r->step_wait += grad_sync_finish(r->sync);
}

/* The global gradient norm, for the fp16 overflow check: with a sharded optimizer each process
 * holds only its part reduced, so the parts' squares are summed across processes. */
static double sharded_gradient_norm(void *ctx) {
    Run *r = ((StepContext *)ctx)->r;
    const size_t *parts = grad_sync_parts(r->sync);
    double sq = k_sum_squares(bert_grads(r->model) + parts[r->rank], parts[r->rank + 1] - parts[r->rank]);
    comm_sum_doubles(r->comm, &sq, 1, "the gradient norm all-reduce");
    return sqrt(sq);
}

/* each process updated its part: everyone gets every part */
static void gather_parameters(void *ctx) {
    Run *r = ((StepContext *)ctx)->r;
    comm_allgather_floats(r->comm, bert_params(r->model), grad_sync_parts(r->sync), "the parameter all-gather");
}

/* One optimizer step over this process's share of the step's rows, averaged over
 * micro-batches and processes. With fp16, *skipped says the gradients overflowed and no step
 * was taken (the scaler backed off). */
static int train_step(Run *r, bool with_accuracy, StepStats *s, double *lr, double *grad_norm, bool *skipped,
                      BertError *err) {
    memset(s, 0, sizeof *s);
    *skipped = false;
    if (step_batches_load(r->steps, r->train, r->comm, err) != 0) return -1;
    double dealt, consecutive;
    step_batches_spread(r->steps, &dealt, &consecutive);
    r->spread_dealt += dealt, r->spread_consecutive += consecutive, r->spread_steps++;
    r->step_tokens = step_batches_tokens(r->steps);
    StepContext c = {r, with_accuracy, s};
    const bool sharded = r->o->shard_optimizer && r->parallel;
    const TrainerHooks hooks = {.ctx = &c, .next_batch = next_micro_batch, .after_forward = read_micro_batch_outputs,
                                .before_backward = arm_reduction, .after_backward = finish_reduction,
                                .grad_norm = sharded ? sharded_gradient_norm : NULL,
                                .after_update = sharded ? gather_parameters : NULL};
    TrainerStep ts;
    const int rc = trainer_step(r->trainer, &hooks, &ts, err);
    r->model_seconds += ts.forward_seconds + ts.backward_seconds + ts.update_seconds;
    if (rc != 0) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return bert_fail(err, "step %ld: %s%s", r->step + r->offset + 1, why,
                         strstr(why, "overflowed") ? "; the last good checkpoint has the weights" : "");
    }
    s->loss = ts.loss, *lr = ts.lr, *grad_norm = ts.grad_norm, *skipped = ts.skipped;
    if (!ts.skipped) {
        r->step++;
        r->epoch = loader_position(r->train).epoch;
    }
    agree_on_stats(r, s);
    return 0;
}

typedef struct { double mlm_loss, mlm_accuracy, nsp_accuracy; long sequences; } EvalResult;

static int evaluate(Run *r, EvalResult *e, BertError *err) {
    memset(e, 0, sizeof *e);
    if (loader_rewind(r->eval, err) != 0) return -1;
    double loss_sum = 0;
    long slots = 0, correct = 0, nsp_correct = 0;
    float *nsp = xmalloc(sizeof(float) * 2 * (size_t)r->micro);
    BertBatch b;
    int rc = 0;
    for (int n = 0; rc == 0 && (r->o->eval_batches <= 0 || n < r->o->eval_batches) && loader_next(r->eval, &b, err) == 1;
         n++) {
        float loss = bert_forward(r->model, &b, false, 0);
        if (!isfinite(loss)) {
            rc = bert_fail(err, "evaluation: the loss is not finite");
            break;
        }
        StepStats s = {0};
        count_mlm_correct(r, &b, &s);
        loss_sum += bert_last_mlm_loss(r->model) * s.mlm_count, slots += s.mlm_count, correct += s.mlm_correct;
        bert_read_nsp_logits(r->model, nsp);
        for (int i = 0; i < b.batch; i++) nsp_correct += (nsp[2 * i + 1] > nsp[2 * i]) == (b.next_sentence_labels[i] == 1);
        e->sequences += b.batch;
    }
    free(nsp);
    if (rc != 0) return -1;
    if (e->sequences == 0) return bert_fail(err, "evaluation: no held-out sequences");
    e->mlm_loss = slots ? loss_sum / slots : 0, e->mlm_accuracy = slots ? (double)correct / slots : 0;
    e->nsp_accuracy = (double)nsp_correct / e->sequences;
    return 0;
}

/* ---- setup ---- */

/* The sharded optimizer's collectives (optim/ knows nothing of MPI). */
static void sum_across_processes(void *ctx, double *x, int n) {
    Run *r = ctx;
    comm_sum_doubles(r->comm, x, n, "the optimizer's norms all-reduce");
}
static void gather_to_writer(void *ctx, const float *mine, float *full) {
    Run *r = ctx;
    comm_gather_floats(r->comm, mine, full, grad_sync_parts(r->sync), 0, "gathering the optimizer state");
}

static int setup_model(Run *r, BertError *err) {
    const PretrainOptions *o = r->o;
    if (bert_config_resolve(o->config_file ? o->config_file : o->bert_model, &r->cfg, err) != 0) return -1;
    r->data_vocab_size = r->cfg.vocab_size;   /* the tokens the data holds: the configuration's count */
    int rows = o->init_checkpoint ? bert_checkpoint_embedding_rows(o->init_checkpoint, r->cfg.hidden_size) : -1;
    if (rows > r->cfg.vocab_size && bert_vocab_fits(r->cfg.vocab_size, rows))
        r->cfg.vocab_size = rows;   /* NVIDIA's checkpoints: the rows padded to a multiple of 8 */
    if (o->max_seq_length > r->cfg.max_position_embeddings)
        return bert_fail(err, "--max_seq_length %d exceeds the model's max_position_embeddings %d", o->max_seq_length,
                         r->cfg.max_position_embeddings);
    if (bert_model_create(&r->model, &r->cfg, r->micro, o->max_seq_length, o->max_predictions_per_seq, err) != 0)
        return -1;
    bert_init_weights(r->model, (uint64_t)o->seed);
    if (bert_set_precision(r->model, o->precision, err) != 0) return -1;
    /* pre-training reads only the heads' rows of the last layer, nothing past the last token */
    bert_set_last_layer_pruning(r->model, true);
    bert_set_unpadding(r->model, true);
    r->scaling = o->precision == BERT_FP16;
    TrainerOptions to = {.optimizer = optimizer_defaults((OptimizerKind)optimizer_kind_from_name(o->optimizer)),
                         .schedule = {SCHEDULE_POLY_WARMUP, o->learning_rate, o->warmup_proportion, o->max_steps, 0.5},
                         .accumulation = o->gradient_accumulation_steps, .loss_scaling = r->scaling,
                         .loss_scale = o->loss_scale > 0 ? o->loss_scale : o->init_loss_scale,
                         .dynamic_loss_scale = o->loss_scale <= 0};
    OptimizerShard shard;
    if (r->parallel) {
        const GradSyncOptions so = {.bucket_floats = (size_t)(o->bucket_cap_mb * 1048576.0 / sizeof(float)),
                                    .wire = o->allreduce_wire, .to_owners = o->shard_optimizer};
        r->sync = grad_sync_create(r->comm, bert_grads(r->model), bert_num_parameters(r->model), &so);
        bert_set_grad_ready_hook(r->model, grad_sync_ready, r->sync);
        if (o->shard_optimizer) {
            const size_t *parts = grad_sync_parts(r->sync);
            shard = (OptimizerShard){.lo = parts[r->rank], .hi = parts[r->rank + 1], .writer = r->rank == 0,
                                     .ctx = r, .sum = sum_across_processes, .gather = gather_to_writer};
            to.shard = &shard;
        }
    }
    if (trainer_create(&r->trainer, r->model, &to, err) != 0) return -1;
    r->opt = trainer_optimizer(r->trainer), r->scaler = trainer_loss_scaler(r->trainer);
    return 0;
}

static int setup_data(Run *r, BertError *err) {
    const PretrainOptions *o = r->o;
    /* the loader reads a whole step of this process's rows at once: step_batches deals them */
    LoaderOptions lo = {.dir = o->input_dir, .name_filter = "training",
                        .micro_batch = r->micro * o->gradient_accumulation_steps,
                        .max_seq_length = o->max_seq_length, .max_predictions = o->max_predictions_per_seq,
                        .vocab_size = r->data_vocab_size, .seed = (uint64_t)o->seed, .training = true,
                        .dynamic_masking = o->dynamic_masking, .rank = r->rank, .world_size = r->world};
    if (loader_open(&r->train, &lo, err) != 0) return -1;
    const StepBatchOptions so = {.micro_batch = r->micro, .accumulation = o->gradient_accumulation_steps,
                                 .seq_len = o->max_seq_length, .max_predictions = o->max_predictions_per_seq,
                                 .hidden_size = r->cfg.hidden_size, .consecutive = o->consecutive_micro_batches};
    r->steps = step_batches_create(&so, r->rank, r->world);
    if (o->eval_steps <= 0 || r->rank != 0) return 0;   /* process 0 evaluates, on all the held-out data */
    lo.rank = 0, lo.world_size = 1, lo.micro_batch = r->micro;   /* evaluation batches: the model's size */
    lo.dir = o->eval_dir ? o->eval_dir : o->input_dir, lo.name_filter = "test", lo.training = false;
    lo.dynamic_masking = false;
    return loader_open(&r->eval, &lo, err);
}

/* Loaded weights with NaN or Inf values: refused with --strict, else a warning (the first
 * step's loss will say the rest). */
static int check_loaded_weights(Run *r, const char *from, BertError *err) {
    const char *tensor;
    const size_t bad = bert_nonfinite_params(r->model, &tensor);
    if (!bad) return 0;
    if (r->o->strict)
        return bert_fail(err, "%s: %zu weights are NaN or infinite (the first in %s); refused (--strict)", from, bad,
                         tensor);
    logger_print(r->log, "warning: %s: %zu weights are NaN or infinite (the first in %s); --strict refuses such "
                         "weights", from, bad, tensor);
    return 0;
}

/* A checkpoint's state.json, its files checked against the digests it records (those written
 * before digests have none). */
static int read_checked_state(const char *dir, cJSON **state, BertError *err) {
    if (checkpoint_read_json(dir, "state.json", state, err) != 0) return -1;
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(*state, "files");
    if (files && checkpoint_verify_files(dir, files, err) != 0) {
        cJSON_Delete(*state), *state = NULL;
        return -1;
    }
    return 0;
}

/* The newest complete checkpoint whose files match their digests: 1 with dir and state, 0 when
 * there is no complete checkpoint. A damaged one is passed over with a warning (the run then
 * rewrites its steps); all of them damaged is an error. */
static int newest_sound_checkpoint(Run *r, char *dir, size_t n, cJSON **state, BertError *err) {
    long *steps;
    int count, complete = 0, found = 0;
    if (checkpoint_list(r->o->output_dir, &steps, &count, err) != 0) return -1;
    BertError damage = {{0}};
    for (int i = count - 1; i >= 0 && !found; i--) {
        snprintf(dir, n, "%s/ckpt_%ld", r->o->output_dir, steps[i]);
        char path[4096 + 64];
        snprintf(path, sizeof path, "%s/state.json", dir);
        if (access(path, F_OK) != 0) continue;   /* not complete */
        complete++;
        if (read_checked_state(dir, state, &damage) == 0) found = 1;
        else logger_print(r->log, "warning: %s; passed over for an earlier checkpoint", damage.msg);
    }
    free(steps);
    if (!found && complete)
        return bert_fail(err, "no sound checkpoint in %s: %d complete ones, all damaged (the newest: %s)",
                         r->o->output_dir, complete, damage.msg);
    if (!found) dir[0] = '\0';
    return found;
}

/* Where to start: a checkpoint (--resume_from_checkpoint), --init_checkpoint's weights, or
 * the seed's initial weights. Returns 1 when a checkpoint was restored. */
static int setup_start(Run *r, BertError *err) {
    const PretrainOptions *o = r->o;
    char dir[4096] = "";
    cJSON *state = NULL;
    if (o->resume_from_checkpoint) {
        if (o->resume_step >= 0) {
            snprintf(dir, sizeof dir, "%s/ckpt_%ld", o->output_dir, o->resume_step);
            char path[4096 + 16];
            snprintf(path, sizeof path, "%s/state.json", dir);
            if (access(path, R_OK) != 0) return bert_fail(err, "--resume_step %ld: no complete checkpoint %s",
                                                          o->resume_step, dir);
            if (read_checked_state(dir, &state, err) != 0) return -1;
        } else if (newest_sound_checkpoint(r, dir, sizeof dir, &state, err) < 0) {
            return -1;
        }
    }
    if (dir[0]) {
        int rc = restore_checkpoint(r, dir, state, err);
        /* the same phase goes on as the same run (its checkpoints are this run's to prune);
         * phase 2 from phase 1's checkpoint is a new run */
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(state, "run_id");
        if (rc == 0 && (int)json_number(state, "phase", 1) == r->phase) {
            if (cJSON_IsString(id) && id->valuestring[0] && strlen(id->valuestring) < sizeof r->run_id)
                snprintf(r->run_id, sizeof r->run_id, "%s", id->valuestring);
            else
                r->legacy_lineage = !id;
        }
        cJSON_Delete(state);
        if (rc != 0 || check_loaded_weights(r, dir, err) != 0) return -1;
        logger_print(r->log, "resumed from %s: phase %d, step %ld", dir, r->phase, r->step);
        snprintf(r->resumed_from, sizeof r->resumed_from, "%s", dir);
        return 1;
    }
    if (o->phase2 && !o->init_checkpoint)
        return bert_fail(err, "phase 2 starts from phase 1's weights: no checkpoint in %s (give "
                              "--resume_from_checkpoint with phase 1's --output_dir, or --init_checkpoint)",
                         o->output_dir);
    if (o->resume_from_checkpoint) logger_print(r->log, "no checkpoint in %s yet: starting at step 0", o->output_dir);
    if (o->init_checkpoint) {
        int initialised = 0;
        if (bert_load_weights_ex(r->model, o->init_checkpoint, (uint64_t)o->seed, &initialised, err) != 0 ||
            check_loaded_weights(r, o->init_checkpoint, err) != 0)
            return -1;
        logger_print(r->log, "weights from %s (%d head tensors initialised)", o->init_checkpoint, initialised);
    }
    return 0;
}

/* The tokenizer files every checkpoint carries (pretrain.h: the vocabulary and its casing). */
static int setup_tokenizer_files(Run *r, BertError *err) {
    const PretrainOptions *o = r->o;
    const char *from = r->resumed_from[0] ? r->resumed_from : o->init_checkpoint;
    TokenizerFolder folder;
    tokenizer_folder_read(from ? from : o->output_dir, &folder);
    if (!from) folder.vocab_file[0] = '\0', folder.do_lower_case = -1;
    char bundled[4096];
    const char *vocab = o->vocab_file ? o->vocab_file : folder.vocab_file[0] ? folder.vocab_file : NULL;
    const bool guessed = !vocab;
    if (guessed && bundled_data_path("vocab/bert-base-uncased-vocab.txt", bundled, sizeof bundled) == 0) vocab = bundled;
    int tokens = 0, cased = 0;
    if (vocab && tokenizer_vocab_scan(vocab, &tokens, &cased, err) != 0) return -1;
    if (vocab && !bert_vocab_fits(tokens, r->cfg.vocab_size) && !guessed)
        return bert_fail(err, "the vocabulary %s has %d tokens but the model has %d", vocab, tokens, r->cfg.vocab_size);
    if (!vocab || tokens != r->cfg.vocab_size) {
        logger_print(r->log, "note: the checkpoints hold no vocab.txt (the model has %d tokens, the bundled "
                             "bert-base-uncased vocabulary %d): give --vocab_file, the shards' vocabulary, to make them "
                             "model folders that stand alone", r->cfg.vocab_size, tokens);
        return 0;
    }
    char note[1024];
    r->lower_case = tokenizer_casing(o->do_lower_case, "--do_lower_case", from ? &folder : NULL, vocab, cased, note,
                                     sizeof note);
    if (!strncmp(note, "warning:", 8)) logger_print(r->log, "%s", note);
    return read_file(vocab, &r->vocab, &r->vocab_len, err);
}

static void new_run_id(char *out, size_t n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, n, "%llx-%lx", (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec,
             (long)getpid());
}

/* Process 0: the checkpoints in --output_dir that this run wrote (those of the run it
 * continues), which its saves may prune, and a warning naming the others, which it never
 * deletes: another run's (issue 35, D1). Phase 1's checkpoints in a phase-2 run are expected. */
static int find_own_checkpoints(Run *r, BertError *err) {
    if (!r->run_id[0]) new_run_id(r->run_id, sizeof r->run_id);
    long *steps;
    int count, others = 0;
    long first_other = -1, last_other = -1;
    if (checkpoint_list(r->o->output_dir, &steps, &count, err) != 0) return -1;
    for (int i = 0; i < count; i++) {
        char dir[4096 + 32];
        snprintf(dir, sizeof dir, "%s/ckpt_%ld", r->o->output_dir, steps[i]);
        cJSON *state;
        BertError ignored;
        if (checkpoint_read_json(dir, "state.json", &state, &ignored) != 0) continue;   /* not complete */
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(state, "run_id");
        const int phase = (int)json_number(state, "phase", 1);
        const bool mine = cJSON_IsString(id) ? strcmp(id->valuestring, r->run_id) == 0 : r->legacy_lineage && phase == r->phase;
        cJSON_Delete(state);
        if (mine) checkpoint_history_add(&r->written, steps[i]);
        else if (!(r->phase == 2 && phase == 1)) {
            if (!others++) first_other = steps[i];
            last_other = steps[i];
        }
    }
    free(steps);
    if (!others) return 0;
    char names[64];
    if (others == 1) snprintf(names, sizeof names, "ckpt_%ld", first_other);
    else snprintf(names, sizeof names, "ckpt_%ld ... ckpt_%ld", first_other, last_other);
    logger_print(r->log, "warning: %s holds %d checkpoint%s of another run (%s): this run does not delete them "
                         "(--keep_checkpoints counts only its own), its own of the same steps replace them, and "
                         "--resume_from_checkpoint takes the newest complete checkpoint of all. Give each run its own "
                         "--output_dir", r->o->output_dir, others, others > 1 ? "s" : "", names);
    return 0;
}

static void log_parameters(Run *r) {
    const PretrainOptions *o = r->o;
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "input_dir", o->input_dir);
    cJSON_AddStringToObject(d, "model", o->config_file ? o->config_file : o->bert_model);
    cJSON_AddNumberToObject(d, "phase", r->phase);
    cJSON_AddStringToObject(d, "optimizer", o->optimizer);
    cJSON_AddStringToObject(d, "precision", bert_precision_name(bert_precision(r->model)));
    cJSON_AddNumberToObject(d, "train_batch_size", o->train_batch_size);
    cJSON_AddNumberToObject(d, "gradient_accumulation_steps", o->gradient_accumulation_steps);
    cJSON_AddNumberToObject(d, "batch_size_per_gpu", r->micro);   /* NVIDIA's key */
    cJSON_AddNumberToObject(d, "learning_rate", o->learning_rate);
    cJSON_AddNumberToObject(d, "warmup_proportion", o->warmup_proportion);
    cJSON_AddNumberToObject(d, "max_steps", (double)o->max_steps);
    cJSON_AddNumberToObject(d, "max_seq_length", o->max_seq_length);
    cJSON_AddNumberToObject(d, "max_predictions_per_seq", o->max_predictions_per_seq);
    cJSON_AddNumberToObject(d, "SEED", (double)o->seed);
    cJSON_AddNumberToObject(d, "parameters", (double)bert_num_parameters(r->model));
    logger_parameters(r->log, d);
}

static void log_step(Run *r, const StepStats *s, double avg_loss, double lr, double gnorm, double rate,
                     double token_rate, double elapsed, long stop_step) {
    char el[32], eta[32];
    format_duration(elapsed, el, sizeof el);
    format_duration(rate > 0 ? (double)(stop_step - r->step) * r->o->train_batch_size * r->world / rate : -1, eta,
                    sizeof eta);
    const double acc = s->mlm_count ? (double)s->mlm_correct / s->mlm_count : NAN;
    char comm[64] = "";
    if (r->world > 1)
        snprintf(comm, sizeof comm, " | comm %.0f ms/step exposed, %.0f waiting for slower processes",
                 1e3 * r->comm_per_step, 1e3 * r->imbalance_per_step);
    logger_print(r->log, "step %ld/%ld (phase %d) | loss %.4f (mlm %.4f, nsp %.4f) | mlm acc %.3f | lr %.3e | "
                         "grad %.3f | %.1f seq/s (%.0f tokens/s)%s | %s, ETA %s",
                 r->step, r->o->max_steps, r->phase, avg_loss, s->mlm, s->nsp, acc, lr, gnorm, rate, token_rate, comm, el,
                 eta);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "average_loss", avg_loss);
    cJSON_AddNumberToObject(d, "step_loss", s->loss);
    cJSON_AddNumberToObject(d, "average_mlm_loss", s->mlm);
    cJSON_AddNumberToObject(d, "average_nsp_loss", s->nsp);
    if (s->mlm_count) cJSON_AddNumberToObject(d, "mlm_accuracy", acc);
    cJSON_AddNumberToObject(d, "learning_rate", lr);
    cJSON_AddNumberToObject(d, "grad_norm", gnorm);
    cJSON_AddNumberToObject(d, "training_sequences_per_second", rate);
    /* real tokens (padding is not computed): the rate to compare runs on different rows */
    cJSON_AddNumberToObject(d, "training_tokens_per_second", token_rate);
    cJSON_AddNumberToObject(d, "step_tokens", (double)r->step_tokens);
    cJSON_AddNumberToObject(d, "phase", r->phase);
    cJSON_AddNumberToObject(d, "phase_step", (double)r->step);
    if (r->world > 1) {
        cJSON_AddNumberToObject(d, "comm_exposed_seconds", r->comm_per_step);
        cJSON_AddNumberToObject(d, "imbalance_wait_seconds", r->imbalance_per_step);
    }
    if (r->scaling) {
        cJSON_AddNumberToObject(d, "loss_scale", r->scaler->scale);
        cJSON_AddNumberToObject(d, "skipped_steps", (double)r->scaler->skipped_steps);
    }
    logger_step(r->log, r->epoch, r->step + r->offset, d);
}

/* NVIDIA logs the new scale as a parameter when it skips a step. */
static void log_skipped_step(Run *r) {
    logger_print(r->log, "step %ld skipped: the fp16 gradients overflowed; loss scale now %g (%ld skipped in all)",
                 r->step + 1, r->scaler->scale, r->scaler->skipped_steps);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "loss_scale", r->scaler->scale);
    cJSON_AddNumberToObject(d, "skipped_steps", (double)r->scaler->skipped_steps);
    logger_parameters(r->log, d);
}

static int run_evaluation(Run *r, PretrainSummary *sum, BertError *err) {
    EvalResult e;
    double t0 = now_seconds();
    if (evaluate(r, &e, err) != 0) return -1;
    logger_print(r->log, "eval at step %ld: mlm loss %.4f, mlm accuracy %.4f, nsp accuracy %.4f (%ld held-out "
                         "sequences, %.1f s)", r->step, e.mlm_loss, e.mlm_accuracy, e.nsp_accuracy, e.sequences,
                 now_seconds() - t0);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "eval_mlm_loss", e.mlm_loss);
    cJSON_AddNumberToObject(d, "eval_mlm_accuracy", e.mlm_accuracy);
    cJSON_AddNumberToObject(d, "eval_nsp_accuracy", e.nsp_accuracy);
    logger_step(r->log, r->epoch, r->step + r->offset, d);
    sum->final_mlm_accuracy = e.mlm_accuracy;
    return 0;
}

/* The steps of this run, with logging, evaluation and checkpoints. */
static int train_loop(Run *r, PretrainSummary *sum, BertError *err) {
    const PretrainOptions *o = r->o;
    long stop_step = o->max_steps;
    if (o->steps_this_run > 0 && r->step + o->steps_this_run < stop_step) stop_step = r->step + o->steps_this_run;
    sum->first_step = sum->last_step = r->step;
    const double t0 = now_seconds();
    double window_loss = 0, window_mlm = 0, window_nsp = 0, loss_sum = 0;
    long window = 0, steps = 0;
    while (r->step < stop_step) {
        const bool log_now = (r->step + 1) % o->log_freq == 0 || r->step + 1 == stop_step;
        StepStats s;
        double lr = 0, gnorm = 0;
        bool skipped = false;
        if (train_step(r, log_now, &s, &lr, &gnorm, &skipped, err) != 0) {
            /* "good" only once a step from it went well (issue 35, D6: the checkpoint just resumed,
             * the bad one, was called the last good checkpoint) */
            if (sum->last_checkpoint[0] && (steps > 0 || strcmp(sum->last_checkpoint, r->resumed_from) != 0))
                snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                         "; the last good checkpoint is %s", sum->last_checkpoint);
            else if (sum->last_checkpoint[0])
                snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                         " at the first step from %s, which may hold the bad values (an earlier checkpoint: "
                         "--resume_step)", sum->last_checkpoint);
            return -1;
        }
        /* the JSON log's first record, once the first step has read its shards: a run that
         * fails before (a shard of another shape) leaves the previous log as it was */
        if (!r->parameters_logged) log_parameters(r), r->parameters_logged = true;
        if (skipped) {   /* fp16 overflow: the same step again on the next batch, at half the scale */
            sum->sequences += (long)o->train_batch_size * r->world, sum->tokens += r->step_tokens;
            log_skipped_step(r);
            const int sig = r->signal;
            if (sig) {
                if (save_checkpoint(r, sum, err) != 0) return -1;
                logger_print(r->log, "stopped by signal %d at step %ld", sig, r->step);
                sum->stopped_by_signal = true;
                break;
            }
            continue;
        }
        steps++, window++, window_loss += s.loss, loss_sum += s.loss, window_mlm += s.mlm, window_nsp += s.nsp;
        sum->final_loss = s.loss, sum->last_step = r->step;
        sum->sequences += (long)o->train_batch_size * r->world, sum->tokens += r->step_tokens;
        const double elapsed = now_seconds() - t0, rate = sum->sequences / elapsed, token_rate = sum->tokens / elapsed;
        if (log_now) {
            StepStats avg = s;   /* the window's means; the step's own loss stays as step_loss */
            avg.mlm = window_mlm / window, avg.nsp = window_nsp / window;
            r->comm_per_step = (r->comm_exposed - r->comm_logged) / window, r->comm_logged = r->comm_exposed;
            r->imbalance_per_step = (r->comm_imbalance - r->imbalance_logged) / window;
            r->imbalance_logged = r->comm_imbalance;
            log_step(r, &avg, window_loss / window, lr, gnorm, rate, token_rate, elapsed, stop_step);
            window_loss = window_mlm = window_nsp = 0, window = 0;
        } else {
            logger_progress(r->log, "step %ld/%ld  loss %.4f  %.1f seq/s", r->step, o->max_steps, s.loss, rate);
        }
        /* process 0 evaluates; the others wait for it at the next collective */
        if (o->eval_steps > 0 && r->rank == 0 && (r->step % o->eval_steps == 0 || r->step == stop_step) &&
            run_evaluation(r, sum, err))
            return -1;
        const int sig = r->signal;
        if (r->step % o->num_steps_per_checkpoint == 0 || r->step == stop_step || sig) {
            if (save_checkpoint(r, sum, err) != 0) return -1;
        }
        if (sig) {
            logger_print(r->log, "stopped by signal %d at step %ld", sig, r->step);
            sum->stopped_by_signal = true;
            break;
        }
    }
    sum->seconds = now_seconds() - t0;
    sum->model_seconds = r->model_seconds;
    sum->sequences_per_second = sum->seconds > 0 ? sum->sequences / sum->seconds : 0;
    sum->tokens_per_second = sum->seconds > 0 ? sum->tokens / sum->seconds : 0;
    sum->mean_loss = steps ? loss_sum / steps : NAN;
    sum->skipped_steps = trainer_skipped_steps(r->trainer), sum->loss_scale = trainer_loss_scale(r->trainer);
    sum->comm_exposed_seconds = r->comm_exposed, sum->comm_imbalance_seconds = r->comm_imbalance;
    sum->work_spread = r->spread_steps ? r->spread_dealt / r->spread_steps : 1;
    sum->work_spread_consecutive = r->spread_steps ? r->spread_consecutive / r->spread_steps : 1;
    sum->comm_bytes = r->sync ? grad_sync_bytes(r->sync) : 0;
    return 0;
}

static void remember_first(const char *msg, void *ctx) {
    BertError *e = ctx;
    if (!e->msg[0]) snprintf(e->msg, sizeof e->msg, "%s", msg);
}

/* --check_shards: every training (and held-out) shard read and validated in a child process
 * before anything else runs, so a corrupt file is named now (and a crash inside libhdf5
 * stays in the child) instead of stopping the run hours in. */
static int check_all_shards(const PretrainOptions *o, BertError *err) {
    BertConfig cfg;
    if (bert_config_resolve(o->config_file ? o->config_file : o->bert_model, &cfg, err) != 0) return -1;
    const char *dirs[2] = {o->input_dir, o->eval_steps > 0 ? (o->eval_dir ? o->eval_dir : o->input_dir) : NULL};
    const char *filters[2] = {"training", "test"};
    for (int k = 0; k < 2 && dirs[k]; k++) {
        ShardCheck c = {0};
        BertError first = {{0}};
        /* the files the loader will read: its filter, no suffix (train/dataloader.c) */
        long bad = hdf5_check_shard_folder(dirs[k], filters[k], NULL, o->max_seq_length, o->max_predictions_per_seq,
                                           cfg.vocab_size, &c, remember_first, &first, err);
        if (bad < 0) return -1;
        if (bad > 0)   /* the first bad file named; bert check_shards lists them all */
            return bert_fail(err, "--check_shards: %ld of %ld %s shards are bad; the first: %s", bad, c.files,
                             filters[k], first.msg);
        fprintf(stderr, "--check_shards: %ld %s shards, %zu sequences, all good\n", c.files, filters[k], c.rows);
    }
    return 0;
}

/* Every entry of a folder (its path) into *paths; a folder that cannot be read adds nothing. */
static void add_folder_entries(const char *dir, char ***paths, int *n, size_t *cap) {
    DIR *d = dir ? opendir(dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        ARRAY_RESERVE(*paths, *cap, (size_t)*n + 1, 64);
        const size_t len = strlen(dir) + strlen(e->d_name) + 2;
        (*paths)[*n] = xmalloc(len);
        snprintf((*paths)[(*n)++], len, "%s/%s", dir, e->d_name);
    }
    if (d) closedir(d);
}

/* The JSON log is none of the run's inputs, by device and inode (issue 35, D3: naming a shard
 * emptied it): the shards of --input_dir and --eval_dir, the model's config, --init_checkpoint
 * and the files of --output_dir's checkpoints (resumed from, and pruned). */
static int check_log_is_no_input(const PretrainOptions *o, BertError *err) {
    if (!o->json_summary) return 0;
    char **paths = NULL;
    int n = 0;
    size_t cap = 0;
    add_folder_entries(o->input_dir, &paths, &n, &cap);
    add_folder_entries(o->eval_dir, &paths, &n, &cap);
    long *steps;
    int count;
    BertError ignored;
    if (checkpoint_list(o->output_dir, &steps, &count, &ignored) == 0) {
        for (int i = 0; i < count; i++) {
            char dir[4096 + 32];
            snprintf(dir, sizeof dir, "%s/ckpt_%ld", o->output_dir, steps[i]);
            add_folder_entries(dir, &paths, &n, &cap);
        }
        free(steps);
    }
    const char *single[2] = {o->config_file, o->init_checkpoint};
    for (int k = 0; k < 2; k++) {
        if (!single[k]) continue;
        ARRAY_RESERVE(paths, cap, (size_t)n + 1, 64);
        paths[n++] = xstrdup(single[k]);
    }
    FileSet *set = file_set_new((const char *const *)paths, n);
    const int at = file_set_find(set, o->json_summary);
    int rc = 0;
    if (at >= 0)
        rc = bert_fail(err, "--json-summary %s is also an input of the run (%s): it would be overwritten", o->json_summary,
                       paths[at]);
    file_set_free(set);
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    return rc;
}

/* Issue 35, D7: every process of an MPI job must run with the same run-defining flags; a
 * mismatch (another seed, batch, model, ...) trained on silently. Each process's values are
 * gathered; all name the first difference and stop. */
static int check_same_flags(Run *r, BertError *err) {
    const PretrainOptions *o = r->o;
    enum { FIELD = 256, FIELDS = 9 };
    char mine[FIELDS][FIELD];
    char desc[160];
    describe_config(&r->cfg, desc, sizeof desc);
    const char *names[FIELDS] = {"--seed", "--train_batch_size", "--gradient_accumulation_steps", "the model",
                                 "--max_steps", "--shard_optimizer", "--output_dir", "the precision", "--phase2"};
    memset(mine, 0, sizeof mine);
    snprintf(mine[0], FIELD, "%ld", o->seed);
    snprintf(mine[1], FIELD, "%d", o->train_batch_size);
    snprintf(mine[2], FIELD, "%d", o->gradient_accumulation_steps);
    snprintf(mine[3], FIELD, "%s", desc);
    snprintf(mine[4], FIELD, "%ld", o->max_steps);
    snprintf(mine[5], FIELD, "%s", o->shard_optimizer ? "on" : "off");
    snprintf(mine[6], FIELD, "%s", o->output_dir);
    snprintf(mine[7], FIELD, "%s", bert_precision_name(bert_precision(r->model)));
    snprintf(mine[8], FIELD, "%s", o->phase2 ? "on" : "off");
    char (*all)[FIELDS][FIELD] = xcalloc((size_t)r->world, sizeof *all);
    comm_allgather(r->comm, mine, all, sizeof mine, "comparing the processes' flags");
    int rc = 0;
    for (int p = 1; p < r->world && rc == 0; p++)
        for (int f = 0; f < FIELDS && rc == 0; f++)
            if (strcmp(all[p][f], all[0][f]) != 0)
                rc = bert_fail(err, "the processes were started with different flags: process 0 has %s %s, process %d "
                                    "has %s %s; give every process the same command", names[f], all[0][f], p, names[f],
                               all[p][f]);
    free(all);
    return rc;
}

/* Issue 35, D8: one run per --output_dir. Process 0 holds an flock on output_dir/.lock (its pid
 * written in it) for the run; the kernel releases it when the process ends, however it ends.
 * Returns the descriptor, or -1 with err naming the holder. */
static int lock_output_dir(const char *output_dir, BertError *err) {
    char path[4096 + 16];
    snprintf(path, sizeof path, "%s/.lock", output_dir);
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return bert_fail(err, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char pid[32] = "";
        const ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            return bert_fail(err, "--output_dir %s is in use by another run (pid %s, holding %s): one run per folder",
                             output_dir, pid[0] ? pid : "?", path);
        return bert_fail(err, "cannot lock %s: %s", path, strerror(e));
    }
    char pid[32];
    const int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        const int e = errno;
        close(fd);
        return bert_fail(err, "cannot write %s: %s", path, strerror(e));
    }
    return fd;
}

static int run_pretraining(const PretrainOptions *o, PretrainSummary *sum, BertError *err) {
    if (check_log_is_no_input(o, err) != 0) return -1;
    if (o->check_shards && check_all_shards(o, err) != 0) return -1;   /* first: it forks */
    if (o->threads > 0) omp_set_num_threads(o->threads);
    Run r = {.o = o, .micro = o->train_batch_size / o->gradient_accumulation_steps, .phase = o->phase2 ? 2 : 1,
             .offset = o->phase2 ? o->phase1_end_step : 0};
    if (comm_open(&r.comm, o->comm_timeout, err) != 0) return -1;
    r.rank = comm_rank(r.comm), r.world = comm_size(r.comm);
    sum->processes = r.world, sum->rank = r.rank;
    r.positions = xcalloc((size_t)r.world, sizeof *r.positions);
    int rc = 0;
    const char *alone = getenv("BERT_DATA_PARALLEL_ALONE");
    r.parallel = r.world > 1 || (alone && *alone && strcmp(alone, "0") != 0);
    /* a GPU's gradients and parameters are reduced by its backend's collectives (NCCL), which
     * MPI sets up; the CPU's by MPI in place */
    if (r.parallel) rc = comm_use_backend_collectives(r.comm, err);
    if (rc == 0 && r.world > 1 && strcmp(k_backend_name(), "cpu") != 0 && !comm_on_backend(r.comm))
        rc = bert_fail(err, "--device %s with %d processes: this CUDA library has no collectives (NCCL); rebuild it "
                            "(make GPU=cuda)", k_backend_name(), r.world);
    if (rc == 0) rc = make_dirs(o->output_dir, err);
    int lock = -1;
    if (rc == 0 && r.rank == 0 && (lock = lock_output_dir(o->output_dir, err)) < 0) rc = -1;
    /* process 0 logs and writes the JSON log; the others are silent */
    if (rc == 0) rc = logger_open(&r.log, r.rank == 0 ? o->json_summary : NULL, o->resume_from_checkpoint,
                                  r.rank == 0 && !o->disable_progress_bar, err);
    if (rc == 0 && r.rank != 0) logger_silence(r.log);
    if (rc == 0) rc = setup_model(&r, err);
    if (rc == 0 && r.world > 1) rc = check_same_flags(&r, err);
    if (rc == 0) rc = setup_data(&r, err);
    if (rc == 0) rc = setup_start(&r, err) < 0 ? -1 : 0;
    if (rc == 0) rc = setup_tokenizer_files(&r, err);
    if (rc == 0 && r.rank == 0 && !o->skip_checkpoint) rc = find_own_checkpoints(&r, err);
    if (rc == 0 && r.world > 1) {   /* every process resumed the same checkpoint (a lagging shared file system?) */
        int steps[2] = {(int)r.step, -(int)r.step};
        comm_max_ints(r.comm, steps, 2, "comparing the resumed steps");
        if (steps[0] != -steps[1])
            rc = bert_fail(err, "the processes resumed different checkpoints (steps %d to %d): is --output_dir the "
                                "same shared folder for all, and up to date on every machine?", -steps[1], steps[0]);
    }
    sum->phase = r.phase;
    /* issue 35, D13: a requeued job rerunning a finished phase succeeds without doing anything */
    if (rc == 0 && r.step >= o->max_steps)
        sum->already_finished = true, sum->first_step = sum->last_step = r.step;
    if (rc == 0 && !sum->already_finished) {
        char desc[160];
        describe_config(&r.cfg, desc, sizeof desc);
        logger_print(r.log, "pretrain phase %d: %s, %zu parameters; %d files in %s; %d x %d sequences per step, "
                            "%s, lr %g, %s, %d threads", r.phase, desc, bert_num_parameters(r.model),
                     loader_file_count(r.train), o->input_dir, o->gradient_accumulation_steps, r.micro, o->optimizer,
                     o->learning_rate, bert_precision_name(bert_precision(r.model)), omp_get_max_threads());
        if (r.parallel)
            logger_print(r.log, "data parallel: %d process%s, %d sequences per step in all; gradients %s in %g MB "
                                "buckets%s%s%s", r.world, r.world > 1 ? "es" : "", o->train_batch_size * r.world,
                         o->allreduce_post_accumulation || o->shard_optimizer ? "reduced once per step"
                                                                              : "reduced after every micro-batch",
                         o->bucket_cap_mb, o->allreduce_wire == COMM_WIRE_FP16 ? " as fp16" : o->allreduce_wire == COMM_WIRE_BF16 ? " as bf16" : "",
                         o->shard_optimizer ? "; optimizer state sharded (ZeRO-1)" : "",
                         comm_on_backend(r.comm) ? "; through the GPU's collectives (NCCL)" : "");
        /* the newest good checkpoint, named if the run has to stop */
        snprintf(sum->last_checkpoint, sizeof sum->last_checkpoint, "%s", r.resumed_from);
        rc = train_loop(&r, sum, err);
    }
    if (rc == 0 && !sum->already_finished) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "e2e_train_time", sum->seconds);
        cJSON_AddNumberToObject(d, "training_sequences_per_second", sum->sequences_per_second);
        cJSON_AddNumberToObject(d, "final_loss", sum->final_loss);
        cJSON_AddNumberToObject(d, "raw_train_time", sum->seconds);
        cJSON_AddNumberToObject(d, "model_time", sum->model_seconds);
        logger_summary(r.log, d);
        /* issue 35, D11: a log that could not be written fails the run (which trained: say so) */
        if (logger_error(r.log))
            rc = bert_fail(err, "%s (the training itself went to step %ld%s%s)", logger_error(r.log), sum->last_step,
                           sum->last_checkpoint[0] ? "; last checkpoint " : "", sum->last_checkpoint);
    }
    /* an error one process met would leave the others waiting in a collective: end the job */
    if (rc != 0 && r.world > 1) comm_abort(r.comm, 1, err->msg);
    loader_close(r.train), loader_close(r.eval);
    step_batches_free(r.steps);
    trainer_free(r.trainer);
    grad_sync_free(r.sync);
    bert_model_free(r.model);
    logger_close(r.log);
    checkpoint_history_free(&r.written);
    free(r.positions), free(r.vocab);
    comm_close(r.comm);
    if (lock >= 0) close(lock);
    return rc;
}

int pretrain_run(const PretrainOptions *o, PretrainSummary *sum, BertError *err) {
    memset(sum, 0, sizeof *sum);
    sum->final_mlm_accuracy = NAN, sum->final_loss = NAN, sum->mean_loss = NAN;
    if (check_options(o, err) != 0) return -1;
    /* neither --config_file nor --bert_model: the configuration beside --init_checkpoint's
     * weights (config.json, else bert_config.json), as every other --init_checkpoint reads it */
    PretrainOptions with_config = *o;
    char weights[4096], config[4096];
    if (!o->config_file && !o->bert_model) {
        if (bert_checkpoint_locate(o->init_checkpoint, NULL, weights, sizeof weights, config, sizeof config, err) != 0)
            return -1;
        if (!config[0])
            return bert_fail(err, "--init_checkpoint %s has no config.json or bert_config.json beside it: give "
                                  "--config_file or --bert_model", o->init_checkpoint);
        with_config.config_file = config;
    }
    /* from here a stop signal (even one during the setup) ends the run after a step, with a
     * checkpoint */
    stop_signal_install();
    const int rc = run_pretraining(&with_config, sum, err);
    stop_signal_restore();
    stop_signal_clear();
    return rc;
}
