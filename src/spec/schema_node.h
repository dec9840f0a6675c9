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

/* A node as a scenario and an inventory write it: one table with a row per
 * format where they differ (a scenario's count:, condition: and
 * allocatable:, an inventory's cpu: and memory:, each format's name:,
 * labels:, taints: and datasets: with its own limits) and one row where
 * they agree (gpus). Both read the
 * values by hand (spec/scenario_node.c, agent/gpu_inventory.c); the table
 * checks the keys and makes the reference. */
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

extern const sc_table_t spec_taint_table; /* walk it into a spec_taint_t */
extern const sc_table_t spec_gpus_table;  /* gpus: {count, model, memory, domains} */
extern const sc_table_t spec_gpu_table;   /* walk it into a spec_gpu_t (sc_init first) */

#endif
