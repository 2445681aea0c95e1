/* The SQuAD readers and metrics (tasks/squad_eval.h): any bytes as a dataset, a predictions
 * file and a no-answer probability file give a result or a clear error. When they make a
 * dataset, it is evaluated (v1.1 and v2.0) against the input read as predictions and against
 * its own gold answers as predictions, which puts every answer through normalize_answer. */
#include <cjson/cJSON.h>
#include <string.h>

#include "fuzz_util.h"
#include "tasks/squad_eval.h"

static void evaluate_all(const SquadDataset *d, const SquadPredictions *p, const SquadNaProbs *na) {
    for (int v = SQUAD_V1_1; v <= SQUAD_V2_0; v++) {
        SquadEvalOptions o = squad_eval_default_options((SquadVersion)v);
        if (v == SQUAD_V2_0) o.na_probs = na;
        SquadMetrics m;
        BertError err;
        if (squad_evaluate(d, p, &o, &m, &err) == 0) free(squad_metrics_json(&m, v == SQUAD_V2_0 ? 2 : 0));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    if (size) memcpy(text, data, size);
    text[size] = 0;
    BertError err;
    SquadDataset d;
    SquadPredictions *p = NULL;
    SquadNaProbs *na = NULL;
    int have_dataset = squad_dataset_parse(text, size, "fuzz.json", &d, &err) == 0;
    squad_predictions_parse(text, size, "fuzz.json", &p, &err);
    squad_na_probs_parse(text, size, "fuzz.json", &na, &err);
    free(squad_normalize_answer(text, size));
    if (have_dataset) {
        if (p) evaluate_all(&d, p, na);
        cJSON *own = cJSON_CreateObject();
        for (size_t i = 0; i < d.n; i++)
            cJSON_AddStringToObject(own, d.questions[i].id, d.questions[i].n_answers ? d.questions[i].answers[0] : "");
        char *json = cJSON_PrintUnformatted(own);
        SquadPredictions *own_p = NULL;
        if (json && squad_predictions_parse(json, strlen(json), "own.json", &own_p, &err) == 0) evaluate_all(&d, own_p, na);
        squad_predictions_free(own_p);
        free(json);
        cJSON_Delete(own);
        squad_dataset_free(&d);
    }
    squad_predictions_free(p);
    squad_na_probs_free(na);
    free(text);
    return 0;
}
