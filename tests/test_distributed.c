/* Data-parallel pre-training over MPI (train/comm.h, train/grad_sync.h, the sharded optimizer
 * of optim/optimizer.h), run as the user runs it: `mpirun -np 2 ./bert pretrain ...`.
 *
 *  - 2 processes with k micro-batches each = 1 process with 2k (the same global batch, data
 *    and dropout masks), for LAMB and AdamW, with gradients reduced after every micro-batch
 *    or once per step (--allreduce_post_accumulation), with and without the sharded optimizer
 *    (--shard_optimizer), and with a bf16 wire: equal up to float32 rounding (the sums are
 *    added in another order);
 *  - a 2-process run stopped and resumed = never stopped, bit for bit (plain and sharded);
 *    a checkpoint of 2 processes resumed by 1 (with the warning);
 *  - a rank killed (SIGKILL) or hung (SIGSTOP) ends the job with a message within the
 *    timeout instead of a hang.
 * Without mpirun on PATH every case says it was skipped.
 *
 * BERT_TEST_DEVICE=cuda (with BERT_TEST_BERT, the bert to run, and BERT_CUDA_LIB) runs the
 * cases that compare runs with --device cuda: `make cuda-emulate` runs them on the host
 * emulator's CUDA library, whose NCCL is MPI (tests/cuda/emu/nccl_mpi.cpp), so that
 * collectives.cu's buckets, tickets and parts meet two processes, which one GPU cannot give
 * (NCCL refuses two ranks on one device). Those runs must say they went through NCCL.
 *
 * The data is laid out so that the two runs see the same sequences: 2 shard files of exactly
 * one process's share of a step each (k micro-batches of 2 rows), every row with 2 masked
 * tokens (NVIDIA averages each micro-batch's loss over its masked tokens, so equal counts
 * make the micro-batch means add up to the big batch's mean). One process reads file A then
 * file B each step (an epoch per step); process r of 2 reads the epoch's file r: the same
 * global batch in the same order. The step's rows are then dealt by work (train/
 * step_batches.h), which depends on the global batch alone: micro-batch m of process r is
 * micro-batch r k + m of one process, its rows moved between the processes (the files' rows
 * differ in length); with --consecutive_micro_batches it is the rows as read. */
#include "test.h"
#include "test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "data/hdf5_shard.h"
#include "model/config.h"
#include "io/safetensors.h"
#include "model/bert.h"

enum { T = 24, P = 4, MICRO = 2, K = 2, ROWS = MICRO * K };

static char root[256], shards[512], bert_bin[1024], config[600];
static bool have_mpirun;
static const char *device;   /* BERT_TEST_DEVICE: every run takes --device; NULL: the CPU's default */

static void write_file(const char *path, int f, int rows) {
    Hdf5ShardWriter *w;
    BertError err;
    CHECKF(hdf5_shard_create(&w, path, (size_t)rows, T, P, &err) == 0, "%s", err.msg);
    for (int r = 0; r < rows; r++) {
        int32_t ids[T] = {0}, pos[P] = {0}, mids[P] = {0};
        const int len = 12 + (f * 5 + r * 3) % (T - 12), half = len / 2;
        ids[0] = 2;
        for (int t = 1; t < len - 1; t++) ids[t] = 10 + (t * 13 + f * 5 + r * 11) % 1000;
        ids[half] = 3, ids[len - 1] = 3;
        for (int k = 0; k < 2; k++) pos[k] = 2 + k, mids[k] = ids[2 + k], ids[2 + k] = 4;
        Instance in = {.n_tokens = len, .n_segment_a = half + 1, .is_random_next = (f + r) % 2, .n_masked = 2,
                       .input_ids = ids, .masked_positions = pos, .masked_ids = mids};
        CHECKF(hdf5_shard_append(w, &in, &err) == 0, "%s", err.msg);
    }
    CHECKF(hdf5_shard_finish(w, &err) == 0, "%s", err.msg);
}

/* Runs `[mpirun -np N] bert pretrain <common flags> extra`, output into log_out; exit status. */
static int run_pretrain(int processes, const char *out, const char *extra, const char *log_out) {
    char cmd[8192];
    char launcher[160] = "";
    if (processes > 1)
        snprintf(launcher, sizeof launcher, "mpirun -np %d --oversubscribe --allow-run-as-root --bind-to none ",
                 processes);
    snprintf(cmd, sizeof cmd,
             "%s%s pretrain --input_dir %s --config_file %s --output_dir %s --max_seq_length %d "
             "--max_predictions_per_seq %d --learning_rate 1e-2 --warmup_proportion 0.3 --seed 5 --threads 1 "
             "--disable_progress_bar --json-summary %s.json %s%s %s > %s 2>&1",
             launcher, bert_bin, shards, config, out, T, P, out, device ? "--device " : "", device ? device : "", extra,
             log_out);
    int status = system(cmd);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (rc == 0 && device && (processes > 1 || getenv("BERT_DATA_PARALLEL_ALONE"))) {
        char *text = read_text(log_out);
        const bool nccl = strstr(text, "through the GPU's collectives (NCCL)") != NULL;
        free(text);
        CHECKF(nccl, "--device %s: the run did not go through the GPU's collectives (%s)", device, log_out);
    }
    return rc;
}

/* Norm-wise relative difference of two runs' final weights (sqrt(sum d^2 / sum w^2)). */
static double weights_difference(const char *a, const char *b) {
    SafeTensors x, y;
    BertError err;
    if (safetensors_open(&x, a, &err)) return INFINITY;
    if (safetensors_open(&y, b, &err)) {
        safetensors_close(&x);
        return INFINITY;
    }
    double diff = 0, norm = 0;
    for (int i = 0; i < x.n; i++) {
        const StTensor *t = &x.tensors[i], *u = safetensors_find(&y, t->name);
        if (!u || u->end - u->begin != t->end - t->begin) {
            diff = INFINITY;
            break;
        }
        const float *wa = (const float *)(x.data + t->begin), *wb = (const float *)(y.data + u->begin);
        for (size_t k = 0; k < (t->end - t->begin) / 4; k++)
            diff += ((double)wa[k] - wb[k]) * ((double)wa[k] - wb[k]), norm += (double)wa[k] * wa[k];
    }
    safetensors_close(&x), safetensors_close(&y);
    return sqrt(diff / norm);
}

/* The values of `key` in a DLLogger log, in order (up to n). */
static int log_values(const char *log, const char *key, double *v, int n) {
    char *text = read_text(log), *p = text, pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    int got = 0;
    while (got < n && (p = strstr(p, pat))) p += strlen(pat), v[got++] = strtod(p, NULL);
    free(text);
    return got;
}

static bool skipped(void) {
    if (!have_mpirun) TEST_SKIP("no mpirun on PATH (install openmpi-bin)");
    return !have_mpirun;
}

/* 2 x k = 1 x 2k. A wrong reduction (a sum instead of a mean, a bucket lost or reduced twice,
 * the accumulated part re-added, a shard's update lost) moves the first step's gradient norm
 * by a factor or a share, and the weights by ~lr = 1e-2 against weights of ~2e-2; rounding
 * moves them by ~1e-7 relative per operation (float32's 2^-24, times a few for the sums'
 * other order). LAMB and AdamW normalise the update by sqrt(v), so an element whose
 * gradient is rounding noise can move by up to lr in either run: rare, so norm-wise the
 * weights stay within 1e-5 (measured: 4e-9 LAMB, 5e-8 AdamW). A bf16 wire rounds every
 * gradient to 2^-9 relative: the gradient norm within 4e-3, the weights within 2e-2
 * (measured: 4e-5 LAMB, 1.2e-3 AdamW, whose first steps move noise elements by lr), and so the
 * later steps' losses within 2e-3 relative: a weight change of d (norm-wise, relative) moves
 * this model's loss by well under d/10 of itself (measured: 1e-4 for d = 2.2e-3). */
static void test_two_processes_equal_one(void) {
    if (skipped()) return;
    const char *optimizers[] = {"lamb", "adamw"};
    const char *variants[][2] = {
        {"per_micro", ""},
        {"post", "--allreduce_post_accumulation"},
        {"sharded", "--shard_optimizer"},
        {"post_sharded", "--allreduce_post_accumulation --shard_optimizer --bucket_cap_mb 0.05"},
        {"bf16_wire", "--allreduce_post_accumulation --allreduce_post_accumulation_bf16"},
    };
    for (int oi = 0; oi < 2; oi++) {
        char one[700], log[800], extra[512];
        snprintf(one, sizeof one, "%s/one_%s", root, optimizers[oi]);
        snprintf(log, sizeof log, "%s.out", one);
        snprintf(extra, sizeof extra, "--optimizer %s --train_batch_size %d --gradient_accumulation_steps %d "
                                      "--max_steps 3 --bucket_cap_mb 0.01", optimizers[oi], MICRO * 2 * K, 2 * K);
        CHECKF(run_pretrain(1, one, extra, log) == 0, "1 process, %s: see %s", optimizers[oi], log);
        char one_json[800], one_model[800];
        snprintf(one_json, sizeof one_json, "%s.json", one);
        snprintf(one_model, sizeof one_model, "%s/ckpt_3/model.safetensors", one);
        double loss1[3] = {0}, grad1[3] = {0};
        CHECK(log_values(one_json, "step_loss", loss1, 3) == 3 && log_values(one_json, "grad_norm", grad1, 3) == 3);
        for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
            char two[700], two_json[800], two_model[800];
            snprintf(two, sizeof two, "%s/two_%s_%s", root, optimizers[oi], variants[vi][0]);
            snprintf(log, sizeof log, "%s.out", two);
            snprintf(extra, sizeof extra, "--optimizer %s --train_batch_size %d --gradient_accumulation_steps %d "
                                          "--max_steps 3 --bucket_cap_mb 0.01 %s", optimizers[oi], MICRO * K, K,
                     variants[vi][1]);
            CHECKF(run_pretrain(2, two, extra, log) == 0, "2 processes, %s %s: see %s", optimizers[oi],
                   variants[vi][0], log);
            snprintf(two_json, sizeof two_json, "%s.json", two);
            snprintf(two_model, sizeof two_model, "%s/ckpt_3/model.safetensors", two);
            double loss2[3] = {0}, grad2[3] = {0};
            CHECK(log_values(two_json, "step_loss", loss2, 3) == 3 && log_values(two_json, "grad_norm", grad2, 3) == 3);
            /* each step's wait split into the communication and the wait for the slower process */
            double exposed[3] = {-1, -1, -1}, imbalance[3] = {-1, -1, -1};
            CHECKF(log_values(two_json, "comm_exposed_seconds", exposed, 3) == 3 &&
                   log_values(two_json, "imbalance_wait_seconds", imbalance, 3) == 3 && exposed[2] >= 0 &&
                   imbalance[2] >= 0 && exposed[2] + imbalance[2] < 60, "%s %s: waits %g, %g", optimizers[oi],
                   variants[vi][0], exposed[2], imbalance[2]);
            /* bf16 on the wire rounds every gradient to 8 bits of mantissa: 2^-9 relative */
            const double tol = strstr(variants[vi][0], "bf16") ? 4e-3 : 1e-5;
            CHECKF(fabs(loss1[0] - loss2[0]) <= 1e-6 * fabs(loss1[0]), "%s %s: first loss %.9g vs %.9g",
                   optimizers[oi], variants[vi][0], loss1[0], loss2[0]);
            CHECKF(fabs(grad1[0] - grad2[0]) <= tol * grad1[0], "%s %s: first gradient norm %.9g vs %.9g",
                   optimizers[oi], variants[vi][0], grad1[0], grad2[0]);
            for (int s = 1; s < 3; s++)
                CHECKF(fabs(loss1[s] - loss2[s]) <= (strstr(variants[vi][0], "bf16") ? 2e-3 : 1e-4) * fabs(loss1[s]),
                       "%s %s: step %d loss %.9g vs %.9g",
                       optimizers[oi], variants[vi][0], s + 1, loss1[s], loss2[s]);
            const double d = weights_difference(one_model, two_model);
            printf("    %s, %s: first gradient norm %.9g vs %.9g, weights after 3 steps differ by %.2g\n",
                   optimizers[oi], variants[vi][0], grad1[0], grad2[0], d);
            CHECKF(d < (strstr(variants[vi][0], "bf16") ? 2e-2 : 1e-5), "%s %s: weights differ by %.3g",
                   optimizers[oi], variants[vi][0], d);
        }
    }
}

/* One process through the data-parallel path (BERT_DATA_PARALLEL_ALONE: the gradient buckets,
 * the grad-ready hook, ZeRO-1's parts, the parameter all-gather and the optimizer state's
 * gather, each in a group of one, as a GPU runs them through NCCL on one card) = the plain
 * run: a mean over one process is the gradient itself, so every step's loss, gradient norm and
 * the checkpoint's weights and optimizer state are the same bits. A bucket lost, reduced twice
 * or scaled, a part not gathered back, or the sharded state written wrong would change them. */
static void test_one_process_through_the_parallel_path(void) {
    char plain[700], log[800], extra[512];
    snprintf(plain, sizeof plain, "%s/alone_plain", root);
    snprintf(log, sizeof log, "%s.out", plain);
    snprintf(extra, sizeof extra, "--optimizer lamb --train_batch_size %d --gradient_accumulation_steps %d "
                                  "--max_steps 3 --bucket_cap_mb 0.01", MICRO * 2 * K, 2 * K);
    CHECKF(run_pretrain(1, plain, extra, log) == 0, "plain: see %s", log);
    const char *variants[][2] = {{"per_micro", ""}, {"post_sharded", "--allreduce_post_accumulation --shard_optimizer"}};
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        char alone[700], with[700];
        snprintf(alone, sizeof alone, "%s/alone_%s", root, variants[vi][0]);
        snprintf(log, sizeof log, "%s.out", alone);
        snprintf(with, sizeof with, "%s %s", extra, variants[vi][1]);
        setenv("BERT_DATA_PARALLEL_ALONE", "1", 1);
        const int rc = run_pretrain(1, alone, with, log);
        unsetenv("BERT_DATA_PARALLEL_ALONE");
        CHECKF(rc == 0, "%s: see %s", variants[vi][0], log);
        char *text = read_text(log);
        CHECKF(text && strstr(text, "data parallel: 1 process,"), "%s: the run did not take the parallel path (%s)",
               variants[vi][0], log);
        free(text);
        const char *files[] = {"model.safetensors", "optimizer.safetensors"};
        for (int f = 0; f < 2; f++) {
            char a[900], b[900];
            snprintf(a, sizeof a, "%s/ckpt_3/%s", plain, files[f]);
            snprintf(b, sizeof b, "%s/ckpt_3/%s", alone, files[f]);
            CHECKF(files_equal(a, b), "%s: %s differs from the plain run's", variants[vi][0], files[f]);
        }
        char pj[800], aj[800];
        snprintf(pj, sizeof pj, "%s.json", plain), snprintf(aj, sizeof aj, "%s.json", alone);
        double lp[3] = {0}, la[3] = {1}, gp[3] = {0}, ga[3] = {1};
        CHECK(log_values(pj, "step_loss", lp, 3) == 3 && log_values(aj, "step_loss", la, 3) == 3);
        CHECK(log_values(pj, "grad_norm", gp, 3) == 3 && log_values(aj, "grad_norm", ga, 3) == 3);
        for (int k = 0; k < 3; k++)
            CHECKF(lp[k] == la[k] && gp[k] == ga[k], "%s: step %d loss %.9g / %.9g, gradient norm %.9g / %.9g",
                   variants[vi][0], k + 1, lp[k], la[k], gp[k], ga[k]);
    }
}

/* The summary's "busiest process's work over the mean": dealt, and as read. */
static bool work_spread(const char *log, double *dealt, double *as_read) {
    char *text = read_text(log), *p = text ? strstr(text, "work over the mean, per step: ") : NULL;
    bool ok = p && sscanf(p, "work over the mean, per step: %lf (%lf", dealt, as_read) == 2;
    free(text);
    return ok;
}

/* Dealt by work, the processes' work is even; as read, file 1's longer rows make process 1
 * the busiest. Work t (6H + t) of the test's rows (H = 32): file 0 holds 12, 15, 18, 21
 * tokens = 13806, file 1 17, 20, 23, 14 = 15622: 1.062 of the mean as read; dealt into 4
 * micro-batches of 2 (LPT): 7393 + 7357 against 7345 + 7333 = 1.002. And the micro-batches
 * as read (NVIDIA's) are the same for 2 x k as for 1 x 2k. */
static void test_work_dealt_evenly(void) {
    if (skipped()) return;
    char one[700], two[700], log1[800], log2[800], extra[512];
    snprintf(one, sizeof one, "%s/consecutive_one", root), snprintf(two, sizeof two, "%s/consecutive_two", root);
    snprintf(log1, sizeof log1, "%s.out", one), snprintf(log2, sizeof log2, "%s.out", two);
    snprintf(extra, sizeof extra, "--train_batch_size %d --gradient_accumulation_steps %d --max_steps 2 "
                                  "--consecutive_micro_batches", MICRO * 2 * K, 2 * K);
    CHECKF(run_pretrain(1, one, extra, log1) == 0, "1 process: see %s", log1);
    snprintf(extra, sizeof extra, "--train_batch_size %d --gradient_accumulation_steps %d --max_steps 2 "
                                  "--consecutive_micro_batches", MICRO * K, K);
    CHECKF(run_pretrain(2, two, extra, log2) == 0, "2 processes: see %s", log2);
    char j1[800], j2[800];
    snprintf(j1, sizeof j1, "%s.json", one), snprintf(j2, sizeof j2, "%s.json", two);
    double loss1[2] = {0}, loss2[2] = {0};
    CHECK(log_values(j1, "step_loss", loss1, 2) == 2 && log_values(j2, "step_loss", loss2, 2) == 2);
    CHECKF(fabs(loss1[0] - loss2[0]) <= 1e-6 * fabs(loss1[0]), "as read: first loss %.9g vs %.9g", loss1[0], loss2[0]);
    double dealt, as_read;
    CHECKF(work_spread(log2, &dealt, &as_read) && fabs(dealt - as_read) < 1e-9 && fabs(as_read - 1.062) < 1e-3,
           "as read: the busiest process's work %.4f (as read %.4f) of the mean", dealt, as_read);
    snprintf(log2, sizeof log2, "%s/two_lamb_per_micro.out", root);   /* test_two_processes_equal_one's */
    CHECKF(work_spread(log2, &dealt, &as_read) && fabs(dealt - 1.002) < 1e-3 && fabs(as_read - 1.062) < 1e-3,
           "dealt: the busiest process's work %.4f (as read %.4f) of the mean", dealt, as_read);
    printf("    busiest process's work over the mean: %.4f dealt, %.4f as read\n", dealt, as_read);
}

/* Stopped after 2 of 5 steps and resumed = never stopped, bit for bit, with 2 processes
 * (each resumes at its own data position; the sharded optimizer's state is gathered into the
 * checkpoint and dealt out again). Then the same checkpoint resumed by 1 process: a warning,
 * and the run goes on. */
static void test_resume_two_processes(void) {
    if (skipped()) return;
    const char *variants[] = {"", "--shard_optimizer"};
    for (int vi = 0; vi < 2; vi++) {
        char a[700], b[700], log[800], extra[512], ma[800], mb[800];
        snprintf(a, sizeof a, "%s/straight%d", root, vi), snprintf(b, sizeof b, "%s/resumed%d", root, vi);
        snprintf(extra, sizeof extra, "--train_batch_size 2 --max_steps 5 %s", variants[vi]);
        snprintf(log, sizeof log, "%s.out", a);
        CHECKF(run_pretrain(2, a, extra, log) == 0, "see %s", log);
        snprintf(extra, sizeof extra, "--train_batch_size 2 --max_steps 5 --steps_this_run 2 %s", variants[vi]);
        snprintf(log, sizeof log, "%s.out", b);
        CHECKF(run_pretrain(2, b, extra, log) == 0, "see %s", log);
        snprintf(extra, sizeof extra, "--train_batch_size 2 --max_steps 5 --resume_from_checkpoint %s", variants[vi]);
        snprintf(log, sizeof log, "%s.resume.out", b);
        CHECKF(run_pretrain(2, b, extra, log) == 0, "see %s", log);
        snprintf(ma, sizeof ma, "%s/ckpt_5/model.safetensors", a), snprintf(mb, sizeof mb, "%s/ckpt_5/model.safetensors", b);
        CHECKF(files_equal(ma, mb), "%s: the resumed run's weights differ", variants[vi]);
        snprintf(ma, sizeof ma, "%s/ckpt_5/optimizer.safetensors", a);
        snprintf(mb, sizeof mb, "%s/ckpt_5/optimizer.safetensors", b);
        CHECKF(files_equal(ma, mb), "%s: the resumed run's optimizer state differs", variants[vi]);
        char state[800];
        snprintf(state, sizeof state, "%s/ckpt_5/state.json", a);
        char *text = read_text(state);
        CHECKF(strstr(text, "\"processes\":\t2") || strstr(text, "\"processes\":2"), "%s", text);
        free(text);
    }
    /* 2 -> 1 process */
    char b[700], log[800];
    snprintf(b, sizeof b, "%s/resumed0", root);
    snprintf(log, sizeof log, "%s.one.out", b);
    CHECKF(run_pretrain(1, b, "--train_batch_size 2 --max_steps 7 --resume_from_checkpoint", log) == 0, "see %s", log);
    char *text = read_text(log);
    CHECKF(strstr(text, "written by 2 processes and this run has 1") && strstr(text, "steps 5 -> 7"), "%s", text);
    free(text);
}

/* Every checkpoint of a 2-process run over 3 shards of uneven sizes resumes with 1 process:
 * a process whose next file slot is a file read twice (3 files dealt to 2 processes) has
 * finished the epoch's files, and the re-split starts at the earliest file not finished. */
static void test_resume_uneven_shards_other_count(void) {
    if (skipped()) return;
    char dir[400], out[450], log[800], path[900], extra[256];
    snprintf(dir, sizeof dir, "%s/uneven", root);
    mkdir(dir, 0777);
    const int rows[3] = {10, 4, 6};
    for (int f = 0; f < 3; f++) {
        snprintf(path, sizeof path, "%s/u_training_%d.hdf5", dir, f);
        write_file(path, f, rows[f]);
    }
    char saved[512];
    snprintf(saved, sizeof saved, "%s", shards);
    snprintf(shards, sizeof shards, "%s", dir);
    snprintf(out, sizeof out, "%s/uneven_out", root);
    snprintf(log, sizeof log, "%s.out", out);
    CHECKF(run_pretrain(2, out, "--train_batch_size 2 --max_steps 40 --steps_this_run 20 --num_steps_per_checkpoint 1 "
                                "--keep_checkpoints 100", log) == 0, "see %s", log);
    /* the case that matters occurs: a process whose next slot (file * 2 + rank) is past the 3 files */
    int repeated_slot = 0;
    for (int step = 1; step <= 20; step++) {
        snprintf(path, sizeof path, "%s/ckpt_%d/state.json", out, step);
        char *text = read_text(path);
        cJSON *j = cJSON_Parse(text), *ranks = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "data"), "ranks");
        for (int k = 0; k < cJSON_GetArraySize(ranks); k++)
            repeated_slot += cJSON_GetArrayItem(cJSON_GetArrayItem(ranks, k), 1)->valueint * 2 + k >= 3;
        cJSON_Delete(j), free(text);
    }
    CHECKF(repeated_slot > 0, "no checkpoint with a process on a repeated file slot: the test does not test");
    for (int step = 20; step >= 1; step--) {   /* descending: each resume rewrites only the next one */
        snprintf(extra, sizeof extra, "--train_batch_size 2 --max_steps 40 --steps_this_run 1 --keep_checkpoints 100 "
                                      "--resume_from_checkpoint --resume_step %d", step);
        snprintf(log, sizeof log, "%s.resume%d.out", out, step);
        CHECKF(run_pretrain(1, out, extra, log) == 0, "resuming step %d with 1 process: see %s", step, log);
    }
    snprintf(shards, sizeof shards, "%s", saved);
}

/* The pids of mpirun's children (the ranks). */
static int children_of(pid_t parent, pid_t *out, int n) {
    int got = 0;
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d)) && got < n;) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        char *close_paren = strrchr(buf, ')');
        int ppid = 0;
        if (close_paren && sscanf(close_paren + 2, "%*c %d", &ppid) == 1 && ppid == parent) out[got++] = atoi(e->d_name);
    }
    if (d) closedir(d);
    return got;
}

/* Starts a long 2-process run, waits for its first checkpoint, sends `sig` to rank 1, and
 * returns the job's exit status once it ended (or -1 if it still ran after `limit` s). */
static int job_after_signal(const char *out, int sig, double limit, double *took) {
    char log[800], cmd[4096];
    snprintf(log, sizeof log, "%s.out", out);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1), dup2(fd, 2);
        snprintf(cmd, sizeof cmd, "%s", bert_bin);
        char json[800];
        snprintf(json, sizeof json, "%s.json", out);
        execlp("mpirun", "mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", cmd,
               "pretrain", "--input_dir", shards, "--config_file", config, "--output_dir", out, "--max_seq_length",
               "24", "--max_predictions_per_seq", "4", "--train_batch_size", "2", "--max_steps", "100000",
               "--num_steps_per_checkpoint", "2", "--seed", "5", "--threads", "1", "--disable_progress_bar", "--comm_timeout", "4",
               "--json-summary", json, (char *)NULL);
        _exit(127);
    }
    char ready[800];
    snprintf(ready, sizeof ready, "%s/ckpt_2/state.json", out);
    for (int i = 0; i < 3000 && !file_exists(ready); i++) usleep(10000);
    pid_t ranks[4];
    int n = children_of(pid, ranks, 4);
    CHECKF(n == 2 && file_exists(ready), "%d ranks found, checkpoint %s", n, file_exists(ready) ? "there" : "missing");
    if (n >= 2) kill(ranks[1], sig);
    const double t0 = now_seconds();
    int status = -1;
    while (now_seconds() - t0 < limit) {
        if (waitpid(pid, &status, WNOHANG) == pid) break;
        status = -1;
        usleep(20000);
    }
    *took = now_seconds() - t0;
    if (status == -1) {   /* still running: the failure this test is about; clean up */
        kill(pid, SIGKILL);
        for (int i = 0; i < n; i++) kill(ranks[i], SIGKILL);
        waitpid(pid, NULL, 0);
    }
    for (int i = 0; i < n; i++) kill(ranks[i], SIGKILL);   /* a stopped rank mpirun could not end */
    return status;
}

static void test_dead_or_hung_rank_ends_the_job(void) {
    if (skipped()) return;
    char out[700];
    double took;
    snprintf(out, sizeof out, "%s/killed", root);
    int status = job_after_signal(out, SIGKILL, 60, &took);
    CHECKF(status != -1 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0), "a killed rank: status %d after %.1f s",
           status, took);
    printf("    rank 1 killed: the job ended after %.1f s\n", took);
    /* hung: the other rank's collective times out after --comm_timeout 4 s and ends the job */
    snprintf(out, sizeof out, "%s/hung", root);
    status = job_after_signal(out, SIGSTOP, 60, &took);
    CHECKF(status != -1 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0), "a hung rank: status %d after %.1f s",
           status, took);
    char log[800];
    snprintf(log, sizeof log, "%s.out", out);
    char *text = read_text(log);
    CHECKF(strstr(text, " of 2: ") && strstr(text, "did not complete within 4 s (--comm_timeout)"), "%s", text);
    free(text);
    printf("    rank 1 stopped: rank 0 ended the job after %.1f s\n", took);
    /* the job's newest complete checkpoint still resumes */
    snprintf(out, sizeof out, "%s/killed", root);
    char log2[800];
    snprintf(log2, sizeof log2, "%s.resume.out", out);
    CHECKF(run_pretrain(2, out, "--train_batch_size 2 --max_steps 100000 --steps_this_run 1 --resume_from_checkpoint",
                        log2) == 0, "see %s", log2);
}

/* Issue 35, D7: processes started with different run-defining flags trained on silently (each
 * its own seed, batch or model). Now every one stops with one line naming the difference. */
static void test_processes_with_other_flags_refused(void) {
    if (skipped()) return;
    const char *cases[][3] = {{"--seed 5", "--seed 6", "--seed"}, {"--max_steps 4", "--max_steps 5", "--max_steps"},
                              {"--train_batch_size 4", "--train_batch_size 2", "--train_batch_size"}};
    for (int i = 0; i < 3; i++) {
        char out[700], log[800], common[4096], cmd[12288];
        snprintf(out, sizeof out, "%s/flags%d", root, i), snprintf(log, sizeof log, "%s.out", out);
        snprintf(common, sizeof common, "%s pretrain --input_dir %s --config_file %s --output_dir %s --max_seq_length %d "
                 "--max_predictions_per_seq %d --threads 1 --disable_progress_bar", bert_bin, shards, config, out, T, P);
        const char *a = cases[i][0], *b = cases[i][1];
        snprintf(cmd, sizeof cmd, "timeout 120 mpirun --oversubscribe --allow-run-as-root --bind-to none -np 1 %s %s%s : "
                 "-np 1 %s %s%s > %s 2>&1", common, a, i == 1 ? "" : " --max_steps 4", common, b,
                 i == 1 ? "" : " --max_steps 4", log);
        const int status = system(cmd);
        char *text = read_text(log);
        char want[200];
        snprintf(want, sizeof want, "process 0 has %s", cases[i][2]);
        CHECKF(!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && strstr(text, want) &&
               strstr(text, "different flags"), "%s vs %s: status %d\n%s", a, b, status, text);
        free(text);
    }
}

/* `bert bench_allreduce`: bert.c's bucketed reduction timed alone. It checks every reduced
 * float against the processes' mean itself (exit 1 otherwise); here also what it sent: the
 * whole gradient once, 4 bytes a float or 2 on a 16-bit wire, in ceil(n / bucket) buckets
 * (one bucket per part at most more when reducing onto owners). */
static void test_bench_allreduce(void) {
    if (skipped()) return;
    BertConfig cfg;
    BertError err;
    BertModel *m = NULL;
    CHECKF(bert_config_load(config, &cfg, &err) == 0 && bert_model_create(&m, &cfg, 1, 8, 1, &err) == 0, "%s", err.msg);
    const double numel = (double)bert_num_parameters(m);
    bert_model_free(m);
    const struct {
        const char *flags;
        double bytes_per_float, bucket_mb;
        bool to_owners;
    } modes[] = {{"", 4, 25, false}, {"--allreduce_post_accumulation_bf16", 2, 25, false},
                 {"--allreduce_post_accumulation_fp16 --bucket_cap_mb 0.01", 2, 0.01, false},
                 {"--shard_optimizer --bucket_cap_mb 0.01", 4, 0.01, true}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char cmd[4096], log[700];
        snprintf(log, sizeof log, "%s/bench_allreduce.%zu.out", root, i);
        snprintf(cmd, sizeof cmd, "mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none %s bench_allreduce "
                 "--bert_model %s --iters 2 --warmup 0 --json %s > %s 2>&1", bert_bin, config, modes[i].flags, log);
        CHECKF(system(cmd) == 0, "%s: see %s", modes[i].flags, log);
        double wire = 0, collectives = 0;
        CHECKF(log_values(log, "wire_bytes", &wire, 1) == 1 && log_values(log, "collectives", &collectives, 1) == 1,
               "no measurement in %s", log);
        CHECKF(wire == numel * modes[i].bytes_per_float, "%s: %.0f bytes sent, want %.0f", modes[i].flags, wire,
               numel * modes[i].bytes_per_float);
        const double buckets = ceil(numel / floor(modes[i].bucket_mb * 1048576.0 / 4));
        CHECKF(collectives >= buckets && collectives <= buckets + (modes[i].to_owners ? 1 : 0),
               "%s: %.0f collectives, want %.0f", modes[i].flags, collectives, buckets);
    }
}

int main(int argc, char **argv) {
    (void)argc;
    if (test_bert_binary(argv[0], bert_bin, sizeof bert_bin) != 0) return 1;
    device = getenv("BERT_TEST_DEVICE");
    if (device && getenv("BERT_TEST_BERT")) snprintf(bert_bin, sizeof bert_bin, "%s", getenv("BERT_TEST_BERT"));
    have_mpirun = system("command -v mpirun > /dev/null 2>&1") == 0;
    /* Under AddressSanitizer: OpenMPI's components are loaded with dlopen and unloaded by
     * MPI_Finalize, leaving allocations LeakSanitizer can neither attribute nor suppress by
     * name, so the ranks run without leak detection (addressing errors and UB still abort). */
    const char *asan = getenv("ASAN_OPTIONS");
    if (asan) {
        char opts[1024];
        snprintf(opts, sizeof opts, "%s:detect_leaks=0", asan);
        setenv("ASAN_OPTIONS", opts, 1);
    }
    snprintf(root, sizeof root, "/tmp/bert_test_distributed.%ld", (long)getpid());
    snprintf(shards, sizeof shards, "%s/shards", root);
    snprintf(config, sizeof config, "%s/config.json", root);
    remove_tree(root);
    mkdir(root, 0777), mkdir(shards, 0777);
    for (int f = 0; f < 2; f++) {
        char path[700];
        snprintf(path, sizeof path, "%s/d_training_%d.hdf5", shards, f);
        write_file(path, f, ROWS);
    }
    /* dropout on: the masks are keyed by the micro-batch's place in the global batch */
    write_text(config, "{\"vocab_size\": 1200, \"hidden_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": "
                       "2, \"intermediate_size\": 64, \"max_position_embeddings\": 64}");
    RUN_TEST(test_one_process_through_the_parallel_path);
    RUN_TEST(test_two_processes_equal_one);
    RUN_TEST(test_work_dealt_evenly);
    RUN_TEST(test_resume_two_processes);
    if (device) {
        /* the rest is the launcher's and the CPU's MPI (the emulated NCCL cannot time out) */
        printf("  --device %s: the runs compared above only\n", device);
        if (!getenv("BERT_KEEP_TEST_FILES")) remove_tree(root);
        return test_summary();
    }
    RUN_TEST(test_resume_uneven_shards_other_count);
    RUN_TEST(test_dead_or_hung_rank_ends_the_job);
    RUN_TEST(test_processes_with_other_flags_refused);
    RUN_TEST(test_bench_allreduce);
    if (!getenv("BERT_KEEP_TEST_FILES")) remove_tree(root);
    return test_summary();
}
