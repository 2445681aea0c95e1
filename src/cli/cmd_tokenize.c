/* Placeholder until this subcommand lands; see the open issues. */
#include <stdio.h>
#include "cli/commands.h"
int cmd_tokenize(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "bert tokenize: not built yet\n");
    return 1;
}
