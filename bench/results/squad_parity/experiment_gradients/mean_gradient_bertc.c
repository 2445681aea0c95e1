/* throwaway: the mean gradient of the training-mode SQuAD span loss over N dropout draws,
 * at real shapes (B sequences of 384), and the dropout-off gradient; for a comparison with
 * transformers on the same weights and batch */
#include "model/bert.h"
#include "probe_batch.h"
#include "core/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int N = argc > 1 ? atoi(argv[1]) : 32, B = argc > 2 ? atoi(argv[2]) : 8, T = 384; const char *dir = argc > 3 ? argv[3] : "/tmp/fd", *tag = argc > 4 ? argv[4] : "bertc";
    BertModel *m; BertError err; int init;
    if (bert_open_checkpoint(&m, dir, NULL, (BertHeads){BERT_HEADS_QA, 0}, B, T, 1, &init, &err)) { printf("%s\n", err.msg); return 1; }
    ProbeBatch pb;
    BertBatch bt = probe_batch(&pb, B, T);
    FILE *f = fopen("/tmp/fd/batch.bin", "wb");
    fwrite(&B, 4, 1, f); fwrite(&T, 4, 1, f);
    fwrite(pb.ids, 4, B * T, f); fwrite(pb.types, 4, B * T, f); fwrite(pb.mask, 4, B * T, f); fwrite(pb.starts, 4, B, f); fwrite(pb.ends, 4, B, f);
    fclose(f);
    size_t np = bert_num_parameters(m); int nt = bert_num_param_tensors(m);
    double *sum = calloc(np, 8), *sq = calloc(nt, 8), lsum = 0, lsq = 0;
    for (int k = 0; k < N; k++) {
        bert_zero_grad(m);
        double l = bert_forward(m, &bt, true, 1000 + k);
        bert_backward(m, &bt);
        const float *g = bert_grads(m);
        lsum += l, lsq += l * l;
        for (size_t i = 0; i < np; i++) sum[i] += g[i];
        for (int t = 0; t < nt; t++) {
            const BertParamInfo *in = bert_param_info(m, t); double s = 0;
            for (size_t i = 0; i < in->numel; i++) s += (double)g[in->offset + i] * g[in->offset + i];
            sq[t] += s;
        }
    }
    bert_zero_grad(m);
    double l0 = bert_forward(m, &bt, false, 0);
    bert_backward(m, &bt);
    const float *g0 = bert_grads(m);
    char path_bin[256], pt[256]; snprintf(path_bin, sizeof path_bin, "/tmp/fd/%s_grads.bin", tag); snprintf(pt, sizeof pt, "/tmp/fd/%s_grads.txt", tag);
    FILE *out = fopen(path_bin, "wb"), *idx = fopen(pt, "w");
    fprintf(idx, "N %d loss_mean %.8f loss_sd %.8f eval_loss %.8f\n", N, lsum / N, sqrt((lsq - lsum * lsum / N) / (N - 1)), l0);
    for (int t = 0; t < nt; t++) {
        const BertParamInfo *in = bert_param_info(m, t);
        fprintf(idx, "%s %zu %.10g\n", in->name, in->numel, sq[t]);
        for (size_t i = 0; i < in->numel; i++) { double v = sum[in->offset + i] / N; fwrite(&v, 8, 1, out); }
        for (size_t i = 0; i < in->numel; i++) { double v = g0[in->offset + i]; fwrite(&v, 8, 1, out); }
    }
    fclose(out); fclose(idx);
    printf("done: loss mean %.5f, eval %.5f\n", lsum / N, l0);
    return 0;
}
