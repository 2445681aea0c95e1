"""Makes the vocabulary-training fixtures in tests/data/tokenizer/ with the plain Python
reimplementation (tools/wordpiece_train_reference.py, words from Google's reference
BasicTokenizer):
  vocab_corpus.txt           the first ~60 KB of Alice's Adventures in Wonderland
                             (Project Gutenberg #11, public domain) plus the valid-UTF-8
                             texts of cases.tsv three times (accents, CJK, Greek, ...)
  vocab_uncased_1500.txt     vocab_size 1500, 110 unused, uncased, defaults otherwise
  vocab_cased_minfreq.txt    vocab_size 5000, 5 unused, cased, min_frequency 3,
                             limit_alphabet 60: stops early, at min_frequency

  python3 tools/make_vocab_fixtures.py   (run tools/make_tokenizer_fixtures.py first)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wordpiece_train_reference as ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests/data/tokenizer")
ALICE = os.path.join(ROOT, "../shared/data/gutenberg/pg11_alice_in_wonderland.txt")


def main():
    with open(ALICE, "rb") as f:
        alice = f.read(60000)
    alice = alice[: alice.rfind(b"\n") + 1]
    extra = []
    with open(os.path.join(DATA, "cases.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.startswith("uncased"):
                continue
            raw = bytes.fromhex(line.split("\t")[4])
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if "\n" not in text:
                extra.append(text.encode("utf-8"))
    corpus = alice + (b"\n".join(extra) + b"\n") * 3
    path = os.path.join(DATA, "vocab_corpus.txt")
    with open(path, "wb") as f:
        f.write(corpus)
    runs = [("vocab_uncased_1500.txt", True, dict(vocab_size=1500, num_unused=110, min_frequency=2, limit_alphabet=1000)),
            ("vocab_cased_minfreq.txt", False, dict(vocab_size=5000, num_unused=5, min_frequency=3, limit_alphabet=60))]
    for name, lower, kw in runs:
        vocab = ref.train(ref.count_words(path, lower, 100), **kw)
        with open(os.path.join(DATA, name), "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in vocab))
        print(f"{name}: {len(vocab)} tokens")


if __name__ == "__main__":
    main()
