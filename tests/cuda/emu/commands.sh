#!/bin/bash
# The commands with --device cuda on the emulated library against --device cpu, on the
# repository's small fixtures: squad, glue, ner and classify fine-tune a 2-layer, 16-wide model
# (tests/data/checkpoints/hf) 6 steps and evaluate; pretrain runs a 2-layer, 32-wide one 6 steps
# (fp32, fp16, fp16 with the fused attention, and 3 + 3 resumed across the devices); embed encodes
# 8 sentences, and serve answers them as /v1/embeddings requests (tests/cuda/serve_embed.sh);
# machines the library cannot run on are refused with the reason (the emulator told so). The
# two devices sum in other orders (fp32 both; ~1e-7 relative a step): the fine-tunes' final losses
# agree to 1e-4 relative plus one unit of the printed last digit, the pre-training's last step (read
# in full from its DLLogger file) to 1e-5 relative, the vectors to 1e-5 (a wrong mask, gradient,
# product or update moves them by more: EMU_LIB=a planted build); the dev metrics are printed side
# by side (a near tie may go the other way on one example).
# Usage (make cuda-emulate): tests/cuda/emu/commands.sh; exit 1 if any run fails or differs.
set -u
R=$PWD
B=$R/bert
export BERT_CUDA_LIB=${EMU_LIB:-$R/build-emu/libbert_cuda_emu.so}   # EMU_LIB: another build of it (a planted fault)
H=$R/tests/data/checkpoints/hf
W=$(mktemp -d /tmp/bert_cuda_commands.XXXXXX)
failed=()
common="--init_checkpoint $H --max_seq_length 32 --train_batch_size 8 --max_steps 6 --learning_rate 1e-3 --threads 1 --do_train --do_eval"
declare -A args=(
  [squad]="--train_file $R/tests/data/squad/subset_v1.json --predict_file $R/tests/data/squad/subset_v1.json --do_predict --doc_stride 16 --max_query_length 12 --predict_batch_size 8"
  [glue]="--task_name MRPC --data_dir $R/tests/data/glue/MRPC"
  [ner]="--train_file $R/tests/data/ner/train.txt --validation_file $R/tests/data/ner/dev.txt"
  [classify]="--train_file $R/tests/data/classify/multiclass_train.csv --validation_file $R/tests/data/classify/multiclass_dev.csv"
)
final_loss() { grep -o 'final loss [-0-9.e]*' "$1" | tail -n 1 | awk '{print $3}'; }
same() {   # same WHAT A B: two final losses within the bound above, else a failure
  awk -v a="$2" -v b="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-4 * (a < 0 ? -a : a) + 1e-4) }' ||
    failed+=("$1: final loss $2 vs $3")
}
for cmd in squad glue ner classify; do
  for dev in cpu cuda; do
    $B $cmd $common ${args[$cmd]} --output_dir "$W/${cmd}_$dev" --device $dev > "$W/${cmd}_$dev.log" 2>&1 ||
      { failed+=("$cmd --device $dev (exit $?)"); tail -n 5 "$W/${cmd}_$dev.log"; }
  done
  a=$(final_loss "$W/${cmd}_cpu.log") b=$(final_loss "$W/${cmd}_cuda.log")
  echo "== $cmd: final loss $a (cpu) $b (cuda)"
  grep -hE '^\{|eval \{|official metrics' "$W/${cmd}_cpu.log" "$W/${cmd}_cuda.log" | sed 's/^/   /'
  grep -q 'seq/s\|sentences/s\|features/s\|sequences/s' "$W/${cmd}_cuda.log" || failed+=("$cmd: no progress on cuda")
  same "$cmd" "$a" "$b"
done
# pre-training: a shard of the repository's sentences (Google's masking), a 2-layer 32-wide model
# with the bundled vocabulary; fp32 and fp16 (dynamic loss scaling) on both devices, then 3 steps
# on one device resumed for 3 on the other, against the straight runs
V=$R/data/vocab/bert-base-uncased-vocab.txt
mkdir -p "$W/shards"
printf '{"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}' > "$W/config.json"
$B create_pretraining_data --input_file $R/tests/data/corpus/sentences_expected.txt --output_file "$W/shards/s_training_0.hdf5" \
  --vocab_file $V --max_seq_length 64 --max_predictions_per_seq 10 --dupe_factor 1 --quiet || failed+=("create_pretraining_data")
pretrain() {   # pretrain DEVICE OUT [flags]
  local dev=$1 out=$2
  shift 2
  $B pretrain --input_dir "$W/shards" --config_file "$W/config.json" --vocab_file $V --output_dir "$out" \
    --max_seq_length 64 --max_predictions_per_seq 10 --train_batch_size 8 --max_steps 6 --learning_rate 1e-3 \
    --warmup_proportion 0.2 --num_steps_per_checkpoint 3 --threads 1 --disable_progress_bar \
    --json-summary "$out.json" --device $dev "$@" >> "$out.log" 2>&1
}
# the last step's loss in full (the DLLogger file), for pre-training's tighter bound: its loss
# of ~11 is mostly the vocabulary's entropy, so 4 printed decimals hide what six steps change
step_loss() { grep -o '"step_loss": *[-0-9.e]*' "$1" | tail -n 1 | sed 's/.*: *//'; }
close() {   # close WHAT A B: within 1e-5 relative (fp32 sums in other orders: ~1e-7 a step), else a failure
  awk -v a="$2" -v b="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-5 * (a < 0 ? -a : a)) }' ||
    failed+=("$1: last step loss $2 vs $3")
}
for prec in fp32 fp16; do
  flags=$([ $prec = fp16 ] && echo --fp16)
  for dev in cpu cuda; do pretrain $dev "$W/pt_${prec}_$dev" $flags || failed+=("pretrain $prec --device $dev"); done
  a=$(step_loss "$W/pt_${prec}_cpu.json") b=$(step_loss "$W/pt_${prec}_cuda.json")
  echo "== pretrain $prec: last step's loss $a (cpu) $b (cuda)"
  # fp32 on a GPU is said to be off the tensor cores, once; on the CPU, or in fp16, nothing
  notes=$(grep -c 'true fp32, off the tensor cores' "$W/pt_${prec}_cuda.log" "$W/pt_${prec}_cpu.log" | cut -d: -f2 | tr '\n' ' ')
  [ "$notes" = "$([ $prec = fp32 ] && echo '1 0 ' || echo '0 0 ')" ] || failed+=("pretrain $prec: the fp32 note (cuda, cpu): $notes")
  close "pretrain $prec" "$a" "$b"
done
# the fused attention (BERT_CUDA_ATTENTION=fused, opt-in until its GPU run) on the fp16 run: the
# probabilities recomputed in the backward, from the state the model now sizes by the backend's say
(export BERT_CUDA_ATTENTION=fused; pretrain cuda "$W/pt_fp16_fused" --fp16) || failed+=("pretrain fp16 fused")
a=$(step_loss "$W/pt_fp16_cpu.json") b=$(step_loss "$W/pt_fp16_fused.json")
echo "== pretrain fp16 with BERT_CUDA_ATTENTION=fused: last step's loss $a (cpu) $b (cuda)"
close "pretrain fp16 fused" "$a" "$b"
for pair in "cpu cuda" "cuda cpu"; do
  set -- $pair
  pretrain $1 "$W/pt_$1_$2" --steps_this_run 3 && pretrain $2 "$W/pt_$1_$2" --resume_from_checkpoint ||
    failed+=("pretrain resumed from $1 on $2")
  a=$(step_loss "$W/pt_fp32_$2.json") b=$(step_loss "$W/pt_$1_$2.json")
  echo "== pretrain 3 steps on $1, resumed for 3 on $2: last step's loss $b ($2's straight run: $a)"
  close "pretrain $1 then $2" "$a" "$b"
done
E=$R/tests/data/embed
for dev in cpu cuda; do
  $B embed --init_checkpoint $E --device $dev --output "$W/embed_$dev.npy" < $E/sentences.txt > "$W/embed_$dev.log" 2>&1 ||
    failed+=("embed --device $dev")
done
# the .npy's float32 payload: the bytes after the header, compared as numbers
diff=$(python3 -c "
import struct, sys
def floats(p):
    b = open(p, 'rb').read(); n = struct.unpack('<H', b[8:10])[0]; d = b[10 + n:]
    return struct.unpack('<%df' % (len(d) // 4), d)
a, b = floats('$W/embed_cpu.npy'), floats('$W/embed_cuda.npy')
print(max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) and a else 'inf')")
echo "== embed: 8 sentences, largest difference $diff"
awk -v d="$diff" 'BEGIN { exit !(d != "inf" && d <= 1e-5) }' || failed+=("embed: vectors differ by $diff")
# the server: the same sentences (but the empty line) as /v1/embeddings requests, four at once, on each device
for dev in cpu cuda; do
  bash "$R/tests/cuda/serve_embed.sh" "$B" "$E" $dev "$E/sentences.txt" "$W/serve_$dev.json" || failed+=("serve --device $dev")
done
diff=$(python3 -c "
import json
try: a, b = json.load(open('$W/serve_cpu.json')), json.load(open('$W/serve_cuda.json'))
except Exception: a, b = [], []
print(max(abs(x - y) for u, v in zip(a, b) for x, y in zip(u, v)) if a and len(a) == len(b) else 'inf')")
echo "== serve: /v1/embeddings in 4 requests at once, largest difference $diff"
awk -v d="$diff" 'BEGIN { exit !(d != "inf" && d <= 1e-5) }' || failed+=("serve: vectors differ by $diff")
# machines the library cannot run on (the emulator told so: tests/cuda/emu/include/cuda_runtime.h):
# each command stops at once with exit 2 and says why, not a CUDA error at the first kernel; and
# the device's own (a CUDA 13.0 driver under the library's 13.5 runtime) runs
declare -A refusal=([EMU_SM=75]="compute capability 7.5" [EMU_PROBE_ERROR=209]="has no code in this library"
                    [EMU_PROBE_ERROR=222]="the driver (CUDA 0.0) is older than" [EMU_PROBE_ERROR=46]="cannot start"
                    [EMU_DEVICES=0]="no CUDA GPU is visible" [EMU_DRIVER=12040]="driver supports CUDA 12.4, an older major")
for machine in "${!refusal[@]}" EMU_DRIVER=13000; do
  rm -f "$W/refused.npy"
  env $machine $B embed --init_checkpoint $E --device cuda --output "$W/refused.npy" < $E/sentences.txt > "$W/refused.log" 2>&1
  status=$?
  echo "== embed --device cuda with $machine: exit $status, $(head -c 120 "$W/refused.log")..."
  if [ $machine = EMU_DRIVER=13000 ]; then   # the device's: a 13.0 driver under the 13.5 runtime runs
    [ $status = 0 ] && [ -s "$W/refused.npy" ] || failed+=("$machine: exit $status, $(tail -n 1 "$W/refused.log")")
  else
    [ $status = 2 ] && grep -q "${refusal[$machine]}" "$W/refused.log" && [ ! -e "$W/refused.npy" ] ||
      failed+=("$machine: exit $status, $(head -n 1 "$W/refused.log")")
  fi
done
rm -rf "$W"
if [ ${#failed[@]} -gt 0 ]; then echo "commands: FAILED: ${failed[*]}"; exit 1; fi
echo "commands: every task on the emulated GPU as on the CPU"
