/*
 * job.h: the job model: what a job *asks for*, and its lifecycle.
 *
 * A job has task groups (e.g. "launcher" x1, "worker" x16); each task of a
 * group asks for the same resources: whole GPUs (gpus > 0) or a share of one
 * GPU (gpu_share milli, 1..999), GPU memory per GPU, CPU, memory, extended
 * resources. The gang minimum says how many tasks must start together (all,
 * by default). Placement constraints: node selector, required and preferred
 * node affinity, tolerations, allowed GPU models, a topology requirement per
 * group, and a dataset for data locality.
 *
 * Job lifecycle (arb_job_transition; anything else is rejected, -EPERM):
 *
 *   submit        place (all gang members bound)      start
 *   ------> PENDING -------------------------> PLACED -------> RUNNING
 *             ^  |                               |               |
 *             |  | cancel                 preempt|  fail/cancel  | exit / fail /
 *             |  v                               v               | cancel / preempt
 *             | CANCELLED <----------------------+---------------+
 *             |                                  |
 *             +-------- requeue --------- PREEMPTED <------------+
 *                                            SUCCEEDED, FAILED (terminal)
 *   PLACED, RUNNING -- its time limit passed, its tasks stopped --> TIMEOUT
 *
 * Invariants: (1) a job holds allocations exactly in PLACED and RUNNING;
 * (2) either all of its first gang_min tasks are allocated or none is;
 * (3) SUCCEEDED, FAILED, CANCELLED and TIMEOUT are terminal.
 */
#ifndef ARBITER_JOB_H
#define ARBITER_JOB_H

#include "arbiter/cluster.h"

#define ARB_JOB_NAME_MAX 96   /* a job's name is shorter (arb_job_set_name) */
#define ARB_GROUP_NAME_MAX 64 /* a task group's name is shorter (arb_tgroup_set_name) */
#define ARB_GRACE_MAX_S 3600  /* the longest terminationGracePeriodSeconds */

typedef enum arb_job_state {
    ARB_JOB_PENDING,
    ARB_JOB_PLACED,
    ARB_JOB_RUNNING,
    ARB_JOB_PREEMPTED,
    ARB_JOB_SUCCEEDED,
    ARB_JOB_FAILED,
    ARB_JOB_CANCELLED,
    ARB_JOB_TIMEOUT, /* stopped at its time limit (Slurm's TIMEOUT) */
} arb_job_state_t;

#define ARB_JOB_NSTATES (ARB_JOB_TIMEOUT + 1)

/* Topology levels, nearest first. */
typedef enum arb_topo_level {
    ARB_TOPO_ANY = 0,
    ARB_TOPO_NVLINK,
    ARB_TOPO_NODE,
    ARB_TOPO_RACK,
    ARB_TOPO_BLOCK,
} arb_topo_level_t;

typedef struct arb_topo_req {
    arb_topo_level_t level; /* ARB_TOPO_ANY: no requirement */
    bool required;          /* false: preferred (scored), true: filter */
} arb_topo_req_t;

typedef enum arb_sel_op {
    ARB_OP_IN,
    ARB_OP_NOT_IN,
    ARB_OP_EXISTS,
    ARB_OP_DOES_NOT_EXIST,
    ARB_OP_GT,
    ARB_OP_LT,
} arb_sel_op_t;

/* One node-affinity expression: key op values (Gt/Lt compare one integer). */
typedef struct arb_match_expr {
    uint32_t key;
    arb_sel_op_t op;
    int nvals;
    uint32_t *vals; /* interned; In/NotIn */
    int64_t num;    /* Gt/Lt */
} arb_match_expr_t;

/* A term is the AND of its expressions. Required affinity is the OR of its
 * terms (as in Kubernetes); a preferred term adds weight (1..100) when all
 * its expressions match. */
typedef struct arb_aff_term {
    int nexpr;
    arb_match_expr_t *expr;
    int weight;
} arb_aff_term_t;

typedef struct arb_toleration {
    uint32_t key; /* 0 with exists: tolerates every taint */
    uint32_t val; /* ignored when exists */
    bool exists;  /* operator Exists instead of Equal */
    int effect;   /* 0: every effect, else an arb_taint_effect_t */
} arb_toleration_t;

typedef struct arb_tgroup {
    const char *name; /* owned: set only with arb_tgroup_set_name; "" at first */
    int replicas;
    int gpus;      /* whole GPUs per task; 0 when gpu_share is used */
    int gpu_share; /* milli of one GPU per task (1..999), 0 when gpus is used */
    arb_topo_req_t topo;
    arb_res_t req; /* per task; req.gpu_milli = gpus*1000 or gpu_share;
                      req.gpu_mem_mib = device memory needed on each GPU */
    struct {
        int64_t cpu_milli, mem_bytes;
    } lim; /* per task limits (0 = same as req): the two the agent enforces (the cgroup's
              CPU and memory caps); no placement reads them */
    int64_t ephemeral_bytes; /* ephemeral-storage asked for: shown, not placed on (nodes
                                report no scratch disk) */
} arb_tgroup_t;

/* Fields are ordered by size within each part (what the job asks for; what the
 * scheduler sets), so that a job has no padding to speak of: every queued job
 * costs its arb_job_t. */
typedef struct arb_job {
    uint32_t id;      /* assigned by arb_sched_submit */
    uint32_t queue;   /* interned queue (team) name; 0 = "default" */
    int32_t priority; /* higher runs first and may preempt lower */
    int gang_min;     /* tasks that must start together; 0 = all. Below the task count
                         (and not elastic): the first gang_min start together, the rest
                         as room frees (cycle.c), each ended task's room freed at once
                         (arb_sched_task_done); the job succeeds when all have run */
    bool preemptible;
    bool gang_closed; /* no more of its tasks start (a task failed, it is stopping) */
    /* Elastic training (spec replicas: {min, max}; src/core/elastic.c): the
     * job starts with at least gang_min tasks (the min, a gang), grows
     * toward ntasks (the max) when capacity frees, and shrinks toward
     * gang_min under pressure before it is preempted whole. */
    bool elastic;
    bool service;       /* a service replica (set by the controller, service.c): the
                           least-loaded score weighs it, as it does GPU-share tasks */
    bool exclusive;     /* spec exclusive (sbatch --exclusive): each task gets a node no
                           other task is on, and no other job's task joins it there */
    int8_t gpu_sharing; /* spec gpuSharing: 1 allow, -1 deny (GPU-share tasks then get
                           a GPU of their own), 0 unset: shares share, whole GPUs do not */
    bool idle_fits;     /* set by the cycle (with idle_key, below): would it fit that
                           shape's idle eligible nodes */
    int32_t grace_s;    /* terminationGracePeriodSeconds: SIGTERM, then SIGKILL after
                           this long; -1 = the agent's default */
    int ngroups;
    int nselector;
    int nrequired, npreferred;
    int ntolerations;
    int nmodels;
    uint32_t dataset; /* 0 = none */
    const char *name; /* owned: set only with arb_job_set_name; "" at first */
    arb_tgroup_t *groups;
    arb_label_t *selector;     /* node labels that must all match */
    arb_aff_term_t *required;  /* node affinity, required (OR of terms) */
    arb_aff_term_t *preferred; /* node affinity, preferred (weighted) */
    arb_toleration_t *tolerations;
    uint32_t *models;     /* allowed GPU models; none = any */
    int64_t time_limit_s; /* 0 = unlimited */

    /* Set by the scheduler. */
    arb_job_state_t state;
    int ntasks;        /* sum of replicas */
    uint64_t seq;      /* submission order (a logical clock, not wall time) */
    int64_t submit_ns; /* scheduler-clock times */
    int64_t start_ns;
    int nalloc; /* tasks currently allocated */
    /* Deferred preemption (arb_sched_conf_t.preempt_defer): victims are
     * chosen but keep their allocations until the caller has stopped them
     * (never two processes on one GPU). */
    int shrink_to;           /* > 0: tasks shrink_to..nalloc-1 are to stop, then
                                arb_sched_shrink(j, shrink_to) */
    arb_task_alloc_t *alloc; /* ntasks entries; valid for the first nalloc */
    uint32_t preempted_by;   /* scheduler id of the job it makes room for */
    uint32_t yield_to;       /* evicted for job yield_to - 1 (0: none): while that job is
                                pending, this one is tried right after it (queue.c) */
    uint32_t *claim;         /* a preemptor: the nodes its victims held (owned); they are
                                its until it is placed or has had its turn with them free */
    int nclaim;
    uint32_t resize_gen; /* bumped when nalloc changes while the job holds (elastic) */
    bool evicting;       /* the whole job is to stop, then arb_sched_finish(PREEMPTED) */
    bool waiting;        /* a preemptor whose victims are stopping: no new victims */
    bool reclaimed;      /* with preempted_by: evicted to reclaim quota its queue was
                            borrowing, not for priority (events and explain say so) */
    /* Set by the scheduling cycle (src/core/cycle.c) for a job it tried and
     * did not place: why it waits (arb_wait_t) and the job that holds it
     * back (a scheduler id; the fifo head, a starving job, the reserved job). */
    uint8_t wait;
    uint32_t wait_for;
    uint64_t idle_key; /* cycle.c: the cluster shape idle_fits was found on; 0 none */
    uint64_t ext_id;   /* the caller's id of the job, for messages (the controller's
                          job id); 0: the scheduler id */
} arb_job_t;

/* Allocate a job with ngroups zeroed groups (replicas 1 each), in one
 * allocation with the job (never free or reallocate j->groups apart from it).
 * Free with arb_job_free, which frees every array the job points to. */
/* How many of n's taints of effect e job j does not tolerate. */
int arb_job_untolerated(const arb_job_t *j, const arb_node_t *n, arb_taint_effect_t e);

arb_job_t *arb_job_new(const char *name, int ngroups);
void arb_job_free(arb_job_t *j);

/* The one way a job's or a group's name is set: a copy of name (NULL: ""),
 * one allocation sized to it, the one before freed. A name is kept to
 * ARB_JOB_NAME_MAX - 1 (a group's ARB_GROUP_NAME_MAX - 1) bytes, as the
 * inline arrays it replaces kept it: a reader that refuses a longer one
 * checks before. Returns 0, or -ENOMEM with the name as it was. */
int arb_job_set_name(arb_job_t *j, const char *name);
int arb_tgroup_set_name(arb_tgroup_t *g, const char *name);

/* Fill derived fields (ntasks, req.gpu_milli, gang_min default) and check the
 * job is well formed; -EINVAL with text naming the field otherwise. */
int arb_job_finalize(arb_job_t *j, arb_err_t *err);

/* The request of task t (0..ntasks-1) and its group index. */
const arb_tgroup_t *arb_job_task_group(const arb_job_t *j, int t, int *gi);

/* Total request of all tasks (for quotas and fair share); an elastic job
 * counts its min (what it needs to start; growth checks the quota per task). */
void arb_job_total(const arb_job_t *j, arb_res_t *out);

int arb_job_transition(arb_job_t *j, arb_job_state_t to, arb_err_t *err);
const char *arb_job_state_name(arb_job_state_t s);
const char *arb_topo_level_name(arb_topo_level_t l);
int arb_topo_level_parse(const char *s, arb_topo_level_t *out);

#endif
