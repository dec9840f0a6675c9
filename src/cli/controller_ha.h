/*
 * controller_ha.h: `arbiter controller --store etcd://...`: one of several
 * controllers sharing an etcd cluster, one of which leads (docs/ha.md).
 */
#ifndef ARB_CLI_CONTROLLER_HA_H
#define ARB_CLI_CONTROLLER_HA_H

#include <signal.h>

#include "api/api.h"

typedef struct ctl_ha_args {
    const char *store;     /* "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]" */
    const char *prefix;    /* --store-prefix, or NULL */
    const char *name;      /* --name */
    const char *advertise; /* --advertise-url, or NULL: http://HOST:PORT listened on */
    int ttl_s;             /* --lease-ttl */
    int max_ops;           /* --max-txn-ops: what etcd was started with */
    const char *host;
    int port;
    const api_tokens_t *tokens; /* NULL: no tokens */
    const tls_server_t *tls;    /* TLS and client certificates (NULL or no cert: plain) */
    int max_conns, max_conns_per_client;
    const st_conf_t *conf;
    const sigset_t *sigs; /* blocked; the run ends on one of them */
} ctl_ha_args_t;

/* Serve as follower, campaign, lead when elected; until a signal (exit 0)
 * or a step-down (exit 3: this process may no longer write). */
int cli_controller_ha(const ctl_ha_args_t *a);

#endif
