/* Placeholder until this subcommand lands; see the open issues. */
#include <stdio.h>
#include "cli/commands.h"
int cmd_format(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "bert format: not built yet\n");
    return 1;
}
