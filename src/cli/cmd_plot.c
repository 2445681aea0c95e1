/* `bert plot LOG.json [LOG.json ...] -o curves.svg`: loss, accuracy and learning-rate curves
 * of training runs (DLLogger JSON logs) as one SVG a browser shows; several logs overlay. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/common.h"
#include "train/log_plot.h"

int cmd_plot(int argc, char **argv) {
    const char *out_path = NULL, *title = "bert.c training";
    Flag flags[] = {{"o", FLAG_STRING, &out_path, "the SVG to write (required), atomically"},
                    {"title", FLAG_STRING, &title, "the chart's title"}};
    char *logs[64];
    int n_logs = 0;
    FlagSpec spec = {"plot", "plot LOG.json [LOG.json ...] -o OUT.svg   (DLLogger logs: --json-summary)", flags, 2, 1,
                     64};
    int rc = flags_parse(&spec, argc, argv, logs, &n_logs);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "o") != 0) return 2;
    for (int i = 0; i < n_logs; i++)
        if (is_same_file(logs[i], out_path)) {
            fprintf(stderr, "bert plot: output '%s' is input '%s'\n", out_path, logs[i]);
            return 2;
        }
    BertError err;
    long records = 0;
    if (training_log_plot((const char *const *)logs, n_logs, title, out_path, &records, &err) != 0) {
        fprintf(stderr, "bert plot: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "bert plot: %ld records from %d log%s -> %s\n", records, n_logs, n_logs == 1 ? "" : "s", out_path);
    return 0;
}
