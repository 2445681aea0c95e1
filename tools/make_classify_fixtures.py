"""Fixtures for `bert classify` (tests/test_classify.c), all under tests/data/classify/.

1. metrics.json: seeded random truths and predictions with scikit-learn's scores, as
   eval_results.json names them: single-label (accuracy, f1_macro, f1_micro; two labels: f1,
   precision, recall of label 1), regression (scipy's pearsonr / spearmanr, sklearn's
   mean_squared_error) and multi-label (subset accuracy = accuracy_score, f1 averaged
   "samples", "micro", "macro"), with labels absent from the truth or the predictions and
   rows with no label (sklearn's zero_division default: a 0/0 F1 counts 0).
2. bce.json: logits and 0/1 targets with PyTorch's BCEWithLogitsLoss (mean) and its gradient,
   float64: the multi-label loss the kernels compute.
3. quoting.csv / quoting.tsv and quoting.json: RFC 4180 cases (a BOM, separators, line breaks
   and doubled quotes in quoted cells, CRLF and lone CR line ends, a blank line, empty cells)
   with the rows Python's csv module reads from them (the reference).
4. {multiclass,regression,multilabel}_{train,dev,test}.{csv,tsv,jsonl}: small templated
   data sets for the end-to-end runs: three sentiment labels (CSV, a sentence pair), a score
   (TSV), topics as JSON lists (JSONL) and the same joined by "|" (multilabel_train.csv).

Run: /work/main/.venv/bin/python tools/make_classify_fixtures.py   (numpy, torch, scipy,
     scikit-learn: pip install scikit-learn)"""
import csv
import io
import json
import os
import random

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "classify")


def write(name, text):
    with open(os.path.join(OUT, name), "w", encoding="utf-8", newline="") as f:
        f.write(text)


def metrics():
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, mean_squared_error, precision_score, recall_score
    rng = np.random.default_rng(34)
    cases = []
    for n, labels, noise in [(40, 2, 0.3), (57, 3, 0.5), (30, 5, 0.6), (25, 4, 0.4), (12, 2, 0.9)]:
        y = rng.integers(0, labels, n)
        if labels == 4:
            y[y == 3] = 0          # label 3 never true ...
        p = np.where(rng.random(n) < noise, rng.integers(0, labels, n), y)
        if labels == 4:
            p[p == 2] = 1          # ... and label 2 never predicted
        c = {"problem": "single", "num_labels": labels, "truth": y.tolist(), "pred": p.tolist(),
             "accuracy": accuracy_score(y, p), "f1_macro": f1_score(y, p, average="macro"),
             "f1_micro": f1_score(y, p, average="micro")}
        if labels == 2:
            c.update(f1=f1_score(y, p), precision=precision_score(y, p), recall=recall_score(y, p))
        cases.append(c)
    for n in (20, 63):
        y = rng.normal(2.5, 1.2, n).astype(np.float32)
        y[:3] = y[3]               # ties, for Spearman's mean ranks
        p = (y + rng.normal(0, 0.8, n)).astype(np.float32)
        cases.append({"problem": "regression", "truth": y.tolist(), "pred": p.tolist(),
                      "pearson": float(pearsonr(p.astype(np.float64), y.astype(np.float64))[0]),
                      "spearmanr": float(spearmanr(p, y)[0]),
                      "mse": float(mean_squared_error(y.astype(np.float64), p.astype(np.float64)))})
    for n, labels in [(30, 4), (45, 6)]:
        y = (rng.random((n, labels)) < 0.35).astype(int)
        p = np.where(rng.random((n, labels)) < 0.25, 1 - y, y)
        y[0] = 0
        p[0] = 0                   # a row with no label, none predicted (0/0)
        y[1] = 0                   # none true, some predicted
        p[:, labels - 1] = 0       # a label never predicted
        cases.append({"problem": "multi", "num_labels": labels, "truth": y.tolist(), "pred": p.tolist(),
                      "subset_accuracy": accuracy_score(y, p), "f1_samples": f1_score(y, p, average="samples"),
                      "f1_micro": f1_score(y, p, average="micro"), "f1_macro": f1_score(y, p, average="macro")})
    write("metrics.json", "[\n" + ",\n".join(json.dumps(c) for c in cases) + "\n]\n")   # a case a line


def bce():
    import torch
    rng = np.random.default_rng(35)
    x = torch.tensor(rng.normal(0, 4, 37).astype(np.float32), dtype=torch.float64, requires_grad=True)
    x.data[0], x.data[1], x.data[2] = 30.0, -30.0, 0.0    # the stable form's ends
    t = torch.tensor((rng.random(37) < 0.4).astype(np.float32), dtype=torch.float64)
    loss = torch.nn.BCEWithLogitsLoss()(x, t)
    loss.backward()
    write("bce.json", json.dumps({"logits": x.detach().float().tolist(), "targets": t.tolist(),
                                  "loss": loss.item(), "grad": x.grad.tolist()}) + "\n")


QUOTING = ('\ufefftext,label,note\r\n'
           'plain,pos,\r\n'
           '"a, comma",neg,"he said ""hi"""\r\n'
           '"two\nlines",pos,x\n'
           '\n'
           '"",neg,"ends with a comma,"\r'
           'caf\u00e9 \u00fcber,pos,"""quoted"""\n'
           'last,neg,no newline')


def quoting():
    write("quoting.csv", QUOTING)
    tsv = QUOTING.replace(",", "\t").replace('"a\t comma"', '"a\t tab"').replace('comma\t"', 'tab\t"')
    write("quoting.tsv", tsv)
    out = {}
    for name, text, delim in (("csv", QUOTING, ","), ("tsv", tsv, "\t")):
        rows = [r for r in csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""), delimiter=delim) if r]
        out[name] = rows
    write("quoting.json", json.dumps(out, ensure_ascii=False) + "\n")


GOOD = ["great", "wonderful", "lovely", "excellent", "brilliant"]
BAD = ["awful", "terrible", "boring", "dreadful", "poor"]
MEH = ["okay", "average", "fine", "ordinary", "passable"]
THINGS = ["film", "book", "meal", "concert", "game", "hotel"]
TOPICS = {"sports": ["match", "goal", "team"], "music": ["song", "band", "album"],
          "food": ["recipe", "dinner", "taste"], "travel": ["flight", "beach", "city"]}


def sentiment_rows(rng, n):
    rows = []
    for _ in range(n):
        label = rng.choice(["positive", "negative", "neutral"])
        word = rng.choice({"positive": GOOD, "negative": BAD, "neutral": MEH}[label])
        thing = rng.choice(THINGS)
        rows.append(("the %s was %s" % (thing, word), "a review of the %s, \"%s\"" % (thing, word), label))
    return rows


def csv_text(header, rows, delim=","):
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delim, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def datasets():
    rng = random.Random(34)
    for split, n in (("train", 48), ("dev", 15), ("test", 6)):
        rows = sentiment_rows(rng, n)
        if split == "test":
            rows = [(a, b) for a, b, _ in rows]
        write("multiclass_%s.csv" % split, csv_text(["sentence1", "sentence2", "label"][:3 if split != "test" else 2], rows))
    for split, n in (("train", 40), ("dev", 12), ("test", 5)):
        rows = []
        for _ in range(n):
            k = rng.randint(0, 4)
            score = k + rng.choice([0.0, 0.25, 0.5])
            rows.append(("the %s was %s" % (rng.choice(THINGS), (BAD + MEH + GOOD)[min(14, k * 3 + rng.randint(0, 2))]),
                         "%.2f" % score))
        if split == "test":
            rows = [(t,) for t, _ in rows]
        write("regression_%s.tsv" % split, csv_text(["text", "score"][:2 if split != "test" else 1], rows, "\t"))
    names = sorted(TOPICS)
    for split, n in (("train", 48), ("dev", 15), ("test", 5)):
        lines, csv_rows = [], []
        for _ in range(n):
            chosen = sorted(rng.sample(names, rng.choice([0, 1, 1, 2, 2, 3])))
            words = [rng.choice(TOPICS[t]) for t in chosen] or ["weather"]
            text = "a note about the " + " and the ".join(words)
            row = {"text": text}
            if split != "test":
                row["labels"] = chosen
            lines.append(json.dumps(row))
            csv_rows.append((text, "|".join(chosen)))
        write("multilabel_%s.jsonl" % split, "\n".join(lines) + "\n")
        if split == "train":
            write("multilabel_train.csv", csv_text(["text", "labels"], csv_rows))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    metrics()
    bce()
    quoting()
    datasets()
