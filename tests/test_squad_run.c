/* `bert squad` end to end (src/tasks/squad_run.h) on a tiny random model with the real
 * uncased vocabulary and the SQuAD fixtures (tests/data/squad/subset_v1.json, subset_v2.json):
 * training steps, predictions.json / nbest_predictions.json (/ null_odds.json for v2.0) for
 * every question, the official metrics after prediction equal to `bert squad_eval` on the
 * same files, the same weights from the same seed, an HF-named BertForQuestionAnswering
 * model, the article split, and bad options refused. The parts are checked against Google's
 * code in test_squad.c (features, post-processing) and test_squad_eval.c (metrics). */
#include "test.h"
#include "test_util.h"

#include <cjson/cJSON.h>

#include "model/config.h"
#include "model/bert.h"
#include "tasks/squad_run.h"

#define VOCAB "data/vocab/bert-base-uncased-vocab.txt"

static char root[256], init[512], bert_bin[512];

static void make_tiny_model(void) {
    BertConfig c;
    BertError err;
    bert_config_preset("bert-tiny", &c, &err);
    c.num_hidden_layers = 1, c.hidden_size = 16, c.num_attention_heads = 2, c.intermediate_size = 32;
    c.max_position_embeddings = 128;
    BertModel *m;
    if (bert_model_create(&m, &c, 1, 8, 1, &err) != 0) { CHECKF(0, "%s", err.msg); return; }
    bert_init_weights(m, 4);
    char path[600];
    mkdir(init, 0777);
    snprintf(path, sizeof path, "%s/model.safetensors", init);
    CHECKF(bert_save_safetensors(m, path, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/config.json", init);
    CHECKF(bert_config_save(path, &c, &err) == 0, "%s", err.msg);
    bert_model_free(m);
}

static SquadOptions tiny_options(const char *out, const char *file, bool v2) {
    SquadOptions o;
    squad_default_options(&o);
    o.ft.init_checkpoint = init, o.ft.vocab_file = VOCAB, o.ft.do_lower_case = true, o.ft.output_dir = out;
    o.train_file = o.predict_file = file, o.ft.do_train = o.ft.do_predict = o.ft.do_eval = true;
    o.version_2_with_negative = v2, o.ft.max_seq_length = 96, o.doc_stride = 32, o.max_query_length = 24;
    o.ft.train_batch_size = 4, o.ft.gradient_accumulation_steps = 2, o.ft.eval_batch_size = 5, o.ft.max_steps = 3;
    o.ft.learning_rate = 1e-3, o.ft.seed = 3, o.ft.threads = 1, o.ft.log_freq = 1000;
    return o;
}

static void test_train_predict_evaluate(void) {
    const char *files[2] = {"tests/data/squad/subset_v1.json", "tests/data/squad/subset_v2.json"};
    for (int v2 = 0; v2 < 2; v2++) {
        char out[2][600];
        SquadResult r[2];
        for (int run = 0; run < 2; run++) {
            snprintf(out[run], sizeof out[run], "%s/v%d_%d", root, v2 + 1, run);
            SquadOptions o = tiny_options(out[run], files[v2], v2);
            BertError err;
            CHECKF(squad_run(&o, &r[run], &err) == 0, "%s: %s", files[v2], err.msg);
        }
        CHECKF(r[0].train.steps == 3 && r[0].train.train_sequences == 12 && r[0].predict_features > r[0].predict_examples &&
               r[0].evaluated, "%s: %ld steps, %ld sequences, %ld features for %ld questions", files[v2], r[0].train.steps,
               r[0].train.train_sequences, r[0].predict_features, r[0].predict_examples);
        char a[800], b[800];
        snprintf(a, sizeof a, "%s/model.safetensors", out[0]), snprintf(b, sizeof b, "%s/model.safetensors", out[1]);
        CHECKF(files_equal(a, b), "%s: the same seed gave other weights", files[v2]);
        snprintf(a, sizeof a, "%s/predictions.json", out[0]), snprintf(b, sizeof b, "%s/predictions.json", out[1]);
        CHECK(files_equal(a, b));
        snprintf(a, sizeof a, "%s/null_odds.json", out[0]);
        CHECKF(file_exists(a) == (v2 == 1), "null_odds.json for v2.0 only");
        /* predicting alone from the saved model (a forward-only model: its layers share their
         * activations) writes the same predictions as the run that trained it */
        char alone[640];
        snprintf(alone, sizeof alone, "%s/v%d_predict_only", root, v2 + 1);
        SquadOptions po = tiny_options(alone, files[v2], v2);
        po.ft.init_checkpoint = out[0], po.ft.do_train = false;
        SquadResult pr;
        BertError perr;
        CHECKF(squad_run(&po, &pr, &perr) == 0, "predict only: %s", perr.msg);
        snprintf(a, sizeof a, "%s/predictions.json", out[0]), snprintf(b, sizeof b, "%s/predictions.json", alone);
        CHECKF(files_equal(a, b), "%s: predicting alone from the saved model gave other predictions", files[v2]);
        snprintf(a, sizeof a, "%s/nbest_predictions.json", out[0]), snprintf(b, sizeof b, "%s/nbest_predictions.json", alone);
        CHECKF(files_equal(a, b), "%s: predicting alone gave other n-best lists", files[v2]);
        snprintf(a, sizeof a, "%s/config.json", out[0]);
        char *config = read_text(a);
        CHECK(strstr(config, "BertForQuestionAnswering") != NULL);
        free(config);
        /* --do_eval printed what bert squad_eval prints for the same files */
        char cmd[2400], expect[2200];
        snprintf(cmd, sizeof cmd, "%s squad_eval %s %s/predictions.json %s > %s/eval.txt", bert_bin, files[v2], out[0],
                 v2 ? "--version 2.0" : "", out[0]);
        CHECKF(system(cmd) == 0, "%s", cmd);
        snprintf(a, sizeof a, "%s/eval.txt", out[0]);
        char *printed = read_text(a);
        snprintf(expect, sizeof expect, "%s", r[0].metrics_json);
        CHECKF(v2 ? strstr(printed, "\"exact\"") != NULL : strncmp(printed, expect, strlen(expect)) == 0,
               "squad_eval printed %s; --do_eval %s", printed, expect);
        free(printed);
        /* all_results.json: the official metrics under eval_, the predicted features, the training */
        snprintf(a, sizeof a, "%s/all_results.json", out[0]);
        char *results = read_text(a);
        cJSON *all = cJSON_Parse(results);
        CHECKF(all && cJSON_GetObjectItem(all, "eval_f1") && cJSON_GetObjectItem(all, "train_loss") &&
                   cJSON_GetObjectItem(all, "predict_samples")->valuedouble == r[0].predict_features,
               "%s", results);
        cJSON_Delete(all), free(results);
        printf("    %s: %ld features trained, %ld questions predicted: %s\n", files[v2], r[0].train.train_sequences,
               r[0].predict_examples, r[0].metrics_json);
    }
}

static void test_article_split_and_bad_options(void) {
    /* two articles: the fixture's one, twice */
    char out[600], two[600];
    snprintf(two, sizeof two, "%s/two_articles.json", root);
    char *text = read_text("tests/data/squad/subset_v1.json");
    cJSON *j = cJSON_Parse(text), *data = cJSON_GetObjectItem(j, "data");
    cJSON_AddItemToArray(data, cJSON_Duplicate(cJSON_GetArrayItem(data, 0), true));
    char *doubled = cJSON_PrintUnformatted(j);
    write_text(two, doubled);
    free(doubled), free(text), cJSON_Delete(j);
    snprintf(out, sizeof out, "%s/split", root);
    SquadOptions o = tiny_options(out, two, false);
    o.train_articles = 1, o.predict_skip_articles = 1, o.ft.max_steps = 1;
    SquadResult r;
    BertError err;
    CHECKF(squad_run(&o, &r, &err) == 0, "%s", err.msg);
    char path[800];
    snprintf(path, sizeof path, "%s/train_articles.json", out);
    CHECK(file_exists(path));
    snprintf(path, sizeof path, "%s/predict_articles.json", out);
    CHECK(file_exists(path));
    /* --predict_articles: a count after the skipped ones */
    o.ft.overwrite_output_dir = true, o.predict_skip_articles = 0, o.predict_articles = 1;
    CHECKF(squad_run(&o, &r, &err) == 0, "%s", err.msg);
    char *sliced = read_text(path);
    cJSON *pj = cJSON_Parse(sliced);
    CHECKF(cJSON_GetArraySize(cJSON_GetObjectItem(pj, "data")) == 1, "predict_articles.json: %.200s", sliced);
    cJSON_Delete(pj), free(sliced);
    o.ft.overwrite_output_dir = false, o.predict_skip_articles = 1, o.predict_articles = 0;
    remove_tree(out);
    CHECKF(squad_run(&o, &r, &err) == 0, "%s", err.msg);
    /* the folder now holds a finished run: training into it again needs --overwrite_output_dir */
    CHECKF(squad_run(&o, &r, &err) != 0 && strstr(err.msg, "--overwrite_output_dir"), "%s", err.msg);
    o.ft.overwrite_output_dir = true;
    SquadOptions bad = o;
    bad.predict_skip_articles = 1000;
    CHECKF(squad_run(&bad, &r, &err) != 0 && strstr(err.msg, "none left after skipping 1000"), "%s", err.msg);
    /* issue 35, D19: a v1.1 evaluation of a question without answers gives bert squad's hint
     * alone (squad_eval's --version 2.0 was given first; seen failing before the fix) */
    char noans[600];
    snprintf(noans, sizeof noans, "%s/no_answers.json", root);
    text = read_text("tests/data/squad/subset_v1.json");
    j = cJSON_Parse(text);
    cJSON *qa = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "paragraphs"), 0), "qas"), 0);
    cJSON_ReplaceItemInObject(qa, "answers", cJSON_CreateArray());
    doubled = cJSON_PrintUnformatted(j);
    write_text(noans, doubled);
    free(doubled), free(text), cJSON_Delete(j);
    SquadOptions ev = o;
    ev.ft.do_train = false, ev.ft.do_eval = ev.ft.do_predict = true, ev.predict_file = noans;
    ev.predict_skip_articles = ev.predict_articles = ev.train_articles = 0;
    ev.ft.init_checkpoint = out;
    snprintf(path, sizeof path, "%s/eval_no_answers", root);
    ev.ft.output_dir = path;
    CHECKF(squad_run(&ev, &r, &err) != 0 && strstr(err.msg, "has no answers (a v2.0 dataset? run bert squad with "
                                                            "--version_2_with_negative)") &&
           !strstr(err.msg, "--version 2.0"), "%s", err.msg);
    bad = o, bad.ft.do_predict = false;
    CHECKF(squad_run(&bad, &r, &err) != 0 && strstr(err.msg, "--do_eval"), "%s", err.msg);
    bad.ft.do_eval = false;   /* an article split for a step that does not run */
    CHECKF(squad_run(&bad, &r, &err) != 0 && strstr(err.msg, "--predict_skip_articles and --predict_articles with --do_predict"), "%s", err.msg);
    bad = o, bad.ft.train_batch_size = 3;
    CHECKF(squad_run(&bad, &r, &err) != 0 && strstr(err.msg, "multiple"), "%s", err.msg);
    bad = o, bad.ft.vocab_file = "tests/data/tokenizer/vocab_uncased_1500.txt";
    CHECKF(squad_run(&bad, &r, &err) != 0 && strstr(err.msg, "not the checkpoint's vocabulary"), "%s", err.msg);
    /* the whole dev-style file (several answers per question) is refused for training, as
     * Google's reader refuses it; the article split trains on the first answers */
    bad = o, bad.train_articles = 0, bad.predict_skip_articles = 0, bad.ft.do_predict = bad.ft.do_eval = false;
    bad.train_file = "tests/data/squad/v1.1/dataset.json";
    CHECKF(squad_run(&bad, &r, &err) != 0 && strstr(err.msg, "exactly 1"), "%s", err.msg);
    bad.train_articles = 2;   /* sliced: each question's first answer */
    CHECKF(squad_run(&bad, &r, &err) == 0, "%s", err.msg);
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert_bin, sizeof bert_bin) != 0) return 1;
    snprintf(root, sizeof root, "/tmp/bert_test_squad_run.%ld", (long)getpid());
    snprintf(init, sizeof init, "%s/init", root);
    remove_tree(root);
    mkdir(root, 0777);
    make_tiny_model();
    RUN_TEST(test_train_predict_evaluate);
    RUN_TEST(test_article_split_and_bad_options);
    if (!getenv("BERT_KEEP_TEST_FILES")) remove_tree(root);
    return test_summary();
}
