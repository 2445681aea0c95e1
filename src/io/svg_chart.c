#include "io/svg_chart.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WIDTH = 1100, PANEL_HEIGHT = 300, TOP = 66, GAP = 60, LEFT = 80, RIGHT = 330, BOTTOM = 50 };

static const char *const PALETTE[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
enum { PALETTE_SIZE = sizeof PALETTE / sizeof PALETTE[0] };

SvgPanel *svg_chart_panel(SvgChart *c, const char *title, const char *y_label) {
    c->panels = xrealloc(c->panels, sizeof(SvgPanel) * (size_t)(c->count + 1));
    SvgPanel *p = &c->panels[c->count++];
    memset(p, 0, sizeof *p);
    snprintf(p->title, sizeof p->title, "%s", title);
    snprintf(p->y_label, sizeof p->y_label, "%s", y_label);
    return p;
}

SvgSeries *svg_panel_series(SvgPanel *p, const char *name, bool points) {
    p->series = xrealloc(p->series, sizeof(SvgSeries) * (size_t)(p->count + 1));
    SvgSeries *s = &p->series[p->count++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->points = points;
    return s;
}

void svg_series_add(SvgSeries *s, double x, double y) {
    if (s->n == s->cap) {   /* two arrays, one capacity */
        s->cap = grow_capacity(s->cap, s->n + 1, 64);
        s->x = xrealloc(s->x, sizeof(double) * s->cap), s->y = xrealloc(s->y, sizeof(double) * s->cap);
    }
    s->x[s->n] = x, s->y[s->n] = y, s->n++;
}

void svg_chart_free(SvgChart *c) {
    for (int i = 0; i < c->count; i++) {
        for (int j = 0; j < c->panels[i].count; j++) free(c->panels[i].series[j].x), free(c->panels[i].series[j].y);
        free(c->panels[i].series);
    }
    free(c->panels);
    c->panels = NULL, c->count = 0;
}

/* Text inside an SVG element: &, <, > and quotes escaped. */
static void put_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

typedef struct { double lo, hi, step; } Axis;

/* Round numbers (1, 2 or 5 times a power of ten) spanning [lo, hi] in about 5 steps. */
static Axis nice_axis(double lo, double hi) {
    if (!(hi > lo)) {
        double pad = lo == 0 ? 1 : fabs(lo) * 0.1;
        lo -= pad, hi += pad;
    }
    double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
    return (Axis){floor(lo / step) * step, ceil(hi / step) * step, step};
}

/* The finite range of every series' x (or y) values in a panel, or of all panels for x. */
static void data_range(const SvgSeries *s, int count, bool want_y, double *lo, double *hi) {
    for (int i = 0; i < count; i++)
        for (size_t k = 0; k < s[i].n; k++) {
            double v = want_y ? s[i].y[k] : s[i].x[k];
            if (!isfinite(s[i].x[k]) || !isfinite(s[i].y[k])) continue;
            if (v < *lo) *lo = v;
            if (v > *hi) *hi = v;
        }
}

static void draw_axes(FILE *f, const SvgPanel *p, const Axis *ax, const Axis *ay, int top, int w, int h) {
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"15\" font-weight=\"bold\">", LEFT, top - 10);
    put_text(f, p->title);
    fprintf(f, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", LEFT,
            top, w, h);
    for (double v = ay->lo; v <= ay->hi + ay->step * 1e-6; v += ay->step) {
        double y = top + h - (v - ay->lo) / (ay->hi - ay->lo) * h;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>", LEFT, LEFT + w, y, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.4g</text>\n", LEFT - 6, y + 4,
                fabs(v) < ay->step * 1e-6 ? 0.0 : v);
    }
    for (double v = ax->lo; v <= ax->hi + ax->step * 1e-6; v += ax->step) {
        double x = LEFT + (v - ax->lo) / (ax->hi - ax->lo) * w;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/>", x, x, top, top + h);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%.6g</text>\n", x, top + h + 16, v);
    }
    fprintf(f, "<text transform=\"translate(%d,%d) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">", 18,
            top + h / 2);
    put_text(f, p->y_label);
    fputs("</text>\n", f);
}

static void draw_series(FILE *f, const SvgSeries *s, const char *color, const Axis *ax, const Axis *ay, int top, int w,
                        int h) {
#define PX(v) (LEFT + ((v) - ax->lo) / (ax->hi - ax->lo) * w)
#define PY(v) (top + h - ((v) - ay->lo) / (ay->hi - ay->lo) * h)
    if (s->points || s->n < 3)   /* dots: evaluation results, or too few points for a line */
        for (size_t k = 0; k < s->n; k++)
            if (isfinite(s->x[k]) && isfinite(s->y[k]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", PX(s->x[k]), PY(s->y[k]), color);
    if (s->points || s->n < 2) return;
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", color);
    for (size_t k = 0; k < s->n; k++)
        if (isfinite(s->x[k]) && isfinite(s->y[k])) fprintf(f, "%.1f,%.1f ", PX(s->x[k]), PY(s->y[k]));
    fputs("\"/>\n", f);
#undef PX
#undef PY
}

static void draw_legend(FILE *f, const SvgPanel *p, int first_color, int top, int w) {
    for (int i = 0; i < p->count; i++) {
        const char *color = PALETTE[(first_color + i) % PALETTE_SIZE];
        int y = top + 14 + 18 * i;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>", LEFT + w + 12, y - 5, color);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">", LEFT + w + 32, y);
        put_text(f, p->series[i].name);
        fputs(p->series[i].points ? " (points)</text>\n" : "</text>\n", f);
    }
}

static int write_svg(FILE *f, const SvgChart *c) {
    const int w = WIDTH - LEFT - RIGHT, height = TOP + c->count * (PANEL_HEIGHT + GAP) + BOTTOM - GAP;
    double xlo = INFINITY, xhi = -INFINITY;
    for (int i = 0; i < c->count; i++) data_range(c->panels[i].series, c->panels[i].count, false, &xlo, &xhi);
    Axis ax = nice_axis(isfinite(xlo) ? xlo : 0, isfinite(xhi) ? xhi : 1);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            WIDTH, height, WIDTH, height);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"17\" font-weight=\"bold\">", LEFT);
    put_text(f, c->title);
    fputs("</text>\n", f);
    int color = 0;
    for (int i = 0; i < c->count; i++) {
        const SvgPanel *p = &c->panels[i];
        int top = TOP + i * (PANEL_HEIGHT + GAP);
        double ylo = INFINITY, yhi = -INFINITY;
        data_range(p->series, p->count, true, &ylo, &yhi);
        Axis ay = nice_axis(isfinite(ylo) ? ylo : 0, isfinite(yhi) ? yhi : 1);
        draw_axes(f, p, &ax, &ay, top, w, PANEL_HEIGHT);
        for (int j = 0; j < p->count; j++)
            draw_series(f, &p->series[j], PALETTE[(color + j) % PALETTE_SIZE], &ax, &ay, top, w, PANEL_HEIGHT);
        draw_legend(f, p, color, top, w);
        color += p->count;
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">", LEFT + w / 2, height - 12);
    put_text(f, c->x_label);
    fputs("</text>\n</svg>\n", f);
    return ferror(f) ? -1 : 0;
}

int svg_chart_write(const SvgChart *c, const char *path, BertError *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) return -1;
    if (write_svg(af.fp, c) != 0) {
        atomic_abort(&af);
        return bert_fail(err, "cannot write %s: %s", path, strerror(errno));
    }
    return atomic_commit(&af, err);
}
