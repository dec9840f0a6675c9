/*
 * test_least_loaded.c: the least-loaded score. New work goes to the node
 * whose GPUs are least utilised and whose queue is shortest, and to the
 * least utilised GPU of it for a GPU-sharing task; a report's weight fades
 * with its age (the scheduler's clock), so an old "idle" report loses to a
 * fresh moderately busy one; nodes alike but for their queue length are
 * not mixed up by the node classes. In the default profile it weighs only
 * GPU-share tasks and service replicas: a whole-GPU training task lands
 * where fragmentation-aware scoring (FGD) puts it, load or no load.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>

#include "core_fixture.h"

#define SEC 1000000000LL

static void set_util(fx_t *f, uint32_t id, const int *util, int64_t report_ns, int queue)
{
    arb_node_t *n = N(f, id);
    for (int g = 0; g < n->ngpus; g++)
        n->gpu[g].util_pct = (uint8_t)util[g];
    n->report_ns = report_ns;
    n->queue_len = queue;
    fx_touch(f, id);
}

static uint32_t place_share(fx_t *f, int share, uint16_t *mask)
{
    arb_job_t *j = fx_run(f, "t", 1, 0, share);
    if (mask)
        *mask = j->alloc[0].gpu_mask;
    return j->alloc[0].node;
}

static void test_estimate(void **st)
{
    arb_node_t n;
    (void)st;
    memset(&n, 0, sizeof n);
    n.ngpus = 2;
    n.gpu[0].util_pct = 100;
    n.gpu[1].util_pct = 0;
    n.report_ns = 100 * SEC;
    /* fresh: 0.7 x util + 0.3 x queue */
    assert_true(fabs(arb_least_loaded_estimate(&n, 0, 100 * SEC) - 35) < 1e-9);
    assert_true(fabs(arb_least_loaded_estimate(&n, 1, 100 * SEC) - 70) < 1e-9);
    assert_true(fabs(arb_least_loaded_estimate(&n, 2, 100 * SEC) - 0) < 1e-9);
    n.queue_len = 5;
    assert_true(fabs(arb_least_loaded_estimate(&n, 2, 100 * SEC) - 15) < 1e-9);
    n.queue_len = 50; /* saturates at 10 */
    assert_true(fabs(arb_least_loaded_estimate(&n, 2, 100 * SEC) - 30) < 1e-9);
    /* one half-life (15 s) later: halfway to 50 */
    assert_true(fabs(arb_least_loaded_estimate(&n, 2, 115 * SEC) - 40) < 1e-9);
    /* ageing moves an idle node's estimate up and a busy one's down, toward 50 */
    n.queue_len = 0;
    double prev = arb_least_loaded_estimate(&n, 2, 100 * SEC);
    for (int64_t t = 101; t < 400; t += 7) {
        double e = arb_least_loaded_estimate(&n, 2, t * SEC);
        assert_true(e > prev && e < 50);
        prev = e;
    }
    prev = arb_least_loaded_estimate(&n, 1, 100 * SEC);
    for (int64_t t = 101; t < 400; t += 7) {
        double e = arb_least_loaded_estimate(&n, 1, t * SEC);
        assert_true(e < prev && e > 50);
        prev = e;
    }
}

/* The least utilised node, then its least utilised GPU with room. */
static void test_node_and_gpu_order(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 4, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 4, 1, NULL, 0);
    uint32_t c = fx_node(&f, "c", 4, 1, NULL, 0);
    f.ctx.now_ns = 50 * SEC;
    set_util(&f, a, (const int[]){90, 90, 90, 90}, 50 * SEC, 0);
    set_util(&f, b, (const int[]){40, 5, 30, 20}, 50 * SEC, 0);
    set_util(&f, c, (const int[]){50, 50, 50, 50}, 50 * SEC, 0);
    fx_sched(&f, "least-loaded");
    uint16_t mask;
    assert_int_equal(place_share(&f, 500, &mask), b);
    assert_int_equal(mask, 1u << 1);
    /* GPU 1 of b now has 500m left: a 600m task goes to b's next least busy */
    assert_int_equal(place_share(&f, 600, &mask), b);
    assert_int_equal(mask, 1u << 3);
    /* b gets busy: c (50) is now the least loaded, a (90) the most */
    set_util(&f, b, (const int[]){95, 95, 95, 95}, 50 * SEC, 0);
    assert_int_equal(place_share(&f, 100, NULL), c);
    fx_free(&f);
}

/* Equal utilisation: the shorter queue wins, also through node classes
 * (the nodes differ only in queue length). */
static void test_queue_length(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 4, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 4, 1, NULL, 0);
    f.ctx.now_ns = 10 * SEC;
    set_util(&f, a, (const int[]){20, 20, 20, 20}, 10 * SEC, 8);
    set_util(&f, b, (const int[]){20, 20, 20, 20}, 10 * SEC, 1);
    fx_sched(&f, "least-loaded");
    assert_int_equal(place_share(&f, 250, NULL), b);
    N(&f, b)->queue_len = 9;
    fx_touch(&f, b);
    assert_int_equal(place_share(&f, 250, NULL), a);
    fx_free(&f);
}

/* Ageing: an idle node last heard of a minute ago loses to a fresh node
 * at 30%; heard of at the same time, the idle one wins. */
static void test_ageing(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 4, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 4, 1, NULL, 0);
    f.ctx.now_ns = 100 * SEC;
    set_util(&f, a, (const int[]){0, 0, 0, 0}, 40 * SEC, 0);
    set_util(&f, b, (const int[]){30, 30, 30, 30}, 100 * SEC, 0);
    fx_sched(&f, "least-loaded");
    assert_int_equal(place_share(&f, 100, NULL), b);
    N(&f, a)->report_ns = 100 * SEC;
    fx_touch(&f, a);
    assert_int_equal(place_share(&f, 100, NULL), a);
    fx_free(&f);
}

/* Two nodes a, b of 4 GPUs; a already runs a 2-GPU job, so the nodes
 * differ and FGD has a preference. busy (-1: no reports) names the node
 * that reports 90% utilisation and a queue of 6, the other reports idle,
 * both fresh. Place one task of the given kind with the default profile
 * and return its node (0: a, 1: b). */
static int default_place(int busy, int gpus, int share, bool service)
{
    fx_t f;
    fx_init(&f);
    uint32_t id[2] = {fx_node(&f, "a", 4, 1, NULL, 0), fx_node(&f, "b", 4, 1, NULL, 0)};
    f.ctx.now_ns = 20 * SEC;
    fx_sched(&f, "default");
    fx_run(&f, "first", 1, 2, 0);
    assert_int_equal(N(&f, id[0])->used.gpu_milli, 2000); /* ties: the lowest node id */
    if (busy >= 0) {
        set_util(&f, id[busy], (const int[]){90, 90, 90, 90}, 20 * SEC, 6);
        set_util(&f, id[!busy], (const int[]){0, 0, 0, 0}, 20 * SEC, 0);
    }
    arb_job_t *j = fx_job_new("t", 1, gpus, share);
    j->service = service;
    fx_submit(&f, j);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), 0);
    uint32_t node = j->alloc[0].node;
    fx_free(&f);
    assert_true(node == id[0] || node == id[1]);
    return node == id[0] ? 0 : 1;
}

/* Default profile. For each kind, where FGD alone puts it (no reports);
 * then that node reports busy: a whole-GPU training task stays there
 * (least-loaded is neutral for it), a whole-GPU service replica and a
 * GPU-share task go to the idle node. */
static void test_default_profile_kinds(void **st)
{
    (void)st;
    for (int gpus = 1; gpus <= 2; gpus++) {
        int fgd = default_place(-1, gpus, 0, false);
        assert_int_equal(default_place(fgd, gpus, 0, false), fgd);
        /* the replica goes where FGD would put it, unless that node is busy */
        assert_int_equal(default_place(-1, gpus, 0, true), fgd);
        assert_int_equal(default_place(fgd, gpus, 0, true), !fgd);
        /* the other node busy: nothing moves */
        assert_int_equal(default_place(!fgd, gpus, 0, false), fgd);
        assert_int_equal(default_place(!fgd, gpus, 0, true), fgd);
    }
    for (int share = 250; share <= 750; share += 250) {
        int fgd = default_place(-1, 0, share, false);
        assert_int_equal(default_place(fgd, 0, share, false), !fgd);
        assert_int_equal(default_place(!fgd, 0, share, false), fgd);
    }
}

/* The least-loaded profile too scores only shares and replicas: a whole-GPU
 * batch task there falls to the other scores (ties: the lowest node id). */
static void test_neutral_for_whole_gpu(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 4, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 4, 1, NULL, 0);
    f.ctx.now_ns = 5 * SEC;
    set_util(&f, a, (const int[]){95, 95, 95, 95}, 5 * SEC, 9);
    set_util(&f, b, (const int[]){0, 0, 0, 0}, 5 * SEC, 0);
    fx_sched(&f, "least-loaded");
    assert_int_equal(fx_run(&f, "batch", 1, 1, 0)->alloc[0].node, a);
    arb_job_t *r = fx_job_new("replica", 1, 1, 0);
    r->service = true;
    fx_submit(&f, r);
    assert_int_equal(arb_sched_place(f.s, r, &f.ctx), 0);
    assert_int_equal(r->alloc[0].node, b);
    fx_free(&f);
}

static void test_profile(void **st)
{
    arb_profile_t p;
    arb_err_t err;
    char buf[512];
    (void)st;
    assert_int_equal(arb_profile_lookup("least-loaded", &p, &err), 0);
    assert_non_null(arb_score_lookup("least-loaded"));
    assert_non_null(strstr(arb_profile_names(buf, sizeof buf), "least-loaded"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_node_and_gpu_order),
        cmocka_unit_test(test_queue_length),
        cmocka_unit_test(test_ageing),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_default_profile_kinds),
        cmocka_unit_test(test_neutral_for_whole_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
