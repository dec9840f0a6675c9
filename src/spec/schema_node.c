/*
 * schema_node.c: the tables of schema_node.h. The GPUs are read by hand in
 * each format (their domains depend on the count, and the inventory's
 * rules for memory and ids are its own), with these tables checking the
 * keys and making the reference; a taint is read through the walker.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "spec/schema_node.h"

const char *const spec_taint_effects[4] = {[ARB_TAINT_NO_SCHEDULE] = "NoSchedule",
                                           [ARB_TAINT_PREFER_NO_SCHEDULE] = "PreferNoSchedule",
                                           [ARB_TAINT_NO_EXECUTE] = "NoExecute"};

#define TAINT(field) offsetof(spec_taint_t, field)
#define EFFECTS "NoSchedule, PreferNoSchedule or NoExecute"

static const sc_field_t taint_fields[] = {
    {.key = "key",
     .type = SC_STR,
     .off = TAINT(key),
     .size = SPEC_STR,
     .flags = SC_REQUIRED,
     .help = "the taint's key",
     .ctx = SC_CTX_SCENARIO},
    {.key = "key",
     .type = SC_STR,
     .off = TAINT(key),
     .size = SPEC_INV_NAME,
     .flags = SC_REQUIRED,
     .help = "the taint's key",
     .ctx = SC_CTX_INVENTORY},
    {.key = "value",
     .type = SC_STR,
     .off = TAINT(val),
     .size = SPEC_STR,
     .flags = SC_EMPTY_OK,
     .def_doc = "\"\"",
     .help = "its value",
     .ctx = SC_CTX_SCENARIO},
    {.key = "value",
     .type = SC_STR,
     .off = TAINT(val),
     .size = SPEC_INV_NAME,
     .flags = SC_EMPTY_OK,
     .def_doc = "\"\"",
     .help = "its value",
     .ctx = SC_CTX_INVENTORY},
    {.key = "effect",
     .type = SC_ENUM,
     .off = TAINT(effect),
     .names = spec_taint_effects,
     .nnames = 4,
     .flags = SC_REQUIRED,
     .help = EFFECTS},
    {.key = NULL},
};
const sc_table_t spec_taint_table = {"taint", taint_fields, NULL};

static const char *const dom_keys[3] = {"nvlinkDomains", "pcieSwitches", "numaNodes"};

/* Memory is what each GPU has, so a node with GPUs gives it. */
static int rule_gpu_memory(sx_t *x, const sval_t *map, void *obj)
{
    const spec_gpus_t *g = obj;
    sval_t f;

    if (g->count > 0 && !sv_get(map, "memory", &f))
        return sv_fail(x, map, -EINVAL, "missing memory: (device memory per GPU, e.g. 80Gi)");
    return 0;
}

/* A node's domains split its GPUs, so at most count of each. */
static int rule_gpu_domains(sx_t *x, const sval_t *map, void *obj)
{
    const spec_gpus_t *g = obj;
    sval_t f;

    for (int d = 0; d < 3; d++)
        if (g->dom[d] > g->count && sv_get(map, dom_keys[d], &f))
            return sv_fail(x, &f, -ERANGE, "%d is out of range; use 0..%d", g->dom[d], g->count);
    return 0;
}

#define GPUS(field) offsetof(spec_gpus_t, field)

static const sc_field_t gpus_fields[] = {
    {.key = "count",
     .type = SC_INT,
     .off = GPUS(count),
     .size = sizeof(int),
     .lo = 0,
     .hi = ARB_MAX_GPUS,
     .flags = SC_REQUIRED,
     .help = "GPUs in the node, 0..16"},
    {.key = "model",
     .type = SC_STR,
     .off = GPUS(model),
     .size = 64,
     .def = "",
     .def_doc = "\"\"",
     .help = "e.g. A100-80G",
     .ctx = SC_CTX_SCENARIO},
    {.key = "model",
     .type = SC_STR,
     .off = GPUS(model),
     .size = SPEC_INV_NAME,
     .def = "",
     .def_doc = "\"\"",
     .help = "e.g. H100",
     .ctx = SC_CTX_INVENTORY},
    {.key = "memory",
     .type = SC_QTY,
     .off = GPUS(mem_mib),
     .qty = ARB_QTY_MIB,
     .lo = 0,
     .hi = INT32_MAX,
     .range_msg = "more device memory than Arbiter can count",
     .help = "device memory per GPU, e.g. 80Gi (required when count > 0)",
     .ctx = SC_CTX_SCENARIO},
    {.key = "memory",
     .type = SC_QTY,
     .off = GPUS(mem_mib),
     .qty = ARB_QTY_MIB,
     .lo = 1,
     .hi = INT32_MAX,
     .range_msg = "device memory must be more than 0 and at most 2Pi",
     .help = "device memory per GPU, e.g. 80Gi (required when count > 0)",
     .ctx = SC_CTX_INVENTORY},
    {.key = "nvlinkDomains",
     .type = SC_INT,
     .off = GPUS(dom[0]),
     .size = sizeof(int),
     .lo = 0,
     .hi = ARB_MAX_GPUS,
     .def = "1",
     .help = "NVLink domains the GPUs split into in equal runs in index order (0: none), "
             "0..count: 8 GPUs in 2 are domains 0,0,0,0,1,1,1,1"},
    {.key = "pcieSwitches",
     .type = SC_INT,
     .off = GPUS(dom[1]),
     .size = sizeof(int),
     .lo = 0,
     .hi = ARB_MAX_GPUS,
     .def = "0",
     .help = "PCIe switches (0: unknown), 0..count"},
    {.key = "numaNodes",
     .type = SC_INT,
     .off = GPUS(dom[2]),
     .size = sizeof(int),
     .lo = 0,
     .hi = ARB_MAX_GPUS,
     .def = "0",
     .help = "NUMA nodes (0: unknown), 0..count"},
    {.key = "count, memory",
     .type = SC_RULE,
     .check = rule_gpu_memory,
     .help = "a node with GPUs (count > 0) gives their memory"},
    {.key = "count, nvlinkDomains, pcieSwitches, numaNodes",
     .type = SC_RULE,
     .check = rule_gpu_domains,
     .help = "each of the domains is at most count"},
    {.key = NULL},
};
const sc_table_t spec_gpus_table = {"gpus", gpus_fields, NULL};

int spec_gpus_read(sx_t *x, const sval_t *v, unsigned ctx, spec_gpus_t *g)
{
    arb_err_t ierr;
    int rc;

    memset(g, 0, sizeof *g);
    if ((rc = sc_init(&spec_gpus_table, ctx, g, &ierr)) < 0)
        return sv_fail(x, v, rc, "%s", ierr.msg);
    return sc_walk(x, v, &spec_gpus_table, ctx, g);
}

#define GPU(field) offsetof(spec_gpu_t, field)

static const sc_field_t gpu_fields[] = {
    {.key = "model",
     .type = SC_STR,
     .off = GPU(model),
     .size = 64,
     .def = "",
     .def_doc = "\"\"",
     .help = "e.g. A100-80G",
     .ctx = SC_CTX_SCENARIO},
    {.key = "model",
     .type = SC_STR,
     .off = GPU(model),
     .size = SPEC_INV_NAME,
     .def = "",
     .def_doc = "\"\"",
     .help = "e.g. H100",
     .ctx = SC_CTX_INVENTORY},
    {.key = "memory",
     .type = SC_QTY,
     .off = GPU(mem_mib),
     .qty = ARB_QTY_MIB,
     .lo = 0,
     .hi = INT32_MAX,
     .range_msg = "more device memory than Arbiter can count",
     .flags = SC_REQUIRED,
     .help = "device memory, e.g. 80Gi",
     .ctx = SC_CTX_SCENARIO},
    {.key = "memory",
     .type = SC_QTY,
     .off = GPU(mem_mib),
     .qty = ARB_QTY_MIB,
     .lo = 1,
     .hi = INT32_MAX,
     .range_msg = "device memory must be more than 0 and at most 2Pi",
     .flags = SC_REQUIRED,
     .help = "device memory, e.g. 80Gi",
     .ctx = SC_CTX_INVENTORY},
    {.key = "nvlink",
     .type = SC_INT,
     .off = GPU(nvlink),
     .size = sizeof(int),
     .lo = -1,
     .hi = ARB_MAX_GPUS - 1,
     .def = "-1",
     .help = "its NVLink domain (-1: none)"},
    {.key = "pcie",
     .type = SC_INT,
     .off = GPU(pcie),
     .size = sizeof(int),
     .lo = -1,
     .hi = ARB_MAX_GPUS - 1,
     .def = "-1",
     .help = "its PCIe switch (-1: unknown)"},
    {.key = "numa",
     .type = SC_INT,
     .off = GPU(numa),
     .size = sizeof(int),
     .lo = -1,
     .hi = ARB_MAX_GPUS - 1,
     .def = "-1",
     .help = "its NUMA node (-1: unknown)",
     .ctx = SC_CTX_SCENARIO},
    {.key = "numa",
     .type = SC_INT,
     .off = GPU(numa),
     .size = sizeof(int),
     .lo = -1,
     .hi = 1023,
     .def = "-1",
     .help = "its NUMA node (-1: unknown), 0..1023",
     .ctx = SC_CTX_INVENTORY},
    {.key = "uuid",
     .type = SC_STR,
     .off = GPU(uuid),
     .size = SPEC_INV_UUID,
     .def = "",
     .def_doc = "none",
     .help = "the GPU's UUID (GPU-5f1c...), unique",
     .ctx = SC_CTX_INVENTORY},
    {.key = "pciBusId",
     .type = SC_STR,
     .off = GPU(pci_bus_id),
     .size = 64,
     .def = "",
     .def_doc = "none",
     .help = "its PCI bus id (\"0000:17:00.0\"), unique",
     .ctx = SC_CTX_INVENTORY},
    {.key = NULL},
};
const sc_table_t spec_gpu_table = {"GPU", gpu_fields, NULL};

/* ---- the node ------------------------------------------------------------------
 * A row per format where the formats differ (in what they hold, or in what
 * the reference says of it: an inventory's limits), one where they agree. */

const char *const spec_node_conditions[3] = {"Ready", "NotReady", "Draining"};

static const sc_field_t node_fields[] = {
    {.key = "name",
     .type = SC_STR,
     .flags = SC_REQUIRED,
     .help = "unique; with count: N the nodes are NAME-1 .. NAME-N",
     .ctx = SC_CTX_SCENARIO},
    {.key = "name",
     .type = SC_STR,
     .def_doc = "the host name",
     .help = "the node's name; --name wins",
     .ctx = SC_CTX_INVENTORY},
    {.key = "count",
     .type = SC_INT,
     .lo = 1,
     .hi = SPEC_MAX_NODES,
     .def = "1",
     .help = "copies of this node",
     .ctx = SC_CTX_SCENARIO},
    {.key = "cpu",
     .type = SC_INT,
     .lo = 1,
     .hi = SPEC_INV_MAX_CPUS,
     .def_doc = "/proc, sysfs",
     .help = "logical CPUs",
     .ctx = SC_CTX_INVENTORY},
    {.key = "memory",
     .type = SC_QTY,
     .qty = ARB_QTY_BYTES,
     .def_doc = "/proc/meminfo",
     .help = "the node's memory, more than 0",
     .ctx = SC_CTX_INVENTORY},
    {.key = "labels",
     .type = SC_CUSTOM,
     .type_doc = "map",
     .def_doc = "none",
     .help = "string map (at most 16 in an inventory); rack, block, zone are also the node's "
             "topology coordinates",
     .ctx = SC_CTX_SCENARIO | SC_CTX_INVENTORY},
    {.key = "taints",
     .type = SC_CUSTOM,
     .sub = &spec_taint_table,
     .flags = SC_LIST,
     .type_doc = "list",
     .def_doc = "none",
     .help = "jobs without a matching toleration keep off (at most 16 in an inventory; "
             "operators add theirs: arbiter taint)",
     .ctx = SC_CTX_SCENARIO | SC_CTX_INVENTORY},
    {.key = "datasets",
     .type = SC_CUSTOM,
     .type_doc = "list of strings",
     .def_doc = "none",
     .help = "datasets cached on the node, for data locality (at most 32 in an inventory)",
     .ctx = SC_CTX_SCENARIO | SC_CTX_INVENTORY},
    {.key = "condition",
     .type = SC_ENUM,
     .names = spec_node_conditions,
     .nnames = 3,
     .def = "Ready",
     .help = "the node's state",
     .ctx = SC_CTX_SCENARIO},
    {.key = "allocatable",
     .type = SC_CUSTOM,
     .type_doc = "resources",
     .def_doc = "all 0",
     .help = "cpu, memory and extended resources (rdma/hca: 4), which this declares; GPUs are "
             "declared under gpus. Without it a node has no CPU or memory to give",
     .ctx = SC_CTX_SCENARIO},
    {.key = "gpus",
     .type = SC_CUSTOM,
     .sub = &spec_gpus_table,
     .type_doc = "object or list",
     .def_doc = "no GPUs",
     .help = "the GPUs as a count with domains: {count: 8, model: H100, memory: 80Gi, "
             "nvlinkDomains: 1}"},
    {.key = "gpus",
     .type = SC_CUSTOM,
     .sub = &spec_gpu_table,
     .flags = SC_LIST,
     .type_doc = "list",
     .help = "or the GPUs one by one, with their coordinates",
     .ctx = SC_CTX_DOC},
    {.key = NULL},
};
const sc_table_t spec_node_table = {"node", node_fields, NULL};
