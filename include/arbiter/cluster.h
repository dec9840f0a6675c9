/*
 * cluster.h: the node, GPU and topology model: what a cluster *has*.
 *
 * A cluster is an array of nodes plus the tables their strings are interned
 * in. Each node has allocatable resources, what is allocated on it, up to
 * ARB_MAX_GPUS GPUs with their topology coordinates, labels, taints, cached
 * datasets, a lifecycle state and the time of its last report.
 *
 * Topology, from near to far:
 *   NVLink domain  GPUs of one node with the same gpu.nvlink id talk over
 *                  NVLink/NVSwitch (ids are local to the node)
 *   node           GPUs under one OS, PCIe switches (gpu.pcie), NUMA (gpu.numa)
 *   rack, block    the node labels "rack" and "block" (same ToR / same spine)
 *   zone           the node label "zone"
 *
 * Node lifecycle (arb_node_transition; anything else is rejected, -EPERM):
 *
 *             report ok                drain (admin)
 *   (join) ------------> READY ------------------------> DRAINING
 *                        |  ^   <------------------------   |
 *       lease expired /  |  |        uncordon (admin)       |
 *       report too old   v  | report ok                     |
 *                      NOT_READY --------- drain --------->-+
 *                        |
 *   any state -- remove --> LEFT (terminal: its id is never reused)
 *
 * Invariants: (1) for every GPU, 0 <= used_milli <= 1000 and
 * mem_used_mib <= mem_mib; (2) used <= cap in every dimension; (3) only a
 * READY node may receive new allocations (filters enforce it; arb_node_alloc
 * enforces (1) and (2) on every code path).
 *
 * Part of the model layer (src/model/cluster.c, library arbmodel): the agent
 * and the loaders use it without the scheduler, so no type of sched.h or
 * job.h belongs here.
 */
#ifndef ARBITER_CLUSTER_H
#define ARBITER_CLUSTER_H

#include "arbiter/resource.h"
#include "arbiter/strtab.h"

#define ARB_MAX_GPUS 16

typedef enum arb_node_state {
    ARB_NODE_READY,
    ARB_NODE_NOT_READY,
    ARB_NODE_DRAINING,
    ARB_NODE_LEFT,
} arb_node_state_t;

typedef struct arb_gpu {
    uint32_t model;       /* interned model name ("A100-80G", "G2", ...) */
    int32_t mem_mib;      /* device memory */
    int32_t used_milli;   /* allocated share of the device, 0..1000 */
    int32_t mem_used_mib; /* allocated device memory */
    int16_t numa;         /* topology coordinates inside the node; -1 unknown */
    int16_t pcie;
    int16_t nvlink;
    int16_t temp_c;   /* last reported temperature */
    uint8_t util_pct; /* last reported utilisation */
    uint8_t healthy;  /* 0: excluded from allocation */
} arb_gpu_t;

typedef struct arb_label {
    uint32_t key, val;
} arb_label_t;

typedef enum arb_taint_effect {
    ARB_TAINT_NO_SCHEDULE = 1,
    ARB_TAINT_PREFER_NO_SCHEDULE = 2,
    ARB_TAINT_NO_EXECUTE = 3, /* as NoSchedule, and what runs there without a toleration is
                                 evicted (the controller's doing: src/state/nodeops.c) */
} arb_taint_effect_t;

typedef struct arb_taint {
    uint32_t key, val;
    arb_taint_effect_t effect;
} arb_taint_t;

typedef struct arb_node {
    uint32_t id;   /* index in cluster.nodes, stable for the node's life */
    uint32_t name; /* interned */
    arb_node_state_t state;
    arb_res_t cap;  /* allocatable; cap.gpu_milli = 1000 x healthy GPUs */
    arb_res_t used; /* sum of allocations on this node */
    int ngpus;
    arb_gpu_t gpu[ARB_MAX_GPUS];
    uint32_t rack, block, zone; /* interned values of those labels; 0 none */
    int nlabels, ntaints, ndatasets;
    arb_label_t *labels;
    arb_taint_t *taints;
    uint32_t *datasets;
    int64_t report_ns; /* scheduler-clock time of the last report */
    uint64_t version;  /* bumped on every change to this node */
    int ntasks;        /* tasks allocated here */
    int nexcl;         /* ... of which of exclusive jobs (arb_job_t.exclusive: no sharing) */
    int32_t queue_len; /* last reported work waiting on the node (telemetry
                          queue_length: requests, items); 0 none or unknown */
} arb_node_t;

typedef struct arb_cluster {
    arb_strtab_t strs; /* every interned string of this cluster */
    arb_extnames_t ext;
    arb_node_t *nodes;
    uint32_t nnodes, capnodes;
    uint64_t version; /* bumped on every change to any node */
} arb_cluster_t;

/* A task slot that holds nothing: a task of a gang whose gangMin is below
 * its size that has already ended (arb_sched_task_done). Every walk over a
 * job's first nalloc allocations skips it. */
#define ARB_NO_NODE UINT32_MAX

/* One task's place: a node and, when it uses GPUs, which ones. */
typedef struct arb_task_alloc {
    uint32_t node;
    uint16_t gpu_mask;   /* bit i = node's GPU i */
    int16_t gpu_milli;   /* charged on each GPU in the mask (1000 for whole GPUs) */
    int32_t gpu_mem_mib; /* device memory charged on each GPU in the mask */
} arb_task_alloc_t;

void arb_cluster_init(arb_cluster_t *c);
/* Free the nodes and tables the cluster owns. */
void arb_cluster_free(arb_cluster_t *c);

/* Add a READY node named name with no resources yet. *out (optional) points
 * into c->nodes and is valid until the next add. -EEXIST on a duplicate. */
int arb_cluster_add_node(arb_cluster_t *c, const char *name, arb_node_t **out, arb_err_t *err);
arb_node_t *arb_cluster_find_node(arb_cluster_t *c, const char *name);
const char *arb_node_name(const arb_cluster_t *c, const arb_node_t *n);

/* Add a GPU; its capacity joins n->cap. nvlink/pcie/numa may be -1. */
int arb_node_add_gpu(arb_cluster_t *c, arb_node_t *n, const char *model, int32_t mem_mib, int numa,
                     int pcie, int nvlink, arb_err_t *err);
/* Set a label (replacing the key's value); "rack", "block" and "zone" also
 * set the node's topology coordinates. */
int arb_node_set_label(arb_cluster_t *c, arb_node_t *n, const char *key, const char *val);
/* Add a label the caller knows n lacks (rebuilding n's labels from a set
 * with unique keys): no search, so n labels cost n, not n^2/2. */
int arb_node_add_label(arb_cluster_t *c, arb_node_t *n, const char *key, const char *val);
/* The interned value of label key on n, or 0 when absent. */
uint32_t arb_node_label(const arb_node_t *n, uint32_t key);
int arb_node_add_taint(arb_cluster_t *c, arb_node_t *n, const char *key, const char *val,
                       arb_taint_effect_t effect);
int arb_node_add_dataset(arb_cluster_t *c, arb_node_t *n, const char *dataset);
bool arb_node_has_dataset(const arb_node_t *n, uint32_t dataset);

/* Mark n changed after writing its fields directly (capacity, usage, GPU
 * telemetry, report time): bumps n->version and c->version so every index
 * over the cluster (the scheduler's node classes) re-reads n. The arb_node_*
 * functions do this themselves. */
void arb_node_touch(arb_cluster_t *c, arb_node_t *n);

/* Lifecycle: move n to state `to`, or -EPERM with text if the diagram above
 * has no such arrow. */
int arb_node_transition(arb_cluster_t *c, arb_node_t *n, arb_node_state_t to, arb_err_t *err);
const char *arb_node_state_name(arb_node_state_t s);
int arb_node_state_parse(const char *s, arb_node_state_t *out);

/* Free whole GPUs / free milli on n, and the largest number of free whole
 * GPUs inside one NVLink domain of n. */
int arb_node_free_gpus(const arb_node_t *n);
int arb_node_largest_nvlink_free(const arb_node_t *n);
/* The largest number of GPUs in bit mask usable that share one NVLink domain
 * of n (a GPU without NVLink is a domain of its own); *dom (optional) gets
 * that domain's id. */
int arb_node_nvlink_largest(const arb_node_t *n, uint32_t usable, int16_t *dom);

/*
 * Charge req (a task's cpu, memory, extended; gpu comes from a) and the GPU
 * share in a to node a->node. Checks invariants (1) and (2) first: returns
 * -ENOSPC and changes nothing if anything would go over capacity.
 */
int arb_node_alloc(arb_cluster_t *c, const arb_res_t *req, const arb_task_alloc_t *a,
                   arb_err_t *err);
/* Undo arb_node_alloc with the same arguments. */
void arb_node_release(arb_cluster_t *c, const arb_res_t *req, const arb_task_alloc_t *a);
/* Undo arb_node_release with the same arguments: put back exactly what a
 * trial took away a moment ago, with no checks (the GPU it holds may have
 * left capacity since it was allocated: the holder still holds it). */
void arb_node_recharge(arb_cluster_t *c, const arb_res_t *req, const arb_task_alloc_t *a);

/* Check every invariant of every node; 0 or -EFAULT with the first breach. */
int arb_cluster_check(const arb_cluster_t *c, arb_err_t *err);

#endif
