#!/usr/bin/env python3
"""The inference peers of `bert bench_infer`, on the same batches in the same order:
PyTorch 2.x + transformers BertModel (fp32, and bf16 under torch.autocast("cpu")), ONNX
Runtime (fp32, and int8 by its dynamic quantization) and OpenVINO (fp32, and bf16 through
INFERENCE_PRECISION_HINT, and int8 by NNCF's post-training quantization).

    .venv-bf16peer/bin/python bench/infer_peers.py --glue_task mrpc --data_dir D --vocab_file V
    .venv-bf16peer/bin/python bench/infer_peers.py --squad_file F --vocab_file V --batch 32 \
        --latency_sequences 128 --impls pytorch-fp32,ort-fp32 --max_batches 3     (a smoke run)

Lengths: --fixed_shapes (every sequence --max_seq_length long, as many as bert.c's fixed
shapes: max(--latency_sequences, 4 x --batch); only padded: dynamic is the same there), or
bench/infer_lengths.py (identical to bert.c's: checked by bench/infer_table.py on
real_tokens and the dynamic mode's computed_rows). Measurements, as bert.c's: batch 1 over
the first --latency_sequences sequences, then --batch over all of them; batches in arrival
order; --warmup untimed batches first (replaying the first ones); latency per batch
(nearest-rank p50/p90/p99), throughput = sequences / summed batch times. Token ids as
bert.c's (a hash of the sequence number), attention mask 1 on the real tokens, types 0.
Random weights of BertConfig() (bert-base; or --preset): weights do not change the speed.

Modes: padded (every batch at max_seq) and dynamic (every batch as long as its longest
sequence). No packed mode: none of these runtimes runs BERT on CPU without computing the
padding (ORT's packing-mode attention, convert_to_packing_mode, is a CUDA kernel;
PyTorch's nested tensors are not what transformers' BertModel takes).

How each peer runs (its best plain CPU setup, not tuned per shape):
  pytorch   BertModel (transformers' default attention, sdpa), eval, torch.inference_mode;
            bf16: torch.autocast("cpu", dtype=torch.bfloat16). torch.set_num_threads(T).
  ort       BertModel (eager attention) exported by torch.onnx.export (TorchScript exporter,
            dynamic axes batch x sequence), then onnxruntime.transformers' BERT optimizer
            (fused Attention, EmbedLayerNormalization, SkipLayerNormalization, BiasGelu;
            fallback: the plain export), CPUExecutionProvider, ORT_ENABLE_ALL,
            intra_op_num_threads=T, inter_op 1, sequential.
  openvino  the plain export read by OpenVINO; CPU, INFERENCE_NUM_THREADS=T,
            NUM_STREAMS=1, PERFORMANCE_HINT=LATENCY, INFERENCE_PRECISION_HINT f32 / bf16;
            padded batches run a model reshaped to their static shape (compiled before the
            timing), dynamic ones the dynamic-shape model.
  ort-int8  onnxruntime.quantization.quantize_dynamic of the fused model above (ORT's advice
            for transformers: optimize, then quantize): int8 weights per output channel
            (QInt8, per_channel=True), uint8 activations quantized per tensor at run time
            (DynamicQuantizeLinear, MatMulInteger / QAttention); the rest in fp32.
  openvino-int8  nncf.quantize (post-training, ModelType.TRANSFORMER, weights and
            activations int8: not compress_weights, which is weight-only) of the plain export,
            calibrated on CALIBRATION_SEQUENCES random-id sequences of lengths 16..max_seq
            (random weights: real text would calibrate nothing better); then run as
            openvino above but with OpenVINO's default INFERENCE_PRECISION_HINT for the layers
            left unquantized (bf16 on CPUs with AMX / avx512_bf16, as bert.c int8 keeps its
            attention in bf16 there).
The exports and quantized models are cached in --cache_dir (bench/.cache).

Output: one JSON line per measurement on stdout, bert.c's --json fields plus "precision"
and "variant"; a readable line on stderr.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from infer_lengths import add_length_args, lengths_from_args  # noqa: E402

import numpy as np  # noqa: E402

PRESETS = {  # as bert.c's (src/io/config.c): layers, hidden, heads; intermediate 4 x hidden
    "bert-tiny": (2, 128, 2), "bert-mini": (4, 256, 4), "bert-small": (4, 512, 8),
    "bert-medium": (8, 512, 8), "bert-base": (12, 768, 12), "bert-large": (24, 1024, 16),
}
IMPLS = ["pytorch-fp32", "pytorch-bf16", "ort-fp32", "ort-int8", "openvino-fp32", "openvino-bf16", "openvino-int8"]
CALIBRATION_SEQUENCES = 64


def bert_config(preset, attn="sdpa"):
    from transformers import BertConfig
    layers, hidden, heads = PRESETS[preset]
    return BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                      intermediate_size=4 * hidden, attn_implementation=attn)


def bert_model(preset, attn="sdpa"):
    import torch
    from transformers import BertModel
    torch.manual_seed(0)
    return BertModel(bert_config(preset, attn)).eval()


class Batches:
    """bert.c's batches (tasks/infer_bench.c): input arrays per batch, built before timing."""

    def __init__(self, lengths, batch, max_seq, mode, vocab_size):
        self.lengths, self.batch, self.max_seq, self.mode, self.vocab = lengths, batch, max_seq, mode, vocab_size
        self.n = len(lengths)
        self.count = (self.n + batch - 1) // batch

    def get(self, k):
        first = k * self.batch
        rows = self.lengths[first:first + self.batch]
        b = len(rows)
        T = self.max_seq if self.mode == "padded" else max(1, max(rows))
        pos = np.arange(T)[None, :]
        real = pos < np.asarray(rows)[:, None]
        seq = (np.arange(first, first + b, dtype=np.uint64) * np.uint64(2654435761)) % np.uint64(2**32)
        tok = (5 + seq % np.uint64(self.vocab - 5)).astype(np.int64)
        ids = np.where(real, tok[:, None], 0).astype(np.int64)
        return {"input_ids": ids, "attention_mask": real.astype(np.int64),
                "token_type_ids": np.zeros((b, T), np.int64)}, rows


def quantile(sorted_ms, q):
    k = math.ceil(q * len(sorted_ms)) - 1
    return sorted_ms[min(max(k, 0), len(sorted_ms) - 1)]


def timed_run(infer, batches, warmup, max_batches):
    """infer(inputs) runs one batch to its outputs. Returns bert.c's InferTiming fields."""
    count = batches.count if max_batches <= 0 else min(batches.count, max_batches)
    for k in range(-warmup, 0):
        infer(batches.get((k + warmup) % batches.count)[0])
    ms, seqs, real, computed = [], 0, 0, 0
    for k in range(count):
        inputs, rows = batches.get(k)
        t0 = time.perf_counter()
        infer(inputs)
        ms.append(1e3 * (time.perf_counter() - t0))
        seqs += len(rows)
        real += sum(rows)
        computed += inputs["input_ids"].size
    seconds = sum(ms) / 1e3
    s = sorted(ms)
    return {"sequences": seqs, "sequences_per_second": round(seqs / seconds, 3),
            "p50_ms": round(quantile(s, 0.5), 3), "p90_ms": round(quantile(s, 0.9), 3),
            "p99_ms": round(quantile(s, 0.99), 3), "real_tokens": real, "computed_rows": computed}


# ---- the peers: each returns (variant, infer_for(batch, mode, shapes)) ----

def pytorch_peer(args, precision):
    import torch
    torch.set_num_threads(args.threads)
    model = bert_model(args.preset)
    variant = f"torch {torch.__version__.split('+')[0]}, {model.config._attn_implementation} attention"

    def infer_for(batch, mode, shapes):
        def infer(inputs):
            t = {k: torch.from_numpy(v) for k, v in inputs.items()}
            with torch.inference_mode():
                if precision == "bf16":
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        return model(**t).last_hidden_state
                return model(**t).last_hidden_state
        return infer
    return variant + (", bf16 autocast" if precision == "bf16" else ""), infer_for


def onnx_export(args):
    """The eager-attention BertModel as ONNX (dynamic batch x sequence), cached."""
    path = os.path.join(args.cache_dir, f"{args.preset}_eager.onnx")
    if os.path.exists(path):
        return path
    import torch
    os.makedirs(args.cache_dir, exist_ok=True)

    class Encoder(torch.nn.Module):  # positional inputs for the exporter
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return o.last_hidden_state, o.pooler_output

    model = Encoder(bert_model(args.preset, "eager")).eval()
    ids = torch.full((2, 16), 7, dtype=torch.long)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 9:] = 0
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {k: {0: "batch", 1: "sequence"} for k in names + ["last_hidden_state"]}
    axes["pooler_output"] = {0: "batch"}
    tmp = path + ".tmp.onnx"
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids, mask, torch.zeros_like(ids)), tmp, input_names=names,
                          output_names=["last_hidden_state", "pooler_output"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)
    os.replace(tmp, path)
    return path


def ort_optimized(args, plain):
    path = os.path.join(args.cache_dir, f"{args.preset}_eager_ort_fused.onnx")
    if os.path.exists(path):
        return path, "fused"
    try:
        from onnxruntime.transformers import optimizer
        layers, hidden, heads = PRESETS[args.preset]
        m = optimizer.optimize_model(plain, model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0)
        stats = m.get_fused_operator_statistics()
        if not stats.get("Attention"):
            raise RuntimeError(f"no fused Attention ({stats})")
        tmp = path + ".tmp.onnx"
        m.save_model_to_file(tmp)
        check_export(args, tmp)
        os.replace(tmp, path)
        return path, "fused"
    except Exception as e:  # the plain export still runs, with ORT's own graph optimizations
        print(f"infer_peers: ORT's BERT optimizer failed ({e}); the plain export instead", file=sys.stderr)
        return plain, "plain"


def check_export(args, path):
    """The fused ONNX model computes what BertModel does (a padded batch of 2, fp32)."""
    import onnxruntime as ort
    import torch
    inputs, _ = Batches([11, 5], 2, 16, "padded", 30522).get(0)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(["last_hidden_state"], inputs)[0]
    with torch.inference_mode():
        want = bert_model(args.preset)(**{k: torch.from_numpy(v) for k, v in inputs.items()}).last_hidden_state
    real = inputs["attention_mask"].astype(bool)  # padded positions' outputs are not used
    diff = float(np.abs(got - want.numpy())[real].max())
    print(f"infer_peers: {os.path.basename(path)} against BertModel: max |diff| {diff:.2e}", file=sys.stderr)
    if not diff < 1e-3:
        raise RuntimeError(f"the fused model differs from BertModel by {diff}")


def ort_int8(args, fused, kind):
    """quantize_dynamic of the (fused) model: int8 weights per output channel, cached."""
    path = fused.replace(".onnx", "_int8_per_channel.onnx")
    if not os.path.exists(path):
        from onnxruntime.quantization import QuantType, quantize_dynamic
        tmp = path + ".tmp.onnx"
        import onnx  # shape inference does not type the fused contrib ops' outputs: they are all fp32
        quantize_dynamic(fused, tmp, per_channel=True, weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        os.replace(tmp, path)
    check_quantized(args, lambda inputs: ort_session(args, path).run(["last_hidden_state"], inputs)[0],
                    os.path.basename(path))
    return path, kind + " export, quantize_dynamic int8 per channel"


def check_quantized(args, run, name):
    """An int8 model still computes BertModel: the cosine of every real token's output to fp32's
    (random weights, so no accuracy to check; this catches a broken quantization)."""
    import torch
    inputs, _ = Batches([11, 5], 2, 16, "padded", 30522).get(0)
    got = run(inputs)
    with torch.inference_mode():
        want = bert_model(args.preset)(**{k: torch.from_numpy(v) for k, v in inputs.items()}).last_hidden_state.numpy()
    real = inputs["attention_mask"].astype(bool)
    g, w = got[real], want[real]
    cos = (g * w).sum(-1) / (np.linalg.norm(g, axis=-1) * np.linalg.norm(w, axis=-1))
    print(f"infer_peers: {name} against BertModel fp32: min cosine over real tokens {cos.min():.4f}", file=sys.stderr)
    if not cos.min() > 0.9:
        raise RuntimeError(f"{name} is not BertModel (cosine {cos.min():.4f} to fp32)")


def ort_session(args, path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_peer(args, precision):
    import onnxruntime as ort
    path, kind = ort_optimized(args, onnx_export(args))
    if precision == "int8":
        path, kind = ort_int8(args, path, kind)
    else:
        kind += " export"
    sess = ort_session(args, path)
    out = ["last_hidden_state"]

    def infer_for(batch, mode, shapes):
        return lambda inputs: sess.run(out, inputs)
    return f"onnxruntime {ort.__version__}, {kind}", infer_for


def calibration_inputs(max_seq, vocab=30522):
    """NNCF's calibration set: CALIBRATION_SEQUENCES single sequences of lengths 16..max_seq,
    random ids (seeded; not the timed batches' ids), the inputs the timed batches have."""
    rng = np.random.default_rng(1)
    for T in np.linspace(16, max_seq, CALIBRATION_SEQUENCES).astype(int):
        yield {"input_ids": rng.integers(5, vocab, (1, T), dtype=np.int64),
               "attention_mask": np.ones((1, T), np.int64), "token_type_ids": np.zeros((1, T), np.int64)}


def openvino_int8(args, core):
    """nncf.quantize of the plain export (weights and activations int8), saved as IR, cached."""
    path = os.path.join(args.cache_dir, f"{args.preset}_eager_nncf_int8_{CALIBRATION_SEQUENCES}x{args.max_seq_length}.xml")
    if not os.path.exists(path):
        import nncf
        import openvino as ov
        data = list(calibration_inputs(args.max_seq_length))
        q = nncf.quantize(core.read_model(onnx_export(args)), nncf.Dataset(data), model_type=nncf.ModelType.TRANSFORMER,
                          subset_size=len(data))
        tmp = path[:-4] + ".tmp.xml"
        ov.save_model(q, tmp, compress_to_fp16=False)
        os.replace(tmp[:-4] + ".bin", path[:-4] + ".bin")
        os.replace(tmp, path)
    return path


def openvino_peer(args, precision):
    import openvino as ov
    core = ov.Core()
    path = openvino_int8(args, core) if precision == "int8" else onnx_export(args)
    config = {"INFERENCE_NUM_THREADS": args.threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    if precision != "int8":  # int8: the default for the unquantized layers (bf16 where the CPU has it)
        config["INFERENCE_PRECISION_HINT"] = "bf16" if precision == "bf16" else "f32"
    dynamic = core.compile_model(core.read_model(path), "CPU", config)
    names = ["input_ids", "attention_mask", "token_type_ids"]

    def infer_for(batch, mode, shapes):
        if mode == "padded":  # a static model per batch shape (the last batch may be smaller)
            compiled = {}
            for b, T in shapes:
                m = core.read_model(path)
                m.reshape({n: ov.PartialShape([b, T]) for n in names})
                compiled[b] = core.compile_model(m, "CPU", config).create_infer_request()

            def infer(inputs):
                return compiled[inputs["input_ids"].shape[0]].infer(inputs, share_inputs=True, share_outputs=True)
            return infer
        req = dynamic.create_infer_request()
        return lambda inputs: req.infer(inputs, share_inputs=True, share_outputs=True)
    hint = dynamic.get_property("INFERENCE_PRECISION_HINT")  # what the CPU plugin chose
    hint = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
    if precision == "int8":
        req = dynamic.create_infer_request()
        check_quantized(args, lambda inputs: req.infer(inputs)["last_hidden_state"].copy(), os.path.basename(path))
        return f"openvino {ov.__version__.split('-')[0]}, nncf int8 ({CALIBRATION_SEQUENCES} sequences), rest {hint}", infer_for
    return f"openvino {ov.__version__.split('-')[0]}, {hint}", infer_for


PEERS = {"pytorch": pytorch_peer, "ort": ort_peer, "openvino": openvino_peer}
IMPL_NAMES = {"pytorch": "pytorch", "ort": "onnxruntime", "openvino": "openvino"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_length_args(p)
    p.add_argument("--preset", default="bert-base", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=32, help="the large batch (batch 1 is always run)")
    p.add_argument("--latency_sequences", type=int, default=256, help="sequences run one by one for batch 1")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated, of {','.join(IMPLS)}")
    p.add_argument("--modes", default="padded,dynamic")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--max_batches", type=int, default=0, help="time only the first N batches (smoke runs)")
    p.add_argument("--lengths_name", help="the 'lengths' field (default: the task or file, as bert.c)")
    p.add_argument("--fixed_shapes", action="store_true", help="every sequence --max_seq_length long (as bert.c's fixed shapes)")
    p.add_argument("--cache_dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache"))
    args = p.parse_args()
    impls = args.impls.split(",")
    modes = args.modes.split(",")
    for i in impls:
        if i not in IMPLS:
            raise SystemExit(f"infer_peers: unknown impl '{i}' ({', '.join(IMPLS)})")
    for m in modes:
        if m not in ("padded", "dynamic"):
            raise SystemExit(f"infer_peers: unknown mode '{m}' (padded, dynamic; no runtime here packs)")
    if args.fixed_shapes:  # bert.c's task_lengths (cli/cmd_bench_infer.c): every row full
        max_seq = args.max_seq_length or 128
        name, lengths = "fixed", [max_seq] * max(args.latency_sequences, 4 * args.batch)
        modes = ["padded"]
    else:
        name, lengths, max_seq = lengths_from_args(args)
    name = args.lengths_name or name
    args.max_seq_length = max_seq  # (the int8 calibration's longest sequence)
    vocab = 30522
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    for impl in impls:
        runtime, precision = impl.split("-")
        variant, infer_for = PEERS[runtime](args, precision)
        print(f"== {impl}: {variant}; {name}, {len(lengths)} sequences, {args.preset}, {args.threads} threads",
              file=sys.stderr)
        for batch in ([1, args.batch] if args.batch > 1 else [1]):
            use = lengths[:args.latency_sequences] if batch == 1 else lengths
            for mode in modes:
                batches = Batches(use, batch, max_seq, mode, vocab)
                shapes = sorted({(len(use[i:i + batch]), max_seq) for i in range(0, len(use), batch)})
                t = timed_run(infer_for(batch, mode, shapes), batches, args.warmup, args.max_batches)
                row = {"impl": IMPL_NAMES[runtime], "precision": precision, "lengths": name, "batch": batch,
                       "mode": mode, **t, "variant": variant, "threads": args.threads, "preset": args.preset}
                print(json.dumps(row), flush=True)
                print(f"   batch {batch:3d} {mode:8s} {t['sequences_per_second']:8.1f} seq/s   latency p50 "
                      f"{t['p50_ms']:8.2f} ms  p90 {t['p90_ms']:8.2f} ms  p99 {t['p99_ms']:8.2f} ms",
                      file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
