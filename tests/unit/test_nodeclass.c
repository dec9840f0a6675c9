/*
 * test_nodeclass.c: the node-class index (src/core/nodeclass.c) must never
 * change a decision. The same heterogeneous cluster and random job stream
 * (shares, whole GPUs, multi-task jobs, selectors, taints, finishes, node
 * drains and direct telemetry writes) is run twice per profile, once by node
 * classes and once by a full scan of every node; with deterministic ties
 * every placement must be identical, and the index's invariants must hold
 * after every step. A longer run (3,000 jobs, exclusive ones among them, and
 * relabels, GPU faults and a thermal limit set mid-run) makes dozens of
 * classes and reuses their slots, summaries and remembered picks.
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

static void run(const char *policy, bool full_scan, uint64_t seed, int njobs, fx_ab_t *tr)
{
    fx_t f;
    arb_rng_t wl;

    fx_init(&f);
    build(&f);
    fx_ab_sched(&f, policy, full_scan);
    arb_rng_seed(&wl, seed);
    for (int i = 0; i < njobs; i++) {
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
        fx_ab_step(&f, full_scan, tr);
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

/* ---- a long run: many classes, churn ---------------------------------- */

#define LNODES 64
#define LJOBS 3000

static arb_job_t *long_job(fx_t *f, arb_rng_t *wl, int i)
{
    char name[16];
    uint64_t k = arb_rng_below(wl, 100);
    int gpus = 1, share = 0, reps = 1;
    arb_job_t *j;

    if (k >= 30 && k < 55)
        gpus = (int[]){2, 3, 4, 8}[arb_rng_below(wl, 4)];
    else if (k >= 55 && k < 77) {
        gpus = 0;
        share = 100 * (int)(1 + arb_rng_below(wl, 9));
    } else if (k >= 85 && k < 92) {
        reps = 2 + (int)arb_rng_below(wl, 2);
        gpus = 1 + (int)arb_rng_below(wl, 2);
    }
    snprintf(name, sizeof name, "l%d", i);
    j = fx_job_new(name, reps, gpus, share);
    j->exclusive = k >= 77 && k < 85; /* whole nodes: the task count's part of the key */
    if (k >= 92 && k < 96)
        fx_model(f, j, "A100"); /* a model list: picked afresh */
    else if (k >= 96 && gpus > 0)
        j->groups[0].req.gpu_mem_mib = 20000; /* device memory: picked afresh */
    if (k % 13 == 0)
        fx_selector(f, j, "pool", "batch");
    /* CPU and memory in step with the GPUs (few values: nodes share classes) */
    j->groups[0].req.cpu_milli = 4000LL * (gpus ? gpus : 1);
    j->groups[0].req.mem_bytes = 16 * GIB * (gpus ? gpus : 1);
    if (k >= 72 && k < 77) { /* asks for nothing: only the task count tells its node */
        j->groups[0].gpu_share = 0;
        j->groups[0].req.cpu_milli = 0;
        j->groups[0].req.mem_bytes = 0;
    }
    assert_int_equal(arb_job_finalize(j, NULL), 0);
    return j;
}

/* Churn between jobs: finishes (the cluster stays busy, so usage states
 * multiply), drains and uncordons, relabels, GPU faults and repairs,
 * temperatures, and the profile's thermal limit changing mid-run. */
static void long_churn(fx_t *f, arb_rng_t *wl, int i, arb_job_t **run, int *nrun)
{
    static const char *const pools[] = {"batch", "infer", "dev"};
    int64_t used = 0, cap = 0;
    for (uint32_t k = 0; k < f->c.nnodes; k++) {
        used += N(f, k)->used.gpu_milli;
        cap += N(f, k)->cap.gpu_milli;
    }
    /* Busy: random jobs end while more than 80% of the GPUs are taken. */
    while (*nrun > 0 && (used * 100 > cap * 80 || arb_rng_below(wl, 3) == 0)) {
        arb_res_t tot;
        int v = (int)arb_rng_below(wl, (uint64_t)*nrun);
        arb_job_total(run[v], &tot);
        used -= tot.gpu_milli;
        assert_int_equal(arb_sched_finish(f->s, run[v], ARB_JOB_SUCCEEDED, NULL), 0);
        run[v] = run[--*nrun];
    }
    uint32_t id = (uint32_t)arb_rng_below(wl, LNODES);
    arb_node_t *n = N(f, id);
    switch (i % 41) {
    case 7:
        if (n->state == ARB_NODE_READY)
            assert_int_equal(arb_node_transition(&f->c, n, ARB_NODE_DRAINING, NULL), 0);
        else if (n->state == ARB_NODE_DRAINING)
            assert_int_equal(arb_node_transition(&f->c, n, ARB_NODE_READY, NULL), 0);
        break;
    case 13:
        fx_label(f, id, "pool", pools[arb_rng_below(wl, 3)]);
        break;
    case 19:
        n->gpu[arb_rng_below(wl, (uint64_t)n->ngpus)].healthy ^= 1;
        fx_touch(f, id);
        break;
    case 29:
        n->gpu[0].temp_c = (int16_t)(60 + arb_rng_below(wl, 30));
        fx_touch(f, id);
        break;
    }
    if (i == LJOBS / 2)
        f->s->conf.profile.thermal_limit_c = 80;
}

static void long_run(const char *policy, bool full_scan, uint64_t seed, int njobs, fx_ab_t *tr)
{
    static arb_job_t *run[LJOBS];
    fx_t f;
    arb_rng_t wl;
    int nrun = 0;

    fx_init(&f);
    for (int i = 0; i < LNODES; i++) {
        char name[16], rack[16];
        snprintf(name, sizeof name, "m%02d", i);
        snprintf(rack, sizeof rack, "r%d", i / 6);
        /* Four kinds of node: 8 GPUs in two NVLink domains or one, 4 T4s,
         * and the first kind in the batch pool. */
        uint32_t id = fx_node(&f, name, i % 4 == 2 ? 4 : 8, i % 4 == 1 || i % 4 == 2 ? 1 : 2,
                              i % 4 == 2 ? "T4" : "A100", 0);
        fx_label(&f, id, "rack", rack);
        if (i % 4 == 3)
            fx_label(&f, id, "pool", "batch");
    }
    fx_ab_sched(&f, policy, full_scan);
    arb_rng_seed(&wl, seed);
    for (int i = 0; i < njobs; i++) {
        arb_job_t *j = long_job(&f, &wl, i);
        fx_submit(&f, j);
        int rc = arb_sched_place(f.s, j, &f.ctx);
        fx_ab_record(tr, i, j, rc);
        if (rc == 0)
            run[nrun++] = j;
        long_churn(&f, &wl, i, run, &nrun);
        fx_ab_step(&f, full_scan, tr);
    }
    fx_free(&f);
}

/* 3,000 jobs with churn, every task's node and GPUs compared with a full
 * scan: long enough that the classes number in the dozens and their slots,
 * summaries and remembered picks are reused many times over. */
static void long_compare(const char *policy)
{
    assert_true(fx_ab_compare(policy, 2, LJOBS, long_run, NULL, NULL) >= 24);
}

static void test_long_default(void **st)
{
    long_compare("default");
}

static void test_long_pack(void **st)
{
    long_compare("pack");
}

/* The class key holds whether a node has a task, not how many: two 1-GPU
 * tasks and one 2-GPU task leave nodes alike, but a node holding a task
 * that asks for nothing is not an idle node to an exclusive job. */
static void test_task_count_key(void **st)
{
    fx_t f;
    fx_init(&f);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", i);
        fx_node(&f, name, 8, 2, NULL, 0);
    }
    fx_sched(&f, "pack");
    f.s->conf.profile.random_ties = false;
    arb_job_t *a = fx_add(&f, "two", 1, 2, 0), *b = fx_add(&f, "one", 1, 1, 0);
    arb_job_t *c = fx_add(&f, "one-more", 1, 1, 0);
    a->groups[0].req.cpu_milli = b->groups[0].req.cpu_milli = c->groups[0].req.cpu_milli = 0;
    a->groups[0].req.mem_bytes = b->groups[0].req.mem_bytes = c->groups[0].req.mem_bytes = 0;
    arb_task_alloc_t on0 = {.node = 0, .gpu_mask = 0x3, .gpu_milli = 1000};
    arb_task_alloc_t on1a = {.node = 1, .gpu_mask = 0x1, .gpu_milli = 1000};
    arb_task_alloc_t on1b = {.node = 1, .gpu_mask = 0x2, .gpu_milli = 1000};
    assert_int_equal(arb_sched_restore(f.s, a, &on0, 1, &f.ctx, &f.err), 0);
    assert_int_equal(arb_sched_restore(f.s, b, &on1a, 1, &f.ctx, &f.err), 0);
    assert_int_equal(arb_sched_restore(f.s, c, &on1b, 1, &f.ctx, &f.err), 0);
    /* A task asking for nothing on node 2. */
    arb_job_t *z = fx_job_new("nothing", 1, 0, 0);
    z->groups[0].req.cpu_milli = 0;
    z->groups[0].req.mem_bytes = 0;
    fx_submit(&f, z);
    arb_task_alloc_t on2 = {.node = 2};
    assert_int_equal(arb_sched_restore(f.s, z, &on2, 1, &f.ctx, &f.err), 0);
    assert_int_equal(sched_index_sync(f.s), 0);
    assert_int_equal(sched_index_check(f.s), 0);
    /* Nodes 0 and 1 share a class; 2 (one task) and 3 (idle) do not. */
    assert_int_equal(f.s->idx.node_cls[0], f.s->idx.node_cls[1]);
    assert_int_not_equal(f.s->idx.node_cls[2], f.s->idx.node_cls[3]);
    assert_int_equal(arb_sched_nclasses(f.s, NULL), 3);
    arb_job_t *x = fx_job_new("whole-node", 1, 1, 0);
    x->exclusive = true;
    fx_submit(&f, x);
    assert_int_equal(arb_sched_place(f.s, x, &f.ctx), 0);
    assert_int_equal(x->alloc[0].node, 3);
    /* With random ties the count itself (draws go class by class, and a
     * seeded run must draw as before): turning them on re-keys the nodes. */
    f.s->conf.profile.random_ties = true;
    assert_int_equal(sched_index_sync(f.s), 0);
    assert_int_equal(sched_index_check(f.s), 0);
    assert_int_not_equal(f.s->idx.node_cls[0], f.s->idx.node_cls[1]);
    assert_int_equal(arb_sched_nclasses(f.s, NULL), 4);
    fx_free(&f);
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
        cmocka_unit_test(test_pack),           cmocka_unit_test(test_spread),
        cmocka_unit_test(test_default),        cmocka_unit_test(test_node_added_after_sync),
        cmocka_unit_test(test_task_count_key), cmocka_unit_test(test_long_default),
        cmocka_unit_test(test_long_pack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
