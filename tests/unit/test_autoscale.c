/*
 * test_autoscale.c: the autoscaler's decision (core/autoscale.c) on
 * injected load series, with an injected clock: deterministic. Scale out
 * at once to ceil(current * load / target); never past max or below min;
 * within the tolerance nothing moves; scale in only when every
 * recommendation of the whole window agrees, and to the highest of them;
 * a cooldown after every change; GPU utilisation as a second signal; the
 * reason names the numbers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "arbiter/autoscale.h"

#define SEC 1000000000LL

static arb_as_conf_t conf(int min, int max, double target, int window_s, int cooldown_s)
{
    arb_as_conf_t c;
    arb_as_conf_default(&c);
    c.min = min;
    c.max = max;
    c.target = target;
    c.window_ns = window_s * SEC;
    c.cooldown_ns = cooldown_s * SEC;
    return c;
}

static arb_as_load_t load(double inflight, int ready)
{
    arb_as_load_t l = {.inflight = inflight, .queue = 0, .gpu_util = -1, .ready = ready};
    return l;
}

/* Drive one sample per second from t0 over a series of total in-flight
 * loads, applying each decision; returns the replica count after each. */
static void drive(const arb_as_conf_t *c, arb_as_state_t *st, int64_t t0, int *cur,
                  const double *series, int n, int *after)
{
    for (int i = 0; i < n; i++) {
        arb_as_decision_t d;
        arb_as_load_t l = load(series[i], *cur);
        int64_t now = t0 + i * SEC;
        if (arb_as_decide(c, st, now, *cur, &l, &d) != *cur) {
            *cur = d.desired;
            arb_as_note_change(st, now);
        }
        after[i] = *cur;
    }
}

static void scale_out_at_once(void **unused)
{
    arb_as_conf_t c = conf(1, 8, 2.0, 10, 3);
    arb_as_state_t st;
    arb_as_decision_t d;
    arb_as_load_t l = load(9, 2); /* 4.5 per replica, target 2: ceil(2 * 2.25) = 5 */

    (void)unused;
    arb_as_reset(&st);
    assert_int_equal(arb_as_decide(&c, &st, 100 * SEC, 2, &l, &d), 5);
    assert_int_equal(d.recommended, 5);
    assert_true(d.per_replica > 4.49 && d.per_replica < 4.51);
    assert_non_null(strstr(d.why, "load 9.0 in flight + 0.0 queued over 2 replicas = 4.50 per "
                                  "replica (target 2.00): recommend 5"));
}

static void clamped_to_bounds(void **unused)
{
    arb_as_conf_t c = conf(2, 4, 1.0, 0, 0);
    arb_as_state_t st;
    arb_as_decision_t d;
    arb_as_load_t hi = load(100, 2), lo = load(0, 4);

    (void)unused;
    arb_as_reset(&st);
    assert_int_equal(arb_as_decide(&c, &st, 1 * SEC, 2, &hi, &d), 4);
    arb_as_reset(&st);
    assert_int_equal(arb_as_decide(&c, &st, 1 * SEC, 4, &lo, &d), 2);
    /* outside the bounds (they changed): moved in whatever the load */
    arb_as_reset(&st);
    assert_int_equal(arb_as_decide(&c, &st, 1 * SEC, 7, &hi, &d), 4);
}

static void tolerance_holds(void **unused)
{
    arb_as_conf_t c = conf(1, 10, 2.0, 0, 0);
    arb_as_state_t st;
    arb_as_decision_t d;
    arb_as_load_t l = load(8.6, 4); /* 2.15 per replica: ratio 1.075, within 0.1 */

    (void)unused;
    arb_as_reset(&st);
    assert_int_equal(arb_as_decide(&c, &st, 5 * SEC, 4, &l, &d), 4);
    assert_int_equal(d.recommended, 4);
    l = load(9.0, 4); /* 2.25: ratio 1.125, outside: ceil(4.5) = 5 */
    assert_int_equal(arb_as_decide(&c, &st, 6 * SEC, 4, &l, &d), 5);
}

/* Load rises, stays, falls: out at once, in only after a whole window of
 * low recommendations, to the highest of them. */
static void window_then_scale_in(void **unused)
{
    arb_as_conf_t c = conf(1, 6, 2.0, 5, 0);
    arb_as_state_t st;
    /* t: 0..3 high (8 in flight), 4..14 low (1 in flight) */
    double s[15] = {8, 8, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    int after[15], cur = 1;

    (void)unused;
    arb_as_reset(&st);
    drive(&c, &st, 1000 * SEC, &cur, s, 15, after);
    assert_int_equal(after[0], 4); /* 8 over 1: ceil(1 * 4) = 4 */
    assert_int_equal(after[3], 4); /* 8 over 4 = 2 per replica: steady */
    /* from t=4 every recommendation is 1 (1 over 4 = 0.25: ceil(0.5) = 1),
     * but the window (5 s) still holds the 4s of t<=3 until t=9 */
    for (int i = 4; i < 9; i++)
        assert_int_equal(after[i], 4);
    assert_int_equal(after[9], 1);
    assert_int_equal(after[14], 1);
}

/* A dip shorter than the window never scales in. */
static void short_dip_ignored(void **unused)
{
    arb_as_conf_t c = conf(1, 6, 2.0, 4, 0);
    arb_as_state_t st;
    double s[12] = {6, 6, 6, 6, 6, 0, 0, 6, 6, 0, 0, 6};
    int after[12], cur = 3;

    (void)unused;
    arb_as_reset(&st);
    drive(&c, &st, 50 * SEC, &cur, s, 12, after);
    for (int i = 0; i < 12; i++)
        assert_int_equal(after[i], 3);
}

/* After a change, nothing moves before the cooldown ends. */
static void cooldown(void **unused)
{
    arb_as_conf_t c = conf(1, 10, 1.0, 0, 3);
    arb_as_state_t st;
    double s[6] = {2, 4, 8, 8, 8, 8}; /* per replica over the current count */
    int after[6], cur = 1;

    (void)unused;
    arb_as_reset(&st);
    drive(&c, &st, 7 * SEC, &cur, s, 6, after);
    assert_int_equal(after[0], 2); /* 2 over 1: 2 */
    assert_int_equal(after[1], 2); /* would be 4; cooling down (1 s) */
    assert_int_equal(after[2], 2); /* 2 s */
    assert_int_equal(after[3], 8); /* 3 s: 8 over 2 = 4 per replica: ceil(2 * 4) = 8 */
    assert_int_equal(after[4], 8);
}

static void gpu_signal(void **unused)
{
    arb_as_conf_t c = conf(1, 8, 100.0, 0, 0); /* in-flight target far away */
    arb_as_state_t st;
    arb_as_decision_t d;
    arb_as_load_t l = load(1, 2);

    (void)unused;
    c.gpu_target = 0.5;
    l.gpu_util = 0.9; /* 0.9 / 0.5 = 1.8: ceil(2 * 1.8) = 4 */
    arb_as_reset(&st);
    assert_int_equal(arb_as_decide(&c, &st, SEC, 2, &l, &d), 4);
    assert_non_null(strstr(d.why, "GPU util 90% (target 50%)"));
    l.gpu_util = -1; /* unknown: only in-flight counts */
    arb_as_reset(&st);
    assert_int_equal(arb_as_decide(&c, &st, SEC, 2, &l, &d), 1);
}

static void conf_errors(void **unused)
{
    char msg[200];
    arb_as_conf_t c = conf(3, 2, 1.0, 0, 0);

    (void)unused;
    assert_int_equal(arb_as_conf_check(&c, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "minReplicas 3, maxReplicas 2"));
    c = conf(1, 2, 0, 0, 0);
    assert_int_equal(arb_as_conf_check(&c, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "targetInflight"));
    c = conf(1, 2, 1, 0, 0);
    assert_int_equal(arb_as_conf_check(&c, msg, sizeof msg), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scale_out_at_once), cmocka_unit_test(clamped_to_bounds),
        cmocka_unit_test(tolerance_holds),   cmocka_unit_test(window_then_scale_in),
        cmocka_unit_test(short_dip_ignored), cmocka_unit_test(cooldown),
        cmocka_unit_test(gpu_signal),        cmocka_unit_test(conf_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
