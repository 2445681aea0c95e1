/* The matrix-product peak of the backend in use, measured through kernels.h alone: for a
 * device whose peak the CPU's measurements (sgemm_peak.h) say nothing about (`bert bench
 * --device cuda`), so that a model's speed is reported as a fraction of what that device's own
 * products reach (model FLOPs utilisation against the measured GEMM peak, not a data sheet's).
 * The products are the model's: k_matmul_forward (fp32) or k_matmul_forward_half (16-bit
 * operands, fp32 sums), weights [n, k] as the model keeps them, on backend memory, each shape
 * repeated in batches that end with k_wait (a device queues its work). */
#ifndef BERT_BENCH_DEVICE_PEAK_H
#define BERT_BENCH_DEVICE_PEAK_H

#include <stdbool.h>

#include "bench/sgemm_peak.h"      /* SgemmShapeResult */
#include "kernels/kernels.h"       /* HalfMode */

enum { DEVICE_PEAK_SHAPES = 4 };

typedef struct {
    SgemmShapeResult shapes[DEVICE_PEAK_SHAPES];   /* BERT's three (m x 768 x 768, x 3072 x 768,
                                                      x 768 x 3072), then the square (if any) */
    int nshapes;
    double peak_gflops;                            /* the best of them */
} DeviceGemmPeak;

/* half: the 16-bit products in that format (HALF_BF16, HALF_FP16), or -1 for fp32. m rows (the
 * bench's tokens); square > 0 adds a square product of that side (a GPU's rate on a shape big
 * enough to fill it). About budget_seconds in all. */
void device_gemm_peak_measure(DeviceGemmPeak *out, int half, int m, int square, double budget_seconds);

#endif
