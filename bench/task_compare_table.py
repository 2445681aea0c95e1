#!/usr/bin/env python3
"""The table of bench/run_task_compare.sh: per task and side, the dev metric of each seed,
mean ± sample standard deviation, the difference of the means in standard errors
(|m1 - m2| / sqrt(s1²/n1 + s2²/n2)), the time (the fastest run's training wall seconds and
sequences per second, and its process CPU seconds: on a shared machine the fastest run is the
least disturbed; the means over the seeds beside), and Welch's t-test on the two
sides' seeds (t, its degrees of freedom, the two-sided p when scipy is there): with 3 seeds a
side the standard deviations are themselves rough, so the p-value says more than the ratio.
--runs adds every run with the load average around it.

  python3 bench/task_compare_table.py RESULTS.jsonl [--runs]"""
import json
import math
import statistics
import sys

METRIC = {"ner": ("f1", "entity F1 (seqeval default mode)"), "classify": ("accuracy", "accuracy")}


def mean_std(xs):
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else float("nan"))


def main():
    path = sys.argv[1]
    runs = [json.loads(line) for line in open(path) if line.strip()]
    out = ["| task | metric | side | seeds → mean ± std (×100) | fastest run: train s (seq/s), CPU s | "
           "mean over seeds: train s, process wall s, CPU s | "
           "difference, / its std. error; Welch df, p |", "|---|---|---|---|---|---|---|---|"]
    for task in ("ner", "classify"):
        key, name = METRIC[task]
        stats = {}
        for side in ("bert.c", "transformers"):
            rs = sorted((r for r in runs if r["task"] == task and r["side"] == side), key=lambda r: r["seed"])
            if rs:
                stats[side] = rs
        if not stats:
            continue
        se = ""
        if len(stats) == 2 and all(len(v) > 1 for v in stats.values()):
            (m1, s1), (m2, s2) = (mean_std([r["dev"][key] for r in v]) for v in stats.values())
            n1, n2 = (len(v) for v in stats.values())
            err = math.sqrt(s1 * s1 / n1 + s2 * s2 / n2)
            se = "%+.1f points, %.2f" % (100 * (m1 - m2), abs(m1 - m2) / err if err > 0 else float("inf"))
            if err > 0:
                v1, v2 = s1 * s1 / n1, s2 * s2 / n2
                df = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
                se += "; df %.1f" % df
                try:
                    from scipy.stats import t as student_t
                    se += ", p %.2f" % (2 * student_t.sf(abs(m1 - m2) / err, df))
                except ImportError:
                    pass
        for i, (side, rs) in enumerate(stats.items()):
            vals = [r["dev"][key] for r in rs]
            m, s = mean_std(vals)
            seeds = ", ".join("%.1f" % (100 * v) for v in vals)
            fast = min(rs, key=lambda r: r["train_seconds"])
            tr = statistics.mean(r["train_seconds"] for r in rs)
            pw = statistics.mean(r["process_seconds"] for r in rs)
            cpu = statistics.mean(r["cpu_seconds"] for r in rs)
            out.append("| %s | %s | %s | %s → **%.1f ± %.1f** | %.0f (%.1f), %.0f | %.0f, %.0f, %.0f | %s |" % (
                task if i == 0 else "", name if i == 0 else "", side, seeds, 100 * m, 100 * s, fast["train_seconds"],
                fast["train_seq_per_s"], fast["cpu_seconds"], tr, pw, cpu, se if i == 0 else ""))
    print("\n".join(out))
    if "--runs" in sys.argv:
        print("\n| run | seed | load before → after | train s | seq/s | eval s | process wall s | CPU s | dev |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---|")
        for r in runs:
            dev = ", ".join("%s %.2f" % (k, 100 * v) for k, v in r["dev"].items()
                            if k in ("precision", "recall", "f1", "accuracy"))
            print("| %s %s | %d | %s → %s | %.0f | %.1f | %.1f | %.0f | %.0f | %s |" % (
                r["side"], r["task"], r["seed"], r["load_before"], r["load_after"], r["train_seconds"],
                r["train_seq_per_s"], r["eval_seconds"], r["process_seconds"], r["cpu_seconds"], dev))


if __name__ == "__main__":
    main()
