/*
 * test_sim_gen.c: the workload generator and the offline bound.
 *
 * Generator: point names and parse errors; on the trace's default workload
 * each step reaches its target share (and leaves the rest as the authors'
 * method does), specs come from the pool by task class, output is
 * deterministic per seed and round-trips through the CSV writer and reader,
 * and the generated gpushare40 / multigpu20 / cpu050 are the size of the
 * published ones.
 *
 * Bound: hand-computed optima on tiny clusters (share packing, a CPU row, a
 * GPU model), never below the exact optimum of random tiny instances (found
 * by enumeration), and never below what fgd and fgd-la allocate on a
 * down-scaled openb instance.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/sched.h"
#include "sim/gen.h"
#include "sim/sim.h"

#define OPENB ARB_SHARED_DIR "/traces/openb"

static sim_nodes_t nodes;
static sim_tasks_t base, spec10;

static int load(void **state)
{
    arb_err_t err = {{0}};

    if (sim_nodes_load(OPENB "/openb_node_list_gpu_node.csv", &nodes, &err) < 0 ||
        sim_tasks_load(OPENB "/openb_pod_list_default.csv", &base, &err) < 0 ||
        sim_tasks_load(OPENB "/openb_pod_list_gpuspec10.csv", &spec10, &err) < 0) {
        print_error("%s\n", err.msg);
        return -1;
    }
    return 0;
}

static int unload(void **state)
{
    sim_tasks_free(&base);
    sim_tasks_free(&spec10);
    sim_nodes_free(&nodes);
    return 0;
}

/* ---- parsing ------------------------------------------------------------------- */

static void test_parse_names(void **state)
{
    sim_gen_point_t v[SIM_GEN_MAX_POINTS];
    arb_err_t err = {{0}};
    int n;

    assert_int_equal(sim_gen_parse("gpushare:60,cpu:5,cpu:0,gpuspec:5,gpuspec:33+cpu:20,default,"
                                   "multigpu:2.5",
                                   v, SIM_GEN_MAX_POINTS, &n, &err),
                     0);
    assert_int_equal(n, 7);
    assert_string_equal(v[0].name, "gpushare60");
    assert_string_equal(v[1].name, "cpu050");
    assert_string_equal(v[2].name, "cpu0");
    assert_string_equal(v[3].name, "gpuspec05");
    assert_string_equal(v[4].name, "gpuspec33+cpu200");
    assert_int_equal(v[4].nsteps, 2);
    assert_int_equal(v[4].step[1].kind, SIM_GEN_CPU);
    assert_string_equal(v[5].name, "default");
    assert_int_equal(v[5].nsteps, 0);
    assert_string_equal(v[6].name, "multigpu2.5");
    assert_int_equal(sim_gen_parse("family", v, SIM_GEN_MAX_POINTS, &n, &err), 0);
    assert_int_equal(n, 20);
}

static void test_parse_errors(void **state)
{
    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"gpushare", "--gen 'gpushare': write KIND:PCT"},
        {"gpusahre:40", "--gen: unknown kind 'gpusahre'"},
        {"cpu:100", "--gen cpu:100: give a percent, 0..100 (cpu: below 100)"},
        {"multigpu:-1", "--gen multigpu:-1: give a percent"},
        {"gpuspec:1x", "--gen gpuspec:1x: give a percent"},
        {"gpushare:20,,cpu:5", "--gen: empty or overlong item"},
        {"", "--gen: name at least one workload"},
        {"cpu:1+cpu:2+cpu:3+cpu:4+cpu:5", "at most 4 steps"},
    };
    sim_gen_point_t v[4];
    arb_err_t err = {{0}};
    int n;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(sim_gen_parse(bad[i].in, v, 4, &n, &err), -EINVAL);
        if (!strstr(err.msg, bad[i].msg)) {
            print_error("'%s': got '%s', want '%s'\n", bad[i].in, err.msg, bad[i].msg);
            fail();
        }
    }
    assert_int_equal(sim_gen_parse("family", v, 4, &n, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "at most 4 workloads"));
}

/* ---- generating ------------------------------------------------------------------ */

static void make(const char *spec, uint64_t seed, const sim_tasks_t *pool, sim_tasks_t *out)
{
    sim_gen_point_t p;
    arb_err_t err = {{0}};
    int n;

    assert_int_equal(sim_gen_parse(spec, &p, 1, &n, &err), 0);
    if (sim_gen_make(&base, &p, pool, &nodes, seed, out, &err) < 0) {
        print_error("%s: %s\n", spec, err.msg);
        fail();
    }
}

static void test_targets(void **state)
{
    sim_gen_stats_t b, s;
    sim_tasks_t t;

    sim_gen_stats(&base, &b);
    assert_int_equal(b.tasks, 8152);
    assert_int_equal(b.cpu_only, 1088);

    /* gpushare: the share of the GPU request; task and GPU-task counts kept. */
    for (int pct = 20; pct <= 100; pct += 20) {
        char spec[48];
        snprintf(spec, sizeof spec, "gpushare:%d", pct);
        make(spec, 1, NULL, &t);
        sim_gen_stats(&t, &s);
        print_message("%-12s tasks %d sharing %d share %.1f%%\n", spec, s.tasks, s.sharing,
                      s.share_pct);
        assert_int_equal(s.tasks, b.tasks);
        assert_int_equal(s.cpu_only, b.cpu_only);
        assert_true(fabs(s.share_pct - pct) < 1.5);
        if (pct == 100)
            assert_int_equal(s.sharing, s.tasks - s.cpu_only);
        snprintf(spec, sizeof spec, "openb_pod_list_gpushare%d", pct);
        assert_string_equal(t.workload, spec);
        sim_tasks_free(&t);
    }
    /* multigpu: added copies until the share is reached; the rest as it was. */
    make("multigpu:30", 1, NULL, &t);
    sim_gen_stats(&t, &s);
    assert_true(s.multi_pct >= 30 && s.multi_pct < 30.2);
    assert_int_equal(s.cpu_only, b.cpu_only);
    assert_int_equal(s.sharing, b.sharing);
    assert_true(s.tasks > b.tasks);
    assert_string_equal(t.workload, "openb_pod_list_multigpu30");
    sim_tasks_free(&t);
    /* gpuspec: model-restricted tasks carry the share; sharing tasks keep
     * sharing-task specs (gpuspec10 gives them only T4, P100 and one list). */
    make("gpuspec:25", 1, &spec10, &t);
    sim_gen_stats(&t, &s);
    assert_true(s.spec_pct >= 25 && s.spec_pct < 25.2);
    assert_int_equal(s.tasks, b.tasks);
    for (int i = 0; i < t.n; i++) {
        const sim_task_t *x = &t.v[i];
        if (x->num_gpu == 1 && x->gpu_milli < 1000 && x->gpu_spec[0])
            assert_true(strcmp(x->gpu_spec, "T4") == 0 || strcmp(x->gpu_spec, "P100") == 0 ||
                        strcmp(x->gpu_spec, "G2|P100|T4|V100M16|V100M32") == 0);
        if (x->num_gpu == 0)
            assert_string_equal(x->gpu_spec, "");
    }
    sim_tasks_free(&t);
    /* Without a pool: one model each, from the nodes that could hold the task. */
    make("gpuspec:10", 1, NULL, &t);
    sim_gen_stats(&t, &s);
    assert_true(s.spec_pct >= 10 && s.spec_pct < 10.2);
    for (int i = 0; i < t.n; i++)
        assert_null(strchr(t.v[i].gpu_spec, '|'));
    sim_tasks_free(&t);
    /* cpu: CPU-only tasks as a share of all tasks; GPU tasks unchanged. */
    make("cpu:20", 1, NULL, &t);
    sim_gen_stats(&t, &s);
    assert_true(fabs(s.cpu_pct - 20) < 0.05);
    assert_int_equal(s.tasks - s.cpu_only, b.tasks - b.cpu_only);
    sim_tasks_free(&t);
    make("cpu:0", 1, NULL, &t);
    sim_gen_stats(&t, &s);
    assert_int_equal(s.cpu_only, 0);
    assert_string_equal(t.workload, "openb_pod_list_cpu0");
    sim_tasks_free(&t);
    /* Steps compose in order. */
    make("gpuspec:33+cpu:25", 1, &spec10, &t);
    sim_gen_stats(&t, &s);
    assert_true(s.spec_pct >= 33 && s.spec_pct < 33.3);
    assert_true(fabs(s.cpu_pct - 25) < 0.05);
    sim_tasks_free(&t);
}

/* The published variants' sizes: the method, not only the targets. */
static void test_like_published(void **state)
{
    static const char *const names[] = {"gpushare40", "multigpu20", "cpu050", "gpuspec10"};
    static const char *const specs[] = {"gpushare:40", "multigpu:20", "cpu:5", "gpuspec:10"};

    for (int i = 0; i < 4; i++) {
        char path[256];
        sim_tasks_t pub, t;
        sim_gen_stats_t a, b;
        arb_err_t err = {{0}};
        snprintf(path, sizeof path, OPENB "/openb_pod_list_%s.csv", names[i]);
        assert_int_equal(sim_tasks_load(path, &pub, &err), 0);
        make(specs[i], 7, &spec10, &t);
        sim_gen_stats(&pub, &a);
        sim_gen_stats(&t, &b);
        print_message("%-10s published: %d tasks, %d sharing, %d multi, %d restricted; "
                      "generated: %d, %d, %d, %d\n",
                      names[i], a.tasks, a.sharing, a.multi, a.constrained, b.tasks, b.sharing,
                      b.multi, b.constrained);
        assert_true(abs(a.tasks - b.tasks) <= a.tasks / 50);
        assert_true(abs(a.sharing - b.sharing) <= a.sharing / 50 + 5);
        assert_true(abs(a.multi - b.multi) <= a.multi / 5 + 5);
        assert_true(abs(a.constrained - b.constrained) <= a.constrained / 10 + 5);
        assert_true(fabs(a.gpus - b.gpus) <= a.gpus / 50);
        sim_tasks_free(&pub);
        sim_tasks_free(&t);
    }
}

static void test_deterministic_roundtrip(void **state)
{
    sim_tasks_t a, b, c, back;
    arb_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    make("gpushare:60+gpuspec:20", 3, &spec10, &a);
    make("gpushare:60+gpuspec:20", 3, &spec10, &b);
    make("gpushare:60+gpuspec:20", 4, &spec10, &c);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.v, b.v, (size_t)a.n * sizeof *a.v);
    assert_true(a.n != c.n || memcmp(a.v, c.v, (size_t)a.n * sizeof *a.v) != 0);
    /* Written, read back: the same tasks. */
    assert_non_null(f = open_memstream(&buf, &len));
    assert_int_equal(sim_tasks_write(f, &a), 0);
    fclose(f);
    assert_int_equal(sim_tasks_parse(buf, len, "g.csv", &back, &err), 0);
    assert_int_equal(back.n, a.n);
    for (int i = 0; i < a.n; i++) {
        assert_string_equal(back.v[i].name, a.v[i].name);
        assert_int_equal(back.v[i].cpu_milli, a.v[i].cpu_milli);
        assert_int_equal(back.v[i].memory_mib, a.v[i].memory_mib);
        assert_int_equal(back.v[i].num_gpu, a.v[i].num_gpu);
        assert_int_equal(back.v[i].gpu_milli, a.v[i].gpu_milli);
        assert_string_equal(back.v[i].gpu_spec, a.v[i].gpu_spec);
        assert_string_equal(back.v[i].qos, a.v[i].qos);
        assert_int_equal(back.v[i].creation_s, a.v[i].creation_s);
        assert_int_equal(back.v[i].scheduled_s, a.v[i].scheduled_s);
    }
    free(buf);
    sim_tasks_free(&back);
    sim_tasks_free(&a);
    sim_tasks_free(&b);
    sim_tasks_free(&c);
}

static void test_gen_errors(void **state)
{
    sim_tasks_t none, t;
    sim_gen_point_t p;
    arb_err_t err = {{0}};
    int n;
    const char *csv = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,1,1000\n";

    assert_int_equal(sim_tasks_parse(csv, strlen(csv), "one.csv", &none, &err), 0);
    assert_int_equal(sim_gen_parse("gpushare:40", &p, 1, &n, &err), 0);
    assert_int_equal(sim_gen_make(&none, &p, NULL, &nodes, 1, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "no GPU-sharing GPU tasks to draw from"));
    assert_int_equal(sim_gen_parse("multigpu:20", &p, 1, &n, &err), 0);
    assert_int_equal(sim_gen_make(&none, &p, NULL, &nodes, 1, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "no multi-GPU tasks to copy"));
    assert_int_equal(sim_gen_parse("cpu:50", &p, 1, &n, &err), 0);
    assert_int_equal(sim_gen_make(&none, &p, NULL, &nodes, 1, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "no CPU-only tasks"));
    assert_int_equal(sim_gen_parse("gpuspec:10", &p, 1, &n, &err), 0);
    assert_int_equal(sim_gen_make(&none, &p, NULL, NULL, 1, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--spec-from"));
    sim_tasks_free(&none);
}

/* ---- the bound ----------------------------------------------------------------------- */

static double bound_of(const char *ncsv, const char *tcsv)
{
    sim_nodes_t n;
    sim_tasks_t t;
    sim_bound_info_t info;
    const sim_task_t *pt[64];
    arb_err_t err = {{0}};

    assert_int_equal(sim_nodes_parse(ncsv, strlen(ncsv), "n.csv", &n, &err), 0);
    assert_int_equal(sim_tasks_parse(tcsv, strlen(tcsv), "t.csv", &t, &err), 0);
    assert_true(t.n <= 64);
    for (int i = 0; i < t.n; i++)
        pt[i] = &t.v[i];
    if (sim_bound(&n, pt, t.n, &info, &err) < 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    sim_tasks_free(&t);
    sim_nodes_free(&n);
    return info.bound_milli;
}

static void test_bound_hand(void **state)
{
    const char *one = "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,1000,1,T4\n";
    /* 600 + 400 fill the GPU; the second 600 cannot join. */
    assert_true(fabs(bound_of(one, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                                   "a,1000,1,1,600\nb,1000,1,1,600\nc,1000,1,1,400\n") -
                     1000) < 1e-6);
    /* Two 500s would fit the GPU, but each takes 5 of the node's 8 cores. */
    assert_true(fabs(bound_of(one, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                                   "a,5000,1,1,500\nb,5000,1,1,500\n") -
                     500) < 1e-6);
    /* Only the T4 node may take the T4-only tasks: one of them. */
    assert_true(fabs(bound_of("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,1000,1,T4\n"
                              "n1,8000,1000,1,G2\n",
                              "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                              "a,1000,1,1,1000,T4\nb,1000,1,1,1000,T4\n") -
                     1000) < 1e-6);
    /* Whole GPUs and shares on one node; a CPU-only task adds nothing. */
    assert_true(fabs(bound_of("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,1000,4,G2\n",
                              "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                              "a,1000,1,2,1000\nb,1000,1,1,700\nc,1000,1,1,700\n"
                              "d,1000,1,1,300\ne,1000,1,0,0\n") -
                     3700) < 1e-6);
}

/* Exact optimum of a tiny instance by enumeration: each task nowhere or on
 * one (node, GPU) (whole-GPU tasks: on free GPUs of one node). */
typedef struct tiny {
    int nn, ng, cpu[3];
    int nt, milli[7], num[7], tcpu[7];
} tiny_t;

static int best_rec(const tiny_t *x, int k, int used[3][2], int cpu[3])
{
    int best = 0;

    if (k == x->nt)
        return 0;
    best = best_rec(x, k + 1, used, cpu); /* not placed */
    for (int n = 0; n < x->nn; n++) {
        if (cpu[n] < x->tcpu[k])
            continue;
        if (x->num[k] == 0) { /* share */
            for (int g = 0; g < x->ng; g++)
                if (used[n][g] + x->milli[k] <= 1000) {
                    used[n][g] += x->milli[k];
                    cpu[n] -= x->tcpu[k];
                    int v = x->milli[k] + best_rec(x, k + 1, used, cpu);
                    best = v > best ? v : best;
                    used[n][g] -= x->milli[k];
                    cpu[n] += x->tcpu[k];
                }
        } else {
            int freeg[2], nf = 0;
            for (int g = 0; g < x->ng; g++)
                if (used[n][g] == 0)
                    freeg[nf++] = g;
            if (nf < x->num[k])
                continue;
            for (int i = 0; i < x->num[k]; i++)
                used[n][freeg[i]] = 1000;
            cpu[n] -= x->tcpu[k];
            int v = 1000 * x->num[k] + best_rec(x, k + 1, used, cpu);
            best = v > best ? v : best;
            for (int i = 0; i < x->num[k]; i++)
                used[n][freeg[i]] = 0;
            cpu[n] += x->tcpu[k];
        }
    }
    return best;
}

static void test_bound_valid_random(void **state)
{
    static const int shares[] = {160, 230, 320, 470, 650, 810};
    arb_rng_t r;
    int tight = 0;

    arb_rng_seed(&r, 99);
    for (int it = 0; it < 40; it++) {
        tiny_t x = {.nn = 2 + (int)arb_rng_below(&r, 2), .ng = 1 + (int)arb_rng_below(&r, 2)};
        char ncsv[512] = "sn,cpu_milli,memory_mib,gpu,model\n",
             tcsv[1024] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
        int used[3][2] = {{0}}, cpu[3];
        x.nt = 4 + (int)arb_rng_below(&r, 4);
        for (int n = 0; n < x.nn; n++) {
            x.cpu[n] = cpu[n] = 4 + (int)arb_rng_below(&r, 6);
            snprintf(ncsv + strlen(ncsv), sizeof ncsv - strlen(ncsv), "n%d,%d,1000,%d,G2\n", n,
                     x.cpu[n] * 1000, x.ng);
        }
        for (int k = 0; k < x.nt; k++) {
            bool whole = arb_rng_below(&r, 4) == 0;
            x.num[k] = whole ? 1 + (int)arb_rng_below(&r, (uint64_t)x.ng) : 0;
            x.milli[k] = whole ? 1000 : shares[arb_rng_below(&r, 6)];
            x.tcpu[k] = 1 + (int)arb_rng_below(&r, 4);
            snprintf(tcsv + strlen(tcsv), sizeof tcsv - strlen(tcsv), "t%d,%d,1,%d,%d\n", k,
                     x.tcpu[k] * 1000, whole ? x.num[k] : 1, x.milli[k]);
        }
        int opt = best_rec(&x, 0, used, cpu);
        double b = bound_of(ncsv, tcsv);
        if (b < opt - 1e-6) {
            print_error("instance %d: bound %.1f below the optimum %d\n%s%s", it, b, opt, ncsv,
                        tcsv);
            fail();
        }
        tight += b < opt + 1e-6;
    }
    print_message("bound equal to the exact optimum on %d of 40 tiny instances\n", tight);
    assert_true(tight >= 10);
}

/* On a down-scaled openb instance (every 12th node, the default trace) the
 * bound is above what the policies allocate, seed by seed. */
static void test_bound_above_policies(void **state)
{
    static const char *const pol[] = {"fgd", "fgd-la", "bestfit", SIM_BOUND_POLICY};
    static const uint64_t seeds[] = {42, 43};
    sim_nodes_t small = {0};
    sim_result_t *res = calloc(4 * 2, sizeof *res);
    sim_opts_t o = {.inflate = 1.3};
    arb_err_t err = {{0}};

    assert_non_null(res);
    assert_non_null(small.v = calloc((size_t)nodes.n, sizeof *small.v));
    for (int i = 0; i < nodes.n; i += 12)
        small.v[small.n++] = nodes.v[i];
    assert_int_equal(sim_sweep(&small, &base, 1, pol, 4, seeds, 2, &o, 1, false, res, &err), 0);
    for (int s = 0; s < 2; s++) {
        double b = res[3 * 2 + s].alloc_pct[100];
        print_message("seed %d: fgd %.2f fgd-la %.2f bestfit %.2f bound %.2f\n", (int)seeds[s],
                      res[s].alloc_pct[100], res[2 + s].alloc_pct[100], res[4 + s].alloc_pct[100],
                      b);
        assert_true(b > 80 && b <= 100.5);
        for (int p = 0; p < 3; p++)
            assert_true(res[p * 2 + s].alloc_pct[100] <= b + 1e-9);
    }
    free(small.v);
    free(res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_names),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_like_published),
        cmocka_unit_test(test_deterministic_roundtrip),
        cmocka_unit_test(test_gen_errors),
        cmocka_unit_test(test_bound_hand),
        cmocka_unit_test(test_bound_valid_random),
        cmocka_unit_test(test_bound_above_policies),
    };
    return cmocka_run_group_tests_name("sim-gen", tests, load, unload);
}
