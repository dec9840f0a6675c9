/* test_resize.c: the controller's side of preemption with a grace period
 * and of elastic resizes (src/state/resize.c), over a real SQLite store,
 * driven by agents' reports. A victim no agent has yet is requeued at once;
 * a delivered victim keeps its GPUs, gets "stop" with its grace, and the
 * preemptor is placed only after its task reported an end; an elastic job
 * shrinks (stop for the ranks above the mark only, then a new generation
 * and world size for the rest), grows back when capacity frees, and keeps
 * its generation across a controller restart. The scheduler thread is not
 * started: the test drives st_cycle. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_int.h" /* api_job_json: the job as the API shows it */
#include "state/state_int.h"
#include "state_fixture.h"
#include "api_fixture.h"

static st_t *open_st(void)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    c.preemption = true;
    c.queue_policy = ARB_QP_PRIORITY;
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    return s;
}

/* One report from node name with a task list (JSON array text, NULL: none,
 * the first one registers 4 GPUs); returns the reply (caller decrefs). */
static json_t *report(st_t *s, const char *name, const char *tasks, bool inventory)
{
    char body[4096];
    json_t *out = NULL, *b;
    int64_t t;
    arb_err_t err = {{0}};

    snprintf(body, sizeof body, "{\"lamport\": 3%s%s%s}",
             inventory ? ", \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"gpus\": ["
                         "{\"model\": \"H100\", \"memory\": \"80Gi\"},"
                         "{\"model\": \"H100\", \"memory\": \"80Gi\"},"
                         "{\"model\": \"H100\", \"memory\": \"80Gi\"},"
                         "{\"model\": \"H100\", \"memory\": \"80Gi\"}]}"
                       : "",
             tasks ? ", \"tasks\": " : "", tasks ? tasks : "");
    b = json_loads(body, 0, NULL);
    assert_non_null(b);
    if (api_node_report(s, &agent, name, -1, b, &out, &t, &err) < 0)
        fail_msg("report: %s", err.msg);
    assert_int_equal(st_wait(s, t, NULL), 0);
    json_decref(b);
    return out;
}

static uint64_t submit(st_t *s, const char *spec)
{
    st_job_view_t out;
    int64_t t = 0;
    arb_err_t err = {{0}};
    int rc = st_job_submit(s, &admin, spec, strlen(spec), true, &out, &t, &err);

    assert_int_equal(st_wait(s, t, NULL), 0);
    if (rc != 0)
        fail_msg("submit: %s", err.msg);
    uint64_t id = out.id;
    st_job_view_free(&out);
    return id;
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

static bool is(st_t *s, uint64_t id, const char *state)
{
    json_t *o = job(s, id);
    bool r = strcmp(json_string_value(json_object_get(o, "state")), state) == 0;
    json_decref(o);
    return r;
}

static void cycle(st_t *s)
{
    int64_t t;
    arb_err_t err = {{0}};
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    if (st_check(s, &err) < 0)
        fail_msg("invariant: %s", err.msg);
}

/* The assignment of (job, task) in a reply, or NULL. */
static json_t *assignment(json_t *reply, uint64_t id, int task)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(reply, "assignments"), i,
                       a) if ((uint64_t)json_integer_value(json_object_get(a, "job")) == id &&
                              json_integer_value(json_object_get(a, "task")) == task) return a;
    return NULL;
}

/* A task list: n tasks of job id from task t0, in state st. */
static const char *tasks(uint64_t id, int t0, int n, const char *st, const char *more)
{
    static char buf[2048];
    size_t used = (size_t)snprintf(buf, sizeof buf, "[");
    for (int t = t0; t < t0 + n; t++)
        used += (size_t)snprintf(buf + used, sizeof buf - used,
                                 "%s{\"job\": %llu, \"task\": %d, \"attempt\": 1, \"state\": "
                                 "\"%s\"%s}",
                                 t > t0 ? "," : "", (unsigned long long)id, t, st,
                                 strcmp(st, "running") ? ", \"exit_code\": 143" : "");
    snprintf(buf + used, sizeof buf - used, "%s%s]", more && more[0] ? "," : "", more ? more : "");
    return buf;
}

static void test_undelivered_victim(void **unused)
{
    (void)unused;
    st_t *s = open_st();
    json_decref(report(s, "n1", NULL, true));
    uint64_t low = submit(s, "name: low\nresources: {requests: {nvidia.com/gpu: 4}}\n");
    cycle(s);
    assert_true(is(s, low, "placed"));
    uint64_t high =
        submit(s, "name: high\npriority: 1000\nresources: {requests: {nvidia.com/gpu: 2}}\n");
    cycle(s); /* low is marked; no agent has it: requeued now */
    assert_true(is(s, low, "preempted") || is(s, low, "pending"));
    assert_true(has_event(s, "job-requeued", "preempted by job 2 'high' (priority 1000) before"));
    cycle(s);
    assert_true(is(s, high, "placed"));
    st_close(s);
}

static void test_delivered_victim_waits(void **unused)
{
    (void)unused;
    st_t *s = open_st();
    json_decref(report(s, "n1", NULL, true));
    uint64_t low = submit(s, "name: low\nterminationGracePeriodSeconds: 7\n"
                             "resources: {requests: {nvidia.com/gpu: 4}}\ncommand: [sleep, '9']\n");
    cycle(s);
    json_decref(report(s, "n1", "[]", false)); /* fetched */
    json_decref(report(s, "n1", tasks(low, 0, 1, "running", NULL), false));
    assert_true(is(s, low, "running"));
    uint64_t high =
        submit(s, "name: high\npriority: 1000\nresources: {requests: {nvidia.com/gpu: 2}}\n");
    cycle(s);
    cycle(s); /* waiting: no second preemption, nothing handed over */
    assert_true(is(s, high, "pending"));
    assert_true(is(s, low, "running"));
    assert_true(has_event(s, "job-preempting", "SIGKILL after 7 s grace"));
    json_t *r = report(s, "n1", tasks(low, 0, 1, "running", NULL), false);
    json_t *a = assignment(r, low, 0);
    assert_non_null(a);
    assert_true(json_is_true(json_object_get(a, "stop")));
    assert_int_equal(json_integer_value(json_object_get(a, "grace_s")), 7);
    json_decref(r);
    /* explain names what it waits for */
    json_t *ex = NULL;
    int64_t t;
    assert_int_equal(job_explain(s, &admin, high, &ex, &t, NULL), 0);
    assert_non_null(strstr(json_string_value(json_object_get(ex, "hint")),
                           "its victims are stopping: job 1 'low' (preempted whole)"));
    json_decref(ex);
    /* its task ends (SIGTERM): requeued, then the preemptor goes */
    json_decref(report(s, "n1", tasks(low, 0, 1, "failed", NULL), false));
    assert_true(is(s, low, "preempted"));
    cycle(s);
    assert_true(is(s, high, "placed"));
    assert_true(is(s, low, "pending"));
    st_close(s);
}

static void test_elastic_shrink_grow_restart(void **unused)
{
    (void)unused;
    st_t *s = open_st();
    json_decref(report(s, "n1", NULL, true));
    uint64_t el = submit(s, "name: el\nreplicas: {min: 1, max: 4}\n"
                            "resources: {requests: {nvidia.com/gpu: 1}}\ncommand: [sleep, '9']\n");
    cycle(s);
    json_decref(report(s, "n1", "[]", false));
    json_t *r = report(s, "n1", tasks(el, 0, 4, "running", NULL), false);
    assert_true(is(s, el, "running"));
    json_t *a = assignment(r, el, 3);
    assert_true(json_is_true(json_object_get(a, "elastic")));
    assert_int_equal(json_integer_value(json_object_get(a, "world_size")), 4);
    json_int_t gen0 = json_integer_value(json_object_get(a, "generation"));
    json_decref(r);

    uint64_t high = submit(s, "name: high\npriority: 1000\ncommand: [sleep, '9']\n"
                              "resources: {requests: {nvidia.com/gpu: 2}}\n");
    cycle(s);
    assert_true(has_event(s, "job-shrinking", "shrinking 4 -> 2 for job 2 'high'"));
    r = report(s, "n1", tasks(el, 0, 4, "running", NULL), false);
    assert_false(json_is_true(json_object_get(assignment(r, el, 1), "stop")));
    assert_true(json_is_true(json_object_get(assignment(r, el, 2), "stop")));
    assert_true(json_is_true(json_object_get(assignment(r, el, 3), "stop")));
    json_decref(r);
    /* ranks 2, 3 exit on SIGTERM: the job goes on with 2 and a new generation */
    char both[1024], run01[512];
    snprintf(run01, sizeof run01, "%s", tasks(el, 0, 2, "running", NULL) + 1); /* no '[' */
    run01[strlen(run01) - 1] = '\0';                                           /* no ']' */
    snprintf(both, sizeof both, "%s", tasks(el, 2, 2, "failed", run01));
    r = report(s, "n1", both, false);
    json_decref(r);
    assert_true(has_event(s, "job-resized", "resized 4 -> 2: tasks 2..3 stopped for job 2"));
    assert_true(is(s, el, "running"));
    r = report(s, "n1", tasks(el, 0, 2, "running", NULL), false);
    a = assignment(r, el, 1);
    assert_int_equal(json_integer_value(json_object_get(a, "world_size")), 2);
    assert_true(json_integer_value(json_object_get(a, "generation")) != gen0);
    assert_null(assignment(r, el, 2));
    json_decref(r);
    cycle(s);
    assert_true(is(s, high, "placed"));

    /* the preemptor ends: the elastic job grows back to 4 */
    json_decref(report(s, "n1",
                       tasks(el, 0, 2, "running",
                             "{\"job\": 2, \"task\": 0, "
                             "\"attempt\": 1, \"state\": "
                             "\"succeeded\", \"exit_code\": 0}"),
                       false));
    assert_true(is(s, high, "succeeded"));
    cycle(s);
    assert_true(has_event(s, "job-resized", "resized 2 -> 4: capacity freed on n1"));
    r = report(s, "n1", tasks(el, 0, 2, "running", NULL), false);
    a = assignment(r, el, 3);
    assert_non_null(a);
    assert_int_equal(json_integer_value(json_object_get(a, "world_size")), 4);
    json_int_t gen2 = json_integer_value(json_object_get(a, "generation"));
    json_decref(r);
    json_decref(report(s, "n1", tasks(el, 0, 4, "running", NULL), false));
    st_close(s);

    /* a restart keeps the size and the generation: no spurious notice */
    s = open_st();
    json_t *o = job(s, el);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "elastic"), "current")),
                     4);
    json_decref(o);
    r = report(s, "n1", tasks(el, 0, 4, "running", NULL), true);
    a = assignment(r, el, 0);
    assert_non_null(a);
    assert_int_equal(json_integer_value(json_object_get(a, "generation")), gen2);
    json_decref(r);
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_undelivered_victim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delivered_victim_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_elastic_shrink_grow_restart, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
