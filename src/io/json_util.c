#include "io/json_util.h"

#include <string.h>

const cJSON *json_get_last(const cJSON *obj, const char *key) {
    const cJSON *found = NULL, *item;
    cJSON_ArrayForEach(item, obj)
        if (item->string && strcmp(item->string, key) == 0) found = item;
    return found;
}

int json_fail_at(BertError *err, const char *name, const char *text, size_t len, const char *end) {
    size_t at = end && end >= text ? (size_t)(end - text) : 0, line = 1, col = 1;
    if (at > len) at = len;
    for (size_t i = 0; i < at; i++) text[i] == '\n' ? (line++, col = 1) : col++;
    return bert_fail(err, "%s: not valid JSON at line %zu, column %zu (byte %zu)", name, line, col, at);
}
