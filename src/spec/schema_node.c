/*
 * schema_node.c: the tables of schema_node.h. The GPUs are read by hand in
 * each format (their domains depend on the count, and the inventory's
 * rules for memory and ids are its own), with these tables checking the
 * keys and making the reference; a taint is read through the walker.
 */
#include <stddef.h>

#include "spec/schema_node.h"

const char *const spec_taint_effects[4] = {[ARB_TAINT_NO_SCHEDULE] = "NoSchedule",
                                           [ARB_TAINT_PREFER_NO_SCHEDULE] = "PreferNoSchedule",
                                           [ARB_TAINT_NO_EXECUTE] = "NoExecute"};

#define TAINT(field) offsetof(spec_taint_t, field)
#define EFFECTS "NoSchedule, PreferNoSchedule or NoExecute"

static const sc_field_t taint_fields[] = {
    {.key = "key", .type = SC_STR, .off = TAINT(key), .size = SPEC_STR, .flags = SC_REQUIRED,
     .help = "the taint's key", .ctx = SC_CTX_SCENARIO},
    {.key = "key", .type = SC_STR, .off = TAINT(key), .size = SPEC_INV_NAME,
     .flags = SC_REQUIRED, .help = "the taint's key", .ctx = SC_CTX_INVENTORY},
    {.key = "value", .type = SC_STR, .off = TAINT(val), .size = SPEC_STR, .flags = SC_EMPTY_OK,
     .def_doc = "\"\"", .help = "its value", .ctx = SC_CTX_SCENARIO},
    {.key = "value", .type = SC_STR, .off = TAINT(val), .size = SPEC_INV_NAME,
     .flags = SC_EMPTY_OK, .def_doc = "\"\"", .help = "its value", .ctx = SC_CTX_INVENTORY},
    {.key = "effect", .type = SC_ENUM, .off = TAINT(effect), .names = spec_taint_effects,
     .nnames = 4, .flags = SC_REQUIRED, .help = EFFECTS},
    {.key = NULL},
};
const sc_table_t spec_taint_table = {"taint", taint_fields, NULL};

static const sc_field_t gpus_fields[] = {
    {.key = "count", .type = SC_INT, .lo = 0, .hi = ARB_MAX_GPUS, .flags = SC_REQUIRED,
     .help = "GPUs in the node, 0..16"},
    {.key = "model", .type = SC_STR, .def_doc = "\"\"", .help = "e.g. A100-80G"},
    {.key = "memory", .type = SC_QTY, .qty = ARB_QTY_MIB,
     .help = "device memory per GPU, e.g. 80Gi (required when count > 0)"},
    {.key = "nvlinkDomains", .type = SC_INT, .def = "1",
     .help = "NVLink domains the GPUs split into in equal runs in index order (0: none), "
             "0..count: 8 GPUs in 2 are domains 0,0,0,0,1,1,1,1"},
    {.key = "pcieSwitches", .type = SC_INT, .def = "0", .help = "PCIe switches (0: unknown)"},
    {.key = "numaNodes", .type = SC_INT, .def = "0", .help = "NUMA nodes (0: unknown)"},
    {.key = NULL},
};
const sc_table_t spec_gpus_table = {"gpus", gpus_fields, NULL};

static const sc_field_t gpu_fields[] = {
    {.key = "model", .type = SC_STR, .def_doc = "\"\"", .help = "e.g. A100-80G"},
    {.key = "memory", .type = SC_QTY, .qty = ARB_QTY_MIB, .flags = SC_REQUIRED,
     .help = "device memory, e.g. 80Gi"},
    {.key = "nvlink", .type = SC_INT, .lo = -1, .hi = ARB_MAX_GPUS - 1, .def = "-1",
     .help = "its NVLink domain (-1: none)"},
    {.key = "pcie", .type = SC_INT, .lo = -1, .hi = ARB_MAX_GPUS - 1, .def = "-1",
     .help = "its PCIe switch (-1: unknown)"},
    {.key = "numa", .type = SC_INT, .lo = -1, .hi = ARB_MAX_GPUS - 1, .def = "-1",
     .help = "its NUMA node (-1: unknown)", .ctx = SC_CTX_SCENARIO},
    {.key = "numa", .type = SC_INT, .lo = -1, .hi = 1023, .def = "-1",
     .help = "its NUMA node (-1: unknown), 0..1023", .ctx = SC_CTX_INVENTORY},
    {.key = "uuid", .type = SC_STR, .help = "the GPU's UUID (GPU-5f1c...), unique",
     .ctx = SC_CTX_INVENTORY},
    {.key = "pciBusId", .type = SC_STR, .help = "its PCI bus id (\"0000:17:00.0\"), unique",
     .ctx = SC_CTX_INVENTORY},
    {.key = NULL},
};
const sc_table_t spec_gpu_table = {"GPU", gpu_fields, NULL};
