#include "core/launcher.h"

#include <stdlib.h>

void launcher_rank(int *rank, int *world_size) {
    static const char *const pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                           {"PMI_RANK", "PMI_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}};
    *rank = 0, *world_size = 1;
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        const char *r = getenv(pairs[k][0]), *s = getenv(pairs[k][1]);
        if (r && s && atoi(s) >= 1) {
            *rank = atoi(r), *world_size = atoi(s);
            return;
        }
    }
}

int launcher_local_rank(void) {
    static const char *const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const char *v = getenv(names[k]);
        if (v && atoi(v) >= 0) return atoi(v);
    }
    return 0;
}
