#!/bin/bash
# bert serve on a device answering OpenAI's /v1/embeddings: the file's non-empty lines split over
# 4 requests sent at once (the dynamic batcher's forwards then mix requests), the vectors written in the texts'
# order to OUT as a JSON list of lists. tests/cuda/emu/commands.sh (the emulated GPU) and
# scripts/gpu_check.sh compare (the device) hold --device cuda's answers to --device cpu's by it.
# Usage: serve_embed.sh BERT MODEL_DIR DEVICE TEXTS OUT; exit 1 (the server's log printed) if the
# server does not start or a request fails.
set -u
bert=$1 model=$2 device=$3 texts=$4 out=$5
grep -q . "$texts" || { echo "serve_embed: $texts has no text"; exit 1; }
log=$(mktemp /tmp/serve_embed.XXXXXX)
"$bert" serve --init_checkpoint "$model" --port 0 --device "$device" > "$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 600); do   # up to 2 minutes for the model to load (the emulator is slow)
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.2
done
rc=1
if [ -n "$port" ]; then
  python3 - "$port" "$texts" "$out" <<'PY' && rc=0
import json, sys, threading, urllib.request

port, texts, out = sys.argv[1], [l.rstrip("\n") for l in open(sys.argv[2]) if l.strip()], sys.argv[3]
size = (len(texts) + 3) // 4
chunks = [texts[i:i + size] for i in range(0, len(texts), size)]
answers = [None] * len(chunks)

def ask(k):
    body = json.dumps({"input": chunks[k], "model": "any"}).encode()
    req = urllib.request.Request("http://127.0.0.1:%s/v1/embeddings" % port, body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        data = json.load(r)["data"]
    answers[k] = [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]

threads = [threading.Thread(target=ask, args=(k,)) for k in range(len(chunks))]
for t in threads: t.start()
for t in threads: t.join()
if any(a is None or len(a) != len(c) for a, c in zip(answers, chunks)):
    sys.exit("serve_embed: a request failed or came back short")
json.dump([v for a in answers for v in a], open(out, "w"))
PY
fi
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ $rc -eq 0 ] || { echo "serve_embed: bert serve --device $device failed; its log:"; cat "$log"; }
exit $rc
