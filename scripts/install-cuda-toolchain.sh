#!/usr/bin/env bash
# A CUDA compiler and the CUDA runtime's headers from PyPI, so that a machine without a GPU or
# a CUDA installation can compile the CUDA backend (`make GPU=cuda cuda-check`): NVIDIA's
# nvidia-cuda-nvcc and nvidia-cuda-runtime wheels (CUDA 13; nvcc, cicc, ptxas, headers),
# unpacked into .cuda-toolchain/ (about 320 MB, ignored by git). Idempotent. A machine with CUDA
# installed needs none of this: the Makefile uses its nvcc (NVCC=...).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.cuda-toolchain
VERSION=13.5.37
if [ -x "$DEST/nvidia/cu13/bin/nvcc" ] && grep -qx "$VERSION" "$DEST/VERSION" 2>/dev/null; then
  echo "install-cuda-toolchain: CUDA $VERSION compiler present in $DEST"
  exit 0
fi
command -v python3 >/dev/null || { echo "install-cuda-toolchain: python3 is needed (scripts/install-deps.sh)" >&2; exit 1; }
rm -rf "$DEST.tmp"
# nvcc's wheel brings cicc (nvidia-nvvm) and the crt headers (nvidia-cuda-crt) as dependencies
python3 -m pip install --quiet --target "$DEST.tmp" "nvidia-cuda-nvcc==$VERSION" "nvidia-cuda-runtime==$VERSION" \
  "nvidia-nvvm==$VERSION" "nvidia-cuda-crt==$VERSION"
echo "$VERSION" > "$DEST.tmp/VERSION"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
"$DEST/nvidia/cu13/bin/nvcc" --version | tail -n 2
echo "install-cuda-toolchain: nvcc in $DEST/nvidia/cu13/bin (make GPU=cuda cuda-check)"
