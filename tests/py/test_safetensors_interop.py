"""A checkpoint written by ./bert loads into PyTorch with HuggingFace names: read with a
small independent safetensors reader (tools/safetensors_io.py, numpy only), converted to
torch tensors, and loaded strictly into tools/torch_bert.py's BertForPreTraining built from
the config.json ./bert wrote beside it. Then the reverse direction in miniature: a file
written from Python (fixtures in tests/data/model) is what tests/test_model.c loads.

Run from the repository root with /usr/bin/python3 after `make` (needs ./bert; the
environment variable BERT_BIN may name another binary)."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import safetensors_io  # noqa: E402
import torch_bert  # noqa: E402

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print(f"  ok   {what}")
    else:
        failed += 1
        print(f"  FAIL {what}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ckpt", "model.safetensors")
        bert = os.environ.get("BERT_BIN", os.path.join(ROOT, "bert"))
        run = subprocess.run([bert, "train_demo", "--steps", "3", "--batch", "4", "--seq", "16", "--preds", "2",
                              "--log_every", "1", "--out", out], capture_output=True, text=True)
        check(run.returncode == 0, f"./bert train_demo writes a checkpoint (exit {run.returncode}) {run.stderr.strip()}")
        if run.returncode != 0:
            return
        tensors, meta = safetensors_io.read(out)
        check(meta.get("format") == "pt", "metadata format=pt (transformers requires it)")
        check(all(a.dtype == np.float32 for a in tensors.values()), "every tensor is F32")
        with open(os.path.join(tmp, "ckpt", "config.json")) as f:
            cfg_json = json.load(f)
        fields = torch_bert.BertConfig.__dataclass_fields__
        cfg = torch_bert.BertConfig(**{k: v for k, v in cfg_json.items() if k in fields})
        model = torch_bert.BertForPreTraining(cfg)
        expected = set(model.state_dict().keys())
        check(set(tensors) == expected, f"tensor names are HF's ({len(tensors)} vs {len(expected)}); "
              f"extra {sorted(set(tensors) - expected)[:3]} missing {sorted(expected - set(tensors))[:3]}")
        state = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}
        try:
            model.load_state_dict(state, strict=True)
            check(True, "load_state_dict(strict=True)")
        except RuntimeError as e:
            check(False, f"load_state_dict(strict=True): {e}")
            return
        w = model.bert.embeddings.word_embeddings.weight
        check(tuple(w.shape) == (cfg.vocab_size, cfg.hidden_size), "word embedding shape [vocab, hidden]")
        check(all(torch.isfinite(p).all() for p in model.parameters()), "all weights finite")
        # trained: the LayerNorm weights moved away from their initial 1
        ln = model.bert.embeddings.LayerNorm.weight
        check(float((ln - 1).abs().max()) > 0, "weights were trained (LayerNorm weight != 1)")
        ids = torch.randint(4, 200, (2, 16))
        loss, mlm, nsp = model.eval()(ids, torch.zeros_like(ids), torch.ones_like(ids), torch.tensor([[1, 2], [3, 4]]),
                                      torch.tensor([[10, 11], [12, 13]]), torch.tensor([0, 1]))
        check(torch.isfinite(loss).item() and mlm.shape == (4, cfg.vocab_size), "PyTorch forward on the loaded weights")


if __name__ == "__main__":
    main()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
