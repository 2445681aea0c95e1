"""Tokenizer throughput on real text: bert.c next to HuggingFace `tokenizers` (Rust) and
Google's Python reference, in one run, on the same lines and vocabulary.

Corpus: SQuAD v1.1 dev (contexts, questions, answers), WikiText-2 valid and the 14
Gutenberg books of ../shared/data, one text per line (about 14 MB). MB/s is input bytes
per second of tokenization (ids and offsets produced; no output written), best of
--repeat runs; MB/CPU-s divides by the CPU time of all threads instead, which is what
to compare on a shared machine, where wall time also counts waiting for a core:
  bert.c        `bert tokenize --bench --threads N` (whole input in memory)
  bert.c CLI    `bert tokenize --ids < corpus > /dev/null`, end to end (read, write ids)
  HF tokenizers BertWordPieceTokenizer.encode_batch(lines, add_special_tokens=False),
                1 thread: RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false; all: default
  Google        tokenization.FullTokenizer.tokenize + convert_tokens_to_ids, 1 thread,
                on the first --reference_mb MB only (it is slow)

  .venv/bin/python bench/bench_tokenizer.py [--repeat 3] [--casing uncased]
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import bert_reference_tokenizer  # noqa: E402
from tokenizer_parity import lines_of  # noqa: E402

DATA = os.path.join(ROOT, "../shared/data")
VOCABS = {"uncased": "data/vocab/bert-base-uncased-vocab.txt", "cased": "data/vocab/bert-base-cased-vocab.txt"}

HF_SNIPPET = r"""
import sys, time
from tokenizers import BertWordPieceTokenizer
vocab, lower, path, repeat = sys.argv[1], sys.argv[2] == "1", sys.argv[3], int(sys.argv[4])
lines = open(path, "rb").read().decode("utf-8", "replace").split("\n")[:-1]
tok = BertWordPieceTokenizer(vocab, lowercase=lower, strip_accents=lower)
best, best_cpu, n = 1e30, 1e30, 0
for r in range(repeat + 1):
    t0, c0 = time.perf_counter(), time.process_time()
    enc = tok.encode_batch(lines, add_special_tokens=False)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    n = sum(len(e.ids) for e in enc)
    if r > 0: best, best_cpu = min(best, dt), min(best_cpu, dc)
print(best, best_cpu, n)
"""


def corpus_file():
    paths = [f"{DATA}/squad/v1.1/dev-v1.1.json", f"{DATA}/wikitext-2-raw/wiki.valid.raw"]
    paths += sorted(f"{DATA}/gutenberg/{f}" for f in os.listdir(f"{DATA}/gutenberg"))
    lines = [line for p in paths for line in lines_of(p)]
    data = b"\n".join(lines) + b"\n"
    f = tempfile.NamedTemporaryFile(prefix="bench_tok_", suffix=".txt", delete=False)
    f.write(data)
    f.close()
    return f.name, len(data), len(lines)


def bert_bench(bert, vocab, lower, path, threads, repeat):
    with open(path, "rb") as f:
        out = subprocess.run([bert, "tokenize", "--vocab_file", vocab, f"--do_lower_case={str(lower).lower()}", "--bench",
                              f"--threads={threads}", f"--repeat={repeat}"], stdin=f, capture_output=True, text=True,
                             check=True).stdout
    m = re.search(r"tokens=(\d+) seconds=([\d.]+) .*cpu_seconds=([\d.]+)", out)
    return float(m.group(2)), float(m.group(3)), int(m.group(1))


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bert_cli(bert, vocab, lower, path, threads, repeat):
    best, best_cpu = 1e30, 1e30
    for _ in range(repeat):
        with open(path, "rb") as f:
            t0, c0 = time.perf_counter(), children_cpu()
            subprocess.run([bert, "tokenize", "--vocab_file", vocab, f"--do_lower_case={str(lower).lower()}", "--ids",
                            f"--threads={threads}"], stdin=f, stdout=subprocess.DEVNULL, check=True)
            best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, children_cpu() - c0)
    return best, best_cpu, None


def hf(vocab, lower, path, threads, repeat):
    env = dict(os.environ)
    if threads == 1:
        env.update(RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    else:
        env.update(TOKENIZERS_PARALLELISM="true")
    out = subprocess.run([sys.executable, "-c", HF_SNIPPET, vocab, "1" if lower else "0", path, str(repeat)], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def google(vocab, lower, path, mb):
    with open(path, "rb") as f:
        data = f.read(int(mb * 1e6))
    data = data[: data.rfind(b"\n") + 1]
    lines = data.decode("utf-8", "replace").split("\n")[:-1]
    tok = bert_reference_tokenizer.full_tokenizer(vocab, lower, 100)
    t0, c0 = time.perf_counter(), time.process_time()
    n = sum(len(tok.convert_tokens_to_ids(tok.tokenize(line))) for line in lines)
    return time.perf_counter() - t0, time.process_time() - c0, n, len(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--casing", choices=["uncased", "cased"], default="uncased")
    ap.add_argument("--reference_mb", type=float, default=2.0)
    ap.add_argument("--bert", default=os.path.join(ROOT, "bert"))
    args = ap.parse_args()
    vocab, lower = os.path.join(ROOT, VOCABS[args.casing]), args.casing == "uncased"
    path, nbytes, nlines = corpus_file()
    cores = os.cpu_count()
    print(f"corpus: {nlines} lines, {nbytes / 1e6:.1f} MB ({args.casing}); {cores} cores; best of {args.repeat}")
    rows = []
    try:
        for threads in (1, cores):
            s, c, n = bert_bench(args.bert, vocab, lower, path, threads, args.repeat)
            rows.append(("bert.c library (`--bench`)", threads, nbytes / s / 1e6, nbytes / c / 1e6, n))
            s, c, n = hf(vocab, lower, path, threads, args.repeat)
            rows.append(("HF tokenizers 0.x Rust (`encode_batch`)", threads, nbytes / s / 1e6, nbytes / c / 1e6, n))
            s, c, _ = bert_cli(args.bert, vocab, lower, path, threads, args.repeat)
            rows.append(("bert.c CLI end to end (`--ids`, file -> /dev/null)", threads, nbytes / s / 1e6,
                         nbytes / c / 1e6, None))
        s, c, n, used = google(vocab, lower, path, args.reference_mb)
        rows.append((f"Google tokenization.py (first {used / 1e6:.1f} MB)", 1, used / s / 1e6, used / c / 1e6, n))
    finally:
        os.unlink(path)
    import tokenizers
    print(f"\n| tokenizer | threads | MB/s (wall) | MB/CPU-s | tokens |\n|---|---:|---:|---:|---:|")
    for name, threads, mbs, mbc, n in rows:
        name = name.replace("0.x", tokenizers.__version__)
        print(f"| {name} | {threads} | {mbs:.1f} | {mbc:.1f} | {n if n is not None else ''} |")
    hf_rows = {r[1]: r for r in rows if r[0].startswith("HF")}
    for name, t, mbs, mbc, _ in rows:
        if name.startswith("bert.c library"):
            print(f"\nbert.c / HF tokenizers, {t} thread(s): {mbs / hf_rows[t][2]:.1f}x wall, "
                  f"{mbc / hf_rows[t][3]:.1f}x per CPU-second")


if __name__ == "__main__":
    main()
