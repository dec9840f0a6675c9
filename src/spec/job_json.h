/*
 * job_json.h: what a job asks for and where it may run, as its one JSON
 * writer (job_json.c): a typed copy of it read off the core job
 * (spec_asks_t: the names looked up, owning only its arrays), and the
 * object both GET /v1/jobs/{id} (src/state/jobview.c reads the copy under
 * the state's lock, src/api/enc_job.c writes it) and `arbiter submit
 * --dry-run` (wl_dry.c, through spec_job_json) print, so what a file was
 * understood as can be checked before and after it is submitted.
 */
#ifndef ARB_SPEC_JOB_JSON_H
#define ARB_SPEC_JOB_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "arbiter/sched.h"

/* One task group. */
typedef struct spec_ask_group {
    char name[64];
    int replicas, gpus, gpu_share; /* gpu_share: thousandths of one GPU; 0 whole GPUs */
    int64_t cpu_milli, mem_bytes, gpu_mem_mib;
    int64_t cpu_limit_milli, mem_limit_bytes; /* 0: the same as asked */
    int64_t ephemeral_bytes;                  /* 0: none */
    int64_t ext[ARB_MAX_EXT];                 /* by spec_asks_t.ext_name; 0 none */
    const char *topo_level;                   /* "node", ... (static); NULL: none */
    bool topo_required;                       /* else preferred */
} spec_ask_group_t;

/* One node-affinity expression: In/NotIn/Exists/DoesNotExist its values,
 * Gt/Lt its number. */
typedef struct spec_ask_expr {
    const char *key; /* borrowed */
    const char *op;  /* "In", ... (static) */
    int64_t num;     /* Gt, Lt */
    int val0, nvals; /* spec_asks_t.vals[val0 .. val0 + nvals) */
} spec_ask_expr_t;

typedef struct spec_ask_term {
    int weight;       /* a preferred term's (1..100) */
    int expr0, nexpr; /* spec_asks_t.exprs[expr0 .. expr0 + nexpr) */
} spec_ask_term_t;

typedef struct spec_ask_toleration {
    const char *key;    /* borrowed; NULL: every key */
    const char *value;  /* borrowed; NULL: operator Exists */
    const char *effect; /* "NoSchedule", ... (static); NULL: every effect */
} spec_ask_toleration_t;

/* What a job asks for. Names marked "borrowed" are the cluster's (its
 * string table, its extended resources): valid while it is. */
typedef struct spec_asks {
    int ntasks, gang_min;
    bool elastic;            /* its size: {min: gang_min, max: ntasks} */
    int grace_s;             /* -1: the agent's default */
    const char *gpu_sharing; /* "allow", "deny" (static); NULL unset */
    bool preemptible, exclusive;
    int64_t time_limit_s;     /* 0: none */
    spec_ask_group_t *groups; /* owned */
    int ngroups;
    const char *ext_name[ARB_MAX_EXT]; /* the extended resources' names (borrowed) */
    int next;
    struct {
        const char *key, *value; /* borrowed */
    } * selector;                /* owned */
    int nselector;
    spec_ask_term_t *terms; /* owned: the required ones, then the preferred */
    int nrequired, npreferred;
    spec_ask_expr_t *exprs; /* owned, the terms' */
    int nexprs;
    const char **vals; /* owned array of borrowed names, the expressions' */
    int nvals;
    spec_ask_toleration_t *tolerations; /* owned */
    int ntolerations;
    const char **models; /* owned array of borrowed names */
    int nmodels;
    const char *dataset; /* borrowed; NULL none */
} spec_asks_t;

/* Fill *a (zeroed here) with what j asks for, its names looked up in c's
 * table ("" for one not there). 0, or -ENOMEM with *a freed. */
int spec_asks_read(const arb_cluster_t *c, const arb_job_t *j, spec_asks_t *a);
/* Free what *a owns (not *a); a zeroed one is fine. */
void spec_asks_free(spec_asks_t *a);

/*
 * A new object with what a asks for, in this order: "ntasks", "groups"
 * (each: name, replicas, gpus, cpu, memory, then what is set of gpu_share
 * (thousandths of one GPU), gpu_memory, cpu_limit, memory_limit,
 * ephemeral_storage, extended {name: count}, topology {level, mode}),
 * "gang_min", "elastic" {min, max}, "termination_grace_s", "gpu_sharing",
 * "preemptible", "exclusive", "time_limit_s", "node_selector", "affinity"
 * {required: [[expr]], preferred: [{weight, match}]}, "tolerations",
 * "gpu_models", "dataset" (the ones after "preemptible" when set).
 * NULL when out of memory.
 */
json_t *spec_asks_json(const spec_asks_t *a);

/* The dry run's object for j: "gpus" (whole GPUs in all), then
 * spec_asks_json's. NULL when out of memory. */
json_t *spec_job_json(const arb_cluster_t *c, const arb_job_t *j);

#endif
