/*
 * fuzz_agent_reply.c: libFuzzer target for the agent's parser of the
 * controller's report reply (src/agent/report.c, agent_reply_parse): what
 * an agent reads from the network on every heartbeat.
 *
 * Checked: no crash, leak or sanitizer report on any input; a failure is
 * -EINVAL or -ENOMEM with a message and nothing allocated; a success has
 * every assignment's GPUs in range, a job id the executor accepts (it names
 * files), a NULL-terminated argv (or none: the executor refuses a task
 * without a command, reported as exit 126), and a rank inside the gang's
 * world.
 *
 * Seed corpus: the replies in tests/unit/test_agent_telemetry.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/report.h"

static void check(int ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_agent_reply: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agent_reply_t r;
    arb_err_t err;

    if (size > (1u << 16))
        return 0;
    memset(&err, 0, sizeof err);
    memset(&r, 0, sizeof r);
    int rc = agent_reply_parse((const char *)data, size, &r, &err);
    if (rc < 0) {
        check(rc == -EINVAL || rc == -ENOMEM, "error code", err.msg);
        check(err.msg[0] != '\0', "no message", NULL);
        check(r.assign == NULL, "allocated on failure", err.msg);
        return 0;
    }
    check(r.nassign >= 0 && (r.nassign == 0 || r.assign), "assignments", NULL);
    for (int i = 0; i < r.nassign; i++) {
        const agent_assignment_t *a = &r.assign[i];
        check(agent_job_id_ok(a->ref.job), "job id", a->ref.job);
        check(a->ngpus >= 0 && a->ngpus <= ARB_MAX_GPUS, "GPU count", NULL);
        for (int g = 0; g < a->ngpus; g++)
            check(a->gpus[g] >= 0 && a->gpus[g] < ARB_MAX_GPUS, "GPU index", NULL);
        /* no command is allowed here: the executor refuses it (exit 126) */
        for (char **w = a->argv; w && *w; w++)
            check(strlen(*w) < (1u << 16), "argv word", a->ref.job);
        check(a->world_size <= 1 || (a->rank >= 0 && a->rank < a->world_size), "rank", NULL);
    }
    agent_reply_free(&r);
    return 0;
}
