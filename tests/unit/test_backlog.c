/* test_backlog.c: does what the controller does around a submission stay
 * the same as the backlog of pending jobs grows (issue 20)? Counted, not
 * timed: over a real SQLite store, with two running jobs on a full node
 * and 1,000, then 20,000 jobs pending behind them, the clock-driven checks
 * (time limits, stragglers: liveness.c) look at the same jobs, the running
 * ones, at either size (they once walked every active job, so the
 * controller's CPU per chunk of submissions grew with the backlog), and
 * still do their work: the running job's time limit ends it, and the room
 * goes to the first job in the queue. A virtual clock drives the time.
 * The scheduler thread is not started: the test drives st_cycle. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"
#include "state_fixture.h"

static int64_t vnow = 1000000000LL; /* the virtual clock, ns */

static int64_t v_mono(void *arg)
{
    (void)arg;
    return vnow;
}

static int64_t v_wall(void *arg)
{
    (void)arg;
    return vnow / 1000000;
}

static st_t *open_virtual(void)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    c.clock.mono_ns = v_mono;
    c.clock.wall_ms = v_wall;
    c.lease_ns = 3600000000000LL; /* the node (no agent) stays ready and fresh */
    c.stale_ns = 0;
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    return s;
}

#define ONE_GPU "{\"name\": \"b\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}}"

/* Submit jobs until n are pending, waiting only for the last commit (the
 * group commit takes them in batches). */
static void fill(st_t *s, int *pending, int n)
{
    int64_t t = 0;
    for (; *pending < n; (*pending)++) {
        st_job_view_t v;
        arb_err_t err = {{0}};
        if (st_job_submit(s, &admin, ONE_GPU, strlen(ONE_GPU), false, &v, &t, &err) < 0)
            fail_msg("submit %d: %s", *pending, err.msg);
        st_job_view_free(&v);
    }
    assert_int_equal(st_wait(s, t, NULL), 0);
}

/* One cycle with the clock-driven checks due: the jobs they looked at. */
static uint64_t checked_cycle(st_t *s)
{
    int64_t t;
    uint64_t v0 = s->m_check_visits;

    vnow += 300000000LL; /* past the 200 ms between checks */
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    return s->m_check_visits - v0;
}

static const char *state_of(st_t *s, uint64_t id)
{
    static char buf[32];
    st_job_view_t v;
    int64_t t;

    assert_int_equal(st_job_get(s, &admin, id, &v, &t, NULL), 0);
    snprintf(buf, sizeof buf, "%s", v.state);
    st_job_view_free(&v);
    return buf;
}

static void test_checks_cost_what_runs(void **unused)
{
    (void)unused;
    st_t *s = open_virtual();
    int pending = 0;

    sf_report(s, "n1",
              "{\"lamport\": 3, \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"gpus\": ["
              "{\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0},"
              "{\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}]}}");
    uint64_t timed = sf_submit_yaml(s, "name: timed\ntimeLimit: 60s\n"
                                       "resources:\n  requests: {nvidia.com/gpu: 1}\n");
    uint64_t other =
        sf_submit_yaml(s, "name: other\nresources:\n  requests: {nvidia.com/gpu: 1}\n");
    checked_cycle(s);
    assert_string_equal(state_of(s, timed), "placed");
    assert_string_equal(state_of(s, other), "placed");
    uint64_t first = other + 1; /* the first job of the backlog */

    fill(s, &pending, 1000);
    checked_cycle(s); /* the new jobs' first turn (they wait: the node is full) */
    uint64_t small = checked_cycle(s);
    assert_string_equal(state_of(s, first), "pending");

    fill(s, &pending, 20000); /* (any size shows a walk of the backlog; this one stays
                                 well inside the sanitizer passes' deadline) */
    checked_cycle(s);
    uint64_t large = checked_cycle(s);
    /* both checks looked at the two jobs that run, and at nothing that waits */
    assert_int_equal(small, 4);
    assert_int_equal(large, small);

    /* and they still work: past its time limit the running job ends (no
     * agent ever fetched it: nothing to stop), and its GPU goes to the
     * first job in the queue */
    vnow += 61000000000LL;
    checked_cycle(s);
    assert_string_equal(state_of(s, timed), "timeout");
    checked_cycle(s);
    assert_string_equal(state_of(s, first), "placed");
    assert_string_equal(state_of(s, other), "placed");
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_checks_cost_what_runs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
