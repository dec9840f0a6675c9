/*
 * schema_node.c: the tables of schema_node.h and the readers of their
 * rows. A node's fields are read here, once for both formats, each with
 * its row's limits in the format (sc_find: a list's most items, a name's
 * bytes); what the format keeps goes to its sink (spec_node_ops_t), so a
 * scenario builds a cluster's node and the agent its inventory from the
 * same reading, messages included.
 */
#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <libfyaml.h>

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
 * the reference says of it: an inventory's limits), one where they agree.
 * Each reader finds its own row in the format (sc_find) for its limits. */

const char *const spec_node_conditions[3] = {"Ready", "NotReady", "Draining"};

static const sc_field_t *own_row(const spec_node_rd_t *rd, const char *key)
{
    return sc_find(&spec_node_table, key, rd->ctx);
}

/* name: read, the format may make its node (and refuse a name in use). */
static int check_named(sx_t *x, const sval_t *v, void *obj)
{
    spec_node_rd_t *rd = obj;

    return rd->ops->named ? rd->ops->named(x, v, rd) : 0;
}

static int check_condition(sx_t *x, const sval_t *v, void *obj)
{
    spec_node_rd_t *rd = obj;

    return rd->ops->condition ? rd->ops->condition(x, v, rd) : 0;
}

/* labels: {key: value, ...}: keys plain names of at most size - 1 bytes. */
static int set_labels(sx_t *x, const sval_t *v, void *obj)
{
    spec_node_rd_t *rd = obj;
    const sc_field_t *f = own_row(rd, "labels");
    char key[SPEC_STR], val[SPEC_STR];
    size_t size = f->size < sizeof key ? f->size : sizeof key;
    struct fy_node_pair *p;
    void *it = NULL;
    bool is;
    int rc = sv_map(x, v, &is);

    if (rc < 0 || !is)
        return rc;
    while ((p = fy_node_mapping_iterate(v->n, &it))) {
        size_t klen = 0;
        struct fy_node *kn = fy_node_pair_key(p);
        const char *k = sv_key_text(kn, &klen);
        sval_t lv;

        sv_pair(&lv, v, p);
        if (f->hi && rd->nlabels == f->hi)
            return sv_fail(x, &lv, -EINVAL, "more than %d labels", (int)f->hi);
        if (!k) {
            if (kn && sv_node_mark(kn, 0)) /* a key with a place of its own: there */
                lv.n = kn;
            return sv_fail(x, &lv, -EINVAL, "a label key must be a plain string");
        }
        if (klen >= size)
            return sv_fail(x, &lv, -EINVAL, "label key longer than %zu characters", size - 1);
        for (size_t i = 0; i < klen; i++)
            if (iscntrl((unsigned char)k[i]))
                return sv_fail(x, &lv, -EINVAL, "label key with a control character");
        memcpy(key, k, klen);
        key[klen] = '\0';
        if ((rc = sv_text(x, &lv, val, size, true)) < 0)
            return rc;
        if (rd->ops->label && (rc = rd->ops->label(x, &lv, rd, key, val)) < 0)
            return rc;
        rd->nlabels++;
    }
    return 0;
}

/* taints: [{key, value, effect}, ...] through the taint table. */
static int set_taints(sx_t *x, const sval_t *v, void *obj)
{
    spec_node_rd_t *rd = obj;
    const sc_field_t *f = own_row(rd, "taints");
    int count, rc = sv_seq(x, v, f->hi ? (int)f->hi : INT_MAX, &count);
    void *it = NULL;

    for (int i = 0; rc == 0 && i < count; i++) {
        spec_taint_t t;
        sval_t tv;
        bool is;

        sv_item(&tv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &tv, &is)) < 0)
            return rc;
        if (!is)
            return sv_fail(x, &tv, -EINVAL, "a taint needs key: and effect:");
        memset(&t, 0, sizeof t);
        if ((rc = sc_walk(x, &tv, &spec_taint_table, rd->ctx, &t)) < 0)
            return rc;
        if (rd->ops->taint && (rc = rd->ops->taint(x, &tv, rd, &t)) < 0)
            return rc;
        rd->ntaints++;
    }
    return rc;
}

/* datasets: [name, ...] */
static int set_datasets(sx_t *x, const sval_t *v, void *obj)
{
    spec_node_rd_t *rd = obj;
    const sc_field_t *f = own_row(rd, "datasets");
    char name[SPEC_STR];
    size_t size = f->size < sizeof name ? f->size : sizeof name;
    int count, rc = sv_seq(x, v, f->hi ? (int)f->hi : INT_MAX, &count);
    void *it = NULL;

    for (int i = 0; rc == 0 && i < count; i++) {
        sval_t dv;

        sv_item(&dv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_text(x, &dv, name, size, false)) < 0)
            return rc;
        if (rd->ops->dataset && (rc = rd->ops->dataset(x, &dv, rd, name)) < 0)
            return rc;
        rd->ndatasets++;
    }
    return rc;
}

static int set_allocatable(sx_t *x, const sval_t *v, void *obj)
{
    spec_node_rd_t *rd = obj;

    if (!rd->ops->allocatable)
        return sv_fail(x, v, -EINVAL, "allocatable: is not read in this format");
    return rd->ops->allocatable(x, v, rd);
}

static int put_gpu(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_gpu_t *g)
{
    int rc = rd->ops->gpu ? rd->ops->gpu(x, v, rd, g) : 0;

    if (rc == 0)
        rd->ngpus++;
    return rc;
}

/* gpus: a list of GPUs through spec_gpu_table, or a count with domains
 * through spec_gpus_table, whose GPUs get the coordinates of their runs. */
static int set_gpus(sx_t *x, const sval_t *v, void *obj)
{
    spec_node_rd_t *rd = obj;
    int rc = sv_no_alias(x, v), count;
    spec_gpu_t g;
    arb_err_t ierr;

    if (rc < 0 || sv_null(v))
        return rc;
    if (fy_node_is_sequence(v->n)) {
        void *it = NULL;
        if ((rc = sv_seq(x, v, ARB_MAX_GPUS, &count)) < 0)
            return rc;
        for (int i = 0; i < count; i++) {
            sval_t gv;
            bool is;

            sv_item(&gv, v, fy_node_sequence_iterate(v->n, &it), i);
            if ((rc = sv_map(x, &gv, &is)) < 0)
                return rc;
            if (!is)
                return sv_fail(x, &gv, -EINVAL, "a GPU needs at least memory: (e.g. 80Gi)");
            memset(&g, 0, sizeof g);
            if ((rc = sc_init(&spec_gpu_table, rd->ctx, &g, &ierr)) < 0)
                return sv_fail(x, &gv, rc, "%s", ierr.msg);
            if ((rc = sc_walk(x, &gv, &spec_gpu_table, rd->ctx, &g)) < 0 ||
                (rc = put_gpu(x, &gv, rd, &g)) < 0)
                return rc;
        }
        return 0;
    }
    if (!fy_node_is_mapping(v->n))
        return sv_fail(x, v, -EINVAL,
                       "expected a list of GPUs or {count: N, model: M, memory: 80Gi}, got %s",
                       sv_kind(v->n));
    spec_gpus_t gs;

    if ((rc = spec_gpus_read(x, v, rd->ctx, &gs)) < 0)
        return rc;
    for (int i = 0; i < gs.count; i++) {
        /* Domains split the GPUs in equal runs: 8 GPUs, 2 domains -> 0000 1111. */
        memset(&g, 0, sizeof g);
        snprintf(g.model, sizeof g.model, "%s", gs.model);
        g.mem_mib = gs.mem_mib;
        g.nvlink = gs.dom[0] ? i * gs.dom[0] / gs.count : -1;
        g.pcie = gs.dom[1] ? i * gs.dom[1] / gs.count : -1;
        g.numa = gs.dom[2] ? i * gs.dom[2] / gs.count : -1;
        if ((rc = put_gpu(x, v, rd, &g)) < 0)
            return rc;
    }
    return 0;
}

#define RD(field) offsetof(spec_node_rd_t, field)
#define LABELS_HELP "rack, block, zone are also the node's topology coordinates"
#define TAINTS_HELP "jobs without a matching toleration keep off"
#define DATASETS_HELP "datasets cached on the node, for data locality"

static const sc_field_t node_fields[] = {
    {.key = "name",
     .type = SC_STR,
     .off = RD(name),
     .size = SPEC_STR,
     .check = check_named,
     .flags = SC_REQUIRED,
     .missing = "missing name:; give every node a unique name",
     .help = "unique; with count: N the nodes are NAME-1 .. NAME-N",
     .ctx = SC_CTX_SCENARIO},
    {.key = "name",
     .type = SC_STR,
     .off = RD(name),
     .size = SPEC_INV_NAME,
     .check = check_named,
     .def_doc = "the host name",
     .help = "the node's name; --name wins",
     .ctx = SC_CTX_INVENTORY},
    {.key = "count",
     .type = SC_INT,
     .flags = SC_HAND,
     .lo = 1,
     .hi = SPEC_MAX_NODES,
     .def = "1",
     .help = "copies of this node",
     .ctx = SC_CTX_SCENARIO},
    {.key = "cpu",
     .type = SC_INT,
     .off = RD(cpus),
     .size = sizeof(int),
     .lo = 1,
     .hi = SPEC_INV_MAX_CPUS,
     .def_doc = "/proc, sysfs",
     .help = "logical CPUs",
     .ctx = SC_CTX_INVENTORY},
    {.key = "memory",
     .type = SC_QTY,
     .off = RD(mem_bytes),
     .qty = ARB_QTY_BYTES,
     .lo = 1,
     .hi = INT64_MAX,
     .range_msg = "memory must be more than 0",
     .def_doc = "/proc/meminfo",
     .help = "the node's memory, more than 0",
     .ctx = SC_CTX_INVENTORY},
    {.key = "labels",
     .type = SC_CUSTOM,
     .set = set_labels,
     .flags = SC_WHOLE,
     .size = SPEC_STR,
     .type_doc = "map",
     .def_doc = "none",
     .help = "string map; " LABELS_HELP,
     .ctx = SC_CTX_SCENARIO},
    {.key = "labels",
     .type = SC_CUSTOM,
     .set = set_labels,
     .flags = SC_WHOLE,
     .size = SPEC_INV_NAME,
     .hi = SPEC_INV_MAX_LABELS,
     .type_doc = "map",
     .def_doc = "none",
     .help = "string map, at most 16; " LABELS_HELP,
     .ctx = SC_CTX_INVENTORY},
    {.key = "taints",
     .type = SC_CUSTOM,
     .sub = &spec_taint_table,
     .set = set_taints,
     .flags = SC_LIST | SC_WHOLE,
     .hi = SPEC_MAX_NODE_LIST,
     .type_doc = "list",
     .def_doc = "none",
     .help = TAINTS_HELP " (operators add theirs: arbiter taint)",
     .ctx = SC_CTX_SCENARIO},
    {.key = "taints",
     .type = SC_CUSTOM,
     .sub = &spec_taint_table,
     .set = set_taints,
     .flags = SC_LIST | SC_WHOLE,
     .hi = SPEC_INV_MAX_TAINTS,
     .type_doc = "list",
     .def_doc = "none",
     .help = TAINTS_HELP ", at most 16 (operators add theirs: arbiter taint)",
     .ctx = SC_CTX_INVENTORY},
    {.key = "datasets",
     .type = SC_CUSTOM,
     .set = set_datasets,
     .flags = SC_WHOLE,
     .size = SPEC_STR,
     .hi = SPEC_MAX_NODE_LIST,
     .type_doc = "list of strings",
     .def_doc = "none",
     .help = DATASETS_HELP,
     .ctx = SC_CTX_SCENARIO},
    {.key = "datasets",
     .type = SC_CUSTOM,
     .set = set_datasets,
     .flags = SC_WHOLE,
     .size = SPEC_INV_NAME,
     .hi = SPEC_INV_MAX_DATASETS,
     .type_doc = "list of strings",
     .def_doc = "none",
     .help = DATASETS_HELP ", at most 32",
     .ctx = SC_CTX_INVENTORY},
    {.key = "condition",
     .type = SC_ENUM,
     .off = RD(condition),
     .names = spec_node_conditions,
     .nnames = 3,
     .check = check_condition,
     .def = "Ready",
     .help = "the node's state",
     .ctx = SC_CTX_SCENARIO},
    {.key = "allocatable",
     .type = SC_CUSTOM,
     .set = set_allocatable,
     .flags = SC_WHOLE,
     .type_doc = "resources",
     .def_doc = "all 0",
     .help = "cpu, memory and extended resources (rdma/hca: 4), which this declares; GPUs are "
             "declared under gpus. Without it a node has no CPU or memory to give",
     .ctx = SC_CTX_SCENARIO},
    {.key = "gpus",
     .type = SC_CUSTOM,
     .sub = &spec_gpus_table,
     .set = set_gpus,
     .flags = SC_WHOLE,
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

int spec_node_read(sx_t *x, const sval_t *v, spec_node_rd_t *rd)
{
    return sc_walk_fields(x, v, &spec_node_table, rd->ctx, rd);
}
