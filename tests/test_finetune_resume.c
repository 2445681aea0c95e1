/* Fine-tuning's feedback as HuggingFace's Trainer gives it (issue 36, point 5), through the
 * bert program as a user runs it, on a tiny model and the GLUE / classify fixtures:
 *  - --eval_steps N: an evaluation every N steps and at the last, one log line and one
 *    DLLogger record each;
 *  - --save_best: best/ holds the model of the best evaluation; best.json names its step, which
 *    is the first step with the highest of the recorded metrics, and that folder evaluated on
 *    its own gives that metric;
 *  - --save_steps N: checkpoint-<step>/ folders, the last --save_total_limit kept;
 *  - --resume_from_checkpoint: a run stopped by SIGTERM (a checkpoint, exit 0, no final
 *    model) and resumed, and a run resumed from a middle checkpoint into another folder, end
 *    with model.safetensors byte for byte the uninterrupted run's;
 *  - a resume with other settings is refused by name; bad flag combinations fail first. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "model/bert.h"
#include "model/config.h"
#include "test.h"
#include "test_util.h"

static char bert[1024], repo[1024], dir[256], vocab[1400], rte[1400], cls[1400];

/* `cd dir && bert ARGS > out.txt 2> err.txt`: the exit status. */
static int run(const char *fmt, ...) {
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd %s && %s %s > out.txt 2> err.txt", dir, bert, args);
    const int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *text_of(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return read_text(path);
}

static bool there(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return file_exists(path);
}

static bool same(const char *a, const char *b) {
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/%s", dir, a), snprintf(pb, sizeof pb, "%s/%s", dir, b);
    return file_exists(pa) && files_equal(pa, pb);
}

static void show_output(void) {
    char *out = text_of("out.txt"), *err = text_of("err.txt");
    fprintf(stderr, "    stdout: %s\n    stderr: %s\n", out, err);
    free(out), free(err);
}

static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* A tiny random model (2 layers, width 32) with the real vocabulary: dir/init. */
static void write_tiny_model(void) {
    BertConfig c;
    BertError err;
    bert_config_preset("bert-tiny", &c, &err);
    c.num_hidden_layers = 2, c.hidden_size = 32, c.num_attention_heads = 2, c.intermediate_size = 64;
    c.max_position_embeddings = 64;
    char path[512];
    snprintf(path, sizeof path, "%s/init", dir), mkdir(path, 0777);
    BertModel *m;
    if (bert_model_create(&m, &c, 1, 8, 1, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    bert_init_weights(m, 3);
    snprintf(path, sizeof path, "%s/init/model.safetensors", dir);
    CHECKF(bert_save_safetensors(m, path, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/init/config.json", dir);
    CHECKF(bert_config_save(path, &c, &err) == 0, "%s", err.msg);
    bert_model_free(m);
}

/* RTE's 9 training rows in steps of 2: 5 steps an epoch, the last short. */
#define GLUE_ARGS "glue --task_name rte --data_dir %s --init_checkpoint init --vocab_file %s --max_seq_length 48 " \
                  "--train_batch_size 2 --eval_batch_size 4 --learning_rate 1e-3 --threads 1 --log_freq 1000 --do_train"
/* The classify fixture: three classes a tiny model learns within some epochs. */
#define CLS_ARGS "classify --train_file %s/multiclass_train.csv --validation_file %s/multiclass_dev.csv " \
                 "--init_checkpoint init --vocab_file %s --do_lower_case --max_seq_length 32 --train_batch_size 8 " \
                 "--eval_batch_size 5 --learning_rate 2e-3 --warmup_proportion 0 --seed 5 --threads 1 --log_freq 1000 " \
                 "--do_train --do_eval"

/* The "eval at step S/T (...): METRIC V" lines of out.txt: steps and values, up to max. */
static int eval_lines(const char *metric, long *steps, double *values, int max) {
    char *out = text_of("out.txt"), key[64];
    snprintf(key, sizeof key, "): %s ", metric);
    int n = 0;
    for (const char *p = out; (p = strstr(p, "eval at step ")) && n < max; p++) {
        const char *v = strstr(p, key), *eol = strchr(p, '\n');
        if (!v || (eol && v > eol)) continue;
        steps[n] = strtol(p + 13, NULL, 10), values[n] = strtod(v + strlen(key), NULL), n++;
    }
    free(out);
    return n;
}

/* --eval_steps 6 over 120 steps: 20 evaluations, a log line and a DLLogger record each;
 * --save_best keeps the first step with the highest accuracy, whose folder gives it. GLUE:
 * --eval_steps 3 over 8 steps evaluates at 3, 6 and the last. */
static void test_eval_steps_and_best(void) {
    int rc = run(CLS_ARGS " --output_dir best_run --num_train_epochs 20 --eval_steps 6 --save_best "
                 "--json-summary best_run.json", cls, cls, vocab);
    CHECKF(rc == 0, "classify --eval_steps: %d", rc);
    if (rc) show_output();
    long steps[32];
    double acc[32];
    const int n = eval_lines("accuracy", steps, acc, 32);
    char *log = text_of("best_run.json");
    /* 48 rows in steps of 8: 6 steps an epoch, 120 steps: evaluations at 6, 12, ..., 120 */
    CHECKF(n == 20 && steps[0] == 6 && steps[19] == 120, "%d evaluations, the last at %ld", n, n ? steps[n - 1] : 0);
    CHECKF(count_of(log, "\"eval_accuracy\"") == 20, "DLLogger records of eval_accuracy: %d, not 20",
           count_of(log, "\"eval_accuracy\""));
    free(log);
    int best = 0;
    for (int i = 1; i < n; i++) best = acc[i] > acc[best] ? i : best;
    CHECKF(n > 0 && acc[best] > acc[0], "the accuracy never rose above the first evaluation's (%g): no best to find",
           n ? acc[0] : NAN);
    char *best_json = text_of("best_run/best/best.json");
    char expect[64];
    snprintf(expect, sizeof expect, "\"step\":\t%ld,", n ? steps[best] : -1);
    CHECKF(strstr(best_json, expect) && strstr(best_json, "\"metric\":\t\"accuracy\""), "best.json %s, expected step "
           "%ld", best_json, n ? steps[best] : -1);
    free(best_json);
    char *out = text_of("out.txt");
    snprintf(expect, sizeof expect, "best evaluation at step %ld ", n ? steps[best] : -1);
    CHECKF(strstr(out, expect), "the summary does not name the best step: %s", out);
    free(out);
    CHECK(there("best_run/best/model.safetensors") && there("best_run/best/config.json") &&
          there("best_run/best/vocab.txt") && !there("best_run/.best.tmp") && !there("best_run/.best.old"));
    /* the best folder, evaluated alone, gives the recorded metric */
    rc = run("classify --validation_file %s/multiclass_dev.csv --init_checkpoint best_run/best --output_dir best_eval "
             "--eval_batch_size 5 --max_seq_length 32 --threads 1 --do_eval", cls);
    CHECKF(rc == 0, "classify --do_eval on best/: %d", rc);
    char *results = text_of("best_eval/eval_results.json");
    const char *a = strstr(results, "\"accuracy\":");
    CHECKF(a && n && fabs(strtod(a + 11, NULL) - acc[best]) < 1e-4, "best/ evaluates to %s, recorded %g", results,
           n ? acc[best] : NAN);
    free(results);
    /* GLUE: 8 steps, --eval_steps 3: at 3, 6 and 8 */
    rc = run(GLUE_ARGS " --do_eval --output_dir glue_eval --max_steps 8 --eval_steps 3", rte, vocab);
    CHECKF(rc == 0, "glue --eval_steps: %d", rc);
    if (rc) show_output();
    const int m = eval_lines("acc", steps, acc, 32);
    CHECKF(m == 3 && steps[0] == 3 && steps[1] == 6 && steps[2] == 8, "glue: %d evaluations", m);
    /* SQuAD (the predict file's official F1) and NER (the entity F1): 5 steps, at 2, 4 and 5 */
    rc = run("squad --init_checkpoint init --vocab_file %s --do_lower_case --output_dir squad_eval --train_file "
             "%s/tests/data/squad/subset_v1.json --predict_file %s/tests/data/squad/subset_v1.json --do_train "
             "--do_predict --do_eval --max_seq_length 64 --doc_stride 32 --max_query_length 24 --train_batch_size 4 "
             "--predict_batch_size 8 --max_steps 5 --eval_steps 2 --save_best --learning_rate 1e-3 --threads 1",
             vocab, repo, repo);
    CHECKF(rc == 0, "squad --eval_steps: %d", rc);
    const int q = eval_lines("f1", steps, acc, 32);
    CHECKF(q == 3 && steps[0] == 2 && steps[1] == 4 && steps[2] == 5 && there("squad_eval/best/best.json"),
           "squad: %d evaluations", q);
    rc = run("ner --init_checkpoint init --vocab_file %s --output_dir ner_eval --train_file %s/tests/data/ner/train.txt "
             "--validation_file %s/tests/data/ner/dev.txt --do_train --do_eval --max_seq_length 64 --train_batch_size 4 "
             "--max_steps 5 --eval_steps 2 --threads 1", vocab, repo, repo);
    CHECKF(rc == 0, "ner --eval_steps: %d", rc);
    const int e = eval_lines("f1", steps, acc, 32);
    CHECKF(e == 3 && steps[0] == 2 && steps[1] == 4 && steps[2] == 5 && !there("ner_eval/best"), "ner: %d evaluations", e);
}

/* Checkpoints every 2 steps of 9: 2, 4, 6 and 8 written, the last 2 kept (0: all). A new run
 * into a folder with checkpoints is refused unless --overwrite_output_dir, which deletes them. */
static void test_save_total_limit(void) {
    int rc = run(GLUE_ARGS " --output_dir keep2 --max_steps 9 --save_steps 2", rte, vocab);
    CHECKF(rc == 0, "glue --save_steps: %d", rc);
    if (rc) show_output();
    CHECK(!there("keep2/checkpoint-2") && !there("keep2/checkpoint-4") && there("keep2/checkpoint-6/trainer_state.json") &&
          there("keep2/checkpoint-8/trainer_state.json") && !there("keep2/checkpoint-9"));
    CHECK(there("keep2/checkpoint-8/optimizer.safetensors") && there("keep2/checkpoint-8/model.safetensors") &&
          there("keep2/checkpoint-8/config.json") && there("keep2/checkpoint-8/vocab.txt"));
    rc = run(GLUE_ARGS " --output_dir keep_all --max_steps 9 --save_steps 2 --save_total_limit 0", rte, vocab);
    CHECKF(rc == 0, "glue --save_total_limit 0: %d", rc);
    CHECK(there("keep_all/checkpoint-2") && there("keep_all/checkpoint-4") && there("keep_all/checkpoint-6") &&
          there("keep_all/checkpoint-8"));
    /* a new run into the folder: refused, or with --overwrite_output_dir the old checkpoints go */
    rc = run(GLUE_ARGS " --output_dir keep_all --max_steps 3", rte, vocab);
    char *err = text_of("err.txt");
    CHECKF(rc == 1 && strstr(err, "holds a finished run") && there("keep_all/checkpoint-8"), "rc %d: %s", rc, err);
    free(err);
    char path[512];
    snprintf(path, sizeof path, "%s/keep_all/model.safetensors", dir), unlink(path);   /* as if stopped */
    rc = run(GLUE_ARGS " --output_dir keep_all --max_steps 3", rte, vocab);
    err = text_of("err.txt");
    CHECKF(rc == 1 && strstr(err, "holds checkpoints of an earlier run (checkpoint-<step>): give --resume_from_checkpoint"),
           "rc %d: %s", rc, err);
    free(err);
    rc = run(GLUE_ARGS " --output_dir keep_all --max_steps 3 --overwrite_output_dir", rte, vocab);
    CHECKF(rc == 0 && !there("keep_all/checkpoint-2") && !there("keep_all/checkpoint-8"), "--overwrite_output_dir: %d", rc);
    /* a checkpoint folder is a model folder: bert glue --do_eval takes it as it is */
    rc = run("glue --task_name rte --data_dir %s --init_checkpoint keep2/checkpoint-8 --output_dir ck_eval --do_eval "
             "--max_seq_length 48 --threads 1", rte);
    CHECKF(rc == 0, "glue --do_eval on a checkpoint: %d", rc);
}

/* Runs `bert ARGS` in dir as a child, stdout/stderr to files; SIGTERM once `ready` exists. */
static int run_and_stop(const char *ready, const char *args) {
    char cmd[8192], path[512];
    snprintf(cmd, sizeof cmd, "cd %s && exec %s %s > out.txt 2> err.txt", dir, bert, args);
    snprintf(path, sizeof path, "%s/%s", dir, ready);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct stat st;
    for (int i = 0; i < 12000 && stat(path, &st) != 0; i++) usleep(5000);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    return status;
}

/* Stopped by SIGTERM and resumed, or resumed from a middle checkpoint into another folder:
 * the final weights are the uninterrupted run's, byte for byte (two epochs' orders, dropout). */
static void test_resume_is_exact(void) {
    char args[4096];
    snprintf(args, sizeof args, GLUE_ARGS " --max_steps 120 --save_steps 8 --save_total_limit 0", rte, vocab);
    int rc = run("%s --output_dir straight", args);
    CHECKF(rc == 0, "the uninterrupted run: %d", rc);
    if (rc) show_output();
    /* SIGTERM after the checkpoint at step 16: a checkpoint where it stopped, exit 0, no model */
    char stop_args[4200];
    snprintf(stop_args, sizeof stop_args, "%s --output_dir stopped", args);
    const int status = run_and_stop("stopped/checkpoint-16/trainer_state.json", stop_args);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "SIGTERM: status %d", status);
    char *out = text_of("out.txt");
    const char *at = strstr(out, "stopped by signal 15 at step ");
    const long stopped_at = at ? strtol(at + 29, NULL, 10) : -1;
    CHECKF(stopped_at >= 16 && stopped_at < 120, "%s", out);
    free(out);
    char name[128];
    snprintf(name, sizeof name, "stopped/checkpoint-%ld/trainer_state.json", stopped_at);
    CHECKF(there(name) && !there("stopped/model.safetensors") && !there("stopped/all_results.json"),
           "after SIGTERM at step %ld: %s", stopped_at, name);
    /* resumed from the newest checkpoint in the folder */
    rc = run("%s --resume_from_checkpoint --output_dir stopped", args);   /* alone: the newest */
    CHECKF(rc == 0, "the resumed run: %d", rc);
    if (rc) show_output();
    out = text_of("out.txt");
    char expect[64];
    snprintf(expect, sizeof expect, "resumed at step %ld\n", stopped_at);
    CHECKF(strstr(out, expect), "%s", out);
    snprintf(expect, sizeof expect, " step 120 (%ld this run), ", 120 - stopped_at);   /* not "120 steps" */
    CHECKF(strstr(out, expect), "%s", out);
    free(out);
    CHECKF(same("stopped/model.safetensors", "straight/model.safetensors"),
           "stopped at step %ld and resumed: the final model differs from the uninterrupted run's", stopped_at);
    /* from the uninterrupted run's checkpoint-8 (in the middle of the second epoch) into a new folder */
    rc = run("%s --output_dir from8 --resume_from_checkpoint straight/checkpoint-8", args);
    CHECKF(rc == 0, "resumed from straight/checkpoint-8: %d", rc);
    CHECKF(same("from8/model.safetensors", "straight/model.safetensors"),
           "resumed from checkpoint-8: the final model differs from the uninterrupted run's");
    /* other settings: refused by name, before any step */
    rc = run(GLUE_ARGS " --max_steps 120 --output_dir other --resume_from_checkpoint straight/checkpoint-8 --seed 7",
             rte, vocab);
    char *err = text_of("err.txt");
    CHECKF(rc == 1 && strstr(err, "was trained with seed 1, this run has 7"), "rc %d: %s", rc, err);
    free(err);
}

/* The DLLogger records' step_loss of each step (--log_freq 1) in loss[step]; the records read. */
static int step_losses(const char *name, double *loss, int max_step) {
    char *log = text_of(name);
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, "\"step\":[")); p++) {
        const char *comma = strchr(p, ','), *v = strstr(p, "\"step_loss\":"), *eol = strchr(p, '\n');
        const long step = comma ? strtol(comma + 1, NULL, 10) : -1;
        if (!v || (eol && v > eol) || step < 1 || step > max_step) continue;
        loss[step] = strtod(v + 12, NULL), n++;
    }
    free(log);
    return n;
}

static double results_number(const char *name, const char *key) {
    char *text = text_of(name);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *v = cJSON_GetObjectItem(j, key);
    const double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    cJSON_Delete(j), free(text);
    return x;
}

/* all_results.json's train_loss is the mean of the run's step losses, as HF Trainer's
 * (tr_loss / global_step), not the last step's; a resumed run's, of the steps it trained. */
static void test_train_loss_is_the_mean(void) {
    int rc = run(GLUE_ARGS " --output_dir loss_all --max_steps 12 --save_steps 4 --log_freq 1 --json-summary loss.json",
                 rte, vocab);
    CHECKF(rc == 0, "glue: %d", rc);
    if (rc) show_output();
    double loss[13] = {0}, all = 0, last4 = 0;
    CHECKF(step_losses("loss.json", loss, 12) == 12, "not 12 step_loss records");
    for (int k = 1; k <= 12; k++) all += loss[k];
    for (int k = 9; k <= 12; k++) last4 += loss[k];
    const double got = results_number("loss_all/all_results.json", "train_loss");
    CHECKF(fabs(got - all / 12) <= 1e-12 * fabs(all / 12) && got != loss[12],
           "train_loss %.17g: the mean of the 12 steps is %.17g, the last step's %.17g", got, all / 12, loss[12]);
    /* resumed at step 8: the mean of steps 9..12 (the same losses: the resume is exact) */
    rc = run(GLUE_ARGS " --output_dir loss_resumed --max_steps 12 --resume_from_checkpoint loss_all/checkpoint-8", rte,
             vocab);
    CHECKF(rc == 0, "glue resumed: %d", rc);
    const double resumed = results_number("loss_resumed/all_results.json", "train_loss");
    CHECKF(fabs(resumed - last4 / 4) <= 1e-12 * fabs(last4 / 4), "resumed train_loss %.17g: steps 9..12's mean %.17g",
           resumed, last4 / 4);
}

/* Flag combinations that cannot work fail before any work, naming the flag. */
static void test_flag_checks(void) {
    const struct { const char *flags, *message; } cases[] = {
        {"--eval_steps 2", "--eval_steps evaluates during training: give it with --do_train and --do_eval"},
        {"--do_eval --save_best", "--save_best keeps the best evaluation's model: add --eval_steps N"},
        {"--resume_from_checkpoint nowhere", "--resume_from_checkpoint nowhere: not a complete fine-tuning checkpoint"},
        {"--save_steps 2 --skip_checkpoint", "--skip_checkpoint saves nothing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int rc = run(GLUE_ARGS " --output_dir bad%zu %s", rte, vocab, i, cases[i].flags);
        char *err = text_of("err.txt"), name[32];
        snprintf(name, sizeof name, "bad%zu", i);
        CHECKF(rc == 1 && strstr(err, cases[i].message) && !there(name), "%s: rc %d: %s", cases[i].flags, rc, err);
        free(err);
    }
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert, sizeof bert) != 0 || !getcwd(repo, sizeof repo)) return 1;
    snprintf(vocab, sizeof vocab, "%s/data/vocab/bert-base-uncased-vocab.txt", repo);
    snprintf(rte, sizeof rte, "%s/tests/data/glue/RTE", repo);
    snprintf(cls, sizeof cls, "%s/tests/data/classify", repo);
    snprintf(dir, sizeof dir, "/tmp/bert_test_finetune_resume.%ld", (long)getpid());
    remove_tree(dir);
    mkdir(dir, 0777);
    write_tiny_model();
    RUN_TEST(test_flag_checks);
    RUN_TEST(test_eval_steps_and_best);
    RUN_TEST(test_save_total_limit);
    RUN_TEST(test_resume_is_exact);
    RUN_TEST(test_train_loss_is_the_mean);
    remove_tree(dir);
    return test_summary();
}
