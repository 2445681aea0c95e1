#include "train/log_plot.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "core/test_hooks.h"
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

/* A panel and its series' names, hashed (index = the series' place: they are only added
 * here). A linear search per value was quadratic in the series of a record (issue 35, D24). */
typedef struct {
    SvgPanel *panel;
    StrMap names;
} PlotPanel;

static SvgSeries *find_series(PlotPanel *p, const char *name, bool points) {
    bool added;
    StrMapEntry *e = strmap_intern(&p->names, name, strlen(name), &added);
    if (!added) return &p->panel->series[strmap_index(&p->names, e)];
    return svg_panel_series(p->panel, name, points);
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Adds one DLLL line's numbers to the panels; 1 if it had any. */
static int add_record(PlotPanel panels[NUM_PANELS], const char *line, const char *prefix) {
    cJSON *rec = cJSON_Parse(line + 5);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rec, "type");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(rec, "data");
    double step;
    int used = 0;
    if (rec && cJSON_IsString(type) && strcmp(type->valuestring, "LOG") == 0 && cJSON_IsObject(data) &&
        record_step(cJSON_GetObjectItemCaseSensitive(rec, "step"), &step)) {
        const cJSON *item;
        cJSON_ArrayForEach(item, data) {
            int panel = panel_of(item->string);
            if (panel < 0 || !cJSON_IsNumber(item)) continue;
            char name[128];
            snprintf(name, sizeof name, "%.60s%.60s", prefix, item->string);
            svg_series_add(find_series(&panels[panel], name, strncmp(item->string, "eval_", 5) == 0), step,
                           item->valuedouble);
            used = 1;
        }
    }
    cJSON_Delete(rec);
    return used;
}

/* Adds one log's records to the panels; returns how many records it had. A line holding
 * a NUL byte is malformed and skipped alone (strchr stopped at it and hid the rest). */
static long add_log(PlotPanel panels[NUM_PANELS], const char *path, const char *prefix, BertError *err) {
    char *text;
    size_t len;
    if (read_file(path, &text, &len, err) != 0) return -1;
    long records = 0;
    for (char *line = text, *end = text + len, *next; line < end; line = next) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        next = nl ? nl + 1 : end;
        if (nl) *nl = '\0';
        if ((size_t)(next - line) < 6 || strncmp(line, "DLLL ", 5) != 0 || memchr(line, '\0', (size_t)(next - line) - 1))
            continue;
        records += add_record(panels, line, prefix);
    }
    free(text);
    return records;
}

/* The finite values of one axis (x: the steps of every panel; y: one panel's) must have a
 * range a chart can scale: 1e308 and -1e308 gave "nan" coordinates and an empty chart. */
static int check_range(SvgPanel *const *panels, int count, bool want_y, BertError *err) {
    double lo = INFINITY, hi = -INFINITY;
    const char *lo_name = "", *hi_name = "";
    for (int i = 0; i < count; i++)
        for (int j = 0; j < panels[i]->count; j++) {
            const SvgSeries *s = &panels[i]->series[j];
            for (size_t k = 0; k < s->n; k++) {
                const double v = want_y ? s->y[k] : s->x[k];
                if (!isfinite(s->x[k]) || !isfinite(s->y[k])) continue;
                if (v < lo) lo = v, lo_name = s->name;
                if (v > hi) hi = v, hi_name = s->name;
            }
        }
    if (lo <= hi && !isfinite(hi - lo))
        return bert_fail(err, "cannot plot: the %s run from %g (%s) to %g (%s), a range too wide to scale",
                         want_y ? "values" : "steps", lo, lo_name, hi, hi_name);
    return 0;
}

int training_log_plot(const char *const *logs, int count, const char *title, const char *svg_path, long *records,
                      BertError *err) {
    SvgChart chart = {0};
    snprintf(chart.title, sizeof chart.title, "%s", title);
    snprintf(chart.x_label, sizeof chart.x_label, "optimizer step");
    SvgPanel *panels[NUM_PANELS];
    PlotPanel plot[NUM_PANELS];
    SvgChart parts[NUM_PANELS];
    memset(parts, 0, sizeof parts);
    const char *titles[NUM_PANELS][2] = {{"Loss", "loss"}, {"Accuracy", "accuracy"}, {"Learning rate", "learning rate"}};
    for (int i = 0; i < NUM_PANELS; i++) {
        plot[i].panel = panels[i] = svg_chart_panel(&parts[i], titles[i][0], titles[i][1]);
        strmap_init(&plot[i].names, 16, true);
    }
    long total = 0;
    int rc = 0;
    for (int i = 0; i < count && rc == 0; i++) {
        char prefix[160] = "";
        if (count > 1) {   /* series named after their file, without its extension */
            const char *base = base_name(logs[i]), *dot = strrchr(base, '.');
            int len = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
            snprintf(prefix, sizeof prefix, "%.*s: ", len < 120 ? len : 120, base);
        }
        long n = add_log(plot, logs[i], prefix, err);
        if (n < 0) rc = -1;
        else if (n == 0) rc = bert_fail(err, "%s has no DLLL LOG records with a step and numbers to plot", logs[i]);
        total += n > 0 ? n : 0;
    }
    if (rc == 0) rc = check_range(panels, NUM_PANELS, false, err);
    for (int i = 0; i < NUM_PANELS && rc == 0; i++) rc = check_range(&panels[i], 1, true, err);
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
    for (int i = 0; i < NUM_PANELS; i++) svg_chart_free(&parts[i]), strmap_free(&plot[i].names);
    svg_chart_free(&chart);
    if (records) *records = total;
    return rc;
}
