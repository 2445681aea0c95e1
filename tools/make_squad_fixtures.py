"""Fixtures for bert.c's SQuAD data side (tests/test_squad.c): Google's own run_squad.py
functions (google-research/bert) run on real SQuAD v1.1 dev paragraphs.

  /usr/bin/python3 tools/make_squad_fixtures.py REFERENCE_DIR [--data DIR] [--out DIR]
                                                [--reuse-dev-counts]

REFERENCE_DIR holds Google's run_squad.py and tokenization.py (from github:google-research/bert,
e.g. `git show HEAD:run_squad.py` from a clone; never copied into bert.c). run_squad.py imports TensorFlow, modeling
and optimization at the top; the functions used here (read_squad_examples,
convert_examples_to_features, write_predictions and what they call) are pure Python, so
those modules are replaced by stubs: tf.flags keeps the flag defaults on an object the script
sets (version_2_with_negative, null_score_diff_threshold), tf.logging collects the
messages, tf.gfile opens files.

Input (--data, default ../shared/data): squad/v1.1/dev-v1.1.json and
vocab/bert-base-{uncased,cased}-vocab.txt.

Outputs in tests/data/squad/ (--out):
  subset_v1.json     the chosen paragraphs (PARAGRAPHS below, up to 2 questions each) in
                     SQuAD's layout, one answer per question (training needs exactly one),
                     plus planted questions: an answer_start that misses its text ("Could not
                     find answer"), a question longer than max_query_length, an answer that
                     is part of a word, an answer starting on a space
  subset_v2.json     the same in SQuAD 2.0's layout: every third question impossible
                     (answers [], plausible_answers, is_impossible true)
  features.json      at max_seq_length 128, doc_stride 64, max_query_length 64 (so windows
                     overlap and max context decides): the prediction-mode features of
                     subset_v1 with every field; the training-mode examples and features
                     (positions) of subset_v1 and subset_v2; both modes of edge_v2 at
                     24/5/6; counts and digests of all features of the whole dev set at
                     384/128/64 (about a minute; --reuse-dev-counts keeps the old ones)
  predictions_*.json, nbest_predictions_*.json, null_odds_v2.json
                     write_predictions over synthetic logits (logits() below, which the
                     test computes the same way): v1 uncased n_best 6, v2 uncased n_best 5
                     at threshold 0 and at the smallest positive null-score difference, v1
                     cased n_best 3 with max_answer_length 12; predict_runs.json lists them
  edge_v2.json       EDGE below (awkward characters), its features in features.json
  json_format.json   json.dumps(indent=4) of a hand-made n-best dict with awkward strings
                     and floats (the writer's formatting), with its input as data
"""
import argparse
import collections
import copy
import json
import os
import struct
import sys
import tempfile
import types

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# (article title, paragraph index, why). Up to 2 questions of each.
PARAGRAPHS = [
    ("Super_Bowl_50", 0, "answers improved by _improve_answer_span (\"Santa Clara, California.\")"),
    ("Warsaw", 0, "accents and Polish letters (Skłodowska)"),
    ("Warsaw", 21, "IPA characters, 225 tokens: several windows"),
    ("Warsaw", 45, "Śródmieście, 278 tokens"),
    ("Normans", 15, "378 tokens: many overlapping windows"),
    ("Oxygen", 7, "newlines inside the context"),
    ("Yuan_dynasty", 4, "16 [UNK] tokens (Chinese/Mongolian script)"),
    ("Harvard_University", 4, "zero-width spaces inside a word (get_final_text fails to align)"),
    ("Rhine", 6, "byte order marks inside words, primes and degrees"),
    ("Rhine", 4, "ß (Gaißau, Fußach)"),
    ("Nikola_Tesla", 0, "Cyrillic"),
]
QUESTIONS_PER_PARAGRAPH = 2
SEQ, STRIDE, QUERY = 128, 64, 64


def load_reference(folder):
    """Imports run_squad and tokenization from folder with TensorFlow stubbed out."""
    tf = types.ModuleType("tensorflow")
    flag_values = types.SimpleNamespace()

    def define(name, default, *_a, **_k):
        setattr(flag_values, name, default)

    tf.flags = types.SimpleNamespace(DEFINE_string=define, DEFINE_bool=define, DEFINE_integer=define,
                                     DEFINE_float=define, DEFINE_boolean=define, FLAGS=flag_values,
                                     mark_flag_as_required=lambda *a, **k: None)
    messages = []
    tf.logging = types.SimpleNamespace(info=lambda m, *a: messages.append(m % a if a else m),
                                       warning=lambda m, *a: messages.append(m % a if a else m),
                                       INFO=0, set_verbosity=lambda *a: None)
    tf.gfile = types.SimpleNamespace(Open=lambda p, m="r": open(p, m, encoding="utf-8"),
                                     GFile=lambda p, m="r": open(p, m, encoding="utf-8"))
    sys.modules["tensorflow"] = tf
    sys.modules["modeling"] = types.ModuleType("modeling")
    sys.modules["optimization"] = types.ModuleType("optimization")
    sys.path.insert(0, os.path.abspath(folder))
    import run_squad  # noqa: E402
    import tokenization  # noqa: E402
    return run_squad, tokenization, flag_values, messages


# ---- the input subsets ------------------------------------------------------------------

def find_paragraph(dev, title, index):
    for article in dev["data"]:
        if article["title"] == title:
            return article["paragraphs"][index]
    raise KeyError(title)


def planted_questions(paras):
    """Questions added on purpose (ids ending in _planted_*), each testing one rule."""
    sb, normans, rhine4 = paras[0], paras[4], paras[9]
    ctx = rhine4["context"]
    out = []
    # answer_start 7 characters late: its words no longer hold the text -> left out in training
    q = sb["qas"][0]
    a = q["answers"][0]
    out.append((sb, {"id": q["id"] + "_planted_not_found", "question": q["question"],
                     "answers": [{"text": a["text"], "answer_start": a["answer_start"] + 7}]}))
    # > 64 query tokens: truncated to max_query_length, leaving 61 document tokens per window
    long_q = ("Which of the many Norman leaders, counts, dukes and kings mentioned in this long "
              "passage about their campaigns in southern Italy, Sicily, the Balkans and the "
              "Byzantine Empire, during the eleventh and twelfth centuries, according to the chronicles, is said to have "
              "fought against Alexius Komnenos and besieged the city of Dyrrachium?")
    out.append((normans, {"id": "normans_planted_long_question", "question": long_q,
                          "answers": [normans["qas"][0]["answers"][0]]}))
    # "Austria" inside the word "Austrian": no token span equals it, the whole word is kept
    at = ctx.index("Austrian towns")
    out.append((rhine4, {"id": "rhine_planted_part_of_word", "question": "Which country are the towns in?",
                         "answers": [{"text": "Austria", "answer_start": at}]}))
    # the answer text starts with the space before its word: start is the previous word
    at = ctx.index(" Lake Constance")
    out.append((rhine4, {"id": "rhine_planted_leading_space", "question": "Into which lake does the Rhine flow?",
                         "answers": [{"text": " Lake Constance", "answer_start": at}]}))
    return out


def make_subsets(dev):
    paras = []
    for title, index, _why in PARAGRAPHS:
        p = copy.deepcopy(find_paragraph(dev, title, index))
        p["qas"] = p["qas"][:QUESTIONS_PER_PARAGRAPH]
        for q in p["qas"]:
            q["answers"] = q["answers"][:1]
        paras.append(p)
    for para, q in planted_questions(paras):
        para["qas"].append(q)
    v1 = {"version": "1.1", "data": [{"title": "bert.c SQuAD fixture (dev-v1.1 excerpts)", "paragraphs": paras}]}
    v2 = copy.deepcopy(v1)
    v2["version"] = "v2.0"
    k = 0
    for p in v2["data"][0]["paragraphs"]:
        for q in p["qas"]:
            impossible = k % 3 == 1 and "planted" not in q["id"]
            q["is_impossible"] = impossible
            if impossible:
                q["plausible_answers"], q["answers"] = q["answers"], []
            k += 1
    return v1, v2


# A hand-made SQuAD 2.0 file of awkward characters: U+202F (a word break) and U+00A0 (not
# one), a zero-width space, tab and CRLF, an emoji, CJK, an answer inside "(1895-1943).",
# an impossible question, a repeated id, an answer starting on the leading whitespace
# ("Could not find answer" here too), and a paragraph with no WordPiece token at all.
EDGE = {"version": "v2.0", "data": [{"title": "edge", "paragraphs": [
    {"context": "  Lead\u202fnarrow\u00a0nbsp \u200bzero\ttab\r\nend (1895-1943). Caf\u00e9 \u5143\u671d \U0001F600!",
     "qas": [{"id": "a", "question": "Which year?", "is_impossible": False,
              "answers": [{"text": "1895", "answer_start": 35}]},
             {"id": "b", "question": "None?", "is_impossible": True, "answers": [],
              "plausible_answers": [{"text": "Caf\u00e9", "answer_start": 47}]},
             {"id": "a", "question": "Lead?", "is_impossible": False,
              "answers": [{"text": " Lead", "answer_start": 1}]}]},
    {"context": "\u200b", "qas": [{"id": "c", "question": "Nothing?", "is_impossible": False,
                                   "answers": [{"text": "\u200b", "answer_start": 0}]}]}]}]}
EDGE_CONFIG = (24, 5, 6)   # windows of 16 - query tokens, 5 apart


# ---- features ---------------------------------------------------------------------------

def convert(rs, examples, tokenizer, seq, stride, query, is_training):
    out = []
    rs.convert_examples_to_features(examples, tokenizer, seq, stride, query, is_training, out.append)
    return out


def feature_json(f):
    """Every field of an InputFeatures; maps as [first position, values...] (the keys are
    the consecutive positions of the document tokens)."""
    keys = sorted(f.token_to_orig_map)
    assert keys == list(range(keys[0], keys[0] + len(keys))) and sorted(f.token_is_max_context) == keys
    return {"unique_id": f.unique_id, "example_index": f.example_index, "doc_span_index": f.doc_span_index,
            "tokens": " ".join(f.tokens),
            "token_to_orig_map": [keys[0]] + [f.token_to_orig_map[k] for k in keys],
            "token_is_max_context": [keys[0]] + [int(f.token_is_max_context[k]) for k in keys],
            "input_ids": f.input_ids, "input_mask": "".join(map(str, f.input_mask)),
            "segment_ids": "".join(map(str, f.segment_ids)),
            "start_position": f.start_position, "end_position": f.end_position}


def read(rs, flags, messages, path, is_training, v2):
    flags.version_2_with_negative = v2
    del messages[:]
    examples = rs.read_squad_examples(path, is_training)
    not_found = sum(m.startswith("Could not find answer") for m in messages)
    return examples, not_found


def training_json(rs, flags, messages, path, tokenizer, v2, improved):
    """Training mode: the examples and the features' positions; `improved` counts the
    answers _improve_answer_span moved (the reference's function, watched)."""
    examples, not_found = read(rs, flags, messages, path, True, v2)
    original = rs._improve_answer_span

    def watched(doc_tokens, start, end, tok, text):
        better = original(doc_tokens, start, end, tok, text)
        improved[0] += better != (start, end)
        return better

    rs._improve_answer_span = watched
    feats = convert(rs, examples, tokenizer, SEQ, STRIDE, QUERY, True)
    rs._improve_answer_span = original
    return {"n_not_found": not_found,
            "examples": [[e.qas_id, e.start_position, e.end_position, e.orig_answer_text, int(e.is_impossible)]
                         for e in examples],
            "features": [[f.unique_id, f.example_index, f.doc_span_index, f.start_position, f.end_position]
                         for f in feats]}


def fnv1a(values, h=0xcbf29ce484222325):
    """64-bit FNV-1a over 32-bit values (as little-endian bytes), the digest the test recomputes."""
    for v in values:
        for byte in struct.pack("<i", v):
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def feature_digest(feats):
    h = 0xcbf29ce484222325
    for f in feats:
        keys = sorted(f.token_to_orig_map)
        vals = [f.unique_id - 1000000000, f.example_index, f.doc_span_index, len(f.tokens)] + f.input_ids \
            + f.input_mask + f.segment_ids + [f.token_to_orig_map[k] for k in keys] \
            + [int(f.token_is_max_context[k]) for k in keys] \
            + [-1 if f.start_position is None else f.start_position, -1 if f.end_position is None else f.end_position]
        h = fnv1a(vals, h)
    return "%016x" % h


def dev_counts(rs, flags, messages, dev_path, tokenizer, tmp_dir):
    """The whole dev set at the defaults (384/128/64): prediction mode as is, training mode
    with each question's first answer."""
    out = {}
    examples, _ = read(rs, flags, messages, dev_path, False, False)
    feats = convert(rs, examples, tokenizer, 384, 128, 64, False)
    out["predict"] = {"n_examples": len(examples), "n_features": len(feats),
                      "n_tokens": sum(len(f.tokens) for f in feats), "digest": feature_digest(feats)}
    dev = json.load(open(dev_path, encoding="utf-8"))
    for article in dev["data"]:
        for p in article["paragraphs"]:
            for q in p["qas"]:
                q["answers"] = q["answers"][:1]
    first = os.path.join(tmp_dir, "dev-first-answers.json")
    with open(first, "w", encoding="utf-8") as f:
        json.dump(dev, f)
    examples, not_found = read(rs, flags, messages, first, True, False)
    feats = convert(rs, examples, tokenizer, 384, 128, 64, True)
    out["train"] = {"n_examples": len(examples), "n_not_found": not_found, "n_features": len(feats),
                    "n_tokens": sum(len(f.tokens) for f in feats), "digest": feature_digest(feats)}
    return out


# ---- synthetic logits and predictions ----------------------------------------------------

def mix32(x):
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def h32(seed, uid, pos, which):
    return mix32(seed * 0x9E3779B1 + (uid - 1000000000) * 0x85EBCA77 + pos * 0xC2B2AE3D + which)


def logits(seed, f, seq, plant_empty, null_boost):
    """Start and end logits of one feature: multiples of 1/128 in [-7.8, 7.8] (exact in
    float32, so Python's and C's sums agree bit for bit; ties are frequent), a planted
    answer-like peak in the document (at most 8 tokens), [CLS] raised for some v2.0 examples, and for the
    "empty" examples every invalid position raised above everything else."""
    uid, n_tok = f.unique_id, len(f.tokens)
    doc0 = min(f.token_to_orig_map)
    doc_len = n_tok - 1 - doc0
    s = [((h32(seed, uid, p, 0) % 2001) - 1000) / 128.0 for p in range(seq)]
    e = [((h32(seed, uid, p, 1) % 2001) - 1000) / 128.0 for p in range(seq)]
    # the peak starts on a token this window is the max context for (any window has one),
    # so each example has a valid non-null span (v2.0's write_predictions crashes otherwise)
    starts = [p for p in range(doc0, doc0 + doc_len) if f.token_is_max_context[p]]
    ps = starts[h32(seed, uid, 0, 2) % len(starts)]
    pe = min(ps + h32(seed, uid, 0, 3) % 8, n_tok - 2)
    s[ps] += 16 + (h32(seed, uid, 0, 4) % 64) / 16.0
    e[pe] += 16 + (h32(seed, uid, 0, 5) % 64) / 16.0
    if null_boost:
        s[0] += 24.0
        e[0] += 24.0
    if plant_empty:
        for p in list(range(doc0)) + list(range(n_tok - 1, seq)):
            s[p] += 20.0
            e[p] += 20.0
    return s, e


def predictions(rs, flags, tokenizer, path, run, out_dir):
    """write_predictions for one run (a dict: name, v2, do_lower_case, seed, n_best_size,
    max_answer_length, thresholds); the v2.0 run's second threshold is chosen here as the
    smallest positive null-score difference, so that one answer sits exactly on it (">"
    keeps it non-null) and the two thresholds give different predictions."""
    v2, name = run["v2"], run["name"]
    examples, _ = read(rs, flags, [], path, False, v2)
    feats = convert(rs, examples, tokenizer, SEQ, STRIDE, QUERY, False)
    results = []
    for f in feats:
        s, e = logits(run["seed"], f, SEQ, plant_empty=not v2 and f.example_index % 13 == 5,
                      null_boost=v2 and f.example_index % 3 == 0)
        results.append(rs.RawResult(unique_id=f.unique_id, start_logits=s, end_logits=e))
    flags.version_2_with_negative = v2
    flags.verbose_logging = True
    tf_logging = sys.modules["tensorflow"].logging
    written, log = {}, []
    thresholds = list(run["thresholds"])
    nbest_file = os.path.join(out_dir, "nbest_predictions_%s.json" % name)
    odds_file = os.path.join(out_dir, "null_odds_%s.json" % name)
    for i, t in enumerate(thresholds):
        flags.null_score_diff_threshold = t
        pred = os.path.join(out_dir, "predictions_%s%s.json" % (name, "_t%d" % i if v2 else ""))
        saved = tf_logging.info
        tf_logging.info = lambda m, *a: log.append(m % a if a else m)
        rs.write_predictions(examples, feats, results, run["n_best_size"], run["max_answer_length"],
                             run["do_lower_case"], pred, nbest_file, odds_file)
        tf_logging.info = saved
        written[t] = json.load(open(pred, encoding="utf-8"))
        if v2 and i == 0 and len(thresholds) == 1:
            odds = json.load(open(odds_file, encoding="utf-8"))
            thresholds.append(min(v for v in odds.values() if v > 0))
    run["thresholds"] = thresholds
    run["files"] = {"predictions": ["predictions_%s%s.json" % (name, "_t%d" % i if v2 else "")
                                    for i in range(len(thresholds))],
                    "nbest": os.path.basename(nbest_file), "null_odds": os.path.basename(odds_file) if v2 else None}
    if not v2 and os.path.exists(odds_file):
        os.remove(odds_file)
    return written, log


# ---- json formatting ------------------------------------------------------------------------

def json_format_case():
    texts = ["plain", "quote \" backslash \\ slash /", "controls \t\n\r\b\f \x01 \x1f \x7f",
             "Skłodowska-Curie, Śródmieście, Gaißau", "emoji \U0001F600 and \u2028 \ufeff", ""]
    floats = [0.0, -0.0, 1.0, 5.0, -2.5, 0.1, 0.1 + 0.2, 1.0 / 3.0, 1e-4, 9.999e-5, 1e-5, 1.5e-7,
              1e15, 1e16, 1.2345678901234567e16, 123456789012345.6, 2.0 ** -20, 3.4028234663852886e38,
              5e-324, 1.7976931348623157e308, 0.30000001192092896, -7.8125, 1000000.0]
    data = collections.OrderedDict()
    for i, t in enumerate(texts):
        entries = []
        for k in range(4):
            x = floats[(4 * i + k) % len(floats)]
            entries.append(collections.OrderedDict(
                [("text", t), ("probability", x), ("start_logit", floats[(4 * i + k + 7) % len(floats)]),
                 ("end_logit", floats[(4 * i + k + 13) % len(floats)])]))
        data["id_%d_\u00e9" % i] = entries
    return {"input": [[k, [[e["text"], e["probability"], e["start_logit"], e["end_logit"]] for e in v]]
                      for k, v in data.items()],
            "expected": json.dumps(data, indent=4) + "\n"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference_dir")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "squad"))
    ap.add_argument("--reuse-dev-counts", action="store_true",
                    help="keep the whole-dev counts of the existing features.json (they take a minute)")
    args = ap.parse_args()
    rs, tokenization, flags, messages = load_reference(args.reference_dir)
    os.makedirs(args.out, exist_ok=True)
    uncased = tokenization.FullTokenizer(os.path.join(args.data, "vocab", "bert-base-uncased-vocab.txt"), True)
    cased = tokenization.FullTokenizer(os.path.join(args.data, "vocab", "bert-base-cased-vocab.txt"), False)
    dev_path = os.path.join(args.data, "squad", "v1.1", "dev-v1.1.json")
    dev = json.load(open(dev_path, encoding="utf-8"))

    v1, v2 = make_subsets(dev)
    paths = {}
    for name, obj in (("subset_v1.json", v1), ("subset_v2.json", v2)):
        paths[name] = os.path.join(args.out, name)
        with open(paths[name], "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1)
            f.write("\n")

    examples, _ = read(rs, flags, messages, paths["subset_v1.json"], False, False)
    feats = convert(rs, examples, uncased, SEQ, STRIDE, QUERY, False)
    fixture = collections.OrderedDict()
    fixture["config"] = {"max_seq_length": SEQ, "doc_stride": STRIDE, "max_query_length": QUERY,
                         "vocab": "bert-base-uncased", "do_lower_case": True, "max_input_chars_per_word": 200}
    fixture["predict_v1"] = {"n_examples": len(examples), "features": [feature_json(f) for f in feats]}
    improved = [0]
    fixture["train_v1"] = training_json(rs, flags, messages, paths["subset_v1.json"], uncased, False, improved)
    fixture["train_v2"] = training_json(rs, flags, messages, paths["subset_v2.json"], uncased, True, [0])
    paths["edge_v2.json"] = os.path.join(args.out, "edge_v2.json")
    with open(paths["edge_v2.json"], "w", encoding="utf-8") as f:
        json.dump(EDGE, f)
        f.write("\n")
    seq, stride, query = EDGE_CONFIG
    edge = {"config": list(EDGE_CONFIG)}
    for mode, training in (("predict", False), ("train", True)):
        ex, not_found = read(rs, flags, messages, paths["edge_v2.json"], training, True)
        edge[mode] = {"n_not_found": not_found,
                      "examples": [[e.qas_id, e.start_position, e.end_position, e.orig_answer_text,
                                    int(e.is_impossible)] for e in ex],
                      "features": [feature_json(f) for f in convert(rs, ex, uncased, seq, stride, query, training)]}
    fixture["edge_v2"] = edge
    previous = os.path.join(args.out, "features.json")
    if args.reuse_dev_counts and os.path.exists(previous):
        fixture["dev_384"] = json.load(open(previous, encoding="utf-8"))["dev_384"]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            fixture["dev_384"] = dev_counts(rs, flags, messages, dev_path, uncased, tmp)
    with open(os.path.join(args.out, "features.json"), "w", encoding="utf-8") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")

    runs = [dict(name="v1", subset="subset_v1.json", vocab="bert-base-uncased", v2=False, do_lower_case=True,
                 seed=1, n_best_size=6, max_answer_length=30, thresholds=[0.0]),
            dict(name="v2", subset="subset_v2.json", vocab="bert-base-uncased", v2=True, do_lower_case=True,
                 seed=2, n_best_size=5, max_answer_length=30, thresholds=[0.0]),
            dict(name="cased", subset="subset_v1.json", vocab="bert-base-cased", v2=False, do_lower_case=False,
                 seed=3, n_best_size=3, max_answer_length=12, thresholds=[0.0])]
    out = {}
    for run in runs:
        tok = uncased if run["do_lower_case"] else cased
        out[run["name"]] = predictions(rs, flags, tok, paths[run["subset"]], run, args.out)
    with open(os.path.join(args.out, "predict_runs.json"), "w", encoding="utf-8") as f:
        json.dump({"max_seq_length": SEQ, "doc_stride": STRIDE, "max_query_length": QUERY, "runs": runs}, f, indent=1)
        f.write("\n")
    w1, w2, w3 = out["v1"][0], out["v2"][0], out["cased"][0]
    fails = collections.Counter(m.split(":")[0] for _, log in out.values() for m in log if not m.startswith("Writing"))
    with open(os.path.join(args.out, "json_format.json"), "w", encoding="utf-8") as f:
        json.dump(json_format_case(), f, indent=1)
        f.write("\n")

    # What the fixtures cover (printed, and checked so that a change of subset or seed
    # cannot silently lose a case).
    t1 = fixture["train_v1"]
    n_windows = collections.Counter(f.example_index for f in feats)
    multi = sum(1 for c in n_windows.values() if c > 1)
    not_max = sum(1 for f in feats for v in f.token_is_max_context.values() if not v)
    empties = sum(1 for v in w1[0.0].values() if v == "empty")
    nulls = {t: sum(1 for v in w.values() if v == "") for t, w in w2.items()}
    print("examples %d, features %d (%d examples with several windows, %d non-max-context tokens)"
          % (len(examples), len(feats), multi, not_max))
    print("training v1: %d answer spans improved by _improve_answer_span" % improved[0])
    print("training v1: %d examples, %d not found; v2: %d examples (%d impossible), %d not found"
          % (len(t1["examples"]), t1["n_not_found"], len(fixture["train_v2"]["examples"]),
             sum(e[4] for e in fixture["train_v2"]["examples"]), fixture["train_v2"]["n_not_found"]))
    print("v1 'empty' predictions: %d; v2 '' predictions by threshold: %s; cased: %d answers"
          % (empties, nulls, len(w3[0.0])))
    print("get_final_text fallbacks to the original text:", dict(fails))
    print("dev at 384/128/64:", fixture["dev_384"])
    assert any(min(f.token_to_orig_map) - 2 == QUERY for f in feats)  # a query was cut
    assert t1["n_not_found"] >= 1 and empties >= 1 and multi >= 5 and not_max >= 10 and improved[0] >= 5
    assert fails["Unable to find text"] >= 1 and fails["Length not equal after stripping spaces"] >= 1
    t = runs[1]["thresholds"]
    assert nulls[t[0]] > nulls[t[1]] > 0


if __name__ == "__main__":
    main()
