/* test_lb_policies.c: round robin, smooth weighted round robin, least-conn,
 * p2c and feedback on hand-made peers; distribution properties. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "lb/lb.h"

static uint64_t rng_state = 0x1234;
static uint64_t rnd(void)
{
    rng_state += 0x9e3779b97f4a7c15ULL;
    return lb_mix64(rng_state);
}

static void mk(lb_peer_t *p, int n, const uint32_t *w)
{
    static char names[64][32];
    memset(p, 0, (size_t)n * sizeof *p);
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "10.0.0.%d:80", i + 1);
        p[i].name = names[i];
        p[i].weight = p[i].eff = w ? w[i] : 1;
    }
}

static void test_find(void **state)
{
    assert_non_null(lb_find("round-robin"));
    assert_non_null(lb_find("weighted"));
    assert_non_null(lb_find("least-conn"));
    assert_non_null(lb_find("hash"));
    assert_non_null(lb_find("p2c"));
    assert_non_null(lb_find("feedback"));
    assert_null(lb_find("random-ish"));
    for (int i = 0; lb_policies[i]; i++)
        assert_non_null(strstr(lb_names(), lb_policies[i]->name));
}

static void test_rr_cycle_and_skip_down(void **state)
{
    lb_peer_t p[4];
    lb_policy_t pol;
    lb_req_t r = {0};

    mk(p, 4, NULL);
    lb_policy_init(&pol, &lb_rr_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 4), 0);
    for (int k = 0; k < 12; k++)
        assert_int_equal(lb_pick(&pol, &r), k % 4);
    p[2].eff = 0; /* down */
    int cnt[4] = {0};
    for (int k = 0; k < 300; k++)
        cnt[lb_pick(&pol, &r)]++;
    assert_int_equal(cnt[2], 0);
    assert_int_equal(cnt[0], 100);
    assert_int_equal(cnt[1], 100);
    assert_int_equal(cnt[3], 100);
    for (int i = 0; i < 4; i++)
        p[i].eff = 0;
    assert_int_equal(lb_pick(&pol, &r), -ENOENT);
    lb_policy_fini(&pol);
}

/* Smooth WRR: weights 5,1,1 give exactly NGINX's a a b a c a a. */
static void test_wrr_sequence(void **state)
{
    uint32_t w[3] = {5, 1, 1};
    lb_peer_t p[3];
    lb_policy_t pol;
    lb_req_t r = {0};
    const int want[7] = {0, 0, 1, 0, 2, 0, 0};

    mk(p, 3, w);
    lb_policy_init(&pol, &lb_wrr_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 3), 0);
    for (int round = 0; round < 3; round++)
        for (int k = 0; k < 7; k++)
            assert_int_equal(lb_pick(&pol, &r), want[k]);
    lb_policy_fini(&pol);
}

/* Every window of sum(w) picks holds each peer exactly w times, and a
 * heavy peer is never picked more than ceil(w/others)+1 times in a row. */
static void test_wrr_exact_windows(void **state)
{
    uint32_t w[5] = {7, 3, 1, 4, 2};
    lb_peer_t p[5];
    lb_policy_t pol;
    lb_req_t r = {0};
    int total = 17;

    mk(p, 5, w);
    lb_policy_init(&pol, &lb_wrr_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 5), 0);
    for (int win = 0; win < 50; win++) {
        int cnt[5] = {0};
        for (int k = 0; k < total; k++)
            cnt[lb_pick(&pol, &r)]++;
        for (int i = 0; i < 5; i++)
            assert_int_equal(cnt[i], (int)w[i]);
    }
    lb_policy_fini(&pol);
}

static void test_leastconn(void **state)
{
    lb_peer_t p[4];
    lb_policy_t pol;
    lb_req_t r = {0};

    mk(p, 4, NULL);
    lb_policy_init(&pol, &lb_leastconn_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 4), 0);
    p[0].inflight = 5;
    p[1].inflight = 2;
    p[2].inflight = 7;
    p[3].inflight = 3;
    assert_int_equal(lb_pick(&pol, &r), 1);
    /* weight: peer 3 with weight 2 and 3 in flight costs 2 < peer 1's 3 */
    p[3].eff = 2;
    assert_int_equal(lb_pick(&pol, &r), 3);
    /* ties are shared round robin */
    mk(p, 4, NULL);
    int cnt[4] = {0};
    for (int k = 0; k < 400; k++)
        cnt[lb_pick(&pol, &r)]++;
    for (int i = 0; i < 4; i++)
        assert_int_equal(cnt[i], 100);
    /* filling: picks track in-flight, max - min stays <= 1 */
    for (int k = 0; k < 1000; k++) {
        int e = lb_pick(&pol, &r);
        p[e].inflight++;
        uint32_t mx = 0, mn = UINT32_MAX;
        for (int i = 0; i < 4; i++) {
            mx = p[i].inflight > mx ? p[i].inflight : mx;
            mn = p[i].inflight < mn ? p[i].inflight : mn;
        }
        assert_true(mx - mn <= 1);
    }
    lb_policy_fini(&pol);
}

/* A closed-loop simulation: every peer serves requests with its own service
 * time; N clients each keep one request outstanding. Returns the share of
 * requests the slow peer (index 0) got. */
static double slow_share(const lb_ops_t *ops, bool reports)
{
    enum { NP = 4, NC = 32, STEPS = 20000 };
    lb_peer_t p[NP];
    lb_policy_t pol;
    int peer_of[NC], left[NC], served[NP] = {0}, total = 0;
    const int svc[NP] = {20, 1, 1, 1}; /* ticks per request */

    mk(p, NP, NULL);
    lb_policy_init(&pol, ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, NP), 0);
    for (int c = 0; c < NC; c++)
        peer_of[c] = -1;
    for (int t = 1; t <= STEPS; t++) {
        for (int c = 0; c < NC; c++) {
            if (peer_of[c] >= 0 && --left[c] > 0)
                continue;
            if (peer_of[c] >= 0) {
                p[peer_of[c]].inflight--;
                served[peer_of[c]]++;
                total++;
            }
            lb_req_t r = {.rnd = rnd(), .now_ms = t};
            int e = lb_pick(&pol, &r);
            assert_true(e >= 0);
            peer_of[c] = e;
            left[c] = svc[e];
            p[e].inflight++;
        }
        if (reports && t % 50 == 0)
            for (int i = 0; i < NP; i++)
                p[i].load = (lb_load_t){.queue = p[i].inflight,
                                        .gpu_util = i == 0 ? 1.0 : 0.2,
                                        .inflight = p[i].inflight,
                                        .at_ms = t};
    }
    lb_policy_fini(&pol);
    return (double)served[0] / total;
}

static void test_slow_peer_small_share(void **state)
{
    double rr = slow_share(&lb_rr_ops, false);
    double lc = slow_share(&lb_leastconn_ops, false);
    double p2 = slow_share(&lb_p2c_ops, false);
    double fb = slow_share(&lb_feedback_ops, true);
    /* 1/4 of picks but 1/20 the speed: round robin keeps the slow peer's
     * share of completions near 1/4 only by making every client wait on it */
    assert_true(lc < 0.06);
    assert_true(p2 < 0.08);
    assert_true(fb < 0.08);
    assert_true(rr > lc);
}

static void test_p2c_spread_and_skip(void **state)
{
    lb_peer_t p[8];
    lb_policy_t pol;
    uint8_t skip[8] = {0};
    int cnt[8] = {0};

    mk(p, 8, NULL);
    lb_policy_init(&pol, &lb_p2c_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 8), 0);
    skip[3] = 1;
    p[5].eff = 0;
    for (int k = 0; k < 8000; k++) {
        lb_req_t r = {.rnd = rnd(), .skip = skip};
        int e = lb_pick(&pol, &r);
        assert_true(e >= 0 && e != 3 && e != 5);
        cnt[e]++;
        p[e].inflight++;
    }
    /* held load: max/mean close to 1 */
    for (int i = 0; i < 8; i++)
        if (i != 3 && i != 5)
            assert_true(cnt[i] >= 8000 / 6 - 10 && cnt[i] <= 8000 / 6 + 10);
    /* one pickable peer */
    for (int i = 0; i < 8; i++)
        skip[i] = i != 6;
    lb_req_t r1 = {.rnd = rnd(), .skip = skip};
    assert_int_equal(lb_pick(&pol, &r1), 6);
    skip[6] = 1;
    assert_int_equal(lb_pick(&pol, &r1), -ENOENT);
    lb_policy_fini(&pol);
}

/* Feedback: a fresh report of a long queue repels; the same report aged
 * past max_age counts for nothing. */
static void test_feedback_decay(void **state)
{
    lb_peer_t p[2];
    lb_policy_t pol;
    int to_busy = 0;

    mk(p, 2, NULL);
    lb_policy_init(&pol, &lb_feedback_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 2), 0);
    p[0].load = (lb_load_t){.queue = 50, .gpu_util = 1, .inflight = 50, .at_ms = 1000};
    p[1].load = (lb_load_t){.queue = 0, .gpu_util = 0.1, .inflight = 0, .at_ms = 1000};
    for (int k = 0; k < 100; k++) {
        lb_req_t r = {.rnd = rnd(), .now_ms = 1100};
        to_busy += lb_pick(&pol, &r) == 0;
    }
    assert_int_equal(to_busy, 0);
    /* 20 s later the report is past max_age: a tie; our own counts decide */
    p[1].inflight = 3;
    to_busy = 0;
    for (int k = 0; k < 100; k++) {
        lb_req_t r = {.rnd = rnd(), .now_ms = 21000};
        to_busy += lb_pick(&pol, &r) == 0;
    }
    assert_int_equal(to_busy, 100);
    /* half-way decay: 4 half-lives old, queue 50 weighs ~3 */
    p[1].inflight = 5;
    to_busy = 0;
    for (int k = 0; k < 100; k++) {
        lb_req_t r = {.rnd = rnd(), .now_ms = 5000};
        to_busy += lb_pick(&pol, &r) == 0;
    }
    assert_int_equal(to_busy, 0); /* 50/16 queue + 50/16 inflight + 1/4 gpu > 5 */
    lb_policy_fini(&pol);
}

/* Feedback: a peer seen answering in 20 ms loses to one answering in
 * 0.2 ms even with ten times the requests queued there; once its last
 * sample is old its estimate slides back and it is tried again. */
static void test_feedback_latency(void **state)
{
    lb_peer_t p[2];
    lb_policy_t pol;
    int to_slow = 0;

    mk(p, 2, NULL);
    lb_policy_init(&pol, &lb_feedback_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 2), 0);
    lb_peer_latency(&p[0], 20, 1000);
    lb_peer_latency(&p[1], 0.2, 1000);
    p[1].inflight = 10;
    for (int k = 0; k < 100; k++) {
        lb_req_t r = {.rnd = rnd(), .now_ms = 1000};
        to_slow += lb_pick(&pol, &r) == 0;
    }
    assert_int_equal(to_slow, 0);
    /* 10 s later (fast peer sampled just now): the slow estimate is near the mean */
    lb_peer_latency(&p[1], 0.2, 11000);
    to_slow = 0;
    for (int k = 0; k < 100; k++) {
        lb_req_t r = {.rnd = rnd(), .now_ms = 11000};
        to_slow += lb_pick(&pol, &r) == 0;
    }
    assert_int_equal(to_slow, 100);
    /* peak EWMA: a slower sample is taken at once, a faster one pulls by 1/5 */
    lb_peer_latency(&p[1], 10, 11001);
    assert_true(p[1].lat_ms == 10);
    lb_peer_latency(&p[1], 5, 11002);
    assert_true(p[1].lat_ms == 9);
    lb_policy_fini(&pol);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_rr_cycle_and_skip_down),
        cmocka_unit_test(test_wrr_sequence),
        cmocka_unit_test(test_wrr_exact_windows),
        cmocka_unit_test(test_leastconn),
        cmocka_unit_test(test_slow_peer_small_share),
        cmocka_unit_test(test_p2c_spread_and_skip),
        cmocka_unit_test(test_feedback_decay),
        cmocka_unit_test(test_feedback_latency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
