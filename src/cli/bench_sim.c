/*
 * bench_sim.c: `arbiter bench sim`: the simulator's speed on the Alibaba
 * trace (../shared/traces/openb): runs the FGD paper's experiment for one
 * workload and policy, one seed after another in this process (one core),
 * and prints tasks decided and placed per CPU second of the arrival loop,
 * and the wall time of whole runs (reading the trace excluded).
 *
 * The trace directory is --traces DIR, else $ARB_TRACES, else the first of
 * ./shared/traces/openb, ../shared/traces/openb and, next to the binary,
 * ../../shared/traces/openb and ../shared/traces/openb that exists.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "sim/sim.h"

typedef struct sim_bopts {
    const char *workload, *policy, *traces, *seeds;
    int json;
} sim_bopts_t;

static const fl_flag_t sim_flags[] = {
    FL_OPT(sim_bopts_t, workload, "--workload", NULL, FL_STR, "NAME",
           "the trace's workload (openb_pod_list_NAME.csv)", .def = "default"),
    FL_OPT(sim_bopts_t, policy, "--policy", NULL, FL_STR, "NAME", "the placement policy",
           .def = "fgd"),
    FL_OPT(sim_bopts_t, seeds, "--seeds", NULL, FL_STR, "S-T",
           "the seeds, one (42) or a range of at most 1000 (42-44)", .def = "42-44"),
    FL_OPT(sim_bopts_t, seeds, "--seed", NULL, FL_STR, "S", "the same as --seeds"),
    FL_OPT(sim_bopts_t, traces, "--traces", NULL, FL_STR, "DIR",
           "the openb folder of ../shared/traces (default: $ARB_TRACES, or found beside the "
           "binary)"),
    FL_OPT(sim_bopts_t, json, NULL, "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t sim_verb = {
    .name = "bench sim",
    .summary = "a trace replay's arrival loop: tasks decided and placed per CPU second",
    .flags = sim_flags};

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The trace directory (see the top of the file); false when none exists. */
static bool find_traces(const char *given, char *out, size_t n)
{
    static const char *const rel[] = {"shared/traces/openb", "../shared/traces/openb"};
    static const char *const exe_rel[] = {"../../shared/traces/openb", "../shared/traces/openb"};
    char exe[PATH_MAX - 64];
    ssize_t len;

    if (given) {
        snprintf(out, n, "%s", given);
        return is_dir(out);
    }
    if (getenv("ARB_TRACES")) {
        snprintf(out, n, "%s", getenv("ARB_TRACES"));
        return is_dir(out);
    }
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
        if (is_dir(rel[i])) {
            snprintf(out, n, "%s", rel[i]);
            return true;
        }
    len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        char *slash;
        exe[len] = 0;
        if ((slash = strrchr(exe, '/')))
            *slash = 0;
        for (size_t i = 0; i < sizeof exe_rel / sizeof exe_rel[0]; i++) {
            snprintf(out, n, "%s/%s", exe, exe_rel[i]);
            if (is_dir(out))
                return true;
        }
    }
    return false;
}

int cli_bench_sim(int argc, char **argv)
{
    const char *workload = "default", *policy = "fgd", *traces = NULL, *out = "text";
    unsigned long long s0 = 42, s1 = 44;
    char dir[PATH_MAX], path[PATH_MAX + 64];

    sim_nodes_t nodes = {0};
    sim_tasks_t tasks = {0};
    arb_err_t err = {{0}};
    double place = 0, run = 0;
    long decided = 0, placed = 0;
    int rc = 1, nseeds;

    sim_bopts_t bo = {0};
    fl_args_t a;
    if (!fl_run(&sim_verb, argc, argv, &bo, &a, &rc))
        return rc;
    rc = 1;
    workload = bo.workload;
    policy = bo.policy;
    traces = bo.traces;
    out = bo.json ? "json" : "text";
    int k = sscanf(bo.seeds, "%llu-%llu", &s0, &s1);
    if (k == 1)
        s1 = s0;
    if (k < 1 || s1 < s0 || s1 - s0 > 999) {
        fprintf(stderr,
                "arbiter bench sim: --seeds: '%s' is not a seed or a range of at most 1000 "
                "(e.g. --seeds 42-44)\n",
                bo.seeds);
        return 2;
    }
    if (!find_traces(traces, dir, sizeof dir)) {
        fprintf(stderr,
                "arbiter bench sim: no trace directory%s%s; give --traces DIR (the openb "
                "folder of ../shared/traces) or set ARB_TRACES\n",
                traces ? " at " : " found", traces ? traces : "");
        return 1;
    }
    snprintf(path, sizeof path, "%s/openb_node_list_gpu_node.csv", dir);
    if (sim_nodes_load(path, &nodes, &err) < 0)
        goto fail;
    snprintf(path, sizeof path, "%s/openb_pod_list_%s.csv", dir, workload);
    if (sim_tasks_load(path, &tasks, &err) < 0)
        goto fail;
    nseeds = (int)(s1 - s0 + 1);
    for (unsigned long long seed = s0; seed <= s1; seed++) {
        sim_opts_t o = {.policy = policy, .seed = seed, .inflate = 1.3};
        sim_result_t *r = malloc(sizeof *r);
        if (!r) {
            arb_errf(&err, -ENOMEM, "out of memory");
            goto fail;
        }
        if (sim_run(&nodes, &tasks, &o, r, &err) < 0) {
            free(r);
            goto fail;
        }
        place += r->place_s;
        run += r->run_s;
        decided += r->tasks_arrived;
        placed += r->tasks_arrived - r->tasks_failed;
        free(r);
    }
    if (strcmp(out, "json") == 0)
        printf("{\"bench\":\"sim\",\"workload\":\"%s\",\"policy\":\"%s\",\"seeds\":%d,"
               "\"tasks\":%ld,\"placed\":%ld,\"place_s\":%.3f,\"tasks_per_s\":%.0f,"
               "\"placed_per_s\":%.0f,\"run_s_mean\":%.3f}\n",
               workload, policy, nseeds, decided, placed, place, decided / place, placed / place,
               run / nseeds);
    else
        printf("bench sim: workload %s, policy %s, %d seed%s (%llu-%llu)\n"
               "  %ld tasks decided, %ld placed, in %.3f CPU s of arrival loop\n"
               "  %.0f tasks/s decided, %.0f tasks/s placed; one whole run %.3f s (wall)\n",
               workload, policy, nseeds, nseeds == 1 ? "" : "s", s0, s1, decided, placed, place,
               decided / place, placed / place, run / nseeds);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "arbiter bench sim: %s\n", err.msg);
out:
    sim_tasks_free(&tasks);
    sim_nodes_free(&nodes);
    return rc;
}
