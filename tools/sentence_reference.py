#!/usr/bin/env python3
"""Reference sentence splitting: NLTK's nltk.sent_tokenize (English punkt), applied to a
one-document-per-line file the way NVIDIA's TextSharding.py applies it (blank lines
skipped, each document rstripped), written in the shard layout (one sentence per line, a
blank line after each document) -- the expected output of `bert sentences`.

The punkt model comes from tools/make_punkt_model.py --nltk-dir (no network needed):
  .venv/bin/python tools/make_punkt_model.py --nltk-dir /tmp/nltk_data
  NLTK_DATA=/tmp/nltk_data .venv/bin/python tools/sentence_reference.py IN OUT
"""
import sys

import nltk


def main(inp, out):
    with open(inp, encoding="utf-8", errors="replace", newline="\n") as f, \
         open(out, "w", encoding="utf-8", newline="\n") as o:
        for line in f:
            if not line.strip():
                continue
            for sentence in nltk.tokenize.sent_tokenize(line.rstrip()):
                o.write(sentence + "\n")
            o.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
