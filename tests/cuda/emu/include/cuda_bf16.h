#ifndef BERT_CUDA_EMU_BF16_H
#define BERT_CUDA_EMU_BF16_H
#include <stdint.h>
struct __nv_bfloat16 { uint16_t bits; };
#endif
