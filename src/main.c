/*
 * main.c: entry point of the one `arbiter` binary. It only dispatches the
 * verb to its row in the command table (src/cli/commands.c); installed
 * under a Slurm command's name (sbatch, squeue, scancel, sinfo: a link),
 * it is that command, as busybox does.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/log.h"

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
    if ((c = cli_find(argv[1]))) {
        arb_err_t err = {0};
        if (arb_log_init(argv[1], NULL, &err) < 0) { /* ARBITER_LOG_LEVEL, ARBITER_LOG_FORMAT */
            fprintf(stderr, "arbiter: %s\n", err.msg);
            return 2;
        }
        /* VERB --help anywhere before "--" (after it: the job's own command);
         * a verb with its own help reads its arguments itself (sbatch: what
         * follows the script is the script's) */
        for (int i = 2; !c->own_help && i < argc && strcmp(argv[i], "--") != 0; i++)
            if (strcmp(argv[i], "--help") == 0)
                return cli_verb_help(c);
        return c->run(argc - 1, argv + 1);
    }
    fprintf(stderr, "arbiter: unknown verb '%s'; run 'arbiter help' for the list\n", argv[1]);
    return 2;
}
