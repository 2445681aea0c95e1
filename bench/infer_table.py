#!/usr/bin/env python3
"""The tables of bench/run_infer_bench.sh from its JSON-lines file (bert.c's `bench_infer
--json` lines tagged with "precision", and bench/infer_peers.py's lines):

1. every measurement: dataset, batch, mode, precision, implementation, seq/s, per-batch
   latency p50/p90/p99, and bert.c packed's speed-up over that row (same dataset, batch,
   precision);
2. per peer, its best mode against bert.c packed (the packing target, >= 1.5x) and its
   padded mode against bert.c padded (every sequence at max_seq: the full-length target,
   >= 1.0x);
3. where bert.c ran int8: its best mode against bert.c bf16's best and every int8 peer's best
   (issue 33's targets: >= 1.5x bert.c bf16 at batch 32; >= 1.2x the best int8 peer at fixed
   shapes, >= 1.5x on real length mixes).

Checks that every implementation ran the same batches: equal real_tokens per dataset and
batch, and equal computed_rows per dataset, batch and mode (padded, dynamic).

    python3 bench/infer_table.py out/infer_bench_<time>.jsonl
"""
import json
import os
import sys

IMPL_ORDER = {"bert.c": 0, "pytorch": 1, "onnxruntime": 2, "openvino": 3}
MODE_ORDER = {"padded": 0, "dynamic": 1, "packed": 2}


def dataset(r):
    name = r["lengths"]
    return os.path.basename(name) if "/" in name else name


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    rows = [dict(r, precision=r.get("precision", "fp32"), dataset=dataset(r)) for r in rows]
    problems = []
    for key in dict.fromkeys((r["dataset"], r["batch"]) for r in rows):
        group = [r for r in rows if (r["dataset"], r["batch"]) == key]
        if len({(r["sequences"], r["real_tokens"]) for r in group}) > 1:
            problems.append(f"{key}: sequences / real tokens differ: " + ", ".join(
                f"{r['impl']} {r['precision']} {r['mode']} {r['sequences']}/{r['real_tokens']}" for r in group))
        for mode in ("padded", "dynamic"):
            if len({r["computed_rows"] for r in group if r["mode"] == mode}) > 1:
                problems.append(f"{key} {mode}: computed rows differ: " + ", ".join(
                    f"{r['impl']} {r['precision']} {r['computed_rows']}" for r in group if r["mode"] == mode))

    def ours(r, mode):
        return next((o for o in rows if o["impl"] == "bert.c" and o["mode"] == mode and o["precision"] == r["precision"]
                     and (o["dataset"], o["batch"]) == (r["dataset"], r["batch"])), None)

    print("| dataset | batch | mode | precision | implementation | seq/s | p50 ms | p90 ms | p99 ms "
          "| rows computed / real | bert.c packed speed-up |")
    print("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|")
    rows.sort(key=lambda r: (r["dataset"].endswith(".json"), r["dataset"], r["batch"],  # GLUE, then SQuAD
                             r["precision"], IMPL_ORDER.get(r["impl"], 9), MODE_ORDER.get(r["mode"], 9)))
    for r in rows:
        packed = ours(r, "packed")
        speedup = f"{packed['sequences_per_second'] / r['sequences_per_second']:.2f}x" if packed and r is not packed else ""
        print(f"| {r['dataset']} | {r['batch']} | {r['mode']} | {r['precision']} | {r['impl']} "
              f"| {r['sequences_per_second']:.1f} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['p99_ms']:.1f} "
              f"| {r['computed_rows'] / max(r['real_tokens'], 1):.2f} | {speedup} |")

    print("\nAgainst each peer in the same precision (targets: packed >= 1.5x the peer's best mode; "
          "padded >= 1.0x the peer's padded):\n")
    print("| dataset | batch | precision | peer | peer's best mode: seq/s | bert.c packed: seq/s | speed-up "
          "| peer padded: seq/s | bert.c padded: seq/s | speed-up |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
    peers = dict.fromkeys((r["dataset"], r["batch"], r["precision"], r["impl"]) for r in rows if r["impl"] != "bert.c")
    for ds, batch, prec, impl in peers:
        mine = [r for r in rows if (r["dataset"], r["batch"], r["precision"], r["impl"]) == (ds, batch, prec, impl)]
        best = max(mine, key=lambda r: r["sequences_per_second"])
        padded = next((r for r in mine if r["mode"] == "padded"), None)
        packed, our_padded = ours(best, "packed"), ours(best, "padded")

        def cell(r):
            return f"{r['sequences_per_second']:.1f}" if r else "-"

        def ratio(a, b):
            return f"{a['sequences_per_second'] / b['sequences_per_second']:.2f}x" if a and b else "-"
        print(f"| {ds} | {batch} | {prec} | {impl} | {cell(best)} ({best['mode']}) | {cell(packed)} "
              f"| {ratio(packed, best)} | {cell(padded)} | {cell(our_padded)} | {ratio(our_padded, padded)} |")
    int8_table(rows)
    variants = dict.fromkeys(r["variant"] for r in rows if r.get("variant"))
    if variants:
        print("\npeers: " + "; ".join(variants))
    for p in problems:
        print(f"\nWARNING (not the same batches): {p}")
    return 1 if problems else 0


def int8_table(rows):
    """bert.c int8's best mode against bert.c bf16's and each int8 peer's best, per dataset and batch."""
    def best(impl, prec, ds, batch):
        mine = [r for r in rows if (r["impl"], r["precision"], r["dataset"], r["batch"]) == (impl, prec, ds, batch)]
        return max(mine, key=lambda r: r["sequences_per_second"]) if mine else None

    keys = dict.fromkeys((r["dataset"], r["batch"]) for r in rows if r["impl"] == "bert.c" and r["precision"] == "int8")
    if not keys:
        return
    peers = list(dict.fromkeys(r["impl"] for r in rows if r["impl"] != "bert.c" and r["precision"] == "int8"))
    print("\nbert.c int8 (best mode) against bert.c bf16 and the int8 peers (best mode each; seq/s, p50 ms per batch, "
          "bert.c int8's speed-up):\n")
    print("| dataset | batch | bert.c int8 | bert.c bf16 | int8 / bf16 | " + " | ".join(f"{p} int8 | int8 / {p}" for p in peers) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|---:|" * len(peers))
    for ds, batch in keys:
        ours = best("bert.c", "int8", ds, batch)
        others = [best("bert.c", "bf16", ds, batch)] + [best(p, "int8", ds, batch) for p in peers]

        def cell(r):
            return f"{r['sequences_per_second']:.1f} ({r['mode']}, {r['p50_ms']:.1f} ms)" if r else "-"
        cells = [f"{cell(r)} | " + (f"{ours['sequences_per_second'] / r['sequences_per_second']:.2f}x" if r else "-")
                 for r in others]
        print(f"| {ds} | {batch} | {cell(ours)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
