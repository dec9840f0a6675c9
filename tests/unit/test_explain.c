/*
 * test_explain.c: "why am I pending?" in words and in JSON (DESIGN.md
 * invariant 7). The seed's fragmentation case (8- and 16-GPU NVLink
 * domains), a quota-blocked job, per-reason histograms with several
 * reasons, preemption that would help, a gang that fits node by node but
 * not as a whole, strings that need escaping, snprintf-like sizing, and
 * explain never changing the cluster. Every JSON document must parse.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

static void assert_keys(const char *json)
{
    static const char *const keys[] = {
        "\"summary\":",          "\"nodes\":",        "\"reasons\":{",
        "\"fragmentation\":{",   "\"free_gpus\":",    "\"need_gpus\":",
        "\"domain\":",           "\"largest_free\":", "\"quota_blocked\":",
        "\"preemption_helps\":", "\"best_node\":",    "\"hint\":"};
    assert_true(fx_json_valid(json));
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strstr(json, keys[i]))
            fail_msg("key %s missing in %s", keys[i], json);
}

static void test_json_validator(void **st)
{
    assert_true(fx_json_valid("{\"a\":[1,2.5,-3e2,true,false,null,\"x\\\"y\\u00e9\"],\"b\":{}}"));
    assert_false(fx_json_valid("{\"a\":1,}"));
    assert_false(fx_json_valid("{\"a\":1"));
    assert_false(fx_json_valid("{\"a\" 1}"));
    assert_false(fx_json_valid("{\"a\":\"x\ny\"}"));
    assert_false(fx_json_valid("{\"a\":\"\\q\"}"));
    assert_false(fx_json_valid("{} {}"));
}

/* The seed: 4 x 8 GPUs, four 4-GPU jobs spread one per node, then 8 GPUs
 * in one NVLink domain. Also with 16-GPU NVSwitch nodes and a 16-GPU job. */
static void seed_case(int gpus_per_node, void **st)
{
    fx_t f;
    fx_init(&f);
    for (int i = 0; i < 4; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "node-%d", i + 1);
        fx_node(&f, nm, gpus_per_node, 1, NULL, 0);
    }
    fx_sched(&f, "spread");
    unsigned used = 0;
    for (int i = 0; i < 4; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "small-%d", i);
        arb_job_t *j = fx_run(&f, nm, 1, gpus_per_node / 2, 0);
        used |= 1u << j->alloc[0].node;
    }
    assert_int_equal(used, 0xf); /* spread: one per node */
    arb_job_t *big = fx_job_new("big", 1, gpus_per_node, 0);
    big->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, big);
    assert_int_equal(arb_sched_place(f.s, big, &f.ctx), -ENOSPC);

    fx_snap_t before, after;
    fx_snap(&f, &before);
    arb_explain_t ex;
    char json[4096], want[128];
    fx_explain(&f, big, &ex, json, sizeof json);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    assert_keys(json);
    snprintf(want, sizeof want,
             "0/4 nodes are available: 4 insufficient GPUs in one NVLink domain (needs %d, "
             "largest free %d)",
             gpus_per_node, gpus_per_node / 2);
    if (!strstr(ex.summary, want))
        fail_msg("summary: %s", ex.summary);
    assert_int_equal(ex.hist[ARB_R_NVLINK], 4);
    assert_int_equal(ex.need_gpus, gpus_per_node);
    assert_int_equal(ex.largest_free, gpus_per_node / 2);
    assert_int_equal(ex.domain, ARB_TOPO_NVLINK);
    assert_int_equal(ex.free_gpu_milli, 4 * gpus_per_node / 2 * 1000);
    assert_false(ex.quota_blocked);
    assert_false(ex.preemption_helps); /* all equal priority */
    assert_non_null(strstr(ex.hint, "fragmented"));
    assert_non_null(strstr(ex.hint, "'spread' policy"));
    snprintf(want, sizeof want, "Freeing %d more GPU(s) in the NVLink domain of node 'node-1'",
             gpus_per_node / 2);
    assert_non_null(strstr(ex.hint, want));
    snprintf(want, sizeof want,
             "\"fragmentation\":{\"free_gpus\":%d.000,\"need_gpus\":%d,\"domain\":\"nvlink\","
             "\"largest_free\":%d}",
             2 * gpus_per_node, gpus_per_node, gpus_per_node / 2);
    if (!strstr(json, want))
        fail_msg("json: %s", json);
    snprintf(want, sizeof want, "\"reasons\":{\"insufficient-gpus-nvlink\":4}");
    assert_non_null(strstr(json, want));
    assert_non_null(strstr(json, "\"best_node\":\"node-1\""));
    fx_free(&f);

    /* The same stream under pack: the big job is placed on one node. */
    fx_init(&f);
    for (int i = 0; i < 4; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "node-%d", i + 1);
        fx_node(&f, nm, gpus_per_node, 1, NULL, 0);
    }
    fx_sched(&f, "pack");
    for (int i = 0; i < 4; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "small-%d", i);
        fx_run(&f, nm, 1, gpus_per_node / 2, 0);
    }
    big = fx_job_new("big", 1, gpus_per_node, 0);
    big->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    fx_submit(&f, big);
    assert_int_equal(arb_sched_place(f.s, big, &f.ctx), 0);
    assert_int_equal(__builtin_popcount(big->alloc[0].gpu_mask), gpus_per_node);
    fx_free(&f);
}

static void test_seed_fragmentation_8(void **st)
{
    seed_case(8, st);
}

static void test_seed_fragmentation_16(void **st)
{
    seed_case(16, st);
}

static void test_quota_blocked(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_node(&f, "b", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    fx_quota_queue(&f, "team", NULL, 8, 0);
    arb_job_t *held = fx_job_new("held", 1, 4, 0);
    held->queue = S(&f, "team");
    fx_submit(&f, held);
    arb_job_t *j = fx_job_new("greedy", 1, 6, 0);
    j->queue = S(&f, "team");
    fx_submit(&f, j);
    arb_cycle_stats_t cs;
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(held->state, ARB_JOB_PLACED);
    assert_int_equal(j->state, ARB_JOB_PENDING);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, j, &ex, json, sizeof json);
    assert_keys(json);
    assert_true(ex.quota_blocked);
    assert_false(ex.never);
    /* quotas in GPUs, not thousandths of one */
    if (!strstr(ex.summary, "waiting for quota: queue 'team' GPU quota: it would use 10 GPUs (4 "
                            "GPUs in use now), above its nominal 8 GPUs + borrowing limit 0 GPUs"))
        fail_msg("summary: %s", ex.summary);
    assert_non_null(strstr(json, "\"quota_blocked\":true"));
    assert_true(ex.hint[0] != '\0');

    /* More than the queue could ever hold: said so, with the numbers. */
    arb_job_t *huge = fx_job_new("huge", 1, 12, 0);
    huge->queue = S(&f, "team");
    fx_submit(&f, huge);
    fx_explain(&f, huge, &ex, json, sizeof json);
    assert_true(ex.never);
    if (!strstr(ex.summary, "job 'huge' can never start in its queue: it needs 12 GPUs, more "
                            "than queue 'team' can ever hold (8 GPUs"))
        fail_msg("summary: %s", ex.summary);
    fx_free(&f);
}

/* Four nodes, four different first reasons; the summary lists them by
 * count, the JSON has each. */
static void test_reason_histogram(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t id[6];
    for (int i = 0; i < 6; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "n%d", i);
        id[i] = fx_node(&f, nm, 8, 1, NULL, 0);
        fx_label(&f, id[i], "pool", i == 5 ? "cpu" : "gpu");
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(arb_node_add_taint(&f.c, N(&f, id[i]), "maint", "", ARB_TAINT_NO_SCHEDULE),
                         0);
    assert_int_equal(arb_node_transition(&f.c, N(&f, id[3]), ARB_NODE_DRAINING, &f.err), 0);
    fx_sched(&f, "pack");
    arb_job_t *fill = fx_job_new("fill", 1, 8, 0);
    fx_selector(&f, fill, "pool", "gpu");
    fx_submit(&f, fill);
    assert_int_equal(arb_sched_place(f.s, fill, &f.ctx), 0);
    assert_int_equal(fill->alloc[0].node, id[4]);

    arb_job_t *j = fx_job_new("picky", 1, 2, 0);
    fx_selector(&f, j, "pool", "gpu");
    fx_submit(&f, j);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, j, &ex, json, sizeof json);
    assert_keys(json);
    assert_int_equal(ex.nnodes, 6);
    assert_int_equal(ex.hist[ARB_R_TAINT], 3);
    assert_int_equal(ex.hist[ARB_R_DRAINING], 1);
    assert_int_equal(ex.hist[ARB_R_GPUS], 1);
    assert_int_equal(ex.hist[ARB_R_SELECTOR], 1);
    assert_non_null(strstr(
        ex.summary, "0/6 nodes are available: 3 node(s) with a taint the job does not tolerate, "));
    assert_non_null(strstr(ex.summary, "1 node(s) draining"));
    assert_non_null(strstr(ex.summary, "1 node(s) not matching the node selector"));
    assert_non_null(strstr(ex.summary, "1 insufficient GPUs"));
    assert_non_null(strstr(json, "\"untolerated-taint\":3"));
    assert_non_null(strstr(json, "\"draining\":1"));
    assert_non_null(strstr(json, "\"node-selector\":1"));
    assert_non_null(strstr(json, "\"insufficient-gpus\":1"));
    fx_free(&f);
}

static void test_preemption_helps(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    arb_sched_conf_t conf = {0};
    conf.preemption = true;
    fx_sched_conf(&f, "pack", &conf);
    arb_job_t *lo = fx_job_new("lo", 1, 8, 0);
    lo->priority = 0;
    fx_submit(&f, lo);
    assert_int_equal(arb_sched_place(f.s, lo, &f.ctx), 0);
    arb_job_t *hi = fx_job_new("hi", 1, 4, 0);
    hi->priority = 10;
    fx_submit(&f, hi);
    fx_snap_t before, after;
    fx_snap(&f, &before);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, hi, &ex, json, sizeof json);
    fx_snap(&f, &after);
    fx_snap_equal(&before, &after);
    assert_int_equal(lo->state, ARB_JOB_PLACED);
    assert_int_equal(lo->nalloc, 1);
    assert_keys(json);
    assert_true(ex.preemption_helps);
    assert_non_null(
        strstr(ex.hint, "Preempting 1 lower-priority job(s) would fit it (preemption is on"));
    assert_non_null(strstr(json, "\"preemption_helps\":true"));
    /* and the same priority: it would not */
    hi->priority = 0;
    fx_explain(&f, hi, &ex, json, sizeof json);
    assert_false(ex.preemption_helps);
    fx_free(&f);
}

/* Every node can take one task, the gang does not fit as a whole. */
static void test_gang_whole(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_node(&f, "b", 8, 1, NULL, 0);
    fx_sched(&f, "spread");
    fx_run(&f, "xa", 1, 4, 0);
    fx_run(&f, "xb", 1, 4, 0);
    arb_job_t *g = fx_job_new("gang", 3, 4, 0);
    arb_tgroup_set_name(&g->groups[0], "workers");
    fx_submit(&f, g);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, g, &ex, json, sizeof json);
    assert_keys(json);
    assert_int_equal(ex.group, 0);
    assert_non_null(strstr(ex.summary, "2/2 nodes are available"));
    /* per-group counts: how many of its tasks fit, and where */
    if (!strstr(ex.summary, "group 'workers' (3 tasks x 4 GPUs): 2 of 3 tasks fit now: node a "
                            "takes 1, node b takes 1"))
        fail_msg("summary: %s", ex.summary);
    assert_int_equal(ex.tasks_fit, 2);
    assert_int_equal(ex.tasks_need, 3);
    assert_non_null(strstr(ex.hint, "What fits now: 2 of the 3 tasks of group 'workers'"));
    assert_non_null(strstr(json, "\"tasks\":{\"fit_now\":2,\"need\":3}"));
    assert_non_null(strstr(json, "\"reasons\":{}"));

    /* A second group that no node can take is named instead. */
    arb_job_t *m = arb_job_new("two", 2);
    arb_tgroup_set_name(&m->groups[0], "ps");
    arb_tgroup_set_name(&m->groups[1], "huge");
    m->groups[0].gpus = 1;
    m->groups[1].gpus = 8;
    fx_submit(&f, m);
    fx_explain(&f, m, &ex, json, sizeof json);
    assert_int_equal(ex.group, 1);
    assert_int_equal(ex.hist[ARB_R_GPUS], 2);
    assert_non_null(strstr(
        ex.summary, "0/2 nodes are available: 2 insufficient GPUs (needs 8, largest free 4)"));
    fx_free(&f);
}

/* Names with quotes, backslashes and control characters stay valid JSON. */
static void test_json_escaping(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "rack\"7\\node\t1", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    fx_run(&f, "x", 1, 6, 0);
    arb_job_t *g = fx_job_new("we\"ird\\job\n", 2, 2, 0);
    arb_tgroup_set_name(&g->groups[0], "w\"k\\\x01");
    fx_submit(&f, g);
    assert_int_equal(arb_sched_place(f.s, g, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, g, &ex, json, sizeof json);
    assert_keys(json);
    assert_non_null(strstr(json, "w\\\"k\\\\\\u0001"));
    assert_non_null(strstr(json, "\"best_node\":\"rack\\\"7\\\\node\\u00091\""));
    fx_free(&f);
}

/* arb_explain_json sizes like snprintf: the full length, whatever fits. */
static void test_json_sizing(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    fx_run(&f, "x", 1, 8, 0);
    arb_job_t *j = fx_add(&f, "j", 1, 1, 0);
    arb_explain_t ex;
    char full[4096], small[40];
    assert_int_equal(arb_sched_explain(f.s, j, &f.ctx, &ex), 0);
    int need = arb_explain_json(f.s, &ex, full, sizeof full);
    assert_int_equal((size_t)need, strlen(full));
    assert_true(fx_json_valid(full));
    memset(small, 'z', sizeof small);
    int need2 = arb_explain_json(f.s, &ex, small, sizeof small);
    assert_int_equal(need2, need);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, full, sizeof small - 1);
    assert_int_equal(arb_explain_json(f.s, &ex, NULL, 0), need);
    fx_free(&f);
}

/* A job that is not pending, one that fits, one that needs no GPUs. */
static void test_not_pending_and_fits(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    arb_job_t *r = fx_run(&f, "r", 1, 2, 0);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, r, &ex, json, sizeof json);
    assert_non_null(strstr(ex.summary, "is placed, not pending"));
    arb_job_t *p = fx_add(&f, "p", 1, 2, 0);
    fx_explain(&f, p, &ex, json, sizeof json);
    assert_non_null(strstr(ex.summary, "fits now"));
    assert_int_equal(p->nalloc, 0);
    assert_int_equal(fx_busy(&f, 0), 2);
    arb_job_t *c = fx_job_new("cpu", 1, 0, 0);
    c->groups[0].req.cpu_milli = 1000000;
    fx_submit(&f, c);
    fx_explain(&f, c, &ex, json, sizeof json);
    assert_keys(json);
    assert_int_equal(ex.hist[ARB_R_CPU], 1);
    assert_non_null(strstr(json, "\"best_node\":null"));
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_validator),
        cmocka_unit_test(test_seed_fragmentation_8),
        cmocka_unit_test(test_seed_fragmentation_16),
        cmocka_unit_test(test_quota_blocked),
        cmocka_unit_test(test_reason_histogram),
        cmocka_unit_test(test_preemption_helps),
        cmocka_unit_test(test_gang_whole),
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_json_sizing),
        cmocka_unit_test(test_not_pending_and_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
