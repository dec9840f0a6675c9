/*
 * sim.h: the trace-driven simulator. It replays a task list against a node
 * list through the scheduler core (arb_sched_place with the chosen profile)
 * under a virtual clock; it has no placement logic of its own.
 *
 * The method is the FGD artifact's (Weng et al., ATC'23):
 *
 *   1. tasks sorted by name, then shuffled with the seed;
 *   2. inflation: tasks drawn with replacement from the name-sorted list
 *      are appended until the next one would push the GPU demand past
 *      inflate x the cluster's GPUs (or random tasks dropped while the
 *      demand is above it);
 *   3. nodes, sorted by name, are added in a seeded random order (the
 *      artifact renames them with a random prefix), so node ids, and with
 *      them the lowest-id tie-break of the paper's profiles, follow it;
 *   4. tasks arrive one by one and never leave; a task that fits nowhere
 *      fails and is not retried;
 *   5. after every arrival: arrived GPU demand, allocated GPU milli and the
 *      cluster's fragmentation F (shapes of the unshuffled trace, 95%), then
 *      each metric is discretised by arrived-demand percent 0..130 as the
 *      artifact's analysis scripts do (*_discrete.csv).
 *
 * By default every task is submitted before the first is placed, so the
 * scheduler's plugins observe the whole arriving mix first, as the artifact
 * computes its typical shapes from the whole trace; --online submits each
 * task just before placing it.
 *
 * Runs are independent: sim_sweep runs many (workload, policy, seed)
 * combinations in worker processes, results in shared memory.
 */
#ifndef ARB_SIM_SIM_H
#define ARB_SIM_SIM_H

#include <stdio.h>

#include "sim/trace.h"

typedef struct sim_opts {
    const char *policy; /* a scheduling profile (arb_profile_lookup) */
    uint64_t seed;
    double inflate; /* target GPU demand / capacity; 0: replay the list as is */
    bool online;    /* submit each task just before placing it */
} sim_opts_t;

/* One run's outcome. Plain data (no pointers): it crosses processes. */
typedef struct sim_result {
    char workload[SIM_NAME_MAX * 2];
    char policy[32];
    uint64_t seed;
    double inflate;
    int total_gpus;
    int tasks_arrived, tasks_failed;
    double place_s; /* CPU seconds of the arrival loop (placement and metrics) */
    double run_s;   /* wall seconds of the whole run, cluster building included */
    /* By arrived-demand percent; NaN where no arrival fell near it. */
    double alloc_pct[SIM_NPCT];      /* allocated GPU milli / capacity */
    double frag_pct[SIM_NPCT];       /* fragmented GPU milli / capacity */
    double frag_ratio_pct[SIM_NPCT]; /* fragmented / idle GPU milli */
    int rc;                          /* 0, or the run's error */
    char err[256];
} sim_result_t;

/* Run once. 0 and *res filled, or a negative errno with text in err (and
 * in res->err). */
int sim_run(const sim_nodes_t *nodes, const sim_tasks_t *tasks, const sim_opts_t *o,
            sim_result_t *res, arb_err_t *err);

/* Run every (workload, policy, seed) in order: results[w][p][s] at
 * index (w * npolicies + p) * nseeds + s. jobs > 1 uses that many worker
 * processes; progress (bool) draws a bar on stderr. results is caller
 * owned, nworkloads * npolicies * nseeds entries. 0, or the first run's
 * error (every run is attempted). */
int sim_sweep(const sim_nodes_t *nodes, const sim_tasks_t *workloads, int nworkloads,
              const char *const *policies, int npolicies, const uint64_t *seeds, int nseeds,
              double inflate, bool online, int jobs, bool progress, sim_result_t *results,
              arb_err_t *err);

/* The artifact's directory name of a paper policy ("fgd" -> "06-FGD"), or
 * NULL for Arbiter's own profiles. */
const char *sim_paper_policy(const char *policy);

/* ---- output (report.c) ---------------------------------------------------- */

/* One JSON object, one line. */
void sim_print_json(FILE *f, const sim_result_t *r);
/* CSV: a header (when header is set) and three rows per run (alloc, frag,
 * frag_ratio), columns metric,workload,policy,seed,inflate,total_gpus,
 * tasks_arrived,tasks_failed,0..130. */
void sim_print_csv(FILE *f, const sim_result_t *r, bool header);
/* Markdown comparison with the published means: per workload and paper
 * policy, the mean over the runs' seeds of alloc_pct at 100 and 130 against
 * the artifact's mean over the same seeds; FGD's lead over BestFit. */
void sim_print_compare(FILE *f, const sim_result_t *r, int n, const sim_expect_t *ex);
/* Allocation % against arrived % (the paper's Fig. 9a): one panel per
 * workload, one line per policy (mean over seeds). 0 or -errno. */
int sim_write_svg(const char *path, const sim_result_t *r, int n, arb_err_t *err);

#endif
