#!/usr/bin/env bash
# Makes .venv-bf16peer: a current PyTorch 2.x from PyPI (plus a transformers release that
# supports it, and numpy) for bench/bench_pytorch.py --precision bf16 [--compile], the
# bf16-autocast / torch.compile peer of `bert bench`. A plain venv, NOT --system-site-packages,
# so Debian's python3-torch 1.13 cannot shadow it (.venv-bench keeps the 1.13 peer).
#
# The CPU-only wheel index (download.pytorch.org/whl/cpu) is tried first; where it cannot be
# reached the stock PyPI wheel is installed instead, which on x86-64 Linux pulls the CUDA
# runtime packages too (a few GB; unused on CPU, but `import torch` needs them present).
# Idempotent: installs are skipped when a torch >= 2 / transformers / numpy already import.
# Override the requirement specs with TORCH_SPEC / TRANSFORMERS_SPEC (e.g. TORCH_SPEC=torch==2.6.0).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-bf16peer
PY=$VENV/bin/python
TORCH_SPEC=${TORCH_SPEC:-torch}
TRANSFORMERS_SPEC=${TRANSFORMERS_SPEC:-transformers}

if [ ! -x "$PY" ]; then
  /usr/bin/python3 -m venv "$VENV"
fi

if ! "$PY" -c "import sys, torch; sys.exit(int(torch.__version__.split('.')[0]) < 2)" 2>/dev/null; then
  echo "setup_bf16_peer_env: installing $TORCH_SPEC (CPU wheel index first)" >&2
  if ! "$PY" -m pip install -q --retries 1 --timeout 30 "$TORCH_SPEC" \
       --index-url https://download.pytorch.org/whl/cpu; then
    echo "setup_bf16_peer_env: CPU wheel index unreachable; installing $TORCH_SPEC from PyPI" >&2
    "$PY" -m pip install -q "$TORCH_SPEC"
  fi
fi

# transformers (and numpy) go in afterwards from PyPI; pip keeps the torch already there as
# long as it satisfies transformers' requirement.
if ! "$PY" -c "import numpy, transformers; from transformers import BertForPreTraining" 2>/dev/null; then
  "$PY" -m pip install -q "$TRANSFORMERS_SPEC" numpy
fi

"$PY" - <<'EOF'
import platform, numpy, torch, transformers
from transformers import BertForPreTraining  # noqa: F401
print(f"bf16 peer env ok: python {platform.python_version()}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}, numpy {numpy.__version__}; "
      f"torch.compile {'yes' if hasattr(torch, 'compile') else 'no'}, "
      f"bf16 supported on this CPU: {torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()}")
EOF
