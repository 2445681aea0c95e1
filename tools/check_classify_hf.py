"""Checks a `bert classify` run against HuggingFace: loads its model folder with transformers'
pipeline("text-classification") (BertForSequenceClassification and the folder's tokenizer),
which must name the labels as config.json's id2label does, runs it on the test file and
compares its labels and scores with the run's predict_results.tsv / .jsonl: the top label
(single-label, softmax), each label's sigmoid probability (multi-label) or the value
(regression, no activation). Both sides compute in float32: probabilities agree to ~1e-6;
the bound is 1e-4.

Run: /work/main/.venv/bin/python tools/check_classify_hf.py --model_dir OUT --test_file F \\
       [--text_column_names a[,b]] [--max_seq_length 128]"""
import argparse
import csv
import json
import os
import sys

from transformers import pipeline


def read_rows(path):
    if path.endswith(".jsonl") or path.endswith(".json"):
        return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    delim = "\t" if path.endswith(".tsv") or path.endswith(".txt") else ","
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f, delimiter=delim))


def inputs(rows, columns):
    if columns is None:
        keys = rows[0].keys()
        columns = next((c for c in (["sentence"], ["text"], ["sentence1", "sentence2"]) if all(k in keys for k in c)),
                       [next(iter(keys))])
    if len(columns) == 1:
        return [r[columns[0]] for r in rows]
    return [{"text": r[columns[0]], "text_pair": r[columns[1]]} if r[columns[1]] else r[columns[0]] for r in rows]


def ours(model_dir):
    tsv = os.path.join(model_dir, "predict_results.tsv")
    if os.path.exists(tsv):
        with open(tsv, encoding="utf-8", newline="") as f:
            return "tsv", list(csv.DictReader(f, delimiter="\t"))
    return "jsonl", [json.loads(line) for line in open(os.path.join(model_dir, "predict_results.jsonl"))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_dir", required=True)
    ap.add_argument("--test_file", required=True)
    ap.add_argument("--text_column_names")
    ap.add_argument("--max_seq_length", type=int, default=128)
    a = ap.parse_args()
    clf = pipeline("text-classification", model=a.model_dir, device="cpu")
    cfg = clf.model.config
    problem = cfg.problem_type
    print("problem_type %s, id2label %s" % (problem, cfg.id2label))
    x = inputs(read_rows(a.test_file), a.text_column_names.split(",") if a.text_column_names else None)
    fn = "none" if problem == "regression" else None
    hf = clf(x, top_k=None, function_to_apply=fn, truncation=True, max_length=a.max_seq_length)
    kind, mine = ours(a.model_dir)
    bad, worst = 0, 0.0
    for i, (h, m) in enumerate(zip(hf, mine)):
        scores = {d["label"]: d["score"] for d in h}
        if problem == "regression":
            got = float(m["prediction"] if kind == "tsv" else m["value"])
            err = abs(scores["LABEL_0"] - got) / max(1.0, abs(got))
            worst = max(worst, err)
            bad += err > 1e-4
            continue
        names = [cfg.id2label[k] for k in range(cfg.num_labels)]
        bad += set(scores) != set(names)   # the pipeline names the labels as id2label does
        mine_scores = {n: float(m[n]) for n in names} if kind == "tsv" else m["scores"]
        for n in names:
            worst = max(worst, abs(scores[n] - mine_scores[n]))
            bad += abs(scores[n] - mine_scores[n]) > 1e-4
        if problem == "multi_label_classification":
            theirs = sorted(n for n in names if scores[n] > 0.5)
            pred = m["label"] if kind == "jsonl" else [p for p in m["prediction"].split(",") if p]
            bad += theirs != sorted(pred)
        else:
            top = max(scores, key=scores.get)
            bad += top != (m["prediction"] if kind == "tsv" else m["label"])
        if i < 2:
            print("row %d: HF %s" % (i, json.dumps(h)))
    bad += len(hf) != len(mine)
    print("%d rows: %d disagreements, largest score difference %.2e" % (len(hf), bad, worst))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
