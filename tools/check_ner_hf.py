"""Checks a `bert ner` run against HuggingFace: loads its model folder with transformers'
BertForTokenClassification, labels the validation file as run_ner.py does (a fast tokenizer
with is_split_into_words=True, truncation to max_seq_length, the prediction at each word's
first piece), scores it with seqeval (run_ner.py's metric: the default mode, micro
averages) and compares the numbers with eval_results.json; with --test_file, the predicted
tags with predictions.txt.

Run: PYTHONPATH=/path/to/seqeval /work/main/.venv/bin/python tools/check_ner_hf.py \\
       --model_dir OUT --validation_file dev.txt [--test_file test.txt] [--max_seq_length 128]"""
import argparse
import json
import os
import sys

import torch
from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
from transformers import BertForTokenClassification, BertTokenizerFast


def read_conll(path):
    sentences, words = [], []
    for line in open(path, encoding="utf-8"):
        cols = line.split()
        if not cols or cols[0] == "-DOCSTART-":
            if words:
                sentences.append(words)
            words = []
            continue
        words.append((cols[0], cols[-1] if len(cols) > 1 else None))
    if words:
        sentences.append(words)
    return sentences


def predict(model, tok, sentences, max_len):
    id2label = model.config.id2label
    out = []
    for s in sentences:
        enc = tok([w for w, _ in s], is_split_into_words=True, truncation=True, max_length=max_len, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[0]
        tags, seen = [None] * len(s), set()
        for pos, w in enumerate(enc.word_ids()):
            if w is not None and w not in seen:
                seen.add(w)
                tags[w] = id2label[int(logits[pos].argmax())]
        out.append(tags)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_dir", required=True)
    ap.add_argument("--validation_file", required=True)
    ap.add_argument("--test_file")
    ap.add_argument("--max_seq_length", type=int, default=128)
    a = ap.parse_args()
    model = BertForTokenClassification.from_pretrained(a.model_dir).eval()
    tok = BertTokenizerFast.from_pretrained(a.model_dir)
    dev = read_conll(a.validation_file)
    pred = predict(model, tok, dev, a.max_seq_length)
    y_true = [[t for (w, t), p in zip(s, ps) if p is not None] for s, ps in zip(dev, pred)]
    y_pred = [[p for p in ps if p is not None] for ps in pred]
    hf = {"precision": precision_score(y_true, y_pred), "recall": recall_score(y_true, y_pred),
          "f1": f1_score(y_true, y_pred), "accuracy": accuracy_score(y_true, y_pred)}
    ours = json.load(open(os.path.join(a.model_dir, "eval_results.json")))
    bad = 0
    for k, v in hf.items():
        print("%-9s HF+seqeval %.6f  bert.c %.6f" % (k, v, ours[k]))
        bad += abs(v - ours[k]) > 1e-12
    if a.test_file:
        test = read_conll(a.test_file)
        hf_tags = predict(model, tok, test, a.max_seq_length)
        mine = [t for s in read_conll(os.path.join(a.model_dir, "predictions.txt")) for _, t in s]
        theirs = [t if t is not None else "O" for s in hf_tags for t in s]
        diff = sum(x != y for x, y in zip(mine, theirs)) + abs(len(mine) - len(theirs))
        print("test tags: %d words, %d differ" % (len(theirs), diff))
        bad += diff > 0
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
