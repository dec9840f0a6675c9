/*
 * api_int.h: what http.c (the libmicrohttpd glue), routes.c (the route
 * table and handlers) and the API's encoders share. Not a public API.
 */
#ifndef ARB_API_INT_H
#define ARB_API_INT_H

#include "api/api.h"
#include "util/buf.h"

#define API_MAX_PARAMS 4

/* A reply waiting for its store ticket (api_finish). */
typedef struct api_defer {
    bool on;
    int64_t ticket;
    int rc, ok;
    json_t *out; /* owned */
    char *text;  /* owned: the reply's text, written straight (api_finish_text); NULL none */
    size_t textlen;
    char msg[512];
    int64_t report_t0; /* a report: when it began (arbiter_node_report_seconds), 0 none */
} api_defer_t;

/* ---- the route table (routes.c) ----------------------------------------------------
 * One row per route: method, path pattern, the roles allowed, how the
 * router treats it (flags), the body it takes, the handler, and its docs.
 * http.c's dispatch matches the path (404, or 405 with the allowed methods),
 * sends a follower's request to the leader, refuses a failed store,
 * authenticates and checks the role from the row; api_route_run then reads
 * what the row says the request carries (If-Match, a node name, the body)
 * before the handler runs. docs/api.md is made from the same rows.
 */
typedef struct api_req api_req_t;

/* A roles bit: an agent may use the route for its own node only (the
 * {name} of the path, else the `node` query parameter): 403 otherwise. */
#define API_SELF 8u

/* api_route_t.flags */
#define API_HERE 1u      /* answered by every controller: no follower redirect */
#define API_UNCHECKED 2u /* answered when the store failed too */
#define API_OPEN 4u      /* never authenticated, not even with --client-cert-auth */
#define API_IF_MATCH 8u  /* header If-Match: VERSION read into r->if_match (-1 absent; 400) */
#define API_NODE 16u     /* {name} is a node name: checked (404 naming the rule) */
#define API_JOB 32u      /* {id} is a job id: read into r->job first (404 if not one) */

/* api_route_t.body: what the body is (routes.c's table of them says how
 * each is read: required or not, the name its parse errors give). */
typedef enum {
    API_BODY_NONE,     /* ignored */
    API_BODY_SPEC,     /* a job spec or workload, JSON or YAML: raw in r->body, not empty */
    API_BODY_REPORT,   /* an agent's report: JSON in r->jbody */
    API_BODY_NODE,     /* an operator's change to a node: JSON in r->jbody */
    API_BODY_NODE_OPT, /* the same, or empty (r->jbody NULL) */
    API_BODY_LOAD,     /* a balancer's load counts: JSON in r->jbody */
} api_body_t;

/* A simple read, answered without a handler of its own (fn NULL): the
 * state's typed view named in the row's flags, API_READ(op) (routes.c's
 * table of read ops: the state call, its encoder, its free), encoded. */
typedef enum {
    API_READ_NONE,           /* the row's fn answers */
    API_READ_NODES,          /* st_nodes_list -> api_nodes_json */
    API_READ_NODE,           /* st_node_get({name}) -> api_node_json */
    API_READ_NODE_TELEMETRY, /* st_node_telemetry({name}) -> api_telemetry_json */
    API_READ_QUEUES,         /* st_queues_list -> api_queues_json */
    API_READ_PRIO_CLASSES,   /* st_priority_classes -> api_prio_classes_json */
    API_READ_SERVICES,       /* st_services_list(the caller) -> api_services_json */
} api_read_t;
#define API_READ_SHIFT 8u
#define API_READ(op) ((unsigned)(op) << API_READ_SHIFT) /* in api_route_t.flags */
#define API_ROUTE_READ(rt) ((api_read_t)((rt)->flags >> API_READ_SHIFT))

typedef struct api_route {
    const char *method;
    const char *path; /* "/v1/jobs/{id}": {x} matches one segment */
    unsigned roles;   /* st_role_t bits allowed; 0: no auth needed; API_SELF: see above */
    unsigned flags;   /* API_HERE, API_UNCHECKED, API_OPEN, API_JOB, API_IF_MATCH, API_NODE;
                         API_READ(op): a simple read */
    api_body_t body;
    int (*fn)(api_req_t *r); /* NULL: a simple read (API_READ in flags) */
    const char *summary;
    const char *doc; /* parameters, body and reply, for docs/api.md */
} api_route_t;

extern const api_route_t api_routes[];

/* Run rt's handler (or its simple read) on r: what rt's flags and body say
 * the request carries is read first, in this order: the job id, If-Match,
 * the node name, the body (an error reply, and no handler, for the first
 * that is malformed). */
int api_route_run(const api_route_t *rt, api_req_t *r);

struct api_req {
    void *conn; /* struct MHD_Connection * */
    const char *method, *url;
    const char *body; /* NUL-terminated; n bytes */
    size_t n;
    bool yaml; /* Content-Type says YAML */
    char params[API_MAX_PARAMS][256];
    /* read by api_route_run as the route's row says */
    uint64_t job;     /* API_JOB: the job id of the path */
    int64_t if_match; /* API_IF_MATCH: the version the client has; -1 none */
    json_t *jbody;    /* a JSON body (owned by api_route_run); NULL none */
    st_who_t who;
    const char *node; /* an agent's own node (its token or certificate); NULL none */
    st_t *st;
    const api_ha_t *ha; /* NULL: a single controller */
    const char *self_name, *self_url;
    api_server_t *srv; /* the server it came to (its request counts); NULL none */
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
    bool poll_over;        /* the deadline passed, or the server stops: answer now (the
                              state's own stop is read by api_poll) */
    bool suspend;          /* set by api_poll: no reply yet, run again later */
    uint32_t poll_key;     /* a node's id + 1: woken by that node's changes only
                              (api_hk_changed_key); 0: by any change of the state */
    api_defer_t defer;     /* set by api_finish: the reply waits for its ticket */
    bool no_defer;         /* the handler edits the reply after api_finish: wait here */
    bool asset;            /* a console file (ui.c): text is static, not freed; ETag, CSP */
    char etag[24];
};

/* The console's files (generated by cmake/embed.cmake from src/api/ui/):
 * name, bytes (NUL after the last), length; NULL name ends the table. */
typedef struct api_asset {
    const char *name;
    const unsigned char *data;
    size_t len;
} api_asset_t;
extern const api_asset_t api_ui_assets[];

/* The console's routes (ui.c): /ui/, /ui/NAME, and / or /ui sent to /ui/. */
int api_ui_index(api_req_t *r);
int api_ui_file(api_req_t *r);
int api_ui_redirect(api_req_t *r);

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
    bool peer_set; /* peer written (the first request) */
    char peer[46]; /* the client's address as text (INET6_ADDRSTRLEN) */
} api_conn_t;

typedef struct api_park {
    struct api_park *prev, *next;
    void *conn;   /* struct MHD_Connection *, suspended */
    uint64_t gen; /* the state's change count it saw (key 0), or the keyed one (key > 0) */
    uint32_t key; /* 0: any change wakes it; else only api_hk_changed_key(key) */
    int64_t until_ms;
    bool parked;
    st_t *st; /* a reply after a commit: whose ticket */
    int64_t ticket;
} api_park_t;

typedef struct api_hk api_hk_t;

int api_hk_start(api_hk_t **out, int idle_ms, int head_ms, int body_ms, arb_err_t *err);
/* The server stops: resume every parked long poll now and park no more. */
void api_hk_wake_all(api_hk_t *hk);
/* After the daemon stopped: end the thread, free. */
void api_hk_stop(api_hk_t *hk);
/* The state changed (st_set_change_hook; called under the state's lock). */
void api_hk_changed(void *hk);
/* One node's assignments may have moved (st_set_node_hook; under the
 * state's lock): resume, on the calling thread, the long polls parked with
 * that key before this call (0: every keyed
 * one, as when the state quiesces). */
void api_hk_changed_key(void *hk, uint32_t key);
/* Read before each request's handler, under one lock: the count of changes
 * (gen), of keyed changes (kgen), and whether the server stops. */
void api_hk_snap(api_hk_t *hk, uint64_t *gen, uint64_t *kgen, bool *stopping);
/* Park a suspended connection until the state changes from gen or until
 * until_ms: true parked; false (the state changed already, or the server
 * stops) the caller resumes it itself. */
bool api_hk_park(api_hk_t *hk, api_park_t *p, void *conn, uint64_t gen, int64_t until_ms);
/* The same for a keyed poll: parked until api_hk_changed_key(key) or
 * until_ms; false when any keyed change came since kgen (api_hk_snap's
 * before the handler looked: the caller runs it again) or the server stops. */
bool api_hk_park_key(api_hk_t *hk, api_park_t *p, void *conn, uint32_t key, uint64_t kgen,
                     int64_t until_ms);
/* Connections: opened and closed by libmicrohttpd's notifications. */
api_conn_t *api_conn_open(api_hk_t *hk, int fd);
void api_conn_close(api_hk_t *hk, api_conn_t *c);
void api_conn_phase(api_hk_t *hk, api_conn_t *c, api_phase_t ph);
/* Connections closed for each deadline so far: idle, head, body. */
void api_hk_counts(api_hk_t *hk, uint64_t out[3]);
/* How often the long polls woke the housekeeping thread so far (a change
 * for an unkeyed poll, a deadline nearer than its next look). */
uint64_t api_hk_signals(api_hk_t *hk);
/* The same for a server (tests). */
uint64_t api_server_hk_signals(api_server_t *a);
/* Append a's request counts to b in Prometheus text (arbiter_http_requests_total
 * by route, arbiter_http_request_reruns_total); 0, or -ENOMEM. */
int api_server_metrics(const api_server_t *a, arb_buf_t *b);
/* Resume conn (suspended) once ticket of s is durable: api_hk_durable,
 * called by s's store after each commit, resumes it. p is the caller's (it
 * lives in the request). false: durable already, or the server stops; the
 * caller resumes it itself. */
bool api_hk_after_commit(api_hk_t *hk, api_park_t *p, void *conn, st_t *s, int64_t ticket);
/* A commit is durable (st_set_durable_hook, on the store's commit thread):
 * resume the replies parked by api_hk_after_commit whose ticket it covers. */
void api_hk_durable(void *hk);

/* The event-loop threads for api_opts_t.threads = want on ncpu CPUs
 * (sysconf's count; <= 0 unknown): want itself (at most 256), or for want
 * 0 one per CPU, at least 2 and at most 64. */
int api_loop_threads(int want, long ncpu);

/* A query parameter, or NULL. */
const char *api_query(api_req_t *r, const char *key);
/* A request header, or NULL. */
const char *api_header(api_req_t *r, const char *key);

/* Set an error reply: {"error": {"status", "reason", "message"}}; returns status. */
int api_error(api_req_t *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Finish a state call: once its ticket is durable, reply ok_status with out
 * (taken), or the error that rc and err map to. When the ticket is not
 * durable yet the reply is parked (r->defer) and sent after the commit. */
int api_finish(api_req_t *r, int rc, json_t *out, int64_t ticket, const arb_err_t *err,
               int ok_status);
/* The same with the reply's text already written (text taken: sent as
 * application/json, so it ends with the newline send_reply adds to a tree). */
int api_finish_text(api_req_t *r, int rc, char *text, size_t len, int64_t ticket,
                    const arb_err_t *err, int ok_status);

/* ---- encoders (enc_*.c): the state's typed views as the JSON clients read -------------
 * Each returns a new reference (NULL only when out of memory). */
json_t *api_res_json(const arb_res_t *r);
json_t *api_queues_json(const st_queue_list_t *l);
json_t *api_status_json(const st_status_t *v);
json_t *api_prio_classes_json(const st_prio_list_t *l);
json_t *api_node_json(const st_node_view_t *v);
json_t *api_nodes_json(const st_node_list_t *l);
/* A GPU mask as the list of its device indices ([0, 3]): nodes' and jobs' tasks. */
json_t *api_gpu_list(uint16_t mask);
json_t *api_telemetry_json(const st_telemetry_view_t *v);
json_t *api_logs_ticket_json(const st_logs_ticket_t *v);
json_t *api_ticket_ok_json(int64_t ttl_ms);
json_t *api_service_json(const st_service_view_t *v);
json_t *api_services_json(const st_service_list_t *l);
json_t *api_load_ack_json(const char *service, const st_load_ack_t *v);
/* Decoders: a body the API received, checked, as the state's typed input.
 * A balancer's load report ({"replicas": [{"address", "inflight",
 * "queue"}]}): *out (malloc'd, *n entries; the addresses borrowed from
 * body), or -EINVAL naming the field (-ENOMEM). */
int api_load_decode(const json_t *body, st_replica_load_t **out, int *n, arb_err_t *err);
/* A cordon's, drain's or uncordon's body (enc_node.c): NULL or
 * {"reason": TEXT}; reason ("" none; n bytes, ST_REASON_MAX) or -EINVAL
 * naming the field. */
int api_cordon_decode(const json_t *body, char *reason, size_t n, arb_err_t *err);
/* A node patch's body (enc_node.c): *out (the caller's: api_patch_free;
 * strings borrowed from body), or -EINVAL naming the field (-ENOMEM),
 * *out empty. */
int api_patch_decode(const json_t *body, st_patch_t *out, arb_err_t *err);
void api_patch_free(st_patch_t *p);
/* An agent's report (enc_report.c): *out (the caller's: api_report_free;
 * the inventory and telemetry as JSON text), or -EINVAL naming the field
 * (-ENOMEM), *out empty. The inventory's own fields are checked by the
 * state (st_node_report). */
int api_report_decode(const json_t *body, st_report_t *out, arb_err_t *err);
void api_report_free(st_report_t *r);
/* The reply to a report; the assignments long poll's list. */
json_t *api_report_reply_json(const st_report_reply_t *r);
json_t *api_assignments_json(const char *node, uint64_t lamport, uint64_t epoch,
                             const st_assign_list_t *l);
/* The same replies' text written straight into b (the trees above are it
 * parsed): 0, -EINVAL, -ENOMEM. */
int api_report_reply_write(arb_buf_t *b, const st_report_reply_t *r);
int api_assignments_write(arb_buf_t *b, const char *node, uint64_t lamport, uint64_t epoch,
                          const st_assign_list_t *l);
json_t *api_event_json(const st_event_view_t *v);
json_t *api_events_json(const st_event_list_t *l);
json_t *api_job_json(const st_job_view_t *v);
json_t *api_jobs_json(const st_job_list_t *l);
/* The same jobs' text written straight into b (the trees above are it
 * parsed): 0, -EINVAL (a string jansson could not pack), -ENOMEM. */
int api_job_write(arb_buf_t *b, const st_job_view_t *v);
int api_jobs_write(arb_buf_t *b, const st_job_list_t *l);
/* api_explain_json: api.h (`arbiter place` prints it too). */

/* POST /v1/jobs of a Kubernetes manifest or a Slurm script (submit_wl.c). */
bool api_is_workload(const api_req_t *r);
int api_submit_workload(api_req_t *r);

#endif
