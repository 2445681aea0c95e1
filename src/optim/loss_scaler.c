#include "optim/loss_scaler.h"

#include <math.h>

void loss_scaler_init(LossScaler *s, double init_scale, bool dynamic) {
    *s = (LossScaler){.scale = init_scale, .growth_factor = 2.0, .backoff_factor = 0.5,
                      .growth_interval = LOSS_SCALER_GROWTH_INTERVAL, .dynamic = dynamic};
}

bool loss_scaler_update(LossScaler *s, bool found_overflow) {
    if (found_overflow) {
        s->skipped_steps++;
        if (s->dynamic) s->scale *= s->backoff_factor, s->good_steps = 0;
        return false;
    }
    if (s->dynamic && ++s->good_steps == s->growth_interval) {
        const double grown = s->scale * s->growth_factor;
        if (isfinite((float)grown)) s->scale = grown;   /* GradScaler (an fp32 scale) keeps it if it would overflow */
        s->good_steps = 0;
    }
    return true;
}
