#!/usr/bin/env bash
# int8 accuracy on real fine-tuned weights (issue 33): all-MiniLM-L6-v2 fine-tuned by bert.c
# (fp32) on MRPC, SST-2 and the SQuAD split, then each fine-tuned model evaluated by bert.c in
# fp32, bf16 (where the CPU has avx512_bf16) and --int8, and by the int8 peers on the SAME
# weights (bench/int8_peers_eval.py): ONNX Runtime's quantize_dynamic (per channel, QInt8
# weights) and OpenVINO int8 through NNCF's post-training quantization (calibrated on a small
# subset of the training data). Plus sentence embeddings of the base model (STS-B dev
# sentences): the cosine of every int8 embedding to fp32. Table: bench/int8_accuracy_table.py.
#
#   bench/run_int8_accuracy.sh
#   STAGES="train bertc peers embed table"   (default: all, in this order; each skips what exists)
#   TRAIN_TASKS="mrpc sst-2 squad"          the fine-tunings the train stage runs
#   SST2_EXAMPLES=8000      SST-2 trains on its first N rows (dev: all 872)
#   SQUAD_TRAIN=8 SQUAD_EPOCHS=2 SQUAD_PREDICT=8   the split: train on dev-v1.1's first articles,
#                           predict the ones after them (a smaller split where time is short)
#   SEED=1 THREADS=2 CALIBRATION=300
#   GLUE_DIR=/work/shared/data/glue   SQUAD_FILE=/work/shared/data/squad/v1.1/dev-v1.1.json
#   GOOGLE_BERT=out/google_bert   Google's run_squad.py + tokenization.py (github:google-research/bert,
#                                 `git show HEAD:run_squad.py`; not in bert.c): the peers' SQuAD
#                                 features and predictions.json are made by its code, as bert.c's are
#   MODEL=...                     default: bench/setup_minilm.sh's folder
#   PEER_PYTHON=.venv-bf16peer/bin/python   (bench/setup_bf16_peer_env.sh; onnxruntime, openvino,
#                                 onnx, nncf, six are installed into it if missing)
#   OUT=out/int8_accuracy         fine-tuned models, predictions, exports (large, not kept)
#   RESULTS=bench/results/int8_accuracy   the JSON lines and the table (small, committed)
#
# Protocols: GLUE as bench/run_glue_compare.sh (lr 2e-5, batch 32, 3 epochs, max_seq 128);
# the SQuAD split as bench/squad_same_start.sh (train on dev-v1.1's first 8 articles for 2
# epochs at lr 1e-4 with dropout 0, predict the next 8), but from bert.c's own head.
set -euo pipefail
cd "$(dirname "$0")/.."
STAGES=${STAGES:-train bertc peers embed table}
TRAIN_TASKS=${TRAIN_TASKS:-mrpc sst-2 squad}
SQUAD_TRAIN=${SQUAD_TRAIN:-8}; SQUAD_PREDICT=${SQUAD_PREDICT:-8}; SQUAD_EPOCHS=${SQUAD_EPOCHS:-2}
SST2_EXAMPLES=${SST2_EXAMPLES:-8000}; SEED=${SEED:-1}; THREADS=${THREADS:-2}; CALIBRATION=${CALIBRATION:-300}
GLUE_DIR=${GLUE_DIR:-/work/shared/data/glue}
SQUAD_FILE=${SQUAD_FILE:-/work/shared/data/squad/v1.1/dev-v1.1.json}
GOOGLE_BERT=${GOOGLE_BERT:-out/google_bert}
PEER_PYTHON=${PEER_PYTHON:-.venv-bf16peer/bin/python}
OUT=${OUT:-out/int8_accuracy}
RESULTS=${RESULTS:-bench/results/int8_accuracy}
MODEL=${MODEL:-$(bench/setup_minilm.sh)}
BERT=$OUT/bert
[ -x ./bert ] || { echo "run_int8_accuracy: build first (make)" >&2; exit 1; }
mkdir -p "$OUT" "$RESULTS"
# a private copy of the binary, so that a rebuild during the series cannot change it
[ -x "$BERT" ] || cp ./bert "$BERT"
has() { [[ " $STAGES " == *" $1 "* ]]; }
log() { echo "== $(date -u +%H:%M:%S) $*" >&2; }
PRECISIONS="fp32 int8"
grep -qw avx512_bf16 /proc/cpuinfo && PRECISIONS="fp32 bf16 int8"
flag_of() { [ "$1" = fp32 ] && return 0; echo "--$1"; }

# ---- train: bert.c fp32 fine-tuning ----
train_glue() {  # task folder [extra flags]
  local task=$1 dir=$2; shift 2
  [ -f "$OUT/$task/model.safetensors" ] && { log "$task: fine-tuned already"; return 0; }
  log "$task: fine-tuning"
  /usr/bin/time -f 'TIME %e' -o "$OUT/$task.train.time" \
  "$BERT" glue --task_name "$task" --data_dir "$GLUE_DIR/$dir" --output_dir "$OUT/$task" --init_checkpoint "$MODEL" \
    --vocab_file "$MODEL/vocab.txt" --do_lower_case --do_train --learning_rate 2e-5 --num_train_epochs 3 \
    --train_batch_size 32 --max_seq_length 128 --seed "$SEED" --threads "$THREADS" --overwrite_output_dir "$@" \
    >"$OUT/$task.train.log" 2>&1 || { tail "$OUT/$task.train.log" >&2; exit 1; }
}
train_squad() {
  [ -f "$OUT/squad/model.safetensors" ] && { log "squad: fine-tuned already"; return 0; }
  # the start: MiniLM with both dropout rates 0 (bench/squad_same_start.sh's default)
  local start=$OUT/squad_start
  mkdir -p "$start"
  cp "$MODEL/model.safetensors" "$MODEL/vocab.txt" "$start/"
  /usr/bin/python3 - "$MODEL/config.json" "$start/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["hidden_dropout_prob"] = c["attention_probs_dropout_prob"] = 0.0
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
  log "squad: fine-tuning on the first $SQUAD_TRAIN articles, $SQUAD_EPOCHS epochs"
  /usr/bin/time -f 'TIME %e' -o "$OUT/squad.train.time" \
  "$BERT" squad --init_checkpoint "$start" --vocab_file "$start/vocab.txt" --do_lower_case --do_train \
    --train_file "$SQUAD_FILE" --train_articles "$SQUAD_TRAIN" --num_train_epochs "$SQUAD_EPOCHS" --learning_rate 1e-4 \
    --train_batch_size 32 --seed "$SEED" --threads "$THREADS" --output_dir "$OUT/squad" --log_freq 10 \
    >"$OUT/squad.train.log" 2>&1 || { tail "$OUT/squad.train.log" >&2; exit 1; }
}
if has train; then
  for task in $TRAIN_TASKS; do
    case $task in
      mrpc) train_glue mrpc MRPC ;;
      sst-2) train_glue sst-2 SST-2 --train_examples "$SST2_EXAMPLES" ;;
      squad) train_squad ;;
    esac
  done
fi

# ---- the data the evaluations share ----
jsonl=$RESULTS/results.jsonl
touch "$jsonl"
recorded() {  # task side: is the line there already?
  /usr/bin/python3 -c 'import json,sys
sys.exit(0 if any(d["task"] == sys.argv[2] and d["side"] == sys.argv[3]
                  for d in map(json.loads, filter(str.strip, open(sys.argv[1])))) else 1)' "$jsonl" "$1" "$2"
}
texts_of() {  # task: dev.tsv's texts, one example a line (text, or text_a TAB text_b)
  case $1 in
    mrpc) tail -n +2 "$GLUE_DIR/MRPC/dev.tsv" | cut -f4,5 ;;
    sst-2) tail -n +2 "$GLUE_DIR/SST-2/dev.tsv" | cut -f1 ;;
  esac | sed '/^$/d'
}
squad_slice=$OUT/first_$((SQUAD_TRAIN + SQUAD_PREDICT))_articles.json
squad_train=$OUT/first_${SQUAD_TRAIN}_articles.json
/usr/bin/python3 - "$SQUAD_FILE" "$squad_slice" "$squad_train" "$((SQUAD_TRAIN + SQUAD_PREDICT))" "$SQUAD_TRAIN" <<'PY'
import json, sys
root = json.load(open(sys.argv[1], encoding="utf-8"))
for path, n in ((sys.argv[2], int(sys.argv[4])), (sys.argv[3], int(sys.argv[5]))):
    json.dump(dict(root, data=root["data"][:n]), open(path, "w", encoding="utf-8"))
PY
# the embedding set: STS-B dev's sentences (both columns, each distinct sentence once);
# NNCF's calibration sentences from STS-B train
/usr/bin/python3 - "$GLUE_DIR/STS-B" "$OUT/stsb_dev_sentences.txt" "$OUT/stsb_train_sentences.txt" <<'PY'
import csv, sys
for split, out in (("dev", sys.argv[2]), ("train", sys.argv[3])):
    rows = list(csv.reader(open(f"{sys.argv[1]}/{split}.tsv", encoding="utf-8-sig"), delimiter="\t", quotechar=None))[1:]
    seen = dict.fromkeys(" ".join(s.split()) for r in rows if r for s in (r[7], r[8]))
    open(out, "w", encoding="utf-8").write("".join(s + "\n" for s in seen if s))
PY

# ---- bert.c: each fine-tuned model in each precision ----
record_glue() {  # task precision
  local task=$1 p=$2 d=$OUT/$1.eval.$2
  local dir; dir=$([ "$task" = mrpc ] && echo MRPC || echo SST-2)
  # the per-example predictions: --do_predict over a test.tsv that holds dev.tsv's rows (not
  # `--predict_file -`: its stdin path leaves --int8 off, cli/cmd_glue.c's predict_stdin)
  local data=$OUT/dev_as_test/$dir
  mkdir -p "$d" "$data"
  cp "$GLUE_DIR/$dir/dev.tsv" "$data/dev.tsv"
  if [ "$task" = mrpc ]; then cp "$data/dev.tsv" "$data/test.tsv"   # the same columns, header included
  else { printf 'index\tsentence\n'; tail -n +2 "$data/dev.tsv" | sed '/^$/d' | cut -f1 | awk '{print NR-1 "\t" $0}'; } >"$data/test.tsv"
  fi
  "$BERT" glue --task_name "$task" --data_dir "$data" --output_dir "$d" --init_checkpoint "$OUT/$task" \
    --do_lower_case --do_eval --do_predict --max_seq_length 128 --threads "$THREADS" --overwrite_output_dir \
    $(flag_of "$p") >"$d/eval.log" 2>&1 || { tail "$d/eval.log" >&2; exit 1; }
  cp "$d/$dir.tsv" "$d/predictions.tsv"
  /usr/bin/python3 - "$task" "$p" "$d" "$OUT/$task.eval.fp32/predictions.tsv" "$GLUE_DIR/$dir/dev.tsv" <<'PY' | tee -a "$jsonl" >&2
import csv, json, sys
task, p, d, fp32, dev = sys.argv[1:]
col = 0 if task == "mrpc" else 1
rows = [r for r in csv.reader(open(dev, encoding="utf-8-sig"), delimiter="\t", quotechar=None)][1:]
y = [int(r[col]) for r in rows if r]
labels = lambda path: [int(l.split("\t")[1]) for l in open(path) if l[:1].isdigit()]   # no header line
pred, ref = labels(f"{d}/predictions.tsv"), labels(fp32)
ev = {k: v for k, v in json.load(open(f"{d}/eval_results.json")).items() if k in ("acc", "f1")}
acc = sum(a == b for a, b in zip(pred, y)) / len(y)
assert len(pred) == len(y) and abs(acc - ev["acc"]) < 1e-9, (len(pred), len(y), acc, ev)
print(json.dumps({"task": task, "side": f"bert.c-{p}", "examples": len(y), "dev": ev,
                  "same_as_bertc_fp32": sum(a == b for a, b in zip(pred, ref)) / len(ref)}))
PY
}
record_squad() {  # precision
  local p=$1 d=$OUT/squad.eval.$1
  "$BERT" squad --init_checkpoint "$OUT/squad" --do_lower_case --do_predict --predict_file "$squad_slice" \
    --predict_skip_articles "$SQUAD_TRAIN" --threads "$THREADS" --output_dir "$d" --overwrite_output_dir $(flag_of "$p") \
    >"$d.log" 2>&1 || { tail "$d.log" >&2; exit 1; }
  "$BERT" squad_eval "$d/predict_articles.json" "$d/predictions.json" >"$d/eval.json"
  /usr/bin/python3 - "$p" "$d" "$OUT/squad.eval.fp32/predictions.json" \
    "train on articles 0..$((SQUAD_TRAIN - 1)) for $SQUAD_EPOCHS epochs, predict the next $SQUAD_PREDICT" <<'PY' | tee -a "$jsonl" >&2
import json, sys
p, d, fp32, split = sys.argv[1:]
ev = json.load(open(f"{d}/eval.json"))
pred, ref = json.load(open(f"{d}/predictions.json")), json.load(open(fp32))
print(json.dumps({"task": "squad", "side": f"bert.c-{p}", "split": split, "examples": len(pred),
                  "dev": {"exact_match": ev["exact_match"], "f1": ev["f1"]},
                  "same_as_bertc_fp32": sum(pred[k] == v for k, v in ref.items()) / len(ref)}))
PY
}
record_embed() {  # precision
  local p=$1 f=$OUT/embed.$1.npy
  "$BERT" embed --init_checkpoint "$MODEL" --threads "$THREADS" --output "$f" $(flag_of "$p") \
    <"$OUT/stsb_dev_sentences.txt" 2>"$OUT/embed.$p.log" || { tail "$OUT/embed.$p.log" >&2; exit 1; }
  /usr/bin/python3 - "$p" "$f" "$OUT/embed.fp32.npy" <<'PY' | tee -a "$jsonl" >&2
import json, sys
import numpy as np
p, f, ref = sys.argv[1:]
e, r = np.load(f).astype(np.float64), np.load(ref).astype(np.float64)
cos = (e * r).sum(1) / np.linalg.norm(e, axis=1) / np.linalg.norm(r, axis=1)
print(json.dumps({"task": "embed", "side": f"bert.c-{p}", "examples": len(e),
                  "cosine_to_bertc_fp32": {"min": cos.min(), "mean": cos.mean(), "below_0.99": int((cos < 0.99).sum())}}))
PY
}
trained() { [ -f "$OUT/$1/model.safetensors" ] || { log "$1: no fine-tuned model yet (STAGES=train)"; return 1; }; }
if has bertc; then
  for p in $PRECISIONS; do   # fp32 first: the others are compared with its predictions
    for task in mrpc sst-2; do trained "$task" || continue; recorded "$task" "bert.c-$p" || { log "bert.c $p $task"; record_glue "$task" "$p"; }; done
    if trained squad; then recorded squad "bert.c-$p" || { log "bert.c $p squad"; record_squad "$p"; }; fi
  done
fi
if has embed; then   # the base model's sentence embeddings
  for p in $PRECISIONS; do recorded embed "bert.c-$p" || { log "bert.c $p embed"; record_embed "$p"; }; done
fi

# ---- the peers, on the same fine-tuned weights ----
peers_missing() {  # task: the peers with no line yet, comma-separated
  local m=() s
  for s in ort-fp32 ort-int8 openvino-fp32 openvino-int8; do recorded "$1" "$s" || m+=("$s"); done
  (IFS=,; echo "${m[*]}")
}
if has peers || has embed; then
  [ -x "$PEER_PYTHON" ] || { echo "run_int8_accuracy: no $PEER_PYTHON (bench/setup_bf16_peer_env.sh)" >&2; exit 1; }
  if ! "$PEER_PYTHON" -c "import onnxruntime, openvino, onnx, nncf, six" 2>/dev/null; then
    log "installing onnxruntime, openvino, onnx, nncf, six into $PEER_PYTHON's venv"
    "$PEER_PYTHON" -m pip install -q onnxruntime openvino onnx nncf six
  fi
  peer() { OMP_NUM_THREADS=$THREADS "$PEER_PYTHON" -W ignore bench/int8_peers_eval.py "$@" --threads "$THREADS" \
             --calibration "$CALIBRATION" | grep --line-buffered '^{' | tee -a "$jsonl" >&2; }
fi
if has peers; then
  for task in mrpc sst-2; do
    m=$(peers_missing "$task"); [ -z "$m" ] && continue
    recorded "$task" bert.c-fp32 || continue
    log "peers $task: $m"
    dir=$([ "$task" = mrpc ] && echo MRPC || echo SST-2)
    peer glue --task "$task" --data_dir "$GLUE_DIR/$dir" --model "$OUT/$task" --vocab "$MODEL/vocab.txt" \
      --work "$OUT/peers_$task" --bertc_predictions "$OUT/$task.eval.fp32/predictions.tsv" --peers "$m"
  done
  m=$(peers_missing squad)
  if [ -n "$m" ] && recorded squad bert.c-fp32; then
    log "peers squad: $m"
    peer squad --model "$OUT/squad" --vocab "$MODEL/vocab.txt" --work "$OUT/peers_squad" --peers "$m" \
      --predict_file "$OUT/squad.eval.fp32/predict_articles.json" --calibration_file "$squad_train" \
      --google_bert "$GOOGLE_BERT" --bert "$BERT" --bertc_predictions "$OUT/squad.eval.fp32/predictions.json"
  fi
fi
if has embed; then
  m=$(peers_missing embed)
  if [ -n "$m" ]; then
    log "peers embed: $m"
    peer embed --model "$MODEL" --vocab "$MODEL/vocab.txt" --work "$OUT/peers_embed" --peers "$m" \
      --sentences "$OUT/stsb_dev_sentences.txt" --calibration_sentences "$OUT/stsb_train_sentences.txt" \
      --bertc_fp32 "$OUT/embed.fp32.npy"
  fi
fi
if has table; then
  /usr/bin/python3 bench/int8_accuracy_table.py "$jsonl" >"$RESULTS/table.md"
  cat "$RESULTS/table.md"
fi
