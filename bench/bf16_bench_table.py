#!/usr/bin/env python3
"""The table of bench/run_bf16_bench.sh from its JSON-lines file: per shape, every
implementation's throughput and peak memory, and bert.c bf16's speed-up over each."""
import json
import sys


def name(r):
    if r["impl"] == "bert.c":
        return f"bert.c {r.get('precision', 'fp32')}"
    return "PyTorch " + r.get("torch_version", "?").split("+")[0] + " bf16" + (" compiled" if r.get("compiled") else " eager")


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    kernel = next((r["bf16_gemm_kernel"] for r in rows if r["impl"] == "bert.c" and r.get("precision") == "bf16"), "")
    p32 = [r["sgemm_peak_gflops"] for r in rows if r["impl"] == "bert.c" and r.get("precision", "fp32") == "fp32"]
    p16 = [r["bf16_peak_gflops"] for r in rows if r["impl"] == "bert.c" and r.get("precision") == "bf16"]
    print(f"\nmeasured peaks (each bert.c run measures its own; range over the runs): sgemm "
          f"{min(p32, default=0):.0f}-{max(p32, default=0):.0f} GFLOP/s, bf16 GEMM {min(p16, default=0):.0f}-"
          f"{max(p16, default=0):.0f} GFLOP/s ({kernel})\n")
    print("| shape | implementation | seq/s (best step) | GFLOP/s (% of its peak) | peak RSS MiB | bert.c bf16 speed-up |")
    print("|---|---|---:|---:|---:|---:|")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        group = [r for r in rows if r["shape"] == shape]
        train = shape.startswith("train")
        key, best_key, flops_key = (("train_seq_per_s", "train_best_ms_per_step", "train_gflops") if train else
                                    ("infer_seq_per_s", "infer_best_ms_per_batch", "infer_gflops"))
        ours = next((r for r in group if r.get("precision") == "bf16"), None)
        for r in group:
            best = 1000.0 * r["batch"] / r[best_key] if r.get(best_key) else 0
            # each bert.c run measured its own peak (sgemm; bf16 GEMM with --bf16) just before it ran
            peak = r.get("bf16_peak_gflops", 0) if r.get("precision") == "bf16" else r.get("sgemm_peak_gflops", 0)
            pct = f" ({100 * r[flops_key] / peak:.0f}%)" if peak and r["impl"] == "bert.c" else ""
            speedup = f"{ours[key] / r[key]:.2f}×" if ours and r is not ours and r[key] else ""
            print(f"| {shape} (batch {r['batch']}) | {name(r)} | {r[key]:.2f} ({best:.2f}) | {r[flops_key]:.0f}{pct} "
                  f"| {r['peak_rss_mib']:.0f} | {speedup} |")


if __name__ == "__main__":
    main(sys.argv[1])
