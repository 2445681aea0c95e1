#include "kernels/sgemm.h"

#if defined(BERT_GEMM_OPENBLAS)
#include <cblas.h>

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
           int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
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
     * threads (one inside a parallel region). */
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    bool one_thread = threads > 1 && (long)M * N * K < THREADED_MIN_MULTIPLY_ADDS;
    if (one_thread) omp_set_num_threads(1);
    dnnl_status_t status =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (one_thread) omp_set_num_threads(threads);
    /* It only fails on arguments no caller passes (negative sizes, short leading
     * dimensions): a bug, not bad input. */
    if (status != dnnl_success)
        die("dnnl_sgemm(%c%c, M=%d N=%d K=%d, lda=%d ldb=%d ldc=%d) failed with status %d", trans_a ? 'T' : 'N',
            trans_b ? 'T' : 'N', M, N, K, lda, ldb, ldc, (int)status);
}

const char *sgemm_library(void) { return "onednn"; }
#endif
