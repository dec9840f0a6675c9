/*
 * gen.h: the workload generator. It builds openb-like task lists from a base
 * one (the trace's default) the way the trace's authors built theirs
 * (Alibaba cluster-trace-gpu-v2023, the FGD paper's Figs. 11-14), so a
 * policy is developed and checked over a family of workload shapes, not the
 * five published ones.
 *
 * A point is one or more steps applied in order, each a kind and a percent:
 *
 *   gpushare:P  GPU-sharing tasks carry P% of the GPU request. The number of
 *               GPU tasks stays; sharing and other GPU tasks are drawn from
 *               the base's (with replacement only when more are needed
 *               than it has) in the numbers that give P% on average.
 *               CPU-only tasks stay as they are. (gpushare40: 8,152 tasks,
 *               4,001 sharing; ours: the same count, about 3,980.)
 *   multigpu:P  multi-GPU tasks carry P% of the GPU request: copies of the
 *               base's multi-GPU tasks, drawn with replacement, are added
 *               until they do (random ones removed when above). Nothing
 *               else changes. (multigpu20: +172 tasks, 1,000 GPUs.)
 *   gpuspec:P   tasks restricted to GPU models carry P% of the GPU request:
 *               GPU tasks in a random order get a gpu_spec until they do.
 *               A spec is drawn from a pool of observed ones of the same
 *               task class (GPU share, one whole GPU, several), as the
 *               published gpuspec10 has them (sharing tasks are only ever
 *               T4, P100, or the 5-model list); with no pool, one model
 *               drawn in proportion to the GPUs of the nodes that could
 *               hold the task. Existing specs are cleared first.
 *   cpu:P       CPU-only tasks are P% of all tasks (by number, as the
 *               artifact's cpu050 = 5%): drawn from the base's CPU-only
 *               tasks; GPU tasks unchanged.
 *
 * Names follow the artifact's: gpushare60, multigpu30, gpuspec25, cpu050
 * (the cpu percent in tenths, three digits), steps joined by '+'
 * ("gpuspec33+cpu200"); a generated workload is called like its base with
 * "default" replaced by the point's name (openb_pod_list_gpuspec25).
 * "default" is the base unchanged; "family" expands to every point of the
 * authors' family (SIM_GEN_FAMILY).
 *
 * Every draw comes from the seed given, so a (base, point, seed) always
 * gives the same list. Tasks are renumbered <stem>-NNNN in output order,
 * stem being the base's first name up to its last '-'.
 */
#ifndef ARB_SIM_GEN_H
#define ARB_SIM_GEN_H

#include <stdio.h>

#include "sim/trace.h"

#define SIM_GEN_MAX_STEPS 4
#define SIM_GEN_MAX_POINTS 64

/* The authors' family: their 17 generated workloads, the clusterdata
 * extras (gpuspec05, cpu0), and the default. */
#define SIM_GEN_FAMILY                                                                             \
    "default,gpushare:20,gpushare:40,gpushare:60,gpushare:80,gpushare:100,multigpu:20,"            \
    "multigpu:30,multigpu:40,multigpu:50,gpuspec:5,gpuspec:10,gpuspec:20,gpuspec:25,gpuspec:33,"   \
    "cpu:0,cpu:5,cpu:10,cpu:20,cpu:25"

typedef enum sim_gen_kind {
    SIM_GEN_GPUSHARE,
    SIM_GEN_MULTIGPU,
    SIM_GEN_GPUSPEC,
    SIM_GEN_CPU,
} sim_gen_kind_t;

typedef struct sim_gen_step {
    sim_gen_kind_t kind;
    double pct; /* 0..100 (cpu: below 100) */
} sim_gen_step_t;

typedef struct sim_gen_point {
    char name[48]; /* "gpushare60", "gpuspec33+cpu200", "default" */
    int nsteps;    /* 0: the base unchanged */
    sim_gen_step_t step[SIM_GEN_MAX_STEPS];
} sim_gen_point_t;

/* Parse a comma list of points ("gpushare:60,gpuspec:33+cpu:20",
 * "family") into v[0..max); *n set. 0 or -EINVAL with text naming the
 * offending item and what to write instead. */
int sim_gen_parse(const char *s, sim_gen_point_t *v, int max, int *n, arb_err_t *err);

/* Build point p from base into *out (caller-owned, free with
 * sim_tasks_free). pool: tasks whose gpu_spec values feed gpuspec steps
 * (NULL or none constrained: the base's own, else one model drawn by the
 * nodes' GPUs); nodes: the cluster (for that fallback; may be NULL when a
 * pool exists). 0, or -EINVAL (a step the base cannot give, e.g.
 * gpushare on a base without sharing tasks) / -ENOMEM with text. */
int sim_gen_make(const sim_tasks_t *base, const sim_gen_point_t *p, const sim_tasks_t *pool,
                 const sim_nodes_t *nodes, uint64_t seed, sim_tasks_t *out, arb_err_t *err);

/* Write a task list as CSV in the trace's columns (name, cpu_milli,
 * memory_mib, num_gpu, gpu_milli, gpu_spec, qos, creation_time,
 * deletion_time, scheduled_time; queue, priority, replicas, topology when
 * any task sets them), readable by sim_tasks_parse. 0 or -errno. */
int sim_tasks_write(FILE *f, const sim_tasks_t *t);

/* What the generator targets, measured: shares of the GPU request (%) by
 * GPU-sharing, multi-GPU and model-restricted tasks, and CPU-only tasks as %
 * of all. */
typedef struct sim_gen_stats {
    int tasks, cpu_only, sharing, multi, constrained;
    double gpus; /* GPU request, GPUs */
    double share_pct, multi_pct, spec_pct, cpu_pct;
} sim_gen_stats_t;

void sim_gen_stats(const sim_tasks_t *t, sim_gen_stats_t *s);

#endif
