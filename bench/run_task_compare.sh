#!/usr/bin/env bash
# `bert ner` and `bert classify` against transformers on real corpora from PyPI packages
# (issue 34): all-MiniLM-L6-v2 fine-tuned on WNUT-16 tweets (NER) and on VADER's movie-review
# snippets (positive / negative), bench/task_compare_data.py's splits, with the same
# hyperparameters on both sides (AdamW eps 1e-6, decay 0.01, warmup 0.1, clip 1.0, fp32, the
# threads below): bert.c on one side, bench/hf_task_finetune.py (a plain PyTorch loop around
# BertForTokenClassification / BertForSequenceClassification, seqeval for NER) on the other.
# One training at a time; seeds in the outer loop and the side that goes first alternating, so
# an interrupted series still has whole seeds. Each run's load average before and after, wall
# and CPU seconds (/usr/bin/time) and the dev metrics go to RESULTS as JSON lines, the logs
# beside it; runs already in RESULTS are skipped (the same command resumes). Table:
# python3 bench/task_compare_table.py RESULTS.
#
#   bench/run_task_compare.sh
#   SEEDS="1 2 3"  TASKS="ner classify"  THREADS=2
#   NER_TRAIN=600 NER_DEV=800 NER_EPOCHS=3 NER_BATCH=16 NER_LR=1e-4 NER_LEN=128
#                                 the first NER_TRAIN tweets train, the next NER_DEV evaluate
#   CLS_TRAIN=700 CLS_DEV=500 CLS_EPOCHS=2 CLS_BATCH=16 CLS_LR=5e-5 CLS_LEN=128
#   MODEL=...                     default: bench/setup_minilm.sh's folder (downloaded if absent)
#   PEER_PYTHON=/work/main/.venv/bin/python   torch + transformers (+ scipy for the table's p);
#                                 seqeval 1.2.2 is pip-installed into bench/.cache/pylib if missing
#   RESULTS=file.jsonl            default bench/results/task_compare/task_compare_<time>.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"1 2 3"}; TASKS=${TASKS:-"ner classify"}; THREADS=${THREADS:-2}
NER_TRAIN=${NER_TRAIN:-600}; NER_DEV=${NER_DEV:-800}; NER_EPOCHS=${NER_EPOCHS:-3}; NER_BATCH=${NER_BATCH:-16}
NER_LR=${NER_LR:-1e-4}; NER_LEN=${NER_LEN:-128}
CLS_TRAIN=${CLS_TRAIN:-700}; CLS_DEV=${CLS_DEV:-500}; CLS_EPOCHS=${CLS_EPOCHS:-2}; CLS_BATCH=${CLS_BATCH:-16}
CLS_LR=${CLS_LR:-5e-5}; CLS_LEN=${CLS_LEN:-128}
PEER_PYTHON=${PEER_PYTHON:-/work/main/.venv/bin/python}
[ -x ./bert ] || { echo "run_task_compare: build first (make)" >&2; exit 1; }
MODEL=${MODEL:-$(PIP="$PEER_PYTHON -m pip" bench/setup_minilm.sh)}
pylib=bench/.cache/pylib   # seqeval 1.2.2 (run_ner.py's metric) for the transformers side
PYTHONPATH=$pylib "$PEER_PYTHON" -c "import seqeval" 2>/dev/null ||
  "$PEER_PYTHON" -m pip install -q --no-deps --target "$pylib" seqeval==1.2.2 >&2
results=${RESULTS:-bench/results/task_compare/task_compare_$(date -u +%Y%m%d_%H%M%S).jsonl}
mkdir -p "$(dirname "$results")"
work=out/task_compare/$(basename "$results" .jsonl)
mkdir -p "$work"
[ -x "$work/bert" ] || cp ./bert "$work/bert"   # a rebuild during the series cannot change it
touch "$results"
python3 bench/task_compare_data.py --cache bench/.cache/task_compare --out "$work/data" --ner_train "$NER_TRAIN" \
  --ner_dev "$NER_DEV" --cls_train "$CLS_TRAIN" --cls_dev "$CLS_DEV" --pip "$PEER_PYTHON -m pip" >&2
cp "$work/data/sizes.json" "$(dirname "$results")/$(basename "$results" .jsonl)_sizes.json"
echo "run_task_compare: $results; logs in $work; model $MODEL; bert.c $(git rev-parse --short HEAD);" \
     "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores" >&2

# task -> files and hyperparameters, the same on both sides
setup() {
  if [ "$1" = ner ]; then
    train=$work/data/ner/train.txt dev=$work/data/ner/dev.txt
    epochs=$NER_EPOCHS batch=$NER_BATCH lr=$NER_LR len=$NER_LEN
  else
    train=$work/data/classify/train.csv dev=$work/data/classify/dev.csv
    epochs=$CLS_EPOCHS batch=$CLS_BATCH lr=$CLS_LR len=$CLS_LEN
  fi
}
done_already() {  # side task seed
  python3 -c 'import json,sys; p,s,t,e=sys.argv[1:]; sys.exit(0 if any((d["side"],d["task"],d["seed"])==(s,t,int(e)) for d in map(json.loads,open(p))) else 1)' "$results" "$@"
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

run_bertc() {  # task seed
  local task=$1 seed=$2 log=$work/bertc_$1_s$2.log out=$work/bertc_$1_s$2 l0 extra=()
  setup "$task"; l0=$(loadavg)
  [ "$task" = ner ] && extra=(--labels "$work/data/ner/labels.txt")
  echo "== $(date -u +%H:%M:%S) bert.c $task seed $seed (load $l0)" >&2
  /usr/bin/time -f 'TIME %e %U %S %M' -o "$log.time" \
    "$work/bert" "$task" --train_file "$train" --validation_file "$dev" --output_dir "$out" --init_checkpoint "$MODEL" \
      --do_train --do_eval --learning_rate "$lr" --num_train_epochs "$epochs" --train_batch_size "$batch" \
      --max_seq_length "$len" --warmup_proportion 0.1 --weight_decay 0.01 --adam_epsilon 1e-6 --seed "$seed" \
      --threads "$THREADS" --skip_checkpoint --overwrite_output_dir "${extra[@]}" >"$log" 2>&1
  python3 - "$log" "$out/eval_results.json" "$task" "$seed" "$l0" "$(loadavg)" "$THREADS" <<'PY' | tee -a "$results" >&2
import json, re, sys
log, ev, task, seed, l0, l1, threads = sys.argv[1:]
text = open(log).read()
m = re.search(r"bert %s: (?:\S+: )?(\d+) steps, (\d+) \w+ in ([\d.]+) s" % task, text)
e = re.search(r"eval \S+ \((\d+) \w+, ([\d.]+) seq/s\)", text)
t = open(log + ".time").read().split("TIME")[-1].split()
print(json.dumps({"side": "bert.c", "task": task, "seed": int(seed), "steps": int(m.group(1)),
                  "train_sequences": int(m.group(2)), "train_seconds": float(m.group(3)),
                  "train_seq_per_s": int(m.group(2)) / float(m.group(3)), "eval_examples": int(e.group(1)),
                  "eval_seconds": int(e.group(1)) / float(e.group(2)), "dev": json.load(open(ev)),
                  "process_seconds": float(t[0]), "cpu_seconds": float(t[1]) + float(t[2]), "max_rss_kb": int(t[3]),
                  "load_before": l0, "load_after": l1, "threads": int(threads)}))
PY
}

run_hf() {  # task seed
  local task=$1 seed=$2 log=$work/hf_$1_s$2.log l0 extra=()
  setup "$task"; l0=$(loadavg)
  [ "$task" = ner ] && extra=(--labels "$work/data/ner/labels.txt")
  echo "== $(date -u +%H:%M:%S) transformers $task seed $seed (load $l0)" >&2
  PYTHONPATH=$pylib OMP_NUM_THREADS=$THREADS /usr/bin/time -f 'TIME %e %U %S %M' -o "$log.time" \
    "$PEER_PYTHON" -W ignore bench/hf_task_finetune.py --task "$task" --train "$train" --dev "$dev" --model "$MODEL" \
      --seed "$seed" --epochs "$epochs" --batch "$batch" --lr "$lr" --max_seq_length "$len" --warmup 0.1 \
      --weight_decay 0.01 --eps 1e-6 --threads "$THREADS" "${extra[@]}" >"$log.json" 2>"$log"
  python3 - "$log" "$l0" "$(loadavg)" <<'PY' | tee -a "$results" >&2
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
for seed in $SEEDS; do
  for task in $TASKS; do
    if [ $((i % 2)) -eq 0 ]; then sides="bert.c transformers"; else sides="transformers bert.c"; fi
    for side in $sides; do
      if done_already "$side" "$task" "$seed"; then echo "== $side $task seed $seed: in $results already" >&2; continue; fi
      if [ "$side" = bert.c ]; then run_bertc "$task" "$seed"; else run_hf "$task" "$seed"; fi
    done
    i=$((i + 1))
  done
done
echo "run_task_compare: done; python3 bench/task_compare_table.py $results" >&2
