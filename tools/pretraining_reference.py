"""Runs Google's create_pretraining_data.py (google-research/bert) offline, without
TensorFlow, and returns its training instances as the exact arrays it would write.

The reference is read from a local mirror of github:google-research/bert (never copied
into bert.c). TensorFlow is replaced by a tiny stub that provides just what the two
reference modules touch: tf.flags, tf.logging, tf.gfile (GFile -> open, Glob -> glob),
and a TFRecordWriter / train.Example pair that captures the feature lists instead of
serialising them. The arrays therefore come from the reference's own
write_instance_to_example_files(), padding included.

Used by tools/make_pretraining_fixtures.py and bench/bench_data.py.
"""
import glob
import os
import subprocess
import sys
import tempfile
import types

DEFAULT_MIRROR = "/work/.mirror/google-research+bert/repo"


class _FlagValues:
    pass


def _make_tensorflow_stub(captured):
    tf = types.ModuleType("tensorflow")
    flags = types.SimpleNamespace()
    values = _FlagValues()

    def define(name, default, *_args, **_kw):
        setattr(values, name, default)

    flags.DEFINE_string = flags.DEFINE_bool = flags.DEFINE_integer = define
    flags.DEFINE_float = flags.DEFINE_boolean = define
    flags.mark_flag_as_required = lambda *_a, **_k: None
    flags.FLAGS = values
    tf.flags = flags
    tf.logging = types.SimpleNamespace(info=lambda *a, **k: None, INFO=0,
                                       set_verbosity=lambda *a: None)
    tf.gfile = types.SimpleNamespace(
        GFile=lambda path, mode="r": open(path, mode, encoding="utf-8"),
        Glob=lambda pattern: sorted(glob.glob(pattern)))

    class Int64List:
        def __init__(self, value):
            self.value = list(value)

    class FloatList:
        def __init__(self, value):
            self.value = list(value)

    class Feature:
        def __init__(self, int64_list=None, float_list=None):
            self.int64_list = int64_list or Int64List([])
            self.float_list = float_list or FloatList([])

    class Features:
        def __init__(self, feature):
            self.feature = feature

    class Example:
        def __init__(self, features):
            self.features = features

        def SerializeToString(self):
            out = {}
            for name, feat in self.features.feature.items():
                out[name] = feat.int64_list.value or feat.float_list.value
            return out

    class TFRecordWriter:
        def __init__(self, path):
            self.path = path

        def write(self, record):
            captured.append(record)

        def close(self):
            pass

    tf.train = types.SimpleNamespace(Int64List=Int64List, FloatList=FloatList,
                                     Feature=Feature, Features=Features, Example=Example)
    tf.python_io = types.SimpleNamespace(TFRecordWriter=TFRecordWriter)
    return tf


class Reference:
    """Loads the reference modules once; run() may be called many times."""

    def __init__(self, mirror=DEFAULT_MIRROR):
        self.captured = []
        sys.modules["tensorflow"] = _make_tensorflow_stub(self.captured)
        self.srcdir = tempfile.mkdtemp(prefix="bert_reference_")
        for name in ("create_pretraining_data.py", "tokenization.py"):
            text = subprocess.run(["git", "-C", mirror, "show", "HEAD:" + name],
                                  check=True, capture_output=True).stdout
            with open(os.path.join(self.srcdir, name), "wb") as f:
                f.write(text)
        sys.path.insert(0, self.srcdir)
        import create_pretraining_data
        import tokenization
        self.cpd = create_pretraining_data
        self.tokenization = tokenization

    def tokenizer(self, vocab_file, do_lower_case):
        return self.tokenization.FullTokenizer(vocab_file=vocab_file,
                                               do_lower_case=do_lower_case)

    def run(self, input_files, vocab_file, do_lower_case=True, do_whole_word_mask=False,
            max_seq_length=128, max_predictions_per_seq=20, random_seed=12345,
            dupe_factor=10, masked_lm_prob=0.15, short_seq_prob=0.1):
        """Returns a list of dicts: input_ids, input_mask, segment_ids,
        masked_lm_positions, masked_lm_ids, masked_lm_weights, next_sentence_labels."""
        import random
        cpd = self.cpd
        cpd.FLAGS.do_whole_word_mask = do_whole_word_mask
        tokenizer = self.tokenizer(vocab_file, do_lower_case)
        files = []
        for pattern in input_files.split(","):
            files.extend(sorted(glob.glob(pattern)))
        rng = random.Random(random_seed)
        instances = cpd.create_training_instances(
            files, tokenizer, max_seq_length, dupe_factor, short_seq_prob,
            masked_lm_prob, max_predictions_per_seq, rng)
        del self.captured[:]
        cpd.write_instance_to_example_files(instances, tokenizer, max_seq_length,
                                            max_predictions_per_seq, ["captured"])
        return list(self.captured)


def write_hdf5(records, path, max_seq_length, max_predictions_per_seq):
    """Writes captured records as NVIDIA's create_pretraining_data.py does (numpy arrays,
    h5py datasets with compression='gzip')."""
    import h5py
    import numpy as np
    n = len(records)
    arrays = {
        "input_ids": (np.zeros([n, max_seq_length], "int32"), "i4"),
        "input_mask": (np.zeros([n, max_seq_length], "int32"), "i1"),
        "segment_ids": (np.zeros([n, max_seq_length], "int32"), "i1"),
        "masked_lm_positions": (np.zeros([n, max_predictions_per_seq], "int32"), "i4"),
        "masked_lm_ids": (np.zeros([n, max_predictions_per_seq], "int32"), "i4"),
        "next_sentence_labels": (np.zeros(n, "int32"), "i1"),
    }
    for k, r in enumerate(records):
        for name, (array, _) in arrays.items():
            array[k] = r[name][0] if name == "next_sentence_labels" else r[name]
    with h5py.File(path, "w") as f:
        for name, (array, dtype) in arrays.items():
            f.create_dataset(name, data=array, dtype=dtype, compression="gzip")


def main():
    """Command line with Google's flags; writes the NVIDIA HDF5 layout with h5py."""
    import argparse
    ap = argparse.ArgumentParser(description="Google's create_pretraining_data.py, offline")
    ap.add_argument("--input_file", required=True)
    ap.add_argument("--output_file", required=True)
    ap.add_argument("--vocab_file", required=True)
    ap.add_argument("--do_lower_case", type=int, default=1)
    ap.add_argument("--do_whole_word_mask", type=int, default=0)
    ap.add_argument("--max_seq_length", type=int, default=128)
    ap.add_argument("--max_predictions_per_seq", type=int, default=20)
    ap.add_argument("--random_seed", type=int, default=12345)
    ap.add_argument("--dupe_factor", type=int, default=10)
    ap.add_argument("--masked_lm_prob", type=float, default=0.15)
    ap.add_argument("--short_seq_prob", type=float, default=0.1)
    ap.add_argument("--mirror", default=DEFAULT_MIRROR)
    a = ap.parse_args()
    records = Reference(a.mirror).run(
        a.input_file, a.vocab_file, do_lower_case=bool(a.do_lower_case),
        do_whole_word_mask=bool(a.do_whole_word_mask), max_seq_length=a.max_seq_length,
        max_predictions_per_seq=a.max_predictions_per_seq, random_seed=a.random_seed,
        dupe_factor=a.dupe_factor, masked_lm_prob=a.masked_lm_prob,
        short_seq_prob=a.short_seq_prob)
    write_hdf5(records, a.output_file, a.max_seq_length, a.max_predictions_per_seq)
    print("wrote %d instances to %s" % (len(records), a.output_file), file=sys.stderr)


if __name__ == "__main__":
    main()
