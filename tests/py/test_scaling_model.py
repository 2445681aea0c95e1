"""tools/scaling_model.py (docs/distributed.md, "Past one machine"): the parameter count and buckets
against bert.c's layout, the all-reduce formulas at their limits, the overlap rule, and the
published-table calibration. Plain python3; run from anywhere."""
import json
import math
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import scaling_model as sm  # noqa: E402

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print(f"  ok   {what}")
    else:
        failed += 1
        print(f"  FAIL {what}")


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


def main():
    # bert.c's own counts (the bench's --whole_bytes default, bench/RESULTS.md's 440 MB)
    check(sm.num_params("bert-base") == 110106428, "bert-base: 110,106,428 parameters")
    check(sm.num_params("bert-large") == 336226108, "bert-large: 336,226,108 parameters")
    for model in ("bert-base", "bert-large"):
        bk = sm.buckets(model, 4, 25 * sm.MiB)
        check(sum(b for b, _ in bk) == 4 * sm.num_params(model), f"{model}: buckets hold every gradient byte once")
        check(all(b >= 25 * sm.MiB for b, _ in bk[:-1]), f"{model}: every bucket but the last reaches the cap")
        check(bk[-1][1] == 1.0 and bk[-1][0] >= 4 * 30522 * sm.CONFIGS[model]["H"],
              f"{model}: the last bucket holds the word embeddings and is ready at the backward's end")
        check(all(r1 <= r2 for (_, r1), (_, r2) in zip(bk, bk[1:])), f"{model}: buckets ready in order")
    emb = 4 * sum(k for _, k, e in sm.tensors("bert-base") if e)
    with open(os.path.join(ROOT, "bench", "mpi_allreduce_bench.c")) as fh:
        src = fh.read()
    check(f"{4 * 110106428}.0" in src and f"{emb}.0" in src,
          f"bench/mpi_allreduce_bench.c's defaults: the whole gradient and the embeddings' {emb:,} B")
    one = sm.buckets("bert-base", 2, float("inf"))
    check(len(one) == 1 and one[0][0] == 2 * 110106428, "an unbounded bucket is one bucket (16-bit: half the bytes)")

    f = sm.Fabric("f", 10e9, 5e-6)
    cl = sm.Cluster(per_node=1, intra=f, inter=f)
    n = 1e8
    w, c = sm.allreduce_parts(n, 1, cl)
    check(w == 0 and c == 0, "P = 1: no communication")
    w, _ = sm.allreduce_parts(n, 2, cl)
    check(close(w, n / 10e9 + 2 * 5e-6), "ring, P = 2: n/beta + 2 alpha")
    w, _ = sm.allreduce_parts(n, 1024, cl)
    check(close(w, 2 * 1023 / 1024 * n / 10e9 + 2 * 1023 * 5e-6), "ring, P = 1024: 2(P-1)/P n/beta + 2(P-1) alpha")
    w, _ = sm.allreduce_parts(n, 1024, sm.replace(cl, algo="tree"))
    check(close(w, 2 * 1023 / 1024 * n / 10e9 + 2 * 10 * 5e-6), "tree, P = 1024: latency 2 log2(P) alpha")
    w, _ = sm.allreduce_parts(n, 1024, cl, "reduce_scatter")
    check(close(w, 1023 / 1024 * n / 10e9 + 1023 * 5e-6), "reduce-scatter: half a ring all-reduce")
    fin, fout = sm.Fabric("in", 200e9, 1e-6), sm.Fabric("out", 20e9, 5e-6)
    h = sm.Cluster(per_node=8, intra=fin, inter=fout, algo="hier")
    w8, _ = sm.allreduce_parts(n, 8, h)
    check(close(w8, 2 * 7 / 8 * n / 200e9 + 14e-6), "hierarchical inside one node: the node's ring")
    w64, _ = sm.allreduce_parts(n, 64, h)
    check(close(w64, w8 + 2 * 7 / 8 * (n / 8) / 20e9 + 2 * 7 * 5e-6), "hierarchical, 8 nodes: + ring of n/G across nodes")
    shm = sm.Cluster(per_node=2, intra=sm.Fabric("shm", 2e9, 1e-7, shm=True), inter=f)
    w, c = sm.allreduce_parts(n, 2, shm)
    check(w == 0 and close(c, n / 2e9 + 2e-7), "shared memory: the whole all-reduce is CPU time")
    cpu = sm.replace(cl, sum_rate=5e9, copy_rate=8e9, inter=sm.replace(f, tcp=True))
    _, c = sm.allreduce_parts(n, 4, cpu)
    check(close(c, 0.75 * n / 5e9 + 2 * 2 * 0.75 * n / 8e9), "CPU share: summing (P-1)/P n, TCP copies 2 x 2(P-1)/P n")

    # overlap: one channel; only what outlasts the backward is exposed
    one_bucket = [(n, 1.0)]
    c, e = sm.reduction_cost(2, cl, one_bucket, 10.0)
    check(close(e, n / 10e9 + 1e-5), "one bucket at the end: fully exposed")
    early = [(1e6, 0.1), (1e6, 0.5), (n, 1.0)]
    c, e = sm.reduction_cost(2, cl, early, 10.0)
    check(close(e, n / 10e9 + 1e-5), "early buckets hide behind a long backward; the last does not")
    c, e = sm.reduction_cost(2, cl, [(1e10, 0.0), (1e6, 1.0)], 0.5)
    check(close(e, 1e10 / 10e9 + 1e-5 - 0.5 + 1e6 / 10e9 + 1e-5), "a backlog delays the last bucket")

    job = sm.Job(t_fwd=1, t_bwd=2, t_opt=0.1, batch=32, accum=4)
    check(close(sm.efficiency(job, 1, cl), 1.0), "efficiency 1 at P = 1")
    t_each, parts_each = sm.step_time(job, 64, cl)
    t_post, parts_post = sm.step_time(sm.replace(job, post=True), 64, cl)
    check(close(parts_each["exposed"], 4 * parts_post["exposed"]), "post-accumulation: one reduction instead of k")
    t_z, parts_z = sm.step_time(sm.replace(job, zero1=True), 64, cl)
    check(close(parts_z["opt"], 0.1 / 64) and parts_z["gather"] > 0, "ZeRO-1: optimizer / P, plus an all-gather")

    with open(os.path.join(ROOT, "tools", "scaling_published.json")) as fh:
        pub = json.load(fh)
    rows = sm.published_rows(pub)
    bases = [r for r in rows if r["P"] == r["base_P"]]
    check(bases and all(abs(r["x_pred"] / r["x_pub"] - 1) < 1e-6 for r in bases),
          "published: every series' first row is matched exactly (the calibration)")
    check(all(r["eff_pred"] <= 1.0 + 1e-9 for r in rows), "published: no predicted efficiency above 1")
    check(len(rows) == sum(len(s["rows"]) for t in pub["tables"] for s in t["series"]), "published: every row predicted")


if __name__ == "__main__":
    main()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
