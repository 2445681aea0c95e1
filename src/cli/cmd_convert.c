/* `bert convert IN -o DIR`: a checkpoint bert.c reads (safetensors, NVIDIA's .pt, HF's
 * pytorch_model.bin, Google's TensorFlow bert_model.ckpt) as a HuggingFace model folder:
 * model.safetensors under HF's names + config.json (+ vocab.txt, tokenizer_config.json), which
 * transformers' from_pretrained loads with no missing or unexpected tensors. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "model/bert.h"

int cmd_convert(int argc, char **argv) {
    const char *init = NULL, *config = NULL, *vocab_file = NULL, *output_dir = NULL;
    const Flag flags[] = {
        {"init_checkpoint", FLAG_STRING, &init,
         "the checkpoint (or give it as the argument): a folder, a .safetensors / .pt / .bin file, a TensorFlow "
         "prefix (bert_model.ckpt) or its .index, or a bert pretrain --output_dir (its newest complete checkpoint)"},
        {"config_file", FLAG_STRING, &config,
         "its configuration; default config.json or bert_config.json beside it (HF's, Google's and NVIDIA's read alike)"},
        {"vocab_file", FLAG_STRING, &vocab_file, "vocab.txt to copy into the folder; default the checkpoint folder's"},
        {"output_dir", FLAG_STRING, &output_dir, "the HF model folder to write (required; also -o)"},
        {"o", FLAG_STRING, &output_dir, "same as --output_dir"},
    };
    const FlagSpec spec = {"convert", "convert CHECKPOINT -o DIR [--config_file F] [--vocab_file F]", flags,
                           (int)(sizeof flags / sizeof flags[0]), 0, 1};
    char *positional[1];
    int npos = 0;
    int rc = flags_parse(&spec, argc, argv, positional, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (npos && init) return fprintf(stderr, "bert convert: give the checkpoint once (argument or --init_checkpoint)\n"), 2;
    if (npos) init = positional[0];
    if (!init) return fprintf(stderr, "bert convert: the checkpoint to convert is required (bert convert IN -o DIR)\n"), 2;
    if (!output_dir) return fprintf(stderr, "bert convert: -o DIR (the folder to write) is required\n"), 2;
    char newest[4096 + 64];   /* a bert pretrain run folder: its newest complete checkpoint, as glue and squad take it */
    if (flags_init_checkpoint("convert", &init, newest, sizeof newest) != 0) return 1;
    BertConvertResult r;
    BertError err;
    if (bert_convert_checkpoint(init, config, vocab_file, output_dir, &r, &err) != 0)
        return fprintf(stderr, "bert convert: %s\n", err.msg), 1;
    printf("bert convert: %s checkpoint %s -> %s/model.safetensors: %d tensors (%s; %d layers, hidden %d, "
           "vocabulary %d rows%s), config.json from %s\n",
           r.format, r.source.weights, output_dir, r.tensors, r.architecture, r.source.cfg.num_hidden_layers,
           r.source.cfg.hidden_size, r.source.cfg.vocab_size,
           r.source.cfg.vocab_size != r.source.config_vocab_size ? ", padded past the configuration's" : "",
           r.source.config);
    return 0;
}
