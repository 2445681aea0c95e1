/* A process's place in a multi-process job, from what MPI launchers and Slurm put in the
 * environment (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS): no MPI
 * library is needed to read it. Rank 0 of 1 when none is set. */
#ifndef BERT_CORE_LAUNCHER_H
#define BERT_CORE_LAUNCHER_H

void launcher_rank(int *rank, int *world_size);
/* The process's rank among those of its job on this machine (OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK): which GPU it takes. 0 when none is set. */
int launcher_local_rank(void);

#endif
