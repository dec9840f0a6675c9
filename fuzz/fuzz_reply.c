/*
 * fuzz_reply.c: libFuzzer target for the agent's parser of the controller's
 * reply (src/agent/report.c, agent_reply_parse): assignments with gang
 * rendezvous, per-job grace and elastic resize notices.
 *
 * Checked: no crash, hang, leak or sanitizer report on any input; a failure
 * returns -EINVAL or -ENOMEM with a message (the field's path) and
 * allocates nothing; a success yields assignments whose job ids can name files, GPU
 * indices in range, a rank below the world size for gang members and
 * elastic tasks, and terminated strings.
 *
 * Seed corpus: a reply of a live controller, e.g. what tests/cli/
 * cluster_elastic.sh's agents receive (arbiter agent --verbose shows it),
 * or the replies in tests/unit/test_agent_telemetry.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/report.h"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_reply: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agent_reply_t r;
    arb_err_t err;
    int rc;

    if (size > (1u << 16))
        return 0;
    memset(&r, 0, sizeof r);
    memset(&err, 0, sizeof err);
    rc = agent_reply_parse((const char *)data, size, &r, &err);
    if (rc < 0) {
        check(rc == -EINVAL || rc == -ENOMEM, "unexpected code", err.msg);
        check(err.msg[0] != '\0', "no message", err.msg);
        check(r.assign == NULL && r.nassign == 0, "allocated on failure", err.msg);
        return 0;
    }
    for (int i = 0; i < r.nassign; i++) {
        const agent_assignment_t *a = &r.assign[i];
        check(agent_job_id_ok(a->ref.job), "job id", a->ref.job);
        check(a->ngpus >= 0 && a->ngpus <= ARB_MAX_GPUS, "GPU count", a->ref.job);
        for (int g = 0; g < a->ngpus; g++)
            check(a->gpus[g] >= 0 && a->gpus[g] < ARB_MAX_GPUS, "GPU index", a->ref.job);
        check(a->world_size == 0 || (a->rank >= 0 && a->rank < a->world_size), "rank", a->ref.job);
        check(!a->elastic || a->world_size >= 1, "elastic world", a->ref.job);
        check(memchr(a->hosts, 0, sizeof a->hosts) &&
                  memchr(a->master_addr, 0, sizeof a->master_addr),
              "unterminated string", a->ref.job);
        check(a->argv != NULL && a->env != NULL, "argv/env", a->ref.job);
        /* an empty argv is allowed here: the executor refuses it (exit 126) */
        for (char **w = a->argv; *w; w++)
            check(strlen(*w) < (1u << 16), "argv word", a->ref.job);
    }
    agent_reply_free(&r);
    return 0;
}
