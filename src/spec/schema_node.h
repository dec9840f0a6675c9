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

/* One taints[] item. */
typedef struct spec_taint {
    char key[SPEC_STR], val[SPEC_STR];
    int effect; /* arb_taint_effect_t */
} spec_taint_t;

#define SPEC_INV_NAME 128 /* the inventory's names: AGENT_NAME_MAX */

/* The effects, indexed by arb_taint_effect_t (0 unused). */
extern const char *const spec_taint_effects[4];

extern const sc_table_t spec_taint_table; /* walk it into a spec_taint_t */
extern const sc_table_t spec_gpus_table;  /* gpus: {count, model, memory, domains} */
extern const sc_table_t spec_gpu_table;   /* gpus: [{model, memory, nvlink, ...}] */

#endif
