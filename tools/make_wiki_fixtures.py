#!/usr/bin/env python3
"""Builds the Wikipedia fixtures of tests/test_format.c (test_wiki_*) from the real enwiki dump
excerpt in ../shared/data/wikipedia (CC BY-SA 3.0 / GFDL):

  wiki_sample.xml.bz2            the dump's <siteinfo> and a few of its <page>s, verbatim:
                                 a redirect, a page outside namespace 0, and articles
  wiki_sample_expected.txt       what NVIDIA's path makes of it -- WikiExtractor (PyPI
                                 wikiextractor, as bertPrep.py runs it) then NVIDIA's
                                 WikicorpusTextFormatting.py (imported from a local mirror) --
                                 with WikiExtractor's HTML escaping undone (html.unescape)
  wiki_sample_truncated.xml.bz2  the .bz2 cut in the middle
  wiki_sample_truncated.xml      the XML cut inside a page
  wiki_sample_multistream.xml.bz2  the sample as 12 bzip2 streams (header + 2 pages, then
                                 one page each), as in Wikipedia's multistream dumps
  wiki_sample_multistream_split_page.xml.bz2  two streams split inside a page

  .venv/bin/python tools/make_wiki_fixtures.py [--mirror /work/.mirror/NVIDIA+DeepLearningExamples/repo]
"""
import argparse
import bz2
import contextlib
import glob
import html
import importlib.util
import io
import os
import subprocess
import sys
import tempfile

DUMP = os.path.join(os.environ.get("BERT_SHARED_DATA", "../shared/data"), "wikipedia",
                    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
OUT = "tests/data/corpus"
TITLES = ["AccessibleComputing", "Wikipedia:Adding Wikipedia articles to Nupedia",
          "Algorithms (journal)", "Aa River", "Answer", "Abstract (law)", "Affirming the consequent",
          "Actrius", "Alain Connes", "Agnostida", "Appellate court", "Arithmetic mean", "Allan Dwan"]

ap = argparse.ArgumentParser()
ap.add_argument("--mirror", default="/work/.mirror/NVIDIA+DeepLearningExamples/repo")
a = ap.parse_args()

xml = bz2.open(DUMP).read().decode("utf-8")
head = xml[:xml.index("  <page>")]
pages = {}
pos = 0
while True:
    s = xml.find("  <page>", pos)
    if s < 0:
        break
    e = xml.index("</page>", s) + len("</page>\n")
    chunk = xml[s:e]
    title = chunk[chunk.index("<title>") + 7:chunk.index("</title>")]
    pages[html.unescape(title)] = chunk
    pos = e
sample = head + "".join(pages[t] for t in TITLES) + "</mediawiki>\n"
data = sample.encode("utf-8")
with open(os.path.join(OUT, "wiki_sample.xml.bz2"), "wb") as f:
    f.write(bz2.compress(data, 9))
compressed = bz2.compress(data, 9)
with open(os.path.join(OUT, "wiki_sample_truncated.xml.bz2"), "wb") as f:
    f.write(compressed[:len(compressed) // 2])
# The same XML as a multi-stream file (as Wikipedia's multistream dumps are made): the
# header and first two pages, then one stream per page; and a variant whose second stream
# boundary falls inside a page (it must still be read right, serially).
bounds = [0] + [sample.index("  <page>", sample.index("<title>%s</title>" % html.escape(t, quote=False)) - 200)
                for t in TITLES[2:]] + [len(sample)]
streams = [bz2.compress(sample[a:b].encode("utf-8"), 9) for a, b in zip(bounds, bounds[1:])]
with open(os.path.join(OUT, "wiki_sample_multistream.xml.bz2"), "wb") as f:
    f.write(b"".join(streams))
mid = len(sample) // 2  # inside a page: two ranges of about equal size, the cut mid-page
assert "<page>" not in sample[mid - 10:mid + 10] and "</page>" not in sample[mid - 10:mid + 10]
with open(os.path.join(OUT, "wiki_sample_multistream_split_page.xml.bz2"), "wb") as f:
    f.write(bz2.compress(sample[:mid].encode("utf-8"), 9) + bz2.compress(sample[mid:].encode("utf-8"), 9))
cut = sample.index("<text", sample.index("Affirming the consequent")) + 2000
with open(os.path.join(OUT, "wiki_sample_truncated.xml"), "w", encoding="utf-8", newline="\n") as f:
    f.write(sample[:cut])

with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "wiki_sample.xml.bz2")
    with open(src, "wb") as f:
        f.write(compressed)
    extracted = os.path.join(tmp, "extracted", "wikicorpus_en")
    subprocess.run([sys.executable, "-m", "wikiextractor.WikiExtractor", src, "-o", extracted,
                    "-b", "100M", "--processes", "1", "-q"], check=True, stderr=subprocess.DEVNULL)
    code = subprocess.run(["git", "--git-dir", a.mirror, "show",
                           "HEAD:PyTorch/LanguageModeling/BERT/data/WikicorpusTextFormatting.py"],
                          check=True, capture_output=True, text=True).stdout
    mod = os.path.join(tmp, "WikicorpusTextFormatting.py")
    open(mod, "w").write(code)
    spec = importlib.util.spec_from_file_location("WikicorpusTextFormatting", mod)
    wf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wf)
    merged = os.path.join(tmp, "merged.txt")
    with contextlib.redirect_stdout(io.StringIO()):
        wf.WikicorpusTextFormatting(extracted, merged, recursive=True).merge()
    text = open(merged, encoding="utf-8").read()
with open(os.path.join(OUT, "wiki_sample_expected.txt"), "w", encoding="utf-8", newline="\n") as f:
    f.write(html.unescape(text))
print("%d pages, %d bytes of XML, %d articles expected" % (len(TITLES), len(data), text.count("\n\n")))
