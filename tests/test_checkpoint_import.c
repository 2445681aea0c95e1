/* Checkpoints as users hold them (issue 31): HF's pytorch_model.bin, fp16/bf16 state dicts,
 * NVIDIA's .pt (their names, the padded vocabulary, the optimizer beside the weights), Google's
 * TensorFlow checkpoint; each loads to the very tensors HF's own loading gives (fixtures by
 * tools/make_checkpoint_fixtures.py: the safetensors HF wrote, and what HF's TensorFlow loader
 * made of the TensorFlow checkpoint) and gives HF's logits; `bert convert` writes them back as
 * an HF folder; the stored names map to HF's; hostile paths get clear errors. */
#include <cjson/cJSON.h>

#include "data/hdf5_shard.h"
#include "model/bert.h"
#include "model/bert_views.h"
#include "model/config.h"
#include "test.h"
#include "test_util.h"

#define DIR "tests/data/checkpoints"

static const BertHeads PRETRAINING = {BERT_HEADS_PRETRAINING, 0};

static BertModel *open_model(const char *init, const char *config) {
    BertModel *m = NULL;
    BertError err;
    int initialised = -1;
    if (bert_open_checkpoint(&m, init, config, PRETRAINING, 2, 10, 1, &initialised, &err) != 0) {
        CHECKF(0, "%s: %s", init, err.msg);
        return NULL;
    }
    CHECKF(initialised == 0, "%s: %d tensors initialised, none expected", init, initialised);
    return m;
}

/* Every parameter of a equals b's, bit for bit. */
static void check_same_weights(BertModel *a, BertModel *b, const char *what) {
    if (!a || !b) return;
    CHECKF(bert_num_parameters(a) == bert_num_parameters(b), "%s: parameter counts differ", what);
    if (bert_num_parameters(a) != bert_num_parameters(b)) return;
    const float *x = bert_params(a), *y = bert_params(b);
    size_t differ = 0;
    for (size_t i = 0; i < bert_num_parameters(a); i++) differ += memcmp(&x[i], &y[i], 4) != 0;
    CHECKF(differ == 0, "%s: %zu of %zu parameters differ from the reference", what, differ, bert_num_parameters(a));
}

static void test_names(void) {
    static const struct { const char *stored, *hf; bool transpose; } cases[] = {
        {"bert/encoder/layer_11/attention/self/query/kernel", "bert.encoder.layer.11.attention.self.query.weight", true},
        {"bert/encoder/layer_0/attention/output/LayerNorm/gamma", "bert.encoder.layer.0.attention.output.LayerNorm.weight", false},
        {"bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias", false},
        {"bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight", false},
        {"bert/embeddings/token_type_embeddings", "bert.embeddings.token_type_embeddings.weight", false},
        {"bert/pooler/dense/kernel", "bert.pooler.dense.weight", true},
        {"cls/predictions/output_bias", "cls.predictions.bias", false},
        {"cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias", false},
        {"cls/seq_relationship/output_weights", "cls.seq_relationship.weight", false},
        {"cls/squad/output_weights", "qa_outputs.weight", false},
        {"output_bias", "classifier.bias", false},
        {"bert.encoder.layer.3.intermediate.dense_act.weight", "bert.encoder.layer.3.intermediate.dense.weight", false},
        {"cls.predictions.transform.dense_act.bias", "cls.predictions.transform.dense.bias", false},
        {"module.bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.weight", false},
        {"encoder.layer.0.output.dense.bias", "encoder.layer.0.output.dense.bias", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[256];
        bool transpose = !cases[i].transpose;
        CHECKF(bert_checkpoint_tensor_name(cases[i].stored, out, sizeof out, &transpose) == 1 &&
                   !strcmp(out, cases[i].hf) && transpose == cases[i].transpose,
               "%s -> %s (transpose %d), expected %s", cases[i].stored, out, transpose, cases[i].hf);
    }
    static const char *const not_model[] = {"global_step", "bert/encoder/layer_0/attention/self/query/kernel/adam_m",
                                            "bert/pooler/dense/bias/adam_v", "bert.embeddings.position_ids"};
    for (size_t i = 0; i < sizeof not_model / sizeof *not_model; i++) {
        char out[256];
        bool transpose;
        CHECKF(bert_checkpoint_tensor_name(not_model[i], out, sizeof out, &transpose) == 0, "%s taken for a model tensor",
               not_model[i]);
    }
}

static void test_vocab_fits(void) {
    CHECK(bert_vocab_fits(30522, 30522) && bert_vocab_fits(30522, 30528) && bert_vocab_fits(37, 40));
    CHECK(!bert_vocab_fits(28996, 30522) && !bert_vocab_fits(30528, 30522) && !bert_vocab_fits(0, 8));
}

static void test_pytorch_bin(void) {
    BertModel *ref = open_model(DIR "/hf", NULL), *bin = open_model(DIR "/hf_bin", NULL);
    check_same_weights(bin, ref, "HF pytorch_model.bin");
    BertModel *file = open_model(DIR "/hf_bin/pytorch_model.bin", NULL);   /* a file: config.json beside it */
    check_same_weights(file, ref, "pytorch_model.bin named as a file");
    bert_model_free(ref), bert_model_free(bin), bert_model_free(file);
}

/* fp16 and bf16 state dicts: the same values as the same tensors in safetensors. */
static void test_half_precision(void) {
    static const char *const tags[] = {"fp16", "bf16"};
    for (int i = 0; i < 2; i++) {
        char bin[256], st[256];
        snprintf(bin, sizeof bin, DIR "/half/%s.bin", tags[i]);
        snprintf(st, sizeof st, DIR "/half/%s.safetensors", tags[i]);
        BertModel *a = open_model(bin, DIR "/hf/config.json"), *b = open_model(st, DIR "/hf/config.json");
        check_same_weights(a, b, tags[i]);
        bert_model_free(a), bert_model_free(b);
    }
}

static void test_nvidia(void) {
    BertCheckpointInfo info;
    BertError err;
    CHECKF(bert_checkpoint_inspect(DIR "/nvidia/model.pt", NULL, &info, &err) == 0, "%s", err.msg);
    CHECKF(info.config_vocab_size == 37 && info.cfg.vocab_size == 40, "vocabulary %d in the config, %d rows",
           info.config_vocab_size, info.cfg.vocab_size);
    CHECK(strstr(info.config, "bert_config.json") != NULL);
    BertModel *ref = open_model(DIR "/hf", NULL), *nv = open_model(DIR "/nvidia/model.pt", NULL);
    check_same_weights(nv, ref, "NVIDIA .pt");
    BertModel *dir = open_model(DIR "/nvidia", NULL);   /* a folder with one .pt */
    check_same_weights(dir, ref, "NVIDIA folder");
    bert_model_free(ref), bert_model_free(nv), bert_model_free(dir);
}

static void test_tensorflow(void) {
    BertModel *expected = open_model(DIR "/tf/expected.safetensors", DIR "/tf/bert_config.json");
    BertModel *prefix = open_model(DIR "/tf/bert_model.ckpt", NULL), *index = open_model(DIR "/tf/bert_model.ckpt.index", NULL);
    BertModel *dir = open_model(DIR "/tf", NULL);
    check_same_weights(prefix, expected, "TensorFlow prefix");
    check_same_weights(index, expected, "TensorFlow .index");
    check_same_weights(dir, expected, "TensorFlow folder");
    bert_model_free(expected), bert_model_free(prefix), bert_model_free(index), bert_model_free(dir);
}

static int json_ints(const cJSON *root, const char *key, int32_t *out, int n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key), *row, *x;
    int k = 0;
    cJSON_ArrayForEach(row, a) cJSON_ArrayForEach(x, row) if (k < n) out[k++] = (int32_t)x->valuedouble;
    return k;
}

/* The MLM and NSP logits HF computed with the reference model, from each format. fp32 sums
 * of at most 32 products in another order: within a few ulps of values below ~30. */
static void check_logits(const char *init, const cJSON *ref) {
    enum { B = 2, T = 10, P = 3, V = 40 };
    BertCheckpointInfo info;
    BertModel *m = NULL;
    BertError err;
    if (bert_checkpoint_inspect(init, NULL, &info, &err) != 0 || bert_model_create(&m, &info.cfg, B, T, P, &err) != 0 ||
        bert_load_weights(m, init, &err) != 0) {
        CHECKF(0, "%s: %s", init, err.msg);
        bert_model_free(m);
        return;
    }
    int32_t ids[B * T], types[B * T], mask[B * T], pos[B * P], labels[B * P];
    CHECK(json_ints(ref, "input_ids", ids, B * T) == B * T && json_ints(ref, "token_type_ids", types, B * T) == B * T &&
          json_ints(ref, "attention_mask", mask, B * T) == B * T && json_ints(ref, "positions", pos, B * P) == B * P);
    for (int i = 0; i < B * P; i++) labels[i] = 5;
    BertBatch b = {.batch = B, .seq_len = T, .max_predictions = P, .input_ids = ids, .token_type_ids = types,
                   .attention_mask = mask, .masked_positions = pos, .masked_labels = labels};
    bert_set_mode(m, BERT_MODE_FULL);
    float loss = bert_forward(m, &b, false, 0);
    CHECKF(isfinite(loss), "%s: %s", init, bert_last_error(m));
    const float *mlm = bert_mlm_logits(m);
    float nsp[B * 2];
    CHECK(bert_read_nsp_logits(m, nsp));
    double worst = 0;
    const cJSON *seq, *row, *x;
    int k = 0;
    cJSON_ArrayForEach(seq, cJSON_GetObjectItemCaseSensitive(ref, "mlm")) cJSON_ArrayForEach(row, seq)
        cJSON_ArrayForEach(x, row) worst = fmax(worst, fabs(mlm[k++] - x->valuedouble));
    CHECKF(k == B * P * V, "%d MLM logits in the fixture", k);
    k = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(ref, "nsp")) cJSON_ArrayForEach(x, row)
        worst = fmax(worst, fabs(nsp[k++] - x->valuedouble));
    CHECKF(worst < 2e-5, "%s: logits differ from HF's by %.3g", init, worst);
    bert_model_free(m);
}

static void test_logits(void) {
    char *text = read_text(DIR "/logits.json");
    cJSON *ref = cJSON_Parse(text);
    CHECK(ref != NULL);
    if (ref) {
        check_logits(DIR "/hf", ref);
        check_logits(DIR "/hf_bin", ref);
        check_logits(DIR "/nvidia/model.pt", ref);
        check_logits(DIR "/tf/bert_model.ckpt", ref);
    }
    cJSON_Delete(ref);
    free(text);
}

static void test_convert(void) {
    char out[256];
    snprintf(out, sizeof out, "/tmp/bert_test_convert_%d", (int)getpid());
    BertConvertResult r;
    BertError err;
    CHECKF(bert_convert_checkpoint(DIR "/nvidia/model.pt", NULL, NULL, out, &r, &err) == 0, "%s", err.msg);
    CHECKF(!strcmp(r.format, "PyTorch") && !strcmp(r.architecture, "BertForPreTraining") && r.source.cfg.vocab_size == 40,
           "%s %s %d", r.format, r.architecture, r.source.cfg.vocab_size);
    BertModel *ref = open_model(DIR "/hf", NULL), *conv = open_model(out, NULL);
    check_same_weights(conv, ref, "converted NVIDIA checkpoint");
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", out);
    char *config = read_text(path);
    CHECKF(strstr(config, "\"vocab_size\":\t40") && strstr(config, "BertForPreTraining"), "%s", config);
    free(config);
    snprintf(path, sizeof path, "%s/vocab.txt", out);
    CHECK(file_exists(path));   /* the checkpoint folder's vocabulary, copied */
    CHECK(bert_convert_checkpoint(DIR "/tf", NULL, NULL, out, &r, &err) != 0 && strstr(err.msg, "exists"));
    remove_tree(out);
    /* TensorFlow -> HF: the encoder-and-heads model HF's loader gives */
    CHECKF(bert_convert_checkpoint(DIR "/tf/bert_model.ckpt", NULL, NULL, out, &r, &err) == 0, "%s", err.msg);
    BertModel *tf = open_model(out, NULL);
    check_same_weights(tf, ref, "converted TensorFlow checkpoint");
    remove_tree(out);
    bert_model_free(ref), bert_model_free(conv), bert_model_free(tf);
}

/* A convert that fails leaves nothing a retry trips on (it left model.safetensors and
 * config.json without vocab.txt, and the retry said "model.safetensors exists"): the
 * vocabulary is checked before anything is written, model.safetensors is written last, and a
 * failure removes what it wrote and the folder it made, never a file that was there. */
static void test_convert_failure_leaves_nothing(void) {
    char out[256], path[512], vocab[300];
    snprintf(out, sizeof out, "/tmp/bert_test_convert_fail_%d", (int)getpid());
    snprintf(vocab, sizeof vocab, "%s.vocab", out);
    char text[2048] = "";
    for (int i = 0; i < 200; i++) snprintf(text + strlen(text), sizeof text - strlen(text), "t%d\n", i);
    write_text(vocab, text);   /* 200 tokens: another model's vocabulary (the model has 40 rows) */
    BertConvertResult r;
    BertError err;
    CHECKF(bert_convert_checkpoint(DIR "/hf", NULL, vocab, out, &r, &err) != 0 && strstr(err.msg, "not its vocabulary"),
           "%s", err.msg);
    CHECKF(!file_exists(out), "%s: left by a convert that failed on its vocabulary", out);
    CHECK(bert_convert_checkpoint(DIR "/hf", NULL, "/nonexistent/vocab.txt", out, &r, &err) != 0 &&
          strstr(err.msg, "/nonexistent/vocab.txt"));
    CHECKF(!file_exists(out), "%s: left by a convert that failed on a missing vocabulary", out);
    /* a folder that exists stays, with what it held; a file that cannot be written (config.json
     * a folder) fails the run before model.safetensors */
    mkdir(out, 0777);
    snprintf(path, sizeof path, "%s/README", out);
    write_text(path, "mine");
    CHECK(bert_convert_checkpoint(DIR "/hf", NULL, vocab, out, &r, &err) != 0);
    CHECK(file_exists(path));
    snprintf(path, sizeof path, "%s/config.json", out);
    CHECK(!file_exists(path));
    mkdir(path, 0777);
    CHECK(bert_convert_checkpoint(DIR "/hf", NULL, NULL, out, &r, &err) != 0 && strstr(err.msg, "config.json"));
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    CHECKF(!file_exists(path), "%s written before config.json", path);
    snprintf(path, sizeof path, "%s/vocab.txt", out);
    CHECK(!file_exists(path));
    snprintf(path, sizeof path, "%s/config.json", out);
    rmdir(path);
    /* the retry finishes the folder */
    CHECKF(bert_convert_checkpoint(DIR "/hf", NULL, NULL, out, &r, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/vocab.txt", out);
    CHECK(file_exists(path));
    BertModel *ref = open_model(DIR "/hf", NULL), *conv = open_model(out, NULL);
    check_same_weights(conv, ref, "converted after failures");
    bert_model_free(ref), bert_model_free(conv);
    unlink(vocab);
    remove_tree(out);
}

/* A token classifier (no pooler) converts as one, with the label names its config gives. */
static void test_convert_token_classifier(void) {
    char src[200], out[256], path[512];
    snprintf(src, sizeof src, "/tmp/bert_test_convert_tok_%d", (int)getpid());
    snprintf(out, sizeof out, "%s_out", src);
    mkdir(src, 0777);
    BertConfig cfg;
    BertModel *m = NULL;
    BertError err;
    CHECK(bert_config_load(DIR "/hf/config.json", &cfg, &err) == 0);
    CHECK(bert_model_create_with_heads(&m, &cfg, (BertHeads){BERT_HEADS_TOKEN_CLASSIFIER, 3}, 1, 8, 0, &err) == 0);
    if (!m) return;
    bert_init_weights(m, 3);
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    CHECK(bert_save_safetensors(m, path, &err) == 0);
    snprintf(path, sizeof path, "%s/config.json", src);
    CHECK(bert_config_save_ex(path, &cfg, "{\"id2label\": {\"0\": \"O\", \"1\": \"B-PER\", \"2\": \"I-PER\"}, "
                                          "\"label2id\": {\"O\": 0, \"B-PER\": 1, \"I-PER\": 2}}", &err) == 0);
    BertConvertResult r;
    CHECKF(bert_convert_checkpoint(src, NULL, NULL, out, &r, &err) == 0, "%s", err.msg);
    CHECKF(!strcmp(r.architecture, "BertForTokenClassification") && r.num_labels == 3, "%s %d", r.architecture,
           r.num_labels);
    snprintf(path, sizeof path, "%s/config.json", out);
    char *config = read_text(path);
    CHECKF(strstr(config, "BertForTokenClassification") && strstr(config, "B-PER") && !strstr(config, "LABEL_0"), "%s",
           config);
    free(config);
    BertModel *back = NULL;
    CHECK(bert_open_checkpoint(&back, out, NULL, (BertHeads){BERT_HEADS_TOKEN_CLASSIFIER, 3}, 1, 8, 0, NULL, &err) == 0);
    check_same_weights(back, m, "converted token classifier");
    bert_model_free(m), bert_model_free(back);
    remove_tree(src), remove_tree(out);
}

/* `bert pretrain --init_checkpoint` NVIDIA's .pt: the model takes its 40 padded rows (its
 * bert_config.json says 37), trains, and its checkpoint keeps the shape. */
static char bert_bin[1024];
static void test_pretrain_from_nvidia(void) {
    enum { T = 16, P = 2, ROWS = 8 };
    char dir[200], shards[256], out[256], path[512], cmd[3072];
    snprintf(dir, sizeof dir, "/tmp/bert_test_pretrain_nv_%d", (int)getpid());
    snprintf(shards, sizeof shards, "%s/shards", dir), snprintf(out, sizeof out, "%s/out", dir);
    mkdir(dir, 0777), mkdir(shards, 0777);
    snprintf(path, sizeof path, "%s/x_training_0.hdf5", shards);
    Hdf5ShardWriter *w;
    BertError err;
    CHECKF(hdf5_shard_create(&w, path, ROWS, T, P, &err) == 0, "%s", err.msg);
    for (int r = 0; r < ROWS && w; r++) {   /* [CLS] a.. [SEP] b.. [SEP], ids of the 37-token vocabulary */
        int32_t ids[T] = {2}, pos[P] = {2, 5}, mids[P];
        for (int t = 1; t < 12; t++) ids[t] = 5 + (t * 7 + r * 3) % 32;
        ids[6] = 3, ids[11] = 3;
        mids[0] = ids[2], mids[1] = ids[5], ids[2] = ids[5] = 4;
        Instance in = {.n_tokens = 12, .n_segment_a = 7, .is_random_next = r % 2, .n_masked = P, .input_ids = ids,
                       .masked_positions = pos, .masked_ids = mids};
        CHECKF(hdf5_shard_append(w, &in, &err) == 0, "%s", err.msg);
    }
    if (w) CHECKF(hdf5_shard_finish(w, &err) == 0, "%s", err.msg);
    snprintf(cmd, sizeof cmd,
             "%s pretrain --input_dir %s --output_dir %s --init_checkpoint " DIR "/nvidia/model.pt --config_file " DIR
             "/nvidia/bert_config.json --vocab_file " DIR "/nvidia/vocab.txt --max_seq_length %d "
             "--max_predictions_per_seq %d --train_batch_size 4 --max_steps 2 --num_steps_per_checkpoint 2 "
             "--disable_progress_bar --threads 1 > %s/log 2>&1", bert_bin, shards, out, T, P, dir);
    int rc = system(cmd);
    snprintf(path, sizeof path, "%s/log", dir);
    char *log = read_text(path);
    CHECKF(rc == 0 && strstr(log, "weights from"), "pretrain from NVIDIA's .pt failed:\n%s", log);
    free(log);
    snprintf(path, sizeof path, "%s/ckpt_2/config.json", out);
    char *config = read_text(path);
    CHECKF(strstr(config, "\"vocab_size\":\t40"), "the checkpoint's config: %s", config);
    free(config);
    /* neither --config_file nor --bert_model: the config beside the weights, as every
     * --init_checkpoint reads it (NVIDIA's bert_config.json; an HF folder's config.json); it
     * was "give one of --config_file and --bert_model" */
    static const char *const beside[] = {DIR "/nvidia/model.pt", DIR "/hf"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd,
                 "%s pretrain --input_dir %s --output_dir %s/beside%d --init_checkpoint %s --vocab_file " DIR
                 "/nvidia/vocab.txt --max_seq_length %d --max_predictions_per_seq %d --train_batch_size 4 "
                 "--max_steps 1 --disable_progress_bar --threads 1 > %s/log 2>&1", bert_bin, shards, dir, k,
                 beside[k], T, P, dir);
        rc = system(cmd);
        snprintf(path, sizeof path, "%s/log", dir);
        log = read_text(path);
        CHECKF(rc == 0 && strstr(log, "weights from"), "pretrain from %s with its config beside it:\n%s", beside[k], log);
        free(log);
        snprintf(path, sizeof path, "%s/beside%d/ckpt_1/config.json", dir, k);
        config = read_text(path);
        CHECKF(config && strstr(config, "\"vocab_size\":\t40"), "%s: the checkpoint's config: %s", beside[k], config);
        free(config);
    }
    remove_tree(dir);
}

/* `bert convert RUN`, RUN a bert pretrain --output_dir, converts its newest complete checkpoint,
 * as glue, squad and embed take that folder (it said "holds no weights"). */
static void test_convert_run_folder(void) {
    char run[200], out[256], cmd[2048], path[512];
    snprintf(run, sizeof run, "/tmp/bert_test_convert_run_%d", (int)getpid());
    snprintf(out, sizeof out, "%s_hf", run);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/ckpt_2 %s/ckpt_4 && cp " DIR "/hf/model.safetensors " DIR "/hf/config.json " DIR
             "/hf/vocab.txt %s/ckpt_2 && echo '{}' > %s/ckpt_2/state.json && cp " DIR "/hf/model.safetensors %s/ckpt_4",
             run, run, run, run, run);   /* ckpt_4: no state.json, being written */
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s convert %s -o %s > %s.log 2>&1", bert_bin, run, out, run);
    int rc = system(cmd);
    snprintf(path, sizeof path, "%s.log", run);
    char *log = read_text(path);
    CHECKF(rc == 0 && strstr(log, "ckpt_2"), "bert convert of a run folder:\n%s", log);
    free(log);
    BertModel *ref = open_model(DIR "/hf", NULL), *conv = rc == 0 ? open_model(out, NULL) : NULL;
    check_same_weights(conv, ref, "converted run folder");
    snprintf(path, sizeof path, "%s/vocab.txt", out);
    CHECK(file_exists(path));
    bert_model_free(ref), bert_model_free(conv);
    snprintf(path, sizeof path, "%s.log", run);
    unlink(path);
    remove_tree(run), remove_tree(out);
}

/* Checkpoint tensors the model does not use are named in one warning, as transformers does
 * ("Some weights of the model checkpoint ... were not used"): a config.json of one layer
 * beside two layers' weights loaded without a word. What transformers passes over quietly
 * stays quiet: the pre-training heads when the model has none, optimizer slots (NVIDIA's,
 * TensorFlow's), position_ids, HF's tied decoder bias. */
static void test_unused_tensors_warn(void) {
    char dir[200], cmd[3072], path[512];
    snprintf(dir, sizeof dir, "/tmp/bert_test_unused_%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s/one && cp " DIR "/hf/model.safetensors " DIR "/hf/vocab.txt %s/one && "
             "sed 's/\"num_hidden_layers\": 2/\"num_hidden_layers\": 1/' " DIR "/hf/config.json > %s/one/config.json",
             dir, dir, dir);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s convert %s/one -o %s/one_hf > %s/log 2>&1", bert_bin, dir, dir, dir);
    int rc = system(cmd);
    snprintf(path, sizeof path, "%s/log", dir);
    char *log = read_text(path);
    CHECKF(rc == 0 && strstr(log, "warning: ") && strstr(log, "16 of its tensors are not used by the model") &&
               strstr(log, "bert.encoder.layer.1.") && strstr(log, "has 1 encoder layers but the weights at least 2"),
           "a one-layer config beside two layers' weights:\n%s", log);
    free(log);
    /* in a job of several processes, one line (rank 0's), not one per process */
    snprintf(cmd, sizeof cmd, "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 %s embed --init_checkpoint %s/one "
             "< /dev/null > /dev/null 2> %s/log", bert_bin, dir, dir);
    rc = system(cmd);
    log = read_text(path);
    CHECKF(rc == 0 && !strstr(log, "warning"), "rank 1 of 2:\n%s", log);
    free(log);
    static const char *const quiet[] = {
        "convert " DIR "/nvidia/model.pt -o %s/nv > /dev/null",   /* NVIDIA's names and optimizer state */
        "convert " DIR "/tf -o %s/tf > /dev/null",   /* TensorFlow's optimizer slots, global_step */
        "convert " DIR "/hf_bin -o %s/bin > /dev/null",   /* HF's .bin: position_ids, the tied decoder bias */
        "embed --init_checkpoint " DIR "/hf < /dev/null > %s/embeddings",   /* the pre-training heads unused */
    };
    for (size_t k = 0; k < sizeof quiet / sizeof *quiet; k++) {
        char args[1024];
        snprintf(args, sizeof args, quiet[k], dir);
        snprintf(cmd, sizeof cmd, "%s %s 2> %s/log", bert_bin, args, dir);
        rc = system(cmd);
        log = read_text(path);
        CHECKF(rc == 0 && !strstr(log, "warning"), "bert %s:\n%s", args, log);
        free(log);
    }
    remove_tree(dir);
}

static void test_bad_paths(void) {
    BertModel *m = NULL;
    BertError err;
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "/tmp/bert_test_badckpt_%d", (int)getpid());
    mkdir(dir, 0777);
    CHECK(bert_open_checkpoint(&m, dir, NULL, PRETRAINING, 1, 8, 0, NULL, &err) != 0 && strstr(err.msg, "holds no weights"));
    snprintf(path, sizeof path, "%s/model.bin", dir);
    write_text(path, "this is not a checkpoint at all");
    CHECK(bert_open_checkpoint(&m, path, DIR "/hf/config.json", PRETRAINING, 1, 8, 0, NULL, &err) != 0 &&
          strstr(err.msg, "not a checkpoint bert.c reads"));
    static const char legacy[] = "\x80\x02\x8a\x0alegacy";   /* torch.save before 1.6: a bare pickle */
    write_bytes(path, legacy, sizeof legacy - 1);
    CHECK(bert_open_checkpoint(&m, path, DIR "/hf/config.json", PRETRAINING, 1, 8, 0, NULL, &err) != 0 &&
          strstr(err.msg, "legacy"));
    CHECK(bert_open_checkpoint(&m, path, NULL, PRETRAINING, 1, 8, 0, NULL, &err) != 0 && strstr(err.msg, "--config_file"));
    CHECK(bert_open_checkpoint(&m, DIR "/nope/bert_model.ckpt", NULL, PRETRAINING, 1, 8, 0, NULL, &err) != 0 &&
          strstr(err.msg, "no such file"));
    CHECK(m == NULL);
    remove_tree(dir);
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert_bin, sizeof bert_bin) != 0) return 1;
    RUN_TEST(test_names);
    RUN_TEST(test_vocab_fits);
    RUN_TEST(test_pytorch_bin);
    RUN_TEST(test_half_precision);
    RUN_TEST(test_nvidia);
    RUN_TEST(test_tensorflow);
    RUN_TEST(test_logits);
    RUN_TEST(test_convert);
    RUN_TEST(test_convert_token_classifier);
    RUN_TEST(test_convert_failure_leaves_nothing);
    RUN_TEST(test_pretrain_from_nvidia);
    RUN_TEST(test_convert_run_folder);
    RUN_TEST(test_unused_tensors_warn);
    RUN_TEST(test_bad_paths);
    return test_summary();
}
