/* test_state.c: the resource manager over a real SQLite store: submit,
 * place, cancel, reports, auth scoping, validation that changes nothing,
 * recovery of jobs, allocations, queue order and the clock, and a failed
 * store. The scheduler thread is not started: tests drive st_cycle. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"

static char dir[256];
static const st_who_t admin = {ST_ROLE_ADMIN, "", "root"};
static const st_who_t alice = {ST_ROLE_USER, "team-a", "alice"};
static const st_who_t bob = {ST_ROLE_USER, "team-b", "bob"};
static const st_who_t agent = {ST_ROLE_AGENT, "nodes", "agent"};

static int setup(void **unused)
{
    (void)unused;
    snprintf(dir, sizeof dir, "/tmp/arb_test_state.XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **unused)
{
    char cmd[300];
    (void)unused;
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static st_t *open_st(const char *queue_policy)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    if (queue_policy && strcmp(queue_policy, "fifo") == 0)
        c.queue_policy = ARB_QP_FIFO;
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    return s;
}

static void add_node(st_t *s, const char *name, int gpus)
{
    char body[2048];
    size_t used = 0;
    json_t *out = NULL, *b;
    int64_t t;
    arb_err_t err = {{0}};

    used += (size_t)snprintf(body + used, sizeof body - used,
                             "{\"lamport\": 3, \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", "
                             "\"gpus\": [");
    for (int i = 0; i < gpus; i++)
        used += (size_t)snprintf(body + used, sizeof body - used,
                                 "%s{\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}",
                                 i ? "," : "");
    snprintf(body + used, sizeof body - used, "]}}");
    b = json_loads(body, 0, NULL);
    assert_non_null(b);
    if (st_node_report(s, &agent, name, b, &out, &t, &err) < 0)
        fail_msg("report: %s", err.msg);
    assert_int_equal(st_wait(s, t, NULL), 0);
    json_decref(out);
    json_decref(b);
}

static uint64_t submit(st_t *s, const st_who_t *who, const char *spec, int want_rc)
{
    json_t *out = NULL;
    int64_t t = 0;
    arb_err_t err = {{0}};
    int rc = st_job_submit(s, who, spec, strlen(spec), spec[0] != '{', &out, &t, &err);

    assert_int_equal(st_wait(s, t, NULL), 0);
    if (rc != want_rc)
        fail_msg("submit rc %d, wanted %d: %s", rc, want_rc, err.msg);
    uint64_t id = rc == 0 ? (uint64_t)json_integer_value(json_object_get(out, "id")) : 0;
    json_decref(out);
    return id;
}

static const char *job_state(st_t *s, uint64_t id)
{
    static char buf[32];
    json_t *out = NULL;
    int64_t t;
    assert_int_equal(st_job_get(s, &admin, id, &out, &t, NULL), 0);
    snprintf(buf, sizeof buf, "%s", json_string_value(json_object_get(out, "state")));
    json_decref(out);
    return buf;
}

static void cycle(st_t *s)
{
    int64_t t;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
}

#define GPUS(n) "{\"name\": \"j\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": " #n "}}}"

static void test_submit_place_recover(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 8);
    uint64_t a = submit(s, &admin, GPUS(4), 0);
    uint64_t b = submit(s, &admin, "name: y\nresources:\n  requests: {nvidia.com/gpu: 4}\n"
                                   "command: [sleep, '10']\nenv: {A: b}\n",
                        0);
    uint64_t c = submit(s, &admin, GPUS(2), 0);
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    cycle(s);
    assert_string_equal(job_state(s, a), "placed");
    assert_string_equal(job_state(s, b), "placed");
    assert_string_equal(job_state(s, c), "pending");
    assert_int_equal(st_check(s, NULL), 0);
    json_t *st0 = st_status(s);
    uint64_t lam0 = (uint64_t)json_integer_value(json_object_get(st0, "lamport"));
    json_decref(st0);
    st_close(s);

    /* a restart: same jobs, same GPUs, a newer epoch, a later clock */
    s = open_st(NULL);
    assert_string_equal(job_state(s, a), "placed");
    assert_string_equal(job_state(s, b), "placed");
    assert_string_equal(job_state(s, c), "pending");
    assert_int_equal(st_check(s, NULL), 0);
    json_t *st1 = st_status(s);
    assert_int_equal(json_integer_value(json_object_get(st1, "epoch")), 2);
    assert_true((uint64_t)json_integer_value(json_object_get(st1, "lamport")) > lam0);
    json_decref(st1);
    json_t *out;
    int64_t t;
    assert_int_equal(st_job_get(s, &admin, b, &out, &t, NULL), 0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(out, "command"), 0)),
                        "sleep");
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "env"), "A")), "b");
    json_decref(out);
    /* the full node stays full: job c still waits */
    cycle(s);
    assert_string_equal(job_state(s, c), "pending");
    /* ids go on after the recovered ones */
    assert_int_equal(submit(s, &admin, GPUS(1), 0), 4);
    st_close(s);
}

static void test_rejects_change_nothing(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 8);
    json_t *before = st_status(s), *after;
    submit(s, &admin, "{\"name\": \"x\",", -EBADMSG);
    submit(s, &admin, "{\"name\": \"x\", \"bogus\": 1}", -EINVAL);
    submit(s, &admin, "{\"name\": \"x\", \"replicas\": \"many\"}", -EINVAL);
    submit(s, &admin, GPUS(16), -EINVAL);  /* no node has 16 GPUs */
    submit(s, &admin, GPUS(-1), -EINVAL);
    submit(s, &admin, "{\"name\": \"x\", \"command\": \"not a list\"}", -EINVAL);
    submit(s, &admin, "[1, 2]", -EBADMSG);
    after = st_status(s);
    assert_int_equal(json_integer_value(json_object_get(after, "jobs")), 0);
    assert_int_equal(json_integer_value(json_object_get(after, "revision")),
                     json_integer_value(json_object_get(before, "revision")));
    json_decref(before);
    json_decref(after);

    /* messages say where and what */
    json_t *out = NULL;
    int64_t t;
    arb_err_t err = {{0}};
    const char *bad = "{\n  \"name\": \"x\",\n  \"resources\": {\"requests\": {\"memory\": \"1Gx\"}}\n}";
    assert_int_equal(st_job_submit(s, &admin, bad, strlen(bad), false, &out, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "job.json:3:"));
    assert_non_null(strstr(err.msg, "resources.requests.memory"));
    const char *mal = "{\"name\": \"x\",\n \"a\": }";
    assert_int_equal(st_job_submit(s, &admin, mal, strlen(mal), false, &out, &t, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "job.json:2:"));
    st_close(s);
}

static void test_teams_and_versions(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 8);
    uint64_t a = submit(s, &alice, GPUS(1), 0);
    submit(s, &alice, "{\"name\": \"x\", \"queue\": \"team-b\"}", -EACCES);
    json_t *out = NULL;
    int64_t t;
    arb_err_t err = {{0}};
    assert_int_equal(st_job_get(s, &bob, a, &out, &t, &err), -EACCES);
    assert_int_equal(st_job_cancel(s, &bob, a, -1, &out, &t, &err), -EACCES);
    assert_int_equal(st_job_get(s, &alice, a, &out, &t, &err), 0);
    assert_string_equal(json_string_value(json_object_get(out, "queue")), "team-a");
    json_decref(out);
    /* bob's list does not show alice's job */
    assert_int_equal(st_jobs_list(s, &bob, NULL, NULL, 0, 0, &out, &t, &err), 0);
    assert_int_equal(json_array_size(json_object_get(out, "jobs")), 0);
    json_decref(out);
    /* If-Match */
    assert_int_equal(st_job_cancel(s, &alice, a, 99, &out, &t, &err), -ESTALE);
    assert_int_equal(st_job_cancel(s, &alice, a, 1, &out, &t, &err), 0);
    assert_string_equal(json_string_value(json_object_get(out, "state")), "cancelled");
    json_decref(out);
    assert_int_equal(st_job_cancel(s, &alice, a, -1, &out, &t, &err), -EPERM);
    st_wait(s, t, NULL);
    st_close(s);
}

static json_t *report(st_t *s, const char *node, const char *body, int want)
{
    json_t *b = json_loads(body, 0, NULL), *out = NULL;
    int64_t t = 0;
    arb_err_t err = {{0}};
    assert_non_null(b);
    int rc = st_node_report(s, &agent, node, b, &out, &t, &err);
    if (rc != want)
        fail_msg("report rc %d: %s", rc, err.msg);
    st_wait(s, t, NULL);
    json_decref(b);
    return out;
}

static void test_agent_reports(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 2);
    uint64_t a = submit(s, &admin, GPUS(2), 0);
    cycle(s);
    json_t *out = report(s, "n1", "{\"lamport\": 1000}", 0);
    json_t *as = json_object_get(out, "assignments");
    assert_int_equal(json_array_size(as), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(as, 0), "epoch")), 1);
    assert_true(json_integer_value(json_object_get(out, "lamport")) > 1000); /* max + 1 */
    json_decref(out);
    /* delivered: a cancel now waits for the agent */
    json_t *c;
    int64_t t;
    out = report(s, "n1",
                 "{\"tasks\": [{\"job\": 1, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}]}",
                 0);
    json_decref(out);
    assert_string_equal(job_state(s, a), "running");
    assert_int_equal(st_job_cancel(s, &admin, a, -1, &c, &t, NULL), 0);
    assert_true(json_is_true(json_object_get(c, "stop_requested")));
    json_decref(c);
    st_wait(s, t, NULL);
    uint64_t b = submit(s, &admin, GPUS(1), 0);
    cycle(s);
    assert_string_equal(job_state(s, b), "pending"); /* GPUs still held */
    out = report(s, "n1",
                 "{\"tasks\": [{\"job\": 1, \"task\": 0, \"attempt\": 1, \"state\": \"failed\", "
                 "\"exit_code\": 143}]}",
                 0);
    json_decref(out);
    assert_string_equal(job_state(s, a), "cancelled");
    cycle(s);
    assert_string_equal(job_state(s, b), "placed");
    /* bad reports */
    out = report(s, "n2", "{\"telemetry\": {}}", -EINVAL); /* no inventory */
    out = report(s, "n1", "{\"telemetry\": {\"gpus\": [{\"index\": 0, \"util\": 300}]}}", -EINVAL);
    out = report(s, "n1", "{\"inventory\": {\"gpus\": [{\"memory\": \"80Gx\"}]}}", -EINVAL);
    out = report(s, "n1", "{\"inventory\": {\"cpu\": 1}}", -EBUSY); /* tasks allocated */
    out = report(s, "n1", "{\"whatever\": 1}", -EINVAL);
    assert_int_equal(st_check(s, NULL), 0);
    st_close(s);
}

static void test_queue_order_survives(void **unused)
{
    (void)unused;
    st_t *s = open_st("fifo");
    add_node(s, "n1", 1);
    uint64_t first = submit(s, &admin, GPUS(1), 0);
    cycle(s);
    uint64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = submit(s, &admin, GPUS(1), 0);
    st_close(s);
    s = open_st("fifo");
    /* free the GPU: the oldest waiting job gets it, then the next */
    json_t *out;
    int64_t t;
    for (int i = 0; i < 5; i++) {
        uint64_t holder = i == 0 ? first : ids[i - 1];
        assert_int_equal(st_job_cancel(s, &admin, holder, -1, &out, &t, NULL), 0);
        json_decref(out);
        st_wait(s, t, NULL);
        cycle(s);
        assert_string_equal(job_state(s, ids[i]), "placed");
        for (int k = i + 1; k < 5; k++)
            assert_string_equal(job_state(s, ids[k]), "pending");
    }
    st_close(s);
}

static void test_events_and_store_failure(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 1);
    submit(s, &admin, GPUS(1), 0);
    json_t *out;
    int64_t t;
    assert_int_equal(st_events(s, &admin, 0, 100, 0, &out, &t, NULL), 0);
    json_t *ev = json_object_get(out, "events");
    size_t n = json_array_size(ev);
    assert_true(n >= 3); /* controller-started, node-registered, job-submitted */
    uint64_t l1 = (uint64_t)json_integer_value(json_object_get(json_array_get(ev, 1), "lamport"));
    json_decref(out);
    assert_int_equal(st_events(s, &admin, l1, 100, 0, &out, &t, NULL), 0);
    assert_int_equal(json_array_size(json_object_get(out, "events")), n - 2);
    json_decref(out);

    /* a failed commit: the caller learns it, nothing later is acknowledged */
    st_inject_store_failure(s, 1);
    arb_err_t err = {{0}};
    const char *spec = GPUS(1);
    int rc = st_job_submit(s, &admin, spec, strlen(spec), false, &out, &t, &err);
    assert_int_equal(rc, 0);
    json_decref(out);
    assert_int_equal(st_wait(s, t, &err), -EIO);
    st_close(s);
    s = open_st(NULL);
    json_t *stt = st_status(s);
    assert_int_equal(json_integer_value(json_object_get(stt, "jobs")), 1);
    json_decref(stt);
    st_close(s);
}

static void test_config(void **unused)
{
    (void)unused;
    st_conf_t c;
    arb_err_t err = {{0}};
    const char *good = "scheduler: {policy: pack, queue: drf, interval: 250ms}\n"
                       "nodes: {lease: 5s}\n"
                       "queues:\n  - {name: a, nominal: {nvidia.com/gpu: 8, memory: 1Ti}}\n"
                       "  - {name: b, cohort: r}\n";
    st_conf_init(&c);
    assert_int_equal(st_conf_load_mem("c.yaml", good, strlen(good), &c, &err), 0);
    assert_string_equal(c.policy, "pack");
    assert_int_equal(c.queue_policy, ARB_QP_DRF);
    assert_int_equal(c.interval_ns, 250000000LL);
    assert_int_equal(c.lease_ns, 5000000000LL);
    assert_int_equal(c.nqueues, 2);
    assert_int_equal(c.queues[0].nominal.gpu_milli, 8000);
    const char *bad = "scheduler:\n  policy: pack\n  intervall: 1s\n";
    assert_int_equal(st_conf_load_mem("c.yaml", bad, strlen(bad), &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "c.yaml:3:"));
    assert_non_null(strstr(err.msg, "intervall"));
    const char *bad2 = "nodes: {lease: 10 parsecs}\n";
    assert_int_equal(st_conf_load_mem("c.yaml", bad2, strlen(bad2), &c, &err), -EINVAL);
    assert_string_equal(c.policy, "pack"); /* unchanged by failures */
    st_conf_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_submit_place_recover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_change_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_teams_and_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_order_survives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_and_store_failure, setup, teardown),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
