# throwaway: bert.c's and transformers' mean gradients under dropout, per tensor
import sys, numpy as np
tag, hfz = sys.argv[1], sys.argv[2]
idx = open(f"/tmp/fd/{tag}_grads.txt").read().split("\n")
head = idx[0].split(); N = int(head[1])
raw = np.fromfile(f"/tmp/fd/{tag}_grads.bin", dtype=np.float64)
h = np.load(hfz); Nh = int(h["N"])
print(f"bert.c: N {N}, loss mean {head[3]} sd {head[5]}, eval {head[7]}; transformers: N {Nh}, loss mean {np.mean(h['losses']):.6f} sd {np.std(h['losses'], ddof=1):.6f}, eval {float(h['eval_loss']):.6f}")
o = 0; tot = [0, 0, 0]
rows = []
for line in idx[1:]:
    if not line.strip(): continue
    name, n, sqb = line.split(); n = int(n); sqb = float(sqb)
    mb = raw[o:o + n]; gb0 = raw[o + n:o + 2 * n]; o += 2 * n
    mh = h["mean/" + name].ravel(); gh0 = h["eval/" + name].ravel(); sqh = float(h["sq/" + name])
    if name == "bert.embeddings.word_embeddings.weight":   # rows never used by the batch are 0 on both sides
        pass
    vb = (sqb - N * (mb @ mb)) / (N - 1)          # sum over elements of the per-draw variance
    vh = (sqh - Nh * (mh @ mh)) / (Nh - 1)
    D = float((mb - mh) @ (mb - mh)); E0 = vb / N + vh / Nh
    det = float(np.linalg.norm(gb0 - gh0) / max(np.linalg.norm(gh0), 1e-30))
    cos = float(mb @ mh / max(np.linalg.norm(mb) * np.linalg.norm(mh), 1e-30))
    rows.append((name, D / E0 if E0 > 0 else float('nan'), cos, np.linalg.norm(mb), np.linalg.norm(mh), vb / N, vh / Nh, det))
    tot[0] += D; tot[1] += E0
print(f"{'tensor':52s} {'D/E0':>7s} {'cos':>8s} {'|mean| b':>10s} {'|mean| h':>10s} {'var/N b':>10s} {'var/N h':>10s} {'det rel':>8s}")
for r in rows:
    print(f"{r[0]:52s} {r[1]:7.3f} {r[2]:8.5f} {r[3]:10.4g} {r[4]:10.4g} {r[5]:10.3g} {r[6]:10.3g} {r[7]:8.1e}")
print(f"all tensors: D/E0 {tot[0] / tot[1]:.3f}")
# totals: E||g||^2 per draw, the estimated ||mu||^2 and tr(Sigma) per side
o = 0; Sb = Sh = Mb = Mh = VB = VH = 0.0
for line in idx[1:]:
    if not line.strip(): continue
    name, n, sqb = line.split(); n = int(n); sqb = float(sqb)
    mb = raw[o:o + n]; o += 2 * n
    mh = h["mean/" + name].ravel(); sqh = float(h["sq/" + name])
    Sb += sqb / N; Sh += sqh / Nh
    vb = (sqb - N * (mb @ mb)) / (N - 1); vh = (sqh - Nh * (mh @ mh)) / (Nh - 1)
    VB += vb; VH += vh; Mb += mb @ mb - vb / N; Mh += mh @ mh - vh / Nh
print(f"mean ||g||^2 per draw: bert.c {Sb:.5g}, transformers {Sh:.5g}; ||mu||^2 est {Mb:.5g} / {Mh:.5g}; tr Sigma {VB:.5g} / {VH:.5g}")
