/*
 * test_sim_events.c: the simulator's events mode on hand-made traces whose
 * waiting times are worked out by hand below (fifo, priority, drf), the
 * never-scheduled tasks that leave at their deletion time, jobs that fit no
 * node, Poisson arrivals (deterministic by seed, rate as asked), the
 * durations reader, the topology file (and that its errors name
 * file:line:column), and gangs confined to a rack.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

/* One node, 2 GPUs. */
static const char *const nodes_csv = "sn,cpu_milli,memory_mib,gpu,model\n"
                                     "n0,16000,65536,2,T4\n";

/*
 * Five tasks on that node (times in seconds; duration = deletion - scheduled):
 *
 *   task  arrives  GPUs  runs  priority
 *   a        0      2    100      0
 *   b       10      1     50      0
 *   c       20      1     30      0
 *   d       30      2     10      0
 *   e       40      1      5    100
 *
 * fifo: a runs 0-100. At 100 b and c start (waits 90, 80); d, the head,
 * needs both GPUs: at 130 only c's is free, at 150 b's too, so d runs
 * 150-160 (wait 120) and e, behind it, 160-165 (wait 120).
 *   waits 0 90 80 120 120: mean 82, p50 90, p99 120.
 * priority: at 100 e goes first (wait 60, 100-105) with b (90, 100-150);
 * at 105 c takes e's GPU (wait 85, 105-135); d waits for b: 150 (120).
 *   waits 0 90 85 120 60: mean 71, p50 85, p99 120.
 * drf: one queue, so its order is the priority order.
 */
static const char *const tasks_csv =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time,"
    "priority\n"
    "a,1000,1024,2,1000,0,100,0,0\n"
    "b,1000,1024,1,1000,10,60,10,0\n"
    "c,1000,1024,1,1000,20,50,20,0\n"
    "d,1000,1024,2,1000,30,40,30,0\n"
    "e,1000,1024,1,1000,40,45,40,100\n";

static void load(const char *ncsv, const char *tcsv, sim_nodes_t *n, sim_tasks_t *t)
{
    arb_err_t err = {{0}};
    if (sim_nodes_parse(ncsv, strlen(ncsv), "nodes.csv", n, &err) < 0 ||
        sim_tasks_parse(tcsv, strlen(tcsv), "tasks.csv", t, &err) < 0) {
        print_error("%s\n", err.msg);
        fail();
    }
}

static void run(const sim_nodes_t *n, const sim_tasks_t *t, const sim_opts_t *o, sim_result_t *r)
{
    arb_err_t err = {{0}};
    if (sim_run_events(n, t, o, r, &err) < 0) {
        print_error("%s\n", err.msg);
        fail();
    }
}

static void check_waits(arb_queue_policy_t q, double mean, double p50, double p99, double jct_mean)
{
    sim_nodes_t n;
    sim_tasks_t t;
    sim_result_t *r = calloc(1, sizeof *r);
    sim_opts_t o = {.policy = "fgd", .seed = 42, .mode = SIM_MODE_EVENTS, .queue = q};

    assert_non_null(r);
    load(nodes_csv, tasks_csv, &n, &t);
    run(&n, &t, &o, r);
    print_message("%s: wait mean %.1f p50 %.1f p99 %.1f, jct mean %.1f\n", r->ev.queue,
                  r->ev.wait.mean, r->ev.wait.p50, r->ev.wait.p99, r->ev.jct.mean);
    assert_int_equal(r->ev.jobs, 5);
    assert_int_equal(r->ev.started, 5);
    assert_int_equal(r->ev.completed, 5);
    assert_int_equal(r->ev.waiting_end, 0);
    assert_int_equal(r->ev.pending_max, 4); /* b, c, d, e at 40 */
    assert_true(fabs(r->ev.wait.mean - mean) < 1e-9);
    assert_true(fabs(r->ev.wait.p50 - p50) < 1e-9);
    assert_true(fabs(r->ev.wait.p99 - p99) < 1e-9);
    assert_true(fabs(r->ev.jct.mean - jct_mean) < 1e-9);
    /* Both GPUs are busy from 0 to the last arrival (40). */
    assert_true(fabs(r->ev.gpu_util_pct - 100) < 1e-9);
    free(r);
    sim_tasks_free(&t);
    sim_nodes_free(&n);
}

static void test_fifo(void **state)
{
    /* JCT: a 100, b 140, c 110, d 130, e 125. */
    check_waits(ARB_QP_FIFO, 82, 90, 120, 121);
}

static void test_priority(void **state)
{
    /* JCT: a 100, b 140, c 115, d 130, e 65. */
    check_waits(ARB_QP_PRIORITY, 71, 85, 120, 110);
}

static void test_drf(void **state)
{
    check_waits(ARB_QP_DRF, 71, 85, 120, 110);
}

/* A task that never ran in the trace (no scheduled_time) leaves at its
 * deletion time if still waiting; one that fits no node is never queued,
 * so it cannot block a FIFO queue; a later arrival still gets in. */
static void test_abandoned_unschedulable(void **state)
{
    const char *csv =
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"
        "a,1000,1024,2,1000,0,100,0\n"
        "f,1000,1024,1,1000,50,60,\n"    /* waits from 50, gone at 60 */
        "g,1000,1024,4,1000,55,70,55\n"  /* 4 GPUs: no node has them */
        "h,1000,1024,1,1000,70,80,70\n"; /* waits for a: 100-110 */
    sim_nodes_t n;
    sim_tasks_t t;
    sim_result_t *r = calloc(1, sizeof *r);
    sim_opts_t o = {.policy = "bestfit", .seed = 1, .mode = SIM_MODE_EVENTS};

    assert_non_null(r);
    load(nodes_csv, csv, &n, &t);
    run(&n, &t, &o, r);
    assert_int_equal(r->tasks_arrived, 4);
    assert_int_equal(r->ev.jobs, 3);
    assert_int_equal(r->ev.unschedulable, 1);
    assert_int_equal(r->ev.abandoned, 1);
    assert_int_equal(r->ev.started, 2);
    assert_int_equal(r->ev.completed, 2);
    assert_true(fabs(r->ev.wait.mean - 15) < 1e-9); /* a 0, h 30 */
    free(r);
    sim_tasks_free(&t);
    sim_nodes_free(&n);
}

/* A trace without times is refused with a hint. */
static void test_needs_times(void **state)
{
    const char *csv = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\n";
    sim_nodes_t n;
    sim_tasks_t t;
    sim_result_t *r = calloc(1, sizeof *r);
    sim_opts_t o = {.policy = "fgd", .mode = SIM_MODE_EVENTS};
    arb_err_t err = {{0}};

    assert_non_null(r);
    load(nodes_csv, csv, &n, &t);
    assert_int_equal(sim_run_events(&n, &t, &o, r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "line 2: task 'p0' has no creation_time"));
    assert_non_null(strstr(err.msg, "--arrivals poisson:RATE"));
    free(r);
    sim_tasks_free(&t);
    sim_nodes_free(&n);
}

/* ---- Poisson arrivals ----------------------------------------------------------- */

static void test_poisson(void **state)
{
    const char *big = "sn,cpu_milli,memory_mib,gpu,model\n"
                      "n0,96000,393216,8,G2\nn1,96000,393216,8,G2\nn2,96000,393216,8,G2\n";
    const char *shapes = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                         "s1,4000,8192,1,1000\ns2,2000,4096,1,500\ns3,8000,16384,2,1000\n";
    const char *dcsv = "duration\n30\n60\n120\n";
    sim_nodes_t n;
    sim_tasks_t t;
    sim_durations_t d;
    sim_result_t *r = calloc(3, sizeof *r);
    arb_err_t err = {{0}};
    sim_opts_t o = {.policy = "fgd",
                    .seed = 7,
                    .mode = SIM_MODE_EVENTS,
                    .poisson_rate = 0.2,
                    .ntasks = 4000,
                    .durations = &d};

    assert_non_null(r);
    load(big, shapes, &n, &t);
    assert_int_equal(sim_durations_parse(dcsv, strlen(dcsv), "d.csv", &d, &err), 0);
    assert_int_equal(d.n, 3);
    run(&n, &t, &o, &r[0]);
    run(&n, &t, &o, &r[1]);
    o.seed = 8;
    run(&n, &t, &o, &r[2]);
    /* Same seed, same run (timings aside); another seed, another run. */
    r[0].place_s = r[1].place_s = r[0].run_s = r[1].run_s = 0;
    assert_memory_equal(&r[0], &r[1], sizeof r[0]);
    assert_true(r[0].ev.span_s != r[2].ev.span_s || r[0].ev.wait.mean != r[2].ev.wait.mean);
    assert_int_equal(r[0].tasks_arrived, 4000);
    assert_int_equal(r[0].ev.completed, 4000);
    /* 4000 arrivals at 0.2/s span about 20000 s (sd ~ 1.6%), plus the last run. */
    print_message("poisson: span %.0f s, wait mean %.1f s, util %.1f%%\n", r[0].ev.span_s,
                  r[0].ev.wait.mean, r[0].ev.gpu_util_pct);
    assert_true(r[0].ev.span_s > 18800 && r[0].ev.span_s < 21500);
    free(r);
    sim_durations_free(&d);
    sim_tasks_free(&t);
    sim_nodes_free(&n);
}

static void test_durations_parse(void **state)
{
    const char *trace = "name,deletion_time,scheduled_time\na,100,40\nb,50,\nc,7,7\n";
    const char *badc = "duration\n10\nx1\n";
    const char *none = "name,cpu\na,1\n";
    sim_durations_t d;
    arb_err_t err = {{0}};

    assert_int_equal(sim_durations_parse(trace, strlen(trace), "t.csv", &d, &err), 0);
    assert_int_equal(d.n, 2); /* b never ran */
    assert_int_equal(d.v[0], 60);
    assert_int_equal(d.v[1], 0);
    sim_durations_free(&d);
    assert_int_equal(sim_durations_parse(badc, strlen(badc), "d.csv", &d, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "d.csv:3:1: duration 'x1' is not a whole number"));
    assert_int_equal(sim_durations_parse(none, strlen(none), "n.csv", &d, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "n.csv:1:1: the header needs a 'duration' column"));
}

/* ---- topology and gangs ------------------------------------------------------------ */

static const char *const rack_nodes = "sn,cpu_milli,memory_mib,gpu,model\n"
                                      "a0,96000,393216,8,G2\na1,96000,393216,8,G2\n"
                                      "b0,96000,393216,8,G2\nb1,96000,393216,4,T4\n";

static void test_topology_file(void **state)
{
    const char *topo = "node,rack,block,nvlink\n"
                       "*,,blk,\n"
                       "a*,ra,,4\n"
                       "b0,rb,,0|0|1|1|2|2|3|3\n"
                       "b1,rb,,all\n";
    sim_nodes_t n;
    sim_tasks_t t;
    arb_err_t err = {{0}};

    load(rack_nodes, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1000\n", &n, &t);
    assert_int_equal(sim_topo_parse(topo, strlen(topo), "topo.csv", &n, &err), 0);
    assert_string_equal(n.v[0].rack, "ra");
    assert_string_equal(n.v[1].rack, "ra");
    assert_string_equal(n.v[2].rack, "rb");
    assert_string_equal(n.v[3].block, "blk");
    assert_int_equal(n.v[0].nvlink[3], 0);
    assert_int_equal(n.v[0].nvlink[4], 1);
    assert_int_equal(n.v[2].nvlink[5], 2);
    assert_int_equal(n.v[3].nvlink[3], 0);
    assert_int_equal(n.v[3].nvlink[4], -1);
    sim_tasks_free(&t);
    sim_nodes_free(&n);
}

typedef struct topo_bad {
    const char *csv, *msg;
} topo_bad_t;

static const topo_bad_t topo_bad[] = {
    {"rack,nvlink\nra,4\n", "t.csv:1:1: the header has no column 'node'"},
    {"node,rack\nzz*,ra\n", "t.csv:2:1: node 'zz*' matches no node of the node list"},
    {"node,rack,nvlink\na0,ra,0|0|1\n",
     "t.csv:2:7: nvlink '0|0|1' lists 3 GPU domains, but node 'a0' (line 2 of the node list) "
     "has 8 GPUs"},
    {"node,nvlink\nb1,banana\n", "t.csv:2:4: nvlink 'banana' is not an NVLink spec"},
    {"node,nvlink\nb1,0|0|99|0\n", "t.csv:2:4: nvlink '0|0|99|0' has a domain that is not 0..15"},
    {"node,rack\n\"a0\",ra\n", "t.csv:2:1: quoted fields are not supported"},
    {"node,rack\n", "t.csv:1:1: no rows after the header"},
    {"node,rack,block\na0,ra\n", "t.csv:2:7: block: the line ends after 2 columns"},
};

static void test_topology_errors(void **state)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof topo_bad / sizeof topo_bad[0]; i++) {
        sim_nodes_t n;
        sim_tasks_t t;
        arb_err_t err = {{0}};
        int rc;
        load(rack_nodes, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1000\n", &n, &t);
        rc = sim_topo_parse(topo_bad[i].csv, strlen(topo_bad[i].csv), "t.csv", &n, &err);
        if (rc != -EINVAL || !strstr(err.msg, topo_bad[i].msg)) {
            print_error("case %zu: rc %d, \"%s\", wanted \"%s\"\n", i, rc, err.msg,
                        topo_bad[i].msg);
            bad++;
        }
        /* A failed file leaves the nodes as they were. */
        for (int k = 0; k < n.n; k++)
            if (n.v[k].rack[0] || n.v[k].nvlink[0] != -1)
                bad++;
        sim_tasks_free(&t);
        sim_nodes_free(&n);
    }
    assert_int_equal(bad, 0);
}

/* 8-GPU tasks become gangs of 2 that must share a rack: only rack ra has two
 * 8-GPU nodes, so every gang lands there, on 2 nodes; the task list's own
 * replicas/topology columns do the same. */
static void test_gangs_in_rack(void **state)
{
    const char *topo = "node,rack\na*,ra\nb*,rb\n";
    const char *csv =
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"
        "g1,8000,8192,8,1000,0,100,0\n"
        "g2,8000,8192,8,1000,10,60,10\n"
        "s1,8000,8192,1,1000,20,30,20\n";
    const char *cols = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,"
                       "scheduled_time,replicas,topology\n"
                       "g1,8000,8192,8,1000,0,100,0,2,rack\n"
                       "g2,8000,8192,8,1000,10,60,10,2,rack\n"
                       "s1,8000,8192,1,1000,20,30,20,,\n";
    sim_nodes_t n;
    sim_tasks_t t;
    sim_result_t *r = calloc(1, sizeof *r);
    arb_err_t err = {{0}};
    sim_opts_t o = {.policy = "default",
                    .seed = 3,
                    .mode = SIM_MODE_EVENTS,
                    .gang_gpus = 8,
                    .gang_size = 2,
                    .gang_level = ARB_TOPO_RACK,
                    .gang_required = true};

    assert_non_null(r);
    for (int pass = 0; pass < 2; pass++) {
        load(rack_nodes, pass ? cols : csv, &n, &t);
        assert_int_equal(sim_topo_parse(topo, strlen(topo), "topo.csv", &n, &err), 0);
        if (pass)
            o.gang_gpus = 0;
        run(&n, &t, &o, r);
        assert_int_equal(r->ev.gangs, 2);
        assert_int_equal(r->ev.gangs_started, 2);
        assert_true(fabs(r->ev.gang_racks - 1) < 1e-9);
        assert_true(fabs(r->ev.gang_nodes - 2) < 1e-9);
        /* g2 waits for g1 (both need rack ra): 10 -> 100. */
        assert_true(fabs(r->ev.gang_wait.mean - 45) < 1e-9);
        assert_int_equal(r->ev.started, 3);
        sim_tasks_free(&t);
        sim_nodes_free(&n);
    }
    free(r);
}

static void test_task_columns(void **state)
{
    const char *csv = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,queue,priority,replicas,"
                      "topology\n"
                      "a,1,1,1,1000,LS,,-5,3,prefer-rack\n"
                      "b,1,1,1,1000,BE,teamx,,,nvlink\n";
    const char *bad = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,topology\na,1,1,1,1000,moon\n";
    sim_tasks_t t;
    arb_err_t err = {{0}};

    assert_int_equal(sim_tasks_parse(csv, strlen(csv), "t.csv", &t, &err), 0);
    assert_string_equal(t.v[0].qos, "LS");
    assert_int_equal(t.v[0].priority, -5);
    assert_int_equal(t.v[0].replicas, 3);
    assert_int_equal(t.v[0].topo_level, ARB_TOPO_RACK);
    assert_false(t.v[0].topo_required);
    assert_string_equal(t.v[1].queue, "teamx");
    assert_int_equal(t.v[1].priority, SIM_PRIO_UNSET);
    assert_int_equal(t.v[1].replicas, 1);
    assert_int_equal(t.v[1].topo_level, ARB_TOPO_NVLINK);
    assert_true(t.v[1].topo_required);
    sim_tasks_free(&t);
    assert_int_equal(sim_tasks_parse(bad, strlen(bad), "t.csv", &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "t.csv:2:14: topology 'moon' is not a topology level"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_priority),
        cmocka_unit_test(test_drf),
        cmocka_unit_test(test_abandoned_unschedulable),
        cmocka_unit_test(test_needs_times),
        cmocka_unit_test(test_poisson),
        cmocka_unit_test(test_durations_parse),
        cmocka_unit_test(test_topology_file),
        cmocka_unit_test(test_topology_errors),
        cmocka_unit_test(test_gangs_in_rack),
        cmocka_unit_test(test_task_columns),
    };
    return cmocka_run_group_tests_name("sim-events", tests, NULL, NULL);
}
