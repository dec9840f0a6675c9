/*
 * logserve.h: the agent's log server: task logs over HTTP for `arbiter logs`
 * run on any host (the way `kubectl logs` goes to the kubelet).
 *
 *   GET /v1/logs/JOB/TASK?stream=out|err&offset=N
 *   Authorization: Bearer TICKET
 *
 * answers the bytes of LOG_DIR/JOB.TASK.out (both streams; or .err, where the
 * agent splits stderr off: --stderr separate) from offset N, at
 * most 1 MiB a reply (X-Arbiter-Log-Size says how long the file is now, so
 * a client reads on while it is longer). A ticket comes from the controller
 * (POST /v1/jobs/JOB/logs-ticket, given to users who may see the job) and is
 * checked with the controller (GET /v1/logs/tickets/TICKET with the agent's
 * token) the first time it is shown; a positive answer is cached for the
 * ticket's remaining life, counted on this agent's monotonic clock. Why
 * tickets checked by the controller rather than signed ones or a proxy: see
 * src/state/logticket.c.
 *
 * JOB and TASK must be decimal integers and the stream one of two words, so
 * the file opened is always LOG_DIR/<digits>.<digits>.{out,err}: no path a
 * client writes reaches the file system (no traversal), and the file is
 * opened with O_NOFOLLOW and refused when it has other names (hard links).
 * With the node's certificate (--cert-file, --key-file: `arbiter init node`)
 * it serves HTTPS, and checks tickets with the controller over TLS (the CA
 * of --cacert); beyond loopback it refuses plain HTTP unless told
 * (--insecure-plain-http): a ticket and a task's log would cross the
 * network in clear. Errors are JSON as the controller's:
 * {"error": {"status", "message"}}: 400 bad path or query, 401 no ticket,
 * 403 ticket refused, 404 no such log (an err stream that is in out says
 * so), 503 the controller could not be asked.
 */
#ifndef ARB_AGENT_LOGSERVE_H
#define ARB_AGENT_LOGSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "arbiter/arbiter.h"
#include "tls/tls.h"

typedef struct agent_logserve agent_logserve_t;

typedef struct agent_logserve_conf {
    const char *listen;      /* "HOST:PORT" (IPv4; port 0: any free one) */
    const char *log_dir;     /* the executor's log directory */
    const char *controller;  /* its base URL, where tickets are checked */
    const char *token;       /* this agent's bearer token; NULL none */
    const char *node;        /* this node's name */
    const char *advertise;   /* host for the URL when listening on 0.0.0.0; NULL: host name */
    const tls_client_t *tls; /* cert_file set: serve HTTPS with it; cacert: the controller's CA */
    bool insecure_plain;     /* allow plain HTTP beyond loopback */
} agent_logserve_conf_t;

/* One request, parsed: the file it names is LOG_DIR/job/task.stream. */
typedef struct agent_log_req {
    uint64_t job;       /* >= 1 */
    uint64_t task;      /* >= 0 */
    const char *stream; /* "out" or "err" (static) */
    uint64_t offset;
} agent_log_req_t;

/* Parse a request's path ("/v1/logs/JOB/TASK") and its stream and offset
 * query values (NULL: absent). 0, or the HTTP status (400, 404) with msg
 * saying what is wrong and the fix. Pure: fuzz/fuzz_log_request.c. */
int agent_log_request_parse(const char *url, const char *stream, const char *offset,
                            agent_log_req_t *out, char *msg, size_t n);

/* Is listen a usable --logs-listen value ("HOST:PORT", IPv4)? 0, or
 * -EINVAL with the fix in err (checked before the agent starts). */
int agent_logserve_check_listen(const char *listen, arb_err_t *err);

/* Listen and serve on a thread of its own; strings are copied. 0, or
 * -errno with err naming the address and the fix. */
int agent_logserve_start(const agent_logserve_conf_t *c, agent_logserve_t **out, arb_err_t *err);
/* Where clients reach it: "http[s]://HOST:PORT" (owned by l). */
const char *agent_logserve_url(const agent_logserve_t *l);
/* Stop serving and free l (NULL is fine). */
void agent_logserve_stop(agent_logserve_t *l);

#endif
