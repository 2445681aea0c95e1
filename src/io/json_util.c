#include "io/json_util.h"

#include <string.h>

const cJSON *json_get_last(const cJSON *obj, const char *key) {
    const cJSON *found = NULL, *item;
    cJSON_ArrayForEach(item, obj)
        if (item->string && strcmp(item->string, key) == 0) found = item;
    return found;
}
