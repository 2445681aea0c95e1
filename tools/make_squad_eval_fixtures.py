"""Fixtures for `bert squad_eval` (tests/test_squad_eval.c), from the official SQuAD scripts.

The official evaluation scripts, evaluate-v1.1.py and evaluate-v2.0.py (the SQuAD explorer's
files; copies live in many repositories), are not part of bert.c: fetch them into a folder
outside the repository and pass that folder. They are run as programs (python3 SCRIPT ...), so
the expected files are exactly what they print; their normalize_answer is imported for the
normalization cases. evaluate-v2.0.py imports numpy for its plots only: where numpy is not
installed, an empty stand-in module is put on its path.

  python3 tools/make_squad_eval_fixtures.py OFFICIAL_DIR
      writes tests/data/squad/: small v1.1 and v2.0 datasets (paragraphs of dev-v1.1.json plus
      one article of hand-made edge cases), predictions that hit every rule (exact, other gold
      answer, case, punctuation, articles, partial, extended, reordered, empty, wrong, Unicode
      whitespace, non-ASCII, missing, duplicate JSON keys), a v2.0 no-answer probability file,
      the official outputs for each command, normalize_answer cases, Python's Unicode tables
      that normalize_answer depends on (lower(), isalnum(), isspace()) and float reprs.

  python3 tools/make_squad_eval_fixtures.py OFFICIAL_DIR --full ./bert
      the whole dev set (10,570 questions) with generated predictions, v1.1 and a v2.0 version
      of it (a third of the questions made unanswerable, with probabilities): runs the official
      scripts and bert squad_eval with the same arguments and compares stdout and stderr byte
      for byte (bert prints v2.0's "Missing prediction" lines on stderr). Writes nothing.

  python3 tools/make_squad_eval_fixtures.py OFFICIAL_DIR --sweep build/tests/test_squad_eval
      normalize_answer of probe strings around every code point, and Python's repr of many
      floats, against the C code (the test binary's --normalize and --repr modes).
"""
import argparse
import importlib.util
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV = "/work/shared/data/squad/v1.1/dev-v1.1.json"
OUT = os.path.join(ROOT, "tests", "data", "squad")

# (article title, paragraph index) of dev-v1.1.json: answers with Polish, Serbian, French,
# Spanish letters, en dashes, fractions, math symbols.
V1_PARAGRAPHS = [("Warsaw", 0), ("Warsaw", 1), ("Warsaw", 12), ("Warsaw", 45), ("Normans", 19),
                 ("Normans", 35), ("Nikola_Tesla", 4), ("Nikola_Tesla", 18),
                 ("Computational_complexity_theory", 9), ("Computational_complexity_theory", 38)]
V2_PARAGRAPHS = [("Warsaw", 9), ("Warsaw", 13), ("Warsaw", 22), ("Nikola_Tesla", 5), ("Nikola_Tesla", 52),
                 ("Normans", 2)]

# Hand-made questions: (id, gold answers, prediction). Each probes one rule of
# normalize_answer or of the metrics; the official script decides the score.
EDGE = [
    ("edge-final-sigma", ["Σίσυφος"], "ΣΊΣΥΦΟΣ"),
    ("edge-sigma-inside", ["ΟΔΟΣ ΟΔΟΣ."], "οδοσ οδος"),
    ("edge-sigma-apostrophe", ["ΑΣ'Β"], "ασβ"),
    ("edge-dotted-i", ["İstanbul"], "i\u0307stanbul"),
    ("edge-dotted-i-plain", ["İstanbul"], "istanbul"),
    ("edge-sharp-s", ["Straße"], "STRASSE"),
    ("edge-kelvin", ["the Kelvin scale"], "\u212aELVIN SCALE"),
    ("edge-titlecase", ["\u01c5ungla"], "\u01c6ungla"),
    ("edge-cherokee", ["\u13a0\u13a1"], "\uab70\uab71"),
    ("edge-deseret", ["\U00010400\U00010401 x"], "\U00010428\U00010429 x"),
    ("edge-fullwidth", ["ＴＨＥ ｂｅｓｔ"], "ｔｈｅ ｂｅｓｔ"),
    ("edge-nbsp-article", ["a\u00a0b c"], "b c"),
    ("edge-ideographic-space", ["東京\u3000都"], "東京 都"),
    ("edge-unicode-spaces", ["x\u2028y\u0085z\u001cw"], "x y z w"),
    ("edge-combining-article", ["the\u0301 end"], "\u0301 end"),
    ("edge-combining-a", ["a\u0301 b"], "b"),
    ("edge-composed", ["thé"], "the"),
    ("edge-superscript", ["the² power"], "power"),
    ("edge-underscore", ["the_end"], "theend"),
    ("edge-en-dash", ["the–end"], "–end"),
    ("edge-apostrophe", ["l'amour"], "lamour"),
    ("edge-curly-quote", ["Midsummer’s Night"], "Midsummers Night"),
    ("edge-a-m", ["a.m."], "am"),
    ("edge-initial", ["A. Lincoln"], "lincoln"),
    ("edge-an", ["An apple"], "apple"),
    ("edge-articles-only", ["the a an"], ""),
    ("edge-punct-only", ["..."], ""),
    ("edge-repeat", ["new york new york"], "new york"),
    ("edge-reorder", ["red green blue"], "blue green red"),
    ("edge-thousands", ["1,000"], "1000"),
    ("edge-emoji", ["😀 the 😀"], "😀😀"),
    ("edge-tabs", ["one\ttwo\nthree"], "one two three"),
    ("edge-max-gold", ["Paris", "the city of Paris", "Paris, France"], "city of Paris"),
    ("edge-dup-id", ["first"], "first"),
    ("edge-dup-id", ["second"], "first"),
]


def load_dev(path):
    with open(path) as f:
        return json.load(f)


def paragraph(dev, title, index):
    for article in dev["data"]:
        if article["title"] == title:
            return article["paragraphs"][index]
    raise KeyError(title)


def subset(dev, picks, version):
    by_title = {}
    for title, index in picks:
        by_title.setdefault(title, []).append(json.loads(json.dumps(paragraph(dev, title, index))))
    data = [{"title": t, "paragraphs": ps} for t, ps in by_title.items()]
    edge = {"context": "Hand-made questions for bert.c's normalize_answer (no context needed).", "qas": []}
    for qid, answers, _ in EDGE:
        edge["qas"].append({"id": qid, "question": "?", "answers": [{"answer_start": 0, "text": a} for a in answers]})
    data.append({"title": "bert.c edge cases", "paragraphs": [edge]})
    return {"data": data, "version": version}


def questions(dataset):
    for article in dataset["data"]:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                yield p, qa


SPACES = ["\u00a0", "\t", "\u3000", "\n", "\u2009"]


def perturb(rng, kind, answers, context, other):
    """A prediction of the given kind from a question's gold answers."""
    a = answers[0] if answers else ""
    words = a.split()
    if kind == "exact":
        return a
    if kind == "other_gold":
        return answers[-1] if answers else ""
    if kind == "upper":
        return a.upper()
    if kind == "punct":
        return '"' + a + '."'
    if kind == "article":
        return "The " + a
    if kind == "partial":
        return " ".join(words[:-1]) if len(words) > 1 else a[: max(1, len(a) // 2)]
    if kind == "extended":
        extra = rng.choice(context.split()) if context.split() else "x"
        return a + " " + extra + " " + extra
    if kind == "reorder":
        return " ".join(reversed(words))
    if kind == "empty":
        return ""
    if kind == "wrong":
        return other
    if kind == "spaces":
        return rng.choice(SPACES).join(words) + rng.choice(SPACES)
    if kind == "nonascii":
        return a.replace("a", "á").replace("o", "ø") + " ☃"
    if kind == "lower_title":
        return a.lower().title()
    raise ValueError(kind)


KINDS_V1 = ["exact", "other_gold", "upper", "punct", "article", "partial", "extended", "reorder", "empty",
            "wrong", "spaces", "nonascii", "lower_title", "missing"]


def make_predictions(dataset, rng, kinds, all_answers):
    preds = {}
    for p, qa in questions(dataset):
        answers = [x["text"] for x in qa["answers"]]
        kind = rng.choice(kinds)
        if kind == "missing":
            continue
        preds[qa["id"]] = perturb(rng, kind, answers, p["context"], rng.choice(all_answers))
    return preds


def dumps_with_duplicate(obj, dup_key, dup_value):
    """JSON text of obj with dup_key repeated at the end (Python's json keeps the last value)."""
    text = json.dumps(obj, ensure_ascii=False, indent=0)
    assert text.endswith("\n}")
    return text[:-2] + ",\n" + json.dumps(dup_key) + ": " + json.dumps(dup_value, ensure_ascii=False) + "\n}\n"


def make_v2(dataset, rng, fraction):
    """dataset in v2.0 form: about `fraction` of the questions made unanswerable (answers
    moved to plausible_answers, is_impossible true), as SQuAD 2.0 writes them."""
    out = json.loads(json.dumps(dataset))
    out["version"] = "v2.0"
    for _, qa in questions(out):
        impossible = qa["id"].startswith("edge-") and qa["id"] in ("edge-punct-only", "edge-articles-only") \
            or (not qa["id"].startswith("edge-") and rng.random() < fraction)
        qa["is_impossible"] = impossible
        if impossible:
            qa["plausible_answers"] = qa["answers"]
            qa["answers"] = []
    return out


def make_v2_predictions(dataset, rng, all_answers):
    preds, probs = {}, {}
    for p, qa in questions(dataset):
        answers = [x["text"] for x in qa["answers"]]
        if qa["answers"]:
            kind = rng.choice(KINDS_V1[:-1])
            pred = perturb(rng, kind, answers, p["context"], rng.choice(all_answers))
        else:
            plausible = [x["text"] for x in qa.get("plausible_answers", [])]
            pred = rng.choice(["", "", " ", plausible[0] if plausible else "x", rng.choice(all_answers)])
        preds[qa["id"]] = pred
        # probabilities with ties, integers and round decimals, as a model's would not be
        probs[qa["id"]] = rng.choice([0, 1, 0.5, 0.25, round(rng.random(), 3), rng.random(), 0.75, 1e-05])
    return preds, probs


# ---- running the official scripts ----

def numpy_path():
    """A folder to put on PYTHONPATH when numpy is missing (evaluate-v2.0.py imports it but
    uses it only for plots)."""
    try:
        import numpy  # noqa: F401
        return None
    except ImportError:
        d = tempfile.mkdtemp(prefix="squad-numpy-stub-")
        with open(os.path.join(d, "numpy.py"), "w") as f:
            f.write("# stand-in: evaluate-v2.0.py uses numpy only for its plots\n")
        return d


def run_official(official_dir, script, args, stub):
    env = dict(os.environ)
    if stub:
        env["PYTHONPATH"] = stub + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, os.path.join(official_dir, script)] + args, capture_output=True, env=env)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def import_official(official_dir, script, stub):
    if stub and stub not in sys.path:
        sys.path.insert(0, stub)
    spec = importlib.util.spec_from_file_location(script.replace("-", "_").replace(".py", ""),
                                                  os.path.join(official_dir, script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def write_json(path, obj):
    write(path, json.dumps(obj, ensure_ascii=False, indent=0) + "\n")


# ---- Python's Unicode tables behind normalize_answer ----

def unicode_tables():
    lower_runs, lower_multi, alnum, space, unassigned = [], [], [], [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        low = c.lower()
        if low != c:
            if len(low) != 1:
                lower_multi.append([cp, [ord(x) for x in low]])
            else:
                delta = ord(low) - cp
                r = lower_runs[-1] if lower_runs else None
                if r and r[3] == delta and ((r[2] == 0 and cp - r[1] <= 2) or (r[2] and cp - r[1] == r[2])):
                    if r[2] == 0:
                        r[2] = cp - r[1]
                    r[1] = cp
                else:
                    lower_runs.append([cp, cp, 0, delta])
        if c.isalnum():
            if alnum and alnum[-1][1] == cp - 1:
                alnum[-1][1] = cp
            else:
                alnum.append([cp, cp])
        if c.isspace():
            space.append(cp)
        if unicodedata.category(c) == "Cn":
            if unassigned and unassigned[-1][1] == cp - 1:
                unassigned[-1][1] = cp
            else:
                unassigned.append([cp, cp])
    for r in lower_runs:
        r[2] = r[2] or 1
    return {"python": sys.version.split()[0], "unicode_version": unicodedata.unidata_version,
            "lower_runs [first, last, step, delta]": lower_runs, "lower_multi": lower_multi,
            "alnum_ranges": alnum, "space": space, "unassigned_ranges": unassigned}


def float_cases():
    xs = [0.0, -0.0, 1.0, 100.0, 0.1, 0.2, 0.1 + 0.2, 1 / 3, 2 / 3, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5,
          0.00012345, 123456789012345680.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e22, 1e23,
          math.pi, -math.e, 66.66666666666667, 33.333333333333336, 88.49574266792809, 0.5, 0.25, 0.75, 1e-05]
    rng = random.Random(7)
    for k in range(-30, 64, 7):
        xs.append(2.0 ** k)
        xs.append(math.nextafter(2.0 ** k, 0))
    for _ in range(80):
        n = rng.randint(1, 20000)
        xs.append(100.0 * rng.randint(0, n) / n)
    for _ in range(40):
        xs.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0])
    return [[x.hex(), repr(x)] for x in xs]


# ---- modes ----

def make_fixtures(args, stub):
    dev = load_dev(args.dev)
    rng = random.Random(20240611)
    all_answers = [a["text"] for _, qa in questions(dev) for a in qa["answers"]]
    v1 = subset(dev, V1_PARAGRAPHS, "1.1")
    edge_preds = {qid: pred for qid, _, pred in EDGE}
    preds = make_predictions(v1, rng, KINDS_V1, all_answers)
    preds.update(edge_preds)
    some_id = next(qa["id"] for _, qa in questions(v1) if qa["id"] in preds and not qa["id"].startswith("edge"))
    write_json(f"{OUT}/v1.1/dataset.json", v1)
    write(f"{OUT}/v1.1/predictions.json", dumps_with_duplicate(preds, some_id, "a duplicate key: this value counts"))
    rc, out, err = run_official(args.official, "evaluate-v1.1.py",
                                [f"{OUT}/v1.1/dataset.json", f"{OUT}/v1.1/predictions.json"], stub)
    assert rc == 0, err
    write(f"{OUT}/v1.1/expected.txt", out)
    write(f"{OUT}/v1.1/expected_stderr.txt", err)
    # the same dataset labelled 1.0 (the test makes it the same way): the script warns, goes on
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{OUT}/v1.1/dataset.json") as f:
            write(f"{tmp}/dataset_v1.0.json", f.read().replace('"version": "1.1"', '"version": "1.0"'))
        rc, out, err = run_official(args.official, "evaluate-v1.1.py",
                                    [f"{tmp}/dataset_v1.0.json", f"{OUT}/v1.1/predictions.json"], stub)
    assert rc == 0, err
    write(f"{OUT}/v1.1/expected_v1.0.txt", out)
    write(f"{OUT}/v1.1/expected_v1.0_stderr.txt", err)

    v2_src = subset(dev, V2_PARAGRAPHS, "v2.0")
    v2 = make_v2(v2_src, rng, 0.35)
    p2, probs = make_v2_predictions(v2, rng, all_answers)
    p2.update(edge_preds)
    for qid in edge_preds:
        probs[qid] = 0.5
    probs["not-a-question-of-the-dataset"] = 0.0
    write_json(f"{OUT}/v2.0/dataset.json", v2)
    write_json(f"{OUT}/v2.0/predictions.json", p2)
    write(f"{OUT}/v2.0/na_prob.json", dumps_with_duplicate(probs, "edge-kelvin", 0.125))
    runs = {
        "expected.txt": [],
        "expected_na.txt": ["--na-prob-file", f"{OUT}/v2.0/na_prob.json"],
        "expected_na_thresh_0.5.txt": ["--na-prob-file", f"{OUT}/v2.0/na_prob.json", "--na-prob-thresh", "0.5"],
        "expected_thresh_-1.txt": ["--na-prob-thresh", "-1"],
    }
    for name, extra in runs.items():
        rc, out, err = run_official(args.official, "evaluate-v2.0.py",
                                    [f"{OUT}/v2.0/dataset.json", f"{OUT}/v2.0/predictions.json"] + extra, stub)
        assert rc == 0 and not err, err
        write(f"{OUT}/v2.0/{name}", out)
    with tempfile.TemporaryDirectory() as tmp:
        rc, out, err = run_official(args.official, "evaluate-v2.0.py",
                                    [f"{OUT}/v2.0/dataset.json", f"{OUT}/v2.0/predictions.json", "--na-prob-file",
                                     f"{OUT}/v2.0/na_prob.json", "--na-prob-thresh", "0.5", "--out-file",
                                     f"{tmp}/eval.json"], stub)
        assert rc == 0 and out == "" and not err, (out, err)
        with open(f"{tmp}/eval.json") as f:
            write(f"{OUT}/v2.0/expected_na_thresh_0.5_out_file.json", f.read())
    # a missing prediction: the official v2.0 script names it, then stops with a KeyError
    missing = dict(p2)
    gone = [qa["id"] for _, qa in questions(v2)][3]
    del missing[gone]
    write_json(f"{OUT}/v2.0/predictions_missing.json", missing)
    rc, out, err = run_official(args.official, "evaluate-v2.0.py",
                                [f"{OUT}/v2.0/dataset.json", f"{OUT}/v2.0/predictions_missing.json"], stub)
    assert rc != 0 and "KeyError" in err, (rc, err)
    write(f"{OUT}/v2.0/expected_missing_stdout.txt", out)

    # normalize_answer: the edge cases, every prediction, and the gold answers of the edge article
    v1mod = import_official(args.official, "evaluate-v1.1.py", stub)
    v2mod = import_official(args.official, "evaluate-v2.0.py", stub)
    texts = [a for _, answers, _ in EDGE for a in answers] + list(preds.values()) + list(p2.values())
    texts += ["", " ", "The", "THE", "a", "an", "the the", "theA", "a_b", "ab.", "\u1680x", "x\u180ey", "\u00bd the",
              "Ⅻ the", "the\u0660", "_the_", "the'", "'the", "a-an-the", "A\u0300", "ΣΑΣ", "Σ", "aΣ", "aΣ\u0301",
              "aΣ\u00ad", "1Σ", "ǅΣ", "\U0001d400Σ"]
    cases = []
    for t in dict.fromkeys(texts):
        n = v1mod.normalize_answer(t)
        assert n == v2mod.normalize_answer(t)
        cases.append([t, n])
    write_json(f"{OUT}/normalize.json", cases)
    write(f"{OUT}/unicode.json", json.dumps(unicode_tables(), separators=(",", ":")) + "\n")
    write_json(f"{OUT}/float_repr.json", float_cases())
    for root, _, files in os.walk(OUT):
        for name in sorted(files):
            print(f"{os.path.relpath(os.path.join(root, name), ROOT)}: {os.path.getsize(os.path.join(root, name))} B")


def compare(label, official, ours, stderr_ours_extra=""):
    rc1, out1, err1 = official
    rc2, out2, err2 = ours
    same = out1 == out2 and err1 + stderr_ours_extra == err2 and (rc1 == 0) == (rc2 == 0)
    print(f"{'same' if same else 'DIFFERENT'}: {label}: {' '.join(out1.split())}")
    if not same:
        print("  official:", rc1, out1[:2000], err1[-2000:])
        print("  bert:    ", rc2, out2[:2000], err2[-2000:])
    return same


def run_bert(bert, args):
    r = subprocess.run([bert, "squad_eval"] + args, capture_output=True)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def full(args, stub):
    dev = load_dev(args.dev)
    rng = random.Random(11)
    all_answers = [a["text"] for _, qa in questions(dev) for a in qa["answers"]]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        preds = make_predictions(dev, rng, KINDS_V1, all_answers)
        n_q = sum(1 for _ in questions(dev))
        print(f"dev-v1.1.json: {n_q} questions, {len(preds)} predictions ({n_q - len(preds)} missing)")
        write(f"{tmp}/p1.json", json.dumps(preds))
        write(f"{tmp}/p1_all.json", json.dumps({qa["id"]: perturb(rng, rng.choice(KINDS_V1[:-1]),
                                                                   [a["text"] for a in qa["answers"]], p["context"],
                                                                   rng.choice(all_answers))
                                               for p, qa in questions(dev)}))
        for pf in ("p1.json", "p1_all.json"):
            a = [args.dev, f"{tmp}/{pf}"]
            ok &= compare(f"v1.1 {pf}", run_official(args.official, "evaluate-v1.1.py", a, stub), run_bert(args.bert, a))
        v2 = make_v2(dev, rng, 0.33)
        write(f"{tmp}/dev-v2.json", json.dumps(v2))
        p2, probs = make_v2_predictions(v2, rng, all_answers)
        write(f"{tmp}/p2.json", json.dumps(p2))
        write(f"{tmp}/na.json", json.dumps(probs))
        # probabilities as a model gives them: all distinct floats
        write(f"{tmp}/na_float.json", json.dumps({k: rng.random() for k in probs}))
        n_imp = sum(1 for _, qa in questions(v2) if not qa["answers"])
        print(f"v2.0 form: {n_imp} of {n_q} questions unanswerable")
        for extra in ([], ["--na-prob-file", f"{tmp}/na.json"], ["--na-prob-file", f"{tmp}/na_float.json"],
                      ["--na-prob-file", f"{tmp}/na.json", "--na-prob-thresh", "0.6"],
                      ["--na-prob-file", f"{tmp}/na_float.json", "--na-prob-thresh", "0.3"]):
            a = [f"{tmp}/dev-v2.json", f"{tmp}/p2.json"]
            ours = [x.replace("--na-prob-", "--na_prob_").replace("-file", "_file").replace("-thresh", "_thresh")
                    for x in extra]
            ok &= compare("v2.0 " + " ".join(x.replace(tmp + "/", "") for x in extra),
                          run_official(args.official, "evaluate-v2.0.py", a + extra, stub),
                          run_bert(args.bert, a + ["--version", "2.0"] + ours))
    print("all the same" if ok else "DIFFERENCES")
    return 0 if ok else 1


def sweep(args, stub):
    v1mod = import_official(args.official, "evaluate-v1.1.py", stub)
    probes = ["X{}Y", "the{}", "{}the", "a{}an", "AΣ{}", "{}Σ", "AΣ{}B", "x{}the{}y"]
    unassigned = {cp for cp in range(0x110000) if unicodedata.category(chr(cp)) == "Cn"}
    texts = []
    for cp in range(1, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        texts.extend(p.format(chr(cp), chr(cp)) for p in probes)
    want = [v1mod.normalize_answer(t) for t in texts]
    r = subprocess.run([args.sweep, "--normalize"], input="\n".join(json.dumps(t) for t in texts) + "\n",
                       capture_output=True, text=True)
    got = r.stdout.split("\n")[:-1]
    assert r.returncode == 0 and len(got) == len(texts), (r.returncode, len(got), r.stderr[-500:])
    bad = [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]
    bad_assigned = [b for b in bad if not any(ord(ch) in unassigned for ch in b[0])]
    print(f"normalize_answer: {len(texts)} probe strings, {len(bad)} differ "
          f"({len(bad_assigned)} at code points Python {unicodedata.unidata_version} assigns)")
    for t, w, g in bad_assigned[:20]:
        print("  ", ascii(t), ascii(w), ascii(g))
    rng = random.Random(3)
    xs = [100.0 * k / n for n in range(1, 1200) for k in range(0, n + 1)]
    xs += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(200000)]
    xs += [2.0 ** k for k in range(-1074, 1024)] + [math.nextafter(2.0 ** k, 0) for k in range(-1073, 1024)]
    xs = [x for x in xs if math.isfinite(x)]
    r = subprocess.run([args.sweep, "--repr"], input="\n".join(x.hex() for x in xs) + "\n", capture_output=True,
                       text=True)
    got = r.stdout.split("\n")[:-1]
    assert r.returncode == 0 and len(got) == len(xs)
    bad_repr = [(x, g) for x, g in zip(xs, got) if repr(x) != g]
    print(f"float repr: {len(xs)} doubles, {len(bad_repr)} differ")
    for x, g in bad_repr[:10]:
        print("  ", repr(x), g)
    return 0 if not bad_assigned and not bad_repr else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("official", help="folder with evaluate-v1.1.py and evaluate-v2.0.py")
    ap.add_argument("--dev", default=DEV)
    ap.add_argument("--full", dest="bert", help="compare ./bert squad_eval with the scripts on the whole dev set")
    ap.add_argument("--sweep", help="the test binary: compare normalize_answer and float repr exhaustively")
    args = ap.parse_args()
    stub = numpy_path()
    if args.bert:
        return full(args, stub)
    if args.sweep:
        return sweep(args, stub)
    make_fixtures(args, stub)
    return 0


if __name__ == "__main__":
    sys.exit(main())
