#!/usr/bin/env python3
"""Markdown table of bench/run_squad_compare.sh's JSON lines: one row per run (side, seed, exact
match and F1 as `bert squad_eval` scores the predicted articles, training wall seconds and
features per second, prediction wall seconds and features per second, CPU seconds of each
phase), then per side the mean ± the standard deviation of EM and F1 over its seeds, the
difference of the two sides' means against its standard error (Welch's: how far apart they are
in units of seed-to-seed noise), and the ratios transformers / bert.c of the fastest runs'
times (above 1: bert.c faster).

  python3 bench/squad_compare_table.py bench/results/squad_compare/squad_compare_minilm.jsonl [--runs]

--runs adds the load average before and after each run and the processes' wall, CPU and memory.

CPU seconds: bert.c's are its two processes' (/usr/bin/time, user + sys: training, then
prediction from the saved model, each including its start, reading and tokenizing);
transformers' are time.process_time() around the training loop and around the prediction's
forward passes, inside the one process (its whole process's CPU is in --runs).
"""
import json
import sys
from collections import defaultdict


def mean(xs):
    return sum(xs) / len(xs)


def sd(xs):
    m = mean(xs)
    return (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5


def spread(vals):
    each = ", ".join(f"{v:.1f}" for v in vals)
    if len(vals) == 1:
        return each
    return f"{each} → **{mean(vals):.1f} ± {sd(vals):.1f}**"


def difference(b, h):
    """bert.c's mean minus transformers', its standard error and their ratio (Welch)."""
    if len(b) < 2 or len(h) < 2:
        return None
    d, se = mean(b) - mean(h), (sd(b) ** 2 / len(b) + sd(h) ** 2 / len(h)) ** 0.5
    return f"{d:+.1f} (standard error {se:.1f}: {d / se:+.1f})" if se > 0 else f"{d:+.1f}"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = [json.loads(line) for path in args for line in open(path) if line.strip()]
    if not runs:
        sys.exit("squad_compare_table: no runs")
    splits = {(r["train_articles"], r["train_questions"], r["train_features"], r["epochs"], r["steps"], r.get("max_steps", 0),
               r["predict_articles"], r["predict_questions"], r["predict_features"]) for r in runs}
    for n, tq, tf, ep, steps, ms, pa, pq, pf in sorted(splits):
        print(f"- split: train on dev-v1.1.json's first {n} article(s) ({tq:,} questions, {tf:,} features), "
              f"{f'{ms} steps (smoke test)' if ms else f'{ep:g} epoch(s), {steps} steps'}; predict the next {pa} articles "
              f"({pq:,} questions, {pf:,} features)")
    print()
    print("| side | seed | EM | F1 | train wall s | train features/s | train CPU s | predict wall s | predict features/s | predict CPU s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    by = defaultdict(list)
    for r in sorted(runs, key=lambda r: (r["side"] != "bert.c", r["seed"])):
        by[r["side"]].append(r)
        print(f"| {r['side']} | {r['seed']} | {r['eval']['exact_match']:.2f} | {r['eval']['f1']:.2f} | "
              f"{r['train_seconds']:,.0f} | {r['train_features_per_s']:.2f} | {r['train_cpu_seconds']:,.0f} | "
              f"{r['predict_seconds']:,.0f} | {r['predict_features_per_s']:.2f} | {r['predict_cpu_seconds']:,.0f} |")
    print()
    print("| side | seeds | EM: seeds → mean ± sd | F1: seeds → mean ± sd | fastest training: s (features/s) | fastest prediction: s (features/s) |")
    print("|---|---:|---|---|---|---|")
    fast = {}
    for side in ("bert.c", "transformers"):
        rs = by.get(side)
        if not rs:
            continue
        t = min(rs, key=lambda r: r["train_seconds"])
        p = min(rs, key=lambda r: r["predict_seconds"])
        fast[side] = (t, p)
        print(f"| {side} | {len(rs)} | {spread([r['eval']['exact_match'] for r in rs])} | "
              f"{spread([r['eval']['f1'] for r in rs])} | {t['train_seconds']:,.0f} ({t['train_features_per_s']:.2f}) | "
              f"{p['predict_seconds']:,.0f} ({p['predict_features_per_s']:.2f}) |")
    if len(fast) == 2:
        (bt, bp), (ht, hp) = fast["bert.c"], fast["transformers"]
        scores = {side: ([r["eval"]["exact_match"] for r in by[side]], [r["eval"]["f1"] for r in by[side]])
                  for side in fast}
        em, f1 = (difference(scores["bert.c"][k], scores["transformers"][k]) for k in (0, 1))
        if em:
            print()
            print(f"bert.c − transformers, means: EM {em}, F1 {f1}")
        print()
        print(f"transformers / bert.c, fastest runs: training {ht['train_seconds'] / bt['train_seconds']:.1f}x wall, "
              f"{ht['train_cpu_seconds'] / bt['train_cpu_seconds']:.1f}x CPU; prediction "
              f"{hp['predict_seconds'] / bp['predict_seconds']:.1f}x wall, {hp['predict_cpu_seconds'] / bp['predict_cpu_seconds']:.1f}x CPU")
    if "--runs" in sys.argv:
        print()
        print("| run | seed | load before → after (1/5/15 min) | final loss | process wall s | process CPU s | peak RSS MB |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for r in runs:
            rss = max(r.get("max_rss_kb", 0), r.get("train_max_rss_kb", 0), r.get("predict_max_rss_kb", 0)) / 1024
            loss = f"{r['final_loss']:.4f}" if r.get("final_loss") is not None else "-"
            print(f"| {r['side']} | {r['seed']} | {r.get('load_before', '')} → {r.get('load_after', '')} | {loss} | "
                  f"{r['process_seconds']:,.0f} | {r['cpu_seconds']:,.0f} | {rss:,.0f} |")


if __name__ == "__main__":
    main()
