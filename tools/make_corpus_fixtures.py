#!/usr/bin/env python3
"""Builds the committed fixtures of tests/test_sentences.c and tests/test_shard.c from the
real data in ../shared/data, with the references run offline:

  sentences_input.txt      one document per line: SQuAD v1.1 dev contexts (Wikipedia),
                           WikiText-2 lines, Gutenberg excerpts, tests/data/corpus/sentence_cases.txt
  sentences_expected.txt   nltk.sent_tokenize of each document (tools/sentence_reference.py)
  shard_input_{a,b}.txt    the same documents in two files
  shard_expected/<cfg>/    NVIDIA's TextSharding.py on them (tools/shard_reference.py)
  books/*.txt              three Gutenberg excerpts kept with their licence header and
                           footer lines, CRLF line ends and (one) a UTF-8 BOM
  books_expected_nvidia.txt  NVIDIA's BookscorpusTextFormatting.py on books/ (imported from
                           a local mirror of DeepLearningExamples; files taken in sorted order)

Usage (from the repository root):
  .venv/bin/python tools/make_punkt_model.py --nltk-dir /tmp/nltk_data
  NLTK_DATA=/tmp/nltk_data .venv/bin/python tools/make_corpus_fixtures.py
"""
import json
import os
import shutil
import subprocess
import sys

DATA = os.environ.get("BERT_SHARED_DATA", "../shared/data")
OUT = "tests/data/corpus"
# (name, n_training_shards, n_test_shards, fraction_test_set)
SHARD_CONFIGS = [("t4_e2_f0.1", 4, 2, 0.1), ("t16_e5_f0.3", 16, 5, 0.3)]


def documents():
    docs = []
    squad = json.load(open(os.path.join(DATA, "squad/v1.1/dev-v1.1.json"), encoding="utf-8"))
    contexts = [p["context"] for a in squad["data"] for p in a["paragraphs"]]
    docs += [c.replace("\n", " ") for c in contexts[::14]]  # ~150 paragraphs, all articles
    with open(os.path.join(DATA, "wikitext-2-raw/wiki.valid.raw"), encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    docs += lines[:400:4]
    for book in ["pg11_alice_in_wonderland.txt", "pg1342_pride_and_prejudice.txt",
                 "pg2701_moby_dick.txt", "pg972_devils_dictionary.txt"]:
        with open(os.path.join(DATA, "gutenberg", book), encoding="utf-8-sig", newline="\n") as f:
            text = f.read()
        start = len(text) // 3  # from the middle of the book, 12 KB joined as NVIDIA joins lines
        docs.append(" ".join(l.strip() for l in text[start:start + 12000].split("\n") if l.strip()))
    with open(os.path.join(OUT, "sentence_cases.txt"), encoding="utf-8") as f:
        docs += [l.rstrip("\n") for l in f if l.strip()]
    return docs


def make_books(mirror):
    folder = os.path.join(OUT, "books")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for name, bom in [("pg11_alice_in_wonderland.txt", False), ("pg5200_metamorphosis.txt", True),
                      ("pg972_devils_dictionary.txt", False)]:
        raw = open(os.path.join(DATA, "gutenberg", name), "rb").read()
        lines = raw.split(b"\r\n")
        start = next(i for i, l in enumerate(lines) if l.startswith(b"*** START OF"))
        end = next(i for i, l in enumerate(lines) if l.startswith(b"*** END OF"))
        keep = lines[:start + 120] + lines[end - 10:end + 25]  # header, some text, footer
        body = b"\r\n".join(keep) + b"\r\n"
        if bom and not body.startswith(b"\xef\xbb\xbf"):
            body = b"\xef\xbb\xbf" + body
        with open(os.path.join(folder, name), "wb") as f:
            f.write(body)
    code = subprocess.run(["git", "--git-dir", mirror, "show",
                           "HEAD:PyTorch/LanguageModeling/BERT/data/BookscorpusTextFormatting.py"],
                          check=True, capture_output=True, text=True).stdout
    import glob
    import importlib.util
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        mod = os.path.join(tmp, "BookscorpusTextFormatting.py")
        open(mod, "w").write(code)
        spec = importlib.util.spec_from_file_location("BookscorpusTextFormatting", mod)
        bf = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bf)
        real_glob = glob.glob
        bf.glob.glob = lambda *args, **kw: sorted(real_glob(*args, **kw))  # a stable order
        bf.BookscorpusTextFormatting(folder, os.path.join(OUT, "books_expected_nvidia.txt"), recursive=True).merge()
        bf.glob.glob = real_glob


def main():
    make_books(os.environ.get("NVIDIA_MIRROR", "/work/.mirror/NVIDIA+DeepLearningExamples/repo"))
    docs = documents()
    with open(os.path.join(OUT, "sentences_input.txt"), "w", encoding="utf-8", newline="\n") as f:
        for d in docs:
            f.write(d + "\n")
    run = lambda *args: subprocess.run([sys.executable, *args], check=True)
    run("tools/sentence_reference.py", os.path.join(OUT, "sentences_input.txt"),
        os.path.join(OUT, "sentences_expected.txt"))
    half = len(docs) // 2
    for name, part in (("a", docs[:half]), ("b", docs[half:])):
        with open(os.path.join(OUT, "shard_input_%s.txt" % name), "w", encoding="utf-8", newline="\n") as f:
            for d in part:
                f.write(d + "\n\n")  # NVIDIA's formatters leave a blank line after each document
    shutil.rmtree(os.path.join(OUT, "shard_expected"), ignore_errors=True)
    for name, nt, ne, frac in SHARD_CONFIGS:
        run("tools/shard_reference.py",
            "--input_files", ",".join(os.path.join(OUT, "shard_input_%s.txt" % p) for p in "ab"),
            "--output_dir", os.path.join(OUT, "shard_expected", name), "--output_name_prefix", "corpus",
            "--n_training_shards", str(nt), "--n_test_shards", str(ne), "--fraction_test_set", str(frac))
    print("%d documents" % len(docs))


if __name__ == "__main__":
    main()
