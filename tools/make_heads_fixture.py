"""Fixtures for the task heads (tests/test_model.c): HuggingFace's BertForQuestionAnswering
and BertForSequenceClassification (classification and regression), re-written on the encoder
of tools/torch_bert.py, run in float64 from float32 weights, eval mode (no dropout).

  QA        qa_outputs (Linear H -> 2), logits split into start / end [B, T]; positions
            clamped to [0, T] and T ignored, loss = (CE(start) + CE(end)) / 2. No pooler.
  classify  pooler -> dropout -> classifier (Linear H -> N); CE for N >= 2, MSE for N == 1.

Each file holds the weights (HF names), inputs, expected logits and loss, and "grad.<name>"
for every parameter. Run: /usr/bin/python3 tools/make_heads_fixture.py"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import torch_bert  # noqa: E402

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "model")


class TaskModel(torch.nn.Module):
    def __init__(self, cfg, kind, num_labels=0):
        super().__init__()
        self.kind, self.num_labels = kind, num_labels
        self.bert = torch_bert.BertModel(cfg)
        if kind == "qa":
            del self.bert.pooler   # HF's BertForQuestionAnswering: add_pooling_layer=False
            self.qa_outputs = torch.nn.Linear(cfg.hidden_size, 2)
        else:
            self.classifier = torch.nn.Linear(cfg.hidden_size, num_labels)

    def forward(self, ids, types, mask, labels):
        additive = (1.0 - mask[:, None, None, :].to(self.bert.embeddings.word_embeddings.weight.dtype)) * \
            torch.finfo(torch.float32).min
        seq = self.bert.encoder(self.bert.embeddings(ids, types), additive)
        if self.kind == "qa":
            start, end = self.qa_outputs(seq).split(1, dim=-1)
            start, end = start.squeeze(-1), end.squeeze(-1)
            T = start.size(1)
            s, e = labels[0].clamp(0, T), labels[1].clamp(0, T)
            loss = (F.cross_entropy(start, s, ignore_index=T) + F.cross_entropy(end, e, ignore_index=T)) / 2
            return loss, (start, end)
        pooled = self.bert.pooler(seq)
        logits = self.classifier(pooled)
        if self.num_labels == 1:
            loss = F.mse_loss(logits.squeeze(-1), labels)
        else:
            loss = F.cross_entropy(logits, labels)
        return loss, (logits,)


def build(name, kind, num_labels, seed):
    torch.manual_seed(seed)
    cfg = torch_bert.BertConfig(vocab_size=211, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=96, hidden_act="gelu", max_position_embeddings=24, type_vocab_size=2,
                                layer_norm_eps=1e-12, initializer_range=0.02)
    model = TaskModel(cfg, kind, num_labels)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.05 if n.endswith("bias") else 0.1) + (1.0 if "LayerNorm.weight" in n else 0))
    weights = {("bert." + k[5:] if k.startswith("bert.") else k): v.detach().numpy().astype(np.float32)
               for k, v in model.state_dict().items()}
    model = model.double().eval()
    rng = np.random.default_rng(seed)
    B, T = 4, 16
    lengths = [16, 12, 9, 14]
    mask = np.zeros((B, T), np.int64)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    ids = rng.integers(3, cfg.vocab_size, size=(B, T))
    ids[mask == 0] = 0
    types = np.zeros((B, T), np.int64)
    for b, n in enumerate(lengths):
        types[b, n // 2:n] = 1
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    if kind == "qa":
        # sequence 2: start beyond the sequence (clamped to T, ignored); sequence 3: a negative end (clamped to 0)
        starts, ends = np.array([3, 5, 40, 7]), np.array([6, 5, 8, -2])
        labels = (t(starts), t(ends))
        extra = {"input.start_positions": starts.astype(np.int32), "input.end_positions": ends.astype(np.int32)}
    elif num_labels == 1:
        targets = np.array([0.5, -1.25, 2.0, 0.0])
        labels = t(targets)
        extra = {"input.regression_targets": targets.astype(np.float32)}
        labels = labels.double()
    else:
        classes = np.array([2, 0, 1, 2])
        labels = t(classes)
        extra = {"input.class_labels": classes.astype(np.int32)}
    loss, logits = model(t(ids), t(types), t(mask), labels)
    model.zero_grad()
    loss.backward()
    tensors = dict(weights)
    tensors.update({"input.input_ids": ids.astype(np.int32), "input.token_type_ids": types.astype(np.int32),
                    "input.attention_mask": mask.astype(np.int32)})
    tensors.update(extra)
    for i, l in enumerate(logits):
        tensors["expect.logits%d" % i] = l.detach().numpy().astype(np.float32)
    tensors["expect.loss"] = np.array([loss.item()], np.float32)
    for n, p in model.named_parameters():
        tensors["grad." + n] = p.grad.numpy().astype(np.float32)
    safetensors_io.write(os.path.join(OUT_DIR, name + ".safetensors"), tensors,
                         {"format": "pt", "generator": "tools/make_heads_fixture.py", "num_labels": num_labels})
    print(name, "loss", loss.item())


if __name__ == "__main__":
    torch.set_num_threads(1)
    build("heads_qa", "qa", 0, seed=5)
    build("heads_classify", "classify", 3, seed=6)
    build("heads_regress", "classify", 1, seed=7)
