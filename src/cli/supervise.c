/*
 * supervise.c: `arbiter supervise`, the per-task supervisor the agent
 * starts between itself and each task (src/agent/supervise.h): it is not
 * run by hand. The agent spawns it (arbiter-supervise, or this verb where
 * that program is not there) with a start record on fd FD; it forks the
 * task from it (--start), or supervises a task already forked (--task-pid).
 *
 *   arbiter supervise (--start FD | --task-pid PID) (--exit FILE | --record FILE ...)
 *                     [--cgroup-v2 DIR | --cgroup-v1 DIR ...]
 *                     [--time-limit-at NS --grace NS]
 *   arbiter supervise --zygote FD   (one per agent: forks the supervisors,
 *                                    src/agent/zygote.h)
 *
 * Exit status: 0 the task ended and its exit record is written; 1 PID was
 * not this process's child; 2 bad usage; 127 the start record could not
 * be read or the task not forked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/supervise.h"
#include "agent/zygote.h"
#include "cli/cli.h"

#define SUPERVISE_USAGE                                                                            \
    "usage: arbiter supervise (--start FD | --task-pid PID)\n"                                     \
    "                         (--exit FILE | --record FILE --record-fields FIELDS)\n"              \
    "                         [--lease FILE] [--cgroup-v2 DIR | --cgroup-v1 DIR ...]\n"            \
    "                         [--time-limit-at NS --grace NS]\n"                                   \
    "  --exit: the exit record alone; --record (with --start): the task's one file, its lock\n"    \
    "  (flock, held for the supervisor's life) with its task and exit records appended\n"          \
    "       arbiter supervise --zygote FD\n"                                                       \
    "  (started by the agent for each task: docs/agent.md)\n"

int cli_supervise(int argc, char **argv)
{
    agent_sup_args_t a;
    arb_err_t err = {{0}};

    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(SUPERVISE_USAGE, stdout);
        return 0;
    }
    if (argc >= 3 && argc <= 4 && !strcmp(argv[1], "--zygote"))
        return agent_zygote_main(atoi(argv[2]));
    if (agent_sup_parse(argc, argv, &a, &err) < 0) {
        fprintf(stderr, "arbiter supervise: %s\n" SUPERVISE_USAGE, err.msg);
        return 2;
    }
    return agent_sup_run(&a);
}
