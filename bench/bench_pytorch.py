#!/usr/bin/env python3
"""The PyTorch peer of `bert bench`: the same configuration (preset, batch, seq, masked
slots), the same synthetic-input recipe and the same FLOP formula, timed in PyTorch.

Model: HuggingFace transformers' BertForPreTraining built from a BertConfig (random weights,
nothing downloaded). Training step = forward + backward + torch.optim.AdamW step (weight decay
0.01 except biases and LayerNorm, as NVIDIA's recipe), with dropout on. Like NVIDIA's
DeepLearningExamples recipe, the MLM head runs only at the masked positions (--head masked,
default); --head full runs HF's stock forward, which computes vocabulary logits at every
position (what a plain `model(**batch, labels=...)` user gets). Inference = the encoder and
pooler (model.bert) under torch.inference_mode().

Needs torch and transformers; Debian's torch 1.13 works with transformers 4.44
(bench/setup_peer_env.sh makes .venv-bench). Prints a text report, or with --json one JSON
object whose keys match `bert bench --json`.
"""
import argparse
import json
import os
import resource
import sys
import time

# One table of presets for both Python sides (and the same as src/io/config.c's).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from torch_bert import PRESETS  # noqa: E402  name: (layers, hidden, heads); intermediate 4H


def model_config(args):
    from transformers import BertConfig
    if args.config:
        return BertConfig.from_json_file(args.config)
    layers, hidden, heads = PRESETS[args.preset]
    return BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=4 * hidden,
                      hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2,
                      layer_norm_eps=1e-12, hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, initializer_range=0.02)


def train_flops(cfg, batch, seq, preds):
    """Matmul FLOPs (2*M*N*K) of one training step: 3x the forward; same as src/model/flops.c."""
    return 3.0 * batch * (encoder_flops(cfg, seq) + pooler_nsp_flops(cfg) + mlm_flops(cfg, preds))


def infer_flops(cfg, batch, seq):
    return batch * (encoder_flops(cfg, seq) + pooler_nsp_flops(cfg))


def encoder_flops(cfg, T):
    H, I = cfg.hidden_size, cfg.intermediate_size
    per_layer = 3 * 2 * T * H * H + 2 * T * T * H + 2 * T * T * H + 2 * T * H * H + 2 * 2 * T * H * I
    return cfg.num_hidden_layers * per_layer


def pooler_nsp_flops(cfg):
    return 2 * cfg.hidden_size ** 2 + 2 * cfg.hidden_size * 2


def mlm_flops(cfg, P):
    return 2 * P * cfg.hidden_size ** 2 + 2 * P * cfg.hidden_size * cfg.vocab_size


def synthetic_batch(torch, cfg, args):
    """Random ids clear of special tokens, segment B on the second half, full-length sequences
    unless --pad_fraction, args.preds distinct masked positions among 1..len-2 per sequence."""
    g = torch.Generator().manual_seed(args.seed)
    B, T, P = args.batch, args.seq, args.preds
    ids = torch.randint(1000, cfg.vocab_size, (B, T), generator=g)
    mask = torch.zeros(B, T, dtype=torch.long)
    types = torch.zeros(B, T, dtype=torch.long)
    positions = torch.zeros(B, P, dtype=torch.long)
    labels = torch.full((B, P), -100, dtype=torch.long)
    for b in range(B):
        length = T
        if args.pad_fraction > 0:
            shortest = max(min(8, T), round(T * (1 - 2 * args.pad_fraction)))
            length = int(torch.randint(shortest, T + 1, (1,), generator=g)) if shortest < T else T
        mask[b, :length] = 1
        types[b, length // 2:length] = 1
        ids[b, length:] = 0
        n = min(P, length - 2)
        chosen = (torch.randperm(length - 2, generator=g)[:n] + 1).sort().values
        positions[b, :n] = chosen
        labels[b, :n] = torch.randint(1000, cfg.vocab_size, (n,), generator=g)
    nsp = torch.randint(0, 2, (B,), generator=g)
    return ids, types, mask, positions, labels, nsp


def make_optimizer(torch, model, lr):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-6)


def pretraining_loss(torch, model, batch, head):
    ids, types, mask, positions, labels, nsp = batch
    F = torch.nn.functional
    if head == "full":  # HF's stock path: logits over the vocabulary at every position
        full = torch.full_like(ids, -100)
        full.scatter_(1, positions, labels)
        return model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                     labels=full, next_sentence_label=nsp).loss
    seq_out, pooled = model.bert(input_ids=ids, token_type_ids=types, attention_mask=mask)[:2]
    valid = labels.view(-1) != -100
    rows = (positions + torch.arange(ids.shape[0]).unsqueeze(1) * ids.shape[1]).view(-1)[valid]
    hidden = seq_out.reshape(-1, seq_out.shape[-1]).index_select(0, rows)
    mlm_logits = model.cls.predictions(hidden)
    nsp_logits = model.cls.seq_relationship(pooled)
    return F.cross_entropy(mlm_logits, labels.view(-1)[valid]) + F.cross_entropy(nsp_logits, nsp)


def time_steps(fn, warmup, steps, log):
    """Wall seconds of each timed step, and the process CPU seconds (all threads) they took."""
    for i in range(warmup):
        t0 = time.perf_counter()
        fn()
        log(f"  warm-up {i + 1}: {1e3 * (time.perf_counter() - t0):.1f} ms")
    times, cpu0 = [], time.process_time()
    for i in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        log(f"  step {i + 1}: {1e3 * times[-1]:.1f} ms")
    return times, time.process_time() - cpu0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="bert-base", choices=sorted(PRESETS))
    ap.add_argument("--config", help="HuggingFace config.json instead of a preset")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--preds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--infer_steps", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mode", choices=["train", "infer", "both"], default="both")
    ap.add_argument("--head", choices=["masked", "full"], default="masked")
    ap.add_argument("--pad_fraction", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    infer_steps = args.steps if args.infer_steps is None else args.infer_steps
    train_steps = 0 if args.mode == "infer" else args.steps
    infer_steps = 0 if args.mode == "train" else infer_steps

    import torch
    try:
        from transformers import BertForPreTraining
    except ImportError as e:
        sys.exit(f"bench_pytorch: transformers with BertForPreTraining is needed ({e}); "
                 "run bench/setup_peer_env.sh")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    log = (lambda s: None) if args.json else (lambda s: print(s, file=sys.stderr, flush=True))

    cfg = model_config(args)
    cfg._attn_implementation = "eager"  # the only attention torch 1.13 has; recorded in the report
    model = BertForPreTraining(cfg)
    batch = synthetic_batch(torch, cfg, args)
    optimizer = make_optimizer(torch, model, 1e-4)
    losses = []

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = pretraining_loss(torch, model, batch, args.head)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))

    model.train()
    train_times, train_cpu = time_steps(train_step, args.warmup, train_steps, log) if train_steps else ([], 0)
    model.eval()
    ids, types, mask = batch[:3]

    def infer_step():
        with torch.inference_mode():
            model.bert(input_ids=ids, token_type_ids=types, attention_mask=mask)

    infer_times, infer_cpu = time_steps(infer_step, args.warmup, infer_steps, log) if infer_steps else ([], 0)
    report(args, cfg, model, batch, (train_times, train_cpu), (infer_times, infer_cpu), losses, torch)


def report(args, cfg, model, batch, train, infer, losses, torch):
    (train_times, train_cpu), (infer_times, infer_cpu) = train, infer
    B = args.batch
    tf, inf = train_flops(cfg, B, args.seq, args.preds), infer_flops(cfg, B, args.seq)
    t_train, t_infer = sum(train_times), sum(infer_times)
    out = {
        "impl": f"pytorch {torch.__version__.split('+')[0]} (transformers, head={args.head})",
        "preset": args.config or args.preset, "batch": B, "seq": args.seq, "preds": args.preds,
        "threads": torch.get_num_threads(), "pad_fraction": 1.0 - float(batch[2].float().mean()),
        "params": sum(p.numel() for p in model.parameters()),
        "train_seq_per_s": B * len(train_times) / t_train if train_times else 0,
        "train_ms_per_step": 1e3 * t_train / len(train_times) if train_times else 0,
        "train_gflops": tf * len(train_times) / t_train * 1e-9 if train_times else 0,
        "train_cpu_ms_per_step": 1e3 * train_cpu / len(train_times) if train_times else 0,
        "train_best_ms_per_step": 1e3 * min(train_times) if train_times else 0,
        "infer_seq_per_s": B * len(infer_times) / t_infer if infer_times else 0,
        "infer_gflops": inf * len(infer_times) / t_infer * 1e-9 if infer_times else 0,
        "infer_cpu_ms_per_batch": 1e3 * infer_cpu / len(infer_times) if infer_times else 0,
        "infer_best_ms_per_batch": 1e3 * min(infer_times) if infer_times else 0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "train_gflop_per_seq": tf / B * 1e-9,
        "train_steps": len(train_times), "infer_steps": len(infer_times),
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"model     {out['preset']}: {out['impl']}, {out['params'] / 1e6:.2f}M parameters, "
          f"{out['threads']} threads")
    if train_times:
        print(f"train     {out['train_seq_per_s']:.2f} seq/s, {out['train_ms_per_step']:.1f} ms/step "
              f"(best {1e3 * min(train_times):.1f}), {out['train_gflops']:.1f} GFLOP/s, "
              f"CPU {out['train_cpu_ms_per_step']:.1f} ms/step "
              f"[{out['train_gflop_per_seq']:.2f} GFLOP/seq, loss {losses[0]:.3f} -> {losses[-1]:.3f}]")
    if infer_times:
        print(f"inference {out['infer_seq_per_s']:.2f} seq/s, {out['infer_gflops']:.1f} GFLOP/s, "
              f"CPU {out['infer_cpu_ms_per_batch']:.1f} ms/batch")
    print(f"memory    peak RSS {out['peak_rss_mib']:.1f} MiB")


if __name__ == "__main__":
    main()
