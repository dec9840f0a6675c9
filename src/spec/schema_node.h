/*
 * schema_node.h: the parts of a node that a scenario and an agent's
 * inventory file share, as one table each (spec/schema.h): its GPUs as a
 * count with domains, its GPUs one by one, and a taint. A scenario reads
 * them with SC_CTX_SCENARIO, the agent's inventory (agent/gpu_inventory.c)
 * with SC_CTX_INVENTORY, where a GPU also has its uuid and PCI bus id and
 * names are held to the agent's 127 bytes.
 */
#ifndef ARB_SPEC_SCHEMA_NODE_H
#define ARB_SPEC_SCHEMA_NODE_H

#include "spec/schema.h"

#define SPEC_INV_NAME 128 /* the inventory's names: AGENT_NAME_MAX */
#define SPEC_INV_UUID 96  /* its GPU UUIDs: agent_gpu_info_t.uuid */

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
