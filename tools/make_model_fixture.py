"""Writes the whole-model fixtures that tests/test_model.c checks bert.c against.

Reference: tools/torch_bert.py (HF BertForPreTraining architecture and names), run in
float64 so the expected values carry no float32 rounding of their own. Each fixture is a
safetensors file holding the float32 weights (HF names), the inputs, the expected MLM/NSP
logits and losses, the gradient of every parameter ("grad.<name>"), and the losses of 10
AdamW steps on the same batch (torch.optim.AdamW, no decay for biases and LayerNorm), plus a
config.json. No dropout (eval mode; bert.c runs with training=false).

  fixture        gelu (erf),  B=3 T=16 P=4: suffix padding, a mask with a hole, ignored slots
  fixture_tanh   gelu_new,    B=2 T=12 P=3: no padding, every slot labelled

Run: /usr/bin/python3 tools/make_model_fixture.py   (Debian python3-torch; no venv)

A larger, uncommitted check at real BERT shapes (bert-base widths, 2 layers, T=128, 20
masked slots, padding) -- the C test reads it when BERT_EXTRA_FIXTURE names it:
  /usr/bin/python3 tools/make_model_fixture.py --large /tmp/bert_large/fixture_base
  BERT_EXTRA_FIXTURE=/tmp/bert_large/fixture_base ./build/tests/test_model
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import torch_bert  # noqa: E402

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "model")
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)


def make_config(act):
    return torch_bert.BertConfig(vocab_size=317, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=256, hidden_act=act, max_position_embeddings=32,
                                 type_vocab_size=2, layer_norm_eps=1e-12, initializer_range=0.02)


def make_model(cfg, seed):
    torch.manual_seed(seed)
    model = torch_bert.BertForPreTraining(cfg)
    with torch.no_grad():  # non-trivial biases and LayerNorm parameters, so their gradients are tested
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.05)
            elif "LayerNorm" in name:
                p.normal_(1.0, 0.1)
            else:
                p.mul_(4.0)  # larger weights: logits with real spread, not all ~uniform
    return model


def batch_main(cfg, rng):
    B, T, P = 3, 16, 4
    lengths = [16, 11, 13]
    mask = np.zeros((B, T), np.int32)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    mask[2, 5] = 0  # a hole: sequence 2 has padding inside its real range
    ids = rng.integers(5, cfg.vocab_size, size=(B, T)).astype(np.int32)
    ids[mask == 0] = 0
    types = np.zeros((B, T), np.int32)
    for b, n in enumerate(lengths):
        types[b, n // 2:n] = 1
    positions = np.array([[1, 4, 9, 14], [2, 3, 7, 0], [1, 8, 12, 0]], np.int32)
    labels = rng.integers(0, cfg.vocab_size, size=(B, P)).astype(np.int32)
    labels[1, 3] = -1
    labels[2, 3] = -1
    labels[2, 0] = -1  # an ignored slot before a used one: compaction has to move rows
    nsp = np.array([0, 1, 1], np.int32)
    return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, masked_positions=positions,
                masked_labels=labels, next_sentence_labels=nsp)


def batch_full(cfg, rng):
    B, T, P = 2, 12, 3
    ids = rng.integers(5, cfg.vocab_size, size=(B, T)).astype(np.int32)
    types = np.zeros((B, T), np.int32)
    types[:, 6:] = 1
    positions = np.array([[3, 7, 11], [0, 5, 6]], np.int32)
    labels = rng.integers(0, cfg.vocab_size, size=(B, P)).astype(np.int32)
    return dict(input_ids=ids, token_type_ids=types, attention_mask=np.ones((B, T), np.int32),
                masked_positions=positions, masked_labels=labels, next_sentence_labels=np.array([1, 0], np.int32))


def batch_large(cfg, rng):
    B, T, P = 4, 128, 20
    lengths = [128, 97, 128, 64]
    mask = np.zeros((B, T), np.int32)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    ids = rng.integers(1000, cfg.vocab_size, size=(B, T)).astype(np.int32)
    ids[mask == 0] = 0
    types = np.zeros((B, T), np.int32)
    for b, n in enumerate(lengths):
        types[b, n // 2:n] = 1
    positions = np.stack([np.sort(rng.choice(np.arange(1, n - 1), P, replace=False)) for n in lengths]).astype(np.int32)
    labels = rng.integers(1000, cfg.vocab_size, size=(B, P)).astype(np.int32)
    labels[1, 15:] = -1
    labels[3, 10:] = -1
    return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, masked_positions=positions,
                masked_labels=labels, next_sentence_labels=np.array([0, 1, 1, 0], np.int32))


def run(model, batch):
    t = {k: torch.from_numpy(v.astype(np.int64)) for k, v in batch.items()}
    return model(t["input_ids"], t["token_type_ids"], t["attention_mask"], t["masked_positions"],
                 t["masked_labels"], t["next_sentence_labels"])


def build(name, act, batch_fn, seed, cfg=None, out_dir=OUT_DIR, steps=10):
    cfg = cfg or make_config(act)
    model = make_model(cfg, seed)
    weights = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    model = model.double().eval()  # the reference computes in float64 from the float32 weights
    batch = batch_fn(cfg, np.random.default_rng(seed))

    loss, mlm_logits, nsp_logits = run(model, batch)
    model.zero_grad()
    loss.backward()
    grads = {f"grad.{k}": p.grad.numpy().astype(np.float32) for k, p in model.named_parameters()}
    mlm = mlm_logits.detach().numpy().copy()
    mlm[batch["masked_labels"].reshape(-1) == -1] = 0.0  # bert.c leaves ignored slots zero
    with torch.no_grad():  # the two halves of the loss, for a sharper report on mismatch
        labels = torch.from_numpy(batch["masked_labels"].reshape(-1).astype(np.int64))
        mlm_loss = torch.nn.functional.cross_entropy(mlm_logits, labels, ignore_index=-1)

    opt = torch.optim.AdamW(model.adamw_param_groups(ADAMW["weight_decay"]), lr=ADAMW["lr"], betas=ADAMW["betas"],
                            eps=ADAMW["eps"])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        step_loss, _, _ = run(model, batch)
        losses.append(step_loss.item())
        step_loss.backward()
        opt.step()
    with torch.no_grad():
        losses.append(run(model, batch)[0].item())  # after the 10th step

    tensors = dict(weights)
    tensors.update({f"input.{k}": v for k, v in batch.items()})
    tensors["expect.mlm_logits"] = mlm.astype(np.float32)
    tensors["expect.nsp_logits"] = nsp_logits.detach().numpy().astype(np.float32)
    tensors["expect.loss"] = np.array([loss.item()], np.float32)
    tensors["expect.mlm_loss"] = np.array([mlm_loss.item()], np.float32)
    tensors["expect.adamw_losses"] = np.array(losses, np.float32)
    tensors["adamw.hparams"] = np.array([ADAMW["lr"], *ADAMW["betas"], ADAMW["eps"], ADAMW["weight_decay"]],
                                        np.float32)
    tensors.update(grads)
    os.makedirs(out_dir, exist_ok=True)
    safetensors_io.write(os.path.join(out_dir, f"{name}.safetensors"), tensors,
                         {"format": "pt", "generator": "tools/make_model_fixture.py"})
    with open(os.path.join(out_dir, f"{name}.config.json"), "w") as f:
        json.dump(cfg.to_dict(), f, indent=2)
        f.write("\n")
    print(f"{name}: loss {loss.item():.6f}, adamw losses {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--large", metavar="STEM", help="write only the large check to STEM.safetensors/.config.json")
    args = ap.parse_args()
    if args.large:
        torch.set_num_threads(2)
        cfg = torch_bert.preset("bert-base")
        cfg.num_hidden_layers = 2
        build(os.path.basename(args.large), "gelu", batch_large, seed=7, cfg=cfg,
              out_dir=os.path.dirname(os.path.abspath(args.large)), steps=3)
    else:
        torch.set_num_threads(1)
        build("fixture", "gelu", batch_main, seed=1234)
        build("fixture_tanh", "gelu_new", batch_full, seed=99)
