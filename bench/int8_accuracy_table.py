#!/usr/bin/env python3
"""The table of bench/run_int8_accuracy.sh's JSON lines (markdown on stdout).

  python3 bench/int8_accuracy_table.py bench/results/int8_accuracy/results.jsonl

Accuracy: each metric of each fine-tuned model in points (percent), with its difference to
bert.c's fp32 in brackets; the peers' int8 also against their own fp32. Embeddings: the
cosine of each sentence's embedding to bert.c's fp32 one (the smallest, the mean, and how many
sentences fall below 0.99). The sanity part: how often each side's prediction is bert.c fp32's.
"""
import json
import sys

SIDES = ["bert.c-fp32", "bert.c-bf16", "bert.c-int8", "ort-int8", "openvino-int8"]
HEAD = ["fp32 (bert.c)", "bf16 (bert.c)", "bert.c int8", "ORT int8", "OpenVINO int8"]
METRICS = [("mrpc", "acc", "MRPC dev accuracy"), ("mrpc", "f1", "MRPC dev F1"),
           ("sst-2", "acc", "SST-2 dev accuracy"), ("squad", "exact_match", "SQuAD split EM"),
           ("squad", "f1", "SQuAD split F1")]


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    by = {(r["task"], r["side"]): r for r in rows}

    def points(task, side, m):
        r = by.get((task, side))
        if r is None:
            return None
        v = r["dev"][m]
        return v * 100 if task != "squad" else v

    print("| task, metric | " + " | ".join(HEAD) + " |")
    print("|---|" + "---:|" * len(HEAD))
    for task, m, label in METRICS:
        ref = points(task, "bert.c-fp32", m)
        cells = []
        for side in SIDES:
            v = points(task, side, m)
            if v is None:
                cells.append("–")
            elif side == "bert.c-fp32":
                cells.append(f"{v:.2f}")
            else:
                cells.append(f"{v:.2f} ({v - ref:+.2f})")
        print(f"| {label} | " + " | ".join(cells) + " |")
    emb = [by.get(("embed", s)) for s in SIDES]
    cells = []
    for s, r in zip(SIDES, emb):
        if r is None:
            cells.append("–")
        elif s == "bert.c-fp32":
            cells.append(f"{r['examples']} sentences")
        else:
            c = r["cosine_to_bertc_fp32"]
            cells.append(f"min {c['min']:.4f}, mean {c['mean']:.5f}, {c['below_0.99']} < 0.99")
    print("| STS-B dev sentence embeddings, cosine to fp32 | " + " | ".join(cells) + " |")
    sq = by.get(("squad", "bert.c-fp32"))
    if sq and "split" in sq:
        print(f"\nSQuAD split (dev-v1.1.json's articles): {sq['split']}; {sq['examples']} questions predicted.")

    print("\nSanity: the peers in fp32 on the same inputs, and how many predictions equal bert.c fp32's "
          "(GLUE: labels; SQuAD: answer texts; embeddings: cosine to bert.c fp32)\n")
    print("| task | side | metrics | same as bert.c fp32 |")
    print("|---|---|---|---:|")
    for r in rows:
        if r["task"] == "embed":
            c = r.get("cosine_to_bertc_fp32")
            same = f"cosine min {c['min']:.6f}" if c else "–"
            own = r.get("cosine_to_own_fp32")
            metrics = f"to its own fp32: min {own['min']:.4f}, mean {own['mean']:.5f}" if own else ""
        else:
            same = f"{100 * r['same_as_bertc_fp32']:.2f}%"
            metrics = ", ".join(f"{k} {v * (100 if r['task'] != 'squad' else 1):.2f}" for k, v in r["dev"].items())
        print(f"| {r['task']} | {r['side']} | {metrics} | {same} |")
    print("\nPeers' variants:\n")
    seen = set()
    for r in rows:
        if "variant" in r and (r["side"], r["variant"]) not in seen:
            seen.add((r["side"], r["variant"]))
            print(f"- {r['task']} {r['side']}: {r['variant']}")


if __name__ == "__main__":
    main()
