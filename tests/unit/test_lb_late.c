/* test_lb_late.c: the saturation prediction in time (src/lb/slo.c, lb.c),
 * on a clock of the test's own: the time per request at a replica learnt
 * from its completions (lb_svc_*: a serial replica's service time, a
 * batching one's service time / batch, a stall seen while nothing
 * finishes), the predicted wait and first byte of a new request there
 * (lb_predict), the inference and kv policies never choosing a replica
 * where it would be late (lb_late), -EBUSY and then the admission verdict
 * when every replica is, and a replica left out for being slow decaying
 * back into use and earning its share again once it is fast. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "lb/lb.h"

static void mk(lb_peer_t *p, int n)
{
    static char names[16][32];
    memset(p, 0, (size_t)n * sizeof *p);
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "10.0.0.%d:8000", i + 1);
        p[i].name = names[i];
        p[i].weight = 1;
        p[i].eff = 16;
        p[i].eng.kv = -1;
    }
}

static void timed(lb_policy_t *pol, const lb_ops_t *ops, lb_peer_t *p, int n)
{
    lb_opts_t o;
    lb_opts_default(&o);
    o.late_ms = 12000; /* 3/4 of a 16 s server timeout */
    lb_policy_init(pol, ops, &o);
    assert_int_equal(lb_policy_set(pol, p, n), 0);
}

/* A replica that serves one at a time, 2 s each, FIFO, fed a queue that
 * varies: every sample is exactly 2 s (duration / requests there at its
 * send), the estimate too but for the idle decay between bursts; one that runs 4 at once, 1 s each:
 * 250 ms a request (the rate they finish at). */
static void test_svc_converges(void **state)
{
    lb_opts_t o;
    lb_svc_t v;
    int64_t sent[64], t = 100000, free_at = t;
    (void)state;

    lb_opts_default(&o);
    memset(&v, 0, sizeof v);
    assert_true(lb_svc_ms(&v, &o, 0, t) == 0); /* nothing known */
    /* bursts of 1..5 requests, FIFO on one server */
    int nreq = 0, inq = 0;
    for (int burst = 1; burst <= 5; burst++) {
        int first = nreq;
        for (int j = 0; j < burst; j++, nreq++) {
            lb_svc_sent(&v, &o, inq == 0, t);
            sent[nreq] = t;
            inq++;
        }
        for (int j = first; j < nreq; j++) {
            int64_t start = free_at > sent[j] ? free_at : sent[j];
            free_at = start + 2000;
            /* requests there when it was sent: those before it in the burst, it */
            lb_svc_done(&v, (double)(free_at - sent[j]), j - first + 1, free_at);
            inq--;
            /* exact, but for what 500 ms idle between bursts took off */
            assert_true(v.ms > 2000 * 0.96 && v.ms < 2000 * 1.0001);
        }
        t = free_at + 500;
    }
    /* a batching replica that keeps 4 running, 1 s each: one sent every
     * 250 ms finds 3 there; the estimate settles at 1 s / 4 */
    lb_svc_t b;
    memset(&b, 0, sizeof b);
    t = 200000;
    for (int k = 0; k < 100; k++, t += 250) {
        if (k >= 4)
            lb_svc_done(&b, 1000, 4, t); /* sent 1 s ago, with 3 there */
        lb_svc_sent(&b, &o, k == 0, t);
    }
    assert_float_equal(b.ms, 250, 1e-6);
    /* sent 4 at once instead, all done after 1 s: the later ones' samples
     * are 1 s / 2, 3, 4, the first's 1 s / 1: it overstates, safely */
    memset(&b, 0, sizeof b);
    for (int round = 0; round < 40; round++, t += 1000) {
        for (int j = 0; j < 4; j++)
            lb_svc_sent(&b, &o, j == 0, t);
        for (int j = 0; j < 4; j++)
            lb_svc_done(&b, 1000, j + 1, t + 1000);
    }
    assert_true(b.ms >= 250 && b.ms < 1000);
    t += 1000;
    /* a stall: 3 of ours there and nothing finished for 9 s: at least
     * 9 s / 3 a request, whatever was known before */
    lb_svc_sent(&b, &o, true, t);
    lb_svc_sent(&b, &o, false, t);
    lb_svc_sent(&b, &o, false, t);
    assert_true(lb_svc_ms(&b, &o, 3, t + 9000) >= 3000 - 1e-6);
    /* idle, it decays: half in one svc_half_life */
    memset(&v, 0, sizeof v);
    lb_svc_sent(&v, &o, true, 1000);
    lb_svc_done(&v, 4000, 1, 5000);
    assert_float_equal(lb_svc_ms(&v, &o, 0, 5000 + o.svc_half_life_ms), 2000, 1e-6);
}

/* The prediction, by hand: a serial replica at 2 s a request, scraped. */
static void test_predict(void **state)
{
    lb_peer_t p[1];
    lb_policy_t pol;
    double wait;
    (void)state;

    mk(p, 1);
    timed(&pol, &lb_inference_ops, p, 1);
    p[0].svc = (lb_svc_t){.ms = 2000, .at_ms = 10000};
    p[0].eng.at_ms = 10000;
    p[0].eng.running = 1;
    p[0].eng.waiting = 4;
    p[0].eng.inflight_at = 5;
    p[0].inflight = 5;
    lb_req_t r = {.now_ms = 10000, .whole = true};
    /* it starts after the 4 waiting and the one running: 10 s; its answer,
     * whole, 2 s after: 12 s */
    assert_float_equal(lb_predict(&pol, 0, &r, &wait), 12000, 1e-6);
    assert_float_equal(wait, 10000, 1e-6);
    assert_false(lb_late(&pol, 0, &r)); /* not past 12 s */
    /* streamed, its first byte comes as it starts */
    r.whole = false;
    assert_float_equal(lb_predict(&pol, 0, &r, &wait), 10000, 1e-6);
    /* one more sent since the scrape: late for a whole answer */
    p[0].inflight = 6;
    r.whole = true;
    assert_float_equal(lb_predict(&pol, 0, &r, &wait), 14000, 1e-6);
    assert_true(lb_late(&pol, 0, &r));
    /* with nothing waiting at the engine a request starts at once */
    p[0].eng.waiting = 0;
    p[0].eng.inflight_at = 1;
    p[0].inflight = 1;
    r.whole = false;
    assert_float_equal(lb_predict(&pol, 0, &r, &wait), 0, 1e-6);
    /* never scraped: each of ours in flight is ahead of it */
    p[0].eng.at_ms = 0;
    p[0].inflight = 3;
    assert_float_equal(lb_predict(&pol, 0, &r, &wait), 6000, 1e-6);
    /* a TTFT SLO judges the wait: 6 s > 5 s */
    pol.opt.slo_ms = 5000;
    assert_true(lb_late(&pol, 0, &r));
    pol.opt.slo_ms = 7000;
    assert_false(lb_late(&pol, 0, &r));
    /* unknown time: never late (a few at a time instead: see below) */
    p[0].svc.ms = 0;
    p[0].svc.busy_ms = 0;
    assert_float_equal(lb_predict(&pol, 0, &r, &wait), 0, 1e-6);
    lb_policy_fini(&pol);
}

/* Random states of one slow and three fast replicas: whatever inference or
 * kv picks answers within the budget by the prediction; when none would,
 * -EBUSY (queue it, or refuse it), with a queue or without. */
static void test_never_late(void **state)
{
    const lb_ops_t *ops[2] = {&lb_inference_ops, &lb_kv_ops};
    uint64_t rnd = 7, blocks[8];
    (void)state;

    for (int o = 0; o < 2; o++) {
        lb_peer_t p[4];
        lb_policy_t pol;
        int busy = 0, picked_slow = 0;

        mk(p, 4);
        timed(&pol, ops[o], p, 4);
        for (int k = 0; k < 4000; k++) {
            int64_t now = 50000 + k * 10;
            for (int i = 0; i < 4; i++) {
                rnd = lb_mix64(rnd + 1);
                p[i].svc = (lb_svc_t){.ms = i == 0 ? 2000 : 30 + (double)(rnd % 300),
                                      .at_ms = now - (int64_t)(rnd >> 60)};
                p[i].inflight = (uint32_t)((rnd >> 8) % (i == 0 ? 9 : 40));
                p[i].eng.at_ms = (rnd >> 20) % 3 ? now - (int64_t)((rnd >> 24) % 500) : 0;
                p[i].eng.running = (double)((rnd >> 30) % 2);
                p[i].eng.waiting = (double)((rnd >> 32) % 7);
                p[i].eng.inflight_at = p[i].inflight;
                p[i].eng.kv = 0.1;
            }
            if (k % 3 == 0) /* now and then every fast one drowning too */
                for (int i = 1; i < 4; i++) {
                    p[i].svc.ms = 3000;
                    p[i].inflight = 10;
                }
            for (int j = 0; j < 8; j++)
                blocks[j] = lb_mix64(rnd + (uint64_t)j * 31 + (uint64_t)(k % 5));
            lb_req_t r = {.now_ms = now,
                          .rnd = rnd,
                          .blocks = blocks,
                          .nblocks = 8,
                          .whole = (k & 1) != 0,
                          .admit = (k & 2) != 0};
            bool any = false;
            for (int i = 0; i < 4; i++)
                any = any || !lb_late(&pol, i, &r);
            int i = lb_pick(&pol, &r);
            if (!any) {
                assert_int_equal(i, -EBUSY);
                busy++;
                continue;
            }
            assert_true(i >= 0 || (i == -EBUSY && r.admit));
            if (i < 0)
                continue;
            double wait, ttfb = lb_predict(&pol, i, &r, &wait);
            assert_true(ttfb <= pol.opt.late_ms);
            picked_slow += i == 0;
        }
        /* the states covered both cases, and the slow one was fit at times */
        assert_true(busy > 100);
        assert_true(picked_slow > 0);
        lb_policy_fini(&pol);
    }
}

/* Every replica late: the policy says -EBUSY; the request queues while the
 * queue drains in time (--queue-timeout), and is refused 429 "saturated"
 * once it would not. */
static void test_all_late_queue_then_429(void **state)
{
    lb_peer_t p[2];
    lb_policy_t pol;
    lb_drain_t d;
    (void)state;

    mk(p, 2);
    timed(&pol, &lb_inference_ops, p, 2);
    for (int i = 0; i < 2; i++) {
        p[i].svc = (lb_svc_t){.ms = 2000, .at_ms = 9000};
        p[i].inflight = 6; /* never scraped: 6 ahead, (6 + 1) x 2 s = 14 s > 12 s */
    }
    lb_req_t r = {.now_ms = 10000, .whole = true, .admit = true};
    assert_int_equal(lb_pick(&pol, &r), -EBUSY);
    r.admit = false; /* no queue: still not sent where it would time out */
    assert_int_equal(lb_pick(&pol, &r), -EBUSY);
    /* one finishes: (5 + 1) x 2 s = 12 s, in time again */
    p[1].inflight = 5;
    assert_int_equal(lb_pick(&pol, &r), 1);

    /* the queue: a request finishes every second */
    memset(&d, 0, sizeof d);
    for (int k = 0; k <= 4; k++)
        lb_drain_done(&d, 10000 + 1000 * k);
    lb_admit_in_t in = {.max_queue = 64, .limit_ms = 30000};
    int queued = 0;
    lb_admit_verdict_t v;
    while ((v = (in.wait_s = lb_drain_wait_s(&d, queued, 14000), in.queued = queued,
                 lb_admit_decide(&in))) == LB_ADMIT_QUEUE)
        queued++;
    /* with 29 queued a new one waits (29 + 1) / 1 a second = 30 s, the
     * limit; with 30, 31 s: refused at once rather than expired later */
    assert_int_equal(queued, 30);
    assert_int_equal(v, LB_ADMIT_LATE);
    assert_non_null(strstr(lb_admit_reason(v), "--queue-timeout"));
    assert_non_null(strstr(lb_admit_reason(v), "--server-timeout"));
    lb_policy_fini(&pol);
}

/* A replica slow enough to be late even idle is left out; idle, its
 * estimate decays until one request is let through; it is fast again, its
 * answers pull the estimate down, and it gets its share of the traffic. */
static void test_recovery(void **state)
{
    lb_peer_t p[2];
    lb_policy_t pol;
    int64_t t = 20000;
    (void)state;

    mk(p, 2);
    timed(&pol, &lb_inference_ops, p, 2);
    p[0].svc = (lb_svc_t){.ms = 20000, .at_ms = t}; /* 20 s a request: late */
    p[1].svc = (lb_svc_t){.ms = 100, .at_ms = t};
    lb_req_t r = {.whole = true, .admit = true};
    int first = -1, n0 = 0;
    for (int64_t now = t; now < t + 60000; now += 100) {
        r.now_ms = now;
        p[1].inflight = (uint32_t)((now / 100) % 3); /* the fast one busy as it is, */
        p[1].svc.at_ms = now;                        /* answering as it goes */
        int i = lb_pick(&pol, &r);
        assert_true(i == 0 || i == 1);
        if (i != 0)
            continue;
        if (first < 0)
            first = (int)(now - t);
        /* replica 0 is fast now: each request it gets answers in 100 ms */
        lb_svc_sent(&p[0].svc, &pol.opt, true, now);
        lb_svc_done(&p[0].svc, 100, 1, now + 100);
        n0++;
    }
    /* let through once its estimate decayed under 12 s: one half-life
     * (20 s -> 10 s), not at once and not never */
    assert_true(first >= 7000 && first <= pol.opt.svc_half_life_ms + 100);
    /* then it took its share: of the ~500 picks after, far more than a probe's */
    assert_true(p[0].svc.ms < 200);
    assert_true(n0 > 100);
    lb_policy_fini(&pol);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_svc_converges), cmocka_unit_test(test_predict),
        cmocka_unit_test(test_never_late),    cmocka_unit_test(test_all_late_queue_then_429),
        cmocka_unit_test(test_recovery),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
