#!/usr/bin/env bash
# SQuAD fine-tuning, bert.c against transformers, step by step with nothing random: the question
# this answers is whether the two sides compute the same training, apart from their random
# streams. Both start from the same weights (all-MiniLM-L6-v2 plus one qa_outputs head drawn by
# torch and saved, so bert.c loads it instead of drawing its own), with dropout off (a copy of
# the config with both dropout rates 0), on one batch that holds every feature (so the data
# order plays no part): questions of dev-v1.1.json's first paragraphs whose answer starts and
# ends on whitespace, where Google's answer span (bert.c) and run_qa.py's character offsets
# (transformers) label the same tokens. Then each step's loss and gradient norm (before
# clipping) on both sides, and their relative differences.
# Then dropout's part, twice. First with the same draws: transformers trains under bert.c's
# own masks and feature order (hf_squad_finetune.py --bertc_masks, bench/bertc_masks.py), so
# with the config's dropout (0.1) the two sides should again agree step by step to fp32
# rounding (MATCHED_STEPS steps at LR). Then with each side's own draws: the weights held still
# (lr 1e-10), DROPOUT_STEPS training-mode losses on each side, each under new masks (and the
# gradient norm before clipping): their means should agree within their standard errors.
#
# transformers runs twice: as it comes (nn.Embedding(padding_idx=0): the [PAD] word
# embedding never gets a gradient) and with --train_pad_row (the [PAD] row learns, as in
# NVIDIA's and Google's BERT and in bert.c). Expect the second to agree with bert.c to fp32
# rounding (relative differences ~1e-6 at step 1, growing slowly through Adam's steps), and
# the first to differ in the gradient norm from step 1 on (the [PAD] row's share).
#
#   bench/squad_parity.sh            STEPS=12 LR=1e-4 QUESTIONS=24 THREADS=2 DROPOUT_STEPS=16
#                                    MATCHED_STEPS=12 (0: skip; transformers computes bert.c's
#                                    masks in numpy, about 10 s a step)
#   DROPOUT_HIDDEN=P / DROPOUT_ATTENTION=P: the dropout check's rates instead of the config's
#   (one kind of site at a time: DROPOUT_HIDDEN=0.1 DROPOUT_ATTENTION=0, and the other way)
#   PEER_PYTHON=.venv-bf16peer/bin/python  MODEL=...  (default: bench/setup_minilm.sh's folder)
# Output: a table on stdout; bench/results/squad_parity/parity_<time>.jsonl (one line per step).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-12}; DROPOUT_STEPS=${DROPOUT_STEPS:-16}; MATCHED_STEPS=${MATCHED_STEPS:-12}; LR=${LR:-1e-4}; QUESTIONS=${QUESTIONS:-24}; THREADS=${THREADS:-2}
DROPOUT_HIDDEN=${DROPOUT_HIDDEN:-}; DROPOUT_ATTENTION=${DROPOUT_ATTENTION:-}
PEER_PYTHON=${PEER_PYTHON:-.venv-bf16peer/bin/python}
SQUAD_FILE=${SQUAD_FILE:-/work/shared/data/squad/v1.1/dev-v1.1.json}
MODEL=${MODEL:-$(bench/setup_minilm.sh)}
[ -x ./bert ] || { echo "squad_parity: build first (make)" >&2; exit 1; }
[ -x "$PEER_PYTHON" ] || { echo "squad_parity: no $PEER_PYTHON (bench/setup_bf16_peer_env.sh)" >&2; exit 1; }
work=out/squad_parity; rm -rf "$work"; mkdir -p "$work" bench/results/squad_parity
results=bench/results/squad_parity/parity_$(date -u +%Y%m%d_%H%M%S).jsonl

# the batch: whitespace-aligned answers, first answer only (training reads exactly one)
/usr/bin/python3 - "$SQUAD_FILE" "$QUESTIONS" "$work/batch.json" <<'PY'
import json, sys
root = json.load(open(sys.argv[1], encoding="utf-8"))
want, kept = int(sys.argv[2]), 0
article = dict(root["data"][0], paragraphs=[])
for p in root["data"][0]["paragraphs"]:
    c, qas = p["context"], []
    for q in p["qas"]:
        a = q["answers"][0]
        s, e = a["answer_start"], a["answer_start"] + len(a["text"])
        if kept < want and c[s:e] == a["text"] and (s == 0 or c[s - 1].isspace()) and (e == len(c) or c[e].isspace()):
            qas.append(dict(q, answers=[a]))
            kept += 1
    if qas:
        article["paragraphs"].append(dict(p, qas=qas))
root["data"] = [article]
json.dump(root, open(sys.argv[3], "w", encoding="utf-8"))
print(f"squad_parity: {kept} questions from {len(article['paragraphs'])} paragraphs of {article['title']}", file=sys.stderr)
PY

# the start: MiniLM, a qa_outputs head from torch's generator; one copy with dropout 0
"$PEER_PYTHON" -W ignore - "$MODEL" "$work" "$DROPOUT_HIDDEN" "$DROPOUT_ATTENTION" <<'PY' 2>/dev/null
import os, shutil, sys, torch
from transformers import BertConfig, BertForQuestionAnswering
src, work, hidden, attention = sys.argv[1:]
torch.manual_seed(7)
model = BertForQuestionAnswering.from_pretrained(src)
for name, (p_hidden, p_attention) in (("model_dropout", (hidden, attention)), ("model", (0.0, 0.0))):
    if p_hidden != "":
        model.config.hidden_dropout_prob = float(p_hidden)
    if p_attention != "":
        model.config.attention_probs_dropout_prob = float(p_attention)
    model.save_pretrained(os.path.join(work, name))
    shutil.copy(os.path.join(src, "vocab.txt"), os.path.join(work, name))
PY

bertc() {  # model steps lr name
  ./bert squad --init_checkpoint "$work/$1" --vocab_file "$work/$1/vocab.txt" --do_lower_case --do_train \
    --train_file "$work/batch.json" --max_steps "$2" --learning_rate "$3" --train_batch_size 32 --seed 1 \
    --threads "$THREADS" --output_dir "$work/$4" --log_freq 1 --skip_checkpoint \
    --json-summary "$work/$4.jsonl" >"$work/$4.log" 2>&1 || { cat "$work/$4.log" >&2; exit 1; }
}
hf() {  # model steps lr name [flags]
  local model=$1 steps=$2 lr=$3 name=$4; shift 4
  OMP_NUM_THREADS=$THREADS "$PEER_PYTHON" -W ignore bench/hf_squad_finetune.py --train_file "$work/batch.json" \
    --train_articles 1 --predict_file "$work/batch.json" --predict_skip_articles 0 --model "$work/$model" \
    --output_dir "$work/$name" --seed 1 --threads "$THREADS" --max_steps "$steps" --lr "$lr" --batch 32 \
    --log_freq 1 --step_log "$work/$name.jsonl" "$@" >"$work/$name.out" 2>"$work/$name.log" \
    || { cat "$work/$name.log" >&2; exit 1; }
}
bertc model "$STEPS" "$LR" bertc
hf model "$STEPS" "$LR" hf_frozen
hf model "$STEPS" "$LR" hf_trained --train_pad_row
if [ "$MATCHED_STEPS" -gt 0 ]; then
  bertc model_dropout "$MATCHED_STEPS" "$LR" bertc_matched
  hf model_dropout "$MATCHED_STEPS" "$LR" hf_matched --train_pad_row --bertc_masks
fi
bertc model_dropout "$DROPOUT_STEPS" 1e-10 bertc_dropout
hf model_dropout "$DROPOUT_STEPS" 1e-10 hf_dropout --train_pad_row

/usr/bin/python3 - "$work" "$results" "$(git rev-parse --short HEAD)" <<'PY'
import json, os, sys
work, results, commit = sys.argv[1:]
def bertc_steps(name):   # bert squad --json-summary: the DLLogger records of training steps
    recs = (json.loads(l[5:]) for l in open(f"{work}/{name}.jsonl") if l.startswith("DLLL "))
    return [r["data"] for r in recs if isinstance(r["step"], list) and r["step"] and "step_loss" in r["data"]]
b = bertc_steps("bertc")
h = {p: [json.loads(l) for l in open(f"{work}/hf_{p}.jsonl")] for p in ("frozen", "trained")}
rel = lambda x, y: abs(x - y) / max(abs(y), 1e-30)
print("step | bert.c loss | transformers (pad row trained) | rel | (pad row frozen) | rel || bert.c grad | trained | rel | frozen | rel")
with open(results, "w") as out:
    for i, d in enumerate(b):
        t, f = h["trained"][i], h["frozen"][i]
        row = {"step": i + 1, "commit": commit, "bertc_loss": d["step_loss"], "hf_trained_loss": t["step_loss"],
               "hf_frozen_loss": f["step_loss"], "bertc_grad_norm": d["grad_norm"], "hf_trained_grad_norm": t["grad_norm"],
               "hf_frozen_grad_norm": f["grad_norm"], "learning_rate": d["learning_rate"]}
        out.write(json.dumps(row) + "\n")
        print(f"{i + 1:4d} | {d['step_loss']:.6f} | {t['step_loss']:.6f} | {rel(d['step_loss'], t['step_loss']):.1e} | "
              f"{f['step_loss']:.6f} | {rel(d['step_loss'], f['step_loss']):.1e} || {d['grad_norm']:.5f} | "
              f"{t['grad_norm']:.5f} | {rel(d['grad_norm'], t['grad_norm']):.1e} | {f['grad_norm']:.5f} | "
              f"{rel(d['grad_norm'], f['grad_norm']):.1e}")
if os.path.exists(f"{work}/hf_matched.jsonl"):
    bm_, hm_ = bertc_steps("bertc_matched"), [json.loads(l) for l in open(f"{work}/hf_matched.jsonl")]
    print("dropout on, the same masks and order on both sides (transformers under bert.c's draws):")
    print("step | bert.c loss | transformers | rel || bert.c grad | transformers | rel")
    with open(results, "a") as out:
        for i, (d, t) in enumerate(zip(bm_, hm_)):
            out.write(json.dumps({"matched_dropout": True, "step": i + 1, "commit": commit, "bertc_loss": d["step_loss"],
                                  "hf_loss": t["step_loss"], "bertc_grad_norm": d["grad_norm"],
                                  "hf_grad_norm": t["grad_norm"]}) + "\n")
            print(f"{i + 1:4d} | {d['step_loss']:.6f} | {t['step_loss']:.6f} | {rel(d['step_loss'], t['step_loss']):.1e} || "
                  f"{d['grad_norm']:.5f} | {t['grad_norm']:.5f} | {rel(d['grad_norm'], t['grad_norm']):.1e}")
def stats(xs):
    m = sum(xs) / len(xs)
    return m, (sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) ** 0.5
bsteps = bertc_steps("bertc_dropout")
hsteps = [json.loads(l) for l in open(f"{work}/hf_dropout.jsonl")]
bd, hd = [d["step_loss"] for d in bsteps], [d["step_loss"] for d in hsteps]
bg, hg = [d["grad_norm"] for d in bsteps], [d["grad_norm"] for d in hsteps]
(bm, bs), (hm, hs), (bgm, bgs), (hgm, hgs) = stats(bd), stats(hd), stats(bg), stats(hg)
z, zg = (bm - hm) / (bs * bs + hs * hs) ** 0.5, (bgm - hgm) / (bgs * bgs + hgs * hgs) ** 0.5
cfg = json.load(open(f"{work}/model_dropout/config.json"))
rates = {k: cfg[k] for k in ("hidden_dropout_prob", "attention_probs_dropout_prob")}
print(f"dropout (hidden {rates['hidden_dropout_prob']}, attention {rates['attention_probs_dropout_prob']}), "
      f"weights held (lr 1e-10), {len(bd)} / {len(hd)} mask draws (standard errors):\n"
      f"  mean training loss bert.c {bm:.5f} +- {bs:.5f}, transformers {hm:.5f} +- {hs:.5f}: difference "
      f"{bm - hm:+.5f} = {z:+.1f} standard errors; without dropout {b[0]['step_loss']:.5f}\n"
      f"  mean gradient norm bert.c {bgm:.5f} +- {bgs:.5f}, transformers {hgm:.5f} +- {hgs:.5f}: difference "
      f"{bgm - hgm:+.5f} = {zg:+.1f} standard errors; without dropout {b[0]['grad_norm']:.5f}")
with open(results, "a") as out:
    out.write(json.dumps({"dropout_check": True, "commit": commit, **rates, "bertc_losses": bd, "hf_losses": hd,
                          "bertc_mean": bm, "bertc_se": bs, "hf_mean": hm, "hf_se": hs, "z": z,
                          "bertc_grad_norms": bg, "hf_grad_norms": hg, "bertc_grad_mean": bgm, "bertc_grad_se": bgs,
                          "hf_grad_mean": hgm, "hf_grad_se": hgs, "grad_z": zg}) + "\n")
print(f"squad_parity: {results}")
PY
