/*
 * test_nodeclass.c: the node-class index (src/core/nodeclass.c) must never
 * change a decision. The same heterogeneous cluster and random job stream
 * (shares, whole GPUs, multi-task jobs, selectors, taints, finishes, node
 * drains and direct telemetry writes) is run twice per profile, once by node
 * classes and once by a full scan of every node; with deterministic ties
 * every placement must be identical, and the index's invariants must hold
 * after every step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

#define NNODES 40
#define NJOBS 400

static void build(fx_t *f)
{
    for (int i = 0; i < NNODES; i++) {
        char name[16], rack[16];
        snprintf(name, sizeof name, "n%02d", i);
        snprintf(rack, sizeof rack, "r%d", i / 8);
        uint32_t id =
            fx_node(f, name, i % 5 == 4 ? 4 : 8, i % 3 == 0 ? 1 : 2, i % 7 == 0 ? "T4" : "A100", 0);
        fx_label(f, id, "rack", rack);
        if (i % 4 == 0)
            fx_label(f, id, "pool", "batch");
        if (i % 9 == 0)
            arb_node_add_taint(&f->c, N(f, id), "dedicated", "infer", ARB_TAINT_NO_SCHEDULE);
    }
}

static void run(const char *policy, bool full_scan, uint64_t seed, fx_ab_t *tr)
{
    fx_t f;
    arb_rng_t wl;

    fx_init(&f);
    build(&f);
    fx_ab_sched(&f, policy, full_scan);
    arb_rng_seed(&wl, seed);
    for (int i = 0; i < NJOBS; i++) {
        char name[16];
        uint64_t k = arb_rng_below(&wl, 10);
        snprintf(name, sizeof name, "j%d", i);
        arb_job_t *j = fx_job_new(name, k == 9 ? 2 : 1,
                                  k < 4   ? 1
                                  : k < 6 ? 0
                                  : k < 8 ? 4
                                          : 8,
                                  k >= 4 && k < 6 ? 100 * (int)(1 + arb_rng_below(&wl, 9)) : 0);
        if (k == 3)
            fx_selector(&f, j, "pool", "batch");
        if (k == 7)
            fx_model(&f, j, "A100");
        j->groups[0].req.cpu_milli = 1000 * (int64_t)(1 + arb_rng_below(&wl, 16));
        assert_int_equal(arb_job_finalize(j, NULL), 0);
        fx_submit(&f, j);
        fx_ab_record(tr, i, j, arb_sched_place(f.s, j, &f.ctx));
        /* Departures, a drain and a direct telemetry write now and then. */
        if (i % 5 == 4) {
            arb_job_t *o = arb_sched_job(f.s, (uint32_t)arb_rng_below(&wl, (uint64_t)i));
            if (o->state == ARB_JOB_RUNNING)
                assert_int_equal(arb_sched_finish(f.s, o, ARB_JOB_SUCCEEDED, NULL), 0);
        }
        if (i == 150)
            assert_int_equal(arb_node_transition(&f.c, N(&f, 5), ARB_NODE_DRAINING, NULL), 0);
        if (i == 250) {
            N(&f, 6)->gpu[0].temp_c = 70;
            arb_node_touch(&f.c, N(&f, 6));
        }
        fx_ab_step(&f, full_scan);
    }
    fx_free(&f);
}

static void compare(const char *policy)
{
    fx_ab_compare(policy, 3, NJOBS, run, NULL, NULL);
}

static void test_pack(void **st)
{
    compare("pack");
}

static void test_spread(void **st)
{
    compare("spread");
}

static void test_default(void **st)
{
    compare("default");
}

/* Found by the deterministic simulation test: a node joins after the
 * index was built and the first job bound to it goes the per-node path (a
 * topology-confined gang never syncs the classes): binding must not touch
 * an index slot that does not exist yet, and the next sync keys the node. */
static void test_node_added_after_sync(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_sched(&f, "default");
    fx_run(&f, "first", 1, 1, 0); /* builds the index over node a */
    fx_node(&f, "b", 8, 1, NULL, 0);
    N(&f, 0)->state = ARB_NODE_DRAINING;
    fx_touch(&f, 0);
    arb_job_t *g = fx_job_new("gang", 2, 2, 0);
    g->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NODE, true};
    fx_submit(&f, g);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), 0);
    assert_int_equal(g->alloc[0].node, 1);
    assert_int_equal(sched_index_sync(f.s), 0);
    assert_int_equal(sched_index_check(f.s), 0);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_node_added_after_sync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
