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
 *   arbiter-supervise supervise --zygote FD
 *
 * (the agent's command line for `arbiter supervise`, word for word; the
 * second, once per agent, forks each task's supervisor: src/agent/zygote.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/supervise.h"
#include "agent/zygote.h"

int main(int argc, char **argv)
{
    agent_sup_args_t a;
    arb_err_t err = {{0}};

    if (argc > 1 && !strcmp(argv[1], "supervise")) /* the agent's words: skip the verb */
        argc--, argv++;
    if (argc >= 3 && argc <= 4 && !strcmp(argv[1], "--zygote"))
        return agent_zygote_main(atoi(argv[2]));
    if (agent_sup_parse(argc, argv, &a, &err) < 0) {
        fprintf(
            stderr,
            "arbiter-supervise: %s\nusage: arbiter-supervise supervise (--start FD | --task-pid "
            "PID) --exit FILE [--lease FILE] ... | --zygote FD (started by the agent: "
            "docs/agent.md)\n",
            err.msg);
        return 2;
    }
    return agent_sup_run(&a);
}
