/*
 * controller.h: the controller daemon assembled from its settings, apart
 * from the CLI that reads them (src/cli/controller.c only parses flags).
 *
 * Two steps. dmn_ctl_plan() turns the settings (flags) into the plan of
 * what will start, with no network and no store opened: the address it
 * listens on (moved to loopback when nobody can be authenticated), the
 * store (a SQLite data directory, or etcd members and a key prefix with an
 * election), the scheduler's config, the tokens and TLS files read and
 * checked, and how callers are authenticated. Every refusal is a usage or
 * configuration error (exit 2) with text naming the flag and the fix; a
 * unit test checks plans (tests/unit/test_daemon.c). dmn_ctl_run() starts
 * the plan's pieces and runs them until a signal:
 *
 *   SQLite   store (recovered) -> scheduler thread -> HTTP API -> DIR/url
 *   etcd     HTTP API as follower -> election -> on winning: the store over
 *            etcd fenced by the term (recovered) -> scheduler -> API serves it
 *            (controller_ha.c)
 *
 * Exit codes of dmn_ctl_run: 0 stopped by a signal; 1 failed to start;
 * 2 a bad configuration found at start (etcd's flags); 3 the store failed
 * or the leader stepped down (a supervisor restarts it).
 */
#ifndef ARB_DAEMON_CONTROLLER_H
#define ARB_DAEMON_CONTROLLER_H

#include <signal.h>
#include <stdbool.h>

#include "api/api.h"
#include "state/state.h"
#include "tls/tls.h"

/* What the flags say (src/cli/controller.c fills it). */
typedef struct dmn_ctl_settings {
    const char *listen;   /* HOST:PORT */
    const char *data_dir; /* --data-dir (or --store DIR / sqlite:DIR) */
    const char *store;    /* --store etcd://HOST:PORT[,...][/PREFIX], or NULL */
    const char *config;   /* --config FILE, or NULL */
    const char *tokens;   /* --tokens FILE, or NULL */
    bool accept_rewind;   /* --accept-rewind */
    bool plain_ok;        /* --insecure-plain-http */
    tls_files_t tls;      /* --cert-file, --key-file, --trusted-ca-file, --client-cert-auth */
    int max_conns;        /* 0: the API's default */
    int max_conns_per_client;
    const char *prefix;    /* --store-prefix, or NULL */
    const char *name;      /* --name */
    const char *advertise; /* --advertise-url, or NULL */
    int ttl_s;             /* --lease-ttl */
    int max_ops;           /* --max-txn-ops */
} dmn_ctl_settings_t;

typedef enum dmn_store_kind { DMN_STORE_SQLITE, DMN_STORE_ETCD } dmn_store_kind_t;

/* What will start. */
typedef struct dmn_ctl_plan {
    char host[256]; /* the address listened on (127.0.0.1 when nobody is authenticated) */
    int port;
    bool moved_to_loopback; /* the settings asked for more; note says why */
    const char *scheme;     /* "https" with a certificate, else "http" */
    const char *auth;       /* how callers are named, in words */
    dmn_store_kind_t store;
    const char *data_dir;            /* SQLite */
    char members[1024], prefix[256]; /* etcd: HOST:PORT,... and the key prefix */
    const char *name, *advertise;
    int ttl_s, max_ops, max_conns, max_conns_per_client;
    st_conf_t conf;      /* the scheduler's config (--config, --accept-rewind) */
    api_tokens_t tokens; /* loaded from --tokens */
    bool has_tokens;
    tls_server_t tls; /* the files of --cert-file ... read and checked */
    char note[512];   /* a warning to print (moved to loopback), or "" */
} dmn_ctl_plan_t;

/* Defaults for the settings: listen 127.0.0.1:7070, lease TTL 5 s, 128 ops. */
void dmn_ctl_settings_init(dmn_ctl_settings_t *s);

/* The plan of s, with no network. 0, or -EINVAL with err saying what to
 * change (nothing to free then). Free a plan with dmn_ctl_plan_free. */
int dmn_ctl_plan(const dmn_ctl_settings_t *s, dmn_ctl_plan_t *p, arb_err_t *err);
void dmn_ctl_plan_free(dmn_ctl_plan_t *p);

/* Start the plan's pieces and run until one of sigs (blocked by the
 * caller in every thread) arrives; the exit code (above). */
int dmn_ctl_run(dmn_ctl_plan_t *p, const sigset_t *sigs);

/* The etcd half (controller_ha.c). */
int dmn_ctl_run_ha(dmn_ctl_plan_t *p, const sigset_t *sigs);

#endif
