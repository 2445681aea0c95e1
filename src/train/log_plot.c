#include "train/log_plot.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/svg_chart.h"

enum { PANEL_LOSS, PANEL_ACCURACY, PANEL_LR, NUM_PANELS };

static int panel_of(const char *key) {
    if (strstr(key, "learning_rate") || strcmp(key, "lr") == 0) return PANEL_LR;
    if (strstr(key, "loss") && !strstr(key, "scale")) return PANEL_LOSS;
    if (strstr(key, "acc")) return PANEL_ACCURACY;
    return -1;
}

/* The global step of a record: a number, or the last number of a list ([epoch, step]). */
static int record_step(const cJSON *step, double *out) {
    if (cJSON_IsNumber(step)) return *out = step->valuedouble, 1;
    if (!cJSON_IsArray(step)) return 0;
    const cJSON *last = NULL, *item;
    cJSON_ArrayForEach(item, step) last = item;
    return last && cJSON_IsNumber(last) ? (*out = last->valuedouble, 1) : 0;
}

static SvgSeries *find_series(SvgPanel *p, const char *name, bool points) {
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->series[i].name, name) == 0) return &p->series[i];
    return svg_panel_series(p, name, points);
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Adds one log's records to the panels; returns how many records it had. */
static long add_log(SvgPanel *panels[NUM_PANELS], const char *path, const char *prefix, BertError *err) {
    char *text;
    if (read_file(path, &text, NULL, err) != 0) return -1;
    long records = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (strncmp(line, "DLLL ", 5) != 0) continue;
        cJSON *rec = cJSON_Parse(line + 5);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(rec, "type");
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(rec, "data");
        double step;
        if (rec && cJSON_IsString(type) && strcmp(type->valuestring, "LOG") == 0 && cJSON_IsObject(data) &&
            record_step(cJSON_GetObjectItemCaseSensitive(rec, "step"), &step)) {
            const cJSON *item;
            int used = 0;
            cJSON_ArrayForEach(item, data) {
                int panel = panel_of(item->string);
                if (panel < 0 || !cJSON_IsNumber(item)) continue;
                char name[128];
                snprintf(name, sizeof name, "%.60s%.60s", prefix, item->string);
                svg_series_add(find_series(panels[panel], name, strncmp(item->string, "eval_", 5) == 0), step,
                               item->valuedouble);
                used = 1;
            }
            records += used;
        }
        cJSON_Delete(rec);
    }
    free(text);
    return records;
}

int training_log_plot(const char *const *logs, int count, const char *title, const char *svg_path, long *records,
                      BertError *err) {
    SvgChart chart = {0};
    snprintf(chart.title, sizeof chart.title, "%s", title);
    snprintf(chart.x_label, sizeof chart.x_label, "optimizer step");
    SvgPanel *panels[NUM_PANELS];
    SvgChart parts[NUM_PANELS];
    memset(parts, 0, sizeof parts);
    const char *titles[NUM_PANELS][2] = {{"Loss", "loss"}, {"Accuracy", "accuracy"}, {"Learning rate", "learning rate"}};
    for (int i = 0; i < NUM_PANELS; i++) panels[i] = svg_chart_panel(&parts[i], titles[i][0], titles[i][1]);
    long total = 0;
    int rc = 0;
    for (int i = 0; i < count && rc == 0; i++) {
        char prefix[160] = "";
        if (count > 1) {   /* series named after their file, without its extension */
            const char *base = base_name(logs[i]), *dot = strrchr(base, '.');
            int len = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
            snprintf(prefix, sizeof prefix, "%.*s: ", len < 120 ? len : 120, base);
        }
        long n = add_log(panels, logs[i], prefix, err);
        if (n < 0) rc = -1;
        else if (n == 0) rc = bert_fail(err, "%s has no DLLL LOG records with a step and numbers to plot", logs[i]);
        total += n > 0 ? n : 0;
    }
    if (rc == 0) {
        /* only the panels that got data, in a fixed order */
        for (int i = 0; i < NUM_PANELS; i++) {
            if (!panels[i]->count) continue;
            SvgPanel *p = svg_chart_panel(&chart, panels[i]->title, panels[i]->y_label);
            p->series = panels[i]->series, p->count = panels[i]->count;
            panels[i]->series = NULL, panels[i]->count = 0;
        }
        rc = svg_chart_write(&chart, svg_path, err);
    }
    for (int i = 0; i < NUM_PANELS; i++) svg_chart_free(&parts[i]);
    svg_chart_free(&chart);
    if (records) *records = total;
    return rc;
}
