/* cuBLASLt for the host emulator (include/cublasLt.h): what lt_matmul.cu calls, with the checks
 * the library makes. A matmul's shapes come from its layouts and operations alone, so a layout
 * given the wrong rows, columns or leading dimension shows as a refusal (INVALID_VALUE) or a
 * wrong result; an algorithm runs only on the problem it was found for and on pointers at
 * least as aligned as the heuristic was told (the operands') or saw (the bias): otherwise
 * NOT_SUPPORTED, as a real kernel that assumes more alignment would refuse or misbehave.
 * The heuristic offers up to three algorithms, which sum k forwards, backwards, or in two
 * halves added in fp32 (a split-K with partial sums in the compute type: offered only where the
 * preference's reduction mask allows it); the first is EMU_MMA_ORDER's (0, 1, 2). EMU_LT=0: no
 * algorithm for anything (the callers' plain cuBLAS path). The epilogue: alpha op(A) op(B)
 * + beta C + bias[row] in fp32, then the output's type (round to nearest even). */
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/cuda/half_bits.cuh"

void emu_product(bool tf32_operands, int order, bool ta, bool tb, int m, int n, int k, const void *A, cudaDataType at,
                 int lda, const void *B, cudaDataType bt, int ldb, float *C);
float emu_element(const void *p, cudaDataType t, size_t e);
void emu_fail(const char *what);
int emu_mma_order(void);

struct EmuLtHandle { int unused; };
struct EmuLtDesc {
    cublasComputeType_t compute;
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void *bias = nullptr;
    int bias_type = -1;   /* -1: not set (D's type) */
};
struct EmuLtLayout { cudaDataType type; uint64_t rows, cols; int64_t ld; };
struct EmuLtPref { size_t workspace = 0; uint32_t reductions = 0xffffffffu, align[4] = {256, 256, 256, 256}; };

/* What an algorithm was found for (its data[]). */
enum { ALGO_MAGIC, ALGO_ORDER, ALGO_SHAPE, ALGO_TYPES, ALGO_ALIGN, ALGO_BIAS_ALIGN };
static const uint64_t MAGIC = 0x62657274u;

static uint64_t shape_key(const EmuLtDesc *d, const EmuLtLayout *a, const EmuLtLayout *b, const EmuLtLayout *o) {
    uint64_t h = 1469598103934665603ull;
    const uint64_t v[] = {(uint64_t)d->ta, (uint64_t)d->tb, (uint64_t)d->epilogue, a->rows, a->cols, (uint64_t)a->ld,
                          b->rows, b->cols, (uint64_t)b->ld, o->rows, o->cols, (uint64_t)o->ld};
    for (uint64_t x : v) h = (h ^ x) * 1099511628211ull;
    return h;
}
static uint64_t types_key(const EmuLtDesc *d, const EmuLtLayout *a, const EmuLtLayout *o) {
    return (uint64_t)d->compute | (uint64_t)a->type << 8 | (uint64_t)o->type << 16 | (uint64_t)(d->bias_type + 1) << 24;
}
static uint32_t alignment_of(const void *p) {
    uintptr_t bits = (uintptr_t)p | 256;
    return (uint32_t)(bits & (~bits + 1));
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
    *handle = new EmuLtHandle{0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute, cudaDataType scale) {
    if (scale != CUDA_R_32F || (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    *desc = new EmuLtDesc;
    (*desc)->compute = compute;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes) {
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
        if (bytes != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->ta : d->tb) = *(const cublasOperation_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        if (bytes != sizeof(cublasLtEpilogue_t)) return CUBLAS_STATUS_INVALID_VALUE;
        d->epilogue = *(const cublasLtEpilogue_t *)buf;
        return d->epilogue == CUBLASLT_EPILOGUE_DEFAULT || d->epilogue == CUBLASLT_EPILOGUE_BIAS
                   ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        if (bytes != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&d->bias, buf, sizeof(void *));
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        if (bytes != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        d->bias_type = *(const int32_t *)buf;
        return d->bias_type == CUDA_R_32F ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    if (rows == 0 || cols == 0 || ld < (int64_t)rows) return CUBLAS_STATUS_INVALID_VALUE;   /* column-major */
    *layout = new EmuLtLayout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    *pref = new EmuLtPref;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t bytes) {
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        if (bytes != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
        p->workspace = (size_t)*(const uint64_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
        if (bytes != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        p->reductions = *(const uint32_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
        if (bytes != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        const uint32_t a = *(const uint32_t *)buf;
        if (a == 0 || (a & (a - 1))) return CUBLAS_STATUS_INVALID_VALUE;
        p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = a;
        return CUBLAS_STATUS_SUCCESS;
    }
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { delete p; return CUBLAS_STATUS_SUCCESS; }

/* The problem a descriptor and its layouts describe: false where they do not fit together. */
static bool problem(const EmuLtDesc *d, const EmuLtLayout *a, const EmuLtLayout *b, const EmuLtLayout *c,
                    const EmuLtLayout *o, int *m, int *n, int *k) {
    const bool ta = d->ta == CUBLAS_OP_T, tb = d->tb == CUBLAS_OP_T;
    *m = (int)(ta ? a->cols : a->rows), *k = (int)(ta ? a->rows : a->cols);
    const int kb = (int)(tb ? b->cols : b->rows);
    *n = (int)(tb ? b->rows : b->cols);
    return kb == *k && o->rows == (uint64_t)*m && o->cols == (uint64_t)*n && c->rows == o->rows && c->cols == o->cols &&
           c->ld == o->ld && c->type == o->type && a->type == b->type &&
           (o->type == CUDA_R_32F || o->type == a->type) &&
           (d->compute == CUBLAS_COMPUTE_32F || a->type == CUDA_R_32F);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int wanted,
                                              cublasLtMatmulHeuristicResult_t *results, int *found) {
    *found = 0;
    int m, n, k;
    if (!handle || wanted < 1 || !problem(desc, a, b, c, d, &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
    const char *lt = getenv("EMU_LT");
    if (lt && !strcmp(lt, "0")) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (desc->epilogue == CUBLASLT_EPILOGUE_BIAS && !desc->bias) return CUBLAS_STATUS_INVALID_VALUE;
    uint32_t align = 256;
    for (uint32_t x : pref->align) align = x < align ? x : align;
    const bool split_allowed = pref->reductions & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    const int first = emu_mma_order();
    for (int i = 0; i < 3 && *found < wanted; i++) {
        const int order = (first + i) % 3;
        if (order == 2 && (!split_allowed || k < 2)) continue;
        cublasLtMatmulHeuristicResult_t &r = results[(*found)++];
        memset(&r, 0, sizeof r);
        r.state = CUBLAS_STATUS_SUCCESS;
        r.wavesCount = 1;
        r.algo.data[ALGO_MAGIC] = MAGIC, r.algo.data[ALGO_ORDER] = (uint64_t)order;
        r.algo.data[ALGO_SHAPE] = shape_key(desc, a, b, d), r.algo.data[ALGO_TYPES] = types_key(desc, a, d);
        r.algo.data[ALGO_ALIGN] = align;
        r.algo.data[ALGO_BIAS_ALIGN] = desc->epilogue == CUBLASLT_EPILOGUE_BIAS ? alignment_of(desc->bias) : 0;
    }
    return *found ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

static void store(void *p, cudaDataType t, size_t e, float v) {
    if (t == CUDA_R_32F) ((float *)p)[e] = v;
    else ((uint16_t *)p)[e] = t == CUDA_R_16F ? fp16_from_float_bits(v) : bf16_from_float_bits(v);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t) {
    int m, n, k;
    if (!handle || !desc || !a || !b || !c || !d || !algo || !A || !B || !D || !alpha || !beta ||
        !problem(desc, a, b, c, d, &m, &n, &k) || (workspace_bytes && !workspace))
        return CUBLAS_STATUS_INVALID_VALUE;
    const bool bias = desc->epilogue == CUBLASLT_EPILOGUE_BIAS;
    if (bias && !desc->bias) return CUBLAS_STATUS_INVALID_VALUE;
    const uint64_t *x = algo->data;
    if (x[ALGO_MAGIC] != MAGIC) emu_fail("cublasLtMatmul with an algorithm the heuristic did not give");
    if (x[ALGO_SHAPE] != shape_key(desc, a, b, d) || x[ALGO_TYPES] != types_key(desc, a, d))
        return CUBLAS_STATUS_NOT_SUPPORTED;   /* an algorithm found for another problem */
    const float fbeta = *(const float *)beta;
    const uintptr_t operands = (uintptr_t)A | (uintptr_t)B | (uintptr_t)D | (fbeta != 0.0f ? (uintptr_t)C : 0);
    if (operands % x[ALGO_ALIGN] || (bias && (uintptr_t)desc->bias % x[ALGO_BIAS_ALIGN]))
        return CUBLAS_STATUS_NOT_SUPPORTED;   /* less aligned than the algorithm assumes */
    std::vector<float> s((size_t)m * n);
    emu_product(desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32, (int)x[ALGO_ORDER], desc->ta == CUBLAS_OP_T,
                desc->tb == CUBLAS_OP_T, m, n, k, A, a->type, (int)a->ld, B, b->type, (int)b->ld, s.data());
    const float falpha = *(const float *)alpha;
    const cudaDataType bias_type = desc->bias_type < 0 ? d->type : (cudaDataType)desc->bias_type;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float v = falpha * s[(size_t)j * m + i];
            if (fbeta != 0.0f) v += fbeta * emu_element(C, c->type, (size_t)j * c->ld + i);
            if (bias) v += emu_element(desc->bias, bias_type, (size_t)i);
            store(D, d->type, (size_t)j * d->ld + i, v);
        }
    return CUBLAS_STATUS_SUCCESS;
}
