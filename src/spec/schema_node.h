/*
 * schema_node.h: a node as a scenario and an agent's inventory file write
 * it, as one table each (spec/schema.h): the node itself, its GPUs as a
 * count with domains, its GPUs one by one, and a taint. A scenario reads
 * them with SC_CTX_SCENARIO, the agent's inventory (agent/gpu_inventory.c)
 * with SC_CTX_INVENTORY, where a GPU also has its uuid and PCI bus id and
 * names are held to the agent's 127 bytes.
 */
#ifndef ARB_SPEC_SCHEMA_NODE_H
#define ARB_SPEC_SCHEMA_NODE_H

#include "spec/schema.h"

#define SPEC_INV_NAME 128           /* the inventory's names: AGENT_NAME_MAX */
#define SPEC_INV_UUID 96            /* its GPU UUIDs: agent_gpu_info_t.uuid */
#define SPEC_INV_MAX_CPUS (1 << 20) /* an inventory's cpu: at most */
#define SPEC_MAX_NODES 10000        /* a scenario's nodes, count: copies included */
#define SPEC_INV_MAX_LABELS 16      /* an inventory's labels: at most */
#define SPEC_INV_MAX_TAINTS 16      /* its taints */
#define SPEC_INV_MAX_DATASETS 32    /* its datasets */
#define SPEC_MAX_NODE_LIST 4096     /* a scenario node's taints, datasets: at most */

/* A node as a scenario and an inventory write it: one table with a row per
 * format where they differ (a scenario's count:, condition: and
 * allocatable:, an inventory's cpu: and memory:, each format's name:,
 * labels:, taints: and datasets: with its own limits: a list row's hi is
 * its most items, 0 none; size the bytes of each name) and one row where
 * they agree (gpus). Every field is read by its row into a spec_node_rd_t
 * (spec_node_read); the values each format keeps in a node of its own (a
 * cluster's node, the agent's inventory) go on to it through the format's
 * sink, spec_node_ops_t. Only a scenario's count: is read by the nodes
 * list, which repeats the node (SC_HAND). */
extern const sc_table_t spec_node_table;
/* condition:'s names, indexed by arb_node_state_t (a scenario's nodes). */
extern const char *const spec_node_conditions[3];

/* One taints[] item. */
typedef struct spec_taint {
    char key[SPEC_STR], val[SPEC_STR];
    int effect; /* arb_taint_effect_t */
} spec_taint_t;

/* The effects, indexed by arb_taint_effect_t (0 unused). */
extern const char *const spec_taint_effects[4];

/* gpus: {count: 8, model: A100-80G, memory: 80Gi, nvlinkDomains: 1, ...} */
typedef struct spec_gpus {
    int count;
    char model[SPEC_INV_NAME];
    int64_t mem_mib;
    int dom[3]; /* nvlinkDomains, pcieSwitches, numaNodes: 0..count */
} spec_gpus_t;

/* The mapping in v through spec_gpus_table in ctx (defaults first): the
 * domains at most count, memory required when count > 0, and within what
 * the format counts (a scenario: up to 2Pi; an inventory: more than 0). */
int spec_gpus_read(sx_t *x, const sval_t *v, unsigned ctx, spec_gpus_t *g);

/* gpus: [{model, memory, nvlink, pcie, numa}, ...] (an inventory's also
 * uuid and pciBusId, which its parser checks) */
typedef struct spec_gpu {
    char model[SPEC_INV_NAME];
    int64_t mem_mib;
    int nvlink, pcie, numa;                   /* -1: none or unknown */
    char uuid[SPEC_INV_UUID], pci_bus_id[64]; /* pciBusId as written */
} spec_gpu_t;

/* ---- reading a node through spec_node_table ---------------------------------- */

typedef struct spec_node_rd spec_node_rd_t;

/* Where a format keeps what its rows read, each called as its row is read
 * (table order), v the value (for messages). NULL: the format keeps it in
 * the spec_node_rd_t only. */
typedef struct spec_node_ops {
    /* name: read into rd->name (a scenario's first field: it makes the node) */
    int (*named)(sx_t *x, const sval_t *v, spec_node_rd_t *rd);
    /* one label, taint or dataset: the ones so far are rd->nlabels, ... */
    int (*label)(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const char *key, const char *val);
    int (*taint)(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_taint_t *t);
    int (*dataset)(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const char *name);
    /* condition: read into rd->condition */
    int (*condition)(sx_t *x, const sval_t *v, spec_node_rd_t *rd);
    /* allocatable: the format reads v (its resource names are the format's) */
    int (*allocatable)(sx_t *x, const sval_t *v, spec_node_rd_t *rd);
    /* GPU rd->ngpus of the node, in either form of gpus: (a count's GPUs with
     * the coordinates of their runs); v the list item, or the gpus: mapping */
    int (*gpu)(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_gpu_t *g);
} spec_node_ops_t;

struct spec_node_rd {
    const spec_node_ops_t *ops;
    void *dst;    /* the format's node, for its ops */
    unsigned ctx; /* SC_CTX_SCENARIO or SC_CTX_INVENTORY */
    /* the fields kept here (absent ones keep what the caller put) */
    char name[SPEC_STR];
    int cpus;          /* inventory */
    int64_t mem_bytes; /* inventory */
    int condition;     /* scenario: spec_node_conditions' index */
    /* what went to the sink so far */
    int nlabels, ntaints, ndatasets, ngpus;
};

/* The fields of the node mapping in v through spec_node_table in rd->ctx
 * (the caller checked the keys: sc_check_keys), each value handed to
 * rd->ops as its row reads it. */
int spec_node_read(sx_t *x, const sval_t *v, spec_node_rd_t *rd);

extern const sc_table_t spec_taint_table; /* walk it into a spec_taint_t */
extern const sc_table_t spec_gpus_table;  /* gpus: {count, model, memory, domains} */
extern const sc_table_t spec_gpu_table;   /* walk it into a spec_gpu_t (sc_init first) */

#endif
