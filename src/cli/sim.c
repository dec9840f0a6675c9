/*
 * sim.c: `arbiter sim`, the trace-driven simulator's verb. Parses the
 * options, loads the traces once, runs every (workload, policy, seed) with
 * sim_sweep and prints JSON lines, CSV, or a comparison with the FGD
 * artifact's published results; optionally draws the SVG chart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arbiter/sched.h"
#include "cli/cli.h"
#include "sim/sim.h"

#define SIM_MAX_WORKLOADS 16
#define SIM_MAX_POLICIES 16
#define SIM_MAX_SEEDS 1000

static const char *const paper_policies[] = {"random",      "dotprod", "gpu-clustering",
                                             "gpu-packing", "bestfit", "fgd"};

static int usage_err(const char *fmt, const char *arg)
{
    fputs("arbiter sim: ", stderr);
    fprintf(stderr, fmt, arg);
    fprintf(stderr,
            "\nusage: arbiter sim --nodes NODES.csv --pods PODS.csv [--pods ...] --policy "
            "POLICY[,POLICY...]\n"
            "                   [--seed 42 | --seeds 42-51] [--inflate 1.3] [--online]\n"
            "                   [-o json|csv|compare] [--expected DIR] [--svg FILE] [--jobs N]\n"
            "  POLICY: a profile (%s), or 'paper' for the paper's six\n",
            arb_profile_names());
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
    *n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
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

int cli_sim(int argc, char **argv)
{
    const char *nodes_path = NULL, *pods[SIM_MAX_WORKLOADS], *out = "json", *svg = NULL,
               *expected = NULL, *policies[SIM_MAX_POLICIES];
    char *policy_arg = NULL;
    int npods = 0, npol = 0, nseeds = 1, jobs = 0, rc = 0;
    uint64_t *seeds = calloc(SIM_MAX_SEEDS, sizeof *seeds);
    double inflate = 1.3;
    bool online = false;
    sim_nodes_t nodes = {0};
    sim_tasks_t wl[SIM_MAX_WORKLOADS];
    sim_expect_t ex = {0};
    sim_result_t *res = NULL;
    arb_err_t err = {{0}};
    int nres;

    memset(wl, 0, sizeof wl);
    if (!seeds)
        return 1;
    seeds[0] = 42;
    for (int i = 1; i < argc; i++) {
        static const char *const known[] = {
            "--nodes",  "--pods", "--policy",   "--seed", "--seeds", "--inflate", "-o",
            "--output", "--svg",  "--expected", "--jobs", "-j",      "--online",  NULL};
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(a, "--online") != 0, ok = false;
        for (int k = 0; known[k] && !ok; k++)
            ok = strcmp(a, known[k]) == 0;
        if (!ok) {
            rc = usage_err("unknown option '%s'", a);
            goto out;
        }
        if (takes && !v) {
            rc = usage_err("option '%s' needs a value", a);
            goto out;
        }
        if (strcmp(a, "--nodes") == 0) {
            nodes_path = v;
        } else if (strcmp(a, "--pods") == 0) {
            if (npods == SIM_MAX_WORKLOADS) {
                rc = usage_err("at most 16 --pods files, got more at '%s'", v);
                goto out;
            }
            pods[npods++] = v;
        } else if (strcmp(a, "--policy") == 0) {
            policy_arg = strdup(v);
        } else if (strcmp(a, "--seed") == 0 || strcmp(a, "--seeds") == 0) {
            if (parse_seeds(v, seeds, &nseeds) < 0) {
                rc = usage_err("seeds '%s': give N, A-B or a comma list of them", v);
                goto out;
            }
        } else if (strcmp(a, "--inflate") == 0) {
            char *end;
            inflate = strtod(v, &end);
            if (*end || end == v || inflate < 0 || inflate > 100) {
                rc = usage_err("--inflate '%s': give a ratio such as 1.3 (0: no inflation)", v);
                goto out;
            }
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            out = v;
            if (strcmp(out, "json") && strcmp(out, "csv") && strcmp(out, "compare")) {
                rc = usage_err("-o '%s': use json, csv or compare", v);
                goto out;
            }
        } else if (strcmp(a, "--svg") == 0) {
            svg = v;
        } else if (strcmp(a, "--expected") == 0) {
            expected = v;
        } else if (strcmp(a, "--jobs") == 0 || strcmp(a, "-j") == 0) {
            jobs = atoi(v);
            if (jobs < 1) {
                rc = usage_err("--jobs '%s': give a number of processes, 1 or more", v);
                goto out;
            }
        } else if (strcmp(a, "--online") == 0) {
            online = true;
            continue;
        } else {
            rc = usage_err("unknown option '%s'", a);
            goto out;
        }
        i++;
    }
    if (!nodes_path || npods == 0 || !policy_arg) {
        rc = usage_err("%s", "--nodes, --pods and --policy are required");
        goto out;
    }
    if (parse_policies(policy_arg, policies, &npol) < 0) {
        rc = usage_err("--policy: give 1..16 names separated by commas%s", "");
        goto out;
    }
    for (int i = 0; i < npol; i++) {
        arb_profile_t prof;
        if (arb_profile_lookup(policies[i], &prof, &err) < 0) {
            fprintf(stderr, "arbiter sim: --policy: %s\n", err.msg);
            rc = 2;
            goto out;
        }
    }
    if (strcmp(out, "compare") == 0 && !expected) {
        rc = usage_err("%s", "-o compare needs --expected DIR (the published *_discrete.csv)");
        goto out;
    }
    if (sim_nodes_load(nodes_path, &nodes, &err) < 0)
        goto fail;
    for (int i = 0; i < npods; i++)
        if (sim_tasks_load(pods[i], &wl[i], &err) < 0)
            goto fail;
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
    nres = npods * npol * nseeds;
    if (!(res = calloc((size_t)nres, sizeof *res))) {
        arb_errf(&err, -ENOMEM, "out of memory for %d results", nres);
        goto fail;
    }
    if (sim_sweep(&nodes, wl, npods, policies, npol, seeds, nseeds, inflate, online, jobs,
                  nres > 1 && isatty(2), res, &err) < 0)
        goto fail;
    for (int i = 0; i < nres; i++) {
        if (strcmp(out, "json") == 0)
            sim_print_json(stdout, &res[i]);
        else if (strcmp(out, "csv") == 0)
            sim_print_csv(stdout, &res[i], i == 0);
    }
    if (strcmp(out, "compare") == 0)
        sim_print_compare(stdout, res, nres, &ex);
    if (svg && sim_write_svg(svg, res, nres, &err) < 0)
        goto fail;
    goto out;
fail:
    fprintf(stderr, "arbiter sim: %s\n", err.msg);
    rc = 1;
out:
    for (int i = 0; i < npods; i++)
        sim_tasks_free(&wl[i]);
    sim_nodes_free(&nodes);
    sim_expect_free(&ex);
    free(policy_arg);
    free(seeds);
    free(res);
    return rc;
}
