/* cJSON helpers shared by the JSON readers (cJSON and core only). */
#ifndef BERT_IO_JSON_UTIL_H
#define BERT_IO_JSON_UTIL_H

#include <cjson/cJSON.h>

/* obj[key] as Python's json reads it: with a key repeated, the last one counts (cJSON's
 * GetObjectItem finds the first). NULL if obj is NULL or has no such member. */
const cJSON *json_get_last(const cJSON *obj, const char *key);

#endif
