/* `bert check_shards DIR|FILE ...`: reads every HDF5 shard in a child process and validates
 * it, so a corrupt file is named before a training run meets it (libhdf5 itself can crash
 * on one: that becomes a message here, not a dead trainer). Exit 1 if any file is bad. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/common.h"
#include "data/hdf5_shard.h"

static void print_bad(const char *msg, void *ctx) {
    (void)ctx;
    fprintf(stderr, "bad: %s\n", msg);
}

int cmd_check_shards(int argc, char **argv) {
    int vocab_size = 30522, max_seq_length = 0, max_predictions = 0;
    Flag flags[] = {
        {"vocab_size", FLAG_INT, &vocab_size, "ids must be below it; default 30522 (BERT's uncased vocabulary)"},
        {"max_seq_length", FLAG_INT, &max_seq_length, "required sequence length (default: any)"},
        {"max_predictions_per_seq", FLAG_INT, &max_predictions, "required masked slots (default: any)"},
    };
    char *inputs[256];
    int n_inputs = 0;
    FlagSpec spec = {"check_shards", "check_shards DIR|FILE.hdf5 ...   (every shard read and validated in a child "
                                     "process)", flags, 3, 1, 256};
    int rc = flags_parse(&spec, argc, argv, inputs, &n_inputs);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (vocab_size < 1 || max_seq_length < 0 || max_predictions < 0) {
        fprintf(stderr, "bert check_shards: --vocab_size must be >= 1, the lengths >= 0\n");
        return 2;
    }
    ShardCheck c = {0};
    BertError err;
    for (int i = 0; i < n_inputs; i++) {
        struct stat st;
        if (stat(inputs[i], &st) != 0) {
            fprintf(stderr, "bert check_shards: no such file or folder '%s'\n", inputs[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            if (hdf5_check_shard_folder(inputs[i], NULL, ".hdf5", max_seq_length, max_predictions, vocab_size, &c, print_bad,
                                        NULL, &err) < 0) {
                fprintf(stderr, "bert check_shards: %s\n", err.msg);
                return 1;
            }
            continue;
        }
        size_t rows = 0;
        c.files++;
        if (hdf5_shard_check(inputs[i], max_seq_length, max_predictions, vocab_size, &rows, &err) != 0)
            c.bad++, print_bad(err.msg, NULL);
        else
            c.rows += rows;
    }
    printf("bert check_shards: %ld files, %zu sequences in the good ones; %ld bad\n", c.files, c.rows, c.bad);
    if (c.files == 0) fprintf(stderr, "bert check_shards: no *.hdf5 files found\n");
    return c.bad || c.files == 0 ? 1 : 0;
}
