/*
 * transport.h: how reports reach the controller, as one small ops struct
 * per way (agent_transports[]): "stdout" writes each report body as one
 * JSON line and acknowledges it itself (no controller yet: the lease never
 * runs out, no assignments come); "http" (POST /v1/nodes/NAME/report with
 * libcurl, then agent_reply_parse) is the row the controller wiring adds.
 *
 * A transport returns 0 only when the controller acknowledged the report:
 * only then may the lease be renewed. Anything else (no connection, a
 * timeout, a 5xx) is -errno and the lease just keeps running down; a reply
 * that says the node is unknown or lost is 0 with reply->lost set.
 */
#ifndef ARB_AGENT_TRANSPORT_H
#define ARB_AGENT_TRANSPORT_H

#include "agent/report.h"

typedef struct agent_transport_ops {
    const char *name;
    const char *summary;
    /* target: a URL, a file ("-" or NULL: stdout), ...; node: the node's name. */
    int (*open)(const char *target, const char *node, void **state, arb_err_t *err);
    /* Send body (len bytes); on 0, *reply is filled (free with agent_reply_free). */
    int (*report)(void *state, const char *body, size_t len, agent_reply_t *reply, arb_err_t *err);
    void (*close)(void *state);
} agent_transport_ops_t;

extern const agent_transport_ops_t agent_transport_stdout;
/* The rows, NULL-terminated. */
extern const agent_transport_ops_t *const agent_transports[];
const agent_transport_ops_t *agent_transport_find(const char *name);

#endif
