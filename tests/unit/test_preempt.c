/*
 * test_preempt.c: preemption and quota reclaim. A higher-priority job
 * evicts the smallest set of lower-priority, preemptible victims that makes
 * it fit (unneeded victims are reprieved), never an equal- or higher-priority
 * or non-preemptible job, evicts gangs whole, and changes nothing at all
 * when even evicting every candidate would not make it fit. A queue under
 * its nominal quota reclaims what another queue of its cohort borrowed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

#define SEC 1000000000LL

static void psched(fx_t *f, const char *policy)
{
    arb_sched_conf_t conf = {0};
    conf.preemption = true;
    conf.queue_policy = ARB_QP_PRIORITY;
    fx_sched_conf(f, policy, &conf);
}

/* Submit a job pinned to node `on` (by a per-node label), place it at the
 * current time, and return it. */
static arb_job_t *pinned(fx_t *f, const char *name, uint32_t on, int gpus, int prio,
                         bool preemptible)
{
    char host[32];
    snprintf(host, sizeof host, "h%u", on);
    fx_label(f, on, "host", host);
    arb_job_t *j = fx_job_new(name, 1, gpus, 0);
    j->priority = prio;
    j->preemptible = preemptible;
    fx_selector(f, j, "host", host);
    fx_submit(f, j);
    assert_int_equal(arb_sched_place(f->s, j, &f->ctx), 0);
    return j;
}

static int cycle(fx_t *f, arb_cycle_stats_t *cs)
{
    assert_int_equal(arb_sched_cycle(f->s, &f->ctx, cs), 0);
    return cs->placed;
}

/* One 8-GPU victim beats eight 1-GPU victims of the same priority, even
 * though the small ones started later (would be "cheaper" one by one). */
static void test_fewest_victims(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    psched(&f, "pack");
    arb_job_t *big = pinned(&f, "big", a, 8, 1, true);
    arb_job_t *small[8];
    for (int i = 0; i < 8; i++) {
        char nm[32];
        f.ctx.now_ns = (10 + i) * SEC;
        snprintf(nm, sizeof nm, "s%d", i);
        small[i] = pinned(&f, nm, b, 1, 1, true);
    }
    f.ctx.now_ns = 100 * SEC;
    arb_job_t *hi = fx_job_new("hi", 1, 8, 0);
    hi->priority = 10;
    fx_submit(&f, hi);

    /* explain says preemption helps, with one victim, and changes nothing */
    fx_snap_t before, after;
    fx_snap(&f, &before);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, hi, &ex, json, sizeof json);
    assert_true(ex.preemption_helps);
    assert_non_null(strstr(ex.hint, "Preempting 1 lower-priority job"));
    assert_non_null(strstr(json, "\"preemption_helps\":true"));
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);

    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(cs.preempted, 1);
    assert_int_equal(hi->state, ARB_JOB_PLACED);
    assert_int_equal(hi->alloc[0].node, a);
    assert_int_equal(big->state, ARB_JOB_PREEMPTED);
    assert_int_equal(big->nalloc, 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(small[i]->state, ARB_JOB_PLACED);
        assert_int_equal(small[i]->nalloc, 1);
    }
    fx_free(&f);
}

/* The mirror case: a 1-GPU job displaces one 1-GPU job (the newest), not
 * the 8-GPU one, though both are one victim. */
static void test_least_gpus_lost(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    psched(&f, "pack");
    arb_job_t *big = pinned(&f, "big", a, 8, 1, true);
    arb_job_t *small[8];
    for (int i = 0; i < 8; i++) {
        char nm[32];
        f.ctx.now_ns = (10 + i) * SEC;
        snprintf(nm, sizeof nm, "s%d", i);
        small[i] = pinned(&f, nm, b, 1, 1, true);
    }
    arb_job_t *hi = fx_job_new("hi", 1, 1, 0);
    hi->priority = 10;
    fx_submit(&f, hi);
    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(cs.preempted, 1);
    assert_int_equal(big->state, ARB_JOB_PLACED);
    for (int i = 0; i < 7; i++)
        assert_int_equal(small[i]->state, ARB_JOB_PLACED);
    assert_int_equal(small[7]->state, ARB_JOB_PREEMPTED);
    assert_int_equal(hi->alloc[0].node, b);
    fx_free(&f);
}

/* A gang job (several tasks) preempts by whole placements: the cheapest
 * victims first, then unneeded ones are reprieved. */
static void test_gang_preemptor(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    uint32_t c = fx_node(&f, "c", 8, 1, NULL, 0);
    psched(&f, "pack");
    f.ctx.now_ns = 1 * SEC;
    arb_job_t *keep = pinned(&f, "keep", c, 8, 2, true);
    arb_job_t *la = pinned(&f, "la", a, 8, 1, true);
    f.ctx.now_ns = 2 * SEC;
    arb_job_t *lb = pinned(&f, "lb", b, 4, 0, true); /* cheapest, evicted first */
    arb_job_t *g = fx_job_new("g", 2, 8, 0);
    g->priority = 5;
    fx_submit(&f, g);
    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(g->nalloc, 2);
    assert_int_equal(cs.preempted, 2);
    assert_int_equal(lb->state, ARB_JOB_PREEMPTED);
    assert_int_equal(la->state, ARB_JOB_PREEMPTED);
    assert_int_equal(keep->state, ARB_JOB_PLACED);
    fx_free(&f);
}

/* The cheapest victim alone is not enough; after the next one makes room,
 * the first is given back (reprieved). */
static void test_reprieve(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    psched(&f, "pack");
    f.ctx.now_ns = 1 * SEC;
    arb_job_t *z = pinned(&f, "z", b, 8, 0, true);
    arb_job_t *y = pinned(&f, "y", a, 6, 1, true);
    f.ctx.now_ns = 5 * SEC;
    arb_job_t *x = pinned(&f, "x", a, 2, 0, true); /* lowest priority, newest */
    arb_job_t *hi = fx_job_new("hi", 1, 8, 0);
    hi->priority = 5;
    fx_submit(&f, hi);
    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(cs.preempted, 1);
    assert_int_equal(hi->alloc[0].node, b);
    assert_int_equal(z->state, ARB_JOB_PREEMPTED);
    assert_int_equal(x->state, ARB_JOB_PLACED); /* reprieved */
    assert_int_equal(x->nalloc, 1);
    assert_int_equal(y->state, ARB_JOB_PLACED);
    assert_int_equal(fx_busy(&f, a), 8);
    fx_free(&f);
}

/* Lower priority is preferred over higher even when more must go. */
static void test_lowest_priority_first(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    psched(&f, "pack");
    arb_job_t *mid = pinned(&f, "mid", a, 8, 3, true);
    arb_job_t *l1 = pinned(&f, "l1", b, 4, 1, true);
    arb_job_t *l2 = pinned(&f, "l2", b, 4, 1, true);
    arb_job_t *hi = fx_job_new("hi", 1, 8, 0);
    hi->priority = 5;
    fx_submit(&f, hi);
    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(cs.preempted, 2);
    assert_int_equal(mid->state, ARB_JOB_PLACED);
    assert_int_equal(l1->state, ARB_JOB_PREEMPTED);
    assert_int_equal(l2->state, ARB_JOB_PREEMPTED);
    assert_int_equal(hi->alloc[0].node, b);
    fx_free(&f);
}

/* Equal or higher priority and non-preemptible jobs are never victims; when
 * nothing else would help, nothing changes. */
static void test_never_protected(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_snap_t before, after;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    uint32_t c = fx_node(&f, "c", 8, 1, NULL, 0);
    psched(&f, "pack");
    arb_job_t *eq = pinned(&f, "eq", a, 8, 5, true);
    arb_job_t *np = pinned(&f, "np", b, 8, 0, false);
    arb_job_t *up = pinned(&f, "up", c, 8, 9, true);
    arb_job_t *hi = fx_job_new("hi", 1, 8, 0);
    hi->priority = 5;
    fx_submit(&f, hi);
    fx_snap(&f, &before);
    assert_int_equal(cycle(&f, &cs), 0);
    assert_int_equal(cs.preempted, 0);
    assert_int_equal(hi->state, ARB_JOB_PENDING);
    assert_int_equal(eq->state, ARB_JOB_PLACED);
    assert_int_equal(np->state, ARB_JOB_PLACED);
    assert_int_equal(up->state, ARB_JOB_PLACED);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, hi, &ex, json, sizeof json);
    assert_false(ex.preemption_helps);
    assert_non_null(strstr(json, "\"preemption_helps\":false"));
    fx_free(&f);
}

/* Evicting every candidate would still not fit the job: nothing moves. */
static void test_useless_preemption_changes_nothing(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_snap_t before, after;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    psched(&f, "pack");
    /* Each node: 4 GPUs low priority, 4 GPUs high priority. */
    arb_job_t *la = pinned(&f, "la", a, 4, 0, true);
    arb_job_t *ha = pinned(&f, "ha", a, 4, 9, true);
    arb_job_t *lb = pinned(&f, "lb", b, 4, 0, true);
    arb_job_t *hb = pinned(&f, "hb", b, 4, 9, true);
    /* 8 GPUs on one node: evicting both lows frees 4 + 4, never 8 together. */
    arb_job_t *hi = fx_job_new("hi", 1, 8, 0);
    hi->priority = 5;
    fx_submit(&f, hi);
    /* and a job no node can ever take */
    arb_job_t *never = fx_job_new("never", 1, 1, 0);
    never->priority = 5;
    fx_selector(&f, never, "host", "nowhere");
    fx_submit(&f, never);
    fx_snap(&f, &before);
    assert_int_equal(cycle(&f, &cs), 0);
    assert_int_equal(cs.preempted, 0);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    arb_job_t *all[] = {la, ha, lb, hb};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(all[i]->state, ARB_JOB_PLACED);
        assert_int_equal(all[i]->nalloc, 1);
    }
    /* Victims are put back exactly where they were. */
    assert_int_equal(la->alloc[0].node, a);
    assert_int_equal(lb->alloc[0].node, b);
    const arb_queue_t *q = arb_sched_queue(f.s, la->queue);
    assert_int_equal(q->used.gpu_milli, 16000);
    fx_free(&f);
}

/* A gang victim loses all of its tasks, on every node. */
static void test_gang_evicted_whole(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    psched(&f, "pack");
    arb_job_t *g = fx_job_new("gang", 2, 8, 0);
    g->priority = 1;
    fx_submit(&f, g);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), 0);
    arb_job_t *hi = fx_job_new("hi", 1, 4, 0);
    hi->priority = 5;
    fx_submit(&f, hi);
    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(cs.preempted, 1);
    assert_int_equal(g->state, ARB_JOB_PREEMPTED);
    assert_int_equal(g->nalloc, 0);
    assert_int_equal(fx_busy(&f, a) + fx_busy(&f, b), 4); /* only hi */
    const arb_queue_t *q = arb_sched_queue(f.s, g->queue);
    assert_int_equal(q->used.gpu_milli, 4000);
    /* Next cycle the gang is requeued; it does not fit whole: no part runs. */
    assert_int_equal(cycle(&f, &cs), 0);
    assert_int_equal(g->state, ARB_JOB_PENDING);
    assert_int_equal(g->nalloc, 0);
    assert_int_equal(fx_busy(&f, a) + fx_busy(&f, b), 4);
    /* Once hi ends, it runs again. */
    assert_int_equal(arb_sched_finish(f.s, hi, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(g->nalloc, 2);
    fx_free(&f);
}

/* Preemption off: nothing is evicted, but explain still says it would help. */
static void test_preemption_off(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    arb_job_t *lo = pinned(&f, "lo", a, 8, 0, true);
    arb_job_t *hi = fx_job_new("hi", 1, 8, 0);
    hi->priority = 5;
    fx_submit(&f, hi);
    assert_int_equal(cycle(&f, &cs), 0);
    assert_int_equal(lo->state, ARB_JOB_PLACED);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, hi, &ex, json, sizeof json);
    assert_true(ex.preemption_helps);
    assert_non_null(strstr(ex.hint, "preemption is off"));
    fx_free(&f);
}

/* ---- quota reclaim -------------------------------------------------------- */

static arb_job_t *qjob(fx_t *f, const char *name, const char *queue, int gpus, int prio)
{
    arb_job_t *j = fx_job_new(name, 1, gpus, 0);
    j->queue = S(f, queue);
    j->priority = prio;
    return fx_submit(f, j);
}

static void test_quota_reclaim(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_node(&f, "b", 8, 1, NULL, 0);
    psched(&f, "pack");
    fx_quota_queue(&f, "team-a", "lab", 8, 0);
    fx_quota_queue(&f, "team-b", "lab", 8, 8);

    /* B borrows A's idle quota: both of its jobs run. */
    arb_job_t *b1 = qjob(&f, "b1", "team-b", 8, 0);
    f.ctx.now_ns = 1 * SEC;
    arb_job_t *b2 = qjob(&f, "b2", "team-b", 8, 0);
    assert_int_equal(cycle(&f, &cs), 2);
    const arb_queue_t *qb = arb_sched_queue(f.s, S(&f, "team-b"));
    assert_int_equal(qb->used.gpu_milli, 16000);

    /* A comes back for its nominal share; same priority, so only reclaim
     * can make room: one of B's jobs goes, the borrowed one. */
    f.ctx.now_ns = 2 * SEC;
    arb_job_t *a1 = qjob(&f, "a1", "team-a", 8, 0);
    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(cs.preempted, 1);
    assert_int_equal(a1->state, ARB_JOB_PLACED);
    assert_int_equal((b1->state == ARB_JOB_PREEMPTED) + (b2->state == ARB_JOB_PREEMPTED), 1);
    assert_int_equal(qb->used.gpu_milli, 8000);
    const arb_queue_t *qa = arb_sched_queue(f.s, S(&f, "team-a"));
    assert_int_equal(qa->used.gpu_milli, 8000);

    /* The evicted B job is requeued but the cohort has nothing idle now. */
    arb_job_t *bv = b1->state == ARB_JOB_PREEMPTED ? b1 : b2;
    assert_int_equal(cycle(&f, &cs), 0);
    assert_int_equal(bv->state, ARB_JOB_PENDING);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, bv, &ex, json, sizeof json);
    assert_true(ex.quota_blocked);
    assert_non_null(strstr(json, "\"quota_blocked\":true"));

    /* A over its nominal cannot reclaim: a2 waits, B keeps its job. */
    arb_job_t *a2 = qjob(&f, "a2", "team-a", 8, 0);
    assert_int_equal(cycle(&f, &cs), 0);
    assert_int_equal(a2->state, ARB_JOB_PENDING);
    assert_int_equal(qb->used.gpu_milli, 8000);
    fx_free(&f);
}

/* Reclaim only works inside a cohort. */
static void test_no_reclaim_across_cohorts(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    psched(&f, "pack");
    fx_quota_queue(&f, "team-a", "lab-1", 8, 0);
    arb_job_t *other = qjob(&f, "other", "free-for-all", 8, 0); /* no quota */
    assert_int_equal(cycle(&f, &cs), 1);
    arb_job_t *a1 = qjob(&f, "a1", "team-a", 8, 0);
    assert_int_equal(cycle(&f, &cs), 0);
    assert_int_equal(a1->state, ARB_JOB_PENDING);
    assert_int_equal(other->state, ARB_JOB_PLACED);
    fx_free(&f);
}

/* Reclaim gives borrowed quota back, nothing else. Queue A borrows one GPU
 * of B's nominal; a job of A that holds no GPU is no reclaim victim for a
 * job of B that needs none (it would only take room, and come back by
 * priority: the simulation test's seed 610247 evicted it seven times in a
 * minute); a job of B that needs GPUs still reclaims the GPU borrowed. */
static void test_reclaim_only_what_is_borrowed(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0), b = fx_node(&f, "b", 8, 1, NULL, 0);
    uint32_t m = fx_node(&f, "m", 0, 0, NULL, 0);
    N(&f, a)->cap.mem_bytes = N(&f, b)->cap.mem_bytes = 16 * GIB;
    N(&f, m)->cap.mem_bytes = 100 * GIB;
    fx_touch(&f, a);
    fx_touch(&f, b);
    fx_touch(&f, m);
    psched(&f, "pack");
    fx_quota_queue(&f, "team-a", "lab", 8, 8);
    fx_quota_queue(&f, "team-b", "lab", 8, 8);

    arb_job_t *a1 = qjob(&f, "a1", "team-a", 8, 0);
    arb_job_t *a2 = qjob(&f, "a2", "team-a", 1, 0);
    arb_job_t *mem = qjob(&f, "mem", "team-a", 0, 5);
    mem->groups[0].req.mem_bytes = 80 * GIB;
    assert_int_equal(cycle(&f, &cs), 3);
    assert_int_equal(arb_sched_queue(f.s, S(&f, "team-a"))->used.gpu_milli, 9000);

    /* B within its nominal, but it needs memory, not quota: mem stays. */
    f.ctx.now_ns = 1 * SEC;
    arb_job_t *bm = qjob(&f, "bm", "team-b", 0, 0);
    bm->groups[0].req.mem_bytes = 80 * GIB;
    assert_int_equal(cycle(&f, &cs), 0);
    assert_int_equal(cs.preempted, 0);
    assert_int_equal(bm->state, ARB_JOB_PENDING);
    assert_int_equal(mem->state, ARB_JOB_PLACED);

    /* B needs GPUs within its nominal: it takes back the one A borrowed. */
    f.ctx.now_ns = 2 * SEC;
    arb_job_t *bg = qjob(&f, "bg", "team-b", 8, 0);
    assert_int_equal(cycle(&f, &cs), 1);
    assert_int_equal(cs.preempted, 1);
    assert_int_equal(bg->state, ARB_JOB_PLACED);
    assert_int_equal(a2->state, ARB_JOB_PREEMPTED);
    assert_int_equal(a1->state, ARB_JOB_PLACED);
    assert_int_equal(mem->state, ARB_JOB_PLACED);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fewest_victims),
        cmocka_unit_test(test_least_gpus_lost),
        cmocka_unit_test(test_gang_preemptor),
        cmocka_unit_test(test_reprieve),
        cmocka_unit_test(test_lowest_priority_first),
        cmocka_unit_test(test_never_protected),
        cmocka_unit_test(test_useless_preemption_changes_nothing),
        cmocka_unit_test(test_gang_evicted_whole),
        cmocka_unit_test(test_preemption_off),
        cmocka_unit_test(test_quota_reclaim),
        cmocka_unit_test(test_no_reclaim_across_cohorts),
        cmocka_unit_test(test_reclaim_only_what_is_borrowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
