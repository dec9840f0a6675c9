/*
 * main.c: `arbiter-supervise`, the per-task supervisor (src/agent/supervise.h)
 * as a program of its own, linked with libc and the util layer only. The
 * agent starts one for every task: exec'ing the whole `arbiter` binary for
 * it (45 shared libraries: libcurl, GnuTLS, SQLite, ...) cost about 12 ms
 * of CPU per task, most of what a short task cost its node; this one costs
 * about a millisecond (less linked statically, as CMakeLists.txt links it
 * where libc.a is there). The agent uses it when it lies beside its own
 * binary (src/cli/agent.c), else `arbiter supervise`, which is the same code.
 *
 *   arbiter-supervise supervise --start FD --exit FILE [--lease FILE] ...
 *
 * (the agent's command line for `arbiter supervise`, word for word).
 */
#include <stdio.h>
#include <string.h>

#include "agent/supervise.h"

int main(int argc, char **argv)
{
    agent_sup_args_t a;
    arb_err_t err = {{0}};

    if (argc > 1 && !strcmp(argv[1], "supervise")) /* the agent's words: skip the verb */
        argc--, argv++;
    if (agent_sup_parse(argc, argv, &a, &err) < 0) {
        fprintf(
            stderr,
            "arbiter-supervise: %s\nusage: arbiter-supervise supervise (--start FD | --task-pid "
            "PID) --exit FILE [--lease FILE] ... (started by the agent for each task: "
            "docs/agent.md)\n",
            err.msg);
        return 2;
    }
    return agent_sup_run(&a);
}
