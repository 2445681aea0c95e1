#!/usr/bin/env python3
"""Fixture for tests/test_embed.c: a small random BERT encoder (HF's BertModel, seeded, the
1500-token uncased vocabulary of tests/data/tokenizer) and the sentence embeddings
sentence-transformers' recipe gives for a few sentences: HF's BertTokenizer, truncation to
max_seq_length, the last hidden state averaged over the attention mask, L2-normalised
(torch.nn.functional.normalize). Writes tests/data/embed/{model.safetensors, config.json,
vocab.txt, sentences.txt, expected.json}.

    .venv-bf16peer/bin/python tools/make_embed_fixture.py     (transformers, torch, safetensors)
"""
import json
import os
import shutil

import torch
from transformers import BertConfig, BertModel, BertTokenizer

HERE = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(HERE, "tests", "data", "embed")
VOCAB = os.path.join(HERE, "tests", "data", "tokenizer", "vocab_uncased_1500.txt")
MAX_SEQ = 24
SENTENCES = [
    "The cat sat on the mat.",
    "",
    "A much longer sentence that goes on and on, well past the twenty-four tokens this fixture allows, "
    "so that it is cut exactly where the tokenizer's truncation cuts it, and then some more words.",
    "Naïve café résumé, Zürich!",
    "中文 and English mixed 123 456.",
    "?!",
    "one",
    "Two words",
]


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(5)
    n_vocab = sum(1 for _ in open(VOCAB, encoding="utf-8"))
    cfg = BertConfig(vocab_size=n_vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, hidden_act="gelu")
    model = BertModel(cfg).eval()
    with torch.no_grad():   # larger LayerNorm / bias values than the init's 1 and 0, so they matter
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(OUT, safe_serialization=True)
    shutil.copy(VOCAB, os.path.join(OUT, "vocab.txt"))
    tok = BertTokenizer(VOCAB, do_lower_case=True)
    with torch.no_grad():
        enc = tok(SENTENCES, padding=True, truncation=True, max_length=MAX_SEQ, return_tensors="pt")
        out = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        mean = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        emb = torch.nn.functional.normalize(mean, p=2, dim=1)
    with open(os.path.join(OUT, "sentences.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(SENTENCES) + "\n")
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"max_seq_length": MAX_SEQ, "tokens": enc["attention_mask"].sum(1).tolist(),
                   "mean": mean.tolist(), "normalized": emb.tolist()}, f)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
