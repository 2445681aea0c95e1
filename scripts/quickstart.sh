#!/usr/bin/env bash
# Quick start on a fresh Debian machine: install dependencies, build, and run the main job
# on the bundled default data:
#   1. bert prepare    the bundled public-domain books (data/corpus/books) -> formatted text
#                      -> sentence shards -> phase-1 (seq 128) and phase-2 (seq 512) HDF5
#                      shards in prepared/, in NVIDIA's layout;
#   2. bert train_demo a short training run of a small BERT (MLM + NSP, AdamW) on generated
#                      data, saving a HuggingFace-named safetensors checkpoint.
# (Pre-training from the HDF5 shards is the next stage of the project.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
make -j"$(nproc)"
echo
echo "== bert prepare: bundled books -> pre-training shards (prepared/) =="
./bert prepare --output_dir prepared
echo
echo "== bert train_demo: short training run of a small BERT =="
./bert train_demo
