/* Every function of the backend interface (kernels.h), once, for the dispatch in backend.c:
 * KR(return type, name, (parameters), (arguments)) for a function that returns a value, KV(name,
 * (parameters), (arguments)) for one that does not. The compiler checks each entry against
 * kernels.h's declaration (backend.c defines the function from it), and the linker checks that
 * the CPU backend defines each one (kernels/cpu/cpu_names.h). Adding a kernel: kernels.h, here,
 * cpu_names.h, then each backend. */
#ifndef BERT_KERNELS_BACKEND_FUNCTIONS_H
#define BERT_KERNELS_BACKEND_FUNCTIONS_H

#define K_FUNCTIONS(KR, KV) \
    KV(k_matmul_forward, (float *out, const float *inp, const float *weight, const float *bias, int N, int C, \
        int OC), (out, inp, weight, bias, N, C, OC)) \
    KR(size_t, k_packed_weight_bytes_f32, (int C, int OC), (C, OC)) \
    KV(k_pack_weight_f32, (void *packed, const float *weight, int C, int OC), (packed, weight, C, OC)) \
    KV(k_matmul_forward_packed, (float *out, const float *inp, const float *weight, const void *packed, const \
        float *bias, int N, int C, int OC), (out, inp, weight, packed, bias, N, C, OC)) \
    KV(k_matmul_backward, (float *dinp, float *dweight, float *dbias, const float *dout, const float *inp, const \
        float *weight, int N, int C, int OC, bool accumulate_dinp), (dinp, dweight, dbias, dout, inp, weight, N, C, \
        OC, accumulate_dinp)) \
    KR(bool, k_matmul_forward_half, (float *out, const float *inp, uint16_t *inp16, const uint16_t *weight, \
        const void *packed, const float *bias, int N, int C, int OC, HalfMode mode), (out, inp, inp16, weight, \
        packed, bias, N, C, OC, mode)) \
    KR(bool, k_matmul_forward_half_out16, (uint16_t *out16, float *out, const float *inp, uint16_t *inp16, const \
        uint16_t *weight, const void *packed, const float *bias, int N, int C, int OC, HalfMode mode), (out16, out, \
        inp, inp16, weight, packed, bias, N, C, OC, mode)) \
    KR(size_t, k_packed_weight_bytes, (HalfMode mode, int C, int OC), (mode, C, OC)) \
    KV(k_pack_weight, (HalfMode mode, void *packed, const uint16_t *weight, int C, int OC), (mode, packed, \
        weight, C, OC)) \
    KR(bool, k_matmul_gelu_forward_packed, (float *out, const float *inp, const void *packed, const float *bias, \
        int N, int C, int OC, Activation act), (out, inp, packed, bias, N, C, OC, act)) \
    KR(bool, k_matmul_gelu_forward_half_packed, (uint16_t *out16, const float *inp, uint16_t *inp16, const void \
        *packed, const float *bias, int N, int C, int OC, Activation act), (out16, inp, inp16, packed, bias, N, C, \
        OC, act)) \
    KV(k_matmul_backward_half, (float *dinp, float *dweight, float *dbias, const float *dout, const uint16_t \
        *inp16, const uint16_t *weight, int N, int C, int OC, bool accumulate_dinp, uint16_t *dout16, HalfMode \
        mode), (dinp, dweight, dbias, dout, inp16, weight, N, C, OC, accumulate_dinp, dout16, mode)) \
    KV(k_to_half, (HalfMode mode, uint16_t *dst, const float *src, long n), (mode, dst, src, n)) \
    KV(k_from_half, (HalfMode mode, float *dst, const uint16_t *src, long n), (mode, dst, src, n)) \
    KV(k_to_half_each, (HalfMode mode, uint16_t *const *dst, const float *const *src, const size_t *n, int count), \
        (mode, dst, src, n, count)) \
    KR(bool, k_bf16_native_available, (void), ()) \
    KR(bool, k_set_tf32, (bool on), (on)) \
    KR(int, k_int8_support, (void), ()) \
    KV(k_int8_describe, (char *out, size_t n), (out, n)) \
    KV(k_int8_product_counters, (double *thread_seconds, double *ops, bool reset), (thread_seconds, ops, reset)) \
    KR(size_t, k_packed_weight_bytes_int8, (int C, int OC), (C, OC)) \
    KV(k_pack_weight_int8, (void *packed, const float *weight, const KInt8Smoothing *smooth, int C, int OC), \
        (packed, weight, smooth, C, OC)) \
    KR(const float *, k_int8_smoothing, (const void *packed), (packed)) \
    KV(k_quantize_rows_int8, (int8_t *q, float *scale, const float *x, const float *smooth, int N, int C), \
        (q, scale, x, smooth, N, C)) \
    KV(k_matmul_forward_int8_rows, (const KInt8Output *o, const int8_t *q, const float *scale, const void *packed, \
        const float *bias, int N, int C, int OC), (o, q, scale, packed, bias, N, C, OC)) \
    KV(k_matmul_forward_int8, (float *out, const float *inp, const void *packed, const float *bias, int N, int C, \
        int OC, bool gelu, Activation act), (out, inp, packed, bias, N, C, OC, gelu, act)) \
    KV(k_bf16_describe, (char *out, size_t n), (out, n)) \
    KV(k_linear_forward, (const KPrecision *p, float *out, const float *inp, uint16_t *inp16, const KWeight *w, \
        const float *bias, int N), (p, out, inp, inp16, w, bias, N)) \
    KV(k_linear_forward_to, (const KPrecision *p, float *out, uint16_t *out16, const float *inp, uint16_t \
        *inp16, const KWeight *w, const float *bias, int N), (p, out, out16, inp, inp16, w, bias, N)) \
    KR(bool, k_linear_act_forward, (const KPrecision *p, float *out, uint16_t *out16, const float *inp, uint16_t \
        *inp16, const KWeight *w, const float *bias, int N, Activation act), (p, out, out16, inp, inp16, w, bias, N, \
        act)) \
    KV(k_activation_forward_to, (const KPrecision *p, float *out, uint16_t *out16, const float *pre, const \
        uint16_t *pre16, long n, Activation act), (p, out, out16, pre, pre16, n, act)) \
    KV(k_linear_backward, (const KPrecision *p, float *dinp, float *dweight, float *dbias, const float *dout, \
        const float *inp, const uint16_t *inp16, const KWeight *w, int N, bool accumulate_dinp, uint16_t *dout16), \
        (p, dinp, dweight, dbias, dout, inp, inp16, w, N, accumulate_dinp, dout16)) \
    KV(k_linear_act_backward, (const KPrecision *p, float *dinp, float *dweight, float *dbias, float *dout, \
        const float *pre, const uint16_t *pre16, const float *inp, const uint16_t *inp16, const KWeight *w, int N, \
        Activation act, uint16_t *dout16), (p, dinp, dweight, dbias, dout, pre, pre16, inp, inp16, w, N, act, \
        dout16)) \
    KV(k_layernorm_forward, (float *out, float *sum_out, float *mean, float *rstd, const float *a, const float \
        *residual, const float *w, const float *b, int N, int C, float eps), (out, sum_out, mean, rstd, a, residual, \
        w, b, N, C, eps)) \
    KV(k_layernorm_backward, (float *dinp, float *dw, float *db, const float *dout, const float *inp, const \
        float *mean, const float *rstd, const float *w, int N, int C), (dinp, dw, db, dout, inp, mean, rstd, w, N, \
        C)) \
    KV(k_dropout_layernorm_forward_to, (float *out, uint16_t *out16, HalfMode mode, float *sum_out, float *mean, \
        float *rstd, const float *a, const KDropout *drop, const float *residual, const float *w, const float *b, \
        int N, int C, float eps), (out, out16, mode, sum_out, mean, rstd, a, drop, residual, w, b, N, C, eps)) \
    KV(k_layernorm_dropout_backward, (float *dinp, float *dinp_dropped, const KDropout *drop, float *dw, float \
        *db, const float *dout, const float *inp, const float *mean, const float *rstd, const float *w, int N, int \
        C), (dinp, dinp_dropped, drop, dw, db, dout, inp, mean, rstd, w, N, C)) \
    KV(k_gelu_forward, (float *out, const float *inp, long n, Activation act), (out, inp, n, act)) \
    KV(k_gelu_backward, (float *dinp, const float *dout, const float *inp, long n, Activation act), (dinp, dout, \
        inp, n, act)) \
    KV(k_gelu_forward_half, (uint16_t *out16, const uint16_t *inp16, long n, Activation act, HalfMode mode), \
        (out16, inp16, n, act, mode)) \
    KV(k_gelu_backward_half_out16, (uint16_t *dinp16, float *dbias, const float *dout, const uint16_t *inp16, \
        int N, int C, Activation act, HalfMode mode), (dinp16, dbias, dout, inp16, N, C, act, mode)) \
    KV(k_tanh_forward, (float *x, long n), (x, n)) \
    KV(k_tanh_backward, (float *dinp, const float *dout, const float *y, long n), (dinp, dout, y, n)) \
    KV(k_dropout, (float *x, long n, float p, uint64_t key, uint32_t counter0), (x, n, p, key, counter0)) \
    KV(k_dropout_rows, (float *x, const int32_t *rows, int R, int C, float p, uint64_t key), (x, rows, R, C, p, \
        key)) \
    KV(k_embeddings_forward, (float *out, const int32_t *ids, const int32_t *types, const float *word, const \
        float *pos, const float *type, int B, int T, int C), (out, ids, types, word, pos, type, B, T, C)) \
    KV(k_embeddings_backward, (float *dword, float *dpos, float *dtype, const float *dout, const int32_t *ids, \
        const int32_t *types, int B, int T, int C), (dword, dpos, dtype, dout, ids, types, B, T, C)) \
    KV(k_attention_forward, (float *ctx, float *probs, const float *qkv, const AttentionArgs *a), (ctx, probs, \
        qkv, a)) \
    KV(k_attention_forward_to, (float *ctx, uint16_t *ctx16, float *probs, const float *qkv, const AttentionArgs \
        *a), (ctx, ctx16, probs, qkv, a)) \
    KV(k_attention_backward, (float *dqkv, const float *dctx, const float *qkv, const float *probs, const \
        AttentionArgs *a), (dqkv, dctx, qkv, probs, a)) \
    KR(bool, k_attention_keeps_probs, (const AttentionArgs *a), (a)) \
    KR(size_t, k_attention_state_floats, (const AttentionArgs *a), (a)) \
    KV(k_xent_forward, (float *loss, float *row_loss, float *probs, const float *logits, const int32_t \
        *row_index, const int32_t *labels, int M, int V), (loss, row_loss, probs, logits, row_index, labels, M, V)) \
    KV(k_xent_backward, (float *probs_to_dlogits, const int32_t *labels, int M, int V, float scale), \
        (probs_to_dlogits, labels, M, V, scale)) \
    KV(k_mse_forward, (float *loss, const float *pred, const float *target, int n), (loss, pred, target, n)) \
    KV(k_mse_backward, (float *dpred, const float *pred, const float *target, int n, float scale), (dpred, pred, \
        target, n, scale)) \
    KV(k_bce_forward, (float *loss, const float *logits, const float *target, int n), (loss, logits, target, n)) \
    KV(k_bce_backward, (float *dlogits, const float *logits, const float *target, int n, float scale), (dlogits, \
        logits, target, n, scale)) \
    KV(k_gather_rows, (float *dst, const float *src, const int32_t *rows, int R, int C), (dst, src, rows, R, C)) \
    KV(k_scatter_add_rows, (float *dst, const float *src, const int32_t *rows, int R, int C), (dst, src, rows, \
        R, C)) \
    KV(k_scatter_rows, (float *dst, const float *src, const int32_t *rows, int R, int N, int C), (dst, src, \
        rows, R, N, C)) \
    KV(k_copy, (float *dst, const float *src, long n), (dst, src, n)) \
    KV(k_zero, (float *x, long n), (x, n)) \
    KV(k_add, (float *dst, const float *src, long n), (dst, src, n)) \
    KR(float, k_read_scalar, (const float *x), (x)) \
    KV(k_wait, (void), ()) \
    KR(void *, k_alloc, (size_t bytes), (bytes)) \
    KR(size_t, k_memory_bytes, (void), ()) \
    KV(k_free, (void *p), (p)) \
    KV(k_upload, (void *dst, const void *host_src, size_t bytes), (dst, host_src, bytes)) \
    KV(k_download, (void *host_dst, const void *src, size_t bytes), (host_dst, src, bytes)) \
    KR(void *, k_map, (void *p, size_t bytes, bool read), (p, bytes, read)) \
    KV(k_unmap, (void *p, void *host, size_t bytes, bool write), (p, host, bytes, write)) \
    KR(double, k_sum_squares, (const float *x, size_t n), (x, n)) \
    KV(k_scale, (float *x, size_t n, float s), (x, n, s)) \
    KR(size_t, k_count_nonfinite, (const float *x, size_t n), (x, n)) \
    KR(double, k_lamb_moments, (float *m, float *v, const float *g, const float *w, size_t n, const LambArgs \
        *a), (m, v, g, w, n, a)) \
    KV(k_lamb_update, (float *w, const float *m, const float *v, size_t n, float ratio, const LambArgs *a), (w, \
        m, v, n, ratio, a)) \
    KV(k_adamw_update, (float *w, float *m, float *v, const float *g, size_t n, const AdamWArgs *a), (w, m, v, \
        g, n, a)) \
    KV(k_sum_squares_each, (double *out, const float *const *x, const size_t *n, int count), (out, x, n, count)) \
    KV(k_lamb_moments_each, (double *out, float *const *m, float *const *v, const float *const *g, const float \
        *const *w, const size_t *n, const LambArgs *args, int count), (out, m, v, g, w, n, args, count)) \
    KV(k_lamb_update_each, (float *const *w, const float *const *m, const float *const *v, const size_t *n, \
        const float *ratio, const LambArgs *args, int count), (w, m, v, n, ratio, args, count)) \
    KV(k_adamw_update_each, (float *const *w, float *const *m, float *const *v, const float *const *g, const \
        size_t *n, const AdamWArgs *args, int count), (w, m, v, g, n, args, count)) \
    KV(k_fill, (float *x, size_t n, float value), (x, n, value)) \
    KV(k_truncated_normal, (float *x, size_t n, float std, uint64_t key), (x, n, std, key)) \
    KR(long, k_count_argmax_matches, (const float *logits, const int32_t *labels, int M, int V, long *labelled), \
        (logits, labels, M, V, labelled))

#endif
