/*
 * sim.c: `arbiter sim`, the trace-driven simulator's verb. Parses the
 * options (one table, from which the usage text is made), loads the traces
 * once, runs every (workload, policy, seed), and for events mode every
 * queue policy, with sim_sweep, and prints JSON lines, CSV, or a comparison
 * with the FGD artifact's published results; optionally draws an SVG chart.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arbiter/sched.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "sim/gen.h"
#include "sim/sim.h"

#define SIM_MAX_WORKLOADS SIM_GEN_MAX_POINTS
#define SIM_MAX_POLICIES 16
#define SIM_MAX_SEEDS 1000
#define SIM_MAX_QUEUES 3

static const char *const paper_policies[] = {"random",      "dotprod", "gpu-clustering",
                                             "gpu-packing", "bestfit", "fgd"};

/* The options as given; fl_parse fills them by the table below. */
typedef struct sim_flags {
    const char *nodes, *policy, *seed, *queue, *arrivals, *durations, *gangs, *topology, *gen,
        *spec_from, *gen_out, *expected, *svg;
    fl_list_t pods;
    int mode;                          /* the index in "paper|events": sim_mode_t */
    int output;                        /* the index in SIM_OUTPUTS */
    double inflate, compress, cycle_s; /* cycle_s: -1 until given */
    bool online;
    int tasks, jobs;
    long long gen_seed;
} sim_flags_t;

enum { SIM_OUT_JSON, SIM_OUT_CSV, SIM_OUT_COMPARE, SIM_OUT_TABLE };
#define SIM_OUTPUTS "json|csv|compare|table"

#define SF(FIELD, LONG, KIND, META, HELP, ...)                                                     \
    FL_OPT(sim_flags_t, FIELD, LONG, NULL, KIND, META, HELP, __VA_ARGS__)
static const fl_flag_t sim_flag_table[] = {
    SF(nodes, "--nodes", FL_STR, "FILE", "node list: sn,cpu_milli,memory_mib,gpu,model"),
    SF(pods, "--pods", FL_LIST, "FILE", "task list (repeat for several workloads, at most 64)"),
    SF(policy, "--policy", FL_STR, "P[,P...]",
       "scheduling profiles, 'paper' for the paper's six, or 'bound' (paper mode: an offline "
       "upper bound at 100% arrived)"),
    SF(seed, "--seed", FL_STR, "S", "42, 42-51, or a comma list of both", .def = "42"),
    SF(seed, "--seeds", FL_STR, "S", "the same as --seed"),
    SF(mode, "--mode", FL_CHOICE, NULL,
       "paper (the FGD artifact's experiment) or events (queueing and departures)",
       .choices = "paper|events", .def = "paper"),
    SF(inflate, "--inflate", FL_NUM, "X",
       "paper mode: GPU demand to reach, x cluster GPUs (0: none)", .def = "1.3", .min = 0,
       .max = 100),
    SF(online, "--online", FL_BOOL, NULL, "paper mode: submit each task just before placing it"),
    SF(queue, "--queue", FL_STR, "Q[,Q...]",
       "events mode: fifo (default), priority, drf (a comma list runs each)"),
    SF(compress, "--compress", FL_NUM, "X",
       "events mode: trace creation times divided by X (load x X), 1 or more", .min = 1,
       .max = 1000000000),
    SF(cycle_s, "--cycle", FL_NUM, "SECONDS",
       "events mode: schedule every SECONDS of virtual time, above 0 (default: at every event)",
       .max = 1000000000),
    SF(arrivals, "--arrivals", FL_STR, "poisson:RATE",
       "events mode: Poisson arrivals, RATE tasks/s (or /min, /h)"),
    SF(durations, "--durations", FL_STR, "FILE",
       "with --arrivals: run times (duration column, or a task list)"),
    SF(tasks, "--tasks", FL_I32, "N",
       "with --arrivals: tasks to draw (default: the task list's count)", .min = 1,
       .max = 100000000),
    SF(gangs, "--gangs", FL_STR, "G:N:LEVEL",
       "events mode: tasks of >= G whole GPUs become gangs of N in one LEVEL"),
    SF(topology, "--topology", FL_STR, "FILE",
       "racks, blocks and NVLink domains of the nodes (docs/sim.md)"),
    SF(gen, "--gen", FL_STR, "POINTS",
       "workloads built from the one --pods: gpushare:P, multigpu:P, gpuspec:P, cpu:P, joined by "
       "'+', comma-separated, or 'family' (docs/sim.md)"),
    SF(gen_seed, "--gen-seed", FL_INT, "S", "with --gen: the generator's seed", .def = "1"),
    SF(spec_from, "--spec-from", FL_STR, "FILE",
       "with --gen gpuspec: a task list whose gpu_spec values to draw"),
    SF(gen_out, "--gen-out", FL_STR, "DIR",
       "with --gen: write each workload as DIR/NAME.csv (--policy optional)"),
    FL_OPT(sim_flags_t, output, "--output", "-o", FL_CHOICE, NULL,
           "json, csv, compare (paper mode, with --expected), or table (paper mode: alloc@100 per "
           "workload and policy against the first policy)",
           .choices = SIM_OUTPUTS, .def = "json"),
    SF(expected, "--expected", FL_STR, "DIR",
       "the artifact's expected/ directory, or one *_discrete.csv"),
    SF(svg, "--svg", FL_STR, "FILE",
       "draw the results (paper: Fig. 9a; events: allocation, waiting)"),
    FL_OPT(sim_flags_t, jobs, "--jobs", "-j", FL_I32, "N",
           "worker processes, 1 or more (default: the CPUs online)", .min = 1),
    FL_END,
};

static void sim_more(FILE *f)
{
    char names[256];
    fprintf(f, "\nprofiles: %s\n", arb_profile_names(names, sizeof names));
}

static const fl_verb_t sim_verb = {
    .name = "sim",
    .summary = "replay a GPU trace through the scheduler (the FGD paper's experiment, or events); "
               "--nodes, --pods and --policy are required",
    .flags = sim_flag_table,
    .more_fn = sim_more,
};

/* A usage error found after parsing: the message and a pointer to --help; 2. */
__attribute__((format(printf, 1, 2))) static int usage_err(const char *fmt, ...)
{
    va_list ap;

    fputs("arbiter sim: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("; run 'arbiter sim --help' for the usage\n", stderr);
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

/* What one `arbiter sim` run works from: the flags as given, then what
 * sim_check made of them, then what sim_load read. */
typedef struct sim_run {
    sim_flags_t f;
    uint64_t *seeds; /* SIM_MAX_SEEDS of them */
    int nseeds;
    char *policy_arg, *queue_arg; /* copies, cut up in place */
    const char *policies[SIM_MAX_POLICIES];
    int npol;
    arb_queue_policy_t queues[SIM_MAX_QUEUES];
    int nqueues;
    sim_gen_point_t *points;
    int npoints, npods;
    sim_opts_t base;
    sim_nodes_t nodes;
    sim_tasks_t wl[SIM_MAX_WORKLOADS];
    sim_tasks_t spec_pool;
    sim_durations_t durs;
    sim_expect_t ex;
} sim_run_t;

/* The queue policies of --queue "fifo,drf" into r->queues. 0, or 2 (said). */
static int sim_queues(sim_run_t *r)
{
    const char *v = r->f.queue;
    char *save = NULL;
    arb_err_t err = {{0}};

    r->nqueues = 1;
    r->queues[0] = ARB_QP_FIFO;
    if (!v)
        return 0;
    if (!(r->queue_arg = strdup(v)))
        return 1;
    r->nqueues = 0;
    for (char *q = strtok_r(r->queue_arg, ",", &save); q; q = strtok_r(NULL, ",", &save))
        if (r->nqueues == SIM_MAX_QUEUES ||
            arb_queue_policy_parse(q, &r->queues[r->nqueues++], &err) < 0)
            return usage_err("--queue '%s': use fifo, priority or drf (a comma list of them runs "
                             "each)",
                             v);
    if (r->nqueues == 0)
        return usage_err("--queue '%s': name a queue policy", v);
    return 0;
}

/* The values the table leaves as text, and what the flags say together,
 * into r. 0, or an exit code (2: a usage error, said). */
static int sim_check(sim_run_t *r)
{
    sim_flags_t *f = &r->f;
    sim_opts_t *b = &r->base;
    arb_err_t err = {{0}};
    int rc;

    b->mode = f->mode == 1 ? SIM_MODE_EVENTS : SIM_MODE_PAPER;
    b->inflate = f->inflate;
    b->online = f->online;
    b->compress = f->compress;
    b->ntasks = f->tasks;
    if (f->cycle_s == 0)
        return usage_err("--cycle '0': give a period in seconds, above 0");
    b->cycle_s = f->cycle_s > 0 ? f->cycle_s : 0;
    if (f->pods.n > SIM_MAX_WORKLOADS)
        return usage_err("at most %d --pods files, got more at '%s'", SIM_MAX_WORKLOADS,
                         f->pods.v[SIM_MAX_WORKLOADS]);
    r->npods = f->pods.n;
    if (parse_seeds(f->seed, r->seeds, &r->nseeds) < 0)
        return usage_err("seeds '%s': give N, A-B or a comma list of them", f->seed);
    if ((rc = sim_queues(r)))
        return rc;
    if (f->arrivals && parse_arrivals(f->arrivals, &b->poisson_rate) < 0)
        return usage_err("--arrivals '%s': give poisson:RATE, RATE in tasks per second (or with "
                         "/min, /h)",
                         f->arrivals);
    if (f->gangs && parse_gangs(f->gangs, b) < 0)
        return usage_err("--gangs '%s': give G:N:LEVEL, e.g. 8:4:rack (tasks of 8 GPUs become "
                         "gangs of 4 in one rack; prefer-rack to only prefer it)",
                         f->gangs);
    if (!f->nodes || r->npods == 0 || (!f->policy && !(f->gen && f->gen_out)))
        return usage_err("--nodes, --pods and --policy are required (--policy may go with --gen "
                         "and --gen-out: then the workloads are only written)");
    if ((f->spec_from || f->gen_out) && !f->gen)
        return usage_err("--spec-from and --gen-out go with --gen");
    if (f->gen) {
        if (r->npods != 1)
            return usage_err("--gen builds its workloads from one --pods file (the base); give "
                             "exactly one");
        if (!(r->points = calloc(SIM_GEN_MAX_POINTS, sizeof *r->points)))
            return 1;
        if (sim_gen_parse(f->gen, r->points, SIM_GEN_MAX_POINTS, &r->npoints, &err) < 0)
            return usage_err("%s", err.msg);
    }
    if (f->policy && (!(r->policy_arg = strdup(f->policy)) ||
                      parse_policies(r->policy_arg, r->policies, &r->npol) < 0))
        return r->policy_arg ? usage_err("--policy: give 1..16 names separated by commas") : 1;
    for (int i = 0; i < r->npol; i++) {
        arb_profile_t prof;
        if (is(r->policies[i], SIM_BOUND_POLICY)) {
            if (b->mode == SIM_MODE_EVENTS)
                return usage_err("--policy bound (the offline bound) is for paper mode");
            continue;
        }
        if (arb_profile_lookup(r->policies[i], &prof, &err) < 0) {
            fprintf(stderr, "arbiter sim: --policy: %s\n", err.msg);
            return 2;
        }
    }
    if (b->mode == SIM_MODE_PAPER && (f->queue || b->poisson_rate > 0 || f->durations ||
                                      b->ntasks || b->compress || b->cycle_s || b->gang_gpus))
        return usage_err("--queue, --compress, --cycle, --arrivals, --durations, --tasks and "
                         "--gangs need --mode events");
    if (b->mode == SIM_MODE_EVENTS && (f->output == SIM_OUT_COMPARE || f->output == SIM_OUT_TABLE))
        return usage_err("-o compare and -o table are for paper mode; events mode prints json or "
                         "csv");
    if ((b->poisson_rate > 0) != (f->durations != NULL))
        return usage_err("--arrivals poisson:RATE and --durations FILE go together");
    if (f->output == SIM_OUT_COMPARE && !f->expected)
        return usage_err("-o compare needs --expected DIR (the published *_discrete.csv)");
    return 0;
}

/* Read the files the flags name (and write --gen-out's). 0 or -errno with text. */
static int sim_load(sim_run_t *r, arb_err_t *err)
{
    sim_flags_t *f = &r->f;

    if (sim_nodes_load(f->nodes, &r->nodes, err) < 0)
        return -1;
    if (f->topology && sim_topo_load(f->topology, &r->nodes, err) < 0)
        return -1;
    for (int i = 0; i < r->npods; i++)
        if (sim_tasks_load(f->pods.v[i], &r->wl[i], err) < 0)
            return -1;
    if (f->gen) {
        if (make_workloads(&r->nodes, r->wl, r->points, r->npoints, f->spec_from, &r->spec_pool,
                           (uint64_t)f->gen_seed, f->gen_out, err) < 0)
            return -1;
        r->npods = r->npoints;
    }
    if (f->durations) {
        if (sim_durations_load(f->durations, &r->durs, err) < 0)
            return -1;
        r->base.durations = &r->durs;
    }
    if (f->expected) {
        char path[4096];
        size_t l = strlen(f->expected);
        snprintf(path, sizeof path, "%s", f->expected);
        if (l < 4 || strcmp(f->expected + l - 4, ".csv") != 0)
            snprintf(path, sizeof path, "%s/analysis_allo_discrete.csv", f->expected);
        if (sim_expect_load(path, &r->ex, err) < 0)
            return -1;
    }
    return 0;
}

/* Run every (workload, policy, seed, queue) and print the results as -o
 * says (and --svg). 0 or -errno with text. */
static int sim_report(sim_run_t *r, arb_err_t *err)
{
    int per = r->npods * r->npol * r->nseeds, nq = r->base.mode == SIM_MODE_EVENTS ? r->nqueues : 1;
    int nres = per * nq, jobs = r->f.jobs, out = r->f.output, rc = 0;
    sim_result_t *res = calloc((size_t)nres, sizeof *res);

    if (!res)
        return arb_errf(err, -ENOMEM, "out of memory for %d results", nres);
    if (jobs == 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = ncpu > 0 ? (int)ncpu : 1;
    }
    for (int q = 0; q < nq; q++) {
        r->base.queue = r->queues[q];
        if ((rc = sim_sweep(&r->nodes, r->wl, r->npods, r->policies, r->npol, r->seeds, r->nseeds,
                            &r->base, jobs, nres > 1 && isatty(2), res + q * per, err)) < 0)
            goto out;
    }
    for (int i = 0; i < nres; i++) {
        if (out == SIM_OUT_JSON)
            sim_print_json(stdout, &res[i]);
        else if (out == SIM_OUT_CSV && r->base.mode == SIM_MODE_EVENTS)
            sim_print_events_csv(stdout, &res[i], i == 0);
        else if (out == SIM_OUT_CSV)
            sim_print_csv(stdout, &res[i], i == 0);
    }
    if (out == SIM_OUT_COMPARE)
        sim_print_compare(stdout, res, nres, &r->ex);
    if (out == SIM_OUT_TABLE)
        sim_print_table(stdout, res, nres);
    if (r->f.svg)
        rc = r->base.mode == SIM_MODE_EVENTS ? sim_write_events_svg(r->f.svg, res, nres, err)
                                             : sim_write_svg(r->f.svg, res, nres, err);
out:
    free(res);
    return rc;
}

int cli_sim(int argc, char **argv)
{
    sim_run_t *r = calloc(1, sizeof *r);
    arb_err_t err = {{0}};
    int rc = 1;

    if (!r || !(r->seeds = calloc(SIM_MAX_SEEDS, sizeof *r->seeds)))
        goto out;
    r->f.cycle_s = -1; /* not given: at every event */
    if (!fl_run(&sim_verb, argc, argv, &r->f, &(fl_args_t){0}, &rc) || (rc = sim_check(r)))
        goto out;
    if (sim_load(r, &err) < 0 || (r->f.policy && sim_report(r, &err) < 0)) {
        fprintf(stderr, "arbiter sim: %s\n", err.msg);
        rc = 1;
    } /* without --policy (--gen-out alone) the files are written: done */
out:
    if (r) {
        for (int i = 0; i < r->npods; i++)
            sim_tasks_free(&r->wl[i]);
        sim_nodes_free(&r->nodes);
        sim_durations_free(&r->durs);
        sim_expect_free(&r->ex);
        sim_tasks_free(&r->spec_pool);
        free(r->points);
        free(r->policy_arg);
        free(r->queue_arg);
        free(r->seeds);
    }
    free(r);
    return rc;
}
