#!/usr/bin/env python3
"""Compares `bert format wikipedia` with NVIDIA's path on the same dump: WikiExtractor
(PyPI `wikiextractor`, run as NVIDIA's bertPrep.py runs it) followed by NVIDIA's
WikicorpusTextFormatting.py (imported from a local mirror of DeepLearningExamples, not
copied). Prints timings, per-article token-level similarity and the main differences.

  .venv/bin/python tools/compare_wikiextractor.py DUMP.xml.bz2 [--bert ./bert] [--work /tmp/wxcmp]

Similarity of an article: difflib.SequenceMatcher ratio over whitespace-separated tokens
(2 * matching tokens / total tokens). WikiExtractor's output is HTML-escaped by default
(&amp; &lt; &gt;); it is unescaped before comparing, since bert.c writes the characters.
"""
import argparse
import collections
import difflib
import html
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("dump")
ap.add_argument("--bert", default="./bert")
ap.add_argument("--work", default="/tmp/wxcmp")
ap.add_argument("--mirror", default="/work/.mirror/NVIDIA+DeepLearningExamples/repo")
ap.add_argument("--show", type=int, default=6, help="worst articles to show")
a = ap.parse_args()

shutil.rmtree(a.work, ignore_errors=True)
os.makedirs(a.work)
t = time.time()
subprocess.run([sys.executable, "-m", "wikiextractor.WikiExtractor", a.dump, "-o",
                os.path.join(a.work, "extracted", "wikicorpus_en"), "-b", "100M", "--processes", "1", "-q"],
               check=True, stderr=subprocess.DEVNULL)
t_wx = time.time() - t

src = subprocess.run(["git", "--git-dir", a.mirror, "show",
                      "HEAD:PyTorch/LanguageModeling/BERT/data/WikicorpusTextFormatting.py"],
                     check=True, capture_output=True, text=True).stdout
mod_path = os.path.join(a.work, "WikicorpusTextFormatting.py")
open(mod_path, "w").write(src)
spec = importlib.util.spec_from_file_location("WikicorpusTextFormatting", mod_path)
wf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wf)
ref_path = os.path.join(a.work, "wikicorpus_en_one_article_per_line.txt")
t = time.time()
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    wf.WikicorpusTextFormatting(os.path.join(a.work, "extracted", "wikicorpus_en"), ref_path, recursive=True).merge()
t_nv = time.time() - t

ours_path = os.path.join(a.work, "bert_one_article_per_line.txt")
t = time.time()
subprocess.run([a.bert, "format", "wikipedia", a.dump, "-o", ours_path, "--quiet"], check=True)
t_ours = time.time() - t

raw_ref = [l.rstrip("\n") for l in open(ref_path, encoding="utf-8") if l.strip()]
ref = [html.unescape(l) for l in raw_ref]
ours = [l.rstrip("\n") for l in open(ours_path, encoding="utf-8") if l.strip()]
mb = os.path.getsize(a.dump) / 1e6

# Align in order: an article of the reference matches our next one if similar enough.
pairs, missing, j = [], [], 0
for i, r in enumerate(ref):
    rt = r.split()
    best = None
    for k in range(j, min(j + 3, len(ours))):
        ratio = difflib.SequenceMatcher(None, rt, ours[k].split(), autojunk=False).ratio()
        if ratio > 0.5:
            best = (k, ratio)
            break
    if best:
        pairs.append((i, best[0], best[1]))
        j = best[0] + 1
    else:
        missing.append(i)
extra = len(ours) - len(pairs)

ratios = [p[2] for p in pairs] + [0.0] * len(missing)
tok_ref = sum(len(r.split()) for r in ref)
tok_ours = sum(len(o.split()) for o in ours)
matched = sum(sum(b.size for b in difflib.SequenceMatcher(None, ref[i].split(), ours[k].split(),
                                                           autojunk=False).get_matching_blocks())
              for i, k, _ in pairs)
print("dump: %s (%.1f MB compressed)" % (os.path.basename(a.dump), mb))
print("time: WikiExtractor %.2f s + NVIDIA formatting %.2f s = %.2f s;  bert format wikipedia %.2f s  (%.1fx)"
      % (t_wx, t_nv, t_wx + t_nv, t_ours, (t_wx + t_nv) / t_ours))
print("articles: reference %d, bert.c %d, aligned %d, only in reference %d, only in bert.c %d"
      % (len(ref), len(ours), len(pairs), len(missing), extra))
print("identical articles (after unescaping the reference): %d; identical raw: %d"
      % (sum(1 for i, k, _ in pairs if ref[i] == ours[k]), sum(1 for i, k, _ in pairs if raw_ref[i] == ours[k])))
print("tokens: reference %d, bert.c %d; matched %d (%.1f%% of the reference's)"
      % (tok_ref, tok_ours, matched, 100.0 * matched / max(tok_ref, 1)))
print("per-article token similarity: mean %.4f, median %.4f, min %.4f, >=0.99: %d, >=0.95: %d of %d"
      % (statistics.mean(ratios), statistics.median(ratios), min(ratios),
         sum(r >= 0.99 for r in ratios), sum(r >= 0.95 for r in ratios), len(ratios)))
only_ref, only_ours = collections.Counter(), collections.Counter()
for i, k, _ in pairs:
    rt, ot = ref[i].split(), ours[k].split()
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, rt, ot, autojunk=False).get_opcodes():
        if op in ("delete", "replace"):
            only_ref.update(rt[a1:a2])
        if op in ("insert", "replace"):
            only_ours.update(ot[b1:b2])
print("tokens most often only in the reference:", ", ".join("%r:%d" % kv for kv in only_ref.most_common(15)))
print("tokens most often only in bert.c:      ", ", ".join("%r:%d" % kv for kv in only_ours.most_common(15)))
for i in missing:
    print("only in reference: article %d: %.120r" % (i, ref[i]))
for i, k, ratio in sorted(pairs, key=lambda p: p[2])[:a.show]:
    rt, ot = ref[i].split(), ours[k].split()
    print("\narticle %d (similarity %.3f): %.60r" % (i, ratio, ref[i]))
    shown = 0
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, rt, ot, autojunk=False).get_opcodes():
        if op != "equal" and shown < 4:
            print("   %-7s ref: %.100r\n           ours: %.100r" % (op, " ".join(rt[a1:a2]), " ".join(ot[b1:b2])))
            shown += 1
