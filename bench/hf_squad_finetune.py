#!/usr/bin/env python3
"""The transformers side of bench/run_squad_compare.sh: fine-tune a BERT checkpoint on the first
N articles of a SQuAD v1.1 file and predict the articles after them, with the hyperparameters
`bert squad` uses, in a plain PyTorch loop (not Trainer, so that every setting is the same on
both sides); features and post-processing as transformers' own question-answering example
(examples/pytorch/question-answering: run_qa.py's prepare_*_features, utils_qa.py's
postprocess_qa_predictions).

  .venv-bf16peer/bin/python bench/hf_squad_finetune.py --train_file dev-v1.1.json --train_articles 2 \
      --predict_file dev-v1.1.json --predict_skip_articles 2 --model MODEL_DIR --output_dir OUT --seed 1 \
      [--epochs 3 --batch 32 --lr 5e-5] [--predict_articles P] [--max_steps N] [--threads 2] \
      [--bert ./bert] [--json out.jsonl] [--features_only]
      [--predict_model DIR] [--save_model DIR] [--labels FILE] [--train_pad_row] [--step_log FILE]
      [--bertc_masks]

--predict_model predicts with an already fine-tuned checkpoint (bert squad's saved model loads as
BertForQuestionAnswering), so the two sides' training and prediction can be crossed; --labels,
--train_pad_row, --step_log and --bertc_masks serve bench/squad_parity.sh (the two sides step by
step; --bertc_masks trains under bert.c's own dropout masks and feature order, bench/bertc_masks.py).

Writes OUT/predict_articles.json (the predicted articles, a SQuAD file of their own, as `bert
squad` writes its slice), OUT/predictions.json and OUT/nbest_predictions.json; with --bert,
scores them with `BERT squad_eval` (the official v1.1 metrics, the code that scores bert.c's
predictions). Prints one JSON line: features, steps, wall and CPU seconds of training and
prediction, features/s, metrics.

Features (run_qa.py's prepare_train_features / prepare_validation_features): the fast
tokenizer on (question.lstrip(), context), truncation="only_second", max_length 384,
return_overflowing_tokens, return_offsets_mapping, padding="max_length" (run_qa.py's default
pad_to_max_length; bert.c also trains and predicts at the full length, the span softmax over
every position, padding included, as BertForQuestionAnswering's loss does).

Windows: HF's `stride` is the number of document tokens two consecutive windows share, so
windows start L - stride apart, where L = max_length - 3 - len(question tokens) is the
document room of a window. Google's (and bert.c's) doc_stride is the distance between window
starts. With --stride_mode google (the default) every question is tokenized with
stride = L - doc_stride = 384 - 3 - len(question tokens) - 128 (questions grouped by their
token count, one tokenizer call per group), so the windows start 0, 128, 256, ... tokens into
the document exactly as in Google's convert_examples_to_features (both stop at the first
window that reaches the end). --stride_mode hf passes stride=doc_stride as run_qa.py does
(windows L - 128 apart: fewer, overlapping by 128). Questions longer than max_query_length
(64) tokens are cut to their first 64 tokens (Google's rule; run_qa.py keeps them whole) by
cutting the text where the 64th token ends; the run prints how many.

Training labels (prepare_train_features): the first answer's characters
[answer_start, answer_start + len(text)) mapped to tokens through the offsets; a window that
does not hold the whole answer is labelled 0/0 ([CLS]), as Google's out-of-span features are.

Post-processing (postprocess_qa_predictions, version 1): per feature the n_best_size (20)
highest start and end logits, pairs kept when both are context tokens, end >= start and
end - start + 1 <= max_answer_length (30); score start + end logit; the best over all of an
example's windows; the text is the context's characters between the start token's first and
the end token's last offset. Unlike Google's write_predictions there is no max-context rule
(run_qa.py does not pass token_is_max_context) and no de-duplication of the n-best texts.

What is the same as `bert squad` (src/tasks/squad_run.c, src/train/finetune.c):
- the training file's first N articles, each question's first answer; the prediction file's
  articles from --predict_skip_articles on (--predict_articles P: only P of them);
- BertForQuestionAnswering (encoder, dropout 0.1, qa_outputs linear 384 -> 2, no pooler);
- AdamW (betas 0.9/0.999, eps 1e-6, decoupled decay 0.01 on every tensor but biases and
  LayerNorm), the gradient norm clipped to 1.0;
- the learning rate of optimizer step k (0-based): linear_warmup_lr in src/train/schedulers.c,
  p = (k+1)/total; base*p/warmup while p < warmup, else base*max((p-1)/(warmup-1), 0);
- steps = ceil(features/batch) per epoch, the last batch of an epoch shorter, a new order each
  epoch; bert squad's defaults: lr 5e-5, batch 32, 3 epochs, warmup 0.1, predict batch 8;
- dropout on while training, off while predicting.
What differs, necessarily: the random streams (the head by transformers' _init_weights,
normal(0, 0.02), from torch's generator seeded with --seed; bert.c draws it truncated at 2
sigma from its own generator; the order from torch.randperm; the dropout masks), and where
the two recipes differ: Google's answer labels (whitespace words, _improve_answer_span,
training answers not found at answer_start left out) and max-context rule against
run_qa.py's character offsets; WordPiece's word limit (HF 100 characters, Google 200).
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import time

import numpy as np


def read_articles(path, skip, count):
    with open(path, encoding="utf-8") as fp:
        root = json.load(fp)
    data = root["data"]
    if skip >= len(data):
        sys.exit(f"hf_squad_finetune: {path} has {len(data)} articles: none left after skipping {skip}")
    root["data"] = data[skip:skip + count] if count > 0 else data[skip:]
    return root


def examples_of(root):
    ex = []
    for article in root["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                ex.append({"id": qa["id"], "question": qa["question"].lstrip(), "context": para["context"],
                           "answers": qa["answers"]})
    return ex


def cut_questions(tok, examples, max_query_length):
    """Each question's token count, the text cut after its max_query_length-th token where longer."""
    enc = tok([e["question"] for e in examples], add_special_tokens=False, return_offsets_mapping=True)
    cut = 0
    for e, ids, offs in zip(examples, enc["input_ids"], enc["offset_mapping"]):
        if len(ids) > max_query_length:
            e["question"] = e["question"][:offs[max_query_length - 1][1]]
            cut += 1
    if cut:   # re-count the cut questions
        enc = tok([e["question"] for e in examples], add_special_tokens=False)
    for e, ids in zip(examples, enc["input_ids"]):
        e["q_len"] = len(ids)
    return cut


def features(tok, examples, a, training):
    """run_qa.py's prepare_train_features / prepare_validation_features, windows per --stride_mode.
    Returns dict of lists, one entry per feature, in example order then window order."""
    groups = collections.defaultdict(list)
    for i, e in enumerate(examples):
        room = a.max_seq_length - 3 - e["q_len"]
        stride = room - a.doc_stride if a.stride_mode == "google" else a.doc_stride
        if not 0 <= stride < room:
            sys.exit(f"hf_squad_finetune: question {e['id']}: no stride for a window of {room} tokens")
        groups[stride].append(i)
    feats = []   # (example index, window index, input_ids, token_type_ids, attention_mask, offsets, seq ids)
    for stride, idx in groups.items():
        enc = tok([examples[i]["question"] for i in idx], [examples[i]["context"] for i in idx],
                  truncation="only_second", max_length=a.max_seq_length, stride=stride,
                  return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
        seen = collections.Counter()
        for f, s in enumerate(enc["overflow_to_sample_mapping"]):
            i = idx[s]
            feats.append((i, seen[i], enc["input_ids"][f], enc["token_type_ids"][f], enc["attention_mask"][f],
                          enc["offset_mapping"][f], enc.sequence_ids(f)))
            seen[i] += 1
    feats.sort(key=lambda t: (t[0], t[1]))
    out = {"example": [], "input_ids": [], "token_type_ids": [], "attention_mask": [], "offsets": [],
           "start": [], "end": []}
    for i, _, ids, types, mask, offsets, seq in feats:
        out["example"].append(i)
        out["input_ids"].append(ids)
        out["token_type_ids"].append(types)
        out["attention_mask"].append(mask)
        if training:   # prepare_train_features
            cls = ids.index(tok.cls_token_id)
            ans = examples[i]["answers"][0]
            start_char = ans["answer_start"]
            end_char = start_char + len(ans["text"])
            ts = 0
            while seq[ts] != 1:
                ts += 1
            te = len(ids) - 1
            while seq[te] != 1:
                te -= 1
            if not (offsets[ts][0] <= start_char and offsets[te][1] >= end_char):
                out["start"].append(cls)
                out["end"].append(cls)
            else:
                while ts < len(offsets) and offsets[ts][0] <= start_char:
                    ts += 1
                out["start"].append(ts - 1)
                while offsets[te][1] >= end_char:
                    te -= 1
                out["end"].append(te + 1)
        else:          # prepare_validation_features: offsets of non-context tokens set to None
            out["offsets"].append([o if seq[k] == 1 else None for k, o in enumerate(offsets)])
    return out


def postprocess(examples, feats, all_start, all_end, n_best_size, max_answer_length):
    """utils_qa.py's postprocess_qa_predictions, version_2_with_negative=False."""
    by_example = collections.defaultdict(list)
    for f, i in enumerate(feats["example"]):
        by_example[i].append(f)
    preds, nbest = collections.OrderedDict(), collections.OrderedDict()
    for i, e in enumerate(examples):
        prelim = []
        for f in by_example[i]:
            start_logits, end_logits, offsets = all_start[f], all_end[f], feats["offsets"][f]
            start_indexes = np.argsort(start_logits)[-1:-n_best_size - 1:-1].tolist()
            end_indexes = np.argsort(end_logits)[-1:-n_best_size - 1:-1].tolist()
            for s in start_indexes:
                for t in end_indexes:
                    if (s >= len(offsets) or t >= len(offsets) or offsets[s] is None or len(offsets[s]) < 2
                            or offsets[t] is None or len(offsets[t]) < 2):
                        continue
                    if t < s or t - s + 1 > max_answer_length:
                        continue
                    prelim.append({"offsets": (offsets[s][0], offsets[t][1]),
                                   "score": float(start_logits[s] + end_logits[t]),
                                   "start_logit": float(start_logits[s]), "end_logit": float(end_logits[t])})
        best = sorted(prelim, key=lambda x: x["score"], reverse=True)[:n_best_size]
        for p in best:
            o = p.pop("offsets")
            p["text"] = e["context"][o[0]:o[1]]
        if len(best) == 0 or (len(best) == 1 and best[0]["text"] == ""):
            best.insert(0, {"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "score": 0.0})
        scores = np.array([p.pop("score") for p in best])
        exp = np.exp(scores - np.max(scores))
        for p, prob in zip(best, exp / exp.sum()):
            p["probability"] = float(prob)
        preds[e["id"]] = best[0]["text"]
        nbest[e["id"]] = best
    return preds, nbest


def linear_warmup_lr(base, warmup, total, done):
    p = (done + 1) / total
    if p < warmup:
        return base * p / warmup
    return base * max(0.0, (p - 1.0) / (warmup - 1.0))   # max(0.0, -0.0) is 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train_file", required=True)
    ap.add_argument("--train_articles", type=int, required=True, help="train on the first N articles")
    ap.add_argument("--predict_file", required=True)
    ap.add_argument("--predict_skip_articles", type=int, required=True, help="predict the articles from the Nth on")
    ap.add_argument("--predict_articles", type=int, default=0, help="only this many of them (0: all)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--epochs", type=float, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--predict_batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--weight_decay", type=float, default=0.01)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--max_seq_length", type=int, default=384)
    ap.add_argument("--doc_stride", type=int, default=128)
    ap.add_argument("--max_query_length", type=int, default=64)
    ap.add_argument("--stride_mode", choices=["google", "hf"], default="google",
                    help="google: windows doc_stride tokens apart (default); hf: stride=doc_stride as run_qa.py")
    ap.add_argument("--n_best_size", type=int, default=20)
    ap.add_argument("--max_answer_length", type=int, default=30)
    ap.add_argument("--max_steps", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log_freq", type=int, default=50)
    ap.add_argument("--features_only", action="store_true", help="print the feature counts and stop")
    ap.add_argument("--predict_model", help="no training: predict with this fine-tuned checkpoint folder "
                    "(e.g. bert squad's saved model), to cross the two sides' training and prediction")
    ap.add_argument("--labels", help="training labels from this file instead (one line per feature, in feature "
                    "order: 'start end', e.g. bert.c's Google-style labels), to separate the two recipes' labels "
                    "from the training itself")
    ap.add_argument("--train_pad_row", action="store_true",
                    help="let the [PAD] word embedding learn, as NVIDIA's and Google's models do (transformers' "
                    "nn.Embedding(padding_idx=0) keeps its gradient at zero; bert.c follows NVIDIA)")
    ap.add_argument("--step_log", help="one JSON line per optimizer step here: step, loss, grad_norm (before "
                    "clipping), learning rate, at full precision")
    ap.add_argument("--bertc_masks", action="store_true",
                    help="train under bert.c's dropout masks and feature order for --seed (bench/bertc_masks.py; "
                    "eager attention), so that the two sides draw alike and can be compared step by step")
    ap.add_argument("--save_model", help="save the fine-tuned model to this folder (save_pretrained)")
    ap.add_argument("--bert", help="score the predictions with BERT squad_eval (e.g. ./bert)")
    ap.add_argument("--json", help="append the result as one JSON line to this file")
    a = ap.parse_args()

    t_start, c_start = time.time(), time.process_time()
    import torch
    import transformers
    from transformers import BertForQuestionAnswering, BertTokenizer
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(a.threads)
    os.makedirs(a.output_dir, exist_ok=True)

    tok = BertTokenizer(os.path.join(a.model, "vocab.txt"), do_lower_case=True)   # tokenizers' (Rust) BertTokenizer
    assert tok.is_fast, "a fast tokenizer is needed for offsets"
    train_root = read_articles(a.train_file, 0, a.train_articles)
    pred_root = read_articles(a.predict_file, a.predict_skip_articles, a.predict_articles)
    pred_path = os.path.join(a.output_dir, "predict_articles.json")
    with open(pred_path, "w", encoding="utf-8") as fp:
        json.dump(pred_root, fp)
    tr_ex, pr_ex = examples_of(train_root), examples_of(pred_root)
    cut = cut_questions(tok, tr_ex, a.max_query_length) + cut_questions(tok, pr_ex, a.max_query_length)
    t0 = time.time()
    tr = features(tok, tr_ex, a, True)
    pr = features(tok, pr_ex, a, False)
    feature_s = time.time() - t0
    if a.labels:
        rows = [line.split() for line in open(a.labels) if line.strip()]
        if len(rows) != len(tr["start"]):
            sys.exit(f"hf_squad_finetune: {a.labels}: {len(rows)} labels for {len(tr['start'])} features")
        differ = sum((int(r[-2]), int(r[-1])) != (s, e) for r, s, e in zip(rows, tr["start"], tr["end"]))
        tr["start"], tr["end"] = [int(r[-2]) for r in rows], [int(r[-1]) for r in rows]
        print(f"hf squad: labels from {a.labels}: {differ} of {len(rows)} features labelled differently",
              file=sys.stderr)
    n, n_pred = len(tr["input_ids"]), len(pr["input_ids"])
    print(f"hf squad: train: articles 0 to {a.train_articles - 1} of {a.train_file}: {len(tr_ex)} questions -> {n} "
          f"features ({sum(1 for s in tr['start'] if s == 0)} without the answer in the window)", file=sys.stderr)
    print(f"hf squad: predict: {len(pred_root['data'])} articles from {a.predict_skip_articles} of {a.predict_file}: "
          f"{len(pr_ex)} questions -> {n_pred} features; windows: --stride_mode {a.stride_mode}; "
          f"{cut} questions cut to {a.max_query_length} tokens; features in {feature_s:.1f} s", file=sys.stderr)
    if a.features_only:
        print(json.dumps({"train_questions": len(tr_ex), "train_features": n, "predict_questions": len(pr_ex),
                          "predict_features": n_pred, "stride_mode": a.stride_mode, "questions_cut": cut}))
        return

    torch.manual_seed(a.seed)   # the head's initialisation (transformers' _init_weights) and dropout
    masks = None
    if a.bertc_masks:   # bert.c's dropout masks and feature order (bench/bertc_masks.py), eager attention
        import bertc_masks
        model = BertForQuestionAnswering.from_pretrained(a.predict_model or a.model, attn_implementation="eager")
        masks = bertc_masks.BertcMasks(model, a.seed)
    else:
        model = BertForQuestionAnswering.from_pretrained(a.predict_model or a.model)
    if a.train_pad_row:
        model.bert.embeddings.word_embeddings.padding_idx = None
    model.train()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=a.eps)
    per_epoch = math.ceil(n / a.batch)
    if a.predict_model:
        total = 0             # predicting only
    else:
        total = a.max_steps if a.max_steps > 0 else math.ceil(per_epoch * a.epochs)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: linear_warmup_lr(1.0, a.warmup, max(total, 1), k))
    gen = torch.Generator().manual_seed(a.seed)
    X = {k: torch.tensor(tr[k], dtype=torch.long) for k in ("input_ids", "token_type_ids", "attention_mask")}
    S, E = torch.tensor(tr["start"], dtype=torch.long), torch.tensor(tr["end"], dtype=torch.long)
    print(f"hf squad: {n} features, {total} steps of {a.batch}, lr {a.lr}, warmup {a.warmup}, seed {a.seed}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} threads",
          file=sys.stderr, flush=True)

    step_log = open(a.step_log, "w") if a.step_log else None
    t0, c0 = time.time(), time.process_time()
    step, seqs, pos, order, window, epoch, last_loss = 0, 0, n, None, [], 0, None
    while step < total:
        if pos >= n:
            if masks:
                order = torch.tensor(masks.epoch_order(n, epoch))
            else:
                order = torch.randperm(n, generator=gen)
            pos, epoch = 0, epoch + 1
        idx = order[pos:pos + a.batch]
        pos += len(idx)
        if masks:
            masks.next_micro_batch()
        out = model(input_ids=X["input_ids"][idx], token_type_ids=X["token_type_ids"][idx],
                    attention_mask=X["attention_mask"][idx], start_positions=S[idx], end_positions=E[idx])
        out.loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        seqs += len(idx)
        last_loss = float(out.loss)
        window.append(last_loss)
        if step_log:
            step_log.write(json.dumps({"step": step, "step_loss": last_loss, "grad_norm": gnorm, "learning_rate": lr}) + "\n")
        if step % a.log_freq == 0 or step == total:
            el = time.time() - t0
            print(f"step {step}/{total} (epoch {epoch}) | loss {sum(window) / len(window):.4f} | lr {lr:.3e} | "
                  f"grad {gnorm:.3f} | {seqs / el:.1f} features/s | {el:.0f}s", file=sys.stderr, flush=True)
            window = []
    train_s, train_cpu = time.time() - t0, time.process_time() - c0
    if step_log:
        step_log.close()
    if a.save_model:
        model.save_pretrained(a.save_model)
        tok.save_pretrained(a.save_model)

    model.eval()
    P = {k: torch.tensor(pr[k], dtype=torch.long) for k in ("input_ids", "token_type_ids", "attention_mask")}
    t1, c1 = time.time(), time.process_time()
    starts, ends = [], []
    with torch.no_grad():
        for s in range(0, n_pred, a.predict_batch):
            o = model(input_ids=P["input_ids"][s:s + a.predict_batch],
                      token_type_ids=P["token_type_ids"][s:s + a.predict_batch],
                      attention_mask=P["attention_mask"][s:s + a.predict_batch])
            starts.append(o.start_logits.numpy())
            ends.append(o.end_logits.numpy())
    predict_s, predict_cpu = time.time() - t1, time.process_time() - c1
    t2 = time.time()
    preds, nbest = postprocess(pr_ex, pr, np.concatenate(starts), np.concatenate(ends), a.n_best_size,
                               a.max_answer_length)
    post_s = time.time() - t2
    pred_file = os.path.join(a.output_dir, "predictions.json")
    with open(pred_file, "w", encoding="utf-8") as fp:
        fp.write(json.dumps(preds, indent=4) + "\n")
    with open(os.path.join(a.output_dir, "nbest_predictions.json"), "w", encoding="utf-8") as fp:
        fp.write(json.dumps(nbest, indent=4) + "\n")
    print(f"hf squad: predictions: {pred_file} ({n_pred} features in {predict_s:.1f} s, "
          f"{n_pred / predict_s:.1f} features/s; post-processing {post_s:.1f} s)", file=sys.stderr, flush=True)

    res = {"side": "transformers", "seed": a.seed, "train_articles": a.train_articles,
           "predict_skip_articles": a.predict_skip_articles, "predict_articles": len(pred_root["data"]),
           "train_questions": len(tr_ex), "train_features": n, "steps": step, "epochs": a.epochs,
           "train_sequences": seqs, "train_seconds": train_s, "train_cpu_seconds": train_cpu,
           "train_features_per_s": seqs / train_s if seqs else 0.0, "predict_questions": len(pr_ex), "predict_features": n_pred,
           "predict_seconds": predict_s, "predict_cpu_seconds": predict_cpu, "predict_features_per_s": n_pred / predict_s,
           "postprocess_seconds": post_s, "stride_mode": a.stride_mode, "questions_cut": cut,
           "lr": a.lr, "batch": a.batch, "final_loss": last_loss, "predict_model": a.predict_model,
           "process_seconds": time.time() - t_start, "process_cpu_seconds": time.process_time() - c_start,
           "torch": torch.__version__, "transformers": transformers.__version__, "threads": torch.get_num_threads()}
    if a.bert:
        r = subprocess.run([a.bert, "squad_eval", pred_path, pred_file], capture_output=True, text=True, check=True)
        res["eval"] = json.loads(r.stdout)
        print(f"hf squad: {a.bert} squad_eval: {r.stdout.strip()}", file=sys.stderr)
    line = json.dumps(res)
    print(line)
    if a.json:
        with open(a.json, "a") as fp:
            fp.write(line + "\n")


if __name__ == "__main__":
    main()
