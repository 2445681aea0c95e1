#!/usr/bin/env bash
# Installs bert.c's Debian dependencies when they are missing. Idempotent; needs root
# (or sudo) only when something is actually missing.
set -euo pipefail

BUILD_PKGS=(
  build-essential pkg-config
  libdnnl-dev              # oneDNN: the model's sgemm (7-10% faster than OpenBLAS here; bench/RESULTS.md)
  libopenblas-openmp-dev   # cblas sgemm (make GEMM=openblas; the sgemm peak compares both), OpenMP build
  libutf8proc-dev          # Unicode categories, NFD, case folding for the tokenizer
  libhdf5-dev              # pre-training shards in NVIDIA's HDF5 layout
  libisal-dev              # gzip (igzip) chunks of those shards: 3x libdeflate level 1, compressed in parallel
  libopenmpi-dev openmpi-bin  # data parallelism
  libcjson-dev             # config.json, safetensors headers, SQuAD json
  libbz2-dev libexpat1-dev # Wikipedia .xml.bz2 dumps
  libzip-dev               # PyTorch checkpoints (torch.save's zip archives: --init_checkpoint model.pt)
  libmicrohttpd-dev        # bert serve's HTTP/1.1 server: mature, thread-pool mode, no further dependencies (docs/serving.md)
)
TEST_PKGS=(
  python3 python3-numpy python3-torch python3-h5py   # reference oracles (tools/, tests that read shards)
  libcurl4-openssl-dev     # tests/test_serve.c: a real HTTP client against bert serve, many threads at once
  xz-utils procps          # tests/check_gpu_script.sh: the device script's xz and ps, rehearsed
)

missing=()
for p in "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
