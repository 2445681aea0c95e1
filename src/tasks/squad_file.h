/* A SQuAD JSON file read once: its parsed JSON, which the feature side (squad.h:
 * squad_read_file, run_squad's read_squad_examples) and the official evaluation
 * (squad_eval.h: squad_dataset_from_file) each read their own view from, with their own
 * checks and messages. `bert squad` parses its predict file once for both, and cuts the
 * articles it trains or predicts on out of it in memory (squad_file_slice). */
#ifndef BERT_TASKS_SQUAD_FILE_H
#define BERT_TASKS_SQUAD_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"

struct cJSON;

/* Which JSON a reader takes. */
typedef enum {
    /* cJSON's reading: text after the value is ignored, and strings are checked for UTF-8
     * only where they are read. bert squad no longer reads this way (issue 35, D19: training
     * took files that prediction refused); kept for callers that want cJSON's leniency. */
    SQUAD_JSON_CJSON,
    /* What Python's json.load takes, as the official evaluation scripts read it: no byte
     * order mark, UTF-8 throughout, nothing after the value; a string holding \u0000 is
     * refused (cJSON's strings end at NUL). Errors name the line and column. */
    SQUAD_JSON_PYTHON,
} SquadJsonRules;

/* The JSON of text[0..len) (text[len] == '\0'), named `name` in messages. Caller deletes
 * *out (cJSON_Delete). */
int squad_json_parse(const char *text, size_t len, const char *name, SquadJsonRules rules, struct cJSON **out,
                     BertError *err);

typedef struct {
    char *name;            /* the file, for messages */
    struct cJSON *root;    /* the parsed JSON */
} SquadFile;

int squad_file_parse(const char *text, size_t len, const char *name, SquadJsonRules rules, SquadFile *f,
                     BertError *err);
int squad_file_load(const char *path, SquadJsonRules rules, SquadFile *f, BertError *err);
void squad_file_free(SquadFile *f);

/* Keeps the articles [skip, skip + count) of "data" (count <= 0: all from skip; *kept: how
 * many), and with first_answers each question's first answer only (as HF's processor trains
 * on answers[0]; *cut: the answers dropped). Errors: no "data" list, nothing left after skip. */
int squad_file_slice(SquadFile *f, int skip, int count, bool first_answers, int *kept, long *cut, BertError *err);

/* The file's JSON (unformatted) written to path, atomically; f is named path from then on. */
int squad_file_write(SquadFile *f, const char *path, BertError *err);

#endif
