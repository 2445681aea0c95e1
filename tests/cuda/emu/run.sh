#!/bin/bash
# The CUDA tests named (attention norm_act rows linear optim collectives model; distributed:
# tests/test_distributed.c's comparisons of 1 and 2 processes with --device cuda; commands: the
# commands on both devices, commands.sh) against the emulated library (make cuda-emulate builds
# it, its NCCL over MPI, and the tests), each under two schedules of the emulator (runtime.cpp):
#   A  threads in order, fresh memory NaN, each wmma tile's and each product's sums in order;
#   B  threads in reverse order, fresh memory 3.4e38, each tile's sums exact and rounded once,
#      cuBLASLt's first algorithm a split-K (cublaslt.cpp), each event's first query "not ready";
# the attention and model tests also with BERT_CUDA_ATTENTION=fused, the products (and the
# model's second run) also through cuBLASLt for the backward with the faster of 2 algorithms
# kept (BERT_CUDA_LT_BACKWARD=1, BERT_CUDA_LT_ALGOS=2), and on plain cuBLAS alone (EMU_LT=0).
# A missing barrier shows in one schedule or the other where its race changes a result the test
# checks.
set -u
lib=$PWD/build-emu/libbert_cuda_emu.so
export BERT_NCCL_LIB=$PWD/build-emu/libnccl_emu.so
failed=()
passed() {   # passed OUTPUT RC: the test ran (a library that does not load makes a test "skip") and passed
    [ "$2" -eq 0 ] && echo "$1" | grep -q '[1-9][0-9]* passed, 0 failed' && ! echo "$1" | grep -q 'skip:'
}
run() {   # run NAME SCHEDULE ATTENTION [VAR=VALUE ...]
    local t=$1 schedule=$2 attention=$3 env=(EMU_ORDER=0 EMU_POISON=0xff EMU_MMA_ORDER=0)
    shift 3
    [ "$schedule" = B ] && env=(EMU_ORDER=1 EMU_POISON=0x7f EMU_MMA_ORDER=2 EMU_NOT_READY=1)
    echo "== test_cuda_$t, schedule $schedule, attention $attention${*:+, $*}"
    local start=$SECONDS out
    out=$(env "${env[@]}" BERT_CUDA_ATTENTION=$attention "$@" build-emu/test_cuda_$t $lib 2>&1)
    local rc=$?
    echo "$out" | grep -v '^    ok'
    passed "$out" $rc || failed+=("test_cuda_$t ($schedule, $attention${*:+, $*})")
    echo "   ($((SECONDS - start)) s)"
}
distributed() {   # 1 process = 2 (and the parallel path alone, and resume) with --device cuda
    echo "== test_distributed --device cuda (2 processes: the emulated NCCL over MPI; events not ready at first)"
    local start=$SECONDS out
    out=$(EMU_NOT_READY=1 BERT_TEST_DEVICE=cuda BERT_TEST_BERT=$PWD/bert BERT_CUDA_LIB=$lib build/tests/test_distributed 2>&1)
    local rc=$?
    echo "$out"
    passed "$out" $rc || failed+=("test_distributed (--device cuda)")
    echo "   ($((SECONDS - start)) s)"
}
commands() {   # the task commands on both devices (commands.sh)
    echo "== squad, glue, ner, classify, embed: --device cuda against --device cpu"
    local start=$SECONDS
    bash tests/cuda/emu/commands.sh || failed+=("the task commands (commands.sh)")
    echo "   ($((SECONDS - start)) s)"
}
for t in "$@"; do
    case $t in
        attention) run $t A default; run $t A fused; run $t B fused ;;
        linear) run $t A default; run $t B default BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=2; run $t A default EMU_LT=0 ;;
        model) run $t A default; run $t B fused BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=2 ;;
        collectives) run $t A default; run $t B default ;;
        distributed) distributed ;;
        commands) commands ;;
        *) run $t A default; run $t B default ;;
    esac
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "cuda-emulate: FAILED: ${failed[*]}"
    exit 1
fi
echo "cuda-emulate: every run passed"
