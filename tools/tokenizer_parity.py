"""Parity run: `bert tokenize --ids` against Google's reference FullTokenizer on real text.

Each input file is split into lines (SQuAD JSON: every context, question and answer
text, one per line); each line is tokenized by the reference (Python) and by ./bert,
for both casings (bert-base-uncased / bert-base-cased vocabularies, words longer than
100 characters -> [UNK]); every line's ids must be equal.

  python3 tools/tokenizer_parity.py [--bert ./bert] FILE...
  .venv/bin/python tools/tokenizer_parity.py --offsets FILE...
      also compares `bert tokenize --offsets` byte spans with HuggingFace `tokenizers`'
      offsets (converted to bytes) on every line where HF's tokens equal the reference's
  # the documented run (bench/RESULTS.md):
  python3 tools/tokenizer_parity.py ../shared/data/squad/v1.1/dev-v1.1.json \
      ../shared/data/wikitext-2-raw/wiki.valid.raw ../shared/data/gutenberg/*.txt \
      ../shared/data/glue/*/dev.tsv ../shared/data/glue/*/train.tsv \
      <(bzip2 -dc ../shared/data/wikipedia/*.bz2)
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_reference_tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCABS = {"uncased": "data/vocab/bert-base-uncased-vocab.txt", "cased": "data/vocab/bert-base-cased-vocab.txt"}


def lines_of(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".json"):
        doc = json.loads(data)
        out = []
        for article in doc["data"]:
            for para in article["paragraphs"]:
                out.append(para["context"])
                for qa in para["qas"]:
                    out.append(qa["question"])
                    out.extend(a["text"] for a in qa.get("answers", []))
        return [s.replace("\n", " ").encode("utf-8") for s in out]
    return data.split(b"\n")


def byte_offsets(line, char_spans):
    """HF character spans of a (valid UTF-8) line -> byte spans."""
    text = line.decode("utf-8", "replace")
    starts = [0]
    for ch in text:
        starts.append(starts[-1] + len(ch.encode("utf-8")))
    return [f"{starts[a]}:{starts[b]}" for a, b in char_spans]


def compare_offsets(args, vocab, casing, data, lines, want_ids):
    """Lines where HF's tokens equal the reference's: byte spans must be equal."""
    from tokenizers import BertWordPieceTokenizer
    lower = casing == "uncased"
    hf = BertWordPieceTokenizer(vocab, lowercase=lower, strip_accents=lower)
    out = subprocess.run([args.bert, "tokenize", "--vocab_file", vocab, "--ids", "--offsets",
                          f"--do_lower_case={'true' if lower else 'false'}",
                          f"--max_input_chars_per_word={args.max_chars}"],
                         input=data, stdout=subprocess.PIPE, check=True).stdout.decode().split("\n")
    compared = skipped = bad = 0
    encodings = hf.encode_batch([b.decode("utf-8", "replace") for b in lines], add_special_tokens=False)
    for i, (line, enc) in enumerate(zip(lines, encodings)):
        if enc.ids != want_ids[i] or b"\xef\xbf\xbd" in line or "\ufffd" in line.decode("utf-8", "replace"):
            skipped += 1  # HF disagrees on the tokens, or bytes were replaced: spans not comparable
            continue
        ours = [t.rsplit("@", 1)[1] for t in out[i].split()]
        compared += 1
        if ours != byte_offsets(line, enc.offsets):
            bad += 1
            if bad <= 3:
                print(f"  offsets differ, line {i}: {line[:120]!r}\n    bert {ours[:12]}\n"
                      f"    hf   {byte_offsets(line, enc.offsets)[:12]}")
    print(f"{casing} offsets: {compared} lines compared with HF, {bad} differ ({skipped} skipped: HF tokens differ)")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bert", default=os.path.join(ROOT, "bert"))
    ap.add_argument("--max_chars", type=int, default=100)
    ap.add_argument("--offsets", action="store_true", help="compare byte offsets with HF tokenizers")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    lines = []
    for path in args.files:
        got = lines_of(path)
        print(f"{path}: {len(got)} lines, {sum(map(len, got))} bytes")
        lines.extend(got)
    data = b"\n".join(lines) + b"\n"
    print(f"total: {len(lines)} lines, {len(data) / 1e6:.1f} MB")
    failed = 0
    for casing, vocab in VOCABS.items():
        vocab = os.path.join(ROOT, vocab)
        t0 = time.time()
        ref = bert_reference_tokenizer.full_tokenizer(vocab, casing == "uncased", args.max_chars)
        want = [ref.convert_tokens_to_ids(ref.tokenize(b.decode("utf-8", "replace"))) for b in lines]
        t_ref = time.time() - t0
        t0 = time.time()
        out = subprocess.run([args.bert, "tokenize", "--vocab_file", vocab, "--ids",
                              f"--do_lower_case={'true' if casing == 'uncased' else 'false'}",
                              f"--max_input_chars_per_word={args.max_chars}"],
                             input=data, stdout=subprocess.PIPE, check=True).stdout
        t_c = time.time() - t0
        got = out.decode().split("\n")[:-1]
        diffs = [i for i, (g, w) in enumerate(zip(got, want)) if g != " ".join(map(str, w))]
        if len(got) != len(want):
            diffs.append(-1)
        tokens = sum(map(len, want))
        print(f"{casing}: {len(lines)} lines, {tokens} tokens, {len(diffs)} lines differ "
              f"(reference {t_ref:.1f} s, bert {t_c:.2f} s)")
        for i in diffs[:5]:
            print(f"  line {i}: {lines[i][:200]!r}\n    bert {got[i][:200] if i >= 0 else len(got)}\n"
                  f"    ref  {' '.join(map(str, want[i]))[:200] if i >= 0 else len(want)}")
        failed += len(diffs)
        if args.offsets:
            failed += compare_offsets(args, vocab, casing, data, lines, want)
    print("PARITY OK: zero differences" if failed == 0 else f"PARITY FAILED: {failed} differing lines")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
