/*
 * api.h: the controller's HTTP/JSON API (libmicrohttpd + jansson) over the
 * resource manager (src/state): one route table (routes.c), bearer-token
 * auth with roles and teams (auth.c), request limits and validation, the
 * HTTP glue (http.c). docs/api.md is generated from the route table
 * (`arbiter controller --api-doc`), and a test keeps the two equal.
 *
 * Threads: libmicrohttpd runs a pool of event-loop threads (epoll), each
 * serving many connections; a handler may block briefly (its store
 * ticket), but a long poll (events, service endpoints) does not hold its
 * thread while it waits: the connection is suspended and resumed when the
 * state changes or its time is up (conn.c). Handlers share nothing but the
 * st_t, which has its own lock.
 */
#ifndef ARB_API_H
#define ARB_API_H

#include <jansson.h>
#include <stdio.h>

#include "state/state.h"
#include "tls/tls.h"

#define API_MAX_BODY (1u << 20) /* larger bodies: 413 */

/* ---- tokens -------------------------------------------------------------------- */

typedef struct api_token {
    unsigned char hash[32]; /* SHA-256 of the token: the text is not kept */
    st_role_t role;
    char team[ST_NAME_MAX];
    char name[ST_NAME_MAX];
    char node[ST_NAME_MAX]; /* agents: the node it acts as ("" none) */
    int line;               /* in the tokens file */
} api_token_t;

typedef struct api_tokens {
    int n;
    api_token_t *v;
    int unbound; /* agent tokens without a node */
} api_tokens_t;

/* Load a tokens file: one token a line, "TOKEN ROLE TEAM [NAME]", ROLE one
 * of admin, user, agent (for an agent NAME is its node); '#' starts a
 * comment. Messages name FILE:LINE. Free with api_tokens_free. */
int api_tokens_load(const char *path, api_tokens_t *t, arb_err_t *err);
/* The same over the file's text (len bytes; path names it in messages).
 * Pure: fuzz/fuzz_tokens.c. */
int api_tokens_parse(const char *text, size_t len, const char *path, api_tokens_t *t,
                     arb_err_t *err);
void api_tokens_free(api_tokens_t *t);
/* The token's entry, or NULL (found by its SHA-256: time independent of
 * where a guess differs from a real token and of that token's length). */
const api_token_t *api_tokens_find(const api_tokens_t *t, const char *token);
const char *api_role_name(st_role_t r);

/* ---- who is calling (auth.c) ------------------------------------------------------ */

typedef struct api_auth_conf {
    const api_tokens_t *tokens; /* NULL: no tokens */
    bool certs;                 /* client certificates are checked (--trusted-ca-file) */
    bool require_cert;          /* --client-cert-auth */
} api_auth_conf_t;

typedef enum { API_CERT_NONE, API_CERT_OK, API_CERT_BAD } api_cert_state_t;

typedef struct api_cert {
    api_cert_state_t state;
    tls_peer_t peer; /* API_CERT_OK: its subject */
    char why[300];   /* API_CERT_BAD: why it was refused */
} api_cert_t;

typedef struct api_principal {
    st_role_t role;
    const char *team, *name; /* borrowed from the token or the certificate */
    const char *node;        /* agents: the node they act as; NULL none */
} api_principal_t;

/* The principal of a request: from its bearer token (authz, the whole
 * Authorization header, NULL when absent), else its client certificate
 * (cert, NULL on plain HTTP), else, when c configures no authentication at
 * all, admin "local". 0, or 401 / 403 with msg saying why and the fix.
 * Pure: tests/unit/test_auth.c. */
int api_authenticate(const api_auth_conf_t *c, const char *authz, const api_cert_t *cert,
                     api_principal_t *p, char *msg, size_t n);

/* ---- the server ----------------------------------------------------------------- */

typedef struct api_server api_server_t;

/* High availability (src/ha): who leads. Without it the controller is
 * alone and GET /v1/leader names itself. */
typedef struct api_ha {
    /* The leader as known now: 1 this process (name, url, term filled), 0
     * another one, -ENOENT none known. */
    int (*leader)(void *arg, char *name, size_t nn, char *url, size_t un, int64_t *term);
    void *arg;
} api_ha_t;

typedef struct api_opts {
    const char *host;           /* IPv4 address to bind, "127.0.0.1" */
    int port;                   /* 0: an ephemeral port */
    const api_tokens_t *tokens; /* NULL: no tokens */
    const api_ha_t *ha;         /* NULL: a single controller (borrowed; outlives the server) */
    const char *name;           /* this controller's name in GET /v1/leader (NULL: "local") */
    const tls_server_t *tls;    /* NULL or no cert: plain HTTP (copied) */
    int max_conns;              /* 0: 16384, capped by the open-file limit */
    int max_conns_per_client;   /* connections one IP address may hold; 0: 256 */
    int threads;                /* event-loop threads; 0: one per CPU, 2..64 */
    int head_timeout_ms;        /* a request's head, whole, from its first line (0: 10 s) */
    int body_timeout_ms;        /* its body, whole, after the head (0: 60 s) */
    int idle_timeout_ms;        /* a connection waiting for its next request (0: 60 s) */
} api_opts_t;

/* Start serving s (borrowed; outlives the server). With o->ha, s may be
 * NULL: a follower, which answers GET /v1/leader and /healthz and sends
 * every other request to the leader (307 + Location, or 503 + Retry-After
 * while none is known) until api_server_set_state gives it a state. */
int api_server_start(st_t *s, const api_opts_t *o, api_server_t **out, arb_err_t *err);
/* This process now leads: serve s from now on (borrowed, as above). */
void api_server_set_state(api_server_t *a, st_t *s);
int api_server_port(const api_server_t *a);
void api_server_stop(api_server_t *a);

/* Write docs/api.md (from the route table and the config key table). */
void api_doc_markdown(FILE *f);

/* Why a job waits as GET /v1/jobs/{id}/explain answers (enc_explain.c):
 * for callers of the state outside the server (`arbiter place`). A new
 * reference; NULL out of memory. */
json_t *api_explain_json(const st_explain_view_t *v);

/* An agent's report and its reply as the wire has them (enc_report.c):
 * body decoded (api_report_decode), applied (st_node_report_if), the reply
 * encoded; what POST /v1/nodes/{name}/report does without the HTTP, for the
 * virtual cluster (src/vc) and tests. *out is the caller's on success, and
 * on -ERANGE ({"lamport": the controller's clock}); NULL otherwise. */
int api_node_report(st_t *s, const st_who_t *who, const char *name, int64_t if_match,
                    const json_t *body, json_t **out, int64_t *ticket, arb_err_t *err);
/* The same with the reply's text written straight (util/jsonw.h), as the
 * route sends it (a newline at its end): on success *text (the caller's to
 * free) and *len, *out NULL; on -ERANGE *out as above. text NULL: *out the
 * reply as a tree, as api_node_report gives it. */
int api_node_report_text(st_t *s, const st_who_t *who, const char *name, int64_t if_match,
                         const json_t *body, char **text, size_t *len, json_t **out,
                         int64_t *ticket, arb_err_t *err);
/* The same for the assignments long poll (st_node_assignments_wait): the
 * reply's text written straight (a newline at its end) in *text (the
 * caller's to free) and *len on success; NULL on failure. */
int api_node_assignments(st_t *s, const char *name, int64_t epoch, uint64_t have, bool *same,
                         uint32_t *key, char **text, size_t *len, int64_t *ticket, arb_err_t *err);

#endif
