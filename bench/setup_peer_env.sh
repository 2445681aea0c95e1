#!/usr/bin/env bash
# Makes .venv-bench: Debian's python3-torch (1.13) plus a transformers release that still
# supports it (4.44; transformers 5 needs torch >= 2.6), for bench/bench_pytorch.py.
# Separate from .venv so the tokenizer tools keep their newer transformers.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-bench/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv-bench
fi
.venv-bench/bin/python -c "import transformers, sys; sys.exit(transformers.__version__ != '4.44.2')" 2>/dev/null ||
  .venv-bench/bin/pip install -q "transformers==4.44.2"
.venv-bench/bin/python -c "import torch, transformers; from transformers import BertForPreTraining; \
print('peer env ok: torch', torch.__version__, 'transformers', transformers.__version__)"
