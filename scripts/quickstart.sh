#!/usr/bin/env bash
# Quick start on a fresh Debian machine: install dependencies, build, and run the main job
# on the bundled default data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
make -j"$(nproc)"
echo
echo "== bert train_demo: a short training run of a small BERT on generated data =="
./bert train_demo
