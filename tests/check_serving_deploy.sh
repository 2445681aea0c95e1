#!/usr/bin/env bash
# docs/serving.md's deployment sections, run as written rather than only read:
#   nginx    its reverse-proxy block (ports, upstream and certificate swapped for loopback ones
#            and a self-signed pair made here) in front of `bert serve`; queried through it:
#            /health, an embedding equal byte for byte to the server's own answer, the API key's
#            401 and 200, nginx's 413 over client_max_body_size, 24 requests at once
#   systemd  `systemd-analyze verify` on its unit (binary and model swapped for this checkout's),
#            then the unit's ExecStart command line serving
#   PID 1    `bert serve --host 0.0.0.0` as PID 1 of its own PID namespace (as a container
#            runtime starts an exec-form entry point), SIGTERM from outside: drains, exits 0
# Each part skips, saying so, where its tool (nginx, openssl, systemd-analyze, unshare) is
# missing or not permitted. Not part of `make test` (it needs those tools); run by hand:
#   tests/check_serving_deploy.sh              (after make; MODEL=dir, default tests/data/embed)
set -euo pipefail
cd "$(dirname "$0")/.."
BERT=$(pwd)/bert
MODEL=$(cd "${MODEL:-tests/data/embed}" && pwd)
DOC=docs/serving.md
[ -x "$BERT" ] || { echo "check_serving_deploy: build first (make)" >&2; exit 1; }
work=$(mktemp -d /tmp/bert_deploy_check.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
pass() { echo "  ok   $1"; }
fail() { echo "  FAIL $1" >&2; failures=$((failures + 1)); }
skip() { echo "  skip $1"; }
check() { if eval "$2"; then pass "$1"; else fail "$1"; fi; }

# the fenced block of docs/serving.md that opens with ```LANG (the first one)
doc_block() { awk -v lang="$1" '$0 == "```" lang {on = 1; next} on && $0 == "```" {exit} on {print}' "$DOC"; }
# s/FROM/TO/ on a block, failing when FROM is not there (the docs changed: update this script)
swap() {
  local text=$1 from=$2 to=$3
  case $text in *"$from"*) printf '%s\n' "${text//"$from"/"$to"}" ;; *) echo "check_serving_deploy: '$from' is no longer in $DOC's block" >&2; exit 1 ;; esac
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# bert serve with flags on a free port, its log in $work/NAME.log: sets $server_pid, $server_port
start_bert() {
  local name=$1; shift
  "$@" 2> "$work/$name.log" &
  server_pid=$!; pids+=("$server_pid")
  for _ in $(seq 300); do
    server_port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$work/$name.log")
    [ -n "$server_port" ] && return 0
    kill -0 "$server_pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "check_serving_deploy: $name did not start:" >&2; cat "$work/$name.log" >&2; return 1
}
# SIGTERM to the server; its exit status in $stopped (in this shell: only it can wait for its child)
stop_server() { kill -TERM "$1"; stopped=0; wait "$1" || stopped=$?; }

echo "nginx in front of bert serve ($DOC's block)"
if ! command -v nginx > /dev/null; then skip "no nginx here (Debian: apt-get install nginx-light)"
elif ! command -v openssl > /dev/null; then skip "no openssl to make the test certificate"
else
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout "$work/key.pem" \
    -out "$work/cert.pem" 2> /dev/null
  BERT_API_KEY=deploy-check-key start_bert proxied "$BERT" serve --init_checkpoint "$MODEL" --port 0 --threads 1
  upstream=$server_port nport=$(free_port)
  block=$(doc_block nginx)
  block=$(swap "$block" "listen 443 ssl;" "listen 127.0.0.1:$nport ssl;")
  block=$(swap "$block" "server 127.0.0.1:8080;" "server 127.0.0.1:$upstream;")
  block=$(swap "$block" "/etc/ssl/certs/embeddings.example.org.pem" "$work/cert.pem")
  block=$(swap "$block" "/etc/ssl/private/embeddings.example.org.key" "$work/key.pem")
  mkdir -p "$work/nginx/logs"
  cat > "$work/nginx/nginx.conf" <<EOF
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi; uwsgi_temp_path $work/nginx/uwsgi; scgi_temp_path $work/nginx/scgi;
$block
}
EOF
  if ! nginx -t -p "$work/nginx" -c "$work/nginx/nginx.conf" > "$work/nginx_t.log" 2>&1; then
    fail "nginx -t rejects the documented block:"; cat "$work/nginx_t.log" >&2
  else
    pass "nginx -t accepts the documented block"
    nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' 2> "$work/nginx_run.log" &
    pids+=($!)
    for _ in $(seq 100); do curl -sk "https://127.0.0.1:$nport/health" > /dev/null && break; sleep 0.1; done
    via="https://127.0.0.1:$nport" direct="http://127.0.0.1:$upstream" key="Authorization: Bearer deploy-check-key"
    body='{"input": ["a cat sat on the mat", "the dog barked"]}'
    check "/health through the proxy" '[ "$(curl -sk -o /dev/null -w "%{http_code}" "$via/health")" = 200 ]'
    curl -sk -H "$key" "$via/v1/embeddings" -d "$body" > "$work/via.json"
    curl -s -H "$key" "$direct/v1/embeddings" -d "$body" > "$work/direct.json"
    check "an embedding through the proxy equals the server's own answer, byte for byte" \
      'grep -q "\"embedding\"" "$work/via.json" && cmp -s "$work/via.json" "$work/direct.json"'
    check "no API key: the server's 401 passes through" \
      '[ "$(curl -sk -o "$work/401.json" -w "%{http_code}" "$via/v1/embeddings" -d "$body")" = 401 ] && grep -q authentication_error "$work/401.json"'
    head -c $((5 << 20)) /dev/zero | tr '\0' a > "$work/big.txt"
    check "a 5 MiB body: nginx's 413 (client_max_body_size 4m)" \
      '[ "$(curl -sk -o /dev/null -w "%{http_code}" -H "$key" "$via/v1/embeddings" --data-binary @"$work/big.txt")" = 413 ]'
    seq 24 | xargs -P 24 -I{} curl -sk -o /dev/null -w "%{http_code}\n" -H "$key" "$via/embed" \
      -d '{"inputs": "request {} through the proxy"}' > "$work/codes.txt"
    check "24 requests at once through the proxy: all 200" '[ "$(grep -c "^200$" "$work/codes.txt")" = 24 ]'
  fi
  stop_server "$server_pid"
  check "bert serve behind the proxy stops on SIGTERM with status 0" '[ "$stopped" = 0 ]'
fi

echo "the systemd unit ($DOC's block)"
unit=$(doc_block ini)
unit=$(swap "$unit" "/usr/local/bin/bert" "$BERT")
unit=$(swap "$unit" "--init_checkpoint /srv/models/minilm" "--init_checkpoint $MODEL")
unit=$(swap "$unit" "ReadOnlyPaths=/srv/models" "ReadOnlyPaths=$MODEL")
printf '%s\n' "$unit" | grep -v '^# /etc/systemd' > "$work/bert-serve.service"
if ! command -v systemd-analyze > /dev/null; then skip "no systemd-analyze here"
else
  # verify warns about what this container lacks (no running systemd); errors in the unit fail it
  # an unknown key or a value it cannot parse is only a warning there ("..., ignoring"): fail on those too
  if systemd-analyze verify "$work/bert-serve.service" > "$work/verify.log" 2>&1 &&
     ! grep -q "bert-serve.service" "$work/verify.log"; then
    pass "systemd-analyze verify accepts the unit"
  else
    fail "systemd-analyze verify:"; cat "$work/verify.log" >&2
  fi
fi
exec_start=$(sed -n 's/^ExecStart=//p' "$work/bert-serve.service")
read -r -a argv <<< "${exec_start/--port 8080/--port 0}"
start_bert unit "${argv[@]}"
check "the unit's command line serves" '[ "$(curl -s -o /dev/null -w "%{http_code}" -X POST "http://127.0.0.1:$server_port/embed" -d "{\"inputs\": \"hello\"}")" = 200 ]'
stop_server "$server_pid"
check "and stops on SIGTERM (systemctl stop) with status 0" '[ "$stopped" = 0 ]'

echo "bert serve as a container's PID 1"
if ! unshare --pid --fork --mount-proc true 2> /dev/null; then skip "unshare --pid is not permitted here"
else
  unshare --pid --fork --mount-proc sh -c 'echo "pid $$" >&2; exec "$0" "$@"' "$BERT" serve --init_checkpoint "$MODEL" \
    --host 0.0.0.0 --port 0 --threads 1 2> "$work/pid1.log" &
  outer=$!; pids+=("$outer")
  port=""
  for _ in $(seq 300); do
    port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$work/pid1.log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  check "it runs as PID 1 and serves on 0.0.0.0" \
    'grep -q "^pid 1$" "$work/pid1.log" && [ -n "$port" ] && [ "$(curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$port/health")" = 200 ]'
  inner=$(pgrep -P "$outer" | head -1)   # PID 1 inside, as the host sees it (unshare forked it)
  kill -TERM "$inner"
  st=0; wait "$outer" || st=$?
  check "SIGTERM from outside to PID 1: drains and exits 0" '[ "$st" = 0 ] && grep -q "SIGTERM: finishing" "$work/pid1.log" && grep -q "stopped" "$work/pid1.log"'
fi

[ "$failures" = 0 ] && echo "check_serving_deploy: all passed" || { echo "check_serving_deploy: $failures failed" >&2; exit 1; }
