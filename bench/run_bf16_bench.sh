#!/usr/bin/env bash
# Mixed precision side by side, in one run: bert.c fp32, bert.c --bf16, and PyTorch 2.x with
# torch.autocast("cpu", bfloat16), eager and torch.compile'd (inference compiled with
# freezing), on bert-base's training shapes (phase 1: seq 128 / 20 predictions; phase 2:
# seq 512 / 80) and inference at seq 128 and 384. Alternates the implementations per shape
# so drift in machine load hits all of them; then one table (bench/bf16_bench_table.py).
#
#   bench/run_bf16_bench.sh                    needs avx512_bf16 (bert.c refuses --bf16 without)
#   PRESET=bert-base THREADS=2                 (defaults shown)
#   STEPS=3                                    timed steps per measurement (after 1 warm-up)
#   PEER_PYTHON=.venv-bf16peer/bin/python      PyTorch 2.x (bench/setup_bf16_peer_env.sh)
#   NO_COMPILE=1                               skip the torch.compile runs (minutes of compiling each)
#   SHAPES="train128 train512 infer128 infer384"  which shapes (default all)
#   RESULTS=file                               JSON lines (default out/bf16_bench_<time>.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${PRESET:-bert-base}; THREADS=${THREADS:-2}; STEPS=${STEPS:-3}
PEER_PYTHON=${PEER_PYTHON:-.venv-bf16peer/bin/python}
[ -x ./bert ] || { echo "run_bf16_bench: build first (make)" >&2; exit 1; }
grep -q avx512_bf16 /proc/cpuinfo || { echo "run_bf16_bench: this CPU has no avx512_bf16" >&2; exit 1; }
[ -x "$PEER_PYTHON" ] || { echo "run_bf16_bench: no $PEER_PYTHON; run bench/setup_bf16_peer_env.sh" >&2; exit 1; }
mkdir -p out
results=${RESULTS:-out/bf16_bench_$(date -u +%Y%m%d_%H%M%S).jsonl}
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

tag() {  # adds "shape": $1 to the JSON line on stdin
  /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); d["shape"]=sys.argv[1]; print(json.dumps(d))' "$1"
}

run_shape() {  # name mode batch seq preds
  local name=$1 mode=$2 batch=$3 seq=$4 preds=$5
  local common=(--preset "$PRESET" --batch "$batch" --seq "$seq" --preds "$preds" --warmup 1 --threads "$THREADS"
                --mode "$mode" --json)
  local steps=(--steps "$STEPS"); [ "$mode" = infer ] && steps=(--steps "$STEPS" --infer_steps "$STEPS")
  echo "== $name: bert.c fp32" >&2
  ./bert bench "${common[@]}" "${steps[@]}" | tag "$name" | tee -a "$results" >&2
  echo "== $name: bert.c bf16" >&2
  ./bert bench "${common[@]}" "${steps[@]}" --bf16 | tag "$name" | tee -a "$results" >&2
  echo "== $name: PyTorch bf16 autocast" >&2
  OMP_NUM_THREADS=$THREADS "$PEER_PYTHON" bench/bench_pytorch.py "${common[@]}" "${steps[@]}" --precision bf16 |
    tag "$name" | tee -a "$results" >&2
  if [ "${NO_COMPILE:-0}" != 1 ]; then
    echo "== $name: PyTorch bf16 autocast, torch.compile" >&2
    OMP_NUM_THREADS=$THREADS "$PEER_PYTHON" bench/bench_pytorch.py "${common[@]}" "${steps[@]}" --precision bf16 \
      --compile | tag "$name" | tee -a "$results" >&2
  fi
}

SHAPES=${SHAPES:-train128 train512 infer128 infer384}
for shape in $SHAPES; do
  case $shape in
    train128) run_shape "train seq 128" train 32 128 20 ;;
    train512) run_shape "train seq 512" train 8 512 80 ;;
    infer128) run_shape "infer seq 128" infer 32 128 20 ;;
    infer384) run_shape "infer seq 384" infer 32 384 20 ;;
    *) echo "run_bf16_bench: unknown shape '$shape'" >&2; exit 2 ;;
  esac
done

echo "conditions: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
     "load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
/usr/bin/python3 bench/bf16_bench_table.py "$results"
echo "(raw results: $results)"
