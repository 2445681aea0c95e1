"""Writes tests/data/io/reference.safetensors with the official `safetensors` package
(HuggingFace's implementation), so the C reader is checked against an independent writer.

Run with the project venv:  .venv/bin/python tools/make_io_fixtures.py
The expected values are simple closed forms that tests/test_io.c recomputes."""
import numpy as np
import torch
from safetensors.torch import save_file

def ramp(n, scale):
    return (np.arange(n, dtype=np.float64) - n / 2) * scale

tensors = {
    # f32 [2,3]: values (i - 3) * 0.25
    "bert.f32": torch.tensor(ramp(6, 0.25), dtype=torch.float32).reshape(2, 3),
    # f16 [4]: exactly representable values, incl. a subnormal and negative zero
    "bert.f16": torch.tensor([1.5, -2.0, 6.103515625e-05 / 4, -0.0], dtype=torch.float16),
    # bf16 [3]
    "bert.bf16": torch.tensor([1.0, -3.5, 256.0], dtype=torch.bfloat16),
    # f64 [2]
    "bert.f64": torch.tensor([0.1, -1e-3], dtype=torch.float64),
    # i64 [5]: 0, -1, 2, -3, 4
    "bert.i64": torch.tensor([0, -1, 2, -3, 4], dtype=torch.int64),
    # scalar-shaped and empty tensors are legal in safetensors
    "bert.empty": torch.zeros(0, 4, dtype=torch.float32),
}
save_file(tensors, "tests/data/io/reference.safetensors", metadata={"format": "pt", "note": "bert.c io fixture"})
print("wrote tests/data/io/reference.safetensors")
