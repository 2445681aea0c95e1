"""WordPiece vocabulary learning: `bert vocab` next to HuggingFace's WordPieceTrainer, and
both next to bert-base-uncased's released vocabulary, on held-out text.

Train: 12 of the 14 Gutenberg books in ../shared/data/gutenberg (uncased).
Held out: Moby Dick (pg2701) and Frankenstein (pg84), never seen in training.
For each vocabulary, `bert tokenize` tokenizes the held-out books; reported: tokens per
word (BasicTokenizer words), the share of words that become [UNK], and training time.

  .venv/bin/python bench/bench_vocab.py [--vocab_sizes 30522,8000]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOKS = os.path.join(ROOT, "../shared/data/gutenberg")
HELD_OUT = ["pg2701_moby_dick.txt", "pg84_frankenstein.txt"]
BERT = os.path.join(ROOT, "bert")


def tokenize_counts(vocab, text_path, basic=False):
    args = [BERT, "tokenize"] + (["--basic"] if basic else ["--vocab_file", vocab])
    with open(text_path, "rb") as f:
        out = subprocess.run(args, stdin=f, capture_output=True, check=True).stdout.decode()
    tokens = out.split()
    return len(tokens), sum(t == "[UNK]" for t in tokens)


def train_bert(files, size, out):
    t0 = time.perf_counter()
    num_unused = 994 if size >= 20000 else 100
    subprocess.run([BERT, "vocab", "--input_file", ",".join(files), f"--vocab_size={size}",
                    f"--num_unused={num_unused}", "-o", out], check=True, capture_output=True)
    return time.perf_counter() - t0, num_unused


def train_hf(files, size, num_unused, out_dir):
    from tokenizers import BertWordPieceTokenizer
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(min(99, num_unused))] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    specials += [f"[unused{i}]" for i in range(99, num_unused)]
    tok = BertWordPieceTokenizer(lowercase=True, strip_accents=True)
    t0 = time.perf_counter()
    tok.train(files, vocab_size=size, min_frequency=2, limit_alphabet=1000, special_tokens=specials,
              show_progress=False)
    dt = time.perf_counter() - t0
    tok.save_model(out_dir)
    return dt, os.path.join(out_dir, "vocab.txt")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab_sizes", default="30522,8000")
    args = ap.parse_args()
    train = sorted(os.path.join(BOOKS, f) for f in os.listdir(BOOKS) if f not in HELD_OUT)
    tmp = tempfile.mkdtemp(prefix="bench_vocab_")
    held = os.path.join(tmp, "held_out.txt")
    with open(held, "wb") as out:
        for f in HELD_OUT:
            with open(os.path.join(BOOKS, f), "rb") as src:
                out.write(src.read())
    words, _ = tokenize_counts(None, held, basic=True)
    mb = sum(os.path.getsize(f) for f in train) / 1e6
    print(f"train: {len(train)} books, {mb:.1f} MB; held out: {', '.join(HELD_OUT)} ({words} words)\n")
    print("| vocabulary | size | training time | held-out tokens/word | held-out [UNK] per word |")
    print("|---|---:|---:|---:|---:|")
    released = os.path.join(ROOT, "data/vocab/bert-base-uncased-vocab.txt")
    rows = [("bert-base-uncased (released; Wikipedia + BooksCorpus)", released, 30522, None)]
    for size in map(int, args.vocab_sizes.split(",")):
        ours = os.path.join(tmp, f"bert_{size}.txt")
        dt, num_unused = train_bert(train, size, ours)
        rows.append((f"`bert vocab` on the 12 books ({num_unused} unused)", ours, size, dt))
        hf_dir = os.path.join(tmp, f"hf_{size}")
        os.makedirs(hf_dir)
        dt_hf, hf_vocab = train_hf(train, size, num_unused, hf_dir)
        rows.append((f"HF WordPieceTrainer on the 12 books ({num_unused} unused)", hf_vocab, size, dt_hf))
    for name, vocab, size, dt in rows:
        n_vocab = sum(1 for _ in open(vocab, encoding="utf-8"))
        tokens, unk = tokenize_counts(vocab, held)
        print(f"| {name} | {n_vocab} | {f'{dt:.1f} s' if dt is not None else '-'} | {tokens / words:.3f} | "
              f"{100 * unk / words:.3f}% |")
    print()
    for (_, ours, size, _), (_, hf, _, _) in zip(rows[1::2], rows[2::2]):
        a, b = (set(open(v, encoding="utf-8").read().split("\n")) - {""} for v in (ours, hf))
        print(f"vocab_size {size}: {len(a & b)} tokens in both, {len(a - b)} only in bert.c's, {len(b - a)} only in HF's")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
