#!/usr/bin/env python3
"""The PyTorch peer of bench/run_finetune_bench.sh: fine-tuning training throughput of
transformers' BertForSequenceClassification (GLUE) and BertForQuestionAnswering (SQuAD) on
the sequences `bert glue` / `bert squad` train on, in the order they train on them.

    .venv-bf16peer/bin/python bench/finetune_peers.py --glue_task mrpc --data_dir D --vocab_file V \
        --model CKPT --precision bf16 --mode dynamic [--compile] --warmup_steps 2 --steps 12
    .venv-bf16peer/bin/python bench/finetune_peers.py --squad_file F --vocab_file V --model CKPT \
        --batch 32 --accum 4 --mode padded --warmup_steps 1 --steps 3
    ... --plan     the schedule only (examples, sequences and tokens of the timed steps): no torch

The sequences (what makes the speed: lengths, and with them the padding):
  GLUE   train.tsv's rows as HF's GLUE processors read them (bench/hf_glue_finetune.py), Google's
         features: [CLS] a [SEP] b [SEP], _truncate_seq_pair to --max_seq_length, the tokens
         of Google's FullTokenizer (bench/infer_lengths.py; equal to bert.c's).
  SQuAD  Google's run_squad.py training features (read_squad_examples with is_training: each
         question's first answer, answers not found where answer_start says left out;
         convert_examples_to_features: query cut to 64, windows doc_stride apart,
         _improve_answer_span, the span's positions or 0 outside the window), as `bert squad
         --train_articles` makes them from a dev file.
  Order  bert.c's (src/tasks/glue_run.c, squad_run.c train()): a new Fisher-Yates order each
         epoch from src/core/rng.h keyed rng_key(seed, epoch) (ported below and checked against
         values computed by the C header), micro-batches of batch / accum rows, an epoch's
         last step shorter. So step k here holds the rows of bert.c's step k.
bench/run_finetune_bench.sh checks the example (feature) counts against bert.c's log. Checked
once on bert-tiny with dropout 0 and one checkpoint holding the task head for both sides: the
step losses equal bert.c's to the 4 decimals it logs (MRPC, 4 steps; SQuAD, batch 32 and 4 x 8,
3 steps: the first equal, then 5e-4 apart, because bert.c's AdamW moves the [PAD] row of the
word embeddings, which nn.Embedding's padding_idx=0 keeps frozen in transformers; with
padding_idx=None here they are equal too; GLUE packs, so no padding row reaches the loss).

The training step, as transformers' Trainer runs it on a CPU (and as bert.c's): forward with
the task's loss (dropout on), backward, the gradient norm clipped to 1.0, AdamW (betas
0.9/0.999, eps 1e-6, decay 0.01 except biases and LayerNorm; fused=True, the Trainer's
default `adamw_torch_fused` for torch >= 2.8), a linear warmup/decay schedule, zero_grad;
gradient accumulation over --accum micro-batches. bf16: the forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16) (the Trainer's --bf16 on CPU), fp32 master
weights and optimizer. --compile: torch.compile(model) (the Trainer's --torch_compile), the
optimizer eager; dynamic mode marks the sequence dimension dynamic (one graph for every
length); --compile_warmup extra steps on the first batches compile it before the schedule (a
graph compiled during the timed steps is counted in the JSON, and flagged by the table).
Modes: dynamic (each micro-batch padded to its longest row: DataCollatorWithPadding, the
Trainer's default) and padded (every row at --max_seq_length: run_glue.py / run_qa.py
--pad_to_max_length). Weights: --model (a checkpoint folder; the task head drawn from torch's
generator seeded with --seed) or a random --preset.

Timing: each step's wall time (batch assembly included, as in bert.c's step), the first
--warmup_steps steps excluded; throughput = sequences of the timed steps / their summed time.
Output: one JSON line on stdout; progress on stderr.
"""
import argparse
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PRESETS = {  # as bert.c's (src/io/config.c): layers, hidden, heads; intermediate 4 x hidden
    "bert-tiny": (2, 128, 2), "bert-mini": (4, 256, 4), "bert-small": (4, 512, 8),
    "bert-medium": (8, 512, 8), "bert-base": (12, 768, 12), "bert-large": (24, 1024, 16),
}

# src/core/rng.h in Python, and bert.c's shuffle: bench/bertc_rng.py
from bertc_rng import check_rng, rng_key, shuffled   # noqa: E402  (bench/ is the script's folder)


def schedule(n, batch, accum, total_steps, seed):
    """Each step's micro-batches (lists of example indices), as bert.c's train() loops."""
    micro = batch // accum
    steps, epoch, nxt, order = [], 0, n, None
    while len(steps) < total_steps:
        if nxt >= n:
            order, nxt = shuffled(n, rng_key(seed, epoch)), 0
            epoch += 1
        micros = []
        for _ in range(accum):
            if nxt >= n:
                break
            b = min(micro, n - nxt)
            micros.append(order[nxt:nxt + b])
            nxt += b
        steps.append(micros)
    return steps


# ---- the features ----

def glue_features(task, data_dir, vocab_file, do_lower_case, max_seq, split="train"):
    """(features, info): one (ids, types, label) per row of <split>.tsv (bench/int8_peers_eval.py
    reads dev.tsv too)."""
    from hf_glue_finetune import TASKS, read_rows
    from infer_lengths import FullTokenizer
    if task not in TASKS:
        sys.exit(f"finetune_peers: GLUE task '{task}' not supported here ({', '.join(TASKS)})")
    tok = FullTokenizer(vocab_file, do_lower_case, 100)   # bert.c: 100 characters per word for GLUE, as HF
    ta, tb, y = read_rows(os.path.join(data_dir, split + ".tsv"), task)
    cls, sep = tok.vocab["[CLS]"], tok.vocab["[SEP]"]
    feats, truncated = [], 0
    for i in range(len(ta)):
        a = tok.tokenize(ta[i])
        b = tok.tokenize(tb[i]) if tb is not None else None
        if b is None:
            truncated += len(a) > max_seq - 2
            a = a[:max_seq - 2]
            b = []
        else:
            truncated += len(a) + len(b) > max_seq - 3
            while len(a) + len(b) > max_seq - 3:   # Google's _truncate_seq_pair: the longer one (b on ties)
                (a if len(a) > len(b) else b).pop()
        ids = [cls] + [tok.vocab[t] for t in a] + [sep]
        types = [0] * len(ids)
        if tb is not None:
            ids += [tok.vocab[t] for t in b] + [sep]
            types += [1] * (len(b) + 1)
        feats.append((ids, types, y[i]))
    return feats, {"examples": len(feats), "truncated": truncated}


def _is_whitespace(c):
    return c in " \t\r\n" or ord(c) == 0x202F


def squad_features(path, vocab_file, do_lower_case, max_seq, doc_stride, max_query):
    """Google's training features: (ids, types, (start, end)) per feature."""
    from infer_lengths import FullTokenizer
    tok = FullTokenizer(vocab_file, do_lower_case, 200)   # Google's FullTokenizer default
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    cls, sep = tok.vocab["[CLS]"], tok.vocab["[SEP]"]
    feats, questions, not_found = [], 0, 0
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            doc_tokens, char_to_word, prev_ws = [], [], True
            for c in paragraph["context"]:
                if _is_whitespace(c):
                    prev_ws = True
                else:
                    if prev_ws:
                        doc_tokens.append(c)
                    else:
                        doc_tokens[-1] += c
                    prev_ws = False
                char_to_word.append(len(doc_tokens) - 1)
            orig_to_tok, all_doc = [], []
            for w in doc_tokens:
                orig_to_tok.append(len(all_doc))
                all_doc.extend(tok.tokenize(w))
            for qa in paragraph["qas"]:
                answer = qa["answers"][0]   # the first answer, as `bert squad --train_articles` keeps
                text, offset = answer["text"], answer["answer_start"]
                start, end = char_to_word[offset], char_to_word[offset + len(text) - 1]
                if " ".join(doc_tokens[start:end + 1]).find(" ".join(text.strip().split())) == -1:
                    not_found += 1
                    continue
                questions += 1
                query = tok.tokenize(qa["question"])[:max_query]
                tok_start = orig_to_tok[start]
                tok_end = orig_to_tok[end + 1] - 1 if end < len(doc_tokens) - 1 else len(all_doc) - 1
                answer_toks = " ".join(tok.tokenize(text))   # _improve_answer_span
                found = False
                for s in range(tok_start, tok_end + 1):
                    for e in range(tok_end, s - 1, -1):
                        if " ".join(all_doc[s:e + 1]) == answer_toks:
                            tok_start, tok_end, found = s, e, True
                            break
                    if found:
                        break
                max_doc = max_seq - len(query) - 3
                q_ids = [cls] + [tok.vocab[t] for t in query] + [sep]
                s0 = 0
                while s0 < len(all_doc):
                    length = min(len(all_doc) - s0, max_doc)
                    ids = q_ids + [tok.vocab[t] for t in all_doc[s0:s0 + length]] + [sep]
                    types = [0] * len(q_ids) + [1] * (length + 1)
                    if tok_start >= s0 and tok_end <= s0 + length - 1:
                        span = (tok_start - s0 + len(q_ids), tok_end - s0 + len(q_ids))
                    else:
                        span = (0, 0)
                    feats.append((ids, types, span))
                    if s0 + length == len(all_doc):
                        break
                    s0 += min(length, doc_stride)
    return feats, {"examples": len(feats), "questions": questions, "answers_not_found": not_found}


def load_features(args):
    if args.squad_file:
        return squad_features(args.squad_file, args.vocab_file, args.do_lower_case, args.max_seq_length,
                              args.doc_stride, args.max_query_length)
    feats, info = glue_features(args.glue_task, args.data_dir, args.vocab_file, args.do_lower_case, args.max_seq_length)
    if 0 < args.train_examples < len(feats):   # as bert glue --train_examples: the first N rows (cuts counted over all)
        feats = feats[:args.train_examples]
        info["examples"] = len(feats)
    return feats, info


def plan_summary(args, feats, info, steps):
    """What the timed steps hold: sequences, real tokens, rows computed when padded / dynamic."""
    timed = steps[args.warmup_steps:]
    micros = [m for s in timed for m in s]
    real = sum(len(feats[i][0]) for m in micros for i in m)
    seqs = sum(len(m) for m in micros)
    dynamic = sum(len(m) * max(len(feats[i][0]) for i in m) for m in micros)
    lengths = [len(f[0]) for f in feats]
    return {"dataset": dataset_name(args), **info, "mean_length": round(sum(lengths) / len(lengths), 2),
            "max_seq_length": args.max_seq_length, "batch": args.batch, "accum": args.accum,
            "warmup_steps": args.warmup_steps, "steps": args.steps, "seed": args.seed,
            "step_sequences": [sum(len(m) for m in s) for s in steps],
            "timed_sequences": seqs, "real_tokens": real, "rows_padded": seqs * args.max_seq_length,
            "rows_dynamic": dynamic}


def dataset_name(args):
    if args.squad_file:
        return "squad " + os.path.basename(args.squad_file)
    return args.glue_task


# ---- PyTorch ----

def build_model(args, torch, num_labels):
    import transformers
    from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    cls = BertForQuestionAnswering if args.squad_file else BertForSequenceClassification
    extra = {} if args.squad_file else {"num_labels": num_labels}
    torch.manual_seed(args.seed)   # the task head (transformers' _init_weights) and dropout
    if args.model:
        return cls.from_pretrained(args.model, attn_implementation=args.attn, **extra)
    layers, hidden, heads = PRESETS[args.preset]
    cfg = BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                     intermediate_size=4 * hidden, attn_implementation=args.attn, **extra)
    return cls(cfg)


def linear_warmup_lr(warmup, total, done):   # src/train/schedulers.c, the factor of step `done`
    p = (done + 1) / total
    return p / warmup if p < warmup else max((p - 1.0) / (warmup - 1.0), 0.0)


def train(args, feats, info, steps):
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    regression = not args.squad_file and args.glue_task == "sts-b"
    model = build_model(args, torch, 1 if regression else 2)
    if not args.squad_file:   # set by the first forward otherwise, which makes torch.compile compile again
        model.config.problem_type = "regression" if regression else "single_label_classification"
    model.train()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(p)
    opt_kw = {"fused": True} if args.adamw == "fused" else {"foreach": args.adamw == "foreach"}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.999), eps=1e-6, **opt_kw)
    total = len(steps)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: linear_warmup_lr(0.1, total, k))
    params = [p for p in model.parameters()]
    forward = model
    if args.compile:
        forward = torch.compile(model)

    def batch_of(rows):
        T = args.max_seq_length if args.mode == "padded" else max(len(feats[i][0]) for i in rows)
        x = torch.zeros((len(rows), T), dtype=torch.long)
        t = torch.zeros((len(rows), T), dtype=torch.long)
        m = torch.zeros((len(rows), T), dtype=torch.long)
        for r, i in enumerate(rows):
            ids, types, _ = feats[i]
            x[r, :len(ids)] = torch.tensor(ids)
            t[r, :len(ids)] = torch.tensor(types)
            m[r, :len(ids)] = 1
        if args.compile and args.mode == "dynamic":
            for v in (x, t, m):
                torch._dynamo.maybe_mark_dynamic(v, 1)
        kw = {"input_ids": x, "token_type_ids": t, "attention_mask": m}
        if args.squad_file:
            kw["start_positions"] = torch.tensor([feats[i][2][0] for i in rows])
            kw["end_positions"] = torch.tensor([feats[i][2][1] for i in rows])
        else:
            kw["labels"] = torch.tensor([feats[i][2] for i in rows], dtype=torch.float32 if regression else torch.long)
        return kw

    def step(micros):
        t0 = time.perf_counter()
        loss_sum = 0.0
        for rows in micros:
            kw = batch_of(rows)
            if args.precision == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = forward(**kw).loss
            else:
                loss = forward(**kw).loss
            (loss / args.accum).backward()
            loss_sum += float(loss.detach()) / args.accum
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0, loss_sum

    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    compile_s = 0.0
    if args.compile:
        from torch._dynamo.utils import counters
        try:
            for k in range(args.compile_warmup):   # the first batches again: the compile happens here
                dt, loss = step(steps[k % len(steps)])
                compile_s += dt
                log(f"  compile warm-up {k + 1}: {dt:.1f} s (loss {loss:.4f})")
        except Exception as e:  # noqa: BLE001
            sys.exit(f"finetune_peers: torch.compile failed: {type(e).__name__}: "
                     f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}")
        if counters["stats"]["unique_graphs"] == 0:
            sys.exit("finetune_peers: torch.compile captured no graph (it ran eagerly)")
        graphs_after_warmup = int(counters["stats"]["unique_graphs"])
    times, losses = [], []
    for k, micros in enumerate(steps):
        dt, loss = step(micros)
        times.append(dt)
        losses.append(loss)
        n = sum(len(m) for m in micros)
        log(f"  step {k + 1}/{len(steps)}{' (warm-up)' if k < args.warmup_steps else ''}: {dt:.2f} s, "
            f"{n / dt:.2f} seq/s, loss {loss:.4f}")
    timed = times[args.warmup_steps:]
    seqs = [sum(len(m) for m in s) for s in steps[args.warmup_steps:]]
    summary = plan_summary(args, feats, info, steps)
    out = {"impl": "pytorch", "precision": args.precision, "mode": args.mode, "compiled": bool(args.compile),
           "dataset": summary["dataset"], "examples": info["examples"], "batch": args.batch, "accum": args.accum,
           "max_seq_length": args.max_seq_length, "warmup_steps": args.warmup_steps, "steps": len(timed),
           "sequences": sum(seqs), "seconds": round(sum(timed), 4),
           "sequences_per_second": round(sum(seqs) / sum(timed), 4),
           "best_step_seq_per_s": round(max(n / t for n, t in zip(seqs, timed)), 4),
           "first_step_s": round(times[0], 3), "real_tokens": summary["real_tokens"],
           "computed_rows": summary["rows_padded"] if args.mode == "padded" else summary["rows_dynamic"],
           "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
           "threads": torch.get_num_threads(), "model": args.model or args.preset,
           "params": sum(p.numel() for p in params),
           "variant": (f"torch {torch.__version__.split('+')[0]}, transformers {transformers.__version__}, "
                       f"{model.config._attn_implementation} attention, AdamW {args.adamw}"
                       + (", bf16 autocast" if args.precision == "bf16" else "")
                       + (", torch.compile" if args.compile else ""))}
    if args.compile:
        from torch._dynamo.utils import counters
        out.update({"compile_warmup_s": round(compile_s, 1), "compiled_graphs": int(counters["stats"]["unique_graphs"]),
                    "graphs_compiled_while_timed": int(counters["stats"]["unique_graphs"]) - graphs_after_warmup,
                    "graph_breaks": int(sum(counters["graph_break"].values()))})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--glue_task")
    p.add_argument("--data_dir")
    p.add_argument("--train_examples", type=int, default=0, help="GLUE: the first N rows of train.tsv only")
    p.add_argument("--squad_file", help="a SQuAD v1.1 file (a dev file: each question's first answer)")
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--do_lower_case", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    p.add_argument("--max_seq_length", type=int, default=0, help="default 128 (GLUE) or 384 (SQuAD)")
    p.add_argument("--doc_stride", type=int, default=128)
    p.add_argument("--max_query_length", type=int, default=64)
    p.add_argument("--model", help="checkpoint folder (model.safetensors + config.json)")
    p.add_argument("--preset", default="bert-base", choices=sorted(PRESETS), help="random weights, without --model")
    p.add_argument("--batch", type=int, default=32, help="sequences per optimizer step")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per step (batch / accum rows each)")
    p.add_argument("--seed", type=int, default=None, help="bert.c's default: 1 (glue), 42 (squad)")
    p.add_argument("--warmup_steps", type=int, default=2, help="untimed steps first (the schedule's first steps)")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--mode", choices=["dynamic", "padded"], default="dynamic")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile_warmup", type=int, default=1, help="with --compile: extra untimed steps before")
    p.add_argument("--attn", default="sdpa", help="transformers' attn_implementation (default sdpa, its default)")
    p.add_argument("--adamw", choices=["fused", "foreach", "forloop"], default="fused")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--plan", action="store_true", help="print the schedule's summary and stop (no torch)")
    args = p.parse_args()
    if bool(args.glue_task) == bool(args.squad_file) or (args.glue_task and not args.data_dir):
        p.error("give --glue_task with --data_dir, or --squad_file")
    if args.batch % args.accum:
        p.error("--batch must be a multiple of --accum")
    args.glue_task = args.glue_task and {"sst2": "sst-2", "stsb": "sts-b"}.get(args.glue_task.lower(), args.glue_task.lower())
    args.max_seq_length = args.max_seq_length or (384 if args.squad_file else 128)
    args.seed = args.seed if args.seed is not None else (42 if args.squad_file else 1)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    check_rng()
    feats, info = load_features(args)
    steps = schedule(len(feats), args.batch, args.accum, args.warmup_steps + args.steps, args.seed)
    if args.plan:
        print(json.dumps({"plan": True, **plan_summary(args, feats, info, steps)}))
        return
    print(f"== pytorch {args.precision} {args.mode}{' compiled' if args.compile else ''}: {dataset_name(args)}, "
          f"{info['examples']} examples, {args.warmup_steps} + {args.steps} steps of {args.batch}"
          f"{f' ({args.accum} x {args.batch // args.accum})' if args.accum > 1 else ''}, {args.threads} threads",
          file=sys.stderr, flush=True)
    print(json.dumps(train(args, feats, info, steps)), flush=True)


if __name__ == "__main__":
    main()
