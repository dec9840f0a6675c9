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
 * Events mode (sim_run_events, events.c) replays time instead: tasks arrive
 * at their creation time (or by a seeded Poisson process), wait in the
 * core's queue when they do not fit, run for their trace duration and
 * leave; the core's arb_sched_cycle places them under a virtual clock.
 *
 * Runs are independent: sim_sweep runs many (workload, policy, seed)
 * combinations in worker processes, results in shared memory.
 */
#ifndef ARB_SIM_SIM_H
#define ARB_SIM_SIM_H

#include <stdio.h>

#include "arbiter/sched.h"
#include "sim/trace.h"

typedef enum sim_mode {
    SIM_MODE_PAPER,  /* the FGD artifact's experiment: arrivals only */
    SIM_MODE_EVENTS, /* arrivals, queueing, departures in virtual time */
} sim_mode_t;

#define SIM_NSERIES 101 /* points of the events-mode time series */

/* The pseudo-policy of the offline bound (bound.c): a run of it reports the
 * upper bound on GPU allocation at 100% arrived demand as alloc_pct[100]. */
#define SIM_BOUND_POLICY "bound"

typedef struct sim_opts {
    const char *policy; /* a scheduling profile (arb_profile_lookup) */
    uint64_t seed;
    double inflate; /* target GPU demand / capacity; 0: replay the list as is */
    bool online;    /* submit each task just before placing it */
    sim_mode_t mode;
    /* Events mode. */
    arb_queue_policy_t queue;
    double poisson_rate;              /* tasks per second; 0: the trace's creation times */
    double compress;                  /* trace arrivals: creation times divided by it; 0 = 1 */
    double cycle_s;                   /* scheduling period, virtual s; 0: at every event */
    const sim_durations_t *durations; /* with poisson_rate: sampled run times */
    int ntasks;                       /* with poisson_rate: tasks to draw; 0: as many as the list */
    /* Gangs made from the trace: tasks asking at least gang_gpus whole GPUs
     * become jobs of gang_size such tasks sharing one gang_level domain. */
    int gang_gpus, gang_size;
    arb_topo_level_t gang_level;
    bool gang_required;
} sim_opts_t;

/* Percentiles of a distribution, seconds. */
typedef struct sim_dist {
    int n;
    double mean, p50, p99, max;
} sim_dist_t;

/* Events mode's outcome (part of sim_result_t). */
typedef struct sim_events {
    char queue[12];
    int jobs;          /* jobs submitted (a gang is one job) */
    int started;       /* jobs that got their place */
    int completed;     /* jobs that ran to their end */
    int abandoned;     /* withdrawn while waiting (the trace's never-scheduled tasks) */
    int unschedulable; /* fit no node even on an empty cluster: never queued */
    int waiting_end;   /* still waiting when the last event was processed */
    int pending_max;
    int cycles;          /* scheduling cycles run */
    double span_s;       /* virtual seconds from the first arrival to the last event */
    double gpu_util_pct; /* time-weighted mean GPU allocation, first to last arrival */
    sim_dist_t wait;     /* start - arrival, of jobs that started */
    sim_dist_t jct;      /* end - arrival, of jobs that completed */
    /* Gangs (jobs of more than one task). */
    int gangs, gangs_started;
    sim_dist_t gang_wait;
    double gang_racks; /* mean distinct racks per started gang (0: no rack labels) */
    double gang_nodes; /* mean distinct nodes per started gang */
    /* Time series: SIM_NSERIES points evenly from the first to the last arrival. */
    double t_s[SIM_NSERIES];
    double alloc_pct[SIM_NSERIES];
    int pending[SIM_NSERIES];
} sim_events_t;

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
    sim_mode_t mode;
    sim_events_t ev; /* events mode */
    int rc;          /* 0, or the run's error */
    char err[256];
} sim_result_t;

/* Run once. 0 and *res filled, or a negative errno with text in err (and
 * in res->err). */
int sim_run(const sim_nodes_t *nodes, const sim_tasks_t *tasks, const sim_opts_t *o,
            sim_result_t *res, arb_err_t *err);

/* Events mode: one run (events.c). Same conventions as sim_run. */
int sim_run_events(const sim_nodes_t *nodes, const sim_tasks_t *tasks, const sim_opts_t *o,
                   sim_result_t *res, arb_err_t *err);

/* Run every (workload, policy, seed) in order, with the other options of
 * base: results[w][p][s] at index (w * npolicies + p) * nseeds + s.
 * jobs > 1 uses that many worker processes; progress (bool) draws a bar on
 * stderr. results is caller owned, nworkloads * npolicies * nseeds
 * entries. 0, or the first run's error (every run is attempted). */
int sim_sweep(const sim_nodes_t *nodes, const sim_tasks_t *workloads, int nworkloads,
              const char *const *policies, int npolicies, const uint64_t *seeds, int nseeds,
              const sim_opts_t *base, int jobs, bool progress, sim_result_t *results,
              arb_err_t *err);

/* ---- shared by sim.c and events.c ------------------------------------------- */

/* Build cluster c from nodes in the order given (node ids follow it), with
 * topology labels and NVLink domains when the nodes carry them. */
int sim_build_cluster(arb_cluster_t *c, const sim_nodes_t *nodes, const int *order, arb_err_t *err);
/* The name-sorted nodes in a seeded random order (malloc'd; NULL on ENOMEM). */
int *sim_node_order(const sim_nodes_t *nodes, arb_rng_t *rng);
/* A job for task t: replicas tasks of its request (gang when more than one,
 * confined to level when level is not ANY). NULL with text on failure. */
arb_job_t *sim_make_job(arb_cluster_t *c, const sim_task_t *t, int replicas, arb_topo_level_t level,
                        bool required, arb_err_t *err);
double sim_clock_s(int id); /* CLOCK_MONOTONIC or CLOCK_PROCESS_CPUTIME_ID */
/* GPU milli a task asks in total (the artifact's TotalMilliGpu). */
int64_t sim_task_gpu(const sim_task_t *t);
/* The arrival order of a paper-mode run (steps 1-2 of the method): task
 * indices, shuffled with rng and inflated to inflate x cap_milli (0: as
 * is). *ev is malloc'd. 0 or -ENOMEM. */
int sim_arrival_order(const sim_tasks_t *tasks, int64_t cap_milli, double inflate, arb_rng_t *rng,
                      int **ev, int *nev);

/* ---- the offline bound (bound.c) ------------------------------------------- */

/* What a bound computation found. */
typedef struct sim_bound_info {
    double bound_milli;  /* upper bound on allocated GPU milli */
    double demand_milli; /* GPU milli of the tasks in the instance */
    int shapes, types;   /* distinct task shapes (with GPUs), node types */
    int rows, cols;      /* of the final LP */
    int rounds;          /* column-generation rounds */
    int patterns;        /* GPU share patterns generated */
} sim_bound_info_t;

/* An upper bound on the GPU milli any placement of a subset of tasks
 * t[0..n) on nodes can allocate: the LP relaxation of section "The offline
 * bound" of docs/sim.md, solved by column generation with GLPK. 0 or
 * -EINVAL/-ENOMEM with text. */
int sim_bound(const sim_nodes_t *nodes, const sim_task_t *const *t, int n, sim_bound_info_t *info,
              arb_err_t *err);
/* The pseudo-policy SIM_BOUND_POLICY as a run: the seed's arrivals (as
 * sim_run draws them) up to 100% arrived demand, bounded; alloc_pct[100]
 * is the bound in % of the cluster's GPUs, other points NaN. */
int sim_run_bound(const sim_nodes_t *nodes, const sim_tasks_t *tasks, const sim_opts_t *o,
                  sim_result_t *res, arb_err_t *err);

/* The artifact's directory name of a paper policy ("fgd" -> "06-FGD"), or
 * NULL for Arbiter's own profiles. */
const char *sim_paper_policy(const char *policy);

/* ---- output (report.c) ---------------------------------------------------- */

/* One JSON object, one line (events-mode fields for an events run). */
void sim_print_json(FILE *f, const sim_result_t *r);
/* Events mode as CSV: a header (when header is set) and one row per run. */
void sim_print_events_csv(FILE *f, const sim_result_t *r, bool header);
/* Events mode: GPU allocation and pending jobs over time, one panel per
 * workload, one line per (policy, queue), first seed. 0 or -errno. */
int sim_write_events_svg(const char *path, const sim_result_t *r, int n, arb_err_t *err);
/* CSV: a header (when header is set) and three rows per run (alloc, frag,
 * frag_ratio), columns metric,workload,policy,seed,inflate,total_gpus,
 * tasks_arrived,tasks_failed,0..130. */
void sim_print_csv(FILE *f, const sim_result_t *r, bool header);
/* Markdown, one row per workload: mean alloc@100 of the first policy, and
 * of each other one with its difference, the share of unallocated GPUs it
 * saves, the seeds where it allocates more and its worst seed; the bound
 * (SIM_BOUND_POLICY runs) and its headroom over the best policy when
 * present; a mean row. */
void sim_print_table(FILE *f, const sim_result_t *r, int n);
/* Markdown comparison with the published means: per workload and paper
 * policy, the mean over the runs' seeds of alloc_pct at 100 and 130 against
 * the artifact's mean over the same seeds; FGD's lead over BestFit. */
void sim_print_compare(FILE *f, const sim_result_t *r, int n, const sim_expect_t *ex);
/* Allocation % against arrived % (the paper's Fig. 9a): one panel per
 * workload, one line per policy (mean over seeds). 0 or -errno. */
int sim_write_svg(const char *path, const sim_result_t *r, int n, arb_err_t *err);

#endif
