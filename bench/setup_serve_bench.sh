#!/usr/bin/env bash
# What bench/run_serve_bench.sh needs besides ./bert: Debian's wrk (the HTTP load generator,
# driven by bench/serve_wrk.lua), and the peer server's Python packages (FastAPI + uvicorn
# over sentence-transformers, bench/serve_peer.py) in PEER_PYTHON's environment, which must
# already hold torch and sentence-transformers (the tools venv, .venv, does). Not part of
# scripts/install-deps.sh: only this benchmark uses them.
#
#   bench/setup_serve_bench.sh        PEER_PYTHON=.venv/bin/python (default)
set -euo pipefail
cd "$(dirname "$0")/.."
PEER_PYTHON=${PEER_PYTHON:-.venv/bin/python}
if ! command -v wrk > /dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get install -y -q wrk
fi
[ -x "$PEER_PYTHON" ] || { echo "setup_serve_bench: no $PEER_PYTHON (the tools venv: scripts/install-deps.sh)" >&2; exit 1; }
"$PEER_PYTHON" -c "import fastapi, uvicorn" 2> /dev/null || "$PEER_PYTHON" -m pip install -q fastapi uvicorn
"$PEER_PYTHON" -c "import torch, sentence_transformers, fastapi, uvicorn; \
print('serve bench ok: wrk, torch', torch.__version__, 'sentence-transformers', sentence_transformers.__version__)"
