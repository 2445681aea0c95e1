"""Generates the committed fixtures in tests/data/pretraining/ for bert.c's
create_pretraining_data (tests/test_pyrandom.c, tests/test_pretraining.c,
tests/py/test_shards_h5py.py).

  /usr/bin/python3 tools/make_pretraining_fixtures.py [--mirror DIR] [--shared DIR]

Outputs (all plain text, small):
  pyrandom_streams.txt     raw CPython 3.11 `random` streams for several seeds
  docs_a.txt, docs_b1.txt, docs_b2.txt, tiny.txt   input corpora (one sentence per
                           line, blank line between documents) with edge cases
  <config>.expected.txt    the reference's instances for one set of flags
  <input>.ids       the reference tokenizer's ids for each input file, one
                           line per input line (lets the algorithm be tested apart
                           from the tokenizer)

The reference is Google's create_pretraining_data.py run offline from a mirror of
github:google-research/bert (see tools/pretraining_reference.py).
"""
import argparse
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretraining_reference import DEFAULT_MIRROR, Reference  # noqa: E402

OUT = "tests/data/pretraining"
VOCAB = "data/vocab/bert-base-uncased-vocab.txt"


def write_pyrandom_streams(path):
    """One block per seed: each line is `<op> <args> : <values>` with floats as hex."""
    seeds = [0, 1, 42, 12345, -12345, 2**32 - 1, 2**32 + 5, 2**63 - 1]
    lines = ["# CPython %s random streams; regenerate with tools/make_pretraining_fixtures.py"
             % sys.version.split()[0]]
    for seed in seeds:
        lines.append("seed %d" % seed)
        r = random.Random(seed)
        lines.append("uint32 : " + " ".join(str(r.getrandbits(32)) for _ in range(700)))
        lines.append("random : " + " ".join(r.random().hex() for _ in range(20)))
        for a, b in [(2, 125), (0, 30521), (0, 0), (1, 1), (0, 1), (-5, 5), (1, 2**33)]:
            lines.append("randint %d %d : " % (a, b)
                         + " ".join(str(r.randint(a, b)) for _ in range(25)))
        for k in [0, 1, 7, 31, 32, 33, 50, 64]:
            lines.append("getrandbits %d : " % k
                         + " ".join(str(r.getrandbits(k)) for _ in range(5)))
        for n in [1, 2, 7, 37, 1000]:
            x = list(range(n))
            r.shuffle(x)
            lines.append("shuffle %d : " % n + " ".join(map(str, x)))
        lines.append("random : " + " ".join(r.random().hex() for _ in range(5)))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def paragraphs(path, start_marker, count):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = text[text.find(start_marker):]
    paras = [" ".join(p.split()) for p in text.split("\n\n")]
    return [p for p in paras if len(p) > 40][:count]


def sentences(paragraph):
    return [s for s in re.split(r"(?<=[.!?’”])\s+(?=[A-Z‘“])", paragraph) if s]


def write_inputs(shared):
    gut = os.path.join(shared, "gutenberg")
    alice = paragraphs(os.path.join(gut, "pg11_alice_in_wonderland.txt"), "CHAPTER I.", 24)
    kafka = paragraphs(os.path.join(gut, "pg5200_metamorphosis.txt"), "One morning", 12)
    holmes = paragraphs(os.path.join(gut, "pg1661_sherlock_holmes.txt"), "To Sherlock Holmes", 10)
    devil = paragraphs(os.path.join(gut, "pg972_devils_dictionary.txt"), "ABASEMENT", 30)

    def doc(paras):
        return "\n".join(s for p in paras for s in sentences(p)) + "\n"

    # docs_a: several real documents plus the edge cases the reader must handle.
    a = []
    a.append(doc(alice[:12]))
    a.append("\n\n\n")                                   # empty documents
    a.append("Only one sentence in this document.\n\n")  # one-sentence document
    a.append(doc(kafka[:6]).replace("\n", "\r\n"))       # CRLF line endings
    a.append("\n   \t \n")                               # whitespace-only line: a boundary
    a.append("\x01\x02\x7f\n")                           # no tokens: not a boundary
    a.append("Café naïve résumé — “quoted” text… 東京 and 北京 are cities.\n")
    a.append(" ".join(holmes[:4]) + "\n")                # one very long line (> 512 tokens)
    a.append("Short line.\rAnother after a lone carriage return.\n")
    a.append("\n")
    a.append(doc(devil[:15]))
    a.append("\n")
    a.append("A lonely sentence.\n")
    # docs_b*: more documents in two files, read through a glob.
    b1 = doc(alice[12:24]) + "\n" + doc(holmes[4:10]) + "\n"
    b2 = doc(kafka[6:12]) + "\n\n" + doc(devil[15:30])
    # tiny: a single short document (random-next must fall back to itself).
    tiny = "The cat sat on the mat.\nIt was happy.\nThen it slept unbelievably soundly.\n"
    files = {"docs_a.txt": "".join(a), "docs_b1.txt": b1, "docs_b2.txt": b2,
             "tiny.txt": tiny}
    for name, text in files.items():
        with open(os.path.join(OUT, name), "w", encoding="utf-8", newline="") as f:
            f.write(text)


def write_tokens(ref, name, do_lower_case, suffix):
    """The reference tokenizer's ids for every line (universal newlines, as the
    reference reads), so tests can drive the algorithm without the tokenizer."""
    tok = ref.tokenizer(VOCAB, do_lower_case)
    out = []
    with open(os.path.join(OUT, name), encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            if not stripped:
                out.append("")
                continue
            ids = tok.convert_tokens_to_ids(tok.tokenize(stripped))
            out.append(" ".join(map(str, ids)) if ids else "-")
    with open(os.path.join(OUT, name[:-4] + suffix), "w") as f:
        f.write("\n".join(out) + "\n")


CONFIGS = [
    # name, input_file, flags
    ("seq128", "docs_a.txt,docs_b*.txt",
     dict(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=3)),
    ("seq128_wwm", "docs_a.txt,docs_b*.txt",
     dict(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2,
          do_whole_word_mask=True)),
    ("seq512", "docs_a.txt,docs_b*.txt",
     dict(max_seq_length=512, max_predictions_per_seq=80, dupe_factor=2)),
    ("seq512_wwm", "docs_a.txt,docs_b*.txt",
     dict(max_seq_length=512, max_predictions_per_seq=80, dupe_factor=2,
          do_whole_word_mask=True, random_seed=7)),
    ("seq24_cased_wwm", "docs_a.txt",
     dict(max_seq_length=24, max_predictions_per_seq=5, dupe_factor=2, do_lower_case=False,
          do_whole_word_mask=True, random_seed=0, short_seq_prob=0.5, masked_lm_prob=0.2)),
    ("tiny", "tiny.txt",
     dict(max_seq_length=16, max_predictions_per_seq=3, dupe_factor=4, random_seed=99)),
]


def write_expected(ref, name, input_file, flags):
    full = dict(do_lower_case=True, do_whole_word_mask=False, random_seed=12345,
                masked_lm_prob=0.15, short_seq_prob=0.1)
    full.update(flags)
    inputs = ",".join(os.path.join(OUT, p) for p in input_file.split(","))
    records = ref.run(inputs, VOCAB, **full)
    seq, npred = full["max_seq_length"], full["max_predictions_per_seq"]
    lines = ["# Google create_pretraining_data.py instances; tools/make_pretraining_fixtures.py",
             "input_file %s" % inputs, "vocab_file %s" % VOCAB]
    for key in ["do_lower_case", "do_whole_word_mask", "max_seq_length",
                "max_predictions_per_seq", "random_seed", "dupe_factor",
                "masked_lm_prob", "short_seq_prob"]:
        value = full[key]
        lines.append("%s %s" % (key, int(value) if isinstance(value, bool) else value))
    lines.append("instances %d" % len(records))
    # One line per instance: next_sentence_label, tokens, segment-A length, predictions,
    # then the unpadded input_ids, masked_lm_positions and masked_lm_ids. The padding and
    # the segment/mask layout are checked here so the compact form loses nothing.
    for r in records:
        ids, mask, seg = r["input_ids"], r["input_mask"], r["segment_ids"]
        n = sum(mask)
        a = seg[:n].count(0)
        assert len(ids) == seq and mask == [1] * n + [0] * (seq - n)
        assert seg == [0] * a + [1] * (n - a) + [0] * (seq - n) and ids[n:] == [0] * (seq - n)
        m = int(sum(r["masked_lm_weights"]))
        pos, mids = r["masked_lm_positions"], r["masked_lm_ids"]
        assert len(pos) == npred and pos[m:] == [0] * (npred - m) and mids[m:] == [0] * (npred - m)
        nsl = r["next_sentence_labels"][0]
        lines.append("%d %d %d %d | %s | %s | %s" % (
            nsl, n, a, m, " ".join(map(str, ids[:n])), " ".join(map(str, pos[:m])),
            " ".join(map(str, mids[:m]))))
    with open(os.path.join(OUT, name + ".expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%-18s %5d instances" % (name, len(records)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=DEFAULT_MIRROR)
    ap.add_argument("--shared", default="../shared/data")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    write_pyrandom_streams(os.path.join(OUT, "pyrandom_streams.txt"))
    write_inputs(args.shared)
    ref = Reference(args.mirror)
    for name in ["docs_a.txt", "docs_b1.txt", "docs_b2.txt", "tiny.txt"]:
        write_tokens(ref, name, True, ".ids")
    write_tokens(ref, "docs_a.txt", False, ".cased_ids")
    for name, input_file, flags in CONFIGS:
        write_expected(ref, name, input_file, flags)


if __name__ == "__main__":
    main()
