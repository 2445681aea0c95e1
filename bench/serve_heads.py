"""For bench/run_serve_bench.sh's /predict and /v1/qa points: the MiniLM folder with a task
head added, as transformers' BertForSequenceClassification (2 labels) or
BertForQuestionAnswering saves it (model.safetensors, config.json, the tokenizer's files).
The heads are freshly initialised (seed 0), not fine-tuned: the answers mean nothing, but
speed does not depend on the weights, and both servers load the same folder.

    python bench/serve_heads.py MINILM_DIR classify|qa OUT_DIR"""
import os
import shutil
import sys

import torch
from transformers import AutoTokenizer, BertForQuestionAnswering, BertForSequenceClassification

src, task, out = sys.argv[1], sys.argv[2], sys.argv[3]
torch.manual_seed(0)
if task == "classify":
    model = BertForSequenceClassification.from_pretrained(src, num_labels=2,
                                                          id2label={0: "not_equivalent", 1: "equivalent"},
                                                          label2id={"not_equivalent": 0, "equivalent": 1})
elif task == "qa":
    model = BertForQuestionAnswering.from_pretrained(src)
else:
    sys.exit(f"serve_heads: task {task}: classify or qa")
model.save_pretrained(out, safe_serialization=True)
AutoTokenizer.from_pretrained(src).save_pretrained(out)
shutil.copy(os.path.join(src, "vocab.txt"), out)   # bert.c reads the WordPiece vocabulary (transformers 5 saves tokenizer.json only)
print(out)
