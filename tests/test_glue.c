/* GLUE (src/tasks/glue.h, glue_run.h): against tests/data/glue/expected.json, made by
 * tools/make_glue_fixtures.py from HuggingFace's own GLUE processors, HF's BertTokenizer with
 * Google's layout and truncation, scikit-learn's and scipy's metrics:
 *  - every task's train/dev/test rows read as HF reads them (texts, labels, header rules);
 *  - features: ids and segments equal, pairs cut at max_seq_length 32;
 *  - accuracy, F1, Matthews, Pearson, Spearman (ties, degenerate cases) to 1e-12;
 *  - bad files named with their line; `bert glue` end to end on a tiny model: train, eval,
 *    test predictions in the submission format, an HF-named model with the label map, and
 *    the same weights from the same seed. */
#include "test.h"
#include "test_util.h"

#include <cjson/cJSON.h>

#include "model/config.h"
#include "kernels/kernels.h"
#include "model/bert.h"
#include "tasks/glue.h"
#include "tasks/glue_run.h"
#include "tasks/infer_bench.h"
#include "train/checkpoint.h"

#define VOCAB "data/vocab/bert-base-uncased-vocab.txt"

static cJSON *expected;
static Tokenizer *tok;
static Vocab *vocab;

static const char *split_name(GlueSplit s) { return s == GLUE_TRAIN ? "train" : s == GLUE_DEV ? "dev" : "test"; }

static void check_split(const char *name, const GlueTask *t, const char *dir, GlueSplit split, const cJSON *want) {
    GlueExamples e;
    BertError err;
    if (glue_read(t, dir, split, &e, &err) != 0) {
        CHECKF(0, "%s %s: %s", name, split_name(split), err.msg);
        return;
    }
    CHECKF(e.n == cJSON_GetArraySize(want), "%s %s: %d rows, HF %d", name, split_name(split), e.n,
           cJSON_GetArraySize(want));
    GlueFeatures f;
    const int max_seq = cJSON_GetObjectItem(expected, "max_seq_length")->valueint;
    CHECKF(glue_features(&e, tok, max_seq, &f, &err) == 0, "%s", err.msg);
    int i = 0;
    for (const cJSON *row = want->child; row && i < e.n; row = row->next, i++) {
        const cJSON *a = cJSON_GetObjectItem(row, "text_a"), *b = cJSON_GetObjectItem(row, "text_b");
        const cJSON *label = cJSON_GetObjectItem(row, "label");
        CHECKF(!strcmp(e.text_a[i], a->valuestring), "%s %s row %d: text_a '%s' vs '%s'", name, split_name(split), i,
               e.text_a[i], a->valuestring);
        CHECKF(cJSON_IsNull(b) ? e.text_b[i] == NULL : e.text_b[i] && !strcmp(e.text_b[i], b->valuestring),
               "%s %s row %d: text_b", name, split_name(split), i);
        if (split == GLUE_TEST) CHECK(cJSON_IsNull(label) && e.label[i] == -1);
        else if (t->num_labels == 1) CHECKF(e.value[i] == strtof(label->valuestring, NULL), "%s row %d", name, i);
        else CHECKF(e.label[i] >= 0 && !strcmp(t->labels[e.label[i]], label->valuestring), "%s %s row %d: label",
                    name, split_name(split), i);
        const cJSON *ids = cJSON_GetObjectItem(row, "input_ids"), *seg = cJSON_GetObjectItem(row, "segment_ids");
        bool same = f.length[i] == cJSON_GetArraySize(ids);
        for (int k = 0; same && k < f.length[i]; k++)
            same = f.input_ids[(size_t)i * max_seq + k] == cJSON_GetArrayItem(ids, k)->valueint &&
                   f.segment_ids[(size_t)i * max_seq + k] == cJSON_GetArrayItem(seg, k)->valueint &&
                   f.input_mask[(size_t)i * max_seq + k] == 1;
        CHECKF(same, "%s %s row %d: features differ from Google's layout (length %d vs %d)", name, split_name(split),
               i, f.length[i], cJSON_GetArraySize(ids));
    }
    glue_features_free(&f);
    glue_examples_free(&e);
}

static void test_tasks_read_as_huggingface(void) {
    const cJSON *tasks = cJSON_GetObjectItem(expected, "tasks");
    int checked = 0;
    for (const cJSON *task = tasks->child; task; task = task->next, checked++) {
        const GlueTask *t = glue_task(task->string);
        CHECKF(t != NULL, "no task %s", task->string);
        if (!t) continue;
        const cJSON *labels = cJSON_GetObjectItem(task, "labels");
        CHECKF(cJSON_GetArraySize(labels) == (t->num_labels == 1 ? 1 : t->num_labels), "%s labels", t->name);
        for (int k = 0; t->num_labels > 1 && k < t->num_labels; k++)
            CHECKF(!strcmp(cJSON_GetArrayItem(labels, k)->valuestring, t->labels[k]), "%s label %d", t->name, k);
        char dir[256];
        snprintf(dir, sizeof dir, "tests/data/glue/%s", cJSON_GetObjectItem(task, "folder")->valuestring);
        const cJSON *splits = cJSON_GetObjectItem(task, "splits");
        for (GlueSplit s = GLUE_TRAIN; s <= GLUE_TEST; s++)
            check_split(task->string, t, dir, s, cJSON_GetObjectItem(splits, split_name(s)));
    }
    CHECK(checked == 10);
    CHECK(glue_task("SST2") == glue_task("sst-2") && glue_task("stsb") && !glue_task("squad"));
}

static void test_metrics_equal_sklearn_scipy(void) {
    const GlueTask *mrpc = glue_task("mrpc"), *cola = glue_task("cola"), *stsb = glue_task("sts-b");
    for (const cJSON *c = cJSON_GetObjectItem(expected, "classification")->child; c; c = c->next) {
        const cJSON *labels = cJSON_GetObjectItem(c, "labels"), *preds = cJSON_GetObjectItem(c, "preds");
        const int n = cJSON_GetArraySize(labels);
        int *pred = malloc(sizeof(int) * n), *label = malloc(sizeof(int) * n);
        for (int i = 0; i < n; i++) pred[i] = cJSON_GetArrayItem(preds, i)->valueint, label[i] = cJSON_GetArrayItem(labels, i)->valueint;
        GlueExamples e = {.n = n, .label = label};
        GlueScores s, m;
        glue_score(mrpc, pred, NULL, &e, &s), glue_score(cola, pred, NULL, &e, &m);
        const double acc = cJSON_GetObjectItem(c, "acc")->valuedouble, f1 = cJSON_GetObjectItem(c, "f1")->valuedouble;
        const double mcc = cJSON_GetObjectItem(c, "mcc")->valuedouble;
        CHECKF(fabs(s.accuracy - acc) < 1e-12 && fabs(s.f1 - f1) < 1e-12 && fabs(m.matthews - mcc) < 1e-12,
               "n %d: acc %.15g/%.15g f1 %.15g/%.15g mcc %.15g/%.15g", n, s.accuracy, acc, s.f1, f1, m.matthews, mcc);
        free(pred), free(label);
    }
    for (const cJSON *c = cJSON_GetObjectItem(expected, "regression")->child; c; c = c->next) {
        const cJSON *x = cJSON_GetObjectItem(c, "x"), *y = cJSON_GetObjectItem(c, "y");
        const int n = cJSON_GetArraySize(x);
        float *px = malloc(sizeof(float) * n), *vy = malloc(sizeof(float) * n);
        for (int i = 0; i < n; i++) px[i] = (float)cJSON_GetArrayItem(x, i)->valuedouble, vy[i] = (float)cJSON_GetArrayItem(y, i)->valuedouble;
        GlueExamples e = {.n = n, .value = vy};
        GlueScores s;
        glue_score(stsb, NULL, px, &e, &s);
        /* the values pass through float32 (the model's outputs): ranks are unchanged, Pearson
         * moves by ~1e-7 */
        const double p = cJSON_GetObjectItem(c, "pearson")->valuedouble, r = cJSON_GetObjectItem(c, "spearman")->valuedouble;
        CHECKF(fabs(s.pearson - p) < 1e-6 && fabs(s.spearman - r) < 1e-12, "n %d: pearson %.15g/%.15g spearman %.15g/%.15g",
               n, s.pearson, p, s.spearman, r);
        free(px), free(vy);
    }
}

static void test_bad_files(void) {
    char dir[96];   /* per process: two runs of the suite never share it */
    snprintf(dir, sizeof dir, "/tmp/bert_test_glue_bad.%d", (int)getpid());
    remove_tree(dir);
    mkdir(dir, 0777);
    const struct { const char *task, *content, *want; } cases[] = {
        {"rte", "index\ts1\ts2\tlabel\n0\tA.\tB.\tentailment\n1\tonly two\n", "train.tsv:3: 2 tab-separated cells"},
        {"rte", "index\ts1\ts2\tlabel\n0\tA.\tB.\tmaybe\n", "train.tsv:2: the label 'maybe' is not one of rte's"},
        {"sts-b", "h\th\th\th\th\th\th\th\th\th\n0\t\t\t\t\t\t\tA.\tB.\tfive\n", "the score 'five' is not a number"},
        /* issue 35, D24: read as 16 by strtof's hex (Python's float() refuses it); inf and nan
         * are numbers to Python but no score to train on */
        {"sts-b", "h\th\th\th\th\th\th\th\th\th\n0\t\t\t\t\t\t\tA.\tB.\t0x10\n", "the score '0x10' is not a number"},
        {"sts-b", "h\th\th\th\th\th\th\th\th\th\n0\t\t\t\t\t\t\tA.\tB.\t0x1p3\n", "the score '0x1p3' is not a number"},
        {"sts-b", "h\th\th\th\th\th\th\th\th\th\n0\t\t\t\t\t\t\tA.\tB.\tinf\n", "the score 'inf' is not finite"},
        {"sts-b", "h\th\th\th\th\th\th\th\th\th\n0\t\t\t\t\t\t\tA.\tB.\tNaN\n", "the score 'NaN' is not finite"},
        {"sts-b", "h\th\th\th\th\th\th\th\th\th\n0\t\t\t\t\t\t\tA.\tB.\t1e\n", "the score '1e' is not a number"},
        {"cola", "", "no examples"},
        {"sst-2", "sentence\tlabel\n", "no examples"},
    };
    BertError err;
    char path[512];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(path, sizeof path, "%s/train.tsv", dir);
        write_text(path, cases[c].content);
        GlueExamples e;
        CHECKF(glue_read(glue_task(cases[c].task), dir, GLUE_TRAIN, &e, &err) != 0 && strstr(err.msg, cases[c].want),
               "case %zu: %s", c, err.msg);
    }
    /* HF's conventions: QQP's short rows skipped; \r alone ends a row (universal newlines); an
     * empty second text makes a single-text example */
    write_text(path, "id\tq1\tq2\tqa\tqb\tdup\n0\t1\t2\tA?\tB?\t1\n1\t3\tbroken\n2\t4\t5\tC?\tD?\t0\n");
    GlueExamples q;
    CHECKF(glue_read(glue_task("qqp"), dir, GLUE_TRAIN, &q, &err) == 0 && q.n == 2 && q.skipped == 1, "qqp: %s", err.msg);
    glue_examples_free(&q);
    snprintf(path, sizeof path, "%s/train.tsv", dir);   /* Python's float(): spaces around, 1e5, .5 */
    write_text(path, "h\th\th\th\th\th\th\th\th\th\n0\t\t\t\t\t\t\tA.\tB.\t 2.5 \n1\t\t\t\t\t\t\tA.\tB.\t.5\n"
                     "2\t\t\t\t\t\t\tA.\tB.\t1e0\n3\t\t\t\t\t\t\tA.\tB.\t+4.\n");
    CHECKF(glue_read(glue_task("sts-b"), dir, GLUE_TRAIN, &q, &err) == 0 && q.n == 4 && q.value[0] == 2.5f &&
           q.value[1] == 0.5f && q.value[2] == 1.0f && q.value[3] == 4.0f, "sts-b scores: %s", err.msg);
    glue_examples_free(&q);
    write_text(path, "sentence\tlabel\rgood one\t1\rbad one\t0\r\nlast\t1");
    CHECKF(glue_read(glue_task("sst-2"), dir, GLUE_TRAIN, &q, &err) == 0 && q.n == 3 && !strcmp(q.text_a[1], "bad one"),
           "lone CR: %s", err.msg);
    glue_examples_free(&q);
    write_text(path, "index\ts1\ts2\tlabel\n0\tThe cat.\t\tentailment\n");
    if (glue_read(glue_task("rte"), dir, GLUE_TRAIN, &q, &err) == 0) {
        GlueFeatures f;
        CHECK(q.text_b[0] == NULL && glue_features(&q, tok, 16, &f, &err) == 0 && f.length[0] == 5 &&
              f.segment_ids[4] == 0);   /* [CLS] the cat . [SEP] */
        glue_features_free(&f), glue_examples_free(&q);
    } else {
        CHECKF(0, "%s", err.msg);
    }
    write_bytes(path, "sentence\tlabel\nab\0c\t1\n", 21);
    GlueExamples e;
    CHECKF(glue_read(glue_task("sst-2"), dir, GLUE_TRAIN, &e, &err) != 0 && strstr(err.msg, "NUL"), "%s", err.msg);
    CHECKF(glue_read(glue_task("sst-2"), dir, GLUE_DEV, &e, &err) != 0 && strstr(err.msg, "dev.tsv"), "%s", err.msg);
    remove_tree(dir);
}

/* A tiny model with the real vocabulary saved as a checkpoint folder root/init. */
static void write_tiny_checkpoint(const char *root, char *init, size_t init_size) {
    remove_tree(root);
    mkdir(root, 0777);
    BertConfig c;
    BertError err;
    bert_config_preset("bert-tiny", &c, &err);
    c.num_hidden_layers = 2, c.hidden_size = 32, c.num_attention_heads = 2, c.intermediate_size = 64;
    c.max_position_embeddings = 64;
    BertModel *m;
    char path[512];
    snprintf(init, init_size, "%s/init", root);
    mkdir(init, 0777);
    if (bert_model_create(&m, &c, 1, 8, 1, &err) != 0) { CHECKF(0, "%s", err.msg); return; }
    bert_init_weights(m, 3);
    snprintf(path, sizeof path, "%s/model.safetensors", init);
    CHECKF(bert_save_safetensors(m, path, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/config.json", init);
    CHECKF(bert_config_save(path, &c, &err) == 0, "%s", err.msg);
    bert_model_free(m);
}

static void tiny_rte_options(GlueOptions *o, const char *init, const char *out) {
    glue_default_options(o);
    o->task_name = "rte", o->data_dir = "tests/data/glue/RTE", o->ft.output_dir = out, o->ft.init_checkpoint = init;
    o->ft.vocab_file = VOCAB, o->ft.do_lower_case = true, o->ft.do_train = o->ft.do_eval = true, o->ft.skip_checkpoint = true;
    o->ft.max_seq_length = 48, o->ft.train_batch_size = 4, o->ft.gradient_accumulation_steps = 2, o->ft.eval_batch_size = 3;
    o->ft.num_train_epochs = 2, o->ft.learning_rate = 1e-3, o->ft.log_freq = 1000, o->ft.seed = 9;
}

/* --fp16: operands rounded to fp16 (2^-11 relative) with the loss scaled by 2^16: no step
 * overflows on this model, all 6 are taken, and the final loss stays within 1% of fp32's
 * (6 small steps: the rounding moves it by ~1e-3). A static scale of 2^40 overflows fp16's
 * 65504 in every step: each is skipped (not counted as done), and after 64 in a row the run
 * stops with a message instead of looping. */
static void test_glue_fp16_loss_scaling(void) {
    char root[96], init[256], out[300];   /* per process: two runs of the suite never share it */
    snprintf(root, sizeof root, "/tmp/bert_test_glue_fp16.%d", (int)getpid());
    write_tiny_checkpoint(root, init, sizeof init);
    snprintf(out, sizeof out, "%s/out", root);
    GlueOptions o;
    GlueResult fp32, fp16;
    BertError err;
    tiny_rte_options(&o, init, out);
    CHECKF(glue_run(&o, &fp32, &err) == 0, "%s", err.msg);
    o.ft.precision = BERT_FP16;
    CHECKF(glue_run(&o, &fp16, &err) == 0, "%s", err.msg);
    CHECKF(fp16.train.steps == 6 && fp16.train.skipped_steps == 0 && fp16.train.loss_scale == 65536.0, "%ld steps, %ld skipped, scale %g",
           fp16.train.steps, fp16.train.skipped_steps, fp16.train.loss_scale);
    CHECKF(fabs(fp16.train.final_loss - fp32.train.final_loss) <= 1e-2 * fabs(fp32.train.final_loss), "fp16 loss %.6f, fp32 %.6f",
           fp16.train.final_loss, fp32.train.final_loss);
    CHECKF(fp16.train.final_loss != fp32.train.final_loss, "fp16 gave fp32's loss exactly: not rounded?");
    o.ft.loss_scale = 1099511627776.0;   /* 2^40 */
    CHECKF(glue_run(&o, &fp16, &err) != 0 && strstr(err.msg, "overflowed 64 times in a row"), "%s", err.msg);
    remove_tree(root);
}

/* What a kill at each deletion would leave: every checkpoint-<step> folder of hook_dir whole
 * (trainer_state.json there, and every file it lists with its size and CRC-32). */
static const char *hook_dir;
static int hook_deletions, hook_partial;
static BertError hook_error;   /* the last part found missing */

static void check_checkpoints_whole(const char *path) {
    (void)path;
    hook_deletions++;
    long *steps;
    int n;
    BertError err;
    if (checkpoint_list_named(hook_dir, "checkpoint-", &steps, &n, &err) != 0) return;
    for (int i = 0; i < n; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/checkpoint-%ld", hook_dir, steps[i]);
        cJSON *state = NULL;
        if (checkpoint_read_json(dir, "trainer_state.json", &state, &err) != 0 ||
            checkpoint_verify_files(dir, cJSON_GetObjectItem(state, "files"), &err) != 0)
            hook_partial++, hook_error = err;
        cJSON_Delete(state);
    }
    free(steps);
}

/* --overwrite_output_dir deletes an earlier run's checkpoint-<step> folders: each moved aside
 * first (as the pruning of --save_total_limit does), so a kill at any point of the deletion
 * leaves no checkpoint-<step> with files missing, which --resume_from_checkpoint took and
 * failed on (they were deleted in place). */
static void test_overwrite_deletes_checkpoints_whole(void) {
    char root[96], init[256], out[300];   /* per process: two runs of the suite never share it */
    snprintf(root, sizeof root, "/tmp/bert_test_glue_overwrite.%d", (int)getpid());
    write_tiny_checkpoint(root, init, sizeof init);
    snprintf(out, sizeof out, "%s/out", root);
    GlueOptions o;
    GlueResult r;
    BertError err;
    tiny_rte_options(&o, init, out);
    o.ft.do_eval = false, o.ft.skip_checkpoint = false, o.ft.max_steps = 4, o.ft.save_steps = 2;
    o.ft.save_total_limit = 0;
    CHECKF(glue_run(&o, &r, &err) == 0, "%s", err.msg);
    long *steps;
    int n = 0;
    CHECK(checkpoint_list_named(out, "checkpoint-", &steps, &n, &err) == 0 && n == 2);
    free(steps);
    o.ft.save_steps = 0, o.ft.overwrite_output_dir = true;   /* a fresh run into the folder */
    hook_dir = out, hook_deletions = hook_partial = 0;
    test_hook_before_delete = check_checkpoints_whole;
    CHECKF(glue_run(&o, &r, &err) == 0, "%s", err.msg);
    test_hook_before_delete = NULL;
    CHECKF(hook_deletions >= 2 * 6 && hook_partial == 0, "%d deletions; %d times a checkpoint-<step> with files missing "
           "(%s)", hook_deletions, hook_partial, hook_error.msg);
    CHECK(checkpoint_list_named(out, "checkpoint-", &steps, &n, &err) == 0 && n == 0);
    free(steps);
    remove_tree(root);
}

/* A tiny model with the real vocabulary, trained a few steps by `bert glue` on the fixture. */
static void test_glue_end_to_end(void) {
    char root[96];   /* per process: two runs of the suite never share it */
    snprintf(root, sizeof root, "/tmp/bert_test_glue_run.%d", (int)getpid());
    char init[256];
    BertError err;
    write_tiny_checkpoint(root, init, sizeof init);
    const char *tasks[] = {"rte", "sts-b"}, *dirs[] = {"tests/data/glue/RTE", "tests/data/glue/STS-B"};
    for (int k = 0; k < 2; k++) {
        char out[2][256];
        GlueResult first = {0};
        for (int run = 0; run < 2; run++) {
            snprintf(out[run], sizeof out[run], "%s/%s_%d", root, tasks[k], run);
            GlueOptions o;
            glue_default_options(&o);
            o.task_name = tasks[k], o.data_dir = dirs[k], o.ft.output_dir = out[run], o.ft.init_checkpoint = init;
            o.ft.vocab_file = VOCAB, o.ft.do_lower_case = true, o.ft.do_train = o.ft.do_eval = o.ft.do_predict = true;
            o.ft.max_seq_length = 48, o.ft.train_batch_size = 4, o.ft.gradient_accumulation_steps = 2, o.ft.eval_batch_size = 3;
            o.ft.num_train_epochs = 2, o.ft.learning_rate = 1e-3, o.ft.log_freq = 1000, o.ft.seed = 9;
            GlueResult r;
            CHECKF(glue_run(&o, &r, &err) == 0, "%s: %s", tasks[k], err.msg);
            CHECKF(r.train.steps == 6 && r.train.train_sequences == 18 && r.evaluated && r.dev.n == 9 && r.predicted == 9,
                   "%s: %ld steps, %ld sequences, %d evaluated, %ld predicted", tasks[k], r.train.steps, r.train.train_sequences,
                   r.dev.n, r.predicted);
            CHECK(k == 0 ? r.dev.accuracy >= 0 && r.dev.accuracy <= 1 : isfinite(r.dev.pearson) || isnan(r.dev.pearson));
            if (run == 0) first = r;
        }
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/model.safetensors", out[0]), snprintf(b, sizeof b, "%s/model.safetensors", out[1]);
        CHECKF(files_equal(a, b), "%s: the same seed gave other weights", tasks[k]);
        snprintf(a, sizeof a, "%s/config.json", out[0]);
        char *config = read_text(a);
        CHECKF(strstr(config, "BertForSequenceClassification") && strstr(config, k ? "\"regression\"" : "not_entailment"),
               "%s", config);
        free(config);
        /* all_results.json: HF Trainer's keys, the dev metrics under eval_, the counts of this run */
        snprintf(a, sizeof a, "%s/all_results.json", out[0]);
        char *results = read_text(a);
        cJSON *all = cJSON_Parse(results);
        const cJSON *metric = cJSON_GetObjectItem(all, k ? "eval_pearson" : "eval_acc");
        CHECKF(all && cJSON_GetObjectItem(all, "train_runtime") && metric &&
                   cJSON_GetObjectItem(all, "train_samples")->valuedouble == 18 &&
                   cJSON_GetObjectItem(all, "eval_samples")->valuedouble == 9 &&
                   cJSON_GetObjectItem(all, "predict_samples")->valuedouble == 9 &&
                   cJSON_GetObjectItem(all, "peak_memory_mb")->valuedouble > 0,
               "%s", results);
        if (metric && k == 0) CHECK(metric->valuedouble == first.dev.accuracy);
        cJSON_Delete(all), free(results);
        snprintf(a, sizeof a, "%s/%s", out[0], k ? "STS-B.tsv" : "RTE.tsv");
        char *sub = read_text(a);
        int lines = 0;
        for (char *p = sub; *p; p++) lines += *p == '\n';
        CHECKF(!strncmp(sub, "index\tprediction\n0\t", 19) && lines == 10, "%s submission: %d lines", tasks[k], lines);
        /* evaluating and predicting alone from the saved model (a forward-only model: its
         * layers share their activations) gives the trained run's dev metrics and submission */
        char alone[300];
        snprintf(alone, sizeof alone, "%s/%s_alone", root, tasks[k]);
        GlueOptions po;
        glue_default_options(&po);
        po.task_name = tasks[k], po.data_dir = dirs[k], po.ft.output_dir = alone, po.ft.init_checkpoint = out[0];
        po.ft.vocab_file = VOCAB, po.ft.do_lower_case = true, po.ft.do_eval = po.ft.do_predict = true;
        po.ft.max_seq_length = 48, po.ft.eval_batch_size = 3;
        GlueResult pr;
        CHECKF(glue_run(&po, &pr, &err) == 0, "%s alone: %s", tasks[k], err.msg);
        snprintf(b, sizeof b, "%s/%s", alone, k ? "STS-B.tsv" : "RTE.tsv");
        char *sub_alone = read_text(b);
        CHECKF(pr.train.steps == 0 && pr.dev.n == first.dev.n && !strcmp(sub, sub_alone) &&
                   (k == 0 ? pr.dev.accuracy == first.dev.accuracy : pr.dev.pearson == first.dev.pearson ||
                                                                       (isnan(pr.dev.pearson) && isnan(first.dev.pearson))),
               "%s: evaluating alone from the saved model gave other results", tasks[k]);
        free(sub_alone);
        /* int8 prediction from the saved model runs the same rows (its numbers are int8's);
         * fine-tuning in int8 stops with the model's message */
        if (k_int8_support()) {
            po.ft.precision = BERT_INT8;
            CHECKF(glue_run(&po, &pr, &err) == 0 && pr.dev.n == first.dev.n && pr.predicted == 9, "%s int8: %s",
                   tasks[k], err.msg);
            po.ft.do_train = true, po.ft.num_train_epochs = 1, po.ft.train_batch_size = 4;
            snprintf(alone, sizeof alone, "%s/%s_int8_train", root, tasks[k]);
            po.ft.output_dir = alone;
            CHECKF(glue_run(&po, &pr, &err) != 0 && strstr(err.msg, "int8"), "%s: training in int8: %s", tasks[k],
                   err.msg);
        }
        free(sub);
    }
    remove_tree(root);
}

/* bench_infer's lengths and modes: the dev rows' lengths; padded runs every row at
 * max_seq_length, dynamic each batch at its longest row, packed exactly the real tokens. */
static void test_infer_bench_modes(void) {
    int32_t *len = NULL;
    int n = 0;
    BertError err;
    CHECKF(glue_dev_lengths("rte", "tests/data/glue/RTE", tok, 48, &len, &n, &err) == 0, "%s", err.msg);
    CHECK(n == 9);
    long real = 0, dynamic = 0;
    for (int i = 0; i < n; i++) {
        real += len[i];
        CHECK(len[i] >= 3 && len[i] <= 48);
    }
    for (int b = 0; b < n; b += 4) {
        int longest = 0;
        for (int i = b; i < n && i < b + 4; i++) longest = len[i] > longest ? len[i] : longest;
        dynamic += (long)longest * (n - b < 4 ? n - b : 4);
    }
    BertConfig c;
    bert_config_preset("bert-tiny", &c, &err);
    BertModel *m;
    if (bert_model_create_with_heads(&m, &c, (BertHeads){BERT_HEADS_NONE, 0}, 4, 48, 0, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        free(len);
        return;
    }
    bert_init_weights(m, 2);
    const long want[3] = {(long)n * 48, dynamic, real};
    for (InferMode mode = INFER_PADDED; mode <= INFER_PACKED; mode++) {
        InferTiming t;
        CHECKF(infer_bench_run(m, len, n, 4, 48, mode, 1, &t, &err) == 0, "%s", err.msg);
        CHECKF(t.batches == 3 && t.sequences == 9 && t.tokens_real == real && t.tokens_computed == want[mode] &&
               t.p50_ms <= t.p90_ms && t.p90_ms <= t.p95_ms && t.p95_ms <= t.p99_ms && t.p99_ms <= t.max_ms &&
                   t.avg_ms <= t.max_ms && fabs(t.avg_ms * t.batches - 1e3 * t.seconds) < 1e-6,
               "mode %d: %d batches, %ld real, %ld computed (want %ld)",
               mode, t.batches, t.tokens_real, t.tokens_computed, want[mode]);
    }
    bert_model_free(m);
    free(len);
}

int main(void) {
    char *text = read_text("tests/data/glue/expected.json");
    expected = cJSON_Parse(text);
    free(text);
    BertError err;
    if (!expected || vocab_load(&vocab, VOCAB, &err) != 0) {
        fprintf(stderr, "fixtures missing\n");
        return 1;
    }
    TokenizerOptions to = tokenizer_default_options();
    tok = tokenizer_new(vocab, &to);
    RUN_TEST(test_tasks_read_as_huggingface);
    RUN_TEST(test_metrics_equal_sklearn_scipy);
    RUN_TEST(test_bad_files);
    RUN_TEST(test_glue_end_to_end);
    RUN_TEST(test_glue_fp16_loss_scaling);
    RUN_TEST(test_overwrite_deletes_checkpoints_whole);
    RUN_TEST(test_infer_bench_modes);
    tokenizer_free(tok), vocab_free(vocab);
    cJSON_Delete(expected);
    return test_summary();
}
