"""Every Unicode code point through Google's reference BasicTokenizer, compactly.

For each code point c (all of U+0000..U+10FFFF except surrogates and "\n") the
reference's BasicTokenizer output is taken for probe strings that expose every property
the tokenizer uses:
  uncased: "x{c}y"  (drop / space / punctuation / CJK / lower-case / NFD / Mn)
           "AΣ{c}"  and "{c}Σ" and "A{c}Σ"  (Cased and Case_Ignorable, via final sigma)
  cased:   "x{c}y"
Outputs are written with c replaced by U+0001 and consecutive code points with equal
patterns merged into ranges, so the whole sweep is a few hundred KB of JSON. The C test
tests/test_tokenizer_sweep.c expands it and compares every code point.

Also recorded: the code points Python's Unicode (14.0 in Python 3.11) leaves unassigned,
since utf8proc 2.8 (Unicode 15.0) assigns some of them and they may then differ.

Usage: python3 tools/tokenizer_sweep.py > tests/data/tokenizer/sweep.json
"""
import json
import sys
import unicodedata

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bert_reference_tokenizer  # noqa: E402

PLACEHOLDER = "\x01"
UNCASED_PROBES = ["x{}y", "A\u03a3{}", "{}\u03a3", "A{}\u03a3"]
CASED_PROBES = ["x{}y"]


def code_points():
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp == 0x0A:
            continue
        yield cp


def pattern(basic, probe, c):
    words = basic.tokenize(probe.format(c))
    return " ".join(words).replace(c, PLACEHOLDER)


def ranges(rows):
    """[(cp, value)] -> [[first, last, value]] merging consecutive equal values."""
    out = []
    for cp, value in rows:
        if out and out[-1][1] == cp - 1 and out[-1][2] == value:
            out[-1][1] = cp
        elif out and out[-1][1] == cp - 2 and cp - 1 in (0x0A,) and out[-1][2] == value:
            out[-1][1] = cp  # "\n" is skipped, not a change
        else:
            out.append([cp, cp, value])
    return out


def main():
    ref = bert_reference_tokenizer.load()
    uncased = ref.BasicTokenizer(do_lower_case=True)
    cased = ref.BasicTokenizer(do_lower_case=False)
    rows_uncased, rows_cased, unassigned = [], [], []
    for cp in code_points():
        c = chr(cp)
        rows_uncased.append((cp, [pattern(uncased, p, c) for p in UNCASED_PROBES]))
        rows_cased.append((cp, [pattern(cased, p, c) for p in CASED_PROBES]))
        if unicodedata.category(c) == "Cn":
            unassigned.append((cp, 1))
    doc = {
        "unicode_version": unicodedata.unidata_version,
        "python": sys.version.split()[0],
        "placeholder": PLACEHOLDER,
        "skipped": "surrogates U+D800..U+DFFF (not UTF-8) and U+000A (line separator of the CLI)",
        "uncased_probes": UNCASED_PROBES,
        "cased_probes": CASED_PROBES,
        "uncased": ranges(rows_uncased),
        "cased": ranges(rows_cased),
        "unassigned": [[a, b] for a, b, _ in ranges(unassigned)],
    }
    sys.stdout.reconfigure(encoding="utf-8")
    json.dump(doc, sys.stdout, ensure_ascii=False, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
