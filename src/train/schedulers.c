#include "train/schedulers.h"

#include <math.h>

double poly_warmup_lr(double base_lr, double warmup, long total_steps, double degree, long steps_done) {
    double progress = (double)(steps_done + 1) / (double)total_steps;
    if (progress < warmup) return base_lr * progress / warmup;
    return progress >= 1 ? 0.0 : base_lr * pow(1.0 - progress, degree);
}

double linear_warmup_lr(double base_lr, double warmup, long total_steps, long steps_done) {
    double progress = (double)(steps_done + 1) / (double)total_steps;
    if (progress < warmup) return base_lr * progress / warmup;
    double f = (progress - 1.0) / (warmup - 1.0);
    return base_lr * (f > 0 ? f : 0.0);
}

double schedule_lr(const Schedule *s, long steps_done) {
    switch (s->kind) {
    case SCHEDULE_POLY_WARMUP: return poly_warmup_lr(s->base_lr, s->warmup, s->total_steps, s->degree, steps_done);
    case SCHEDULE_LINEAR_WARMUP: return linear_warmup_lr(s->base_lr, s->warmup, s->total_steps, steps_done);
    case SCHEDULE_CONSTANT: break;
    }
    return s->base_lr;
}
