/* cJSON helpers shared by the JSON readers (cJSON and core only). */
#ifndef BERT_IO_JSON_UTIL_H
#define BERT_IO_JSON_UTIL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/common.h"

/* obj[key] as Python's json reads it: with a key repeated, the last one counts (cJSON's
 * GetObjectItem finds the first). NULL if obj is NULL or has no such member. */
const cJSON *json_get_last(const cJSON *obj, const char *key);

/* err = "<name>: not valid JSON at line L, column C (byte B)" for text (len bytes) that cJSON
 * stopped reading at `end` (its parse end; NULL or out of range: the start); returns -1. Every
 * JSON reader says where a file is broken the same way, so an editor goes straight there. */
int json_fail_at(BertError *err, const char *name, const char *text, size_t len, const char *end);

#endif
