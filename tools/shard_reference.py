#!/usr/bin/env python3
"""Reference sharding: runs NVIDIA's TextSharding.py (DeepLearningExamples,
PyTorch/LanguageModeling/BERT/data/TextSharding.py) offline, as bertPrep.py runs it, so its
shards can be compared byte for byte with `bert shard`. Nothing of NVIDIA's code is copied
here: the module is imported from a local mirror of the repository.

  NLTK_DATA=/tmp/nltk_data .venv/bin/python tools/shard_reference.py \
      --mirror /work/.mirror/NVIDIA+DeepLearningExamples/repo \
      --input_files a.txt,b.txt --output_dir D --output_name_prefix P \
      --n_training_shards N --n_test_shards M [--fraction_test_set 0.1]

NLTK_DATA must hold the English punkt_tab model (tools/make_punkt_model.py --nltk-dir).
"""
import argparse
import contextlib
import importlib.util
import io
import os
import subprocess
import sys
import tempfile

import nltk

ap = argparse.ArgumentParser()
ap.add_argument("--mirror", default="/work/.mirror/NVIDIA+DeepLearningExamples/repo")
ap.add_argument("--input_files", required=True)
ap.add_argument("--output_dir", required=True)
ap.add_argument("--output_name_prefix", default="corpus")
ap.add_argument("--n_training_shards", type=int, default=256)
ap.add_argument("--n_test_shards", type=int, default=256)
ap.add_argument("--fraction_test_set", type=float, default=0.1)
a = ap.parse_args()

# The mirror is a bare git repository: take the file from HEAD.
source = subprocess.run(
    ["git", "--git-dir", os.path.join(a.mirror, ".git") if os.path.isdir(os.path.join(a.mirror, ".git")) else a.mirror,
     "show", "HEAD:PyTorch/LanguageModeling/BERT/data/TextSharding.py"],
    check=True, capture_output=True, text=True).stdout
nltk.download = lambda *args, **kw: True  # offline: the model is already under NLTK_DATA
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "TextSharding.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("TextSharding", path)
    ts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ts)

os.makedirs(a.output_dir, exist_ok=True)
log = io.StringIO()
with contextlib.redirect_stdout(log):
    sharding = ts.Sharding(a.input_files.split(","), os.path.join(a.output_dir, a.output_name_prefix),
                           a.n_training_shards, a.n_test_shards, a.fraction_test_set)
    sharding.load_articles()
    sharding.segment_articles_into_sentences(ts.NLTKSegmenter())
    sharding.distribute_articles_over_shards()
    sharding.write_shards_to_disk()
print("reference: %d articles -> %s" % (len(sharding.articles), a.output_dir), file=sys.stderr)
