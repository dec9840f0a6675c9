/*
 * api.h: the controller's HTTP/JSON API (libmicrohttpd + jansson) over the
 * resource manager (src/state): one route table (routes.c), bearer-token
 * auth with roles and teams (auth.c), request limits and validation, the
 * HTTP glue (http.c). docs/api.md is generated from the route table
 * (`arbiter controller --api-doc`), and a test keeps the two equal.
 *
 * Threads: libmicrohttpd runs one thread per connection; a handler may
 * block (it waits for its store ticket, or long-polls events). Handlers
 * share nothing but the st_t, which has its own lock.
 */
#ifndef ARB_API_H
#define ARB_API_H

#include <stdio.h>

#include "state/state.h"

#define API_MAX_BODY (1u << 20) /* larger bodies: 413 */

/* ---- tokens -------------------------------------------------------------------- */

typedef struct api_token {
    char token[128];
    st_role_t role;
    char team[ST_NAME_MAX];
    char name[ST_NAME_MAX];
} api_token_t;

typedef struct api_tokens {
    int n;
    api_token_t *v;
} api_tokens_t;

/* Load a tokens file: one token a line, "TOKEN ROLE TEAM [NAME]", ROLE one
 * of admin, user, agent; '#' starts a comment. Messages name FILE:LINE.
 * Free with api_tokens_free. */
int api_tokens_load(const char *path, api_tokens_t *t, arb_err_t *err);
void api_tokens_free(api_tokens_t *t);
/* The token's entry, or NULL (compares in time independent of where the
 * first difference is). */
const api_token_t *api_tokens_find(const api_tokens_t *t, const char *token);
const char *api_role_name(st_role_t r);

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
    const api_tokens_t *tokens; /* NULL: no auth (every caller is admin) */
    const api_ha_t *ha;         /* NULL: a single controller (borrowed; outlives the server) */
    const char *name;           /* this controller's name in GET /v1/leader (NULL: "local") */
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

/* ---- the route table --------------------------------------------------------------- */

typedef struct api_req api_req_t;

typedef struct api_route {
    const char *method;
    const char *path; /* "/v1/jobs/{id}": {x} matches one segment */
    unsigned roles;   /* st_role_t bits allowed; 0: no auth needed */
    int (*fn)(api_req_t *r);
    const char *summary;
    const char *doc; /* parameters, body and reply, for docs/api.md */
} api_route_t;

extern const api_route_t api_routes[];

/* Write docs/api.md (from the route table and the config key table). */
void api_doc_markdown(FILE *f);

#endif
