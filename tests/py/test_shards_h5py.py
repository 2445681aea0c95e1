"""Reads shards made by `./bert create_pretraining_data` with h5py (Debian's
python3-h5py, as NVIDIA's PyTorch recipe does) and checks dataset names, shapes, dtypes,
compression and every value against the reference instances in
tests/data/pretraining/<config>.expected.txt (Google's create_pretraining_data.py, see
tools/make_pretraining_fixtures.py). Run from the repository root after `make`."""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

FIXTURES = "tests/data/pretraining"
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("  FAIL", what)


def load_expected(name):
    flags, rows = {}, []
    with open(os.path.join(FIXTURES, name + ".expected.txt")) as f:
        for line in f:
            if line.startswith("#"):
                continue
            if "|" in line:
                head, ids, pos, mids = line.split("|")
                nsl, n, a, m = map(int, head.split())
                rows.append((nsl, n, a, list(map(int, ids.split())), list(map(int, pos.split())),
                             list(map(int, mids.split()))))
            else:
                key, value = line.split()
                flags[key] = value
    assert len(rows) == int(flags["instances"])
    return flags, rows


def expected_arrays(flags, rows):
    seq, pred, n = int(flags["max_seq_length"]), int(flags["max_predictions_per_seq"]), len(rows)
    out = {"input_ids": np.zeros((n, seq), np.int32), "input_mask": np.zeros((n, seq), np.int8),
           "segment_ids": np.zeros((n, seq), np.int8),
           "masked_lm_positions": np.zeros((n, pred), np.int32),
           "masked_lm_ids": np.zeros((n, pred), np.int32),
           "next_sentence_labels": np.zeros(n, np.int8)}
    for k, (nsl, length, a, ids, pos, mids) in enumerate(rows):
        out["input_ids"][k, :length] = ids
        out["input_mask"][k, :length] = 1
        out["segment_ids"][k, a:length] = 1
        out["masked_lm_positions"][k, :len(pos)] = pos
        out["masked_lm_ids"][k, :len(mids)] = mids
        out["next_sentence_labels"][k] = nsl
    return out


DTYPES = {"input_ids": np.int32, "input_mask": np.int8, "segment_ids": np.int8,
          "masked_lm_positions": np.int32, "masked_lm_ids": np.int32,
          "next_sentence_labels": np.int8}


def run_bert(flags, outputs):
    cmd = ["./bert", "create_pretraining_data", "--quiet",
           "--input_file", flags["input_file"], "--output_file", ",".join(outputs),
           "--vocab_file", flags["vocab_file"]]
    for key in ["max_seq_length", "max_predictions_per_seq", "random_seed", "dupe_factor",
                "masked_lm_prob", "short_seq_prob"]:
        cmd += ["--" + key, flags[key]]
    for key in ["do_lower_case", "do_whole_word_mask"]:
        cmd += ["--%s=%s" % (key, "true" if flags[key] == "1" else "false")]
    return subprocess.run(cmd, capture_output=True, text=True)


def check_config(name, tmp):
    flags, rows = load_expected(name)
    want = expected_arrays(flags, rows)
    out = os.path.join(tmp, name + ".hdf5")
    r = run_bert(flags, [out])
    check(r.returncode == 0, "%s: bert failed: %s" % (name, r.stderr))
    if r.returncode != 0:
        return
    with h5py.File(out, "r") as f:
        check(sorted(f.keys()) == sorted(DTYPES), "%s: dataset names %s" % (name, sorted(f.keys())))
        for key, dtype in DTYPES.items():
            d = f[key]
            check(d.dtype == dtype, "%s/%s dtype %s" % (name, key, d.dtype))
            check(d.shape == want[key].shape, "%s/%s shape %s vs %s" % (name, key, d.shape, want[key].shape))
            check(d.compression == "gzip", "%s/%s compression %s" % (name, key, d.compression))
            same = d.shape == want[key].shape and np.array_equal(d[...], want[key])
            check(same, "%s/%s contents differ from the reference" % (name, key))
    print("  ok   %s: %d instances, all six datasets equal to the reference" % (name, len(rows)))


def check_round_robin(tmp):
    """--output_file a,b deals the shuffled instances alternately, as the reference."""
    flags, rows = load_expected("seq128")
    want = expected_arrays(flags, rows)
    outs = [os.path.join(tmp, "rr0.hdf5"), os.path.join(tmp, "rr1.hdf5")]
    r = run_bert(flags, outs)
    check(r.returncode == 0, "round robin: bert failed: %s" % r.stderr)
    if r.returncode != 0:
        return
    for k, path in enumerate(outs):
        with h5py.File(path, "r") as f:
            check(np.array_equal(f["input_ids"][...], want["input_ids"][k::2]),
                  "round robin: file %d input_ids" % k)
            check(np.array_equal(f["masked_lm_ids"][...], want["masked_lm_ids"][k::2]),
                  "round robin: file %d masked_lm_ids" % k)
    print("  ok   round-robin over two output files")


def check_unwritable():
    flags, _ = load_expected("tiny")
    r = run_bert(flags, ["/nonexistent-dir/x.hdf5"])
    check(r.returncode != 0 and "nonexistent-dir" in r.stderr, "unwritable output: %s" % r.stderr)


def main():
    if not os.access("./bert", os.X_OK):
        print("./bert is not built (run make first)")
        print("0 passed, 1 failed")
        return 1
    with tempfile.TemporaryDirectory(dir="build") as tmp:
        for name in ["seq128", "seq128_wwm", "seq512", "seq512_wwm", "seq24_cased_wwm", "tiny"]:
            check_config(name, tmp)
        check_round_robin(tmp)
        check_unwritable()
        left = [p for p in os.listdir(tmp) if ".tmp." in p or ".spool." in p]
        check(not left, "temporary files left behind: %s" % left)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
