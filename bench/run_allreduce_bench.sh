#!/usr/bin/env bash
# MPI collective timings on this machine, for the scaling model (docs/distributed.md, "Past one machine"):
# builds bench/mpi_allreduce_bench.c with mpicc (outside the Makefile's build) and runs it on
# NP ranks of this one machine, so every byte goes through OpenMPI's shared-memory transport.
#
#   bench/run_allreduce_bench.sh [bench options]     e.g. --quick, --whole_bytes 110M, --compute_s 2
#   NP=2                                             ranks (default 2)
#   RESULTS=file                                     where the JSON line goes (default
#                                                    bench/results/allreduce_bench_<time>.jsonl); the full
#                                                    text output goes next to it (.txt), and bert.c's
#                                                    own reduction (bert bench_allreduce, when ./bert is
#                                                    built) to grad_sync_bench_<time>.jsonl
#   MPIRUN_ARGS="..."                                extra mpirun arguments (e.g. --mca coll_tuned_...)
#   WAIT_QUIET=seconds                               first wait (at most this long) until the machine is
#                                                    quiet: 1-minute load < 0.5 and > 90% idle over 5 s
#
# On a 2-core machine, 2 ranks means one core per rank: the compute of one rank and the
# copying and summing that its communication needs share that core (nothing else can run the
# transfers: shared memory has no DMA engine, and the non-blocking collectives progress only
# inside MPI calls). tools/scaling_model.py --calibration FILE reads the JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
NP=${NP:-2}
command -v mpicc >/dev/null || { echo "run_allreduce_bench: no mpicc (Debian: openmpi-bin libopenmpi-dev)" >&2; exit 1; }
quiet() {  # 1-minute load below 0.5 and the CPUs more than 90% idle over the next 5 s
  awk '{exit !($1 < 0.5)}' /proc/loadavg || return 1
  local a b
  a=($(head -n1 /proc/stat)); sleep 5; b=($(head -n1 /proc/stat))
  local total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  [ $total -gt 0 ] && [ $((100 * (b[4] - a[4]) / total)) -gt 90 ]
}
if [ "${WAIT_QUIET:-0}" -gt 0 ]; then
  deadline=$((SECONDS + WAIT_QUIET))
  until quiet; do
    [ $SECONDS -ge "$deadline" ] && { echo "run_allreduce_bench: the machine did not get quiet; running anyway" >&2; break; }
    sleep 10
  done
fi
mkdir -p build bench/results
mpicc -std=c11 -O2 -march=native -Wall -Wextra -Wshadow -Wno-unused-parameter \
  -o build/mpi_allreduce_bench bench/mpi_allreduce_bench.c -lm
stamp=$(date -u +%Y%m%d_%H%M%S)
results=${RESULTS:-bench/results/allreduce_bench_$stamp.jsonl}
text=${results%.jsonl}.txt
{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
       "$(mpirun --version | head -n1), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
  echo "# mpirun -np $NP --oversubscribe --allow-run-as-root --bind-to none ${MPIRUN_ARGS:-} build/mpi_allreduce_bench $*"
} | tee "$text"
# --bind-to none: with 2 ranks on 2 cores, binding would change nothing but would refuse
# more ranks than cores; --oversubscribe allows NP > cores (then the ranks time-share cores).
# shellcheck disable=SC2086
mpirun -np "$NP" --oversubscribe --allow-run-as-root --bind-to none ${MPIRUN_ARGS:-} \
  build/mpi_allreduce_bench "$@" | tee -a "$text"
grep '^{' "$text" | tail -n 1 >> "$results"
# bert.c's own bucketed reduction (train/grad_sync.h) on bert-base's gradient, timed the same
# way, beside one all-reduce of the same buffer: the bandwidth bert.c reaches against the
# library's own MPI_Allreduce on the same byte counts (the whole gradient, one bucket) above.
ours=$(dirname "$results")/grad_sync_bench_$stamp.jsonl
if [ -x ./bert ]; then
  for mode in "" --allreduce_post_accumulation_bf16 --allreduce_post_accumulation_fp16 --shard_optimizer; do
    echo "# mpirun -np $NP ./bert bench_allreduce --bert_model bert-base $mode" | tee -a "$text"
    # shellcheck disable=SC2086
    mpirun -np "$NP" --oversubscribe --allow-run-as-root --bind-to none ${MPIRUN_ARGS:-} \
      ./bert bench_allreduce --bert_model bert-base $mode --json | tee -a "$text" >> "$ours"
  done
else
  echo "run_allreduce_bench: ./bert is not built (make): bert.c's own reduction not timed" >&2
fi
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) at end" | tee -a "$text"
echo "run_allreduce_bench: JSON line in $results, text in $text, bert.c's reduction in $ours" >&2
