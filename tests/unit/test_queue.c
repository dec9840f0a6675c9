/*
 * test_queue.c: who goes next and who may go at all. FIFO order, priority
 * order, DRF fair share across queues (weights included), quotas (nominal,
 * borrowing limit, borrowing only what the cohort leaves idle, never the
 * same idle quota twice) and starvation protection.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

#define SEC 1000000000LL

static void qsched(fx_t *f, arb_queue_policy_t qp, int64_t starvation_ns)
{
    arb_sched_conf_t conf = {0};
    conf.queue_policy = qp;
    conf.starvation_ns = starvation_ns;
    fx_sched_conf(f, "pack", &conf);
}

static arb_job_t *qjob(fx_t *f, const char *name, const char *queue, int gpus, int prio)
{
    arb_job_t *j = fx_job_new(name, 1, gpus, 0);
    j->queue = queue ? S(f, queue) : 0;
    j->priority = prio;
    return fx_submit(f, j);
}

static void set_queue(fx_t *f, const char *name, const char *cohort, int nominal_gpus,
                      int borrow_gpus, double weight)
{
    arb_queue_t q = {.name = S(f, name),
                     .cohort = cohort ? S(f, cohort) : 0,
                     .has_quota = nominal_gpus >= 0,
                     .weight = weight};
    if (nominal_gpus >= 0) {
        q.nominal.gpu_milli = nominal_gpus * 1000LL;
        q.borrow_limit.gpu_milli = borrow_gpus * 1000LL;
    }
    assert_int_equal(arb_sched_set_queue(f->s, &q, &f->err), 0);
}

static int cycle(fx_t *f)
{
    arb_cycle_stats_t cs;
    assert_int_equal(arb_sched_cycle(f->s, &f->ctx, &cs), 0);
    return cs.placed;
}

static void test_policy_parse(void **st)
{
    arb_queue_policy_t p;
    arb_err_t e;
    assert_int_equal(arb_queue_policy_parse("fifo", &p, &e), 0);
    assert_int_equal(p, ARB_QP_FIFO);
    assert_int_equal(arb_queue_policy_parse("priority", &p, &e), 0);
    assert_int_equal(p, ARB_QP_PRIORITY);
    assert_int_equal(arb_queue_policy_parse("drf", &p, &e), 0);
    assert_int_equal(p, ARB_QP_DRF);
    assert_int_equal(arb_queue_policy_parse("lifo", &p, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "'lifo'"));
}

/* FIFO: submission order, and nothing overtakes a blocked head. */
static void test_fifo(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_FIFO, 0);
    arb_job_t *j1 = qjob(&f, "j1", NULL, 6, 0);
    arb_job_t *j2 = qjob(&f, "j2", NULL, 6, 9); /* priority is ignored */
    arb_job_t *j3 = qjob(&f, "j3", NULL, 1, 9);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(j1->state, ARB_JOB_PLACED);
    assert_int_equal(j2->state, ARB_JOB_PENDING);
    assert_int_equal(j3->state, ARB_JOB_PENDING); /* would fit, but j2 is first */
    assert_int_equal(arb_sched_finish(f.s, j1, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(cycle(&f), 2);
    assert_int_equal(j2->state, ARB_JOB_PLACED);
    assert_int_equal(j3->state, ARB_JOB_PLACED);
    fx_free(&f);
}

/* Priority, then submission order; a blocked job lets smaller ones go. */
static void test_priority(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_PRIORITY, 0);
    arb_job_t *lo = qjob(&f, "lo", NULL, 8, 1);
    arb_job_t *hi1 = qjob(&f, "hi1", NULL, 4, 5);
    arb_job_t *hi2 = qjob(&f, "hi2", NULL, 4, 5);
    arb_job_t *mid = qjob(&f, "mid", NULL, 8, 3);
    assert_int_equal(cycle(&f), 2);
    assert_int_equal(hi1->state, ARB_JOB_PLACED);
    assert_int_equal(hi2->state, ARB_JOB_PLACED);
    assert_int_equal(lo->state, ARB_JOB_PENDING);
    assert_int_equal(mid->state, ARB_JOB_PENDING);
    assert_int_equal(arb_sched_finish(f.s, hi1, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(arb_sched_finish(f.s, hi2, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(mid->state, ARB_JOB_PLACED); /* 3 before 1 */
    assert_int_equal(lo->state, ARB_JOB_PENDING);

    /* a blocked high-priority job does not stop a smaller one behind it */
    arb_job_t *big = qjob(&f, "big", NULL, 8, 7);
    arb_job_t *tiny = qjob(&f, "tiny", NULL, 0, 0);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(big->state, ARB_JOB_PENDING);
    assert_int_equal(tiny->state, ARB_JOB_PLACED);
    fx_free(&f);
}

/* DRF: the queue with the lower (weighted) dominant share goes first. */
static void test_drf(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_node(&f, "b", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_DRF, 0);
    set_queue(&f, "qa", NULL, -1, 0, 1);
    set_queue(&f, "qb", NULL, -1, 0, 1);
    arb_job_t *a0 = qjob(&f, "a0", "qa", 4, 0);
    assert_int_equal(cycle(&f), 1);
    (void)a0;
    /* qa holds 4/16; qb nothing. qa's job was submitted first and has a
     * higher priority, but qb's goes first; only one fits. */
    arb_job_t *a1 = qjob(&f, "a1", "qa", 8, 9);
    arb_job_t *b1 = qjob(&f, "b1", "qb", 8, 0);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(b1->state, ARB_JOB_PLACED);
    assert_int_equal(a1->state, ARB_JOB_PENDING);
    fx_free(&f);

    /* Memory can be the dominant resource: a third of the cluster's memory
     * (0.333) outweighs 6 of 24 GPUs (0.25). */
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_node(&f, "b", 8, 1, NULL, 0);
    fx_node(&f, "c", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_DRF, 0);
    arb_job_t *m = fx_job_new("memhog", 1, 0, 0);
    m->queue = S(&f, "qm");
    m->groups[0].req.mem_bytes = 1024 * GIB;
    fx_submit(&f, m);
    arb_job_t *g = qjob(&f, "g", "qg", 6, 0);
    assert_int_equal(cycle(&f), 2);
    assert_int_equal(g->state, ARB_JOB_PLACED);
    arb_job_t *m2 = qjob(&f, "m2", "qm", 8, 0);
    arb_job_t *g2 = qjob(&f, "g2", "qg", 8, 0);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(g2->state, ARB_JOB_PLACED);
    assert_int_equal(m2->state, ARB_JOB_PENDING);
    fx_free(&f);

    /* Weights: qa (weight 4) using 8 of 24 GPUs has share 8/24/4 = 0.083,
     * below qb (weight 1) using 8: 0.333. */
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_node(&f, "b", 8, 1, NULL, 0);
    fx_node(&f, "c", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_DRF, 0);
    set_queue(&f, "qa", NULL, -1, 0, 4);
    set_queue(&f, "qb", NULL, -1, 0, 1);
    qjob(&f, "a0", "qa", 8, 0);
    qjob(&f, "b0", "qb", 8, 0);
    assert_int_equal(cycle(&f), 2);
    arb_job_t *b2 = qjob(&f, "b2", "qb", 8, 0);
    arb_job_t *a2 = qjob(&f, "a2", "qa", 8, 0);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(a2->state, ARB_JOB_PLACED);
    assert_int_equal(b2->state, ARB_JOB_PENDING);
    fx_free(&f);
}

/* Nominal quota without a cohort: capacity is there, the quota says no. */
static void test_quota_nominal(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_node(&f, "b", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_PRIORITY, 0);
    set_queue(&f, "team", NULL, 8, 0, 1);
    arb_job_t *j1 = qjob(&f, "j1", "team", 6, 0);
    arb_job_t *j2 = qjob(&f, "j2", "team", 4, 0);
    arb_job_t *j3 = qjob(&f, "j3", "team", 2, 0);
    assert_int_equal(cycle(&f), 2);
    assert_int_equal(j1->state, ARB_JOB_PLACED);
    assert_int_equal(j2->state, ARB_JOB_PENDING);
    assert_int_equal(j3->state, ARB_JOB_PLACED);
    const arb_queue_t *q = arb_sched_queue(f.s, S(&f, "team"));
    assert_int_equal(q->used.gpu_milli, 8000);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, j2, &ex, json, sizeof json);
    assert_true(ex.quota_blocked);
    assert_non_null(strstr(ex.summary, "waiting for quota"));
    assert_non_null(strstr(ex.summary, "'team'"));
    /* Updating the quota keeps the usage. */
    set_queue(&f, "team", NULL, 12, 0, 1);
    assert_int_equal(q->used.gpu_milli, 8000);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(j2->state, ARB_JOB_PLACED);
    assert_int_equal(q->used.gpu_milli, 12000);
    /* A quota whose nominal and borrowing limit are 0 in a resource does not
     * limit it: CPU here. */
    arb_job_t *c = fx_job_new("cpu", 1, 0, 0);
    c->queue = S(&f, "team");
    c->groups[0].req.cpu_milli = 100000;
    fx_submit(&f, c);
    assert_int_equal(cycle(&f), 1);
    fx_free(&f);
}

/* Borrowing: up to the limit, and only what the cohort leaves idle. */
static void test_quota_borrowing(void **st)
{
    fx_t f;
    fx_init(&f);
    for (int i = 0; i < 6; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "n%d", i);
        fx_node(&f, nm, 8, 1, NULL, 0);
    }
    qsched(&f, ARB_QP_PRIORITY, 0);
    set_queue(&f, "q1", "lab", 8, 4, 1);
    set_queue(&f, "q2", "lab", 8, 0, 1);
    set_queue(&f, "solo", NULL, 8, 8, 1); /* no cohort: nobody to borrow from */

    /* q1 may reach 8 + 4 while q2 is idle, not more. */
    arb_job_t *a = qjob(&f, "a", "q1", 8, 0);
    arb_job_t *b = qjob(&f, "b", "q1", 4, 0);
    arb_job_t *c = qjob(&f, "c", "q1", 1, 0);
    assert_int_equal(cycle(&f), 2);
    assert_int_equal(a->state, ARB_JOB_PLACED);
    assert_int_equal(b->state, ARB_JOB_PLACED);
    assert_int_equal(c->state, ARB_JOB_PENDING);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, c, &ex, json, sizeof json);
    assert_true(ex.quota_blocked);
    assert_non_null(strstr(ex.summary, "borrowing limit"));

    /* q2 uses its nominal: nothing idle to lend; q1's borrowed 4 stays
     * (reclaim is preemption's business, off here), but q1 cannot borrow
     * more even after its limit is raised. */
    arb_job_t *d = qjob(&f, "d", "q2", 8, 0);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(d->state, ARB_JOB_PLACED);
    set_queue(&f, "q1", "lab", 8, 8, 1);
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(c->state, ARB_JOB_PENDING);
    fx_explain(&f, c, &ex, json, sizeof json);
    assert_non_null(strstr(ex.summary, "idle"));

    arb_job_t *s1 = qjob(&f, "s1", "solo", 8, 0);
    arb_job_t *s2 = qjob(&f, "s2", "solo", 1, 0);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(s1->state, ARB_JOB_PLACED);
    assert_int_equal(s2->state, ARB_JOB_PENDING);
    fx_free(&f);
}

/* Two borrowers must not both take the same idle quota. */
static void test_quota_idle_counted_once(void **st)
{
    fx_t f;
    fx_init(&f);
    for (int i = 0; i < 6; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "n%d", i);
        fx_node(&f, nm, 8, 1, NULL, 0);
    }
    qsched(&f, ARB_QP_PRIORITY, 0);
    set_queue(&f, "q1", "lab", 8, 8, 1);
    set_queue(&f, "q2", "lab", 8, 8, 1);
    set_queue(&f, "q3", "lab", 8, 0, 1); /* idle: lends 8 */
    arb_job_t *a1 = qjob(&f, "a1", "q1", 8, 0);
    arb_job_t *a2 = qjob(&f, "a2", "q1", 8, 0); /* borrows q3's 8 */
    arb_job_t *b1 = qjob(&f, "b1", "q2", 8, 0);
    arb_job_t *b2 = qjob(&f, "b2", "q2", 8, 0); /* nothing idle is left */
    assert_int_equal(cycle(&f), 3);
    assert_int_equal(a1->state, ARB_JOB_PLACED);
    assert_int_equal(a2->state, ARB_JOB_PLACED);
    assert_int_equal(b1->state, ARB_JOB_PLACED);
    assert_int_equal(b2->state, ARB_JOB_PENDING);
    int64_t used = 0, nominal = 0;
    static const char *const qs[] = {"q1", "q2", "q3"};
    for (int i = 0; i < 3; i++) {
        const arb_queue_t *q = arb_sched_queue(f.s, S(&f, qs[i]));
        used += q->used.gpu_milli;
        nominal += q->nominal.gpu_milli;
    }
    assert_true(used <= nominal); /* the cohort never exceeds its quota */
    fx_free(&f);
}

/* Starvation protection: a job that has waited past the threshold goes
 * before all others and holds the line until it starts. */
static void test_starvation(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_PRIORITY, 60 * SEC);
    arb_job_t *run = qjob(&f, "run", NULL, 1, 5);
    assert_int_equal(cycle(&f), 1);
    arb_job_t *big = qjob(&f, "big", NULL, 8, 0); /* t=0, blocked */
    /* A stream of small high-priority jobs keeps the node busy. */
    arb_job_t *prev = run;
    for (int t = 10; t <= 50; t += 10) {
        f.ctx.now_ns = t * SEC;
        char nm[32];
        snprintf(nm, sizeof nm, "s%d", t);
        arb_job_t *s = qjob(&f, nm, NULL, 1, 5);
        assert_int_equal(cycle(&f), 1);
        assert_int_equal(s->state, ARB_JOB_PLACED);
        assert_int_equal(arb_sched_finish(f.s, prev, ARB_JOB_CANCELLED, &f.err), 0);
        prev = s;
        assert_int_equal(big->state, ARB_JOB_PENDING);
    }
    /* t=61: big is starving. It still cannot fit (prev runs), but the new
     * small job must not start in front of it. */
    f.ctx.now_ns = 61 * SEC;
    arb_job_t *late = qjob(&f, "late", NULL, 1, 5);
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(late->state, ARB_JOB_PENDING);
    assert_int_equal(big->state, ARB_JOB_PENDING);
    /* prev ends: big goes first although late has the higher priority. */
    assert_int_equal(arb_sched_finish(f.s, prev, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(big->state, ARB_JOB_PLACED);
    assert_int_equal(late->state, ARB_JOB_PENDING);
    fx_free(&f);

    /* Off (0): the stream wins. */
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_PRIORITY, 0);
    big = qjob(&f, "big", NULL, 8, 0);
    f.ctx.now_ns = 1000 * SEC;
    arb_job_t *s = qjob(&f, "s", NULL, 1, 5);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(s->state, ARB_JOB_PLACED);
    assert_int_equal(big->state, ARB_JOB_PENDING);
    fx_free(&f);
}

/* Starving jobs go first, the oldest of them first, whatever the
 * priorities (queue.c: "oldest first"). */
static void test_starvation_order(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    qsched(&f, ARB_QP_PRIORITY, 60 * SEC);
    arb_job_t *old1 = qjob(&f, "old1", NULL, 8, 0);
    f.ctx.now_ns = 5 * SEC;
    arb_job_t *old2 = qjob(&f, "old2", NULL, 8, 3);
    f.ctx.now_ns = 100 * SEC;
    arb_job_t *fresh = qjob(&f, "fresh", NULL, 8, 9);
    assert_int_equal(cycle(&f), 1);
    assert_int_equal(fresh->state, ARB_JOB_PENDING);
    assert_int_equal(old1->state, ARB_JOB_PLACED);
    assert_int_equal(old2->state, ARB_JOB_PENDING);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_parse),
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_priority),
        cmocka_unit_test(test_drf),
        cmocka_unit_test(test_quota_nominal),
        cmocka_unit_test(test_quota_borrowing),
        cmocka_unit_test(test_quota_idle_counted_once),
        cmocka_unit_test(test_starvation),
        cmocka_unit_test(test_starvation_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
