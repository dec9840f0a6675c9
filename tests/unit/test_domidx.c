/*
 * test_domidx.c: the topology domain indexes (src/core/domidx.c) and the
 * node classes must never change a decision. Randomized clusters (seeded:
 * 4- and 8-GPU nodes, one, two or no NVLink domains, racks and blocks of
 * uneven sizes, some nodes without the labels) take a random stream of jobs
 * (whole GPUs, shares, gangs preferring or requiring one rack, block or
 * node, NVLink-confined pairs, rack selectors) with finishes, drains, node
 * removals, relabels, GPU faults and nodes joining in between. Each stream
 * runs twice per profile, indexed and with conf.full_scan (every domain
 * listed, every node scanned); with deterministic ties every task's node
 * and GPUs must be identical, and the indexes' invariants must hold after
 * every step (so they stay in sync through frees and node changes). Two
 * streams run 2,500 jobs, so that classes are made and retired many times.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

#define MAXNODES 96
#define NJOBS 500
#define LONGJOBS 2500 /* the long runs: many classes made and retired */
#define MAXT FX_AB_TASKS

static void add_node(fx_t *f, arb_rng_t *r, int i)
{
    char name[16], rack[16], block[16];
    int kind = (int)arb_rng_below(r, 6);
    uint32_t id;

    snprintf(name, sizeof name, "n%03d", i);
    id = fx_node(f, name, kind == 0 ? 4 : 8,
                 kind == 1   ? 0
                 : kind == 2 ? 1
                             : 2,
                 kind == 3 ? "T4" : "A100", 0);
    if (arb_rng_below(r, 10) < 9) { /* racks of uneven sizes; some nodes unlabeled */
        snprintf(rack, sizeof rack, "r%d", (int)arb_rng_below(r, 1 + (uint64_t)i / 6));
        fx_label(f, id, "rack", rack);
    }
    if (arb_rng_below(r, 10) < 8) {
        snprintf(block, sizeof block, "b%d", (int)arb_rng_below(r, 3));
        fx_label(f, id, "block", block);
    }
}

static arb_job_t *make_job(fx_t *f, arb_rng_t *r, int i)
{
    char name[16];
    int k = (int)arb_rng_below(r, 20);
    arb_job_t *j;

    snprintf(name, sizeof name, "j%d", i);
    if (k < 5) {
        j = fx_job_new(name, 1, 1 + (int)arb_rng_below(r, 4), 0);
    } else if (k < 7) {
        j = fx_job_new(name, 1, 0, 100 * (int)(1 + arb_rng_below(r, 9)));
    } else if (k < 10) { /* rack gangs, required or preferred */
        j = fx_job_new(name, 2 + (int)arb_rng_below(r, 6), 1 + (int)arb_rng_below(r, 8), 0);
        j->groups[0].topo = (arb_topo_req_t){ARB_TOPO_RACK, k < 9};
    } else if (k < 12) {
        j = fx_job_new(name, 2 + (int)arb_rng_below(r, 10), 2 + (int)arb_rng_below(r, 6), 0);
        j->groups[0].topo = (arb_topo_req_t){ARB_TOPO_BLOCK, k < 11};
    } else if (k < 14) { /* all on one node */
        j = fx_job_new(name, 2 + (int)arb_rng_below(r, 3), 1 + (int)arb_rng_below(r, 2), 0);
        j->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NODE, k < 13};
    } else if (k < 16) { /* tensor-parallel pairs in one NVLink domain */
        j = fx_job_new(name, 2, 1 + (int)arb_rng_below(r, 2), 0);
        j->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, k < 15};
    } else if (k < 18) { /* gangs without a topology level */
        j = fx_job_new(name, 2 + (int)arb_rng_below(r, 4), 1 + (int)arb_rng_below(r, 8), 0);
    } else {
        j = fx_job_new(name, 2 + (int)arb_rng_below(r, 3), 4, 0);
        j->groups[0].topo = (arb_topo_req_t){ARB_TOPO_RACK, true};
        if (k == 18)
            fx_selector(f, j, "rack", "r0");
        else
            fx_model(f, j, "A100");
    }
    j->groups[0].req.cpu_milli = 1000 * (int64_t)(1 + arb_rng_below(r, 24));
    if (j->groups[0].replicas > MAXT)
        j->groups[0].replicas = MAXT;
    return j;
}

static void run(const char *policy, bool full_scan, uint64_t seed, int njobs, fx_ab_t *tr)
{
    fx_t f;
    arb_rng_t cl, wl;
    int nnodes;

    fx_init(&f);
    arb_rng_seed(&cl, seed);
    nnodes = 24 + (int)arb_rng_below(&cl, MAXNODES - 24 - 8);
    for (int i = 0; i < nnodes; i++)
        add_node(&f, &cl, i);
    fx_ab_sched(&f, policy, full_scan);
    arb_rng_seed(&wl, seed * 7919);
    for (int i = 0; i < njobs; i++) {
        arb_job_t *j = fx_submit(&f, make_job(&f, &wl, i));
        int ev = (int)arb_rng_below(&wl, 100);

        fx_ab_record(tr, i, j, arb_sched_place(f.s, j, &f.ctx));
        /* Frees most often, and now and then a change to a node. */
        for (int e = 0; e < 2 && i > 0; e++) {
            arb_job_t *o = arb_sched_job(f.s, (uint32_t)arb_rng_below(&wl, (uint64_t)i));
            if (o && o->state == ARB_JOB_RUNNING)
                assert_int_equal(arb_sched_finish(f.s, o, ARB_JOB_SUCCEEDED, NULL), 0);
        }
        uint32_t nid = (uint32_t)arb_rng_below(&wl, f.c.nnodes);
        arb_node_t *n = N(&f, nid);
        if (ev < 2 && n->state == ARB_NODE_READY) {
            assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_DRAINING, NULL), 0);
        } else if (ev < 3 && n->state == ARB_NODE_DRAINING && n->ntasks == 0) {
            assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_LEFT, NULL), 0);
        } else if (ev < 5 && n->state != ARB_NODE_LEFT) { /* moved to another rack */
            char rack[16];
            snprintf(rack, sizeof rack, "r%d", (int)arb_rng_below(&wl, 6));
            fx_label(&f, nid, "rack", rack);
        } else if (ev < 7 && n->state != ARB_NODE_LEFT && n->ngpus > 0) {
            int g = (int)arb_rng_below(&wl, (uint64_t)n->ngpus);
            if (n->gpu[g].used_milli == 0) { /* a GPU fault, or its repair */
                n->gpu[g].healthy = !n->gpu[g].healthy;
                fx_touch(&f, nid);
            }
        } else if (ev < 8 && f.c.nnodes < MAXNODES) {
            add_node(&f, &wl, (int)f.c.nnodes);
        }
        fx_ab_step(&f, full_scan, tr);
    }
    fx_free(&f);
}

static void compare_runs(const char *policy, uint64_t seeds, int njobs)
{
    int placed = 0, gangs = 0;

    uint32_t classes = fx_ab_compare(policy, (int)seeds, njobs, run, &placed, &gangs);
    if (njobs > NJOBS)
        assert_true(classes >= 40);
    /* The streams must exercise both outcomes, and gangs. */
    assert_true(placed > (int)seeds * njobs / 6);
    assert_true(placed < (int)seeds * njobs);
    assert_true(gangs > 100);
}

static void compare(const char *policy)
{
    compare_runs(policy, 6, NJOBS);
}

/* Two streams of 2,500 jobs: the churn makes and retires classes many
 * times over, and near/far and rack attempts meet many of them. */
static void test_long(void **st)
{
    compare_runs("default", 2, LONGJOBS);
}

/* Every profile in the table, not only the three above: a scoring plugin
 * whose state moves with when it is asked to score (a lazy rebuild, a
 * check at score time) differs between the engines, as the indexed one
 * scores fewer nodes and sometimes none (one candidate, or one class). */
static void test_all_profiles(void **st)
{
    fx_ab_compare_all(4, LONGJOBS, run);
}

static void test_default(void **st)
{
    compare("default");
}

static void test_pack(void **st)
{
    compare("pack");
}

static void test_spread(void **st)
{
    compare("spread");
}

/* The listing leaves out what cannot hold the group and keeps best fit:
 * four racks, the gang of 2 x 4 GPUs fits in racks b (8 free, two nodes of
 * 4) and d (16 free): b is tried first; rack c has 12 free GPUs but no
 * node with 4 of them, so it is not listed at all. */
static void test_listing(void **st)
{
    fx_t f;
    const char *racks[] = {"a", "b", "b", "c", "c", "c", "c", "d", "d"};
    dom_cand_t *v;
    int n;

    fx_init(&f);
    for (int i = 0; i < 9; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        fx_node(&f, name, 8, 2, NULL, 0);
        fx_label(&f, (uint32_t)i, "rack", racks[i]);
    }
    /* Faulty GPUs shape the free room: rack a none, b 4 + 4, c 3 on each. */
    for (int i = 0; i < 7; i++) {
        int bad = i == 0 ? 8 : i < 3 ? 4 : 5;
        for (int k = 0; k < bad; k++)
            N(&f, (uint32_t)i)->gpu[k].healthy = false;
        fx_touch(&f, (uint32_t)i);
    }
    fx_sched(&f, "pack");
    arb_job_t *g = fx_job_new("gang", 2, 4, 0);
    g->groups[0].topo = (arb_topo_req_t){ARB_TOPO_RACK, true};
    fx_submit(&f, g);
    n = sched_domidx_list(f.s, g, &g->groups[0], 2, true, &v);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].free, 8);
    assert_int_equal(f.c.nodes[v[0].d.node].rack, S(&f, "b"));
    assert_int_equal(v[1].free, 16);
    free(v);
    /* Without the per-node pruning rack c is listed, between b and d. */
    n = sched_domidx_list(f.s, g, &g->groups[0], 2, false, &v);
    assert_int_equal(n, 3);
    assert_int_equal(v[1].free, 12);
    free(v);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), 0);
    assert_int_equal(f.c.nodes[g->alloc[0].node].rack, S(&f, "b"));
    assert_int_equal(sched_index_check(f.s), 0);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default), cmocka_unit_test(test_pack),
        cmocka_unit_test(test_spread),  cmocka_unit_test(test_long),
        cmocka_unit_test(test_listing), cmocka_unit_test(test_all_profiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
