/* throwaway: finite differences of the SQuAD span loss in training mode at real shapes */
#include "model/bert.h"
#include "probe_batch.h"
#include "core/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int training; static double STEP = 1e-2; static uint64_t seed = 12345;
static double loss_of(BertModel *m, const BertBatch *b) { return bert_forward(m, b, training, seed); }

static double fd(BertModel *m, const BertBatch *b, const float *dir, size_t off, size_t n, double h) {
    float *p = bert_params(m); float *s = malloc(n * 4); memcpy(s, p + off, n * 4);
    for (size_t i = 0; i < n; i++) p[off + i] = s[i] + (float)h * dir[i];
    bert_params_changed(m); double up = loss_of(m, b);
    for (size_t i = 0; i < n; i++) p[off + i] = s[i] - (float)h * dir[i];
    bert_params_changed(m); double dn = loss_of(m, b);
    memcpy(p + off, s, n * 4); bert_params_changed(m); free(s);
    return (up - dn) / (2 * h);
}

int main(int argc, char **argv) {
    training = argc > 1 ? atoi(argv[1]) : 1;
    int B = argc > 2 ? atoi(argv[2]) : 8, T = 384; if (argc > 3) STEP = atof(argv[3]);
    BertModel *m; BertError err; int init;
    if (bert_open_checkpoint(&m, "/tmp/fd", NULL, (BertHeads){BERT_HEADS_QA, 0}, B, T, 1, &init, &err)) { printf("%s\n", err.msg); return 1; }
    printf("dropout %g %g\n", bert_model_config(m)->hidden_dropout_prob, bert_model_config(m)->attention_probs_dropout_prob);
    ProbeBatch pb;
    BertBatch bt = probe_batch(&pb, B, T);
    bert_zero_grad(m);
    double l = loss_of(m, &bt);
    if (bert_backward(m, &bt)) { printf("%s\n", bert_last_error(m)); return 1; }
    size_t np = bert_num_parameters(m);
    float *g = malloc(np * 4), *dir = calloc(np, 4); memcpy(g, bert_grads(m), np * 4);
    double gn = 0, tot = 0; for (size_t i = 0; i < np; i++) gn += (double)g[i] * g[i], tot += fabs(g[i]);
    gn = sqrt(gn); for (size_t i = 0; i < np; i++) dir[i] = g[i] / gn;
    printf("training %d loss %.6f |g| %.5f fd along g %.5f\n", training, l, gn, fd(m, &bt, dir, 0, np, STEP / gn));
    for (int t = 0; t < bert_num_param_tensors(m); t++) {
        const BertParamInfo *in = bert_param_info(m, t); double an = 0;
        for (size_t i = 0; i < in->numel; i++) { float v = g[in->offset + i]; dir[i] = v > 0 ? 1 : v < 0 ? -1 : 0; an += fabs(v); }
        if (an < 1e-6 * tot) continue;
        double f = fd(m, &bt, dir, in->offset, in->numel, STEP / an);
        printf("%-50s analytic %12.6g fd %12.6g rel %+.4f%s\n", in->name, an, f, (f - an) / an, fabs(f - an) > 2e-2 * an ? "  <<<" : "");
    }
    return 0;
}
