/* test_kick.c: the scheduler thread's wakeups (src/state/cycle.c,
 * st_kick). A change signals the thread only while it waits for work; one
 * that comes while it runs a cycle, or gathers after one, is seen through
 * the dirty mark before it waits again. The test: the thread started with
 * a scheduling interval of a minute, bursts of submissions back to back
 * (the later ones of each burst land while the thread is busy with the
 * first), and every job must be placed within seconds, not at the next
 * interval: a lost wakeup leaves a job pending for the whole minute. And
 * the case itself, made certain: a change marked in the middle of a cycle
 * (from the change hook, which the cycle calls under the state's lock when
 * it places a job) must start another cycle at once. Real SQLite store;
 * the thread on real time, the deadlines generous. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state/state_int.h"
#include "state_fixture.h"
#include "util/mtime.h"

#define NODE                                                                                       \
    "{\"lamport\": 3, \"inventory\": {\"cpu\": 256, \"memory\": \"512Gi\", \"gpus\": "             \
    "[{\"model\": "                                                                                \
    "\"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}]}}"
#define JOB "{\"name\": \"k\", \"resources\": {\"requests\": {\"cpu\": 1}}}"

#define BURSTS 20
#define PER_BURST 6
#define PLACED_WITHIN_MS 10000 /* the interval is 60 s: a lost wakeup waits for it */

static st_t *hooked;       /* the state whose cycle the hook watches */
static uint64_t kicked_in; /* the cycle during which the hook kicked; 0 not yet */

/* The change hook (st_set_change_hook), under the state's lock: the first
 * time the scheduler thread itself calls it (an event of its cycle), a
 * change comes in as a submission would mark it. */
static void on_change(void *arg)
{
    (void)arg;
    if (!kicked_in && hooked && pthread_equal(pthread_self(), hooked->thr)) {
        kicked_in = hooked->m_cycles;
        st_kick(hooked);
    }
}

static uint64_t cycles(st_t *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->m_cycles;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static const char *state_of(st_t *s, uint64_t id)
{
    st_job_view_t v;
    int64_t t;
    const char *state;

    assert_int_equal(st_job_get(s, &admin, id, &v, &t, NULL), 0);
    state = v.state; /* static */
    st_job_view_free(&v);
    return state;
}

static void test_no_lost_wakeup(void **unused)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};
    uint64_t ids[PER_BURST];

    (void)unused;
    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    c.interval_ns = 60 * 1000000000LL;
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    sf_report(s, "n1", NODE);
    if (st_start(s, &err) < 0)
        fail_msg("st_start: %s", err.msg);
    for (int b = 0; b < BURSTS; b++) {
        for (int i = 0; i < PER_BURST; i++)
            ids[i] = sf_submit(s, NULL, JOB, NULL);
        int64_t until = arb_mono_ms() + PLACED_WITHIN_MS;
        for (int i = 0; i < PER_BURST; i++) {
            while (strcmp(state_of(s, ids[i]), "pending") == 0 && arb_mono_ms() < until)
                usleep(1000);
            if (strcmp(state_of(s, ids[i]), "pending") == 0)
                fail_msg("burst %d: job %llu still pending after %d ms (the interval is 60 s): "
                         "a wakeup was lost",
                         b, (unsigned long long)ids[i], PLACED_WITHIN_MS);
        }
    }
    st_close(s);
}

static void test_kick_mid_cycle(void **unused)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    (void)unused;
    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    c.interval_ns = 60 * 1000000000LL;
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    sf_report(s, "n1", NODE);
    hooked = s;
    kicked_in = 0;
    st_set_change_hook(s, on_change, NULL);
    if (st_start(s, &err) < 0)
        fail_msg("st_start: %s", err.msg);
    sf_submit(s, NULL, JOB, NULL); /* its placement is the cycle's event */
    int64_t until = arb_mono_ms() + PLACED_WITHIN_MS;
    pthread_mutex_lock(&s->mu);
    uint64_t in = kicked_in;
    pthread_mutex_unlock(&s->mu);
    while ((!in || cycles(s) <= in) && arb_mono_ms() < until) {
        usleep(1000);
        pthread_mutex_lock(&s->mu);
        in = kicked_in;
        pthread_mutex_unlock(&s->mu);
    }
    if (!in)
        fail_msg("the scheduler thread placed no job within %d ms", PLACED_WITHIN_MS);
    if (cycles(s) <= in)
        fail_msg("a change marked during cycle %llu started no cycle within %d ms (the "
                 "interval is 60 s): the wakeup was lost",
                 (unsigned long long)in, PLACED_WITHIN_MS);
    st_set_change_hook(s, NULL, NULL);
    st_close(s);
    hooked = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_lost_wakeup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kick_mid_cycle, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
