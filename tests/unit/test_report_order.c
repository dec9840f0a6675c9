/* test_report_order.c: an agent's reports apply in its own Lamport order
 * (real SQLite store). A report that arrives after a newer one from the
 * same node (one its agent gave up on, delivered late) is answered
 * "stale": true and changes nothing: its task list, written before the
 * agent started a task, must not make that running task "gone" and its job
 * lost. A newer report that truly lacks the task still means it is gone;
 * a registration (inventory) starts the agent's clock again. With
 * incarnations (node.c, "Lives"), a report from an agent's previous life,
 * its registration included, changes nothing either, whatever its Lamport
 * time, and a life the controller has not seen register is told to. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "state/state_int.h"
#include "state_fixture.h"

static bool last_stale;    /* the last report's reply said "stale": true */
static bool last_register; /* ... and "register": true */
static int64_t last_inc;   /* ... with this "incarnation" */

#define INVENTORY                                                                                  \
    "\"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"gpus\": [{\"model\": \"H100\", "        \
    "\"memory\": \"80Gi\", \"nvlink\": 0}]}"

/* Send body as node n1's report: the return code; err's text into msg. */
static int report(st_t *s, const char *body, char *msg, size_t n)
{
    json_t *out = NULL, *b = json_loads(body, 0, NULL);
    int64_t t = 0;
    arb_err_t err = {{0}};

    assert_non_null(b);
    int rc = api_node_report(s, &agent, "n1", -1, b, &out, &t, &err);
    if (t)
        assert_int_equal(st_wait(s, t, NULL), 0);
    if (msg)
        snprintf(msg, n, "%s",
                 rc == 0 && out ? json_string_value(json_object_get(out, "message"))
                                      ? json_string_value(json_object_get(out, "message"))
                                      : ""
                                : err.msg);
    last_stale = rc == 0 && json_is_true(json_object_get(out, "stale"));
    last_register = rc == 0 && json_is_true(json_object_get(out, "register"));
    last_inc = json_integer_value(json_object_get(out, "incarnation"));
    json_decref(out);
    json_decref(b);
    return rc;
}

static const char *state_of(st_t *s, uint64_t id)
{
    static char buf[32];
    st_job_view_t out;
    int64_t t;
    assert_int_equal(st_job_get(s, &admin, id, &out, &t, NULL), 0);
    snprintf(buf, sizeof buf, "%s", out.state);
    st_job_view_free(&out);
    return buf;
}

static void test_late_report_changes_nothing(void **unused)
{
    (void)unused;
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};
    char msg[512], body[512];
    int64_t t;

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    assert_int_equal(st_open(dir, &c, &s, &err), 0);
    st_conf_free(&c);
    assert_int_equal(report(s, "{\"lamport\": 1, " INVENTORY "}", msg, sizeof msg), 0);
    const char *spec = "{\"name\": \"j\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}}";
    st_job_view_t jv;
    assert_int_equal(st_job_submit(s, &admin, spec, strlen(spec), false, &jv, &t, &err), 0);
    uint64_t id = jv.id;
    st_job_view_free(&jv);
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    assert_string_equal(state_of(s, id), "placed");

    /* report 2 (no tasks yet) fetches the assignment; report 3 says running */
    assert_int_equal(report(s, "{\"lamport\": 2, \"tasks\": []}", msg, sizeof msg), 0);
    snprintf(body, sizeof body,
             "{\"lamport\": 3, \"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, "
             "\"state\": \"running\"}]}",
             (unsigned long long)id);
    assert_int_equal(report(s, body, msg, sizeof msg), 0);
    assert_string_equal(state_of(s, id), "running");

    /* report 2 again, late: answered stale, and the job keeps running */
    assert_int_equal(report(s, "{\"lamport\": 2, \"tasks\": []}", msg, sizeof msg), 0);
    assert_true(last_stale);
    assert_non_null(strstr(msg, "(lamport 2) is older than one already applied"));
    assert_string_equal(state_of(s, id), "running");
    assert_int_equal(report(s, body, msg, sizeof msg), 0); /* the same body again: harmless */
    assert_false(last_stale);
    assert_string_equal(state_of(s, id), "running");

    /* a newer report without the task: gone, the job requeued */
    assert_int_equal(report(s, "{\"lamport\": 4, \"tasks\": []}", msg, sizeof msg), 0);
    assert_string_equal(state_of(s, id), "preempted"); /* requeued, waiting again */

    /* a restarted agent registers with its clock at 1 again: accepted */
    assert_int_equal(report(s, "{\"lamport\": 1, " INVENTORY ", \"tasks\": []}", msg, sizeof msg),
                     0);
    assert_int_equal(report(s, "{\"lamport\": 2, \"tasks\": []}", msg, sizeof msg), 0);
    st_close(s);
}

/* Reports of life 100, then the agent restarts as life 200 and adopts the
 * running task; late copies of life 100's reports (and of its registration)
 * must not end it; after a controller restart, life 200 registers again. */
static void test_previous_life_changes_nothing(void **unused)
{
    (void)unused;
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};
    char msg[512], run[512], reg[512];
    int64_t t;

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    assert_int_equal(st_open(dir, &c, &s, &err), 0);
    assert_int_equal(
        report(s, "{\"lamport\": 1, \"incarnation\": 100, " INVENTORY "}", msg, sizeof msg), 0);
    assert_false(last_stale);
    const char *spec = "{\"name\": \"j\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}}";
    st_job_view_t jv;
    assert_int_equal(st_job_submit(s, &admin, spec, strlen(spec), false, &jv, &t, &err), 0);
    uint64_t id = jv.id;
    st_job_view_free(&jv);
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    assert_int_equal(
        report(s, "{\"lamport\": 2, \"incarnation\": 100, \"tasks\": []}", msg, sizeof msg), 0);
    snprintf(run, sizeof run,
             "{\"lamport\": 3, \"incarnation\": 100, \"tasks\": [{\"job\": %llu, \"task\": 0, "
             "\"attempt\": 1, \"state\": \"running\"}]}",
             (unsigned long long)id);
    assert_int_equal(report(s, run, msg, sizeof msg), 0);
    assert_string_equal(state_of(s, id), "running");

    /* life 200 registers (its clock at 1 again) and lists the task it adopted */
    snprintf(reg, sizeof reg,
             "{\"lamport\": 1, \"incarnation\": 200, " INVENTORY
             ", \"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": "
             "\"running\"}]}",
             (unsigned long long)id);
    assert_int_equal(report(s, reg, msg, sizeof msg), 0);
    assert_false(last_stale);
    assert_string_equal(state_of(s, id), "running");

    /* life 100's late reports, with Lamport times above life 200's: nothing applied */
    assert_int_equal(
        report(s, "{\"lamport\": 50, \"incarnation\": 100, \"tasks\": []}", msg, sizeof msg), 0);
    assert_true(last_stale);
    assert_true(last_register);
    assert_int_equal(last_inc, 200);
    assert_non_null(strstr(msg, "from a previous life"));
    assert_string_equal(state_of(s, id), "running");
    assert_int_equal(report(s,
                            "{\"lamport\": 51, \"incarnation\": 100, " INVENTORY ", \"tasks\": []}",
                            msg, sizeof msg),
                     0);
    assert_true(last_stale);
    assert_string_equal(state_of(s, id), "running");

    /* life 200's own registration, copied late after its next report: a replay */
    snprintf(run, sizeof run,
             "{\"lamport\": 5, \"incarnation\": 200, \"tasks\": [{\"job\": %llu, \"task\": 0, "
             "\"attempt\": 1, \"state\": \"running\"}]}",
             (unsigned long long)id);
    assert_int_equal(report(s, run, msg, sizeof msg), 0);
    assert_false(last_stale);
    assert_int_equal(report(s,
                            "{\"lamport\": 4, \"incarnation\": 200, " INVENTORY ", \"tasks\": []}",
                            msg, sizeof msg),
                     0);
    assert_true(last_stale);
    assert_string_equal(state_of(s, id), "running");
    st_close(s);
    s = NULL;

    /* a controller restart: incarnations are volatile; life 200 registers again */
    assert_int_equal(st_open(dir, &c, &s, &err), 0);
    st_conf_free(&c);
    assert_string_equal(state_of(s, id), "running");
    assert_int_equal(
        report(s, "{\"lamport\": 52, \"incarnation\": 100, \"tasks\": []}", msg, sizeof msg), 0);
    assert_true(last_stale);
    assert_true(last_register);
    assert_int_equal(last_inc, 0);
    assert_string_equal(state_of(s, id), "running");
    assert_int_equal(report(s, reg, msg, sizeof msg), 0); /* what the agent does on "register" */
    assert_false(last_stale);
    assert_string_equal(state_of(s, id), "running");

    /* and a newer report of life 200 without the task: gone, the job requeued */
    assert_int_equal(
        report(s, "{\"lamport\": 9, \"incarnation\": 200, \"tasks\": []}", msg, sizeof msg), 0);
    assert_false(last_stale);
    assert_string_equal(state_of(s, id), "preempted");
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_late_report_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_previous_life_changes_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
