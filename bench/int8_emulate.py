#!/usr/bin/env python3
"""Which of bert.c's int8 products costs the accuracy: bert.c's --int8 arithmetic emulated in
PyTorch (transformers' BertModel, float64 products of the integer values, so the emulation is
exact up to the fp32 rounding of everything else), with chosen products left in fp32.

  .venv-bf16peer/bin/python bench/int8_emulate.py --model MINILM --sentences S \
      --bertc_fp32 embed.fp32.npy --bertc_int8 embed.int8.npy [--max_seq_length 256] [--worst N]

bert.c's int8 (src/kernels/cpu/gemm_int8.h): in every encoder layer the four linear layers
(query/key/value, attention output, FFN in, FFN out) multiply int8 weights, symmetric per
output channel (scale max|w|/127), by int8 inputs, symmetric per row (per token: scale
max|x|/127, rounded to nearest), summed exactly, dequantized by the two scales. Everything
else (embeddings, attention's own products, softmax, LayerNorm, GELU, pooling) stays fp32.

Printed per variant (one JSON line each): the cosine of each sentence's mean-pooled embedding
to fp32 (min, mean, sentences below 0.99). Variants: all four kinds quantized (whose
cosine to bert.c's own --int8 output checks the emulation), each kind alone, all but one kind,
"ffn_out asymmetric": FFN out's input (GELU's output, >= -0.17) quantized per row to
uint8 with a zero point instead of symmetric int8, and "smoothed": SmoothQuant's migration
(alpha 0.5) on the products whose input is a LayerNorm's output (query/key/value, FFN in),
without calibration: channel c's range taken from that LayerNorm's |gamma_c| + |beta_c|, the
factor folded into the weight's column c (the input divided by it before its quantization).
Each of query, key and value its own factors (and its own quantized input), or, as bert.c's
fused QKV product needs, one set for the three: "fused" (from the three weights' largest),
"fused geometric" (the geometric mean of their own factors), "fused v" (from the value
projection's weights alone: what bert.c does); "qkv only" / "ffn_in only": one kind smoothed.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402

KINDS = ["qkv", "attn_out", "ffn_in", "ffn_out"]


def kind_of(name):
    if ".attention.self." in name:
        return "qkv"
    if ".attention.output.dense" in name:
        return "attn_out"
    if ".intermediate.dense" in name:
        return "ffn_in"
    if ".output.dense" in name:
        return "ffn_out"
    return None


def quant_weight(w):
    s = w.abs().amax(1, keepdim=True) / 127
    return torch.round(w / torch.where(s > 0, s, torch.ones_like(s))), s


def quant_rows(x, asym):
    if asym:   # uint8 per row with a zero point: x ~ r (p - z), p in [0, 255]
        lo, hi = x.amin(-1, keepdim=True).clamp(max=0), x.amax(-1, keepdim=True).clamp(min=0)
        r = (hi - lo) / 255
        r = torch.where(r > 0, r, torch.ones_like(r))
        z = torch.round(-lo / r)
        return torch.clamp(torch.round(x / r) + z, 0, 255) - z, r
    r = x.abs().amax(-1, keepdim=True) / 127
    return torch.round(x / torch.where(r > 0, r, torch.ones_like(r))), r


class FakeInt8(torch.nn.Module):
    """smooth: per input channel factors t (x / t, W * t: the same product) or None."""

    def __init__(self, lin, asym=False, smooth=None):
        super().__init__()
        w = lin.weight.detach().double()
        self.t = smooth if smooth is not None else torch.ones(w.shape[1], dtype=torch.float64)
        self.q, self.s = quant_weight(w * self.t)
        self.b = lin.bias.detach().double()
        self.asym = asym

    def forward(self, x):
        p, r = quant_rows(x.double() / self.t, self.asym)
        return ((p @ self.q.T) * r * self.s.T + self.b).float()


def layernorm_before(m, full):
    """The LayerNorm whose output is this linear layer's input (query/key/value, FFN in)."""
    parts = full.split(".")
    layer = int(parts[parts.index("layer") + 1])
    if kind_of(full) == "ffn_in":
        return m.encoder.layer[layer].attention.output.LayerNorm
    return m.embeddings.LayerNorm if layer == 0 else m.encoder.layer[layer - 1].output.LayerNorm


def smoothing(ln, lin, alpha=0.5):
    """SmoothQuant's factors (alpha 0.5) without calibration: a channel's activation range
    taken as |gamma| + |beta| of the LayerNorm that makes it (the normalised value is O(1)).
    lin: one linear layer, or several that share the input (bert.c's fused query/key/value
    product: one input quantization, so one set of factors, from their largest weights)."""
    act = (ln.weight.detach().abs() + ln.bias.detach().abs()).double()
    lins = lin if isinstance(lin, (list, tuple)) else [lin]
    wmax = torch.stack([m.weight.detach().abs().amax(0).double() for m in lins]).amax(0)
    t = act.clamp(min=1e-5) ** alpha / wmax.clamp(min=1e-5) ** (1 - alpha)
    return t / t.mean()


def qkv_of(model, full):
    """The query, key and value layers beside this one (the same attention)."""
    parts = full.split(".")
    layer = int(parts[parts.index("layer") + 1])
    s = model.encoder.layer[layer].attention.self
    return [s.query, s.key, s.value]


def quantized(model, kinds, asym_ffn_out=False, smooth=False, alpha=0.5):
    """smooth: False, True (each linear layer its own factors) or "fused" (query, key and
    value one set, as bert.c's fused product smooths them)."""
    import copy
    m = copy.deepcopy(model)
    for name, mod in list(m.named_modules()):
        for cname, child in list(mod.named_children()):
            full = f"{name}.{cname}" if name else cname
            k = kind_of(full)
            if isinstance(child, torch.nn.Linear) and k in kinds:
                ln, qkv = layernorm_before(model, full), qkv_of(model, full) if k == "qkv" else None
                if not smooth or k not in ("qkv", "ffn_in") or (smooth == "qkv only" and k != "qkv") \
                        or (smooth == "ffn_in only" and k != "ffn_in"):
                    t = None
                elif smooth == "fused" and k == "qkv":
                    t = smoothing(ln, qkv, alpha)
                elif smooth == "fused geometric" and k == "qkv":   # the three layers' own factors' geometric mean
                    t = torch.exp(torch.stack([smoothing(ln, x, alpha).log() for x in qkv]).mean(0))
                    t = t / t.mean()
                elif smooth == "fused v" and k == "qkv":
                    t = smoothing(ln, qkv[2], alpha)
                else:
                    t = smoothing(ln, child, alpha)
                setattr(mod, cname, FakeInt8(child, asym_ffn_out and k == "ffn_out", t))
    return m


def embeddings(model, rows, batch=64):
    from int8_peers_eval import padded
    out = []
    with torch.inference_mode():
        for b in range(0, len(rows), batch):
            x = {k: torch.from_numpy(v) for k, v in padded(rows[b:b + batch]).items()}
            h = model(**x).last_hidden_state.double()
            m = x["attention_mask"].unsqueeze(-1).double()
            out.append(((h * m).sum(1) / m.sum(1)).numpy())
    return np.concatenate(out)


def cosines(e, ref):
    return (e * ref).sum(1) / np.linalg.norm(e, axis=1) / np.linalg.norm(ref, axis=1)


def summary(c):
    return {"min": round(float(c.min()), 5), "mean": round(float(c.mean()), 5), "below_0.99": int((c < 0.99).sum())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--sentences", required=True)
    ap.add_argument("--bertc_fp32", required=True)
    ap.add_argument("--bertc_int8", required=True)
    ap.add_argument("--max_seq_length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default="", help="only the variants whose label holds one of these words (comma-separated)")
    ap.add_argument("--alphas", type=float, nargs="*", default=[],
                    help="also bert.c's smoothing (QKV's factors from V's rows) with these migration strengths "
                         "(the others: 0.5)")
    ap.add_argument("--worst", type=int, default=0,
                    help="only the N sentences whose bert.c int8 embedding is furthest from fp32 (0: all)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from int8_peers_eval import embed_rows
    from transformers import BertModel
    rows = embed_rows(a.sentences, os.path.join(a.model, "vocab.txt"), a.max_seq_length)
    model = BertModel.from_pretrained(a.model, attn_implementation="eager").eval()
    bertc32, bertc8 = np.load(a.bertc_fp32).astype(np.float64), np.load(a.bertc_int8).astype(np.float64)
    if a.worst > 0:
        keep = np.argsort(cosines(bertc8, bertc32))[:a.worst]
        rows, bertc32, bertc8 = [rows[i] for i in keep], bertc32[keep], bertc8[keep]
        print(json.dumps({"sentences": f"the {len(rows)} with the lowest bert.c int8 cosine"}))
    fp32 = embeddings(model, rows)
    print(json.dumps({"variant": "fp32 (emulation) against bert.c fp32", "cosine": summary(cosines(fp32, bertc32))}))
    variants = [("all four kinds int8 (bert.c --int8)", KINDS, False, False)]
    variants += [(f"only {k} int8", [k], False, False) for k in KINDS]
    variants += [(f"all but {k} int8 ({k} fp32)", [j for j in KINDS if j != k], False, False) for k in KINDS]
    variants += [("all four int8, ffn_out's input asymmetric uint8 per row", KINDS, True, False)]
    variants += [("all four int8, qkv and ffn_in smoothed from the LayerNorms' gamma/beta", KINDS, False, True)]
    variants += [("all four int8, smoothed: fused (query/key/value one set of factors, from their largest weights)",
                  KINDS, False, "fused")]
    variants += [(f"all four int8, smoothed: {mode}", KINDS, False, mode)
                 for mode in ("fused geometric", "fused v", "qkv only", "ffn_in only")]   # fused v: bert.c's
    variants += [(f"all four int8, smoothed: fused v, alpha {al}", KINDS, False, ("fused v", al)) for al in a.alphas]
    if a.variants:
        variants = [v for v in variants if any(w in v[0] for w in a.variants.split(","))]
    for label, kinds, asym, smooth in variants:
        smooth, alpha = smooth if isinstance(smooth, tuple) else (smooth, 0.5)
        e = embeddings(quantized(model, kinds, asym, smooth, alpha), rows)
        line = {"variant": label, "cosine": summary(cosines(e, fp32))}
        if label.startswith("all four kinds"):
            line["cosine_to_bertc_int8"] = summary(cosines(e, bertc8))
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
