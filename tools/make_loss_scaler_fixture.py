#!/usr/bin/env python3
"""Fixture for src/optim/loss_scaler.c: what torch's GradScaler (torch.amp.GradScaler on the
CPU, PyTorch 2.x; the same rule as torch.cuda.amp.GradScaler and apex's dynamic scaler)
does over a sequence of steps with injected inf and NaN gradients: the scale after each
update and whether the optimizer step was taken (the parameter moved).

  .venv-bf16peer/bin/python tools/make_loss_scaler_fixture.py > tests/data/optim/loss_scaler.json

A short growth interval (3) and a large init scale exercise growth, backoff, skips, and
growth that would overflow fp32 (GradScaler then keeps the scale)."""
import json
import math

import torch


def run(init_scale, growth_interval, pattern):
    p = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([p], lr=0.125)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=growth_interval)
    steps = []
    for bad in pattern:
        opt.zero_grad()
        g = {"inf": math.inf, "nan": math.nan, "-": 1.0}[bad]
        loss = p.sum() * g if bad != "-" else p.sum()
        scaler.scale(loss).backward()
        before = p.detach().clone()
        scaler.step(opt)
        scaler.update()
        taken = bool((p.detach() != before).any())
        steps.append({"gradient": bad, "taken": taken, "scale_after": float(scaler.get_scale())})
    return {"init_scale": init_scale, "growth_interval": growth_interval, "steps": steps}


def main():
    print(json.dumps({
        "source": f"torch {torch.__version__} torch.amp.GradScaler('cpu'), growth 2, backoff 0.5",
        "runs": [
            run(2.0 ** 20, 3, ["-", "inf", "inf", "-", "-", "-", "-", "-", "-", "nan", "-", "-", "-", "inf", "-"]),
            run(2.0 ** 125, 2, ["-", "-", "-", "-", "-", "-", "inf", "-", "-"]),   # growth past fp32's range
        ]}, indent=1))


if __name__ == "__main__":
    main()
