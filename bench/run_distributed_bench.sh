#!/usr/bin/env bash
# Data-parallel pre-training on this machine at the same global batch: 1 process x 2 threads
# against 2 processes x 1 thread (MPI over shared memory), reducing after every micro-batch,
# once per step (--allreduce_post_accumulation) and sharded (--shard_optimizer). Real phase-1
# shards (the two processes read the files split between them, so their sequences and losses
# differ a little from the single process's, and so do their lengths: bert.c computes real
# tokens only, so runs are compared on real tokens/s, the rate that does not depend on which
# rows a run read). Prints seq/s and tokens/s (between the first and the last logged step: the
# first step is not timed), the exposed communication per step and the wait for the
# slower process that `bert pretrain` logs, the bytes each process sent, the busiest process's
# work over the mean (the step's rows dealt by work, and as read: --consecutive_micro_batches,
# NVIDIA's micro-batches), and the final loss (equal across the dealt 2-process runs up to rounding).
#
#   bench/run_distributed_bench.sh PHASE1_SHARDS [PRESET ...]      default presets: bert-small bert-base
#   STEPS=6 MICRO=16                  steps timed (+1 untimed); sequences per micro-batch. Global
#                                     batch = 4 x MICRO: 2 processes x 2 micro-batches, or 1 x 2 x 2 MICRO
#   RESULTS=file                      JSON lines (default bench/results/distributed_bench_<time>.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARDS=${1:?phase-1 shard folder}; shift
PRESETS=("$@"); [ ${#PRESETS[@]} -gt 0 ] || PRESETS=(bert-small bert-base)
STEPS=${STEPS:-6}; MICRO=${MICRO:-16}
command -v mpirun >/dev/null || { echo "run_distributed_bench: no mpirun (Debian: openmpi-bin)" >&2; exit 1; }
[ -x ./bert ] || { echo "run_distributed_bench: build ./bert first (make)" >&2; exit 1; }
mkdir -p bench/results
RESULTS=${RESULTS:-bench/results/distributed_bench_$(date -u +%Y%m%d_%H%M%S).jsonl}
OUT=$(mktemp -d /tmp/bert-distributed-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

summarise() {  # log label preset procs threads global -> one JSON line
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
log, label, preset, procs, threads, global_batch = sys.argv[1:7]
recs = [json.loads(l[5:]) for l in open(log) if l.startswith("DLLL ")]
steps = [r for r in recs if r["type"] == "LOG" and isinstance(r["step"], list) and len(r["step"]) == 2
         and "step_loss" in r["data"]]
t0, t1 = float(steps[0]["timestamp"]), float(steps[-1]["timestamp"])
n = steps[-1]["step"][1] - steps[0]["step"][1]
tokens = sum(r["data"]["step_tokens"] for r in steps[1:])
comm = [r["data"].get("comm_exposed_seconds") for r in steps[1:]]
comm = [c for c in comm if c is not None]
imb = [r["data"].get("imbalance_wait_seconds") for r in steps[1:]]
imb = [c for c in imb if c is not None]
print(json.dumps(dict(preset=preset, run=label, processes=int(procs), threads=int(threads),
                      global_batch=int(global_batch), steps_timed=n, seq_per_s=n * int(global_batch) / (t1 - t0),
                      tokens_per_s=tokens / (t1 - t0), tokens_per_seq=tokens / (n * int(global_batch)),
                      step_s=(t1 - t0) / n, comm_exposed_s_per_step=sum(comm) / len(comm) if comm else None,
                      imbalance_wait_s_per_step=sum(imb) / len(imb) if imb else None,
                      final_loss=steps[-1]["data"]["step_loss"])))
PY
}

run() {  # preset label procs threads accum extra-flags...
  local preset=$1 label=$2 procs=$3 threads=$4 accum=$5; shift 5
  local global=$((4 * MICRO)) per_proc=$((4 * MICRO / procs))
  local launch=()
  [ "$procs" -gt 1 ] && launch=(mpirun -np "$procs" --oversubscribe --allow-run-as-root --bind-to core -x OMP_NUM_THREADS)
  rm -rf "$OUT/run"
  OMP_NUM_THREADS=$threads "${launch[@]}" ./bert pretrain --input_dir "$SHARDS" --bert_model "$preset" \
      --output_dir "$OUT/run" --train_batch_size "$per_proc" --gradient_accumulation_steps "$accum" \
      --max_steps 1000 --steps_this_run $((STEPS + 1)) --skip_checkpoint --log_freq 1 --disable_progress_bar \
      --threads "$threads" --json-summary "$OUT/log.json" "$@" > "$OUT/stdout.txt"
  local bytes spread
  bytes=$(sed -n 's/.* \([0-9.]*\) GB sent per process.*/\1/p' "$OUT/stdout.txt" | tail -n 1)
  spread=$(sed -n 's/.*work over the mean, per step: \([0-9.]*\) (\([0-9.]*\) had.*/\1 \2/p' "$OUT/stdout.txt" | tail -n 1)
  summarise "$OUT/log.json" "$label" "$preset" "$procs" "$threads" "$global" |
    /usr/bin/python3 -c "
import json, sys
d = json.loads(sys.stdin.read())
d['gb_sent_per_process'] = float('${bytes:-0}' or 0)
spread = '${spread}'.split()
if spread: d['work_spread'], d['work_spread_as_read'] = float(spread[0]), float(spread[1])
print(json.dumps(d))" |
    tee -a "$RESULTS"
}

for preset in "${PRESETS[@]}"; do
  run "$preset" "1 process x 2 threads" 1 2 2
  run "$preset" "2 processes x 1 thread, per micro-batch" 2 1 2
  run "$preset" "2 processes, --allreduce_post_accumulation" 2 1 2 --allreduce_post_accumulation
  run "$preset" "2 processes, --shard_optimizer" 2 1 2 --shard_optimizer
  run "$preset" "2 processes, per micro-batch, as read (--consecutive_micro_batches)" 2 1 2 --consecutive_micro_batches
done
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) at end" >&2
/usr/bin/python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| model | run | seq/s | real tokens/seq | tokens/s | vs 1 x 2 threads (tokens/s) | exposed comm s/step | waiting for the slower process s/step | busiest process's work / mean | GB sent per process | final loss |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
base = {}
for r in rows:
    if r["processes"] == 1:
        base[r["preset"]] = r["tokens_per_s"]
    b = base.get(r["preset"])
    def share(key):
        v = r.get(key)
        return "-" if v is None else "%.2f (%.0f%%)" % (v, 100 * v / r["step_s"])
    spread = "-" if "work_spread" not in r else "%.3f (as read %.3f)" % (r["work_spread"], r["work_spread_as_read"])
    print("| %s | %s | %.2f | %.1f | %.0f | %s | %s | %s | %s | %s | %.4f |" % (r["preset"], r["run"], r["seq_per_s"], r["tokens_per_seq"], r["tokens_per_s"], "%.2fx" % (r["tokens_per_s"] / b) if b else "-",
          share("comm_exposed_s_per_step"), share("imbalance_wait_s_per_step"), spread,
          "%.2f" % r["gb_sent_per_process"] if r["gb_sent_per_process"] else "-", r["final_loss"]))
PY
