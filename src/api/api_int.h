/*
 * api_int.h: what http.c (the libmicrohttpd glue) and routes.c (the route
 * table and handlers) share. Not a public API.
 */
#ifndef ARB_API_INT_H
#define ARB_API_INT_H

#include "api/api.h"

#define API_MAX_PARAMS 4

struct api_req {
    void *conn; /* struct MHD_Connection * */
    const char *method, *url;
    const char *body; /* NUL-terminated; n bytes */
    size_t n;
    bool yaml; /* Content-Type says YAML */
    char params[API_MAX_PARAMS][256];
    st_who_t who;
    st_t *st;
    const api_ha_t *ha; /* NULL: a single controller */
    const char *self_name, *self_url;
    /* the reply */
    int status;
    json_t *json; /* owned; sent when text is NULL */
    char *text;   /* owned; sent as ctype */
    size_t textlen;
    const char *ctype;
    const char *location; /* a Location header (3xx); owned by the request's caller */
    int retry_after;      /* a Retry-After header when > 0 */
};

/* A query parameter, or NULL. */
const char *api_query(api_req_t *r, const char *key);
/* A request header, or NULL. */
const char *api_header(api_req_t *r, const char *key);

/* Set an error reply: {"error": {"status", "reason", "message"}}; returns status. */
int api_error(api_req_t *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Finish a state call: wait for its ticket, then reply ok_status with out
 * (taken), or the error that rc and err map to. */
int api_finish(api_req_t *r, int rc, json_t *out, int64_t ticket, const arb_err_t *err,
               int ok_status);

/* POST /v1/jobs of a Kubernetes manifest or a Slurm script (submit_wl.c). */
bool api_is_workload(const api_req_t *r);
int api_submit_workload(api_req_t *r);

#endif
