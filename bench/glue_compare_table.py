#!/usr/bin/env python3
"""Markdown table of bench/run_glue_compare.sh's JSON lines: per task and dev metric, each
side's seeds (the values, then mean ± half the range), and per side the training wall time
and the process's CPU time of its fastest run (the least disturbed one on a shared machine;
seconds, sequences per second), with the ratios transformers / bert.c (above 1: bert.c faster).

  python3 bench/glue_compare_table.py bench/results/glue_compare_minilm.jsonl [--runs]

--runs adds one row per run (load average before and after, wall, CPU, eval seconds).
"""
import json
import sys
from collections import defaultdict

TASKS = ["mrpc", "cola", "sts-b", "rte", "sst-2"]
METRICS = {"cola": [("mcc", "Matthews")], "sst-2": [("acc", "accuracy")], "rte": [("acc", "accuracy")],
           "mrpc": [("acc", "accuracy"), ("f1", "F1")], "sts-b": [("pearson", "Pearson"), ("spearmanr", "Spearman")]}
NAMES = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B", "rte": "RTE"}


def mean(xs):
    return sum(xs) / len(xs)


def seeds_cell(runs, key):
    if not runs:
        return "-"
    vals = [100 * r["dev"][key] for r in runs]
    each = ", ".join(f"{v:.1f}" for v in vals)
    if len(vals) == 1:
        return f"{each} (seed {runs[0]['seed']})"
    return f"{each} → **{mean(vals):.1f} ± {(max(vals) - min(vals)) / 2:.1f}**"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = [json.loads(line) for path in args for line in open(path) if line.strip()]
    by = defaultdict(list)
    for r in runs:
        by[(r["side"], r["task"])].append(r)
    for v in by.values():
        v.sort(key=lambda r: r["seed"])
    print("| task (train rows) | dev metric | bert.c: seeds → mean ± half-range | transformers: seeds → mean ± half-range "
          "| bert.c fastest run: train s (seq/s), process CPU s | transformers fastest run: train s (seq/s), process CPU s | transformers / bert.c: train wall, CPU |")
    print("|---|---|---|---|---|---|---|")
    for task in TASKS:
        b, h = by.get(("bert.c", task), []), by.get(("transformers", task), [])
        if not b and not h:
            continue
        n = (b or h)[0]["train_examples"]
        for k, (key, name) in enumerate(METRICS[task]):
            cells = [f"{NAMES[task]} ({n:,})" if k == 0 else "", name, seeds_cell(b, key), seeds_cell(h, key)]
            if k == 0:
                fast = {}
                for name, side in (("b", b), ("h", h)):
                    if side:
                        r = fast[name] = min(side, key=lambda r: r["train_seconds"])
                        cells.append(f"{r['train_seconds']:,.0f} ({r['train_seq_per_s']:.1f}), {r['cpu_seconds']:,.0f}")
                    else:
                        cells.append("-")
                if b and h:
                    wall = fast["h"]["train_seconds"] / fast["b"]["train_seconds"]
                    cpu = fast["h"]["cpu_seconds"] / fast["b"]["cpu_seconds"]
                    cells.append(f"{wall:.1f}x, {cpu:.1f}x")
                else:
                    cells.append("-")
            else:
                cells += ["", "", ""]
            print("| " + " | ".join(cells) + " |")
    if "--runs" in sys.argv:
        print()
        print("| run | seed | load before → after (1/5/15 min) | train s | seq/s | eval s | process wall s | CPU s | dev |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---|")
        for r in runs:
            dev = ", ".join(f"{k} {100 * v:.2f}" for k, v in r["dev"].items())
            print(f"| {r['side']} {r['task']} | {r['seed']} | {r.get('load_before', '')} → {r.get('load_after', '')} | "
                  f"{r['train_seconds']:.0f} | {r['train_seq_per_s']:.1f} | {r['eval_seconds']:.1f} | "
                  f"{r['process_seconds']:.0f} | {r['cpu_seconds']:.0f} | {dev} |")


if __name__ == "__main__":
    main()
