/* test_prio_kept.c: a job keeps the priority it was given at submission
 * across restarts (real SQLite store): its priorityClassName removed from
 * the config leaves it pending or placed (not failed), with its value and
 * preemptible, and an event (job-priority-kept) says so; a class whose
 * value (and preemptible default) changed in the config does not move jobs
 * submitted before; a job
 * with a plain priority: and a class still defined recover as they were. */
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

#define WITH_CLASSES                                                                               \
    "priorityClasses:\n"                                                                           \
    "  - {name: batch-low, value: 50, preemptible: true}\n"                                        \
    "  - {name: prod, value: 7000, preemptible: false}\n"
#define WITHOUT_BATCH_LOW                                                                          \
    "priorityClasses:\n"                                                                           \
    "  - {name: prod, value: 9000}\n"

static st_t *open_st(const char *yaml)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    if (st_conf_load_mem("config.yaml", yaml, strlen(yaml), &c, &err) < 0)
        fail_msg("config: %s", err.msg);
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    return s;
}

static void add_node(st_t *s, const char *name)
{
    const char *body = "{\"lamport\": 3, \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", "
                       "\"gpus\": [{\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}]}}";
    sf_report(s, name, body);
}

static uint64_t submit(st_t *s, const char *yaml)
{
    return sf_submit_yaml(s, yaml);
}

/* Job id's state, priority and preemptible as GET /v1/jobs/ID says. */
static void job(st_t *s, uint64_t id, const char *state, int prio, bool preemptible)
{
    st_job_view_t v;
    int64_t t;

    assert_int_equal(st_job_get(s, &admin, id, &v, &t, NULL), 0);
    json_t *out = api_job_json(&v); /* as the API shows it */
    st_job_view_free(&v);
    const char *st = json_string_value(json_object_get(out, "state"));
    if (strcmp(st, state) != 0)
        fail_msg("job %llu: %s (%s), wanted %s", (unsigned long long)id, st,
                 json_string_value(json_object_get(out, "message")), state);
    assert_int_equal(json_integer_value(json_object_get(out, "priority")), prio);
    assert_int_equal(json_is_true(json_object_get(out, "preemptible")), preemptible);
    json_decref(out);
}

/* Events of type `type` naming job id. */
static int events_of(st_t *s, const char *type, uint64_t id)
{
    st_event_list_t out;
    int64_t t;
    int n = 0;

    assert_int_equal(st_events(s, &admin, 0, 0, 0, &out, &t, NULL), 0);
    for (int i = 0; i < out.n; i++)
        if (strcmp(out.v[i].type, type) == 0 && out.v[i].job == id)
            n++;
    st_event_list_free(&out);
    return n;
}

static void cycle(st_t *s)
{
    int64_t t;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
}

static void test_class_removed(void **unused)
{
    (void)unused;
    st_t *s = open_st(WITH_CLASSES);
    add_node(s, "n1");
    uint64_t placed = submit(s, "name: a\npriorityClassName: batch-low\n"
                                "resources: {requests: {nvidia.com/gpu: 1}}\n");
    cycle(s);
    uint64_t pending = submit(s, "name: b\npriorityClassName: batch-low\n"
                                 "resources: {requests: {nvidia.com/gpu: 1}}\n");
    uint64_t prod = submit(s, "name: c\npriorityClassName: prod\n"
                              "resources: {requests: {nvidia.com/gpu: 1}}\n");
    uint64_t plain = submit(s, "name: d\npriority: 42\npreemptible: true\n"
                               "resources: {requests: {nvidia.com/gpu: 1}}\n");
    job(s, placed, "placed", 50, true);
    job(s, pending, "pending", 50, true);
    job(s, prod, "pending", 7000, false);
    st_close(s);

    /* batch-low is gone, prod changed its value: nothing fails, nothing moves */
    s = open_st(WITHOUT_BATCH_LOW);
    job(s, placed, "placed", 50, true);
    job(s, pending, "pending", 50, true);
    job(s, prod, "pending", 7000, false);
    job(s, plain, "pending", 42, true);
    assert_int_equal(events_of(s, "job-priority-kept", placed), 1);
    assert_int_equal(events_of(s, "job-priority-kept", pending), 1);
    assert_int_equal(events_of(s, "job-priority-kept", prod), 0);
    assert_int_equal(events_of(s, "job-priority-kept", plain), 0);
    /* new submissions see the config as it is now */
    arb_err_t err = {{0}};
    st_job_view_t out;
    int64_t t;
    const char *gone = "name: e\npriorityClassName: batch-low\n";
    assert_int_equal(st_job_submit(s, &admin, gone, strlen(gone), true, &out, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "unknown priority class 'batch-low'"));
    uint64_t prod2 = submit(s, "name: f\npriorityClassName: prod\n"
                               "resources: {requests: {nvidia.com/gpu: 1}}\n");
    job(s, prod2, "pending", 9000, true);
    /* the job the node holds ends normally; the node goes to the highest */
    assert_int_equal(st_job_cancel(s, &admin, placed, -1, &out, &t, &err), 0);
    st_job_view_free(&out);
    assert_int_equal(st_wait(s, t, NULL), 0);
    cycle(s);
    job(s, prod2, "placed", 9000, true);
    job(s, pending, "pending", 50, true);
    st_close(s);

    /* and again at the next restart, the class still gone */
    s = open_st(WITHOUT_BATCH_LOW);
    job(s, pending, "pending", 50, true);
    assert_int_equal(events_of(s, "job-priority-kept", pending), 2);
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_class_removed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
