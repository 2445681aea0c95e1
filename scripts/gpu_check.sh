#!/usr/bin/env bash
# The device check of the CUDA backend, for a session lent a GPU machine (the device tool): one
# command, a few minutes on a bare H100/H200 image (it has nvcc and gcc; it needs none of
# Debian's libraries): the device and toolkit versions, then `make GPU=cuda cuda-test` (every
# CUDA file compiled for sm_80/sm_90, the CUDA kernels against the CPU backend's, bit for bit).
# Logs and results go to $OUT (the device tool brings them back).
#   run: bash scripts/gpu_check.sh          (timeout_s ~300)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -n 2; } \
  > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"
rc=0
make GPU=cuda NVCC="$(command -v nvcc)" cuda-test > "$OUT/cuda_test.log" 2>&1 || rc=$?
tail -n 30 "$OUT/cuda_test.log"
echo "gpu_check: cuda-test exit $rc (full log: $OUT/cuda_test.log)"
exit $rc
