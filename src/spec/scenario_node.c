/*
 * scenario_node.c: a scenario's nodes: name and count:, labels, taints,
 * datasets, condition, allocatable and GPUs (a count with domains, or a
 * list of GPUs with their NVLink, PCIe and NUMA coordinates), built into
 * the loader's private cluster. The fields are read by the node table's
 * rows (spec_node_read); this file is where their values go.
 */
#include <stdio.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/scenario_int.h"
#include "spec/schema_node.h"

_Static_assert(SPEC_MAX_NODE_LIST == SPEC_MAX_LIST, "a node's lists as long as a job's");

/* A node is read by the rows of spec_node_table (spec/schema_node.c, which
 * an agent's inventory shares); these are the scenario's sinks, building
 * each value into the cluster's node. */

typedef struct scn_node_rd {
    int k;         /* the copy (NAME-k), 0: the only one */
    arb_node_t *n; /* made by name: */
} scn_node_rd_t;

static arb_node_t *node_of(const spec_node_rd_t *rd)
{
    return ((const scn_node_rd_t *)rd->dst)->n;
}

static int node_named(sx_t *x, const sval_t *v, spec_node_rd_t *rd)
{
    scn_node_rd_t *s = rd->dst;
    char full[SPEC_STR + 16];
    int rc;

    if (s->k > 0)
        snprintf(full, sizeof full, "%s-%d", rd->name, s->k);
    else
        snprintf(full, sizeof full, "%s", rd->name);
    if ((rc = arb_cluster_add_node(x->c, full, &s->n, x->err)) < 0)
        return sv_prefix(x, v, rc == -EEXIST ? -EINVAL : rc, true);
    return 0;
}

static int node_label(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const char *key,
                      const char *val)
{
    return arb_node_set_label(x->c, node_of(rd), key, val) < 0 ? sv_oom(x, v) : 0;
}

static int node_taint(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_taint_t *t)
{
    if (arb_node_add_taint(x->c, node_of(rd), t->key, t->val, (arb_taint_effect_t)t->effect) < 0)
        return sv_oom(x, v);
    return 0;
}

static int node_dataset(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const char *name)
{
    return arb_node_add_dataset(x->c, node_of(rd), name) < 0 ? sv_oom(x, v) : 0;
}

static int node_condition(sx_t *x, const sval_t *v, spec_node_rd_t *rd)
{
    static const arb_node_state_t cstate[] = {ARB_NODE_READY, ARB_NODE_NOT_READY,
                                              ARB_NODE_DRAINING};
    arb_node_t *n = node_of(rd);
    int rc;

    if (cstate[rd->condition] != n->state &&
        (rc = arb_node_transition(x->c, n, cstate[rd->condition], x->err)) < 0)
        return sv_prefix(x, v, rc, true);
    return 0;
}

static int node_allocatable(sx_t *x, const sval_t *v, spec_node_rd_t *rd)
{
    arb_node_t *n = node_of(rd);
    rmap_t r;
    int rc;

    if ((rc = scn_rmap(x, v, RM_ALLOCATABLE, &r)) < 0)
        return rc;
    n->cap.cpu_milli = r.cpu;
    n->cap.mem_bytes = r.mem;
    memcpy(n->cap.ext, r.ext, sizeof n->cap.ext);
    arb_node_touch(x->c, n);
    return 0;
}

static int node_gpu(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_gpu_t *g)
{
    int rc = arb_node_add_gpu(x->c, node_of(rd), g->model, (int32_t)g->mem_mib, g->numa, g->pcie,
                              g->nvlink, x->err);

    return rc < 0 ? sv_prefix(x, v, rc, true) : 0;
}

static const spec_node_ops_t scn_node_ops = {
    .named = node_named,
    .label = node_label,
    .taint = node_taint,
    .dataset = node_dataset,
    .condition = node_condition,
    .allocatable = node_allocatable,
    .gpu = node_gpu,
};

/* One node (or instance k of a node with count:, named NAME-k). */
static int parse_node(sx_t *x, const sval_t *v, int k)
{
    scn_node_rd_t s = {.k = k};
    spec_node_rd_t rd;

    memset(&rd, 0, sizeof rd);
    rd.ops = &scn_node_ops;
    rd.dst = &s;
    rd.ctx = SC_CTX_SCENARIO;
    return spec_node_read(x, v, &rd);
}

/* nodes: (at least one), each with its count: copies. */
int scn_nodes(sx_t *x, const sval_t *v)
{
    int count, rc = sv_seq(x, v, SPEC_MAX_NODES, &count), total = 0;
    void *it = NULL;

    if (rc < 0)
        return rc;
    if (count == 0)
        return sv_fail(x, v, -EINVAL, "a scenario needs at least one node");
    for (int i = 0; i < count; i++) {
        sval_t nv;
        int copies;
        bool is;

        sv_item(&nv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &nv, &is)) < 0)
            return rc;
        if (!is)
            return sv_fail(x, &nv, -EINVAL, "a node needs at least a name:");
        if ((rc = sc_check_keys(x, &nv, &spec_node_table, SC_CTX_SCENARIO)) < 0 ||
            (rc = scn_count(x, &nv, SPEC_MAX_NODES - total, &copies)) < 0 ||
            (rc = scn_charge(x, &nv, copies)) < 0)
            return rc;
        for (int k = 1; k <= copies; k++)
            if ((rc = parse_node(x, &nv, copies > 1 ? k : 0)) < 0)
                return rc;
        total += copies;
    }
    return 0;
}
