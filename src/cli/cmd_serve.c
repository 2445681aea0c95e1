/* `bert serve`: the model behind HTTP with dynamic batching (serve/server.h, docs/serving.md). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/common.h"
#include "io/tokenizer_files.h"
#include "serve/server.h"

/* "true" / "false" for --truncate (a value, as text-embeddings-inference's flag takes one). */
static int parse_truthy(const char *v, bool *out) {
    if (!strcmp(v, "true") || !strcmp(v, "1")) return *out = true, 0;
    if (!strcmp(v, "false") || !strcmp(v, "0")) return *out = false, 0;
    return -1;
}

int cmd_serve(int argc, char **argv) {
    ServeOptions o = serve_default_options();
    const char *init = NULL, *truncate = "true", *device = NULL;
    bool tf32 = false;
    int lower = FLAG_UNSET, threads = 0;
    long max_body = o.max_body_bytes;
    const Flag flags[] = {
        {"init_checkpoint", FLAG_STRING, &init, "a model folder (weights, config.json, vocab.txt) or a run folder (required)"},
        {"config_file", FLAG_STRING, &o.config_file, "config.json when --init_checkpoint is a file"},
        {"vocab_file", FLAG_STRING, &o.vocab_file, "default: the model folder's vocab.txt"},
        {"do_lower_case", FLAG_TRIBOOL, &lower, "default: what the model folder's tokenizer files say (as bert embed)"},
        {"task", FLAG_STRING, &o.task, "embed (mean-pooled, L2-normalised sentence embeddings: /v1/embeddings, /embed), classify (a fine-tuned "
         "sequence classifier, e.g. bert glue's: /predict, /rerank) or qa (a SQuAD model, e.g. bert squad's: /v1/qa); default embed"},
        {"model_name", FLAG_STRING, &o.model_name, "the model id /info and OpenAI's answers show; default the folder's name"},
        {"host", FLAG_STRING, &o.host, "address to listen on; default 127.0.0.1 (loopback only)"},
        {"port", FLAG_INT, &o.port, "default 8080; 0: any free port (printed)"},
        {"bf16", FLAG_BOOL, &o.bf16, "matrix products in bf16 (needs avx512_bf16)"},
        {"int8", FLAG_BOOL, &o.int8, "the encoder's linear layers in int8, as bert embed --int8 (weights per channel, "
                                     "inputs per row, quantized on the fly; VNNI/AMX where the CPU has them)"},
        {"max_seq_length", FLAG_INT, &o.max_seq_length, "tokens per text, [CLS] and [SEP] included; default as bert embed "
         "(qa: 384, as bert squad)"},
        {"doc_stride", FLAG_INT, &o.doc_stride, "qa: between the context's windows; default 128"},
        {"max_query_length", FLAG_INT, &o.max_query_length, "qa: question tokens kept; default 64"},
        {"n_best_size", FLAG_INT, &o.n_best_size, "qa: candidates kept per question; default 20"},
        {"max_answer_length", FLAG_INT, &o.max_answer_length, "qa: longest answer in tokens; default 30"},
        {"version_2_with_negative", FLAG_BOOL, &o.version_2_with_negative, "qa: SQuAD v2.0, questions may have no answer"},
        {"null_score_diff_threshold", FLAG_DOUBLE, &o.null_score_diff_threshold,
         "qa, v2.0: no answer when null score - best score exceeds this; default 0"},
        {"truncate", FLAG_STRING, &truncate, "true: texts longer than max_seq_length are cut as bert embed cuts them; "
                                             "false: answered 413; default true"},
        {"max_batch_tokens", FLAG_INT, &o.max_batch_tokens, "tokens per forward of the compute worker; default 16384"},
        {"max_batch_size", FLAG_INT, &o.max_batch_rows, "texts per forward; default 128"},
        {"max_wait_ms", FLAG_INT, &o.max_wait_ms, "how long the worker waits for a fuller batch; default 2"},
        {"max_queue", FLAG_INT, &o.max_queue, "requests waiting for the worker; beyond: 429; default 512"},
        {"max_client_batch_size", FLAG_INT, &o.max_inputs, "texts in one request; beyond: 413; default 1024"},
        {"max_body_bytes", FLAG_INT64, &max_body, "request body size; beyond: 413; default 4 MiB"},
        {"timeout", FLAG_INT, &o.timeout_s, "seconds an idle or slow connection is kept; default 30"},
        {"max_connections", FLAG_INT, &o.max_connections, "open connections at once; default 512"},
        {"api_key", FLAG_STRING, &o.api_key,
         "require Authorization: Bearer KEY (all but /health); default $BERT_API_KEY (kept out of ps)"},
        {"threads", FLAG_INT, &threads, "OpenMP threads of the compute worker (0: all cores)"},
        {"device", FLAG_STRING, &device, FLAGS_DEVICE_HELP},
        {"tf32", FLAG_BOOL, &tf32, FLAGS_TF32_HELP},
    };
    const FlagSpec spec = {"serve", "serve --init_checkpoint MODEL_DIR [--port 8080] [flags]", flags,
                           (int)(sizeof flags / sizeof flags[0]), 0, 0};
    int rc = flags_parse(&spec, argc, argv, NULL, NULL);
    if (rc) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "init_checkpoint") != 0) return 2;
    if (parse_truthy(truncate, &o.truncate) != 0)
        return fprintf(stderr, "bert serve: --truncate %s: true or false\n", truncate), 2;
    if (flags_use_device("serve", device, tf32) != 0) return 2;
    if (o.bf16 && o.int8) return fprintf(stderr, "bert serve: give at most one of --bf16 and --int8\n"), 2;
    if (o.int8 && flags_int8("serve") != 0) return 2;
    if (threads > 0) omp_set_num_threads(threads);
    o.max_body_bytes = max_body;
    if (!o.api_key && getenv("BERT_API_KEY") && getenv("BERT_API_KEY")[0]) o.api_key = getenv("BERT_API_KEY");
    char init_checkpoint[4096 + 64];   /* a run folder's newest checkpoint */
    if (flags_init_checkpoint("serve", &init, init_checkpoint, sizeof init_checkpoint) != 0) return 1;
    o.init_checkpoint = init;
    /* the vocabulary and casing as bert embed finds them, so the answers are bert embed's */
    TokenizerFolder folder;
    tokenizer_folder_read(init, &folder);
    if (!o.vocab_file && !folder.vocab_file[0])
        return fprintf(stderr, "bert serve: %s has no vocab.txt: give --vocab_file\n", folder.dir), 1;
    if (!o.vocab_file) o.vocab_file = folder.vocab_file;
    BertError err;
    int tokens, cased;
    char note[1024];
    if (tokenizer_vocab_scan(o.vocab_file, &tokens, &cased, &err) != 0)
        return fprintf(stderr, "bert serve: %s\n", err.msg), 1;
    o.do_lower_case = tokenizer_casing(lower, "--do_lower_case", &folder, o.vocab_file, cased, note, sizeof note);
    if (note[0]) fprintf(stderr, "bert serve: %s\n", note);
    if (serve_run(&o, &err) != 0) return fprintf(stderr, "bert serve: %s\n", err.msg), 1;
    return 0;
}
