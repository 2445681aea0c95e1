#!/usr/bin/env bash
# Fine-tuning training throughput, bert.c and PyTorch + transformers side by side in one run,
# on bert-base shapes with random weights (one checkpoint for every side, written by `bert
# train_demo`: the weights do not change the speed), on real length distributions:
#   GLUE   MRPC's train rows (3,668; mean 53 of 128 tokens), max_seq_length 128, batch 32:
#          `bert glue` (packed: each row's real tokens only) against bench/finetune_peers.py's
#          BertForSequenceClassification with the Trainer's dynamic padding (each batch as long
#          as its longest row) and padded to 128 (--pad_to_max_length)
#   SQuAD  the training features of a fixed subset of dev-v1.1.json (SQUAD_FEATURES features:
#          runs of 32 consecutive questions spread evenly over the file, bench/infer_lengths.py;
#          the same subset as bench/run_infer_bench.sh's), seq 384, doc_stride 128, batch 32 in
#          one piece (bert-base peaks, measured at batches 2-16 and extrapolated: bert.c fp32
#          ~2.7 GB + 136 MiB per sequence, ~10 GB at 32; PyTorch eager fp32 ~2.5 GB + 280 MiB per
#          sequence, ~11.5 GB at 32; SQUAD_ACCUM=4 runs 4 micro-batches of 8 on every side where
#          memory is short): `bert squad` (every feature at 384, as the reference) against
#          BertForQuestionAnswering padded to 384 (run_qa.py's default) and with dynamic padding
# in fp32 and bf16 (bert.c --bf16; torch.autocast("cpu", bfloat16)), PyTorch eager and
# torch.compile'd. Every side trains on the same sequences in the same order (bert.c's
# shuffle, ported and checked; the example counts are checked against bert.c's log), with
# AdamW, the gradient norm clipped to 1, 2 threads, each run in its own process, and times
# its steps after the first WARMUP ones: bert.c's from the DLLogger records of --log_freq 1
# (their timestamps: the logged training_sequences_per_second counts from the loop's start,
# warm-up steps included), the peers' with perf_counter around each step. Then the tables
# (bench/finetune_table.py): seq/s, bert.c's speed-up over each row, bert.c / best peer in
# the same precision, peak RSS.
#
#   bench/run_finetune_bench.sh
#   PRESET=bert-base THREADS=2 BATCH=32          (defaults shown)
#   DATASETS="glue squad"
#   GLUE_TASK=mrpc GLUE_DIR=../shared/data/glue/MRPC GLUE_WARMUP=2 GLUE_STEPS=12
#   GLUE_TRAIN_EXAMPLES=0                        >0: the first N rows only (as bert glue --train_examples)
#   SQUAD_FILE=../shared/data/squad/v1.1/dev-v1.1.json SQUAD_FEATURES=1024 SQUAD_BLOCK=32
#   SQUAD_WARMUP=1 SQUAD_STEPS=3 SQUAD_ACCUM=1
#   GLUE_MODES="dynamic padded" SQUAD_MODES="padded dynamic"   the peers' padding
#   PRECISIONS="fp32 bf16"                       bf16 only where the CPU has avx512_bf16
#   NO_COMPILE=1                                 skip the torch.compile runs
#   GLUE_COMPILE_MODES=dynamic SQUAD_COMPILE_MODES="padded dynamic"   which modes also run compiled
#                                                (GLUE padded, 2.4 rows per real token against dynamic's
#                                                ~1.4, cannot be the best peer; add it to see)
#   NO_BERTC=1 / NO_PEERS=1                      one side only
#   VOCAB=data/vocab/bert-base-uncased-vocab.txt
#   PEER_PYTHON=.venv-bf16peer/bin/python        torch 2.x + transformers (bench/setup_bf16_peer_env.sh)
#   RESULTS=file                                 JSON lines (default bench/results/finetune_bench_<time>.jsonl)
# A smoke run of the whole pipeline (a few minutes on 2 cores, mostly torch.compile):
#   PRESET=bert-tiny GLUE_WARMUP=1 GLUE_STEPS=2 SQUAD_FEATURES=64 SQUAD_STEPS=2 bench/run_finetune_bench.sh
# Estimated 60-70 minutes for bert-base on 2 quiet cores (GLUE ~22, SQuAD ~43: its steps take
# 25-60 s each; the six torch.compile runs ~25 of it, ~75-100 s of compiling each: NO_COMPILE=1
# leaves ~40 minutes). Time it only on a quiet machine (`uptime`: load average below ~1.2).
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${PRESET:-bert-base}; THREADS=${THREADS:-2}; BATCH=${BATCH:-32}
DATASETS=${DATASETS:-glue squad}
shared=$(cd .. && pwd)/shared
[ -d "$shared" ] || shared=/work/shared
GLUE_TASK=${GLUE_TASK:-mrpc}; GLUE_DIR=${GLUE_DIR:-$shared/data/glue/MRPC}
GLUE_WARMUP=${GLUE_WARMUP:-2}; GLUE_STEPS=${GLUE_STEPS:-12}; GLUE_TRAIN_EXAMPLES=${GLUE_TRAIN_EXAMPLES:-0}
SQUAD_FILE=${SQUAD_FILE:-$shared/data/squad/v1.1/dev-v1.1.json}
SQUAD_FEATURES=${SQUAD_FEATURES:-1024}; SQUAD_BLOCK=${SQUAD_BLOCK:-32}
SQUAD_WARMUP=${SQUAD_WARMUP:-1}; SQUAD_STEPS=${SQUAD_STEPS:-3}; SQUAD_ACCUM=${SQUAD_ACCUM:-1}
GLUE_MODES=${GLUE_MODES:-dynamic padded}; SQUAD_MODES=${SQUAD_MODES:-padded dynamic}
PRECISIONS=${PRECISIONS:-fp32 bf16}
GLUE_COMPILE_MODES=${GLUE_COMPILE_MODES:-dynamic}; SQUAD_COMPILE_MODES=${SQUAD_COMPILE_MODES:-padded dynamic}
VOCAB=${VOCAB:-data/vocab/bert-base-uncased-vocab.txt}
PEER_PYTHON=${PEER_PYTHON:-.venv-bf16peer/bin/python}
[ -x ./bert ] || { echo "run_finetune_bench: build first (make)" >&2; exit 1; }
[ -x "$PEER_PYTHON" ] || { echo "run_finetune_bench: no $PEER_PYTHON; run bench/setup_bf16_peer_env.sh" >&2; exit 1; }
if [ "$GLUE_WARMUP" -lt 1 ] || [ "$SQUAD_WARMUP" -lt 1 ]; then
  echo "run_finetune_bench: WARMUP must be >= 1 (bert.c's first step is timed from the previous step's record)" >&2
  exit 2
fi
if ! grep -q avx512_bf16 /proc/cpuinfo && [[ " $PRECISIONS " == *" bf16 "* ]]; then
  echo "run_finetune_bench: no avx512_bf16 here: fp32 only (bert.c refuses --bf16; PyTorch's bf16 would be emulated)" >&2
  PRECISIONS=$(echo "$PRECISIONS" | tr ' ' '\n' | grep -v bf16 | xargs)
fi
mkdir -p bench/results bench/.cache
results=${RESULTS:-bench/results/finetune_bench_$(date -u +%Y%m%d_%H%M%S).jsonl}
work=out/finetune_bench/$(basename "$results" .jsonl)
mkdir -p "$work"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
export OMP_NUM_THREADS=$THREADS   # (OMP_WAIT_POLICY etc. pass through as set)

# one checkpoint of random weights for every side: bert train_demo's model after one step
ckpt=bench/.cache/finetune_${PRESET}_random
if [ ! -s "$ckpt/model.safetensors" ]; then
  echo "== a random $PRESET checkpoint in $ckpt (bert train_demo, one step)" >&2
  ./bert train_demo --model "$PRESET" --vocab_size "$(wc -l < "$VOCAB")" --steps 1 --batch 1 --seq 8 --preds 1 \
    --threads "$THREADS" --out "$ckpt/model.safetensors" >&2
fi
echo "run_finetune_bench: $results; logs in $work; $PRESET; bert.c $(git rev-parse --short HEAD)" >&2

# bert.c's run as one JSON line: its step times from the DLLogger records, the sequences per
# step from the plan (which the peers follow too), peak RSS from /usr/bin/time
bertc_json() {  # log dllogger time_file plan_json precision mode
  /usr/bin/python3 - "$@" "$THREADS" "$(git rev-parse --short HEAD)" <<'PY'
import json, re, sys
log, dll, tfile, plan, prec, mode, threads, rev = sys.argv[1:]
plan = json.loads(plan)
recs = [json.loads(l[5:]) for l in open(dll) if l.startswith("DLLL ")]
steps = [r for r in recs if isinstance(r["step"], list) and len(r["step"]) == 2]
ts = [float(r["timestamp"]) for r in steps]
W, seqs = plan["warmup_steps"], plan["step_sequences"]
if len(ts) != len(seqs):
    sys.exit(f"run_finetune_bench: bert.c logged {len(ts)} steps, the plan has {len(seqs)}")
dur = [b - a for a, b in zip(ts[W - 1:], ts[W:])]          # timed steps W+1 .. (1-based)
timed = seqs[W:]
text = open(log).read()
m = re.search(r"training on (\d+) (examples|features)", text)
rss_kb = int(open(tfile).read().split("TIME")[-1].split()[0])
first = seqs[0] / steps[0]["data"]["training_sequences_per_second"]
print(json.dumps({
    "impl": "bert.c", "precision": prec, "mode": mode, "compiled": False, "dataset": plan["dataset"],
    "examples": int(m.group(1)) if m else None, "batch": plan["batch"], "accum": plan["accum"],
    "max_seq_length": plan["max_seq_length"], "warmup_steps": W, "steps": len(dur), "sequences": sum(timed),
    "seconds": round(sum(dur), 4), "sequences_per_second": round(sum(timed) / sum(dur), 4),
    "best_step_seq_per_s": round(max(n / d for n, d in zip(timed, dur)), 4), "first_step_s": round(first, 3),
    "real_tokens": plan["real_tokens"],
    "computed_rows": plan["real_tokens"] if mode == "packed" else plan["rows_padded"],
    "loss_first": round(steps[0]["data"]["step_loss"], 4), "loss_last": round(steps[-1]["data"]["step_loss"], 4),
    "logged_seq_per_s": round(steps[-1]["data"]["training_sequences_per_second"], 4),
    "peak_rss_mib": round(rss_kb / 1024.0, 1), "threads": int(threads), "variant": f"bert.c {rev}"}))
PY
}

run_dataset() {  # name, then the peer's data flags; uses $bertc (the bert.c command), $bertc_mode, $warmup, $steps,
                 # $accum, $seed, $modes, $compile_modes
  local name=$1; shift
  local src=("$@" --vocab_file "$VOCAB")
  local common=(--batch "$BATCH" --accum "$accum" --seed "$seed" --warmup_steps "$warmup" --steps "$steps"
                --threads "$THREADS" --model "$ckpt")
  local plan
  plan=$("$PEER_PYTHON" bench/finetune_peers.py "${src[@]}" "${common[@]}" --plan)
  echo "$plan" | tee -a "$results" >&2
  if [ "${NO_BERTC:-0}" != 1 ]; then
    for prec in $PRECISIONS; do
      local tag=${name}_bertc_$prec extra=()
      [ "$prec" = bf16 ] && extra=(--bf16)
      echo "== $(date -u +%H:%M:%S) bert.c $prec: $name (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
      rm -f "$work/$tag.dll"
      /usr/bin/time -f 'TIME %M' -o "$work/$tag.time" \
        "${bertc[@]}" --init_checkpoint "$ckpt" --vocab_file "$VOCAB" --do_lower_case --do_train \
        --output_dir "$work/$tag" --skip_checkpoint --train_batch_size "$BATCH" --gradient_accumulation_steps "$accum" \
        --max_steps $((warmup + steps)) --seed "$seed" --threads "$THREADS" --log_freq 1 \
        --json-summary "$work/$tag.dll" "${extra[@]}" >"$work/$tag.log" 2>&1 ||
        { echo "run_finetune_bench: bert.c failed: $work/$tag.log" >&2; tail -3 "$work/$tag.log" >&2; continue; }
      bertc_json "$work/$tag.log" "$work/$tag.dll" "$work/$tag.time" "$plan" "$prec" "$bertc_mode" | tee -a "$results" >&2
    done
  fi
  [ "${NO_PEERS:-0}" = 1 ] && return 0
  local runs=()
  for prec in $PRECISIONS; do for mode in $modes; do runs+=("$prec $mode"); done; done
  if [ "${NO_COMPILE:-0}" != 1 ]; then
    for prec in $PRECISIONS; do for mode in $modes; do
      if [[ " $compile_modes " == *" $mode "* ]]; then runs+=("$prec $mode --compile"); fi
    done; done
  fi
  local r prec mode compile flag
  for r in "${runs[@]}"; do
    read -r prec mode compile <<<"$r"
    flag=(); [ -n "$compile" ] && flag=(--compile)
    local tag=${name}_pytorch_${prec}_$mode${compile:+_compiled}
    echo "== $(date -u +%H:%M:%S) PyTorch $r: $name (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    if ! "$PEER_PYTHON" bench/finetune_peers.py "${src[@]}" "${common[@]}" --precision "$prec" --mode "$mode" \
         "${flag[@]}" 2>"$work/$tag.log" | tee -a "$results" >&2; then
      echo "run_finetune_bench: the peer failed ($r): $work/$tag.log" >&2
      tail -3 "$work/$tag.log" >&2
    fi
  done
}

for ds in $DATASETS; do
  case $ds in
    glue)
      warmup=$GLUE_WARMUP steps=$GLUE_STEPS accum=1 seed=1 modes=$GLUE_MODES compile_modes=$GLUE_COMPILE_MODES
      bertc_mode=packed
      extra=(); [ "$GLUE_TRAIN_EXAMPLES" -gt 0 ] && extra=(--train_examples "$GLUE_TRAIN_EXAMPLES")
      bertc=(./bert glue --task_name "$GLUE_TASK" --data_dir "$GLUE_DIR" --max_seq_length 128 --learning_rate 2e-5
             "${extra[@]}")
      run_dataset glue --glue_task "$GLUE_TASK" --data_dir "$GLUE_DIR" --train_examples "$GLUE_TRAIN_EXAMPLES" --lr 2e-5 ;;
    squad)
      subset=bench/.cache/squad_${SQUAD_FEATURES}_features_block${SQUAD_BLOCK}.json
      [ -s "$subset" ] || "$PEER_PYTHON" bench/infer_lengths.py --squad_file "$SQUAD_FILE" --vocab_file "$VOCAB" \
                            --subset_features "$SQUAD_FEATURES" --subset_block "$SQUAD_BLOCK" --subset_out "$subset"
      articles=$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["data"]))' "$subset")
      warmup=$SQUAD_WARMUP steps=$SQUAD_STEPS accum=$SQUAD_ACCUM seed=42 modes=$SQUAD_MODES
      compile_modes=$SQUAD_COMPILE_MODES bertc_mode=padded
      # --train_articles: every article of the subset, each question's first answer (a dev file has several)
      bertc=(./bert squad --train_file "$subset" --train_articles "$articles" --max_seq_length 384 --doc_stride 128
             --learning_rate 3e-5)
      run_dataset squad --squad_file "$subset" --lr 3e-5 ;;
    *) echo "run_finetune_bench: unknown dataset '$ds' (glue, squad)" >&2; exit 2 ;;
  esac
done

echo "conditions: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
     "avx512_bf16: $(grep -q avx512_bf16 /proc/cpuinfo && echo yes || echo no), $PRESET, $THREADS threads," \
     "load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
/usr/bin/python3 bench/finetune_table.py "$results" || echo "(finetune_table: the runs did not all train on the same sequences)"
echo "(raw results: $results)"
