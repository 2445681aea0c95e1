#!/usr/bin/env python3
"""A copy of all-MiniLM-L6-v2 small enough to travel to the GPU machine (the device tool carries
64 MiB a call), for scripts/gpu_check.sh's fine-tune of real weights on both devices.

A GLUE fine-tune reads only the word-embedding rows of the tokens its data holds (and the
special tokens): the other rows are never read, their gradient is zero and AdamW leaves a zero
row zero, so zeroing them changes nothing the fine-tune computes. The rows a task's TSV files
use are kept (ids from `bert tokenize --ids`, read on stdin), every other row is zeroed, and
every tensor is rounded to bf16 (round to nearest even; bert.c reads BF16 safetensors): the
start both devices share. xz then shrinks the zero rows to nothing, and bf16's 8-bit exponents
compress better than fp16's (22 MB against 28 for MRPC's rows).

    (tail -n +2 MRPC/train.tsv; tail -n +2 MRPC/dev.tsv) | cut -f4,5 | tr '\\t' '\\n' |
      ./bert tokenize --vocab_file MODEL/vocab.txt --ids --threads 1 |
      tools/minilm_for_device.py MODEL OUT_DIR
"""
import json
import os
import shutil
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":   # position_ids (I64): HF's buffer, not a weight
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        u = np.ascontiguousarray(tensors[name], dtype="<f4").view("<u4").astype(np.uint64)
        x = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")   # to bf16, ties to even (no NaN here)
        header[name] = {"dtype": "BF16", "shape": list(x.shape), "data_offsets": [at, at + x.nbytes]}
        blobs.append(x.tobytes())
        at += x.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model, out = sys.argv[1], sys.argv[2]
    used = {0, 100, 101, 102, 103}   # [PAD] [UNK] [CLS] [SEP] [MASK]
    for line in sys.stdin:
        used.update(int(w) for w in line.split())
    t = read_safetensors(os.path.join(model, "model.safetensors"))
    emb = [k for k in t if k.endswith("word_embeddings.weight")]
    assert len(emb) == 1, emb
    w = t[emb[0]].copy()
    keep = np.zeros(w.shape[0], dtype=bool)
    keep[[i for i in used if i < w.shape[0]]] = True
    w[~keep] = 0
    t[emb[0]] = w
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    for f in ("config.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(model, f)):
            shutil.copy(os.path.join(model, f), out)
    print(f"{out}: {keep.sum()} of {w.shape[0]} word-embedding rows kept, {len(t)} tensors in bf16")


if __name__ == "__main__":
    main()
