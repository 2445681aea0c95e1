/* The CUDA backend's row kernels (src/kernels/cuda/layers_rows.cu) against the CPU backend's
 * (src/kernels/cpu/layers.c) on the same inputs. Bit for bit wherever the two do the same float
 * operations in the same order: embeddings forward and backward (every table row's gradient
 * summed in row order on both), squared error (float64 sums in element order on both), the
 * cross-entropy backward and mean, and all the row moves. The softmax is the exception: the CPU
 * sums its exponentials over vector lanes (GCC's order) with libmvec's expf, the GPU over a block
 * with CUDA's expf; it is checked against a float64 reference with a bound derived from the
 * GPU's arithmetic (tight enough to catch one missing term of a 30522-wide row) and against the
 * CPU with the sum of both backends' bounds. Skips, passing, without a GPU. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"

#define U F32_UNIT_ROUNDOFF   /* 2^-24 */

static int32_t *random_ints(int n, uint64_t seed, int range) {
    int32_t *x = malloc(sizeof(int32_t) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) x[i] = (int32_t)(rng_bits32(seed, (uint32_t)i) % (uint32_t)range);
    return x;
}

/* Whether the device floats equal the host floats bit for bit; where not, how many differ, the
 * first few (index, CPU value, CUDA value) and the largest difference, so that one GPU run
 * shows the pattern of a failure (a row, a column, everything). */
static bool device_same(const char *what, const float *host, const float *device, size_t n) {
    float *back = cuda_copy_out(device, n);
    const bool same = cuda_same(what, host, back, sizeof(float) * n);
    if (!same) {
        size_t bad = 0, worst_at = 0;
        double worst = -1;
        for (size_t i = 0; i < n; i++) {
            if (memcmp(&host[i], &back[i], sizeof(float)) == 0) continue;
            if (bad++ < 4) printf("      [%zu] cpu %.9g cuda %.9g\n", i, host[i], back[i]);
            const double d = fabs((double)host[i] - back[i]);
            if (!(d <= worst)) worst = d, worst_at = i;
        }
        printf("      %zu of %zu floats differ; largest |diff| %.3g at %zu\n", bad, n, worst, worst_at);
    }
    free(back);
    return same;
}

/* ---------------------------------------------------------------- embeddings */

typedef struct { int B, T, C, vocab, types; } EmbShape;

static void check_embeddings(EmbShape s, uint64_t seed) {
    const int N = s.B * s.T, C = s.C;
    const size_t nw = (size_t)s.vocab * C, np = (size_t)s.T * C, nt = (size_t)s.types * C, no = (size_t)N * C;
    /* ids from a few values (heavy repeats: the same word row gets many gradients, summed in
     * row order on both) plus some over the whole vocabulary, the last id used too */
    int32_t *ids = random_ints(N, seed, s.vocab), *types = random_ints(N, seed + 1, s.types);
    for (int n = 0; n < N; n++)
        if (n % 3 == 0) ids[n] = ids[n] % 4;
    ids[N - 1] = s.vocab - 1;
    float *word = cuda_test_values(nw, seed + 2, 1.0f), *pos = cuda_test_values(np, seed + 3, 1.0f);
    float *type = cuda_test_values(nt, seed + 4, 1.0f), *out = malloc(sizeof(float) * (no + 1));
    float *d_word = cuda_copy_in(word, sizeof(float) * nw), *d_pos = cuda_copy_in(pos, sizeof(float) * np);
    float *d_type = cuda_copy_in(type, sizeof(float) * nt), *d_out = CUDA_FN(k_alloc)(sizeof(float) * no);
    k_embeddings_forward(out, ids, types, word, pos, type, s.B, s.T, C);
    CUDA_FN(k_embeddings_forward)(d_out, ids, types, d_word, d_pos, d_type, s.B, s.T, C);
    CHECKF(device_same("embeddings forward", out, d_out, no), "B %d T %d C %d: embeddings forward differs", s.B, s.T, C);

    /* backward accumulates: the tables start non-zero (the word table as it came, so rows no id
     * names must be left alone) */
    float *dout = cuda_test_values(no, seed + 5, 0.5f), *d_dout = cuda_copy_in(dout, sizeof(float) * no);
    k_embeddings_backward(word, pos, type, dout, ids, types, s.B, s.T, C);
    CUDA_FN(k_embeddings_backward)(d_word, d_pos, d_type, d_dout, ids, types, s.B, s.T, C);
    CHECKF(device_same("dword", word, d_word, nw), "B %d T %d C %d: word gradient differs", s.B, s.T, C);
    CHECKF(device_same("dpos", pos, d_pos, np), "B %d T %d C %d: position gradient differs", s.B, s.T, C);
    CHECKF(device_same("dtype", type, d_type, nt), "B %d T %d C %d: type gradient differs", s.B, s.T, C);
    cuda_release(d_word), cuda_release(d_pos), cuda_release(d_type), cuda_release(d_out), cuda_release(d_dout);
    free(ids), free(types), free(word), free(pos), free(type), free(out), free(dout);
}

static void test_embeddings(void) {
    /* the last two: lists longer than the 64 rows the GPU fetches ahead (a type's, a frequent
     * id's), and 40 sequences (the position gradient's 16 ahead) */
    const EmbShape shapes[] = {{1, 1, 1, 1, 1}, {1, 5, 1, 3, 2}, {2, 3, 17, 7, 2}, {3, 50, 768, 2000, 2},
                               {2, 64, 33, 30522, 3}, {8, 128, 768, 30522, 2}, {40, 16, 70, 100, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_embeddings(shapes[i], 100 + 10 * i);
}

/* ---------------------------------------------------------------- cross-entropy */

/* The float64 reference of one row, from the floats both backends compute first: the maximum
 * mx (exact) and d_j = fl(x_j - mx) (one float subtraction on both); e_j = exp(d_j), S = sum e_j,
 * p_j = e_j / S and loss = log S + mx - x[label], all in float64 (error ~1e-16, negligible). */
static double reference_row(double *p, const float *x, int V, int label, float *mx_out) {
    float mx = -INFINITY;
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    double S = 0;
    for (int j = 0; j < V; j++) {
        const float d = x[j] - mx;
        p[j] = exp((double)d);
        S += p[j];
    }
    for (int j = 0; j < V; j++) p[j] /= S;
    *mx_out = mx;
    return log(S) + mx - x[label];
}

/* Error bounds, first order in u = 2^-24, for a row of V values.
 * GPU (one block per row, at least min(V, 256) threads): each expf within 2 ulp (CUDA's
 * documented bound; <= 4u relative); the float sum has a serial depth of at most ceil(V/256)
 * per thread + 5 butterfly levels + at most 32 warps combined in order, D = ceil(V/256) + 37,
 * so S' = S (1 + eta), |eta| <= (D + 4) u (all terms positive: Higham's gamma_D); 1/S' and
 * e' * (1/S') round once each. So |p' - p| <= (D + 10) u p; two more u of slack: (D + 12) u.
 * The loss: log S' = log S + eta (|eta| as above), logf within 1 ulp (2u |log S|), then two
 * roundings of sums: (D + 6) u + 4 u (|log S| + |mx| + |x_label|) absolute.
 * CPU: libmvec's expf, allowed 4 ulp here (8u), and a sum whose order GCC's vectoriser picks:
 * any order, depth <= V. The same derivation with D = V and 8u for the exponentials. */
static double gpu_depth(int V) { return ceil(V / 256.0) + 37; }
static double prob_rel_tol(double depth, double exp_u) { return (depth + 2 * exp_u + 4) * U; }
static double loss_abs_tol(double depth, double exp_u, double log_s, float mx, float x_label) {
    return (depth + exp_u + 2) * U + 4 * U * (fabs(log_s) + fabs(mx) + fabs(x_label));
}

typedef struct { int M, V, rows; bool index; float scale; } XentShape;   /* rows: logits rows when index */

static void check_xent(XentShape s, uint64_t seed) {
    const int M = s.M, V = s.V, L = s.index ? s.rows : M;
    const size_t n_logits = (size_t)L * V, n_probs = (size_t)M * V;
    float *logits = cuda_test_values(n_logits, seed, s.scale);
    if (V > 3) logits[(size_t)(L - 1) * V + V / 2] = 30.0f;   /* an outlier: exp(x) alone would overflow at 89 */
    int32_t *labels = random_ints(M, seed + 1, V), *row_index = s.index ? random_ints(M, seed + 2, L) : NULL;
    if (s.index && M > 1) row_index[1] = row_index[0];   /* two compact rows reading one logits row */
    if (s.index) row_index[M - 1] = L - 1;
    float *probs = malloc(sizeof(float) * (n_probs + 1)), *row_loss = malloc(sizeof(float) * (size_t)(M + 1)), loss;
    float *d_logits = cuda_copy_in(logits, sizeof(float) * n_logits);
    float *d_probs = CUDA_FN(k_alloc)(sizeof(float) * n_probs), *d_row_loss = CUDA_FN(k_alloc)(sizeof(float) * M);
    float *d_loss = CUDA_FN(k_alloc)(sizeof(float));
    k_xent_forward(&loss, row_loss, probs, logits, row_index, labels, M, V);
    CUDA_FN(k_xent_forward)(d_loss, d_row_loss, d_probs, d_logits, row_index, labels, M, V);
    float *g_probs = cuda_copy_out(d_probs, n_probs), *g_row_loss = cuda_copy_out(d_row_loss, M);
    const float g_loss = CUDA_FN(k_read_scalar)(d_loss);

    /* per row: the GPU against the float64 reference (tight) and against the CPU (both bounds) */
    double *ref = malloc(sizeof(double) * (size_t)V);
    const double D = gpu_depth(V);
    int bad_rows = 0;
    double worst_loss_diff = 0, cpu_loss_tol = 0;
    for (int k = 0; k < M; k++) {
        const float *x = logits + (size_t)(row_index ? row_index[k] : k) * V;
        float mx;
        const double ref_loss = reference_row(ref, x, V, labels[k], &mx), log_s = ref_loss - mx + x[labels[k]];
        const float *gp = g_probs + (size_t)k * V, *cp = probs + (size_t)k * V;
        int bad = 0, first = -1;
        for (int j = 0; j < V; j++) {
            const bool ok_ref = fabs(gp[j] - ref[j]) <= prob_rel_tol(D, 4) * ref[j] + 1e-37;
            const bool ok_cpu = fabs(gp[j] - cp[j]) <= (prob_rel_tol(D, 4) + prob_rel_tol(V, 8)) * ref[j] + 1e-37;
            if (!(ok_ref && ok_cpu) && bad++ == 0) first = j;
        }
        if (bad && bad_rows++ < 5)
            printf("    M %d V %d row %d: %d probabilities out of bounds; first %d: ref %.9g cpu %.9g cuda %.9g "
                   "(rel tol %.3g vs ref)\n", M, V, k, bad, first, ref[first], cp[first], gp[first], prob_rel_tol(D, 4));
        const double tol_ref = loss_abs_tol(D, 4, log_s, mx, x[labels[k]]);
        const double tol_cpu = tol_ref + loss_abs_tol(V, 8, log_s, mx, x[labels[k]]);
        const double diff_ref = fabs(g_row_loss[k] - ref_loss), diff_cpu = fabs(g_row_loss[k] - row_loss[k]);
        if (diff_ref > tol_ref || diff_cpu > tol_cpu) {
            if (bad_rows++ < 5)
                printf("    M %d V %d row %d: loss ref %.9g cpu %.9g cuda %.9g (tol %.3g vs ref, %.3g vs cpu)\n", M, V,
                       k, ref_loss, row_loss[k], g_row_loss[k], tol_ref, tol_cpu);
        }
        worst_loss_diff = diff_cpu > worst_loss_diff ? diff_cpu : worst_loss_diff;
        cpu_loss_tol = tol_cpu > cpu_loss_tol ? tol_cpu : cpu_loss_tol;
    }
    CHECKF(bad_rows == 0, "M %d V %d%s: %d rows out of bounds", M, V, s.index ? " (row_index)" : "", bad_rows);

    /* the mean: the GPU's own row losses summed in float64 in row order, exactly as the CPU sums
     * its own; against the CPU, within the worst row's bound plus the final rounding */
    double total = 0;
    for (int k = 0; k < M; k++) total += g_row_loss[k];
    const float mean_of_gpu_rows = (float)(total / M);
    CHECKF(memcmp(&g_loss, &mean_of_gpu_rows, sizeof(float)) == 0,
           "M %d V %d: mean loss %.9g, not the float64 row-order mean of its rows %.9g", M, V, g_loss, mean_of_gpu_rows);
    CHECKF(cuda_close("mean loss", &loss, &g_loss, 1, cpu_loss_tol, 2 * U),
           "M %d V %d: mean loss differs (worst row diff %.3g)", M, V, worst_loss_diff);

    /* backward from the same probabilities (the GPU's, given to both): the same two roundings */
    float *d_back = cuda_copy_in(g_probs, sizeof(float) * n_probs);
    k_xent_backward(g_probs, labels, M, V, s.index ? 0.5f / M : 1.0f / M);
    CUDA_FN(k_xent_backward)(d_back, labels, M, V, s.index ? 0.5f / M : 1.0f / M);
    CHECKF(device_same("dlogits", g_probs, d_back, n_probs), "M %d V %d: xent backward differs", M, V);

    cuda_release(d_logits), cuda_release(d_probs), cuda_release(d_row_loss), cuda_release(d_loss), cuda_release(d_back);
    free(logits), free(labels), free(row_index), free(probs), free(row_loss), free(g_probs), free(g_row_loss), free(ref);
}

static void test_xent(void) {
    const XentShape shapes[] = {
        {1, 2, 0, false, 1.0f},       {5, 2, 0, false, 4.0f},       {3, 1, 0, false, 1.0f},
        {7, 33, 0, false, 4.0f},      {1, 1000, 0, false, 2.0f},    {9, 1024, 0, false, 4.0f},
        {13, 384, 40, true, 4.0f},    {1, 384, 1, true, 1.0f},      {20, 30522, 0, false, 4.0f},
        {6, 30522, 11, true, 1.0f},   {300, 257, 0, false, 8.0f},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_xent(shapes[i], 300 + 10 * i);
}

/* ---------------------------------------------------------------- squared error */

static void test_mse(void) {
    const int sizes[] = {1, 2, 7, 32, 1000, 100003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int n = sizes[i];
        float *pred = cuda_test_values(n, 500 + i, 2.0f), *target = cuda_test_values(n, 600 + i, 1.0f);
        float *dpred = malloc(sizeof(float) * (size_t)(n + 1)), loss;
        float *d_pred = cuda_copy_in(pred, sizeof(float) * n), *d_target = cuda_copy_in(target, sizeof(float) * n);
        float *d_dpred = CUDA_FN(k_alloc)(sizeof(float) * n), *d_loss = CUDA_FN(k_alloc)(sizeof(float));
        k_mse_forward(&loss, pred, target, n);
        CUDA_FN(k_mse_forward)(d_loss, d_pred, d_target, n);
        const float g_loss = CUDA_FN(k_read_scalar)(d_loss);
        CHECKF(memcmp(&loss, &g_loss, sizeof loss) == 0, "n %d: mse loss cpu %.9g cuda %.9g", n, loss, g_loss);
        k_mse_backward(dpred, pred, target, n, 0.37f / n);
        CUDA_FN(k_mse_backward)(d_dpred, d_pred, d_target, n, 0.37f / n);
        CHECKF(device_same("dpred", dpred, d_dpred, n), "n %d: mse backward differs", n);
        /* dpred may be pred (element-wise) */
        k_mse_backward(pred, pred, target, n, 0.5f);
        CUDA_FN(k_mse_backward)(d_pred, d_pred, d_target, n, 0.5f);
        CHECKF(device_same("dpred in place", pred, d_pred, n), "n %d: mse backward in place differs", n);
        cuda_release(d_pred), cuda_release(d_target), cuda_release(d_dpred), cuda_release(d_loss);
        free(pred), free(target), free(dpred);
    }
}

/* ---------------------------------------------------------------- sigmoid cross-entropy */

/* The device's exp/log1p/expf may differ from libm's in the last bit: bounds of a few float
 * ulps (the loss is a float64 sum rounded once; each gradient one expf and a division). */
static void test_bce(void) {
    const int sizes[] = {1, 2, 7, 32, 1000, 100003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int n = sizes[i];
        float *logits = cuda_test_values(n, 700 + i, 8.0f), *target = malloc(sizeof(float) * (size_t)n);
        for (int k = 0; k < n; k++) target[k] = (float)((k * 7 + (int)i) % 3 == 0);
        float *dlogits = malloc(sizeof(float) * (size_t)n), loss;
        float *d_logits = cuda_copy_in(logits, sizeof(float) * n), *d_target = cuda_copy_in(target, sizeof(float) * n);
        float *d_dlogits = CUDA_FN(k_alloc)(sizeof(float) * n), *d_loss = CUDA_FN(k_alloc)(sizeof(float));
        k_bce_forward(&loss, logits, target, n);
        CUDA_FN(k_bce_forward)(d_loss, d_logits, d_target, n);
        const float g_loss = CUDA_FN(k_read_scalar)(d_loss);
        CHECKF(cuda_close("bce loss", &loss, &g_loss, 1, 0, 4 * FLT_EPSILON), "n %d: bce loss differs", n);
        k_bce_backward(dlogits, logits, target, n, 0.37f / n);
        CUDA_FN(k_bce_backward)(d_dlogits, d_logits, d_target, n, 0.37f / n);
        float *back = cuda_copy_out(d_dlogits, n);
        CHECKF(cuda_close("dlogits", dlogits, back, n, 4 * FLT_EPSILON * 0.37f / n, 4 * FLT_EPSILON), "n %d: bce backward differs", n);
        cuda_release(d_logits), cuda_release(d_target), cuda_release(d_dlogits), cuda_release(d_loss);
        free(logits), free(target), free(dlogits), free(back);
    }
}

/* ---------------------------------------------------------------- rows */

static const int WIDTHS[] = {1, 17, 768};
enum { N_WIDTHS = sizeof WIDTHS / sizeof WIDTHS[0] };

/* R rows ascending from N with rows[k] >= k (a compaction's map), some gaps, sometimes none */
static int32_t *ascending_rows(int R, int N, uint64_t seed) {
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)(R + 1));
    int next = 0;
    for (int k = 0; k < R; k++) {
        const int room = (N - next) - (R - k);   /* rows that may still be skipped */
        const int skip = room > 0 ? (int)(rng_bits32(seed, (uint32_t)k) % (uint32_t)(room < 3 ? room + 1 : 3)) : 0;
        rows[k] = next + skip;
        next = rows[k] + 1;
    }
    return rows;
}

static void test_gather_rows(void) {
    for (int w = 0; w < N_WIDTHS; w++) {
        const int C = WIDTHS[w], N = 300, R = 211;
        const size_t n = (size_t)N * C;
        float *src = cuda_test_values(n, 700 + w, 1.0f), *dst = malloc(sizeof(float) * n);
        float *d_src = cuda_copy_in(src, sizeof(float) * n), *d_dst = CUDA_FN(k_alloc)(sizeof(float) * n);
        /* any rows, repeats included, into another tensor */
        int32_t *rows = random_ints(R, 710 + w, N);
        rows[0] = rows[R - 1] = N - 1;
        k_gather_rows(dst, src, rows, R, C);
        CUDA_FN(k_gather_rows)(d_dst, d_src, rows, R, C);
        CHECKF(device_same("gather", dst, d_dst, (size_t)R * C), "C %d: gather differs", C);
        /* in place, ascending (the unpadded layout's compaction), with and without gaps */
        for (int gaps = 0; gaps < 2; gaps++) {
            int32_t *up = gaps ? ascending_rows(R, N, 720 + w) : ascending_rows(R, R, 0);
            k_gather_rows(src, src, up, R, C);
            CUDA_FN(k_gather_rows)(d_src, d_src, up, R, C);
            CHECKF(device_same("gather in place", src, d_src, n), "C %d gaps %d: gather in place differs", C, gaps);
            free(up);
        }
        /* one row */
        const int32_t one = 7;
        k_gather_rows(dst, src, &one, 1, C);
        CUDA_FN(k_gather_rows)(d_dst, d_src, &one, 1, C);
        CHECKF(device_same("gather one row", dst, d_dst, (size_t)C), "C %d: gather of one row differs", C);
        cuda_release(d_src), cuda_release(d_dst), free(src), free(dst), free(rows);
    }
}

static void test_scatter_add_rows(void) {
    for (int w = 0; w < N_WIDTHS; w++) {
        const int C = WIDTHS[w], N = 130, R = 500;   /* R > N: rows repeat, several times each */
        const size_t n = (size_t)N * C, m = (size_t)R * C;
        float *dst = cuda_test_values(n, 800 + w, 1.0f), *src = cuda_test_values(m, 810 + w, 1.0f);
        int32_t *rows = random_ints(R, 820 + w, N);
        for (int k = 0; k < R; k += 5) rows[k] = 3;   /* one row named 100 times */
        float *d_dst = cuda_copy_in(dst, sizeof(float) * n), *d_src = cuda_copy_in(src, sizeof(float) * m);
        k_scatter_add_rows(dst, src, rows, R, C);
        CUDA_FN(k_scatter_add_rows)(d_dst, d_src, rows, R, C);
        CHECKF(device_same("scatter_add", dst, d_dst, n), "C %d: scatter-add differs", C);
        k_scatter_add_rows(dst, src, rows, 1, C);   /* a single row */
        CUDA_FN(k_scatter_add_rows)(d_dst, d_src, rows, 1, C);
        CHECKF(device_same("scatter_add one row", dst, d_dst, n), "C %d: scatter-add of one row differs", C);
        cuda_release(d_dst), cuda_release(d_src), free(dst), free(src), free(rows);
    }
}

static void test_scatter_rows(void) {
    for (int w = 0; w < N_WIDTHS; w++) {
        const int C = WIDTHS[w], N = 257, R = 100;
        const size_t n = (size_t)N * C;
        float *src = cuda_test_values((size_t)R * C, 900 + w, 1.0f);
        float *dst = cuda_test_values(n, 910 + w, 1.0f);   /* old contents: every row not written must be zeroed */
        float *d_src = cuda_copy_in(src, sizeof(float) * R * C), *d_dst = cuda_copy_in(dst, sizeof(float) * n);
        /* into another tensor, rows in any order with a repeat (the later k wins on the CPU) */
        int32_t *rows = random_ints(R, 920 + w, N);
        rows[R - 1] = rows[0];
        k_scatter_rows(dst, src, rows, R, N, C);
        CUDA_FN(k_scatter_rows)(d_dst, d_src, rows, R, N, C);
        CHECKF(device_same("scatter", dst, d_dst, n), "C %d: scatter differs", C);
        /* nothing to scatter: all zeros */
        k_scatter_rows(dst, src, rows, 0, N, C);
        CUDA_FN(k_scatter_rows)(d_dst, d_src, rows, 0, N, C);
        CHECKF(device_same("scatter of no rows", dst, d_dst, n), "C %d: scatter of no rows differs", C);
        /* in place, ascending: spreading compact rows back out (gather's inverse), the first
         * R rows holding the compact ones and the rest junk */
        for (int gaps = 0; gaps < 3; gaps++) {
            const int r = gaps == 2 ? N : R;   /* R == N: every row in its place, nothing to do */
            int32_t *up = ascending_rows(r, gaps ? N : r + 1, 930 + w);
            float *x = cuda_test_values(n, 940 + w + gaps, 1.0f), *d_x = cuda_copy_in(x, sizeof(float) * n);
            k_scatter_rows(x, x, up, r, N, C);
            CUDA_FN(k_scatter_rows)(d_x, d_x, up, r, N, C);
            CHECKF(device_same("scatter in place", x, d_x, n), "C %d R %d: scatter in place differs", C, r);
            cuda_release(d_x), free(x), free(up);
        }
        cuda_release(d_src), cuda_release(d_dst), free(src), free(dst), free(rows);
    }
}

static void test_plain_memory(void) {
    const long sizes[] = {1, 17, 1000, (1L << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const long n = sizes[i];
        float *a = cuda_test_values(n, 1000 + i, 1.0f), *b = cuda_test_values(n, 1010 + i, 1.0f);
        float *d_a = cuda_copy_in(a, sizeof(float) * n), *d_b = cuda_copy_in(b, sizeof(float) * n);
        k_add(a, b, n);
        CUDA_FN(k_add)(d_a, d_b, n);
        CHECKF(device_same("add", a, d_a, n), "n %ld: k_add differs", n);
        const float g = CUDA_FN(k_read_scalar)(d_a + n - 1);
        CHECKF(memcmp(&g, &a[n - 1], sizeof g) == 0, "n %ld: k_read_scalar %.9g, want %.9g", n, g, a[n - 1]);
        k_copy(b, a, n);
        CUDA_FN(k_copy)(d_b, d_a, n);
        CHECKF(device_same("copy", b, d_b, n), "n %ld: k_copy differs", n);
        k_zero(a, n - 1);   /* the last element kept */
        CUDA_FN(k_zero)(d_a, n - 1);
        CHECKF(device_same("zero", a, d_a, n), "n %ld: k_zero differs", n);
        cuda_release(d_a), cuda_release(d_b), free(a), free(b);
    }
}

int main(int argc, char **argv) {
    if (!cuda_open(argc, argv)) return test_summary();
    RUN_TEST(test_embeddings);
    RUN_TEST(test_xent);
    RUN_TEST(test_mse);
    RUN_TEST(test_bce);
    RUN_TEST(test_gather_rows);
    RUN_TEST(test_scatter_add_rows);
    RUN_TEST(test_scatter_rows);
    RUN_TEST(test_plain_memory);
    return test_summary();
}
