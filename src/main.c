/*
 * main.c: entry point of the one `arbiter` binary. It only dispatches the
 * verb to its row in the command table (src/cli/commands.c); installed
 * under a Slurm command's name (sbatch, squeue, scancel, sinfo: a link),
 * it is that command, as busybox does.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int main(int argc, char **argv)
{
    const cli_cmd_t *c;
    const char *base = strrchr(argv[0], '/');

    if ((c = cli_personality(base ? base + 1 : argv[0])))
        return c->run(argc, argv);
    if (argc < 2)
        return cli_help(1, argv) == 0 ? 2 : 2;
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
        return cli_help(1, argv);
    for (c = cli_cmds; c->name; c++)
        if (strcmp(c->name, argv[1]) == 0)
            return c->run(argc - 1, argv + 1);
    fprintf(stderr, "arbiter: unknown verb '%s'; run 'arbiter help' for the list\n", argv[1]);
    return 2;
}
