/*
 * profiles.c: the named scoring profiles, one table. A profile is a set of
 * score plugins with weights plus filter thresholds. `--policy NAME` in
 * every verb picks a row of this table.
 */
#include <stdio.h>
#include <string.h>

#include "sched_int.h"

typedef struct profile_row {
    const char *name;
    const char *what;
    struct {
        const char *plugin;
        double weight;
    } s[ARB_MAX_SCORES];
    bool random_ties;
} profile_row_t;

/* Plugins named here that are not built (paper.h absent) are skipped. */
static const profile_row_t profiles[] = {
    {"default",
     "fragmentation-aware (FGD), its ties kept off whole nodes and NVLink domains, with "
     "topology, data locality, thermal, freshness; live load for GPU shares and service replicas",
     {{"fgd", 4},
      {"topology", 2},
      {"prefer", 1},
      {"data", 1},
      {"thermal", 0.5},
      {"freshness", 0.5},
      {"least-loaded", 4},
      {"whole", 0.25}},
     false},
    {"pack",
     "most-allocated first: keeps whole nodes and NVLink domains free",
     {{"pack", 4}, {"topology", 2}, {"prefer", 1}, {"data", 1}},
     false},
    {"spread",
     "least-allocated first (the Kubernetes default): spreads load, fragments GPUs",
     {{"spread", 4}, {"prefer", 1}},
     false},
    {"fgd", "the FGD paper's fragmentation gradient descent, alone", {{"fgd", 1}}, false},
    {"fgd-la",
     "FGD with ties broken by a look-ahead (GPU, CPU, memory; rare shapes)",
     {{"fgd-la", 1}},
     false},
    {"bestfit", "the paper's BestFit baseline", {{"bestfit", 1}}, false},
    {"random", "the paper's Random baseline", {{"random", 1}}, true},
    {"dotprod", "the paper's DotProduct baseline", {{"dotprod", 1}}, false},
    {"gpu-clustering", "the paper's GpuClustering baseline", {{"gpu-clustering", 1}}, false},
    {"gpu-packing", "the paper's GpuPacking baseline", {{"gpu-packing", 1}}, false},
    {"least-loaded",
     "live load first: GPU utilisation and queue length, aged (GPU-sharing tasks, services)",
     {{"least-loaded", 4}, {"prefer", 1}, {"thermal", 0.5}},
     false},
};

#define NPROFILES (sizeof profiles / sizeof profiles[0])

const char *arb_profile_names(char *buf, size_t n)
{
    size_t off = 0;

    if (n)
        buf[0] = '\0';
    for (size_t i = 0; i < NPROFILES && off < n; i++) {
        int k = snprintf(buf + off, n - off, "%s%s", i ? ", " : "", profiles[i].name);
        off += k > 0 ? (size_t)k : 0;
    }
    return buf;
}

int arb_profile_lookup(const char *name, arb_profile_t *out, arb_err_t *err)
{
    for (size_t i = 0; i < NPROFILES; i++) {
        const profile_row_t *r = &profiles[i];
        if (strcmp(r->name, name) != 0)
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", r->name);
        for (int k = 0; k < ARB_MAX_SCORES && r->s[k].plugin; k++) {
            const arb_score_ops_t *ops = arb_score_lookup(r->s[k].plugin);
            if (!ops)
                continue;
            out->score[out->nscores].ops = ops;
            out->score[out->nscores].weight = r->s[k].weight;
            out->nscores++;
        }
        if (out->nscores == 0)
            return arb_errf(err, -ENOENT, "policy '%s' is not built into this binary", name);
        out->random_ties = r->random_ties;
        out->thermal_limit_c = 0;
        out->stale_ns = 0;
        return 0;
    }
    char names[256];
    return arb_errf(err, -ENOENT, "unknown policy '%s'; use one of: %s", name,
                    arb_profile_names(names, sizeof names));
}
