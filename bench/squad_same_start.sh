#!/usr/bin/env bash
# SQuAD split, bert.c against transformers, both sides from ONE start: all-MiniLM-L6-v2 plus a
# qa_outputs head drawn by torch (torch.manual_seed(7): the start bench/squad_parity.sh makes),
# which bert.c loads instead of drawing its own. By default dropout is off on both sides (a copy
# of the config with both rates 0), so the two trainings differ only in their batch order. Train
# on dev-v1.1.json's first TRAIN_ARTICLES articles, predict the next PREDICT_ARTICLES; both
# sides' predictions are scored by `bert squad_eval` (the official v1.1 numbers). transformers
# trains with --train_pad_row (the [PAD] word embedding learns, as in bert.c).
#
# bench/RESULTS.md reports three runs of it (seed 1, lr 1e-4, 2026-11-26; "Fine-tuning accuracy
# against transformers: SQuAD split" and History, "Looking for the gap"):
#   bench/squad_same_start.sh                               dropout off, the whole split (2 epochs):
#                                                           bert.c EM 41.9 / F1 54.3, transformers 40.7 / 53.5
#   MAX_STEPS=100 PREDICT_ARTICLES=1 bench/squad_same_start.sh   dropout off, the first 100 steps
#                                                           (compare the loss windows in the logs)
#   DROPOUT=config SIDES=bert.c bench/squad_same_start.sh   bert.c with the checkpoint's dropout (0.1)
#                                                           from torch's head: EM 30.9 / F1 44.4
#
# Settings (defaults shown):
#   SEED=1 TRAIN_ARTICLES=8 EPOCHS=2 PREDICT_ARTICLES=8 LR=1e-4 THREADS=2
#   DROPOUT=0                      both dropout rates; "config": the checkpoint's own
#   SIDES="bert.c transformers"
#   MAX_STEPS=                     train this many steps instead of EPOCHS (then predict as usual)
#   SQUAD_FILE=/work/shared/data/squad/v1.1/dev-v1.1.json
#   MODEL=...                      default: bench/setup_minilm.sh's folder (downloaded if absent)
#   PEER_PYTHON=.venv-bf16peer/bin/python   torch + transformers (bench/setup_bf16_peer_env.sh);
#                                  needed for the start even with SIDES=bert.c
#   BERT=./bert
#   OUT=out/squad_same_start       the start and the fine-tuned models (large, not kept)
#   LOGS=bench/results/squad_same_start_<time>   logs, eval JSON, transformers' step log (small)
# The whole split trained in 877.6 s (bert.c) and 1368 s (transformers) on 2 cores.
# Output: per side EM / F1 and training seconds on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${SEED:-1}; TRAIN_ARTICLES=${TRAIN_ARTICLES:-8}; EPOCHS=${EPOCHS:-2}; PREDICT_ARTICLES=${PREDICT_ARTICLES:-8}
LR=${LR:-1e-4}; THREADS=${THREADS:-2}; DROPOUT=${DROPOUT:-0}; SIDES=${SIDES:-bert.c transformers}
MAX_STEPS=${MAX_STEPS:-}
SQUAD_FILE=${SQUAD_FILE:-/work/shared/data/squad/v1.1/dev-v1.1.json}
PEER_PYTHON=${PEER_PYTHON:-.venv-bf16peer/bin/python}
BERT=${BERT:-./bert}
OUT=${OUT:-out/squad_same_start}
LOGS=${LOGS:-bench/results/squad_same_start_$(date -u +%Y%m%d_%H%M%S)}
[ -x "$BERT" ] || { echo "squad_same_start: no $BERT (make)" >&2; exit 1; }
[ -x "$PEER_PYTHON" ] || { echo "squad_same_start: no $PEER_PYTHON (bench/setup_bf16_peer_env.sh)" >&2; exit 1; }
[ -f "$SQUAD_FILE" ] || { echo "squad_same_start: no $SQUAD_FILE" >&2; exit 1; }
MODEL=${MODEL:-$(bench/setup_minilm.sh)}
start=$OUT/start
rm -rf "$OUT"; mkdir -p "$start" "$LOGS"
length="$EPOCHS epochs"; [ -n "$MAX_STEPS" ] && length="$MAX_STEPS steps"
echo "squad_same_start: logs in $LOGS; seed $SEED, dropout $DROPOUT, train articles 0..$((TRAIN_ARTICLES - 1))," \
     "$length, lr $LR, predict $PREDICT_ARTICLES articles after" >&2

# the start: MiniLM, a qa_outputs head from torch's generator (as bench/squad_parity.sh draws it)
"$PEER_PYTHON" -W ignore - "$MODEL" "$start" "$DROPOUT" <<'PY' 2>/dev/null
import os, shutil, sys, torch
from transformers import BertForQuestionAnswering
src, dst, dropout = sys.argv[1:]
torch.manual_seed(7)
model = BertForQuestionAnswering.from_pretrained(src)
if dropout != "config":
    model.config.hidden_dropout_prob = float(dropout)
    model.config.attention_probs_dropout_prob = float(dropout)
model.save_pretrained(dst)
shutil.copy(os.path.join(src, "vocab.txt"), dst)
PY

# bert squad predicts its --predict_file's articles from --predict_skip_articles on: a copy of
# the file's first TRAIN_ARTICLES + PREDICT_ARTICLES articles
predict_file=$OUT/first_$((TRAIN_ARTICLES + PREDICT_ARTICLES))_articles.json
/usr/bin/python3 - "$SQUAD_FILE" "$((TRAIN_ARTICLES + PREDICT_ARTICLES))" "$predict_file" <<'PY'
import json, sys
root = json.load(open(sys.argv[1], encoding="utf-8"))
root["data"] = root["data"][:int(sys.argv[2])]
json.dump(root, open(sys.argv[3], "w", encoding="utf-8"))
PY

steps=(--num_train_epochs "$EPOCHS"); [ -n "$MAX_STEPS" ] && steps=(--max_steps "$MAX_STEPS")
if [[ " $SIDES " == *" bert.c "* ]]; then
  echo "== $(date -u +%H:%M:%S) bert.c: training" >&2
  "$BERT" squad --init_checkpoint "$start" --vocab_file "$start/vocab.txt" --do_lower_case --do_train \
    --train_file "$SQUAD_FILE" --train_articles "$TRAIN_ARTICLES" "${steps[@]}" --learning_rate "$LR" \
    --train_batch_size 32 --seed "$SEED" --threads "$THREADS" --output_dir "$OUT/bertc/model" --log_freq 10 \
    >"$LOGS/bertc.train.log" 2>&1 || { tail "$LOGS/bertc.train.log" >&2; exit 1; }
  echo "== $(date -u +%H:%M:%S) bert.c: predicting" >&2
  "$BERT" squad --init_checkpoint "$OUT/bertc/model" --vocab_file "$start/vocab.txt" --do_lower_case \
    --do_predict --predict_file "$predict_file" --predict_skip_articles "$TRAIN_ARTICLES" --do_eval \
    --threads "$THREADS" --output_dir "$OUT/bertc" >"$LOGS/bertc.predict.log" 2>&1 \
    || { tail "$LOGS/bertc.predict.log" >&2; exit 1; }
  "$BERT" squad_eval "$OUT/bertc/predict_articles.json" "$OUT/bertc/predictions.json" >"$LOGS/bertc.eval.json"
fi
if [[ " $SIDES " == *" transformers "* ]]; then
  echo "== $(date -u +%H:%M:%S) transformers: training and predicting" >&2
  extra=(); [ -n "$MAX_STEPS" ] && extra+=(--max_steps "$MAX_STEPS")
  OMP_NUM_THREADS=$THREADS "$PEER_PYTHON" -W ignore bench/hf_squad_finetune.py --train_file "$SQUAD_FILE" \
    --train_articles "$TRAIN_ARTICLES" --predict_file "$SQUAD_FILE" --predict_skip_articles "$TRAIN_ARTICLES" \
    --predict_articles "$PREDICT_ARTICLES" --model "$start" --output_dir "$OUT/hf" --seed "$SEED" \
    --epochs "$EPOCHS" --batch 32 --lr "$LR" --threads "$THREADS" --bert "$BERT" --log_freq 10 \
    --step_log "$LOGS/hf.steps.jsonl" --train_pad_row "${extra[@]}" >"$LOGS/hf.json" 2>"$LOGS/hf.log" \
    || { tail "$LOGS/hf.log" >&2; exit 1; }
fi

/usr/bin/python3 - "$LOGS" <<'PY'
import json, os, re, sys
logs = sys.argv[1]
if os.path.exists(f"{logs}/bertc.eval.json"):
    ev = json.load(open(f"{logs}/bertc.eval.json"))
    m = re.search(r"bert squad: (\d+) steps, \d+ features in ([\d.]+) s", open(f"{logs}/bertc.train.log").read())
    print(f"bert.c:       EM {ev['exact_match']:.2f}  F1 {ev['f1']:.2f}  training {m.group(2) if m else '?'} s ({m.group(1) if m else '?'} steps)")
if os.path.exists(f"{logs}/hf.json"):
    lines = [l for l in open(f"{logs}/hf.json") if l.strip()]
    d = json.loads(lines[-1])
    ev = d.get("eval") or {}
    print(f"transformers: EM {ev.get('exact_match', float('nan')):.2f}  F1 {ev.get('f1', float('nan')):.2f}  "
          f"training {d['train_seconds']:.1f} s ({d['steps']} steps)")
print(f"squad_same_start: {logs}")
PY
