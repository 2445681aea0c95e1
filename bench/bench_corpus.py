"""Corpus-formatting benchmark: bert.c's `format books`, `format wikipedia` and `shard`
against NVIDIA's Python path on the same real data, side by side in one run:

  books      NVIDIA BookscorpusTextFormatting.py          vs  bert format books --strip_gutenberg=false
  wikipedia  WikiExtractor (1 process) + WikicorpusTextFormatting  vs  bert format wikipedia
  sharding   NVIDIA TextSharding.py + nltk punkt           vs  bert shard (1 and 2 threads)
  memory     bert shard / TextSharding on the corpus and on it 4x over (peak RSS)

NVIDIA's scripts are imported from a local mirror of DeepLearningExamples (tools/*_reference.py),
not copied. Every pair of outputs is compared byte for byte (the WikiExtractor output after
undoing its HTML escaping). Wall time and peak RSS come from /usr/bin/time.

  .venv/bin/python tools/make_punkt_model.py --nltk-dir /tmp/nltk_data
  NLTK_DATA=/tmp/nltk_data .venv/bin/python bench/bench_corpus.py [--shared ../shared/data]
"""
import argparse
import glob
import html
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIRROR = "/work/.mirror/NVIDIA+DeepLearningExamples/repo"


def timed(cmd, **kw):
    r = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M %U %S"] + cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr[-3000:]))
    line = [l for l in r.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    return float(line[1]), int(line[2]) / 1024.0, float(line[3]) + float(line[4])


def nvidia_module_runner(tmp, module, body):
    """A small script that imports NVIDIA's module from the mirror and runs body."""
    path = os.path.join(tmp, "run_%s.py" % module)
    with open(path, "w") as f:
        f.write("import glob, importlib.util, subprocess, sys, contextlib, io\n"
                "src = subprocess.run(['git', '--git-dir', %r, 'show', "
                "'HEAD:PyTorch/LanguageModeling/BERT/data/%s.py'], check=True, capture_output=True, text=True).stdout\n"
                "open(%r, 'w').write(src)\n"
                "spec = importlib.util.spec_from_file_location(%r, %r)\n"
                "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
                "real = glob.glob; m.glob.glob = lambda *a, **k: sorted(real(*a, **k))\n"
                "with contextlib.redirect_stdout(io.StringIO()):\n    %s\n"
                % (MIRROR, module, os.path.join(tmp, module + ".py"), module, os.path.join(tmp, module + ".py"), body))
    return path


def same(a, b, unescape=False):
    x, y = open(a, encoding="utf-8").read(), open(b, encoding="utf-8").read()
    return (html.unescape(x) if unescape else x) == y


def row(name, mb, ref, ours, extra=""):
    """wall s (CPU s), MB/s of wall time, peak RSS; speed-up in wall time and in CPU time."""
    print("%-34s %7.2f MB | %6.2f s (%6.2f) %6.1f MB/s %5.0f MB | %6.3f s (%6.3f) %6.1f MB/s %4.0f MB | %5.1fx %5.1fx %s"
          % (name, mb, ref[0], ref[2], mb / ref[0], ref[1], ours[0], ours[2], mb / ours[0], ours[1],
             ref[0] / ours[0], ref[2] / max(ours[2], 1e-3), extra))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--bert", default=os.path.join(ROOT, "bert"))
    a = ap.parse_args()
    books = os.path.join(a.shared, "gutenberg")
    dump = glob.glob(os.path.join(a.shared, "wikipedia", "*.bz2"))[0]
    py = sys.executable
    tmp = tempfile.mkdtemp(prefix="bench_corpus_")
    print("%-34s %10s | %-37s | %-37s | %s" % ("step", "input", "NVIDIA / Python: wall (cpu) MB/s RSS",
                                                "bert.c: wall (cpu) MB/s RSS", "speed-up wall, cpu"))

    # books
    books_mb = sum(os.path.getsize(f) for f in glob.glob(os.path.join(books, "*.txt"))) / 1e6
    ref_books = os.path.join(tmp, "ref_books.txt")
    runner = nvidia_module_runner(tmp, "BookscorpusTextFormatting",
                                  "m.BookscorpusTextFormatting(%r, %r, recursive=True).merge()" % (books, ref_books))
    ref = timed([py, runner])
    ours_books = os.path.join(tmp, "books.txt")
    ours = timed([a.bert, "format", "books", books, "-o", ours_books, "--strip_gutenberg=false", "--quiet"])
    row("format books (14 Gutenberg books)", books_mb, ref, ours,
        "identical" if same(ref_books, ours_books) else "DIFFERENT")

    # wikipedia
    xml_mb = int(subprocess.run("bzcat '%s' | wc -c" % dump, shell=True, capture_output=True, text=True).stdout) / 1e6
    extracted = os.path.join(tmp, "extracted", "wikicorpus_en")
    wx = timed([py, "-m", "wikiextractor.WikiExtractor", dump, "-o", extracted, "-b", "100M", "--processes", "1", "-q"])
    ref_wiki = os.path.join(tmp, "ref_wiki.txt")
    runner = nvidia_module_runner(tmp, "WikicorpusTextFormatting",
                                  "m.WikicorpusTextFormatting(%r, %r, recursive=True).merge()" % (extracted, ref_wiki))
    nv = timed([py, runner])
    ours_wiki = os.path.join(tmp, "wiki.txt")
    ours = timed([a.bert, "format", "wikipedia", dump, "-o", ours_wiki, "--quiet"])
    ref_docs = [l for l in html.unescape(open(ref_wiki, encoding="utf-8").read()).split("\n") if l.strip()]
    our_docs = [l for l in open(ours_wiki, encoding="utf-8").read().split("\n") if l.strip()]
    n_same = sum(x == y for x, y in zip(ref_docs, our_docs)) if len(ref_docs) == len(our_docs) else -1
    row("format wikipedia (enwiki excerpt)", xml_mb, (wx[0] + nv[0], max(wx[1], nv[1]), wx[2] + nv[2]), ours,
        "%d/%d articles identical" % (n_same, len(ref_docs)))

    # the same dump as ~100 bzip2 streams (as Wikipedia's multistream dumps): 1 vs 2 threads
    import bz2
    xml = bz2.open(dump).read().decode("utf-8")
    starts, at = [], xml.find("  <page>")
    while at >= 0:
        starts.append(at)
        at = xml.find("  <page>", at + 1)
    starts = starts[2::2]  # two pages a stream
    bounds = [0] + starts + [len(xml)]
    multi = os.path.join(tmp, "multistream.xml.bz2")
    with open(multi, "wb") as f:
        for lo, hi in zip(bounds, bounds[1:]):
            f.write(bz2.compress(xml[lo:hi].encode("utf-8"), 9))
    for threads in (1, 2):
        out = os.path.join(tmp, "wiki_ms%d.txt" % threads)
        env1 = dict(os.environ, OMP_NUM_THREADS=str(threads))
        ours = timed([a.bert, "format", "wikipedia", multi, "-o", out, "--quiet"], env=env1)
        row("format wikipedia, %d streams, %d thr" % (len(bounds) - 1, threads), xml_mb,
            (wx[0] + nv[0], max(wx[1], nv[1]), wx[2] + nv[2]), ours,
            "same as single stream" if open(out).read() == open(ours_wiki).read() else "DIFFERENT")

    # sharding
    inputs = "%s,%s" % (ours_books, ours_wiki)
    shard_mb = (os.path.getsize(ours_books) + os.path.getsize(ours_wiki)) / 1e6
    env = dict(os.environ)
    ref_dir, our_dir = os.path.join(tmp, "ref_shards"), os.path.join(tmp, "shards")
    shard_args = ["--n_training_shards", "8", "--n_test_shards", "2", "--output_name_prefix", "books_wiki_en_corpus"]
    ref = timed([py, os.path.join(ROOT, "tools", "shard_reference.py"), "--input_files", inputs,
                 "--output_dir", ref_dir] + shard_args, env=env)
    for threads in (1, 2):
        shutil.rmtree(our_dir, ignore_errors=True)
        ours = timed([a.bert, "shard", "--input_files", inputs, "--output_dir", our_dir, "--quiet",
                      "--threads", str(threads)] + shard_args)
        files = sorted(os.listdir(ref_dir))
        ok = files == sorted(os.listdir(our_dir)) and all(
            same(os.path.join(ref_dir, f), os.path.join(our_dir, f)) for f in files)
        row("shard 8+2, %d thread%s" % (threads, "s" if threads > 1 else ""), shard_mb, ref, ours,
            "%d shards identical" % len(files) if ok else "DIFFERENT")

    # memory against input size: the same corpus 4 and 16 times over
    bigs = []
    for times in (4, 16):
        bigs.append(os.path.join(tmp, "big%d.txt" % times))
        with open(bigs[-1], "w") as f:
            for _ in range(times):
                f.write(open(ours_books).read())
                f.write(open(ours_wiki).read())
    for name, inp in (("shard, corpus x1", inputs), ("shard, corpus x4", bigs[0]), ("shard, corpus x16", bigs[1])):
        mb = sum(os.path.getsize(p) for p in inp.split(",")) / 1e6
        shutil.rmtree(ref_dir, ignore_errors=True)
        shutil.rmtree(our_dir, ignore_errors=True)
        ours = timed([a.bert, "shard", "--input_files", inp, "--output_dir", our_dir, "--quiet"] + shard_args)
        if inp == bigs[1]:  # the reference would take minutes here; its memory trend shows at x4
            print("%-34s %7.2f MB | %37s | %6.3f s (%6.3f) %6.1f MB/s %4.0f MB |"
                  % (name, mb, "(not run: minutes)", ours[0], ours[2], mb / ours[0], ours[1]))
            continue
        ref = timed([py, os.path.join(ROOT, "tools", "shard_reference.py"), "--input_files", inp,
                     "--output_dir", ref_dir] + shard_args, env=env)
        row(name, mb, ref, ours)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
