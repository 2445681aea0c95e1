/* Keeping the libraries' products (oneDNN's, OpenBLAS's) on the calling thread inside the CPU
 * kernels' own OpenMP regions.
 *
 * oneDNN and OpenBLAS (their OpenMP builds) run a product on omp_get_max_threads() threads
 * unless omp_in_parallel(). Inside a kernel's region that its if clause made inactive (small
 * work: one thread), omp_in_parallel() is 0, so oneDNN started a nested team there: libgomp creates a
 * nested team's threads anew each time, and they spun beside the outer team's (measured on 2
 * cores: all-MiniLM-L6-v2 `bert embed --int8 --batch_size 1`, 55 sentences/s against 930 on one
 * thread; 36 threads created for 3 sentences). */
#ifndef BERT_KERNELS_CPU_TEAM_H
#define BERT_KERNELS_CPU_TEAM_H

#include <omp.h>
#include <stdbool.h>

/* Before a library's product: one thread inside any region of ours (active or not), and where
 * the caller asks (small: a product too small to share); outside, the library's own team.
 * Returns what library_team_end restores (0: nothing changed). */
static inline int library_team_begin_for(bool small) {
    if (omp_get_level() == 0 && !small) return 0;
    const int threads = omp_get_max_threads();
    if (threads <= 1) return 0;
    omp_set_num_threads(1);
    return threads;
}

static inline int library_team_begin(void) { return library_team_begin_for(false); }

static inline void library_team_end(int saved) {
    if (saved) omp_set_num_threads(saved);
}

#endif
