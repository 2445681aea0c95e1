/* The forward products through cuBLASLt (linear.cu): out = inp @ W^T + bias with the bias added
 * in the product's epilogue, in fp32, before the result is stored, and the result stored in
 * fp32 or directly in the 16-bit format the next kernel reads. cuBLAS's plain GEMM would need
 * the bias broadcast into out first (a pass over out), read back (beta 1), and a rounding pass
 * for the 16-bit copy; here out is written once.
 *
 * Sums: fp32 accumulation; split-K partial sums only in fp32 (the preference's reduction mask
 * leaves out the schemes that add partials in the output's 16-bit type), as cuBLAS's math
 * mode asks of the plain path. fp32 operands take CUBLAS_COMPUTE_32F: true fp32, no TF32 (with
 * k_set_tf32, CUBLAS_COMPUTE_32F_FAST_TF32: a plan of its own).
 * A shape, type and bias combination cuBLASLt has no algorithm for returns false: the caller
 * runs the plain path. BERT_CUDA_LT_ALGOS=K times the heuristic's K best per shape, and
 * BERT_CUDA_LT_BACKWARD=1 sends the backward's products (fp32 results, + beta C) here too (below). */
#include <cublasLt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_blas.h"
#include "kernels/cuda/cuda_common.h"

#define LT_CHECK(call) CUBLAS_CHECK(call)

static cublasLtHandle_t lt_handle(void) {
    static cublasLtHandle_t handle = NULL;
    if (!handle) LT_CHECK(cublasLtCreate(&handle));
    return handle;
}

/* Hopper's kernels want up to 32 MiB of workspace; one buffer, used in stream order. */
enum { LT_WORKSPACE = 32 << 20 };
static void *lt_workspace(void) {
    static void *w = NULL;
    if (!w) cuda_malloc(&w, LT_WORKSPACE);
    return w;
}

/* BERT_CUDA_LT_ALGOS=K (2..LT_MAX_ALGOS): ask the heuristic for its K best algorithms per
 * shape and keep the fastest, timed on the first call's own operands; default 1: the heuristic's
 * first, untimed. Opt-in: which algorithm wins a timing may change from run to run, and with it
 * the order of a product's sums (the bits), which a run otherwise repeats exactly. For the
 * speed section's A/B (scripts/gpu_check.sh): run 3's 16-bit-result products ran at a third of
 * the fp32-result ones' rate. */
enum { LT_MAX_ALGOS = 16 };
static int algos_wanted(void) {
    static int wanted = 0;
    if (!wanted) {
        const char *v = getenv("BERT_CUDA_LT_ALGOS");
        wanted = v ? atoi(v) : 1;
        if (wanted < 1) wanted = 1;
        if (wanted > LT_MAX_ALGOS) wanted = LT_MAX_ALGOS;
    }
    return wanted;
}

/* A product's shape in cuBLAS's column-major terms: D [m, n] (ld ldd) = op(A) op(B) (+ beta D),
 * op(A) [m, k], op(B) [k, n]; A stored [m, k] (lda) or transposed [k, m], B likewise. */
typedef struct {
    bool ta, tb;
    int m, n, k, lda, ldb, ldd;
} LtShape;
static bool same_shape(const LtShape *x, const LtShape *y) {
    return x->ta == y->ta && x->tb == y->tb && x->m == y->m && x->n == y->n && x->k == y->k && x->lda == y->lda &&
           x->ldb == y->ldb && x->ldd == y->ldd;
}

/* A planned product: descriptors and the heuristic's algorithms, kept per shape and types (a
 * run multiplies a handful of shapes over and over). */
typedef struct {
    LtShape shape;
    cudaDataType in_type, out_type;
    bool bias;
    bool tf32;     /* fp32 operands in TF32 (k_set_tf32) */
    uint32_t align;        /* the alignment every call's A, B and D have (bytes, 16 to 256) */
    uint32_t bias_align;   /* the bias pointer's (its lowest set bit, to 256; 0: no bias) */
    bool proven;           /* it ran once: from then on a failure is an error, not "no algorithm" */
    bool usable;   /* false: cuBLASLt found no algorithm (the caller's plain path runs) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;               /* the one that runs */
    cublasLtMatmulAlgo_t candidates[LT_MAX_ALGOS];
    int ncandidates;                         /* > 1: timed at the first call, then 1 */
} LtPlan;
enum { LT_PLANS = 96 };

/* first_bias: the first call's bias, which the heuristic reads for its alignment (every call of
 * the plan has a bias of the same alignment: the plans' key). */
static bool make_plan(LtPlan *p, const float *first_bias) {
    const LtShape *sh = &p->shape;
    const cublasOperation_t ta = sh->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = sh->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasComputeType_t compute = p->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LT_CHECK(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F));
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (p->bias) {
        const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        const int32_t bias_type = CUDA_R_32F;   /* the model's fp32 bias, added before rounding */
        LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
        LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &first_bias,
                                                sizeof first_bias));
        if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                           sizeof bias_type) != CUBLAS_STATUS_SUCCESS)
            return false;
    }
    /* the matrices as stored: A [m, k] or, transposed, [k, m]; B [k, n] or [n, k]; D (and C, the
     * same) [m, n] */
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->a, p->in_type, sh->ta ? sh->k : sh->m, sh->ta ? sh->m : sh->k, sh->lda));
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->b, p->in_type, sh->tb ? sh->n : sh->k, sh->tb ? sh->k : sh->n, sh->ldb));
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->d, p->out_type, sh->m, sh->n, sh->ldd));
    cublasLtMatmulPreference_t pref;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t workspace = LT_WORKSPACE;
    const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;   /* (and none) */
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                  sizeof workspace));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                  sizeof reductions));
    /* only algorithms that work at the operands' alignment (the heuristic assumes 256 bytes
     * unless told: an activation's view may start at less) */
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &p->align, sizeof p->align));
    cublasLtMatmulHeuristicResult_t results[LT_MAX_ALGOS];
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt_handle(), p->desc, p->a, p->b, p->d, p->d, pref,
                                                            algos_wanted(), results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS) return false;
    for (int i = 0; i < found; i++)
        if (results[i].state == CUBLAS_STATUS_SUCCESS) p->candidates[p->ncandidates++] = results[i].algo;
    if (p->ncandidates < 1) return false;
    p->algo = p->candidates[0];
    return true;
}

/* What the plans came to, for the kernel profile's notes (k_cuda_notes, memory.cu). */
static int plans_made, plans_unusable;
static char last_unusable[160];
static int plans_timed, plans_not_first;      /* BERT_CUDA_LT_ALGOS: timed; won by another than the first */
static double timed_first_us, timed_best_us;   /* the sums, over the timed plans, of one call's time */

static const char *type_name(cudaDataType t) {
    return t == CUDA_R_32F ? "fp32" : t == CUDA_R_16BF ? "bf16" : t == CUDA_R_16F ? "fp16" : "?";
}

void cuda_lt_notes(char *out, size_t n) {
    const int used = snprintf(out, n, "cuBLASLt products: %d shapes planned, %d without an algorithm (plain "
                              "cuBLAS)%s%s", plans_made, plans_unusable, plans_unusable ? ", the last: " : "",
                              plans_unusable ? last_unusable : "");
    if (plans_timed && used > 0 && (size_t)used < n)
        snprintf(out + used, n - (size_t)used, "; %d timed over up to %d algorithms (BERT_CUDA_LT_ALGOS): %d won by "
                 "another than the heuristic's first, one call of each %.1f us against %.1f us", plans_timed,
                 algos_wanted(), plans_not_first, timed_best_us, timed_first_us);
}

/* The lowest set bit of an address, at most 256: the alignment cuBLASLt's kernels can count on. */
static uint32_t alignment_of(uintptr_t bits) {
    bits |= 256;
    return (uint32_t)(bits & (~bits + 1));
}

/* A plan without an algorithm (none found, or the library refused it at its first run: `why`):
 * the caller's plain path runs from then on; counted for the notes. */
static void mark_unusable(LtPlan *p, const char *why) {
    p->usable = false;
    plans_unusable++;
    snprintf(last_unusable, sizeof last_unusable, "%c%c m %d n %d k %d, %s operands, %s out%s%s",
             p->shape.ta ? 'T' : 'N', p->shape.tb ? 'T' : 'N', p->shape.m, p->shape.n, p->shape.k,
             type_name(p->in_type), type_name(p->out_type), p->bias ? ", fp32 bias" : "", why);
}

static LtPlan *plan_for(const LtShape *shape, cudaDataType in_type, cudaDataType out_type, const float *bias,
                        bool tf32, uint32_t align) {
    const uint32_t bias_align = bias ? alignment_of((uintptr_t)bias) : 0;
    static LtPlan plans[LT_PLANS];
    static int count = 0, next_evicted = 0;
    for (int i = 0; i < count; i++) {
        LtPlan *p = &plans[i];
        if (same_shape(&p->shape, shape) && p->in_type == in_type && p->out_type == out_type && p->bias == (bias != NULL) &&
            p->tf32 == tf32 && p->align == align && p->bias_align == bias_align)
            return p;
    }
    LtPlan *p;
    if (count < LT_PLANS) {
        p = &plans[count++];
    } else {   /* full (many row counts: packed batches): replace the oldest */
        p = &plans[next_evicted];
        next_evicted = (next_evicted + 1) % LT_PLANS;
        if (p->desc) cublasLtMatmulDescDestroy(p->desc);
        if (p->a) cublasLtMatrixLayoutDestroy(p->a);
        if (p->b) cublasLtMatrixLayoutDestroy(p->b);
        if (p->d) cublasLtMatrixLayoutDestroy(p->d);
    }
    memset(p, 0, sizeof *p);
    p->shape = *shape, p->in_type = in_type, p->out_type = out_type, p->bias = bias != NULL, p->tf32 = tf32;
    p->align = align, p->bias_align = bias_align;
    plans_made++;
    p->usable = make_plan(p, bias);
    if (!p->usable) mark_unusable(p, "");
    return p;
}

/* The product with one algorithm; its status (a refused configuration writes nothing). */
static cublasStatus_t run_algo(const LtPlan *p, const cublasLtMatmulAlgo_t *algo, const void *A, const void *B,
                               float beta, void *D) {
    const float one = 1.0f;
    return cublasLtMatmul(lt_handle(), p->desc, &one, A, p->a, B, p->b, &beta, D, p->d, D, p->d, algo, lt_workspace(),
                          LT_WORKSPACE, 0);
}

/* Where a timing writes its results: the caller's D when the product overwrites it (beta 0),
 * else this buffer (a product that adds into D must add once), grown as needed. */
static void *timing_output(size_t bytes) {
    static void *buffer = NULL;
    static size_t size = 0;
    if (bytes > size) {
        if (buffer) CUDA_CHECK(cudaFree(buffer));
        cuda_malloc(&buffer, bytes);
        size = bytes;
    }
    return buffer;
}

/* BERT_CUDA_LT_ALGOS: each candidate once untimed, then the mean of LT_TIMED_CALLS calls between
 * events; the fastest becomes the plan's algorithm. On the call's own operands (A and B only
 * read), with beta 0 into D, or, where the call adds into D, into timing_output: the caller's
 * product that follows is unchanged. Synchronises once per candidate, on a plan's first call. */
enum { LT_TIMED_CALLS = 5 };
static void choose_fastest(LtPlan *p, const void *A, const void *B, float beta, void *D) {
    if (beta != 0.0f) {
        const size_t elem = p->out_type == CUDA_R_32F ? 4 : 2;
        D = timing_output(elem * (size_t)p->shape.ldd * p->shape.n);
    }
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    float best_ms = -1, first_ms = -1;
    int best = 0;
    for (int i = 0; i < p->ncandidates; i++) {
        if (run_algo(p, &p->candidates[i], A, B, 0.0f, D) != CUBLAS_STATUS_SUCCESS) continue;   /* refused: skip */
        CUDA_CHECK(cudaEventRecord(start, 0));
        for (int r = 0; r < LT_TIMED_CALLS; r++) LT_CHECK(run_algo(p, &p->candidates[i], A, B, 0.0f, D));
        CUDA_CHECK(cudaEventRecord(stop, 0));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (i == 0) first_ms = ms;
        if (best_ms < 0 || ms < best_ms) best_ms = ms, best = i;
    }
    if (first_ms < 0) first_ms = best_ms;   /* the heuristic's first was refused */
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    p->algo = p->candidates[best];
    p->ncandidates = 1;
    plans_timed++, plans_not_first += best != 0;
    if (best_ms >= 0) timed_first_us += 1e3 * first_ms / LT_TIMED_CALLS, timed_best_us += 1e3 * best_ms / LT_TIMED_CALLS;
}

/* BERT_CUDA_LT_OUT16=0: no 16-bit results stored by the product (the caller's fp32 product and
 * rounding pass run instead), for an A/B of the two on a GPU (scripts/gpu_check.sh's speed:
 * run 3 profiled the 16-bit-output products at 154 us a call against 46 us for the fp32 ones). */
static bool out16_allowed(void) {
    static int allowed = -1;
    if (allowed < 0) {
        const char *v = getenv("BERT_CUDA_LT_OUT16");
        allowed = !(v && !strcmp(v, "0"));
    }
    return allowed;
}

/* D = op(A) op(B) (+ beta D) (+ bias [m], fp32, in the epilogue) through a plan; false where
 * cuBLASLt has no algorithm (nothing written). */
static bool lt_gemm(const LtShape *shape, const void *A, const void *B, float beta, void *D, cudaDataType in_type,
                    cudaDataType out_type, const float *bias) {
    if (shape->m <= 0 || shape->n <= 0 || shape->k <= 0) return false;
    if (((uintptr_t)A | (uintptr_t)B | (uintptr_t)D | (uintptr_t)bias) % 16) return false;
    const uint32_t align = alignment_of((uintptr_t)A | (uintptr_t)B | (uintptr_t)D);   /* 16 .. 256 */
    LtPlan *p = plan_for(shape, in_type, out_type, bias, in_type == CUDA_R_32F && cuda_tf32(), align);
    if (!p->usable) return false;
    if (bias) LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (p->ncandidates > 1) choose_fastest(p, A, B, beta, D);
    const cublasStatus_t status = run_algo(p, &p->algo, A, B, beta, D);
    if (status != CUBLAS_STATUS_SUCCESS && !p->proven) {   /* refused before it ever ran: nothing written */
        mark_unusable(p, ": refused at its first run");
        return false;
    }
    LT_CHECK(status);
    p->proven = true;
    return true;
}

/* out [N, OC] (out_type: fp32 or the 16-bit in_type) = inp [N, C] @ weight [OC, C]^T (+ bias
 * [OC], fp32), operands of in_type: column-major out^T [OC, N] = (W^T [C, OC])^T inp^T [C, N]. */
bool cuda_lt_forward(void *out, cudaDataType out_type, const void *inp, const void *weight, const float *bias, int N,
                     int C, int OC, cudaDataType in_type) {
    if (out_type != CUDA_R_32F && !out16_allowed()) return false;
    const LtShape shape = {.ta = true, .tb = false, .m = OC, .n = N, .k = C, .lda = C, .ldb = C, .ldd = OC};
    return lt_gemm(&shape, weight, inp, 0.0f, out, in_type, out_type, bias);
}

/* BERT_CUDA_LT_BACKWARD=1: the backward's products (linear.cu's gemm) through cuBLASLt too, so
 * that BERT_CUDA_LT_ALGOS times theirs as well (opt-in until a GPU run has compared them). */
bool cuda_lt_backward_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        const char *v = getenv("BERT_CUDA_LT_BACKWARD");
        enabled = v && !strcmp(v, "1");
    }
    return enabled;
}

bool cuda_lt_gemm(bool ta, bool tb, int m, int n, int k, const void *A, int lda, const void *B, int ldb, float beta,
                  float *C, int ldc, cudaDataType in_type) {
    const LtShape shape = {.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldd = ldc};
    return lt_gemm(&shape, A, B, beta, C, in_type, CUDA_R_32F, NULL);
}
