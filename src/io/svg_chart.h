/* Line charts as SVG, written by bert.c itself (no plotting library): panels stacked
 * vertically, each with its own y axis, sharing nothing but the width. A series is drawn as a
 * polyline, or as dots when it has few points or is marked as points (evaluation results).
 * Text is escaped; non-finite values are left out of the drawing. */
#ifndef BERT_IO_SVG_CHART_H
#define BERT_IO_SVG_CHART_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"

typedef struct {
    char name[128];
    double *x, *y;
    size_t n, cap;
    bool points;           /* dots instead of a line */
} SvgSeries;

typedef struct {
    char title[128], y_label[64];
    SvgSeries *series;
    int count;
} SvgPanel;

typedef struct {
    char title[256], x_label[64];
    SvgPanel *panels;
    int count;
} SvgChart;

SvgPanel *svg_chart_panel(SvgChart *c, const char *title, const char *y_label);  /* added at the bottom */
SvgSeries *svg_panel_series(SvgPanel *p, const char *name, bool points);
void svg_series_add(SvgSeries *s, double x, double y);
/* Writes the chart to path atomically (temporary name, fsync, rename). */
int svg_chart_write(const SvgChart *c, const char *path, BertError *err);
void svg_chart_free(SvgChart *c);

#endif
