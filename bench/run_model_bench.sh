#!/usr/bin/env bash
# bert.c next to PyTorch, same configuration, same machine, same run: for each preset,
# `./bert bench --json` then bench/bench_pytorch.py --json (alternating, so drift in machine
# load hits both), then one table with the ratios.
#
#   bench/run_model_bench.sh [preset ...]          default: bert-tiny bert-mini bert-small bert-base
#   BATCH=32 SEQ=128 PREDS=20 THREADS=2            shapes (defaults shown)
#   PAD_FRACTION=0                                 mean share of padding tokens (0: all full length)
#   STEPS=N                                        timed steps for every preset (default: per preset)
#   PEER_TUNED=1                                   also run PyTorch with OMP_WAIT_POLICY=PASSIVE
#   OURS_PASSIVE=1                                 also run bert.c with OMP_WAIT_POLICY=PASSIVE
#   OURS_FULL=1                                    also run bert.c with --all_rows (no unpadding, no last-layer pruning)
#   OURS_OPENBLAS=1                                also run bert.c built with GEMM=openblas (build-openblas/bert,
#                                                  built here), to show what the GEMM library contributes
#   SGEMM_PEAK=GFLOP/s                             compare against this peak instead of measuring it (~1 s)
#                                                  in the first bert.c run (a loaded machine measures low)
#   PEER_PYTHON=path                               python with torch + transformers (default .venv-bench)
#   RESULTS=file                                   where the JSON lines go (default out/model_bench_<time>.jsonl);
#                                                  bench/model_bench_table.py FILE prints the table again
set -euo pipefail
cd "$(dirname "$0")/.."
BATCH=${BATCH:-32}; SEQ=${SEQ:-128}; PREDS=${PREDS:-20}; THREADS=${THREADS:-2}; PAD_FRACTION=${PAD_FRACTION:-0}
PEER_PYTHON=${PEER_PYTHON:-.venv-bench/bin/python}
presets=("$@"); [ ${#presets[@]} -gt 0 ] || presets=(bert-tiny bert-mini bert-small bert-base)

[ -x ./bert ] || { echo "run_model_bench: build first (make)" >&2; exit 1; }
if [ "${OURS_OPENBLAS:-0}" = 1 ]; then
  make --no-print-directory -s BUILD=build-openblas GEMM=openblas build-openblas/bert >&2
fi
[ -x "$PEER_PYTHON" ] || { echo "run_model_bench: no $PEER_PYTHON; run bench/setup_peer_env.sh" >&2; exit 1; }

steps_for() {  # enough steps for a stable mean without making bert-base take many minutes
  if [ -n "${STEPS:-}" ]; then echo "$STEPS"; return; fi
  case $1 in bert-tiny) echo 30 ;; bert-mini) echo 12 ;; bert-small) echo 8 ;; *) echo 5 ;; esac
}

tag_impl() {  # appends $1 to the "impl" field of the JSON line on stdin
  /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); d["impl"]+=sys.argv[1]; print(json.dumps(d))' "$1"
}

mkdir -p out
results=${RESULTS:-out/model_bench_$(date -u +%Y%m%d_%H%M%S).jsonl}   # JSON lines; kept for re-printing
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
peak=${SGEMM_PEAK:-}
for p in "${presets[@]}"; do
  n=$(steps_for "$p")
  common=(--preset "$p" --batch "$BATCH" --seq "$SEQ" --preds "$PREDS" --steps "$n" --warmup 1 --threads "$THREADS" --pad_fraction "$PAD_FRACTION" --json)
  echo "== $p: bert.c" >&2
  peak_flag=(); [ -n "$peak" ] && peak_flag=(--sgemm_peak "$peak")   # measure once, reuse
  ./bert bench "${common[@]}" "${peak_flag[@]}" | tee -a "$results" >&2
  [ -n "$peak" ] || peak=$(tail -n 1 "$results" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sgemm_peak_gflops"])')
  if [ "${OURS_PASSIVE:-0}" = 1 ]; then
    echo "== $p: bert.c, OMP_WAIT_POLICY=PASSIVE" >&2
    OMP_WAIT_POLICY=PASSIVE ./bert bench "${common[@]}" --sgemm_peak "$peak" | tag_impl " PASSIVE" | tee -a "$results" >&2
  fi
  if [ "${OURS_FULL:-0}" = 1 ]; then
    echo "== $p: bert.c, --all_rows" >&2
    ./bert bench "${common[@]}" --sgemm_peak "$peak" --all_rows | tag_impl " --all_rows" | tee -a "$results" >&2
  fi
  if [ "${OURS_OPENBLAS:-0}" = 1 ]; then
    echo "== $p: bert.c, GEMM=openblas" >&2
    build-openblas/bert bench "${common[@]}" --sgemm_peak "$peak" | tag_impl " GEMM=openblas" | tee -a "$results" >&2
  fi
  echo "== $p: PyTorch" >&2
  OMP_NUM_THREADS=$THREADS "$PEER_PYTHON" bench/bench_pytorch.py "${common[@]}" | tee -a "$results" >&2
  if [ "${PEER_TUNED:-0}" = 1 ]; then
    echo "== $p: PyTorch, OMP_WAIT_POLICY=PASSIVE" >&2
    OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE "$PEER_PYTHON" bench/bench_pytorch.py "${common[@]}" |
      tag_impl " PASSIVE" | tee -a "$results" >&2
  fi
done

echo "conditions: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
     "load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
/usr/bin/python3 bench/model_bench_table.py "$results"
echo "(raw results: $results)"
