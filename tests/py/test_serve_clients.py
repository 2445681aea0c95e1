"""bert serve with the clients users already have: the `openai` Python client (the
embeddings API, as LangChain's OpenAIEmbeddings calls it, base64 and float) and `requests`
(text-embeddings-inference's /embed, /health, /metrics, errors). The vectors must be
`bert embed`'s on the same texts, float32 for float32; errors must reach the client as its
own exception types with the server's message.

The suite runs tests/py with /usr/bin/python3, which has neither client: this script then
runs itself again with the tools venv's python ($BERT_CLIENTS_PYTHON, else .venv/bin/python
of the repository) when that one has both, and is skipped with a message otherwise.
Needs ./bert (or $BERT_BIN) and tests/data/embed."""
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(ROOT, "tests", "data", "embed")


def have_clients():
    try:
        import numpy  # noqa: F401
        import openai  # noqa: F401
        import requests  # noqa: F401
        return True
    except ImportError:
        return False


def reexec_or_skip():
    venv = os.environ.get("BERT_CLIENTS_PYTHON") or os.path.join(ROOT, ".venv", "bin", "python")
    probe = "import numpy, openai, requests"
    if os.path.exists(venv) and not os.environ.get("BERT_CLIENTS_REEXEC") and \
            subprocess.run([venv, "-c", probe], capture_output=True).returncode == 0:
        os.environ["BERT_CLIENTS_REEXEC"] = "1"   # once: a venv python is often a link to this one
        os.execv(venv, [venv, __file__] + sys.argv[1:])
    print(f"  skip test_serve_clients: no python with openai and requests ({venv}: pip install openai requests)")
    print("0 passed, 0 failed")   # the summary line tests/run.sh reads: skipped, not failed
    sys.exit(0)


passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print(f"  ok   {what}")
    else:
        failed += 1
        print(f"  FAIL {what}")


def start_server(bert, log_path, *extra):
    log = open(log_path, "w")
    proc = subprocess.Popen([bert, "serve", "--init_checkpoint", MODEL, "--port", "0", "--threads", "1", *extra],
                            stderr=log, stdout=subprocess.DEVNULL)
    marker = "listening on http://127.0.0.1:"
    for _ in range(3000):
        text = open(log_path).read()
        if marker in text:
            return proc, int(text.split(marker)[1].split()[0].rstrip(")"))
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError("bert serve did not start: " + open(log_path).read())


def embed_reference(bert, texts, tmp):
    """bert embed's vectors of texts (float32), read from its .npy."""
    import numpy as np
    src, npy = os.path.join(tmp, "texts.txt"), os.path.join(tmp, "ref.npy")
    with open(src, "w") as f:
        f.write("".join(t + "\n" for t in texts))
    with open(src) as stdin:
        subprocess.run([bert, "embed", "--init_checkpoint", MODEL, "--threads", "1", "--output", npy], stdin=stdin,
                       check=True, capture_output=True)
    return np.load(npy)


def test_openai(port, texts, ref):
    import numpy as np
    import openai
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused")
    for fmt in ("base64", "float"):   # the client asks for base64 unless told, and decodes it itself
        kw = {} if fmt == "base64" else {"encoding_format": "float"}
        r = client.embeddings.create(model="minilm", input=texts, **kw)
        got = np.array([d.embedding for d in r.data], dtype=np.float32)
        check([d.index for d in r.data] == list(range(len(texts))) and np.array_equal(got, ref),
              f"openai client ({fmt}): bert embed's vectors, bit for bit")
        check(r.model == "minilm" and r.usage.total_tokens > len(texts), f"openai client ({fmt}): model and usage")
    one = client.embeddings.create(model="m", input=texts[0])
    check(np.array_equal(np.array(one.data[0].embedding, dtype=np.float32), ref[0]), "openai client: one string")
    try:
        client.embeddings.create(model="m", input="")
        check(False, "openai client: an empty input raises BadRequestError")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "empty" in str(e), f"openai client: BadRequestError ({e.status_code})")


def test_requests(port, texts, ref):
    import numpy as np
    import requests
    base = f"http://127.0.0.1:{port}"
    r = requests.post(base + "/embed", json={"inputs": texts}, timeout=60)
    check(r.status_code == 200 and np.array_equal(np.array(r.json(), dtype=np.float32), ref),
          "requests: /embed is bert embed's vectors")
    check(requests.get(base + "/health", timeout=10).json() == {"status": "ok"}, "requests: /health")
    info = requests.get(base + "/info", timeout=10).json()
    check(info["task"] == "embed" and info["hidden_size"] == ref.shape[1], "requests: /info")
    r = requests.post(base + "/embed", data=b'{"inputs": [', headers={"Content-Type": "application/json"}, timeout=10)
    check(r.status_code == 400 and r.json()["error_type"] and r.json()["error"]["message"],
          "requests: malformed JSON is a 400 with a message")
    r = requests.post(base + "/embed", json={"inputs": ["a"] * 9}, timeout=10)
    check(r.status_code == 413, "requests: more texts than --max_client_batch_size is a 413")
    metrics = requests.get(base + "/metrics", timeout=10).text
    check('bert_serve_responses_total{code="400"} 2' in metrics and "bert_serve_tokens_total" in metrics,
          "requests: /metrics counts the answers")


def main():
    if not have_clients():
        reexec_or_skip()
    bert = os.environ.get("BERT_BIN", os.path.join(ROOT, "bert"))
    texts = [t for t in open(os.path.join(MODEL, "sentences.txt")).read().split("\n") if t][:8]
    with tempfile.TemporaryDirectory() as tmp:
        ref = embed_reference(bert, texts, tmp)
        proc, port = start_server(bert, os.path.join(tmp, "serve.log"), "--max_client_batch_size", "8")
        try:
            test_openai(port, texts, ref)
            test_requests(port, texts, ref)
        finally:
            proc.send_signal(signal.SIGTERM)
            check(proc.wait(timeout=60) == 0, "SIGTERM: the server exits 0")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
