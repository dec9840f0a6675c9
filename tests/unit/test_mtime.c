/*
 * test_mtime.c: the base layer's clocks and timed waits (src/util/mtime.c).
 * Deadlines are normalised and never overflow; a wait on a cv made by
 * arb_cond_init times out no sooner than its deadline, measured on the
 * monotonic clock, and wakes at once when signalled. Bounds are one-sided
 * (never "within N ms"): a busy machine only makes waits longer.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>

#include "util/mtime.h"

static void test_deadline_normalised(void **st)
{
    (void)st;
    for (int64_t ms = -5; ms < 3000; ms += 7) {
        int64_t before = arb_mono_ns();
        struct timespec dl = arb_deadline_ms(ms);
        int64_t at = (int64_t)dl.tv_sec * 1000000000LL + dl.tv_nsec;
        assert_true(dl.tv_nsec >= 0 && dl.tv_nsec < 1000000000L);
        assert_true(at >= before + (ms > 0 ? ms : 0) * 1000000);
    }
    /* "for ever" does not wrap into the past */
    struct timespec far = arb_deadline_ms(INT64_MAX);
    assert_true(far.tv_sec > 0 && far.tv_nsec >= 0 && far.tv_nsec < 1000000000L);
    assert_true((int64_t)far.tv_sec > arb_mono_ns() / 1000000000LL + 86400LL * 365);
    assert_true(arb_mono_ms() >= 0 && arb_wall_ms() > 1500000000000LL);
}

static void test_wait_times_out_after_deadline(void **st)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    (void)st;
    assert_int_equal(arb_cond_init(&cv), 0);
    pthread_mutex_lock(&mu);
    int64_t t0 = arb_mono_ns();
    struct timespec dl = arb_deadline_ms(30);
    int rc = 0;
    while (rc == 0) /* spurious wake-ups return 0: wait again */
        rc = arb_cond_wait_until(&cv, &mu, &dl);
    int64_t waited = arb_mono_ns() - t0;
    pthread_mutex_unlock(&mu);
    assert_int_equal(rc, ETIMEDOUT);
    assert_true(waited >= 30 * 1000000LL);
    /* a deadline already passed returns at once */
    pthread_mutex_lock(&mu);
    dl = arb_deadline_ms(0);
    assert_int_equal(arb_cond_wait_until(&cv, &mu, &dl), ETIMEDOUT);
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&cv);
}

struct waker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int flag;
};

static void *wake(void *arg)
{
    struct waker *w = arg;
    pthread_mutex_lock(&w->mu);
    w->flag = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void test_signal_wakes_before_deadline(void **st)
{
    struct waker w = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pthread_t t;
    (void)st;
    assert_int_equal(arb_cond_init(&w.cv), 0);
    pthread_mutex_lock(&w.mu);
    assert_int_equal(pthread_create(&t, NULL, wake, &w), 0);
    struct timespec dl = arb_deadline_ms(600000); /* ten minutes: only a signal ends it */
    int rc = 0;
    while (!w.flag && rc == 0)
        rc = arb_cond_wait_until(&w.cv, &w.mu, &dl);
    pthread_mutex_unlock(&w.mu);
    pthread_join(t, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(w.flag, 1);
    pthread_cond_destroy(&w.cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline_normalised),
        cmocka_unit_test(test_wait_times_out_after_deadline),
        cmocka_unit_test(test_signal_wakes_before_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
