#!/usr/bin/env python3
"""GLUE fixtures for tests/test_glue.c: small TSV files per task and what the references make
of them.

  - files: the first rows of the shared GLUE data (CoLA, SST-2, MRPC, STS-B, QNLI, RTE, WNLI;
    headers as they are) and hand-made rows in the layout of the tasks not shared here (MNLI's
    12/16 columns, QQP's 6), into tests/data/glue/<TASK>/;
  - examples: HuggingFace transformers' own GLUE processors (transformers 4.x,
    transformers.data.processors.glue) read each file;
  - features: HF's BertTokenizer (the Python WordPiece, = Google's tokenization.py) with
    Google's run_classifier.py layout and _truncate_seq_pair, at max_seq_length 32 so that
    pairs are cut;
  - metrics: scikit-learn (accuracy, f1_score, matthews_corrcoef) and scipy (pearsonr,
    spearmanr) on seeded predictions, ties and degenerate cases included.

Run with a venv holding transformers 4.x, scikit-learn and scipy (bench/setup_peer_env.sh's
.venv-bench plus `pip install scikit-learn scipy`):
    .venv-bench/bin/python tools/make_glue_fixtures.py /path/to/shared/data/glue
"""
import json
import os
import random
import sys

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import f1_score, matthews_corrcoef
from transformers import BertTokenizer
from transformers.data.processors.glue import glue_processors

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "glue")
VOCAB = os.path.join(os.path.dirname(__file__), "..", "data", "vocab", "bert-base-uncased-vocab.txt")
MAX_SEQ = 32
ROWS = 9

SHARED = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B", "qnli": "QNLI", "rte": "RTE",
          "wnli": "WNLI"}


def head_lines(path, n, header):
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    return "\n".join(lines[: n + (1 if header else 0)]) + "\n"


def made_up_files(task):
    """Rows in the layout of MNLI and QQP (not in the shared data)."""
    if task == "qqp":
        head = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"
        rows = [f"{i}\t{2*i}\t{2*i+1}\tHow do I learn C number {i}?\tWhat is the best way to learn C, {i}?\t{i % 2}"
                for i in range(ROWS)]
        test = ["id\tquestion1\tquestion2"] + [f"{i}\tIs café au lait {i} good?\tIs coffee {i} good?" for i in range(ROWS)]
        return {"train.tsv": "\n".join([head] + rows) + "\n", "dev.tsv": "\n".join([head] + rows[:5]) + "\n",
                "test.tsv": "\n".join(test) + "\n"}
    labels = ["contradiction", "entailment", "neutral"]
    head = "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t" \
           "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
    dev_head = head.replace("\tlabel1\tgold_label", "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")
    train = [f"{i}\t{i}\t{i}e\tfiction\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tThe man number {i} walks the dog "
             f"\"Rex\" home.\tA man is outside {i}.\t{labels[i % 3]}\t{labels[i % 3]}" for i in range(ROWS)]
    dev = [f"{i}\t{i}\t{i}e\tslate\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tNaïve résumé {i} of the long, long, long, long, "
           f"long, long, long, long, long, long, long, long meeting.\tIt was short {i}.\t{labels[(i + 1) % 3]}"
           f"\t{labels[i % 3]}\t{labels[i % 3]}\t{labels[i % 3]}\t{labels[i % 3]}\t{labels[(i + 1) % 3]}"
           for i in range(ROWS)]
    test = [head.rsplit("\tlabel1", 1)[0]] + [f"{i}\t{i}\t{i}e\tslate\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tA test "
                                               f"sentence {i}.\tAnother {i}." for i in range(ROWS)]
    files = {"train.tsv": "\n".join([head] + train) + "\n", "test_matched.tsv": "\n".join(test) + "\n",
             "test_mismatched.tsv": "\n".join(test) + "\n"}
    files["dev_matched.tsv"] = "\n".join([dev_head] + dev[:5]) + "\n"
    files["dev_mismatched.tsv"] = "\n".join([dev_head] + dev[4:]) + "\n"
    return files


def write_task_files(shared, task):
    folder = task.upper() if task not in SHARED else SHARED[task]
    os.makedirs(os.path.join(OUT, folder), exist_ok=True)
    if task in SHARED:
        src = os.path.join(shared, SHARED[task])
        for split in ("train.tsv", "dev.tsv", "test.tsv"):
            header = not (task == "cola" and split != "test.tsv")
            if task == "mrpc" and split == "test.tsv":   # GLUE's, made from MSR's file as GLUE made it
                lines = head_lines(os.path.join(src, "msr_paraphrase_test.txt"), ROWS, True).split("\n")
                rows = ["index\t#1 ID\t#2 ID\t#1 String\t#2 String"]
                rows += [f"{i}\t" + "\t".join(l.split("\t")[1:]) for i, l in enumerate(lines[1:]) if l]
                text = "\n".join(rows) + "\n"
            else:   # QNLI's train.tsv is not shared: its dev rows stand in (same layout)
                path = os.path.join(src, split)
                text = head_lines(path if os.path.exists(path) else os.path.join(src, "dev.tsv"), ROWS, header)
            with open(os.path.join(OUT, folder, split), "w", encoding="utf-8", newline="") as f:
                f.write(text)
    else:
        for name, text in made_up_files(task).items():
            with open(os.path.join(OUT, folder, name), "w", encoding="utf-8", newline="") as f:
                f.write(text)
    return folder


def truncate_pair(a, b, max_len):   # Google's _truncate_seq_pair
    while len(a) + len(b) > max_len:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()


def features(tok, ex):
    a = tok.tokenize(ex.text_a)
    b = tok.tokenize(ex.text_b) if ex.text_b else None
    if b is not None:
        truncate_pair(a, b, MAX_SEQ - 3)
    else:
        a = a[: MAX_SEQ - 2]
    tokens = ["[CLS]"] + a + ["[SEP]"]
    seg = [0] * len(tokens)
    if b is not None:
        tokens += b + ["[SEP]"]
        seg += [1] * (len(b) + 1)
    return tok.convert_tokens_to_ids(tokens), seg


def metric_cases():
    rng = random.Random(7)
    cases = []
    for n in (5, 40):
        labels = [rng.randint(0, 1) for _ in range(n)]
        preds = [rng.randint(0, 1) for _ in range(n)]
        cases.append({"labels": labels, "preds": preds, "acc": float(np.mean(np.array(labels) == np.array(preds))),
                      "f1": float(f1_score(labels, preds)), "mcc": float(matthews_corrcoef(labels, preds))})
    # degenerate: no positive predicted or present; all one class
    for labels, preds in (([0, 0, 1, 1], [0, 0, 0, 0]), ([0, 0, 0], [0, 0, 0]), ([1, 1, 0], [1, 1, 0])):
        cases.append({"labels": labels, "preds": preds, "acc": float(np.mean(np.array(labels) == np.array(preds))),
                      "f1": float(f1_score(labels, preds, zero_division=0)),
                      "mcc": float(matthews_corrcoef(labels, preds))})
    regress = []
    for n in (6, 50):
        x = [round(rng.uniform(0, 5), 1) for _ in range(n)]   # rounded: ties
        y = [round(v + rng.gauss(0, 1), 1) for v in x]
        regress.append({"x": x, "y": y, "pearson": float(pearsonr(x, y)[0]), "spearman": float(spearmanr(x, y)[0])})
    return cases, regress


def main():
    shared = sys.argv[1]
    tok = BertTokenizer(VOCAB, do_lower_case=True)
    expected = {"max_seq_length": MAX_SEQ, "tasks": {}}
    for task in ("cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "mnli-mm", "qnli", "rte", "wnli"):
        folder = SHARED.get(task, "MNLI" if task.startswith("mnli") else task.upper())
        if task != "mnli-mm":
            write_task_files(shared, task)
        proc = glue_processors[task]()
        d = os.path.join(OUT, folder)
        labels = proc.get_labels()
        splits = {"train": proc.get_train_examples(d), "dev": proc.get_dev_examples(d),
                  "test": proc.get_test_examples(d)}
        out = {"folder": folder, "labels": labels, "splits": {}}
        for split, examples in splits.items():
            rows = []
            for ex in examples:
                ids, seg = features(tok, ex)
                rows.append({"text_a": ex.text_a, "text_b": ex.text_b, "label": ex.label, "input_ids": ids,
                             "segment_ids": seg})
            out["splits"][split] = rows
        expected["tasks"][task] = out
    cases, regress = metric_cases()
    expected["classification"] = cases
    expected["regression"] = regress
    with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, separators=(",", ":"))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
