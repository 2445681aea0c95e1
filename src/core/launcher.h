/* A process's place in a multi-process job, from what MPI launchers and Slurm put in the
 * environment (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS): no MPI
 * library is needed to read it. Rank 0 of 1 when none is set. */
#ifndef BERT_CORE_LAUNCHER_H
#define BERT_CORE_LAUNCHER_H

void launcher_rank(int *rank, int *world_size);

#endif
