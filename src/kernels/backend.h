/* Which backend runs the kernels (kernels.h): the CPU's, built in and used unless told
 * otherwise, or CUDA's, a shared library (libbert_cuda.so, `make GPU=cuda`) loaded at run time,
 * so that ./bert needs no CUDA to build or run and one binary serves both (`--device cuda`).
 * The choice is the process's, made once at a command's start, before any backend memory is
 * allocated: memory from one backend means nothing to another. */
#ifndef BERT_KERNELS_BACKEND_H
#define BERT_KERNELS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Selects the backend by name: "cpu" or "cuda". For "cuda" the library is $BERT_CUDA_LIB, else
 * libbert_cuda.so beside the executable, else build-cuda/libbert_cuda.so; it must export every
 * kernel, and a GPU must be present. false with the reason in err (nothing changed) otherwise,
 * and when memory was already allocated from another backend. */
bool k_backend_use(const char *name, char *err, size_t errlen);
/* "cpu" or "cuda": the backend the kernels run on now. */
const char *k_backend_name(void);
/* One line on what runs the kernels: the CPU's products (k_bf16_describe), or the GPU's name. */
void k_backend_describe(char *out, size_t n);

/* The kernel profile: from k_profile_start on, every kernels.h call is timed, until
 * k_profile_stop. On the CPU a call's time is to its return. On the GPU, events recorded on the
 * stream around each call give its time on the GPU without stopping the pipeline (the CUDA
 * library's k_cuda_profile_*; a library without them is timed by synchronising after each call,
 * which slows the run: then the timings are the kernels', not the run's). k_profile_print
 * writes the table, per kernel, divided by per (e.g. the steps profiled), largest first. */
void k_profile_start(void);
void k_profile_stop(void);
void k_profile_print(FILE *out, int per);

/* A backend's collectives (kernels.h's k_collectives_* and k_collective_*, the same
 * signatures), looked up together in the CUDA library: a library without them has none. */
typedef struct {
    size_t (*id_bytes)(void);
    bool (*new_id)(void *id, char *err, size_t errlen);
    bool (*open)(const void *id, int rank, int size, char *err, size_t errlen);
    void (*close)(void);
    int (*sum)(float *buf, size_t count, int wire, int root);
    int (*share_parts)(float *x, const size_t *lo);
    int (*test)(int ticket, char *err, size_t errlen);
    void (*abort)(void);
} KCollectives;

#ifdef BERT_TEST_HOOKS
/* Test builds: collectives a test stands in for the CPU backend's none (tests/test_comm.c: a
 * group of one shaped like a GPU's, so that train/comm.c's paths for a device's memory run on
 * the CPU). NULL: none, as in ./bert. */
extern const KCollectives *test_hook_collectives;
#endif

#endif
