/* The emulated CUDA library's other kernels: every kernels.h function that the emulated .cu
 * files do not define runs on the CPU backend (cpu_k_*, from the test program that loads the
 * library: it is linked with -rdynamic). The definitions here are weak: an emulated file's
 * definition of the same name replaces one when the library is linked. Device memory is host
 * memory on both sides. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend_functions.h"
#include "kernels/kernels.h"

#define DECLARE_R(ret, name, params, args) ret cpu_##name params;
#define DECLARE_V(name, params, args) void cpu_##name params;
K_FUNCTIONS(DECLARE_R, DECLARE_V)
#define FORWARD_R(ret, name, params, args) __attribute__((weak)) ret name params { return cpu_##name args; }
#define FORWARD_V(name, params, args) __attribute__((weak)) void name params { cpu_##name args; }
K_FUNCTIONS(FORWARD_R, FORWARD_V)

int k_cuda_devices(void) { return 1; }
