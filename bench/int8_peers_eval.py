#!/usr/bin/env python3
"""The int8 peers of bench/run_int8_accuracy.sh on a model folder bert.c wrote (config.json +
model.safetensors, which transformers loads): ONNX Runtime and OpenVINO, each in fp32 (the
sanity check: its predictions against bert.c's fp32 ones) and in int8.

  PY=.venv-bf16peer/bin/python
  $PY bench/int8_peers_eval.py glue --task mrpc --data_dir glue/MRPC --model FT --work W \
      --bertc_predictions W/bertc_fp32.tsv [--calibration 300] [--threads 2]
  $PY bench/int8_peers_eval.py squad --model FT --work W --predict_file P --calibration_file C \
      --google_bert DIR --bert ./bert --bertc_predictions bertc/predictions.json
  $PY bench/int8_peers_eval.py embed --model BASE --work W --sentences S --calibration_sentences C \
      --bertc_fp32 fp32.npy [--max_seq_length 256]

The models (torch.onnx.export of transformers' eager-attention model, dynamic batch x sequence,
opset 17, as bench/infer_peers.py's onnx_export):
  ort-fp32       the export on CPUExecutionProvider, ORT_ENABLE_ALL
  ort-int8       onnxruntime.quantization.quantize_dynamic(per_channel=True,
                 weight_type=QInt8), its default operator list: int8 weights per output
                 channel, activations quantized per tensor on the fly (uint8)
  openvino-fp32  the export read by OpenVINO, INFERENCE_PRECISION_HINT f32
  openvino-int8  nncf.quantize(model_type=TRANSFORMER) on --calibration examples of the
                 training data (static activation scales), compiled with the f32 hint too, so
                 that what is not int8 stays fp32 (OpenVINO's default on a CPU with
                 avx512_bf16 would be bf16)
Inputs exactly as bert.c makes them: GLUE features from bench/infer_lengths.py's FullTokenizer
(bert.c's, 100 characters per word) with Google's pair truncation; SQuAD's features and
predictions.json by Google's run_squad.py itself (convert_examples_to_features,
write_predictions), scored by `bert squad_eval`; embeddings mean-pooled over the real tokens
and L2-normalised as `bert embed`. Batches of --batch rows padded to their longest (SQuAD:
every feature at 384, as Google's). One JSON line per peer on stdout.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

PEERS = ["ort-fp32", "ort-int8", "openvino-fp32", "openvino-int8"]
NAMES = ["input_ids", "attention_mask", "token_type_ids"]


# ---- models ----

def export(model, out_names, path):
    """model(ids, mask, types) -> outputs, exported with dynamic batch x sequence."""
    if os.path.exists(path):
        return path
    import torch
    import warnings
    ids = torch.full((2, 16), 7, dtype=torch.long)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 9:] = 0
    axes = {k: {0: "batch", 1: "sequence"} for k in NAMES}
    for o in out_names:
        axes[o] = {0: "batch"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids, mask, torch.zeros_like(ids)), path + ".tmp", input_names=NAMES,
                          output_names=out_names, dynamic_axes=axes, opset_version=17, dynamo=False)
    os.replace(path + ".tmp", path)
    return path


def wrapped(kind, folder):
    import torch
    import transformers as tf

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, mask, types):
            o = self.m(input_ids=ids, attention_mask=mask, token_type_ids=types)
            if kind == "glue":
                return o.logits
            if kind == "squad":
                return o.start_logits, o.end_logits
            return o.last_hidden_state
    cls = {"glue": tf.BertForSequenceClassification, "squad": tf.BertForQuestionAnswering,
           "embed": tf.BertModel}[kind]
    outs = {"glue": ["logits"], "squad": ["start_logits", "end_logits"], "embed": ["last_hidden_state"]}[kind]
    return Wrap(cls.from_pretrained(folder, attn_implementation="eager").eval()), outs


def peer(name, onnx_path, calibration, threads):
    """infer(inputs dict of int64 arrays) -> list of output arrays, and a description."""
    if name.startswith("ort"):
        import onnxruntime as ort
        path = onnx_path
        if name == "ort-int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic
            path = onnx_path.replace(".onnx", "_ort_int8.onnx")
            if not os.path.exists(path):
                quantize_dynamic(onnx_path, path, per_channel=True, weight_type=QuantType.QInt8)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        import onnx
        ops = {}
        for n in onnx.load(path).graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        desc = f"onnxruntime {ort.__version__}" + (
            f", quantize_dynamic per_channel QInt8: {ops.get('MatMulInteger', 0)} MatMulInteger, "
            f"{ops.get('DynamicQuantizeLinear', 0)} DynamicQuantizeLinear" if name == "ort-int8" else "")
        return (lambda x: sess.run(None, x)), desc
    import openvino as ov
    core = ov.Core()
    model = core.read_model(onnx_path)
    desc = f"openvino {ov.__version__}"
    if name == "openvino-int8":
        import nncf
        model = nncf.quantize(model, nncf.Dataset(calibration), model_type=nncf.ModelType.TRANSFORMER,
                              subset_size=len(calibration))
        fq = sum(1 for op in model.get_ops() if op.get_type_name() == "FakeQuantize")
        desc += f", nncf {nncf.__version__} quantize (TRANSFORMER, {len(calibration)} calibration examples): {fq} FakeQuantize"
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                                 "INFERENCE_PRECISION_HINT": "f32"})
    req = compiled.create_infer_request()

    def infer(x):
        r = req.infer(x)
        return [r[o] for o in compiled.outputs]
    return infer, desc + ", INFERENCE_PRECISION_HINT f32"


def padded(rows, L=None):
    """rows: list of (ids, types) -> the three input arrays, padded to L or the longest."""
    L = L or max(len(r[0]) for r in rows)
    x = {k: np.zeros((len(rows), L), np.int64) for k in NAMES}
    for i, (ids, types) in enumerate(rows):
        x["input_ids"][i, :len(ids)] = ids
        x["token_type_ids"][i, :len(types)] = types
        x["attention_mask"][i, :len(ids)] = 1
    return x


def run_all(infer, rows, batch, L=None):
    outs = []
    for b in range(0, len(rows), batch):
        outs.append(infer(padded(rows[b:b + batch], L)))
    return [np.concatenate([o[k] for o in outs]) for k in range(len(outs[0]))]


# ---- GLUE ----

def glue_rows(task, data_dir, split, vocab, max_seq):
    """The split's rows as bert.c encodes them (finetune_peers.py's features): (ids, types) each, labels."""
    from finetune_peers import glue_features
    feats, _ = glue_features(task, data_dir, vocab, True, max_seq, split)
    return [(ids, types) for ids, types, _ in feats], np.asarray([label for _, _, label in feats])


def glue_metrics(task, pred, y):
    acc = float((pred == y).mean())
    if task != "mrpc":
        return {"acc": acc}
    tp = float(((pred == 1) & (y == 1)).sum())
    f1 = 2 * tp / max(float((pred == 1).sum() + (y == 1).sum()), 1.0)
    return {"acc": acc, "f1": f1}


def spread(n, k):
    """k indices spread evenly over range(n)."""
    return sorted(set(int(i) for i in np.linspace(0, n - 1, min(k, n))))


def cmd_glue(a):
    labels = ["0", "1"]
    rows, y = glue_rows(a.task, a.data_dir, "dev", a.vocab, a.max_seq_length)
    train, _ = glue_rows(a.task, a.data_dir, "train", a.vocab, a.max_seq_length)
    calib = [padded([train[i]]) for i in spread(len(train), a.calibration)]
    bertc = [labels.index(l.split("\t")[1].strip()) for l in open(a.bertc_predictions) if l[:1].isdigit()]
    assert len(bertc) == len(rows), f"{len(bertc)} bert.c predictions for {len(rows)} dev rows"
    bertc = np.asarray(bertc)
    model, outs = wrapped("glue", a.model)
    path = export(model, outs, os.path.join(a.work, "model.onnx"))
    for name in a.peers.split(","):
        infer, desc = peer(name, path, calib, a.threads)
        t0 = time.time()
        logits, = run_all(infer, rows, a.batch)
        pred = logits.argmax(-1)
        print(json.dumps({"task": a.task, "side": name, "variant": desc, "examples": len(rows),
                          "dev": glue_metrics(a.task, pred, y), "seconds": round(time.time() - t0, 2),
                          "same_as_bertc_fp32": float((pred == bertc).mean())}), flush=True)


# ---- SQuAD ----

def load_google(folder):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    from make_squad_fixtures import load_reference
    rs, tokenization, flags, _ = load_reference(folder)
    for stub in ("tensorflow", "modeling", "optimization"):   # the modules keep theirs; others (torch's
        sys.modules.pop(stub, None)                          # dynamo, nncf) must not find a fake tensorflow
    flags.version_2_with_negative = False
    flags.verbose_logging = False
    return rs, tokenization


def squad_features(rs, tokenization, path, vocab):
    examples = rs.read_squad_examples(input_file=path, is_training=False)
    tok = tokenization.FullTokenizer(vocab_file=vocab, do_lower_case=True)
    feats = []
    rs.convert_examples_to_features(examples, tok, 384, 128, 64, False, feats.append)
    return examples, feats


def cmd_squad(a):
    rs, tokenization = load_google(a.google_bert)
    examples, feats = squad_features(rs, tokenization, a.predict_file, a.vocab)
    _, cfeats = squad_features(rs, tokenization, a.calibration_file, a.vocab)
    def real(f):   # Google's features come padded to 384: the real tokens, which padded() masks in
        n = sum(f.input_mask)
        return f.input_ids[:n], f.segment_ids[:n]
    rows = [real(f) for f in feats]
    calib = [padded([real(cfeats[i])], 384) for i in spread(len(cfeats), a.calibration)]
    bertc = json.load(open(a.bertc_predictions, encoding="utf-8"))
    model, outs = wrapped("squad", a.model)
    path = export(model, outs, os.path.join(a.work, "model.onnx"))
    for name in a.peers.split(","):
        infer, desc = peer(name, path, calib, a.threads)
        t0 = time.time()
        start, end = run_all(infer, rows, a.batch, 384)
        results = [rs.RawResult(unique_id=f.unique_id, start_logits=[float(v) for v in start[i]],
                                end_logits=[float(v) for v in end[i]]) for i, f in enumerate(feats)]
        d = os.path.join(a.work, name)
        os.makedirs(d, exist_ok=True)
        pred_file = os.path.join(d, "predictions.json")
        rs.write_predictions(examples, feats, results, 20, 30, True, pred_file,
                             os.path.join(d, "nbest_predictions.json"), os.path.join(d, "null_odds.json"))
        ev = json.loads(subprocess.run([a.bert, "squad_eval", a.predict_file, pred_file], check=True,
                                       capture_output=True, text=True).stdout)
        pred = json.load(open(pred_file, encoding="utf-8"))
        same = sum(pred.get(k) == v for k, v in bertc.items()) / len(bertc)
        print(json.dumps({"task": "squad", "side": name, "variant": desc, "examples": len(examples),
                          "features": len(feats), "dev": {"exact_match": ev["exact_match"], "f1": ev["f1"]},
                          "seconds": round(time.time() - t0, 2), "same_as_bertc_fp32": same}), flush=True)


# ---- sentence embeddings ----

def embed_rows(path, vocab, max_seq):
    from infer_lengths import FullTokenizer
    tok = FullTokenizer(vocab, True, 100)
    cls, sep = tok.vocab["[CLS]"], tok.vocab["[SEP]"]
    rows = []
    for line in open(path, encoding="utf-8"):
        ids = [cls] + [tok.vocab[t] for t in tok.tokenize(line.rstrip("\n"))][:max_seq - 2] + [sep]
        rows.append((ids, [0] * len(ids)))
    return rows


def pooled(hidden, rows, first):
    out = []
    for i in range(hidden.shape[0]):
        n = len(rows[first + i][0])
        v = hidden[i, :n].astype(np.float64).mean(0)
        out.append(v / np.linalg.norm(v))
    return np.asarray(out)


def cosine_summary(e, ref):
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    cos = (e * ref).sum(1) / np.linalg.norm(e, axis=1)
    return {"min": float(cos.min()), "mean": float(cos.mean()), "below_0.99": int((cos < 0.99).sum())}


def cmd_embed(a):
    rows = embed_rows(a.sentences, a.vocab, a.max_seq_length)
    calib_rows = embed_rows(a.calibration_sentences, a.vocab, a.max_seq_length)
    calib = [padded([calib_rows[i]]) for i in spread(len(calib_rows), a.calibration)]
    ref = np.load(a.bertc_fp32)
    assert ref.shape[0] == len(rows), f"{ref.shape[0]} bert.c embeddings for {len(rows)} sentences"
    model, outs = wrapped("embed", a.model)
    path = export(model, outs, os.path.join(a.work, "model.onnx"))
    own_fp32 = {}
    for name in a.peers.split(","):
        infer, desc = peer(name, path, calib, a.threads)
        t0 = time.time()
        e = []
        for b in range(0, len(rows), a.batch):
            e.append(pooled(infer(padded(rows[b:b + a.batch]))[0], rows, b))
        e = np.concatenate(e)
        rt = name.split("-")[0]
        if name.endswith("fp32"):
            own_fp32[rt] = e
        line = {"task": "embed", "side": name, "variant": desc, "examples": len(rows),
                "seconds": round(time.time() - t0, 2), "cosine_to_bertc_fp32": cosine_summary(e, ref)}
        if name.endswith("int8") and rt in own_fp32:
            line["cosine_to_own_fp32"] = cosine_summary(e, own_fp32[rt])
        print(json.dumps(line), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for c in ("glue", "squad", "embed"):
        p = sub.add_parser(c)
        p.add_argument("--model", required=True, help="the model folder (config.json, model.safetensors)")
        p.add_argument("--vocab", required=True)
        p.add_argument("--work", required=True, help="exports and predictions go here")
        p.add_argument("--peers", default=",".join(PEERS))
        p.add_argument("--calibration", type=int, default=300, help="NNCF's calibration examples")
        p.add_argument("--threads", type=int, default=2)
        p.add_argument("--batch", type=int, default=32)
        if c == "glue":
            p.add_argument("--task", required=True, choices=["mrpc", "sst-2"])
            p.add_argument("--data_dir", required=True)
            p.add_argument("--max_seq_length", type=int, default=128)
            p.add_argument("--bertc_predictions", required=True, help="bert glue's fp32 predictions of dev.tsv")
        elif c == "squad":
            p.add_argument("--predict_file", required=True, help="the articles to predict (bert squad's predict_articles.json)")
            p.add_argument("--calibration_file", required=True, help="SQuAD JSON of the training articles")
            p.add_argument("--google_bert", required=True, help="folder of Google's run_squad.py and tokenization.py")
            p.add_argument("--bert", required=True, help="the bert binary, for bert squad_eval")
            p.add_argument("--bertc_predictions", required=True, help="bert.c's fp32 predictions.json")
        else:
            p.add_argument("--sentences", required=True, help="one sentence a line")
            p.add_argument("--calibration_sentences", required=True)
            p.add_argument("--bertc_fp32", required=True, help="bert embed's fp32 .npy of --sentences")
            p.add_argument("--max_seq_length", type=int, default=256)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    import torch
    torch.set_num_threads(a.threads)
    {"glue": cmd_glue, "squad": cmd_squad, "embed": cmd_embed}[a.cmd](a)


if __name__ == "__main__":
    main()
