"""Checkpoints in the formats users hold, for tests/test_checkpoint_import.c (issue 31): one
small random BERT (bert-tiny's shape scaled down: 2 layers, hidden 16, vocabulary 37 tokens
padded to 40 rows as NVIDIA pads it) written

  hf/           HF's save_pretrained: model.safetensors + config.json + vocab.txt (the reference)
  hf_bin/       HF's save_pretrained(safe_serialization=False): pytorch_model.bin
  half/         the state dict in fp16 and in bf16, as torch.save .bin and as safetensors
  nvidia/       NVIDIA's recipe's layout: model.pt = {'model': state_dict with their
                'dense_act' names and the tied decoder, 'optimizer': ..., 'epoch', 'files'},
                bert_config.json saying vocab_size 37 (the rows are padded to 40)
  tf/           Google's names (bert/encoder/layer_0/.../kernel, [in, out]) in a TensorFlow
                checkpoint (tf.compat.v1 Saver: bert_model.ckpt.index + .data-00000-of-00001),
                bert_config.json; expected.safetensors = what HF's own TensorFlow loader
                (transformers 4.x load_tf_weights_in_bert) makes of it
  logits.json   HF's MLM and NSP logits of the reference model on a fixed batch

Run with a venv holding transformers 4.x (it still has the TensorFlow loader), TensorFlow and
torch:  /usr/bin/python3 -m venv --system-site-packages .venv-ckpt
        .venv-ckpt/bin/pip install "transformers==4.44.2" "numpy<2" tensorflow-cpu==2.18.1 safetensors
        .venv-ckpt/bin/python tools/make_checkpoint_fixtures.py"""
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import BertConfig, BertForPreTraining

OUT = "tests/data/checkpoints"
TOKENS = 37           # the vocabulary file's tokens
ROWS = 40             # the model's rows: padded to a multiple of 8, as NVIDIA's recipe does

torch.manual_seed(31)
cfg = BertConfig(vocab_size=ROWS, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=32, type_vocab_size=2)
model = BertForPreTraining(cfg).eval()
with torch.no_grad():   # every tensor random and away from its initial value (LayerNorm, biases)
    for name, p in model.named_parameters():
        p.copy_(torch.randn_like(p) * (0.3 if p.dim() > 1 else 0.5) + (1.0 if "LayerNorm.weight" in name else 0.0))
sd = {k: v for k, v in model.state_dict().items() if "position_ids" not in k}

shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["w%02d" % i for i in range(TOKENS - 5)]


def write_vocab(d):
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")


# HF: the reference (safetensors) and the same model as pytorch_model.bin
model.save_pretrained(f"{OUT}/hf", safe_serialization=True)
model.save_pretrained(f"{OUT}/hf_bin", safe_serialization=False)
write_vocab(f"{OUT}/hf")
write_vocab(f"{OUT}/hf_bin")

# fp16 / bf16 state dicts: each as torch.save and as safetensors (the same values)
os.makedirs(f"{OUT}/half")
for dtype, tag in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
    half = {k: v.to(dtype).contiguous() for k, v in sd.items() if "predictions.decoder." not in k}
    torch.save(half, f"{OUT}/half/{tag}.bin")
    save_file(half, f"{OUT}/half/{tag}.safetensors")

# NVIDIA: their module names, the tied decoder weight stored (sharing the embedding's storage),
# the state dict wrapped with the optimizer's, and Google's config keys with the unpadded count
nv = {}
for k, v in model.state_dict().items():
    if "position_ids" in k:
        continue
    nv[k.replace("intermediate.dense.", "intermediate.dense_act.")
        .replace("transform.dense.", "transform.dense_act.")] = v
assert nv["cls.predictions.decoder.weight"].data_ptr() == nv["bert.embeddings.word_embeddings.weight"].data_ptr()
os.makedirs(f"{OUT}/nvidia")
torch.save({"model": nv,
            "optimizer": {"state": {0: {"step": 3, "exp_avg": torch.zeros(4)}}, "param_groups": [{"lr": 1e-4, "params": [0]}]},
            "master params": [torch.ones(2)], "files": [0, "train_shard_0.hdf5"], "epoch": 1, "data_loader": None},
           f"{OUT}/nvidia/model.pt")
google_cfg = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": 32,
              "max_position_embeddings": 32, "num_attention_heads": 2, "num_hidden_layers": 2,
              "type_vocab_size": 2, "vocab_size": TOKENS}
with open(f"{OUT}/nvidia/bert_config.json", "w") as f:
    json.dump(google_cfg, f, indent=2)
write_vocab(f"{OUT}/nvidia")


# Google: TensorFlow variables under their names; kernels [in, out] (tools/google_tf_checkpoint.py)
import sys  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from google_tf_checkpoint import write_google_checkpoint  # noqa: E402  (TensorFlow after torch)

os.makedirs(f"{OUT}/tf")
write_google_checkpoint(sd, f"{OUT}/tf/bert_model.ckpt", optimizer_slots=True)
with open(f"{OUT}/tf/bert_config.json", "w") as f:
    json.dump(dict(google_cfg, vocab_size=ROWS), f, indent=2)
write_vocab(f"{OUT}/tf")

# what HF's own TensorFlow loader makes of Google's checkpoint: the expected tensors
from transformers.models.bert.modeling_bert import load_tf_weights_in_bert  # noqa: E402

hf_from_tf = BertForPreTraining(cfg)
load_tf_weights_in_bert(hf_from_tf, cfg, f"{OUT}/tf/bert_model.ckpt")
expected = {k: v.contiguous() for k, v in hf_from_tf.state_dict().items()
            if "position_ids" not in k and "predictions.decoder." not in k}
for k, v in expected.items():   # HF's conversion gives back the very tensors written
    assert torch.equal(v, sd[k]), k
save_file(expected, f"{OUT}/tf/expected.safetensors")

# logits of the reference model on a fixed batch: 2 sequences of 10, masked slots at 3 positions
ids = torch.tensor([[2, 7, 9, 11, 4, 13, 3, 20, 21, 3], [2, 30, 4, 8, 3, 14, 4, 3, 0, 0]])
types = torch.tensor([[0] * 7 + [1] * 3, [0] * 5 + [1] * 3 + [0] * 2])
mask = (ids != 0).long()
with torch.no_grad():
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
positions = np.array([[1, 4, 8], [2, 6, 5]], dtype=np.int32)
mlm = out.prediction_logits.numpy()[np.arange(2)[:, None], positions]   # [2, 3, ROWS]
with open(f"{OUT}/logits.json", "w") as f:   # float32 values written with 9 digits: exact when read back
    json.dump({"input_ids": ids.tolist(), "token_type_ids": types.tolist(), "attention_mask": mask.tolist(),
               "positions": positions.tolist(),
               "mlm": [[[float("%.9g" % x) for x in row] for row in seq] for seq in mlm.astype(np.float32)],
               "nsp": [[float("%.9g" % x) for x in row] for row in out.seq_relationship_logits.numpy()]}, f)
print("wrote", OUT, sorted(os.listdir(OUT)))
