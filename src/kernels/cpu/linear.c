/* The CPU backend's typed products (kernels.h): which of the fp32, packed and 16-bit kernels
 * a linear layer runs on, decided from the precision and the weight's forms. */
#include "kernels/cpu/cpu_names.h"   /* first: this file defines the CPU backend's cpu_k_* */
#include "kernels/kernels.h"

static const uint16_t *half_of(const KWeight *w) { return w->half(w->ctx, w->f32, w->C, w->OC); }

void k_linear_forward(const KPrecision *p, float *out, const float *inp, uint16_t *inp16, const KWeight *w,
                      const float *bias, int N) {
    if (p->half) {   /* the plain 16-bit weight only where the packed one does not run */
        if (!k_matmul_forward_half(out, inp, inp16, NULL, w->packed, bias, N, w->C, w->OC, p->half_mode))
            k_matmul_forward_half(out, NULL, inp16, half_of(w), NULL, bias, N, w->C, w->OC, p->half_mode);
        return;
    }
    if (p->int8 && w->packed) {
        k_matmul_forward_int8(out, inp, w->packed, bias, N, w->C, w->OC, false, ACT_GELU);
        return;
    }
    const void *packed = p->pack_f32 && !p->int8 ? w->packed : NULL;
    if (packed) k_matmul_forward_packed(out, inp, w->f32, packed, bias, N, w->C, w->OC);
    else k_matmul_forward(out, inp, w->f32, bias, N, w->C, w->OC);
}

void k_linear_forward_to(const KPrecision *p, float *out, uint16_t *out16, const float *inp, uint16_t *inp16,
                         const KWeight *w, const float *bias, int N) {
    if (!p->half) {
        k_linear_forward(p, out, inp, inp16, w, bias, N);
        return;
    }
    if (!k_matmul_forward_half_out16(out16, out, inp, inp16, NULL, w->packed, bias, N, w->C, w->OC, p->half_mode))
        k_matmul_forward_half_out16(out16, out, NULL, inp16, half_of(w), NULL, bias, N, w->C, w->OC, p->half_mode);
}

bool k_linear_act_forward(const KPrecision *p, float *out, uint16_t *out16, const float *inp, uint16_t *inp16,
                          const KWeight *w, const float *bias, int N, Activation act) {
    if (!w->packed) return false;
    if (p->int8) {
        k_matmul_forward_int8(out, inp, w->packed, bias, N, w->C, w->OC, true, act);
        return true;
    }
    if (!p->half) return k_matmul_gelu_forward_packed(out, inp, w->packed, bias, N, w->C, w->OC, act);
    return p->half_mode == HALF_BF16 &&
           k_matmul_gelu_forward_half_packed(out16, inp, inp16, w->packed, bias, N, w->C, w->OC, act);
}

void k_activation_forward_to(const KPrecision *p, float *out, uint16_t *out16, const float *pre, const uint16_t *pre16,
                             long n, Activation act) {
    if (p->half) k_gelu_forward_half(out16, pre16, n, act, p->half_mode);
    else k_gelu_forward(out, pre, n, act);
}

void k_linear_backward(const KPrecision *p, float *dinp, float *dweight, float *dbias, const float *dout,
                       const float *inp, const uint16_t *inp16, const KWeight *w, int N, bool accumulate_dinp,
                       uint16_t *dout16) {
    if (!p->half) k_matmul_backward(dinp, dweight, dbias, dout, inp, w->f32, N, w->C, w->OC, accumulate_dinp);
    else k_matmul_backward_half(dinp, dweight, dbias, dout, inp16, half_of(w), N, w->C, w->OC, accumulate_dinp, dout16,
                                p->half_mode);
}

void k_linear_act_backward(const KPrecision *p, float *dinp, float *dweight, float *dbias, float *dout,
                           const float *pre, const uint16_t *pre16, const float *inp, const uint16_t *inp16,
                           const KWeight *w, int N, Activation act, uint16_t *dout16) {
    if (!p->half) {
        k_gelu_backward(dout, dout, pre, (long)N * w->OC, act);
        k_matmul_backward(dinp, dweight, dbias, dout, inp, w->f32, N, w->C, w->OC, true);
        return;
    }
    /* GELU's backward writes the product's rounded operand and the bias gradient itself */
    k_gelu_backward_half_out16(dout16, dbias, dout, pre16, N, w->OC, act, p->half_mode);
    k_matmul_backward_half(dinp, dweight, NULL, NULL, inp16, half_of(w), N, w->C, w->OC, true, dout16, p->half_mode);
}
