"""Cross-checks against HuggingFace transformers itself (not needed by the test suite):

1. The committed model fixtures (tests/data/model/*.safetensors, made with tools/torch_bert.py)
   agree with transformers' BertForPreTraining: the same weights give the same MLM/NSP logits,
   loss and gradients, so torch_bert.py really is HF's architecture.
2. A checkpoint written by ./bert (train_demo) loads with BertForPreTraining.from_pretrained
   (safetensors, config.json) with no missing or unexpected weights.

Run with a venv that has transformers + torch, e.g.:
  .venv-bench/bin/python tools/check_hf_parity.py
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

from transformers import BertConfig, BertForPreTraining  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def rel(a, b, floor):
    return float((np.abs(a - b) / np.maximum(np.abs(b), floor)).max())


def check_fixture(stem):
    t, _ = safetensors_io.read(os.path.join(ROOT, "tests", "data", "model", f"{stem}.safetensors"))
    cfg = BertConfig.from_json_file(os.path.join(ROOT, "tests", "data", "model", f"{stem}.config.json"))
    cfg._attn_implementation = "eager"  # the reference attention (also what torch_bert.py does)
    model = BertForPreTraining(cfg)
    weights = {k: torch.from_numpy(v.copy()) for k, v in t.items() if not k.split(".")[0] in ("input", "expect", "grad", "adamw")}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [k for k in missing if k not in ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias",
                                                "bert.embeddings.position_ids")]
    assert not missing and not unexpected, (missing, unexpected)
    model = model.double().eval()
    inp = {k[6:]: torch.from_numpy(v.astype(np.int64)) for k, v in t.items() if k.startswith("input.")}
    B, T = inp["input_ids"].shape
    labels = torch.full((B, T), -100, dtype=torch.long)
    pos, lab = inp["masked_positions"], inp["masked_labels"]
    for b in range(B):
        for p in range(pos.shape[1]):
            if lab[b, p] != -1:
                labels[b, pos[b, p]] = lab[b, p]
    out = model(input_ids=inp["input_ids"], token_type_ids=inp["token_type_ids"], attention_mask=inp["attention_mask"],
                labels=labels, next_sentence_label=inp["next_sentence_labels"])
    out.loss.backward()
    mlm = torch.gather(out.prediction_logits, 1, pos.unsqueeze(-1).expand(-1, -1, cfg.vocab_size)).reshape(-1, cfg.vocab_size)
    mlm = mlm.detach().numpy()
    mlm[lab.reshape(-1).numpy() == -1] = 0
    e_loss = abs(out.loss.item() - t["expect.loss"][0]) / t["expect.loss"][0]
    e_mlm = rel(mlm, t["expect.mlm_logits"], 1e-2)
    e_nsp = rel(out.seq_relationship_logits.detach().numpy(), t["expect.nsp_logits"], 1e-2)
    worst = 0.0
    for name, p in model.named_parameters():
        ref = t[f"grad.{name}"]
        worst = max(worst, rel(p.grad.numpy(), ref, max(np.abs(ref).max() * 1e-2, 1e-12)))
    ok = e_loss < 1e-6 and e_mlm < 1e-5 and e_nsp < 1e-5 and worst < 1e-5
    print(f"{'ok  ' if ok else 'FAIL'} {stem}: HF vs fixture: loss {e_loss:.1e}, MLM logits {e_mlm:.1e}, "
          f"NSP {e_nsp:.1e}, gradients {worst:.1e}")
    return ok


def check_from_pretrained():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "model.safetensors")
        subprocess.run([os.path.join(ROOT, "bert"), "train_demo", "--steps", "2", "--batch", "4", "--seq", "16",
                        "--preds", "2", "--out", out], check=True, capture_output=True)
        model, info = BertForPreTraining.from_pretrained(tmp, output_loading_info=True)
        bad = {k: v for k, v in info.items() if v and k != "mismatched_keys" or (k == "mismatched_keys" and v)}
        mine, _ = safetensors_io.read(out)
        same = np.array_equal(model.bert.encoder.layer[1].output.dense.weight.detach().numpy(),
                              mine["bert.encoder.layer.1.output.dense.weight"])
        tied = model.cls.predictions.decoder.weight.data_ptr() == model.bert.embeddings.word_embeddings.weight.data_ptr()
        ok = not bad and same and tied
        print(f"{'ok  ' if ok else 'FAIL'} from_pretrained(bert.c checkpoint): loading info {bad or 'clean'}, "
              f"weights identical {same}, decoder tied {tied}")
        return ok


if __name__ == "__main__":
    results = [check_fixture("fixture"), check_fixture("fixture_tanh"), check_from_pretrained()]
    sys.exit(0 if all(results) else 1)
