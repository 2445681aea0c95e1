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
#include <stdio.h>

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

/* Every product of a training step in the form the model calls it (model/bert_forward.c,
 * bert_backward.c), each timed on its own through the backend: the encoder layer's four
 * linear layers forward (the 16-bit-result products with the input's rounding, as the layer
 * calls them) and backward (the gradient's rounding, the bias sums, dinp and dweight; the
 * feed-forward's input layer with GELU's backward), and the MLM decoder; beside them, outside
 * the step's total, the variants that say where a product's time goes (a 16-bit-result product
 * with an fp32 result instead; the weight gradient alone). For `bert bench --gemm_shapes` on a
 * GPU: which products fall short of the device's peak. */
enum { DEVICE_PRODUCTS_MAX = 20 };

typedef struct {
    const char *what;
    int N, C, OC;       /* rows, input width, output width */
    double flops;       /* per call */
    double seconds;     /* per call, the best batch's mean */
    int per_step;       /* calls in a training step; 0: a variant, outside the step's total */
} DeviceProduct;

typedef struct {
    DeviceProduct p[DEVICE_PRODUCTS_MAX];
    int count;
    double step_seconds, step_flops;   /* the products of one training step (per_step times each) */
} DeviceProducts;

typedef struct {
    int hidden, intermediate, vocab, layers;
    int tokens, predictions;   /* the step's rows: batch x seq, and the masked positions */
} DeviceProductShapes;

/* half as device_gemm_peak_measure's. About budget_seconds in all. */
void device_products_measure(DeviceProducts *out, const DeviceProductShapes *s, int half, double budget_seconds);
/* One line per product (time per call, rate, share of peak_gflops), then the step's total. */
void device_products_print(FILE *f, const DeviceProducts *p, double peak_gflops);

#endif
