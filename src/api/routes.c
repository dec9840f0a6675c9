/*
 * routes.c: the API's one route table and its handlers. A row says the
 * method, the path, the roles allowed, how the router treats the route
 * (answered by a follower too, unauthenticated, a job id or node name in
 * the path, If-Match) and what its body is; http.c's dispatch and
 * api_route_run act on the row, so a handler starts from a request already
 * read: it parses its query, calls one resource-manager function
 * (src/state), and hands the result to api_finish, which waits until what
 * the call did or saw is durable before the reply goes out. A simple read
 * (a typed view of the state, encoded, nothing else) has no handler: its
 * row names a read op (READ(op)) from the reads table below. docs/api.md
 * is generated from this table (api_doc_markdown).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api_int.h"
#include "util/duration.h"
#include "util/mtime.h"

#define ANYONE 0u
#define ADMIN ST_ROLE_ADMIN
#define USER ST_ROLE_USER
#define AGENT ST_ROLE_AGENT
#define SELF API_SELF /* an agent for its own node only */
/* the router's flags (api_int.h) and body kinds, short for the table */
#define PLAIN 0u
#define HERE API_HERE
#define UNCHECKED API_UNCHECKED
#define OPEN API_OPEN
#define JOB API_JOB
#define IF_MATCH API_IF_MATCH
#define NODE API_NODE
#define NOBODY API_BODY_NONE
#define SPEC API_BODY_SPEC
#define REPORT API_BODY_REPORT
#define NODE_BODY API_BODY_NODE
#define NODE_OPT API_BODY_NODE_OPT
#define LOAD API_BODY_LOAD
#define READ(op) API_READ(API_READ_##op) /* a simple read: no handler (fn NULL) */

/* ---- parameter parsing --------------------------------------------------------------- */

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno)
        return -EINVAL;
    *out = v;
    return 0;
}

static int job_id(api_req_t *r, uint64_t *id)
{
    if (parse_u64(r->params[0], id) < 0 || *id == 0)
        return api_error(r, 404, "job '%s': job ids are positive integers", r->params[0]);
    return 0;
}

/* If-Match: "3", 3 or W/"3"; -1 when absent. */
static int if_match(api_req_t *r, int64_t *v)
{
    const char *h = api_header(r, "If-Match");
    char buf[32];
    size_t k = 0;
    uint64_t x;

    *v = -1;
    if (!h)
        return 0;
    if (strncmp(h, "W/", 2) == 0)
        h += 2;
    for (; *h && k + 1 < sizeof buf; h++)
        if (*h != '"' && *h != ' ')
            buf[k++] = *h;
    buf[k] = '\0';
    if (parse_u64(buf, &x) < 0 || x > INT64_MAX)
        return api_error(r, 400, "If-Match: '%s' is not a version number", buf);
    *v = (int64_t)x;
    return 0;
}

/* ---- handlers ---------------------------------------------------------------------------- */

static int h_healthz(api_req_t *r)
{
    r->text = strdup("ok\n");
    r->textlen = 3;
    r->ctype = "text/plain";
    r->status = 200;
    return 200;
}

static int h_metrics(api_req_t *r)
{
    arb_buf_t b = {0};

    if (st_metrics(r->st, &b.p, &b.len) < 0)
        return api_error(r, 500, "out of memory");
    b.cap = b.len + 1; /* st_metrics' text is NUL-terminated, len + 1 bytes at least */
    if (r->srv && api_server_metrics(r->srv, &b) < 0) {
        arb_buf_free(&b);
        return api_error(r, 500, "out of memory");
    }
    r->textlen = b.len;
    r->text = arb_buf_take(&b);
    r->ctype = "text/plain; version=0.0.4";
    r->status = 200;
    return 200;
}

static int h_status(api_req_t *r)
{
    st_status_t ss;
    st_status(r->st, &ss);
    json_t *o = api_status_json(&ss);
    json_t *you = json_pack("{s:s,s:s,s:s}", "role", api_role_name(r->who.role), "team",
                            r->who.team, "name", r->who.name);
    if (r->node)
        json_object_set_new(you, "node", json_string(r->node));
    json_object_set_new(o, "you", you);
    return api_finish(r, 0, o, 0, NULL, 200);
}

static int h_check(api_req_t *r)
{
    arb_err_t err = {{0}};
    int rc = st_check(r->st, &err);
    if (rc < 0)
        return api_error(r, 500, "invariant broken: %s", err.msg);
    return api_finish(r, 0, json_pack("{s:b}", "ok", 1), 0, NULL, 200);
}

/* Who leads: this controller alone (term: its epoch), or what the election
 * (src/ha) knows. ?require=self: 503 unless this controller leads and
 * serves (a health check that finds the leader, for `arbiter lb`). */
static int h_leader(api_req_t *r)
{
    char name[128], url[256];
    int64_t term = 0;
    int rc = 1;
    const char *req = api_query(r, "require");

    if (r->ha) {
        rc = r->ha->leader(r->ha->arg, name, sizeof name, url, sizeof url, &term);
    } else {
        st_status_t ss;
        st_status(r->st, &ss);
        term = (int64_t)ss.epoch;
        snprintf(name, sizeof name, "%s", r->self_name);
        snprintf(url, sizeof url, "%s", r->self_url);
    }
    if (rc < 0) {
        r->retry_after = 1;
        return api_error(r, 503, "no leader is known yet (an election is under way); retry");
    }
    bool serving = rc == 1 && r->st != NULL; /* rc 1: this one leads, its lease alive */
    if (req && strcmp(req, "self") == 0 && !serving) {
        r->retry_after = 1;
        return api_error(r, 503, "%s does not serve as leader now; %s (%s) leads", r->self_name,
                         name, url);
    }
    /* Not api_finish: a follower has no state to wait on. */
    r->json = json_pack("{s:s,s:s,s:I,s:s,s:b}", "leader", name, "url", url, "term",
                        (json_int_t)term, "you", r->self_name, "serving", serving);
    r->status = 200;
    return 200;
}

/* The reply of a call that gives one job: its view encoded, then freed. */
static int finish_job(api_req_t *r, int rc, st_job_view_t *v, int64_t t, const arb_err_t *err,
                      int ok_status)
{
    arb_buf_t b = {0};
    arb_err_t oom = {{0}};

    if (rc == 0) { /* written straight (enc_job.c), a newline after it as send_reply adds */
        (void)arb_buf_reserve(&b, 2048);
        if (api_job_write(&b, v) < 0 || arb_buf_putc(&b, '\n') < 0) {
            rc = arb_errf(&oom, -ENOMEM,
                          "cannot encode job %llu (out of memory, or a name that is not UTF-8)",
                          (unsigned long long)v->id);
            err = &oom;
            arb_buf_free(&b);
        }
    }
    st_job_view_free(v);
    size_t len = b.len;
    return api_finish_text(r, rc, arb_buf_take(&b), len, t, err, ok_status);
}

static int h_submit(api_req_t *r)
{
    arb_err_t err = {{0}};
    int64_t t = 0;

    if (api_is_workload(r)) /* a Kubernetes manifest or a Slurm script (submit_wl.c) */
        return api_submit_workload(r);
    bool created = false;
    st_job_view_t v;
    int rc = st_job_submit_key(r->st, &r->who, api_header(r, "Idempotency-Key"), r->body, r->n,
                               r->yaml, &v, &created, &t, &err);
    return finish_job(r, rc, &v, t, &err, created ? 201 : 200);
}

static int h_jobs(api_req_t *r)
{
    arb_err_t err = {{0}};
    int64_t t = 0;
    uint64_t after = 0, limit = 0;
    const char *a = api_query(r, "after"), *l = api_query(r, "limit");

    if (a && parse_u64(a, &after) < 0)
        return api_error(r, 400, "after: '%s' is not a job id", a);
    if (l && (parse_u64(l, &limit) < 0 || limit > 1000000))
        return api_error(r, 400, "limit: '%s' is not a count (0..1000000)", l);
    st_job_list_t jl;
    int rc = st_jobs_list(r->st, &r->who, api_query(r, "state"), api_query(r, "queue"), after,
                          (int)limit, &jl, &t, &err);
    if (rc == -EINVAL)
        rc = -EBADMSG; /* a bad query parameter is a bad request */
    arb_buf_t b = {0};
    if (rc == 0 && (api_jobs_write(&b, &jl) < 0 || arb_buf_putc(&b, '\n') < 0)) {
        rc = arb_errf(&err, -ENOMEM,
                      "cannot encode the jobs (out of memory, or a name that is not UTF-8)");
        arb_buf_free(&b);
    }
    st_job_list_free(&jl);
    size_t len = b.len;
    return api_finish_text(r, rc, arb_buf_take(&b), len, t, &err, 200);
}

static int h_job(api_req_t *r)
{
    arb_err_t err = {{0}};
    int64_t t = 0;
    st_job_view_t v;
    int rc = st_job_get(r->st, &r->who, r->job, &v, &t, &err);
    return finish_job(r, rc, &v, t, &err, 200);
}

static int h_cancel(api_req_t *r)
{
    arb_err_t err = {{0}};
    int64_t t = 0;
    st_job_view_t v;
    int rc = st_job_cancel(r->st, &r->who, r->job, r->if_match, &v, &t, &err);
    return finish_job(r, rc, &v, t, &err, 200);
}

static int h_explain(api_req_t *r)
{
    arb_err_t err = {{0}};
    int64_t t = 0;
    const char *nodes = api_query(r, "nodes");

    if (nodes && strcmp(nodes, "true") != 0 && strcmp(nodes, "false") != 0)
        return api_error(r, 400, "nodes: '%s'; use true or false", nodes);
    st_explain_view_t v;
    int rc = st_job_explain_ex(r->st, &r->who, r->job, nodes && strcmp(nodes, "true") == 0, &v, &t,
                               &err);
    json_t *out = rc == 0 ? api_explain_json(&v) : NULL;
    st_explain_view_free(&v);
    return api_finish(r, rc, out, t, &err, 200);
}

/* A node operation's view, encoded once the call returned. */
static int finish_node(api_req_t *r, int rc, st_node_view_t *v, int64_t t, const arb_err_t *err)
{
    json_t *out = rc == 0 ? api_node_json(v) : NULL;

    st_node_view_free(v);
    return api_finish(r, rc, out, t, err, 200);
}

static int h_report(api_req_t *r)
{
    arb_err_t err = {{0}};
    json_t *out = NULL;
    char *text = NULL; /* the reply, written straight (enc_report.c) */
    size_t len = 0;
    int64_t t = 0, t0 = arb_mono_ns();

    int rc = api_node_report_text(r->st, &r->who, r->params[0], r->if_match, r->jbody, &text, &len,
                                  &out, &t, &err);
    /* A Lamport time too far ahead: the refusal carries the clock. */
    json_t *lam = rc == -ERANGE ? json_incref(json_object_get(out, "lamport")) : NULL;
    r->no_defer = lam != NULL; /* the refusal carries the clock: made here, now */
    json_decref(out);          /* only the refusal's clock, taken above */
    rc = api_finish_text(r, rc, text, len, t, &err, 200);
    if (lam) /* jansson drops lam when there is no error object */
        json_object_set_new(json_object_get(r->json, "error"), "lamport", lam);
    if (r->defer.on)
        r->defer.report_t0 = t0; /* noted when the reply goes, after its commit */
    else
        st_note_report(r->st, arb_mono_ns() - t0);
    return rc;
}

/* The list now; with `wait` and the `version` the agent has, a long poll
 * keyed by the node: it answers when the list differs from that version
 * (a job placed there, a stop, a resize), at the deadline, or when the
 * server stops. With `epoch`, nothing goes to an agent of another epoch or
 * a lost node (409: it reports first). */
static int h_assignments(api_req_t *r)
{
    arb_err_t err = {{0}};
    char *text = NULL; /* the reply, written straight (enc_report.c) */
    size_t len = 0;
    int64_t t = 0, epoch = -1;
    uint64_t wait = 0, have = 0, e;
    uint32_t key = 0;
    bool same = false;
    const char *p;

    if ((p = api_query(r, "wait")) && (parse_u64(p, &wait) < 0 || wait > 60))
        return api_error(r, 400, "wait: '%s'; use 0..60 (seconds)", p);
    if ((p = api_query(r, "version")) && (parse_u64(p, &have) < 0 || have > INT64_MAX))
        return api_error(r, 400, "version: '%s'; give the assignments_version of the list you have",
                         p);
    if ((p = api_query(r, "epoch"))) {
        if (parse_u64(p, &e) < 0 || e > INT64_MAX)
            return api_error(r, 400, "epoch: '%s'; give the epoch of your lease (an integer)", p);
        epoch = (int64_t)e;
    }
    int rc =
        api_node_assignments(r->st, r->params[0], epoch, have, &same, &key, &text, &len, &t, &err);
    if (rc == 0 && same && api_poll(r, (int64_t)wait * 1000)) {
        r->poll_key = key; /* woken by this node's changes only */
        free(text);
        return 0;
    }
    return api_finish_text(r, rc, text, len, t, &err, 200);
}

/* Node operations (src/state/nodeops.c): the router checked the node name
 * and read the body (api_route_run). */
static int cordon(api_req_t *r, st_cordon_t what)
{
    arb_err_t err = {{0}};
    st_node_view_t v = {0};
    char reason[ST_REASON_MAX];
    int64_t t = 0;
    int rc = api_cordon_decode(r->jbody, reason, sizeof reason, &err);

    if (rc == 0)
        rc = st_node_cordon(r->st, &r->who, r->params[0], what, reason, r->if_match, &v, &t, &err);
    return finish_node(r, rc, &v, t, &err);
}

static int h_cordon(api_req_t *r)
{
    return cordon(r, ST_CORDON);
}

static int h_drain(api_req_t *r)
{
    return cordon(r, ST_DRAIN);
}

static int h_uncordon(api_req_t *r)
{
    return cordon(r, ST_UNCORDON);
}

static int h_node_patch(api_req_t *r)
{
    arb_err_t err = {{0}};
    st_node_view_t v = {0};
    st_patch_t p;
    int64_t t = 0;
    int rc = api_patch_decode(r->jbody, &p, &err);

    if (rc == 0) {
        rc = st_node_patch(r->st, &r->who, r->params[0], &p, r->if_match, &v, &t, &err);
        api_patch_free(&p);
    }
    return finish_node(r, rc, &v, t, &err);
}

static int h_node_delete(api_req_t *r)
{
    arb_err_t err = {{0}};
    st_node_view_t v;
    int64_t t = 0;
    int rc = st_node_delete(r->st, r->params[0], r->if_match, &v, &t, &err);
    return finish_node(r, rc, &v, t, &err);
}

static int h_events(api_req_t *r)
{
    arb_err_t err = {{0}};
    int64_t t = 0;
    uint64_t since = 0, limit = 1000, wait = 0;
    const char *p;

    if ((p = api_query(r, "since")) && parse_u64(p, &since) < 0)
        return api_error(r, 400, "since: '%s' is not a Lamport time", p);
    if ((p = api_query(r, "limit")) && (parse_u64(p, &limit) < 0 || limit > 10000))
        return api_error(r, 400, "limit: '%s'; use 1..10000", p);
    if ((p = api_query(r, "wait")) && (parse_u64(p, &wait) < 0 || wait > 60))
        return api_error(r, 400, "wait: '%s'; use 0..60 (seconds)", p);
    /* The answer now; when there is none yet, the connection waits without
     * a thread (api_poll) and this runs again when the state changes. */
    st_event_list_t l;
    int rc = st_events(r->st, &r->who, since, (int)limit, 0, &l, &t, &err);
    if (rc == 0 && l.n == 0 && l.last == since && api_poll(r, (int64_t)wait * 1000)) {
        st_event_list_free(&l);
        return 0;
    }
    json_t *out = rc == 0 ? api_events_json(&l) : NULL;
    st_event_list_free(&l);
    return api_finish(r, rc, out, t, &err, 200);
}

/* Log tickets (src/state/logticket.c): a user asks for one, the agent
 * that holds the log checks it. */
static int h_logs_ticket(api_req_t *r)
{
    arb_err_t err = {{0}};
    st_logs_ticket_t v;
    int64_t t = 0;
    uint64_t task = 0;
    const char *q = api_query(r, "task");

    if (q && (parse_u64(q, &task) < 0 || task > 1000000))
        return api_error(r, 400, "task: '%s' is not a task index; use 0, 1, ...", q);
    int rc = st_logs_ticket(r->st, &r->who, r->job, (int64_t)task, &v, &t, &err);
    json_t *out = rc == 0 ? api_logs_ticket_json(&v) : NULL;

    st_logs_ticket_free(&v);
    return api_finish(r, rc, out, t, &err, 200);
}

static int h_logs_ticket_check(api_req_t *r)
{
    arb_err_t err = {{0}};
    int64_t t = 0, ttl_ms = 0;
    uint64_t job = 0, task = 0;
    const char *qj = api_query(r, "job"), *qt = api_query(r, "task"), *node = api_query(r, "node");

    if (!qj || parse_u64(qj, &job) < 0 || !qt || parse_u64(qt, &task) < 0 || task > 1000000 ||
        !node || !node[0])
        return api_error(r, 400, "give job, task (integers) and node as query parameters");
    int rc = st_logs_ticket_check(r->st, r->params[0], job, (int64_t)task, node, &ttl_ms, &t, &err);
    return api_finish(r, rc, rc == 0 ? api_ticket_ok_json(ttl_ms) : NULL, t, &err, 200);
}

/* Services (src/state/service.c): endpoints with a long poll, balancers' load. */
static int h_service(api_req_t *r)
{
    arb_err_t err = {{0}};
    st_service_view_t v;
    int64_t t = 0;
    uint64_t version = 0, wait = 0;
    const char *p;

    if ((p = api_query(r, "version")) && parse_u64(p, &version) < 0)
        return api_error(r, 400, "version: '%s' is not an endpoints version", p);
    if ((p = api_query(r, "wait")) && (parse_u64(p, &wait) < 0 || wait > 60))
        return api_error(r, 400, "wait: '%s'; use 0..60 (seconds)", p);
    int rc = st_service_endpoints(r->st, &r->who, r->params[0], version, 0, &v, &t, &err);
    if (rc == 0 && wait > 0 && v.version == version &&
        api_poll(r, (int64_t)wait * 1000)) { /* no change yet: wait without a thread */
        st_service_view_free(&v);
        return 0;
    }
    json_t *out = rc == 0 ? api_service_json(&v) : NULL;

    st_service_view_free(&v);
    return api_finish(r, rc, out, t, &err, 200);
}

static int h_service_load(api_req_t *r)
{
    arb_err_t err = {{0}};
    st_replica_load_t *v = NULL;
    st_load_ack_t ack;
    int64_t t = 0;
    int n = 0;
    int rc = api_load_decode(r->jbody, &v, &n, &err);

    if (rc == 0)
        rc = st_service_load(r->st, &r->who, r->params[0], v, n, &ack, &t, &err);
    free(v);
    return api_finish(r, rc, rc == 0 ? api_load_ack_json(r->params[0], &ack) : NULL, t, &err, 200);
}

/* ---- the simple reads ---------------------------------------------------------------------- */

/* A read that calls the state for a typed view and answers it encoded,
 * with nothing of its own to parse or wait for, has no handler: its row
 * names one of these ops in its flags (READ(op), api_read_t) and read_run
 * does the rest. The
 * view lives on the stack, in this union of the views they take. */
typedef union read_view {
    st_node_list_t nodes;
    st_node_view_t node;
    st_telemetry_view_t telemetry;
    st_queue_list_t queues;
    st_prio_list_t prio;
    st_service_list_t services;
} read_view_t;

typedef struct read_op {
    /* the state's call; the view empty on failure */
    int (*read)(api_req_t *r, read_view_t *v, int64_t *ticket, arb_err_t *err);
    json_t *(*encode)(const read_view_t *v);
    void (*free)(read_view_t *v);
} read_op_t;

/* An op's encoder and free: the typed ones, given the union's member. */
#define READ_VIEW(member, encoder, freer)                                                          \
    static json_t *enc_##member(const read_view_t *v)                                              \
    {                                                                                              \
        return encoder(&v->member);                                                                \
    }                                                                                              \
    static void free_##member(read_view_t *v)                                                      \
    {                                                                                              \
        freer(&v->member);                                                                         \
    }

READ_VIEW(nodes, api_nodes_json, st_node_list_free)
READ_VIEW(node, api_node_json, st_node_view_free)
READ_VIEW(telemetry, api_telemetry_json, st_telemetry_view_free)
READ_VIEW(queues, api_queues_json, st_queue_list_free)
READ_VIEW(prio, api_prio_classes_json, st_prio_list_free)
READ_VIEW(services, api_services_json, st_service_list_free)

static int read_nodes(api_req_t *r, read_view_t *v, int64_t *t, arb_err_t *err)
{
    return st_nodes_list(r->st, &v->nodes, t, err);
}

static int read_node(api_req_t *r, read_view_t *v, int64_t *t, arb_err_t *err)
{
    return st_node_get(r->st, r->params[0], &v->node, t, err);
}

static int read_telemetry(api_req_t *r, read_view_t *v, int64_t *t, arb_err_t *err)
{
    return st_node_telemetry(r->st, r->params[0], &v->telemetry, t, err);
}

static int read_queues(api_req_t *r, read_view_t *v, int64_t *t, arb_err_t *err)
{
    return st_queues_list(r->st, &v->queues, t, err);
}

static int read_prio(api_req_t *r, read_view_t *v, int64_t *t, arb_err_t *err)
{
    int rc = st_priority_classes(r->st, &v->prio); /* the config's: nothing to wait for */

    *t = 0;
    if (rc < 0)
        arb_errf(err, rc, "out of memory listing the priority classes");
    return rc;
}

static int read_services(api_req_t *r, read_view_t *v, int64_t *t, arb_err_t *err)
{
    return st_services_list(r->st, &r->who, &v->services, t, err);
}

static const read_op_t reads[] = {
    [API_READ_NODES] = {read_nodes, enc_nodes, free_nodes},
    [API_READ_NODE] = {read_node, enc_node, free_node},
    [API_READ_NODE_TELEMETRY] = {read_telemetry, enc_telemetry, free_telemetry},
    [API_READ_QUEUES] = {read_queues, enc_queues, free_queues},
    [API_READ_PRIO_CLASSES] = {read_prio, enc_prio, free_prio},
    [API_READ_SERVICES] = {read_services, enc_services, free_services},
};

/* Call the state, encode what it answered, free the view, and reply once
 * what it saw is durable (api_finish). */
static int read_run(const read_op_t *op, api_req_t *r)
{
    arb_err_t err = {{0}};
    read_view_t v;
    int64_t t = 0;

    memset(&v, 0, sizeof v);
    int rc = op->read(r, &v, &t, &err);
    json_t *out = rc == 0 ? op->encode(&v) : NULL;

    op->free(&v);
    return api_finish(r, rc, out, t, &err, 200);
}

/* ---- what a route's request carries -----------------------------------------------------------
 */

/* The body kinds (api_body_t): whether one must be there, and the name a
 * parse error gives it. One row a kind, in api_body_t's order. */
static const struct {
    bool json, required;
    const char *file; /* for parse errors */
    const char *doc;  /* docs/api.md's body column */
} bodies[] = {
    [API_BODY_NONE] = {false, false, NULL, "none"},
    [API_BODY_SPEC] = {false, true, "job", "job spec (JSON or YAML)"},
    [API_BODY_REPORT] = {true, true, "report.json", "JSON"},
    [API_BODY_NODE] = {true, true, "node.json", "JSON"},
    [API_BODY_NODE_OPT] = {true, false, "node.json", "JSON (optional)"},
    [API_BODY_LOAD] = {true, true, "load.json", "JSON"},
};

static int route_read(const api_route_t *rt, api_req_t *r)
{
    json_error_t je;
    arb_err_t err = {{0}};

    r->if_match = -1;
    if ((rt->flags & API_JOB) && job_id(r, &r->job))
        return r->status;
    if ((rt->flags & API_IF_MATCH) && if_match(r, &r->if_match))
        return r->status;
    if ((rt->flags & API_NODE) && st_node_name_check(r->params[0], &err) < 0)
        return api_error(r, 404, "%s", err.msg);
    if (rt->body == API_BODY_SPEC && r->n == 0)
        return api_error(r, 400,
                         "empty body; send a job spec (JSON, or YAML with "
                         "Content-Type: application/yaml)");
    if (!bodies[rt->body].json || (r->n == 0 && !bodies[rt->body].required))
        return 0;
    if (!(r->jbody = json_loadb(r->body, r->n, JSON_REJECT_DUPLICATES, &je)))
        return api_error(r, 400, "%s:%d:%d: malformed JSON: %s", bodies[rt->body].file, je.line,
                         je.column, je.text);
    return 0;
}

int api_route_run(const api_route_t *rt, api_req_t *r)
{
    int rc = route_read(rt, r);

    if (rc == 0 && rt->fn)
        rc = rt->fn(r);
    else if (rc == 0 && API_ROUTE_READ(rt) > API_READ_NONE &&
             (size_t)API_ROUTE_READ(rt) < sizeof reads / sizeof reads[0])
        rc = read_run(&reads[API_ROUTE_READ(rt)], r);
    else if (rc == 0) /* a row without either: test_api_enc2 checks there is none */
        rc = api_error(r, 500, "%s %s: no handler", rt->method, rt->path);
    json_decref(r->jbody);
    r->jbody = NULL;
    if (r->defer.on) /* its connection is suspended until the commit (http.c) */
        st_note_held(r->st, (unsigned)(rt - api_routes), rt->method, rt->path);
    return rc;
}

/* ---- the table ------------------------------------------------------------------------------ */

const api_route_t api_routes[] = {
    {"GET", "/healthz", ANYONE, HERE | OPEN, NOBODY, h_healthz, "liveness: `ok`",
     "No auth. Plain text `ok`; 503 (like every route) once a store commit failed or the "
     "Lamport clock reached its limit, for the moment before the controller exits 3."},
    {"GET", "/metrics", ADMIN | USER | AGENT, PLAIN, NOBODY, h_metrics,
     "Prometheus metrics (text format 0.0.4)",
     "Queue length, pending jobs by reason, GPU allocation and fragmentation ratios, node "
     "report ages, the scheduling-cycle latency histogram, placements and decisions per second, "
     "store commits and their latency, agent report handling time "
     "(`arbiter_node_report_seconds`), HTTP requests by route (`arbiter_http_requests_total`, "
     "label `route`: method and path pattern) and runs again of long polls and held replies "
     "(`arbiter_http_request_reruns_total`), lost nodes and tasks, requeued jobs. Per GPU (labels "
     "`node`, `gpu` (the index), `model`), as its agent last reported, named after DCGM's "
     "exporter fields: `arbiter_gpu_utilization_ratio` (DCGM_FI_DEV_GPU_UTIL / 100), "
     "`arbiter_gpu_memory_used_bytes` (FB_USED), `arbiter_gpu_memory_total_bytes`, "
     "`arbiter_gpu_temperature_celsius` (GPU_TEMP), `arbiter_gpu_healthy` (1 or 0), "
     "`arbiter_gpu_allocated_ratio` (the share allocated to jobs). Per node (label `node`): "
     "`arbiter_node_cpu_utilization_ratio`, `arbiter_node_memory_used_bytes`, "
     "`arbiter_node_memory_allocatable_bytes`, `arbiter_node_network_receive_bytes_per_second`, "
     "`..._transmit_bytes_per_second`, `arbiter_node_disk_read_bytes_per_second`, "
     "`..._write_bytes_per_second`. A value an agent did not report has no sample. Every "
     "family has HELP and TYPE (`promtool check metrics` passes)."},
    {"GET", "/v1/status", ADMIN | USER | AGENT, PLAIN, NOBODY, h_status,
     "the controller's Lamport clock, epoch, store revision, counts, and who you are",
     "Reply: `{\"lamport\", \"epoch\", \"revision\", \"jobs\", \"active_jobs\", \"nodes\", "
     "\"you\": {\"role\", \"team\", \"name\"}}`."},
    {"GET", "/v1/leader", ANYONE, HERE | UNCHECKED, NOBODY, h_leader,
     "which controller leads (answered by every controller)",
     "No auth. Reply: `{\"leader\": NAME, \"url\": URL, \"term\": N, \"you\": NAME, "
     "\"serving\": BOOL}`: the leader as this controller knows it, its term (the etcd leader "
     "key's create_revision; a single SQLite controller names itself, with its epoch as the "
     "term), this controller's name, and whether this controller leads and serves. "
     "`?require=self`: 503 unless this controller serves as leader (a health check that finds "
     "the leader). 503 with `Retry-After` while no leader is known. On a follower every other "
     "`/v1` request is answered 307 with `Location` at the leader's URL (same path and query; "
     "clients re-send method and body), or 503 with `Retry-After: 1` while none is known. "
     "See docs/ha.md."},
    {"GET", "/v1/check", ADMIN, PLAIN, NOBODY, h_check, "check every allocation invariant",
     "200 `{\"ok\": true}`, or 500 naming the first broken invariant (a GPU share held twice, "
     "usage that does not add up)."},
    {"POST", "/v1/jobs", ADMIN | USER, PLAIN, SPEC, h_submit, "submit a job",
     "Body: a job spec, JSON or YAML (`Content-Type: application/yaml`), with the fields of "
     "docs/scenario.md's jobs (`name`, `queue`, `priority` or `priorityClassName`, "
     "`preemptible`, `gangMin`, `timeLimit`, `dataset`, `nodeSelector`, `affinity`, "
     "`terminationGracePeriodSeconds`, `gpuSharing`, `replicas: {min, max}` (elastic), "
     "`tolerations`, `gpuModels`, `groups` or `replicas`/`resources`/`topology`) and two more: "
     "`command` (list of strings) and `env` (map of strings; a value may be "
     "`{\"value\": TEXT, \"secret\": true}`: the task gets it, but only admins and the "
     "submitter read it back). `resources.requests` and "
     "`resources.limits` take `nvidia.com/gpu`, `cpu`, `memory` as in Kubernetes. Users submit "
     "to their team's queue (the default when `queue` is absent). Reply 201: the job object. "
     "Errors: 400 malformed JSON/YAML (`job.json:LINE:COL: ...`), 413 over 1 MiB, 422 unknown "
     "field, wrong type, impossible request (message names the field path and the fix), 403 "
     "another team's queue. Nothing is applied on error. Header `Idempotency-Key: KEY` "
     "(optional; 1..128 of letters, digits and `-_.:`): a retry with the same key from the "
     "same principal (role, team, name) answers 200 with the job the first request created "
     "instead of creating another, also after a restart or a failover (keys are stored with "
     "their jobs) for `api.idempotencyRetention` (default 24h) after the job's submit "
     "time; past that the key is deleted and makes a new job. The same key with a "
     "different body is 422; a malformed key is 400. "
     "`arbiter submit` sends a random key and retries with it. A Kubernetes manifest (one or "
     "more documents) or a Slurm batch script as a YAML body is read as-is (docs/compat.md): "
     "each workload becomes a job, submitted together (one refused: none stands), job i with "
     "key `KEY-i`; the reply is the job (one) or `{\"jobs\": [...], \"warnings\": [...]}`, "
     "with `warnings` naming every field not honoured."},
    {"GET", "/v1/jobs", ADMIN | USER, PLAIN, NOBODY, h_jobs, "list jobs",
     "Query: `state` (pending, placed, running, preempted, succeeded, failed, cancelled, or "
     "`active`), `queue`, `after` (a job id: page from there), `limit`. Users see their team's "
     "jobs only. Reply: `{\"jobs\": [job, ...]}` in id order (without `groups` and `events`)."},
    {"GET", "/v1/jobs/{id}", ADMIN | USER, JOB, NOBODY, h_job, "one job",
     "Reply: the job object: `id`, `name`, `queue`, `team`, `owner`, `state`, `priority`, "
     "`gpus`, `version`, `submitted_lamport`, `updated_lamport`, `attempt`, `epoch`, "
     "`submitted_at` (wall clock, for people), `tasks` (each with `index`, `group`, `state`, "
     "`node`, `gpus` as device indices, `exit_code`, `last_node` where it last ran, and "
     "`straggler` when flagged), `groups`, `command`, `env` (a secret value as `{\"value\", "
     "\"secret\": true}` to admins and its submitter, `{\"secret\": true}` to others), "
     "`events`. A spec may say "
     "`restartable: false` (default true): a task lost with its node then fails the job "
     "instead of requeueing it."},
    {"DELETE", "/v1/jobs/{id}", ADMIN | USER, JOB | IF_MATCH, NOBODY, h_cancel, "cancel a job",
     "Header `If-Match: VERSION` (optional): 409 unless the job is at that version. A pending "
     "job, or a placed one no agent has fetched, is cancelled at once and its GPUs freed; a "
     "job an agent runs gets `stop_requested` and is cancelled when its agents report its "
     "tasks ended (its GPUs are never given to another job before). 409 when it already "
     "ended."},
    {"GET", "/v1/jobs/{id}/explain", ADMIN | USER, JOB, NOBODY, h_explain, "why a job is pending",
     "Reply: `{\"job\", \"name\", \"state\", \"summary\", \"hint\", \"explain\": {...}}` where "
     "`explain` is the scheduler's structured explanation (nodes rejected per reason, the "
     "fragmentation diagnostic, quota, preemption, the nearest node). For a running gang over "
     "several nodes, `stragglers`: `[{\"task\", \"node\", \"reason\": \"stale-report\" | "
     "\"low-gpu-utilization\"}]`, also said in `hint`. Query `nodes=true` (pending jobs): also "
     "`node_reasons`: `{NODE: REASON}`, each node's first failing filter for the task group "
     "`node_reasons_group` (`ok` where one of its tasks fits now; the console highlights "
     "them)."},
    {"POST", "/v1/jobs/{id}/logs-ticket", ADMIN | USER, JOB, NOBODY, h_logs_ticket,
     "a short-lived ticket to read a task's log from its agent",
     "Query: `task` (default 0). The caller must be allowed to see the job. Reply: `{\"job\", "
     "\"task\", \"node\", \"logs_url\", \"ticket\", \"ttl_ms\"}`: GET "
     "`LOGS_URL/v1/logs/JOB/TASK?stream=out|err&offset=N` from the node's agent with "
     "`Authorization: Bearer TICKET` (docs/agent.md). The ticket is bound to this job, task "
     "and node and lasts `ttl_ms` (60 s). 404 no such job or task, or the node serves no logs "
     "(its agent runs with `--logs-listen off`); 409 the task has not run yet."},
    {"GET", "/v1/logs/tickets/{ticket}", ADMIN | AGENT | SELF, PLAIN, NOBODY, h_logs_ticket_check,
     "an agent checks a log ticket",
     "Query: `job`, `task`, `node` (the agent's own). 200 `{\"ok\": true, \"ttl_ms\"}` (what is "
     "left of its life), 403 unknown, expired, or bound to another job, task or node."},
    {"GET", "/v1/nodes", ADMIN | USER, READ(NODES), NOBODY, NULL, "list nodes (the GPU map)",
     "Reply: `{\"nodes\": [{\"name\", \"state\", \"version\", \"gpus\": [{\"index\", "
     "\"model\", \"memory_mib\", \"used_milli\", \"util\", \"temp_c\", \"healthy\", "
     "\"jobs\"}], \"capacity\", \"allocated\", \"tasks\", \"labels\", \"taints\", "
     "\"datasets\", \"schedulable\", \"reason\", \"report_age_s\"}]}`. `state`: `Ready`, "
     "`NotReady` (silent past its lease), `Lost` (past lease and grace: its tasks requeued), "
     "`Draining` (cordoned or drained: no new tasks). Node names are DNS-1123 labels (as "
     "Kubernetes has them: 1..63 of lowercase letters, digits and `-`); a report under another "
     "name is 422."},
    {"GET", "/v1/nodes/{name}", ADMIN | USER, READ(NODE), NOBODY, NULL,
     "one node, with telemetry and inventory",
     "Reply: the node object plus `telemetry` and `inventory` as last reported, `topology` "
     "(`rack`, `block`, `zone`), `operator` (what operators set over the inventory), `running` "
     "(each task placed there: `job`, `name`, `task`, `attempt`, `state`, `gpus`, `stopping`) "
     "and `stale_reports` (replayed reports ignored since this controller leads)."},
    {"GET", "/v1/nodes/{name}/telemetry", ADMIN | USER, READ(NODE_TELEMETRY), NOBODY, NULL,
     "a node's telemetry over the last minutes",
     "Reply: `{\"node\", \"interval_s\", \"capacity\", \"samples\": [{\"age_s\", "
     "\"cpu_util\", \"memory_used_bytes\", \"net_rx_bps\", \"net_tx_bps\", "
     "\"disk_read_bps\", \"disk_write_bps\", \"gpus\": [{\"util\", \"memory_used_mib\", "
     "\"temp_c\", \"healthy\"}]}]}`, oldest first: one sample per `interval_s` (5 s) of the "
     "agent's reports, at most `capacity` (60: five minutes). A value the agent did not report "
     "is null. Kept in memory only: empty after a restart or a failover."},
    {"POST", "/v1/nodes/{name}/report", ADMIN | AGENT | SELF, IF_MATCH, REPORT, h_report,
     "an agent's report: registers the node, renews its lease",
     "Body: `{\"lamport\": N, \"inventory\": {\"cpu\", \"memory\", \"labels\", \"taints\", "
     "\"datasets\", \"extended\", \"gpus\": [{\"model\", \"memory\", \"nvlink\", \"pcie\", "
     "\"numa\", \"uuid\"}]}, \"telemetry\": {\"cpu_util\", \"memory_used\", \"net_rx_bps\", "
     "\"queue_length\" (work waiting on the node: the least-loaded score's), "
     "\"net_tx_bps\", \"disk_read_bps\", \"disk_write_bps\", \"gpus\": [{\"index\", \"util\", "
     "\"memory_used_mib\", \"temp_c\", \"healthy\"}]}, \"tasks\": [{\"job\", \"task\", "
     "\"attempt\", \"state\": \"running|succeeded|failed|lost\", \"exit_code\"}]}`. The "
     "inventory may also say `address` (where gang members reach this node; default: the "
     "address the report came from), `hostname`, `log_dir` and `logs_url` (for `arbiter logs`); "
     "these may "
     "change at any time. The first report must carry `inventory`; later ones only when it "
     "changed (409 while tasks are allocated there). Reply: `{\"node\", \"lamport\", "
     "\"epoch\", \"lease_ms\", \"version\", \"assignments_version\", \"assignments\": [...]}` "
     "(as below). The controller's "
     "clock "
     "becomes max(its own, `lamport`) + 1, and a report may move it at most 1048576 (2^20) "
     "beyond its own time: a `lamport` further ahead (or above 2^62 - 1) is refused whole, 422, "
     "with the controller's clock in `error.lamport`, which an agent takes before it registers "
     "again (DESIGN.md invariant 9); a controller that starts with its clock past 2^61 "
     "renumbers it, every order kept (event `clock-rebased`). A task reported `lost` may say "
     "`fenced_by`: `agent` or `supervisor` (who killed it when the lease ran out unrenewed). "
     "The agent's lease must not be longer than "
     "`lease_ms`: a node silent past it goes NotReady, and past it plus `nodes.grace` it is "
     "lost, its tasks requeued (or failed, `restartable: false`). A report from a node the "
     "controller does not know, or declared lost, without an inventory is answered "
     "`{\"node\", \"lamport\", \"epoch\", \"lease_ms\", \"lost\": true, \"message\"}`: the "
     "agent fences (kills its tasks) and registers again with its inventory. A task reported "
     "`lost` (its agent fenced it) counts as lost too. The reply also carries the node's "
     "`version`; header `If-Match: VERSION` (optional) makes the report conditional: 409, "
     "with nothing applied (not even the clock), unless the node is registered and at that "
     "version. A report without inventory whose `lamport` is below that of the last report "
     "applied for the node is a replay (re-sent to another controller after a timeout, "
     "arriving late): nothing of it is applied, not even the clock, and it is answered 200 "
     "`{\"node\", \"lamport\", \"epoch\", \"lease_ms\", \"stale\": true, \"message\"}`, "
     "without assignments (a report without `lamport` is never taken for a replay). An agent "
     "also sends `incarnation` (1..2^63-1), one number per life of the agent, larger at each "
     "restart (its start time in ms): Lamport order holds within one incarnation, a "
     "registration's too; a report of an older incarnation than the node's last registration "
     "(a late copy from before a restart), or one without inventory of an incarnation this "
     "controller has not seen register (after its own restart: incarnations are not stored), "
     "changes nothing and is answered `{..., \"stale\": true, \"register\": true, "
     "\"incarnation\": I, \"message\"}`: a live agent takes an incarnation above I and "
     "registers again with its inventory and tasks, nothing fenced."},
    {"GET", "/v1/nodes/{name}/assignments", ADMIN | AGENT | SELF, PLAIN, NOBODY, h_assignments,
     "the tasks assigned to a node, with epochs; a long poll for its agent",
     "Query (optional): `wait` (0..60 s), `version` (the `assignments_version` the agent has: "
     "with `wait`, the reply waits until the list differs from it, so that an agent learns of "
     "a new task within milliseconds rather than at its next report), `epoch` (the agent's "
     "lease's: 409, nothing sent, when it is not the controller's or the node was declared "
     "lost; the agent reports first). Polling renews no lease. "
     "Reply: `{\"node\", \"lamport\", \"epoch\", \"assignments_version\", "
     "\"assignments\": [{\"job\", \"name\", "
     "\"task\", \"ntasks\", \"attempt\", \"epoch\", \"gpus\", \"gpu_milli\", "
     "\"gpu_memory_mib\", \"cpu\", \"memory\", \"command\", \"env\", \"state\", \"stop\"}]}`; "
     "one may also carry `grace_s` (the job's terminationGracePeriodSeconds: SIGTERM, then "
     "SIGKILL that long after; else the agent's `--grace`) and, for an elastic job, `elastic`, "
     "`generation` (bumped on every resize: the agent rewrites ARBITER_RESIZE_FILE and sends "
     "SIGUSR1), `hosts` (every rank's node, up to 64 ranks) and `rank`/`world_size` even for "
     "one task; `stop` may be set on an elastic job's tasks above a shrink mark only; "
     "a task of a gang (more than one task) also has `rank`, `world_size`, `master_addr` (task "
     "0's node) and `master_port` (derived from the job and attempt), which the agent passes as "
     "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. An agent refuses an assignment whose "
     "epoch is older than the newest it has seen, and kills tasks that are no longer listed or "
     "have `stop`. Allocations restored when the controller restarts are re-stamped with its "
     "new epoch. A task whose agent was sent `stop` before it started it, and that its agent's "
     "next report does not list, has ended."},
    {"PATCH", "/v1/nodes/{name}", ADMIN, IF_MATCH | NODE, NODE_BODY, h_node_patch,
     "set or remove a node's labels and taints",
     "Body: `{\"labels\": {\"KEY\": \"VALUE\" | null}, \"taints\": {\"add\": [{\"key\", "
     "\"value\", \"effect\": \"NoSchedule\" | \"PreferNoSchedule\" | \"NoExecute\"}], "
     "\"remove\": [{\"key\", \"effect\"}]}}` (`kubectl label` / `kubectl taint`): keys as "
     "Kubernetes has them (`[PREFIX/]NAME`, NAME 1..63 of letters, digits, `-_.`), values "
     "empty or 1..63 of the same; null removes a label, a remove without `effect` every effect "
     "of its key; removing what the node does not have is 404. What operators set is kept apart "
     "from the agent's inventory (labels, taints and datasets it reports, e.g. from its "
     "inventory file) and wins over it, also after the agent restarts. A NoExecute taint evicts "
     "every job with a task there that does not tolerate it (stopped with its grace, requeued "
     "whole, or failed when `restartable: false`); NoSchedule and NoExecute keep new tasks "
     "off. Header `If-Match: VERSION` (optional; 409 when another change came first). Reply: "
     "the node object as `GET /v1/nodes/{name}`."},
    {"DELETE", "/v1/nodes/{name}", ADMIN, IF_MATCH | NODE, NODE_OPT, h_node_delete,
     "remove a NotReady or Lost node",
     "Only a node whose agent stopped: Lost, or NotReady with no task that may still run (409 "
     "otherwise, saying when it can be: a NotReady node's tasks are lost, and placed elsewhere, "
     "only after `nodes.grace`). Its record goes and its GPUs leave every total; an agent that "
     "reports under the name later registers it anew. Header `If-Match: VERSION` (optional). "
     "Reply: the node object as it was."},
    {"POST", "/v1/nodes/{name}/cordon", ADMIN, IF_MATCH | NODE, NODE_OPT, h_cordon,
     "stop placing tasks on a node",
     "Body (optional): `{\"reason\": TEXT}` (`scontrol update state=drain reason=...`). Running "
     "tasks stay; state `Draining`, `schedulable` false, `reason` says by whom and why (kept in "
     "the store). Header `If-Match: VERSION` (optional). Reply: the node object."},
    {"POST", "/v1/nodes/{name}/drain", ADMIN, IF_MATCH | NODE, NODE_OPT, h_drain,
     "cordon a node and evict what runs there",
     "As `kubectl drain`: cordon (body `{\"reason\"}` optional), then every job with a task "
     "there is stopped (SIGTERM, its grace, SIGKILL: its GPUs stay held until its tasks ended) "
     "and requeued whole elsewhere, or failed when its spec says `restartable: false`. Header "
     "`If-Match: VERSION` (optional). Reply: the node object with `evicted`: jobs stopped."},
    {"POST", "/v1/nodes/{name}/uncordon", ADMIN, IF_MATCH | NODE, NODE_OPT, h_uncordon,
     "put a cordoned node back in service",
     "Header `If-Match: VERSION` (optional). Reply: the node object."},
    {"POST", "/v1/nodes/{name}/undrain", ADMIN, IF_MATCH | NODE, NODE_OPT, h_uncordon,
     "the same as uncordon",
     "Kept for older clients. Header `If-Match: VERSION` (optional). Reply: the node object."},
    {"GET", "/v1/queues", ADMIN | USER, READ(QUEUES), NOBODY, NULL,
     "queues with quota, usage and fair share",
     "Reply: `{\"queues\": [{\"name\", \"cohort\", \"weight\", \"nominal\", "
     "\"borrowing_limit\", \"used\", \"pending\", \"running\", \"dominant_share\"}]}`."},
    {"GET", "/v1/priorityclasses", ADMIN | USER, READ(PRIO_CLASSES), NOBODY, NULL,
     "the priority classes submissions may name",
     "Reply: `{\"priorityClasses\": [{\"name\", \"value\", \"description\", "
     "\"preemptible\"}]}`: the built-ins (best-effort 0, low 100, normal 500, high 1000, "
     "critical 10000), redefined or added to by the config's `priorityClasses:`. "
     "`preemptible`, when present, is the default of the class's jobs (a spec's own "
     "`preemptible:` wins). A spec's `priorityClassName` must name one of them (422 otherwise, "
     "listing them)."},
    {"GET", "/v1/events", ADMIN | USER, PLAIN, NOBODY, h_events,
     "the event log, ordered by Lamport time",
     "Query: `since` (a Lamport time: events after it), `limit` (1..10000, default 1000), "
     "`wait` (0..60 s: long-poll until an event comes). Reply: `{\"events\": [{\"lamport\", "
     "\"time\", \"type\", \"job\", \"node\", \"message\"}], \"last\": N, \"oldest\": N, "
     "\"truncated\": bool}`; pass `last` as the next `since`. Users see no events of other "
     "teams' jobs."},
    {"GET", "/v1/services", ADMIN | USER | AGENT, READ(SERVICES), NOBODY, NULL,
     "running services and their replicas",
     "Reply: `{\"services\": [SERVICE]}`, each as `GET /v1/services/{name}` gives it."},
    {"GET", "/v1/services/{name}", ADMIN | USER | AGENT, PLAIN, NOBODY, h_service,
     "a service's endpoints (what `arbiter lb --service` follows)",
     "Query: `version` and `wait` (0..60 s): when `version` is the current one, wait up to "
     "`wait` seconds for a change (a long poll). Reply: `{\"service\", \"job\", \"version\", "
     "\"desired\", \"min\", \"port\", \"health\", \"replicas\": [{\"index\", \"job\", "
     "\"state\", \"node\", \"address\": \"HOST:PORT\", \"port\", \"ready\", \"draining\", "
     "\"inflight\", \"restarts\", \"load\": {\"gpu_util\", \"queue\", \"age_ms\"} (what the "
     "agent of the replica's node last reported: utilisation of the replica's GPUs 0..1, queue "
     "length, the report's age; null before a report)}], \"autoscale\": {\"min\", \"max\", "
     "\"target_inflight\", "
     "\"target_gpu_util\", \"window_s\", \"cooldown_s\", \"recommended\", \"per_replica\", "
     "\"last\"}}`. A balancer sends to replicas that are `ready` and not `draining`."},
    {"POST", "/v1/services/{name}/load", ADMIN | USER | AGENT, PLAIN, LOAD, h_service_load,
     "a balancer's in-flight requests per replica (autoscaling input)",
     "Body: `{\"replicas\": [{\"address\": \"HOST:PORT\", \"inflight\": N, \"queue\": Q}]}` "
     "(`queue` optional: what the replica reports waiting). Reply: "
     "`{\"service\", \"matched\", \"version\"}`. Counts older than 5 s are ignored."},
    {"GET", "/", ANYONE, PLAIN, NOBODY, api_ui_redirect, "sends a browser to the console",
     "No auth. 302 to `/ui/` (a URL fragment such as `#token=...` is kept by the browser)."},
    {"GET", "/ui", ANYONE, PLAIN, NOBODY, api_ui_redirect, "sends a browser to the console",
     "No auth. 302 to `/ui/`."},
    {"GET", "/ui/", ANYONE, PLAIN, NOBODY, api_ui_index, "the web console",
     "No auth for the page and its files (`/ui/NAME`): they are the same for everyone and "
     "hold no cluster data. The page shows the GPU map, queues, pending jobs with their "
     "explanation, job and node detail, kept live by `GET /v1/events?wait=`; it reads them "
     "from the routes above with the token it is given, under the same roles: open "
     "`/ui/#token=TOKEN` (the fragment never leaves the browser; the page keeps it in the "
     "tab's sessionStorage) or type the token when asked. Without `--tokens` no token is "
     "needed. Files are compiled into the binary; replies carry an `ETag` (304 on "
     "`If-None-Match`) and a `Content-Security-Policy`."},
    {"GET", "/ui/{file}", ANYONE, PLAIN, NOBODY, api_ui_file, "the console's scripts and styles",
     "No auth (see `/ui/`). 404 for a name that is not one of the console's files."},
    {NULL, NULL, 0, 0, API_BODY_NONE, NULL, NULL, NULL},
};

static void roles_text(unsigned roles, char *buf, size_t n)
{
    if (!roles) {
        snprintf(buf, n, "none");
        return;
    }
    snprintf(buf, n, "%s%s%s%s%s", roles & ADMIN ? "admin" : "",
             (roles & ADMIN) && (roles & (USER | AGENT)) ? ", " : "", roles & USER ? "user" : "",
             (roles & USER) && (roles & AGENT) ? ", " : "",
             roles & AGENT ? (roles & SELF ? "agent (own node)" : "agent") : "");
}

void api_doc_markdown(FILE *f)
{
    char roles[64];

    fprintf(f,
            "# Arbiter controller API\n\n"
            "<!-- Generated by `arbiter controller --api-doc` from src/api/routes.c and "
            "src/state/config.c; tests/cli/controller.sh checks it is current. -->\n\n"
            "HTTP/1.1 and JSON, over TLS with `--cert-file FILE --key-file FILE`. Start the "
            "controller with\n"
            "`arbiter controller --listen 127.0.0.1:7070 --data-dir DIR [--config FILE] "
            "[--tokens FILE] [--cert-file F --key-file F [--trusted-ca-file CA "
            "[--client-cert-auth]]]`.\n\n"
            "## Authentication\n\n"
            "`Authorization: Bearer TOKEN`, tokens from the `--tokens` file (one a line: "
            "`TOKEN ROLE TEAM [NAME]`; for an agent NAME is its node), or a client "
            "certificate signed by `--trusted-ca-file` (`arbiter init`: CN the name, O the "
            "role, OU the team); a token, when sent, wins. Roles: `admin` (everything), `user` "
            "(submit to the team's queue, see and cancel the team's jobs, read nodes, queues "
            "and events), `agent` (report as its own node, fetch its assignments, check log "
            "tickets for it: an agent credential acts as its own node only, 403 for any other "
            "and nothing applied). 401 without a known principal, 403 outside the role's "
            "rights. `--client-cert-auth`: every request but `/healthz` needs a client "
            "certificate. Without `--tokens` and `--trusted-ca-file` there is no "
            "authentication, every caller is admin, and the controller listens on 127.0.0.1 "
            "only; with them, an address beyond loopback needs TLS or `--insecure-plain-http`. "
            "docs/security.md has the threat model.\n\n"
            "## HTTP\n\n"
            "Strict framing: Content-Length with Transfer-Encoding, a Content-Length that is not "
            "one number or differs between copies, a Transfer-Encoding other than `chunked`, a "
            "header name outside RFC 9110's token, HTTP/1.1 without exactly one Host, and a NUL "
            "in the target are answered 400 and the connection is closed; a head over 16 KiB is "
            "431. A request's head "
            "must arrive within 10 s of its first line and its body within 60 s; an idle "
            "connection is closed after 60 s; one client address holds at most "
            "`--max-conns-per-client` connections (256).\n\n"
            "## Errors\n\n"
            "Every error is `{\"error\": {\"status\", \"reason\", \"message\"}}`; the message "
            "says what, where (the field path; for malformed JSON or YAML the line and column) "
            "and how to fix it. 400 malformed body or query, 401, 403, 404, 405, 409 version "
            "conflict (`If-Match`) or illegal transition, 413 body over 1 MiB, 422 invalid "
            "content, 503 the store failed (the controller exits and recovers on restart). A "
            "rejected request changes nothing.\n\n"
            "## Durability and time\n\n"
            "A reply goes out only after everything the request changed, or saw, is committed "
            "to the store (SQLite, WAL, `synchronous=FULL`); concurrent submissions share one "
            "commit. Events carry Lamport times (`lamport`): the controller takes max(local, "
            "remote) + 1 for every event, agents send theirs in reports. Objects carry "
            "`version`s. Wall-clock fields (`time`, `submitted_at`) are for people and never "
            "order anything. Every assignment carries the controller's `epoch`, bumped at each "
            "start.\n\n"
            "## Store faults\n\n"
            "A commit that fails (disk full, an I/O error) stops the controller serving at "
            "once: every request, `/healthz` included, is answered 503, and within 100 ms it "
            "exits with status 3 and the reason on stderr, for a supervisor to restart it "
            "(systemd `Restart=on-failure`); over etcd it steps down and a follower takes "
            "over. Nothing that was not committed was acknowledged or is counted after the "
            "restart. One controller per data dir: the lock is taken on `arbiter.db` itself; "
            "one per port: the listening socket never shares its port. A data dir that looks "
            "rewound (its database below the revision recorded in `arbiter.db.marker` beside "
            "it: the WAL deleted or damaged, an old copy put back) is refused at start with "
            "what is missing, unless `--accept-rewind` (then event `store-rewound`). Records "
            "that cannot be loaded are named by key on stderr and in event `store-damaged`, "
            "are not counted, and a damaged job's id is never handed out again.\n\n"
            "## Several controllers (clients)\n\n"
            "Clients take a comma-separated list of controller URLs (`ARBITER_URL`, "
            "`arbiter agent --controller`, `arbiter lb --controller`). The contract with "
            "high-availability controllers: a follower answers `GET /v1/leader` with "
            "`{\"leader\", \"url\", \"term\"}` and other requests with 307 and "
            "`Location` (the leader's URL, same path and query), or 503 with `Retry-After` "
            "while there is no leader. A client starts at the URL that last answered; after a "
            "connect error, a timeout or a 503 it tries the next, backing off (100 ms doubling "
            "to 1 s, or `Retry-After` up to 2 s) for a bounded time (the CLI: "
            "`ARBITER_RETRY_S`, default 15 s, each try at most `ARBITER_TRY_S`, default 10 s, "
            "when there are several; an agent: what is left of its lease, shared among the "
            "URLs, for ever "
            "across reports); it follows a 307 at most twice, re-sending method, headers and "
            "body. Retrying writes: a submission with `Idempotency-Key` is created once; a "
            "drain, an undrain or a report may be sent again (conditional with `If-Match` "
            "when another writer may interfere); a cancel sent again after a lost reply "
            "answers 409 (already ended) when the first one ended the job.\n\n"
            "## Routes\n\n"
            "| method | path | roles | body | what |\n|---|---|---|---|---|\n");
    for (const api_route_t *r = api_routes; r->method; r++) {
        roles_text(r->roles, roles, sizeof roles);
        fprintf(f, "| %s | `%s` | %s | %s | %s |\n", r->method, r->path, roles, bodies[r->body].doc,
                r->summary);
    }
    for (const api_route_t *r = api_routes; r->method; r++) {
        roles_text(r->roles, roles, sizeof roles);
        fprintf(f, "\n### %s %s\n\n%s. Roles: %s.\n\n%s\n", r->method, r->path, r->summary, roles,
                r->doc);
    }
    fprintf(f, "\n## Configuration (`--config FILE`, YAML)\n\n");
    st_conf_doc(f);
    fprintf(f,
            "\nA duration, here as in job specs and scenarios: %s; units ns, us, ms, s, m, h, "
            "d add up (`1h30m`) and may carry a fraction (`2.5h`).\n",
            ARB_DURATION_HELP);
    fprintf(f, "\nExample:\n\n```yaml\n"
               "scheduler: {policy: fgd, queue: drf, preemption: true, interval: 500ms}\n"
               "nodes: {lease: 10s, staleness: 5s}\n"
               "queues:\n"
               "  - {name: team-a, cohort: research, nominal: {nvidia.com/gpu: 16}}\n"
               "  - {name: team-b, cohort: research, nominal: {nvidia.com/gpu: 16},\n"
               "     borrowingLimit: {nvidia.com/gpu: 8}}\n"
               "priorityClasses:\n"
               "  - {name: production, value: 5000, preemptible: false,\n"
               "     description: serving and deadlines}\n"
               "  - {name: scavenger, value: -10, preemptible: true}\n"
               "```\n");
}
