#!/usr/bin/env bash
# Runs every test binary in each given build folder (and, for the first folder, the
# Python interoperability tests in tests/py), the layering check (tests/check_layers.sh), the
# device script's rehearsal (tests/check_gpu_script.sh),
# then prints one summary line.
# Exit status is non-zero if anything failed.
set -u
cd "$(dirname "$0")/.."
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
: "${OMP_NUM_THREADS:=2}"; export OMP_NUM_THREADS
# Tests are not timed; passive waiting keeps them quick when the machine is shared.
: "${OMP_WAIT_POLICY:=passive}"; export OMP_WAIT_POLICY
passed=0; failed=0; skipped=0; first=1
run_one() {  # label, command...
    local label=$1; shift
    local out; out=$(mktemp)
    "$@" >"$out" 2>&1
    local rc=$?
    local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
    local p=0 f=0 s=0
    if [ -n "$line" ]; then
        p=$(echo "$line" | awk '{print $1}'); f=$(echo "$line" | awk '{print $3}' | tr -d ,)
        s=$(echo "$line" | sed -n 's/.*, \([0-9]*\) skipped.*/\1/p'); s=${s:-0}
    fi
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or errored without counting
    if [ -z "$line" ] && [ $rc -eq 0 ]; then f=1; echo "  (no summary line)" >>"$out"; fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ "$f" -ne 0 ]; then echo "FAIL $label ($p passed, $f failed, exit $rc)"; sed 's/^/    /' "$out"
    elif [ "$s" -ne 0 ]; then
        echo "ok   $label ($p passed, $s skipped)"; grep -E '^ *skipped: ' "$out" | sort -u | sed 's/^ */    /'
    else echo "ok   $label ($p passed)"; fi
    rm -f "$out"
}
for build in "$@"; do
    for t in "$build"/tests/test_*; do
        [ -x "$t" ] || continue
        run_one "$t" "$t"
    done
    if [ $first -eq 1 ] && [ -d tests/py ]; then
        for t in tests/py/test_*.py; do
            [ -f "$t" ] || continue
            run_one "$t" /usr/bin/python3 "$t"
        done
    fi
    first=0
done
# the layering of docs/architecture.md, over src/'s include lines (once: it reads no build)
run_one "tests/check_layers.sh" bash tests/check_layers.sh
# make install, and a C program built against the installed library with pkg-config
run_one "tests/check_install.sh" bash tests/check_install.sh
# scripts/gpu_check.sh rehearsed without a GPU: every command line's flags parse, no shell error
run_one "tests/check_gpu_script.sh" bash tests/check_gpu_script.sh
# the fuzz targets' seed corpora, replayed once each (make fuzz-build builds them)
for t in build-fuzz/fuzz_*; do
    [ -x "$t" ] || continue
    run_one "$t (seed corpus)" bash tests/fuzz/run.sh replay 0 "$(basename "$t")"
done
[ "$skipped" -eq 0 ] || echo "$skipped cases skipped: they cannot run on this machine (the reasons above)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
