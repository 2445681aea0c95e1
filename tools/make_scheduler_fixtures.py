"""Learning rates of NVIDIA's PolyWarmUpScheduler and LinearWarmUpScheduler as
run_pretraining.py drives them: a torch optimizer whose param group counts its steps the way
apex's FusedLAMB does (group['step'] += 1 in step()), the scheduler stepped just before each
optimizer step, phase 2 restarting from a loaded state whose 'step' is set to 0. The
scheduler classes below are re-written from DeepLearningExamples' schedulers.py (read for
their semantics). Writes tests/data/train/schedules.txt: one line per configuration,
"kind base warmup total steps: lr lr ...". Run with /usr/bin/python3 (torch 1.13)."""
import os

import torch


class CountingSGD(torch.optim.SGD):
    """Counts steps in its param group, as FusedLAMB does; the update itself is irrelevant."""

    def step(self, closure=None):
        for g in self.param_groups:
            g["step"] = g.get("step", 0) + 1
        return super().step(closure)


class PolyWarmUp:
    def __init__(self, opt, warmup, total, degree=0.5):
        self.opt, self.warmup, self.total, self.degree = opt, warmup, total, degree
        self.base = [g["lr"] for g in opt.param_groups]

    def step(self):
        g0 = self.opt.param_groups[0]
        last_epoch = g0["step"] + 1 if "step" in g0 else 1
        progress = last_epoch / self.total
        for g, base in zip(self.opt.param_groups, self.base):
            g["lr"] = base * progress / self.warmup if progress < self.warmup else base * (1.0 - progress) ** self.degree


class LinearWarmUp:
    def __init__(self, opt, warmup, total):
        self.opt, self.warmup, self.total = opt, warmup, total
        self.base = [g["lr"] for g in opt.param_groups]
        self.last_epoch = 0

    def step(self):
        self.last_epoch += 1
        progress = self.last_epoch / self.total
        for g, base in zip(self.opt.param_groups, self.base):
            g["lr"] = base * progress / self.warmup if progress < self.warmup else \
                base * max((progress - 1.0) / (self.warmup - 1.0), 0.0)


def run(kind, base, warmup, total, steps, start_step=0):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = CountingSGD([p], lr=base)
    if start_step:
        opt.param_groups[0]["step"] = start_step   # a loaded state, as NVIDIA overrides it
    sched = PolyWarmUp(opt, warmup, total) if kind == "poly" else LinearWarmUp(opt, warmup, total)
    lrs = []
    for _ in range(steps):
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        p.grad = torch.zeros(1)
        opt.step()
    return lrs


def main():
    configs = [("poly", 6e-3, 0.2843, 100, 99, 0), ("poly", 4e-3, 0.128, 50, 49, 0), ("poly", 1e-3, 0.0, 20, 19, 0),
               ("poly", 6e-3, 0.2843, 100, 60, 40),   # resumed at step 40
               ("linear", 5e-5, 0.1, 30, 30, 0)]
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "train", "schedules.txt")
    with open(path, "w") as f:
        f.write("# tools/make_scheduler_fixtures.py: kind base warmup total start steps: lr per step\n")
        for kind, base, warmup, total, steps, start in configs:
            lrs = run(kind, base, warmup, total, steps, start)
            f.write("%s %r %r %d %d %d: %s\n" % (kind, base, warmup, total, start, steps, " ".join(repr(x) for x in lrs)))
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
