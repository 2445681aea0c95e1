#!/usr/bin/env python3
"""Data-parallel scaling model for bert.c pre-training (docs/distributed.md, "Past one machine").

Predicts sequences/s and scaling efficiency of synchronous data parallelism from P = 1 to
1,024 processes out of: the compute time of one micro-batch (forward, backward, and the
optimizer step), the gradient's bytes and how they are cut into buckets, and the fabric's
latency and bandwidth. Plain python3, no third-party modules.

    tools/scaling_model.py cpu [--phase 1|2] [--accum K] [--post] [--half] [--zero1] [--algo ring|tree]
    tools/scaling_model.py published            # predicted against NVIDIA's published tables
    tools/scaling_model.py local                # this machine: the bench's simulated backward, and P = 2
    tools/scaling_model.py custom --t_fwd S --t_bwd S [--t_opt S] --batch B [--accum K] ...
    tools/scaling_model.py svg --out docs/distributed_scaling.svg
    common: --calibration FILE (a JSON line of bench/run_allreduce_bench.sh; default: the newest
            bench/results/allreduce_bench_*.jsonl), --markdown

The model, per optimizer step of one process (all processes are alike; no stragglers):

    step = k * (t_fwd + t_bwd) + t_opt + R * (cpu + exposed)

k micro-batches; R = k reductions (one per micro-batch, DDP's default) or 1 (with
--allreduce_post_accumulation). Each reduction all-reduces the gradient bucket by bucket:

  - buckets: bert.c's parameter tensors in reverse layout order (heads, pooler, layers L-1..0,
    embeddings) packed as DDP packs them: a tensor joins the open bucket, which closes once it
    holds >= bucket_bytes (25 MiB: DDP's bucket_cap_mb). A bucket is ready when its last tensor's
    gradient is: gradients appear at a uniform rate over the non-embedding bytes through the
    backward, and the embeddings' (the word embeddings: 30522 x H floats, 94 MB at bert-base)
    at its very end, so the last bucket is never hidden.
  - wire time of an all-reduce of n bytes on P ranks (alpha: s per step, beta: bus bandwidth,
    nccl-tests' definition, B/s):
        ring  2(P-1)/P * n/beta + 2(P-1) * alpha
        tree  2(P-1)/P * n/beta + 2 ceil(log2 P) * alpha   (pipelined double binary tree: ring's
                                                           bandwidth term, logarithmic latency)
        hier  G ranks per node, N nodes: reduce-scatter inside the node, all-reduce of n/G across
              nodes (each rank through its share of the node's NICs), all-gather inside:
              2 (G-1)/G * n/beta_in + 2(G-1) alpha_in + 2(N-1)/N * (n/G)/beta_out + 2(N-1) alpha_out
  - the buckets go through one channel in order: bucket i starts at max(ready_i, end_{i-1});
    exposed = how far the last one ends past the end of the backward.
  - cpu: the part of the communication that needs the cores that compute (CPU nodes only):
    summing the received (P-1)/P * n bytes at the rate one core sums a += b, and, over TCP, the
    kernel's copy of every byte sent and received, 2 * 2(P-1)/P * n, at memcpy rate. On a
    node whose every core runs GEMMs none of it can hide, so it is charged in full. Shared
    memory (ranks on one machine) is all CPU work: its whole all-reduce time is charged.
  - ZeRO-1 (--zero1): reduce-scatter in the backward ((P-1)/P * n/beta + (P-1) alpha per
    bucket), the optimizer on 1/P of the parameters (t_opt / P), then an all-gather of the
    updated parameters that nothing hides.

Throughput = P * k * batch / step; efficiency = throughput / (P * throughput at P = 1), where
P = 1 runs no communication at all.
"""
import argparse
import glob
import json
import math
import os
import sys
from dataclasses import dataclass, replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GB = 1e9
MiB = 1024 * 1024

# ------------------------------------------------------------------------------ models

CONFIGS = {
    "bert-base": dict(H=768, L=12, I=3072, V=30522, P=512, T=2),
    "bert-large": dict(H=1024, L=24, I=4096, V=30522, P=512, T=2),
}


def tensors(model):
    """(name, numel, is_embedding) in bert.c's parameter layout order (src/model/bert.c,
    layout_params with the pre-training heads; the MLM decoder is tied to the word embeddings)."""
    c = CONFIGS[model]
    H, I = c["H"], c["I"]
    t = [("word", c["V"] * H, True), ("position", c["P"] * H, True), ("token_type", c["T"] * H, True),
         ("emb_ln.w", H, True), ("emb_ln.b", H, True)]
    for l in range(c["L"]):
        t += [(f"{l}.{n}", s, False) for n, s in (
            ("q.w", H * H), ("k.w", H * H), ("v.w", H * H), ("q.b", H), ("k.b", H), ("v.b", H),
            ("attn_out.w", H * H), ("attn_out.b", H), ("ln1.w", H), ("ln1.b", H),
            ("ffn_in.w", I * H), ("ffn_in.b", I), ("ffn_out.w", H * I), ("ffn_out.b", H), ("ln2.w", H), ("ln2.b", H))]
    t += [("pooler.w", H * H, False), ("pooler.b", H, False), ("mlm.bias", c["V"], False),
          ("mlm.dense.w", H * H, False), ("mlm.dense.b", H, False), ("mlm.ln.w", H, False), ("mlm.ln.b", H, False),
          ("nsp.w", 2 * H, False), ("nsp.b", 2, False)]
    return t


def num_params(model):
    return sum(n for _, n, _ in tensors(model))


def buckets(model, elem_bytes, bucket_bytes):
    """[(bytes, ready)]: ready is the fraction of the backward done when the bucket is complete."""
    ts = list(reversed(tensors(model)))
    body = sum(n for _, n, e in ts if not e)
    out, cur, done = [], 0, 0
    for _, n, emb in ts:
        if not emb:
            done += n
        cur += n * elem_bytes
        ready = 1.0 if emb else done / body
        if cur >= bucket_bytes:
            out.append((cur, ready))
            cur = 0
    if cur:
        out.append((cur, 1.0))
    return out


# ------------------------------------------------------------------------------ fabrics

@dataclass(frozen=True)
class Fabric:
    name: str
    beta: float           # bus bandwidth per rank, B/s
    alpha: float          # latency per algorithm step, s
    tcp: bool = False     # the kernel copies every byte sent and received (CPU time)
    shm: bool = False     # shared memory: the whole transfer is CPU work
    note: str = ""


def gbit(x):
    return x * 1e9 / 8


# Inter-node fabrics for the CPU prediction: 90% of line rate reaches the bus bandwidth (NCCL's
# own figures: 12.2 GB/s on a 100 Gb/s card, 24 GB/s on 200 Gb/s HDR, per NVIDIA's NCCL
# maintainer in NVIDIA/nccl-tests#29 and NVIDIA/nccl#412). Latency per step: MPI over TCP on
# 25 GbE ~25 us; RDMA (RoCE, InfiniBand EDR/NDR) 2-5 us end to end through MPI (assumptions
# in the usual range: IB hardware ~1 us, plus the MPI library).
CPU_FABRICS = [
    Fabric("25 Gb/s Ethernet (TCP)", 0.9 * gbit(25), 25e-6, tcp=True, note="MPI over TCP: 25 us per step, kernel copies"),
    Fabric("100 Gb/s RDMA", 0.9 * gbit(100), 3e-6, note="RoCE or EDR InfiniBand: 3 us per step"),
    Fabric("400 Gb/s RDMA", 0.9 * gbit(400), 2e-6, note="NDR InfiniBand: 2 us per step"),
]


@dataclass(frozen=True)
class Cluster:
    per_node: int                 # ranks per node (G)
    intra: Fabric                 # between the ranks of one node
    inter: Fabric                 # across nodes, per rank (its share of the node's NICs)
    algo: str = "ring"            # ring | tree | hier
    sum_rate: float = 0.0         # B/s one core sums a += b; 0: the reduction costs no compute (GPUs)
    copy_rate: float = 0.0        # B/s memcpy, for TCP's kernel copies


def _coll(n, P, f, steps_factor, bytes_factor, algo):
    """One collective on P ranks of one fabric: bytes_factor * (P-1)/P * n / beta + latency."""
    if P <= 1:
        return 0.0
    lat = steps_factor * (P - 1) if algo != "tree" else steps_factor * math.ceil(math.log2(P))
    return bytes_factor * (P - 1) / P * n / f.beta + lat * f.alpha


def allreduce_parts(n, P, cl, kind="allreduce"):
    """(wire seconds, cpu seconds) of one all-reduce (or 'reduce_scatter' / 'allgather', each
    half of one) of n bytes on P ranks of cluster cl."""
    half = kind != "allreduce"
    f2 = 1 if half else 2
    G = min(cl.per_node, P)
    N = math.ceil(P / G)
    wire = cpu = 0.0
    if N == 1:
        t = _coll(n, G, cl.intra, f2, f2, "ring" if cl.algo == "hier" else cl.algo)
        if cl.intra.shm:
            cpu += t
        else:
            wire += t
    elif cl.algo == "hier" and G > 1:
        t_in = _coll(n, G, cl.intra, f2, f2, "ring")
        t_out = _coll(n / G, N, cl.inter, f2, f2, "ring")
        if cl.intra.shm:
            cpu += t_in
        else:
            wire += t_in
        wire += t_out
    else:
        # one ring (or tree) over all P ranks; with G ranks per node sharing the node's NICs the
        # per-rank bandwidth is inter.beta (the Cluster gives it per rank)
        wire += _coll(n, P, cl.inter, f2, f2, cl.algo)
    # the reduction's arithmetic and TCP's copies on the cores that compute
    if cl.sum_rate > 0 and kind != "allgather" and not (N == 1 and cl.intra.shm):
        cpu += (P - 1) / P * n / cl.sum_rate
    if cl.inter.tcp and N > 1 and cl.copy_rate > 0:
        cpu += 2 * f2 * (P - 1) / P * n / cl.copy_rate
    return wire, cpu


def reduction_cost(P, cl, bkts, t_bwd, kind="allreduce"):
    """(cpu, exposed wire) seconds of one bucketed reduction overlapped with a backward of t_bwd."""
    if P <= 1:
        return 0.0, 0.0
    end = 0.0
    cpu = 0.0
    for nbytes, ready in bkts:
        w, c = allreduce_parts(nbytes, P, cl, kind)
        end = max(end, ready * t_bwd) + w
        cpu += c
    return cpu, max(0.0, end - t_bwd)


@dataclass(frozen=True)
class Job:
    t_fwd: float                  # s per micro-batch
    t_bwd: float
    t_opt: float                  # s per optimizer step
    batch: int                    # sequences per micro-batch
    accum: int = 1                # micro-batches per optimizer step
    post: bool = False            # --allreduce_post_accumulation: one reduction per step
    model: str = "bert-base"
    elem_bytes: int = 4           # 4 fp32, 2 fp16/bf16 gradients
    bucket_bytes: float = 25 * MiB
    zero1: bool = False


def step_time(job, P, cl):
    """Seconds per optimizer step and its parts."""
    bk = buckets(job.model, job.elem_bytes, job.bucket_bytes)
    reductions = 1 if job.post else job.accum
    kind = "reduce_scatter" if job.zero1 else "allreduce"
    cpu, exposed = reduction_cost(P, cl, bk, job.t_bwd, kind)
    t_opt = job.t_opt / P if job.zero1 and P > 1 else job.t_opt
    gather = 0.0
    if job.zero1 and P > 1:   # the updated parameters (fp32) come back; nothing to hide behind
        w, c = allreduce_parts(num_params(job.model) * 4, P, cl, "allgather")
        gather = w + c
    compute = job.accum * (job.t_fwd + job.t_bwd)
    total = compute + t_opt + reductions * (cpu + exposed) + gather
    return total, dict(compute=compute, opt=t_opt, cpu=reductions * cpu, exposed=reductions * exposed, gather=gather)


def throughput(job, P, cl):
    t, parts = step_time(job, P, cl)
    return P * job.accum * job.batch / t, parts


def efficiency(job, P, cl, base_P=1, base_cl=None):
    x, _ = throughput(job, P, cl)
    x0, _ = throughput(job, base_P, base_cl or cl)
    return x / (x0 * P / base_P)


# ------------------------------------------------------------------------------ calibration

def newest_calibration():
    files = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "allreduce_bench_*.jsonl")))
    return files[-1] if files else None


def load_calibration(path):
    if not path:
        sys.exit("scaling_model: no calibration: run bench/run_allreduce_bench.sh, or pass --calibration FILE")
    with open(path) as f:
        line = [l for l in f if l.startswith("{")][-1]
    d = json.loads(line)
    fit, local = d["fit"], d["local"]
    shm = Fabric("shared memory (measured)", fit["allreduce_beta_GBs"] * GB, fit["allreduce_alpha_us"] * 1e-6, shm=True,
                 note=f"OpenMPI vader, {d['ranks']} ranks, {os.path.basename(path)}")
    return dict(path=path, data=d, shm=shm, sum_rate=local["sum_GBs"] * GB, copy_rate=local["memcpy_GBs"] * GB)


# bert.c on this machine (bench/RESULTS.md, "Final run: no other jobs on the machine", raw
# bench/results/model_bench_20261121_111535.jsonl; phase 2: "Padded batches: unpadding",
# model_bench_20261121_113213.jsonl): 2 threads, AMD EPYC (AVX-512), ms per step.
CPU_PHASES = {
    1: dict(batch=32, seq=128, t_fwd=3.51239, t_bwd=6.93023, t_opt=0.21129, cpu_ms=21229.94, wall_ms=10653.91,
            seq_s=3.0036, source="model_bench_20261121_111535.jsonl (batch 32, seq 128, 20 predictions, full length)"),
    2: dict(batch=8, seq=512, t_fwd=2.76659, t_bwd=5.27540, t_opt=0.18140, cpu_ms=16391.22, wall_ms=8223.39,
            seq_s=0.9728, source="model_bench_20261121_113213.jsonl (batch 8, seq 512, 80 predictions, 28% padding)"),
}


def cpu_job(phase, accum=1, post=False, half=False, zero1=False, threads=2):
    c = CPU_PHASES[phase]
    scale = 1.0
    if threads == 1:   # one thread: the 2-thread run's CPU time per step is the 1-thread wall time
        scale = c["cpu_ms"] / c["wall_ms"]
    return Job(t_fwd=c["t_fwd"] * scale, t_bwd=c["t_bwd"] * scale, t_opt=c["t_opt"] * scale, batch=c["batch"],
               accum=accum, post=post, model="bert-base", elem_bytes=2 if half else 4, zero1=zero1)


def cpu_cluster(cal, fabric, algo="ring"):
    return Cluster(per_node=1, intra=cal["shm"], inter=fabric, algo=algo, sum_rate=cal["sum_rate"],
                   copy_rate=cal["copy_rate"])


P_LIST = [2 ** i for i in range(11)]


def fmt_table(header, rows, markdown):
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
        out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
        return "\n".join(out)
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(c).rjust(w[i]) if i else str(c).ljust(w[i]) for i, c in enumerate(r))
    return "\n".join([line(header), line(["-" * x for x in w])] + [line(r) for r in rows])


def cmd_cpu(a, cal):
    job = cpu_job(a.phase, a.accum, a.post, a.half, a.zero1)
    c = CPU_PHASES[a.phase]
    print(f"bert-base phase {a.phase} on this CPU (2 threads per process, one process per node): batch {c['batch']}, "
          f"seq {c['seq']}, k = {a.accum}{' (post-accumulation)' if a.post else ''}, "
          f"{'16-bit' if a.half else 'fp32'} gradients, {'ZeRO-1, ' if a.zero1 else ''}{a.algo}; "
          f"t_fwd {job.t_fwd:.3f} s, t_bwd {job.t_bwd:.3f} s, t_opt {job.t_opt:.3f} s ({c['source']})")
    print(f"calibration: {os.path.relpath(cal['path'], ROOT)}: a += b {cal['sum_rate']/GB:.2f} GB/s, "
          f"memcpy {cal['copy_rate']/GB:.2f} GB/s per core\n")
    header = ["P"]
    for f in CPU_FABRICS:
        header += [f"{f.name}: seq/s", "eff", "comm s/step"]
    rows = []
    for P in P_LIST:
        r = [P]
        for f in CPU_FABRICS:
            cl = cpu_cluster(cal, f, a.algo)
            x, parts = throughput(job, P, cl)
            r += [f"{x:,.2f}" if x < 100 else f"{x:,.0f}", f"{100 * efficiency(job, P, cl):.1f}%",
                  f"{parts['cpu'] + parts['exposed'] + parts['gather']:.3f}"]
        rows.append(r)
    print(fmt_table(header, rows, a.markdown))


# ------------------------------------------------------------------------------ published

# NVLink / NVSwitch bus bandwidth that NCCL's all-reduce reaches inside one machine, and the
# per-GPU share of the node's InfiniBand for multi-node runs (90% of line rate, see CPU_FABRICS).
GPU_SYSTEMS = {
    "dgx-a100-80g": dict(
        desc="DGX A100: 8x A100 80GB, NVSwitch; 8x 200 Gb/s HDR InfiniBand (one per GPU)",
        intra=Fabric("NVSwitch (A100)", 230 * GB, 1e-6, note="NCCL all-reduce busbw ~230 GB/s (232.5 in NVIDIA/nccl#1048)"),
        inter=Fabric("HDR IB per GPU", 0.9 * gbit(200), 5e-6, note="200 Gb/s per GPU"),
        hbm=2.0e12, gpus=8),
    "dgx1-v100": dict(
        desc="DGX-1: 8x V100 32GB, NVLink hybrid cube-mesh",
        intra=Fabric("NVLink (DGX-1)", 130 * GB, 1e-6, note="NCCL all-reduce busbw ~130 GB/s"),
        inter=Fabric("EDR IB per GPU", 0.9 * gbit(100) / 2, 5e-6), hbm=0.9e12, gpus=8),
    "dgx2-v100": dict(
        desc="DGX-2: 16x V100 32GB, NVSwitch",
        intra=Fabric("NVSwitch (V100)", 130 * GB, 1e-6, note="assumed as DGX-1's"),
        inter=Fabric("EDR IB per GPU", 0.9 * gbit(100) / 2, 5e-6), hbm=0.9e12, gpus=16),
    "dgx2h-v100": dict(
        desc="DGX-2H: 16x V100 32GB (450 W), NVSwitch; 8x 100 Gb/s EDR InfiniBand (one per 2 GPUs)",
        intra=Fabric("NVSwitch (V100)", 130 * GB, 1e-6),
        inter=Fabric("EDR IB per GPU", 0.9 * gbit(100) / 2, 5e-6, note="100 Gb/s per 2 GPUs"), hbm=0.9e12, gpus=16),
}

# LAMB's step reads and writes per parameter: fp32 master weight, m, v (read + write: 24 B),
# the gradient twice (norm, update: 4-8 B), the 16-bit weight copy, the trust ratio's norms:
# ~40 B, at 80% of the HBM bandwidth.
LAMB_BYTES_PER_PARAM = 40


def grad_elem_bytes(table_id, precision):
    """Bytes per gradient element in the published run's all-reduce."""
    if precision in ("fp32", "tf32"):
        return 4
    if table_id.startswith("paddle"):
        return 4     # AMP (O1) keeps fp32 parameters, so fp32 gradients (assumption)
    return 2         # PyTorch: --allreduce_post_accumulation_fp16; TF2: Horovod Compression.fp16


def published_rows(pub, cal=None):
    """Each published row with the model's prediction, calibrated on the series' first row."""
    out = []
    for tb in pub["tables"]:
        sysd = GPU_SYSTEMS[tb["system"]]
        nparams = num_params("bert-large")
        t_opt = nparams * LAMB_BYTES_PER_PARAM / (0.8 * sysd["hbm"])
        for s in tb["series"]:
            eb = grad_elem_bytes(tb["id"], s["precision"])
            base = s["rows"][0]

            def cluster(nodes, per_node):
                return Cluster(per_node=per_node, intra=sysd["intra"], inter=sysd["inter"], algo="hier")

            def job(k, t_mb):
                # all three recipes reduce once per step, after the last micro-batch's backward,
                # in one piece (PyTorch: DDP with bucket_cap_mb = the GPU's memory, so one bucket;
                # TF2 / Paddle: post-accumulation all-reduce of the accumulated gradients)
                return Job(t_fwd=t_mb / 3, t_bwd=2 * t_mb / 3, t_opt=t_opt, batch=s["b"], accum=k, post=True,
                           model="bert-large", elem_bytes=eb, bucket_bytes=float("inf"))

            # calibrate t_mb (one micro-batch's forward + backward) on the base row
            n0, g0, k0, x0, _ = base
            P0 = n0 * g0
            lo, hi = 1e-6, 1e3
            for _ in range(200):
                mid = math.sqrt(lo * hi)
                x, _ = throughput(job(k0, mid), P0, cluster(n0, g0))
                lo, hi = (mid, hi) if x > x0 else (lo, mid)
            t_mb = math.sqrt(lo * hi)
            for n, g, k, x_pub, sc_pub in s["rows"]:
                P = n * g
                x_pred, parts = throughput(job(k, t_mb), P, cluster(n, g))
                step = sum(parts.values())
                out.append(dict(table=tb["id"], source=tb["source"], section=tb["section"], seq=s["seq"],
                                precision=s["precision"], b=s["b"], nodes=n, gpus=g, P=P, k=k, x_pub=x_pub,
                                sc_pub=sc_pub, eff_pub=(x_pub / x0) / (P / P0), x_pred=x_pred,
                                eff_pred=(x_pred / x0) / (P / P0), comm_share=(parts["exposed"] + parts["cpu"]) / step,
                                opt_share=parts["opt"] / step, t_mb=t_mb, elem_bytes=eb, base_P=P0))
    return out


def cmd_published(a, cal):
    with open(os.path.join(ROOT, "tools", "scaling_published.json")) as f:
        pub = json.load(f)
    rows = published_rows(pub)
    header = ["table", "seq", "prec", "b", "nodes x GPUs", "k", "published seq/s", "published eff",
              "predicted seq/s", "predicted eff", "pred - pub (points)", "comm % of step", "optimizer % of step"]
    body = []
    for r in rows:
        if a.only and not r["table"].startswith(a.only):
            continue
        body.append([r["table"], r["seq"], r["precision"], r["b"], f"{r['nodes']} x {r['gpus']}", r["k"],
                     f"{r['x_pub']:,.0f}", f"{100 * r['eff_pub']:.1f}%", f"{r['x_pred']:,.0f}",
                     f"{100 * r['eff_pred']:.1f}%", f"{100 * (r['eff_pred'] - r['eff_pub']):+.1f}",
                     f"{100 * r['comm_share']:.2f}", f"{100 * r['opt_share']:.2f}"])
    print(fmt_table(header, body, a.markdown))
    if a.summary:
        print()
        summary(rows, a.markdown)


def summary(rows, markdown):
    """Largest-scale row of every series: the model's error there."""
    header = ["table", "seq", "prec", "largest P", "published eff", "predicted eff", "pred - pub (points)"]
    body, seen = [], {}
    for r in rows:
        seen[(r["table"], r["seq"], r["precision"])] = r
    for (t, s, p), r in seen.items():
        body.append([t, s, p, f"{r['nodes']} x {r['gpus']}", f"{100 * r['eff_pub']:.1f}%", f"{100 * r['eff_pred']:.1f}%",
                     f"{100 * (r['eff_pred'] - r['eff_pub']):+.1f}"])
    print(fmt_table(header, body, markdown))


# ------------------------------------------------------------------------------ this machine

def cmd_local(a, cal):
    d = cal["data"]
    ov = d.get("overlap")
    shm = cal["shm"]
    print(f"calibration {os.path.relpath(cal['path'], ROOT)}: shared memory alpha {shm.alpha * 1e6:.2f} us/step, "
          f"beta {shm.beta / GB:.3f} GB/s (bus); a += b {cal['sum_rate'] / GB:.2f} GB/s, memcpy {cal['copy_rate'] / GB:.2f} GB/s")
    if ov:
        rows = {r["mode"] + (f" {r['poll_ms']:g}" if r["mode"].startswith("iallreduce +") else ""): r for r in ov["rows"]}
        compute = rows["compute only"]["total_s"]
        whole = d["whole_bytes"]
        last = ov["last_bytes"] if ov["last_bytes"] <= whole / 2 else whole / 4
        cap = ov["bucket_bytes"]
        rest = whole - last
        bk, pos = [], 0
        while pos < rest:
            n = min(cap, rest - pos)
            pos += n
            bk.append((n, pos / rest))
        bk.append((last, 1.0))
        cl_cpu = Cluster(per_node=2, intra=shm, inter=shm)
        cl_wire = Cluster(per_node=2, intra=replace(shm, shm=False), inter=shm)
        cpu, _ = reduction_cost(2, cl_cpu, bk, compute)
        _, exp_wire = reduction_cost(2, cl_wire, bk, compute)
        print(f"\nsimulated backward ({len(bk)} buckets, {whole / 1e6:.0f} MB, {compute:.2f} s of compute), exposed seconds:")
        print(f"  model, communication is CPU work on the computing core (charged in full): {cpu:.3f}")
        print(f"  model, communication as a wire that overlaps (GPU-like):                  {exp_wire:.3f}")
        for k, r in rows.items():
            if k != "compute only":
                print(f"  measured {k:<30s} {r['exposed_s']:.3f}")
    # P = 2 on this machine: 2 ranks x 1 thread against 1 process x 2 threads
    print("\nbert-base on this machine, 2 processes x 1 thread over shared memory, against 1 process x 2 threads:")
    for ph in (1, 2):
        one = cpu_job(ph)
        j1 = cpu_job(ph, threads=1)
        x1, _ = throughput(one, 1, cpu_cluster(cal, CPU_FABRICS[0]))
        cl = Cluster(per_node=2, intra=shm, inter=shm, sum_rate=cal["sum_rate"], copy_rate=cal["copy_rate"])
        x2, parts = throughput(j1, 2, cl)
        print(f"  phase {ph}: 1 x 2 threads {x1:.3f} seq/s; 2 x 1 thread {x2:.3f} seq/s "
              f"(communication {parts['cpu'] + parts['exposed']:.3f} s of a {sum(parts.values()):.2f} s step)")


# ------------------------------------------------------------------------------ custom

def cmd_custom(a, cal):
    def job_for(P):
        """--global_batch: the step's sequences fixed (NVIDIA's recipe: 65,536 in phase 1, 32,768 in
        phase 2), so each process accumulates global / (P batch) micro-batches; else --accum."""
        accum = max(1, a.global_batch // (P * a.batch)) if a.global_batch else a.accum
        return Job(t_fwd=a.t_fwd, t_bwd=a.t_bwd, t_opt=a.t_opt, batch=a.batch, accum=accum, post=a.post,
                   model=a.model, elem_bytes=2 if a.half else 4, bucket_bytes=a.bucket_mb * MiB, zero1=a.zero1)
    inter = Fabric("custom", a.beta_gbs * GB, a.alpha_us * 1e-6, tcp=a.tcp)
    intra = Fabric("intra", (a.intra_beta_gbs or a.beta_gbs) * GB, (a.intra_alpha_us or a.alpha_us) * 1e-6)
    cl = Cluster(per_node=a.per_node, intra=intra, inter=inter, algo=a.algo, sum_rate=a.sum_gbs * GB,
                 copy_rate=a.copy_gbs * GB)
    x1, _ = throughput(job_for(1), 1, cl)
    rows = []
    for P in P_LIST:
        job = job_for(P)
        x, parts = throughput(job, P, cl)
        t, _ = step_time(job, P, cl)
        rows.append([P, job.accum, f"{x:,.2f}", f"{100 * x / (x1 * P):.1f}%", f"{100 * parts['exposed'] / t:.2f}",
                     f"{parts['cpu']:.4f}", f"{parts['exposed']:.4f}", f"{parts['gather']:.4f}"])
    print(fmt_table(["P", "k", "seq/s", "eff", "comm % of step", "cpu s/step", "exposed s/step", "all-gather s/step"],
                    rows, a.markdown))


# ------------------------------------------------------------------------------ svg

def svg_chart(x0, y0, w, h, title, series, xlabel, ylabel, ymin, ymax, xs, ystep):
    """One panel: lines (and points) of efficiency against log2 P."""
    lx = lambda v: x0 + 50 + (math.log2(v) - math.log2(xs[0])) / (math.log2(xs[-1]) - math.log2(xs[0])) * (w - 70)
    ly = lambda v: y0 + 30 + (ymax - v) / (ymax - ymin) * (h - 75)
    s = [f'<text x="{x0 + w / 2}" y="{y0 + 16}" text-anchor="middle" font-weight="bold">{title}</text>']
    for i in range(int(round((ymax - ymin) / ystep)) + 1):
        v = ymin + ystep * i
        s.append(f'<line x1="{x0 + 50}" y1="{ly(v):.1f}" x2="{x0 + w - 20}" y2="{ly(v):.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{x0 + 45}" y="{ly(v) + 4:.1f}" text-anchor="end">{100 * v:.0f}%</text>')
    for v in xs:
        s.append(f'<line x1="{lx(v):.1f}" y1="{ly(ymin):.1f}" x2="{lx(v):.1f}" y2="{ly(ymin) + 4:.1f}" stroke="#333"/>')
        s.append(f'<text x="{lx(v):.1f}" y="{ly(ymin) + 16:.1f}" text-anchor="middle">{v}</text>')
    s.append(f'<text x="{x0 + w / 2}" y="{y0 + h - 8}" text-anchor="middle">{xlabel}</text>')
    s.append(f'<text x="{x0 + 12}" y="{y0 + h / 2}" text-anchor="middle" transform="rotate(-90 {x0 + 12} {y0 + h / 2})">{ylabel}</text>')
    s.append(f'<rect x="{x0 + 50}" y="{ly(ymax):.1f}" width="{w - 70}" height="{ly(ymin) - ly(ymax):.1f}" fill="none" stroke="#333"/>')
    for k, (label, pts, color, dash, marker) in enumerate(series):
        if dash is not None:
            d = " ".join(f"{'M' if i == 0 else 'L'}{lx(x):.1f},{ly(y):.1f}" for i, (x, y) in enumerate(pts))
            s.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2"{" stroke-dasharray=%s" % chr(34) + dash + chr(34) if dash else ""}/>')
        if marker:
            for x, y in pts:
                s.append(f'<circle cx="{lx(x):.1f}" cy="{ly(y):.1f}" r="3.5" fill="{color}"/>')
        yy = ly(ymin) - 12 - 15 * (len(series) - 1 - k)
        if dash is None:   # points only: a dot in the legend
            s.append(f'<circle cx="{x0 + 72}" cy="{yy:.1f}" r="3.5" fill="{color}"/>')
        else:
            s.append(f'<line x1="{x0 + 62}" y1="{yy:.1f}" x2="{x0 + 82}" y2="{yy:.1f}" stroke="{color}" stroke-width="2"'
                     f'{" stroke-dasharray=%s" % chr(34) + dash + chr(34) if dash else ""}/>')
        s.append(f'<text x="{x0 + 88}" y="{ly(ymin) - 8 - 15 * (len(series) - 1 - k):.1f}">{label}</text>')
    return s


def cmd_svg(a, cal):
    colors = ["#1f77b4", "#d62728", "#2ca02c"]
    ser = []
    for i, f in enumerate(CPU_FABRICS):
        for ph, dash in ((1, ""), (2, "5,3")):
            job = cpu_job(ph)
            cl = cpu_cluster(cal, f)
            ser.append((f"{f.name}, phase {ph}", [(P, efficiency(job, P, cl)) for P in P_LIST], colors[i], dash, False))
    W, H = 980, 420
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{H}" fill="white"/>']
    s += svg_chart(0, 0, 490, H, "bert.c bert-base on this CPU, predicted (k = 1, fp32, 25 MiB buckets)", ser,
                   "processes P (one 2-core node each)", "scaling efficiency", 0.90, 1.0, P_LIST, 0.02)
    with open(os.path.join(ROOT, "tools", "scaling_published.json")) as f:
        pub = json.load(f)
    rows = [r for r in published_rows(pub) if r["table"] == "pyt-a100-multinode"]
    ser2 = []
    for i, (seq, prec) in enumerate(((128, "fp16"), (128, "tf32"), (512, "fp16"), (512, "tf32"))):
        rs = [r for r in rows if r["seq"] == seq and r["precision"] == prec]
        c = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"][i]
        ser2.append((f"seq {seq} {prec}: published", [(r["nodes"], r["eff_pub"]) for r in rs], c, None, True))
        ser2.append((f"seq {seq} {prec}: predicted", [(r["nodes"], r["eff_pred"]) for r in rs], c, "4,3", False))
    s += svg_chart(490, 0, 490, H, "NVIDIA's PyTorch BERT-large, DGX A100 nodes: strong scaling", ser2,
                   "DGX A100 nodes (8 GPUs each)", "efficiency against 1 node", 0.75, 1.05, [1, 2, 4, 8, 16, 32], 0.05)
    s.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(s) + "\n")
    print(f"wrote {a.out}")


# ------------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["cpu", "published", "local", "custom", "svg", "buckets"])
    ap.add_argument("--calibration", default=None)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--phase", type=int, default=1, choices=[1, 2])
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--post", action="store_true", help="--allreduce_post_accumulation")
    ap.add_argument("--half", action="store_true", help="16-bit gradients in the reduction")
    ap.add_argument("--zero1", action="store_true")
    ap.add_argument("--algo", default="ring", choices=["ring", "tree", "hier"])
    ap.add_argument("--only", default="", help="published: tables whose id starts with this")
    ap.add_argument("--summary", action="store_true", help="published: also the largest-P row of every series")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "distributed_scaling.svg"))
    # custom
    ap.add_argument("--model", default="bert-base", choices=sorted(CONFIGS))
    ap.add_argument("--t_fwd", type=float, default=0.0)
    ap.add_argument("--t_bwd", type=float, default=0.0)
    ap.add_argument("--t_opt", type=float, default=0.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--global_batch", type=int, default=0, help="custom: sequences per step, fixed (k = G / (P batch))")
    ap.add_argument("--bucket_mb", type=float, default=25.0)
    ap.add_argument("--beta_gbs", type=float, default=gbit(25) * 0.9 / GB)
    ap.add_argument("--alpha_us", type=float, default=25.0)
    ap.add_argument("--intra_beta_gbs", type=float, default=0.0)
    ap.add_argument("--intra_alpha_us", type=float, default=0.0)
    ap.add_argument("--per_node", type=int, default=1)
    ap.add_argument("--tcp", action="store_true")
    ap.add_argument("--sum_gbs", type=float, default=0.0)
    ap.add_argument("--copy_gbs", type=float, default=0.0)
    a = ap.parse_args()
    if a.command == "buckets":
        for name in CONFIGS:
            bk = buckets(name, 4, 25 * MiB)
            print(f"{name}: {num_params(name):,} parameters, {num_params(name) * 4:,} B fp32; {len(bk)} buckets of "
                  f"<= 25 MiB + overflow: " + ", ".join(f"{b / 1e6:.1f} MB@{r:.2f}" for b, r in bk))
        return
    need_cal = a.command in ("cpu", "local", "svg")
    cal = load_calibration(a.calibration or newest_calibration()) if need_cal else None
    {"cpu": cmd_cpu, "published": cmd_published, "local": cmd_local, "custom": cmd_custom, "svg": cmd_svg}[a.command](a, cal)


if __name__ == "__main__":
    main()
