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

Precision: --precision fp32 (default) runs everything in fp32. --precision bf16 runs the
forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16) (inference too), with
fp32 master weights, fp32 gradients and the same fp32 AdamW: PyTorch's mixed-precision recipe.
--precision tf32 (--device cuda) is fp32 with TF32 products (torch.backends.cuda.matmul.allow_tf32):
NVIDIA's "TF32" runs, the peer of `bert bench --device cuda --tf32`.
--compile wraps the training step's forward + loss and the inference forward in torch.compile
(inductor); the inference graph is compiled with torch._inductor.config.freezing = True
(weights folded in as constants). A failed compile is an error, never a silent eager run.
The masked head's boolean row selection (data-dependent shape) splits the training graph
there (3 graph breaks, counted in the JSON); the encoder compiles as one graph.

Needs torch and transformers; Debian's torch 1.13 works with transformers 4.44
(bench/setup_peer_env.sh makes .venv-bench) for the default fp32 eager run; bf16 and --compile need
torch >= 2 (bench/setup_bf16_peer_env.sh makes .venv-bf16peer with a current PyPI torch).
Prints a text report, or with --json one JSON object whose keys match `bert bench --json`
(plus precision, compiled, torch_version, transformers_version, attn_implementation).
"""
import argparse
import contextlib
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
    rows = (positions + torch.arange(ids.shape[0], device=ids.device).unsqueeze(1) * ids.shape[1]).view(-1)[valid]
    hidden = seq_out.reshape(-1, seq_out.shape[-1]).index_select(0, rows)
    mlm_logits = model.cls.predictions(hidden)
    nsp_logits = model.cls.seq_relationship(pooled)
    return F.cross_entropy(mlm_logits, labels.view(-1)[valid]) + F.cross_entropy(nsp_logits, nsp)


def autocast_context(torch, precision, device="cpu"):
    """A fresh context manager for one step: bf16 autocast on the device, or nothing (fp32)."""
    if precision == "bf16":
        return torch.autocast(device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def compile_or_die(torch, fn, what):
    if not hasattr(torch, "compile"):
        sys.exit(f"bench_pytorch: --compile needs torch >= 2 (this is torch {torch.__version__}); "
                 "run bench/setup_bf16_peer_env.sh and use .venv-bf16peer/bin/python")
    try:
        return torch.compile(fn)
    except Exception as e:  # noqa: BLE001  (compilation itself is lazy: see run_compiled)
        sys.exit(f"bench_pytorch: torch.compile of the {what} failed: {type(e).__name__}: {e}")


def run_compiled(torch, what, run):
    """Runs the warm-up and timed steps of a compiled function; a compile error ends the
    program (non-zero) instead of falling back to eager, and so does a run in which Dynamo
    captured no graph at all (which would be an eager run in disguise)."""
    from torch._dynamo.utils import counters
    before = counters["stats"]["unique_graphs"]
    try:
        result = run()
    except Exception as e:  # noqa: BLE001
        sys.exit(f"bench_pytorch: torch.compile of the {what} failed while compiling or running: "
                 f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
    if counters["stats"]["unique_graphs"] == before:
        sys.exit(f"bench_pytorch: torch.compile captured no graph for the {what} (it ran eagerly)")
    return result


def compile_stats(torch):
    from torch._dynamo.utils import counters
    return {"compiled_graphs": int(counters["stats"]["unique_graphs"]),
            "graph_breaks": int(sum(counters["graph_break"].values()))}


def time_steps(fn, warmup, steps, log, sync=lambda: None):
    """Wall seconds of each timed step, and the process CPU seconds (all threads) they took;
    sync waits for the device (a GPU's work is asynchronous)."""
    for i in range(warmup):
        t0 = time.perf_counter()
        fn()
        sync()
        log(f"  warm-up {i + 1}: {1e3 * (time.perf_counter() - t0):.1f} ms")
    times, cpu0 = [], time.process_time()
    for i in range(steps):
        t0 = time.perf_counter()
        fn()
        sync()
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
    ap.add_argument("--precision", choices=["fp32", "bf16", "tf32"], default="fp32",
                    help="bf16: forward + loss under torch.autocast(device, bfloat16), fp32 master weights; "
                         "tf32 (cuda): fp32 with TF32 products")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the training forward + loss and the inference forward "
                         "(inference with inductor freezing); torch >= 2")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager",
                    help="HF attention implementation (sdpa needs torch >= 2 and transformers that has it)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the model and batch on the GPU (the peer of bert bench --device cuda)")
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
    if args.compile and not hasattr(torch, "compile"):
        compile_or_die(torch, None, "model")  # exits with the reason
    if args.precision == "bf16" and int(torch.__version__.split(".")[0]) < 2:
        # torch 1.13's CPU autocast leaves LayerNorm's input bf16 and its weights fp32, and fails
        sys.exit(f"bench_pytorch: --precision bf16 needs torch >= 2 (this is torch {torch.__version__}); "
                 "run bench/setup_bf16_peer_env.sh and use .venv-bf16peer/bin/python")
    if args.precision == "tf32" and args.device != "cuda":
        sys.exit("bench_pytorch: --precision tf32 is for --device cuda")
    # fp32 products stay fp32 (PyTorch's default since 1.12); tf32 allows TF32 in them
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    log = (lambda s: None) if args.json else (lambda s: print(s, file=sys.stderr, flush=True))
    if args.compile and args.warmup < 1:
        log("bench_pytorch: warning: --compile with --warmup 0 times the compilation in the first step")

    cfg = model_config(args)
    # eager: the only attention torch 1.13 has (the default); recorded in the JSON report
    cfg._attn_implementation = args.attn
    model = BertForPreTraining(cfg).to(args.device)
    batch = tuple(t.to(args.device) for t in synthetic_batch(torch, cfg, args))
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    optimizer = make_optimizer(torch, model, 1e-4)
    losses = []

    def loss_fn():
        return pretraining_loss(torch, model, batch, args.head)

    forward_loss = compile_or_die(torch, loss_fn, "training forward + loss") if args.compile and train_steps else loss_fn

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with autocast_context(torch, args.precision, args.device):
            loss = forward_loss()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))

    model.train()
    timed_train = lambda: time_steps(train_step, args.warmup, train_steps, log, sync)  # noqa: E731
    if not train_steps:
        train_times, train_cpu = [], 0
    elif args.compile:
        train_times, train_cpu = run_compiled(torch, "training forward + loss", timed_train)
    else:
        train_times, train_cpu = timed_train()
    model.eval()
    ids, types, mask = batch[:3]

    encoder = model.bert
    if args.compile and infer_steps:
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True  # acts only on graphs compiled without grad (inference)
        encoder = compile_or_die(torch, model.bert, "inference forward")

    def infer_step():
        with torch.inference_mode(), autocast_context(torch, args.precision, args.device):
            encoder(input_ids=ids, token_type_ids=types, attention_mask=mask)

    timed_infer = lambda: time_steps(infer_step, args.warmup, infer_steps, log, sync)  # noqa: E731
    if not infer_steps:
        infer_times, infer_cpu = [], 0
    elif args.compile:
        infer_times, infer_cpu = run_compiled(torch, "inference forward", timed_infer)
    else:
        infer_times, infer_cpu = timed_infer()
    report(args, cfg, model, batch, (train_times, train_cpu), (infer_times, infer_cpu), losses, torch)


def report(args, cfg, model, batch, train, infer, losses, torch):
    (train_times, train_cpu), (infer_times, infer_cpu) = train, infer
    B = args.batch
    tf, inf = train_flops(cfg, B, args.seq, args.preds), infer_flops(cfg, B, args.seq)
    t_train, t_infer = sum(train_times), sum(infer_times)
    variant = "".join([f", {torch.cuda.get_device_name()}" if args.device == "cuda" else "",", bf16 autocast" if args.precision == "bf16" else ", TF32" if args.precision == "tf32" else "",
                       ", torch.compile" if args.compile else "",
                       f", attn={args.attn}" if args.attn != "eager" else ""])
    import transformers
    out = {
        "impl": f"pytorch {torch.__version__.split('+')[0]} (transformers, head={args.head}{variant})",
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
        "precision": args.precision, "compiled": bool(args.compile),
        "torch_version": torch.__version__, "transformers_version": transformers.__version__,
        "attn_implementation": args.attn,
    }
    if args.compile:
        out.update(compile_stats(torch))
        out["inductor_freezing"] = bool(infer_times)
    if args.json:
        print(json.dumps(out))
        return
    print(f"model     {out['preset']}: {out['impl']}, {out['params'] / 1e6:.2f}M parameters, "
          f"{out['threads']} threads")
    if args.compile:
        print(f"compile   {out['compiled_graphs']} graphs, {out['graph_breaks']} graph breaks"
              f"{', inference with inductor freezing' if infer_times else ''}")
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
