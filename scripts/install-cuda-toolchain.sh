#!/usr/bin/env bash
# A CUDA compiler and the CUDA runtime's headers from PyPI, so that a machine without a GPU or
# a CUDA installation can compile the CUDA backend (`make GPU=cuda cuda-check`): NVIDIA's
# nvidia-cuda-nvcc, nvidia-cuda-runtime and nvidia-cublas wheels (CUDA 13; nvcc, cicc, ptxas,
# headers, cuBLAS), and cuobjdump with nvdisasm (`make GPU=cuda cuda-sass`: the machine code the
# kernels compile to, for reading what the compiler did without a GPU),
# unpacked into .cuda-toolchain/ (about 320 MB, ignored by git). Idempotent. A machine with CUDA
# installed needs none of this: the Makefile uses its nvcc (NVCC=...).
# --cuda12-headers: also CUDA 12.1's runtime and cuBLAS headers (nvidia-cuda-runtime-cu12 and
# nvidia-cublas-cu12, their libraries dropped: 4 MB kept) in .cuda-toolchain/cu12-headers/, for
# `make GPU=cuda cuda-check-12` (the backend's API use against the oldest CUDA 12 it supports).
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$0")/.."
DEST=.cuda-toolchain
if [ "${1:-}" = --cuda12-headers ]; then
  bash "$SELF"   # the compiler first (a new compiler replaces $DEST as a whole)
  H=$DEST/cu12-headers
  if [ -f "$H/include/cuda_runtime_api.h" ] && [ -f "$H/include/cublasLt.h" ]; then
    echo "install-cuda-toolchain: CUDA 12.1 headers present in $H"
    exit 0
  fi
  rm -rf "$H.tmp" && mkdir -p "$H.tmp/include"
  python3 -m pip install --quiet --no-deps --target "$H.tmp/wheels" "nvidia-cuda-runtime-cu12==12.1.105" \
    "nvidia-cublas-cu12==12.1.3.1"
  cp -a "$H.tmp/wheels/nvidia/cuda_runtime/include/." "$H.tmp/wheels/nvidia/cublas/include/." "$H.tmp/include/"
  rm -rf "$H.tmp/wheels" "$H.tmp/include/__init__.py" "$H.tmp/include/__pycache__" "$H"
  mv "$H.tmp" "$H"
  echo "install-cuda-toolchain: CUDA 12.1 headers in $H (make GPU=cuda cuda-check-12)"
  exit 0
fi
VERSION=13.5.37
# cuBLAS for the products: the version of the CUDA 13.0 toolkit seen on the GPU machines, so that
# the backend links against no symbol their libcublas lacks (it is loaded from the machine's
# CUDA at run time: LD_LIBRARY_PATH=/usr/local/cuda/lib64)
CUBLAS_VERSION=13.1.0.3
if [ -x "$DEST/nvidia/cu13/bin/nvcc" ] && [ -x "$DEST/nvidia/cu13/bin/nvdisasm" ] &&
   grep -qx "$VERSION $CUBLAS_VERSION" "$DEST/VERSION" 2>/dev/null; then
  echo "install-cuda-toolchain: CUDA $VERSION compiler present in $DEST"
  exit 0
fi
command -v python3 >/dev/null || { echo "install-cuda-toolchain: python3 is needed (scripts/install-deps.sh)" >&2; exit 1; }
rm -rf "$DEST.tmp"
# nvcc's wheel brings cicc (nvidia-nvvm) and the crt headers (nvidia-cuda-crt) as dependencies
python3 -m pip install --quiet --target "$DEST.tmp" "nvidia-cuda-nvcc==$VERSION" "nvidia-cuda-runtime==$VERSION" \
  "nvidia-nvvm==$VERSION" "nvidia-cuda-crt==$VERSION" "nvidia-cuda-cuobjdump==$VERSION" \
  "nvidia-cuda-nvdisasm==$VERSION"
python3 -m pip install --quiet --no-deps --target "$DEST.tmp/cublas" "nvidia-cublas==$CUBLAS_VERSION"
cp -a "$DEST.tmp/cublas/nvidia/cu13/include/." "$DEST.tmp/nvidia/cu13/include/"
cp -a "$DEST.tmp/cublas/nvidia/cu13/lib/." "$DEST.tmp/nvidia/cu13/lib/"
rm -rf "$DEST.tmp/cublas"
echo "$VERSION $CUBLAS_VERSION" > "$DEST.tmp/VERSION"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
"$DEST/nvidia/cu13/bin/nvcc" --version | tail -n 2
echo "install-cuda-toolchain: nvcc in $DEST/nvidia/cu13/bin (make GPU=cuda cuda-check)"
