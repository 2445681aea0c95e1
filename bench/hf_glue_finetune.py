#!/usr/bin/env python3
"""The transformers side of bench/run_glue_compare.sh: fine-tune a BERT checkpoint on a GLUE
task with the hyperparameters `bert glue` uses, in a plain PyTorch loop (not Trainer, so that
every setting is the same on both sides), then score the dev set.

  .venv-bf16peer/bin/python bench/hf_glue_finetune.py --task rte --data_dir glue/RTE \
      --model MODEL_DIR --seed 1 [--epochs 3 --batch 32 --lr 2e-5 --max_seq_length 128]
      [--train_examples N] [--max_steps N] [--threads 2] [--json out.jsonl]

What is the same as `bert glue` (src/tasks/glue_run.c, src/train/finetune.c):
- rows read as HF's GLUE processors read them (csv.reader, tab, no quoting, utf-8-sig);
- [CLS] a [SEP] b [SEP], pairs cut one token at a time from the longer text (longest_first)
  to --max_seq_length; batches padded to their longest row;
- BertForSequenceClassification (pooled output, dropout 0.1, a linear head; MSE for STS-B);
- AdamW (betas 0.9/0.999, eps 1e-6, decoupled decay 0.01 on every tensor but biases and
  LayerNorm), the gradient norm clipped to 1.0;
- the learning rate of optimizer step k (0-based): linear_warmup_lr in src/train/schedulers.c,
  p = (k+1)/total; base*p/warmup while p < warmup, else base*max((p-1)/(warmup-1), 0);
- steps = ceil(n/batch) per epoch, the last batch of an epoch shorter; a new order each epoch;
- dropout on while training.
What differs, necessarily: the random streams. The head is drawn by transformers'
_init_weights (normal(0, 0.02), zero bias) from torch's generator seeded with --seed; the
order from torch.randperm with a torch.Generator seeded with --seed; dropout masks from
torch's global generator.
--head_init truncated_normal draws the head as bert.c (and Google's run_classifier.py) does:
a normal of std 0.02 cut at 2 std and redrawn (torch.nn.init.trunc_normal_), from torch's
generator seeded with --seed; the bias stays zero.
"""
import argparse
import csv
import json
import math
import os
import sys
import time

import numpy as np

# task: (header, text a, text b, label column, labels or None for regression)
TASKS = {
    "cola": (False, 3, None, 1, ["0", "1"]),
    "sst-2": (True, 0, None, 1, ["0", "1"]),
    "mrpc": (True, 3, 4, 0, ["0", "1"]),
    "sts-b": (True, 7, 8, -1, None),
    "rte": (True, 1, 2, -1, ["entailment", "not_entailment"]),
}


def read_rows(path, task, limit=0):
    header, a, b, lab, labels = TASKS[task]
    with open(path, encoding="utf-8-sig") as fp:   # MRPC's dev.tsv starts with a BOM
        rows = list(csv.reader(fp, delimiter="\t", quotechar=None))
    if header:
        rows = rows[1:]
    rows = [r for r in rows if r]   # blank lines, as bert glue skips them
    if limit > 0:
        rows = rows[:limit]
    ta = [r[a] for r in rows]
    tb = [r[b] for r in rows] if b is not None else None
    y = [float(r[lab]) for r in rows] if labels is None else [labels.index(r[lab]) for r in rows]
    return ta, tb, y


def encode(tok, ta, tb, max_len):
    enc = tok(ta, tb, truncation="longest_first", max_length=max_len, padding=False)
    return enc["input_ids"], enc["token_type_ids"]


def collate(ids, types, idx, torch):
    L = max(len(ids[i]) for i in idx)
    x = torch.zeros((len(idx), L), dtype=torch.long)
    t = torch.zeros((len(idx), L), dtype=torch.long)
    m = torch.zeros((len(idx), L), dtype=torch.long)
    for r, i in enumerate(idx):
        n = len(ids[i])
        x[r, :n] = torch.tensor(ids[i])
        t[r, :n] = torch.tensor(types[i])
        m[r, :n] = 1
    return x, t, m


def linear_warmup_lr(base, warmup, total, done):
    p = (done + 1) / total
    if p < warmup:
        return base * p / warmup
    return base * max((p - 1.0) / (warmup - 1.0), 0.0)


def metrics(task, pred, y):
    from sklearn.metrics import f1_score, matthews_corrcoef
    from scipy.stats import pearsonr, spearmanr
    y = np.asarray(y)
    if task == "sts-b":
        pear, spear = float(pearsonr(pred, y)[0]), float(spearmanr(pred, y)[0])
        return {"pearson": pear, "spearmanr": spear, "corr": (pear + spear) / 2}
    acc = float((pred == y).mean())
    if task == "cola":
        return {"mcc": float(matthews_corrcoef(y, pred))}
    if task == "mrpc":
        f1 = float(f1_score(y_true=y, y_pred=pred))
        return {"acc": acc, "f1": f1, "acc_and_f1": (acc + f1) / 2}
    return {"acc": acc}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", required=True, choices=sorted(TASKS))
    ap.add_argument("--data_dir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=float, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--eval_batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--weight_decay", type=float, default=0.01)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--max_seq_length", type=int, default=128)
    ap.add_argument("--train_examples", type=int, default=0)
    ap.add_argument("--max_steps", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log_freq", type=int, default=50)
    ap.add_argument("--json", help="append the result as one JSON line to this file")
    ap.add_argument("--head_init", choices=["normal", "truncated_normal"], default="normal",
                    help="the classifier's initialisation: transformers' (normal) or bert.c's / Google's")
    a = ap.parse_args()

    t_start = time.time()
    import torch
    import transformers
    from transformers import BertForSequenceClassification, BertTokenizer
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(a.threads)
    regression = TASKS[a.task][4] is None

    tok = BertTokenizer(os.path.join(a.model, "vocab.txt"), do_lower_case=True)
    tr_a, tr_b, tr_y = read_rows(os.path.join(a.data_dir, "train.tsv"), a.task, a.train_examples)
    dv_a, dv_b, dv_y = read_rows(os.path.join(a.data_dir, "dev.tsv"), a.task)
    tr_ids, tr_types = encode(tok, tr_a, tr_b, a.max_seq_length)
    dv_ids, dv_types = encode(tok, dv_a, dv_b, a.max_seq_length)

    torch.manual_seed(a.seed)   # the head's initialisation (transformers' _init_weights) and dropout
    model = BertForSequenceClassification.from_pretrained(a.model, num_labels=1 if regression else 2)
    if a.head_init == "truncated_normal":
        with torch.no_grad():
            torch.nn.init.trunc_normal_(model.classifier.weight, mean=0.0, std=0.02, a=-0.04, b=0.04)
            model.classifier.bias.zero_()
    model.train()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=a.eps)
    n = len(tr_ids)
    per_epoch = math.ceil(n / a.batch)
    total = a.max_steps if a.max_steps > 0 else math.ceil(per_epoch * a.epochs)
    # the scheduler's factor for step k; LambdaLR's factor before the first step is factor(0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: linear_warmup_lr(1.0, a.warmup, total, k))
    gen = torch.Generator().manual_seed(a.seed)
    y_all = torch.tensor(tr_y, dtype=torch.float32 if regression else torch.long)
    print(f"hf glue {a.task}: {n} examples, {total} steps of {a.batch}, lr {a.lr}, warmup {a.warmup}, "
          f"seed {a.seed}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.get_num_threads()} threads", file=sys.stderr, flush=True)

    t0 = time.time()
    step, seqs, pos, order, window = 0, 0, n, None, []
    while step < total:
        if pos >= n:
            order, pos = torch.randperm(n, generator=gen).tolist(), 0
        idx = order[pos:pos + a.batch]
        pos += len(idx)
        x, t, m = collate(tr_ids, tr_types, idx, torch)
        out = model(input_ids=x, token_type_ids=t, attention_mask=m, labels=y_all[idx])
        out.loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        seqs += len(idx)
        window.append(float(out.loss))
        if step % a.log_freq == 0 or step == total:
            el = time.time() - t0
            print(f"step {step}/{total} | loss {sum(window) / len(window):.4f} | lr {lr:.3e} | grad {gnorm:.3f} | "
                  f"{seqs / el:.1f} seq/s | {el:.0f}s", file=sys.stderr, flush=True)
            window = []
    train_s = time.time() - t0

    model.eval()
    t1 = time.time()
    preds = []
    with torch.no_grad():
        for s in range(0, len(dv_ids), a.eval_batch):
            idx = list(range(s, min(s + a.eval_batch, len(dv_ids))))
            x, t, m = collate(dv_ids, dv_types, idx, torch)
            logits = model(input_ids=x, token_type_ids=t, attention_mask=m).logits
            preds.append(logits[:, 0] if regression else logits.argmax(-1))
    eval_s = time.time() - t1
    pred = torch.cat(preds).numpy()
    res = {"side": "transformers", "task": a.task, "seed": a.seed, "train_examples": n, "steps": step,
           "train_sequences": seqs, "train_seconds": train_s, "train_seq_per_s": seqs / train_s,
           "head_init": a.head_init, "eval_examples": len(dv_ids), "eval_seconds": eval_s, "dev": metrics(a.task, pred, dv_y),
           "process_seconds": time.time() - t_start, "torch": torch.__version__,
           "transformers": transformers.__version__, "threads": torch.get_num_threads()}
    line = json.dumps(res)
    print(line)
    if a.json:
        with open(a.json, "a") as fp:
            fp.write(line + "\n")


if __name__ == "__main__":
    main()
