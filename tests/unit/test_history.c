/* test_history.c: the bounded memory of ended jobs (config jobs.history,
 * src/state/history.c) and recovery that leaves the older ended jobs in the
 * store (recover.c), over a real SQLite store: past the history an ended
 * job leaves memory once its record is durable, `job ID` still reads it
 * (from the store, its team's rules kept), other verbs say where it went,
 * its Idempotency-Key still answers with it; a restart decodes only the
 * newest ended jobs, keeps every pending one in the scheduler in id order
 * (a record whose nested values say "state" too included), counts the rest
 * and never hands their ids out again; the config key's errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state/state_int.h"
#include "state_fixture.h"

#define SPEC "{\"name\": \"j\", \"resources\": {\"requests\": {\"cpu\": 1}}}"

static st_t *open_st(int history)
{
    return sf_open(NULL, history);
}

static uint64_t submit(st_t *s, const char *key, bool *created)
{
    return sf_submit(s, key, SPEC, created);
}

static void cancel(st_t *s, uint64_t id)
{
    st_job_view_t out;
    int64_t t = 0;
    arb_err_t err = {{0}};

    if (st_job_cancel(s, &alice, id, -1, &out, &t, &err) < 0)
        fail_msg("cancel %llu: %s", (unsigned long long)id, err.msg);
    st_job_view_free(&out);
    assert_int_equal(st_wait(s, t, NULL), 0);
}

/* What the scheduler thread does between cycles, now. */
static void trim(st_t *s)
{
    pthread_mutex_lock(&s->mu);
    st_history_trim(s);
    pthread_mutex_unlock(&s->mu);
}

static bool in_memory(st_t *s, uint64_t id)
{
    pthread_mutex_lock(&s->mu);
    bool in = st_job_find(s, id) != NULL;
    pthread_mutex_unlock(&s->mu);
    return in;
}

/* `job ID` as the API asks: its state name, or NULL with err set. */
static const char *job_state(st_t *s, const st_who_t *who, uint64_t id, arb_err_t *err)
{
    static char st[32];
    st_job_view_t out;
    int64_t t = 0;

    if (st_job_get(s, who, id, &out, &t, err) < 0)
        return NULL;
    snprintf(st, sizeof st, "%s", out.state ?: "?");
    assert_int_equal(out.id, id);
    st_job_view_free(&out);
    return st;
}

static void test_ended_jobs_past_the_history_leave_memory(void **unused)
{
    (void)unused;
    st_t *s = open_st(3);
    arb_err_t err = {{0}};
    uint64_t id[10];
    char key[16];
    bool created;

    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        id[i] = submit(s, key, NULL);
    }
    for (int i = 0; i < 10; i++)
        cancel(s, id[i]);
    trim(s);
    for (int i = 0; i < 7; i++)
        assert_false(in_memory(s, id[i]));
    for (int i = 7; i < 10; i++)
        assert_true(in_memory(s, id[i]));
    assert_int_equal(s->nstored, 7);
    assert_int_equal(s->njobs, 10);

    /* read back from the store, as it ended; its team's rules kept */
    const char *st = job_state(s, &alice, id[0], &err);
    assert_non_null(st);
    assert_string_equal(st, "cancelled");
    assert_null(job_state(s, &bob, id[0], &err));
    assert_non_null(strstr(err.msg, "belongs to team 'team-a'"));
    /* other verbs say where it went */
    st_job_view_t out;
    int64_t t = 0;
    assert_true(st_job_cancel(s, &alice, id[0], -1, &out, &t, &err) < 0);
    assert_non_null(strstr(err.msg, "jobs.history"));
    /* an id never used is still no such job */
    assert_null(job_state(s, &alice, 999, &err));
    assert_non_null(strstr(err.msg, "no such job"));
    /* its Idempotency-Key still names it */
    assert_int_equal(submit(s, "key-0", &created), id[0]);
    assert_false(created);
    st_close(s);
}

static void test_recovery_leaves_older_ended_jobs_in_the_store(void **unused)
{
    (void)unused;
    st_t *s = open_st(100);
    arb_err_t err = {{0}};
    uint64_t id[12];
    char key[16];
    bool created;

    /* ended and pending jobs interleaved: 0..11, every third one pending */
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        id[i] = submit(s, key, NULL);
    }
    for (int i = 0; i < 12; i++)
        if (i % 3 != 2)
            cancel(s, id[i]);
    st_close(s);

    s = open_st(2);
    assert_int_equal(s->njobs, 12);
    assert_int_equal(s->nactive, 4);
    assert_int_equal(s->nstored, 6); /* 8 ended, the newest 2 decoded */
    for (int i = 0; i < 12; i++)
        assert_true(in_memory(s, id[i]) == (i % 3 == 2 || i >= 9));
    /* pending ones are the scheduler's again, in their submission order */
    for (int i = 1; i < s->nactive; i++)
        assert_true(s->active[i - 1]->id < s->active[i]->id);
    assert_string_equal(job_state(s, &alice, id[0], &err), "cancelled");
    assert_string_equal(job_state(s, &alice, id[2], &err), "pending");
    /* ids are not handed out again; keys still answer */
    uint64_t next = submit(s, "new", NULL);
    assert_true(next > id[11]);
    assert_int_equal(submit(s, "key-1", &created), id[1]);
    assert_false(created);
    st_close(s);

    /* a larger history decodes them all again */
    s = open_st(1000);
    assert_int_equal(s->nstored, 0);
    for (int i = 0; i < 12; i++)
        assert_true(in_memory(s, id[i]));
    st_close(s);
}

/* A hand-written record whose nested values say "state" first, a damaged
 * one, and a pending one: the light reading of the state must not be
 * fooled by the nested ones nor by escapes (a string ending in an escaped
 * backslash, escaped quotes after escaped backslashes), a damaged one is
 * still reported damaged. */
static void test_records_read_whole_where_in_doubt(void **unused)
{
    (void)unused;
    st_t *s = open_st(0);
    uint64_t a = submit(s, NULL, NULL), b = submit(s, NULL, NULL);
    cancel(s, b);
    st_close(s);

    store_t *st = NULL;
    store_opts_t so = {.sync = STORE_SYNC_NORMAL};
    store_batch_t bt = {0};
    arb_err_t err = {{0}};
    char path[300], *val = NULL, rec[4096];
    snprintf(path, sizeof path, "%s", dir);
    assert_int_equal(store_open(path, &so, &st, &err), 0);
    /* job a again, with a nested {"state": "succeeded"} before its own state */
    assert_int_equal(store_get(st, "jobs/00000000000000000001", &val, NULL, NULL, &err), 0);
    assert_non_null(strstr(val, "\"state\":\"pending\""));
    snprintf(rec, sizeof rec,
             "{\"note\":{\"state\":\"succeeded\"},\"x\":[\"\\\"state\\\":\"],\"y\":\"a\\\\\","
             "\"z\":\"\\\\\\\"state\\\\\\\":\\\\\",%s",
             val + 1);
    free(val);
    store_batch_putstr(&bt, "jobs/00000000000000000001", rec);
    store_batch_putstr(&bt, "jobs/00000000000000000007", "{\"state\":\"succeeded\", not json");
    assert_int_equal(store_apply(st, &bt, NULL, &err), 0);
    store_batch_free(&bt);
    store_close(st);

    s = open_st(0);
    assert_true(in_memory(s, a)); /* pending, decoded */
    assert_int_equal(s->nactive, 1);
    assert_false(in_memory(s, b));   /* ended, past a history of 0 */
    assert_int_equal(s->nstored, 2); /* b, and 7 (not decoded: its state says ended) */
    /* job 7's record was never decoded; asked for, it says it is damaged */
    st_job_view_t out;
    int64_t t = 0;
    assert_true(st_job_get(s, &admin, 7, &out, &t, &err) < 0);
    assert_non_null(strstr(err.msg, "damaged"));
    assert_true(submit(s, NULL, NULL) > 7);
    st_close(s);
}

static void test_config(void **unused)
{
    (void)unused;
    st_conf_t c;
    arb_err_t err = {{0}};
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"jobs: {history: -1}\n", "jobs.history"},
        {"jobs: {history: lots}\n", "jobs.history"},
        {"jobs: {histroy: 10}\n", "histroy"},
    };

    st_conf_init(&c);
    assert_int_equal(c.job_history, 10000);
    assert_int_equal(st_conf_load_mem("c.yaml", "jobs: {history: 5}\n", 19, &c, &err), 0);
    assert_int_equal(c.job_history, 5);
    st_conf_free(&c);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st_conf_init(&c);
        assert_true(st_conf_load_mem("c.yaml", bad[i].yaml, strlen(bad[i].yaml), &c, &err) < 0);
        if (!strstr(err.msg, bad[i].want) || !strstr(err.msg, "c.yaml:1:"))
            fail_msg("'%s': got '%s', wanted '%s'", bad[i].yaml, err.msg, bad[i].want);
        assert_int_equal(c.job_history, 10000); /* nothing applied */
        st_conf_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ended_jobs_past_the_history_leave_memory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_recovery_leaves_older_ended_jobs_in_the_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_records_read_whole_where_in_doubt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
