/*
 * test_gang.c: DESIGN.md invariants 1 and 3 and topology placement.
 *
 *  - Invariant 1 (no GPU over capacity): arb_node_alloc refuses every
 *    over-capacity charge and changes nothing; a randomized run of many
 *    jobs (shares, whole GPUs, gangs with topology, elastic gangs,
 *    preemption, node churn) under several profiles checks the cluster and
 *    a from-scratch recount of every allocation after every step.
 *  - Invariant 3 (gangs all or nothing): a gang that fits only in part
 *    leaves the cluster exactly as it was; an elastic gang starts with at
 *    least gang_min.
 *  - Topology: rack / node / NVLink requirements, best-fit domain choice,
 *    preferred topology falling back to spanning.
 *  - Determinism: the same inputs and seed give the same placements.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

/* ---- invariant 1, directly ------------------------------------------------ */

static void test_node_alloc_rejects_over_capacity(void **st)
{
    fx_t f;
    fx_snap_t before, after;
    arb_err_t e;
    arb_res_t req = {.cpu_milli = 1000, .mem_bytes = GIB};
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 4, 1, NULL, 1000);
    N(&f, a)->cap.cpu_milli = 4000;
    N(&f, a)->cap.mem_bytes = 8 * GIB;
    fx_touch(&f, a);

    /* 600m on GPU 0, then another 600m there must fail. */
    arb_task_alloc_t s6 = {.node = a, .gpu_mask = 0x1, .gpu_milli = 600, .gpu_mem_mib = 100};
    assert_int_equal(arb_node_alloc(&f.c, &req, &s6, &e), 0);
    fx_snap(&f, &before);
    assert_int_equal(arb_node_alloc(&f.c, &req, &s6, &e), -ENOSPC);
    assert_non_null(strstr(e.msg, "GPU 0"));
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);

    static const struct {
        arb_task_alloc_t a;
        arb_res_t req;
        int rc;
    } bad[] = {
        /* whole GPU over a share */
        {{0, 0x1, 1000, 0}, {0}, -ENOSPC},
        /* a mask with one full and one free GPU: nothing may be charged */
        {{0, 0x3, 500, 0}, {0}, -ENOSPC},
        /* device memory */
        {{0, 0x2, 100, 1001}, {0}, -ENOSPC},
        {{0, 0x1, 100, 901}, {0}, -ENOSPC},
        /* GPUs the node does not have */
        {{0, 0x10, 100, 0}, {0}, -EINVAL},
        {{0, 0x8000, 100, 0}, {0}, -EINVAL},
        /* share out of range */
        {{0, 0x2, 1001, 0}, {0}, -EINVAL},
        {{0, 0x2, 0, 0}, {0}, -EINVAL},
        {{0, 0x2, -5, 0}, {0}, -EINVAL},
        /* host resources */
        {{0, 0x0, 0, 0}, {.cpu_milli = 3001}, -ENOSPC},
        {{0, 0x0, 0, 0}, {.mem_bytes = 7 * GIB + 1}, -ENOSPC},
        {{0, 0x0, 0, 0}, {.ext = {1}}, -ENOSPC},
        {{0, 0x0, 0, 0}, {.cpu_milli = INT64_MAX}, -ENOSPC},
        /* negative amounts would shrink usage below what is really held */
        {{0, 0x0, 0, 0}, {.cpu_milli = -1000}, -EINVAL},
        {{0, 0x0, 0, 0}, {.mem_bytes = -1}, -EINVAL},
        {{0, 0x2, 100, -50}, {0}, -EINVAL},
        /* a node that does not exist */
        {{99, 0x0, 0, 0}, {0}, -EINVAL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        arb_task_alloc_t x = bad[i].a;
        if (x.node != 99)
            x.node = a;
        e.msg[0] = '\0';
        int rc = arb_node_alloc(&f.c, &bad[i].req, &x, &e);
        if (rc != bad[i].rc)
            fail_msg("case %zu: rc %d, want %d (%s)", i, rc, bad[i].rc, e.msg);
        assert_true(e.msg[0] != '\0');
        fx_snap(&f, &after);
        fx_snap_equal(&before, &after);
        fx_check(&f);
    }

    /* Unhealthy GPU. */
    N(&f, a)->gpu[3].healthy = 0;
    fx_touch(&f, a);
    arb_task_alloc_t u = {.node = a, .gpu_mask = 0x8, .gpu_milli = 1000};
    assert_int_equal(arb_node_alloc(&f.c, &(arb_res_t){0}, &u, &e), -ENOSPC);

    /* Exactly full is fine: 400m more on GPU 0, 900 MiB of memory. */
    arb_task_alloc_t s4 = {.node = a, .gpu_mask = 0x1, .gpu_milli = 400, .gpu_mem_mib = 900};
    assert_int_equal(arb_node_alloc(&f.c, &(arb_res_t){0}, &s4, &e), 0);
    assert_int_equal(N(&f, a)->gpu[0].used_milli, 1000);
    assert_int_equal(N(&f, a)->gpu[0].mem_used_mib, 1000);
    fx_check(&f);
    arb_node_release(&f.c, &(arb_res_t){0}, &s4);
    arb_node_release(&f.c, &req, &s6);
    assert_int_equal(N(&f, a)->used.gpu_milli, 0);
    assert_int_equal(N(&f, a)->used.cpu_milli, 0);
    fx_check(&f);

    /* arb_cluster_check catches a corrupted node. */
    N(&f, a)->gpu[1].used_milli = 1200;
    N(&f, a)->used.gpu_milli = 1200;
    assert_int_equal(arb_cluster_check(&f.c, &e), -EFAULT);
    assert_non_null(strstr(e.msg, "GPU 1"));
    N(&f, a)->gpu[1].used_milli = 300;
    assert_int_equal(arb_cluster_check(&f.c, &e), -EFAULT); /* accounting mismatch */
    N(&f, a)->gpu[1].used_milli = 0;
    N(&f, a)->used.gpu_milli = 0;
    arb_cluster_free(&f.c);
}

/* ---- invariant 1, randomized ---------------------------------------------- */

/* Recount every node's usage from the jobs' allocations and compare; check
 * each job's allocation against its state and gang minimum. */
static void recount(fx_t *f)
{
    static arb_res_t used[64];
    static int32_t gu[64][ARB_MAX_GPUS], gm[64][ARB_MAX_GPUS];
    static int nt[64];
    uint32_t nn = f->c.nnodes;

    fx_check(f);
    memset(used, 0, sizeof used);
    memset(gu, 0, sizeof gu);
    memset(gm, 0, sizeof gm);
    memset(nt, 0, sizeof nt);
    for (uint32_t id = 0; id < arb_sched_njobs(f->s); id++) {
        arb_job_t *j = arb_sched_job(f->s, id);
        bool holds = j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
        if (!holds) {
            if (j->nalloc != 0)
                fail_msg("job %s is %s but holds %d tasks", j->name, arb_job_state_name(j->state),
                         j->nalloc);
            continue;
        }
        if (j->nalloc < j->gang_min || j->nalloc > j->ntasks)
            fail_msg("job %s holds %d tasks, gang_min %d of %d", j->name, j->nalloc, j->gang_min,
                     j->ntasks);
        for (int t = 0; t < j->nalloc; t++) {
            const arb_task_alloc_t *a = &j->alloc[t];
            const arb_tgroup_t *g = arb_job_task_group(j, t, NULL);
            arb_res_t r = g->req;
            int ng = __builtin_popcount(a->gpu_mask);
            assert_true(a->node < nn);
            assert_int_equal(ng, g->gpus ? g->gpus : g->gpu_share ? 1 : 0);
            r.gpu_milli = (int64_t)ng * a->gpu_milli;
            r.gpu_mem_mib = (int64_t)ng * a->gpu_mem_mib;
            arb_res_add(&used[a->node], &r);
            nt[a->node]++;
            for (int i = 0; i < ARB_MAX_GPUS; i++)
                if (a->gpu_mask & (1u << i)) {
                    gu[a->node][i] += a->gpu_milli;
                    gm[a->node][i] += a->gpu_mem_mib;
                }
        }
    }
    for (uint32_t i = 0; i < nn; i++) {
        const arb_node_t *n = &f->c.nodes[i];
        if (memcmp(&used[i], &n->used, sizeof used[i]) != 0)
            fail_msg("node %s: usage %lld milli / %lld cpu, allocations say %lld / %lld",
                     arb_node_name(&f->c, n), (long long)n->used.gpu_milli,
                     (long long)n->used.cpu_milli, (long long)used[i].gpu_milli,
                     (long long)used[i].cpu_milli);
        assert_int_equal(nt[i], n->ntasks);
        for (int g = 0; g < n->ngpus; g++) {
            assert_int_equal(gu[i][g], n->gpu[g].used_milli);
            assert_int_equal(gm[i][g], n->gpu[g].mem_used_mib);
        }
    }
}

/* A mixed cluster: 12 nodes in 3 racks, 8- and 16-GPU nodes with 1 or 2
 * NVLink domains, one 4-GPU node without NVLink, two GPU memory sizes. */
static void mixed_cluster(fx_t *f)
{
    static const struct {
        int gpus, dom;
        int32_t mem;
        const char *model;
    } shape[] = {
        {8, 1, 81920, "A100"}, {8, 2, 81920, "A100"}, {16, 2, 81920, "H100"}, {4, 0, 40960, "T4"}};
    for (int i = 0; i < 12; i++) {
        char nm[32], rk[16];
        snprintf(nm, sizeof nm, "n%02d", i);
        snprintf(rk, sizeof rk, "r%d", i % 3);
        int k = i % 4;
        uint32_t id = fx_node(f, nm, shape[k].gpus, shape[k].dom, shape[k].model, shape[k].mem);
        fx_label(f, id, "rack", rk);
    }
}

static arb_job_t *random_job(fx_t *f, arb_rng_t *r, int i)
{
    char nm[32];
    int kind = (int)arb_rng_below(r, 10);
    arb_job_t *j;
    snprintf(nm, sizeof nm, "r%d", i);
    if (kind < 3) { /* share */
        j = fx_job_new(nm, 1, 0, 50 + (int)arb_rng_below(r, 900));
        j->groups[0].req.gpu_mem_mib = (int64_t)arb_rng_below(r, 30000);
    } else if (kind < 6) { /* whole GPUs */
        static const int g[] = {1, 1, 2, 4, 8, 16};
        j = fx_job_new(nm, 1, g[arb_rng_below(r, 6)], 0);
        if (arb_rng_below(r, 3) == 0)
            j->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, arb_rng_below(r, 2) == 0};
    } else if (kind < 9) { /* gang */
        static const arb_topo_level_t lv[] = {ARB_TOPO_ANY, ARB_TOPO_NVLINK, ARB_TOPO_NODE,
                                              ARB_TOPO_RACK};
        j = fx_job_new(nm, 2 + (int)arb_rng_below(r, 4), 1 + (int)arb_rng_below(r, 8), 0);
        j->groups[0].topo = (arb_topo_req_t){lv[arb_rng_below(r, 4)], arb_rng_below(r, 2) == 0};
        if (arb_rng_below(r, 3) == 0)
            j->gang_min = 1 + (int)arb_rng_below(r, (uint64_t)j->groups[0].replicas);
    } else { /* two groups: a launcher (share or CPU) and workers */
        arb_job_t *k = arb_job_new(nm, 2);
        arb_tgroup_set_name(&k->groups[0], "launcher");
        arb_tgroup_set_name(&k->groups[1], "worker");
        k->groups[0].gpu_share = arb_rng_below(r, 2) ? 250 : 0;
        k->groups[0].req.cpu_milli = 2000;
        k->groups[1].replicas = 1 + (int)arb_rng_below(r, 4);
        k->groups[1].gpus = 1 + (int)arb_rng_below(r, 4);
        k->groups[1].req.cpu_milli = 4000;
        k->groups[1].req.mem_bytes = 32 * GIB;
        j = k;
    }
    j->priority = (int32_t)arb_rng_below(r, 4);
    j->preemptible = arb_rng_below(r, 5) != 0;
    j->time_limit_s = arb_rng_below(r, 2) ? 0 : 60 + (int64_t)arb_rng_below(r, 3600);
    if (arb_rng_below(r, 8) == 0)
        fx_model(f, j, "H100");
    return j;
}

static void random_run(const char *policy, uint64_t seed, bool preempt, bool backfill)
{
    fx_t f;
    arb_rng_t r;
    arb_sched_conf_t conf = {0};
    arb_job_t *live[512];
    int nlive = 0;
    fx_init(&f);
    arb_rng_seed(&r, seed);
    mixed_cluster(&f);
    conf.preemption = preempt;
    conf.backfill = backfill;
    conf.queue_policy = (arb_queue_policy_t)(seed % 3);
    if (arb_profile_lookup(policy, &conf.profile, NULL) < 0) {
        arb_cluster_free(&f.c);
        return; /* a policy not built into this binary */
    }
    fx_sched_conf(&f, policy, &conf);
    for (int step = 0; step < 400; step++) {
        int op = (int)arb_rng_below(&r, 20);
        f.ctx.now_ns += 1000000000LL;
        if (op < 9) {
            arb_job_t *j = fx_submit(&f, random_job(&f, &r, step));
            if (arb_rng_below(&r, 2))
                (void)arb_sched_place(f.s, j, &f.ctx);
        } else if (op < 14) {
            arb_cycle_stats_t cs;
            assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
        } else if (op < 18) {
            /* end a random holding job */
            nlive = 0;
            for (uint32_t id = 0; id < arb_sched_njobs(f.s) && nlive < 512; id++) {
                arb_job_t *j = arb_sched_job(f.s, id);
                if (j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING)
                    live[nlive++] = j;
            }
            if (nlive) {
                arb_job_t *j = live[arb_rng_below(&r, (uint64_t)nlive)];
                static const arb_job_state_t ends[] = {ARB_JOB_FAILED, ARB_JOB_CANCELLED,
                                                       ARB_JOB_PREEMPTED};
                if (j->state == ARB_JOB_PLACED && arb_rng_below(&r, 2))
                    assert_int_equal(arb_job_transition(j, ARB_JOB_RUNNING, NULL), 0);
                arb_job_state_t to = j->state == ARB_JOB_RUNNING && arb_rng_below(&r, 2)
                                         ? ARB_JOB_SUCCEEDED
                                         : ends[arb_rng_below(&r, 3)];
                assert_int_equal(arb_sched_finish(f.s, j, to, &f.err), 0);
            }
        } else {
            /* node churn: drain / uncordon / not ready, and a fresh report */
            arb_node_t *n = N(&f, (uint32_t)arb_rng_below(&r, f.c.nnodes));
            static const arb_node_state_t to[] = {ARB_NODE_READY, ARB_NODE_NOT_READY,
                                                  ARB_NODE_DRAINING};
            (void)arb_node_transition(&f.c, n, to[arb_rng_below(&r, 3)], NULL);
            n->report_ns = f.ctx.now_ns;
            arb_node_touch(&f.c, n);
        }
        recount(&f);
        /* explain never changes anything */
        if (step % 37 == 0) {
            for (uint32_t id = 0; id < arb_sched_njobs(f.s); id++) {
                arb_job_t *j = arb_sched_job(f.s, id);
                if (j->state == ARB_JOB_PENDING) {
                    fx_snap_t a, b;
                    arb_explain_t ex;
                    char json[4096];
                    fx_snap(&f, &a);
                    fx_explain(&f, j, &ex, json, sizeof json);
                    fx_snap(&f, &b);
                    fx_snap_equal(&a, &b);
                    recount(&f);
                    break;
                }
            }
        }
    }
    fx_free(&f);
}

static void test_random_never_over_capacity(void **st)
{
    static const char *const policies[] = {"pack",    "spread", "default", "fgd",
                                           "bestfit", "random", "dotprod", "gpu-packing"};
    for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++)
        for (uint64_t seed = 1; seed <= 4; seed++)
            random_run(policies[p], seed * 7919 + p, seed % 2 == 0, seed >= 3);
}

/* ---- invariant 3 ------------------------------------------------------------ */

static void test_gang_all_or_nothing(void **st)
{
    fx_t f;
    fx_snap_t before, after;
    fx_init(&f);
    for (int i = 0; i < 3; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "n%d", i);
        fx_node(&f, nm, 8, 1, NULL, 0);
    }
    fx_sched(&f, "pack");
    arb_job_t *small = fx_run(&f, "small", 1, 0, 300); /* some usage to preserve */
    fx_snap(&f, &before);
    uint64_t ver = f.c.version;

    arb_job_t *g = fx_add(&f, "gang", 4, 8, 0);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), -ENOSPC);
    assert_int_equal(g->nalloc, 0);
    assert_int_equal(g->state, ARB_JOB_PENDING);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    assert_true(f.c.version >= ver);

    /* The same through a cycle. */
    arb_cycle_stats_t cs;
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(g->nalloc, 0);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);

    /* Two groups: the launcher fits, the workers do not: neither binds. */
    arb_job_t *m = arb_job_new("mpi", 2);
    m->groups[0].req.cpu_milli = 1000;
    m->groups[1].replicas = 3;
    m->groups[1].gpus = 8;
    fx_submit(&f, m);
    assert_int_equal(arb_sched_place(f.s, m, &f.ctx), -ENOSPC);
    assert_int_equal(m->nalloc, 0);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);

    /* 3 x 8 does not fit either (the share holds one GPU)... */
    arb_job_t *g3 = fx_add(&f, "gang3", 3, 8, 0);
    assert_int_equal(arb_sched_place(f.s, g3, &f.ctx), -ENOSPC);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    /* ...until the share ends. */
    assert_int_equal(arb_sched_finish(f.s, small, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(arb_sched_place(f.s, g3, &f.ctx), 0);
    assert_int_equal(g3->nalloc, 3);
    assert_true(g3->alloc[0].node != g3->alloc[1].node && g3->alloc[1].node != g3->alloc[2].node &&
                g3->alloc[0].node != g3->alloc[2].node);
    fx_free(&f);
}

static void test_gang_elastic(void **st)
{
    fx_t f;
    fx_snap_t before, after;
    fx_init(&f);
    for (int i = 0; i < 3; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "n%d", i);
        fx_node(&f, nm, 8, 1, NULL, 0);
    }
    fx_sched(&f, "pack");
    fx_snap(&f, &before);

    arb_job_t *hard = fx_job_new("min5", 6, 8, 0);
    hard->gang_min = 5;
    fx_submit(&f, hard);
    assert_int_equal(arb_sched_place(f.s, hard, &f.ctx), -ENOSPC);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);

    arb_job_t *e = fx_job_new("elastic", 4, 8, 0);
    e->gang_min = 2;
    fx_submit(&f, e);
    assert_int_equal(arb_sched_place(f.s, e, &f.ctx), 0);
    assert_true(e->nalloc >= e->gang_min);
    assert_int_equal(e->nalloc, 3); /* as many as fit */
    const arb_queue_t *q = arb_sched_queue(f.s, e->queue);
    assert_int_equal(q->used.gpu_milli, 24000); /* charged for what it holds */
    assert_int_equal(arb_sched_finish(f.s, e, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(q->used.gpu_milli, 0);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    fx_free(&f);
}

/* ---- topology ---------------------------------------------------------------- */

static uint32_t rack_of(fx_t *f, const arb_job_t *j, int t)
{
    return N(f, j->alloc[t].node)->rack;
}

static void test_topology_rack_best_fit(void **st)
{
    fx_t f;
    fx_init(&f);
    /* ra: 5 idle nodes (40 free). rb: 5 nodes, 6 GPUs used on one (34 free).
     * rc: 3 nodes (24 free, too small). re: free 8,8,7,7,3 = 33: the least
     * free that is big enough in GPUs, but only two nodes have 8 free. */
    static const struct {
        const char *rack;
        int nodes;
        int used[5];
    } racks[] = {
        {"ra", 5, {0}}, {"rb", 5, {6, 0, 0, 0, 0}}, {"rc", 3, {0}}, {"re", 5, {0, 0, 1, 1, 5}}};
    arb_job_t *filler[32];
    int nf = 0;
    for (size_t r = 0; r < 4; r++)
        for (int i = 0; i < racks[r].nodes; i++) {
            char nm[32];
            snprintf(nm, sizeof nm, "%s-%d", racks[r].rack, i);
            uint32_t id = fx_node(&f, nm, 8, 1, NULL, 0);
            fx_label(&f, id, "rack", racks[r].rack);
        }
    fx_sched(&f, "pack");
    /* Occupy exactly the listed GPUs with node-pinned fillers. */
    for (size_t r = 0; r < 4; r++)
        for (int i = 0; i < racks[r].nodes; i++)
            if (racks[r].used[i]) {
                char nm[32];
                snprintf(nm, sizeof nm, "%s-%d", racks[r].rack, i);
                arb_job_t *j = fx_job_new("fill", 1, racks[r].used[i], 0);
                fx_selector(&f, j, "kubernetes.io/hostname", nm);
                fx_label(&f, arb_cluster_find_node(&f.c, nm)->id, "kubernetes.io/hostname", nm);
                fx_submit(&f, j);
                assert_int_equal(arb_sched_place(f.s, j, &f.ctx), 0);
                filler[nf++] = j;
            }
    fx_snap_t before, after;
    fx_snap(&f, &before);

    arb_job_t *g = fx_job_new("g1", 4, 8, 0);
    g->groups[0].topo = (arb_topo_req_t){ARB_TOPO_RACK, true};
    fx_submit(&f, g);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), 0);
    for (int t = 0; t < 4; t++)
        assert_int_equal(rack_of(&f, g, t), S(&f, "rb"));

    /* Next: rb has one 8-free node left; re cannot; ra takes it. */
    arb_job_t *g2 = fx_job_new("g2", 4, 8, 0);
    g2->groups[0].topo = (arb_topo_req_t){ARB_TOPO_RACK, true};
    fx_submit(&f, g2);
    assert_int_equal(arb_sched_place(f.s, g2, &f.ctx), 0);
    for (int t = 0; t < 4; t++)
        assert_int_equal(rack_of(&f, g2, t), S(&f, "ra"));

    /* Third: no rack holds 4 x 8 now (ra 1, rb 1, rc 3, re 2 idle nodes). */
    fx_snap(&f, &before);
    arb_job_t *g3 = fx_job_new("g3", 4, 8, 0);
    g3->groups[0].topo = (arb_topo_req_t){ARB_TOPO_RACK, true};
    fx_submit(&f, g3);
    assert_int_equal(arb_sched_place(f.s, g3, &f.ctx), -ENOSPC);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, g3, &ex, json, sizeof json);
    assert_int_equal(ex.domain, ARB_TOPO_RACK);
    assert_int_equal(ex.need_gpus, 32);
    /* counted in whole 8-GPU tasks: re has 33 free GPUs but room for 2 tasks */
    assert_int_equal(ex.largest_free, 24); /* rc: 3 idle nodes */
    assert_non_null(strstr(ex.summary, "needs 32, largest free 24"));
    assert_non_null(strstr(ex.hint, "fragmented"));
    /* rc is too small even when idle: the node to work on is in re */
    assert_int_equal(ex.best_node, arb_cluster_find_node(&f.c, "re-0")->id);
    assert_non_null(strstr(json, "\"best_node\":\"re-0\""));
    assert_non_null(strstr(json, "\"domain\":\"rack\""));

    /* Preferred: the same gang spans racks. */
    arb_job_t *g4 = fx_job_new("g4", 4, 8, 0);
    g4->groups[0].topo = (arb_topo_req_t){ARB_TOPO_RACK, false};
    fx_submit(&f, g4);
    assert_int_equal(arb_sched_place(f.s, g4, &f.ctx), 0);
    bool spans = false;
    for (int t = 1; t < 4; t++)
        spans |= rack_of(&f, g4, t) != rack_of(&f, g4, 0);
    assert_true(spans);
    (void)filler;
    fx_free(&f);
}

/* Blocks work like racks; a node without the label is a domain of its own. */
static void test_topology_block_and_unlabelled(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t b1a = fx_node(&f, "b1a", 8, 1, NULL, 0);
    uint32_t b1b = fx_node(&f, "b1b", 8, 1, NULL, 0);
    uint32_t b2a = fx_node(&f, "b2a", 8, 1, NULL, 0);
    uint32_t lone1 = fx_node(&f, "lone1", 8, 1, NULL, 0);
    uint32_t lone2 = fx_node(&f, "lone2", 8, 1, NULL, 0);
    fx_label(&f, b1a, "block", "b1");
    fx_label(&f, b1b, "block", "b1");
    fx_label(&f, b2a, "block", "b2");
    fx_sched(&f, "spread");
    arb_job_t *g = fx_job_new("g", 2, 8, 0);
    g->groups[0].topo = (arb_topo_req_t){ARB_TOPO_BLOCK, true};
    fx_submit(&f, g);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), 0);
    assert_int_equal(N(&f, g->alloc[0].node)->block, S(&f, "b1"));
    assert_int_equal(N(&f, g->alloc[1].node)->block, S(&f, "b1"));
    /* b1 is full; b2 has one node; the unlabelled nodes are one each. */
    fx_snap_t before, after;
    fx_snap(&f, &before);
    arb_job_t *h = fx_job_new("h", 2, 8, 0);
    h->groups[0].topo = (arb_topo_req_t){ARB_TOPO_BLOCK, true};
    fx_submit(&f, h);
    assert_int_equal(arb_sched_place(f.s, h, &f.ctx), -ENOSPC);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    /* the same with racks: nobody has a rack label at all */
    h->groups[0].topo = (arb_topo_req_t){ARB_TOPO_RACK, true};
    assert_int_equal(arb_sched_place(f.s, h, &f.ctx), -ENOSPC);
    h->groups[0].topo.required = false;
    assert_int_equal(arb_sched_place(f.s, h, &f.ctx), 0);
    (void)lone1;
    (void)lone2;
    fx_free(&f);
}

static void test_topology_node(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t x = fx_node(&f, "x", 8, 1, NULL, 0);
    uint32_t y = fx_node(&f, "y", 8, 1, NULL, 0);
    fx_sched(&f, "spread");
    arb_job_t *busy = fx_job_new("busy", 1, 4, 0);
    fx_selector(&f, busy, "name", "x");
    fx_label(&f, x, "name", "x");
    fx_submit(&f, busy);
    assert_int_equal(arb_sched_place(f.s, busy, &f.ctx), 0);
    assert_int_equal(busy->alloc[0].node, x);

    /* 2 x 4 on one node: only y holds both (spread alone would split them). */
    arb_job_t *g = fx_job_new("pair", 2, 4, 0);
    g->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NODE, true};
    fx_submit(&f, g);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), 0);
    assert_int_equal(g->alloc[0].node, y);
    assert_int_equal(g->alloc[1].node, y);
    assert_int_equal(arb_sched_finish(f.s, g, ARB_JOB_CANCELLED, &f.err), 0);

    /* 3 x 4: 12 GPUs are free but no node holds them: required waits. */
    fx_snap_t before, after;
    fx_snap(&f, &before);
    arb_job_t *h = fx_job_new("triple", 3, 4, 0);
    h->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NODE, true};
    fx_submit(&f, h);
    assert_int_equal(arb_sched_place(f.s, h, &f.ctx), -ENOSPC);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    /* preferred spans */
    h->groups[0].topo.required = false;
    assert_int_equal(arb_sched_place(f.s, h, &f.ctx), 0);
    assert_int_equal(h->nalloc, 3);
    fx_free(&f);
}

static void test_topology_nvlink(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t n = fx_node(&f, "nvs", 16, 2, NULL, 0); /* domains: GPUs 0-7, 8-15 */
    fx_sched(&f, "pack");

    arb_job_t *a = fx_job_new("a", 1, 8, 0);
    a->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, a);
    assert_int_equal(arb_sched_place(f.s, a, &f.ctx), 0);
    assert_true(a->alloc[0].gpu_mask == 0x00ff || a->alloc[0].gpu_mask == 0xff00);
    assert_int_equal(arb_sched_finish(f.s, a, ARB_JOB_CANCELLED, &f.err), 0);

    /* 4 busy in each domain: 8 free on the node, 4 in each domain. */
    arb_job_t *p = fx_job_new("p", 1, 0, 0);
    p->groups[0].gpus = 4;
    p->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, p);
    assert_int_equal(arb_sched_place(f.s, p, &f.ctx), 0);
    uint16_t pm = p->alloc[0].gpu_mask;
    assert_true((pm & 0x00ff) == pm || (pm & 0xff00) == pm); /* one domain */
    /* best fit: the next 4 go to the same, half-used domain */
    arb_job_t *q = fx_job_new("q", 1, 4, 0);
    q->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, q);
    assert_int_equal(arb_sched_place(f.s, q, &f.ctx), 0);
    assert_int_equal(pm | q->alloc[0].gpu_mask, (pm & 0xff) ? 0x00ff : 0xff00);
    assert_int_equal(arb_sched_finish(f.s, q, ARB_JOB_CANCELLED, &f.err), 0);
    /* now force one busy half in the other domain with a non-NVLink job pinned
     * by GPU choice: take 4 GPUs of the other domain with an NVLink job too */
    arb_job_t *r = fx_job_new("r", 1, 4, 0);
    fx_submit(&f, r);
    assert_int_equal(arb_sched_place(f.s, r, &f.ctx), 0); /* best fit: same domain as p */
    assert_int_equal(arb_sched_finish(f.s, r, ARB_JOB_CANCELLED, &f.err), 0);
    /* place two 4-GPU jobs and end the ones that keep a domain whole */
    arb_job_t *s1 = fx_run(&f, "s1", 1, 4, 0); /* fills p's domain */
    arb_job_t *s2 = fx_run(&f, "s2", 1, 4, 0); /* half of the other */
    assert_int_equal(arb_sched_finish(f.s, s1, ARB_JOB_CANCELLED, &f.err), 0);
    (void)s2;
    assert_int_equal(arb_node_free_gpus(N(&f, n)), 8);
    assert_int_equal(arb_node_largest_nvlink_free(N(&f, n)), 4);

    fx_snap_t before, after;
    fx_snap(&f, &before);
    arb_job_t *big = fx_job_new("big", 1, 8, 0);
    big->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, big);
    assert_int_equal(fx_reason(&f, big, 0, n), ARB_R_NVLINK);
    assert_int_equal(arb_sched_place(f.s, big, &f.ctx), -ENOSPC);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, big, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_NVLINK], 1);
    assert_int_equal(ex.largest_free, 4);
    assert_non_null(strstr(json, "\"insufficient-gpus-nvlink\":1"));
    assert_non_null(strstr(ex.summary, "needs 8, largest free 4"));

    /* Without the requirement it spans the two domains. */
    arb_job_t *loose = fx_job_new("loose", 1, 8, 0);
    loose->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, false};
    fx_submit(&f, loose);
    assert_int_equal(arb_sched_place(f.s, loose, &f.ctx), 0);
    assert_true((loose->alloc[0].gpu_mask & 0x00ff) && (loose->alloc[0].gpu_mask & 0xff00));
    fx_free(&f);
}

/* A group of replicas confined to one NVLink domain. */
static void test_topology_nvlink_group(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 2, NULL, 0); /* 2 domains of 4 */
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0); /* 1 domain of 8 */
    uint32_t c = fx_node(&f, "c", 4, 0, NULL, 0); /* no NVLink */
    fx_sched(&f, "spread");
    arb_job_t *g = fx_job_new("g", 2, 3, 0);
    g->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, g);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), 0);
    assert_int_equal(g->alloc[0].node, b);
    assert_int_equal(g->alloc[1].node, b);
    assert_int_equal(arb_sched_finish(f.s, g, ARB_JOB_CANCELLED, &f.err), 0);

    /* 2 x 1 GPU in one NVLink domain: never on c, whose GPUs have none. */
    arb_job_t *busy = fx_job_new("busyb", 1, 8, 0);
    busy->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, busy);
    assert_int_equal(arb_sched_place(f.s, busy, &f.ctx), 0);
    assert_int_equal(busy->alloc[0].node, b);
    arb_job_t *busy2 = fx_job_new("busya", 1, 8, 0);
    fx_submit(&f, busy2);
    assert_int_equal(arb_sched_place(f.s, busy2, &f.ctx), 0);
    assert_int_equal(busy2->alloc[0].node, a);
    arb_job_t *h = fx_job_new("h", 2, 1, 0);
    h->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, h);
    assert_int_equal(arb_sched_place(f.s, h, &f.ctx), -ENOSPC);
    assert_int_equal(fx_busy(&f, c), 0);
    (void)a;
    fx_free(&f);
}

/* ---- determinism ------------------------------------------------------------- */

typedef struct trace {
    int n;
    arb_task_alloc_t a[4096];
} trace_t;

static void det_run(const char *policy, uint64_t seed, trace_t *tr)
{
    fx_t f;
    arb_rng_t r;
    arb_sched_conf_t conf = {0};
    fx_init(&f);
    arb_rng_seed(&f.rng, seed);
    arb_rng_seed(&r, 1234);
    mixed_cluster(&f);
    conf.preemption = true;
    conf.queue_policy = ARB_QP_PRIORITY;
    fx_sched_conf(&f, policy, &conf);
    memset(tr, 0, sizeof *tr);
    for (int step = 0; step < 120; step++) {
        f.ctx.now_ns += 1000000000LL;
        fx_submit(&f, random_job(&f, &r, step));
        if (step % 5 == 4) {
            arb_cycle_stats_t cs;
            assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
        }
        if (step % 7 == 6) {
            for (uint32_t id = 0; id < arb_sched_njobs(f.s); id++) {
                arb_job_t *j = arb_sched_job(f.s, id);
                if (j->state == ARB_JOB_PLACED && arb_rng_below(&r, 3) == 0)
                    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_CANCELLED, &f.err), 0);
            }
        }
    }
    for (uint32_t id = 0; id < arb_sched_njobs(f.s); id++) {
        arb_job_t *j = arb_sched_job(f.s, id);
        arb_task_alloc_t st = {
            .node = 0xffff, .gpu_mask = (uint16_t)j->state, .gpu_milli = (int16_t)j->nalloc};
        tr->a[tr->n++] = st;
        for (int t = 0; t < j->nalloc && tr->n < 4096; t++)
            tr->a[tr->n++] = j->alloc[t];
    }
    fx_free(&f);
}

static void test_determinism(void **st)
{
    static trace_t a, b, c;
    static const char *const policies[] = {"pack", "spread", "default", "fgd", "random"};
    for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
        arb_profile_t prof;
        if (arb_profile_lookup(policies[p], &prof, NULL) < 0)
            continue;
        det_run(policies[p], 99, &a);
        det_run(policies[p], 99, &b);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.a, b.a, (size_t)a.n * sizeof a.a[0]);
        (void)c;
    }
}

/* With random tie-breaking, the seed decides, and only the seed. */
static void test_determinism_random_ties(void **st)
{
    static trace_t a, b, c;
    arb_profile_t prof;
    if (arb_profile_lookup("random", &prof, NULL) < 0)
        skip();
    det_run("random", 5, &a);
    det_run("random", 5, &b);
    det_run("random", 6, &c);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.a, b.a, (size_t)a.n * sizeof a.a[0]);
    assert_true(a.n != c.n || memcmp(a.a, c.a, (size_t)a.n * sizeof a.a[0]) != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_alloc_rejects_over_capacity),
        cmocka_unit_test(test_random_never_over_capacity),
        cmocka_unit_test(test_gang_all_or_nothing),
        cmocka_unit_test(test_gang_elastic),
        cmocka_unit_test(test_topology_rack_best_fit),
        cmocka_unit_test(test_topology_block_and_unlabelled),
        cmocka_unit_test(test_topology_node),
        cmocka_unit_test(test_topology_nvlink),
        cmocka_unit_test(test_topology_nvlink_group),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_determinism_random_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
