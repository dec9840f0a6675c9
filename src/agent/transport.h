/*
 * transport.h: how reports reach the controller, as one small ops struct
 * per way (agent_transports[]):
 *
 *   stdout  writes each report body as one JSON line and acknowledges it
 *           itself (no controller: the lease never runs out, no work comes)
 *   http    POST TARGET/v1/nodes/NAME/report with libcurl (a bearer token
 *           when given), the reply parsed by agent_reply_parse
 *
 * A transport returns 0 only when the controller acknowledged the report:
 * only then may the lease be renewed. Anything else is -errno and the lease
 * just keeps running down: -ECONNREFUSED / -ETIMEDOUT / -EHOSTUNREACH (no
 * controller there), -EIO (a 5xx: the controller failed), -EACCES (401 or
 * 403: the token), -ERANGE (the report's Lamport time was too far ahead of
 * the controller's clock, which is in reply->lamport, the only field set),
 * -EPROTO (another 4xx, or a reply that does not parse).
 * A reply that says the node is unknown or lost is 0 with reply->lost set.
 * A report takes at most timeout_ns (the caller passes what is left of
 * its lease, so a hung controller cannot delay the fence).
 */
#ifndef ARB_AGENT_TRANSPORT_H
#define ARB_AGENT_TRANSPORT_H

#include "agent/report.h"
#include "tls/tls.h"

/* http: one keep-alive connection that several agents of one thread share
 * (--emulate: a thousand nodes, a few connections). */
typedef struct agent_http_conn agent_http_conn_t;
agent_http_conn_t *agent_http_conn_new(void);
void agent_http_conn_free(agent_http_conn_t *c);

typedef struct agent_transport_conf {
    const char *target;      /* a URL (http), a file ("-" or NULL: stdout) */
    const char *node;        /* the node's name */
    const char *token;       /* a bearer token; NULL: none */
    agent_http_conn_t *conn; /* http: share this connection (borrowed); NULL: its own */
    const tls_client_t *tls; /* https: the CA and this node's certificate (NULL: none) */
} agent_transport_conf_t;

typedef struct agent_transport_ops {
    const char *name;
    const char *summary;
    /* Strings in c are copied. */
    int (*open)(const agent_transport_conf_t *c, void **state, arb_err_t *err);
    /* Send body (len bytes), waiting at most timeout_ns; on 0, *reply is
     * filled (free with agent_reply_free). */
    int (*report)(void *state, const char *body, size_t len, int64_t timeout_ns,
                  agent_reply_t *reply, arb_err_t *err);
    void (*close)(void *state);
} agent_transport_ops_t;

extern const agent_transport_ops_t agent_transport_stdout, agent_transport_http;
/* The rows, NULL-terminated. */
extern const agent_transport_ops_t *const agent_transports[];
const agent_transport_ops_t *agent_transport_find(const char *name);

#endif
