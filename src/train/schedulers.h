/* Learning-rate schedules, as pure functions of the number of optimizer steps already taken
 * (so resuming needs nothing but that count).
 *
 * NVIDIA's PolyWarmUpScheduler (DeepLearningExamples BERT schedulers.py, read for its
 * semantics): run_pretraining.py steps it just before each optimizer step, and it sets
 * last_epoch = (the optimizer's step count so far) + 1, so the update with index
 * `steps_done` (0-based) uses
 *     progress = (steps_done + 1) / total_steps
 *     lr = base * progress / warmup               if progress < warmup
 *          base * (1 - progress) ^ degree          otherwise (degree 0.5)
 * Phase 2 restarts the count at 0 (NVIDIA sets the loaded optimizer's step to 0) with its
 * own base, warmup and total. Past the end (progress > 1) the rate is 0.
 *
 * LinearWarmUpScheduler (the same file; NVIDIA's run_squad.py and HF's linear schedule):
 *     lr = base * progress / warmup                if progress < warmup
 *          base * max((progress - 1) / (warmup - 1), 0) otherwise. */
#ifndef BERT_TRAIN_SCHEDULERS_H
#define BERT_TRAIN_SCHEDULERS_H

double poly_warmup_lr(double base_lr, double warmup, long total_steps, double degree, long steps_done);
double linear_warmup_lr(double base_lr, double warmup, long total_steps, long steps_done);

/* A schedule as data, for the trainer (train/trainer.h): which of the above, and its
 * settings; CONSTANT is base_lr at every step (the benchmarks). */
typedef enum { SCHEDULE_POLY_WARMUP, SCHEDULE_LINEAR_WARMUP, SCHEDULE_CONSTANT } ScheduleKind;
typedef struct {
    ScheduleKind kind;
    double base_lr, warmup;   /* warmup: a fraction of total_steps */
    long total_steps;
    double degree;            /* POLY_WARMUP's power (NVIDIA's 0.5) */
} Schedule;

double schedule_lr(const Schedule *s, long steps_done);

#endif
