/* `bert shard`: one-document-per-line text files -> NVIDIA-style sentence shards
 * (<output_dir>/<prefix>_training_<i>.txt, <prefix>_test_<i>.txt), the input of
 * create_pretraining_data. The flags follow NVIDIA's bertPrep.py. */
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "data/corpus.h"

int cmd_shard(int argc, char **argv) {
    ShardOptions opt = shard_default_options();
    const char *inputs = NULL, *output_dir = NULL, *prefix = opt.output_name_prefix;
    int n_train = opt.n_training_shards, n_test = opt.n_test_shards, threads = 0;
    double fraction = opt.fraction_test_set;
    long long seed = -1;
    bool quiet = false;
    Flag flags[] = {
        {"input_files", FLAG_STRING, &inputs, "comma-separated one-document-per-line files (required)"},
        {"output_dir", FLAG_STRING, &output_dir, "folder for the shards, created if missing (required)"},
        {"output_name_prefix", FLAG_STRING, &prefix, "shard file name prefix (default corpus)"},
        {"n_training_shards", FLAG_INT, &n_train, "training shards (default 256, as NVIDIA)"},
        {"n_test_shards", FLAG_INT, &n_test, "test shards (default 256, as NVIDIA; 0: none, every sentence for training)"},
        {"fraction_test_set", FLAG_DOUBLE, &fraction, "share of sentences for the test shards (default 0.1)"},
        {"random_seed", FLAG_INT64, &seed, "shuffle documents with this seed first (default: none, NVIDIA's exact order)"},
        {"threads", FLAG_INT, &threads, "threads (default: all cores)"},
        {"quiet", FLAG_BOOL, &quiet, "no progress or summary"},
    };
    FlagSpec spec = {"shard",
                     "shard --input_files A.txt,B.txt --output_dir D [flags]",
                     flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "input_files,output_dir") != 0) return 2;
    if (threads < 0 || threads > FLAGS_MAX_THREADS) {
        fprintf(stderr, "bert shard: --threads must be in [0, %d] (0 = all cores)\n", FLAGS_MAX_THREADS);
        return 2;
    }
    char *list = xstrdup(inputs);
    int max_files = list_capacity(inputs);
    const char **files = xcalloc((size_t)max_files, sizeof *files);
    opt.input_files = files;
    opt.n_input_files = split_list(list, files, max_files);
    opt.output_dir = output_dir;
    opt.output_name_prefix = prefix;
    opt.n_training_shards = n_train;
    opt.n_test_shards = n_test;
    opt.fraction_test_set = fraction;
    opt.random_seed = seed;
    opt.n_threads = threads;
    opt.progress = !quiet;
    ShardStats st;
    BertError err;
    rc = shard_corpus(&opt, &st, &err);
    if (rc != 0) {
        fprintf(stderr, "bert shard: %s\n", err.msg);
    } else if (!quiet) {
        fprintf(stderr,
                "bert shard: %lld documents, %lld sentences -> %d training + %d test shards in %s\n"
                "  training shards hold %lld..%lld sentences; %.1f MB in, %.1f MB out, %.2f s "
                "(%.1f MB/s)%s\n",
                st.documents, st.sentences, n_train, n_test, output_dir, st.min_shard_sentences,
                st.max_shard_sentences, st.input_bytes / 1e6, st.output_bytes / 1e6, st.seconds,
                st.input_bytes / 1e6 / (st.seconds > 0 ? st.seconds : 1e-9),
                st.invalid_utf8_bytes ? "; invalid UTF-8 bytes replaced by U+FFFD" : "");
    }
    free(files);
    free(list);
    return rc ? 1 : 0;
}
