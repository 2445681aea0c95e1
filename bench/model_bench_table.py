#!/usr/bin/env python3
"""Prints the side-by-side table of bench/run_model_bench.sh from its JSON-lines file:
one row per implementation and preset, with bert.c's speed-up over each other row."""
import json
import os
import sys


def pair(mean, best):
    return f"{mean} ({best})" if mean else ""


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    ours = [r for r in rows if r["impl"] == "bert.c"]  # default settings: the reference rows
    if not ours:
        sys.exit(f"{path}: no bert.c results")
    peak = ours[0]["sgemm_peak_gflops"]
    first = ours[0]
    pad = first.get("pad_fraction", float(os.environ.get("PAD_FRACTION", "0")))
    print(f"\nbatch {first['batch']}, seq {first['seq']}, {first['preds']} masked slots, {first['threads']} threads, "
          f"{'full-length sequences' if pad == 0 else f'{100 * pad:.0f}% padding tokens'}; "
          f"sgemm peak {peak:.1f} GFLOP/s (measured by ./bert bench in this run; the best of the sgemm libraries it "
          f"links); bert.c's GEMMs: {first.get('gemm_library', 'openblas')}\n")
    print("| preset | GFLOP/seq | implementation | train seq/s (best step) | train GFLOP/s (% peak) | train CPU s/step "
          "| infer seq/s (best) | infer GFLOP/s (% peak) | peak RSS MiB | bert.c speed-up: train (best) "
          "| infer (best) | train CPU time |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for ref in ours:
        others = [r for r in rows if r["preset"] == ref["preset"] and r is not ref]
        for r in [ref] + others:
            def speedup(key, invert=False):
                if r is ref or not r.get(key) or not ref.get(key):
                    return ""
                return f"{(r[key] / ref[key]) if invert else (ref[key] / r[key]):.2f}x"
            for kind, unit in (("train", "step"), ("infer", "batch")):  # seq/s of the fastest timed step
                best = r.get(f"{kind}_best_ms_per_{unit}", 0)
                r[f"{kind}_best_seq_per_s"] = 1e3 * r["batch"] / best if best else 0
            print(f"| {r['preset']} | {r['train_gflop_per_seq']:.2f} | {r['impl']} | {r['train_seq_per_s']:.2f} "
                  f"({r['train_best_seq_per_s']:.2f}) | {r['train_gflops']:.1f} ({100 * r['train_gflops'] / peak:.0f}%) | "
                  f"{r.get('train_cpu_ms_per_step', 0) / 1e3:.2f} | {r['infer_seq_per_s']:.2f} "
                  f"({r['infer_best_seq_per_s']:.2f}) | "
                  f"{r['infer_gflops']:.1f} ({100 * r['infer_gflops'] / peak:.0f}%) | {r['peak_rss_mib']:.0f} | "
                  f"{pair(speedup('train_seq_per_s'), speedup('train_best_seq_per_s'))} | "
                  f"{pair(speedup('infer_seq_per_s'), speedup('infer_best_seq_per_s'))} | "
                  f"{speedup('train_cpu_ms_per_step', invert=True)} |")
    for ref in ours:
        rows_all = ref["batch"] * ref["seq"]
        encoder = ref.get("train_encoder_rows", rows_all)
        kept = ref.get("train_last_layer_rows", rows_all)
        executed = ref.get("train_executed_gflop_per_seq", ref["train_gflop_per_seq"])
        if executed < ref["train_gflop_per_seq"]:
            skipped = []
            if encoder < rows_all:
                skipped.append(f"its encoder ran on {encoder} of {rows_all} rows (unpadding)")
            if kept < encoder:
                skipped.append(f"its last layer ran on {kept} rows after attention (the heads' rows: pruning)")
            if ref.get("pad_fraction", 0) > 0:
                skipped.append("attention skipped padded keys")
            print(f"\n{ref['preset']}: bert.c: {', '.join(skipped)}; it executed {executed:.2f} of the formula's "
                  f"{ref['train_gflop_per_seq']:.2f} GFLOP/seq; counted in the formula's FLOPs it ran at "
                  f"{ref.get('train_formula_gflops', 0):.1f} GFLOP/s.", end="")
    print()
    print("\ntrain GFLOP/s = the FLOPs each side executed per second (bert.c skips the rows no loss reads; PyTorch "
          "runs every row, so its count is the formula's); GFLOP/seq = the formula's.")
    print("speed-up = bert.c (default settings) seq/s divided by that row's seq/s; (best) = the same from each "
          "side's fastest timed step, less sensitive to other load on the machine; train CPU time = that row's "
          "process CPU seconds per step divided by bert.c's (all threads, spin-waiting included).")


if __name__ == "__main__":
    main(sys.argv[1])
