#!/usr/bin/env bash
# The whole pre-training loop against the model alone, same model, shapes and machine, in one
# run: `bert pretrain` on real shards (data loading, masks, logging, the LAMB step included)
# next to `bert bench` (model + optimizer on a synthetic batch with the shards' share of
# padding), for phase-1 and phase-2 shapes. Prints both throughputs, their ratio and both
# peak RSS figures. Checkpointing is timed separately (one write) and amortised over the
# recipe's 200 steps per checkpoint.
#
#   bench/run_pretrain_bench.sh PHASE1_SHARDS PHASE2_SHARDS
#   PRESET=bert-base THREADS=2 STEPS=6        (defaults shown; the first step of each is not timed)
set -euo pipefail
cd "$(dirname "$0")/.."
P1=${1:?phase-1 shard folder}; P2=${2:?phase-2 shard folder}
PRESET=${PRESET:-bert-base}; THREADS=${THREADS:-2}; STEPS=${STEPS:-6}
OUT=$(mktemp -d /tmp/bert-pretrain-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
export OMP_NUM_THREADS=$THREADS

pad_fraction() {  # mean share of padding in the first training shard
  /usr/bin/python3 - "$1" <<'PY'
import glob, sys, h5py
f = sorted(glob.glob(sys.argv[1] + "/*training*"))[0]
m = h5py.File(f, "r")["input_mask"][:]
print("%.3f" % (1 - m.mean()))
PY
}

loop_rate() {  # sequences/s between the first and the last logged step (DLLogger timestamps)
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
recs = [json.loads(l[5:]) for l in open(sys.argv[1]) if l.startswith("DLLL ")]
steps = [(float(r["timestamp"]), r["step"][1]) for r in recs if r["type"] == "LOG" and isinstance(r["step"], list)
         and len(r["step"]) == 2 and "step_loss" in r["data"]]
(t0, s0), (t1, s1) = steps[0], steps[-1]
print("%.4f" % ((s1 - s0) * int(sys.argv[2]) / (t1 - t0)))
PY
}

run_shape() {  # label shards batch seq preds
  local label=$1 shards=$2 batch=$3 seq=$4 preds=$5
  local pad; pad=$(pad_fraction "$shards")
  /usr/bin/time -f "%M" -o "$OUT/bench.rss" ./bert bench --preset "$PRESET" --batch "$batch" --seq "$seq" \
      --preds "$preds" --steps "$STEPS" --warmup 1 --infer_steps 0 --threads "$THREADS" --pad_fraction "$pad" \
      --json > "$OUT/bench.json" 2> /dev/null
  rm -rf "$OUT/run"
  /usr/bin/time -f "%M" -o "$OUT/loop.rss" ./bert pretrain --input_dir "$shards" --bert_model "$PRESET" \
      --output_dir "$OUT/run" --train_batch_size "$batch" --max_seq_length "$seq" --max_predictions_per_seq "$preds" \
      --max_steps 1000 --steps_this_run $((STEPS + 1)) --skip_checkpoint --log_freq 1 --disable_progress_bar \
      --threads "$THREADS" --json-summary "$OUT/loop.json" > /dev/null
  local bench_rate loop_rate_
  bench_rate=$(/usr/bin/python3 -c "import json; print('%.4f' % json.load(open('$OUT/bench.json'))['train_seq_per_s'])")
  loop_rate_=$(loop_rate "$OUT/loop.json" "$batch")
  # a one-step run with its checkpoint write, amortised over 200 steps (an upper bound on
  # the checkpoint's cost: it includes start-up)
  local t0 t1 step_s ckpt_s
  t0=$(date +%s.%N)
  ./bert pretrain --input_dir "$shards" --bert_model "$PRESET" --output_dir "$OUT/ck" --train_batch_size 1 \
      --max_seq_length "$seq" --max_predictions_per_seq "$preds" --max_steps 1 --threads "$THREADS" > /dev/null
  t1=$(date +%s.%N)
  ckpt_s=$(/usr/bin/python3 -c "print('%.2f' % ($t1 - $t0))")
  step_s=$(/usr/bin/python3 -c "print('%.3f' % ($batch / $loop_rate_))")
  /usr/bin/python3 - <<PY
import json
final = [json.loads(x[5:]) for x in open("$OUT/loop.json") if x.startswith("DLLL ")][-1]["data"]
model_share = final["model_time"] / final["raw_train_time"]
b, l = $bench_rate, $loop_rate_
ck, st = $ckpt_s, $step_s
with_ck = l * st / (st + ck / 200)
print("%-8s %s batch $batch seq $seq preds $preds, %.1f%% padding: bench %.3f seq/s, pretrain loop %.3f seq/s "
      "(%.1f%% of bench; with a checkpoint every 200 steps %.3f, %.1f%%); %.1f%% of the loop's time in the model "
      "and optimizer; peak RSS bench %d MiB, loop %d MiB"
      % ("$label", "$PRESET", 100 * $pad, b, l, 100 * l / b, with_ck, 100 * with_ck / b, 100 * model_share,
         int(open("$OUT/bench.rss").read()) // 1024, int(open("$OUT/loop.rss").read()) // 1024))
PY
}

echo "bert pretrain vs bert bench, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $THREADS threads"
run_shape phase-1 "$P1" 32 128 20
run_shape phase-2 "$P2" 8 512 80
