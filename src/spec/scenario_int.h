/*
 * scenario_int.h: what the files of the scenario loader share. The loader
 * is split by object: scenario.c the document, the jobs list and the
 * public calls, scenario_res.c resource maps (requests, allocatable,
 * quotas) and a group's requests and limits,
 * scenario_node.c nodes, scenario_job.c jobs and their groups,
 * scenario_match.c affinity and tolerations; scheduler settings and queues
 * are tables (spec/schema_sched.h) the controller config shares.
 */
#ifndef ARB_SPEC_SCENARIO_INT_H
#define ARB_SPEC_SCENARIO_INT_H

#include "spec/scenario.h"
#include "spec/schema.h"
#include "spec/sval.h"

#define SPEC_MAX_LIST 4096 /* items in one list of a job (terms, values...) */
#define SPEC_MAX_GROUPS 256

/* Resource names, as in Kubernetes (plus Arbiter's GPU share). */
#define RES_GPU "nvidia.com/gpu"
#define RES_GPU_MEM "nvidia.com/gpu-memory"
#define RES_GPU_SHARE "arbiter.io/gpu-share"
#define RES_EPH "ephemeral-storage"
#define RES_LIST                                                                                   \
    "cpu, memory, " RES_EPH ", " RES_GPU ", " RES_GPU_MEM ", " RES_GPU_SHARE                       \
    ", or an extended resource with a domain (rdma/hca)"

/* Intern s into the cluster's table. */
int scn_intern(sx_t *x, const sval_t *v, const char *s, uint32_t *id);

/* ---- resource maps (scenario_res.c) ---------------------------------------- */

typedef enum rmode {
    RM_REQUEST,     /* a job's requests or limits */
    RM_ALLOCATABLE, /* a node's allocatable (declares extended names) */
    RM_QUOTA,       /* a queue's nominal or borrowing limit (GPUs in milli) */
} rmode_t;

enum { RF_GPU, RF_SHARE, RF_GPUMEM, RF_CPU, RF_MEM, RF_EXT0 };

typedef struct rmap {
    unsigned has; /* bit RF_* (extended i: RF_EXT0 + i) */
    int64_t gpu, share, gpumem, cpu, mem;
    int64_t eph; /* ephemeral-storage (requests only: recorded, not placed on) */
    int64_t ext[ARB_MAX_EXT];
} rmap_t;

/* The resource map in v, read as mode says. Extended names need x->c (a
 * cluster whose nodes declare them); without one they are refused. */
int scn_rmap(sx_t *x, const sval_t *v, rmode_t mode, rmap_t *r);
/* An RM_QUOTA map as a resource vector. */
void scn_rmap_to_res(const rmap_t *r, arb_res_t *out);
/* A group's resources: {requests, limits} into g, with Kubernetes' rules
 * between the two. */
int scn_resources(sx_t *x, const sval_t *v, arb_tgroup_t *g);

/* ---- budgets and objects ------------------------------------------------------- */

/* Charge copies of the item in v to the file's budget of values. */
int scn_charge(sx_t *x, const sval_t *v, int copies);
/* The count: of a repeated node or job (1 when absent), at most left. */
int scn_count(sx_t *x, const sval_t *v, int left, int *count);

/* The tables of the objects (the reference: spec_scenario_doc). */
extern const sc_table_t scn_root_table, scn_job_table, scn_affinity_table, scn_toleration_table,
    scn_resources_table;

int scn_nodes(sx_t *x, const sval_t *v);                       /* scenario_node.c */
int scn_job(sx_t *x, const sval_t *v, int k, arb_job_t **out); /* scenario_job.c */
int scn_jobs(sx_t *x, const sval_t *v, spec_scenario_t *s);    /* scenario_job.c */
int scn_affinity(sx_t *x, const sval_t *v, arb_job_t *j);      /* scenario_match.c */
int scn_tolerations(sx_t *x, const sval_t *v, arb_job_t *j);   /* scenario_match.c */

#endif
