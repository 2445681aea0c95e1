#!/usr/bin/env bash
# scripts/gpu_check.sh rehearsed without a GPU: a session lent a device has one try at it (15
# minutes), so a flag renamed since, a misspelt one or a shell error must show here, not there.
# The script runs all its sections (peer_warm kernels compare speed minilm peer) in a scratch
# copy of the repository's layout, with stand-ins for the CUDA tests (passing) and a bundle whose
# `bert` hands each command line to this build's ./bert with --help after it (every flag parsed
# and checked, then nothing run) and records those the real program refuses; PyTorch's runs fail
# at once here (no GPU), which leaves their bash around them rehearsed. Checked:
#   syntax     bash -n on gpu_check.sh and gpu_bundle.sh
#   runs       the rehearsal exits 0, with no unset variable or missing command but the GPU's own
#              tools (nvidia-smi, nvcc)
#   commands   every command the device run uses was called (bench, pretrain, glue, squad, embed,
#              bench_infer, serve) and each line's flags parse
#   peer alone the peer section runs with nothing carried (a machine gone cold before the second
#              call)
#   can-fail   a copy with one flag misspelt fails the commands check (so this cannot pass by
#              calling nothing)
# Prints each check, then "N passed, N failed"; exit 1 on any failure.
source "$(dirname "$0")/check_common.sh"
[ -x ./bert ] || { fail "no ./bert: build first (make)"; summary; exit; }

# script_tree DIR SCRIPT: the repository's files the script reads, SCRIPT as scripts/gpu_check.sh, in DIR
script_tree() {
  local dir=$1 script=$2
  mkdir -p "$dir"/{scripts,bench,tools,tmp}
  cp "$script" "$dir/scripts/gpu_check.sh"
  cp bench/*.py "$dir/bench/"
  cp tools/torch_bert.py "$dir/tools/"
}

# rehearse DIR SCRIPT: the scratch layout in DIR, SCRIPT run there; DIR/calls.log and DIR/run.log
rehearse() {
  local dir=$1 script=$2
  script_tree "$dir" "$script"
  mkdir -p "$dir"/{tests/cuda,tests/data/squad,build-cuda,.devbundle/glue/MRPC,.devminilm/model,.devminilm/glue}
  mkdir -p "$dir/.devbundle/prep/hdf5_lower_case_1_seq_len_128_max_pred_20/books"
  cp tests/cuda/serve_embed.sh "$dir/tests/cuda/"
  cp tests/data/squad/subset_v1.json "$dir/tests/data/squad/"
  touch "$dir/build-cuda/libbert_cuda.so"
  for t in tests/cuda/test_cuda_*.c; do   # the CUDA tests, as stand-ins that pass
    printf '#!/bin/sh\necho "1 passed, 0 failed"\n' > "$dir/build-cuda/$(basename "$t" .c)"
    chmod +x "$dir/build-cuda/$(basename "$t" .c)"
  done
  tar -cJf "$dir/.devbundle/libs.tar.xz" -T /dev/null
  printf 'Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA sentence.\tAnother one.\n' \
    > "$dir/.devbundle/glue/MRPC/dev.tsv"
  printf '{}' > "$dir/.devminilm/model/config.json"
  : > "$dir/.devminilm/model/vocab.txt"
  : | xz > "$dir/.devminilm/model/model.safetensors.xz"
  cat > "$dir/.devbundle/bert" <<EOF
#!/bin/bash
# the stand-in: this build's ./bert checks the flags (--help after them: parsed, then nothing run)
"$repo/bert" "\$@" --help > "$dir/last.txt" 2>&1
rc=\$?
if [ \$rc = 0 ]; then echo "ok \$1" >> "$dir/calls.log"
else echo "refused (exit \$rc): bert \$* :: \$(head -n 1 "$dir/last.txt")" >> "$dir/calls.log"; fi
exit 0
EOF
  chmod +x "$dir/.devbundle/bert"
  : > "$dir/calls.log"
  (cd "$dir" && GPU_CHECK_TMP="$dir/tmp" OUT="$dir/out" PRETRAIN_CPU=1 timeout 300 bash scripts/gpu_check.sh peer_warm kernels compare speed minilm peer \
    > "$dir/run.log" 2>&1)
}

for s in scripts/gpu_check.sh scripts/gpu_bundle.sh; do
  if out=$(bash -n "$s" 2>&1); then ok "syntax: $s"; else fail "syntax: $s" "$out"; fi
done

rehearse "$root/r" scripts/gpu_check.sh
status=$?
# the script's own output and each section's log (some sections print a digest of theirs)
errors=$(cat "$root/r/run.log" "$root/r/out"/*.log | grep -E 'unbound variable|command not found|syntax error|No such file' |
  grep -vE '(nvidia-smi|nvcc): command not found|/tmp/(embed|serve)_(cpu|cuda)' || true)
if [ $status = 0 ] && [ -z "$errors" ]; then ok "runs: the rehearsal exits 0 (its log: $(wc -l < "$root/r/run.log") lines)"
else fail "runs: exit $status" "$errors"; fi

missing=""
for c in bench pretrain glue squad embed bench_infer serve; do
  grep -q "^ok $c\$" "$root/r/calls.log" || missing="$missing $c"
done
refused=$(grep -v '^ok ' "$root/r/calls.log" || true)
calls=$(wc -l < "$root/r/calls.log")
if [ -z "$missing" ] && [ -z "$refused" ] && [ "$calls" -ge 40 ]; then ok "commands: $calls command lines, every flag parses"
else fail "commands: $calls lines; never called:${missing:- none}" "$refused"; fi

# a machine gone cold before the second call: the peer alone, with nothing carried
script_tree "$root/cold" scripts/gpu_check.sh
(cd "$root/cold" && GPU_CHECK_TMP="$root/cold/tmp" OUT="$root/cold/out" timeout 120 bash scripts/gpu_check.sh peer \
  > "$root/cold/run.log" 2>&1)
status=$?
if [ $status = 0 ] && grep -q 'gpu_check: peer done' "$root/cold/run.log"; then ok "peer alone: runs with nothing carried"
else fail "peer alone: exit $status" "$(tail -n 5 "$root/cold/run.log")"; fi

sed 's/--disable_progress_bar/--disable_progress_barr/' scripts/gpu_check.sh > "$root/planted.sh"
rehearse "$root/p" "$root/planted.sh"
if grep -q "refused (exit 2): bert pretrain .*unknown flag '--disable_progress_barr'" "$root/p/calls.log"; then
  ok "can-fail: a misspelt flag is refused ($(grep -c '^refused' "$root/p/calls.log") lines)"
else fail "can-fail: the planted --disable_progress_barr went unnoticed" "$(head -n 5 "$root/p/calls.log")"; fi

summary
