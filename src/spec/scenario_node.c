/*
 * scenario_node.c: a scenario's nodes: name and count:, labels, taints,
 * datasets, condition, allocatable and GPUs (a count with domains, or a
 * list of GPUs with their NVLink, PCIe and NUMA coordinates), built into
 * the loader's private cluster.
 */
#include <inttypes.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/scenario_int.h"
#include "spec/schema_node.h"

/* The node table (keys, reference) is spec_node_table, which an agent's
 * inventory shares (spec/schema_node.c). */

static int parse_gpus(sx_t *x, const sval_t *v, arb_node_t *n)
{
    int rc = sv_no_alias(x, v), count = 0;

    if (rc < 0 || sv_null(v))
        return rc;
    if (fy_node_is_sequence(v->n)) {
        if ((rc = sv_seq(x, v, ARB_MAX_GPUS, &count)) < 0)
            return rc;
        void *it = NULL;
        for (int i = 0; i < count; i++) {
            struct fy_node *item = fy_node_sequence_iterate(v->n, &it);
            spec_gpu_t gpu;
            arb_err_t ierr;
            sval_t g;
            bool is;

            sv_item(&g, v, item, i);
            if ((rc = sv_map(x, &g, &is)) < 0)
                return rc;
            if (!is)
                return sv_fail(x, &g, -EINVAL, "a GPU needs at least memory: (e.g. 80Gi)");
            memset(&gpu, 0, sizeof gpu);
            if ((rc = sc_init(&spec_gpu_table, SC_CTX_SCENARIO, &gpu, &ierr)) < 0)
                return sv_fail(x, &g, rc, "%s", ierr.msg);
            if ((rc = sc_walk(x, &g, &spec_gpu_table, SC_CTX_SCENARIO, &gpu)) < 0)
                return rc;
            rc = arb_node_add_gpu(x->c, n, gpu.model, (int32_t)gpu.mem_mib, gpu.numa, gpu.pcie,
                                  gpu.nvlink, x->err);
            if (rc < 0)
                return sv_prefix(x, &g, rc, true);
        }
        return 0;
    }
    spec_gpus_t gs;

    if ((rc = spec_gpus_read(x, v, SC_CTX_SCENARIO, &gs)) < 0)
        return rc;
    for (int i = 0; i < gs.count; i++) {
        /* Domains split the GPUs in equal runs: 8 GPUs, 2 domains -> 0000 1111. */
        int c3[3];
        for (int d = 0; d < 3; d++)
            c3[d] = gs.dom[d] ? i * gs.dom[d] / gs.count : -1;
        rc = arb_node_add_gpu(x->c, n, gs.model, (int32_t)gs.mem_mib, c3[2], c3[1], c3[0], x->err);
        if (rc < 0)
            return sv_prefix(x, v, rc, true);
    }
    return 0;
}

static int parse_taints(sx_t *x, const sval_t *v, arb_node_t *n)
{
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);
    void *it = NULL;

    for (int i = 0; rc == 0 && i < count; i++) {
        spec_taint_t t;
        sval_t tv;

        memset(&t, 0, sizeof t);
        sv_item(&tv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sc_walk(x, &tv, &spec_taint_table, SC_CTX_SCENARIO, &t)) < 0)
            return rc;
        if (arb_node_add_taint(x->c, n, t.key, t.val, (arb_taint_effect_t)t.effect) < 0)
            return sv_oom(x, &tv);
    }
    return rc;
}

/* One node (or instance k of a node with count:, named NAME-k). */
static int parse_node(sx_t *x, const sval_t *v, int k)
{
    static const arb_node_state_t cstate[] = {ARB_NODE_READY, ARB_NODE_NOT_READY,
                                              ARB_NODE_DRAINING};
    char name[SPEC_STR], full[SPEC_STR + 16], buf[SPEC_STR], val[SPEC_STR];
    arb_node_t *n;
    sval_t f, sv;
    rmap_t r;
    int rc, count, cond;
    bool is;

    if (!sv_get(v, "name", &f))
        return sv_fail(x, v, -EINVAL, "missing name:; give every node a unique name");
    if ((rc = sv_text(x, &f, name, sizeof name, false)) < 0)
        return rc;
    if (k > 0)
        snprintf(full, sizeof full, "%s-%d", name, k);
    else
        snprintf(full, sizeof full, "%s", name);
    if ((rc = arb_cluster_add_node(x->c, full, &n, x->err)) < 0)
        return sv_prefix(x, &f, rc == -EEXIST ? -EINVAL : rc, true);

    if (sv_get(v, "labels", &f)) {
        void *it = NULL;
        struct fy_node_pair *p;
        if ((rc = sv_map(x, &f, &is)) < 0)
            return rc;
        while (is && (p = fy_node_mapping_iterate(f.n, &it))) {
            size_t len = 0;
            const char *lk = sv_key_text(fy_node_pair_key(p), &len);
            sv_pair(&sv, &f, p);
            if (!lk || len >= sizeof buf) {
                sv.n = fy_node_pair_key(p) ? fy_node_pair_key(p) : sv.n;
                return sv_fail(x, &sv, -EINVAL, "label keys are plain names");
            }
            memcpy(buf, lk, len);
            buf[len] = '\0';
            if ((rc = sv_text(x, &sv, val, sizeof val, true)) < 0)
                return rc;
            if (arb_node_set_label(x->c, n, buf, val) < 0)
                return sv_oom(x, &sv);
        }
    }
    if (sv_get(v, "taints", &f) && (rc = parse_taints(x, &f, n)) < 0)
        return rc;
    if (sv_get(v, "datasets", &f)) {
        void *it = NULL;
        if ((rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
            return rc;
        for (int i = 0; i < count; i++) {
            sv_item(&sv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = sv_text(x, &sv, buf, sizeof buf, false)) < 0)
                return rc;
            if (arb_node_add_dataset(x->c, n, buf) < 0)
                return sv_oom(x, &sv);
        }
    }
    if (sv_get(v, "condition", &f)) {
        if ((rc = sv_enum(x, &f, spec_node_conditions, 3, &cond)) < 0)
            return rc;
        if (cstate[cond] != n->state &&
            (rc = arb_node_transition(x->c, n, cstate[cond], x->err)) < 0)
            return sv_prefix(x, &f, rc, true);
    }
    if (sv_get(v, "allocatable", &f)) {
        if ((rc = scn_rmap(x, &f, RM_ALLOCATABLE, &r)) < 0)
            return rc;
        n->cap.cpu_milli = r.cpu;
        n->cap.mem_bytes = r.mem;
        memcpy(n->cap.ext, r.ext, sizeof n->cap.ext);
        arb_node_touch(x->c, n);
    }
    if (sv_get(v, "gpus", &f) && (rc = parse_gpus(x, &f, n)) < 0)
        return rc;
    return 0;
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
