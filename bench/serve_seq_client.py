"""One client, one request at a time, over the first N bodies of a file (one JSON body a
line) in order, on one kept-alive connection: the latency a lone user sees, measured from the
request's send to its whole answer read, for bench/run_serve_bench.sh's batch-1 comparison
with `bert bench_infer` on the same texts (python's standard library only).

    python3 bench/serve_seq_client.py PORT PATH BODIES N [WARMUP]     -> one JSON line"""
import http.client
import json
import math
import sys
import time

port, path, bodies_file, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
warmup = int(sys.argv[5]) if len(sys.argv) > 5 else 16
bodies = [line.rstrip("\n").encode() for line in open(bodies_file, encoding="utf-8") if line.strip()][:n]
conn = http.client.HTTPConnection("127.0.0.1", port)
headers = {"Content-Type": "application/json"}


def send(body):
    t0 = time.perf_counter()
    conn.request("POST", path, body, headers)
    resp = conn.getresponse()
    resp_data = resp.read()
    if resp.status != 200:
        sys.exit(f"serve_seq_client: {path} answered {resp.status}: {resp_data[:200]!r}")
    return time.perf_counter() - t0


for b in bodies[:warmup]:
    send(b)
ms = sorted(1e3 * send(b) for b in bodies)


def pct(p):   # nearest rank, as bench_infer's percentiles
    return ms[min(len(ms) - 1, max(0, math.ceil(p / 100 * len(ms)) - 1))]


print(json.dumps({"requests": len(ms), "mean_ms": round(sum(ms) / len(ms), 3), "p50_ms": round(pct(50), 3),
                  "p90_ms": round(pct(90), 3), "p99_ms": round(pct(99), 3), "max_ms": round(ms[-1], 3)}))
