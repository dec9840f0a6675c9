/*
 * sched.h: the scheduler: queue, filter, score, bind; gang and topology
 * placement; preemption; backfill; explanations of why a job waits.
 *
 * The scheduler is pure: no I/O, no clock, no globals. Time and randomness
 * come in through arb_ctx_t on every call, so the controller (real clock)
 * and the simulator (virtual clock) run the very same code, and the same
 * inputs with the same seed give the same decisions.
 *
 * Plugins are small ops structs in static tables (filters.c, scores.c,
 * queue.c): adding one is adding a file and a table row.
 */
#ifndef ARBITER_SCHED_H
#define ARBITER_SCHED_H

#include "arbiter/job.h"

/* ---- time and randomness, passed in ---------------------------------- */

/* xoshiro256** state; seed with arb_rng_seed. */
typedef struct arb_rng {
    uint64_t s[4];
} arb_rng_t;

void arb_rng_seed(arb_rng_t *r, uint64_t seed);
uint64_t arb_rng_next(arb_rng_t *r);
/* Uniform in [0, n). n > 0. */
uint64_t arb_rng_below(arb_rng_t *r, uint64_t n);

typedef struct arb_ctx {
    int64_t now_ns; /* monotonic now, real or virtual */
    arb_rng_t *rng; /* tie-breaking and random policies */
} arb_ctx_t;

/* ---- filter reasons ---------------------------------------------------- */

/* Why a node cannot take a task; one code per filter outcome. */
typedef enum arb_reason {
    ARB_R_OK = 0,
    ARB_R_NOT_READY,
    ARB_R_STALE,
    ARB_R_DRAINING,
    ARB_R_TAINT,
    ARB_R_SELECTOR,
    ARB_R_AFFINITY,
    ARB_R_GPU_MODEL,
    ARB_R_THERMAL,
    ARB_R_GPUS,      /* not enough free whole GPUs */
    ARB_R_GPU_SHARE, /* no single GPU with the free share */
    ARB_R_GPU_MEM,   /* no GPU with the device memory */
    ARB_R_NVLINK,    /* not enough free GPUs inside one NVLink domain */
    ARB_R_CPU,
    ARB_R_MEM,
    ARB_R_EXT,
    ARB_R_TOPOLOGY,  /* outside the domain the gang is confined to */
    ARB_R_EXCLUSIVE, /* an exclusive job's task is there, or (for one) any task is */
    ARB_R_COUNT
} arb_reason_t;

const char *arb_reason_name(arb_reason_t r); /* "insufficient-gpus" */
const char *arb_reason_text(arb_reason_t r); /* "insufficient GPUs" */

/* ---- placement context and plugins -------------------------------------- */

typedef struct arb_sched arb_sched_t;

/* GPUs picked inside one node for one task. */
typedef struct arb_pick {
    uint16_t gpu_mask;
    int16_t gpu_milli; /* per GPU */
} arb_pick_t;

/* What a filter or score plugin sees while placing one task. */
typedef struct arb_pctx {
    const arb_sched_t *sched;
    const arb_cluster_t *cluster;
    const arb_ctx_t *ctx;
    const arb_job_t *job;
    const arb_tgroup_t *group;
    void *state; /* the plugin's own state (score plugins), see init */
} arb_pctx_t;

typedef struct arb_filter_ops {
    const char *name;
    /* ARB_R_OK if n may take one task of pc->group, else the reason. */
    arb_reason_t (*filter)(const arb_pctx_t *pc, const arb_node_t *n);
} arb_filter_ops_t;

typedef struct arb_score_ops {
    const char *name;
    /* Optional: plugin state, made once per scheduler; free with fini. */
    void *(*init)(const arb_sched_t *s);
    void (*fini)(void *state);
    /* Optional: learn from a job as it arrives (FGD's task-shape mix). */
    void (*observe)(void *state, const arb_job_t *j);
    /* Optional: choose GPUs inside n for the task; 0 or -ENOSPC. When no
     * plugin of a profile has one, GPUs are chosen best-fit. */
    int (*pick)(const arb_pctx_t *pc, const arb_node_t *n, arb_pick_t *pick);
    /* Raw score of placing the task on n with GPUs pick; higher is better. */
    double (*score)(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pick);
    /* Optional: rescale the raw scores of all feasible nodes to 0..100
     * (default: min-max to 0..100). */
    void (*normalize)(double *scores, int n);
    /* Optional: task t of j was just bound to a (sign +1) or released from
     * it (sign -1), on every path (placement, rollback, preemption, backfill
     * trials, finish), so per-node plugin state stays exact. */
    void (*bound)(void *state, const arb_cluster_t *c, const arb_job_t *j, int t,
                  const arb_task_alloc_t *a, int sign);
    /* Optional: a digest of the plugin's own per-node state. Nodes with
     * different keys are never evaluated as one node class; nodes with equal
     * keys must score alike. Lets a stateful plugin keep node classes. */
    uint64_t (*node_key)(void *state, const arb_node_t *n);
    /* What the score reads beyond the node's own fields, the job and the
     * pick (ARB_SCORE_*). The engine evaluates identical nodes once (node
     * classes, see nodeclass.c) unless a flag says it may not. */
    unsigned flags;
} arb_score_ops_t;

/* The score depends on where the job's already-placed tasks are. */
#define ARB_SCORE_PLACED 1u
/* The score depends on node identity (name, id, rack/block/zone labels) or
 * on per-node state kept outside arb_node_t: never use node classes. */
#define ARB_SCORE_PERNODE 2u

/* The least-loaded score's estimate of how busy node n is for a task on
 * GPUs gpu_mask (0: the node's mean), 0..100: utilisation and queue length
 * as last reported, the report aged to now_ns (score_load.c). */
double arb_least_loaded_estimate(const arb_node_t *n, uint16_t gpu_mask, int64_t now_ns);

const arb_filter_ops_t *arb_filter_lookup(const char *name);
const arb_score_ops_t *arb_score_lookup(const char *name);
/* NULL-terminated tables, for help text and docs. */
extern const arb_filter_ops_t *const arb_filters[];
extern const arb_score_ops_t *const arb_scores[];

/* ---- profiles ---------------------------------------------------------- */

#define ARB_MAX_SCORES 8

typedef struct arb_profile {
    char name[32];
    int nscores;
    struct {
        const arb_score_ops_t *ops;
        double weight;
    } score[ARB_MAX_SCORES];
    int thermal_limit_c; /* filter GPUs hotter than this; 0 = off */
    int64_t stale_ns;    /* filter nodes whose report is older; 0 = off */
    bool random_ties;    /* break score ties at random (else lowest node id) */
} arb_profile_t;

/* Built-in profiles: "default" (fgd + topology + data + thermal + freshness),
 * "pack", "spread", "fgd", "bestfit", "random", "dotprod", "gpu-clustering",
 * "gpu-packing". -ENOENT with the list of names otherwise. */
int arb_profile_lookup(const char *name, arb_profile_t *out, arb_err_t *err);
/* "default, pack, spread, ..." for help text, written into buf (n bytes,
 * truncated if short); returns buf. */
const char *arb_profile_names(char *buf, size_t n);

/* ---- queues, quotas ------------------------------------------------------ */

typedef enum arb_queue_policy {
    ARB_QP_FIFO,     /* submission order */
    ARB_QP_PRIORITY, /* priority, then submission order */
    ARB_QP_DRF,      /* lowest dominant share first, then priority, then order */
} arb_queue_policy_t;

int arb_queue_policy_parse(const char *s, arb_queue_policy_t *out, arb_err_t *err);

/* A queue (team) with an optional quota. nominal: guaranteed; borrow_limit:
 * how much above nominal it may borrow from its cohort's idle quota. A queue
 * with no quota (has_quota false) is limited only by the cluster. */
typedef struct arb_queue {
    uint32_t name;   /* interned */
    uint32_t cohort; /* interned; 0 = none */
    bool has_quota;
    arb_res_t nominal;
    arb_res_t borrow_limit;
    double weight;  /* fair-share weight (DRF); default 1 */
    arb_res_t used; /* allocated to this queue's jobs now */
} arb_queue_t;

/* ---- the scheduler ------------------------------------------------------- */

typedef struct arb_sched_conf {
    arb_profile_t profile;
    arb_queue_policy_t queue_policy;
    bool backfill;         /* EASY backfill behind a blocked head job */
    bool preemption;       /* evict lower-priority jobs to fit higher ones */
    int64_t starvation_ns; /* a job waiting longer is ordered first; 0 = off */
    bool full_scan;        /* evaluate every node, never node classes (for
                              benchmarks and equivalence tests) */
    int64_t grace_ns;      /* how long past its time limit a task may take to exit when its
                              job sets no terminationGracePeriodSeconds (the controller:
                              the agents' default, 10 s); backfill counts it. 0: none */
    bool preempt_defer;    /* preemption only marks its victims (j->evicting,
                              j->shrink_to); the caller stops them and then
                              calls arb_sched_finish / arb_sched_shrink, and the
                              preemptor places in a later cycle (the controller:
                              a victim's GPUs are never handed over while its
                              processes may still run) */
} arb_sched_conf_t;

/* Make a scheduler over cluster c (borrowed; must outlive it). Free with
 * arb_sched_free, which frees every job submitted to it. */
arb_sched_t *arb_sched_new(arb_cluster_t *c, const arb_sched_conf_t *conf, arb_err_t *err);
void arb_sched_free(arb_sched_t *s);
arb_cluster_t *arb_sched_cluster(arb_sched_t *s);
const arb_sched_conf_t *arb_sched_conf(const arb_sched_t *s);

/* Define or update a queue's quota. */
int arb_sched_set_queue(arb_sched_t *s, const arb_queue_t *q, arb_err_t *err);
const arb_queue_t *arb_sched_queue(const arb_sched_t *s, uint32_t name);

/* Submit a finalized job: the scheduler takes ownership, assigns j->id and
 * j->seq, and queues it PENDING. */
int arb_sched_submit(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, arb_err_t *err);
/* The job with scheduler id id; NULL for one never issued or forgotten. */
arb_job_t *arb_sched_job(arb_sched_t *s, uint32_t id);
/* Ids issued so far (jobs 0..n-1, forgotten ones included). */
uint32_t arb_sched_njobs(const arb_sched_t *s);
/* The node classes the engine keeps now (nodeclass.c; 0 before the first
 * decision), and in *evaluated (may be NULL) how many classes decisions on
 * the class path have run the filters on so far: a decision's cost follows
 * them. For the benchmarks, which report how they grow along a run. */
uint32_t arb_sched_nclasses(const arb_sched_t *s, uint64_t *evaluated);
/* Take ended job j (SUCCEEDED, FAILED, CANCELLED, TIMEOUT; it holds
 * nothing) out of the scheduler: it leaves the working set every cycle
 * walks, arb_sched_job(j->id) is NULL from now on, and the caller owns j
 * (arb_job_free). O(live jobs) for a memmove of pointers. -EPERM for a job
 * that has not ended, -ENOENT for one not in s. */
int arb_sched_forget(arb_sched_t *s, arb_job_t *j, arb_err_t *err);

/* Why the cycle did not place a job (arb_job_t.wait; explain's outcome). */
typedef enum arb_wait {
    ARB_WAIT_NONE,       /* placed, or not tried */
    ARB_WAIT_FIT,        /* does not fit now: capacity */
    ARB_WAIT_NEVER,      /* would not fit even if every node it may use were idle */
    ARB_WAIT_QUOTA,      /* its queue's quota (nominal, borrowing) */
    ARB_WAIT_ORDER,      /* held behind wait_for by fifo order */
    ARB_WAIT_STARVING,   /* held off the nodes starving job wait_for reserves */
    ARB_WAIT_RESERVED,   /* would delay wait_for's backfill reservation */
    ARB_WAIT_VICTIMS,    /* its victims are stopping (or are chosen at the next cycle) */
    ARB_WAIT_CLAIMED,    /* fits only where preemptor wait_for's victims are making room */
    ARB_WAIT_TAKEN,      /* it would be placed, then taken back by wait_for in that cycle */
    ARB_WAIT_DEPENDENCY, /* the caller's hold: a job it depends on has not done what it needs */
    ARB_WAIT_DEP_NEVER,  /* the caller's hold: its dependency can no longer be met */
    ARB_WAIT_THROTTLE,   /* the caller's hold: its array runs as many elements as it may */
} arb_wait_t;

#define ARB_WAIT_NREASONS (ARB_WAIT_THROTTLE + 1)

/* Holds the caller keeps (the controller's job dependencies and array
 * throttles, src/state/depend.c): the cycle asks fn for each pending job at
 * its turn; a nonzero arb_wait_t holds it with that reason, and a held job
 * holds nobody back. fn may read the states of other jobs (as this cycle
 * has left them so far) and must not change any. NULL fn: no holds. */
typedef arb_wait_t (*arb_hold_fn)(void *arg, const arb_job_t *j);
void arb_sched_set_hold(arb_sched_t *s, arb_hold_fn fn, void *arg);

const char *arb_wait_name(arb_wait_t w); /* "held-by-order", ... */

typedef struct arb_cycle_stats {
    int placed;     /* jobs bound this cycle */
    int backfilled; /* of which started by backfill */
    int preempted;  /* victim jobs evicted */
    int pending;    /* still pending after the cycle */
    int grown;      /* tasks added to running elastic jobs */
    int shrunk;     /* elastic tasks taken back (immediate preemption) */
    int continued;  /* tasks of started gangs (gangMin below their size) started */
} arb_cycle_stats_t;

/* One scheduling cycle: order the pending jobs, place what fits (gangs all
 * or nothing), preempt and backfill when configured. */
int arb_sched_cycle(arb_sched_t *s, const arb_ctx_t *ctx, arb_cycle_stats_t *st);
/* The jobs the last cycle placed, in order (*v points into s; valid until
 * the next cycle). Without preemption, and when the cycle's stats show no
 * preemption, shrink, growth or continued gang, these are the only jobs
 * whose state or allocations the cycle changed. */
uint32_t arb_sched_placed(const arb_sched_t *s, arb_job_t *const **v);

/* Try to place one pending job now, ignoring queue order (the simulator's
 * and the `place` verb's step). 0 when bound, -ENOSPC when it does not fit. */
int arb_sched_place(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx);

/* Recovery: bind pending job j to exactly the n allocations in a (from a
 * store), as if the scheduler had placed it: node accounting, queue usage,
 * plugin state and indexes. All or nothing: -ENOSPC (with text) and no
 * change if any of them no longer fits; -EINVAL if n is outside
 * gang_min..ntasks. On success j is PLACED. */
int arb_sched_restore(arb_sched_t *s, arb_job_t *j, const arb_task_alloc_t *a, int n,
                      const arb_ctx_t *ctx, arb_err_t *err);

/* The job ended (state: SUCCEEDED, FAILED, CANCELLED) or was preempted
 * (PREEMPTED): release its allocations. */
int arb_sched_finish(arb_sched_t *s, arb_job_t *j, arb_job_state_t to, arb_err_t *err);

/* Task t of held job j (a gang whose gangMin is below its size, not
 * elastic) has ended: its allocation is released now (the slot holds
 * ARB_NO_NODE) so the job's tasks not yet started, or other jobs, can use
 * the room. -EINVAL for another kind of job or a slot not held. */
int arb_sched_task_done(arb_sched_t *s, arb_job_t *j, int t, arb_err_t *err);
/* Does j start its tasks beyond gang_min as room frees (cycle.c)? */
bool arb_job_partial_gang(const arb_job_t *j);

/* Elastic jobs (elastic.c): release tasks n..nalloc-1 of held elastic job
 * j (n >= gang_min), e.g. once the tasks a deferred preemption marked
 * (j->shrink_to) have exited. Bumps j->resize_gen. -EINVAL outside
 * gang_min..nalloc, -EPERM when j does not hold. */
int arb_sched_shrink(arb_sched_t *s, arb_job_t *j, int n, arb_err_t *err);

/* ---- why a job is pending ------------------------------------------------ */

typedef struct arb_explain {
    int nnodes;            /* nodes registered (not left) */
    int hist[ARB_R_COUNT]; /* nodes rejected per reason (first failing filter) */
    int group;             /* the task group that could not be placed; -1 none */
    /* fragmentation diagnostic */
    int64_t free_gpu_milli;  /* free GPU capacity on eligible nodes (ready, fresh) */
    int need_gpus;           /* whole GPUs one task (or domain) needs */
    arb_topo_level_t domain; /* the domain they must share */
    int largest_free;        /* largest free whole-GPU block in one such domain */
    /* what the next cycle does with it (the cycle run as a trial: cycle.c) */
    bool fits_now;     /* the next cycle places it */
    bool placeable;    /* it fits the free capacity now (it may still be held back) */
    arb_wait_t wait;   /* why not, when not */
    uint32_t wait_for; /* the job that holds it back (scheduler id); UINT32_MAX none */
    bool never;        /* it would not fit even the idle eligible cluster */
    /* what would make it fit */
    bool quota_blocked;    /* the queue's quota, not capacity, holds it */
    bool preemption_helps; /* evicting lower-priority or borrowing jobs would fit it */
    int preempt_victims, reclaim_victims;
    uint32_t best_node; /* the node nearest to fitting; UINT32_MAX none */
    arb_reason_t best_node_reason;
    int tasks_fit, tasks_need; /* the failing group: tasks that fit now, tasks it needs */
    /* what fits now: the largest request of this shape that would start at
     * once (one-task jobs: the blocking resource lowered; gangs: tasks_fit) */
    int fit_gpus;          /* whole GPUs per task; -1 not computed */
    int64_t fit_mem_bytes; /* memory per task; -1 not computed */
    int64_t fit_cpu_milli; /* CPU per task; -1 not computed */
    int nstale;            /* nodes left out because their report is too old */
    char summary[1024];    /* "0/4 nodes are available: 4 insufficient ..." */
    char hint[1024];       /* "free 4 GPUs on node-1 ..." */
} arb_explain_t;

/* Explain why j (pending) cannot be placed now. */
int arb_sched_explain(arb_sched_t *s, const arb_job_t *j, const arb_ctx_t *ctx, arb_explain_t *ex);
/* Each node's verdict for task group `group` of j (ex->group, or 0 when
 * that is -1): out[i] is the first filter node i fails, ARB_R_OK when it
 * could take one of the group's tasks now. out holds s's node count.
 * -EINVAL for a group j does not have. */
int arb_sched_explain_nodes(arb_sched_t *s, const arb_job_t *j, const arb_ctx_t *ctx, int group,
                            arb_reason_t *out);
/* The explanation as one JSON object (no trailing newline). Returns the
 * length it needed, like snprintf. */
int arb_explain_json(const arb_sched_t *s, const arb_explain_t *ex, char *buf, size_t n);

#endif
