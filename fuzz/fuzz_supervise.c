/*
 * fuzz_supervise.c: libFuzzer target for what the per-task supervisors
 * read (src/agent/supervise.c, exec.c): the `arbiter supervise` arguments,
 * the exit records they write, and the task records a restarted agent
 * adopts them by. The first byte picks which; the rest is the input (for
 * the arguments, split at newlines).
 *
 * Checked: no crash, hang or sanitizer report on any input; a parsed
 * argument set has a task pid above 1 and an exit path, at most two cgroup
 * directories; a parsed exit record names a known reason; a parsed task
 * record has a job id that can name files and pids above 1.
 *
 * Seed corpus: fuzz/seeds/fuzz_supervise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_supervise: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text;

    if (size < 1 || size > 4096)
        return 0;
    if (!(text = malloc(size)))
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    switch (data[0] % 3) {
    case 0: {
        agent_sup_exit_t e;
        if (agent_sup_exit_parse(text, &e) == 0)
            check(e.why <= AGENT_SUP_STOPPED, "an exit record with an unknown reason");
        break;
    }
    case 1: {
        agent_task_record_t r;
        pid_t sup = 0;
        uint64_t ticks = 0;
        if (agent_task_record_parse(text, &r, &sup, &ticks) == 0)
            check(agent_job_id_ok(r.job) && r.pid > 1 && sup > 1 && r.task >= 0,
                  "a task record with a bad job, task or pid");
        break;
    }
    default: {
        char *argv[64];
        int argc = 0;
        agent_sup_args_t a;
        arb_err_t err;
        argv[argc++] = "supervise";
        for (char *p = text, *nl; p && argc < 63; p = nl ? nl + 1 : NULL) {
            nl = strchr(p, '\n');
            if (nl)
                *nl = '\0';
            argv[argc++] = p;
        }
        argv[argc] = NULL;
        if (agent_sup_parse(argc, argv, &a, &err) == 0)
            check(a.task > 1 && a.exit_path && a.ncg <= 2, "arguments without a task or exit");
        break;
    }
    }
    free(text);
    return 0;
}
