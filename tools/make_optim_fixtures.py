"""Reference LAMB (as NVIDIA's recipe runs apex FusedLAMB) and AdamW (torch.optim.AdamW with
clip_grad_norm_, as the fine-tuning scripts use it) in float64 PyTorch, 10 steps each, on a
small tensor set with both weight-decay groups, gradients large enough to be clipped on some
steps, and an all-zero weight matrix (LAMB's trust ratio falls back to 1 there).

The LAMB reference is written from apex's csrc/multi_tensor_lamb.cu semantics (read, not
copied): global gradient norm; grads divided by max(norm / max_grad_norm, 1); m, v with
(1 - beta) averaging; bias-corrected update m^ / (sqrt(v^) + eps) + wd * w; per-tensor trust
ratio ||w|| / ||u|| only for tensors with weight decay != 0 (use_nvlamb is off), 1 where
either norm is 0; w -= lr * ratio * u.

Writes tests/data/optim/optimizers.safetensors. Run with /usr/bin/python3 (torch 1.13)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_io  # noqa: E402

torch.set_default_dtype(torch.float64)
STEPS = 10
SHAPES = {"layer.weight": (6, 5), "layer.bias": (6,), "LayerNorm.weight": (5,), "out.weight": (4, 6),
          "zero.weight": (3, 3)}
DECAY = {name: not (name.endswith("bias") or "LayerNorm" in name) for name in SHAPES}
B1, B2, EPS, WD, MAX_NORM = 0.9, 0.999, 1e-6, 0.01, 1.0


def lamb(params, grads, lrs):
    p = {k: v.clone() for k, v in params.items()}
    m = {k: torch.zeros_like(v) for k, v in p.items()}
    v2 = {k: torch.zeros_like(v) for k, v in p.items()}
    for t in range(1, STEPS + 1):
        g = grads[t - 1]
        norm = torch.sqrt(sum((x ** 2).sum() for x in g.values()))
        clip = norm / MAX_NORM if norm > MAX_NORM else 1.0
        for k in p:
            gk = g[k] / clip
            m[k] = B1 * m[k] + (1 - B1) * gk
            v2[k] = B2 * v2[k] + (1 - B2) * gk * gk
            wd = WD if DECAY[k] else 0.0
            u = (m[k] / (1 - B1 ** t)) / (torch.sqrt(v2[k] / (1 - B2 ** t)) + EPS) + wd * p[k]
            ratio = 1.0
            if wd != 0:
                wn, un = p[k].norm(), u.norm()
                if wn != 0 and un != 0:
                    ratio = wn / un
            p[k] = p[k] - lrs[t - 1] * ratio * u
    return p


def adamw(params, grads, lrs):
    p = {k: torch.nn.Parameter(v.clone()) for k, v in params.items()}
    groups = [{"params": [p[k] for k in p if DECAY[k]], "weight_decay": WD},
              {"params": [p[k] for k in p if not DECAY[k]], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lrs[0], betas=(B1, B2), eps=EPS)
    for t in range(STEPS):
        for k in p:
            p[k].grad = grads[t][k].clone()
        torch.nn.utils.clip_grad_norm_(list(p.values()), MAX_NORM)
        for grp in opt.param_groups:
            grp["lr"] = lrs[t]
        opt.step()
    return {k: v.detach() for k, v in p.items()}


def main():
    rng = np.random.default_rng(2024)
    params = {k: torch.tensor(rng.normal(0, 0.5, s)) for k, s in SHAPES.items()}
    params["zero.weight"].zero_()
    params["LayerNorm.weight"] += 1.0
    grads = []
    for t in range(STEPS):
        scale = 3.0 if t % 3 == 0 else 0.05   # clipped on steps 0, 3, 6, 9
        grads.append({k: torch.tensor(rng.normal(0, scale, s)) for k, s in SHAPES.items()})
    lrs = [1e-2 * (t + 1) / STEPS for t in range(STEPS)]
    out = {}
    for k in SHAPES:
        out["param." + k] = params[k].numpy().astype(np.float32)
    for t in range(STEPS):
        for k in SHAPES:
            out["grad.%d.%s" % (t, k)] = grads[t][k].numpy().astype(np.float32)
    # the references start from the float32-rounded inputs, as the C side does
    p32 = {k: torch.tensor(out["param." + k].astype(np.float64)) for k in SHAPES}
    g32 = [{k: torch.tensor(out["grad.%d.%s" % (t, k)].astype(np.float64)) for k in SHAPES} for t in range(STEPS)]
    out["lr"] = np.array(lrs, dtype=np.float64)
    for name, fn in (("lamb", lamb), ("adamw", adamw)):
        res = fn(p32, g32, lrs)
        for k in SHAPES:
            out["%s.%s" % (name, k)] = res[k].numpy()
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "optim", "optimizers.safetensors")
    safetensors_io.write(path, out, {"generator": "tools/make_optim_fixtures.py", "steps": STEPS})
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
