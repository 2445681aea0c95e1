/* Checkpoint folders: OUTPUT_DIR/ckpt_<step>/, written so that a folder with that name is
 * always complete.
 *
 * A checkpoint is first written into a hidden temporary folder (".ckpt_<step>.tmp.<pid>",
 * which no reader takes for a checkpoint), every file in it is fsynced, then the folder,
 * then it is renamed to ckpt_<step> and the parent folder is fsynced. A kill or a full disk
 * at any point leaves either the previous checkpoints alone or the new one whole. What goes
 * into the folder is the caller's (model.safetensors, optimizer state, state.json, ...):
 * checkpoint_save calls back to write it. Of the checkpoints a run wrote, the last
 * `keep_last` are kept; a checkpoint another run wrote in the same folder is never deleted
 * (issue 35, D1/D2: a new run in a folder holding a longer run's higher steps deleted each of
 * its own checkpoints as it wrote it; phase 2 deleted phase 1's final checkpoint). A deleted
 * checkpoint is renamed to a hidden ".ckpt_<step>.del.<pid>" before its files go, so a kill
 * never leaves a ckpt_<step> with part of its files. */
#ifndef BERT_TRAIN_CHECKPOINT_H
#define BERT_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/common.h"

/* Writes the checkpoint's files into `dir` (an empty folder that exists). */
typedef int (*CheckpointWriter)(const char *dir, void *ctx, BertError *err);

/* The checkpoints a run has written, oldest first: the only ones its saves delete. A resumed
 * run starts with those of the run it continues (the caller knows which: pre-training
 * records a run id in state.json). */
typedef struct {
    long *steps;
    int count, cap;
} CheckpointHistory;
void checkpoint_history_add(CheckpointHistory *h, long step);   /* moved to the end if there */
void checkpoint_history_free(CheckpointHistory *h);

/* Writes OUTPUT_DIR/ckpt_<step> through `write`, replacing an existing ckpt_<step> (a rerun
 * of the same step), adds it to `written`, then deletes the oldest of `written` while it holds
 * more than keep_last (keep_last <= 0 or written NULL: nothing is deleted). The newest, just
 * written, is never deleted. The folder's path goes to saved_path when non-NULL. The hidden
 * folders of processes that no longer run (being written, deleted or replaced when killed) are
 * removed first (one being replaced is put back when nothing took its name; every listing
 * below puts it back too, so a resume after a kill between the replacement's two renames finds
 * that step). */
int checkpoint_save(const char *output_dir, long step, int keep_last, CheckpointHistory *written,
                    CheckpointWriter write, void *ctx, char *saved_path, size_t saved_path_len, BertError *err);

/* checkpoint_save, checkpoint_find_latest and checkpoint_list for folders named
 * <prefix><step> (fine-tuning's "checkpoint-", HuggingFace's name) instead of ckpt_<step>; the
 * hidden temporaries are ".<prefix><step>.tmp.<pid>" and so on. */
int checkpoint_save_named(const char *output_dir, const char *prefix, long step, int keep_last,
                          CheckpointHistory *written, CheckpointWriter write, void *ctx, char *saved_path,
                          size_t saved_path_len, BertError *err);
int checkpoint_find_latest_named(const char *output_dir, const char *prefix, const char *required_file, char *path,
                                 size_t path_len, long *step, BertError *err);
int checkpoint_list_named(const char *output_dir, const char *prefix, long **steps, int *count, BertError *err);
/* Deletes OUTPUT_DIR/<prefix><step> (absent: nothing to do) as a save's pruning does: renamed
 * to ".<prefix><step>.del.<pid>" before its files go, so that a kill part-way never leaves a
 * <prefix><step> with some of its files (the next save removes what is left). */
int checkpoint_remove_named(const char *output_dir, const char *prefix, long step, BertError *err);

/* The newest complete checkpoint in output_dir: returns 1 and fills path and step, 0 when
 * there is none (or output_dir does not exist), -1 on an error reading the folder. A
 * folder counts when its name is ckpt_<digits> and it holds `required_file` (e.g.
 * "state.json", the file a writer writes last). */
int checkpoint_find_latest(const char *output_dir, const char *required_file, char *path, size_t path_len,
                           long *step, BertError *err);

/* What a command's --init_checkpoint names, made the model to load (issue 36): a weights file,
 * or a folder holding model.safetensors (a HuggingFace model folder, a checkpoint, a
 * fine-tuned model), is taken as it is: returns 0 with `out` = path. A `bert pretrain
 * --output_dir` run folder (no model.safetensors, ckpt_<N> subfolders) gives its newest
 * complete checkpoint: the largest N (in numbers: ckpt_100 after ckpt_99) whose state.json is
 * whole JSON and which holds model.safetensors (a folder being written, ".ckpt_<N>.tmp.<pid>",
 * or deleted is never one); returns 1 with `out` = RUN/ckpt_<N> and *step = N (step may be
 * NULL). The vocab.txt, tokenizer_config.json and config.json a command takes by default come
 * from `out`. -1 with err naming what was looked for: no such path, a folder with neither
 * model.safetensors nor a complete ckpt_<N>, or a path longer than out_len. */
int checkpoint_resolve_model(const char *path, char *out, size_t out_len, long *step, BertError *err);

/* Every checkpoint step in output_dir, ascending (caller frees *steps). */
int checkpoint_list(const char *output_dir, long **steps, int *count, BertError *err);

/* Small JSON files inside a checkpoint: written atomically (temporary name, fsync, rename),
 * read back with a clear error naming the file. */
int checkpoint_write_json(const char *dir, const char *name, const cJSON *json, BertError *err);
int checkpoint_read_json(const char *dir, const char *name, cJSON **out, BertError *err);

/* Digests of a checkpoint's files, recorded in its last file and checked when it is loaded
 * (issue 35, D5: a flipped bit in the weights was loaded without a word and carried into every
 * later checkpoint): {"<name>": {"bytes": n, "crc32": "<8 hex digits>"}, ...} for every regular
 * file directly in dir but `except` (the file that records them). CRC-32 as zlib's and
 * Python's zlib.crc32 compute it. NULL with err set when a file cannot be read. */
cJSON *checkpoint_digest_files(const char *dir, const char *except, BertError *err);
/* 0 when every file in `digests` has its recorded size and CRC-32; else -1 naming the first that
 * differs, is missing or cannot be read. */
int checkpoint_verify_files(const char *dir, const cJSON *digests, BertError *err);
/* The CRC-32 of a file (zlib's); -1 with err set when it cannot be read. */
int file_crc32(const char *path, uint32_t *crc, uint64_t *bytes, BertError *err);

/* Deletes a folder and everything below it (no symlinks followed). */
int fs_remove_tree(const char *path, BertError *err);

#endif
