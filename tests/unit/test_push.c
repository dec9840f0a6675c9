/* test_push.c: the controller's side of the assignments channel (real
 * SQLite store; st_node_assignments_wait, the node hook). A job placed on a
 * node tells that node's hook (key: its id + 1) and changes its list's
 * version; the task's own "running" does not change the version (the agent
 * has that list: its poll stays parked); the job's end does (the list is
 * empty again); the version in a report's reply is the poll's. An agent of
 * another epoch gets -ESTALE and no list; so does one of a lost node. */
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

#define INVENTORY                                                                                  \
    "\"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"gpus\": [{\"model\": \"H100\", "        \
    "\"memory\": \"80Gi\", \"nvlink\": 0}]}"

static int hook_calls;
static uint32_t hook_key;

static void on_node(void *arg, uint32_t key)
{
    (void)arg;
    hook_calls++;
    hook_key = key;
}

/* node n1's report; the reply's assignments_version into *ver */
static void report(st_t *s, const char *body, uint64_t *ver)
{
    json_t *out = NULL, *b = json_loads(body, 0, NULL);
    int64_t t = 0;
    arb_err_t err = {{0}};

    assert_non_null(b);
    assert_int_equal(api_node_report(s, &agent, "n1", -1, b, &out, &t, &err), 0);
    if (t)
        assert_int_equal(st_wait(s, t, NULL), 0);
    if (ver)
        *ver = (uint64_t)json_integer_value(json_object_get(out, "assignments_version"));
    json_decref(out);
    json_decref(b);
}

/* poll n1 as an agent of epoch with version have: rc; *ver, *n, *same */
static int poll_n1(st_t *s, int64_t epoch, uint64_t have, uint64_t *ver, size_t *n, bool *same)
{
    json_t *out = NULL;
    int64_t t = 0;
    uint32_t key = 0;
    arb_err_t err = {{0}};
    char *text = NULL; /* the reply as the route sends it: written straight, then a newline */
    size_t len = 0;
    int rc = api_node_assignments(s, "n1", epoch, have, same, &key, &text, &len, &t, &err);

    if (text) {
        assert_true(len > 0 && text[len - 1] == '\n' && strlen(text) == len);
        out = json_loadb(text, len, 0, NULL);
        assert_non_null(out);
        free(text);
    }

    if (t)
        assert_int_equal(st_wait(s, t, NULL), 0);
    if (rc == 0) {
        *ver = (uint64_t)json_integer_value(json_object_get(out, "assignments_version"));
        *n = json_array_size(json_object_get(out, "assignments"));
        assert_int_equal(key, hook_key ? hook_key : key);
    } else {
        assert_null(json_object_get(out, "assignments")); /* nothing through the channel */
        assert_non_null(strstr(err.msg, "nothing is sent through the assignments channel"));
    }
    json_decref(out);
    return rc;
}

static void test_channel_versions_and_fencing(void **unused)
{
    (void)unused;
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};
    int64_t t;
    uint64_t v0, v1, v2, vr;
    size_t n;
    bool same;
    char body[512];

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    assert_int_equal(st_open(dir, &c, &s, &err), 0);
    st_conf_free(&c);
    st_set_node_hook(s, on_node, NULL);
    report(s, "{\"lamport\": 1, " INVENTORY "}", &vr);
    uint64_t epoch = s->epoch;
    assert_int_equal(poll_n1(s, (int64_t)epoch, 0, &v0, &n, &same), 0);
    assert_int_equal(n, 0);
    assert_false(same);
    assert_int_equal(v0, vr); /* the report's reply says the poll's version */
    assert_int_equal(poll_n1(s, (int64_t)epoch, v0, &v0, &n, &same), 0);
    assert_true(same); /* the agent has it: the route parks the poll */

    const char *spec = "{\"name\": \"j\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}}";
    st_job_view_t jv;
    assert_int_equal(st_job_submit(s, &admin, spec, strlen(spec), false, &jv, &t, &err), 0);
    uint64_t id = jv.id;
    st_job_view_free(&jv);
    hook_calls = 0;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    assert_true(hook_calls > 0); /* placed on n1: n1's poll is woken */
    assert_int_equal(hook_key, 1);
    assert_int_equal(poll_n1(s, (int64_t)epoch, v0, &v1, &n, &same), 0);
    assert_false(same);
    assert_int_equal(n, 1);
    assert_true(v1 != v0);

    /* its own "running": the same list as far as the agent acts on it */
    snprintf(body, sizeof body,
             "{\"lamport\": 2, \"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, "
             "\"state\": \"running\"}]}",
             (unsigned long long)id);
    report(s, body, &vr);
    assert_int_equal(vr, v1);
    assert_int_equal(poll_n1(s, (int64_t)epoch, v1, &v2, &n, &same), 0);
    assert_true(same);

    /* fencing: another epoch (older or newer) gets nothing */
    assert_int_equal(poll_n1(s, (int64_t)epoch + 1, v1, &v2, &n, &same), -ESTALE);
    if (epoch > 0)
        assert_int_equal(poll_n1(s, (int64_t)epoch - 1, 0, &v2, &n, &same), -ESTALE);
    /* without an epoch (an operator's read) the list as before */
    assert_int_equal(poll_n1(s, -1, 0, &v2, &n, &same), 0);
    assert_int_equal(n, 1);

    /* the job ends: the list is empty again, a new version */
    snprintf(body, sizeof body,
             "{\"lamport\": 3, \"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, "
             "\"state\": \"succeeded\", \"exit_code\": 0}]}",
             (unsigned long long)id);
    report(s, body, &vr);
    assert_true(vr != v1);
    /* a poll sent with v1 before that report's reply came: the reply
     * carried the new list, so the poll has nothing new to say and waits */
    assert_int_equal(poll_n1(s, (int64_t)epoch, v1, &v2, &n, &same), 0);
    assert_true(same);
    assert_int_equal(n, 0);
    assert_int_equal(v2, vr);

    /* a node declared lost: nothing through the channel until it registers */
    pthread_mutex_lock(&s->mu);
    st_node_ext(s, arb_cluster_find_node(&s->cluster, "n1"))->lost = true;
    pthread_mutex_unlock(&s->mu);
    assert_int_equal(poll_n1(s, (int64_t)epoch, 0, &v2, &n, &same), -ESTALE);
    report(s, "{\"lamport\": 4, " INVENTORY "}", NULL); /* registers again */
    assert_int_equal(poll_n1(s, (int64_t)epoch, 0, &v2, &n, &same), 0);
    st_set_node_hook(s, NULL, NULL);
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_channel_versions_and_fencing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
