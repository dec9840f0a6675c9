/* test_lb_admit.c: the balancer's admission arithmetic (src/lb/slo.c) on a
 * clock of the test's own: the drain rate (unknown until a window of 1 s
 * closes, then an EWMA of completions per second), the expected wait of a
 * request queued now, and the verdict on a request that finds every
 * replica saturated: an SLO 429 when the wait exceeds --ttft-slo (never on
 * an unknown rate), a full queue, and a tenant under its fair share taking
 * the place of the greediest tenant's newest request. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "lb/lb.h"

static void test_drain_rate(void **state)
{
    lb_drain_t d;
    memset(&d, 0, sizeof d);
    (void)state;

    /* nothing finished yet: unknown, so no wait can be predicted */
    assert_true(lb_drain_rate(&d, 5000) == 0);
    assert_true(lb_drain_wait_s(&d, 10, 5000) == 0);
    /* 10 completions in the first second: unknown until the window closes */
    for (int i = 0; i < 10; i++)
        lb_drain_done(&d, 5000 + 100 * i);
    assert_true(lb_drain_rate(&d, 5950) == 0);
    /* closed at 6000 ms by a question: 10 in 1 s */
    assert_float_equal(lb_drain_rate(&d, 6000), 10.0, 1e-9);
    /* a request queued behind 4 others starts after 5 / 10 s */
    assert_float_equal(lb_drain_wait_s(&d, 4, 6000), 0.5, 1e-9);
    /* the next 2 s: 2 completions; the EWMA halves towards 1/s */
    lb_drain_done(&d, 6500);
    lb_drain_done(&d, 6900);
    assert_float_equal(lb_drain_rate(&d, 8000), 0.5 * 10 + 0.5 * 1.0, 1e-9);
    /* with no question before, the first completion opens the window (it
     * ended a wait that began before it): 9 more in the next 1 s */
    lb_drain_t e;
    memset(&e, 0, sizeof e);
    for (int i = 0; i < 10; i++)
        lb_drain_done(&e, 5000 + 100 * i);
    assert_float_equal(lb_drain_rate(&e, 6000), 9.0, 1e-9);
}

static void test_slo_verdict(void **state)
{
    lb_drain_t d;
    memset(&d, 0, sizeof d);
    (void)state;

    /* 2 requests finish a second */
    lb_drain_done(&d, 1000);
    lb_drain_done(&d, 1500);
    lb_drain_done(&d, 1900);
    assert_float_equal(lb_drain_rate(&d, 2000), 2.0, 1e-9);

    lb_admit_in_t in = {.slo_ms = 400, .max_queue = 8};
    /* alone: (0 + 1) / 2 = 0.5 s > 400 ms: rejected for the SLO */
    in.wait_s = lb_drain_wait_s(&d, 0, 2000);
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_SLO);
    assert_non_null(strstr(lb_admit_reason(LB_ADMIT_SLO), "--ttft-slo"));
    /* a looser SLO: queued */
    in.slo_ms = 600;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_QUEUE);
    /* behind 1 queued: 1 s > 600 ms */
    in.wait_s = lb_drain_wait_s(&d, 1, 2000);
    in.queued = 1;
    in.tenants = 1;
    in.biggest = 1;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_SLO);
    /* no SLO: the wait does not matter */
    in.slo_ms = 0;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_QUEUE);
    /* an unknown rate (a balancer just started) never rejects for the SLO */
    in.slo_ms = 1;
    in.wait_s = 0;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_QUEUE);
    /* the SLO is judged before the queue's room: a full queue's arrival
     * that would also miss the SLO is counted as an SLO rejection */
    in.slo_ms = 100;
    in.wait_s = 5;
    in.queued = 8;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_SLO);
}

static void test_fair_share(void **state)
{
    (void)state;
    /* the queue holds 8, all tenant a's: a's 9th is refused */
    lb_admit_in_t in = {
        .max_queue = 8, .queued = 8, .tenants = 1, .own = 8, .biggest = 8, .biggest_is_own = true};
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_FULL);
    assert_non_null(strstr(lb_admit_reason(LB_ADMIT_FULL), "--max-queue"));
    /* tenant b (none queued; share 8 / 2 = 4) takes the place of a's newest */
    in.own = 0;
    in.biggest_is_own = false;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_SHED);
    /* b at 4 of 8 with a at 4: b has its share, refused */
    in.tenants = 2;
    in.own = 4;
    in.biggest = 4;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_FULL);
    /* c at 1 with a at 5, b at 2 (share 8 / 3 = 2): a's newest goes */
    in.tenants = 3;
    in.own = 1;
    in.biggest = 5;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_SHED);
    /* room left: queued whatever the shares */
    in.queued = 7;
    in.own = 6;
    in.biggest = 6;
    in.biggest_is_own = true;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_QUEUE);
    /* no queue at all */
    in.max_queue = 0;
    in.queued = 0;
    assert_int_equal(lb_admit_decide(&in), LB_ADMIT_FULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drain_rate),
        cmocka_unit_test(test_slo_verdict),
        cmocka_unit_test(test_fair_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
