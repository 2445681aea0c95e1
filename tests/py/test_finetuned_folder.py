"""Issue 36 as a user meets it: a model folder `bert glue` fine-tuned stands alone, in bert.c and
in transformers. From another working directory, with the built program by its path: fine-tune
tests/data/embed's small model on the RTE fixture without --vocab_file or --do_lower_case (the
folder's), then use the folder as it is: `bert embed`, `bert glue --do_predict`, and
transformers' AutoTokenizer + AutoModelForSequenceClassification, whose labels (by id2label
name) and logits must be bert.c's.

The suite runs tests/py with /usr/bin/python3, which has no transformers: this script then runs
itself again with the tools venv's python ($BERT_TOOLS_PYTHON, else .venv/bin/python) when that
one has transformers and torch, and is skipped with a message otherwise (the bert.c half still
runs first). Needs ./bert (or $BERT_BIN)."""
import csv
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BERT = os.environ.get("BERT_BIN") or os.path.join(ROOT, "bert")
RTE = os.path.join(ROOT, "tests", "data", "glue", "RTE")
passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print(f"  {'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"))


def run(args, cwd, stdin=None):
    return subprocess.run([BERT] + args, cwd=cwd, input=stdin, capture_output=True, text=True)


def has_transformers(python):
    probe = "import torch, transformers"
    return os.path.exists(python) and subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def bert_half(work):
    """Fine-tunes, then uses the folder with bert.c alone; returns (folder, bert's test predictions)."""
    out = os.path.join(work, "rte_model")
    r = run(["glue", "--task_name", "RTE", "--data_dir", RTE, "--init_checkpoint", os.path.join(ROOT, "tests/data/embed"),
             "--do_train", "--max_steps", "6", "--max_seq_length", "48", "--train_batch_size", "4",
             "--learning_rate", "1e-3", "--output_dir", out], cwd=work)
    check("bert glue fine-tunes with the folder's vocabulary and casing", r.returncode == 0, r.stderr[-400:])
    for name in ("model.safetensors", "config.json", "vocab.txt", "tokenizer_config.json"):
        check(f"the folder holds {name}", os.path.exists(os.path.join(out, name)))
    r = run(["embed", "--init_checkpoint", out], cwd=work, stdin="A man is eating.\nA woman sings.\n")
    check("bert embed takes the fine-tuned folder as it is", r.returncode == 0 and len(r.stdout.splitlines()) == 2,
          r.stderr[-400:])
    pred = os.path.join(work, "rte_pred")
    r = run(["glue", "--task_name", "RTE", "--data_dir", RTE, "--init_checkpoint", out, "--do_predict",
             "--max_seq_length", "48", "--output_dir", pred], cwd=work)
    check("bert glue --do_predict takes it as it is", r.returncode == 0, r.stderr[-400:])
    with open(os.path.join(pred, "RTE.tsv")) as f:
        labels = [row["prediction"] for row in csv.DictReader(f, delimiter="\t")]
    return out, labels


def transformers_half(out, bert_labels):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForSequenceClassification.from_pretrained(out).eval()
    check("transformers loads the folder's tokenizer and model", tok is not None and model is not None)
    with open(os.path.join(RTE, "test.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    enc = tok([r["sentence1"] for r in rows], [r["sentence2"] for r in rows], truncation="longest_first", max_length=48,
              padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
    names = [model.config.id2label[int(i)] for i in logits.argmax(-1)]
    check("transformers labels the test pairs as bert glue does, by id2label name", names == bert_labels,
          f"{names} vs {bert_labels}")


def main():
    if os.environ.get("BERT_TOOLS_REEXEC"):   # the venv's run: transformers only, the folder given
        transformers_half(sys.argv[1], sys.argv[2].split(","))
        sys.exit(1 if failed else 0)   # the outer run counts and prints the summary
    else:
        with tempfile.TemporaryDirectory() as work:   # another working directory
            out, labels = bert_half(work)
            python = os.environ.get("BERT_TOOLS_PYTHON") or os.path.join(ROOT, ".venv", "bin", "python")
            if failed == 0 and has_transformers(python):
                r = subprocess.run([python, __file__, out, ",".join(labels)], capture_output=True, text=True,
                                   env=dict(os.environ, BERT_TOOLS_REEXEC="1"))
                print(r.stdout, end="")
                check("the transformers half ran", r.returncode == 0 and "FAIL" not in r.stdout, r.stderr[-600:])
            elif failed == 0:
                print(f"  skip the transformers half: no python with transformers and torch ({python})")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
