"""A plain, slow reimplementation of `bert vocab` (WordPiece learning as BPE with "##"
continuation pieces, HuggingFace WordPieceTrainer style) used to make the fixture that
tests/test_tokenizer_vocab.c compares against.

Independent of the C code: words come from Google's reference BasicTokenizer, and every
merge step recounts every pair from scratch (no heap, no incremental counts). The rules
it shares with the C code are the documented ones:
  - words longer than max_input_chars_per_word characters are skipped;
  - the alphabet is the limit_alphabet most frequent characters (ties: UTF-8 bytes);
    words with other characters are skipped;
  - words are ordered by count (descending) then UTF-8 bytes; symbols are numbered as
    first met in that order ("c" for a word's first character, "##c" for the others);
  - each step merges the most frequent adjacent pair (ties: first symbol's bytes, then
    second's), left to right and non-overlapping in every word, while the count is at
    least min_frequency and the vocabulary is not full;
  - vocab.txt: [PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK], the other [unusedN],
    whole-word symbols in numbering order, then "##" symbols in numbering order.

  python3 tools/wordpiece_train_reference.py --input FILE --vocab_size N [--cased] \
      [--num_unused K] [--min_frequency F] [--limit_alphabet A] > vocab.txt
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_reference_tokenizer  # noqa: E402


def count_words(path, lower, max_chars):
    basic = bert_reference_tokenizer.load().BasicTokenizer(do_lower_case=lower)
    counts = collections.Counter()
    with open(path, "rb") as f:
        for line in f.read().split(b"\n"):
            for w in basic.tokenize(line.decode("utf-8", "replace")):
                if len(w) <= max_chars:
                    counts[w] += 1
    return counts


def train(counts, vocab_size, num_unused, min_frequency, limit_alphabet):
    chars = collections.Counter()
    for w, c in counts.items():
        for ch in w:
            chars[ch] += c
    ranked = sorted(chars, key=lambda ch: (-chars[ch], ch.encode("utf-8")))
    alphabet = set(ranked[:limit_alphabet] if limit_alphabet else ranked)
    symbols, index = [], {}

    def sym(s):
        if s not in index:
            index[s] = len(symbols)
            symbols.append(s)
        return index[s]

    words = []
    for w in sorted(counts, key=lambda w: (-counts[w], w.encode("utf-8"))):
        if all(ch in alphabet for ch in w):
            words.append([[sym(w[0])] + [sym("##" + ch) for ch in w[1:]], counts[w]])
    budget = vocab_size - 5 - num_unused
    while len(symbols) < budget:
        pairs = collections.Counter()
        for s, c in words:
            for i in range(len(s) - 1):
                pairs[(s[i], s[i + 1])] += c
        if not pairs:
            break
        a, b = min(pairs, key=lambda p: (-pairs[p], symbols[p[0]].encode(), symbols[p[1]].encode()))
        if pairs[(a, b)] < min_frequency:
            break
        c_id = sym(symbols[a] + symbols[b][2:])
        for entry in words:
            s, out, i = entry[0], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(c_id)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            entry[0] = out
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(min(99, num_unused))]
    specials += ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"[unused{i}]" for i in range(99, num_unused)]
    cont = [s for s in symbols if len(s) > 2 and s.startswith("##")]
    whole = [s for s in symbols if not (len(s) > 2 and s.startswith("##"))]
    return specials + whole + cont


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", required=True)
    ap.add_argument("--vocab_size", type=int, required=True)
    ap.add_argument("--cased", action="store_true")
    ap.add_argument("--num_unused", type=int, default=994)
    ap.add_argument("--min_frequency", type=int, default=2)
    ap.add_argument("--limit_alphabet", type=int, default=1000)
    ap.add_argument("--max_chars", type=int, default=100)
    args = ap.parse_args()
    counts = count_words(args.input, not args.cased, args.max_chars)
    vocab = train(counts, args.vocab_size, args.num_unused, args.min_frequency, args.limit_alphabet)
    sys.stdout.write("".join(t + "\n" for t in vocab))


if __name__ == "__main__":
    main()
