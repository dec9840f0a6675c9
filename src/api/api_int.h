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
    const char *node; /* an agent's own node (its token or certificate); NULL none */
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
    /* long polls (api_poll) */
    int64_t poll_until_ms; /* CLOCK_MONOTONIC deadline once waiting; 0 not yet */
    bool poll_over;        /* the deadline passed, or the server stops: answer now */
    bool suspend;          /* set by api_poll: no reply yet, run again later */
};

/* A long poll with nothing to say yet: returns true when the handler should
 * return at once (no reply), to be run again when the state changes or at
 * the deadline (wait_ms from its first run); false when it must answer now
 * with what it has (wait_ms 0, the deadline passed, the server stops). No
 * thread is held while it waits (conn.c). */
bool api_poll(api_req_t *r, int64_t wait_ms);

/* ---- connections (conn.c) ---------------------------------------------------------
 * Every connection is known to the server's housekeeping thread, which
 * closes those that take too long (the phases below, each with its own
 * deadline; a client that sends a header line every few seconds no longer
 * holds a connection for ever), and resumes the long polls that were
 * suspended, when the state changed or their time is up.
 *
 *   accept --> IDLE --first line--> HEAD --head read--> BODY --body read--> BUSY
 *               ^                                                            |
 *               +---------------------- reply sent --------------------------+
 *
 *   IDLE: idle_ms (keep-alive), HEAD: head_ms, BODY: body_ms, BUSY: none (a
 *   handler or a long poll runs; libmicrohttpd's inactivity timeout still
 *   applies to a client that stops reading).
 */
typedef enum { API_PH_IDLE, API_PH_HEAD, API_PH_BODY, API_PH_BUSY } api_phase_t;

typedef struct api_conn {
    struct api_conn *prev, *next; /* the housekeeper's list (its lock) */
    int fd;
    api_phase_t phase; /* its lock */
    int64_t since_ms;  /* when the phase began (CLOCK_MONOTONIC) */
    bool shut;         /* closed for a deadline */
    /* touched by the connection's own thread only: */
    const char *raw_uri; /* the request target as it came (libmicrohttpd's buffer) */
    size_t raw_len;
    bool nul_in_target; /* a %00 in the path or query */
    bool cert_checked;
    api_cert_t cert;
} api_conn_t;

typedef struct api_park {
    struct api_park *prev, *next;
    void *conn; /* struct MHD_Connection *, suspended */
    uint64_t gen;
    int64_t until_ms;
    bool parked;
} api_park_t;

typedef struct api_hk api_hk_t;

int api_hk_start(api_hk_t **out, int idle_ms, int head_ms, int body_ms, arb_err_t *err);
/* The server stops: resume every parked long poll now and park no more. */
void api_hk_wake_all(api_hk_t *hk);
/* After the daemon stopped: end the thread, free. */
void api_hk_stop(api_hk_t *hk);
/* The state changed (st_set_change_hook; called under the state's lock). */
void api_hk_changed(void *hk);
uint64_t api_hk_gen(api_hk_t *hk);
bool api_hk_stopping(api_hk_t *hk);
/* Park a suspended connection until the state changes from gen or until
 * until_ms: true parked; false (the state changed already, or the server
 * stops) the caller resumes it itself. */
bool api_hk_park(api_hk_t *hk, api_park_t *p, void *conn, uint64_t gen, int64_t until_ms);
/* Connections: opened and closed by libmicrohttpd's notifications. */
api_conn_t *api_conn_open(api_hk_t *hk, int fd);
void api_conn_close(api_hk_t *hk, api_conn_t *c);
void api_conn_phase(api_hk_t *hk, api_conn_t *c, api_phase_t ph);
/* Connections closed for each deadline so far: idle, head, body. */
void api_hk_counts(api_hk_t *hk, uint64_t out[3]);

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
