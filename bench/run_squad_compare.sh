#!/usr/bin/env bash
# SQuAD v1.1 fine-tuning, bert.c against transformers, on all-MiniLM-L6-v2 with the same
# hyperparameters (bert squad's defaults: lr 5e-5, batch 32, max_seq_length 384, doc_stride 128,
# max_query_length 64, warmup 0.1, AdamW eps 1e-6, decay 0.01, clip 1.0; n-best 20, max answer
# 30), on a split of SQuAD's dev set (its train set is not in ../shared): train on the first N
# articles of dev-v1.1.json, predict the articles after them, both sides' predictions.json scored
# by the same `bert squad_eval` (the official v1.1 script's numbers). bert.c: `bert squad` in two
# processes, training (it saves the model) then prediction from the saved model, so that each
# phase has its own wall and CPU time; transformers: bench/hf_squad_finetune.py (a plain PyTorch
# loop around BertForQuestionAnswering, run_qa.py's features and post-processing, windows
# placed as Google's doc_stride places them). One run at a time, the side that goes first
# alternating from one seed to the next; each run's load average before and after, wall and CPU
# seconds and the metrics go to RESULTS as JSON lines; logs and predictions.json beside it.
# Runs already in RESULTS are skipped, so the same command resumes an interrupted series.
# Table: bench/squad_compare_table.py RESULTS.
#
#   bench/run_squad_compare.sh
#   SEEDS="1 2 3"                 seeds, in the order to run them (default 1)
#   SIDES="bert.c transformers"   the sides to run (default both; e.g. more seeds of one side)
#   TRAIN_ARTICLES=1              train on dev-v1.1.json's first N articles (1: Super_Bowl_50,
#                                 810 questions, 830 features)
#   EPOCHS=1                      1 epoch of 830 features: 26 steps of 32
#   LR=5e-5                       peak learning rate, both sides
#   PREDICT_ARTICLES=             predict this many articles after the first N (default: all
#                                 the rest: 47 articles, 9,760 questions, 10,003 features)
#   THREADS=2                     both sides
#   SQUAD_FILE=/work/shared/data/squad/v1.1/dev-v1.1.json
#   MODEL=...                     default: bench/setup_minilm.sh's folder (downloaded if absent)
#   PEER_PYTHON=.venv-bf16peer/bin/python   torch + transformers
#   RESULTS=file.jsonl            default bench/results/squad_compare/squad_compare_<time>.jsonl
#   MAX_STEPS=N                   smoke test: N steps per run (not for the table)
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}; SEEDS=${SEEDS:-1}; SIDES=${SIDES:-bert.c transformers}; TRAIN_ARTICLES=${TRAIN_ARTICLES:-1}; EPOCHS=${EPOCHS:-1}
PREDICT_ARTICLES=${PREDICT_ARTICLES:-}
SQUAD_FILE=${SQUAD_FILE:-/work/shared/data/squad/v1.1/dev-v1.1.json}
PEER_PYTHON=${PEER_PYTHON:-.venv-bf16peer/bin/python}
LR=${LR:-5e-5}; BATCH=32
MODEL=${MODEL:-$(bench/setup_minilm.sh)}
[ -x ./bert ] || { echo "run_squad_compare: build first (make)" >&2; exit 1; }
[ -x "$PEER_PYTHON" ] || { echo "run_squad_compare: no $PEER_PYTHON (bench/setup_bf16_peer_env.sh)" >&2; exit 1; }
[ -f "$SQUAD_FILE" ] || { echo "run_squad_compare: no $SQUAD_FILE" >&2; exit 1; }
mkdir -p bench/results/squad_compare
results=${RESULTS:-bench/results/squad_compare/squad_compare_$(date -u +%Y%m%d_%H%M%S).jsonl}
logs=${results%.jsonl}                            # logs and predictions.json (small), kept
work=out/squad_compare/$(basename "$results" .jsonl)   # models, nbest files, the binary (large), not kept
mkdir -p "$logs" "$work"
# a private copy of the binary, so that a rebuild during the series cannot change it
[ -x "$work/bert" ] || cp ./bert "$work/bert"
touch "$results"
echo "run_squad_compare: $results; logs in $logs; model $MODEL; bert.c $(git rev-parse --short HEAD);" \
     "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores;" \
     "train articles 0..$((TRAIN_ARTICLES - 1)), $EPOCHS epochs, predict ${PREDICT_ARTICLES:-all the} articles after" >&2

# bert squad predicts its --predict_file's articles from --predict_skip_articles on: with
# PREDICT_ARTICLES it gets a copy of the file's first N + P articles
predict_file=$SQUAD_FILE
if [ -n "$PREDICT_ARTICLES" ]; then
  predict_file=$work/first_$((TRAIN_ARTICLES + PREDICT_ARTICLES))_articles.json
  /usr/bin/python3 - "$SQUAD_FILE" "$((TRAIN_ARTICLES + PREDICT_ARTICLES))" "$predict_file" <<'PY'
import json, sys
root = json.load(open(sys.argv[1], encoding="utf-8"))
root["data"] = root["data"][:int(sys.argv[2])]
json.dump(root, open(sys.argv[3], "w", encoding="utf-8"))
PY
fi

done_already() {  # side seed
  /usr/bin/python3 - "$results" "$@" "$TRAIN_ARTICLES" "$EPOCHS" "${MAX_STEPS:-0}" <<'PY'
import json, sys
path, side, seed, n, epochs, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
for line in open(path):
    d = json.loads(line)
    if (d.get("side"), d.get("seed"), d.get("train_articles"), d.get("epochs"), d.get("max_steps", 0)) == (side, seed, n, epochs, max_steps):
        sys.exit(0)
sys.exit(1)
PY
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

run_bertc() {  # seed
  local seed=$1 log=$logs/bertc_s$1 out=$work/bertc_s$1
  local steps=(--num_train_epochs "$EPOCHS"); [ -n "${MAX_STEPS:-}" ] && steps=(--max_steps "$MAX_STEPS")
  local l0; l0=$(loadavg)
  echo "== $(date -u +%H:%M:%S) bert.c seed $seed: training (load $l0)" >&2
  /usr/bin/time -f 'TIME %e %U %S %M' -o "$log.train.time" \
    "$work/bert" squad --init_checkpoint "$MODEL" --vocab_file "$MODEL/vocab.txt" --do_lower_case \
      --do_train --train_file "$SQUAD_FILE" --train_articles "$TRAIN_ARTICLES" "${steps[@]}" \
      --learning_rate "$LR" --train_batch_size "$BATCH" --seed "$seed" --threads "$THREADS" \
      --output_dir "$out/model" >"$log.train.log" 2>&1
  echo "== $(date -u +%H:%M:%S) bert.c seed $seed: predicting (load $(loadavg))" >&2
  /usr/bin/time -f 'TIME %e %U %S %M' -o "$log.predict.time" \
    "$work/bert" squad --init_checkpoint "$out/model" --vocab_file "$MODEL/vocab.txt" --do_lower_case \
      --do_predict --predict_file "$predict_file" --predict_skip_articles "$TRAIN_ARTICLES" --do_eval \
      --threads "$THREADS" --output_dir "$out" >"$log.predict.log" 2>&1
  "$work/bert" squad_eval "$out/predict_articles.json" "$out/predictions.json" >"$log.eval.json"
  cp "$out/predictions.json" "$log.predictions.json"
  /usr/bin/python3 - "$log" "$seed" "$l0" "$(loadavg)" "$THREADS" "$TRAIN_ARTICLES" "$EPOCHS" "${MAX_STEPS:-0}" \
      "$(git rev-parse --short HEAD)" "$LR" <<'PY' | tee -a "$results" >&2
import json, re, sys
log, seed, l0, l1, threads, n, epochs, max_steps, commit, lr = sys.argv[1:]
train, pred = open(log + ".train.log").read(), open(log + ".predict.log").read()
tq = re.search(r"train_articles\.json: (\d+) questions -> (\d+) features", train)
m = re.search(r"bert squad: (\d+) steps, (\d+) features in ([\d.]+) s \([\d.]+ features/s\), final loss ([\d.]+)", train)
pq = re.search(r"predict_articles\.json: articles \d+ to \d+ of .* \((\d+) articles\)", pred)
pf = re.search(r"bert squad: (\d+) questions, (\d+) features predicted in ([\d.]+) s", pred)
tt = open(log + ".train.time").read().split("TIME")[-1].split()
pt = open(log + ".predict.time").read().split("TIME")[-1].split()
ev = json.load(open(log + ".eval.json"))
print(json.dumps({"side": "bert.c", "seed": int(seed), "train_articles": int(n), "epochs": float(epochs),
                  "max_steps": int(max_steps), "predict_articles": int(pq.group(1)),
                  "train_questions": int(tq.group(1)), "train_features": int(tq.group(2)), "steps": int(m.group(1)),
                  "train_sequences": int(m.group(2)), "train_seconds": float(m.group(3)),
                  "train_features_per_s": int(m.group(2)) / float(m.group(3)), "final_loss": float(m.group(4)),
                  "train_cpu_seconds": float(tt[1]) + float(tt[2]), "train_process_seconds": float(tt[0]),
                  "train_max_rss_kb": int(tt[3]), "predict_questions": int(pf.group(1)),
                  "predict_features": int(pf.group(2)), "predict_seconds": float(pf.group(3)),
                  "predict_features_per_s": int(pf.group(2)) / float(pf.group(3)),
                  "predict_cpu_seconds": float(pt[1]) + float(pt[2]), "predict_process_seconds": float(pt[0]),
                  "predict_max_rss_kb": int(pt[3]), "eval": ev,
                  "process_seconds": float(tt[0]) + float(pt[0]),
                  "cpu_seconds": float(tt[1]) + float(tt[2]) + float(pt[1]) + float(pt[2]),
                  "load_before": l0, "load_after": l1, "threads": int(threads), "commit": commit,
                  "lr": float(lr), "batch": 32}))
PY
}

run_hf() {  # seed
  local seed=$1 log=$logs/hf_s$1 out=$work/hf_s$1
  local extra=(); [ -n "${MAX_STEPS:-}" ] && extra+=(--max_steps "$MAX_STEPS")
  [ -n "$PREDICT_ARTICLES" ] && extra+=(--predict_articles "$PREDICT_ARTICLES")
  local l0; l0=$(loadavg)
  echo "== $(date -u +%H:%M:%S) transformers seed $seed (load $l0)" >&2
  OMP_NUM_THREADS=$THREADS /usr/bin/time -f 'TIME %e %U %S %M' -o "$log.time" \
    "$PEER_PYTHON" -W ignore bench/hf_squad_finetune.py --train_file "$SQUAD_FILE" --train_articles "$TRAIN_ARTICLES" \
      --predict_file "$SQUAD_FILE" --predict_skip_articles "$TRAIN_ARTICLES" --model "$MODEL" --output_dir "$out" \
      --seed "$seed" --epochs "$EPOCHS" --batch "$BATCH" --lr "$LR" --threads "$THREADS" --bert "$work/bert" \
      "${extra[@]}" >"$log.json" 2>"$log.log"
  cp "$out/predictions.json" "$log.predictions.json"
  /usr/bin/python3 - "$log" "$l0" "$(loadavg)" "${MAX_STEPS:-0}" <<'PY' | tee -a "$results" >&2
import json, sys
log, l0, l1, max_steps = sys.argv[1:]
d = json.loads(open(log + ".json").read().strip().splitlines()[-1])
t = open(log + ".time").read().split("TIME")[-1].split()
d.update({"max_steps": int(max_steps), "process_seconds": float(t[0]), "cpu_seconds": float(t[1]) + float(t[2]),
          "max_rss_kb": int(t[3]), "load_before": l0, "load_after": l1})
print(json.dumps(d))
PY
}

same_questions() {  # seed: both sides answered the same questions
  local b=$logs/bertc_s$1.predictions.json h=$logs/hf_s$1.predictions.json
  [ -f "$b" ] && [ -f "$h" ] || return 0
  /usr/bin/python3 - "$b" "$h" <<'PY' >&2
import json, sys
b, h = (json.load(open(p)) for p in sys.argv[1:])
same = set(b) == set(h)
print(f"== predictions: {len(b)} questions (bert.c), {len(h)} (transformers): {'the same' if same else 'NOT THE SAME'} ids; "
      f"{sum(b[q] == h.get(q) for q in b)} identical answers")
PY
}

i=0
for seed in $SEEDS; do
  if [ $((i % 2)) -eq 0 ]; then sides="bert.c transformers"; else sides="transformers bert.c"; fi
  for side in $sides; do
    case " $SIDES " in *" $side "*) ;; *) continue ;; esac
    if done_already "$side" "$seed"; then echo "== $side seed $seed: in $results already" >&2; continue; fi
    if [ "$side" = bert.c ]; then run_bertc "$seed"; else run_hf "$seed"; fi
  done
  same_questions "$seed"
  i=$((i + 1))
done
echo "run_squad_compare: done; bench/squad_compare_table.py $results" >&2
