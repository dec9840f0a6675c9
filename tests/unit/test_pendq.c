/*
 * test_pendq.c: the pending-job index (include/arbiter/pendq.h).
 *
 * The property: a pass of arb_pendq_cycle places exactly what
 * arb_sched_cycle places. Two identical clusters and schedulers are driven
 * by the same random sequence of arrivals (whole GPUs, shares, gangs, GPU
 * models, priorities, two queues) and completions, one cycled by the core,
 * the other through the index; after every step each job's state and
 * allocations must be equal, for FIFO, priority and DRF. Also: the index's
 * bookkeeping (add, remove, first, len) and -ENOTSUP outside the covered
 * configurations.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "arbiter/pendq.h"
#include "core_fixture.h"

#define NJOBS 600

typedef struct side {
    fx_t f;
    arb_pendq_t *q; /* NULL: the core's cycle */
    arb_job_t *jobs[NJOBS];
} side_t;

static void side_init(side_t *sd, arb_queue_policy_t qp, bool indexed)
{
    static const char *const models[] = {"A100", "T4", "A100", "H100"};
    arb_sched_conf_t conf;

    memset(sd, 0, sizeof *sd);
    fx_init(&sd->f);
    for (int i = 0; i < 8; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        fx_node(&sd->f, name, i % 3 == 0 ? 8 : 4, 0, models[i % 4], 0);
    }
    memset(&conf, 0, sizeof conf);
    assert_int_equal(arb_profile_lookup("fgd", &conf.profile, &sd->f.err), 0);
    conf.queue_policy = qp;
    assert_non_null(sd->f.s = arb_sched_new(&sd->f.c, &conf, &sd->f.err));
    if (indexed)
        assert_non_null(sd->q = arb_pendq_new(sd->f.s));
}

static void side_free(side_t *sd)
{
    arb_pendq_free(sd->q);
    arb_sched_free(sd->f.s);
    arb_cluster_free(&sd->f.c);
}

/* Job k of the random sequence (the same on both sides). */
static arb_job_t *make_job(side_t *sd, int k, arb_rng_t *r)
{
    char name[16];
    arb_job_t *j;
    int kind = (int)arb_rng_below(r, 10);

    snprintf(name, sizeof name, "j%d", k);
    assert_non_null(j = arb_job_new(name, 1));
    j->groups[0].replicas = kind == 9 ? 2 : 1; /* a gang now and then */
    if (kind < 5)
        j->groups[0].gpu_share = (int)(100 * (1 + arb_rng_below(r, 9)));
    else if (kind < 9)
        j->groups[0].gpus = 1 << arb_rng_below(r, 3);
    else
        j->groups[0].gpus = 2;
    j->groups[0].req.cpu_milli = (int64_t)(1000 * (1 + arb_rng_below(r, 24)));
    j->groups[0].req.mem_bytes = (int64_t)(1 + arb_rng_below(r, 64)) * GIB;
    j->priority = (int32_t)(100 * arb_rng_below(r, 3));
    j->queue = S(&sd->f, arb_rng_below(r, 2) ? "a" : "b");
    if (arb_rng_below(r, 5) == 0) {
        assert_non_null(j->models = malloc(sizeof *j->models));
        j->models[0] = S(&sd->f, arb_rng_below(r, 2) ? "T4" : "H100");
        j->nmodels = 1;
    }
    assert_int_equal(arb_job_finalize(j, &sd->f.err), 0);
    return j;
}

static void submit(side_t *sd, arb_job_t *j, int k)
{
    assert_int_equal(arb_sched_submit(sd->f.s, j, &sd->f.ctx, &sd->f.err), 0);
    sd->jobs[k] = j;
    if (sd->q)
        assert_int_equal(arb_pendq_add(sd->q, j), 0);
}

static void run_cycle(side_t *sd)
{
    arb_cycle_stats_t st;
    if (sd->q)
        assert_int_equal(arb_pendq_cycle(sd->q, &sd->f.ctx, &st), 0);
    else
        assert_int_equal(arb_sched_cycle(sd->f.s, &sd->f.ctx, &st), 0);
}

static void same(const side_t *a, const side_t *b, int n)
{
    for (int k = 0; k < n; k++) {
        const arb_job_t *x = a->jobs[k], *y = b->jobs[k];
        if (x->state != y->state || x->nalloc != y->nalloc) {
            print_error("job %d: %s/%d vs %s/%d\n", k, arb_job_state_name(x->state), x->nalloc,
                        arb_job_state_name(y->state), y->nalloc);
            fail();
        }
        for (int t = 0; t < x->nalloc; t++)
            assert_memory_equal(&x->alloc[t], &y->alloc[t], sizeof x->alloc[t]);
    }
}

static void equivalence(arb_queue_policy_t qp)
{
    side_t *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    arb_rng_t ra, rb, ev;
    int n = 0, placed = 0, backlog = 0;

    assert_non_null(a);
    assert_non_null(b);
    side_init(a, qp, false);
    side_init(b, qp, true);
    arb_rng_seed(&ra, 7);
    arb_rng_seed(&rb, 7);
    arb_rng_seed(&ev, 11);
    for (int step = 0; n < NJOBS; step++) {
        int arrive = (int)arb_rng_below(&ev, 4);
        a->f.ctx.now_ns = b->f.ctx.now_ns = (int64_t)step * 1000000000;
        for (int i = 0; i < arrive && n < NJOBS; i++, n++) {
            submit(a, make_job(a, n, &ra), n);
            submit(b, make_job(b, n, &rb), n);
        }
        /* Some running jobs end; now and then a waiting one is cancelled. */
        for (int k = 0; k < n; k++) {
            arb_job_t *x = a->jobs[k], *y = b->jobs[k];
            uint64_t roll = arb_rng_below(&ev, 100);
            if ((x->state == ARB_JOB_RUNNING && roll < 4) ||
                (x->state == ARB_JOB_PENDING && roll == 0)) {
                if (y->state == ARB_JOB_PENDING)
                    arb_pendq_remove(b->q, y);
                assert_int_equal(arb_sched_finish(a->f.s, x,
                                                  x->state == ARB_JOB_RUNNING ? ARB_JOB_SUCCEEDED
                                                                              : ARB_JOB_CANCELLED,
                                                  &a->f.err),
                                 0);
                assert_int_equal(arb_sched_finish(b->f.s, y,
                                                  y->state == ARB_JOB_RUNNING ? ARB_JOB_SUCCEEDED
                                                                              : ARB_JOB_CANCELLED,
                                                  &b->f.err),
                                 0);
            }
        }
        run_cycle(a);
        run_cycle(b);
        same(a, b, n);
        for (int k = 0; k < n; k++) /* what was placed starts */
            if (a->jobs[k]->state == ARB_JOB_PLACED) {
                arb_job_transition(a->jobs[k], ARB_JOB_RUNNING, NULL);
                arb_job_transition(b->jobs[k], ARB_JOB_RUNNING, NULL);
            }
        {
            arb_job_t *const *v;
            placed += arb_pendq_placed(b->q, &v);
        }
        int pend = 0;
        for (int k = 0; k < n; k++)
            pend += a->jobs[k]->state == ARB_JOB_PENDING;
        assert_int_equal(arb_pendq_len(b->q), pend);
        backlog = pend > backlog ? pend : backlog;
    }
    print_message("%d jobs, %d placed through the index, up to %d waiting, all as the core's "
                  "cycle\n",
                  n, placed, backlog);
    assert_true(placed > NJOBS / 3);
    assert_true(backlog > 30); /* a real backlog, where skipping matters */
    side_free(a);
    side_free(b);
    free(a);
    free(b);
}

static void test_same_as_cycle_fifo(void **state)
{
    equivalence(ARB_QP_FIFO);
}

static void test_same_as_cycle_priority(void **state)
{
    equivalence(ARB_QP_PRIORITY);
}

static void test_same_as_cycle_drf(void **state)
{
    equivalence(ARB_QP_DRF);
}

static void test_bookkeeping(void **state)
{
    side_t *sd = calloc(1, sizeof *sd);
    arb_rng_t r;
    arb_cycle_stats_t st;

    assert_non_null(sd);
    side_init(sd, ARB_QP_PRIORITY, true);
    arb_rng_seed(&r, 3);
    assert_null(arb_pendq_first(sd->q));
    for (int k = 0; k < 5; k++)
        submit(sd, make_job(sd, k, &r), k);
    assert_int_equal(arb_pendq_len(sd->q), 5);
    assert_ptr_equal(arb_pendq_first(sd->q), sd->jobs[0]);        /* the oldest */
    assert_int_equal(arb_pendq_add(sd->q, sd->jobs[0]), -EINVAL); /* already in */
    arb_pendq_remove(sd->q, sd->jobs[0]);
    arb_pendq_remove(sd->q, sd->jobs[0]); /* a no-op */
    assert_int_equal(arb_pendq_len(sd->q), 4);
    assert_ptr_equal(arb_pendq_first(sd->q), sd->jobs[1]);
    assert_int_equal(arb_pendq_add(sd->q, sd->jobs[0]), 0);
    assert_ptr_equal(arb_pendq_first(sd->q), sd->jobs[0]);
    /* Outside the covered configurations: nothing done. (Freeing the
     * scheduler frees the jobs submitted to it.) */
    arb_pendq_free(sd->q);
    sd->q = NULL;
    arb_sched_free(sd->f.s);
    {
        arb_sched_conf_t conf;
        arb_pendq_t *q;
        memset(&conf, 0, sizeof conf);
        assert_int_equal(arb_profile_lookup("fgd", &conf.profile, &sd->f.err), 0);
        conf.queue_policy = ARB_QP_PRIORITY;
        conf.preemption = true;
        assert_non_null(sd->f.s = arb_sched_new(&sd->f.c, &conf, &sd->f.err));
        assert_non_null(q = arb_pendq_new(sd->f.s));
        assert_int_equal(arb_pendq_cycle(q, &sd->f.ctx, &st), -ENOTSUP);
        arb_pendq_free(q);
    }
    side_free(sd);
    free(sd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_cycle_fifo),
        cmocka_unit_test(test_same_as_cycle_priority),
        cmocka_unit_test(test_same_as_cycle_drf),
        cmocka_unit_test(test_bookkeeping),
    };
    return cmocka_run_group_tests_name("pendq", tests, NULL, NULL);
}
