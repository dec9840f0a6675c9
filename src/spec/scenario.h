/*
 * scenario.h: YAML scenarios and job specs (libfyaml) into core's model.
 *
 * A scenario is one YAML document describing a cluster, an ordered stream of
 * jobs and, optionally, scheduler settings and queues with quotas. It reads
 * like Kubernetes; docs/scenario.md is the full reference:
 *
 *   scheduler: {policy: spread, queue: priority, backfill: false,
 *               preemption: false, starvation: 1h}          # all optional
 *   queues:                                                  # optional
 *     - {name: team-a, cohort: research, weight: 1,
 *        nominal: {nvidia.com/gpu: 16, cpu: 128, memory: 1Ti},
 *        borrowingLimit: {nvidia.com/gpu: 8}}
 *   nodes:                                                   # required
 *     - name: node                  # with count: 4 -> node-1 .. node-4
 *       count: 4
 *       labels: {rack: r1, block: b1, zone: z1}
 *       taints: [{key: dedicated, value: infer, effect: NoSchedule}]
 *       datasets: [imagenet]
 *       condition: Ready            # Ready | NotReady | Draining
 *       allocatable: {cpu: 128, memory: 1Ti, rdma/hca: 4}
 *       gpus: {count: 8, model: A100-80G, memory: 80Gi,
 *              nvlinkDomains: 1, pcieSwitches: 4, numaNodes: 2}
 *       # or gpus: [{model: A100-80G, memory: 80Gi, nvlink: 0, pcie: 0, numa: 0}, ...]
 *   jobs:                                                    # arrival order
 *     - name: train                 # with count: 3 -> train-1 .. train-3
 *       queue: team-a
 *       priority: 100               # or priorityClassName: high
 *       preemptible: true
 *       gangMin: 4
 *       timeLimit: 2h               # seconds, or 90m, 2h, 1d, 1h30m
 *       dataset: imagenet
 *       nodeSelector: {rack: r1}
 *       affinity: {required: [[{key: zone, operator: In, values: [z1]}]],
 *                  preferred: [{weight: 50, match: [{key: rack, operator: In,
 *                                                    values: [r1]}]}]}
 *       tolerations: [{key: dedicated, operator: Equal, value: infer,
 *                      effect: NoSchedule}]
 *       gpuModels: [A100-80G]
 *       groups:                     # or replicas/resources/topology here
 *         - name: worker
 *           replicas: 4
 *           topology: {level: nvlink, mode: required}
 *           resources:
 *             requests: {nvidia.com/gpu: 8, cpu: 32, memory: 256Gi}
 *             limits: {nvidia.com/gpu: 8}
 *
 * Errors: every failure writes "FILE:LINE:COLUMN: FIELD.PATH: what; fix"
 * into err (e.g. "s.yaml:12:18: jobs[2].groups[0].resources.requests.memory:
 * '256Gx': unknown unit '...'; use Ki, Mi, ..."). Unknown fields are errors
 * that list the valid ones, so typos never pass silently. The loaders build
 * into fresh objects and free them on failure: nothing is ever half loaded.
 * They never crash on any input (fuzz/fuzz_scenario.c).
 */
#ifndef ARB_SPEC_SCENARIO_H
#define ARB_SPEC_SCENARIO_H

#include <stdio.h>

#include "arbiter/sched.h"

struct fy_node;

/* Bounds that keep a hostile file from asking for unbounded memory. */
/* SPEC_MAX_NODES: spec/schema_node.h (the node table's bound) */
#define SPEC_MAX_JOBS 100000
#define SPEC_MAX_JOB_TASKS 100000 /* tasks (sum of replicas) of one job */
#define SPEC_MAX_TASKS 5000000    /* tasks of all jobs of a scenario */
#define SPEC_MAX_VALUES 5000000   /* YAML values read, count: copies included */
#define SPEC_MAX_FILE (64 << 20)

typedef struct spec_scenario {
    arb_cluster_t cluster; /* owned; the scheduler borrows it */
    int njobs;
    arb_job_t **jobs;                /* owned, finalized, in arrival order; set a slot
                                        to NULL when handing the job to arb_sched_submit */
    char policy[32];                 /* scheduler.policy, "" when the file names none */
    arb_queue_policy_t queue_policy; /* scheduler.queue, FIFO by default */
    bool backfill;                   /* scheduler.backfill, default false */
    bool preemption;                 /* scheduler.preemption, default false */
    int64_t starvation_ns;           /* scheduler.starvation, default 0 (off) */
    int nqueues;
    arb_queue_t *queues; /* owned; names interned in cluster.strs */
} spec_scenario_t;

/*
 * Load the scenario in buf[0..len) (need not be NUL-terminated); name is the
 * file name used in messages. On success *out owns everything and is freed
 * with spec_scenario_free; on failure *out is untouched and err says what
 * and where. -EINVAL for bad input, -ENOMEM.
 */
int spec_scenario_load_mem(const char *name, const char *buf, size_t len, spec_scenario_t *out,
                           arb_err_t *err);
/* The same for a file (-ENOENT and friends when it cannot be read). */
int spec_scenario_load_file(const char *path, spec_scenario_t *out, arb_err_t *err);
/* Free what the scenario owns (jobs whose slot is not NULL included). */
void spec_scenario_free(spec_scenario_t *s);

/*
 * Scheduler settings for s: the profile named by policy (when not NULL), else
 * by the file's scheduler.policy, else "default"; queue policy, backfill,
 * preemption and starvation from the file. -ENOENT with the list of
 * profiles when the name is unknown.
 */
int spec_scenario_conf(const spec_scenario_t *s, const char *policy, arb_sched_conf_t *conf,
                       arb_err_t *err);

/*
 * One job spec: the mapping a scenario's jobs[] holds (count excepted), as
 * the only document of buf (`arbiter submit job.yaml`). Strings are
 * interned in c->strs; extended resources must already be named in c->ext
 * (a node offers them) or the spec is rejected, which catches typos. On
 * success *out is a new finalized job (free with arb_job_free or hand it to
 * arb_sched_submit); on failure *out is untouched.
 */
int spec_job_load_mem(const char *name, const char *buf, size_t len, arb_cluster_t *c,
                      arb_job_t **out, arb_err_t *err);

/*
 * The same from a node of a document the caller parsed with libfyaml: file
 * and path ("" for the root) are used in messages. Lines and columns come
 * from the node's tokens.
 */
int spec_job_from_node(const char *file, struct fy_node *node, const char *path, arb_cluster_t *c,
                       arb_job_t **out, arb_err_t *err);

/* The reference of a scenario's fields and of a job spec's, as Markdown
 * tables made from the tables the loader reads (`arbiter help scenario`,
 * `arbiter help job`; docs/reference.md). */
void spec_scenario_doc(FILE *f);
void spec_job_doc(FILE *f);

/* Built-in priority classes (best-effort 0, low 100, normal 500, high 1000,
 * critical 10000): 0 and *prio set, or -ENOENT. */
int spec_priority_class(const char *name, int32_t *prio);

/*
 * Priority classes a caller defines (the controller's config
 * `priorityClasses:`), passed in rather than kept in a global: a job's
 * priorityClassName resolves through the table; an unknown name is an
 * error that lists the table. preemptible, when not -1, is the default of
 * the jobs of that class (their own `preemptible:` still wins).
 */
typedef struct spec_prio_class {
    char name[64];
    int32_t value;
    int8_t preemptible; /* -1: no default; 0 or 1 */
    char description[160];
} spec_prio_class_t;

typedef struct spec_prio_table {
    const spec_prio_class_t *v;
    int n;
} spec_prio_table_t;

/* The built-ins into out (at most max): their count. */
int spec_priority_builtins(spec_prio_class_t *out, int max);

/* spec_job_from_node with a class table (NULL: the built-ins). */
int spec_job_from_node_classes(const char *file, struct fy_node *node, const char *path,
                               arb_cluster_t *c, const spec_prio_table_t *classes, arb_job_t **out,
                               arb_err_t *err);

#endif
