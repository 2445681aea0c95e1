-- wrk's script for bench/run_serve_bench.sh: POSTs the request bodies of BODIES (a file, one
-- JSON body a line) to URL_PATH in turn, each connection from its own place in the list, and
-- prints one JSON line at the end: requests, throughput, latency percentiles (wrk measures
-- each request from its send to its answer), non-2xx answers and socket errors.
local bodies = {}
for line in io.lines(os.getenv("BODIES")) do bodies[#bodies + 1] = line end
local path = os.getenv("URL_PATH") or "/embed"
local headers = {["Content-Type"] = "application/json"}
local next_body = 0

function init(args)
  next_body = math.random(#bodies) - 1   -- threads (and so connections) start apart
end

function request()
  next_body = next_body % #bodies + 1
  return wrk.format("POST", path, headers, bodies[next_body])
end

function done(summary, latency, requests)
  local s = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format('{"requests": %d, "seconds": %.3f, "rps": %.2f, "mean_ms": %.3f, "p50_ms": %.3f, ' ..
    '"p90_ms": %.3f, "p99_ms": %.3f, "max_ms": %.3f, "non2xx": %d, "socket_errors": %d}\n',
    summary.requests, s, summary.requests / s, latency.mean / 1e3, latency:percentile(50) / 1e3,
    latency:percentile(90) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3, e.status,
    e.connect + e.read + e.write + e.timeout))
end
