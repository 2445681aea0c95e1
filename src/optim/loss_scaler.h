/* Dynamic loss scaling for fp16 training, as NVIDIA's recipe runs it (run_pretraining.py:
 * --init_loss_scale 2^20, then apex amp's / torch.cuda.amp.GradScaler's rule):
 *
 *   the backward computes the gradient of scale * loss (bert_set_loss_scale), so gradients
 *   too small for fp16 survive; after accumulation (and, with several processes, after the
 *   all-reduce) the gradients are checked: any inf or NaN means fp16 overflowed somewhere:
 *     overflow   the optimizer step is skipped (the step count does not advance), the
 *                gradients are dropped, scale *= backoff_factor (0.5), the good-step count
 *                restarts
 *     otherwise  the gradients are divided by scale and the step is taken; after
 *                growth_interval (2000) good steps in a row, scale *= growth_factor (2)
 *
 * A static scale (--loss_scale S > 0, NVIDIA's other mode) never changes and a step with an
 * overflow is still skipped. The whole state is four numbers, saved in checkpoints, so a
 * resumed run scales exactly as an uninterrupted one. */
#ifndef BERT_OPTIM_LOSS_SCALER_H
#define BERT_OPTIM_LOSS_SCALER_H

#include <stdbool.h>

typedef struct {
    double scale;
    double growth_factor, backoff_factor;
    long growth_interval;
    long good_steps;       /* good steps since the last change (GradScaler's growth tracker) */
    long skipped_steps;    /* steps skipped for overflow, in all */
    bool dynamic;
} LossScaler;

enum { LOSS_SCALER_GROWTH_INTERVAL = 2000 };
/* Past this many skipped steps in a row the gradients are not finite at any scale (the scale
 * has been halved 64 times): the trainers stop with an error. */
enum { LOSS_SCALER_MAX_OVERFLOWS_IN_A_ROW = 64 };
#define LOSS_SCALER_INIT_SCALE 1048576.0   /* 2^20: NVIDIA's --init_loss_scale */

/* dynamic: GradScaler's defaults (growth 2, backoff 0.5, interval 2000) from init_scale;
 * otherwise the scale stays init_scale. */
void loss_scaler_init(LossScaler *s, double init_scale, bool dynamic);
/* The update after a step's gradients were checked; returns whether the step is taken
 * (false: skipped for overflow). */
bool loss_scaler_update(LossScaler *s, bool found_overflow);

#endif
