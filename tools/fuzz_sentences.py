#!/usr/bin/env python3
"""Differential fuzzing of `bert sentences` against nltk.sent_tokenize: random documents
built from tricky pieces (abbreviations, initials, numbers, quotes, brackets, ellipses,
Unicode spaces and digits, ?! runs), compared document by document.

  NLTK_DATA=/tmp/nltk_data .venv/bin/python tools/fuzz_sentences.py [--docs 3000] [--seed 1]
"""
import argparse
import random
import subprocess
import tempfile

import nltk

PIECES = ["Mr.", "Dr.", "St.", "U.S.", "e.g.", "etc.", "J.", "R.", "Tolkien", "said", "the", "The",
          "He", "she", "It", "3.14", "5.", "1,000.", "-2.5", "No.", "vol.", "p.m.", "A.", "i.",
          "...", ". . .", "..", "?", "!", "?!", "!!", ".", ",", ";", ":", "--", "-", "\"", "'",
          "(", ")", "[", "]", "{", "}", "\u201c", "\u201d", "\u2018", "\u2019", "\u00ab", "\u00bb",
          "\u00b2.", "\u00bd", "caf\u00e9.", "\u0663.", "ABC.", "x.y.", "Inc.", "Co.", "Jan.",
          "word", "Word", "WORD", "and", "but", "However", "when", "I", "a", "b.", "c", "@", "#", "*", "&",
          "`", "_", "\u200c", "\u00e9t\u00e9", "\u4e2d\u6587\u3002", "http://x.com/a.b", "ok.\"", ".)", "!\""]
SPACES = [" "] * 20 + ["  ", "\t", "\u00a0", "\u2009", "\u3000", "\u2028", "\x1c", "\x0b", ""]


def make_doc(rng):
    n = rng.randint(1, 40)
    return "".join(rng.choice(PIECES) + rng.choice(SPACES) for _ in range(n)).strip() or "x"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bert", default="./bert")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    docs = [make_doc(rng).replace("\n", " ") for _ in range(a.docs)]
    docs = [d for d in docs if d.strip()]
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        for d in docs:
            f.write(d + "\n")
        path = f.name
    out = subprocess.run([a.bert, "sentences", path], capture_output=True, check=True).stdout.decode("utf-8")
    ours = out.split("\n\n")[:-1]
    bad = 0
    for d, o in zip(docs, ours):
        want = nltk.tokenize.sent_tokenize(d.rstrip())
        got = o.split("\n")
        if want != got:
            bad += 1
            if bad <= 5:
                print("DIFF %r\n  nltk: %r\n  ours: %r" % (d, want, got))
    print("%d documents, %d differ (documents with internal line breaks are not generated)" % (len(docs), bad))


if __name__ == "__main__":
    main()
