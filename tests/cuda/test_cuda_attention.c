/* The CUDA backend's attention (src/kernels/cuda/attention.cu) against the CPU backend's
 * (src/kernels/cpu/layers.c) on the same inputs: ctx and the kept probabilities of the forward
 * (same layout on both), dqkv of the backward (run on the CPU's probabilities on both sides, so
 * that its comparison measures the backward alone; where the GPU keeps a state of its own in
 * place of the probabilities, k_attention_keeps_probs false, as the fused kernels do, its
 * backward runs from that state, the probabilities are not compared, and dqkv holds the
 * forward's errors too, well inside the bounds that allow every 16-bit rounding of P and dS to
 * flip), over batch sizes 1..3, sequence lengths 1, 7,
 * 128 and 200, 1, 2 and 12 heads of size 8 and 64, kv_len = T and < T, masks with holes, the
 * packed layout, dropout 0 and 0.1, fp32 and each 16-bit mode with the 16-bit QKV activation
 * given or not, and inference's forward without probabilities; and T = 512 with 16 heads of 64
 * (BERT-large's) in fp32, bf16 and fp16; and for the fused 16-bit kernels' tiles, lengths 17 to
 * 129 with heads of 16, 32, 48 and 128 in each 16-bit mode. Outputs are prefilled with 7 on
 * both sides, so every element either backend leaves unwritten shows.
 *
 * Tolerances: per element, from the arithmetic (forward_tolerances and backward_tolerances say
 * how), and exact where the two must agree bit for bit or value for value:
 *   - T = 1: one key, so the probability is expf(0) / expf(0) = 1 exactly on both sides, ctx and
 *     dV are single exact products, and dS = 1 (dP - 1 dP) scale = 0: everything exact;
 *   - probabilities of masked keys (exactly 0), dK and dV rows of keys from kv_len on (0);
 *   - the GPU with the 16-bit activation given vs rounding qkv itself: bit for bit, on either
 *     path (its rounding is the CPU's k_to_half, which made the given activation; the inputs
 *     include ties and fp16 subnormals), and the qkv it must not read then holds NaN;
 *   - the forward's writes within k_attention_state_floats' count (a guard of sevens past it);
 *   - the GPU's ctx without probabilities vs with them: bit for bit (the same arithmetic).
 * Each case prints one line: the worst error over its tolerance for ctx, probs and dqkv (a
 * margin), and in half mode the fraction of elements past the flip-free bound (see
 * MAX_BEYOND_SMOOTH); a failing comparison prints its first and worst elements. Rows in the
 * messages are activation rows (probs: row i of block (b, h) at (b A + h) T + i, row stride
 * kv_len[b] inside it). */
#include <string.h>

#include "cuda_test.h"

enum { MAX_B = 3 };
/* In half mode the tolerances allow every 16-bit rounding of a dropped probability or a score
 * gradient to flip (the two sides' values differing by a hair across a rounding midpoint),
 * which makes them loose: a product that skipped rounding one of its operands stays inside.
 * Such flips are rare (a value within the sides' difference, ~1e-6 relative, of a midpoint:
 * ~1e-6 / 2^-8 per term), so few elements may exceed the bound without flips (the "smooth"
 * one): 4e-4 of them at most in a CPU emulation of the CUDA kernels' order, where an operand
 * left unrounded (P, dctx or dS) put 9% to 64% of dqkv or ctx past it in the bf16 cases. */
#define MAX_BEYOND_SMOOTH 0.01
#define U F32_UNIT_ROUNDOFF

typedef struct {
    int B, T, A, d;
    bool short_kv;      /* kv_len < T (sequence 1 at T: mixed) */
    bool holes;         /* masked keys before kv_len (sequences 0 and 2) */
    bool packed;        /* seq_row / seq_rows with kv_len <= seq_rows <= T */
    float dropout;
    int half;           /* -1: fp32; else a HalfMode */
    bool qkv16;         /* the 16-bit activation given */
    bool probs_null;    /* the forward also run without probabilities */
} Case;

/* One case's inputs on the host, its layout, and the operands as the products see them. */
typedef struct {
    Case c;
    int H, N;   /* N rows in the activations */
    int32_t kv_len[MAX_B], seq_row[MAX_B], seq_rows[MAX_B], *mask;
    uint8_t has_holes[MAX_B];
    float *qkv, *dctx;          /* inputs */
    float *qkv_op, *dctx_op;    /* the same rounded to 16 bits (half), else copies */
    uint16_t *qkv16;
    int skewed;                 /* device buffers one element past their allocations' alignment (SKEW_*) */
    AttentionArgs args;         /* the CPU's */
    float scale, keep_scale;
    uint32_t threshold;
} Problem;

static const char *half_name(int half) {
    return half < 0 ? "fp32" : half == HALF_BF16 ? "bf16" : half == HALF_BF16_EMULATED ? "bf16-emulated" : "fp16";
}

static void describe(const Case *c, char *out, size_t n) {
    snprintf(out, n, "B=%d T=%d A=%d d=%d%s%s%s dropout=%g %s%s%s", c->B, c->T, c->A, c->d,
             c->short_kv ? " kv<T" : " kv=T", c->holes ? " holes" : "", c->packed ? " packed" : "", c->dropout,
             half_name(c->half), c->qkv16 ? " qkv16" : "", c->probs_null ? " probs-NULL" : "");
}

static float host_round(HalfMode mode, float x) {
    uint16_t h;
    float y;
    k_to_half(mode, &h, &x, 1);
    k_from_half(mode, &y, &h, 1);
    return y;
}

/* Values whose 16-bit rounding is a tie (bf16: 1 + 2^-8 and 1 + 3 2^-8; fp16: 1 + 2^-11 and
 * 1 + 3 2^-11) or an fp16 subnormal, placed every 13th element, so that the GPU's rounding is
 * seen to be the CPU's. */
static void sprinkle_ties(float *x, size_t n) {
    static const float special[] = {1.00390625f, -1.01171875f, 1.00048828125f, -1.00146484375f, 3.1e-6f, -4.7e-7f};
    for (size_t i = 5, k = 0; i < n; i += 13, k++) x[i] = special[k % 6];
}

/* Fills *out in place (its args point into it). */
static void make_problem(Problem *out, const Case *c, uint64_t seed) {
    Problem P = {.c = *c, .H = c->A * c->d};
    const int B = c->B, T = c->T, H = P.H;
    P.mask = calloc((size_t)B * T, sizeof(int32_t));
    int rows = 0;
    for (int b = 0; b < B; b++) {
        int L = T;
        if (c->short_kv && b != 1) L = T - 1 - b * T / 3 > 1 ? T - 1 - b * T / 3 : 1;
        P.kv_len[b] = L;
        P.has_holes[b] = 0;
        for (int j = 0; j < L; j++) {
            /* holes never at key 0: a row with every key masked has no softmax */
            const bool hole = c->holes && b != 1 && j > 0 && rng_bits32(seed + 77, (uint32_t)(b * T + j)) % 7 == 0;
            P.mask[b * T + j] = !hole;
            if (hole) P.has_holes[b] = 1;
        }
        P.seq_rows[b] = c->packed ? L + (T - L + 1) / 2 : T;
        P.seq_row[b] = rows;
        rows += P.seq_rows[b];
    }
    P.N = rows;
    const size_t nq = (size_t)P.N * 3 * H, ng = (size_t)P.N * H;
    P.qkv = cuda_test_values(nq, seed, 1.0f);
    P.dctx = cuda_test_values(ng, seed + 1, 1.0f);
    if (c->half >= 0) sprinkle_ties(P.qkv, nq), sprinkle_ties(P.dctx, ng);
    P.qkv_op = malloc(sizeof(float) * nq);
    P.dctx_op = malloc(sizeof(float) * ng);
    for (size_t i = 0; i < nq; i++) P.qkv_op[i] = c->half >= 0 ? host_round((HalfMode)c->half, P.qkv[i]) : P.qkv[i];
    for (size_t i = 0; i < ng; i++) P.dctx_op[i] = c->half >= 0 ? host_round((HalfMode)c->half, P.dctx[i]) : P.dctx[i];
    P.qkv16 = NULL;
    if (c->qkv16) {
        P.qkv16 = malloc(sizeof(uint16_t) * nq);
        k_to_half((HalfMode)c->half, P.qkv16, P.qkv, (long)nq);
    }
    /* HALF_BF16 on the CPU needs its bf16 instructions; without them the emulated mode is the
     * same format, products and accumulation (another order: within the tolerances) */
    HalfMode cpu_mode = c->half >= 0 ? (HalfMode)c->half : HALF_BF16;
    if (cpu_mode == HALF_BF16 && !k_bf16_native_available()) cpu_mode = HALF_BF16_EMULATED;
    P.args = (AttentionArgs){.B = B, .T = T, .A = c->A, .d = c->d, .kv_len = P.kv_len, .mask = P.mask,
                             .has_holes = P.has_holes, .dropout_p = c->dropout, .dropout_key = seed * 31 + 5,
                             .seq_row = c->packed ? P.seq_row : NULL, .seq_rows = c->packed ? P.seq_rows : NULL,
                             .half = c->half >= 0, .half_mode = cpu_mode, .qkv16 = P.qkv16};
    P.scale = 1.0f / sqrtf((float)c->d);
    P.keep_scale = 1.0f / (1.0f - c->dropout);
    P.threshold = rng_dropout_threshold(c->dropout);
    *out = P;
    out->args.kv_len = out->kv_len, out->args.has_holes = out->has_holes;
    out->args.seq_row = c->packed ? out->seq_row : NULL, out->args.seq_rows = c->packed ? out->seq_rows : NULL;
}

static void free_problem(Problem *P) {
    free(P->mask), free(P->qkv), free(P->dctx), free(P->qkv_op), free(P->dctx_op), free(P->qkv16);
}

/* ---- tolerances ----
 * Notation: u = 2^-24; G(n) = 2 gamma_n = 2 n u / (1 - n u), the most two evaluations of the
 * same n-term fp32 sum (products included) in any orders differ by, relative to sum|terms|
 * (test.h); both sides compute every other step with the same float operations, which differ
 * only through their inputs (and one rounding each: 2u relative). Operands are the 16-bit
 * values in half mode (identical on both sides: the same rounding of the same values, and
 * their products are exact in fp32). spacing(x): the gap between 16-bit values around x
 * (bf16 <= 2^-7 |x|; fp16 <= 2^-10 |x| + 2^-24, subnormals), the most a rounding of x can
 * flip by when the two sides' x differ by a hair; 0 in fp32. The final tolerance is twice the
 * first-order bound (second-order terms, and the magnitudes here being computed from one
 * side's values), and 0 where T = 1 (exact, above). */

static double G(int n) { return 2 * gamma_k(n); }

static double spacing(int half, double x) {
    if (half < 0) return 0;
    return half == HALF_FP16 ? ldexp(fabs(x), -10) + ldexp(1.0, -24) : ldexp(fabs(x), -7);
}

/* Whether a value within e of x may round to 16 bits (half) other than x does: x - e or x + e
 * rounds elsewhere. */
static bool may_round_apart(int half, float x, double e) {
    if (half < 0) return false;
    const float r = host_round((HalfMode)half, x);
    return host_round((HalfMode)half, (float)(x - e)) != r || host_round((HalfMode)half, (float)(x + e)) != r;
}

static bool host_kept(const Problem *P, int block, int i, int j) {
    const uint32_t base = (uint32_t)(((size_t)block * P->c.T + i) * P->c.T);
    return rng_bits32(P->args.dropout_key, base + (uint32_t)j) >= P->threshold;
}

/* The CPU's dropped probability of (block, i, j) from its kept one. */
static float dropped(const Problem *P, int block, int i, int j, float p) {
    if (P->c.dropout <= 0) return p;
    return host_kept(P, block, i, j) ? p * P->keep_scale : 0.0f;
}

static double exact_factor(const Problem *P) { return P->c.T == 1 ? 0.0 : 2.0; }

/* Forward, per query row i of block (b, h), keys j < L:
 *   scores x_j = fl(q.k) / sqrt(d): differ by dx_j = G(d) scale sum|q k| + 2u |x_j|;
 *   the max by at most Dx = max dx_j; exp's argument x_j - max by dx_j + Dx + 2u |x_j - max|;
 *   e_j = expf(arg) relatively by that plus 16u (libm's and CUDA's expf: each within 2-4 ulp,
 *   an ulp <= 2u relative); the sum of the positive e_j relatively by max(de/e) + G(L); its
 *   inverse and p_j = e_j inv by 2u each: p relatively within R = 2 max_j(d arg_j) + G(L) + 40u
 *   (the extra u's rounded up). Dropout multiplies both sides' p by the same 1/(1-p_drop)
 *   (2u), and a 16-bit rounding of the dropped p may then flip by spacing(pd).
 *   ctx_c = sum_j pd_j v_jc: G(L) sum_j |pd16_j v_jc| + sum_j (R pd_j + spacing(pd_j)) |v_jc|. */
static void forward_tolerances(const Problem *P, const float *probs, double *tol_ctx, double *smooth_ctx,
                               double *tol_probs) {
    const Case *c = &P->c;
    const int T = c->T, d = c->d, H = P->H, H3 = 3 * H, half = c->half;
    const double f = exact_factor(P);
    for (int b = 0; b < c->B; b++) {
        const int L = P->kv_len[b], rows = P->seq_rows[b];
        const size_t row0 = (size_t)P->seq_row[b];
        const int32_t *mask = P->has_holes[b] ? P->mask + (size_t)b * T : NULL;
        double *x = malloc(sizeof(double) * (L + 1)), *dx = malloc(sizeof(double) * (L + 1));
        double *dpd = malloc(sizeof(double) * (L + 1)), *apd = malloc(sizeof(double) * (L + 1));
        double *flip = malloc(sizeof(double) * (L + 1));
        for (int h = 0; h < c->A; h++) {
            const int block = b * c->A + h;
            for (int i = 0; i < rows; i++) {
                const float *q = P->qkv_op + (row0 + i) * H3 + (size_t)h * d;
                double mx = -INFINITY, Dx = 0, worst_arg = 0;
                for (int j = 0; j < L; j++) {
                    if (mask && !mask[j]) continue;
                    const float *k = P->qkv_op + (row0 + j) * H3 + H + (size_t)h * d;
                    double s = 0, sa = 0;
                    for (int e = 0; e < d; e++) s += (double)q[e] * k[e], sa += fabs((double)q[e] * k[e]);
                    x[j] = s * P->scale;
                    dx[j] = G(d) * sa * P->scale + 2 * U * fabs(x[j]);
                    if (x[j] > mx) mx = x[j];
                    if (dx[j] > Dx) Dx = dx[j];
                }
                for (int j = 0; j < L; j++) {
                    if (mask && !mask[j]) continue;
                    const double arg = dx[j] + Dx + 2 * U * fabs(x[j] - mx);
                    if (arg > worst_arg) worst_arg = arg;
                }
                const double R = 2 * worst_arg + G(L) + 40 * U;
                const size_t at = (size_t)block * T * T + (size_t)i * L;
                for (int j = 0; j < L; j++) {
                    const float p = probs[at + j], pd = dropped(P, block, i, j, p);
                    tol_probs[at + j] = f * R * p;   /* masked: p = 0, so exactly 0 */
                    apd[j] = fabs(half >= 0 ? host_round((HalfMode)half, pd) : pd);
                    dpd[j] = (R + 2 * U) * pd;
                    flip[j] = pd != 0 ? spacing(half, pd) : 0;
                }
                for (int e = 0; e < d; e++) {
                    double sum_abs = 0, smooth = 0, flips = 0;
                    for (int j = 0; j < L; j++) {
                        const double v = fabs(P->qkv_op[(row0 + j) * H3 + 2 * H + (size_t)h * d + e]);
                        sum_abs += apd[j] * v, smooth += dpd[j] * v, flips += flip[j] * v;
                    }
                    const size_t o = (row0 + i) * H + (size_t)h * d + e;
                    smooth_ctx[o] = f * (G(L) * sum_abs + smooth);
                    tol_ctx[o] = smooth_ctx[o] + f * flips;
                }
            }
        }
        free(x), free(dx), free(dpd), free(apd), free(flip);
    }
}

/* Backward, on the same probabilities p on both sides, per block (b, h):
 *   dP_ij = dctx_i . v_j: G(d) sum|g v|; times the dropout's scale where kept (2u more), 0
 *   where dropped (the same mask: the same counters);
 *   dot_i = sum_j p_ij dPd_ij: G(L) sum_j p |dPd| + sum_j p ddPd_ij;
 *   dS_ij = p (dPd - dot) scale: p scale (ddPd_ij + ddot_i) + 8u |dS| (three roundings a side),
 *   then in half mode its 16-bit rounding may flip by spacing(dS);
 *   dQ_ic = sum_j dS16_ij k_jc: G(L) sum_j |dS16 k| + sum_j ddS_ij |k_jc|;
 *   dK_jc = sum_i dS16_ij q_ic over the sequence's rows: G(rows) sum_i |dS16 q| + sum_i ddS_ij |q_ic|;
 *   dV_jc = sum_i pd16_ij g_ic: pd16 the same on both sides: G(rows) sum_i |pd16 g|;
 *   dK, dV of keys from kv_len on: exactly 0.
 * Where the GPU recomputes P from its forward's state (tol_p not NULL: the forward's bound on p,
 * tol_probs), its p differs from the CPU's by e = tol_p / exact_factor (forward_tolerances' margin
 * taken out): dot by sum_j e |dPd| more, dS by e |dPd - dot| scale more, and dV by the dropped
 * e's sum, sum_i e_ij ks |g_ic|, and by spacing(pd) |g_ic| where pd16 may round the other way
 * (pd within e ks of a rounding boundary: rounding pd -/+ e ks moves it). */
static void backward_tolerances(const Problem *P, const float *probs, const double *tol_p, double *tol,
                                double *smooth_tol) {
    const Case *c = &P->c;
    const int T = c->T, d = c->d, H = P->H, H3 = 3 * H, half = c->half;
    const double f = exact_factor(P);
    for (int b = 0; b < c->B; b++) {
        const int L = P->kv_len[b], rows = P->seq_rows[b];
        const size_t row0 = (size_t)P->seq_row[b];
        double *ads = malloc(sizeof(double) * rows * L + 1), *dds = malloc(sizeof(double) * rows * L + 1);
        double *apd = malloc(sizeof(double) * rows * L + 1), *ddpd = malloc(sizeof(double) * (L + 1));
        double *dpd = malloc(sizeof(double) * (L + 1)), *flip = malloc(sizeof(double) * rows * L + 1);
        double *epd = malloc(sizeof(double) * rows * L + 1), *pflip = malloc(sizeof(double) * rows * L + 1);
        for (int h = 0; h < c->A; h++) {
            const int block = b * c->A + h;
            const size_t hd = (size_t)h * d;
            for (int i = 0; i < rows; i++) {
                const float *g = P->dctx_op + (row0 + i) * H + hd, *p = probs + (size_t)block * T * T + (size_t)i * L;
                double dot = 0, dot_abs = 0, ddot = 0;
                const double *ep = tol_p && f > 0 ? tol_p + (size_t)block * T * T + (size_t)i * L : NULL;
                for (int j = 0; j < L; j++) {
                    const float *v = P->qkv_op + (row0 + j) * H3 + 2 * H + hd;
                    double s = 0, sa = 0;
                    for (int e = 0; e < d; e++) s += (double)g[e] * v[e], sa += fabs((double)g[e] * v[e]);
                    const bool keep = c->dropout <= 0 || host_kept(P, block, i, j);
                    const double ks = c->dropout > 0 ? P->keep_scale : 1.0;
                    dpd[j] = keep ? s * ks : 0;
                    ddpd[j] = keep ? ks * G(d) * sa + 2 * U * fabs(dpd[j]) : 0;
                    const double e = ep ? ep[j] / f : 0;
                    dot += p[j] * dpd[j], dot_abs += p[j] * fabs(dpd[j]), ddot += p[j] * ddpd[j] + e * fabs(dpd[j]);
                    const float pd = dropped(P, block, i, j, p[j]);
                    apd[(size_t)i * L + j] = fabs(half >= 0 ? host_round((HalfMode)half, pd) : pd);
                    const double ed = keep ? e * ks * (1 + 4 * U) : 0;
                    epd[(size_t)i * L + j] = ed;
                    pflip[(size_t)i * L + j] = ed > 0 && may_round_apart(half, pd, ed) ? spacing(half, pd) : 0;
                }
                ddot += G(L) * dot_abs;
                for (int j = 0; j < L; j++) {
                    const double ds = p[j] * (dpd[j] - dot) * P->scale;
                    const double e = ep ? ep[j] / f : 0;
                    ads[(size_t)i * L + j] = fabs(ds) * (half >= 0 ? 1 + ldexp(1.0, -7) : 1);
                    dds[(size_t)i * L + j] = p[j] * P->scale * (ddpd[j] + ddot) + 8 * U * fabs(ds) +
                                             e * fabs(dpd[j] - dot) * P->scale * (1 + 4 * U);
                    flip[(size_t)i * L + j] = ds != 0 ? spacing(half, ds) : 0;
                }
                for (int e = 0; e < d; e++) {   /* dQ */
                    double sum_abs = 0, smooth = 0, flips = 0;
                    for (int j = 0; j < L; j++) {
                        const double k = fabs(P->qkv_op[(row0 + j) * H3 + H + hd + e]);
                        sum_abs += ads[(size_t)i * L + j] * k, smooth += dds[(size_t)i * L + j] * k;
                        flips += flip[(size_t)i * L + j] * k;
                    }
                    const size_t o = (row0 + i) * H3 + hd + e;
                    smooth_tol[o] = f * (G(L) * sum_abs + smooth);
                    tol[o] = smooth_tol[o] + f * flips;
                }
            }
            for (int j = 0; j < rows; j++)   /* dK, dV */
                for (int e = 0; e < d; e++) {
                    double k_abs = 0, k_smooth = 0, k_flips = 0, v_abs = 0, v_smooth = 0, v_flips = 0;
                    for (int i = 0; j < L && i < rows; i++) {
                        const double q = fabs(P->qkv_op[(row0 + i) * H3 + hd + e]);
                        const double g = fabs(P->dctx_op[(row0 + i) * H + hd + e]);
                        k_abs += ads[(size_t)i * L + j] * q, k_smooth += dds[(size_t)i * L + j] * q;
                        k_flips += flip[(size_t)i * L + j] * q;
                        v_abs += apd[(size_t)i * L + j] * g;
                        v_smooth += epd[(size_t)i * L + j] * g, v_flips += pflip[(size_t)i * L + j] * g;
                    }
                    const size_t at_k = (row0 + j) * H3 + H + hd + e, at_v = at_k + H;
                    smooth_tol[at_k] = f * (G(rows) * k_abs + k_smooth);
                    tol[at_k] = smooth_tol[at_k] + f * k_flips;
                    smooth_tol[at_v] = f * (G(rows) * v_abs + v_smooth);
                    tol[at_v] = smooth_tol[at_v] + f * v_flips;
                }
        }
        free(ads), free(dds), free(apd), free(ddpd), free(dpd), free(flip), free(epd), free(pflip);
    }
}

/* |got - want| <= tol element by element (NaN must meet NaN). Prints how many differ, the
 * first with its row and column (cols per row), and the worst error over its tolerance;
 * *worst gets that ratio (0 / 0 counts as 0). */
static bool within(const char *what, const float *want, const float *got, const double *tol, size_t n, int cols,
                   double *worst) {
    size_t bad = 0, first = 0, worst_at = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double w = want[i], g = got[i], err = fabs(g - w);
        bool ok;
        if (isnan(w) || isnan(g)) ok = isnan(w) && isnan(g);
        else ok = err <= tol[i];
        const double ratio = isnan(err) ? (ok ? 0 : INFINITY) : err == 0 ? 0 : tol[i] > 0 ? err / tol[i] : INFINITY;
        if (ratio > *worst) *worst = ratio, worst_at = i;
        if (!ok && bad++ == 0) first = i;
    }
    if (bad)
        printf("    %s: %zu of %zu outside; first [%zu, %zu]: cpu %.9g cuda %.9g tol %.3g; worst err/tol %.3g at "
               "[%zu, %zu]: cpu %.9g cuda %.9g\n", what, bad, n, first / cols, first % cols, want[first], got[first],
               tol[first], *worst, worst_at / cols, worst_at % cols, want[worst_at], got[worst_at]);
    return bad == 0;
}

/* The fraction of elements further apart than the smooth (flip-free) bound. */
static double beyond(const float *want, const float *got, const double *smooth, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += !(fabs((double)got[i] - want[i]) <= smooth[i]);
    return n ? (double)k / n : 0;
}

static float *filled(size_t n, float value) {
    float *x = malloc(sizeof(float) * (n + 1));
    for (size_t i = 0; i < n; i++) x[i] = value;
    return x;
}

/* The GPU's forward and backward on one set of arguments; outputs prefilled with 7. In 16 bits
 * the forward (k_attention_forward_to) also writes ctx16, prefilled with 0x7777: ctx16_ok says
 * whether each sequence's rows there are the GPU's ctx rounded as the CPU rounds (k_to_half) and
 * every other row untouched. */
/* keeps_probs: k_attention_keeps_probs (else probs holds the backend's own state, not compared) */
/* state_ok: state_within_its_floats */
typedef struct { float *ctx, *probs, *dqkv, *ctx_without_probs; bool ctx16_ok, keeps_probs, state_ok; } GpuOut;

static bool ctx16_is_ctx_rounded(const Problem *P, const AttentionArgs *ga, const float *ctx, const uint16_t *got16) {
    const size_t H = (size_t)P->H, ng = (size_t)P->N * H;
    uint16_t *want = malloc(sizeof(uint16_t) * ng);
    for (size_t i = 0; i < ng; i++) want[i] = 0x7777;   /* then each sequence's rows */
    for (int b = 0; b < ga->B; b++) {
        const size_t row = ga->seq_row ? (size_t)ga->seq_row[b] : (size_t)b * ga->T;
        const int rows = ga->seq_rows ? ga->seq_rows[b] : ga->T;
        k_to_half(ga->half_mode, want + row * H, ctx + row * H, (long)(rows * H));
    }
    const bool ok = cuda_same("GPU ctx16 vs its ctx rounded (sequences' rows), others untouched", want, got16,
                              sizeof(uint16_t) * ng);
    free(want);
    return ok;
}

/* Which device buffers a case skews: the fp32 ones and ctx16, the 16-bit QKV (the fused kernels
 * then move them a value at a time). */
enum { SKEW_FLOATS = 1, SKEW_QKV16 = 2 };

/* A device copy of host's bytes, one element of elem bytes past the allocation's start when
 * skewed (release it with skewed_release). */
static void *skewed_copy_in(const void *host, size_t bytes, size_t elem, bool skewed) {
    const size_t pad = skewed ? elem : 0;
    char *staged = malloc(bytes + pad);
    memset(staged, 0x77, pad);
    memcpy(staged + pad, host, bytes);
    char *dev = cuda_copy_in(staged, bytes + pad);
    free(staged);
    return dev + pad;
}
static void skewed_release(void *dev, size_t elem, bool skewed) { cuda_release((char *)dev - (skewed ? elem : 0)); }

/* Floats past the probabilities' B A T T that the forward must leave alone too */
enum { PROBS_GUARD = 64 };

/* Whether the forward left every float of probs from k_attention_state_floats' count on (through
 * PROBS_GUARD past B A T T) as they were, and the count covers what it keeps. */
static bool state_within_its_floats(const float *probs, size_t state, size_t np, bool keeps_probs) {
    size_t touched = 0;
    for (size_t i = state; i < np + PROBS_GUARD; i++) touched += probs[i] != 7.0f;
    if (touched || (keeps_probs && state < np))
        printf("    the forward's state: %zu floats said (of %zu), %zu written past them%s\n", state, np, touched,
               keeps_probs && state < np ? ", too few for the probabilities kept" : "");
    return !touched && !(keeps_probs && state < np);
}

static GpuOut gpu_run(const Problem *P, const AttentionArgs *ga, const float *qkv_host, const float *probs_cpu) {
    const size_t nq = (size_t)P->N * 3 * P->H, ng = (size_t)P->N * P->H, np = (size_t)P->c.B * P->c.A * P->c.T * P->c.T;
    const bool sk = P->skewed & SKEW_FLOATS;
    const size_t F = sizeof(float), state = CUDA_FN(k_attention_state_floats)(ga);
    float *seven_q = filled(nq, 7.0f), *seven_g = filled(ng, 7.0f), *zeros = filled(np + PROBS_GUARD, 7.0f);
    for (size_t i = 0; i < state && i < np; i++) zeros[i] = 0.0f;   /* sevens from the state's end on */
    float *qkv = skewed_copy_in(qkv_host, F * nq, F, sk), *dctx = skewed_copy_in(P->dctx, F * ng, F, sk);
    float *ctx = skewed_copy_in(seven_g, F * ng, F, sk), *probs = skewed_copy_in(zeros, F * (np + PROBS_GUARD), F, sk);
    float *dqkv = skewed_copy_in(seven_q, F * nq, F, sk), *cpu_probs = skewed_copy_in(probs_cpu, F * np, F, sk);
    GpuOut o = {.ctx16_ok = true, .keeps_probs = CUDA_FN(k_attention_keeps_probs)(ga)};
    if (ga->half) {
        uint16_t *fill16 = malloc(sizeof(uint16_t) * ng), *got16 = malloc(sizeof(uint16_t) * ng);
        for (size_t i = 0; i < ng; i++) fill16[i] = 0x7777;
        uint16_t *ctx16 = skewed_copy_in(fill16, sizeof(uint16_t) * ng, sizeof(uint16_t), sk);
        CUDA_FN(k_attention_forward_to)(ctx, ctx16, probs, qkv, ga);
        o.ctx = cuda_copy_out(ctx, ng);
        CUDA_FN(k_download)(got16, ctx16, sizeof(uint16_t) * ng);
        o.ctx16_ok = ctx16_is_ctx_rounded(P, ga, o.ctx, got16);
        skewed_release(ctx16, sizeof(uint16_t), sk), free(fill16), free(got16);
    } else {
        CUDA_FN(k_attention_forward)(ctx, probs, qkv, ga);
        o.ctx = cuda_copy_out(ctx, ng);
    }
    o.probs = cuda_copy_out(probs, np + PROBS_GUARD);
    o.state_ok = state_within_its_floats(o.probs, state, np, o.keeps_probs);
    if (P->c.probs_null) {
        CUDA_FN(k_upload)(ctx, seven_g, F * ng);
        CUDA_FN(k_attention_forward)(ctx, NULL, qkv, ga);
        o.ctx_without_probs = cuda_copy_out(ctx, ng);
    }
    /* from the CPU's probabilities (the backward alone), or from the forward's own state */
    CUDA_FN(k_attention_backward)(dqkv, dctx, qkv, o.keeps_probs ? cpu_probs : probs, ga);
    o.dqkv = cuda_copy_out(dqkv, nq);
    skewed_release(qkv, F, sk), skewed_release(dctx, F, sk), skewed_release(ctx, F, sk);
    skewed_release(probs, F, sk), skewed_release(dqkv, F, sk), skewed_release(cpu_probs, F, sk);
    free(seven_q), free(seven_g), free(zeros);
    return o;
}

static void free_gpu_out(GpuOut *o) { free(o->ctx), free(o->probs), free(o->dqkv), free(o->ctx_without_probs); }

/* skewed (SKEW_*): device buffers one element past their allocations' alignment, where the
 * fused kernels' 16-byte accesses must not go */
static void run_case_on(const Case *c, uint64_t seed, int skewed) {
    char name[160];
    describe(c, name, sizeof name);
    if (skewed & SKEW_FLOATS) strncat(name, " skewed-fp32", sizeof name - strlen(name) - 1);
    if (skewed & SKEW_QKV16) strncat(name, " skewed-qkv16", sizeof name - strlen(name) - 1);
    Problem P;
    make_problem(&P, c, seed);
    P.skewed = skewed;
    const int T = c->T, H = P.H;
    const size_t nq = (size_t)P.N * 3 * H, ng = (size_t)P.N * H, np = (size_t)c->B * c->A * T * T;

    /* the CPU: forward with probabilities (and without), backward on them */
    float *ctx = filled(ng, 7.0f), *probs = filled(np, 0.0f), *dqkv = filled(nq, 7.0f), *ctx_np = NULL;
    k_attention_forward(ctx, probs, P.qkv, &P.args);
    if (c->probs_null) {
        ctx_np = filled(ng, 7.0f);
        k_attention_forward(ctx_np, NULL, P.qkv, &P.args);
    }
    k_attention_backward(dqkv, P.dctx, P.qkv, probs, &P.args);

    /* the GPU: with the 16-bit activation given, qkv (not to be read) holds NaN */
    AttentionArgs ga = P.args;
    ga.half_mode = c->half >= 0 ? (HalfMode)c->half : HALF_BF16;
    uint16_t *qkv16_dev = NULL;
    float *nan_qkv = NULL;
    if (c->qkv16) {
        qkv16_dev = skewed_copy_in(P.qkv16, sizeof(uint16_t) * nq, sizeof(uint16_t), skewed & SKEW_QKV16);
        ga.qkv16 = qkv16_dev;
        nan_qkv = filled(nq, NAN);
    }
    GpuOut g = gpu_run(&P, &ga, c->qkv16 ? nan_qkv : P.qkv, probs);

    double *tol_ctx = calloc(ng, sizeof(double)), *tol_probs = calloc(np, sizeof(double));
    double *tol_dqkv = calloc(nq, sizeof(double)), *smooth_ctx = calloc(ng, sizeof(double));
    double *smooth_dqkv = calloc(nq, sizeof(double));
    forward_tolerances(&P, probs, tol_ctx, smooth_ctx, tol_probs);
    backward_tolerances(&P, probs, g.keeps_probs ? NULL : tol_probs, tol_dqkv, smooth_dqkv);
    double w_ctx, w_probs, w_dqkv, w_np = 0;
    bool ok = within("ctx", ctx, g.ctx, tol_ctx, ng, H, &w_ctx) && g.ctx16_ok && g.state_ok;
    w_probs = 0;
    if (g.keeps_probs) ok &= within("probs", probs, g.probs, tol_probs, np, T, &w_probs);
    ok &= within("dqkv", dqkv, g.dqkv, tol_dqkv, nq, 3 * H, &w_dqkv);
    if (c->probs_null) {
        ok &= within("ctx (probs NULL)", ctx_np, g.ctx_without_probs, tol_ctx, ng, H, &w_np);
        ok &= cuda_same("GPU ctx without probs vs with", g.ctx, g.ctx_without_probs, sizeof(float) * ng);
    }
    /* the GPU rounding qkv itself must give the same bits (on either path: both take the same one) */
    if (c->qkv16) {
        AttentionArgs gb = ga;
        gb.qkv16 = NULL;
        GpuOut r = gpu_run(&P, &gb, P.qkv, probs);
        ok &= cuda_same("GPU ctx, qkv16 given vs rounded on the GPU", g.ctx, r.ctx, sizeof(float) * ng);
        ok &= cuda_same("GPU probs, qkv16 given vs rounded on the GPU", g.probs, r.probs, sizeof(float) * np);
        ok &= cuda_same("GPU dqkv, qkv16 given vs rounded on the GPU", g.dqkv, r.dqkv, sizeof(float) * nq);
        free_gpu_out(&r);
    }
    const double beyond_ctx = beyond(ctx, g.ctx, smooth_ctx, ng), beyond_dqkv = beyond(dqkv, g.dqkv, smooth_dqkv, nq);
    if (c->half >= 0 && (beyond_ctx > MAX_BEYOND_SMOOTH || beyond_dqkv > MAX_BEYOND_SMOOTH)) {
        printf("    beyond the bound without 16-bit rounding flips: ctx %.3g dqkv %.3g of the elements (at most %g)\n",
               beyond_ctx, beyond_dqkv, MAX_BEYOND_SMOOTH);
        ok = false;
    }
    printf("    %s %s: worst err/tol ctx %.3g probs %.3g dqkv %.3g; beyond flip-free bound ctx %.3g dqkv %.3g%s\n",
           ok ? "ok  " : "FAIL", name, w_ctx, w_probs, w_dqkv, beyond_ctx, beyond_dqkv,
           c->half == HALF_BF16 && P.args.half_mode != HALF_BF16 ? " (CPU bf16 emulated)" : "");
    CHECKF(ok, "%s", name);

    free_gpu_out(&g);
    if (qkv16_dev) skewed_release(qkv16_dev, sizeof(uint16_t), skewed & SKEW_QKV16);
    free(nan_qkv), free(ctx), free(probs), free(dqkv), free(ctx_np), free(tol_ctx), free(tol_probs), free(tol_dqkv);
    free(smooth_ctx), free(smooth_dqkv);
    free_problem(&P);
}

/* fp32: every size, layout and option at least once. */
static const Case FP32_CASES[] = {
    {1, 1, 1, 8, false, false, false, 0.0f, -1, false, false},
    {2, 7, 2, 8, true, false, false, 0.0f, -1, false, false},
    {3, 7, 1, 64, true, true, false, 0.0f, -1, false, false},
    {1, 128, 2, 64, false, false, false, 0.0f, -1, false, false},
    {3, 128, 12, 64, true, true, false, 0.0f, -1, false, false},
    {2, 200, 2, 8, true, true, true, 0.0f, -1, false, false},
    {3, 200, 12, 64, true, true, true, 0.1f, -1, false, false},
    {2, 7, 12, 8, false, false, false, 0.1f, -1, false, false},
    {1, 1, 2, 64, false, false, false, 0.1f, -1, false, false},
    {3, 1, 1, 8, true, false, true, 0.0f, -1, false, false},
    {2, 128, 1, 8, true, false, false, 0.0f, -1, false, true},
    {3, 200, 2, 64, true, true, true, 0.0f, -1, false, true},
    {2, 128, 2, 64, true, false, true, 0.1f, -1, false, false},
    {2, 512, 16, 64, true, true, true, 0.1f, -1, false, false},   /* BERT-large's heads, long sequences */
};

/* Each 16-bit mode, with and without the 16-bit activation, on these. */
static const Case HALF_SHAPES[] = {
    {3, 1, 2, 8, false, false, false, 0.1f, 0, false, false},    /* T = 1: exact, the dropped p rounded */
    {2, 7, 2, 8, true, true, false, 0.0f, 0, false, false},
    {3, 128, 2, 64, true, true, true, 0.1f, 0, false, false},
    {2, 200, 12, 64, false, false, false, 0.0f, 0, false, true},
};

static void run_case(const Case *c, uint64_t seed) { run_case_on(c, seed, 0); }

static void test_attention_fp32(void) {
    for (size_t k = 0; k < sizeof FP32_CASES / sizeof FP32_CASES[0]; k++) run_case(&FP32_CASES[k], 100 + k);
}

static void test_attention_half(void) {
    static const HalfMode modes[] = {HALF_BF16, HALF_BF16_EMULATED, HALF_FP16};
    for (int m = 0; m < 3; m++)
        for (int given = 0; given < 2; given++)
            for (size_t k = 0; k < sizeof HALF_SHAPES / sizeof HALF_SHAPES[0]; k++) {
                Case c = HALF_SHAPES[k];
                c.half = modes[m], c.qkv16 = given;
                run_case(&c, 200 + 10 * k + 3 * m + given);
            }
    /* long sequences and BERT-large's heads once per 16-bit format (the CPU's reference and the
     * tolerances cost O(B A T^2 d) on the host) */
    for (int m = 0; m < 3; m += 2) {
        const Case c = {2, 512, 16, 64, true, true, true, 0.1f, modes[m], m == 0, false};
        run_case(&c, 300 + m);
    }
}

/* The fused 16-bit kernels' tiling (BERT_CUDA_ATTENTION=fused: tiles of 32 query rows, 64 keys,
 * 16 x 16 tensor-core fragments; d a multiple of 16 up to 128), with the 16-bit activation given
 * (and, in run_case_on, not), in each 16-bit mode: sequences shorter than a tile, across tile edges and
 * kv_len below 16; heads of 16, 32, 48 and 128 (the largest they take). The path without the
 * switch runs them too, held to the same bounds; T = 512 (their largest shared memory) is
 * test_attention_half's bf16 case. */
static const Case FUSED_SHAPES[] = {
    {1, 17, 1, 16, false, false, false, 0.0f, 0, true, false},
    {3, 17, 2, 16, true, true, true, 0.0f, 0, true, true},      /* kv_len 5 in sequence 2 */
    {3, 33, 2, 32, true, true, true, 0.1f, 0, true, false},
    {2, 65, 3, 128, true, false, true, 0.1f, 0, true, false},
    {2, 96, 2, 48, true, true, false, 0.0f, 0, true, false},
    {3, 129, 1, 16, true, true, true, 0.1f, 0, true, false},
};

static void test_attention_fused_shapes(void) {
    static const HalfMode modes[] = {HALF_BF16, HALF_BF16_EMULATED, HALF_FP16};
    for (int m = 0; m < 3; m++)
        for (size_t k = 0; k < sizeof FUSED_SHAPES / sizeof FUSED_SHAPES[0]; k++) {
            Case c = FUSED_SHAPES[k];
            c.half = modes[m];
            run_case(&c, 400 + 10 * k + m);
        }
}

/* A fused shape on buffers off the 16-byte alignment (the model's views are 64-byte aligned):
 * the fp32 ones, and all (the 16-bit QKV too); the fused kernels move them a value at a time;
 * results within the CPU's bounds, no misaligned access (the emulator stops at one). */
static void test_attention_fused_skewed(void) {
    const Case c = {2, 33, 2, 32, true, true, true, 0.1f, HALF_BF16, true, false};
    run_case_on(&c, 470, SKEW_FLOATS);
    run_case_on(&c, 471, SKEW_FLOATS | SKEW_QKV16);
}

/* k_attention_state_floats' promise, by which the model sizes each layer's buffer once, at its
 * largest batch: every call within that shape (B' <= B, T' <= T) needs no more, where it needs
 * B' A T' T' floats if the probabilities are kept and 2 B' A T' where the fused path's state is
 * (that the forward writes no more than the count says is held in every case above). Over
 * lengths about the fused path's edges (1, 2, 64, 512, 513), heads it takes and heads it does not
 * (d 8, 144, 40), in fp32 and in 16 bits. */
static void test_attention_state_floats(void) {
    static const int lengths[] = {1, 2, 3, 17, 64, 65, 128, 384, 512, 513};
    static const int heads[][2] = {{2, 8}, {12, 64}, {16, 64}, {2, 128}, {1, 144}, {3, 48}, {2, 40}};
    int bad = 0, fused_shapes = 0;
    for (int half = 0; half < 2; half++)
        for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
            for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
                const int A = heads[h][0], d = heads[h][1], T = lengths[k], B = 3;
                const AttentionArgs most = {.B = B, .T = T, .A = A, .d = d, .half = half};
                const size_t said = CUDA_FN(k_attention_state_floats)(&most);
                for (int b = 1; b <= B; b++)
                    for (int t = 1; t <= T; t++) {
                        const AttentionArgs a = {.B = b, .T = t, .A = A, .d = d, .half = half};
                        const bool keeps = CUDA_FN(k_attention_keeps_probs)(&a);
                        const size_t need = keeps ? (size_t)b * A * t * t : 2 * (size_t)b * A * t;
                        const size_t own = CUDA_FN(k_attention_state_floats)(&a);
                        fused_shapes += !keeps;
                        if (own >= need && said >= own) continue;
                        if (bad++ < 5)
                            printf("    %s A=%d d=%d: B=%d T=%d needs %zu floats (%s), said %zu, at B=%d T=%d %zu\n",
                                   half ? "16-bit" : "fp32", A, d, b, t, need, keeps ? "probabilities" : "state",
                                   own, B, T, said);
                    }
            }
    printf("    %d shapes short of their state; %d took the backend's own state\n", bad, fused_shapes);
    CHECK(bad == 0);
}

int main(int argc, char **argv) {
    (void)cuda_close;   /* cuda_test.h's scalar-tolerance comparison: these take per-element tolerances */
    if (!cuda_open(argc, argv)) return test_summary();
    RUN_TEST(test_attention_state_floats);
    RUN_TEST(test_attention_fp32);
    RUN_TEST(test_attention_half);
    RUN_TEST(test_attention_fused_shapes);
    RUN_TEST(test_attention_fused_skewed);
    return test_summary();
}
