/* test_report_order.c: an agent's reports apply in its own Lamport order
 * (real SQLite store). A report that arrives after a newer one from the
 * same node (one its agent gave up on, delivered late) is answered
 * "stale": true and changes nothing: its task list, written before the
 * agent started a task, must not make that running task "gone" and its job
 * lost. A newer report that truly lacks the task still means it is gone;
 * a registration (inventory) starts the agent's clock again. */
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

static bool last_stale; /* the last report's reply said "stale": true */

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_late_report_changes_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
