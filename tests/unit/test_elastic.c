/*
 * test_elastic.c: elastic training jobs and deferred preemption in the
 * scheduler core. An elastic job starts with what fits at or above its min
 * (nothing below it), grows when capacity frees but never while a job is
 * left pending, gives up tasks above its min one by one as the cheapest
 * victims of a higher-priority job (before any job is evicted whole), is
 * evicted whole when its min must go too; in deferred mode victims are
 * only marked and keep their GPUs until the caller releases them. The spec
 * reader accepts replicas {min, max} and terminationGracePeriodSeconds and
 * names the field and the fix when they are wrong.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"
#include "spec/scenario.h"

static void esched(fx_t *f, bool defer)
{
    arb_sched_conf_t conf = {0};
    conf.preemption = true;
    conf.preempt_defer = defer;
    conf.queue_policy = ARB_QP_PRIORITY;
    fx_sched_conf(f, "pack", &conf);
}

/* An elastic job of 1-GPU tasks: min..max. */
static arb_job_t *elastic(fx_t *f, const char *name, int min, int max, int prio)
{
    arb_job_t *j = fx_job_new(name, max, 1, 0);
    j->elastic = true;
    j->gang_min = min;
    j->priority = prio;
    return fx_submit(f, j);
}

static arb_job_t *plain(fx_t *f, const char *name, int gpus, int prio)
{
    arb_job_t *j = fx_job_new(name, 1, gpus, 0);
    j->priority = prio;
    return fx_submit(f, j);
}

static arb_cycle_stats_t cycle(fx_t *f)
{
    arb_cycle_stats_t cs;
    assert_int_equal(arb_sched_cycle(f->s, &f->ctx, &cs), 0);
    fx_check(f);
    return cs;
}

/* j ran and ended well. */
static void end(fx_t *f, arb_job_t *j)
{
    assert_int_equal(arb_job_transition(j, ARB_JOB_RUNNING, &f->err), 0);
    assert_int_equal(arb_sched_finish(f->s, j, ARB_JOB_SUCCEEDED, &f->err), 0);
}

static bool holds(const arb_job_t *j)
{
    return j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
}

/* Starts at what fits (min when only min fits), grows to max once the
 * blocker ends; the queue's usage follows. */
static void test_start_at_min_then_grow(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *blk = plain(&f, "blocker", 6, 0);
    assert_int_equal(arb_sched_place(f.s, blk, &f.ctx), 0);
    arb_job_t *e = elastic(&f, "el", 2, 8, 0);
    arb_cycle_stats_t cs = cycle(&f);
    assert_int_equal(cs.placed, 1);
    assert_true(holds(e));
    assert_int_equal(e->nalloc, 2);
    uint32_t gen = e->resize_gen;

    end(&f, blk);
    cs = cycle(&f);
    assert_int_equal(cs.grown, 6);
    assert_int_equal(e->nalloc, 8);
    assert_true(e->resize_gen != gen);
    const arb_queue_t *q = arb_sched_queue(f.s, e->queue);
    assert_int_equal(q->used.gpu_milli, 8000);
    cs = cycle(&f); /* at max: nothing more */
    assert_int_equal(cs.grown, 0);
    fx_free(&f);
}

/* Below min nothing starts: the min is all or nothing. */
static void test_min_is_a_gang(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 4, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *blk = plain(&f, "blocker", 3, 5);
    assert_int_equal(arb_sched_place(f.s, blk, &f.ctx), 0);
    arb_job_t *e = elastic(&f, "el", 2, 4, 0);
    cycle(&f);
    assert_int_equal(e->state, ARB_JOB_PENDING);
    assert_int_equal(e->nalloc, 0);
    assert_int_equal(N(&f, 0)->used.gpu_milli, 3000);
    fx_free(&f);
}

/* The growth rule: while a job is left pending, no elastic job grows, so
 * freed capacity is not taken from the queue. */
static void test_no_growth_while_pending(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *blk = plain(&f, "blocker", 6, 0);
    assert_int_equal(arb_sched_place(f.s, blk, &f.ctx), 0);
    arb_job_t *e = elastic(&f, "el", 2, 8, 5);
    cycle(&f);
    assert_int_equal(e->nalloc, 2);
    arb_job_t *big = fx_add(&f, "big", 1, 8, 0); /* 8 GPUs, lower priority: waits */
    end(&f, blk);
    arb_cycle_stats_t cs = cycle(&f);
    assert_int_equal(big->state, ARB_JOB_PENDING);
    assert_int_equal(cs.grown, 0);
    assert_int_equal(e->nalloc, 2);
    /* Once nothing is pending, it grows. */
    assert_int_equal(arb_sched_finish(f.s, big, ARB_JOB_CANCELLED, &f.err), 0);
    cs = cycle(&f);
    assert_int_equal(e->nalloc, 8);
    fx_free(&f);
}

/* A pending job that could not fit even on the empty cluster (a task of
 * 16 GPUs on nodes of 8; a selector no node matches) does not hold growth
 * back: growth cannot affect it. One that fits the empty cluster still does. */
static void test_growth_ignores_unplaceable(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *blk = plain(&f, "blocker", 6, 0);
    assert_int_equal(arb_sched_place(f.s, blk, &f.ctx), 0);
    arb_job_t *e = elastic(&f, "el", 2, 8, 0);
    cycle(&f);
    assert_int_equal(e->nalloc, 2);
    arb_job_t *huge = plain(&f, "huge", 16, 0);
    arb_job_t *nowhere = fx_job_new("nowhere", 1, 1, 0);
    fx_selector(&f, nowhere, "pool", "none-such");
    fx_submit(&f, nowhere);
    arb_job_t *gang = fx_job_new("gang", 3, 4, 0); /* 12 GPUs in all: more than the cluster */
    fx_submit(&f, gang);
    end(&f, blk);
    arb_cycle_stats_t cs = cycle(&f);
    assert_int_equal(huge->state, ARB_JOB_PENDING);
    assert_int_equal(nowhere->state, ARB_JOB_PENDING);
    assert_int_equal(gang->state, ARB_JOB_PENDING);
    assert_int_equal(cs.grown, 6);
    assert_int_equal(e->nalloc, 8);
    /* a job that fits the empty cluster (2 GPUs) but not now blocks growth */
    assert_int_equal(arb_sched_shrink(f.s, e, 7, &f.err), 0);
    arb_job_t *two = plain(&f, "two", 2, 0);
    cs = cycle(&f);
    assert_int_equal(two->state, ARB_JOB_PENDING);
    assert_int_equal(cs.grown, 0);
    assert_int_equal(e->nalloc, 7);
    fx_free(&f);
}

/* Growth keeps the group's required topology: a job confined to one node
 * (or one rack) grows there or not at all. */
static void test_growth_keeps_topology(void **st)
{
    for (int level = ARB_TOPO_NODE; level <= ARB_TOPO_RACK; level++) {
        fx_t f;
        (void)st;
        fx_init(&f);
        uint32_t a = fx_node(&f, "a", 4, 1, NULL, 0);
        uint32_t b = fx_node(&f, "b", 4, 1, NULL, 0);
        uint32_t c = fx_node(&f, "c", 4, 1, NULL, 0);
        fx_label(&f, a, "rack", "r1");
        fx_label(&f, b, "rack", "r1");
        fx_label(&f, c, "rack", "r2");
        esched(&f, false);
        arb_job_t *blk = plain(&f, "blocker", 3, 0); /* on a: 1 GPU left there */
        assert_int_equal(arb_sched_place(f.s, blk, &f.ctx), 0);
        assert_int_equal(blk->alloc[0].node, a);
        arb_job_t *e = fx_job_new("el", 12, 1, 0);
        e->elastic = true;
        e->gang_min = 1;
        e->groups[0].topo.level = (arb_topo_level_t)level;
        e->groups[0].topo.required = true;
        fx_submit(&f, e);
        assert_int_equal(arb_sched_place(f.s, e, &f.ctx), 0);
        uint32_t home = e->alloc[0].node;
        uint32_t rack = N(&f, home)->rack;
        end(&f, blk);
        cycle(&f);
        cycle(&f);
        for (int t = 0; t < e->nalloc; t++)
            if (level == ARB_TOPO_NODE)
                assert_int_equal(e->alloc[t].node, home);
            else
                assert_int_equal(N(&f, e->alloc[t].node)->rack, rack);
        /* it grew as far as its domain allows: the node's 4, the rack's 8 */
        assert_int_equal(e->nalloc, level == ARB_TOPO_NODE ? 4 : rack == N(&f, a)->rack ? 8 : 4);
        fx_free(&f);
    }
}

/* A one-task preemptor takes only what one node needs: ranks stay 0..n-1,
 * so a task goes with every rank above it, and the cheapest node counts
 * those tails. A runs ranks 0..3 on a and 4 on b; B ranks 0..2 on b. A
 * 2-GPU job: on b, A's rank 4 and B's rank 2 (2 tasks); on a, A's ranks
 * 2..4 (3 tasks, rank 4 on b freeing nothing there). Greedy over the
 * cluster took the cheaper job's last ranks, A 4, 3, 2. */
static void test_shrink_takes_what_one_node_needs(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 4, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 4, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *ja = elastic(&f, "A", 1, 5, 0);
    assert_int_equal(arb_sched_place(f.s, ja, &f.ctx), 0);
    arb_job_t *jb = elastic(&f, "B", 1, 6, 0);
    assert_int_equal(arb_sched_place(f.s, jb, &f.ctx), 0);
    assert_int_equal(ja->nalloc, 5);
    assert_int_equal(jb->nalloc, 3);
    for (int t = 0; t < 4; t++)
        assert_int_equal(ja->alloc[t].node, a);
    assert_int_equal(ja->alloc[4].node, b);
    arb_job_t *hi = plain(&f, "hi", 2, 10);
    arb_cycle_stats_t cs = cycle(&f);
    assert_true(holds(hi));
    assert_int_equal(hi->alloc[0].node, b);
    assert_int_equal(cs.preempted, 2);
    assert_int_equal(ja->nalloc, 4); /* rank 4 only */
    assert_int_equal(jb->nalloc, 2); /* rank 2 only */
    fx_free(&f);
}

/* A higher-priority job takes tasks above the min, one by one, the last
 * ranks first: the elastic job keeps running smaller. */
static void test_shrink_before_preempt(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *e = elastic(&f, "el", 2, 8, 0);
    cycle(&f);
    assert_int_equal(e->nalloc, 8);
    arb_task_alloc_t first[5];
    memcpy(first, e->alloc, sizeof first);
    uint32_t gen = e->resize_gen;
    arb_job_t *h = plain(&f, "high", 3, 10);
    arb_cycle_stats_t cs = cycle(&f);
    assert_true(holds(h));
    assert_true(holds(e));
    assert_int_equal(e->nalloc, 5);
    assert_int_equal(cs.shrunk, 3);
    assert_true(e->resize_gen != gen);
    assert_memory_equal(first, e->alloc, sizeof first); /* ranks 0..4 did not move */
    assert_int_equal(arb_sched_queue(f.s, e->queue)->used.gpu_milli, 5000 + 3000);
    fx_free(&f);
}

/* When even its min must go, the elastic job is evicted whole. */
static void test_min_evicted_whole(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *e = elastic(&f, "el", 2, 8, 0);
    cycle(&f);
    arb_job_t *h = plain(&f, "high", 7, 10);
    cycle(&f);
    assert_true(holds(h));
    assert_int_equal(e->state, ARB_JOB_PREEMPTED); /* queued again next cycle */
    assert_int_equal(e->nalloc, 0);
    cycle(&f);
    assert_int_equal(e->state, ARB_JOB_PENDING); /* its min (2) does not fit in 1 */
    assert_int_equal(arb_sched_queue(f.s, e->queue)->used.gpu_milli, 7000);
    fx_free(&f);
}

/* Extras are cheaper than a whole job, even one of lower priority. */
static void test_extras_before_whole_jobs(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *low = plain(&f, "low", 4, 0);
    assert_int_equal(arb_sched_place(f.s, low, &f.ctx), 0);
    arb_job_t *e = elastic(&f, "el", 1, 4, 5);
    cycle(&f);
    assert_int_equal(e->nalloc, 4);
    arb_job_t *h = plain(&f, "high", 2, 10);
    cycle(&f);
    assert_true(holds(h));
    assert_true(holds(low));
    assert_int_equal(e->nalloc, 2);
    fx_free(&f);
}

/* Deferred: victims are only marked and keep every GPU until released;
 * the preemptor waits and chooses no new victims meanwhile. */
static void test_deferred_shrink(void **st)
{
    fx_t f;
    fx_snap_t before, after;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, true);
    arb_job_t *e = elastic(&f, "el", 2, 8, 0);
    cycle(&f);
    assert_int_equal(e->nalloc, 8);
    fx_snap(&f, &before);
    arb_job_t *h = plain(&f, "high", 3, 10);
    arb_cycle_stats_t cs = cycle(&f);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    assert_int_equal(cs.preempted, 1);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    assert_true(h->waiting);
    assert_int_equal(e->nalloc, 8);
    assert_int_equal(e->shrink_to, 5);
    assert_int_equal(e->preempted_by, h->id);
    cs = cycle(&f); /* still stopping: nothing changes, no growth either */
    assert_int_equal(cs.preempted, 0);
    assert_int_equal(cs.grown, 0);
    assert_int_equal(e->shrink_to, 5);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    /* The caller saw tasks 5..7 exit. */
    uint32_t gen = e->resize_gen;
    assert_int_equal(arb_sched_shrink(f.s, e, 5, &f.err), 0);
    assert_true(e->resize_gen != gen);
    assert_int_equal(e->shrink_to, 0);
    cs = cycle(&f);
    assert_true(holds(h));
    assert_false(h->waiting);
    assert_int_equal(e->nalloc, 5);
    fx_free(&f);
}

static void test_deferred_whole(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 4, 1, NULL, 0);
    esched(&f, true);
    arb_job_t *low = plain(&f, "low", 4, 0);
    cycle(&f);
    assert_true(holds(low));
    arb_job_t *h = plain(&f, "high", 2, 10);
    cycle(&f);
    assert_true(low->evicting);
    assert_true(holds(low));
    assert_int_equal(N(&f, 0)->used.gpu_milli, 4000);
    assert_int_equal(h->state, ARB_JOB_PENDING);
    assert_int_equal(arb_sched_finish(f.s, low, ARB_JOB_PREEMPTED, &f.err), 0);
    assert_false(low->evicting);
    cycle(&f);
    assert_true(holds(h));
    assert_int_equal(low->state, ARB_JOB_PENDING); /* 2 GPUs left; it needs 4 */
    fx_free(&f);
}

/* Deferred: two preemptors in one cycle, where the first one's victim
 * frees room for both: the second marks no victim of its own (the
 * higher-priority job keeps running) and is placed once the room is free. */
static void test_deferred_room_being_freed(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 6, 1, NULL, 0);
    esched(&f, true);
    arb_job_t *low = plain(&f, "low", 3, 0);
    arb_job_t *mid = plain(&f, "mid", 3, 5);
    cycle(&f);
    assert_true(holds(low) && holds(mid));
    arb_job_t *h1 = plain(&f, "h1", 1, 10);
    arb_job_t *h2 = plain(&f, "h2", 1, 10);
    cycle(&f);
    assert_true(low->evicting);
    assert_false(mid->evicting); /* low's 3 GPUs are enough for both */
    assert_true(h1->waiting);
    /* h2 marks nothing either: the room low frees is h1's (cycle.c invariant
     * 1), so h2 waits behind it and takes what is left once h1 is placed */
    assert_int_equal(h2->wait, ARB_WAIT_CLAIMED);
    assert_int_equal(h1->state, ARB_JOB_PENDING);
    assert_int_equal(h2->state, ARB_JOB_PENDING);
    assert_int_equal(arb_sched_finish(f.s, low, ARB_JOB_PREEMPTED, &f.err), 0);
    cycle(&f);
    assert_true(holds(h1) && holds(h2) && holds(mid));
    assert_int_equal(low->state, ARB_JOB_PENDING);
    fx_free(&f);
}

static void test_shrink_errors(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    arb_job_t *e = elastic(&f, "el", 2, 4, 0);
    assert_int_equal(arb_sched_shrink(f.s, e, 2, &f.err), -EPERM);
    cycle(&f);
    assert_int_equal(arb_sched_shrink(f.s, e, 1, &f.err), -EINVAL);
    assert_non_null(strstr(f.err.msg, "its min is 2"));
    assert_int_equal(arb_sched_shrink(f.s, e, 5, &f.err), -EINVAL);
    assert_int_equal(arb_sched_shrink(f.s, e, 3, &f.err), 0);
    assert_int_equal(e->nalloc, 3);
    assert_int_equal(arb_sched_queue(f.s, e->queue)->used.gpu_milli, 3000);
    fx_free(&f);
}

/* Quotas: admission counts the min; the tasks above it (the first
 * placement's and growth's) obey the rule a job's start obeys. */
static arb_job_t *elastic_in(fx_t *f, const char *queue, int min, int max)
{
    arb_job_t *e = fx_job_new("el", max, 1, 0);
    e->elastic = true;
    e->gang_min = min;
    e->queue = S(f, queue);
    return fx_submit(f, e);
}

/* A queue without a cohort has nobody to borrow from: an elastic job's
 * tasks stop at its nominal, at the first placement and in growth, as a
 * job's start would (its borrowing limit means nothing alone). */
static void test_quota(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    fx_quota_queue(&f, "team", NULL, 3, 1);
    arb_job_t *e = elastic_in(&f, "team", 2, 8); /* max 8 is above the quota, min 2 is not */
    cycle(&f);
    assert_true(holds(e));
    assert_int_equal(e->nalloc, 3);
    assert_int_equal(arb_sched_queue(f.s, e->queue)->used.gpu_milli, 3000);
    cycle(&f); /* and growth does not go past it */
    assert_int_equal(e->nalloc, 3);
    assert_int_equal(N(&f, 0)->used.gpu_milli, 3000);
    fx_free(&f);
}

/* In a cohort the tasks above min borrow only what the cohort leaves idle:
 * with the other queue using its nominal the job stays at its own; once
 * that ends it grows by its borrowing limit, and no further. */
static void test_quota_borrows_only_idle(void **st)
{
    fx_t f;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    esched(&f, false);
    fx_quota_queue(&f, "team", "c", 3, 2);
    fx_quota_queue(&f, "other", "c", 2, 0);
    arb_job_t *o = fx_job_new("o", 1, 2, 0);
    o->queue = S(&f, "other");
    fx_submit(&f, o);
    arb_job_t *e = elastic_in(&f, "team", 2, 8);
    cycle(&f);
    assert_true(holds(o) && holds(e));
    assert_int_equal(e->nalloc, 3); /* other's nominal is in use: nothing idle to borrow */
    cycle(&f);
    assert_int_equal(e->nalloc, 3);
    assert_int_equal(arb_sched_queue(f.s, e->queue)->used.gpu_milli, 3000);
    end(&f, o);
    cycle(&f); /* idle now: grows by the borrowing limit, 2 */
    assert_int_equal(e->nalloc, 5);
    cycle(&f);
    assert_int_equal(e->nalloc, 5);
    assert_int_equal(arb_sched_queue(f.s, e->queue)->used.gpu_milli, 5000);
    fx_free(&f);
}

/* ---- the spec ------------------------------------------------------------ */

static int load(arb_cluster_t *c, const char *y, arb_job_t **j, arb_err_t *err)
{
    return spec_job_load_mem("job.yaml", y, strlen(y), c, j, err);
}

static void test_spec(void **st)
{
    arb_cluster_t c;
    arb_job_t *j = NULL;
    arb_err_t err;
    (void)st;
    arb_cluster_init(&c);
    assert_int_equal(load(&c,
                          "name: el\nreplicas: {min: 2, max: 8}\n"
                          "resources: {requests: {nvidia.com/gpu: 1}}\n"
                          "terminationGracePeriodSeconds: 45\n",
                          &j, &err),
                     0);
    assert_true(j->elastic);
    assert_int_equal(j->gang_min, 2);
    assert_int_equal(j->ntasks, 8);
    assert_int_equal(j->grace_s, 45);
    arb_job_free(j);
    j = NULL;
    assert_int_equal(load(&c, "name: p\nresources: {requests: {nvidia.com/gpu: 1}}\n", &j, &err),
                     0);
    assert_false(j->elastic);
    assert_int_equal(j->grace_s, -1);
    arb_job_free(j);

    /* the example in examples/ loads */
    char buf[4096];
    FILE *f = fopen(ARB_SOURCE_DIR "/examples/elastic-job.yaml", "re");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    j = NULL;
    /* command: is the controller's field; the spec reader sees the rest */
    char *cmd = strstr(buf, "\ncommand:");
    assert_non_null(cmd);
    cmd[1] = '\0';
    if (load(&c, buf, &j, &err) != 0)
        fail_msg("examples/elastic-job.yaml: %s", err.msg);
    assert_true(j->elastic);
    assert_int_equal(j->gang_min, 2);
    assert_int_equal(j->ntasks, 8);
    assert_int_equal(j->grace_s, 60);
    arb_job_free(j);

    static const struct {
        const char *y, *want;
    } bad[] = {
        {"name: e\nreplicas: {min: 9, max: 8}\n", "min 9 is above max 8"},
        {"name: e\nreplicas: {min: 2}\n", "need both min: and max:"},
        {"name: e\nreplicas: {min: 2, max: 100000}\n", "replicas.max"},
        {"name: e\nreplicas: {min: 2, max: 4, step: 1}\n", "step"},
        {"name: e\nreplicas: {min: 2, max: 4}\ngangMin: 2\n", "drop gangMin"},
        {"name: e\nterminationGracePeriodSeconds: 99999\n", "out of range"},
        {"name: e\ngroups:\n- {name: a, replicas: {min: 1, max: 2}}\n", "one-group job"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = NULL;
        int rc = load(&c, bad[i].y, &j, &err);
        if (rc >= 0 || !strstr(err.msg, bad[i].want))
            fail_msg("case %zu: rc %d, message '%s', wanted '%s'", i, rc, err.msg, bad[i].want);
        assert_null(j);
    }
    arb_cluster_free(&c);
}

/* Isolation: a GPU-share task that denies sharing gets a GPU of its own;
 * tasks that allow it share, but never with it. */
static void test_gpu_sharing(void **st)
{
    fx_t f;
    arb_job_t *svc = NULL, *train = NULL, *other = NULL;
    (void)st;
    fx_init(&f);
    fx_node(&f, "a", 2, 1, NULL, 0);
    esched(&f, false);
    assert_int_equal(load(&f.c,
                          "name: svc\nresources: {requests: {arbiter.io/gpu-share: 500m}}\n"
                          "gpuSharing: allow\n",
                          &svc, &f.err),
                     0);
    assert_int_equal(load(&f.c,
                          "name: train\nresources: {requests: {arbiter.io/gpu-share: 300m}}\n"
                          "gpuSharing: deny\n",
                          &train, &f.err),
                     0);
    assert_int_equal(load(&f.c, "name: o\nresources: {requests: {arbiter.io/gpu-share: 200m}}\n",
                          &other, &f.err),
                     0);
    assert_int_equal(train->groups[0].gpus, 1); /* a GPU of its own */
    assert_int_equal(train->groups[0].gpu_share, 0);
    assert_int_equal(train->gpu_sharing, -1);
    assert_int_equal(svc->gpu_sharing, 1);
    assert_int_equal(arb_sched_submit(f.s, svc, &f.ctx, &f.err), 0);
    assert_int_equal(arb_sched_submit(f.s, train, &f.ctx, &f.err), 0);
    assert_int_equal(arb_sched_submit(f.s, other, &f.ctx, &f.err), 0);
    cycle(&f);
    assert_true(holds(svc) && holds(train) && holds(other));
    assert_int_equal(N(&f, 0)->gpu[__builtin_ctz(train->alloc[0].gpu_mask)].used_milli, 1000);
    assert_int_equal(other->alloc[0].gpu_mask, svc->alloc[0].gpu_mask); /* the sharers share */
    assert_true(train->alloc[0].gpu_mask != svc->alloc[0].gpu_mask);

    arb_job_t *bad = NULL;
    assert_int_equal(load(&f.c, "name: b\ngpuSharing: maybe\n", &bad, &f.err), -EINVAL);
    assert_non_null(strstr(f.err.msg, "use one of: allow, deny"));
    assert_null(bad);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_at_min_then_grow),
        cmocka_unit_test(test_min_is_a_gang),
        cmocka_unit_test(test_no_growth_while_pending),
        cmocka_unit_test(test_shrink_before_preempt),
        cmocka_unit_test(test_min_evicted_whole),
        cmocka_unit_test(test_extras_before_whole_jobs),
        cmocka_unit_test(test_deferred_shrink),
        cmocka_unit_test(test_deferred_whole),
        cmocka_unit_test(test_shrink_errors),
        cmocka_unit_test(test_quota),
        cmocka_unit_test(test_quota_borrows_only_idle),
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_gpu_sharing),
        cmocka_unit_test(test_deferred_room_being_freed),
        cmocka_unit_test(test_growth_ignores_unplaceable),
        cmocka_unit_test(test_growth_keeps_topology),
        cmocka_unit_test(test_shrink_takes_what_one_node_needs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
