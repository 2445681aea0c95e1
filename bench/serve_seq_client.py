"""One client, one request at a time, over the first N bodies of a file (one JSON body a
line) in order, on one kept-alive connection: the latency a lone user sees, measured from the
request's send to its whole answer read, for bench/run_serve_bench.sh's batch-1 comparison
with `bert bench_infer` on the same texts (python's standard library only). Where the answer
carries bert serve's Server-Timing header, the forward's own time is read from it too, and
each request's latency less its forward is what the server and the client added around it:
paired request by request, so a machine whose load changes weighs on both parts alike.

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
    """(latency ms, the forward's and the server's total ms from Server-Timing, or None)"""
    t0 = time.perf_counter()
    conn.request("POST", path, body, headers)
    resp = conn.getresponse()
    resp_data = resp.read()
    took = 1e3 * (time.perf_counter() - t0)
    if resp.status != 200:
        sys.exit(f"serve_seq_client: {path} answered {resp.status}: {resp_data[:200]!r}")
    timing = dict(part.strip().split(";dur=") for part in (resp.getheader("Server-Timing") or "").split(",")
                  if ";dur=" in part)
    if "forward" not in timing or "total" not in timing:
        return took, None, None
    return took, float(timing["forward"]), float(timing["total"])


def pct(values, p):   # nearest rank, as bench_infer's percentiles
    v = sorted(values)
    return round(v[min(len(v) - 1, max(0, math.ceil(p / 100 * len(v)) - 1))], 3)


for b in bodies[:warmup]:
    send(b)
runs = [send(b) for b in bodies]
ms = [t for t, _, _ in runs]
out = {"requests": len(ms), "mean_ms": round(sum(ms) / len(ms), 3), "p50_ms": pct(ms, 50), "p90_ms": pct(ms, 90),
       "p99_ms": pct(ms, 99), "max_ms": round(max(ms), 3)}
if all(f is not None for _, f, _ in runs):
    out["forward_p50_ms"] = pct([f for _, f, _ in runs], 50)
    out["added_p50_ms"] = pct([t - f for t, f, _ in runs], 50)   # latency less its own forward, request by request
    out["added_p90_ms"] = pct([t - f for t, f, _ in runs], 90)
    out["server_added_p50_ms"] = pct([a - f for _, f, a in runs], 50)   # inside the server: parse, queue, JSON
    out["outside_p50_ms"] = pct([t - a for t, _, a in runs], 50)   # TCP, libmicrohttpd's I/O, this client
print(json.dumps(out))
