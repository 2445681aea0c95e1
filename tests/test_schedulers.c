/* Learning-rate schedules against NVIDIA's schedulers as run_pretraining.py drives them
 * (tools/make_scheduler_fixtures.py: the optimizer's step count, the scheduler stepped before
 * each update, a resumed count). Both sides compute in float64 from the same formula, so
 * the only difference is the order of a few operations: relative 1e-12. */
#include "test.h"

#include "train/schedulers.h"

static void test_against_nvidia(void) {
    FILE *f = fopen("tests/data/train/schedules.txt", "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[65536];
    int configs = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char kind[16];
        double base, warmup;
        long total, start, steps;
        int used = 0;
        if (sscanf(line, "%15s %lf %lf %ld %ld %ld:%n", kind, &base, &warmup, &total, &start, &steps, &used) != 6) {
            CHECKF(0, "bad fixture line: %.80s", line);
            continue;
        }
        const char *p = line + used;
        double worst = 0;
        for (long k = 0; k < steps; k++) {
            char *end;
            double want = strtod(p, &end);
            CHECK(end != p);
            p = end;
            double got = strcmp(kind, "poly") == 0 ? poly_warmup_lr(base, warmup, total, 0.5, start + k)
                                                   : linear_warmup_lr(base, warmup, total, start + k);
            worst = fmax(worst, fabs(got - want) / fmax(fabs(want), 1e-300));
        }
        CHECKF(worst <= 1e-12, "%s base %g warmup %g total %ld from %ld: rel err %.3g", kind, base, warmup, total, start,
               worst);
        configs++;
    }
    fclose(f);
    CHECKF(configs == 5, "%d configurations", configs);
}

/* Shape: warmup rises linearly to the peak, the decay ends at 0 on the last step. */
static void test_shape(void) {
    CHECK(fabs(poly_warmup_lr(1.0, 0.5, 10, 0.5, 4) - sqrt(0.5)) < 1e-15);   /* progress 0.5: decay starts */
    CHECK(fabs(poly_warmup_lr(1.0, 0.5, 10, 0.5, 3) - 0.8) < 1e-15);        /* 0.4 / 0.5 */
    CHECK(poly_warmup_lr(1.0, 0.1, 10, 0.5, 9) == 0.0);                     /* progress 1 */
    CHECK(poly_warmup_lr(1.0, 0.1, 10, 0.5, 20) == 0.0);                    /* past the end: 0, not NaN */
    CHECK(linear_warmup_lr(1.0, 0.1, 10, 30) == 0.0);
}

int main(void) {
    RUN_TEST(test_against_nvidia);
    RUN_TEST(test_shape);
    return test_summary();
}
