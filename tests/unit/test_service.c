/* test_service.c: service jobs in the resource manager over a real SQLite
 * store (src/state/service.c), driven without threads: tests call
 * st_cycle, node reports and the probe verdict (st_service_probed)
 * themselves. A service becomes replicas (child jobs with PORT and the
 * service's priority); endpoints list ready replicas with their address
 * and bump their version; a failed replica is restarted after a backoff
 * (doubling while it never gets ready); a
 * replica that cannot place preempts batch training, and the event names
 * both jobs; a batch job never preempts a replica below the minimum;
 * balancers' load reports are validated; bad specs change nothing; a
 * controller restart restores the service and its replicas without
 * starting new ones; a cancel stops every replica, then the service. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api_int.h" /* api_job_json: the job as the API shows it */
#include "state/service.h"
#include "state/state_int.h"
#include "state_fixture.h"

static st_t *open_st(bool preemption)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    c.preemption = preemption;
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    return s;
}

static json_t *report(st_t *s, const char *node, const char *body)
{
    json_t *b = json_loads(body, 0, NULL), *out = NULL;
    int64_t t = 0;
    arb_err_t err = {{0}};
    assert_non_null(b);
    if (api_node_report(s, &agent, node, -1, b, &out, &t, &err) < 0)
        fail_msg("report: %s", err.msg);
    st_wait(s, t, NULL);
    json_decref(b);
    return out;
}

static void add_node(st_t *s, const char *name, const char *addr, int gpus)
{
    char body[2048];
    size_t used = 0;

    used += (size_t)snprintf(body + used, sizeof body - used,
                             "{\"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"address\": "
                             "\"%s\", \"gpus\": [",
                             addr);
    for (int i = 0; i < gpus; i++)
        used += (size_t)snprintf(body + used, sizeof body - used,
                                 "%s{\"model\": \"H100\", \"memory\": \"80Gi\"}", i ? "," : "");
    snprintf(body + used, sizeof body - used, "]}}");
    json_decref(report(s, name, body));
}

/* st_job_explain with its reply as the API encodes it (src/api/enc_explain.c;
 * *out NULL on failure). */
static int job_explain(st_t *s, const st_who_t *who, uint64_t id, json_t **out, int64_t *t,
                       arb_err_t *err)
{
    st_explain_view_t v;
    int rc = st_job_explain(s, who, id, &v, t, err);
    *out = rc == 0 ? api_explain_json(&v) : NULL;
    st_explain_view_free(&v);
    return rc;
}

static uint64_t submit(st_t *s, const char *spec, int want_rc, char *msg, size_t n)
{
    st_job_view_t out;
    int64_t t = 0;
    arb_err_t err = {{0}};
    int rc = st_job_submit(s, &admin, spec, strlen(spec), true, &out, &t, &err);

    assert_int_equal(st_wait(s, t, NULL), 0);
    if (rc != want_rc)
        fail_msg("submit rc %d, wanted %d: %s", rc, want_rc, err.msg);
    if (msg)
        snprintf(msg, n, "%s", err.msg);
    uint64_t id = rc == 0 ? out.id : 0;
    st_job_view_free(&out);
    return id;
}

static void cycle(st_t *s)
{
    int64_t t;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
}

/* The job as GET /v1/jobs/ID shows it. */
static json_t *job(st_t *s, uint64_t id)
{
    st_job_view_t v;
    int64_t t;
    assert_int_equal(st_job_get(s, &admin, id, &v, &t, NULL), 0);
    json_t *out = api_job_json(&v);
    st_job_view_free(&v);
    return out;
}

static const char *job_state(st_t *s, uint64_t id)
{
    static char buf[32];
    json_t *o = job(s, id);
    snprintf(buf, sizeof buf, "%s", json_string_value(json_object_get(o, "state")));
    json_decref(o);
    return buf;
}

/* The endpoints as GET /v1/services/{name} gives them (the state's view,
 * src/api's encoder). */
static json_t *endpoints_wait(st_t *s, const char *name, uint64_t version, int64_t wait_ms)
{
    st_service_view_t v;
    int64_t t;
    arb_err_t err = {{0}};
    if (st_service_endpoints(s, &admin, name, version, wait_ms, &v, &t, &err) < 0)
        fail_msg("endpoints: %s", err.msg);
    json_t *out = api_service_json(&v);
    st_service_view_free(&v);
    return out;
}

static json_t *endpoints(st_t *s, const char *name)
{
    return endpoints_wait(s, name, 0, 0);
}

/* A balancer's load report as POST /v1/services/{name}/load takes it:
 * decoded by src/api, applied by the state. */
static int load_report(st_t *s, const char *name, const json_t *body, arb_err_t *err)
{
    st_replica_load_t *v = NULL;
    st_load_ack_t ack;
    int64_t t;
    int n = 0;
    int rc = api_load_decode(body, &v, &n, err);
    if (rc == 0)
        rc = st_service_load(s, &admin, name, v, n, &ack, &t, err);
    free(v);
    return rc;
}

/* The child job of replica i, per the endpoints. */
static uint64_t replica_job(st_t *s, const char *name, int i)
{
    json_t *e = endpoints(s, name);
    uint64_t id = (uint64_t)json_integer_value(
        json_object_get(json_array_get(json_object_get(e, "replicas"), (size_t)i), "job"));
    json_decref(e);
    return id;
}

static void task_report(st_t *s, const char *node, uint64_t id, const char *state, int code)
{
    char body[256];
    if (code >= 0)
        snprintf(body, sizeof body,
                 "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"%s\", "
                 "\"exit_code\": %d}]}",
                 (unsigned long long)id, state, code);
    else
        snprintf(body, sizeof body,
                 "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"%s\"}]}",
                 (unsigned long long)id, state);
    json_decref(report(s, node, body));
}

/* An agent lists every task it has: both replicas running. */
static void both_running(st_t *s, const char *node, uint64_t a, uint64_t b)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}, "
             "{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}]}",
             (unsigned long long)a, (unsigned long long)b);
    json_decref(report(s, node, body));
}

static void probed(st_t *s, uint64_t svc, int i, uint64_t child, bool ok)
{
    pthread_mutex_lock(&s->mu);
    st_service_probed(s, svc, i, child, ok);
    pthread_mutex_unlock(&s->mu);
}

#define WEB                                                                                        \
    "name: web\nkind: service\nreplicas: 2\nport: 18000\nhealth: /healthz\n"                       \
    "priorityClassName: high\n"                                                                    \
    "resources: {requests: {nvidia.com/gpu: 1}}\ncommand: [serve]\nenv: {MODEL: m}\n"

static void test_replicas_endpoints_restart(void **unused)
{
    (void)unused;
    st_t *s = open_st(false);
    add_node(s, "n1", "10.0.0.1", 4);
    uint64_t svc = submit(s, WEB, 0, NULL, 0);
    assert_string_equal(job_state(s, svc), "running");
    char msg[300];
    submit(s, WEB, -EBUSY, msg, sizeof msg); /* one running service per name */
    assert_non_null(strstr(msg, "a service named 'web' is running already (job 1)"));
    submit(s, "name: web2\nkind: service\nport: 17999\nreplicas: 2\ncommand: [x]\n", -EBUSY, msg,
           sizeof msg);
    assert_non_null(strstr(msg, "port: 17999..18000 overlaps the ports of service 'web' (job 1, "
                                "18000..18001)"));
    cycle(s); /* replicas submitted and placed in one cycle */
    uint64_t r0 = replica_job(s, "web", 0), r1 = replica_job(s, "web", 1);
    assert_true(r0 > svc && r1 > r0);
    json_t *o = job(s, r1);
    assert_string_equal(json_string_value(json_object_get(o, "name")), "web-1");
    assert_string_equal(json_string_value(json_object_get(o, "kind")), "replica");
    assert_int_equal(json_integer_value(json_object_get(o, "priority")), 1000);
    json_t *env = json_object_get(o, "env");
    assert_string_equal(json_string_value(json_object_get(env, "PORT")), "18001");
    assert_string_equal(json_string_value(json_object_get(env, "ARBITER_PORT")), "18001");
    assert_string_equal(json_string_value(json_object_get(env, "ARBITER_REPLICA")), "1");
    assert_string_equal(json_string_value(json_object_get(env, "ARBITER_SERVICE")), "web");
    assert_string_equal(json_string_value(json_object_get(env, "MODEL")), "m");
    assert_false(json_is_true(json_object_get(o, "preemptible"))); /* below min (2) */
    json_decref(o);
    assert_string_equal(job_state(s, r0), "placed");

    /* not ready until running and probed healthy */
    json_t *e = endpoints(s, "web");
    uint64_t v0 = (uint64_t)json_integer_value(json_object_get(e, "version"));
    json_t *rep = json_array_get(json_object_get(e, "replicas"), 0);
    assert_string_equal(json_string_value(json_object_get(rep, "address")), "10.0.0.1:18000");
    assert_false(json_is_true(json_object_get(rep, "ready")));
    json_decref(e);
    both_running(s, "n1", r0, r1);
    /* the queue counts the two replicas as running, not the service record */
    st_queue_list_t qs;
    int64_t qt;
    assert_int_equal(st_queues_list(s, &qs, &qt, NULL), 0);
    assert_true(qs.n >= 1);
    assert_int_equal(qs.v[0].running, 2);
    st_queue_list_free(&qs);
    probed(s, svc, 0, r0, true);
    e = endpoints(s, "web");
    assert_true(
        json_is_true(json_object_get(json_array_get(json_object_get(e, "replicas"), 0), "ready")));
    assert_true((uint64_t)json_integer_value(json_object_get(e, "version")) > v0);
    uint64_t v1 = (uint64_t)json_integer_value(json_object_get(e, "version"));
    json_decref(e);
    assert_true(has_event(s, "replica-ready", "replica 0 (job"));
    /* a stale verdict (another child) changes nothing; one failure is not enough */
    probed(s, svc, 1, r0, true);
    probed(s, svc, 0, r0, false);
    e = endpoints(s, "web");
    assert_int_equal(json_integer_value(json_object_get(e, "version")), (json_int_t)v1);
    json_decref(e);
    /* a long poll on the current version waits, then answers unchanged */
    json_t *lp = endpoints_wait(s, "web", v1, 50);
    int64_t t;
    assert_int_equal(json_integer_value(json_object_get(lp, "version")), (json_int_t)v1);
    json_decref(lp);

    /* replica 1 exits 3: restarted as a new job after the backoff */
    char body[256];
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}, "
             "{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"failed\", "
             "\"exit_code\": 3}]}",
             (unsigned long long)r0, (unsigned long long)r1);
    json_decref(report(s, "n1", body));
    assert_string_equal(job_state(s, r1), "failed");
    assert_string_equal(job_state(s, r0), "running"); /* untouched */
    cycle(s);
    assert_true(has_event(s, "replica-restarting", "replica 1 (job"));
    assert_true(has_event(s, "replica-restarting", "failed, exit 3; restart 1 in 1.0 s"));
    uint64_t again = 0;
    for (int i = 0; i < 100 && !again; i++) { /* bounded: the backoff is 1 s */
        struct timespec ts = {0, 50 * 1000000L};
        cycle(s);
        uint64_t j = replica_job(s, "web", 1);
        if (j != r1)
            again = j;
        else
            nanosleep(&ts, NULL);
    }
    assert_true(again > r1);
    assert_string_equal(job_state(s, again), "placed");
    assert_true(has_event(s, "replica-started", "replica 1 is job"));
    /* it fails again before it was ever ready: the backoff doubles */
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}, "
             "{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"failed\", "
             "\"exit_code\": 4}]}",
             (unsigned long long)r0, (unsigned long long)again);
    json_decref(report(s, "n1", body));
    cycle(s);
    assert_true(has_event(s, "replica-restarting", "failed, exit 4; restart 2 in 2.0 s"));
    uint64_t third = 0;
    for (int i = 0; i < 200 && !third; i++) { /* bounded: the backoff is 2 s */
        struct timespec ts = {0, 50 * 1000000L};
        cycle(s);
        uint64_t j = replica_job(s, "web", 1);
        if (j != again)
            third = j;
        else
            nanosleep(&ts, NULL);
    }
    assert_true(third > again);
    again = third;
    assert_int_equal(st_check(s, NULL), 0);

    /* a restart keeps the service and its replicas, and starts none */
    st_close(s);
    s = open_st(false);
    cycle(s);
    assert_string_equal(job_state(s, svc), "running");
    assert_int_equal(replica_job(s, "web", 0), r0);
    assert_int_equal(replica_job(s, "web", 1), again);
    o = job(s, r0);
    env = json_object_get(o, "env");
    assert_string_equal(json_string_value(json_object_get(env, "PORT")), "18000");
    json_decref(o);
    e = endpoints(s, "web");
    assert_int_equal(json_array_size(json_object_get(e, "replicas")), 2);
    json_decref(e);

    /* cancel: replicas stop (their agent reports them ended), then the service */
    st_job_view_t c;
    assert_int_equal(st_job_cancel(s, &admin, svc, -1, &c, &t, NULL), 0);
    st_job_view_free(&c);
    st_wait(s, t, NULL);
    cycle(s);
    json_decref(report(s, "n1", "{\"tasks\": []}"));
    task_report(s, "n1", r0, "failed", 143);
    cycle(s);
    assert_string_equal(job_state(s, r0), "cancelled");
    assert_string_equal(job_state(s, again), "cancelled");
    assert_string_equal(job_state(s, svc), "cancelled");
    assert_true(has_event(s, "job-cancelled", "service stopped, every replica ended"));
    assert_int_equal(st_check(s, NULL), 0);
    st_close(s);
}

static void test_preemption_across_kinds(void **unused)
{
    (void)unused;
    st_t *s = open_st(true);
    add_node(s, "n1", "10.0.0.1", 2);
    uint64_t train = submit(s,
                            "name: train\npriority: 100\nreplicas: 2\n"
                            "resources: {requests: {nvidia.com/gpu: 1}}\ncommand: [t]\n",
                            0, NULL, 0);
    cycle(s);
    char body[512];
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}, "
             "{\"job\": %llu, \"task\": 1, \"attempt\": 1, \"state\": \"running\"}]}",
             (unsigned long long)train, (unsigned long long)train);
    json_decref(report(s, "n1", body)); /* its agent has it: running */
    assert_string_equal(job_state(s, train), "running");
    /* 2 replicas, minimum 1: the first preempts the gang (whole); the
     * second waits for the same room instead of choosing victims */
    uint64_t svc = submit(s,
                          "name: web\nkind: service\nreplicas: 2\nminReplicas: 1\nport: 9000\n"
                          "priority: 1000\nresources: {requests: {nvidia.com/gpu: 1}}\n"
                          "command: [serve]\n",
                          0, NULL, 0);
    cycle(s);
    uint64_t r0 = replica_job(s, "web", 0);
    char want[200];
    snprintf(want, sizeof want,
             "job %llu 'train' (priority 100) preempted by job %llu (service 'web', priority "
             "1000) placing replica 0 (job %llu): SIGTERM to its 2 tasks",
             (unsigned long long)train, (unsigned long long)svc, (unsigned long long)r0);
    assert_true(has_event(s, "job-preempting", want));
    snprintf(want, sizeof want,
             "preempted by job %llu (service 'web', priority 1000) placing "
             "replica 0",
             (unsigned long long)svc);
    json_t *ex = NULL;
    int64_t t;
    assert_int_equal(job_explain(s, &admin, train, &ex, &t, NULL), 0);
    assert_non_null(strstr(json_string_value(json_object_get(ex, "summary")), want));
    json_decref(ex);
    assert_string_equal(job_state(s, r0), "pending"); /* its GPUs are not free yet */
    /* the gang's tasks exit (SIGTERM): requeued whole, the replicas place */
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"failed\", "
             "\"exit_code\": 143}, {\"job\": %llu, \"task\": 1, \"attempt\": 1, \"state\": "
             "\"failed\", \"exit_code\": 143}]}",
             (unsigned long long)train, (unsigned long long)train);
    json_decref(report(s, "n1", body));
    cycle(s);
    assert_string_equal(job_state(s, train), "pending");
    assert_string_equal(job_state(s, r0), "placed");
    assert_string_equal(job_state(s, replica_job(s, "web", 1)), "placed");
    assert_int_equal(job_explain(s, &admin, train, &ex, &t, NULL), 0);
    assert_non_null(strstr(json_string_value(json_object_get(ex, "message")), want));
    json_decref(ex);
    json_t *o = job(s, replica_job(s, "web", 1));
    assert_true(json_is_true(json_object_get(o, "preemptible"))); /* above the minimum */
    json_decref(o);
    o = job(s, r0);
    assert_false(json_is_true(json_object_get(o, "preemptible"))); /* the minimum */
    json_decref(o);
    /* a critical job of 2 GPUs would need replica 0 too: it evicts nothing */
    uint64_t crit = submit(s,
                           "name: crit\npriority: 20000\nreplicas: 2\n"
                           "resources: {requests: {nvidia.com/gpu: 1}}\ncommand: [c]\n",
                           0, NULL, 0);
    for (int i = 0; i < 3; i++)
        cycle(s);
    assert_string_equal(job_state(s, crit), "pending");
    assert_int_equal(replica_job(s, "web", 0), r0);
    assert_string_equal(job_state(s, r0), "placed");
    assert_false(has_event(s, "job-preempting", "'crit'")); /* named as the preemptor */
    assert_int_equal(st_check(s, NULL), 0);
    st_close(s);
}

static void test_bad_input(void **unused)
{
    (void)unused;
    char msg[512];
    st_t *s = open_st(false);
    add_node(s, "n1", "10.0.0.1", 2);
    submit(s, "name: a\nkind: service\ncommand: [x]\n", -EINVAL, msg, sizeof msg);
    assert_non_null(strstr(msg, "a service needs port: N"));
    submit(s, "name: a\nkind: cron\nport: 9\ncommand: [x]\n", -EINVAL, msg, sizeof msg);
    assert_non_null(strstr(msg, "kind 'cron': use batch (the default) or service"));
    submit(s, "name: a\nport: 9000\ncommand: [x]\n", -EINVAL, msg, sizeof msg);
    assert_non_null(strstr(msg, "only a service has 'port'; add kind: service"));
    submit(s, "name: a\nkind: service\nport: 65535\nreplicas: 2\ncommand: [x]\n", -EINVAL, msg,
           sizeof msg);
    assert_non_null(strstr(msg, "runs past 65535"));
    submit(s, "name: a\nkind: service\nport: 9000\nreplicas: 2\nminReplicas: 3\ncommand: [x]\n",
           -EINVAL, msg, sizeof msg);
    assert_non_null(strstr(msg, "minReplicas 3 is above replicas 2"));
    submit(s, "name: a\nkind: service\nport: 9000\nautoscale: {targetInflight: 2}\ncommand: [x]\n",
           -EINVAL, msg, sizeof msg);
    assert_non_null(strstr(msg, "maxReplicas is required"));
    submit(s, "name: a\nkind: service\nport: 9000\nautoscale: {maxReplicas: 3}\ncommand: [x]\n",
           -EINVAL, msg, sizeof msg);
    assert_non_null(strstr(msg, "give targetInflight"));
    submit(s, "name: a\nkind: service\nport: 9000\nhealth: healthz\ncommand: [x]\n", -EINVAL, msg,
           sizeof msg);
    assert_non_null(strstr(msg, "give a path such as /healthz"));
    submit(s,
           "name: a\nkind: service\nport: 9000\ngroups: [{name: g, replicas: 2}]\ncommand: [x]\n",
           -EINVAL, msg, sizeof msg);
    assert_non_null(strstr(msg, "a service replica is one task"));
    submit(s, "name: a\nkind: service\nport: 9000\nreplicas: {min: 1, max: 3}\ncommand: [x]\n",
           -EINVAL, msg, sizeof msg);
    assert_non_null(strstr(msg, "replicas: a service's replicas is a count (replicas: 2)"));
    st_job_list_t jl;
    int64_t t;
    assert_int_equal(st_jobs_list(s, &admin, NULL, NULL, 0, 0, &jl, &t, NULL), 0);
    assert_int_equal(jl.n, 0); /* nothing applied */
    st_job_list_free(&jl);
    /* load reports: validated whole; unknown service */
    arb_err_t err = {{0}};
    json_t *b = json_loads("{\"replicas\": [{\"address\": \"x:1\", \"inflight\": -1}]}", 0, NULL);
    assert_int_equal(load_report(s, "web", b, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "replicas[0]: give address"));
    json_decref(b);
    b = json_loads("{\"replicas\": [{\"address\": \"x:1\", \"inflight\": 1}]}", 0, NULL);
    assert_int_equal(load_report(s, "web", b, &err), -ENOENT);
    json_decref(b);
    st_service_view_t none;
    assert_int_equal(st_service_endpoints(s, &admin, "web", 0, 0, &none, &t, &err), -ENOENT);
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replicas_endpoints_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preemption_across_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
