/* Pre-training: the shard loader (src/train/dataloader.h) and the loop (src/train/pretrain.h).
 *  - loader: NVIDIA's file order (random.Random(seed + epoch).shuffle of the sorted names,
 *    hard-coded from Python), every row once per epoch, labels rebuilt as NVIDIA's
 *    pretraining_dataset does, rank split, seek, an ordered evaluation pass, dynamic masking
 *    deterministic and 80/10/10, bad shards named in errors;
 *  - loop: k micro-batches of b equal one batch of k*b (to float rounding); exact resume
 *    (steps_this_run, SIGTERM, SIGKILL after a checkpoint; with accumulation and dynamic
 *    masking): identical losses and final weights, bit for bit; phase 2 from phase 1's
 *    checkpoint; bad input refused clearly;
 *  - the step's micro-batches dealt by work (train/step_batches.h): whole rows moved intact,
 *    every row once, micro-batches of even work; consecutive when asked.
 * Shards are written by the test with the project's HDF5 writer: synthetic sequences whose
 * first token after [CLS] encodes (file, row), so the test can tell which row it got. */
#include "test.h"
#include "test_util.h"

#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/hdf5_shard.h"
#include "model/config.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "train/dataloader.h"
#include "train/pretrain.h"
#include "train/step_batches.h"

enum { T = 24, P = 4, VOCAB = 120, CLS = 2, SEP = 3, MASK = 4, ROWS = 10, NFILES = 5 };

static char root[256], shards[512], uniform[512], bert_bin[1024];
static int uniform_masks;   /* every row masks 2 tokens (for the accumulation test) */

/* Row r of file f: [CLS] (10 + f*ROWS + r) words... [SEP] words [SEP], a length that varies,
 * masked slots at 2..(2+n) holding [MASK] with their original ids. */
static void make_instance(Instance *in, int f, int r, int32_t *ids, int32_t *pos, int32_t *mids) {
    int len = 10 + (f * 7 + r * 3) % (T - 10);
    memset(ids, 0, sizeof(int32_t) * T);
    ids[0] = CLS;
    for (int t = 1; t < len - 1; t++) ids[t] = 10 + (t * 13 + f * 5 + r * 11) % (VOCAB - 10);
    ids[1] = 10 + f * ROWS + r;
    int half = len / 2;
    ids[half] = SEP, ids[len - 1] = SEP;
    int n = uniform_masks ? 2 : 1 + (f + r) % P;
    for (int k = 0; k < n; k++) pos[k] = 2 + k, mids[k] = ids[2 + k], ids[2 + k] = MASK;
    *in = (Instance){.n_tokens = len, .n_segment_a = half + 1, .is_random_next = (f + r) % 2, .n_masked = n,
                     .input_ids = ids, .masked_positions = pos, .masked_ids = mids};
}

static void write_shard(const char *path, int f, int rows, int seq, int preds) {
    Hdf5ShardWriter *w;
    BertError err;
    CHECKF(hdf5_shard_create(&w, path, (size_t)rows, seq, preds, &err) == 0, "%s", err.msg);
    for (int r = 0; r < rows; r++) {
        int32_t ids[64] = {0}, pos[16] = {0}, mids[16] = {0};
        Instance in;
        make_instance(&in, f, r, ids, pos, mids);
        CHECKF(hdf5_shard_append(w, &in, &err) == 0, "%s", err.msg);
    }
    CHECKF(hdf5_shard_finish(w, &err) == 0, "%s", err.msg);
}

static void make_shards(void) {
    mkdir(shards, 0777), mkdir(uniform, 0777);
    char path[1024];
    uniform_masks = 1;
    snprintf(path, sizeof path, "%s/u_training_0.hdf5", uniform);
    write_shard(path, 0, ROWS, T, P);
    uniform_masks = 0;
    for (int f = 0; f < NFILES; f++) {
        snprintf(path, sizeof path, "%s/x_training_%d.hdf5", shards, f);
        write_shard(path, f, ROWS, T, P);
    }
    snprintf(path, sizeof path, "%s/x_test_0.hdf5", shards);
    write_shard(path, 9, 7, T, P);
    /* a writer's temporary and a hidden file: never shards */
    snprintf(path, sizeof path, "%s/x_training_9.hdf5.tmp.123", shards);
    FILE *f = fopen(path, "w");
    fputs("partial", f), fclose(f);
}

static LoaderOptions loader_options(int batch, bool training) {
    return (LoaderOptions){.dir = shards, .name_filter = training ? "training" : "test", .micro_batch = batch,
                           .max_seq_length = T, .max_predictions = P, .vocab_size = VOCAB, .seed = 7,
                           .training = training, .rank = 0, .world_size = 1};
}

static int row_id(const BertBatch *b, int i) { return b->input_ids[(size_t)i * T + 1] - 10; }

static void test_loader_epoch_order_and_labels(void) {
    DataLoader *l;
    BertError err;
    LoaderOptions o = loader_options(5, true);
    if (loader_open(&l, &o, &err)) { CHECKF(0, "%s", err.msg); return; }
    CHECK(loader_file_count(l) == NFILES);
    /* NVIDIA's order, from Python: random.Random(7 + epoch).shuffle(sorted files) */
    const int order[2][NFILES] = {{4, 0, 3, 1, 2}, {3, 0, 4, 2, 1}};
    int seen[2][NFILES * ROWS] = {{0}};
    for (int step = 0; step < 2 * NFILES * ROWS / 5; step++) {
        BertBatch b;
        CHECK(loader_next(l, &b, &err) == 1 && b.batch == 5);
        for (int i = 0; i < 5; i++) {
            int id = row_id(&b, i), epoch = step * 5 / (NFILES * ROWS), k = (step * 5 + i) % (NFILES * ROWS) / ROWS;
            CHECKF(id / ROWS == order[epoch][k], "epoch %d file %d: got a row of file %d", epoch, k, id / ROWS);
            seen[epoch][id]++;
            /* labels: NVIDIA's rebuild from positions and ids (slots up to the first 0) */
            int32_t ids[64], pos[16], mids[16];
            Instance in;
            make_instance(&in, id / ROWS, id % ROWS, ids, pos, mids);
            for (int k2 = 0; k2 < P; k2++) {
                int32_t want = k2 < in.n_masked ? mids[k2] : -1;
                CHECKF(b.masked_labels[i * P + k2] == want, "row %d slot %d: label %d, want %d", id, k2,
                       b.masked_labels[i * P + k2], want);
            }
            CHECK(b.next_sentence_labels[i] == in.is_random_next);
            CHECK(b.attention_mask[(size_t)i * T + in.n_tokens - 1] == 1 &&
                  (in.n_tokens == T || b.attention_mask[(size_t)i * T + in.n_tokens] == 0));
        }
    }
    for (int e = 0; e < 2; e++)
        for (int id = 0; id < NFILES * ROWS; id++) CHECKF(seen[e][id] == 1, "epoch %d row %d read %d times", e, id, seen[e][id]);
    loader_close(l);
}

static void test_loader_seek_and_ranks(void) {
    BertError err;
    DataLoader *a, *b;
    LoaderOptions o = loader_options(3, true);
    loader_open(&a, &o, &err), loader_open(&b, &o, &err);
    BertBatch x, y;
    for (int i = 0; i < 7; i++) loader_next(a, &x, &err);
    LoaderPosition p = loader_position(a);
    CHECKF(loader_seek(b, &p, &err) == 0, "%s", err.msg);
    for (int i = 0; i < 30; i++) {   /* across files and into the next epoch */
        loader_next(a, &x, &err), loader_next(b, &y, &err);
        CHECK(memcmp(x.input_ids, y.input_ids, sizeof(int32_t) * 3 * T) == 0);
        CHECK(memcmp(x.masked_labels, y.masked_labels, sizeof(int32_t) * 3 * P) == 0);
    }
    LoaderPosition bad = {0, 99, 0};
    CHECK(loader_seek(b, &bad, &err) != 0);
    loader_close(a), loader_close(b);
    /* 5 files over 2 ranks: 3 files each per epoch, (k W + r) mod N: rank 0 reads files
     * 0, 2, 4 of the epoch order, rank 1 reads 1, 3, 0: together every file */
    int count[NFILES * ROWS] = {0};
    for (int rank = 0; rank < 2; rank++) {
        LoaderOptions ro = loader_options(ROWS, true);
        ro.rank = rank, ro.world_size = 2;
        DataLoader *l;
        loader_open(&l, &ro, &err);
        for (int i = 0; i < 3; i++) {
            loader_next(l, &x, &err);
            for (int r = 0; r < ROWS; r++) count[row_id(&x, r)]++;
        }
        loader_close(l);
    }
    int missing = 0, twice = 0;
    for (int id = 0; id < NFILES * ROWS; id++) missing += count[id] == 0, twice += count[id] == 2;
    CHECKF(missing == 0 && twice == ROWS, "rank split: %d rows missing, %d read twice", missing, twice);
    LoaderOptions wrong = loader_options(3, true);
    wrong.rank = 2, wrong.world_size = 2;
    DataLoader *l;
    CHECK(loader_open(&l, &wrong, &err) != 0);
}

/* The deal: B rows per bin, every row once, ties in order, heaviest first to the lightest bin. */
static void test_deal_by_work(void) {
    int pos[64];
    /* equal work: round robin, row i to bin i mod bins, slot i / bins */
    double same[12];
    for (int i = 0; i < 12; i++) same[i] = 5;
    deal_by_work(same, 12, 3, pos);
    bool round_robin = true;
    for (int i = 0; i < 12; i++) round_robin &= pos[i] == (i % 4) * 3 + i / 4;
    CHECK(round_robin);
    /* worked by hand: 10 b0 | 9 b1 | 8 b1 (17) | 7 b0 (17) | 6 b0 (23, the tie to the lower bin)
     * | 5 b1 (22) | 4 b1 (26, full) | 3 b0 (26): both bins 26 */
    const double w[8] = {3, 10, 4, 9, 5, 8, 6, 7};
    const int want[8] = {3, 0, 7, 4, 6, 5, 2, 1};
    deal_by_work(w, 8, 4, pos);
    CHECK(memcmp(pos, want, sizeof want) == 0);
    /* skewed data read in order (full-length rows first, then short ones): the bins' work
     * evens out to within one row's work, every place used once */
    double skew[64], bin[16] = {0}, heaviest = 0;
    int used[64] = {0};
    for (int i = 0; i < 64; i++) skew[i] = row_work(i < 24 ? 128 : 20 + (i * 37) % 90, 768), heaviest = fmax(heaviest, skew[i]);
    deal_by_work(skew, 64, 4, pos);
    for (int i = 0; i < 64; i++) used[pos[i]]++, bin[pos[i] / 4] += skew[i];
    double lo = bin[0], hi = bin[0];
    for (int b = 1; b < 16; b++) lo = fmin(lo, bin[b]), hi = fmax(hi, bin[b]);
    bool once = true;
    for (int i = 0; i < 64; i++) once &= used[i] == 1;
    CHECK(once);
    CHECKF(hi - lo <= heaviest, "bins' work from %g to %g (a row is up to %g)", lo, hi, heaviest);
    /* a row's work: tokens (6H + tokens), the linear layers' and attention's FLOPs per 4H */
    CHECK(row_work(128, 768) == 128.0 * (6 * 768 + 128));
}

/* One process: the step's rows (a loader of k*B rows) dealt into k micro-batches of B, every
 * field of every row moved intact, each row once; --consecutive_micro_batches keeps them. */
static void test_step_batches_one_process(void) {
    enum { B = 2, K = 5 };
    BertError err;
    Comm *comm;
    CHECKF(comm_open(&comm, 60, &err) == 0, "%s", err.msg);
    for (int consecutive = 0; consecutive < 2; consecutive++) {
        DataLoader *raw, *src;
        LoaderOptions o = loader_options(B * K, true);
        CHECK(loader_open(&raw, &o, &err) == 0 && loader_open(&src, &o, &err) == 0);
        StepBatchOptions so = {.micro_batch = B, .accumulation = K, .seq_len = T, .max_predictions = P,
                               .hidden_size = 32, .consecutive = consecutive};
        StepBatches *s = step_batches_create(&so, 0, 1);
        for (int step = 0; step < 3; step++) {   /* across a file end (10 rows a file) */
            BertBatch all;
            CHECK(loader_next(raw, &all, &err) == 1);
            CHECKF(step_batches_load(s, src, comm, &err) == 0, "%s", err.msg);
            int seen[B * K] = {0}, intact = 0, in_order = 1;
            double work[K] = {0}, heaviest = 0;
            for (int m = 0; m < K; m++) {
                const BertBatch b = step_batches_micro(s, m);
                CHECK(b.batch == B && b.seq_len == T && b.max_predictions == P);
                for (int i = 0; i < B; i++) {
                    int from = -1;
                    for (int j = 0; j < B * K; j++)
                        if (row_id(&all, j) == row_id(&b, i)) from = j;
                    if (from < 0) continue;
                    seen[from]++, in_order &= from == m * B + i;
                    const size_t a = (size_t)from * T, c = (size_t)i * T, ap = (size_t)from * P, cp = (size_t)i * P;
                    intact += !memcmp(all.input_ids + a, b.input_ids + c, T * 4) &&
                              !memcmp(all.token_type_ids + a, b.token_type_ids + c, T * 4) &&
                              !memcmp(all.attention_mask + a, b.attention_mask + c, T * 4) &&
                              !memcmp(all.masked_positions + ap, b.masked_positions + cp, P * 4) &&
                              !memcmp(all.masked_labels + ap, b.masked_labels + cp, P * 4) &&
                              all.next_sentence_labels[from] == b.next_sentence_labels[i];
                    int len = 0;
                    for (int t = 0; t < T; t++) len += b.attention_mask[c + t] != 0;
                    work[m] += row_work(len, 32), heaviest = fmax(heaviest, row_work(len, 32));
                }
            }
            int once = 0;
            for (int j = 0; j < B * K; j++) once += seen[j] == 1;
            CHECKF(once == B * K && intact == B * K, "step %d: %d of %d rows once, %d intact", step, once, B * K, intact);
            double lo = work[0], hi = work[0];
            for (int m = 1; m < K; m++) lo = fmin(lo, work[m]), hi = fmax(hi, work[m]);
            if (consecutive) CHECK(in_order);
            else CHECKF(hi - lo <= heaviest, "step %d: micro-batches' work from %g to %g", step, lo, hi);
        }
        double dealt, before;
        step_batches_spread(s, &dealt, &before);
        CHECK(dealt == 1 && before == 1);   /* one process: nothing to even out between processes */
        step_batches_free(s), loader_close(raw), loader_close(src);
    }
    comm_close(comm);
}

static void test_loader_eval_pass(void) {
    BertError err;
    DataLoader *l;
    LoaderOptions o = loader_options(3, false);
    if (loader_open(&l, &o, &err)) { CHECKF(0, "%s", err.msg); return; }
    BertBatch b;
    int rows = 0, batches = 0, got;
    while ((got = loader_next(l, &b, &err)) == 1) {
        for (int i = 0; i < b.batch; i++) CHECK(row_id(&b, i) == 90 + rows + i);   /* file 9, in order */
        rows += b.batch, batches++;
    }
    CHECK(got == 0 && rows == 7 && batches == 3);
    CHECK(loader_rewind(l, &err) == 0 && loader_next(l, &b, &err) == 1 && row_id(&b, 0) == 90);
    loader_close(l);
}

static void test_dynamic_masking(void) {
    BertError err;
    LoaderOptions o = loader_options(ROWS, true);
    o.dynamic_masking = true;
    DataLoader *a, *b;
    loader_open(&a, &o, &err), loader_open(&b, &o, &err);
    long masked = 0, as_mask = 0, kept = 0;
    for (int step = 0; step < 2 * NFILES; step++) {
        BertBatch x, y;
        CHECK(loader_next(a, &x, &err) == 1 && loader_next(b, &y, &err) == 1);
        CHECK(memcmp(x.input_ids, y.input_ids, sizeof(int32_t) * ROWS * T) == 0);   /* deterministic */
        for (int i = 0; i < ROWS; i++) {
            /* position 1 holds the row's id, unless this draw masked it: then its label does */
            int id = row_id(&x, i);
            for (int k = 0; k < P; k++)
                if (x.masked_labels[i * P + k] >= 0 && x.masked_positions[i * P + k] == 1) id = x.masked_labels[i * P + k] - 10;
            int32_t ids[64], pos[16], mids[16];
            Instance in;
            make_instance(&in, id / ROWS, id % ROWS, ids, pos, mids);
            for (int k = 0; k < in.n_masked; k++) ids[pos[k]] = mids[k];   /* the original tokens */
            int n = 0;
            for (int k = 0; k < P; k++) {
                int32_t lab = x.masked_labels[i * P + k];
                if (lab < 0) continue;
                int t = x.masked_positions[i * P + k];
                CHECK(t > 0 && t < in.n_tokens && ids[t] != SEP && lab == ids[t]);
                as_mask += x.input_ids[(size_t)i * T + t] == MASK, kept += x.input_ids[(size_t)i * T + t] == ids[t];
                n++;
            }
            int want = (int)nearbyint(in.n_tokens * 0.15);
            want = want < 1 ? 1 : want > P ? P : want;
            CHECKF(n == want, "row %d: %d masked, want %d", id, n, want);
            masked += n;
            /* unmasked tokens are the originals */
            for (int t = 0; t < in.n_tokens; t++) {
                bool slot = false;
                for (int k = 0; k < n; k++) slot |= x.masked_positions[i * P + k] == t;
                if (!slot) CHECK(x.input_ids[(size_t)i * T + t] == ids[t]);
            }
        }
    }
    double mask_share = (double)as_mask / masked;
    CHECKF(mask_share > 0.65 && mask_share < 0.92 && kept > 0, "[MASK] share %.2f of %ld, %ld kept", mask_share, masked,
           kept);
    loader_close(a), loader_close(b);
}

static void test_loader_bad_shards(void) {
    BertError err;
    DataLoader *l;
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/bad", root);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/y_training_0.hdf5", dir);
    write_shard(path, 0, 3, 32, P);   /* seq 32, the run says 24 */
    LoaderOptions o = loader_options(2, true);
    o.dir = dir;
    CHECK(loader_open(&l, &o, &err) == 0);
    BertBatch b;
    CHECKF(loader_next(l, &b, &err) == -1 && strstr(err.msg, "y_training_0.hdf5") && strstr(err.msg, "--max_seq_length"),
           "%s", err.msg);
    loader_close(l);
    write_shard(path, 0, 3, T, P);
    o.vocab_size = 50;   /* ids up to 119 */
    loader_open(&l, &o, &err);
    CHECKF(loader_next(l, &b, &err) == -1 && strstr(err.msg, "vocabulary"), "%s", err.msg);
    loader_close(l);
    FILE *f = fopen(path, "w");
    fputs("not hdf5", f), fclose(f);
    o.vocab_size = VOCAB;
    loader_open(&l, &o, &err);
    CHECKF(loader_next(l, &b, &err) == -1 && strstr(err.msg, "y_training_0.hdf5"), "%s", err.msg);
    loader_close(l);
    unlink(path);
    CHECK(loader_open(&l, &o, &err) != 0 && strstr(err.msg, "no shard files"));
}

/* Issue 14, defect 3: a shard check that reads each file in a child process (libhdf5 can
 * crash on a corrupt file: the child takes it), names every bad file, and runs before
 * training with --check_shards. */
static void collect_bad(const char *msg, void *ctx) {
    char *all = ctx;
    strncat(all, msg, 4000 - strlen(all));
    strncat(all, "\n", 4000 - strlen(all));
}

static void test_check_shards(void) {
    BertError err;
    ShardCheck c = {0};
    CHECK(hdf5_check_shard_folder(shards, "training", NULL, T, P, VOCAB, &c, NULL, NULL, &err) == 0 && c.files >= 4 &&
          c.rows > 0);
    char dir[600], path[700], bad_all[4001] = "";
    snprintf(dir, sizeof dir, "%s/check", root);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/a_training_0.hdf5", dir);
    write_shard(path, 0, 3, T, P);                                   /* good */
    char *data;
    size_t n;
    CHECK(read_file(path, &data, &n, &err) == 0);
    snprintf(path, sizeof path, "%s/b_training_1.hdf5", dir);
    write_bytes(path, data, n / 2);                                  /* truncated */
    snprintf(path, sizeof path, "%s/c_training_2.hdf5", dir);
    write_bytes(path, "not hdf5", 8);                                /* not HDF5 */
    free(data);
    snprintf(path, sizeof path, "%s/d_training_3.hdf5", dir);
    CHECK(read_file("tests/fuzz/known/libhdf5_read_overflow.hdf5", &data, &n, &err) == 0);
    write_bytes(path, data, n);                                      /* corrupt: libhdf5 reads past a buffer */
    free(data);
    c = (ShardCheck){0};
    CHECK(hdf5_check_shard_folder(dir, NULL, ".hdf5", T, P, VOCAB, &c, collect_bad, bad_all, &err) == 3 && c.files == 4);
    CHECKF(strstr(bad_all, "b_training_1.hdf5") && strstr(bad_all, "c_training_2.hdf5") &&
           strstr(bad_all, "d_training_3.hdf5") && !strstr(bad_all, "a_training_0"), "%s", bad_all);
    /* the trainer refuses to start, naming the first bad file */
    char out[700];
    snprintf(out, sizeof out, "%s/check_run", root);
    PretrainOptions o;
    pretrain_default_options(&o);
    o.input_dir = dir, o.config_file = "tests/data/bench/micro_config.json", o.output_dir = out;
    o.max_seq_length = T, o.max_predictions_per_seq = P, o.train_batch_size = 2, o.max_steps = 2;
    o.check_shards = true, o.disable_progress_bar = true;
    PretrainSummary s;
    CHECKF(pretrain_run(&o, &s, &err) != 0 && strstr(err.msg, "3 of 4 training shards are bad") &&
           strstr(err.msg, "b_training_1.hdf5"), "%s", err.msg);
}

/* A shard written dataset by dataset, as another tool could (input_ids of any integer
 * type): the loaded shard s with its values as given. */
static void write_raw_shard(const char *path, const PretrainingShard *s, hid_t ids_type, const void *ids) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const struct { const char *name; hid_t type; int width; const void *data; } d[] = {
        {"input_ids", ids_type, T, ids},
        {"input_mask", H5T_NATIVE_INT8, T, s->input_mask},
        {"segment_ids", H5T_NATIVE_INT8, T, s->segment_ids},
        {"masked_lm_positions", H5T_NATIVE_INT32, P, s->masked_lm_positions},
        {"masked_lm_ids", H5T_NATIVE_INT32, P, s->masked_lm_ids},
        {"next_sentence_labels", H5T_NATIVE_INT8, 0, s->next_sentence_labels},
    };
    for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) {
        hsize_t dims[2] = {s->n, (hsize_t)d[k].width};
        hid_t space = H5Screate_simple(d[k].width ? 2 : 1, dims, NULL);
        hid_t ds = H5Dcreate2(f, d[k].name, d[k].type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(ds >= 0 && H5Dwrite(ds, d[k].type, H5S_ALL, H5S_ALL, H5P_DEFAULT, d[k].data) >= 0);
        H5Dclose(ds), H5Sclose(space);
    }
    H5Fclose(f);
}

/* Issue 35, D15/D21: check_shards passes only what training takes, with one validation:
 * a shard without rows, a row whose input_mask is all 0 (the model refused it at step 1,
 * naming neither file nor row), a position masked twice (accepted), a uint32 id of
 * 2^32 - 1 (reported as 2147483647). Seen failing before the fix: 0 bad of 5. */
static void test_check_shards_agrees_with_training(void) {
    char dir[600], path[700], good[700], bad_all[4001] = "";
    snprintf(dir, sizeof dir, "%s/check2", root);
    mkdir(dir, 0777);
    snprintf(good, sizeof good, "%s/a_training_0.hdf5", dir);
    write_shard(good, 0, 6, T, P);
    PretrainingShard s;
    BertError err;
    CHECKF(hdf5_shard_load(good, &s, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/b_training_1.hdf5", dir);
    write_shard(path, 1, 0, T, P);                                    /* no rows */
    memset(s.input_mask + 1 * T, 0, T);                               /* row 1: no real token */
    snprintf(path, sizeof path, "%s/c_training_2.hdf5", dir);
    write_raw_shard(path, &s, H5T_NATIVE_INT32, s.input_ids);
    s.input_mask[1 * T] = 1;
    int32_t pos_2 = s.masked_lm_positions[2 * P];
    s.masked_lm_positions[2 * P + 1] = pos_2;                         /* row 2: a position twice */
    snprintf(path, sizeof path, "%s/d_training_3.hdf5", dir);
    write_raw_shard(path, &s, H5T_NATIVE_INT32, s.input_ids);
    s.masked_lm_positions[2 * P + 1] = pos_2 + 1;
    uint32_t *ids = malloc(sizeof(uint32_t) * s.n * T);
    for (size_t i = 0; i < s.n * T; i++) ids[i] = (uint32_t)s.input_ids[i];
    ids[3 * T + 5] = UINT32_MAX;                                      /* row 3 */
    snprintf(path, sizeof path, "%s/e_training_4.hdf5", dir);
    write_raw_shard(path, &s, H5T_NATIVE_UINT32, ids);
    free(ids);
    pretraining_shard_free(&s);
    ShardCheck c = {0};
    CHECK(hdf5_check_shard_folder(dir, NULL, ".hdf5", T, P, VOCAB, &c, collect_bad, bad_all, &err) == 4 && c.files == 5);
    CHECKF(strstr(bad_all, "b_training_1.hdf5 holds no sequences") &&
           strstr(bad_all, "c_training_2.hdf5: row 1: input_mask is all 0") &&
           strstr(bad_all, "d_training_3.hdf5: row 2: position") && strstr(bad_all, "masked twice") &&
           strstr(bad_all, "e_training_4.hdf5: row 3: input_ids holds 4294967295"), "%s", bad_all);
    /* the trainer's loader refuses the same row, naming the file */
    snprintf(path, sizeof path, "%s/b_training_1.hdf5", dir), unlink(path);
    snprintf(path, sizeof path, "%s/d_training_3.hdf5", dir), unlink(path);
    snprintf(path, sizeof path, "%s/e_training_4.hdf5", dir), unlink(path);
    char out[700];
    snprintf(out, sizeof out, "%s/check2_run", root);
    PretrainOptions o;
    pretrain_default_options(&o);
    o.input_dir = dir, o.config_file = "tests/data/bench/micro_config.json", o.output_dir = out;
    o.max_seq_length = T, o.max_predictions_per_seq = P, o.train_batch_size = 2, o.max_steps = 8;
    o.disable_progress_bar = true, o.skip_checkpoint = true;
    PretrainSummary sum;
    CHECKF(pretrain_run(&o, &sum, &err) != 0 && strstr(err.msg, "c_training_2.hdf5: row 1: input_mask is all 0"),
           "%s", err.msg);
}

/* ---- the loop ---- */

static PretrainOptions small_run(const char *out, long max_steps) {
    PretrainOptions o;
    pretrain_default_options(&o);
    o.input_dir = shards, o.bert_model = NULL, o.config_file = "tests/data/bench/micro_config.json";
    o.output_dir = out, o.max_seq_length = T, o.max_predictions_per_seq = P;
    o.train_batch_size = 4, o.gradient_accumulation_steps = 2, o.max_steps = max_steps;
    o.learning_rate = 1e-2, o.warmup_proportion = 0.2, o.num_steps_per_checkpoint = 100;
    o.log_freq = 1000, o.disable_progress_bar = true, o.seed = 5;
    return o;
}


/* The "step_loss" values of a DLLogger log, concatenated (the losses, bit for bit as
 * printed with 17 significant digits). */
static void step_losses(const char *log, char *out, size_t n) {
    char *text = read_text(log), *p = text;
    out[0] = '\0';
    while ((p = strstr(p, "\"step_loss\":"))) {
        char *end = strchr(p, ',');
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%.*s;", (int)(end - p), p);
        p = end;
    }
    free(text);
}


static void run_ok(const PretrainOptions *o, PretrainSummary *s) {
    BertError err;
    CHECKF(pretrain_run(o, s, &err) == 0, "%s", err.msg);
}

/* Held-out evaluation with gradient accumulation: the evaluation batches are the model's
 * micro-batch, not the step's k micro-batches (which the model, sized for one, refuses),
 * and the result does not depend on how the step is split: 1 x 4 and 2 x 2 from the same
 * weights evaluate alike (equal up to float rounding: one step's products have other
 * shapes). */
static void test_evaluation_with_accumulation(void) {
    double accuracy[2];
    for (int k = 1; k <= 2; k++) {
        char out[600];
        snprintf(out, sizeof out, "%s/eval_accum%d", root, k);
        PretrainOptions o = small_run(out, 2);
        o.gradient_accumulation_steps = k, o.eval_steps = 2, o.eval_batches = 0;
        PretrainSummary s;
        run_ok(&o, &s);
        accuracy[k - 1] = s.final_mlm_accuracy;
        CHECKF(isfinite(s.final_mlm_accuracy), "accumulation %d: held-out MLM accuracy %g", k, s.final_mlm_accuracy);
    }
    CHECKF(fabs(accuracy[0] - accuracy[1]) <= 0.05, "held-out accuracy %.4f (1 x 4) vs %.4f (2 x 2)", accuracy[0],
           accuracy[1]);
}

/* Stopped after 3 steps and resumed = never stopped, bit for bit: fp32 with static and
 * dynamic masking, and mixed precision (bf16 emulated everywhere, native where the CPU has
 * bf16 instructions: the bf16 weights are remade from the restored fp32 master copy). */
static void test_resume_is_exact(void) {
    /* fp16: NVIDIA's first scale, and one so large (2^60) that the first steps overflow and
     * are skipped, the scale halving each time, inside the stopped run's first 3 steps */
    const struct { int precision, dyn; double init_scale; } runs[] = {
        {BERT_FP32, 0, 0}, {BERT_FP32, 1, 0}, {BERT_BF16_EMULATED, 0, 0}, {BERT_BF16, 0, 0},
        {BERT_FP16, 0, 1048576.0}, {BERT_FP16, 0, 0x1p60}};
    double fp32_final = NAN;
    for (size_t run = 0; run < sizeof runs / sizeof runs[0]; run++) {
        const int dyn = runs[run].dyn, precision = runs[run].precision;
        if (precision == BERT_BF16 && !k_bf16_native_available()) continue;
        char a[600], b[600], la[700], lb[700], ma[800], mb[800];
        snprintf(a, sizeof a, "%s/straight%zu", root, run), snprintf(b, sizeof b, "%s/resumed%zu", root, run);
        snprintf(la, sizeof la, "%s.json", a), snprintf(lb, sizeof lb, "%s.json", b);
        PretrainSummary s;
        PretrainOptions o = small_run(a, 8);
        o.dynamic_masking = dyn, o.json_summary = la, o.log_freq = 1, o.precision = precision;
        if (runs[run].init_scale > 0) o.init_loss_scale = runs[run].init_scale;
        run_ok(&o, &s);
        CHECK(s.last_step == 8 && s.sequences == 32 + 4 * s.skipped_steps && isfinite(s.final_loss));
        if (run == 0) fp32_final = s.final_loss;
        if (precision == BERT_FP16 && runs[run].init_scale > 0x1p40)   /* skipped, backed off, and went on */
            CHECKF(s.skipped_steps >= 10 && s.loss_scale < 0x1p50, "fp16 from 2^60: %ld steps skipped, scale %g",
                   s.skipped_steps, s.loss_scale);
        /* the products did run in bf16 (another loss), and trained alike: bf16 moves one step's
         * loss by ~1e-3 relative here (test_bf16); 5% after 8 steps would be a wrong product */
        if (precision != BERT_FP32)
            CHECKF(s.final_loss != fp32_final && fabs(s.final_loss - fp32_final) < 0.05 * fp32_final,
                   "%s final loss %.6f vs fp32 %.6f", bert_precision_name(precision), s.final_loss, fp32_final);
        o.output_dir = b, o.json_summary = lb, o.steps_this_run = 3;
        run_ok(&o, &s);
        CHECK(s.last_step == 3);
        o.resume_from_checkpoint = true, o.steps_this_run = 0;
        run_ok(&o, &s);
        CHECK(s.first_step == 3 && s.last_step == 8);
        snprintf(ma, sizeof ma, "%s/ckpt_8/model.safetensors", a), snprintf(mb, sizeof mb, "%s/ckpt_8/model.safetensors", b);
        CHECKF(files_equal(ma, mb), "%s, dynamic masking %d: final weights differ after resume", bert_precision_name(precision), dyn);
        snprintf(ma, sizeof ma, "%s/ckpt_8/optimizer.safetensors", a), snprintf(mb, sizeof mb, "%s/ckpt_8/optimizer.safetensors", b);
        CHECK(files_equal(ma, mb));
        static char la_losses[8192], lb_losses[8192];
        step_losses(la, la_losses, sizeof la_losses), step_losses(lb, lb_losses, sizeof lb_losses);
        CHECKF(strlen(la_losses) > 50 && strcmp(la_losses, lb_losses) == 0, "losses differ:\n%s\n%s", la_losses,
               lb_losses);
        /* issue 35, D13: rerunning the finished phase succeeds, says so, and touches nothing */
        BertError err;
        struct stat before, after;
        CHECK(stat(lb, &before) == 0);
        const int again = pretrain_run(&o, &s, &err);
        CHECKF(again == 0 && s.already_finished && s.first_step == 8 && s.last_step == 8 && s.phase == 1,
               "rerun of a finished phase: rc %d (%s)", again, again ? err.msg : "");
        CHECK(stat(lb, &after) == 0 && after.st_size == before.st_size);
        long *steps;
        int count;
        CHECK(checkpoint_list(b, &steps, &count, &err) == 0 && count >= 1 && steps[count - 1] == 8);
        free(steps);
        if (run == 0) {   /* the command's words and status */
            char cmd[8192], text[4096];
            snprintf(cmd, sizeof cmd, "%s pretrain --input_dir %s --config_file tests/data/bench/micro_config.json "
                     "--output_dir %s --max_seq_length %d --max_predictions_per_seq %d --train_batch_size 4 "
                     "--gradient_accumulation_steps 2 --max_steps 8 --seed %ld --disable_progress_bar "
                     "--resume_from_checkpoint 2>&1; echo rc=$?", bert_bin, shards, b, (int)T, (int)P, o.seed);
            FILE *p = popen(cmd, "r");
            size_t got = p ? fread(text, 1, sizeof text - 1, p) : 0;
            text[got] = '\0';
            if (p) pclose(p);
            CHECKF(strstr(text, "phase 1 already finished at step 8: nothing to do") && strstr(text, "rc=0"),
                   "bert pretrain on a finished phase said:\n%s", text);
            /* --init_checkpoint a run folder: its newest complete checkpoint, with the
             * configuration beside it, as every command takes a run folder */
            char from[640];
            snprintf(from, sizeof from, "%s_from_run", b);
            snprintf(cmd, sizeof cmd, "%s pretrain --input_dir %s --init_checkpoint %s --output_dir %s "
                     "--max_seq_length %d --max_predictions_per_seq %d --train_batch_size 4 --max_steps 1 "
                     "--disable_progress_bar 2>&1; echo rc=$?", bert_bin, shards, b, from, (int)T, (int)P);
            p = popen(cmd, "r");
            got = p ? fread(text, 1, sizeof text - 1, p) : 0;
            text[got] = '\0';
            if (p) pclose(p);
            char want[1400];
            snprintf(want, sizeof want, "--init_checkpoint %s: the newest checkpoint, %s/ckpt_8", b, b);
            CHECKF(strstr(text, want) && strstr(text, "rc=0"), "bert pretrain --init_checkpoint RUN said:\n%s", text);
            remove_tree(from);
        }
    }
}

/* Runs ./bert pretrain in a child process; signals it when `ready` (a file) exists. */
static int run_child_and_signal(const char *out, const char *log, const char *ready, int sig) {
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {bert_bin, "pretrain", "--input_dir", shards, "--config_file", "tests/data/bench/micro_config.json",
                        "--output_dir", (char *)out, "--max_seq_length", "24", "--max_predictions_per_seq", "4",
                        "--train_batch_size", "4", "--gradient_accumulation_steps", "2", "--max_steps", "400",
                        "--learning_rate", "1e-2", "--warmup_proportion", "0.2", "--num_steps_per_checkpoint", "2",
                        "--log_freq", "1", "--disable_progress_bar", "--seed", "5", "--json-summary", (char *)log,
                        "--threads", "1", "--resume_from_checkpoint", NULL};
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1), dup2(devnull, 2);
        execv(bert_bin, argv);
        _exit(127);
    }
    struct stat st;
    for (int i = 0; i < 6000 && stat(ready, &st) != 0; i++) usleep(5000);
    kill(pid, sig);
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void test_signals(void) {
    char out[600], log[700], ready[800];
    /* SIGTERM: a checkpoint at the step it arrived, exit 0 */
    snprintf(out, sizeof out, "%s/term", root), snprintf(log, sizeof log, "%s.json", out);
    snprintf(ready, sizeof ready, "%s/ckpt_4/state.json", out);
    int status = run_child_and_signal(out, log, ready, SIGTERM);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "SIGTERM: status %d", status);
    long step = -1;
    char path[1024];
    BertError err;
    CHECK(checkpoint_find_latest(out, "state.json", path, sizeof path, &step, &err) == 1 && step >= 4 && step < 400);
    /* SIGKILL after a checkpoint: the newest complete checkpoint is whole */
    snprintf(out, sizeof out, "%s/kill", root), snprintf(log, sizeof log, "%s.json", out);
    snprintf(ready, sizeof ready, "%s/ckpt_6/state.json", out);
    status = run_child_and_signal(out, log, ready, SIGKILL);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(checkpoint_find_latest(out, "state.json", path, sizeof path, &step, &err) == 1 && step >= 6);
    /* resuming both reaches the same weights as an uninterrupted run to the same step */
    long term_step = -1;
    snprintf(out, sizeof out, "%s/term", root);
    checkpoint_find_latest(out, "state.json", path, sizeof path, &term_step, &err);
    long target = (step > term_step ? step : term_step) + 2;
    for (int which = 0; which < 3; which++) {
        const char *name = which == 0 ? "term" : which == 1 ? "kill" : "straight_sig";
        snprintf(out, sizeof out, "%s/%s", root, name);
        PretrainOptions o = small_run(out, 400);
        o.resume_from_checkpoint = true, o.threads = 1;
        long from = -1;
        checkpoint_find_latest(out, "state.json", path, sizeof path, &from, &err);
        o.steps_this_run = target - (from < 0 ? 0 : from);
        PretrainSummary s;
        run_ok(&o, &s);
        CHECK(s.last_step == target);
    }
    char a[1024], b[1024], c[1024];
    snprintf(a, sizeof a, "%s/term/ckpt_%ld/model.safetensors", root, target);
    snprintf(b, sizeof b, "%s/kill/ckpt_%ld/model.safetensors", root, target);
    snprintf(c, sizeof c, "%s/straight_sig/ckpt_%ld/model.safetensors", root, target);
    CHECKF(files_equal(a, c) && files_equal(b, c), "weights at step %ld differ after SIGTERM / SIGKILL", target);
}

/* Issue 35, D10: a SIGTERM that arrived while a oneDNN JIT GEMM kernel ran (they point the
 * stack pointer into a heap workspace) had its handler's frame written over the heap: about
 * half the runs at batch >= 16 aborted ("corrupted size vs. prev_size", SIGSEGV) instead of
 * checkpointing. Now no handler runs: the stop signals are blocked in every thread and taken
 * by one thread that waits for them. Many runs of a model of bert-tiny's width at batch 32,
 * each signalled at another moment of its steps (after its first step, 0-190 ms later) with
 * SIGTERM, SIGINT or SIGHUP (D14: SIGHUP ended the run without a checkpoint): every run exits
 * 0 with a complete checkpoint. 30 runs (~6 s), fewer when slow (sanitizers). */
/* ./bert pretrain (a model of bert-tiny's width, batch 32, stdout to `log`) signalled `delay_us`
 * after its first step: the JIT kernels exist and run. Returns the wait status. */
static int signal_busy_run(const char *cfg, const char *out, const char *log, const char *extra, int sig,
                           useconds_t delay_us) {
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {bert_bin, "pretrain", "--input_dir", shards, "--config_file", (char *)cfg, "--output_dir",
                        (char *)out, "--max_seq_length", "24", "--max_predictions_per_seq", "4", "--train_batch_size",
                        "32", "--max_steps", "1000000", "--num_steps_per_checkpoint", "1000000", "--log_freq", "1",
                        "--disable_progress_bar", "--threads", "1", (char *)extra, NULL};
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644), devnull = open("/dev/null", O_WRONLY);
        dup2(fd, 1), dup2(devnull, 2);
        signal(SIGINT, SIG_DFL), signal(SIGHUP, SIG_DFL);   /* not ignored (a shell's background job) */
        execv(bert_bin, argv);
        _exit(127);
    }
    for (int k = 0; k < 6000; k++) {
        char *text = read_text(log);
        const bool stepping = strstr(text, "step 1/") != NULL;
        free(text);
        if (stepping) break;
        usleep(2000);
    }
    usleep(delay_us);
    kill(pid, sig);
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void test_sigterm_under_load(void) {
    char cfg[600];
    snprintf(cfg, sizeof cfg, "%s/tiny_width.json", root);
    write_text(cfg, "{\"vocab_size\": 1200, \"hidden_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                    "\"intermediate_size\": 512, \"max_position_embeddings\": 64}");
    const double t0 = now_seconds();
    int runs = 0, good = 0;
    for (int i = 0; i < 30 && (i < 6 || now_seconds() - t0 < 15); i++, runs++) {
        const int sig = i % 3 == 0 ? SIGTERM : i % 3 == 1 ? SIGINT : SIGHUP;
        char out[600], log[700], state[1100];
        snprintf(out, sizeof out, "%s/load%d", root, i), snprintf(log, sizeof log, "%s.out", out);
        const int status = signal_busy_run(cfg, out, log, NULL, sig, (useconds_t)((i * 7) % 20) * 10000);
        long step = -1;
        char path[1024];
        BertError err;
        const bool saved = checkpoint_find_latest(out, "state.json", path, sizeof path, &step, &err) == 1;
        snprintf(state, sizeof state, "%s/state.json", path);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0 && saved && file_exists(state),
               "run %d: %s: %s %d, checkpoint %s", i, strsignal(sig), WIFEXITED(status) ? "exit status" : "killed by signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), saved ? path : "none");
        good += WIFEXITED(status) && WEXITSTATUS(status) == 0 && saved;
        remove_tree(out), unlink(log);
    }
    printf("    %d of %d runs stopped by a signal checkpointed and exited 0 (%.1f s)\n", good, runs, now_seconds() - t0);
    /* D14: with --skip_checkpoint the last line named a checkpoint to resume from, which does not exist */
    char out[600], log[700];
    snprintf(out, sizeof out, "%s/load_skip", root), snprintf(log, sizeof log, "%s.out", out);
    const int status = signal_busy_run(cfg, out, log, "--skip_checkpoint", SIGTERM, 0);
    char *text = read_text(log), path[1024];
    long step;
    BertError err;
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(text, "nothing was saved (--skip_checkpoint)") &&
           !strstr(text, "resume_from_checkpoint") &&
           checkpoint_find_latest(out, "state.json", path, sizeof path, &step, &err) == 0,
           "--skip_checkpoint, SIGTERM: status %d:\n%s", status, text);
    free(text);
}

/* k micro-batches of b = one batch of k*b: one step from the same start with 1 x 4 and 2 x 2
 * sequences. NVIDIA averages each micro-batch's loss (a mean over its masked tokens), so
 * this holds exactly only when every micro-batch masks as many tokens: these shards mask 2
 * per row. Dropout is off (its masks are drawn per micro-batch). Equal up to float32
 * rounding of the reductions. */
static void test_accumulation_equals_big_batch(void) {
    char a[600], b[600], ma[700], mb[700];
    snprintf(a, sizeof a, "%s/acc1", root), snprintf(b, sizeof b, "%s/acc2", root);
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/no_dropout.json", root);
    FILE *f = fopen(cfg, "w");
    fputs("{\"vocab_size\": 1200, \"hidden_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
          "\"intermediate_size\": 64, \"max_position_embeddings\": 64, \"hidden_dropout_prob\": 0, "
          "\"attention_probs_dropout_prob\": 0}", f);
    fclose(f);
    PretrainOptions o = small_run(a, 4);
    o.input_dir = uniform, o.config_file = cfg;
    o.steps_this_run = 1, o.gradient_accumulation_steps = 1, o.optimizer = "adamw";
    PretrainSummary s1, s2;
    char log1[700], log2[700];
    snprintf(log1, sizeof log1, "%s.json", a), snprintf(log2, sizeof log2, "%s.json", b);
    o.json_summary = log1, o.log_freq = 1;
    run_ok(&o, &s1);
    o.output_dir = b, o.gradient_accumulation_steps = 2, o.json_summary = log2;
    run_ok(&o, &s2);
    /* the gradient itself: its norm (AdamW's update would not show a wrong scale) */
    double g[2] = {0, 0};
    const char *logs[2] = {log1, log2};
    for (int i = 0; i < 2; i++) {
        char *text = read_text(logs[i]), *p = strstr(text, "\"grad_norm\":");
        if (p) g[i] = strtod(p + 12, NULL);
        free(text);
    }
    CHECKF(g[0] > 0 && fabs(g[0] - g[1]) <= 1e-5 * g[0], "gradient norm %.9g (1 x 4) vs %.9g (2 x 2)", g[0], g[1]);
    snprintf(ma, sizeof ma, "%s/ckpt_1/model.safetensors", a), snprintf(mb, sizeof mb, "%s/ckpt_1/model.safetensors", b);
    SafeTensors x, y;
    BertError err;
    if (safetensors_open(&x, ma, &err) || safetensors_open(&y, mb, &err)) { CHECKF(0, "%s", err.msg); return; }
    /* over all weights at once: a key bias has a gradient of exactly 0 in exact arithmetic
     * (softmax ignores a shift of every score), so its own update is rounding noise */
    double diff = 0, norm = 0;
    for (int i = 0; i < x.n; i++) {
        const StTensor *t = &x.tensors[i], *u = safetensors_find(&y, t->name);
        const float *wa = (const float *)(x.data + t->begin), *wb = (const float *)(y.data + u->begin);
        for (size_t k = 0; k < (t->end - t->begin) / 4; k++)
            diff += ((double)wa[k] - wb[k]) * ((double)wa[k] - wb[k]), norm += (double)wa[k] * wa[k];
    }
    double worst = sqrt(diff / norm);
    /* AdamW's first step moves every weight by ~lr sign(g): equal gradients up to rounding
     * give equal weights up to rounding; a wrong accumulation (sum instead of mean, one
     * micro-batch lost) moves them by ~lr = 1e-2 relative to weights of ~2e-2 */
    printf("    1 x 4 vs 2 x 2 sequences: weights after one AdamW step differ by %.2g (norm-wise)\n", worst);
    CHECKF(fabs(s1.final_loss - s2.final_loss) <= 1e-5 * fabs(s1.final_loss), "loss %.9g vs %.9g", s1.final_loss,
           s2.final_loss);
    CHECKF(worst < 1e-3, "weights differ by %.3g", worst);
    safetensors_close(&x), safetensors_close(&y);
}

/* pretrain_run with its stdout (the lines for people) in `out_file`. */
static int run_capturing(const PretrainOptions *o, PretrainSummary *s, BertError *err, const char *out_file) {
    fflush(stdout);
    const int saved = dup(1), fd = open(out_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1), close(fd);
    const int rc = pretrain_run(o, s, err);
    fflush(stdout);
    dup2(saved, 1), close(saved);
    return rc;
}

static bool has_checkpoint(const char *dir, long step) {
    char path[1024];
    snprintf(path, sizeof path, "%s/ckpt_%ld/state.json", dir, step);
    return file_exists(path);
}

/* Issue 35, D1: pruning kept the newest --keep_checkpoints of every ckpt_<n> in the folder,
 * so a new run in a folder holding a longer run's higher steps deleted each checkpoint it
 * wrote as soon as it wrote it, exited 0 and named a deleted folder as its last checkpoint.
 * D2: phase 2's third checkpoint deleted phase 1's final one. Now a run prunes only the
 * checkpoints it wrote (a resumed run: also those of the run it continues), and warns about
 * the others. */
static void test_prunes_only_its_own_checkpoints(void) {
    char dir[600], out[700];
    snprintf(dir, sizeof dir, "%s/prune_d1", root), snprintf(out, sizeof out, "%s.out", dir);
    PretrainOptions o = small_run(dir, 15);
    o.num_steps_per_checkpoint = 5;
    PretrainSummary s;
    BertError err;
    run_ok(&o, &s);   /* ckpt_5, 10, 15 */
    o = small_run(dir, 4);
    o.num_steps_per_checkpoint = 2;
    CHECKF(run_capturing(&o, &s, &err, out) == 0, "%s", err.msg);
    char state[sizeof s.last_checkpoint + 16];
    snprintf(state, sizeof state, "%s/state.json", s.last_checkpoint);
    CHECKF(file_exists(state), "the last checkpoint named, %s, does not exist", s.last_checkpoint);
    CHECKF(has_checkpoint(dir, 2) && has_checkpoint(dir, 4), "the new run's checkpoints were deleted");
    CHECKF(has_checkpoint(dir, 5) && has_checkpoint(dir, 10) && has_checkpoint(dir, 15), "the other run's were deleted");
    char *text = read_text(out);
    CHECKF(strstr(text, "holds 3 checkpoints of another run (ckpt_5 ... ckpt_15)"), "no warning:\n%s", text);
    free(text);
    /* more than --keep_checkpoints of its own: its oldest go, the other run's stay */
    o = small_run(dir, 8);
    o.num_steps_per_checkpoint = 2;
    run_ok(&o, &s);
    CHECKF(!has_checkpoint(dir, 2) && has_checkpoint(dir, 4) && has_checkpoint(dir, 6) && has_checkpoint(dir, 8) &&
           has_checkpoint(dir, 5) && has_checkpoint(dir, 10) && has_checkpoint(dir, 15), "keep 3 of the run's own");

    /* D2: phase 2 keeps phase 1's final checkpoint (and prints no warning about it) */
    snprintf(dir, sizeof dir, "%s/prune_d2", root);
    o = small_run(dir, 4);
    o.num_steps_per_checkpoint = 4;
    run_ok(&o, &s);
    o.max_steps = 8, o.num_steps_per_checkpoint = 2, o.phase2 = true, o.phase1_end_step = 4;
    o.resume_from_checkpoint = true;
    CHECKF(run_capturing(&o, &s, &err, out) == 0, "%s", err.msg);
    CHECKF(has_checkpoint(dir, 4), "phase 2 deleted phase 1's final checkpoint");
    CHECKF(!has_checkpoint(dir, 6) && has_checkpoint(dir, 8) && has_checkpoint(dir, 10) && has_checkpoint(dir, 12),
           "phase 2 keeps its newest 3");
    text = read_text(out);
    CHECKF(!strstr(text, "another run"), "a warning about phase 1's checkpoint:\n%s", text);
    free(text);

    /* a resumed run continues the same run: it prunes the checkpoints written before the stop */
    snprintf(dir, sizeof dir, "%s/prune_resume", root);
    o = small_run(dir, 12);
    o.num_steps_per_checkpoint = 2, o.steps_this_run = 6;
    run_ok(&o, &s);   /* ckpt_2, 4, 6 */
    o.steps_this_run = 0, o.resume_from_checkpoint = true;
    CHECKF(run_capturing(&o, &s, &err, out) == 0, "%s", err.msg);
    CHECKF(!has_checkpoint(dir, 2) && !has_checkpoint(dir, 4) && !has_checkpoint(dir, 6) && has_checkpoint(dir, 8) &&
           has_checkpoint(dir, 10) && has_checkpoint(dir, 12), "the resumed run keeps the newest 3 of the run");
    text = read_text(out);
    CHECKF(!strstr(text, "another run"), "a warning about the run's own checkpoints:\n%s", text);
    free(text);
    unlink(out);
}

/* Issue 35, D3: --json-summary truncated whatever it named, an input shard included, before
 * anything was checked; D4: a run that failed on a flag had already emptied the previous log.
 * Now the log is none of the run's inputs (device and inode), an existing file that is not a
 * DLLogger log is refused, and the log is written only from its first record (after the
 * setup), replacing an old one only once that record is written. D11: a log that cannot be
 * written fails the run. */
static void test_json_log_never_clobbers(void) {
    char in[600], log[700], copy[700], path[800];
    snprintf(in, sizeof in, "%s/log_inputs", root), mkdir(in, 0777);
    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof path, "%s/x_training_%d.hdf5", in, f);
        write_shard(path, f, ROWS, T, P);
    }
    snprintf(copy, sizeof copy, "%s/shard_copy.hdf5", root);
    snprintf(path, sizeof path, "%s/x_training_1.hdf5", in);
    write_shard(copy, 1, ROWS, T, P);
    char out[700];
    snprintf(out, sizeof out, "%s/log_run", root);
    PretrainOptions o = small_run(out, 2);
    o.input_dir = in, o.json_summary = path;
    PretrainSummary s;
    BertError err;
    /* an input shard (under another name, through a link) */
    char link[800];
    snprintf(link, sizeof link, "%s/log_link.json", root);
    CHECK(symlink(path, link) == 0);
    o.json_summary = link;
    CHECKF(pretrain_run(&o, &s, &err) != 0 && strstr(err.msg, "is also an input"), "%s", err.msg);
    CHECKF(files_equal(path, copy), "the shard named as the log was changed");
    unlink(link);
    /* any other existing file that is not a log */
    write_shard(copy, 1, ROWS, T, P);
    char other[800];
    snprintf(other, sizeof other, "%s/not_a_log.hdf5", root);
    write_shard(other, 1, ROWS, T, P);
    o.json_summary = other;
    CHECKF(pretrain_run(&o, &s, &err) != 0 && strstr(err.msg, "not a DLLogger log"), "%s", err.msg);
    CHECKF(files_equal(other, copy), "a file that is not a log was overwritten");
    /* a file of a checkpoint the run resumes from */
    o.json_summary = NULL;
    run_ok(&o, &s);
    char model[900];
    snprintf(model, sizeof model, "%s/ckpt_2/model.safetensors", out);
    o.json_summary = model, o.resume_from_checkpoint = true, o.max_steps = 4;
    CHECKF(pretrain_run(&o, &s, &err) != 0 && strstr(err.msg, "is also an input"), "%s", err.msg);
    /* D4: a run that fails before it starts leaves the previous log as it was */
    snprintf(log, sizeof log, "%s/log.json", root);
    o = small_run(out, 4);
    o.input_dir = in, o.json_summary = log, o.log_freq = 1, o.resume_from_checkpoint = true;
    run_ok(&o, &s);
    char *before = read_text(log);
    CHECK(strncmp(before, "DLLL ", 5) == 0 && strstr(before, "\"step_loss\""));
    PretrainOptions bad = o;
    bad.resume_from_checkpoint = false, bad.config_file = NULL, bad.bert_model = "bert-tinyy";   /* a typo */
    CHECK(pretrain_run(&bad, &s, &err) != 0);
    bad = o;
    bad.resume_from_checkpoint = false, bad.max_seq_length = 32;   /* shards of another length */
    CHECK(pretrain_run(&bad, &s, &err) != 0);
    char *after = read_text(log);
    CHECKF(strcmp(before, after) == 0, "a failed run changed the log (%zu bytes, was %zu)", strlen(after),
           strlen(before));
    free(after);
    /* D11: a log that cannot be written fails the run, naming it */
    o.resume_from_checkpoint = false, o.json_summary = "/dev/full";
    CHECKF(pretrain_run(&o, &s, &err) != 0 && strstr(err.msg, "cannot write the JSON log /dev/full"), "%s", err.msg);
    /* a full disk (the file-size limit stands in for it) keeps the previous log, not an empty file */
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {bert_bin, "pretrain", "--input_dir", in, "--config_file", "tests/data/bench/micro_config.json",
                        "--output_dir", out, "--max_seq_length", "24", "--max_predictions_per_seq", "4",
                        "--train_batch_size", "4", "--max_steps", "1", "--skip_checkpoint", "--threads", "1",
                        "--json-summary", log, NULL};
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1), dup2(devnull, 2);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit no_files = {0, 0};
        setrlimit(RLIMIT_FSIZE, &no_files);
        execv(bert_bin, argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 1, "a full disk under the log: status %d", status);
    after = read_text(log);
    CHECKF(strcmp(before, after) == 0, "a full disk changed the previous log (%zu bytes, was %zu)", strlen(after),
           strlen(before));
    free(after), free(before);
}

static void flip_byte(const char *path, long from_end) {
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, -from_end, SEEK_END);
    const int c = fgetc(f);
    fseek(f, -from_end, SEEK_END);
    fputc(c ^ 0x08, f);
    fclose(f);
}

/* A run into root/name stopped after `steps` of 8 steps, a checkpoint every `every`: its
 * options, set to resume (dir, the caller's, holds the folder's path). */
static PretrainOptions stopped_run(const char *name, long every, long steps, char *dir, size_t n) {
    snprintf(dir, n, "%s/%s", root, name);
    PretrainOptions o = small_run(dir, 8);
    o.num_steps_per_checkpoint = every, o.steps_this_run = steps;
    PretrainSummary s;
    run_ok(&o, &s);
    o.steps_this_run = 0, o.resume_from_checkpoint = true;
    return o;
}

/* Issue 35, D5: checkpoints carried no checksum, so a flipped bit in model.safetensors was
 * loaded without a word and carried into every later checkpoint. Now state.json records each
 * file's size and CRC-32; resuming passes over a damaged checkpoint (with a warning) for the
 * newest sound one, and --resume_step naming a damaged one is an error. */
static void test_damaged_checkpoint_not_resumed(void) {
    char dir[600], out[700], path[800];
    PretrainOptions o = stopped_run("damaged", 2, 4, dir, sizeof dir);   /* ckpt_2, ckpt_4 */
    PretrainSummary s;
    BertError err;
    snprintf(out, sizeof out, "%s.out", dir);
    snprintf(path, sizeof path, "%s/ckpt_4/model.safetensors", dir);
    flip_byte(path, 101);   /* an exponent bit of a weight near the end */
    o.max_steps = 6;
    CHECKF(run_capturing(&o, &s, &err, out) == 0, "%s", err.msg);
    CHECKF(s.first_step == 2, "resumed at step %ld from a damaged checkpoint", s.first_step);
    char *text = read_text(out);
    CHECKF(strstr(text, "ckpt_4/model.safetensors does not match its checksum") && strstr(text, "passed over"),
           "no warning:\n%s", text);
    free(text);
    /* the rerun rewrote ckpt_4 whole; naming a damaged checkpoint is an error */
    flip_byte(path, 101);
    o.resume_step = 4, o.max_steps = 8;
    CHECKF(pretrain_run(&o, &s, &err) != 0 && strstr(err.msg, "does not match its checksum"), "%s", err.msg);
    /* every checkpoint damaged: an error, not a fresh start */
    o.resume_step = -1;
    for (long step = 2; step <= 6; step += 2) {
        snprintf(path, sizeof path, "%s/ckpt_%ld/optimizer.safetensors", dir, step);
        if (file_exists(path)) flip_byte(path, 7);
    }
    CHECKF(pretrain_run(&o, &s, &err) != 0 && strstr(err.msg, "no sound checkpoint"), "%s", err.msg);
    unlink(out);
}

/* Writes a NaN over the first float of `tensor` in a safetensors file. */
static void poison_tensor(const char *path, const char *tensor) {
    char *data;
    size_t len;
    BertError err;
    if (read_file(path, &data, &len, &err) != 0) return;
    uint64_t n = 0;
    memcpy(&n, data, 8);
    char *header = strndup(data + 8, (size_t)n);
    cJSON *h = cJSON_Parse(header);
    const cJSON *offsets = cJSON_GetObjectItem(cJSON_GetObjectItem(h, tensor), "data_offsets");
    CHECKF(offsets, "%s: no %s", path, tensor);
    if (offsets) {
        const float nan = NAN;
        memcpy(data + 8 + n + (size_t)cJSON_GetArrayItem(offsets, 0)->valuedouble, &nan, sizeof nan);
        write_bytes(path, data, len);
    }
    cJSON_Delete(h), free(header), free(data);
}

/* A checkpoint from before file digests (or one written with the values already bad). */
static void drop_digests(const char *ckpt) {
    cJSON *state;
    BertError err;
    if (checkpoint_read_json(ckpt, "state.json", &state, &err) != 0) return;
    cJSON_DeleteItemFromObject(state, "files");
    checkpoint_write_json(ckpt, "state.json", state, &err);
    cJSON_Delete(state);
}

/* Issue 35, D6: NaN optimizer moments were not checked at load; the first update made the
 * weights NaN and the run stopped calling the checkpoint it had just loaded, the bad one,
 * "the last good checkpoint". Now such moments are refused at load, and a checkpoint is named
 * good only once a step from it went well. */
static void test_nonfinite_checkpoint_state(void) {
    char dir[600], ckpt[700], path[800];
    PretrainOptions o = stopped_run("nan_state", 4, 4, dir, sizeof dir);
    PretrainSummary s;
    BertError err;
    snprintf(ckpt, sizeof ckpt, "%s/ckpt_4", dir);
    snprintf(path, sizeof path, "%s/optimizer.safetensors", ckpt);
    poison_tensor(path, "bert.encoder.layer.0.attention.self.query.weight.exp_avg_sq");
    drop_digests(ckpt);
    CHECKF(pretrain_run(&o, &s, &err) != 0 && strstr(err.msg, "1 optimizer moments are NaN or infinite") &&
           strstr(err.msg, "query.weight.exp_avg_sq") && !strstr(err.msg, "last good checkpoint"), "%s", err.msg);
    /* NaN weights (a warning without --strict): the run stops at its first step, not calling the checkpoint good */
    o = stopped_run("nan_weights", 4, 4, dir, sizeof dir);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt_4", dir);
    snprintf(path, sizeof path, "%s/model.safetensors", ckpt);
    poison_tensor(path, "bert.embeddings.LayerNorm.weight");
    drop_digests(ckpt);
    CHECKF(pretrain_run(&o, &s, &err) != 0 && !strstr(err.msg, "last good checkpoint") &&
           strstr(err.msg, "may hold the bad values"), "%s", err.msg);
}

/* Issue 35, D12: resuming with another seed, batch, accumulation, masking or model ran on and
 * "exact resume" silently no longer held. Now each is refused naming the setting; a checkpoint
 * that does not record a setting (an older one) resumes as before. */
static void test_resume_refuses_other_settings(void) {
    char dir[600], ckpt[700];
    snprintf(dir, sizeof dir, "%s/settings", root), snprintf(ckpt, sizeof ckpt, "%s/ckpt_2", dir);
    PretrainOptions o = small_run(dir, 2);
    PretrainSummary s;
    run_ok(&o, &s);
    o.resume_from_checkpoint = true, o.max_steps = 4;
    const char *names[] = {"--seed", "--train_batch_size", "--gradient_accumulation_steps", "--dynamic_masking",
                           "holds a model of"};
    for (int what = 0; what < 5; what++) {
        PretrainOptions c = o;
        if (what == 0) c.seed = 6;
        if (what == 1) c.train_batch_size = 8;
        if (what == 2) c.gradient_accumulation_steps = 4;
        if (what == 3) c.dynamic_masking = true;
        if (what == 4) c.config_file = NULL, c.bert_model = "bert-tiny";
        BertError err;
        const int rc = pretrain_run(&c, &s, &err);
        CHECKF(rc != 0 && strstr(err.msg, names[what]), "another %s: rc %d, %s", names[what], rc, rc ? err.msg : "resumed");
    }
    CHECK(access(ckpt, F_OK) == 0);
    /* a checkpoint without the seed recorded resumes with any seed */
    cJSON *state;
    BertError err;
    CHECK(checkpoint_read_json(ckpt, "state.json", &state, &err) == 0);
    cJSON_DeleteItemFromObject(state, "seed");
    CHECK(checkpoint_write_json(ckpt, "state.json", state, &err) == 0);
    cJSON_Delete(state);
    PretrainOptions old = o;
    old.seed = 6;
    run_ok(&old, &s);
    CHECK(s.first_step == 2 && s.last_step == 4);
}

/* Issue 35, D8: two runs on one --output_dir mixed their checkpoints. Now the second fails at
 * once naming the first's pid (held here by this process, through its own open file). */
static void test_one_run_per_output_dir(void) {
    char dir[600], lock[700];
    snprintf(dir, sizeof dir, "%s/locked", root), snprintf(lock, sizeof lock, "%s/.lock", dir);
    mkdir(dir, 0777);
    const int fd = open(lock, O_RDWR | O_CREAT, 0666);
    CHECK(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    char pid[32], want[64];
    snprintf(pid, sizeof pid, "%ld\n", (long)getpid()), snprintf(want, sizeof want, "pid %ld", (long)getpid());
    CHECK(write(fd, pid, strlen(pid)) == (ssize_t)strlen(pid));
    PretrainOptions o = small_run(dir, 2);
    PretrainSummary s;
    BertError err;
    const int rc = pretrain_run(&o, &s, &err);
    CHECKF(rc != 0 && strstr(err.msg, "in use by another run") && strstr(err.msg, want), "rc %d: %s", rc,
           rc ? err.msg : "ran");
    long *steps;
    int count = 0;
    if (checkpoint_list(dir, &steps, &count, &err) == 0) free(steps);
    CHECK(count == 0);
    close(fd);   /* the holder ended: the folder is free again */
    run_ok(&o, &s);
    CHECK(s.last_step == 2);
}

static void test_phase2_and_bad_input(void) {
    char p1[600];
    snprintf(p1, sizeof p1, "%s/phases", root);
    PretrainOptions o = small_run(p1, 4);
    PretrainSummary s;
    run_ok(&o, &s);
    /* phase 2 from phase 1's newest checkpoint: steps counted from 0, checkpoints named past
     * phase1_end_step, weights carried over */
    o.phase2 = true, o.phase1_end_step = 4, o.resume_from_checkpoint = true, o.max_steps = 3;
    o.learning_rate = 4e-3, o.warmup_proportion = 0.1;
    run_ok(&o, &s);
    CHECK(s.first_step == 0 && s.last_step == 3);
    char path[1024];
    snprintf(path, sizeof path, "%s/ckpt_7/state.json", p1);
    CHECK(access(path, R_OK) == 0);
    BertError err;
    /* another model's checkpoint */
    PretrainOptions other = small_run(p1, 10);
    other.config_file = NULL, other.bert_model = "bert-tiny", other.resume_from_checkpoint = true;
    other.phase2 = true, other.phase1_end_step = 4;
    CHECK(pretrain_run(&other, &s, &err) != 0 && strstr(err.msg, "holds a model of"));
    /* shards of another shape */
    PretrainOptions wrong = small_run(p1, 4);
    char fresh[700];
    snprintf(fresh, sizeof fresh, "%s/fresh", root);
    wrong.output_dir = fresh, wrong.max_seq_length = 32;
    CHECK(pretrain_run(&wrong, &s, &err) != 0 && strstr(err.msg, "--max_seq_length"));
    wrong = small_run(fresh, 4);
    wrong.train_batch_size = 5;
    CHECK(pretrain_run(&wrong, &s, &err) != 0 && strstr(err.msg, "divisible"));
    /* a diverging run stops at the step it diverged, naming the last good checkpoint */
    wrong = small_run(p1, 10);
    wrong.phase2 = true, wrong.phase1_end_step = 4, wrong.resume_from_checkpoint = true;
    wrong.learning_rate = 1e30, wrong.optimizer = "lamb";
    CHECKF(pretrain_run(&wrong, &s, &err) != 0 && strstr(err.msg, "not finite") && strstr(err.msg, "ckpt_7"), "%s",
           err.msg);
    wrong = small_run(fresh, 4);
    wrong.phase2 = true;
    CHECK(pretrain_run(&wrong, &s, &err) != 0 && strstr(err.msg, "phase 2"));
    /* Issue 14, defect 12: weights with NaN loaded silently. --strict refuses them naming the
     * tensor; without it the run warns and then stops at the first non-finite loss. */
    BertConfig cfg;
    BertModel *m = NULL;
    char ckpt[800], nan_path[700];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt_4/model.safetensors", p1);
    snprintf(nan_path, sizeof nan_path, "%s/nan.safetensors", root);
    CHECK(bert_config_load("tests/data/bench/micro_config.json", &cfg, &err) == 0 &&
          bert_model_create(&m, &cfg, 2, T, P, &err) == 0 && bert_load_weights(m, ckpt, &err) == 0);
    const BertParamInfo *t = bert_find_param(m, "bert.encoder.layer.1.output.dense.weight");
    t->data[3] = NAN, t->data[9] = INFINITY;
    CHECK(bert_nonfinite_params(m, NULL) == 2 && bert_save_safetensors(m, nan_path, &err) == 0);
    bert_model_free(m);
    char nan_out[700];
    snprintf(nan_out, sizeof nan_out, "%s/nan_run", root);
    wrong = small_run(nan_out, 4);
    wrong.init_checkpoint = nan_path, wrong.strict = true;
    CHECKF(pretrain_run(&wrong, &s, &err) != 0 && strstr(err.msg, "2 weights are NaN or infinite") &&
           strstr(err.msg, "layer.1.output.dense.weight"), "%s", err.msg);
    wrong.strict = false;
    CHECKF(pretrain_run(&wrong, &s, &err) != 0 && strstr(err.msg, "not finite"), "%s", err.msg);
}

int main(int argc, char **argv) {
    if (test_bert_binary(argv[0], bert_bin, sizeof bert_bin) != 0) return 1;
    (void)argc;
    snprintf(root, sizeof root, "/tmp/bert_test_pretrain.%ld", (long)getpid());
    snprintf(shards, sizeof shards, "%s/shards", root);
    snprintf(uniform, sizeof uniform, "%s/uniform", root);
    BertError err;
    fs_remove_tree(root, &err);
    mkdir(root, 0777);
    make_shards();
    RUN_TEST(test_loader_epoch_order_and_labels);
    RUN_TEST(test_loader_seek_and_ranks);
    RUN_TEST(test_loader_eval_pass);
    RUN_TEST(test_evaluation_with_accumulation);
    RUN_TEST(test_deal_by_work);
    RUN_TEST(test_step_batches_one_process);
    RUN_TEST(test_dynamic_masking);
    RUN_TEST(test_loader_bad_shards);
    RUN_TEST(test_check_shards);
    RUN_TEST(test_check_shards_agrees_with_training);
    RUN_TEST(test_signals);   /* forks: before this process runs OpenMP threads (libgomp) */
    RUN_TEST(test_sigterm_under_load);
    RUN_TEST(test_resume_is_exact);
    RUN_TEST(test_accumulation_equals_big_batch);
    RUN_TEST(test_phase2_and_bad_input);
    RUN_TEST(test_resume_refuses_other_settings);
    RUN_TEST(test_one_run_per_output_dir);
    RUN_TEST(test_prunes_only_its_own_checkpoints);
    RUN_TEST(test_json_log_never_clobbers);
    RUN_TEST(test_damaged_checkpoint_not_resumed);
    RUN_TEST(test_nonfinite_checkpoint_state);
    if (!getenv("BERT_KEEP_TEST_FILES")) fs_remove_tree(root, &err);
    return test_summary();
}
