#!/bin/bash
# The task commands with --device cuda on the emulated library against --device cpu, on the
# repository's small fixtures (a 2-layer, 16-wide model: tests/data/checkpoints/hf): squad, glue,
# ner and classify fine-tune 6 steps and evaluate, embed encodes 8 sentences. The two devices
# sum in other orders (fp32 both): the final losses agree to 1e-4 relative plus one unit of the
# printed last digit (six steps of a small model move a rounding difference of ~1e-7 by far less
# than that; a wrong mask, gradient or update moves them by more), the vectors to 1e-5;
# the dev metrics are printed side by side (a near tie may go the other way on one example).
# Usage (make cuda-emulate): tests/cuda/emu/commands.sh; exit 1 if any run fails or differs.
set -u
R=$PWD
B=$R/bert
export BERT_CUDA_LIB=$R/build-emu/libbert_cuda_emu.so
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
for cmd in squad glue ner classify; do
  for dev in cpu cuda; do
    $B $cmd $common ${args[$cmd]} --output_dir "$W/${cmd}_$dev" --device $dev > "$W/${cmd}_$dev.log" 2>&1 ||
      { failed+=("$cmd --device $dev (exit $?)"); tail -n 5 "$W/${cmd}_$dev.log"; }
  done
  a=$(final_loss "$W/${cmd}_cpu.log") b=$(final_loss "$W/${cmd}_cuda.log")
  echo "== $cmd: final loss $a (cpu) $b (cuda)"
  grep -hE '^\{|eval \{|official metrics' "$W/${cmd}_cpu.log" "$W/${cmd}_cuda.log" | sed 's/^/   /'
  grep -q 'seq/s\|sentences/s\|features/s\|sequences/s' "$W/${cmd}_cuda.log" || failed+=("$cmd: no progress on cuda")
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-4 * (a < 0 ? -a : a) + 1e-4) }' ||
    failed+=("$cmd: final loss $a (cpu) vs $b (cuda)")
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
rm -rf "$W"
if [ ${#failed[@]} -gt 0 ]; then echo "commands: FAILED: ${failed[*]}"; exit 1; fi
echo "commands: every task on the emulated GPU as on the CPU"
