/* A C program built against an installed bert.c (tests/check_install.sh): the headers as
 * installed, the library through pkg-config. Loads a model folder and runs a forward. */
#include <math.h>
#include <stdio.h>

#include "model/bert.h"

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: use_bert MODEL_DIR\n"), 2;
    BertModel *m;
    BertError err;
    if (bert_open_checkpoint(&m, argv[1], NULL, (BertHeads){BERT_HEADS_NONE, 0}, 1, 4, 0, NULL, &err) != 0)
        return fprintf(stderr, "use_bert: %s\n", err.msg), 1;
    const int32_t ids[4] = {2, 7, 9, 3}, types[4] = {0}, mask[4] = {1, 1, 1, 1};
    BertBatch b = {.batch = 1, .seq_len = 4, .input_ids = ids, .token_type_ids = types, .attention_mask = mask};
    float loss = bert_forward(m, &b, false, 0), cls[4096];
    bool ok = !isnan(loss) && bert_read_token_output(m, 0, 0, cls);
    printf("use_bert: %zu parameters, hidden %d, [CLS] output[0] %s\n", bert_num_parameters(m),
           bert_model_config(m)->hidden_size, ok && isfinite(cls[0]) ? "finite" : "missing");
    bert_model_free(m);
    return ok ? 0 : 1;
}
