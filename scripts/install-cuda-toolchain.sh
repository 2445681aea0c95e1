#!/usr/bin/env bash
# A CUDA compiler and the CUDA runtime's headers from PyPI, so that a machine without a GPU or
# a CUDA installation can compile the CUDA backend (`make GPU=cuda cuda-check`): NVIDIA's
# nvidia-cuda-nvcc, nvidia-cuda-runtime and nvidia-cublas wheels (CUDA 13; nvcc, cicc, ptxas,
# headers, cuBLAS), and cuobjdump with nvdisasm (`make GPU=cuda cuda-sass`: the machine code the
# kernels compile to, for reading what the compiler did without a GPU),
# unpacked into .cuda-toolchain/ (about 320 MB, ignored by git). Idempotent. A machine with CUDA
# installed needs none of this: the Makefile uses its nvcc (NVCC=...).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.cuda-toolchain
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
