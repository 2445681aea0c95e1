/* The CPU backend's functions are named cpu_k_* (the k_* names are the dispatch's, kernels/backend.c,
 * which calls these or another backend's): each file of kernels/cpu/ includes this first, so
 * that kernels.h declares, and the file defines and calls, the cpu_ names. */
#ifndef BERT_KERNELS_CPU_NAMES_H
#define BERT_KERNELS_CPU_NAMES_H

#define k_matmul_forward                  cpu_k_matmul_forward
#define k_packed_weight_bytes_f32         cpu_k_packed_weight_bytes_f32
#define k_pack_weight_f32                 cpu_k_pack_weight_f32
#define k_matmul_forward_packed           cpu_k_matmul_forward_packed
#define k_matmul_backward                 cpu_k_matmul_backward
#define k_matmul_forward_half             cpu_k_matmul_forward_half
#define k_matmul_forward_half_out16       cpu_k_matmul_forward_half_out16
#define k_packed_weight_bytes             cpu_k_packed_weight_bytes
#define k_pack_weight                     cpu_k_pack_weight
#define k_matmul_gelu_forward_packed      cpu_k_matmul_gelu_forward_packed
#define k_matmul_gelu_forward_half_packed cpu_k_matmul_gelu_forward_half_packed
#define k_matmul_backward_half            cpu_k_matmul_backward_half
#define k_to_half                         cpu_k_to_half
#define k_from_half                       cpu_k_from_half
#define k_bf16_native_available           cpu_k_bf16_native_available
#define k_bf16_describe                   cpu_k_bf16_describe
#define k_set_tf32                        cpu_k_set_tf32
#define k_int8_support                    cpu_k_int8_support
#define k_int8_describe                   cpu_k_int8_describe
#define k_int8_product_counters           cpu_k_int8_product_counters
#define k_packed_weight_bytes_int8        cpu_k_packed_weight_bytes_int8
#define k_pack_weight_int8                cpu_k_pack_weight_int8
#define k_int8_smoothing                  cpu_k_int8_smoothing
#define k_matmul_forward_int8             cpu_k_matmul_forward_int8
#define k_quantize_rows_int8              cpu_k_quantize_rows_int8
#define k_matmul_forward_int8_rows        cpu_k_matmul_forward_int8_rows
#define k_linear_forward                  cpu_k_linear_forward
#define k_linear_forward_to               cpu_k_linear_forward_to
#define k_linear_act_forward              cpu_k_linear_act_forward
#define k_activation_forward_to           cpu_k_activation_forward_to
#define k_linear_backward                 cpu_k_linear_backward
#define k_linear_act_backward             cpu_k_linear_act_backward
#define k_layernorm_forward               cpu_k_layernorm_forward
#define k_layernorm_backward              cpu_k_layernorm_backward
#define k_gelu_forward                    cpu_k_gelu_forward
#define k_gelu_backward                   cpu_k_gelu_backward
#define k_gelu_forward_half               cpu_k_gelu_forward_half
#define k_gelu_backward_half_out16        cpu_k_gelu_backward_half_out16
#define k_tanh_forward                    cpu_k_tanh_forward
#define k_tanh_backward                   cpu_k_tanh_backward
#define k_dropout                         cpu_k_dropout
#define k_dropout_rows                    cpu_k_dropout_rows
#define k_embeddings_forward              cpu_k_embeddings_forward
#define k_embeddings_backward             cpu_k_embeddings_backward
#define k_attention_forward               cpu_k_attention_forward
#define k_attention_backward              cpu_k_attention_backward
#define k_xent_forward                    cpu_k_xent_forward
#define k_xent_backward                   cpu_k_xent_backward
#define k_mse_forward                     cpu_k_mse_forward
#define k_mse_backward                    cpu_k_mse_backward
#define k_bce_forward                     cpu_k_bce_forward
#define k_bce_backward                    cpu_k_bce_backward
#define k_gather_rows                     cpu_k_gather_rows
#define k_scatter_add_rows                cpu_k_scatter_add_rows
#define k_scatter_rows                    cpu_k_scatter_rows
#define k_copy                            cpu_k_copy
#define k_zero                            cpu_k_zero
#define k_add                             cpu_k_add
#define k_read_scalar                     cpu_k_read_scalar
#define k_wait                            cpu_k_wait
#define k_alloc                           cpu_k_alloc
#define k_free                            cpu_k_free
#define k_upload                          cpu_k_upload
#define k_download                        cpu_k_download
#define k_map                             cpu_k_map
#define k_unmap                           cpu_k_unmap
#define k_sum_squares                     cpu_k_sum_squares
#define k_scale                           cpu_k_scale
#define k_count_nonfinite                 cpu_k_count_nonfinite
#define k_lamb_moments                    cpu_k_lamb_moments
#define k_lamb_update                     cpu_k_lamb_update
#define k_adamw_update                    cpu_k_adamw_update
#define k_sum_squares_each                cpu_k_sum_squares_each
#define k_lamb_moments_each               cpu_k_lamb_moments_each
#define k_lamb_update_each                cpu_k_lamb_update_each
#define k_adamw_update_each               cpu_k_adamw_update_each
#define k_fill                            cpu_k_fill
#define k_truncated_normal                cpu_k_truncated_normal
#define k_count_argmax_matches            cpu_k_count_argmax_matches

#endif
