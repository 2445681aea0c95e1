/* `bert bench_allreduce`: bert.c's gradient reduction (train/grad_sync.h) timed alone on a
 * model's real gradient layout, beside one all-reduce of the same buffer; run it under
 * mpirun (train/sync_bench.h). bench/run_allreduce_bench.sh puts it next to a plain
 * MPI_Allreduce loop on the same byte counts. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "model/config.h"
#include "train/sync_bench.h"

static void report(const char *what, const SyncBenchTiming *t, int P, bool json) {
    if (json) {
        printf("{\"impl\": \"bert.c\", \"what\": \"%s\", \"processes\": %d, \"grad_bytes\": %.0f, \"wire_bytes\": %.0f, "
               "\"collectives\": %d, \"seconds_min\": %.6f, \"seconds_median\": %.6f, \"algbw_gbs\": %.3f, "
               "\"busbw_gbs\": %.3f}\n", what, P, t->grad_bytes, t->wire_bytes, t->buckets, t->seconds_min,
               t->seconds_median, t->algbw_gbs, t->busbw_gbs);
        return;
    }
    printf("%-34s %3d collectives  %7.1f MB sent  %8.2f ms (median %8.2f)  algbw %6.2f GB/s  busbw %6.2f GB/s\n", what,
           t->buckets, t->wire_bytes / 1e6, 1e3 * t->seconds_min, 1e3 * t->seconds_median, t->algbw_gbs, t->busbw_gbs);
}

int cmd_bench_allreduce(int argc, char **argv) {
    const char *model = "bert-base";
    double bucket_cap_mb = 25, timeout = 600;
    int iters = 10, warmup = 2;
    bool fp16 = false, bf16 = false, shard = false, json = false;
    const Flag flags[] = {
        {"bert_model", FLAG_STRING, &model, "a preset (bert-tiny ... bert-large) or a config.json; default bert-base"},
        {"bucket_cap_mb", FLAG_DOUBLE, &bucket_cap_mb, "bucket size as in pretrain; default 25"},
        {"allreduce_post_accumulation_fp16", FLAG_BOOL, &fp16, "fp16 on the wire"},
        {"allreduce_post_accumulation_bf16", FLAG_BOOL, &bf16, "bf16 on the wire"},
        {"shard_optimizer", FLAG_BOOL, &shard, "reduce each part onto its owner (ZeRO-1) instead of all-reduce"},
        {"iters", FLAG_INT, &iters, "timed repetitions; default 10"},
        {"warmup", FLAG_INT, &warmup, "untimed repetitions first; default 2"},
        {"comm_timeout", FLAG_DOUBLE, &timeout, "seconds any collective may wait; default 600"},
        {"json", FLAG_BOOL, &json, "one JSON line per measurement"},
    };
    const FlagSpec spec = {"bench_allreduce", "bench_allreduce [--bert_model bert-base] [flags]   (under mpirun -np P)",
                           flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if ((fp16 && bf16) || !(bucket_cap_mb >= 0.001) || iters < 1 || warmup < 0 || !(timeout > 0)) {
        fprintf(stderr, "bert bench_allreduce: at most one 16-bit wire; --bucket_cap_mb >= 0.001, --iters >= 1, "
                        "--warmup >= 0, --comm_timeout > 0\n");
        return 2;
    }
    BertError err;
    BertConfig cfg;
    Comm *comm = NULL;
    BertModel *m = NULL;
    if (bert_config_resolve(model, &cfg, &err) != 0 || comm_open(&comm, timeout, &err) != 0 ||
        bert_model_create(&m, &cfg, 1, 8, 1, &err) != 0) {
        fprintf(stderr, "bert bench_allreduce: %s\n", err.msg);
        if (comm) comm_close(comm);
        return 1;
    }
    const SyncBenchOptions o = {.iters = iters, .warmup = warmup,
                                .sync = {.bucket_floats = (size_t)(bucket_cap_mb * 1048576.0 / sizeof(float)),
                                         .wire = fp16 ? COMM_WIRE_FP16 : bf16 ? COMM_WIRE_BF16 : COMM_WIRE_FP32,
                                         .to_owners = shard}};
    SyncBenchResult r;
    rc = sync_bench_run(comm, m, &o, &r, &err);
    const int P = comm_size(comm);
    if (rc != 0) fprintf(stderr, "bert bench_allreduce: %s\n", err.msg);
    else if (comm_rank(comm) == 0) {
        if (P == 1) fprintf(stderr, "bert bench_allreduce: one process (start it with mpirun -np P): nothing to reduce\n");
        if (!json)
            printf("%s, %zu parameters (%.1f MB of fp32 gradients), %d processes, %d ranges from the backward, "
                   "%g MiB buckets\n", model, bert_num_parameters(m), 4e-6 * (double)bert_num_parameters(m), P,
                   r.ranges, bucket_cap_mb);
        char what[64];
        snprintf(what, sizeof what, "grad_sync %s%s", shard ? "to owners" : "all-reduce",
                 fp16 ? " fp16" : bf16 ? " bf16" : "");
        report(what, &r.bucketed, P, json);
        report("one all-reduce, whole buffer", &r.one_call, P, json);
    }
    bert_model_free(m);
    comm_close(comm);
    return rc ? 1 : 0;
}
