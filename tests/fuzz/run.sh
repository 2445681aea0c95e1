#!/usr/bin/env bash
# Runs the libFuzzer targets: `run.sh fuzz SECONDS target...` fuzzes each for SECONDS from its
# seed corpus (new inputs go to a scratch copy, the committed seeds stay as they are);
# `run.sh replay 0 target...` runs each seed once. One line per target, then
# "N passed, N failed"; a crash, leak, timeout or out-of-memory fails the target and its
# reproducer is kept in build-fuzz/crashes/.
#
# Known library crashes (tests/fuzz/known/crashes.txt) are kept out of that count: a crash
# whose stack starts inside a listed library, on memory that library allocated, is not
# bert.c's (libhdf5 reads past its own buffers on some corrupt files; bert.c's checks run
# before and after the call and cannot stop it). Such a crash is listed, its input moved to
# build-fuzz/crashes/known/, and the target fuzzes on for the rest of its time (it used to
# end red after a few thousand executions, issue 35 D25). Each recorded input is also
# replayed in a child process at the end and reported apart: still crashing in its library,
# or no longer crashing.
set -u
cd "$(dirname "$0")/../.."
mode=$1 seconds=$2; shift 2
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
mkdir -p build-fuzz/crashes/known
# the targets' temporary files (fuzz_util.h's fuzz_temp_path) in a folder of this run's, removed
# at the end however it ends
scratch=$(mktemp -d "${TMPDIR:-/tmp}/bert-fuzz-run.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
known_file=tests/fuzz/known/crashes.txt
known_libs=$(grep -v '^#' "$known_file" 2>/dev/null | awk 'NF >= 3 {print $3}' | sort -u | paste -sd'|')

# "LIBRARY FUNCTION" when the sanitizer report in log $1 is a crash inside a known library on
# memory it allocated (the first frame that is not the sanitizer's, of the crash and of the
# allocation, both in the library), or an allocation too large to make that the library
# asked for; nothing otherwise.
classify() {
    [ -n "$known_libs" ] || return 0
    awk -v libs="$known_libs" '
        function frame_lib(line,   n, i, parts) {   # the known library a frame is in, or ""
            n = split(libs, parts, "|")
            for (i = 1; i <= n; i++) if (index(line, "/" parts[i])) return parts[i]
            return ""
        }
        function sanitizer_frame(line) {
            return line ~ / in (__interceptor_|__asan|__sanitizer|__ubsan|__lsan|malloc|calloc|realloc|free|operator|__mem|fuzzer::)/ ||
                   line ~ /sysdeps\//   # libc copying for the caller
        }
        /ERROR: AddressSanitizer: (heap|stack|global)-buffer-overflow|ERROR: AddressSanitizer: (SEGV|heap-use-after-free)/ {
            in_report = 1; section = "crash"; next
        }
        # an allocation the library sized from the file (a corrupt header declaring gigabytes):
        # without the sanitizer it fails and the library returns an error
        /ERROR: AddressSanitizer: (allocator is out of memory|requested allocation size)|ERROR: libFuzzer: out-of-memory \(malloc/ {
            in_report = 1; section = "crash"; next
        }
        in_report && /allocated by thread/ { section = "alloc"; next }
        in_report && /^ *#[0-9]+ / {
            if (sanitizer_frame($0) || done[section]) next
            done[section] = 1
            lib[section] = frame_lib($0)
            if (section == "crash") { fn = $0; sub(/.* in /, "", fn); sub(/ .*/, "", fn); if ($0 !~ / in /) fn = "?" }
        }
        END {
            if (lib["crash"] != "" && (lib["alloc"] == lib["crash"] || !done["alloc"]))
                print lib["crash"], fn
        }' "$1"
}

passed=0 failed=0 known=0
known_lines=()
for t in "$@"; do
  seeds=tests/fuzz/corpus/${t#fuzz_}
  log=build-fuzz/$t.log
  : >"$log"
  execs=0 restarts=0
  if [ "$mode" = replay ]; then
    build-fuzz/$t -runs=0 "$seeds" >"$log" 2>&1
    rc=$?
  else
    work=build-fuzz/corpus-$t; rm -rf "$work"; mkdir -p "$work"; cp -r "$seeds"/. "$work"/
    end=$(( $(date +%s) + seconds ))
    while :; do
      left=$(( end - $(date +%s) ))
      [ "$left" -ge 1 ] || left=1
      build-fuzz/$t -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix=build-fuzz/crashes/$t- "$work" >"$log.part" 2>&1
      rc=$?
      cat "$log.part" >>"$log"
      n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log.part" | grep -o '[0-9]*$' || true)
      [ -n "$n" ] || n=$(grep -oE '#[0-9]+' "$log.part" | tail -n 1 | tr -d '#')
      execs=$(( execs + ${n:-0} ))
      [ $rc -ne 0 ] || break
      sig=$(classify "$log.part")
      [ -n "$sig" ] || break                      # bert.c's: the target fails
      unit=$(grep -o 'Test unit written to .*' "$log.part" | sed 's/Test unit written to //' | tail -n 1)
      [ -n "$unit" ] && [ -f "$unit" ] && mv "$unit" build-fuzz/crashes/known/
      known=$((known + 1)) restarts=$((restarts + 1))
      known_lines+=("found $t: inside ${sig% *} (${sig#* }), input build-fuzz/crashes/known/$(basename "${unit:-?}")")
      rc=0
      [ $(( end - $(date +%s) )) -ge 1 ] && [ $restarts -lt 100 ] || break   # the time is up: the target ran
    done
    rm -f "$log.part"
  fi
  if [ "$mode" = replay ]; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    [ -n "$execs" ] || execs=$(grep -oE '#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  fi
  extra=""
  [ $restarts -eq 0 ] || extra=", $restarts known library crashes passed over"
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); echo "ok   $t (${execs:-?} executions$extra)"
  else failed=$((failed + 1)); echo "FAIL $t (exit $rc, see $log)"; grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -5 | sed 's/^/    /'; fi
done

# The recorded library crashes of the targets run, each replayed in a child process.
if [ -f "$known_file" ]; then
  while read -r target input library; do
    case "$target" in ''|'#'*) continue ;; esac
    case " $* " in *" $target "*) ;; *) continue ;; esac
    [ -x "build-fuzz/$target" ] || continue
    rlog=build-fuzz/known-$target-$(basename "$input").log
    ( "build-fuzz/$target" "tests/fuzz/known/$input" ) >"$rlog" 2>&1
    rc=$?
    sig=$(classify "$rlog")
    if [ $rc -eq 0 ]; then
      known_lines+=("recorded $target $input: no longer crashes (move it to the seed corpus)")
    elif [ -n "$sig" ] && [ "${sig% *}" = "$library" ]; then
      known_lines+=("recorded $target $input: still crashes inside $library (${sig#* })")
    else   # it crashes in bert.c now, or in another way: not a library's
      failed=$((failed + 1))
      echo "FAIL $target on tests/fuzz/known/$input: not the recorded $library crash (exit $rc, see $rlog)"
    fi
  done <"$known_file"
fi
echo "$passed passed, $failed failed"
if [ ${#known_lines[@]} -gt 0 ]; then
  echo "known library crashes, not counted ($known found by this run; tests/fuzz/known/README.md):"
  printf '  %s\n' "${known_lines[@]}"
fi
[ $failed -eq 0 ]
