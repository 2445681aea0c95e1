"""Data-preparation benchmark: bert.c's create_pretraining_data / prepare against Google's
create_pretraining_data.py (run offline by tools/pretraining_reference.py, writing the
same HDF5 layout with h5py as NVIDIA's copy does), on the same real corpus, in one run.

  /usr/bin/python3 bench/bench_data.py [--books DIR] [--wikipedia DUMP] [--dupe_factor 5]
                                        [--skip_reference_all]

Corpus: the public-domain books in ../shared/data/gutenberg (default), optionally plus a
Wikipedia dump, formatted and sharded by `bert prepare --steps format,shard` into 4
training + 1 test shards (the sharding itself is timed in FMT's benchmark).

Reports, for phase 1 (seq 128, 20 predictions):
  1. one shard:   reference vs bert.c (1 thread, 2 threads); outputs compared
  2. all shards as one input (one process): reference vs bert.c; outputs compared
  3. `bert prepare --steps hdf5` over the shards with 1 and 2 threads (scaling)
  4. peak memory of `bert prepare` on the corpus and on the corpus three times over with
     three times the shards (memory independent of input size)
Wall time, CPU time (user + system) and peak RSS come from /usr/bin/time; MB/s and inst/s
are per wall second. MB are MB of sentence-per-line text read.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

VOCAB = "data/vocab/bert-base-uncased-vocab.txt"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, env=None):
    """Runs cmd under /usr/bin/time; returns ((wall s, CPU s), peak RSS MB, stderr).
    CPU time (user + system) is reported too: on a shared machine it is the steadier
    measure of single-threaded work."""
    full = ["/usr/bin/time", "-f", "TIME %e %U %S %M"] + cmd
    r = subprocess.run(full, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr[-3000:]))
    line = [l for l in r.stderr.splitlines() if l.startswith("TIME ")][-1]
    _, wall, user, system, kb = line.split()
    return (float(wall), float(user) + float(system)), int(kb) / 1024.0, r.stderr


def same_shards(a, b):
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        if sorted(fa.keys()) != sorted(fb.keys()):
            return False
        return all(np.array_equal(fa[k][...], fb[k][...]) for k in fa)


def instances(path):
    with h5py.File(path, "r") as f:
        return f["input_ids"].shape[0]


def env_threads(n):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(n)
    return env


def flags(dupe, seq=128, pred=20):
    return ["--vocab_file", VOCAB, "--max_seq_length", str(seq), "--max_predictions_per_seq", str(pred),
            "--dupe_factor", str(dupe), "--random_seed", "12345"]


def row(name, t, rss, mb, n, base=None):
    """t and base are (wall, CPU) pairs; speed-ups are given for both."""
    wall, cpu = t
    speed = ("", "") if base is None else ("%.1fx" % (base[0] / wall), "%.1fx" % (base[1] / cpu))
    print("| %-44s | %7.2f | %7.2f | %7.2f | %9.0f | %8.0f | %7s | %7s |"
          % (name, wall, cpu, mb / wall, n / wall, rss, speed[0], speed[1]))


def header(title):
    print("\n%s\n" % title)
    print("| %-44s | %7s | %7s | %7s | %9s | %8s | %7s | %7s |"
          % ("run", "wall s", "CPU s", "MB/s", "inst/s", "RSS MB", "x wall", "x CPU"))
    print("|%s|%s|%s|%s|%s|%s|%s|%s|" % ("-" * 46, "-" * 9, "-" * 9, "-" * 9, "-" * 11, "-" * 10, "-" * 9, "-" * 9))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--books", default=os.path.join(ROOT, "..", "shared", "data", "gutenberg"))
    ap.add_argument("--wikipedia", default=None)
    ap.add_argument("--dupe_factor", type=int, default=5)
    ap.add_argument("--skip_reference_all", action="store_true",
                    help="skip the reference's one-process run over all shards (about a minute)")
    a = ap.parse_args()
    os.chdir(ROOT)
    notes = []
    tmp = tempfile.mkdtemp(prefix="bench_data_")
    try:
        # A private copy: others may rebuild ./bert while this runs.
        bert = os.path.join(tmp, "bert")
        shutil.copy2("./bert", bert)
        work = os.path.join(tmp, "work")
        cmd = [bert, "prepare", "--quiet", "--books", a.books, "--output_dir", work, "--steps",
               "format,shard", "--n_training_shards", "4", "--n_test_shards", "1"]
        if a.wikipedia:
            cmd += ["--wikipedia", a.wikipedia]
        subprocess.run(cmd, check=True)
        shard_dir = glob.glob(os.path.join(work, "sharded_*", "*"))[0]
        shards = sorted(glob.glob(os.path.join(shard_dir, "*.txt")))
        one = [s for s in shards if s.endswith("_training_0.txt")][0]
        mb_one = os.path.getsize(one) / 1e6
        mb_all = sum(os.path.getsize(s) for s in shards) / 1e6
        print("corpus: %s%s -> %d shards, %.1f MB of sentence-per-line text; dupe_factor %d"
              % (a.books, " + " + a.wikipedia if a.wikipedia else "", len(shards), mb_all, a.dupe_factor))

        for seq, pred in ((128, 20), (512, 80)):
            header("1. one shard (%s, %.2f MB), seq %d, %d predictions"
                   % (os.path.basename(one), mb_one, seq, pred))
            ref_out = os.path.join(tmp, "ref_one.hdf5")
            t, rss, _ = timed(["/usr/bin/python3", "tools/pretraining_reference.py", "--input_file", one,
                               "--output_file", ref_out] + flags(a.dupe_factor, seq, pred))
            n = instances(ref_out)
            row("Google create_pretraining_data.py (Python)", t, rss, mb_one, n)
            base = t
            for threads in (1, 2):
                out = os.path.join(tmp, "bert_one_%d.hdf5" % threads)
                t, rss, _ = timed([bert, "create_pretraining_data", "--quiet", "--input_file", one,
                                   "--output_file", out] + flags(a.dupe_factor, seq, pred), env_threads(threads))
                row("bert.c create_pretraining_data, %d thread%s" % (threads, "s" if threads > 1 else ""),
                    t, rss, mb_one, n, base)
                notes.append("one shard, seq %d, %d thread(s): bert.c output identical to the reference: %s"
                             % (seq, threads, same_shards(ref_out, out)))

        header("2. all %d shards as one input, one process (%.1f MB)" % (len(shards), mb_all))
        pattern = os.path.join(shard_dir, "*.txt")
        bert_out = os.path.join(tmp, "bert_all.hdf5")
        ref_out = os.path.join(tmp, "ref_all.hdf5")
        base = None
        if not a.skip_reference_all:
            sec, rss, _ = timed(["/usr/bin/python3", "tools/pretraining_reference.py", "--input_file",
                                 pattern, "--output_file", ref_out] + flags(a.dupe_factor))
            row("Google create_pretraining_data.py (Python)", sec, rss, mb_all, instances(ref_out))
            base = sec
        for threads in (1, 2):
            sec, rss, _ = timed([bert, "create_pretraining_data", "--quiet", "--input_file", pattern,
                                 "--output_file", bert_out] + flags(a.dupe_factor), env_threads(threads))
            row("bert.c create_pretraining_data, %d thread%s" % (threads, "s" if threads > 1 else ""),
                sec, rss, mb_all, instances(bert_out), base)
        if base is not None:
            notes.append("all shards: bert.c output identical to the reference: %s" % same_shards(ref_out, bert_out))

        header("3. bert prepare --steps hdf5 (phase 1 only), shards in parallel")
        base = None
        for threads in (1, 2):
            sources = ["--books", a.books] + (["--wikipedia", a.wikipedia] if a.wikipedia else [])
            sec, rss, err = timed([bert, "prepare", "--output_dir", work, "--steps", "hdf5"] + sources +
                                  ["--n_training_shards", "4", "--n_test_shards", "1",
                                   "--phase2_max_seq_length", "0", "--dupe_factor", str(a.dupe_factor),
                                   "--threads", str(threads)], env_threads(threads))
            n = sum(instances(p) for p in glob.glob(os.path.join(work, "hdf5_*seq_len_128*", "*", "*.hdf5")))
            row("bert prepare, %d thread%s" % (threads, "s" if threads > 1 else ""), sec, rss, mb_all, n, base)
            base = base or sec

        header("4. peak memory of bert prepare (format+shard+hdf5) vs input size")
        for copies in (1, 3):
            books = os.path.join(tmp, "books_x%d" % copies)
            os.makedirs(books)
            for c in range(copies):
                for p in glob.glob(os.path.join(a.books, "*.txt")):
                    shutil.copy(p, os.path.join(books, "%d_%s" % (c, os.path.basename(p))))
            w = os.path.join(tmp, "work_x%d" % copies)
            sec, rss, _ = timed([bert, "prepare", "--quiet", "--books", books, "--output_dir", w,
                                 "--n_training_shards", str(4 * copies), "--n_test_shards", str(copies),
                                 "--phase2_max_seq_length", "0", "--dupe_factor", str(a.dupe_factor)])
            mb = sum(os.path.getsize(p) for p in glob.glob(os.path.join(books, "*.txt"))) / 1e6
            n = sum(instances(p) for p in glob.glob(os.path.join(w, "hdf5_*", "*", "*.hdf5")))
            row("corpus x%d (%.0f MB of books, %d shards)" % (copies, mb, 5 * copies), sec, rss, mb, n)
        print()
        for note in notes:
            print("- " + note)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
