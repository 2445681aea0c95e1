#!/bin/bash
# The CUDA tests named (attention norm_act rows linear optim model) against the emulated library
# (make cuda-emulate builds both), each under two schedules of the emulator (runtime.cpp):
#   A  threads in order, fresh memory NaN, each wmma tile's sums in order;
#   B  threads in reverse order, fresh memory 3.4e38, each tile's sums exact and rounded once;
# the attention and model tests also with BERT_CUDA_ATTENTION=fused. A missing barrier shows in
# one schedule or the other where its race changes a result the test checks.
set -u
lib=build-emu/libbert_cuda_emu.so
failed=()
run() {   # run NAME SCHEDULE ATTENTION
    local t=$1 schedule=$2 attention=$3 env=(EMU_ORDER=0 EMU_POISON=0xff EMU_MMA_ORDER=0)
    [ "$schedule" = B ] && env=(EMU_ORDER=1 EMU_POISON=0x7f EMU_MMA_ORDER=2)
    echo "== test_cuda_$t, schedule $schedule, attention $attention"
    local start=$SECONDS out
    out=$(env "${env[@]}" BERT_CUDA_ATTENTION=$attention build-emu/test_cuda_$t $lib 2>&1)
    local rc=$?
    echo "$out" | grep -v '^    ok'
    # a library that does not load makes a test pass with "skip": not here
    if [ $rc -ne 0 ] || ! echo "$out" | grep -q '[1-9][0-9]* passed, 0 failed' || echo "$out" | grep -q 'skip:'; then
        failed+=("test_cuda_$t ($schedule, $attention)")
    fi
    echo "   ($((SECONDS - start)) s)"
}
for t in "$@"; do
    case $t in
        attention) run $t A default; run $t A fused; run $t B fused ;;
        model) run $t A default; run $t B fused ;;
        *) run $t A default; run $t B default ;;
    esac
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "cuda-emulate: FAILED: ${failed[*]}"
    exit 1
fi
echo "cuda-emulate: every run passed"
