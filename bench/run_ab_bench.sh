#!/usr/bin/env bash
# A/B of two builds of bert.c on `bert bench` (bert-base, batch 32, seq 128, 20 predictions;
# training step with AdamW and inference forward), fp32 and bf16, the two binaries alternating
# within each round and the order swapped every other round, so that drift of the machine's
# speed falls on both. For a change that should cost nothing (a refactor): is it within noise?
#
#   bash bench/run_ab_bench.sh BEFORE_BINARY AFTER_BINARY [ROUNDS]   (default 4 rounds)
#
# Build the "before" binary from a worktree of the older commit (git worktree add /tmp/old REV;
# make -C /tmp/old bert). Writes bench/results/ab_bench_<date>.jsonl and prints the table.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${1:?before binary}; AFTER=${2:?after binary}; ROUNDS=${3:-4}
STEPS=${STEPS:-3}
OUT=bench/results/ab_bench_$(date -u +%Y%m%d_%H%M%S).jsonl
for round in $(seq 1 "$ROUNDS"); do
  order="before after"; [ $((round % 2)) -eq 0 ] && order="after before"
  for prec in fp32 bf16; do
    flag=""; [ "$prec" = bf16 ] && flag="--bf16"
    for side in $order; do
      bin=$BEFORE; [ "$side" = after ] && bin=$AFTER
      "$bin" bench --preset bert-base --batch 32 --seq 128 --preds 20 --steps "$STEPS" --warmup 1 $flag --json 2>/dev/null \
        | python3 -c "import json,sys; d=json.load(sys.stdin); d['side']='$side'; d['round']=$round; print(json.dumps(d))" >> "$OUT"
    done
  done
done
echo "raw: $OUT" >&2
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| precision | build | train seq/s, each round | mean | infer seq/s, each round | mean |")
print("|---|---|---|---|---|---|")
for prec in ("fp32", "bf16"):
    means = {}
    for side in ("before", "after"):
        r = sorted((x for x in rows if x["precision"] == prec and x["side"] == side), key=lambda x: x["round"])
        t, i = [x["train_seq_per_s"] for x in r], [x["infer_seq_per_s"] for x in r]
        means[side] = (statistics.mean(t), statistics.mean(i))
        print(f"| {prec} | {side} | {', '.join('%.2f' % v for v in t)} | {means[side][0]:.2f} | "
              f"{', '.join('%.2f' % v for v in i)} | {means[side][1]:.2f} |")
    print(f"| {prec} | after / before | | {means['after'][0] / means['before'][0]:.3f} | | "
          f"{means['after'][1] / means['before'][1]:.3f} |")
PY
