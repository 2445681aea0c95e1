/* A model loaded for inference (tasks/infer_model.h). */
#include "tasks/infer_model.h"

#include <string.h>

#include "io/tokenizer_files.h"
#include "model/config.h"

int infer_model_open(const InferModelOptions *o, BertHeads heads, int max_batch, InferModel *em, BertError *err) {
    memset(em, 0, sizeof *em);
    int max_seq = o->max_seq_length;
    if (max_seq <= 0) {   /* sentence-transformers' 256, within the model's positions */
        BertCheckpointInfo ck;
        BertError cerr;
        max_seq = bert_checkpoint_inspect(o->init_checkpoint, o->config_file, &ck, &cerr) == 0 &&
                          ck.cfg.max_position_embeddings < 256
                      ? ck.cfg.max_position_embeddings : 256;
    }
    TokenizerFolder folder;   /* the vocabulary: the flag's, else the model folder's */
    tokenizer_folder_read(o->init_checkpoint, &folder);
    const char *vocab_path = o->vocab_file ? o->vocab_file : folder.vocab_file[0] ? folder.vocab_file : NULL;
    if (!vocab_path) return bert_fail(err, "--vocab_file is required: %s has no vocab.txt", folder.dir);
    Vocab *vocab = NULL;
    BertModel *m = NULL;
    int dummy;
    if (vocab_load(&vocab, vocab_path, err) != 0 ||
        bert_open_checkpoint(&m, o->init_checkpoint, o->config_file, heads, max_batch,
                             max_seq, 0, &dummy, err) != 0 ||
        bert_set_precision(m, o->bf16 ? BERT_BF16 : o->int8 ? BERT_INT8 : BERT_FP32, err) != 0) {
        vocab_free(vocab), bert_model_free(m);
        return -1;
    }
    /* a vocabulary of another model (a cased one with an uncased model, say) would give other
     * vectors without an error: its size must be the model's, as glue and squad require */
    if (!bert_vocab_fits(vocab_size(vocab), bert_model_config(m)->vocab_size)) {
        bert_fail(err, "the vocabulary %s has %d tokens but %s's model has %d: not the checkpoint's vocabulary",
                  vocab_path, vocab_size(vocab), o->init_checkpoint,
                  bert_model_config(m)->vocab_size);
        vocab_free(vocab), bert_model_free(m);
        return -1;
    }
    /* the weights never change here, and the model only infers: its layers share their activations */
    bert_set_packed_weights(m, true), bert_set_mode(m, BERT_MODE_FORWARD_ONLY);
    TokenizerOptions to = tokenizer_default_options();
    to.do_lower_case = o->do_lower_case;
    *em = (InferModel){.model = m, .vocab = vocab, .tok = tokenizer_new(vocab, &to), .max_seq = max_seq,
                       .heads_initialised = dummy};
    return 0;
}

void infer_model_close(InferModel *em) {
    tokenizer_free(em->tok), vocab_free(em->vocab), bert_model_free(em->model);
    memset(em, 0, sizeof *em);
}
