/*
 * test_cycle.c: the scheduling cycle's invariants (src/core/cycle.c), one
 * test per number, each on a cluster and job mix made to break it:
 *   1 no preemption livelock (priority and quota reclaim, every queue order,
 *     deferred victims as in the controller and instant ones as in the
 *     simulator): a victim never goes back into its preemptor's room, nor
 *     does a job behind take (or reclaim on) the quota the preemptor needs;
 *   2 no freeze: a job that could never fit holds no reservation or barrier;
 *   3 a starving job reserves only the nodes it could use;
 *   4 backfill uses time limits (and grace) and never delays the reservation;
 *   5 waiting for quota holds nobody back;
 *   6 a preemptor's room is its own while its victims stop;
 *   8 explain is the cycle: "fits now" is placed next, and a held job is told
 *     by whom.
 * (7, elastic growth, is test_elastic.c's.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"
#include "core/sched_int.h"

#define SEC 1000000000LL

static void sched(fx_t *f, arb_queue_policy_t qp, bool backfill, bool preempt, bool defer,
                  int64_t starvation)
{
    arb_sched_conf_t conf = {0};
    conf.queue_policy = qp;
    conf.backfill = backfill;
    conf.preemption = preempt;
    conf.preempt_defer = defer;
    conf.starvation_ns = starvation;
    conf.grace_ns = 10 * SEC;
    fx_sched_conf(f, "pack", &conf);
}

static arb_job_t *job(fx_t *f, const char *name, int tasks, int gpus, int prio, const char *queue,
                      int64_t limit_s)
{
    arb_job_t *j = fx_job_new(name, tasks, gpus, 0);
    j->priority = prio;
    j->time_limit_s = limit_s;
    j->grace_s = -1;
    if (queue)
        j->queue = S(f, queue);
    return fx_submit(f, j);
}

static void cycle(fx_t *f)
{
    arb_cycle_stats_t cs;
    assert_int_equal(arb_sched_cycle(f->s, &f->ctx, &cs), 0);
    fx_check(f);
}

static bool holds(const arb_job_t *j)
{
    return j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
}

/* The controller's part of a deferred preemption: every marked victim has
 * stopped; how many were. */
static int stop_victims(fx_t *f)
{
    int n = 0;
    for (uint32_t i = 0; i < arb_sched_njobs(f->s); i++) {
        arb_job_t *j = arb_sched_job(f->s, i);
        if (j && j->evicting) { /* NULL: forgotten (ended) */
            assert_int_equal(arb_sched_finish(f->s, j, ARB_JOB_PREEMPTED, &f->err), 0);
            n++;
        }
    }
    return n;
}

/* ---- 1: no preemption livelock ---------------------------------------------------------- */

/* Two queues of one cohort; A borrows B's idle quota, then B's job of the
 * same priority arrives within B's nominal: A's job is reclaimed once and
 * B's runs; A's waits for quota, it does not take the room back. */
static void reclaim_once(arb_queue_policy_t qp, bool defer)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "n1", 8, 1, NULL, 0);
    sched(&f, qp, false, true, defer, 0);
    for (int i = 0; i < 2; i++)
        fx_quota_queue(&f, i ? "b" : "a", "c", 4, 4);
    arb_job_t *a = job(&f, "a-borrows", 1, 8, 0, "a", 0);
    cycle(&f);
    assert_true(holds(a));
    arb_job_t *b = job(&f, "b-within", 1, 4, 0, "b", 0);
    int evictions = 0;
    for (int k = 0; k < 20; k++) {
        cycle(&f);
        if (defer)
            evictions += stop_victims(&f);
        else
            evictions += a->state == ARB_JOB_PREEMPTED || (a->state == ARB_JOB_PENDING && k == 0);
    }
    cycle(&f);
    assert_true(holds(b));
    assert_false(holds(a));
    assert_true(a->reclaimed);                 /* named as a reclaim */
    assert_int_equal(a->wait, ARB_WAIT_QUOTA); /* b's 4 GPUs leave a 4: 8 do not fit */
    if (defer)
        assert_int_equal(evictions, 1);
    fx_free(&f);
}

static void test_1_no_livelock_reclaim(void **st)
{
    for (int qp = 0; qp < 3; qp++) {
        reclaim_once((arb_queue_policy_t)qp, true);
        reclaim_once((arb_queue_policy_t)qp, false);
    }
}

/* Priority preemption under an order that does not sort by priority
 * (fifo, drf): the victim is older, or its queue's share is lower, yet it
 * is tried after its preemptor while that one waits. */
static void priority_once(arb_queue_policy_t qp)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "n1", 8, 1, NULL, 0);
    sched(&f, qp, false, true, true, 0);
    arb_job_t *low = job(&f, "low", 1, 4, 0, "x", 0);
    arb_job_t *fill = job(&f, "fill", 1, 4, 0, "y", 0);
    cycle(&f);
    assert_true(holds(low) && holds(fill));
    arb_job_t *high = job(&f, "high", 1, 8, 1000, "y", 0);
    int evictions = 0;
    for (int k = 0; k < 10; k++) {
        cycle(&f);
        evictions += stop_victims(&f);
    }
    assert_true(holds(high));
    assert_int_equal(evictions, 2); /* low and fill, once each */
    assert_false(holds(low) || holds(fill));
    fx_free(&f);
}

static void test_1_no_livelock_priority(void **st)
{
    priority_once(ARB_QP_FIFO);
    priority_once(ARB_QP_DRF);
    priority_once(ARB_QP_PRIORITY);
}

/* A lower-priority job ahead in the order and a higher-priority one behind
 * it that needs its room, pending in one cycle: the end state is that of
 * the preemptor going first (it is placed, the other waits), with no
 * eviction: the job placed a moment ago is put back, never stopped. */
static void placed_then_evicted_once(arb_queue_policy_t qp, bool defer)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    fx_node(&f, "n1", 8, 1, NULL, 0);
    sched(&f, qp, false, true, defer, 0);
    arb_job_t *low = job(&f, "low-first", 1, 8, 0, "x", 0);
    arb_job_t *high = job(&f, "high-behind", 1, 8, 1000, "x", 0);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    fx_check(&f);
    assert_true(holds(high));
    assert_int_equal(low->state, ARB_JOB_PENDING); /* never left the queue */
    assert_false(low->evicting);
    assert_int_equal(cs.preempted, 0);
    assert_int_equal(cs.placed, 1);
    arb_job_t *const *v;
    assert_int_equal(arb_sched_placed(f.s, &v), 1);
    assert_ptr_equal(v[0], high);
    cycle(&f); /* and it stays so */
    assert_true(holds(high));
    assert_int_equal(low->state, ARB_JOB_PENDING);
    fx_free(&f);
}

static void test_1_no_placed_then_evicted(void **st)
{
    placed_then_evicted_once(ARB_QP_FIFO, true);
    placed_then_evicted_once(ARB_QP_FIFO, false);
    placed_then_evicted_once(ARB_QP_DRF, true);
    placed_then_evicted_once(ARB_QP_DRF, false);
}

/* A preemptor's quota is its own while its victims stop (queue.c, "Holds").
 * P of queue q (nominal 8 GPUs) evicts v; while v stops, room for L (4
 * GPUs), a low-priority job of q, frees where P does not fit. Were L placed
 * there, P would wait for quota, v go back into its room and P evict it
 * again once L ends (the simulation test's seed 610255: three times). L
 * waits for quota; P starts in v's room. */
static void test_1_preemptor_keeps_its_quota(void **st)
{
    fx_t f;
    arb_explain_t ex;
    char json[4096];
    fx_init(&f);
    fx_node(&f, "n1", 8, 1, NULL, 0);
    fx_node(&f, "n2", 8, 1, NULL, 0);
    sched(&f, ARB_QP_PRIORITY, false, true, true, 0);
    fx_quota_queue(&f, "q", NULL, 8, 0);
    arb_job_t *v = job(&f, "v", 1, 8, 0, NULL, 0);
    arb_job_t *w1 = job(&f, "w1", 1, 4, 2000, NULL, 0);
    arb_job_t *w2 = job(&f, "w2", 1, 4, 2000, NULL, 0);
    cycle(&f);
    assert_true(holds(v) && holds(w1) && holds(w2));
    uint32_t room = v->alloc[0].node;
    arb_job_t *p = job(&f, "p", 1, 8, 1000, "q", 0);
    cycle(&f);
    assert_true(p->waiting && v->evicting);

    assert_int_equal(arb_job_transition(w1, ARB_JOB_RUNNING, NULL), 0);
    assert_int_equal(arb_sched_finish(f.s, w1, ARB_JOB_SUCCEEDED, &f.err), 0);
    arb_job_t *l = job(&f, "l", 1, 4, 0, "q", 0);
    cycle(&f);
    assert_false(holds(p));
    assert_false(holds(l));
    assert_int_equal(l->wait, ARB_WAIT_QUOTA);
    fx_explain(&f, l, &ex, json, sizeof json);
    assert_non_null(strstr(ex.summary, "8 GPUs of it held for preemptors"));

    assert_int_equal(stop_victims(&f), 1);
    cycle(&f);
    assert_true(holds(p));
    assert_int_equal(p->alloc[0].node, room);
    assert_false(holds(v));
    assert_false(holds(l)); /* q's 8 GPUs are p's */
    fx_free(&f);
}

/* A job of queue q in zone `zone` (a node label). */
static arb_job_t *zjob(fx_t *f, const char *name, int gpus, int prio, const char *queue,
                       const char *zone)
{
    arb_job_t *j = fx_job_new(name, 1, gpus, 0);
    j->priority = prio;
    j->grace_s = -1;
    if (queue)
        j->queue = S(f, queue);
    fx_selector(f, j, "zone", zone);
    return fx_submit(f, j);
}

/* Reclaim counts the quota its own queue holds for a waiting preemptor
 * (queue.c, "Holds"). Cohort lab: qa (nominal 8 GPUs), qb (4, borrowing 4
 * of qc's idle 8 with b1). P of qa evicts v for 8 GPUs and holds qa's 8
 * while v stops; j of qa (4 GPUs, b1's priority) is admitted only by
 * borrowing qc's last idle 4. Counted without P's hold, qa would be within
 * its nominal after j and b1 a reclaim victim: explain would promise a
 * reclaim no cycle makes (once P runs, qa uses its 8 and j would borrow).
 * j's only way in is b1's room ending; explain offers no victim. */
static void test_1_reclaim_counts_held_quota(void **st)
{
    fx_t f;
    arb_explain_t ex;
    char json[4096];
    fx_init(&f);
    uint32_t n1 = fx_node(&f, "n1", 8, 1, NULL, 0), n2 = fx_node(&f, "n2", 8, 1, NULL, 0);
    uint32_t n3 = fx_node(&f, "n3", 8, 1, NULL, 0);
    sched(&f, ARB_QP_PRIORITY, false, true, true, 0);
    fx_label(&f, n1, "zone", "x");
    fx_label(&f, n2, "zone", "y");
    fx_label(&f, n3, "zone", "x");
    fx_quota_queue(&f, "qa", "lab", 8, 8);
    fx_quota_queue(&f, "qb", "lab", 4, 8);
    fx_quota_queue(&f, "qc", "lab", 8, 0);
    arb_job_t *b1 = zjob(&f, "b1", 8, 0, "qb", "x");
    arb_job_t *top = zjob(&f, "top", 8, 2000, NULL, "x");
    arb_job_t *v = zjob(&f, "v", 8, 0, NULL, "y");
    cycle(&f);
    assert_true(holds(b1) && holds(top) && holds(v));
    arb_job_t *p = zjob(&f, "p", 8, 1000, "qa", "y");
    cycle(&f);
    assert_true(p->waiting && v->evicting);
    assert_false(b1->evicting);

    arb_job_t *j = zjob(&f, "j", 4, 0, "qa", "x");
    cycle(&f);
    assert_false(holds(j));
    assert_false(b1->evicting);
    fx_explain(&f, j, &ex, json, sizeof json);
    assert_false(ex.quota_blocked); /* admitted: it borrows qc's idle 4 */
    assert_false(ex.preemption_helps);
    assert_int_equal(ex.reclaim_victims, 0);
    assert_null(strstr(ex.hint, "Reclaiming quota"));

    assert_int_equal(stop_victims(&f), 1);
    cycle(&f);
    assert_true(holds(p));
    cycle(&f);
    assert_true(holds(b1) && !b1->evicting); /* and no cycle reclaims from b1 */
    assert_false(holds(j));
    fx_free(&f);
}

/* Priority preemption across queues and quota reclaim do not undo each
 * other (preempt.c, the cohort rule; the simulation test's seed 700367).
 * Cohort lab: qa (nominal 4 GPUs, may borrow 8), qb (nominal 8) on two
 * 4-GPU nodes. v of qb (priority 0, two tasks of 4 GPUs) holds qb's
 * nominal. p of qa (priority 1000, 4 GPUs, within qa's nominal) does not
 * take it by priority: were it to, a of qa would borrow the quota v left
 * idle, v (within qb's nominal) reclaim both nodes, p with them, and p
 * evict v again, round after round. p waits, and explain says why. Once
 * v ends, p and a run; a gang of qb needing both nodes reclaims nothing
 * (once a went, qa would borrow no more: p is spared), and w of qb (4
 * GPUs, within qb's nominal) reclaims a, qa's lower-priority borrower,
 * not p. */
static void test_1_no_livelock_reclaim_priority(void **st)
{
    fx_t f;
    arb_explain_t ex;
    char json[4096];
    fx_init(&f);
    fx_node(&f, "n1", 4, 1, NULL, 0);
    fx_node(&f, "n2", 4, 1, NULL, 0);
    sched(&f, ARB_QP_PRIORITY, false, true, true, 0);
    fx_quota_queue(&f, "qa", "lab", 4, 8);
    fx_quota_queue(&f, "qb", "lab", 8, 8);
    arb_job_t *v = job(&f, "v", 2, 4, 0, "qb", 0);
    cycle(&f);
    assert_true(holds(v));
    arb_job_t *p = job(&f, "p", 1, 4, 1000, "qa", 0);
    arb_job_t *a = job(&f, "a", 1, 4, 0, "qa", 0);
    int evictions = 0;
    for (int k = 0; k < 10; k++) {
        cycle(&f);
        evictions += stop_victims(&f);
    }
    assert_int_equal(evictions, 0);
    assert_true(holds(v));
    assert_false(holds(p) || holds(a));
    fx_explain(&f, p, &ex, json, sizeof json);
    assert_false(ex.preemption_helps);
    assert_non_null(strstr(ex.hint, "within its nominal quota"));

    assert_int_equal(arb_job_transition(v, ARB_JOB_RUNNING, NULL), 0);
    assert_int_equal(arb_sched_finish(f.s, v, ARB_JOB_SUCCEEDED, &f.err), 0);
    cycle(&f);
    assert_true(holds(p) && holds(a));             /* a borrows 4 of qb's idle 8 */
    arb_job_t *g = job(&f, "g", 2, 4, 0, "qb", 0); /* a gang needing both nodes */
    for (int k = 0; k < 5; k++) {
        cycle(&f);
        evictions += stop_victims(&f);
    }
    assert_int_equal(evictions, 0); /* a alone is not enough, and p is spared */
    assert_true(holds(p) && holds(a));
    assert_int_equal(arb_sched_finish(f.s, g, ARB_JOB_CANCELLED, &f.err), 0);
    arb_job_t *w = job(&f, "w", 1, 4, 0, "qb", 0);
    for (int k = 0; k < 10; k++) {
        cycle(&f);
        evictions += stop_victims(&f);
    }
    assert_int_equal(evictions, 1); /* a, reclaimed; p is not */
    assert_true(holds(p));
    assert_true(holds(w));
    assert_false(holds(a));
    assert_true(a->reclaimed);
    fx_free(&f);
}

/* A borrowing preemptor whose borrowed quota its lender takes back while
 * its victim stops (the lender's job is within its nominal: it is admitted
 * whatever the preemptor holds) is refused for quota at its turn and loses
 * its claim; its victim goes back into the room. It does not evict that
 * victim again while it would borrow (preempt.c): else it would, whenever
 * the quota is idle a moment, for the same room (four evictions in four
 * rounds). Cohort lab: qa (nominal 4 GPUs, may borrow 8), qb (nominal 8);
 * 8-GPU nodes n1 (zone x: v, priority 0, of the default queue, and p of
 * qa) and n2 (zone y: x, priority 2000, of the default queue, and b of qb,
 * by turns). */
/* j ran and ended. */
static void end(fx_t *f, arb_job_t *j)
{
    assert_int_equal(arb_job_transition(j, ARB_JOB_RUNNING, NULL), 0);
    assert_int_equal(arb_sched_finish(f->s, j, ARB_JOB_SUCCEEDED, &f->err), 0);
}

static void test_1_borrower_loses_its_claim(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_label(&f, fx_node(&f, "n1", 8, 1, NULL, 0), "zone", "x");
    fx_label(&f, fx_node(&f, "n2", 8, 1, NULL, 0), "zone", "y");
    sched(&f, ARB_QP_PRIORITY, false, true, true, 0);
    fx_quota_queue(&f, "qa", "lab", 4, 8);
    fx_quota_queue(&f, "qb", "lab", 8, 0);
    arb_job_t *v = zjob(&f, "v", 8, 0, NULL, "x");
    arb_job_t *x = zjob(&f, "x", 8, 2000, NULL, "y");
    cycle(&f);
    assert_true(holds(v) && holds(x));
    arb_job_t *p = zjob(&f, "p", 8, 1000, "qa", "x"); /* borrows 4 of qb's idle 8 */
    cycle(&f);
    assert_true(p->waiting && v->evicting);
    int evictions = 0;
    for (int round = 0; round < 4; round++) {
        end(&f, x);
        arb_job_t *b = zjob(&f, "b", 8, 0, "qb", "y"); /* within qb's nominal */
        cycle(&f);
        assert_true(holds(b));
        evictions += stop_victims(&f);
        cycle(&f);
        assert_false(holds(p));
        cycle(&f);
        assert_false(holds(p)); /* qb uses its 8: nothing idle to borrow */
        assert_true(holds(v));  /* its claim gone, v is back in the room */
        end(&f, b);
        x = zjob(&f, "x", 8, 2000, NULL, "y");
        cycle(&f);
        assert_true(holds(x));
    }
    evictions += stop_victims(&f);
    assert_int_equal(evictions, 1);
    assert_true(holds(v));
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, p, &ex, json, sizeof json);
    assert_false(ex.preemption_helps);
    assert_non_null(strstr(ex.hint, "Job 'v', which it preempted for room it then lost"));
    end(&f, v);
    cycle(&f);
    assert_true(holds(p)); /* and it starts when the room frees */
    fx_free(&f);
}

/* ---- 2: no freeze -------------------------------------------------------------------------- */

/* A head no node could ever take (a selector nothing matches, more memory
 * than any node has, a taint nothing tolerates) under backfill, starvation
 * and fifo: the jobs behind it start; it waits as "never". */
static void freeze_once(int how, bool backfill, arb_queue_policy_t qp, int64_t starvation)
{
    fx_t f;
    fx_init(&f);
    uint32_t n1 = fx_node(&f, "n1", 8, 1, NULL, 0);
    fx_node(&f, "n2", 8, 1, NULL, 0);
    if (how == 2) {
        arb_node_add_taint(&f.c, N(&f, 0), "maint", "", ARB_TAINT_NO_SCHEDULE);
        arb_node_add_taint(&f.c, N(&f, 1), "maint", "", ARB_TAINT_NO_SCHEDULE);
    }
    (void)n1;
    sched(&f, qp, backfill, false, false, starvation);
    arb_job_t *head = fx_job_new("never", 1, 1, 0);
    if (how == 0)
        fx_selector(&f, head, "zone", "nowhere");
    if (how == 1)
        head->groups[0].req.mem_bytes = 4096 * GIB;
    fx_submit(&f, head);
    arb_job_t *next = fx_job_new("next", 1, 2, 0);
    if (how == 2)
        fx_toleration(&f, next, "maint", NULL, true, 0);
    fx_submit(&f, next);
    f.ctx.now_ns += 3600 * SEC; /* long past any starvation threshold */
    cycle(&f);
    assert_true(holds(next));
    assert_int_equal(head->wait, ARB_WAIT_NEVER);
    arb_explain_t ex;
    assert_int_equal(arb_sched_explain(f.s, head, &f.ctx, &ex), 0);
    assert_true(ex.never);
    assert_non_null(strstr(ex.summary, "can never start"));
    assert_null(strstr(ex.hint, "fragmented"));
    assert_null(strstr(ex.hint, "topology"));
    if (how == 0)
        assert_non_null(strstr(ex.summary, "nodeSelector zone=nowhere"));
    if (how == 1 && !strstr(ex.summary, "it needs 4Ti memory, the largest node has 1Ti"))
        fail_msg("summary: %s", ex.summary);
    fx_free(&f);
}

static void test_2_no_freeze(void **st)
{
    for (int how = 0; how < 3; how++) {
        freeze_once(how, true, ARB_QP_PRIORITY, 0);
        freeze_once(how, false, ARB_QP_PRIORITY, 60 * SEC);
        freeze_once(how, false, ARB_QP_FIFO, 0);
        freeze_once(how, true, ARB_QP_FIFO, 60 * SEC);
    }
}

/* ---- 3: a starving job reserves only what it could use -------------------------------------- */

static void test_3_starving_reserves_its_nodes(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "gpu-a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "cpu-b", 8, 1, NULL, 0);
    fx_label(&f, a, "pool", "big");
    sched(&f, ARB_QP_PRIORITY, false, false, false, 30 * SEC);
    arb_job_t *busy = job(&f, "busy", 1, 4, 0, NULL, 0);
    cycle(&f);
    assert_int_equal(busy->alloc[0].node, a);
    arb_job_t *starving = fx_job_new("starving", 1, 8, 0);
    fx_selector(&f, starving, "pool", "big");
    fx_submit(&f, starving);
    f.ctx.now_ns += 60 * SEC;
    arb_job_t *small = job(&f, "small", 2, 2, 0, NULL, 0); /* would pack onto gpu-a */
    cycle(&f);
    assert_false(holds(starving));
    assert_true(holds(small));
    for (int t = 0; t < small->nalloc; t++)
        assert_int_equal(small->alloc[t].node, b); /* never on what the starving job needs */
    arb_job_t *only_a = fx_job_new("only-a", 1, 2, 0);
    fx_selector(&f, only_a, "pool", "big");
    fx_submit(&f, only_a);
    cycle(&f);
    assert_false(holds(only_a));
    assert_int_equal(only_a->wait, ARB_WAIT_STARVING);
    arb_explain_t ex;
    assert_int_equal(arb_sched_explain(f.s, only_a, &f.ctx, &ex), 0);
    assert_int_equal(ex.wait_for, starving->id);
    if (!strstr(ex.summary, "job 1 'starving' has waited longer than scheduler.starvation"))
        fail_msg("summary: %s", ex.summary);
    fx_free(&f);
}

/* ---- 4: backfill ------------------------------------------------------------------------------
 */

static void test_4_backfill_limits(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    fx_label(&f, a, "pool", "p");
    sched(&f, ARB_QP_FIFO, true, false, false, 0);
    arb_job_t *run = job(&f, "running", 1, 6, 0, NULL, 100); /* on a until 100 s + 10 s grace */
    arb_job_t *other = job(&f, "other", 1, 6, 0, NULL, 0);   /* on b, no limit */
    cycle(&f);
    assert_int_equal(run->alloc[0].node, a);
    assert_int_equal(other->alloc[0].node, b);
    arb_job_t *head = fx_job_new("head", 1, 8, 0);
    fx_selector(&f, head, "pool", "p");
    fx_submit(&f, head);
    arb_job_t *too_long = job(&f, "too-long", 1, 2, 0, NULL, 105); /* 105 + 10 > 110 */
    arb_job_t *no_limit = job(&f, "no-limit", 1, 2, 0, NULL, 0);
    arb_job_t *short_one = job(&f, "short", 1, 2, 0, NULL, 90); /* 90 + 10 <= 110 */
    arb_explain_t ex; /* before the cycle: what it will do */
    assert_int_equal(arb_sched_explain(f.s, no_limit, &f.ctx, &ex), 0);
    assert_true(ex.placeable);
    assert_false(ex.fits_now);
    if (!strstr(ex.summary, "it fits now, but starting it would delay job 2 'head', which holds "
                            "a backfill reservation from 110 s from now: with a time limit of at "
                            "most 100 s (it has none) it could start now"))
        fail_msg("summary: %s", ex.summary);
    assert_int_equal(arb_sched_explain(f.s, short_one, &f.ctx, &ex), 0);
    assert_true(ex.fits_now);
    cycle(&f);
    assert_false(holds(head));
    /* b has 2 free: the first job that may go elsewhere takes it */
    assert_true(holds(too_long) && too_long->alloc[0].node == b);
    assert_false(holds(no_limit));
    assert_int_equal(no_limit->wait, ARB_WAIT_RESERVED);
    assert_true(holds(short_one) && short_one->alloc[0].node == a);
    fx_free(&f);
}

/* ---- 5: quota holds nobody back ----------------------------------------------------------------
 */

static void test_5_quota_holds_nobody(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "n1", 8, 1, NULL, 0);
    sched(&f, ARB_QP_FIFO, false, false, false, 0);
    fx_quota_queue(&f, "small", NULL, 2, 0);
    arb_job_t *over = job(&f, "over", 1, 4, 0, "small", 0);
    arb_job_t *next = job(&f, "next", 1, 4, 0, NULL, 0);
    cycle(&f);
    assert_false(holds(over));
    assert_int_equal(over->wait, ARB_WAIT_QUOTA);
    assert_true(holds(next));
    fx_free(&f);
}

/* ---- 6: a preemptor's room is its own
 * ------------------------------------------------------------ */

static void test_6_preemptor_room(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "n1", 8, 1, NULL, 0);
    fx_node(&f, "n2", 8, 1, NULL, 0);
    sched(&f, ARB_QP_PRIORITY, false, true, true, 0);
    arb_job_t *v1 = job(&f, "v1", 1, 6, 0, NULL, 0);
    arb_job_t *v2 = job(&f, "v2", 1, 6, 0, NULL, 0);
    cycle(&f);
    assert_true(holds(v1) && holds(v2));
    arb_job_t *p = job(&f, "p", 1, 8, 1000, NULL, 0);
    arb_job_t *small = job(&f, "small", 1, 2, 100, NULL, 0);
    cycle(&f);
    assert_true(p->waiting);
    uint32_t room = v1->evicting ? v1->alloc[0].node : v2->alloc[0].node;
    assert_true(holds(small));
    assert_true(small->alloc[0].node != room); /* not into the room being freed */
    /* and while the victim stops, nothing behind goes there either */
    arb_job_t *late = job(&f, "late", 1, 2, 10, NULL, 0);
    cycle(&f);
    assert_false(holds(late));
    assert_int_equal(late->wait, ARB_WAIT_CLAIMED);
    assert_int_equal(stop_victims(&f), 1);
    cycle(&f);
    assert_true(holds(p));
    assert_int_equal(p->alloc[0].node, room);
    fx_free(&f);
}

/* ---- gangs whose gangMin is below their size ------------------------------------------------ */

/* gangMin 2 of 4 tasks on room for 2: two start together, each ended
 * task's room goes to the next, the job holds all four only in turn. */
static void test_gang_min_below_size(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "n1", 2, 1, NULL, 0);
    sched(&f, ARB_QP_FIFO, false, false, false, 0);
    arb_job_t *g = fx_job_new("g", 4, 1, 0);
    g->gang_min = 2;
    fx_submit(&f, g);
    arb_job_t *behind = job(&f, "behind", 1, 1, 0, NULL, 0);
    cycle(&f);
    assert_true(holds(g));
    assert_int_equal(g->nalloc, 2);
    assert_true(arb_job_partial_gang(g));
    cycle(&f);
    assert_int_equal(g->nalloc, 2); /* no room */
    assert_int_equal(arb_sched_task_done(f.s, g, 0, &f.err), 0);
    assert_int_equal(g->alloc[0].node, ARB_NO_NODE);
    assert_int_equal(arb_sched_task_done(f.s, g, 0, &f.err), -EINVAL);
    cycle(&f); /* the job is ahead of 'behind': its task 2 takes the room */
    assert_int_equal(g->nalloc, 3);
    assert_false(holds(behind));
    assert_int_equal(arb_sched_task_done(f.s, g, 1, &f.err), 0);
    assert_int_equal(arb_sched_task_done(f.s, g, 2, &f.err), 0);
    cycle(&f);
    assert_int_equal(g->nalloc, 4);
    assert_true(holds(behind));
    /* a failure closes it: nothing more would start */
    arb_job_t *h = fx_job_new("h", 3, 1, 0);
    h->gang_min = 1;
    fx_submit(&f, h);
    g->gang_closed = true;
    assert_int_equal(arb_sched_finish(f.s, g, ARB_JOB_FAILED, NULL), 0);
    cycle(&f);
    assert_true(holds(h));
    assert_int_equal(h->nalloc, 1); /* 'behind' holds the other GPU */
    fx_free(&f);
}

/* ---- 8: explain is the cycle -------------------------------------------------------------------
 */

static void test_8_explain_is_the_cycle(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "n1", 8, 1, NULL, 0);
    sched(&f, ARB_QP_FIFO, false, false, false, 0);
    arb_job_t *fill = job(&f, "fill", 1, 6, 0, NULL, 0);
    cycle(&f);
    arb_job_t *head = job(&f, "head", 1, 4, 0, NULL, 0);
    arb_job_t *small = job(&f, "small", 1, 2, 0, NULL, 0);
    fill->ext_id = 7;
    head->ext_id = 8;
    arb_explain_t ex;
    fx_snap_t before, after;
    fx_snap(&f, &before);
    assert_int_equal(arb_sched_explain(f.s, small, &f.ctx, &ex), 0);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after); /* the trial left nothing behind */
    assert_false(ex.fits_now);
    assert_true(ex.placeable);
    assert_int_equal(ex.wait, ARB_WAIT_ORDER);
    if (!strstr(ex.summary, "it fits now, but is held behind job 8 'head' (queue order fifo)"))
        fail_msg("summary: %s", ex.summary);
    char json[4096];
    arb_explain_json(f.s, &ex, json, sizeof json);
    assert_non_null(strstr(json, "\"held_by\":{\"job\":8,\"name\":\"head\"}"));
    assert_non_null(strstr(json, "\"wait\":\"held-by-order\""));
    cycle(&f);
    assert_false(holds(small)); /* as said */
    assert_int_equal(arb_sched_finish(f.s, fill, ARB_JOB_SUCCEEDED, NULL), -EPERM);
    assert_int_equal(arb_job_transition(fill, ARB_JOB_RUNNING, NULL), 0);
    assert_int_equal(arb_sched_finish(f.s, fill, ARB_JOB_SUCCEEDED, NULL), 0);
    assert_int_equal(arb_sched_explain(f.s, small, &f.ctx, &ex), 0);
    assert_true(ex.fits_now);
    assert_int_equal(arb_sched_explain(f.s, head, &f.ctx, &ex), 0);
    assert_true(ex.fits_now);
    cycle(&f);
    assert_true(holds(head) && holds(small));
    fx_free(&f);
}

/* No node registered: said so, not "0/0 nodes are available". */
static void test_8_explain_no_nodes(void **st)
{
    fx_t f;
    fx_init(&f);
    sched(&f, ARB_QP_PRIORITY, false, false, false, 0);
    arb_job_t *j = job(&f, "early", 1, 1, 0, NULL, 0);
    arb_explain_t ex;
    assert_int_equal(arb_sched_explain(f.s, j, &f.ctx, &ex), 0);
    assert_non_null(strstr(ex.summary, "no node is registered yet"));
    assert_null(strstr(ex.summary, "0/0"));
    assert_null(strstr(ex.hint, "topology"));
    fx_free(&f);
}

/* Stale nodes are left out and named; their GPUs are not counted free. */
static void test_8_explain_stale(void **st)
{
    fx_t f;
    arb_sched_conf_t conf = {0};
    fx_init(&f);
    fx_node(&f, "fresh", 8, 1, NULL, 0);
    fx_node(&f, "old", 8, 1, NULL, 0);
    conf.profile.stale_ns = 10 * SEC;
    fx_sched_conf(&f, "pack", &conf);
    f.ctx.now_ns = 100 * SEC;
    N(&f, 0)->report_ns = 99 * SEC;
    N(&f, 1)->report_ns = 40 * SEC;
    fx_touch(&f, 0);
    fx_touch(&f, 1);
    arb_job_t *fill = job(&f, "fill", 1, 6, 0, NULL, 0);
    cycle(&f);
    assert_int_equal(fill->alloc[0].node, 0);
    arb_job_t *j = job(&f, "big", 1, 4, 0, NULL, 0);
    arb_explain_t ex;
    assert_int_equal(arb_sched_explain(f.s, j, &f.ctx, &ex), 0);
    assert_false(ex.fits_now);
    assert_int_equal(ex.free_gpu_milli, 2000); /* not the stale node's 8 */
    if (!strstr(ex.summary, "1 node(s) with a stale report (old, last report 60 s ago: left out)"))
        fail_msg("summary: %s", ex.summary);
    assert_null(strstr(ex.hint, "fragmented"));
    fx_free(&f);
}

/* A CPU or memory blocker is named with numbers, and what fits now. */
static void test_8_explain_numbers(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "n1", 8, 1, NULL, 0);
    sched(&f, ARB_QP_PRIORITY, false, false, false, 0);
    arb_job_t *fill = job(&f, "fill", 1, 1, 0, NULL, 0);
    fill->groups[0].req.mem_bytes = 1000 * GIB;
    cycle(&f);
    arb_job_t *j = fx_job_new("mem", 1, 1, 0);
    j->groups[0].req.mem_bytes = 64 * GIB;
    fx_submit(&f, j);
    arb_explain_t ex;
    assert_int_equal(arb_sched_explain(f.s, j, &f.ctx, &ex), 0);
    if (!strstr(ex.summary, "1 insufficient memory (needs 64Gi, the most free on one node 24Gi)"))
        fail_msg("summary: %s", ex.summary);
    assert_int_equal(ex.fit_mem_bytes, 24 * GIB);
    assert_non_null(strstr(ex.hint, "What fits now: the same job with at most 24Gi memory"));
    arb_job_t *g = job(&f, "gpus", 1, 8, 0, NULL, 0);
    assert_int_equal(arb_sched_explain(f.s, g, &f.ctx, &ex), 0);
    assert_int_equal(ex.fit_gpus, 7);
    fx_free(&f);
}

/* ---- settled jobs: an incremental cycle is the full cycle --------------------------------- */

/* Twin schedulers over twin clusters get the same submissions, ends and
 * node changes; one runs its cycles as they come (incremental after a
 * cycle that leaves its marks valid), the other is made to run every cycle
 * in full (a queue update counts as a change). After every cycle each job
 * must be in the same state, on the same nodes, with the same wait reason;
 * and the first must really have skipped settled jobs (without preemption;
 * with it, never), and ended jobs must have left its working set
 * (arb_sched_forget). */
static void twin_job(fx_t *f, arb_rng_t *r, int i, uint64_t pick)
{
    char name[32];
    static const char *const q[] = {"default", "a", "b"};
    snprintf(name, sizeof name, "j%d", i);
    job(f, name, 1 + (int)(pick % 3 == 0), 1 << (int)(pick % 4), (int)(pick / 7 % 3) * 10,
        q[pick / 5 % 3], 0);
    (void)r;
}

static void test_settled_is_full(void **state)
{
    (void)state;
    for (int pol = 0; pol < 3; pol++)
        for (int pre = 0; pre < 2; pre++) {
            fx_t a, b;
            arb_rng_t r;
            int skipped = 0, forgot = 0;
            arb_queue_policy_t qp = pol == 0   ? ARB_QP_FIFO
                                    : pol == 1 ? ARB_QP_PRIORITY
                                               : ARB_QP_DRF;
            fx_init(&a);
            fx_init(&b);
            for (int n = 0; n < 6; n++) {
                char nm[16];
                snprintf(nm, sizeof nm, "n%d", n);
                fx_node(&a, nm, 8, 2, NULL, 0);
                fx_node(&b, nm, 8, 2, NULL, 0);
            }
            sched(&a, qp, false, pre, true, 0);
            sched(&b, qp, false, pre, true, 0);
            arb_rng_seed(&r, 7 + (uint64_t)(pol * 2 + pre));
            for (int round = 0, id = 0; round < 120; round++) {
                int k = (int)arb_rng_below(&r, 4);
                for (int x = 0; x < k; x++, id++) {
                    uint64_t pick = arb_rng_below(&r, 1000);
                    twin_job(&a, &r, id, pick);
                    twin_job(&b, &r, id, pick);
                }
                if (arb_rng_below(&r, 5) == 0) { /* a held job ends, in both */
                    uint32_t want = (uint32_t)arb_rng_below(&r, arb_sched_njobs(a.s));
                    arb_job_t *ja = arb_sched_job(a.s, want), *jb = arb_sched_job(b.s, want);
                    if (ja && holds(ja)) {
                        assert_true(jb && holds(jb));
                        if (ja->state == ARB_JOB_PLACED) { /* it ran, then ended */
                            assert_int_equal(arb_job_transition(ja, ARB_JOB_RUNNING, NULL), 0);
                            assert_int_equal(arb_job_transition(jb, ARB_JOB_RUNNING, NULL), 0);
                        }
                        assert_int_equal(arb_sched_finish(a.s, ja, ARB_JOB_SUCCEEDED, &a.err), 0);
                        assert_int_equal(arb_sched_finish(b.s, jb, ARB_JOB_SUCCEEDED, &b.err), 0);
                        assert_int_equal(arb_sched_forget(a.s, ja, &a.err), 0);
                        assert_null(arb_sched_job(a.s, want));
                        arb_job_free(ja);
                        forgot++;
                    }
                }
                stop_victims(&a);
                stop_victims(&b);
                arb_queue_t dq = {.name = S(&b, "default"), .weight = 1};
                assert_int_equal(arb_sched_set_queue(b.s, &dq, &b.err), 0);
                uint32_t before = a.s->ntodo, pend = 0;
                bool inc = a.s->settled_ok && a.s->settled_gen == a.s->gen &&
                           a.s->settled_ver == a.c.version;
                for (uint32_t i = 0; i < a.s->njobs; i++)
                    pend += a.s->jobs[i]->state == ARB_JOB_PENDING;
                cycle(&a);
                cycle(&b);
                skipped += inc && before < pend;
                for (uint32_t i = 0; i < arb_sched_njobs(b.s); i++) {
                    arb_job_t *ja = arb_sched_job(a.s, i), *jb = arb_sched_job(b.s, i);
                    if (!ja) { /* forgotten in a: ended in b */
                        assert_true(jb->state == ARB_JOB_SUCCEEDED);
                        continue;
                    }
                    if (ja->state != jb->state || ja->wait != jb->wait ||
                        ja->wait_for != jb->wait_for || ja->nalloc != jb->nalloc)
                        fail_msg("policy %d preemption %d round %d job %u: %s/%s wait %s/%s "
                                 "(incremental/full)",
                                 pol, pre, round, i, arb_job_state_name(ja->state),
                                 arb_job_state_name(jb->state), arb_wait_name(ja->wait),
                                 arb_wait_name(jb->wait));
                    for (int t = 0; t < ja->nalloc; t++)
                        assert_int_equal(ja->alloc[t].node, jb->alloc[t].node);
                }
            }
            /* with preemption on every cycle is full (cycle.c, settled jobs) */
            if ((pre ? skipped != 0 : !skipped) || !forgot)
                fail_msg("policy %d preemption %d: %d incremental cycles skipped jobs, %d "
                         "forgotten",
                         pol, pre, skipped, forgot);
            fx_free(&a);
            fx_free(&b);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1_no_livelock_reclaim),
        cmocka_unit_test(test_1_no_livelock_priority),
        cmocka_unit_test(test_1_no_placed_then_evicted),
        cmocka_unit_test(test_1_preemptor_keeps_its_quota),
        cmocka_unit_test(test_1_reclaim_counts_held_quota),
        cmocka_unit_test(test_1_no_livelock_reclaim_priority),
        cmocka_unit_test(test_1_borrower_loses_its_claim),
        cmocka_unit_test(test_2_no_freeze),
        cmocka_unit_test(test_3_starving_reserves_its_nodes),
        cmocka_unit_test(test_4_backfill_limits),
        cmocka_unit_test(test_5_quota_holds_nobody),
        cmocka_unit_test(test_6_preemptor_room),
        cmocka_unit_test(test_gang_min_below_size),
        cmocka_unit_test(test_8_explain_is_the_cycle),
        cmocka_unit_test(test_8_explain_no_nodes),
        cmocka_unit_test(test_8_explain_stale),
        cmocka_unit_test(test_8_explain_numbers),
        cmocka_unit_test(test_settled_is_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
