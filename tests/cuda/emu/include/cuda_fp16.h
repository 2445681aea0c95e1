/* The 16-bit types as the emulator's wmma reads them: bits only. */
#ifndef BERT_CUDA_EMU_FP16_H
#define BERT_CUDA_EMU_FP16_H
#include <stdint.h>
struct __half { uint16_t bits; };
#endif
