"""The rational approximation of erf that the int8 epilogue's GELU evaluates
(src/kernels/cpu/gemm_int8.c, gelu_erf16): erf(z) ~ z P(z^2) / Q(z^2) on [0, Z], Q(0) = 1,
fitted by linearised weighted least squares reweighted toward the largest errors (Lawson's
iteration, toward the minimax fit), then checked as the kernel evaluates it in float32 (Horner
with fused multiply-adds, z clamped at Z, the quotient at most 1). Needs numpy and scipy (the
project venv, tools/setup_venv.sh). `python tools/fit_erf.py 4 5 5` prints the kernel's
coefficients and their float32 error against erf in double over z in [0, 5]: 3.2e-7 at worst."""
import numpy as np, math, sys
from scipy.special import erf
Z = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
npq = int(sys.argv[2]) if len(sys.argv) > 2 else 6
nqq = int(sys.argv[3]) if len(sys.argv) > 3 else 5
z = np.linspace(0, Z, 40001)[1:]
u = z * z
f = erf(z)
w = np.ones_like(z)
def design(z, u, f):
    cols = [z * u**k for k in range(npq + 1)] + [-f * u**k for k in range(1, nqq + 1)]
    return np.stack(cols, 1)
A = design(z, u, f)
for it in range(200):
    sw = np.sqrt(w)
    c, *_ = np.linalg.lstsq(A * sw[:, None], f * sw, rcond=None)
    p, q = c[:npq + 1], np.concatenate([[1.0], c[npq + 1:]])
    approx = z * np.polyval(p[::-1], u) / np.polyval(q[::-1], u)
    err = np.abs(approx - f)
    w = w * (err / err.max() + 1e-3)
    w /= w.sum()
print("double max err", err.max())
f32 = np.float32
def horner(coef, x):
    acc = np.full_like(x, f32(coef[-1]))
    for k in coef[-2::-1]:
        acc = (acc.astype(np.float64) * x.astype(np.float64) + np.float64(f32(k))).astype(f32)
    return acc
zz = np.linspace(0, Z + 1, 2000001).astype(f32)
uu = np.minimum(zz, f32(Z)) ** 2
zc = np.minimum(zz, f32(Z))
P = horner(p, uu); Q = horner(q, uu)
r = (zc * P / Q).astype(f32)
r = np.minimum(r, f32(1))
e = np.abs(r.astype(np.float64) - erf(zz.astype(np.float64)))
print("float32 max err %.3g at z=%.4f" % (e.max(), zz[e.argmax()]))
print("P", ", ".join("%.10ef" % f32(x) for x in p))
print("Q", ", ".join("%.10ef" % f32(x) for x in q))
