/*
 * sim.c: `arbiter sim`, the trace-driven simulator's verb. Parses the
 * options (one table, from which the usage text is made), loads the traces
 * once, runs every (workload, policy, seed), and for events mode every
 * queue policy, with sim_sweep, and prints JSON lines, CSV, or a comparison
 * with the FGD artifact's published results; optionally draws an SVG chart.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arbiter/sched.h"
#include "cli/cli.h"
#include "sim/gen.h"
#include "sim/sim.h"

#define SIM_MAX_WORKLOADS SIM_GEN_MAX_POINTS
#define SIM_MAX_POLICIES 16
#define SIM_MAX_SEEDS 1000
#define SIM_MAX_QUEUES 3

static const char *const paper_policies[] = {"random",      "dotprod", "gpu-clustering",
                                             "gpu-packing", "bestfit", "fgd"};

/* The options, one row each: name, value placeholder (NULL: a flag), help. */
static const struct sim_opt {
    const char *name, *alias, *value, *help;
} opts[] = {
    {"--nodes", NULL, "FILE", "node list: sn,cpu_milli,memory_mib,gpu,model"},
    {"--pods", NULL, "FILE", "task list (repeat for several workloads)"},
    {"--policy", NULL, "P[,P...]",
     "scheduling profiles, 'paper' for the paper's six, or 'bound' (paper mode: an offline upper "
     "bound at 100% arrived)"},
    {"--seed", "--seeds", "S", "42, 42-51, or a comma list of both (default 42)"},
    {"--mode", NULL, "MODE", "paper (default: the FGD artifact's experiment) or events"},
    {"--inflate", NULL, "X", "paper mode: GPU demand to reach, x cluster GPUs (default 1.3)"},
    {"--online", NULL, NULL, "paper mode: submit each task just before placing it"},
    {"--queue", NULL, "Q[,Q...]", "events mode: fifo (default), priority, drf"},
    {"--compress", NULL, "X", "events mode: trace creation times divided by X (load x X)"},
    {"--cycle", NULL, "SECONDS",
     "events mode: schedule every SECONDS of virtual time (default: "
     "at every event)"},
    {"--arrivals", NULL, "poisson:RATE",
     "events mode: Poisson arrivals, RATE tasks/s (or /min, /h)"},
    {"--durations", NULL, "FILE", "with --arrivals: run times (duration column, or a task list)"},
    {"--tasks", NULL, "N", "with --arrivals: tasks to draw (default: the task list's count)"},
    {"--gangs", NULL, "G:N:LEVEL",
     "events mode: tasks of >= G whole GPUs become gangs of N in one LEVEL"},
    {"--topology", NULL, "FILE", "racks, blocks and NVLink domains of the nodes (docs/sim.md)"},
    {"--gen", NULL, "POINTS",
     "workloads built from the one --pods: gpushare:P, multigpu:P, gpuspec:P, cpu:P, joined by "
     "'+', comma-separated, or 'family' (docs/sim.md)"},
    {"--gen-seed", NULL, "S", "with --gen: the generator's seed (default 1)"},
    {"--spec-from", NULL, "FILE", "with --gen gpuspec: a task list whose gpu_spec values to draw"},
    {"--gen-out", NULL, "DIR",
     "with --gen: write each workload as DIR/NAME.csv (--policy optional)"},
    {"-o", "--output", "FMT",
     "json (default), csv, compare (paper mode, with --expected), or table (paper mode: "
     "alloc@100 per workload and policy against the first policy)"},
    {"--expected", NULL, "DIR", "the artifact's expected/ directory, or one *_discrete.csv"},
    {"--svg", NULL, "FILE", "draw the results (paper: Fig. 9a; events: allocation, waiting)"},
    {"--jobs", "-j", "N", "worker processes (default: the CPUs online)"},
};

#define NOPTS (sizeof opts / sizeof opts[0])

static int usage_err(const char *fmt, const char *arg)
{
    fputs("arbiter sim: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nusage: arbiter sim --nodes FILE --pods FILE --policy P [options]\n", stderr);
    for (size_t i = 0; i < NOPTS; i++) {
        char left[48];
        snprintf(left, sizeof left, "%s%s%s%s%s", opts[i].name, opts[i].alias ? ", " : "",
                 opts[i].alias ? opts[i].alias : "", opts[i].value ? " " : "",
                 opts[i].value ? opts[i].value : "");
        fprintf(stderr, "  %-30s %s\n", left, opts[i].help);
    }
    char names[256];
    fprintf(stderr, "  profiles: %s\n", arb_profile_names(names, sizeof names));
    return 2;
}

/* "42", "42-51", "42,44,50-51" */
static int parse_seeds(const char *s, uint64_t *v, int *n)
{
    char *end;
    *n = 0;
    while (*s) {
        unsigned long long a = strtoull(s, &end, 10), b = a;
        if (end == s)
            return -1;
        s = end;
        if (*s == '-') {
            b = strtoull(s + 1, &end, 10);
            if (end == s + 1 || b < a)
                return -1;
            s = end;
        }
        for (unsigned long long x = a; x <= b; x++) {
            if (*n >= SIM_MAX_SEEDS)
                return -1;
            v[(*n)++] = x;
        }
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return *n > 0 ? 0 : -1;
}

static int parse_policies(char *s, const char **v, int *n)
{
    char *save = NULL;
    *n = 0;
    for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "paper") == 0) {
            for (size_t i = 0; i < sizeof paper_policies / sizeof *paper_policies; i++)
                if (*n < SIM_MAX_POLICIES)
                    v[(*n)++] = paper_policies[i];
            continue;
        }
        if (*n >= SIM_MAX_POLICIES)
            return -1;
        v[(*n)++] = tok;
    }
    return *n > 0 ? 0 : -1;
}

/* "poisson:0.5", "poisson:30/min", "poisson:100/h": tasks per second. */
static int parse_arrivals(const char *s, double *rate)
{
    char *end;
    double div = 1;

    if (strncmp(s, "poisson:", 8) != 0)
        return -1;
    *rate = strtod(s + 8, &end);
    if (end == s + 8 || !(*rate > 0))
        return -1;
    if (strcmp(end, "/min") == 0)
        div = 60;
    else if (strcmp(end, "/h") == 0)
        div = 3600;
    else if (*end && strcmp(end, "/s") != 0)
        return -1;
    *rate /= div;
    return 0;
}

/* "8:4:rack" or "8:4:prefer-rack". */
static int parse_gangs(const char *s, sim_opts_t *o)
{
    char lv[32];
    int g, n;
    arb_topo_level_t level;

    if (sscanf(s, "%d:%d:%31s", &g, &n, lv) != 3 || g < 1 || g > 16 || n < 2 || n > 1024)
        return -1;
    o->gang_required = strncmp(lv, "prefer-", 7) != 0;
    if (arb_topo_level_parse(o->gang_required ? lv : lv + 7, &level) < 0 || level == ARB_TOPO_ANY)
        return -1;
    o->gang_gpus = g;
    o->gang_size = n;
    o->gang_level = level;
    return 0;
}

static bool is(const char *a, const char *name)
{
    return strcmp(a, name) == 0;
}

/* --gen: replace wl[0] (the base) by the generated workloads wl[0..n),
 * each written to gen_out/NAME.csv when gen_out is set. pool receives
 * the --spec-from list (caller frees). 0 or -errno with text. */
static int make_workloads(const sim_nodes_t *nodes, sim_tasks_t *wl, const sim_gen_point_t *points,
                          int n, const char *spec_from, sim_tasks_t *pool, uint64_t seed,
                          const char *gen_out, arb_err_t *err)
{
    sim_tasks_t base = wl[0];
    int rc = 0, made = 0;

    memset(&wl[0], 0, sizeof wl[0]);
    if (spec_from && (rc = sim_tasks_load(spec_from, pool, err)) < 0)
        goto out;
    for (; made < n; made++) {
        if ((rc = sim_gen_make(&base, &points[made], spec_from ? pool : NULL, nodes, seed,
                               &wl[made], err)) < 0)
            goto out;
        if (gen_out) {
            char path[4096];
            FILE *f;
            if (snprintf(path, sizeof path, "%.3800s/%s.csv", gen_out, wl[made].workload) >=
                (int)sizeof path) {
                rc = arb_errf(err, -ENAMETOOLONG, "--gen-out: the directory name is too long");
                made++;
                goto out;
            }
            if (!(f = fopen(path, "w"))) {
                rc = arb_errf(err, -errno, "--gen-out: cannot write %s: %s", path, strerror(errno));
                made++;
                goto out;
            }
            rc = sim_tasks_write(f, &wl[made]);
            if (fclose(f) != 0 || rc < 0) {
                rc = arb_errf(err, -EIO, "--gen-out: writing %s failed (disk full?)", path);
                made++;
                goto out;
            }
        }
    }
out:
    if (rc < 0)
        for (int i = 0; i < made; i++)
            sim_tasks_free(&wl[i]);
    sim_tasks_free(&base);
    return rc;
}

int cli_sim(int argc, char **argv)
{
    const char *nodes_path = NULL, *pods[SIM_MAX_WORKLOADS], *out = "json", *svg = NULL,
               *expected = NULL, *policies[SIM_MAX_POLICIES], *durations = NULL, *topology = NULL,
               *gen_arg = NULL, *spec_from = NULL, *gen_out = NULL;
    uint64_t gen_seed = 1;
    sim_gen_point_t *points = NULL;
    sim_tasks_t spec_pool = {0};
    int npoints = 0;
    char *policy_arg = NULL, *queue_arg = NULL;
    int npods = 0, npol = 0, nseeds = 1, nqueues = 1, jobs = 0, rc = 0, nres = 0;
    uint64_t *seeds = calloc(SIM_MAX_SEEDS, sizeof *seeds);
    arb_queue_policy_t queues[SIM_MAX_QUEUES] = {ARB_QP_FIFO};
    sim_opts_t base = {.inflate = 1.3};
    sim_nodes_t nodes = {0};
    sim_tasks_t wl[SIM_MAX_WORKLOADS];
    sim_durations_t durs = {0};
    sim_expect_t ex = {0};
    sim_result_t *res = NULL;
    arb_err_t err = {{0}};

    memset(wl, 0, sizeof wl);
    if (!seeds)
        return 1;
    seeds[0] = 42;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const struct sim_opt *o = NULL;
        for (size_t k = 0; k < NOPTS && !o; k++)
            if (is(a, opts[k].name) || (opts[k].alias && is(a, opts[k].alias)))
                o = &opts[k];
        if (!o) {
            rc = usage_err("unknown option '%s'", a);
            goto out;
        }
        if (o->value && !v) {
            rc = usage_err("option '%s' needs a value", a);
            goto out;
        }
        if (o->value)
            i++;
        if (is(o->name, "--nodes")) {
            nodes_path = v;
        } else if (is(o->name, "--pods")) {
            if (npods == SIM_MAX_WORKLOADS) {
                rc = usage_err("at most 64 --pods files, got more at '%s'", v);
                goto out;
            }
            pods[npods++] = v;
        } else if (is(o->name, "--policy")) {
            free(policy_arg);
            policy_arg = strdup(v);
        } else if (is(o->name, "--seed")) {
            if (parse_seeds(v, seeds, &nseeds) < 0) {
                rc = usage_err("seeds '%s': give N, A-B or a comma list of them", v);
                goto out;
            }
        } else if (is(o->name, "--mode")) {
            if (is(v, "paper"))
                base.mode = SIM_MODE_PAPER;
            else if (is(v, "events"))
                base.mode = SIM_MODE_EVENTS;
            else {
                rc = usage_err("--mode '%s': use paper or events", v);
                goto out;
            }
        } else if (is(o->name, "--inflate")) {
            char *end;
            base.inflate = strtod(v, &end);
            if (*end || end == v || base.inflate < 0 || base.inflate > 100) {
                rc = usage_err("--inflate '%s': give a ratio such as 1.3 (0: no inflation)", v);
                goto out;
            }
        } else if (is(o->name, "--online")) {
            base.online = true;
        } else if (is(o->name, "--queue")) {
            free(queue_arg);
            queue_arg = strdup(v);
            nqueues = 0;
            char *save = NULL;
            for (char *q = strtok_r(queue_arg, ",", &save); q; q = strtok_r(NULL, ",", &save)) {
                if (nqueues == SIM_MAX_QUEUES ||
                    arb_queue_policy_parse(q, &queues[nqueues++], &err) < 0) {
                    rc = usage_err("--queue '%s': use fifo, priority or drf (a comma list of "
                                   "them runs each)",
                                   v);
                    goto out;
                }
            }
            if (nqueues == 0) {
                rc = usage_err("--queue '%s': name a queue policy", v);
                goto out;
            }
        } else if (is(o->name, "--arrivals")) {
            if (parse_arrivals(v, &base.poisson_rate) < 0) {
                rc = usage_err("--arrivals '%s': give poisson:RATE, RATE in tasks per second "
                               "(or with /min, /h)",
                               v);
                goto out;
            }
        } else if (is(o->name, "--compress")) {
            char *end;
            base.compress = strtod(v, &end);
            if (*end || end == v || !(base.compress >= 1) || base.compress > 1e9) {
                rc = usage_err("--compress '%s': give a factor of 1 or more", v);
                goto out;
            }
        } else if (is(o->name, "--cycle")) {
            char *end;
            base.cycle_s = strtod(v, &end);
            if (*end || end == v || !(base.cycle_s > 0) || base.cycle_s > 1e9) {
                rc = usage_err("--cycle '%s': give a period in seconds, above 0", v);
                goto out;
            }
        } else if (is(o->name, "--durations")) {
            durations = v;
        } else if (is(o->name, "--tasks")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 1 || n > 100000000) {
                rc = usage_err("--tasks '%s': give a number of tasks, 1 or more", v);
                goto out;
            }
            base.ntasks = (int)n;
        } else if (is(o->name, "--gangs")) {
            if (parse_gangs(v, &base) < 0) {
                rc = usage_err("--gangs '%s': give G:N:LEVEL, e.g. 8:4:rack (tasks of 8 GPUs "
                               "become gangs of 4 in one rack; prefer-rack to only prefer it)",
                               v);
                goto out;
            }
        } else if (is(o->name, "--topology")) {
            topology = v;
        } else if (is(o->name, "--gen")) {
            gen_arg = v;
        } else if (is(o->name, "--gen-seed")) {
            char *end;
            gen_seed = strtoull(v, &end, 10);
            if (*end || end == v) {
                rc = usage_err("--gen-seed '%s': give a whole number", v);
                goto out;
            }
        } else if (is(o->name, "--spec-from")) {
            spec_from = v;
        } else if (is(o->name, "--gen-out")) {
            gen_out = v;
        } else if (is(o->name, "-o")) {
            out = v;
            if (!is(out, "json") && !is(out, "csv") && !is(out, "compare") && !is(out, "table")) {
                rc = usage_err("-o '%s': use json, csv, compare or table", v);
                goto out;
            }
        } else if (is(o->name, "--svg")) {
            svg = v;
        } else if (is(o->name, "--expected")) {
            expected = v;
        } else if (is(o->name, "--jobs")) {
            jobs = atoi(v);
            if (jobs < 1) {
                rc = usage_err("--jobs '%s': give a number of processes, 1 or more", v);
                goto out;
            }
        }
    }
    if (!nodes_path || npods == 0 || (!policy_arg && !(gen_arg && gen_out))) {
        rc = usage_err("%s", "--nodes, --pods and --policy are required (--policy may go with "
                             "--gen and --gen-out: then the workloads are only written)");
        goto out;
    }
    if ((spec_from || gen_out) && !gen_arg) {
        rc = usage_err("%s", "--spec-from and --gen-out go with --gen");
        goto out;
    }
    if (gen_arg) {
        if (npods != 1) {
            rc = usage_err("%s", "--gen builds its workloads from one --pods file (the base); "
                                 "give exactly one");
            goto out;
        }
        if (!(points = calloc(SIM_GEN_MAX_POINTS, sizeof *points))) {
            rc = 1;
            goto out;
        }
        if (sim_gen_parse(gen_arg, points, SIM_GEN_MAX_POINTS, &npoints, &err) < 0) {
            rc = usage_err("%s", err.msg);
            goto out;
        }
    }
    if (policy_arg && parse_policies(policy_arg, policies, &npol) < 0) {
        rc = usage_err("--policy: give 1..16 names separated by commas%s", "");
        goto out;
    }
    for (int i = 0; i < npol; i++) {
        arb_profile_t prof;
        if (is(policies[i], SIM_BOUND_POLICY)) {
            if (base.mode == SIM_MODE_EVENTS) {
                rc = usage_err("%s", "--policy bound (the offline bound) is for paper mode");
                goto out;
            }
            continue;
        }
        if (arb_profile_lookup(policies[i], &prof, &err) < 0) {
            fprintf(stderr, "arbiter sim: --policy: %s\n", err.msg);
            rc = 2;
            goto out;
        }
    }
    if (base.mode == SIM_MODE_PAPER &&
        (queue_arg || base.poisson_rate > 0 || durations || base.ntasks || base.compress ||
         base.cycle_s || base.gang_gpus)) {
        rc = usage_err("%s", "--queue, --compress, --cycle, --arrivals, --durations, --tasks and "
                             "--gangs need --mode events");
        goto out;
    }
    if (base.mode == SIM_MODE_EVENTS && (is(out, "compare") || is(out, "table"))) {
        rc = usage_err("%s", "-o compare and -o table are for paper mode; events mode prints "
                             "json or csv");
        goto out;
    }
    if ((base.poisson_rate > 0) != (durations != NULL)) {
        rc = usage_err("%s", "--arrivals poisson:RATE and --durations FILE go together");
        goto out;
    }
    if (is(out, "compare") && !expected) {
        rc = usage_err("%s", "-o compare needs --expected DIR (the published *_discrete.csv)");
        goto out;
    }
    if (sim_nodes_load(nodes_path, &nodes, &err) < 0)
        goto fail;
    if (topology && sim_topo_load(topology, &nodes, &err) < 0)
        goto fail;
    for (int i = 0; i < npods; i++)
        if (sim_tasks_load(pods[i], &wl[i], &err) < 0)
            goto fail;
    if (gen_arg && make_workloads(&nodes, wl, points, npoints, spec_from, &spec_pool, gen_seed,
                                  gen_out, &err) < 0)
        goto fail;
    if (gen_arg)
        npods = npoints;
    if (!policy_arg)
        goto out; /* --gen-out alone: the files are written */
    if (durations) {
        if (sim_durations_load(durations, &durs, &err) < 0)
            goto fail;
        base.durations = &durs;
    }
    if (expected) {
        char path[4096];
        size_t l = strlen(expected);
        snprintf(path, sizeof path, "%s", expected);
        if (l < 4 || strcmp(expected + l - 4, ".csv") != 0)
            snprintf(path, sizeof path, "%s/analysis_allo_discrete.csv", expected);
        if (sim_expect_load(path, &ex, &err) < 0)
            goto fail;
    }
    if (jobs == 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = ncpu > 0 ? (int)ncpu : 1;
    }
    if (base.mode != SIM_MODE_EVENTS)
        nqueues = 1;
    {
        int per = npods * npol * nseeds;
        nres = per * nqueues;
        if (!(res = calloc((size_t)nres, sizeof *res))) {
            arb_errf(&err, -ENOMEM, "out of memory for %d results", nres);
            goto fail;
        }
        for (int q = 0; q < nqueues; q++) {
            base.queue = queues[q];
            if (sim_sweep(&nodes, wl, npods, policies, npol, seeds, nseeds, &base, jobs,
                          nres > 1 && isatty(2), res + q * per, &err) < 0)
                goto fail;
        }
    }
    for (int i = 0; i < nres; i++) {
        if (is(out, "json"))
            sim_print_json(stdout, &res[i]);
        else if (is(out, "csv") && base.mode == SIM_MODE_EVENTS)
            sim_print_events_csv(stdout, &res[i], i == 0);
        else if (is(out, "csv"))
            sim_print_csv(stdout, &res[i], i == 0);
    }
    if (is(out, "compare"))
        sim_print_compare(stdout, res, nres, &ex);
    if (is(out, "table"))
        sim_print_table(stdout, res, nres);
    if (svg && (base.mode == SIM_MODE_EVENTS ? sim_write_events_svg(svg, res, nres, &err)
                                             : sim_write_svg(svg, res, nres, &err)) < 0)
        goto fail;
    goto out;
fail:
    fprintf(stderr, "arbiter sim: %s\n", err.msg);
    rc = 1;
out:
    for (int i = 0; i < npods; i++)
        sim_tasks_free(&wl[i]);
    sim_nodes_free(&nodes);
    sim_durations_free(&durs);
    sim_expect_free(&ex);
    sim_tasks_free(&spec_pool);
    free(points);
    free(policy_arg);
    free(queue_arg);
    free(seeds);
    free(res);
    return rc;
}
