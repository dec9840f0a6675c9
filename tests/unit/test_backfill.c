/*
 * test_backfill.c: EASY backfill. The blocked head job gets a reservation
 * from the running jobs' time limits; a later job starts only if its own
 * time limit ends by then (so it cannot delay the head); a long job or one
 * without a time limit waits; with no reservation possible nothing
 * backfills; and the head then starts when the reservation comes due.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

#define SEC 1000000000LL

static void bsched(fx_t *f, bool backfill, arb_queue_policy_t qp)
{
    arb_sched_conf_t conf = {0};
    conf.backfill = backfill;
    conf.queue_policy = qp;
    fx_sched_conf(f, "pack", &conf);
}

static arb_job_t *tjob(fx_t *f, const char *name, int gpus, int64_t limit_s)
{
    arb_job_t *j = fx_job_new(name, 1, gpus, 0);
    j->time_limit_s = limit_s;
    return fx_submit(f, j);
}

static void test_easy_backfill(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    bsched(&f, true, ARB_QP_FIFO);

    /* t=0: R takes 6 GPUs for at most 100 s. */
    arb_job_t *r = tjob(&f, "R", 6, 100);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(r->state, ARB_JOB_PLACED);

    /* t=10: the head H needs all 8: blocked until R ends at t=100. */
    f.ctx.now_ns = 10 * SEC;
    arb_job_t *h = tjob(&f, "H", 8, 1000);
    arb_job_t *lng = tjob(&f, "long", 2, 200);  /* would end at 210 > 100 */
    arb_job_t *nol = tjob(&f, "nolimit", 2, 0); /* never ends, as far as we know */
    arb_job_t *sh = tjob(&f, "short", 1, 50);   /* ends at 60 <= 100 */
    arb_job_t *edge = tjob(&f, "edge", 1, 90);  /* ends exactly at 100 */
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    assert_int_equal(lng->state, ARB_JOB_PENDING);
    assert_int_equal(nol->state, ARB_JOB_PENDING);
    assert_int_equal(sh->state, ARB_JOB_PLACED);
    assert_int_equal(edge->state, ARB_JOB_PLACED);
    assert_int_equal(cs.placed, 2);
    assert_int_equal(cs.backfilled, 2);
    assert_int_equal(fx_busy(&f, a), 8);

    /* The backfilled jobs end within their limits; R ends at 100: H starts. */
    f.ctx.now_ns = 60 * SEC;
    assert_int_equal(arb_sched_finish(f.s, sh, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    assert_int_equal(lng->state, ARB_JOB_PENDING); /* still too long: 60+200 > 100 */
    f.ctx.now_ns = 100 * SEC;
    assert_int_equal(arb_sched_finish(f.s, edge, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(arb_sched_finish(f.s, r, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(h->state, ARB_JOB_PLACED);
    assert_int_equal(h->alloc[0].gpu_mask, 0xff);
    fx_free(&f);
}

/* The reservation comes from the earliest set of ending jobs that frees
 * enough, not the last one. */
static void test_reservation_earliest(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    bsched(&f, true, ARB_QP_FIFO);
    arb_job_t *r1 = tjob(&f, "r1", 4, 50);  /* ends at 50 */
    arb_job_t *r2 = tjob(&f, "r2", 4, 500); /* ends at 500 */
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(cs.placed, 2);
    /* H needs 4: free at 50 when r1 ends. */
    arb_job_t *h = tjob(&f, "H", 4, 10);
    arb_job_t *s40 = tjob(&f, "s40", 1, 40); /* ends by 50: but no GPU is free */
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    assert_int_equal(s40->state, ARB_JOB_PENDING);
    (void)r1;
    (void)r2;
    fx_free(&f);

    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    bsched(&f, true, ARB_QP_FIFO);
    r1 = tjob(&f, "r1", 3, 50);  /* ends at 50 */
    r2 = tjob(&f, "r2", 3, 500); /* ends at 500 */
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    h = tjob(&f, "H", 4, 10);                /* 2 free now; 5 free at 50 */
    arb_job_t *s60 = tjob(&f, "s60", 1, 60); /* ends after 50: waits */
    s40 = tjob(&f, "s40", 1, 40);            /* ends before 50: starts */
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    assert_int_equal(s60->state, ARB_JOB_PENDING);
    assert_int_equal(s40->state, ARB_JOB_PLACED);
    assert_int_equal(cs.backfilled, 1);
    fx_free(&f);
}

/* A running job without a time limit: no reservation can be made, so
 * nothing may backfill behind the blocked head. */
static void test_no_reservation_no_backfill(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    bsched(&f, true, ARB_QP_FIFO);
    arb_job_t *r = tjob(&f, "R", 6, 0);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(r->state, ARB_JOB_PLACED);
    arb_job_t *h = tjob(&f, "H", 8, 100);
    arb_job_t *sh = tjob(&f, "short", 1, 1);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    assert_int_equal(sh->state, ARB_JOB_PENDING);
    assert_int_equal(cs.backfilled, 0);
    fx_free(&f);
}

/* Without backfill: FIFO lets nothing overtake the head; priority and DRF
 * let jobs behind a blocked one go, whatever their limits. */
static void test_without_backfill(void **st)
{
    for (int qp = ARB_QP_FIFO; qp <= ARB_QP_DRF; qp++) {
        fx_t f;
        arb_cycle_stats_t cs;
        fx_init(&f);
        fx_node(&f, "a", 8, 1, NULL, 0);
        bsched(&f, false, (arb_queue_policy_t)qp);
        arb_job_t *r = tjob(&f, "R", 6, 100);
        assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
        assert_int_equal(r->state, ARB_JOB_PLACED);
        arb_job_t *h = tjob(&f, "H", 8, 10);
        arb_job_t *lng = tjob(&f, "long", 1, 0);
        assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
        assert_int_equal(h->state, ARB_JOB_PENDING);
        assert_int_equal(lng->state, qp == ARB_QP_FIFO ? ARB_JOB_PENDING : ARB_JOB_PLACED);
        assert_int_equal(cs.backfilled, 0);
        fx_free(&f);
    }
}

/* The reservation computation moves nothing: running jobs keep their GPUs. */
static void test_reservation_restores(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_snap_t before, after;
    fx_init(&f);
    fx_node(&f, "a", 8, 2, NULL, 0);
    fx_node(&f, "b", 8, 2, NULL, 0);
    bsched(&f, true, ARB_QP_FIFO);
    arb_job_t *g = fx_job_new("gang", 2, 3, 0);
    g->time_limit_s = 30;
    fx_submit(&f, g);
    tjob(&f, "r1", 4, 60);
    tjob(&f, "r2", 1, 90);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(cs.placed, 3);
    fx_snap(&f, &before);
    arb_job_t *saved[3];
    arb_task_alloc_t alloc[3][2];
    for (uint32_t i = 0; i < 3; i++) {
        saved[i] = arb_sched_job(f.s, i);
        memcpy(alloc[i], saved[i]->alloc, (size_t)saved[i]->nalloc * sizeof alloc[i][0]);
    }
    arb_job_t *h = fx_job_new("H", 2, 8, 0); /* needs both nodes whole */
    h->time_limit_s = 10;
    fx_submit(&f, h);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(saved[i]->state, ARB_JOB_PLACED);
        assert_memory_equal(alloc[i], saved[i]->alloc,
                            (size_t)saved[i]->nalloc * sizeof alloc[i][0]);
    }
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_easy_backfill),
        cmocka_unit_test(test_reservation_earliest),
        cmocka_unit_test(test_no_reservation_no_backfill),
        cmocka_unit_test(test_without_backfill),
        cmocka_unit_test(test_reservation_restores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
