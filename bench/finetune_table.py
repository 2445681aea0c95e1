#!/usr/bin/env python3
"""The tables of bench/run_finetune_bench.sh from its JSON-lines file (one "plan" line per
dataset from bench/finetune_peers.py --plan, then one line per run: bert.c's built from its
DLLogger records, the peers' from bench/finetune_peers.py):

1. every run: dataset, precision, implementation, padding mode, seq/s over the timed steps
   (and the best step's), rows computed per real token, peak RSS, and bert.c's speed-up over
   that row (same dataset and precision);
2. per dataset and precision, bert.c against the best peer (any mode, eager or compiled):
   the issue's target is bert.c ahead of every peer in the same precision (ratio > 1).

Checks that every run trained on the plan's sequences: the same example (feature) count as
the plan (for bert.c: read from its log), the same timed sequences, and for the peers the
same real tokens; a compiled run that compiled again during its timed steps is flagged.

    python3 bench/finetune_table.py bench/results/finetune_bench_<time>.jsonl
"""
import json
import sys

PREC_ORDER = {"fp32": 0, "bf16": 1}
MODE_ORDER = {"packed": 0, "padded": 1, "dynamic": 2}


def impl_name(r):
    if r["impl"] == "bert.c":
        return "bert.c"
    torch = r.get("variant", "").split(",")[0].replace("torch", "PyTorch")
    return f"{torch} {'compiled' if r.get('compiled') else 'eager'}"


def main(path):
    lines = [json.loads(line) for line in open(path) if line.startswith("{")]
    plans = {r["dataset"]: r for r in lines if r.get("plan")}
    runs = [r for r in lines if not r.get("plan")]
    problems = []
    for r in runs:
        p = plans.get(r["dataset"])
        who = f"{r['dataset']}: {impl_name(r)} {r['precision']} {r['mode']}"
        if not p:
            problems.append(f"{who}: no plan line for this dataset")
            continue
        if r.get("examples") != p["examples"]:
            problems.append(f"{who}: {r.get('examples')} examples, the plan {p['examples']}")
        if r["sequences"] != p["timed_sequences"]:
            problems.append(f"{who}: {r['sequences']} timed sequences, the plan {p['timed_sequences']}")
        if r["impl"] != "bert.c" and r.get("real_tokens") != p["real_tokens"]:
            problems.append(f"{who}: {r.get('real_tokens')} real tokens, the plan {p['real_tokens']}")
        if r.get("graphs_compiled_while_timed"):
            problems.append(f"{who}: {r['graphs_compiled_while_timed']} graph(s) compiled during the timed steps")

    def ours(r):
        return next((o for o in runs if o["impl"] == "bert.c" and o["dataset"] == r["dataset"]
                     and o["precision"] == r["precision"]), None)

    for name, p in plans.items():
        print(f"{name}: {p['examples']} training examples (mean {p['mean_length']} of {p['max_seq_length']} tokens"
              + (f"; {p['truncated']} cut" if "truncated" in p else "")
              + (f"; {p['questions']} questions" if "questions" in p else "")
              + f"), batch {p['batch']}" + (f" ({p['accum']} x {p['batch'] // p['accum']})" if p["accum"] > 1 else "")
              + f", {p['warmup_steps']} warm-up + {p['steps']} timed steps: {p['timed_sequences']} sequences, "
              f"{p['real_tokens']} real tokens; rows computed per real token: padded "
              f"{p['rows_padded'] / p['real_tokens']:.2f}, dynamic {p['rows_dynamic'] / p['real_tokens']:.2f}, "
              f"packed 1.00")
    print()
    print("| dataset | precision | implementation | padding | seq/s (best step) | rows / real token | peak RSS MiB "
          "| bert.c speed-up |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    runs.sort(key=lambda r: (r["dataset"].startswith("squad"), r["dataset"], PREC_ORDER.get(r["precision"], 9),
                             r["impl"] != "bert.c", bool(r.get("compiled")), MODE_ORDER.get(r["mode"], 9)))
    for r in runs:
        o = ours(r)
        speedup = f"{o['sequences_per_second'] / r['sequences_per_second']:.2f}x" if o and o is not r else ""
        rows = f"{r['computed_rows'] / r['real_tokens']:.2f}" if r.get("real_tokens") else "-"
        print(f"| {r['dataset']} | {r['precision']} | {impl_name(r)} | {r['mode']} | {r['sequences_per_second']:.2f} "
              f"({r['best_step_seq_per_s']:.2f}) | {rows} | {r['peak_rss_mib']:.0f} | {speedup} |")

    print("\nbert.c against the best peer in the same precision (target: ahead of every peer, > 1.00x):\n")
    print("| dataset | precision | bert.c seq/s | best peer | its seq/s | bert.c / best peer "
          "| peak RSS MiB: bert.c, best peer |")
    print("|---|---|---:|---|---:|---:|---|")
    for key in dict.fromkeys((r["dataset"], r["precision"]) for r in runs):
        group = [r for r in runs if (r["dataset"], r["precision"]) == key]
        o = next((r for r in group if r["impl"] == "bert.c"), None)
        peers = [r for r in group if r["impl"] != "bert.c"]
        best = max(peers, key=lambda r: r["sequences_per_second"]) if peers else None
        cells = [key[0], key[1], f"{o['sequences_per_second']:.2f}" if o else "-"]
        cells += [f"{impl_name(best)}, {best['mode']}", f"{best['sequences_per_second']:.2f}"] if best else ["-", "-"]
        if o and best:
            cells += [f"**{o['sequences_per_second'] / best['sequences_per_second']:.2f}x**",
                      f"{o['peak_rss_mib']:.0f}, {best['peak_rss_mib']:.0f}"]
        else:
            cells += ["-", "-"]
        print("| " + " | ".join(cells) + " |")

    notes = []
    for r in runs:
        if r["impl"] == "bert.c":
            notes.append(f"bert.c {r['precision']} {r['dataset']}: first step {r['first_step_s']:.1f} s; the DLLogger's "
                         f"training_sequences_per_second (from the loop's start, warm-up included) "
                         f"{r['logged_seq_per_s']:.2f}")
        elif r.get("compiled"):
            notes.append(f"{impl_name(r)} {r['precision']} {r['mode']} {r['dataset']}: compile warm-up "
                         f"{r['compile_warmup_s']:.0f} s, {r['compiled_graphs']} graphs, {r['graph_breaks']} graph breaks")
    variants = dict.fromkeys(r["variant"].split(", bf16")[0].split(", torch.compile")[0]
                             for r in runs if r["impl"] != "bert.c")
    if variants:
        print("\npeers: " + "; ".join(variants))
    for n in notes:
        print(f"- {n}")
    for p in problems:
        print(f"\nWARNING: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
