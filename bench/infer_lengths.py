#!/usr/bin/env python3
"""The token counts `bert bench_infer` runs on, computed in Python, so its peers
(bench/infer_peers.py) time the very same batches in the same order.

    GLUE   one length per dev row: [CLS] a [SEP] (b [SEP]), longest-first truncation to
           max_seq (Google's run_classifier.py / HF's glue processors' columns).
    SQuAD  one length per feature of Google's run_squad.py convert_examples_to_features
           (not training): len(query tokens, cut to 64) + doc window + 3, windows every
           doc_stride (128) tokens.

Tokenization: transformers' slow Python tokenizer (BasicTokenizer + WordpieceTokenizer of
BertTokenizerLegacy in transformers 5; BertTokenizer's in 4.x), which is Google's algorithm.
Used directly, without never_split, as Google's FullTokenizer has none.

    python bench/infer_lengths.py --glue_task mrpc --data_dir ../shared/data/glue/MRPC \
        --vocab_file data/vocab/bert-base-uncased-vocab.txt            # prints n and mean
    python bench/infer_lengths.py --squad_file F --vocab_file V --out lengths.json
    python bench/infer_lengths.py --squad_file F --subset_features 512 --subset_out S.json
        writes a smaller SQuAD file of about 512 features that `bert bench_infer
        --squad_file S.json` and the peers then both read: runs of --subset_block (32)
        consecutive questions spread evenly over F (its length distribution, and the
        file order's runs of questions on one paragraph); --subset_block 0: F's first
        questions (the first article only: shorter than the average)

Compare the mean with the one `./bert bench_infer` prints on its first line: they must be equal.
"""
import argparse
import json
import math
import sys

try:  # transformers 5: the slow (Python) tokenizer lives in tokenization_bert_legacy
    from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer, WordpieceTokenizer, load_vocab
except ImportError:  # transformers 4.x
    from transformers.models.bert.tokenization_bert import BasicTokenizer, WordpieceTokenizer, load_vocab

# dev file, header line?, text_a column, text_b column (-1: none), as HF's glue processors read them
GLUE_DEV = {
    "cola": ("dev.tsv", False, 3, -1),
    "sst-2": ("dev.tsv", True, 0, -1),
    "mrpc": ("dev.tsv", True, 3, 4),
    "sts-b": ("dev.tsv", True, 7, 8),
    "qqp": ("dev.tsv", True, 3, 4),
    "mnli": ("dev_matched.tsv", True, 8, 9),
    "mnli-mm": ("dev_mismatched.tsv", True, 8, 9),
    "qnli": ("dev.tsv", True, 1, 2),
    "rte": ("dev.tsv", True, 1, 2),
    "wnli": ("dev.tsv", True, 1, 2),
}
GLUE_ALIASES = {"sst2": "sst-2", "stsb": "sts-b"}


class FullTokenizer:
    """Google's FullTokenizer from transformers' slow pieces."""

    def __init__(self, vocab_file, do_lower_case=True, max_input_chars_per_word=100):
        self.vocab = load_vocab(vocab_file)
        self.basic = BasicTokenizer(do_lower_case=do_lower_case, never_split=None, tokenize_chinese_chars=True)
        self.wordpiece = WordpieceTokenizer(vocab=self.vocab, unk_token="[UNK]",
                                            max_input_chars_per_word=max_input_chars_per_word)

    def tokenize(self, text):
        out = []
        for token in self.basic.tokenize(text):
            out.extend(self.wordpiece.tokenize(token))
        return out


def glue_lengths(task, data_dir, tok, max_seq=128):
    task = GLUE_ALIASES.get(task.lower(), task.lower())
    if task not in GLUE_DEV:
        raise SystemExit(f"infer_lengths: no GLUE task '{task}' ({', '.join(GLUE_DEV)})")
    name, header, col_a, col_b = GLUE_DEV[task]
    lengths = []
    # utf-8-sig: MRPC's files start with a BOM (on the header line, which is skipped anyway)
    with open(f"{data_dir}/{name}", encoding="utf-8-sig", newline="") as f:
        for i, line in enumerate(f.read().split("\n")):
            line = line[:-1] if line.endswith("\r") else line
            if (i == 0 and header) or not line:
                continue
            cells = line.split("\t")
            a = tok.tokenize(cells[col_a])
            b = tok.tokenize(cells[col_b]) if col_b >= 0 else None
            if b is None:
                lengths.append(min(len(a), max_seq - 2) + 2)
                continue
            # Google's _truncate_seq_pair: pop from the longer (b on ties) until they fit
            la, lb = len(a), len(b)
            while la + lb > max_seq - 3:
                if la > lb:
                    la -= 1
                else:
                    lb -= 1
            lengths.append(la + lb + 3)
    return lengths


def _is_whitespace(c):
    return c in " \t\r\n" or ord(c) == 0x202F


def squad_questions(data):
    """(paragraph number, doc_tokens, question) per question, in file order (run_squad.py's
    read_squad_examples)."""
    k = 0
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            k += 1
            doc_tokens, prev_ws = [], True
            for c in paragraph["context"]:
                if _is_whitespace(c):
                    prev_ws = True
                else:
                    if prev_ws:
                        doc_tokens.append(c)
                    else:
                        doc_tokens[-1] += c
                    prev_ws = False
            for qa in paragraph["qas"]:
                yield k, doc_tokens, qa["question"]


def squad_lengths(path_or_data, tok, max_seq=384, doc_stride=128, max_query_length=64):
    data = path_or_data
    if isinstance(path_or_data, str):
        with open(path_or_data, encoding="utf-8") as f:
            data = json.load(f)
    lengths, para, n_doc = [], None, 0
    for k, doc_tokens, question in squad_questions(data):
        query = tok.tokenize(question)[:max_query_length]
        if k != para:  # the paragraph's sub-tokens, once per paragraph
            para, n_doc = k, sum(len(tok.tokenize(t)) for t in doc_tokens)
        max_doc = max_seq - len(query) - 3
        start = 0
        while start < n_doc:
            length = min(n_doc - start, max_doc)
            lengths.append(len(query) + length + 3)
            if start + length == n_doc:
                break
            start += min(length, doc_stride)
    return lengths


def squad_subset(path, min_features, tok, max_seq=384, block=32):
    """A smaller SQuAD file of about min_features features: runs of `block` consecutive
    questions spread evenly over the whole file (so its length distribution, every article,
    and the file order's runs of questions on one paragraph, which keep a batch's lengths
    alike), whole questions in file order, articles and paragraphs kept around them.
    block 0: the file's first questions only (its first article)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    counts = []  # features per question, in file order
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                one = {"data": [{"paragraphs": [dict(paragraph, qas=[qa])]}]}
                counts.append(len(squad_lengths(one, tok, max_seq)))
    q = len(counts)
    chosen = set()
    if block <= 0:
        chosen = set(range(q))
    else:
        runs = max(1, math.ceil(min_features * q / sum(counts) / block))
        while True:  # more runs until they hold min_features
            chosen = set()
            for j in range(runs):
                start = j * q // runs
                chosen.update(range(start, min(start + block, q)))
            if sum(counts[i] for i in chosen) >= min_features or len(chosen) == q:
                break
            runs += 1
    articles, n, i = [], 0, 0
    for article in data["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = []
            for qa in paragraph["qas"]:
                if i in chosen and n < min_features:
                    qas.append(qa)
                    n += counts[i]
                i += 1
            if qas:
                paragraphs.append(dict(paragraph, qas=qas))
        if paragraphs:
            articles.append(dict(article, paragraphs=paragraphs))
    return {"version": data.get("version", ""), "data": articles}, n


def lengths_from_args(args):
    """(name, lengths, max_seq): the same name as bert.c's "lengths" JSON field."""
    if bool(args.glue_task) == bool(args.squad_file):
        raise SystemExit("infer_lengths: give one of --glue_task (with --data_dir) and --squad_file")
    max_seq = args.max_seq_length or (384 if args.squad_file else 128)
    # bert.c: max_input_chars_per_word 200 for SQuAD (Google's default), 100 for GLUE (HF's)
    tok = FullTokenizer(args.vocab_file, args.do_lower_case, 200 if args.squad_file else 100)
    if args.squad_file:
        return args.squad_file, squad_lengths(args.squad_file, tok, max_seq), max_seq
    return args.glue_task, glue_lengths(args.glue_task, args.data_dir, tok, max_seq), max_seq


def add_length_args(p):
    p.add_argument("--glue_task")
    p.add_argument("--data_dir")
    p.add_argument("--squad_file")
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--do_lower_case", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    p.add_argument("--max_seq_length", type=int, default=0, help="default 128 (GLUE) or 384 (SQuAD)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_length_args(p)
    p.add_argument("--out", help="write {name, max_seq, lengths} as JSON here")
    p.add_argument("--batch", type=int, default=32, help="the batch of the dynamic mode's padding figure")
    p.add_argument("--subset_features", type=int, default=0)
    p.add_argument("--subset_out")
    p.add_argument("--subset_block", type=int, default=32)
    args = p.parse_args()
    if args.subset_features:
        if not (args.squad_file and args.subset_out):
            raise SystemExit("infer_lengths: --subset_features needs --squad_file and --subset_out")
        tok = FullTokenizer(args.vocab_file, args.do_lower_case, 200)
        sub, n = squad_subset(args.squad_file, args.subset_features, tok, args.max_seq_length or 384,
                              args.subset_block)
        with open(args.subset_out, "w", encoding="utf-8") as f:
            json.dump(sub, f, ensure_ascii=False)
        print(f"{args.subset_out}: {len(sub['data'])} articles, "
              f"{sum(len(p['qas']) for a in sub['data'] for p in a['paragraphs'])} questions, {n} features",
              file=sys.stderr)
        return
    name, lengths, max_seq = lengths_from_args(args)
    real, b = sum(lengths), args.batch
    dynamic = sum(max(lengths[i:i + b]) * len(lengths[i:i + b]) for i in range(0, len(lengths), b))
    print(f"{name}: {len(lengths)} sequences (mean {real / len(lengths):.1f} of {max_seq} tokens); rows computed "
          f"per real token: padded {max_seq * len(lengths) / real:.3f}, dynamic at batch {b} {dynamic / real:.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"name": name, "max_seq": max_seq, "lengths": lengths}, f)


if __name__ == "__main__":
    main()
