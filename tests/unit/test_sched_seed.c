/*
 * test_sched_seed.c: the seed's case study on the core API directly: four
 * 8-GPU nodes, four 4-GPU jobs, then an 8-GPU job that needs one NVLink
 * domain. spread fragments the cluster and the job waits, with the reason;
 * pack places it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "arbiter/sched.h"

static void build(arb_cluster_t *c)
{
    arb_cluster_init(c);
    for (int i = 0; i < 4; i++) {
        char name[24];
        arb_node_t *n;
        snprintf(name, sizeof name, "node-%d", i + 1);
        assert_int_equal(arb_cluster_add_node(c, name, &n, NULL), 0);
        n->cap.cpu_milli = 128000;
        n->cap.mem_bytes = 1LL << 40;
        for (int g = 0; g < 8; g++)
            assert_int_equal(arb_node_add_gpu(c, n, "A100", 81920, g / 4, g / 2, 0, NULL), 0);
    }
}

static arb_job_t *job(const char *name, int gpus, bool nvlink)
{
    arb_job_t *j = arb_job_new(name, 1);
    j->groups[0].gpus = gpus;
    j->groups[0].req.cpu_milli = 8000;
    j->groups[0].req.mem_bytes = 64LL << 30;
    if (nvlink)
        j->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    assert_int_equal(arb_job_finalize(j, NULL), 0);
    return j;
}

static int run(const char *policy, arb_explain_t *ex)
{
    arb_cluster_t c;
    arb_sched_conf_t conf = {0};
    arb_rng_t rng;
    arb_ctx_t ctx = {.now_ns = 0, .rng = &rng};
    arb_err_t err;
    int rc;

    arb_rng_seed(&rng, 42);
    build(&c);
    assert_int_equal(arb_profile_lookup(policy, &conf.profile, &err), 0);
    arb_sched_t *s = arb_sched_new(&c, &conf, &err);
    assert_non_null(s);
    for (int i = 0; i < 4; i++) {
        char name[24];
        snprintf(name, sizeof name, "small-%d", i);
        arb_job_t *j = job(name, 4, false);
        assert_int_equal(arb_sched_submit(s, j, &ctx, &err), 0);
        assert_int_equal(arb_sched_place(s, j, &ctx), 0);
    }
    arb_job_t *big = job("big", 8, true);
    assert_int_equal(arb_sched_submit(s, big, &ctx, &err), 0);
    rc = arb_sched_place(s, big, &ctx);
    if (rc < 0)
        assert_int_equal(arb_sched_explain(s, big, &ctx, ex), 0);
    else
        assert_int_equal(__builtin_popcount(big->alloc[0].gpu_mask), 8);
    assert_int_equal(arb_cluster_check(&c, &err), 0);
    arb_sched_free(s);
    arb_cluster_free(&c);
    return rc;
}

static void test_spread_fragments(void **st)
{
    arb_explain_t ex;
    assert_int_equal(run("spread", &ex), -ENOSPC);
    assert_non_null(strstr(ex.summary, "0/4 nodes are available"));
    assert_non_null(
        strstr(ex.summary, "insufficient GPUs in one NVLink domain (needs 8, largest free 4)"));
    assert_int_equal(ex.hist[ARB_R_NVLINK], 4);
    assert_int_equal(ex.largest_free, 4);
    assert_int_equal(ex.free_gpu_milli, 16000);
    assert_non_null(strstr(ex.hint, "fragmented"));
}

static void test_pack_places(void **st)
{
    arb_explain_t ex;
    assert_int_equal(run("pack", &ex), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spread_fragments),
        cmocka_unit_test(test_pack_places),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
