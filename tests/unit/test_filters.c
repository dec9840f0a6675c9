/*
 * test_filters.c: every filter plugin with its reason code, on small
 * hand-built clusters: taints and tolerations, node selector, required and
 * preferred node affinity, GPU model allow-list, thermal limit, stale
 * reports, node condition, per-GPU share fit, per-device GPU memory, CPU,
 * memory and extended resources. Each test checks both the filter verdict
 * (fx_reason, engine order) and what the engine then does with the node.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

#define SEC 1000000000LL

static uint32_t node_of(const arb_job_t *j, int t)
{
    assert_true(t < j->nalloc);
    return j->alloc[t].node;
}

/* ---- taints ------------------------------------------------------------- */

static void test_taint_noschedule_blocks(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    assert_int_equal(
        arb_node_add_taint(&f.c, N(&f, a), "dedicated", "infer", ARB_TAINT_NO_SCHEDULE), 0);
    fx_sched(&f, "spread");

    arb_job_t *j = fx_job_new("plain", 1, 1, 0);
    assert_int_equal(arb_job_finalize(j, &f.err), 0);
    assert_int_equal(fx_reason(&f, j, 0, a), ARB_R_TAINT);
    assert_int_equal(fx_reason(&f, j, 0, b), ARB_R_OK);
    fx_submit(&f, j);
    /* Every job lands on b, however full b gets; the 9th waits. */
    for (int i = 0; i < 8; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "p%d", i);
        arb_job_t *p = fx_run(&f, nm, 1, 1, 0);
        assert_int_equal(node_of(p, 0), b);
    }
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, j, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_TAINT], 1);
    assert_int_equal(ex.hist[ARB_R_GPUS], 1);
    assert_non_null(strstr(json, "\"untolerated-taint\":1"));
    assert_int_equal(fx_busy(&f, a), 0);
    fx_free(&f);
}

static void test_tolerations(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    assert_int_equal(
        arb_node_add_taint(&f.c, N(&f, a), "dedicated", "infer", ARB_TAINT_NO_SCHEDULE), 0);
    assert_int_equal(arb_node_add_taint(&f.c, N(&f, a), "maint", NULL, ARB_TAINT_NO_SCHEDULE), 0);
    fx_sched(&f, "pack");
    static const struct {
        const char *k1, *v1;
        bool ex1;
        int eff1;
        const char *k2, *v2;
        bool ex2;
        int eff2;
        arb_reason_t want;
    } cases[] = {
        /* nothing tolerated */
        {NULL, NULL, false, -1, NULL, NULL, false, -1, ARB_R_TAINT},
        /* one of two tolerated is not enough */
        {"dedicated", "infer", false, 0, NULL, NULL, false, -1, ARB_R_TAINT},
        /* Equal on both (empty value matches an empty value) */
        {"dedicated", "infer", false, 0, "maint", NULL, false, 0, ARB_R_OK},
        /* Equal with the wrong value */
        {"dedicated", "train", false, 0, "maint", NULL, false, 0, ARB_R_TAINT},
        /* Exists on the key, any value */
        {"dedicated", NULL, true, 0, "maint", NULL, true, 0, ARB_R_OK},
        /* Exists with an empty key tolerates everything */
        {NULL, NULL, true, 0, NULL, NULL, false, -1, ARB_R_OK},
        /* effect must match: PreferNoSchedule tolerations do not cover NoSchedule */
        {NULL, NULL, true, ARB_TAINT_PREFER_NO_SCHEDULE, NULL, NULL, false, -1, ARB_R_TAINT},
        {NULL, NULL, true, ARB_TAINT_NO_SCHEDULE, NULL, NULL, false, -1, ARB_R_OK},
        {"dedicated", "infer", false, ARB_TAINT_NO_SCHEDULE, "maint", NULL, true,
         ARB_TAINT_PREFER_NO_SCHEDULE, ARB_R_TAINT},
        /* Exists on another key */
        {"other", NULL, true, 0, "maint", NULL, true, 0, ARB_R_TAINT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arb_job_t *j = fx_job_new("tol", 1, 1, 0);
        if (cases[i].eff1 >= 0)
            fx_toleration(&f, j, cases[i].k1, cases[i].v1, cases[i].ex1, cases[i].eff1);
        if (cases[i].eff2 >= 0)
            fx_toleration(&f, j, cases[i].k2, cases[i].v2, cases[i].ex2, cases[i].eff2);
        assert_int_equal(arb_job_finalize(j, &f.err), 0);
        arb_reason_t r = fx_reason(&f, j, 0, a);
        if (r != cases[i].want)
            fail_msg("case %zu: reason %s, want %s", i, arb_reason_name(r),
                     arb_reason_name(cases[i].want));
        fx_submit(&f, j);
        assert_int_equal(arb_sched_place(f.s, j, &f.ctx), cases[i].want == ARB_R_OK ? 0 : -ENOSPC);
        if (j->nalloc)
            assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_CANCELLED, &f.err), 0);
    }
    fx_free(&f);
}

/* PreferNoSchedule never filters; it only makes a node less attractive. */
static void test_taint_prefer_only_scores(void **st)
{
    static const char *const gold[] = {"gold", NULL};
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 2, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 2, 1, NULL, 0);
    assert_int_equal(
        arb_node_add_taint(&f.c, N(&f, a), "spot", "yes", ARB_TAINT_PREFER_NO_SCHEDULE), 0);
    fx_sched(&f, "spread");
    arb_job_t *j1 = fx_run(&f, "j1", 1, 1, 0);
    assert_int_equal(fx_reason(&f, j1, 0, a), ARB_R_OK);
    assert_int_equal(node_of(j1, 0), b); /* equal otherwise: the taint decides */
    arb_job_t *j2 = fx_run(&f, "j2", 1, 1, 0);
    assert_int_equal(node_of(j2, 0), a); /* spread outweighs it: not a filter */
    arb_job_t *j3 = fx_run(&f, "j3", 1, 1, 0);
    assert_int_equal(node_of(j3, 0), b); /* equal again: the taint decides */
    arb_job_t *j4 = fx_run(&f, "j4", 1, 1, 0);
    assert_int_equal(node_of(j4, 0), a); /* only a has room: it takes it */
    fx_free(&f);

    /* A preferred affinity (50) for a loses to the untolerated taint (-100)
     * and wins once the taint is tolerated. */
    fx_init(&f);
    a = fx_node(&f, "a", 2, 1, NULL, 0);
    b = fx_node(&f, "b", 2, 1, NULL, 0);
    fx_label(&f, a, "tier", "gold");
    assert_int_equal(
        arb_node_add_taint(&f.c, N(&f, a), "spot", "yes", ARB_TAINT_PREFER_NO_SCHEDULE), 0);
    fx_sched(&f, "spread");
    arb_job_t *p = fx_job_new("p", 1, 1, 0);
    fx_expr(&f, fx_term(p, false, 50), "tier", ARB_OP_IN, 0, gold);
    fx_submit(&f, p);
    assert_int_equal(arb_sched_place(f.s, p, &f.ctx), 0);
    assert_int_equal(node_of(p, 0), b);
    assert_int_equal(arb_sched_finish(f.s, p, ARB_JOB_CANCELLED, &f.err), 0);
    arb_job_t *t = fx_job_new("t", 1, 1, 0);
    fx_expr(&f, fx_term(t, false, 50), "tier", ARB_OP_IN, 0, gold);
    fx_toleration(&f, t, "spot", NULL, true, 0);
    fx_submit(&f, t);
    assert_int_equal(arb_sched_place(f.s, t, &f.ctx), 0);
    assert_int_equal(node_of(t, 0), a);
    fx_free(&f);
}

/* ---- selector and affinity ---------------------------------------------- */

static void test_node_selector(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    uint32_t b = fx_node(&f, "b", 8, 1, NULL, 0);
    fx_label(&f, a, "pool", "train");
    fx_label(&f, a, "net", "ib");
    fx_label(&f, b, "pool", "infer");
    fx_label(&f, b, "net", "ib");
    fx_sched(&f, "spread");

    arb_job_t *j = fx_job_new("sel", 1, 1, 0);
    fx_selector(&f, j, "pool", "infer");
    fx_selector(&f, j, "net", "ib");
    fx_submit(&f, j);
    assert_int_equal(fx_reason(&f, j, 0, a), ARB_R_SELECTOR);
    assert_int_equal(fx_reason(&f, j, 0, b), ARB_R_OK);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), 0);
    assert_int_equal(node_of(j, 0), b);

    arb_job_t *k = fx_job_new("sel2", 1, 1, 0);
    fx_selector(&f, k, "pool", "infer");
    fx_selector(&f, k, "net", "eth"); /* AND: no node has both */
    fx_submit(&f, k);
    assert_int_equal(arb_sched_place(f.s, k, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, k, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_SELECTOR], 2);
    /* no node could ever take it: said so, with the selector */
    assert_true(ex.never);
    if (!strstr(ex.summary, "can never start as it is: no node in service may take it: 2 "
                            "node(s) not matching the node selector (nodeSelector pool=infer, "
                            "net=eth)"))
        fail_msg("summary: %s", ex.summary);
    assert_non_null(strstr(json, "\"node-selector\":2"));

    arb_job_t *m = fx_job_new("sel3", 1, 1, 0);
    fx_selector(&f, m, "missing", "x");
    fx_submit(&f, m);
    assert_int_equal(fx_reason(&f, m, 0, a), ARB_R_SELECTOR);
    fx_free(&f);
}

/* Four nodes: n0 tier=gold gen=3, n1 tier=silver gen=5, n2 gen=x (no tier),
 * n3 tier=bronze gen=12. */
static void aff_cluster(fx_t *f, uint32_t id[4])
{
    fx_init(f);
    for (int i = 0; i < 4; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "n%d", i);
        id[i] = fx_node(f, nm, 4, 1, NULL, 0);
    }
    fx_label(f, id[0], "tier", "gold");
    fx_label(f, id[0], "gen", "3");
    fx_label(f, id[1], "tier", "silver");
    fx_label(f, id[1], "gen", "5");
    fx_label(f, id[2], "gen", "x");
    fx_label(f, id[3], "tier", "bronze");
    fx_label(f, id[3], "gen", "12");
    fx_sched(f, "spread");
}

/* Which of the four nodes pass j's filters, as a bit mask. */
static unsigned passing(fx_t *f, const uint32_t id[4], const arb_job_t *j)
{
    unsigned m = 0;
    for (int i = 0; i < 4; i++) {
        arb_reason_t r = fx_reason(f, j, 0, id[i]);
        assert_true(r == ARB_R_OK || r == ARB_R_AFFINITY);
        m |= (unsigned)(r == ARB_R_OK) << i;
    }
    return m;
}

static void test_required_affinity_ops(void **st)
{
    fx_t f;
    uint32_t id[4];
    static const char *const gold[] = {"gold", NULL};
    static const char *const gold_silver[] = {"gold", "silver", NULL};
    static const char *const bronze[] = {"bronze", NULL};
    static const struct {
        const char *key;
        arb_sel_op_t op;
        int64_t num;
        const char *const *vals;
        unsigned want;
    } one[] = {
        {"tier", ARB_OP_IN, 0, gold, 0x1},
        {"tier", ARB_OP_IN, 0, gold_silver, 0x3},
        {"tier", ARB_OP_NOT_IN, 0, gold_silver, 0xc}, /* absent label: NotIn holds */
        {"tier", ARB_OP_EXISTS, 0, NULL, 0xb},
        {"tier", ARB_OP_DOES_NOT_EXIST, 0, NULL, 0x4},
        {"gen", ARB_OP_GT, 4, NULL, 0xa},  /* 5, 12; "x" is no number */
        {"gen", ARB_OP_LT, 5, NULL, 0x1},  /* 3 (5 is not < 5) */
        {"gen", ARB_OP_GT, 12, NULL, 0x0}, /* strict */
        {"tier", ARB_OP_GT, 0, NULL, 0x0}, /* non-numeric values never match Gt/Lt */
        {"nope", ARB_OP_LT, 100, NULL, 0x0},
    };

    aff_cluster(&f, id);
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        arb_job_t *j = fx_job_new("aff", 1, 1, 0);
        fx_expr(&f, fx_term(j, true, 0), one[i].key, one[i].op, one[i].num, one[i].vals);
        assert_int_equal(arb_job_finalize(j, &f.err), 0);
        unsigned got = passing(&f, id, j);
        if (got != one[i].want)
            fail_msg("case %zu: nodes 0x%x pass, want 0x%x", i, got, one[i].want);
        arb_job_free(j);
    }

    /* OR of terms: gold or bronze. */
    arb_job_t *j = fx_job_new("or", 1, 1, 0);
    fx_expr(&f, fx_term(j, true, 0), "tier", ARB_OP_IN, 0, gold);
    fx_expr(&f, fx_term(j, true, 0), "tier", ARB_OP_IN, 0, bronze);
    assert_int_equal(arb_job_finalize(j, &f.err), 0);
    assert_int_equal(passing(&f, id, j), 0x9);
    arb_job_free(j);

    /* AND within a term: (gold or silver) and gen > 4 -> silver only. */
    j = fx_job_new("and", 1, 1, 0);
    arb_aff_term_t *t = fx_term(j, true, 0);
    fx_expr(&f, t, "tier", ARB_OP_IN, 0, gold_silver);
    fx_expr(&f, t, "gen", ARB_OP_GT, 4, NULL);
    assert_int_equal(arb_job_finalize(j, &f.err), 0);
    assert_int_equal(passing(&f, id, j), 0x2);
    fx_submit(&f, j);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), 0);
    assert_int_equal(node_of(j, 0), id[1]);

    /* Nothing matches: pending with the affinity reason on every node. */
    arb_job_t *k = fx_job_new("none", 1, 1, 0);
    t = fx_term(k, true, 0);
    fx_expr(&f, t, "tier", ARB_OP_DOES_NOT_EXIST, 0, NULL);
    fx_expr(&f, t, "gen", ARB_OP_GT, 0, NULL);
    fx_submit(&f, k);
    assert_int_equal(arb_sched_place(f.s, k, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, k, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_AFFINITY], 4);
    assert_non_null(strstr(json, "\"node-affinity\":4"));
    fx_free(&f);
}

static void test_preferred_affinity_steers(void **st)
{
    fx_t f;
    uint32_t id[4];
    static const char *const gold[] = {"gold", NULL};
    static const char *const silver[] = {"silver", NULL};

    aff_cluster(&f, id);
    /* silver weighs more than gold: silver. */
    arb_job_t *j = fx_job_new("pref", 1, 1, 0);
    fx_expr(&f, fx_term(j, false, 10), "tier", ARB_OP_IN, 0, gold);
    fx_expr(&f, fx_term(j, false, 50), "tier", ARB_OP_IN, 0, silver);
    fx_submit(&f, j);
    assert_int_equal(passing(&f, id, j), 0xf); /* preferred never filters */
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), 0);
    assert_int_equal(node_of(j, 0), id[1]);
    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_CANCELLED, &f.err), 0);

    /* Weights swapped: gold. */
    arb_job_t *k = fx_job_new("pref2", 1, 1, 0);
    fx_expr(&f, fx_term(k, false, 80), "tier", ARB_OP_IN, 0, gold);
    fx_expr(&f, fx_term(k, false, 20), "tier", ARB_OP_IN, 0, silver);
    fx_submit(&f, k);
    assert_int_equal(arb_sched_place(f.s, k, &f.ctx), 0);
    assert_int_equal(node_of(k, 0), id[0]);
    assert_int_equal(arb_sched_finish(f.s, k, ARB_JOB_CANCELLED, &f.err), 0);

    /* Two matching terms add up: gold(30)+gen<5(30) beats silver(50). */
    arb_job_t *m = fx_job_new("pref3", 1, 1, 0);
    fx_expr(&f, fx_term(m, false, 30), "tier", ARB_OP_IN, 0, gold);
    fx_expr(&f, fx_term(m, false, 30), "gen", ARB_OP_LT, 5, NULL);
    fx_expr(&f, fx_term(m, false, 50), "tier", ARB_OP_IN, 0, silver);
    fx_submit(&f, m);
    assert_int_equal(arb_sched_place(f.s, m, &f.ctx), 0);
    assert_int_equal(node_of(m, 0), id[0]);
    fx_free(&f);
}

/* ---- GPU model, thermal, report age, condition ---------------------------- */

static void test_gpu_model(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, "A100", 0);
    uint32_t h = fx_node(&f, "h", 8, 1, "H100", 0);
    arb_node_t *mx;
    assert_int_equal(arb_cluster_add_node(&f.c, "mixed", &mx, &f.err), 0);
    mx->cap.cpu_milli = 128000;
    mx->cap.mem_bytes = 1024 * GIB;
    for (int g = 0; g < 8; g++)
        assert_int_equal(
            arb_node_add_gpu(&f.c, mx, g % 2 ? "H100" : "A100", 81920, 0, g / 2, 0, &f.err), 0);
    uint32_t m = mx->id;
    fx_sched(&f, "pack");

    arb_job_t *j = fx_job_new("h100", 1, 8, 0);
    fx_model(&f, j, "H100");
    fx_submit(&f, j);
    assert_int_equal(fx_reason(&f, j, 0, a), ARB_R_GPU_MODEL);
    assert_int_equal(fx_reason(&f, j, 0, h), ARB_R_OK);
    /* mixed has H100s, but only 4: the model, not memory, is what is short */
    assert_int_equal(fx_reason(&f, j, 0, m), ARB_R_GPU_MODEL);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), 0);
    assert_int_equal(node_of(j, 0), h);

    /* 4 H100s: only mixed has them now, and it gets exactly the odd GPUs. */
    arb_job_t *k = fx_job_new("h100x4", 1, 4, 0);
    fx_model(&f, k, "H100");
    fx_submit(&f, k);
    assert_int_equal(arb_sched_place(f.s, k, &f.ctx), 0);
    assert_int_equal(node_of(k, 0), m);
    assert_int_equal(k->alloc[0].gpu_mask, 0xaa);

    /* A share on an allowed model only. */
    arb_job_t *s = fx_job_new("share", 1, 0, 300);
    fx_model(&f, s, "H100");
    fx_submit(&f, s);
    assert_int_equal(arb_sched_place(f.s, s, &f.ctx), -ENOSPC);
    assert_int_equal(fx_reason(&f, s, 0, m), ARB_R_GPU_MODEL);

    /* An allow-list of two. */
    arb_job_t *v = fx_job_new("v100", 1, 1, 0);
    fx_model(&f, v, "V100");
    fx_model(&f, v, "A100");
    fx_submit(&f, v);
    assert_int_equal(fx_reason(&f, v, 0, h), ARB_R_GPU_MODEL);
    assert_int_equal(arb_sched_place(f.s, v, &f.ctx), 0);
    assert_int_equal(N(&f, node_of(v, 0))->gpu[__builtin_ctz(v->alloc[0].gpu_mask)].model,
                     S(&f, "A100"));

    /* A CPU-only task ignores the allow-list. */
    arb_job_t *c = fx_job_new("cpu", 1, 0, 0);
    fx_model(&f, c, "V100");
    fx_submit(&f, c);
    assert_int_equal(fx_reason(&f, c, 0, a), ARB_R_OK);
    fx_free(&f);
}

static void test_thermal_limit(void **st)
{
    fx_t f;
    arb_sched_conf_t conf = {0};
    fx_init(&f);
    uint32_t hot = fx_node(&f, "hot", 8, 1, NULL, 0);
    uint32_t half = fx_node(&f, "half", 8, 1, NULL, 0);
    for (int g = 0; g < 8; g++) {
        N(&f, hot)->gpu[g].temp_c = 92;
        N(&f, half)->gpu[g].temp_c = g < 4 ? 60 : 90;
    }
    fx_touch(&f, hot);
    fx_touch(&f, half);
    conf.profile.thermal_limit_c = 85;
    fx_sched_conf(&f, "pack", &conf);

    arb_job_t *j8 = fx_add(&f, "j8", 1, 8, 0);
    assert_int_equal(fx_reason(&f, j8, 0, hot), ARB_R_THERMAL);
    assert_int_equal(fx_reason(&f, j8, 0, half), ARB_R_THERMAL);
    assert_int_equal(arb_sched_place(f.s, j8, &f.ctx), -ENOSPC);

    arb_job_t *j4 = fx_add(&f, "j4", 1, 4, 0);
    assert_int_equal(arb_sched_place(f.s, j4, &f.ctx), 0);
    assert_int_equal(node_of(j4, 0), half);
    assert_int_equal(j4->alloc[0].gpu_mask, 0x0f); /* the cool ones */

    /* The cool GPUs are busy now; 4 hot ones are free: still thermal. */
    arb_job_t *k = fx_add(&f, "k", 1, 1, 0);
    assert_int_equal(fx_reason(&f, k, 0, half), ARB_R_THERMAL);
    assert_int_equal(arb_sched_place(f.s, k, &f.ctx), -ENOSPC);
    arb_job_t *sh = fx_add(&f, "sh", 1, 0, 200);
    assert_int_equal(fx_reason(&f, sh, 0, half), ARB_R_THERMAL);
    assert_int_equal(arb_sched_place(f.s, sh, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, k, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_THERMAL], 2);

    /* At exactly the limit counts as too hot; below it is fine. */
    N(&f, hot)->gpu[0].temp_c = 85;
    N(&f, hot)->gpu[1].temp_c = 84;
    fx_touch(&f, hot);
    assert_int_equal(arb_sched_place(f.s, k, &f.ctx), 0);
    assert_int_equal(node_of(k, 0), hot);
    assert_int_equal(k->alloc[0].gpu_mask, 0x02);

    /* No limit in the profile: heat does not filter. */
    fx_t g;
    fx_init(&g);
    uint32_t h2 = fx_node(&g, "hot", 8, 1, NULL, 0);
    for (int i = 0; i < 8; i++)
        N(&g, h2)->gpu[i].temp_c = 99;
    fx_touch(&g, h2);
    fx_sched(&g, "pack");
    fx_run(&g, "any", 1, 8, 0);
    fx_free(&g);
    fx_free(&f);
}

static void test_stale_report(void **st)
{
    fx_t f;
    arb_sched_conf_t conf = {0};
    fx_init(&f);
    uint32_t old = fx_node(&f, "old", 8, 1, NULL, 0);
    uint32_t edge = fx_node(&f, "edge", 8, 1, NULL, 0);
    uint32_t fresh = fx_node(&f, "fresh", 8, 1, NULL, 0);
    f.ctx.now_ns = 100 * SEC;
    N(&f, old)->report_ns = 10 * SEC;  /* 90 s old */
    N(&f, edge)->report_ns = 70 * SEC; /* exactly 30 s: not yet stale */
    N(&f, fresh)->report_ns = 99 * SEC;
    fx_touch(&f, old);
    fx_touch(&f, edge);
    fx_touch(&f, fresh);
    conf.profile.stale_ns = 30 * SEC;
    fx_sched_conf(&f, "pack", &conf);

    arb_job_t *j = fx_add(&f, "j", 1, 8, 0);
    assert_int_equal(fx_reason(&f, j, 0, old), ARB_R_STALE);
    assert_int_equal(fx_reason(&f, j, 0, edge), ARB_R_OK);
    assert_int_equal(fx_reason(&f, j, 0, fresh), ARB_R_OK);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), 0);
    assert_int_not_equal(node_of(j, 0), old);
    arb_job_t *k = fx_add(&f, "k", 1, 8, 0);
    assert_int_equal(arb_sched_place(f.s, k, &f.ctx), 0);
    assert_int_not_equal(node_of(k, 0), old);
    /* One nanosecond later, edge is stale too; only stale capacity is left. */
    f.ctx.now_ns += 1;
    arb_job_t *m = fx_add(&f, "m", 1, 1, 0);
    assert_int_equal(fx_reason(&f, m, 0, edge), ARB_R_STALE);
    assert_int_equal(arb_sched_place(f.s, m, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, m, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_STALE], 2);
    assert_non_null(strstr(json, "\"stale-report\":2"));
    /* A new report revives it. */
    N(&f, old)->report_ns = f.ctx.now_ns;
    fx_touch(&f, old);
    assert_int_equal(arb_sched_place(f.s, m, &f.ctx), 0);
    assert_int_equal(node_of(m, 0), old);
    fx_free(&f);

    /* stale_ns 0: report age is ignored. */
    fx_init(&f);
    old = fx_node(&f, "old", 8, 1, NULL, 0);
    f.ctx.now_ns = 1000000 * SEC;
    fx_sched(&f, "pack");
    fx_run(&f, "x", 1, 1, 0);
    fx_free(&f);
}

static void test_condition(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t nr = fx_node(&f, "nr", 8, 1, NULL, 0);
    uint32_t dr = fx_node(&f, "dr", 8, 1, NULL, 0);
    uint32_t gone = fx_node(&f, "gone", 8, 1, NULL, 0);
    assert_int_equal(arb_node_transition(&f.c, N(&f, nr), ARB_NODE_NOT_READY, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, N(&f, dr), ARB_NODE_DRAINING, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, N(&f, gone), ARB_NODE_LEFT, &f.err), 0);
    fx_sched(&f, "pack");
    arb_job_t *j = fx_add(&f, "j", 1, 0, 0); /* even a CPU-only task */
    assert_int_equal(fx_reason(&f, j, 0, nr), ARB_R_NOT_READY);
    assert_int_equal(fx_reason(&f, j, 0, dr), ARB_R_DRAINING);
    assert_int_equal(fx_reason(&f, j, 0, gone), ARB_R_NOT_READY);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, j, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_DRAINING], 1);
    assert_int_equal(ex.hist[ARB_R_NOT_READY], 1); /* a node that left is no longer counted */
    assert_int_equal(ex.nnodes, 2);
    assert_non_null(strstr(json, "\"draining\":1"));
    assert_non_null(strstr(json, "\"not-ready\":1"));
    assert_int_equal(ex.free_gpu_milli, 0); /* only READY nodes count as free */
    fx_free(&f);
}

/* ---- fit: shares, GPU memory, CPU, memory, extended ------------------------ */

static void test_share_fits_per_gpu(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 2, 1, NULL, 0);
    fx_sched(&f, "pack");
    arb_job_t *s1 = fx_run(&f, "s1", 1, 0, 600);
    arb_job_t *s2 = fx_run(&f, "s2", 1, 0, 600);
    assert_int_not_equal(s1->alloc[0].gpu_mask, s2->alloc[0].gpu_mask);
    assert_int_equal(__builtin_popcount(s1->alloc[0].gpu_mask), 1);
    assert_int_equal(s1->alloc[0].gpu_milli, 600);
    /* 800m free in total, but no single GPU has 600m. */
    arb_job_t *s3 = fx_add(&f, "s3", 1, 0, 600);
    assert_int_equal(fx_reason(&f, s3, 0, a), ARB_R_GPU_SHARE);
    assert_int_equal(arb_sched_place(f.s, s3, &f.ctx), -ENOSPC);
    /* No whole GPU is free either. */
    arb_job_t *w = fx_add(&f, "w", 1, 1, 0);
    assert_int_equal(fx_reason(&f, w, 0, a), ARB_R_GPUS);
    /* 400m fits on each GPU exactly. */
    arb_job_t *q1 = fx_run(&f, "q1", 1, 0, 400);
    arb_job_t *q2 = fx_run(&f, "q2", 1, 0, 400);
    assert_int_not_equal(q1->alloc[0].gpu_mask, q2->alloc[0].gpu_mask);
    for (int g = 0; g < 2; g++)
        assert_int_equal(N(&f, a)->gpu[g].used_milli, 1000);
    arb_job_t *q3 = fx_add(&f, "q3", 1, 0, 1);
    assert_int_equal(fx_reason(&f, q3, 0, a), ARB_R_GPU_SHARE);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, q3, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_GPU_SHARE], 1);
    assert_non_null(strstr(json, "\"insufficient-gpu-share\":1"));
    /* Best fit: after s1 ends, a 300m share goes to the GPU with less free. */
    assert_int_equal(arb_sched_finish(f.s, s1, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(arb_sched_finish(f.s, q2, ARB_JOB_CANCELLED, &f.err), 0);
    /* now: one GPU at 400 (q1 or s2 side), other at 600 */
    int fuller = N(&f, a)->gpu[0].used_milli > N(&f, a)->gpu[1].used_milli ? 0 : 1;
    arb_job_t *b = fx_run(&f, "b", 1, 0, 300);
    assert_int_equal(b->alloc[0].gpu_mask, 1u << fuller);
    fx_free(&f);
}

static void test_gpu_memory_per_device(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 1, 1, NULL, 81920);
    uint32_t b = fx_node(&f, "b", 1, 1, NULL, 40960);
    fx_sched(&f, "pack");
    arb_job_t *j = fx_job_new("big-mem", 1, 0, 300);
    j->groups[0].req.gpu_mem_mib = 50000;
    fx_submit(&f, j);
    assert_int_equal(fx_reason(&f, j, 0, b), ARB_R_GPU_MEM);
    assert_int_equal(fx_reason(&f, j, 0, a), ARB_R_OK);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), 0);
    assert_int_equal(node_of(j, 0), a);
    assert_int_equal(N(&f, a)->gpu[0].mem_used_mib, 50000);
    /* 700m of share is free on a, but not 50000 MiB of its memory. */
    arb_job_t *k = fx_job_new("big-mem2", 1, 0, 300);
    k->groups[0].req.gpu_mem_mib = 50000;
    fx_submit(&f, k);
    assert_int_equal(fx_reason(&f, k, 0, a), ARB_R_GPU_MEM);
    assert_int_equal(arb_sched_place(f.s, k, &f.ctx), -ENOSPC);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, k, &ex, json, sizeof json);
    assert_int_equal(ex.hist[ARB_R_GPU_MEM], 2);
    /* What is left fits. */
    arb_job_t *m = fx_job_new("rest", 1, 0, 300);
    m->groups[0].req.gpu_mem_mib = 81920 - 50000;
    fx_submit(&f, m);
    assert_int_equal(arb_sched_place(f.s, m, &f.ctx), 0);
    assert_int_equal(N(&f, a)->gpu[0].mem_used_mib, 81920);
    /* Whole GPUs: the device must have the memory. */
    arb_job_t *w = fx_job_new("whole", 1, 1, 0);
    w->groups[0].req.gpu_mem_mib = 60000;
    fx_submit(&f, w);
    assert_int_equal(fx_reason(&f, w, 0, b), ARB_R_GPU_MEM);
    assert_int_equal(arb_sched_place(f.s, w, &f.ctx), -ENOSPC);
    w->groups[0].req.gpu_mem_mib = 40960;
    assert_int_equal(arb_sched_place(f.s, w, &f.ctx), 0);
    assert_int_equal(node_of(w, 0), b);
    fx_free(&f);
}

static void test_cpu_mem_ext(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    int hca = arb_extnames_index(&f.c.ext, "rdma/hca", true);
    assert_true(hca >= 0);
    N(&f, a)->cap.cpu_milli = 16000;
    N(&f, a)->cap.mem_bytes = 64 * GIB;
    N(&f, a)->cap.ext[hca] = 2;
    fx_touch(&f, a);
    fx_sched(&f, "pack");

    arb_job_t *c = fx_job_new("cpu", 1, 1, 0);
    c->groups[0].req.cpu_milli = 16001;
    fx_submit(&f, c);
    assert_int_equal(fx_reason(&f, c, 0, a), ARB_R_CPU);
    assert_int_equal(arb_sched_place(f.s, c, &f.ctx), -ENOSPC);

    arb_job_t *m = fx_job_new("mem", 1, 1, 0);
    m->groups[0].req.mem_bytes = 64 * GIB + 1;
    fx_submit(&f, m);
    assert_int_equal(fx_reason(&f, m, 0, a), ARB_R_MEM);

    arb_job_t *e = fx_job_new("ext", 1, 1, 0);
    e->groups[0].req.ext[hca] = 3;
    fx_submit(&f, e);
    assert_int_equal(fx_reason(&f, e, 0, a), ARB_R_EXT);
    arb_explain_t ex;
    char json[4096];
    fx_explain(&f, e, &ex, json, sizeof json);
    assert_non_null(strstr(json, "\"insufficient-extended\":1"));

    /* Exactly the capacity fits; then nothing more of it. */
    arb_job_t *e1 = fx_job_new("ext1", 1, 1, 0);
    e1->groups[0].req.ext[hca] = 2;
    e1->groups[0].req.cpu_milli = 16000;
    e1->groups[0].req.mem_bytes = 64 * GIB;
    fx_submit(&f, e1);
    assert_int_equal(arb_sched_place(f.s, e1, &f.ctx), 0);
    assert_int_equal(N(&f, a)->used.ext[hca], 2);
    arb_job_t *e2 = fx_job_new("ext2", 1, 1, 0);
    e2->groups[0].req.ext[hca] = 1;
    e2->groups[0].req.cpu_milli = 0;
    e2->groups[0].req.mem_bytes = 0;
    fx_submit(&f, e2);
    assert_int_equal(fx_reason(&f, e2, 0, a), ARB_R_EXT);
    arb_job_t *c2 = fx_add(&f, "c2", 1, 1, 0);
    assert_int_equal(fx_reason(&f, c2, 0, a), ARB_R_CPU);
    assert_int_equal(arb_sched_finish(f.s, e1, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(N(&f, a)->used.ext[hca], 0);
    assert_int_equal(arb_sched_place(f.s, e2, &f.ctx), 0);
    fx_free(&f);
}

/* An unhealthy GPU is never picked, by any task shape. */
static void test_unhealthy_gpu(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 4, 1, NULL, 0);
    N(&f, a)->gpu[1].healthy = 0;
    fx_touch(&f, a);
    fx_sched(&f, "pack");
    arb_job_t *j = fx_run(&f, "j", 1, 3, 0);
    assert_int_equal(j->alloc[0].gpu_mask & 0x2, 0);
    arb_job_t *s = fx_add(&f, "s", 1, 0, 100);
    assert_int_equal(arb_sched_place(f.s, s, &f.ctx), -ENOSPC);
    assert_int_equal(N(&f, a)->gpu[1].used_milli, 0);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_taint_noschedule_blocks),
        cmocka_unit_test(test_tolerations),
        cmocka_unit_test(test_taint_prefer_only_scores),
        cmocka_unit_test(test_node_selector),
        cmocka_unit_test(test_required_affinity_ops),
        cmocka_unit_test(test_preferred_affinity_steers),
        cmocka_unit_test(test_gpu_model),
        cmocka_unit_test(test_thermal_limit),
        cmocka_unit_test(test_stale_report),
        cmocka_unit_test(test_condition),
        cmocka_unit_test(test_share_fits_per_gpu),
        cmocka_unit_test(test_gpu_memory_per_device),
        cmocka_unit_test(test_cpu_mem_ext),
        cmocka_unit_test(test_unhealthy_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
