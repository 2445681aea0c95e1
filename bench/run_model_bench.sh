#!/usr/bin/env bash
# bert.c next to PyTorch, same configuration, same machine, same run: for each preset,
# `./bert bench --json` then bench/bench_pytorch.py --json (alternating, so drift in machine
# load hits both), then one table with the ratios.
#
#   bench/run_model_bench.sh [preset ...]          default: bert-tiny bert-mini bert-small bert-base
#   BATCH=32 SEQ=128 PREDS=20 THREADS=2            shapes (defaults shown)
#   STEPS=N                                        timed steps for every preset (default: per preset)
#   PEER_TUNED=1                                   also run PyTorch with OMP_WAIT_POLICY=PASSIVE
#   PEER_PYTHON=path                               python with torch + transformers (default .venv-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
BATCH=${BATCH:-32}; SEQ=${SEQ:-128}; PREDS=${PREDS:-20}; THREADS=${THREADS:-2}
PEER_PYTHON=${PEER_PYTHON:-.venv-bench/bin/python}
presets=("$@"); [ ${#presets[@]} -gt 0 ] || presets=(bert-tiny bert-mini bert-small bert-base)

[ -x ./bert ] || { echo "run_model_bench: build first (make)" >&2; exit 1; }
[ -x "$PEER_PYTHON" ] || { echo "run_model_bench: no $PEER_PYTHON; run bench/setup_peer_env.sh" >&2; exit 1; }

steps_for() {  # enough steps for a stable mean without making bert-base take many minutes
  if [ -n "${STEPS:-}" ]; then echo "$STEPS"; return; fi
  case $1 in bert-tiny) echo 30 ;; bert-mini) echo 12 ;; bert-small) echo 6 ;; *) echo 3 ;; esac
}

results=$(mktemp); trap 'rm -f "$results"' EXIT
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
peak=""
for p in "${presets[@]}"; do
  n=$(steps_for "$p")
  common=(--preset "$p" --batch "$BATCH" --seq "$SEQ" --preds "$PREDS" --steps "$n" --warmup 1 --threads "$THREADS" --json)
  echo "== $p: bert.c" >&2
  peak_flag=(); [ -n "$peak" ] && peak_flag=(--sgemm_peak "$peak")   # measure once, reuse
  ./bert bench "${common[@]}" "${peak_flag[@]}" | tee -a "$results" >&2
  [ -n "$peak" ] || peak=$(tail -n 1 "$results" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sgemm_peak_gflops"])')
  echo "== $p: PyTorch" >&2
  OMP_NUM_THREADS=$THREADS "$PEER_PYTHON" bench/bench_pytorch.py "${common[@]}" | tee -a "$results" >&2
  if [ "${PEER_TUNED:-0}" = 1 ]; then
    echo "== $p: PyTorch, OMP_WAIT_POLICY=PASSIVE" >&2
    OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE "$PEER_PYTHON" bench/bench_pytorch.py "${common[@]}" |
      /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); d["impl"]+=" PASSIVE"; print(json.dumps(d))' |
      tee -a "$results" >&2
  fi
done

echo "conditions: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
     "load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
/usr/bin/python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
c = [r for r in rows if r["impl"] == "bert.c"]
peak = c[0]["sgemm_peak_gflops"] if c else 0
first = rows[0]
print(f"\nbatch {first['batch']}, seq {first['seq']}, {first['preds']} masked slots, {first['threads']} threads; "
      f"sgemm peak {peak:.1f} GFLOP/s (measured by ./bert bench)\n")
print("| preset | GFLOP/seq | impl | train seq/s | train GFLOP/s (% peak) | infer seq/s | infer GFLOP/s (% peak) | peak RSS MiB | train ratio | infer ratio |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for ours in c:
    peers = [r for r in rows if r["preset"] == ours["preset"] and r["impl"] != "bert.c"]
    for r in [ours] + peers:
        tr = ours["train_seq_per_s"] / r["train_seq_per_s"] if r["train_seq_per_s"] else 0
        ir = ours["infer_seq_per_s"] / r["infer_seq_per_s"] if r["infer_seq_per_s"] else 0
        ratio = lambda x: "" if r is ours else f"{x:.2f}x"
        print(f"| {r['preset']} | {r['train_gflop_per_seq']:.2f} | {r['impl']} | {r['train_seq_per_s']:.2f} | "
              f"{r['train_gflops']:.1f} ({100 * r['train_gflops'] / peak:.0f}%) | {r['infer_seq_per_s']:.2f} | "
              f"{r['infer_gflops']:.1f} ({100 * r['infer_gflops'] / peak:.0f}%) | {r['peak_rss_mib']:.0f} | "
              f"{ratio(tr)} | {ratio(ir)} |")
print("\nratio = bert.c seq/s / that row's seq/s (bert.c faster when > 1).")
EOF
