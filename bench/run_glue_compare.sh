#!/usr/bin/env bash
# GLUE fine-tuning, bert.c against transformers, on all-MiniLM-L6-v2 with the same
# hyperparameters (lr 2e-5, batch 32, 3 epochs, max_seq_length 128, warmup 0.1, AdamW eps 1e-6,
# decay 0.01, clip 1.0): `bert glue` on one side, bench/hf_glue_finetune.py (a plain PyTorch
# loop around BertForSequenceClassification) on the other. One training at a time, the side
# that goes first alternating from one (task, seed) to the next; each run's load average
# before and after, wall and CPU seconds (/usr/bin/time) and the dev metrics go to RESULTS as
# JSON lines; the logs beside it. Runs already in RESULTS are skipped, so the same command
# resumes an interrupted series. Table: bench/glue_compare_table.py RESULTS.
#
#   bench/run_glue_compare.sh
#   PLAN="cola:1 sst-2:1 ..."     (task:seed) in the order to run them (default below)
#   THREADS=2                     both sides
#   SST2_EXAMPLES=8000            SST-2 trains on its first N rows (both sides)
#   GLUE_DIR=/work/shared/data/glue   MRPC CoLA STS-B RTE SST-2 folders
#   MODEL=...                     default: bench/setup_minilm.sh's folder (downloaded if absent)
#   PEER_PYTHON=.venv-bf16peer/bin/python   torch + transformers + scikit-learn + scipy
#   RESULTS=file.jsonl            default bench/results/glue_compare_<time>.jsonl
#   MAX_STEPS=N                   smoke test: N steps per run (not for the table)
#   HEAD_INIT=truncated_normal    the transformers side draws its head as bert.c does (default:
#                                 transformers' normal); runs are told apart by "head_init"
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}; SST2_EXAMPLES=${SST2_EXAMPLES:-8000}; GLUE_DIR=${GLUE_DIR:-/work/shared/data/glue}
PEER_PYTHON=${PEER_PYTHON:-.venv-bf16peer/bin/python}
PLAN=${PLAN:-"cola:1 sst-2:1 cola:2 sst-2:2 mrpc:1 sts-b:1 rte:1 mrpc:2 sts-b:2 rte:2 cola:3 sst-2:3 mrpc:3 sts-b:3 rte:3"}
MODEL=${MODEL:-$(bench/setup_minilm.sh)}
[ -x ./bert ] || { echo "run_glue_compare: build first (make)" >&2; exit 1; }
[ -x "$PEER_PYTHON" ] || { echo "run_glue_compare: no $PEER_PYTHON (bench/setup_bf16_peer_env.sh)" >&2; exit 1; }
mkdir -p bench/results
results=${RESULTS:-bench/results/glue_compare_$(date -u +%Y%m%d_%H%M%S).jsonl}
work=out/glue_compare/$(basename "$results" .jsonl)
mkdir -p "$work"
# a private copy of the binary, so that a rebuild during the series cannot change it
[ -x "$work/bert" ] || cp ./bert "$work/bert"
touch "$results"
echo "run_glue_compare: $results; logs in $work; model $MODEL; bert.c $(git rev-parse --short HEAD);" \
     "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores" >&2

dir_of() { case $1 in cola) echo CoLA ;; sst-2) echo SST-2 ;; mrpc) echo MRPC ;; sts-b) echo STS-B ;; rte) echo RTE ;; esac; }
done_already() {  # side task seed
  /usr/bin/python3 - "$results" "$@" <<'PY'
import json, sys
path, side, task, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for line in open(path):
    d = json.loads(line)
    if d.get("side") == side and d.get("task") == task and d.get("seed") == seed:
        sys.exit(0)
sys.exit(1)
PY
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

run_bertc() {  # task seed
  local task=$1 seed=$2 d; d=$(dir_of "$1")
  local log=$work/bertc_${task}_s$seed.log out=$work/bertc_${task}_s$seed
  local extra=(); [ "$task" = sst-2 ] && extra+=(--train_examples "$SST2_EXAMPLES")
  local steps=(--num_train_epochs 3); [ -n "${MAX_STEPS:-}" ] && steps=(--max_steps "$MAX_STEPS")
  local l0; l0=$(loadavg)
  echo "== $(date -u +%H:%M:%S) bert.c $task seed $seed (load $l0)" >&2
  /usr/bin/time -f 'TIME %e %U %S %M' -o "$log.time" \
    "$work/bert" glue --task_name "$task" --data_dir "$GLUE_DIR/$d" --output_dir "$out" --init_checkpoint "$MODEL" \
      --vocab_file "$MODEL/vocab.txt" --do_lower_case --do_train --do_eval --learning_rate 2e-5 \
      "${steps[@]}" --train_batch_size 32 --max_seq_length 128 --seed "$seed" --threads "$THREADS" \
      --skip_checkpoint "${extra[@]}" >"$log" 2>&1
  /usr/bin/python3 - "$log" "$out/eval_results.json" "$task" "$seed" "$l0" "$(loadavg)" "$THREADS" <<'PY' | tee -a "$results" >&2
import json, re, sys
log, ev, task, seed, l0, l1, threads = sys.argv[1:]
text = open(log).read()
m = re.search(r"bert glue: \S+: (\d+) steps, (\d+) sequences in ([\d.]+) s", text)
e = re.search(r"eval dev\.tsv \((\d+) examples, ([\d.]+) seq/s\)", text)
n = re.search(r"training on (\d+) examples", text)
t = open(log + ".time").read().split("TIME")[-1].split()
dev = json.load(open(ev))
dev = {k: v for k, v in dev.items() if k not in ("task", "examples")}
print(json.dumps({"side": "bert.c", "task": task, "seed": int(seed), "train_examples": int(n.group(1)),
                  "steps": int(m.group(1)), "train_sequences": int(m.group(2)), "train_seconds": float(m.group(3)),
                  "train_seq_per_s": int(m.group(2)) / float(m.group(3)), "eval_examples": int(e.group(1)),
                  "eval_seconds": int(e.group(1)) / float(e.group(2)), "dev": dev,
                  "process_seconds": float(t[0]), "cpu_seconds": float(t[1]) + float(t[2]), "max_rss_kb": int(t[3]),
                  "load_before": l0, "load_after": l1, "threads": int(threads)}))
PY
}

run_hf() {  # task seed
  local task=$1 seed=$2 d; d=$(dir_of "$1")
  local log=$work/hf_${task}_s$seed.log
  local extra=(); [ "$task" = sst-2 ] && extra+=(--train_examples "$SST2_EXAMPLES")
  [ -n "${MAX_STEPS:-}" ] && extra+=(--max_steps "$MAX_STEPS")
  local l0; l0=$(loadavg)
  echo "== $(date -u +%H:%M:%S) transformers $task seed $seed (load $l0)" >&2
  OMP_NUM_THREADS=$THREADS /usr/bin/time -f 'TIME %e %U %S %M' -o "$log.time" \
    "$PEER_PYTHON" -W ignore bench/hf_glue_finetune.py --task "$task" --data_dir "$GLUE_DIR/$d" --model "$MODEL" \
      --seed "$seed" --epochs 3 --batch 32 --lr 2e-5 --max_seq_length 128 --threads "$THREADS" \
      --head_init "${HEAD_INIT:-normal}" "${extra[@]}" \
      >"$log.json" 2>"$log"
  /usr/bin/python3 - "$log" "$l0" "$(loadavg)" <<'PY' | tee -a "$results" >&2
import json, sys
log, l0, l1 = sys.argv[1:]
d = json.loads(open(log + ".json").read().strip().splitlines()[-1])
t = open(log + ".time").read().split("TIME")[-1].split()
d.update({"process_seconds": float(t[0]), "cpu_seconds": float(t[1]) + float(t[2]), "max_rss_kb": int(t[3]),
          "load_before": l0, "load_after": l1})
print(json.dumps(d))
PY
}

i=0
for item in $PLAN; do
  task=${item%%:*}; seed=${item##*:}
  if [ $((i % 2)) -eq 0 ]; then sides="bert.c transformers"; else sides="transformers bert.c"; fi
  for side in $sides; do
    if done_already "$side" "$task" "$seed"; then echo "== $side $task seed $seed: in $results already" >&2; continue; fi
    if [ "$side" = bert.c ]; then run_bertc "$task" "$seed"; else run_hf "$task" "$seed"; fi
  done
  i=$((i + 1))
done
echo "run_glue_compare: done; bench/glue_compare_table.py $results" >&2
