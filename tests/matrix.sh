#!/usr/bin/env bash
# `make test-matrix`: the model, layer and bench tests (oneDNN and OpenBLAS builds) under every
# environment the project meets on machines of its kind, one line per environment:
#   OPENBLAS_CORETYPE   unset, Haswell, and SkylakeX / Cooperlake where the CPU has AVX-512 /
#                       AVX-512 BF16 (OpenBLAS then runs another kernel, with other rounding)
#   OPENBLAS_L2_SIZE    unset and 512 (the blocking OpenBLAS derives from it)
#   OMP_NUM_THREADS     1 and 2
#   ONEDNN_MAX_CPU_ISA  oneDNN's default and AVX2 (another sgemm kernel)
# Too slow for `make test` (a few minutes); run it before submitting anything that touches
# kernels or tolerances. Exit status non-zero if any environment failed.
set -u
cd "$(dirname "$0")/.."
TESTS=(test_layers test_model test_bench test_bf16)
BUILDS=(build build-openblas)
flags=$(grep -m1 '^flags' /proc/cpuinfo)
coretypes=("" Haswell)
[[ $flags == *" avx512f "* ]] && coretypes+=(SkylakeX)
[[ $flags == *" avx512_bf16 "* ]] && coretypes+=(Cooperlake)
export OMP_WAIT_POLICY=passive
green=0; red=0
for core in "${coretypes[@]}"; do
  for l2 in "" 512; do
    for threads in 1 2; do
      for isa in "" AVX2; do
        vars=(OMP_NUM_THREADS=$threads)
        [ -n "$core" ] && vars+=(OPENBLAS_CORETYPE=$core)
        [ -n "$l2" ] && vars+=(OPENBLAS_L2_SIZE=$l2)
        [ -n "$isa" ] && vars+=(ONEDNN_MAX_CPU_ISA=$isa)
        passed=0; failed=0; report=""
        for b in "${BUILDS[@]}"; do
          for t in "${TESTS[@]}"; do
            out=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u ONEDNN_MAX_CPU_ISA "${vars[@]}" "$b/tests/$t" 2>&1)
            rc=$?
            line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
            p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
            [ -n "$line" ] || { p=0; f=1; }
            [ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
            passed=$((passed + p)); failed=$((failed + f))
            [ "$f" -ne 0 ] && report+=$(printf '\n    %s/tests/%s:\n%s' "$b" "$t" "$(grep -E 'FAIL|:[0-9]+: ' <<<"$out" | sed 's/^/      /')")
          done
        done
        if [ "$failed" -eq 0 ]; then green=$((green + 1)); status="ok  "; else red=$((red + 1)); status="FAIL"; fi
        printf '%s %-80s %d passed, %d failed%s\n' "$status" "${vars[*]}" "$passed" "$failed" "$report"
      done
    done
  done
done
isa_note="AVX2 only"
[[ $flags == *" avx512f "* ]] && isa_note="AVX-512"
[[ $flags == *" avx512_bf16 "* ]] && isa_note="AVX-512 + BF16"
echo "test-matrix: $green environments green, $red red ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $isa_note)"
[ "$red" -eq 0 ]
