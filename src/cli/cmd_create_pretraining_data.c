/* Placeholder until this subcommand lands; see the open issues. */
#include <stdio.h>
#include "cli/commands.h"
int cmd_create_pretraining_data(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "bert create_pretraining_data: not built yet\n");
    return 1;
}
