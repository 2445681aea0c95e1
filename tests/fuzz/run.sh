#!/usr/bin/env bash
# Runs the libFuzzer targets: `run.sh fuzz SECONDS target...` fuzzes each for SECONDS from its
# seed corpus (new inputs go to a scratch copy, the committed seeds stay as they are);
# `run.sh replay 0 target...` runs each seed once. One line per target, then
# "N passed, N failed"; a crash, leak, timeout or out-of-memory fails the target and its
# reproducer is kept in build-fuzz/crashes/.
set -u
cd "$(dirname "$0")/../.."
mode=$1 seconds=$2; shift 2
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
mkdir -p build-fuzz/crashes
passed=0 failed=0
for t in "$@"; do
  seeds=tests/fuzz/corpus/${t#fuzz_}
  log=build-fuzz/$t.log
  if [ "$mode" = replay ]; then
    build-fuzz/$t -runs=0 "$seeds" >"$log" 2>&1
  else
    work=build-fuzz/corpus-$t; rm -rf "$work"; mkdir -p "$work"; cp -r "$seeds"/. "$work"/
    build-fuzz/$t -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix=build-fuzz/crashes/$t- "$work" >"$log" 2>&1
  fi
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [ -n "$execs" ] || execs=$(grep -oE '#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); echo "ok   $t (${execs:-?} executions)"
  else failed=$((failed + 1)); echo "FAIL $t (exit $rc, see $log)"; grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -5 | sed 's/^/    /'; fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
