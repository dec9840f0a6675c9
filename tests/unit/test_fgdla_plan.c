/*
 * test_fgdla_plan.c: fgd-la's plan (src/core/fgdla_plan.c), the LP prices
 * of the cluster's resources under the learned task mix, on instances small
 * enough to check by hand:
 *
 *   - the prices: on one-GPU nodes with a mix of 350, 600 and 800 milli
 *     shares, a 350 put on a GPU with 650 free (leaving 300, which no task of
 *     the mix can use) loses against the plan, a 350 on an empty GPU (the
 *     650 left is a 600's place) or on one with 350 free loses nothing;
 *   - GPU models: one A GPU, two B, half the mix's GPU demand allowed only
 *     A: an A GPU is worth its milli, a B GPU (with room to spare for the
 *     unrestricted half) less, so an unrestricted share pays more on A;
 *   - placements: on the first instance, tasks placed in a fixed order
 *     through the scheduler, fgd-la reaches the best any greedy order can
 *     (every task that fits is placed) and FGD does not (it pairs the two
 *     350s on one GPU); on the second fgd-la keeps the unrestricted shares
 *     off A and places the best too.
 *
 * The price cases and the first placement pass only through the plan: with
 * it off (la_plan_ok false) fgd-la places what FGD places (2100 milli).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>

#include "core/fgdla_plan.h"
#include "core_fixture.h"

typedef struct task {
    int milli;         /* a share (1..999) or 1000 for one whole GPU */
    const char *model; /* the one allowed model, NULL any */
} task_t;

/* One-GPU nodes, models[i] the model of node i. */
static void make_nodes(fx_t *f, int n, const char *const *models)
{
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        uint32_t id = fx_node(f, name, 1, 0, models[i], 16384);
        N(f, id)->cap.cpu_milli = 64000;
        N(f, id)->cap.mem_bytes = 256 * GIB;
        fx_touch(f, id);
    }
}

static arb_job_t *task_job(fx_t *f, int k, const task_t *t)
{
    char name[16];
    arb_job_t *j;

    snprintf(name, sizeof name, "t%d", k);
    j = fx_job_new(name, 1, t->milli >= 1000 ? 1 : 0, t->milli >= 1000 ? 0 : t->milli);
    if (t->model)
        fx_model(f, j, t->model);
    assert_int_equal(arb_job_finalize(j, &f->err), 0);
    return j;
}

/* Submit every task (the policy learns the mix), then place them in order,
 * as the simulator's paper mode does. The GPU milli placed. */
static int place_all(const char *policy, int nn, const char *const *models, const task_t *ts,
                     int nt)
{
    fx_t f;
    arb_job_t *jobs[32];
    int placed = 0;

    assert_true(nt <= 32);
    fx_init(&f);
    make_nodes(&f, nn, models);
    fx_sched(&f, policy);
    for (int k = 0; k < nt; k++) {
        jobs[k] = task_job(&f, k, &ts[k]);
        assert_int_equal(arb_sched_submit(f.s, jobs[k], &f.ctx, &f.err), 0);
    }
    for (int k = 0; k < nt; k++) {
        f.ctx.now_ns = k;
        int rc = arb_sched_place(f.s, jobs[k], &f.ctx);
        assert_true(rc == 0 || rc == -ENOSPC);
        if (rc == 0)
            placed += ts[k].milli;
    }
    fx_check(&f);
    fx_free(&f);
    return placed;
}

/* The best any greedy order reaches: every task, in order, put on some GPU
 * where it fits (none skipped while one fits), over all such choices. */
static int greedy_best(int nn, const char *const *models, const task_t *ts, int nt, int k,
                       int *free_milli)
{
    int best = -1;

    if (k == nt)
        return 0;
    for (int i = 0; i < nn; i++) {
        if (free_milli[i] < ts[k].milli || (ts[k].model && strcmp(ts[k].model, models[i]) != 0))
            continue;
        free_milli[i] -= ts[k].milli;
        int v = ts[k].milli + greedy_best(nn, models, ts, nt, k + 1, free_milli);
        free_milli[i] += ts[k].milli;
        if (v > best)
            best = v;
    }
    return best >= 0 ? best : greedy_best(nn, models, ts, nt, k + 1, free_milli);
}

static int greedy_opt(int nn, const char *const *models, const task_t *ts, int nt)
{
    int free_milli[8];

    for (int i = 0; i < nn; i++)
        free_milli[i] = 1000;
    return greedy_best(nn, models, ts, nt, 0, free_milli);
}

/* A solved plan for tasks ts on nn nodes; the cluster stays in f. */
static la_plan_t *solve(fx_t *f, int nn, const char *const *models, const task_t *ts, int nt,
                        la_plan_info_t *info)
{
    fgd_table_t *tab;
    la_plan_t *p = la_plan_new();

    fx_init(f);
    make_nodes(f, nn, models);
    assert_non_null(p);
    assert_non_null(tab = fgd_table_new(&f->c.strs));
    for (int k = 0; k < nt; k++) {
        arb_job_t *j = task_job(f, k, &ts[k]);
        assert_int_equal(fgd_table_count(tab, j), 0);
        arb_job_free(j);
    }
    assert_int_equal(la_plan_solve(p, &f->c, tab, info), 0);
    assert_true(la_plan_ok(p));
    assert_int_equal(la_plan_nodes(p), nn);
    fgd_table_free(tab);
    return p;
}

static la_plan_task_t as_plan_task(fx_t *f, const task_t *t, uint32_t *model)
{
    la_plan_task_t pt = {.cpu = 1000, .mem = (double)GIB, .milli = t->milli, .num = 1};
    if (t->model) {
        *model = S(f, t->model);
        pt.nmodels = 1;
        pt.models = model;
    }
    return pt;
}

/* ---- shares that pair ------------------------------------------------------ */

static const char *const one_model[3] = {"A", "A", "A"};
static const task_t pairs[6] = {{350, NULL}, {350, NULL}, {800, NULL},
                                {600, NULL}, {600, NULL}, {800, NULL}};

static void test_prices_pair_shares(void **state)
{
    fx_t f;
    la_plan_info_t info;
    la_plan_t *p = solve(&f, 3, one_model, pairs, 6, &info);
    la_plan_task_t t350 = as_plan_task(&f, &pairs[0], NULL);
    double base = la_plan_base(p, &t350);
    const arb_node_t *n = N(&f, 0);

    assert_int_equal(info.types, 1);
    assert_int_equal(info.shapes, 3);
    /* The mix (scaled to the 3 GPUs) does not all fit: theta below 1. */
    assert_true(info.theta > 0 && info.theta < 1);
    assert_true(base > 0);
    /* Empty GPU: the 650 left is a 600's room; 350 free: a perfect fit. */
    assert_true(fabs(la_plan_cost(p, n, &t350, 1000) - base) < 1e-6);
    assert_true(fabs(la_plan_cost(p, n, &t350, 350) - base) < 1e-6);
    /* 650 free: the 300 left is worth nothing, the 600's room is lost. */
    assert_true(la_plan_cost(p, n, &t350, 650) - base > 100);
    la_plan_free(p);
    fx_free(&f);
}

static void test_places_pair_shares(void **state)
{
    int best = greedy_opt(3, one_model, pairs, 6);
    int fgd = place_all("fgd", 3, one_model, pairs, 6);
    int la = place_all("fgd-la", 3, one_model, pairs, 6);

    print_message("pairs: fgd %d, fgd-la %d, best greedy %d milli\n", fgd, la, best);
    assert_int_equal(best, 2700); /* {350,600} twice and an 800 */
    assert_int_equal(la, best);
    assert_true(fgd < la);
}

/* ---- a GPU model that restricted tasks need ----------------------------------- */

/* One A GPU, two B; half the mix's GPU demand may only use A. The A pool
 * holds two thirds of it (theta 2/3), the unrestricted half fits on B with
 * room to spare: an A GPU is worth its milli, a B GPU nothing more. */
static const char *const two_models[3] = {"A", "B", "B"};
static const task_t pools[6] = {{500, NULL}, {500, NULL}, {500, NULL},
                                {500, "A"},  {500, "A"},  {500, "A"}};

static void test_prices_reserved_model(void **state)
{
    fx_t f;
    la_plan_info_t info;
    la_plan_t *p = solve(&f, 3, two_models, pools, 6, &info);
    uint32_t ma;
    la_plan_task_t any = as_plan_task(&f, &pools[0], NULL);
    la_plan_task_t onlya = as_plan_task(&f, &pools[3], &ma);
    const arb_node_t *na = N(&f, 0), *nb = N(&f, 1);

    assert_int_equal(info.types, 2);
    assert_int_equal(info.shapes, 2);
    assert_true(fabs(info.theta - 2.0 / 3) < 1e-6);
    /* An unrestricted share costs more on A than on B, where its least cost is. */
    assert_true(la_plan_cost(p, na, &any, 1000) > la_plan_cost(p, nb, &any, 1000) + 100);
    assert_true(fabs(la_plan_cost(p, nb, &any, 1000) - la_plan_base(p, &any)) < 1e-6);
    /* The A-only share pays A's price: its least cost, on A. */
    assert_true(fabs(la_plan_cost(p, na, &onlya, 1000) - la_plan_base(p, &onlya)) < 1e-6);
    assert_true(la_plan_base(p, &onlya) > la_plan_base(p, &any) + 100);
    la_plan_free(p);
    fx_free(&f);
}

/* Placed in this order, all three unrestricted shares must stay off A. */
static void test_places_reserved_model(void **state)
{
    int best = greedy_opt(3, two_models, pools, 6);
    int la = place_all("fgd-la", 3, two_models, pools, 6);

    assert_int_equal(best, 2500);
    assert_int_equal(la, best);
}

/* ---- no plan without GPU demand, and a cluster it cannot price ------------------ */

static void test_no_gpu_demand(void **state)
{
    fx_t f;
    fgd_table_t *tab;
    la_plan_t *p = la_plan_new();
    la_plan_info_t info;
    arb_job_t *j;
    task_t cpu_only = {0, NULL};

    fx_init(&f);
    make_nodes(&f, 2, one_model);
    assert_non_null(p);
    assert_non_null(tab = fgd_table_new(&f.c.strs));
    j = fx_job_new("cpu", 1, 0, 0);
    assert_int_equal(fgd_table_count(tab, j), 0);
    arb_job_free(j);
    assert_int_equal(la_plan_solve(p, &f.c, tab, &info), 0);
    assert_false(la_plan_ok(p));
    la_plan_task_t t = as_plan_task(&f, &cpu_only, NULL);
    assert_true(la_plan_cost(p, N(&f, 0), &t, 1000) == 0);
    assert_true(la_plan_base(p, &t) == 0);
    fgd_table_free(tab);
    la_plan_free(p);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prices_pair_shares),    cmocka_unit_test(test_places_pair_shares),
        cmocka_unit_test(test_prices_reserved_model), cmocka_unit_test(test_places_reserved_model),
        cmocka_unit_test(test_no_gpu_demand),
    };
    return cmocka_run_group_tests_name("fgdla-plan", tests, NULL, NULL);
}
