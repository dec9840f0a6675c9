/* test_idem.c: Idempotency-Key retention (api.idempotencyRetention) over a
 * real SQLite store: a key inside the retention answers with its job, one
 * past it makes a new job and takes the key over; expired keys leave the
 * store (at lookup, by the sweep, at recovery) and a restart keeps the
 * live ones; retention 0 keeps keys for ever; the config key's errors.
 * A job's age is its recorded submit time (submit_ms, wall clock): the
 * tests move that back instead of waiting. */
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

#define HOUR_MS 3600000LL
#define SPEC "{\"name\": \"j\", \"resources\": {\"requests\": {\"cpu\": 1}}}"

static st_t *open_st(const char *yaml)
{
    return sf_open(yaml, -1);
}

static uint64_t submit(st_t *s, const char *key, bool *created)
{
    return sf_submit(s, key, SPEC, created);
}

/* Make job id look submitted `ago_ms` ago, durably. */
static void age(st_t *s, uint64_t id, int64_t ago_ms)
{
    pthread_mutex_lock(&s->mu);
    st_job_t *sj = st_job_find(s, id);
    assert_non_null(sj);
    sj->submit_ms = st_wall_ms() - ago_ms;
    st_job_save(s, sj, 0);
    int64_t t = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    assert_int_equal(st_wait(s, t, NULL), 0);
}

typedef struct want {
    const char *key;
    int n;
} want_t;

static int count_one(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    want_t *w = arg;
    size_t kl = strlen(key), wl = strlen(w->key);

    (void)val;
    (void)n;
    (void)rev;
    if (kl > wl && key[kl - wl - 1] == '/' && strcmp(key + kl - wl, w->key) == 0)
        w->n++;
    return 0;
}

/* How many store records hold idempotency key `key` (any principal). */
static int stored(st_t *s, const char *key)
{
    want_t w = {key, 0};
    arb_err_t err = {{0}};
    if (store_scan(s->store, "idem/", count_one, &w, &err) < 0)
        fail_msg("scan: %s", err.msg);
    return w.n;
}

static void test_inside_and_past(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL); /* the default: 24h */
    bool created;

    assert_int_equal(s->conf.idem_retention_ns, 24 * 3600000000000LL);
    uint64_t a = submit(s, "key-a", &created);
    assert_true(created);
    assert_int_equal(submit(s, "key-a", &created), a);
    assert_false(created);

    /* 23 h later: still inside, the same job */
    age(s, a, 23 * HOUR_MS);
    assert_int_equal(submit(s, "key-a", &created), a);
    assert_false(created);
    assert_int_equal(stored(s, "key-a"), 1);

    /* 24 h and a second later: a new job, which takes the key over */
    age(s, a, 24 * HOUR_MS + 1000);
    uint64_t b = submit(s, "key-a", &created);
    assert_true(created);
    assert_true(b != a);
    assert_int_equal(submit(s, "key-a", &created), b);
    assert_false(created);
    assert_int_equal(stored(s, "key-a"), 1);

    /* and it survives a restart, naming the new job */
    st_close(s);
    s = open_st(NULL);
    assert_int_equal(submit(s, "key-a", &created), b);
    assert_false(created);
    st_close(s);
}

static void test_expired_keys_leave_the_store(void **unused)
{
    (void)unused;
    st_t *s = open_st("api: {idempotencyRetention: 2h}\n");
    bool created;

    assert_int_equal(s->conf.idem_retention_ns, 2 * 3600000000000LL);
    uint64_t old1 = submit(s, "old-1", NULL), old2 = submit(s, "old-2", NULL);
    uint64_t young = submit(s, "young", NULL);
    age(s, old1, 3 * HOUR_MS);
    age(s, old2, 3 * HOUR_MS);
    age(s, young, 1 * HOUR_MS);

    /* the sweep deletes what is past the retention, durably */
    pthread_mutex_lock(&s->mu);
    assert_int_equal(st_idem_sweep(s, st_wall_ms()), 1 + 1);
    assert_int_equal(st_idem_sweep(s, st_wall_ms()), 0);
    int64_t t = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    assert_int_equal(st_wait(s, t, NULL), 0);
    assert_int_equal(stored(s, "old-1"), 0);
    assert_int_equal(stored(s, "old-2"), 0);
    assert_int_equal(stored(s, "young"), 1);
    assert_int_equal(submit(s, "young", &created), young);
    assert_false(created);
    st_close(s);

    /* recovery deletes a key that expired while the controller was down */
    s = open_st("api: {idempotencyRetention: 2h}\n");
    age(s, young, 2 * HOUR_MS + 1000);
    st_close(s);
    s = open_st("api: {idempotencyRetention: 2h}\n");
    assert_int_equal(stored(s, "young"), 0);
    assert_true(submit(s, "young", &created) != young);
    assert_true(created);
    st_close(s);
}

static void test_zero_keeps_for_ever(void **unused)
{
    (void)unused;
    st_t *s = open_st("api: {idempotencyRetention: 0}\n");
    bool created;
    uint64_t a = submit(s, "k", NULL);

    age(s, a, 24 * 365 * HOUR_MS);
    assert_int_equal(submit(s, "k", &created), a);
    assert_false(created);
    pthread_mutex_lock(&s->mu);
    assert_int_equal(st_idem_sweep(s, st_wall_ms()), 0);
    pthread_mutex_unlock(&s->mu);
    st_close(s);
}

static void test_config_errors(void **unused)
{
    (void)unused;
    st_conf_t c;
    arb_err_t err = {{0}};
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"api: {idempotencyRetention: soon}\n", "not a duration"},
        {"api: {idempotencyRetention: 500ms}\n", "at least 1s"},
        {"api: {idempotencyRetentio: 1h}\n", "idempotencyRetentio"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st_conf_init(&c);
        assert_true(st_conf_load_mem("c.yaml", bad[i].yaml, strlen(bad[i].yaml), &c, &err) < 0);
        if (!strstr(err.msg, bad[i].want) || !strstr(err.msg, "c.yaml:1:"))
            fail_msg("'%s': got '%s', wanted '%s'", bad[i].yaml, err.msg, bad[i].want);
        assert_int_equal(c.idem_retention_ns, 24 * 3600000000000LL); /* nothing applied */
        st_conf_free(&c);
    }
    st_conf_init(&c);
    assert_int_equal(
        st_conf_load_mem("c.yaml", "api: {idempotencyRetention: 1h30m}\n", 35, &c, &err), 0);
    assert_int_equal(c.idem_retention_ns, 5400000000000LL);
    st_conf_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_inside_and_past, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_keys_leave_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_keeps_for_ever, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
