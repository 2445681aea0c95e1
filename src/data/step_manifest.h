/* What `prepare --resume` trusts: a finished step's record of its inputs and outputs as they
 * were when it finished (path, size, modification time to the nanosecond), in a small JSON
 * file beside its outputs. A step is skipped only when every input and every output is still
 * as recorded; a file rewritten, grown, shrunk or replaced (even by an older one) runs the
 * step again. Modification times alone were not enough: rerunning the format step gave its
 * unchanged outputs new times, and every HDF5 shard after it then looked stale. */
#ifndef BERT_DATA_STEP_MANIFEST_H
#define BERT_DATA_STEP_MANIFEST_H

#include <stdbool.h>

#include "core/common.h"

typedef struct StepManifest StepManifest;

/* The records in the manifest files `pattern` (a glob: one per rank) names; none is fine. */
StepManifest *step_manifest_load(const char *pattern);
void step_manifest_free(StepManifest *m);

/* Whether some record has exactly these outputs, inputs and options string, and every file
 * is as it was recorded. */
bool step_manifest_done(const StepManifest *m, const char *const *outputs, int n_outputs,
                        const char *const *inputs, int n_inputs, const char *options);

/* Adds a record of these files as they are now (replacing one with the same outputs) and
 * writes the whole manifest to path atomically. Not thread-safe: callers serialise. */
int step_manifest_record(StepManifest *m, const char *path, const char *const *outputs, int n_outputs,
                         const char *const *inputs, int n_inputs, const char *options, BertError *err);

#endif
