#!/usr/bin/env bash
# Accuracy of mixed precision: phase-1 pre-training of one model on real prepared text in
# fp32, bf16 and fp16, same seed, same data; the held-out MLM accuracy of each at the end and
# the curves of all three in one SVG (bert plot).
#
#   bench/run_precision_accuracy.sh PHASE1_SHARD_DIR [OUT]
#   MODEL=bert-mini STEPS=300 BATCH=64 ACCUM=2 LR=2e-3     (defaults shown)
#   PRECISIONS="fp32 bf16 fp16"   bf16 needs avx512_bf16; use bf16_emulate elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
shards=${1:?usage: run_precision_accuracy.sh PHASE1_SHARD_DIR [OUT]}
out=${2:-out/precision_accuracy}
MODEL=${MODEL:-bert-mini}; STEPS=${STEPS:-300}; BATCH=${BATCH:-64}; ACCUM=${ACCUM:-2}; LR=${LR:-2e-3}
PRECISIONS=${PRECISIONS:-fp32 bf16 fp16}
mkdir -p "$out"
logs=()
for p in $PRECISIONS; do
  flag=(); [ "$p" != fp32 ] && flag=(--"$p")
  rm -rf "${out:?}/$p"
  echo "== $p" >&2
  ./bert pretrain --input_dir "$shards" --bert_model "$MODEL" --output_dir "$out/$p" "${flag[@]}" \
    --train_batch_size "$BATCH" --gradient_accumulation_steps "$ACCUM" --max_steps "$STEPS" --learning_rate "$LR" \
    --warmup_proportion 0.1 --num_steps_per_checkpoint "$STEPS" --log_freq 10 --eval_steps 50 --eval_batches 0 \
    --disable_progress_bar --json-summary "$out/$p.json" 2>&1 | grep -E "^eval|^bert pretrain|skipped" >&2
  logs+=("$out/$p.json")
done
./bert plot "${logs[@]}" -o "$out/precision_curves.svg"
for p in $PRECISIONS; do
  /usr/bin/python3 -c 'import json,sys
acc=[json.loads(l[5:])["data"].get("eval_mlm_accuracy") for l in open(sys.argv[1]) if l.startswith("DLLL ")]
acc=[a for a in acc if a is not None]
print(f"{sys.argv[2]:5s} held-out MLM accuracy by evaluation: " + " ".join(f"{a:.4f}" for a in acc))' "$out/$p.json" "$p"
done
echo "curves: $out/precision_curves.svg"
