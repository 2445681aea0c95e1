#!/usr/bin/env python3
"""The transformers side of bench/run_task_compare.sh: fine-tune a BERT checkpoint for NER
(a CoNLL `word tag` file) or single-sentence classification (a CSV with `text,label`) in the
plain PyTorch loop of bench/hf_glue_finetune.py, with the settings `bert ner` / `bert
classify` use, then score the dev file.

  python bench/hf_task_finetune.py --task ner --train F --dev F --model DIR --seed 1 \
      [--epochs 2 --batch 16 --lr 5e-5 --max_seq_length 64 --warmup 0.1 --threads 2]

As `bert ner` (docs/fine_tuning.md#ner) and run_ner.py: labels = the training file's tags
sorted, or --labels; the fast tokenizer with is_split_into_words=True, cut to --max_seq_length; the label
on each word's first piece, -100 elsewhere; BertForTokenClassification; prediction at each
word's first piece; a word cut off is left out of the metrics; seqeval's default mode
(entity-level micro P/R/F1) and its token accuracy.
As `bert classify`: labels = the training file's, sorted; [CLS] text [SEP] cut to
--max_seq_length; BertForSequenceClassification; accuracy.
Both: AdamW (0.9, 0.999, eps 1e-6, decay 0.01 except biases and LayerNorm), clip 1.0, linear
warmup then decay (linear_warmup_lr, as bert.c), a new order each epoch, batches padded to
their longest row, dropout on. The random streams (head draw: transformers' normal(0, 0.02);
order; dropout) are torch's, seeded with --seed: seed S here and seed S in bert.c are unrelated
draws. Prints one JSON line."""
import argparse
import csv
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_glue_finetune import linear_warmup_lr  # noqa: E402  (the same schedule)
from bertc_rng import rng_key, shuffled  # noqa: E402  (bert.c's epoch order, --order bertc)


def read_conll(path):
    sents, cur = [], []
    for line in open(path, encoding="utf-8"):
        cols = line.split()
        if not cols:
            if cur:
                sents.append(cur)
            cur = []
            continue
        cur.append((cols[0], cols[-1]))
    if cur:
        sents.append(cur)
    return sents


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as fp:
        rows = list(csv.DictReader(fp))
    return [r["text"] for r in rows], [r["label"] for r in rows]


def ner_features(tok, sents, label_id, max_len):
    """input ids, the labels (-100 off first pieces) and each row's first-piece word index."""
    enc = tok([[w for w, _ in s] for s in sents], is_split_into_words=True, truncation=True, max_length=max_len)
    ids, labels, firsts = enc["input_ids"], [], []
    for i, s in enumerate(sents):
        lab, first, prev = [], [], None
        for w in enc.word_ids(i):
            if w is not None and w != prev:
                lab.append(label_id[s[w][1]])
                first.append(w)
            else:
                lab.append(-100)
                first.append(None)
            prev = w
        labels.append(lab)
        firsts.append(first)
    return ids, labels, firsts


def pad(rows, idx, value, torch):
    L = max(len(rows[i]) for i in idx)
    x = torch.full((len(idx), L), value, dtype=torch.long)
    for r, i in enumerate(idx):
        x[r, :len(rows[i])] = torch.tensor(rows[i])
    return x


def batch(ids, idx, torch):
    x = pad(ids, idx, 0, torch)
    m = pad([[1] * len(r) for r in ids], idx, 0, torch)
    return x, m


def train(model, ids, targets, a, torch, log, masks=None):
    """The loop of hf_glue_finetune.py; targets: per-row labels (classify) or label rows (ner)."""
    model.train()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.999), eps=a.eps)
    n = len(ids)
    total = math.ceil(math.ceil(n / a.batch) * a.epochs)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: linear_warmup_lr(1.0, a.warmup, total, k))
    gen = torch.Generator().manual_seed(a.seed)
    log(f"{n} examples, {total} steps of {a.batch}, lr {a.lr}, warmup {a.warmup}, seed {a.seed}")
    t0 = time.time()
    step, seqs, pos, order, window, epoch = 0, 0, n, None, [], 0
    step_log = open(a.step_log, "w") if a.step_log else None
    while step < total:
        if pos >= n:   # a new epoch: torch's order, or bert.c's (finetune.c: its seed's epoch key)
            order = shuffled(n, rng_key(a.seed, epoch)) if a.order == "bertc" else torch.randperm(n, generator=gen).tolist()
            pos, epoch = 0, epoch + 1
        idx = order[pos:pos + a.batch]
        pos += len(idx)
        x, m = batch(ids, idx, torch)
        if masks:
            masks.next_micro_batch()
        y = pad(targets, idx, -100, torch) if a.task == "ner" else torch.tensor([targets[i] for i in idx])
        out = model(input_ids=x, token_type_ids=torch.zeros_like(x), attention_mask=m, labels=y)
        out.loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step, seqs = step + 1, seqs + len(idx)
        window.append(float(out.loss))
        if step_log:
            step_log.write(json.dumps({"step": step, "loss": float(out.loss), "grad_norm": gnorm, "lr": lr}) + "\n")
        if step % a.log_freq == 0 or step == total:
            el = time.time() - t0
            log(f"step {step}/{total} | loss {sum(window) / len(window):.4f} | lr {lr:.3e} | grad {gnorm:.3f} | "
                f"{seqs / el:.1f} seq/s | {el:.0f}s")
            window = []
    if step_log:
        step_log.close()
    return step, seqs, time.time() - t0


def logits_of(model, ids, a, torch):
    model.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(ids), a.eval_batch):
            idx = list(range(s, min(s + a.eval_batch, len(ids))))
            x, m = batch(ids, idx, torch)
            lg = model(input_ids=x, token_type_ids=torch.zeros_like(x), attention_mask=m).logits
            out.extend(lg[r] for r in range(len(idx)))
    return out


def run_ner(a, torch, log):
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
    from transformers import BertForTokenClassification, BertTokenizerFast
    tr, dv = read_conll(a.train), read_conll(a.dev)
    labels = [l.strip() for l in open(a.labels)] if a.labels else sorted({t for s in tr for _, t in s})
    label_id = {t: i for i, t in enumerate(labels)}
    tok = BertTokenizerFast.from_pretrained(a.model)
    tr_ids, tr_lab, _ = ner_features(tok, tr, label_id, a.max_seq_length)
    dv_ids, _, dv_first = ner_features(tok, dv, label_id, a.max_seq_length)
    torch.manual_seed(a.seed)
    extra = {"attn_implementation": "eager"} if a.bertc_masks else {}
    model = BertForTokenClassification.from_pretrained(
        a.model, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label_id, **extra)
    masks = None
    if a.bertc_masks:   # bert.c's dropout masks (bench/bertc_masks.py), eager attention
        import bertc_masks
        masks = bertc_masks.BertcMasks(model, a.seed)
    step, seqs, train_s = train(model, tr_ids, tr_lab, a, torch, log, masks)
    t1 = time.time()
    lg = logits_of(model, dv_ids, a, torch)
    y_true, y_pred = [], []
    for s, first, l in zip(dv, dv_first, lg):
        pred = l.argmax(-1).tolist()
        kept = [(w, pred[p]) for p, w in enumerate(first) if w is not None]
        y_true.append([s[w][1] for w, _ in kept])
        y_pred.append([labels[k] for _, k in kept])
    dev = {"precision": precision_score(y_true, y_pred), "recall": recall_score(y_true, y_pred),
           "f1": f1_score(y_true, y_pred), "accuracy": accuracy_score(y_true, y_pred)}
    return len(tr), step, seqs, train_s, len(dv), time.time() - t1, dev


def run_classify(a, torch, log):
    from transformers import BertForSequenceClassification, BertTokenizerFast
    tr_x, tr_y = read_csv(a.train)
    dv_x, dv_y = read_csv(a.dev)
    labels = sorted(set(tr_y))
    label_id = {t: i for i, t in enumerate(labels)}
    tok = BertTokenizerFast.from_pretrained(a.model)
    tr_ids = tok(tr_x, truncation=True, max_length=a.max_seq_length)["input_ids"]
    dv_ids = tok(dv_x, truncation=True, max_length=a.max_seq_length)["input_ids"]
    torch.manual_seed(a.seed)
    model = BertForSequenceClassification.from_pretrained(
        a.model, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label_id)
    step, seqs, train_s = train(model, tr_ids, [label_id[y] for y in tr_y], a, torch, log)
    t1 = time.time()
    pred = [labels[int(l.argmax())] for l in logits_of(model, dv_ids, a, torch)]
    dev = {"accuracy": sum(p == y for p, y in zip(pred, dv_y)) / len(dv_y)}
    return len(tr_x), step, seqs, train_s, len(dv_x), time.time() - t1, dev


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", required=True, choices=["ner", "classify"])
    ap.add_argument("--train", required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--labels", help="ner: the label list, one a line (bert ner --labels); default the training tags")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--eval_batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--weight_decay", type=float, default=0.01)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--max_seq_length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log_freq", type=int, default=50)
    ap.add_argument("--order", choices=["torch", "bertc"], default="torch",
                    help="the training order: torch's generator, or bert.c's (the same rows in each step as "
                         "bert.c with the same --seed: bench/ner_same_start.sh)")
    ap.add_argument("--bertc_masks", action="store_true",
                    help="ner: train under bert.c's dropout masks for --seed (bench/bertc_masks.py; implies --order bertc)")
    ap.add_argument("--step_log", help="every step's loss, gradient norm and lr as JSON lines")
    a = ap.parse_args()
    if a.bertc_masks:
        a.order = "bertc"
    t_start = time.time()
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(a.threads)

    def log(msg):
        print(f"hf {a.task}: {msg}", file=sys.stderr, flush=True)
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} threads")
    n, step, seqs, train_s, n_dev, eval_s, dev = (run_ner if a.task == "ner" else run_classify)(a, torch, log)
    print(json.dumps({"side": "transformers", "task": a.task, "seed": a.seed, "train_examples": n, "steps": step,
                      "train_sequences": seqs, "train_seconds": train_s, "train_seq_per_s": seqs / train_s,
                      "eval_examples": n_dev, "eval_seconds": eval_s, "dev": dev,
                      "process_seconds_inner": time.time() - t_start, "torch": torch.__version__,
                      "transformers": transformers.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
