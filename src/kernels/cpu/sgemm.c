#include "kernels/cpu/sgemm.h"

#include "kernels/cpu/team.h"

#if defined(BERT_GEMM_OPENBLAS)
#include <cblas.h>

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
           int ldb, float beta, float *C, int ldc) {
    const int team = library_team_begin();
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
    library_team_end(team);
}

const char *sgemm_library(void) { return "openblas"; }

#else
#include <dnnl.h>
#include <omp.h>

#include "core/common.h"

/* Below this many multiply-adds (~40 us on one core) a product runs on one thread: threads
 * would cost more than they save, and oneDNN may split K between threads, which changes the
 * float rounding; kept on one thread, small products give the same bits for any thread count. */
#define THREADED_MIN_MULTIPLY_ADDS (1L << 22)

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
           int ldb, float beta, float *C, int ldc) {
    /* dnnl_sgemm is row-major, like cblas with CblasRowMajor, and runs on omp_get_max_threads()
     * threads: one inside a parallel region of ours (team.h) and for a small product. */
    const int team = library_team_begin_for((long)M * N * K < THREADED_MIN_MULTIPLY_ADDS);
    dnnl_status_t status =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    library_team_end(team);
    /* It only fails on arguments no caller passes (negative sizes, short leading
     * dimensions): a bug, not bad input. */
    if (status != dnnl_success)
        die("dnnl_sgemm(%c%c, M=%d N=%d K=%d, lda=%d ldb=%d ldc=%d) failed with status %d", trans_a ? 'T' : 'N',
            trans_b ? 'T' : 'N', M, N, K, lda, ldb, ldc, (int)status);
}

const char *sgemm_library(void) { return "onednn"; }
#endif

/* ---- what runs the products, for reports ---- */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(BERT_GEMM_OPENBLAS)
char *openblas_get_corename(void);
char *openblas_get_config(void);
#else
static const char *onednn_isa_name(dnnl_cpu_isa_t isa) {
    switch ((int)isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}
#endif

void sgemm_describe(char *out, size_t n) {
#if defined(BERT_GEMM_OPENBLAS)
    openblas_describe(out, n, openblas_get_config(), openblas_get_corename());
#else
    const dnnl_version_t *v = dnnl_version();
    snprintf(out, n, "oneDNN %d.%d.%d (ISA %s)", v->major, v->minor, v->patch,
             onednn_isa_name(dnnl_get_effective_cpu_isa()));
#endif
}

void openblas_describe(char *out, size_t n, const char *config, const char *core) {
    /* the config string starts "OpenBLAS 0.3.21 ..."; keep the name and version */
    int version_len = 0;
    for (int spaces = 0; config && config[version_len] && spaces < 2; version_len++)
        if (config[version_len] == ' ' && ++spaces == 2) break;
    snprintf(out, n, "%.*s (%s kernel)", version_len, config ? config : "OpenBLAS", core ? core : "?");
}

void compute_environment(char *out, size_t n) {
    static const char *const names[] = {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES",
                                        "GOMP_SPINCOUNT", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                        "OPENBLAS_NUM_THREADS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
                                        "ONEDNN_CPU_ISA_HINTS"};
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *value = getenv(names[i]);
        if (!value || used >= n) continue;
        int w = snprintf(out + used, n - used, "%s%s=%s", used ? " " : "", names[i], value);
        if (w > 0) used += (size_t)w;
    }
    if (!out[0]) snprintf(out, n, "none set");
}
