/* `bert squad_eval DATASET PREDICTIONS [--version 1.1|2.0] [--na_prob_file F]
 * [--na_prob_thresh 1.0] [--out_file F]`: SQuAD's official metrics as JSON, printed as
 * evaluate-v1.1.py / evaluate-v2.0.py print them (src/tasks/squad_eval.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/common.h"
#include "tasks/squad_eval.h"

static void print_note(const char *line, void *ctx) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

int cmd_squad_eval(int argc, char **argv) {
    const char *version = "1.1", *na_prob_file = NULL, *out_file = NULL;
    double na_prob_thresh = NAN;
    Flag flags[] = {
        {"version", FLAG_STRING, &version, "1.1 (evaluate-v1.1.py, default) or 2.0 (evaluate-v2.0.py: no-answer questions)"},
        {"na_prob_file", FLAG_STRING, &na_prob_file, "2.0: JSON {question id: probability of no answer}; adds best_exact, "
                                                    "best_f1 and their thresholds"},
        {"na_prob_thresh", FLAG_DOUBLE, &na_prob_thresh, "2.0: predict no answer where the probability exceeds it "
                                                         "(default 1.0)"},
        {"out_file", FLAG_STRING, &out_file, "write the metrics there (one line, as the v2.0 script's --out-file) "
                                             "instead of printing them"},
    };
    char *inputs[2];
    int n_inputs = 0;
    FlagSpec spec = {"squad_eval", "squad_eval DATASET.json PREDICTIONS.json   (official SQuAD v1.1 / v2.0 metrics, "
                                   "JSON on stdout)", flags, 4, 2, 2};
    int rc = flags_parse(&spec, argc, argv, inputs, &n_inputs);
    if (rc != 0) return rc > 0 ? 0 : 2;
    SquadVersion v;
    if (!strcmp(version, "1.1")) v = SQUAD_V1_1;
    else if (!strcmp(version, "2.0")) v = SQUAD_V2_0;
    else {
        fprintf(stderr, "bert squad_eval: --version must be 1.1 or 2.0, not '%s'\n", version);
        return 2;
    }
    if (v == SQUAD_V1_1 && (na_prob_file || !isnan(na_prob_thresh))) {
        fprintf(stderr, "bert squad_eval: --na_prob_file and --na_prob_thresh are for --version 2.0\n");
        return 2;
    }
    if (out_file) {
        const char *ins[3] = {inputs[0], inputs[1], na_prob_file};
        for (int i = 0; i < 3; i++)
            if (ins[i] && is_same_file(ins[i], out_file)) {
                fprintf(stderr, "bert squad_eval: --out_file '%s' is input '%s'\n", out_file, ins[i]);
                return 2;
            }
    }
    SquadEvalOptions opt = squad_eval_default_options(v);
    if (!isnan(na_prob_thresh)) opt.na_prob_thresh = na_prob_thresh;
    opt.note = print_note;
    BertError err;
    SquadDataset d;
    SquadPredictions *preds = NULL;
    SquadNaProbs *na = NULL;
    SquadMetrics m;
    rc = 1;
    if (squad_dataset_load(inputs[0], &d, &err) != 0) goto fail_early;
    if (squad_predictions_load(inputs[1], &preds, &err) != 0) goto fail;
    if (na_prob_file && squad_na_probs_load(na_prob_file, &na, &err) != 0) goto fail;
    opt.na_probs = na;
    if (squad_evaluate(&d, preds, &opt, &m, &err) != 0) goto fail;
    char *json = squad_metrics_json(&m, out_file || v == SQUAD_V1_1 ? 0 : 2);
    if (out_file) {
        AtomicFile af;
        if (atomic_open(&af, out_file, &err) != 0) {
            free(json);
            goto fail;
        }
        fputs(json, af.fp);
        if (atomic_commit(&af, &err) != 0) {
            free(json);
            goto fail;
        }
    } else {
        printf("%s\n", json);
    }
    free(json);
    rc = 0;
fail:
    squad_dataset_free(&d);
fail_early:
    if (rc != 0) fprintf(stderr, "bert squad_eval: %s\n", err.msg);
    squad_predictions_free(preds);
    squad_na_probs_free(na);
    return rc;
}
