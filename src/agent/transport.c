/*
 * transport.c: the table of transports and the stdout row (see
 * transport.h). The stdout row plays a controller that accepts everything
 * under epoch 1 and assigns nothing: `arbiter agent` without --controller
 * prints its reports. The http row is in transport_http.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/transport.h"

typedef struct out_state {
    FILE *f;
    bool own;
} out_state_t;

static int out_open(const agent_transport_conf_t *c, void **state, arb_err_t *err)
{
    out_state_t *st = calloc(1, sizeof *st);
    const char *target = c->target;

    if (!st)
        return arb_errf(err, -ENOMEM, "out of memory");
    if (!target || !strcmp(target, "-")) {
        st->f = stdout;
    } else {
        st->f = fopen(target, "ae");
        if (!st->f) {
            int e = errno;
            free(st);
            return arb_errf(err, -e, "%s: cannot open: %s", target, strerror(e));
        }
        st->own = true;
    }
    *state = st;
    return 0;
}

static int out_report(void *state, const char *body, size_t len, int64_t timeout_ns,
                      agent_reply_t *reply, arb_err_t *err)
{
    out_state_t *st = state;

    if (fwrite(body, 1, len, st->f) != len || fputc('\n', st->f) == EOF || fflush(st->f) != 0)
        return arb_errf(err, -EIO, "cannot write the report: %s", strerror(errno));
    memset(reply, 0, sizeof *reply);
    reply->epoch = 1; /* no assignments list: nothing is authoritative */
    return 0;
}

static void out_close(void *state)
{
    out_state_t *st = state;

    if (st && st->own)
        fclose(st->f);
    free(st);
}

const agent_transport_ops_t agent_transport_stdout = {
    .name = "stdout",
    .summary = "print each report as one JSON line (no controller: never fences, no work)",
    .open = out_open,
    .report = out_report,
    .close = out_close,
};

const agent_transport_ops_t *const agent_transports[] = {&agent_transport_stdout,
                                                         &agent_transport_http, NULL};

const agent_transport_ops_t *agent_transport_find(const char *name)
{
    for (int i = 0; agent_transports[i]; i++)
        if (strcmp(agent_transports[i]->name, name) == 0)
            return agent_transports[i];
    return NULL;
}
