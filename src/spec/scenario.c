/*
 * scenario.c: the YAML loader behind scenario.h. It walks a libfyaml
 * document tree by hand, with one small function per kind of block (a
 * resource map, a node, a job, a queue), and turns each into core's model.
 *
 * Three rules shape the code:
 *   - Every message names FILE:LINE:COLUMN and the field path. A value that
 *     has no position of its own (an empty value, an empty mapping) is
 *     reported at the key it hangs from, so each value travels with its key
 *     and its path (sval_t).
 *   - Unknown fields, wrong types and aliases are errors, never ignored.
 *   - Everything is built into fresh objects (a private cluster, a new job)
 *     that are freed on failure; the caller's objects change only on success.
 *
 * The value layer (positions, messages, typed scalars, documents) is
 * sval.c; this file is the format: which fields exist and what they mean.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/scenario.h"
#include "spec/sval.h"

#define SPEC_MAX_LIST 4096 /* items in one list of a job (terms, values...) */
#define SPEC_MAX_GROUPS 256

/* ---- tables ------------------------------------------------------------- */

typedef struct prio_class {
    const char *name;
    int32_t prio;
} prio_class_t;

static const prio_class_t prio_classes[] = {
    {"best-effort", 0}, {"low", 100}, {"normal", 500}, {"high", 1000}, {"critical", 10000},
};

static const char *const root_keys[] = {"scheduler", "queues", "nodes", "jobs", NULL};
static const char *const sched_keys[] = {"policy",     "queue",      "backfill",
                                         "preemption", "starvation", NULL};
static const char *const queue_keys[] = {"name",    "cohort",         "weight",
                                         "nominal", "borrowingLimit", NULL};
static const char *const node_keys[] = {"name",      "count",       "labels", "taints", "datasets",
                                        "condition", "allocatable", "gpus",   NULL};
static const char *const gpus_keys[] = {"count",        "model",     "memory", "nvlinkDomains",
                                        "pcieSwitches", "numaNodes", NULL};
static const char *const gpu_keys[] = {"model", "memory", "nvlink", "pcie", "numa", NULL};
static const char *const taint_keys[] = {"key", "value", "effect", NULL};
/* A job in a scenario; a lone job spec has the same fields but count. */
static const char *const job_keys[] = {"name",
                                       "queue",
                                       "priority",
                                       "priorityClassName",
                                       "preemptible",
                                       "gangMin",
                                       "timeLimit",
                                       "dataset",
                                       "nodeSelector",
                                       "affinity",
                                       "tolerations",
                                       "gpuModels",
                                       "groups",
                                       "replicas",
                                       "resources",
                                       "topology",
                                       "count",
                                       "terminationGracePeriodSeconds",
                                       "gpuSharing",
                                       "exclusive",
                                       NULL};
static const char *const elastic_keys[] = {"min", "max", NULL};
static const char *const group_keys[] = {"name", "replicas", "resources", "topology", NULL};
static const char *const resources_keys[] = {"requests", "limits", NULL};
static const char *const topo_keys[] = {"level", "mode", NULL};
static const char *const affinity_keys[] = {"required", "preferred", NULL};
static const char *const pref_keys[] = {"weight", "match", NULL};
static const char *const expr_keys[] = {"key", "operator", "values", NULL};
static const char *const tol_keys[] = {"key", "operator", "value", "effect", NULL};

static const char *const op_names[] = {
    [ARB_OP_IN] = "In",         [ARB_OP_NOT_IN] = "NotIn",
    [ARB_OP_EXISTS] = "Exists", [ARB_OP_DOES_NOT_EXIST] = "DoesNotExist",
    [ARB_OP_GT] = "Gt",         [ARB_OP_LT] = "Lt",
};

/* Resource names, as in Kubernetes (plus Arbiter's GPU share). */
#define RES_GPU "nvidia.com/gpu"
#define RES_GPU_MEM "nvidia.com/gpu-memory"
#define RES_GPU_SHARE "arbiter.io/gpu-share"
#define RES_EPH "ephemeral-storage"
#define RES_LIST                                                                                   \
    "cpu, memory, " RES_EPH ", " RES_GPU ", " RES_GPU_MEM ", " RES_GPU_SHARE                       \
    ", or an extended resource with a domain (rdma/hca)"

/* Intern s into the cluster's table. */
static int intern(sx_t *x, const sval_t *v, const char *s, uint32_t *id)
{
    *id = arb_intern(&x->c->strs, s);
    return *id ? 0 : sv_oom(x, v);
}

/* ---- resource maps -------------------------------------------------------- */

typedef enum rmode {
    RM_REQUEST,     /* a job's requests or limits */
    RM_ALLOCATABLE, /* a node's allocatable (declares extended names) */
    RM_QUOTA,       /* a queue's nominal or borrowing limit */
} rmode_t;

enum { RF_GPU, RF_SHARE, RF_GPUMEM, RF_CPU, RF_MEM, RF_EXT0 };

typedef struct rmap {
    unsigned has; /* bit RF_* (extended i: RF_EXT0 + i) */
    int64_t gpu, share, gpumem, cpu, mem;
    int64_t eph; /* ephemeral-storage (requests only: recorded, not placed on) */
    int64_t ext[ARB_MAX_EXT];
} rmap_t;

static int ext_names_list(const arb_cluster_t *c, char *buf, size_t n)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < c->ext.n && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", c->ext.name[i]);
    return c->ext.n;
}

/* nvidia.com/gpu in a request: whole GPUs; a fraction points at the share. */
static int parse_gpu_count(sx_t *x, const sval_t *v, int64_t *out)
{
    char buf[128];
    int64_t milli;
    int rc = sv_text(x, v, buf, sizeof buf, false);

    if (rc < 0)
        return rc;
    if (arb_qty_parse(buf, ARB_QTY_MILLI, v->path, &milli, NULL) == 0 && milli % 1000)
        return sv_fail(x, v, -EINVAL,
                       "'%s' is not a whole number of GPUs; for a share of one GPU use "
                       "%s: %" PRId64 "m (and %s for its memory)",
                       buf, RES_GPU_SHARE, milli, RES_GPU_MEM);
    rc = arb_qty_parse(buf, ARB_QTY_COUNT, v->path, out, x->err);
    return rc < 0 ? sv_prefix(x, v, rc, false) : 0;
}

static int parse_rmap(sx_t *x, const sval_t *v, rmode_t mode, rmap_t *r)
{
    void *it = NULL;
    struct fy_node_pair *p;
    bool is;
    int rc = sv_map(x, v, &is);

    memset(r, 0, sizeof *r);
    if (rc < 0 || !is)
        return rc;
    while ((p = fy_node_mapping_iterate(v->n, &it))) {
        size_t len = 0;
        const char *k = sv_key_text(fy_node_pair_key(p), &len);
        char name[ARB_EXT_NAME_MAX + 8], shown[64];
        const char *const all[] = {"cpu",         "memory", RES_GPU, RES_GPU_MEM,
                                   RES_GPU_SHARE, RES_EPH,  NULL};
        sval_t f;

        sv_pair(&f, v, p);
        if (!k || len >= sizeof name) {
            f.n = fy_node_pair_key(p) ? fy_node_pair_key(p) : f.n;
            return sv_fail(x, &f, -EINVAL,
                           "resource names are plain names of at most %d "
                           "characters",
                           ARB_EXT_NAME_MAX - 1);
        }
        memcpy(name, k, len);
        name[len] = '\0';
        sv_show(shown, sizeof shown, k, len);
        if (!strcmp(name, RES_GPU)) {
            if (mode == RM_ALLOCATABLE)
                return sv_fail(x, &f, -EINVAL,
                               "declare a node's GPUs under gpus: {count: 8, model: A100-80G, "
                               "memory: 80Gi}, not in allocatable");
            rc = mode == RM_REQUEST ? parse_gpu_count(x, &f, &r->gpu)
                                    : sv_qty(x, &f, ARB_QTY_COUNT, &r->gpu);
            if (rc < 0)
                return rc;
            if (mode == RM_REQUEST && r->gpu > ARB_MAX_GPUS)
                return sv_fail(x, &f, -EINVAL,
                               "%" PRId64 " GPUs per task; a task gets at most %d GPUs of one "
                               "node (ask for more replicas instead)",
                               r->gpu, ARB_MAX_GPUS);
            if (r->gpu > INT64_MAX / 1000)
                return sv_fail(x, &f, -ERANGE, "%" PRId64 " GPUs is too many", r->gpu);
            r->has |= 1u << RF_GPU;
        } else if (!strcmp(name, RES_GPU_SHARE)) {
            if (mode != RM_REQUEST)
                return sv_fail(x, &f, -EINVAL,
                               "%s is a per-task request; give whole GPUs (%s) here", RES_GPU_SHARE,
                               RES_GPU);
            if ((rc = sv_qty(x, &f, ARB_QTY_MILLI, &r->share)) < 0)
                return rc;
            if (r->share < 1 || r->share > 999)
                return sv_fail(x, &f, -EINVAL,
                               "a GPU share must be 1m..999m of one GPU (e.g. 500m or 0.5); "
                               "use %s for whole GPUs",
                               RES_GPU);
            r->has |= 1u << RF_SHARE;
        } else if (!strcmp(name, RES_GPU_MEM)) {
            if (mode == RM_ALLOCATABLE)
                return sv_fail(x, &f, -EINVAL,
                               "declare GPU memory under gpus: {memory: 80Gi}, not in "
                               "allocatable");
            if ((rc = sv_qty(x, &f, ARB_QTY_MIB, &r->gpumem)) < 0)
                return rc;
            if (mode == RM_REQUEST && r->gpumem > INT32_MAX)
                return sv_fail(x, &f, -ERANGE, "more device memory than any GPU has");
            r->has |= 1u << RF_GPUMEM;
        } else if (!strcmp(name, "cpu")) {
            if ((rc = sv_qty(x, &f, ARB_QTY_MILLI, &r->cpu)) < 0)
                return rc;
            r->has |= 1u << RF_CPU;
        } else if (!strcmp(name, "memory")) {
            if ((rc = sv_qty(x, &f, ARB_QTY_BYTES, &r->mem)) < 0)
                return rc;
            r->has |= 1u << RF_MEM;
        } else if (!strcmp(name, RES_EPH)) {
            if (mode != RM_REQUEST)
                return sv_fail(x, &f, -EINVAL,
                               "%s is not scheduled on (nodes report no scratch disk); leave it "
                               "out here",
                               RES_EPH);
            if ((rc = sv_qty(x, &f, ARB_QTY_BYTES, &r->eph)) < 0)
                return rc;
        } else if (strchr(name, '/') && sv_suggest(k, len, all) &&
                   strcmp(sv_suggest(k, len, all), name)) {
            f.n = fy_node_pair_key(p);
            return sv_fail(x, &f, -EINVAL, "unknown resource '%s'; did you mean '%s'?", shown,
                           sv_suggest(k, len, all));
        } else if (strchr(name, '/')) {
            char offered[256];
            if (len >= ARB_EXT_NAME_MAX)
                return sv_fail(x, &f, -EINVAL, "resource name '%s' is longer than %d characters",
                               shown, ARB_EXT_NAME_MAX - 1);
            int i = arb_extnames_index(&x->c->ext, name, mode == RM_ALLOCATABLE);
            if (i == -ENOSPC)
                return sv_fail(x, &f, -EINVAL, "more than %d extended resources in one cluster",
                               ARB_MAX_EXT);
            if (i < 0) {
                f.n = fy_node_pair_key(p);
                if (ext_names_list(x->c, offered, sizeof offered))
                    return sv_fail(x, &f, -EINVAL,
                                   "no node offers extended resource '%s'; nodes offer: %s", shown,
                                   offered);
                return sv_fail(x, &f, -EINVAL,
                               "no node offers extended resource '%s'; nodes offer none "
                               "(declare it in a node's allocatable)",
                               shown);
            }
            if ((rc = sv_qty(x, &f, ARB_QTY_COUNT, &r->ext[i])) < 0)
                return rc;
            r->has |= 1u << (RF_EXT0 + i);
        } else {
            /* "gpu" is one edit from "cpu": point GPU-ish names at the GPU. */
            const char *near = strcasestr(name, "gpu") ? RES_GPU : sv_suggest(k, len, all);
            f.n = fy_node_pair_key(p);
            if (near)
                return sv_fail(x, &f, -EINVAL, "unknown resource '%s'; did you mean '%s'?", shown,
                               near);
            return sv_fail(x, &f, -EINVAL, "unknown resource '%s'; use " RES_LIST, shown);
        }
    }
    return 0;
}

/* A quota map as a resource vector (GPUs as milli). */
static void rmap_to_res(const rmap_t *r, arb_res_t *out)
{
    memset(out, 0, sizeof *out);
    out->gpu_milli = r->gpu * 1000;
    out->gpu_mem_mib = r->gpumem;
    out->cpu_milli = r->cpu;
    out->mem_bytes = r->mem;
    memcpy(out->ext, r->ext, sizeof out->ext);
}

/* ---- nodes ------------------------------------------------------------------ */

static int parse_gpus(sx_t *x, const sval_t *v, arb_node_t *n)
{
    char model[SPEC_STR];
    int rc = sv_no_alias(x, v), count = 0;
    int64_t mem = 0;
    sval_t f;

    if (rc < 0 || sv_null(v))
        return rc;
    if (fy_node_is_sequence(v->n)) {
        if ((rc = sv_seq(x, v, ARB_MAX_GPUS, &count)) < 0)
            return rc;
        void *it = NULL;
        for (int i = 0; i < count; i++) {
            struct fy_node *item = fy_node_sequence_iterate(v->n, &it);
            int coord[3] = {-1, -1, -1};
            static const char *const cname[3] = {"nvlink", "pcie", "numa"};
            sval_t g;
            bool is;

            sv_item(&g, v, item, i);
            if ((rc = sv_map(x, &g, &is)) < 0)
                return rc;
            if (!is)
                return sv_fail(x, &g, -EINVAL, "a GPU needs at least memory: (e.g. 80Gi)");
            if ((rc = sv_check_keys(x, &g, gpu_keys)) < 0)
                return rc;
            model[0] = '\0';
            if (sv_get(&g, "model", &f) && (rc = sv_text(x, &f, model, 64, false)) < 0)
                return rc;
            if (!sv_get(&g, "memory", &f))
                return sv_fail(x, &g, -EINVAL, "missing memory: (device memory, e.g. 80Gi)");
            if ((rc = sv_qty(x, &f, ARB_QTY_MIB, &mem)) < 0)
                return rc;
            if (mem > INT32_MAX)
                return sv_fail(x, &f, -ERANGE, "more device memory than Arbiter can count");
            for (int c = 0; c < 3; c++)
                if (sv_get(&g, cname[c], &f) &&
                    (rc = sv_int32(x, &f, -1, ARB_MAX_GPUS - 1, &coord[c])) < 0)
                    return rc;
            rc = arb_node_add_gpu(x->c, n, model, (int32_t)mem, coord[2], coord[1], coord[0],
                                  x->err);
            if (rc < 0)
                return sv_prefix(x, &g, rc, true);
        }
        return 0;
    }
    bool is;
    int dom[3] = {1, 0, 0}; /* nvlinkDomains, pcieSwitches, numaNodes */
    static const char *const dname[3] = {"nvlinkDomains", "pcieSwitches", "numaNodes"};

    if ((rc = sv_map(x, v, &is)) < 0)
        return rc;
    if ((rc = sv_check_keys(x, v, gpus_keys)) < 0)
        return rc;
    if (!sv_get(v, "count", &f))
        return sv_fail(x, v, -EINVAL, "missing count: (GPUs in the node, 1..%d)", ARB_MAX_GPUS);
    if ((rc = sv_int32(x, &f, 0, ARB_MAX_GPUS, &count)) < 0)
        return rc;
    model[0] = '\0';
    if (sv_get(v, "model", &f) && (rc = sv_text(x, &f, model, 64, false)) < 0)
        return rc;
    if (sv_get(v, "memory", &f)) {
        if ((rc = sv_qty(x, &f, ARB_QTY_MIB, &mem)) < 0)
            return rc;
        if (mem > INT32_MAX)
            return sv_fail(x, &f, -ERANGE, "more device memory than Arbiter can count");
    } else if (count > 0) {
        return sv_fail(x, v, -EINVAL, "missing memory: (device memory per GPU, e.g. 80Gi)");
    }
    for (int d = 0; d < 3; d++)
        if (sv_get(v, dname[d], &f) && (rc = sv_int32(x, &f, 0, count, &dom[d])) < 0)
            return rc;
    for (int i = 0; i < count; i++) {
        /* Domains split the GPUs in equal runs: 8 GPUs, 2 domains -> 0000 1111. */
        int c3[3];
        for (int d = 0; d < 3; d++)
            c3[d] = dom[d] ? i * dom[d] / count : -1;
        rc = arb_node_add_gpu(x->c, n, model, (int32_t)mem, c3[2], c3[1], c3[0], x->err);
        if (rc < 0)
            return sv_prefix(x, v, rc, true);
    }
    return 0;
}

static int parse_taints(sx_t *x, const sval_t *v, arb_node_t *n)
{
    static const char *const effects[] = {[ARB_TAINT_NO_SCHEDULE] = "NoSchedule",
                                          [ARB_TAINT_PREFER_NO_SCHEDULE] = "PreferNoSchedule",
                                          [ARB_TAINT_NO_EXECUTE] = "NoExecute"};
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);
    void *it = NULL;

    for (int i = 0; rc == 0 && i < count; i++) {
        char key[SPEC_STR], val[SPEC_STR];
        int effect = 0;
        sval_t t, f;
        bool is;

        sv_item(&t, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &t, &is)) < 0 || (is && (rc = sv_check_keys(x, &t, taint_keys)) < 0))
            return rc;
        if (!sv_get(&t, "key", &f))
            return sv_fail(x, &t, -EINVAL, "missing key:");
        if ((rc = sv_text(x, &f, key, sizeof key, false)) < 0)
            return rc;
        val[0] = '\0';
        if (sv_get(&t, "value", &f) && (rc = sv_text(x, &f, val, sizeof val, true)) < 0)
            return rc;
        if (!sv_get(&t, "effect", &f))
            return sv_fail(x, &t, -EINVAL,
                           "missing effect: (NoSchedule, PreferNoSchedule or NoExecute)");
        if ((rc = sv_enum(x, &f, effects, 4, &effect)) < 0)
            return rc;
        if (arb_node_add_taint(x->c, n, key, val, (arb_taint_effect_t)effect) < 0)
            return sv_oom(x, &t);
    }
    return rc;
}

/* One node (or instance k of a node with count:, named NAME-k). */
static int parse_node(sx_t *x, const sval_t *v, int k)
{
    static const char *const conds[] = {"Ready", "NotReady", "Draining"};
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
        if ((rc = sv_enum(x, &f, conds, 3, &cond)) < 0)
            return rc;
        if (cstate[cond] != n->state &&
            (rc = arb_node_transition(x->c, n, cstate[cond], x->err)) < 0)
            return sv_prefix(x, &f, rc, true);
    }
    if (sv_get(v, "allocatable", &f)) {
        if ((rc = parse_rmap(x, &f, RM_ALLOCATABLE, &r)) < 0)
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

/* Charge copies of the item in v to the file's budget of values: count:
 * multiplies everything under it, so this is what bounds the memory a
 * small file can ask for. */
static int charge(sx_t *x, const sval_t *v, int copies)
{
    int64_t size = sv_tree_size(v->n, 0, SPEC_MAX_VALUES);
    sval_t f;

    if (size > (SPEC_MAX_VALUES - x->values) / copies) {
        if (!sv_get(v, "count", &f))
            f = *v;
        return sv_fail(x, &f, -EINVAL,
                       "%d cop%s of %" PRId64 " values each pass the limit of %d values per "
                       "file; make the file smaller",
                       copies, copies == 1 ? "y" : "ies", size, SPEC_MAX_VALUES);
    }
    x->values += size * copies;
    return 0;
}

/* The count: of a repeated node or job (1 when absent). */
static int parse_count(sx_t *x, const sval_t *v, int left, int *count)
{
    sval_t f;
    int rc;

    *count = 1;
    if (!sv_get(v, "count", &f))
        return 0;
    if ((rc = sv_int32(x, &f, 1, INT_MAX, count)) < 0)
        return rc;
    if (*count > left)
        return sv_fail(x, &f, -EINVAL, "%d more would pass the limit of this file (%d left)",
                       *count, left);
    return 0;
}

static int parse_nodes(sx_t *x, const sval_t *v)
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
        if ((rc = sv_check_keys(x, &nv, node_keys)) < 0 ||
            (rc = parse_count(x, &nv, SPEC_MAX_NODES - total, &copies)) < 0 ||
            (rc = charge(x, &nv, copies)) < 0)
            return rc;
        for (int k = 1; k <= copies; k++)
            if ((rc = parse_node(x, &nv, copies > 1 ? k : 0)) < 0)
                return rc;
        total += copies;
    }
    return 0;
}

/* ---- jobs ---------------------------------------------------------------------- */

/* requests + limits into group g, with Kubernetes' rules: a resource with
 * only a limit requests its limit; a limit is never below its request; GPUs
 * are never overcommitted (request == limit). */
static int parse_resources(sx_t *x, const sval_t *v, arb_tgroup_t *g)
{
    rmap_t req, lim;
    sval_t f, rv = *v, lv = *v;
    bool is;
    int rc = sv_map(x, v, &is);

    if (rc < 0 || !is)
        return rc;
    if ((rc = sv_check_keys(x, v, resources_keys)) < 0)
        return rc;
    memset(&req, 0, sizeof req);
    memset(&lim, 0, sizeof lim);
    if (sv_get(v, "requests", &f)) {
        rv = f;
        if ((rc = parse_rmap(x, &f, RM_REQUEST, &req)) < 0)
            return rc;
    }
    if (sv_get(v, "limits", &f)) {
        lv = f;
        if ((rc = parse_rmap(x, &f, RM_REQUEST, &lim)) < 0)
            return rc;
    }
    int64_t *rq[RF_EXT0 + ARB_MAX_EXT] = {&req.gpu, &req.share, &req.gpumem, &req.cpu, &req.mem};
    int64_t *lm[RF_EXT0 + ARB_MAX_EXT] = {&lim.gpu, &lim.share, &lim.gpumem, &lim.cpu, &lim.mem};
    const char *names[RF_EXT0] = {RES_GPU, RES_GPU_SHARE, RES_GPU_MEM, "cpu", "memory"};
    for (int i = 0; i < ARB_MAX_EXT; i++) {
        rq[RF_EXT0 + i] = &req.ext[i];
        lm[RF_EXT0 + i] = &lim.ext[i];
    }
    for (int i = 0; i < RF_EXT0 + ARB_MAX_EXT; i++) {
        unsigned bit = 1u << i;
        const char *nm = i < RF_EXT0 ? names[i] : x->c->ext.name[i - RF_EXT0];
        if (!(lim.has & bit))
            continue;
        if (!(req.has & bit)) {
            *rq[i] = *lm[i];
            req.has |= bit;
        } else if (*lm[i] < *rq[i]) {
            return sv_fail(x, &lv, -EINVAL, "the limit of %s is below its request", nm);
        } else if ((i == RF_GPU || i == RF_SHARE || i >= RF_EXT0) && *lm[i] != *rq[i]) {
            return sv_fail(x, &lv, -EINVAL,
                           "the limit of %s must equal its request (it is not overcommitted)", nm);
        }
    }
    if ((req.has & (1u << RF_GPU)) && (req.has & (1u << RF_SHARE)) && req.gpu)
        return sv_fail(x, &rv, -EINVAL,
                       "asks for both whole GPUs (%s) and a GPU share (%s); choose one", RES_GPU,
                       RES_GPU_SHARE);
    if (req.gpumem && !req.gpu && !req.share)
        return sv_fail(x, &rv, -EINVAL,
                       "%s is memory on each GPU the task gets; ask for %s or %s too", RES_GPU_MEM,
                       RES_GPU, RES_GPU_SHARE);
    g->gpus = (int)req.gpu;
    g->gpu_share = (int)req.share;
    g->ephemeral_bytes = req.eph ? req.eph : lim.eph;
    g->req.gpu_milli = req.gpu ? req.gpu * 1000 : req.share;
    g->req.gpu_mem_mib = req.gpumem;
    g->req.cpu_milli = req.cpu;
    g->req.mem_bytes = req.mem;
    memcpy(g->req.ext, req.ext, sizeof g->req.ext);
    g->lim.gpu_milli = g->req.gpu_milli;
    g->lim.gpu_mem_mib = lim.gpumem;
    g->lim.cpu_milli = lim.cpu;
    g->lim.mem_bytes = lim.mem;
    memcpy(g->lim.ext, lim.ext, sizeof g->lim.ext);
    return 0;
}

static int parse_topology(sx_t *x, const sval_t *v, arb_topo_req_t *t)
{
    static const char *const levels[] = {[ARB_TOPO_NVLINK] = "nvlink",
                                         [ARB_TOPO_NODE] = "node",
                                         [ARB_TOPO_RACK] = "rack",
                                         [ARB_TOPO_BLOCK] = "block"};
    static const char *const modes[] = {"preferred", "required"};
    int level, mode = 1, rc = sv_no_alias(x, v);
    sval_t f;
    bool is;

    if (rc < 0 || sv_null(v))
        return rc;
    if (fy_node_is_scalar(v->n)) { /* topology: nvlink  ==  {level: nvlink} */
        if ((rc = sv_enum(x, v, levels, 5, &level)) < 0)
            return rc;
    } else {
        if ((rc = sv_map(x, v, &is)) < 0 || (rc = sv_check_keys(x, v, topo_keys)) < 0)
            return rc;
        if (!sv_get(v, "level", &f))
            return sv_fail(x, v, -EINVAL, "missing level: (nvlink, node, rack or block)");
        if ((rc = sv_enum(x, &f, levels, 5, &level)) < 0)
            return rc;
        if (sv_get(v, "mode", &f) && (rc = sv_enum(x, &f, modes, 2, &mode)) < 0)
            return rc;
    }
    t->level = (arb_topo_level_t)level;
    t->required = mode == 1;
    return 0;
}

/* replicas: {min: 2, max: 8}: an elastic group; *min gets the min, the
 * group's replicas the max. Every rank up to max is a task record from the
 * start (the job's size changes, its task table does not), so max is held
 * to ELASTIC_MAX: 4,096 ranks, 32,768 GPUs at 8 per task. */
#define ELASTIC_MAX 4096
static int parse_elastic(sx_t *x, const sval_t *f, arb_tgroup_t *g, int *min)
{
    sval_t a, b;
    int rc;

    if ((rc = sv_check_keys(x, f, elastic_keys)) < 0)
        return rc;
    if (!sv_get(f, "min", &a) || !sv_get(f, "max", &b))
        return sv_fail(x, f, -EINVAL,
                       "elastic replicas need both min: and max: (e.g. {min: 2, max: 8})");
    if ((rc = sv_int32(x, &a, 1, ELASTIC_MAX, min)) < 0 ||
        (rc = sv_int32(x, &b, 1, ELASTIC_MAX, &g->replicas)) < 0)
        return rc;
    if (*min > g->replicas)
        return sv_fail(x, &a, -EINVAL, "min %d is above max %d; give min <= max", *min,
                       g->replicas);
    return 0;
}

/* A group's fields, from a groups[] item or from the job itself. *emin
 * (when not NULL) gets an elastic min, else stays 0. */
static int parse_group_el(sx_t *x, const sval_t *v, arb_tgroup_t *g, const char *defname,
                          bool named, int *emin);

static int parse_group(sx_t *x, const sval_t *v, arb_tgroup_t *g, const char *defname, bool named)
{
    return parse_group_el(x, v, g, defname, named, NULL);
}

static int parse_group_el(sx_t *x, const sval_t *v, arb_tgroup_t *g, const char *defname,
                          bool named, int *emin)
{
    sval_t f;
    int rc;
    bool is_map = false;

    snprintf(g->name, sizeof g->name, "%s", defname);
    if (named && sv_get(v, "name", &f) && (rc = sv_text(x, &f, g->name, sizeof g->name, false)) < 0)
        return rc;
    g->replicas = 1;
    if (sv_get(v, "replicas", &f) && !sv_null(&f) && fy_node_is_mapping(f.n)) {
        int min = 0;
        if (!emin)
            return sv_fail(x, &f, -EINVAL,
                           "elastic replicas {min, max} are for a one-group job; give this "
                           "group a number");
        if ((rc = parse_elastic(x, &f, g, &min)) < 0)
            return rc;
        *emin = min;
        is_map = true;
    }
    if (!is_map && sv_get(v, "replicas", &f) && (rc = sv_int32(x, &f, 1, 100000, &g->replicas)) < 0)
        return rc;
    if (sv_get(v, "resources", &f) && (rc = parse_resources(x, &f, g)) < 0)
        return rc;
    if (sv_get(v, "topology", &f) && (rc = parse_topology(x, &f, &g->topo)) < 0)
        return rc;
    if (g->topo.level == ARB_TOPO_NVLINK && g->topo.required && g->gpus == 0)
        return sv_fail(x, &f, -EINVAL, "an NVLink requirement needs whole GPUs (%s) in the request",
                       RES_GPU);
    return 0;
}

static int parse_expr(sx_t *x, const sval_t *v, arb_match_expr_t *e)
{
    char key[SPEC_STR], val[SPEC_STR];
    int op, count = 0, rc;
    sval_t f, iv;
    bool is;

    if ((rc = sv_map(x, v, &is)) < 0)
        return rc;
    if (!is)
        return sv_fail(x, v, -EINVAL, "an expression needs key: and operator:");
    if ((rc = sv_check_keys(x, v, expr_keys)) < 0)
        return rc;
    if (!sv_get(v, "key", &f))
        return sv_fail(x, v, -EINVAL, "missing key:");
    if ((rc = sv_text(x, &f, key, sizeof key, false)) < 0 || (rc = intern(x, &f, key, &e->key)))
        return rc;
    if (!sv_get(v, "operator", &f))
        return sv_fail(x, v, -EINVAL,
                       "missing operator: (In, NotIn, Exists, DoesNotExist, Gt, Lt)");
    if ((rc = sv_enum(x, &f, op_names, 6, &op)) < 0)
        return rc;
    e->op = (arb_sel_op_t)op;
    if (sv_get(v, "values", &f) && (rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
        return rc;
    if ((op == ARB_OP_IN || op == ARB_OP_NOT_IN) && count == 0)
        return sv_fail(x, v, -EINVAL, "%s needs values: [one or more]", op_names[op]);
    if ((op == ARB_OP_EXISTS || op == ARB_OP_DOES_NOT_EXIST) && count)
        return sv_fail(x, &f, -EINVAL, "%s takes no values", op_names[op]);
    if ((op == ARB_OP_GT || op == ARB_OP_LT)) {
        void *it = NULL;
        if (count != 1)
            return sv_fail(x, count ? &f : v, -EINVAL, "%s needs exactly one integer value",
                           op_names[op]);
        sv_item(&iv, &f, fy_node_sequence_iterate(f.n, &it), 0);
        if (sv_text(x, &iv, val, sizeof val, false) == 0 && fy_node_is_scalar(iv.n) &&
            fy_node_get_style(iv.n) != FYNS_PLAIN) {
            /* Kubernetes writes these values as strings: "4". */
            char *end;
            errno = 0;
            e->num = strtoll(val, &end, 10);
            if (!*end && end != val && errno == 0)
                return 0;
            return sv_fail(x, &iv, -EINVAL, "'%s' is not an integer", val);
        }
        return sv_int(x, &iv, INT64_MIN, INT64_MAX, &e->num);
    }
    if (count) {
        void *it = NULL;
        e->vals = calloc((size_t)count, sizeof *e->vals);
        if (!e->vals)
            return sv_oom(x, &f);
        for (int i = 0; i < count; i++) {
            sv_item(&iv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = sv_text(x, &iv, val, sizeof val, true)) < 0 ||
                (rc = intern(x, &iv, val, &e->vals[e->nvals])) < 0)
                return rc;
            e->nvals++;
        }
    }
    return 0;
}

/* A term (a list of expressions, all of which must hold). */
static int parse_term(sx_t *x, const sval_t *v, arb_aff_term_t *t)
{
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);
    void *it = NULL;

    if (rc < 0)
        return rc;
    if (count == 0)
        return sv_fail(x, v, -EINVAL,
                       "a term needs at least one expression "
                       "[{key: zone, operator: In, values: [z1]}]");
    t->expr = calloc((size_t)count, sizeof *t->expr);
    if (!t->expr)
        return sv_oom(x, v);
    t->nexpr = count;
    for (int i = 0; i < count; i++) {
        sval_t ev;
        sv_item(&ev, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = parse_expr(x, &ev, &t->expr[i])) < 0)
            return rc;
    }
    return 0;
}

static int parse_affinity(sx_t *x, const sval_t *v, arb_job_t *j)
{
    sval_t f, tv, w;
    int count, rc;
    bool is;

    if ((rc = sv_map(x, v, &is)) < 0 || !is || (rc = sv_check_keys(x, v, affinity_keys)) < 0)
        return rc;
    if (sv_get(v, "required", &f)) {
        void *it = NULL;
        if ((rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
            return rc;
        if (count && !(j->required = calloc((size_t)count, sizeof *j->required)))
            return sv_oom(x, &f);
        j->nrequired = count;
        for (int i = 0; i < count; i++) {
            sv_item(&tv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = parse_term(x, &tv, &j->required[i])) < 0)
                return rc;
        }
    }
    if (sv_get(v, "preferred", &f)) {
        void *it = NULL;
        if ((rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
            return rc;
        if (count && !(j->preferred = calloc((size_t)count, sizeof *j->preferred)))
            return sv_oom(x, &f);
        j->npreferred = count;
        for (int i = 0; i < count; i++) {
            sv_item(&tv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = sv_map(x, &tv, &is)) < 0)
                return rc;
            if (!is)
                return sv_fail(x, &tv, -EINVAL, "a preferred term needs weight: and match:");
            if ((rc = sv_check_keys(x, &tv, pref_keys)) < 0)
                return rc;
            if (!sv_get(&tv, "weight", &w))
                return sv_fail(x, &tv, -EINVAL, "missing weight: (1..100)");
            if ((rc = sv_int32(x, &w, 1, 100, &j->preferred[i].weight)) < 0)
                return rc;
            if (!sv_get(&tv, "match", &w))
                return sv_fail(x, &tv, -EINVAL, "missing match: [expressions]");
            if ((rc = parse_term(x, &w, &j->preferred[i])) < 0)
                return rc;
        }
    }
    return 0;
}

static int parse_tolerations(sx_t *x, const sval_t *v, arb_job_t *j)
{
    static const char *const ops[] = {"Equal", "Exists"};
    static const char *const effects[] = {[ARB_TAINT_NO_SCHEDULE] = "NoSchedule",
                                          [ARB_TAINT_PREFER_NO_SCHEDULE] = "PreferNoSchedule",
                                          [ARB_TAINT_NO_EXECUTE] = "NoExecute"};
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);
    void *it = NULL;

    if (rc < 0)
        return rc;
    if (count && !(j->tolerations = calloc((size_t)count, sizeof *j->tolerations)))
        return sv_oom(x, v);
    j->ntolerations = count;
    for (int i = 0; i < count; i++) {
        arb_toleration_t *t = &j->tolerations[i];
        char buf[SPEC_STR];
        int op = 0;
        bool is, has_val;
        sval_t tv, f;

        sv_item(&tv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &tv, &is)) < 0 || (is && (rc = sv_check_keys(x, &tv, tol_keys)) < 0))
            return rc;
        if (sv_get(&tv, "operator", &f) && (rc = sv_enum(x, &f, ops, 2, &op)) < 0)
            return rc;
        t->exists = op == 1;
        if (sv_get(&tv, "key", &f)) {
            if ((rc = sv_text(x, &f, buf, sizeof buf, false)) < 0 ||
                (rc = intern(x, &f, buf, &t->key)) < 0)
                return rc;
        } else if (!t->exists) {
            return sv_fail(x, &tv, -EINVAL,
                           "missing key:; only operator: Exists may leave it out (it then "
                           "tolerates every taint)");
        }
        has_val = sv_get(&tv, "value", &f);
        if (has_val && t->exists)
            return sv_fail(x, &f, -EINVAL, "operator Exists takes no value:");
        if (has_val) {
            if ((rc = sv_text(x, &f, buf, sizeof buf, true)) < 0)
                return rc;
            if (buf[0] && (rc = intern(x, &f, buf, &t->val)) < 0)
                return rc;
        }
        if (sv_get(&tv, "effect", &f) && !sv_null(&f) &&
            (rc = sv_enum(x, &f, effects, 4, &t->effect)) < 0)
            return rc;
    }
    return 0;
}

/* priorityClassName through the caller's table (spec_prio_table_t). */
static int priority_from_table(sx_t *x, const sval_t *pc, const char *name, arb_job_t *j)
{
    const spec_prio_table_t *t = x->classes;
    char list[512];
    size_t used = 0;

    for (int i = 0; i < t->n; i++)
        if (strcmp(t->v[i].name, name) == 0) {
            j->priority = t->v[i].value;
            if (t->v[i].preemptible >= 0)
                j->preemptible = t->v[i].preemptible > 0;
            return 0;
        }
    list[0] = '\0';
    for (int i = 0; i < t->n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s (%d)", i ? ", " : "",
                                 t->v[i].name, (int)t->v[i].value);
    return sv_fail(x, pc, -EINVAL,
                   "unknown priority class '%s'; the defined classes are %s (GET "
                   "/v1/priorityclasses), or give priority: N",
                   name, t->n ? list : "none");
}

static int parse_priority(sx_t *x, const sval_t *v, arb_job_t *j)
{
    sval_t f, pc;
    bool has_prio = sv_get(v, "priority", &f), has_class = sv_get(v, "priorityClassName", &pc);
    char buf[64];
    int rc;

    if (has_prio && has_class)
        return sv_fail(x, &pc, -EINVAL, "give priority: or priorityClassName:, not both");
    if (has_prio)
        return sv_int32(x, &f, INT32_MIN, INT32_MAX, &j->priority);
    if (!has_class)
        return 0;
    if ((rc = sv_text(x, &pc, buf, sizeof buf, false)) < 0)
        return rc;
    if (x->classes)
        return priority_from_table(x, &pc, buf, j);
    if (spec_priority_class(buf, &j->priority) < 0)
        return sv_fail(x, &pc, -EINVAL,
                       "unknown priority class '%s'; use best-effort (0), low (100), normal "
                       "(500), high (1000) or critical (10000), or give priority: N",
                       buf);
    return 0;
}

static int parse_job_fields(sx_t *x, const sval_t *v, arb_job_t *j, const sval_t *groups)
{
    char buf[SPEC_STR];
    sval_t f, iv;
    int rc, count, emin = 0;
    bool is;

    if (groups) {
        void *it = NULL;
        for (int i = 0; i < j->ngroups; i++) {
            char defname[24];
            sv_item(&iv, groups, fy_node_sequence_iterate(groups->n, &it), i);
            if ((rc = sv_map(x, &iv, &is)) < 0)
                return rc;
            if (!is)
                return sv_fail(x, &iv, -EINVAL, "a group needs resources: at least");
            if ((rc = sv_check_keys(x, &iv, group_keys)) < 0)
                return rc;
            snprintf(defname, sizeof defname, "group-%d", i);
            if ((rc = parse_group(x, &iv, &j->groups[i], defname, true)) < 0)
                return rc;
            for (int k = 0; k < i; k++)
                if (!strcmp(j->groups[k].name, j->groups[i].name)) {
                    sv_get(&iv, "name", &f);
                    return sv_fail(x, &f, -EINVAL, "group name '%s' is used twice in this job",
                                   j->groups[i].name);
                }
        }
    } else if ((rc = parse_group_el(x, v, &j->groups[0], "main", false, &emin)) < 0) {
        return rc;
    }
    if (emin > 0) {
        j->elastic = true;
        j->gang_min = emin;
        if (sv_get(v, "gangMin", &f))
            return sv_fail(x, &f, -EINVAL,
                           "replicas {min, max} already sets the gang minimum; drop gangMin");
    }
    if (sv_get(v, "terminationGracePeriodSeconds", &f) &&
        (rc = sv_int32(x, &f, 0, ARB_GRACE_MAX_S, &j->grace_s)) < 0)
        return rc;
    if (sv_get(v, "exclusive", &f) && (rc = sv_bool(x, &f, &j->exclusive)) < 0)
        return rc; /* each task a node of its own (filters.c) */
    if (sv_get(v, "gpuSharing", &f)) {
        /* Isolation: a GPU is shared only by tasks that all allow it. A
         * GPU-share task that denies sharing gets a GPU of its own (whole
         * GPUs are never shared), so no other task can land on it. */
        static const char *const modes[] = {"allow", "deny"};
        int m = 0;
        if ((rc = sv_enum(x, &f, modes, 2, &m)) < 0)
            return rc;
        j->gpu_sharing = m == 0 ? 1 : -1; /* arb_job_finalize applies it */
    }
    int64_t ntasks = 0;
    for (int i = 0; i < j->ngroups; i++)
        ntasks += j->groups[i].replicas;
    if (ntasks > SPEC_MAX_JOB_TASKS)
        return sv_fail(x, groups ? groups : v, -EINVAL,
                       "%" PRId64 " tasks; a job has at most %d (the sum of its replicas)", ntasks,
                       SPEC_MAX_JOB_TASKS);
    if (sv_get(v, "queue", &f)) {
        if ((rc = sv_text(x, &f, buf, sizeof buf, false)) < 0)
            return rc;
        j->queue = 0;
        if (strcmp(buf, "default") != 0 && (rc = intern(x, &f, buf, &j->queue)) < 0)
            return rc;
        if (x->nqueues > 0 && j->queue) {
            int q;
            for (q = 0; q < x->nqueues && x->queues[q].name != j->queue; q++)
                ;
            if (q == x->nqueues)
                return sv_fail(x, &f, -EINVAL,
                               "unknown queue '%s'; define it under queues: or leave queue: "
                               "out",
                               buf);
        }
    }
    if ((rc = parse_priority(x, v, j)) < 0)
        return rc;
    if (sv_get(v, "preemptible", &f) && (rc = sv_bool(x, &f, &j->preemptible)) < 0)
        return rc;
    if (sv_get(v, "gangMin", &f)) {
        int total = 0;
        for (int i = 0; i < j->ngroups; i++)
            total += j->groups[i].replicas;
        if ((rc = sv_int32(x, &f, 0, total, &j->gang_min)) < 0)
            return rc == -ERANGE ? sv_fail(x, &f, -EINVAL,
                                           "gangMin must be 0..%d (the job's tasks; 0 means "
                                           "all)",
                                           total)
                                 : rc;
    }
    if (sv_get(v, "timeLimit", &f) && (rc = sv_duration(x, &f, &j->time_limit_s)) < 0)
        return rc;
    if (sv_get(v, "dataset", &f) && ((rc = sv_text(x, &f, buf, sizeof buf, false)) < 0 ||
                                     (rc = intern(x, &f, buf, &j->dataset)) < 0))
        return rc;
    if (sv_get(v, "nodeSelector", &f)) {
        void *it = NULL;
        struct fy_node_pair *p;
        if ((rc = sv_map(x, &f, &is)) < 0)
            return rc;
        count = is ? fy_node_mapping_item_count(f.n) : 0;
        if (count > SPEC_MAX_LIST)
            return sv_fail(x, &f, -EINVAL, "%d labels; the most is %d", count, SPEC_MAX_LIST);
        if (count > 0 && !(j->selector = calloc((size_t)count, sizeof *j->selector)))
            return sv_oom(x, &f);
        while (is && j->nselector < count && (p = fy_node_mapping_iterate(f.n, &it))) {
            size_t len = 0;
            const char *k = sv_key_text(fy_node_pair_key(p), &len);
            arb_label_t *l = &j->selector[j->nselector];
            sv_pair(&iv, &f, p);
            if (!k || len >= sizeof buf) {
                iv.n = fy_node_pair_key(p) ? fy_node_pair_key(p) : iv.n;
                return sv_fail(x, &iv, -EINVAL, "label keys are plain names");
            }
            memcpy(buf, k, len);
            buf[len] = '\0';
            if ((rc = intern(x, &iv, buf, &l->key)) < 0 ||
                (rc = sv_text(x, &iv, buf, sizeof buf, true)) < 0 ||
                (rc = intern(x, &iv, buf, &l->val)) < 0)
                return rc;
            j->nselector++;
        }
    }
    if (sv_get(v, "affinity", &f) && (rc = parse_affinity(x, &f, j)) < 0)
        return rc;
    if (sv_get(v, "tolerations", &f) && (rc = parse_tolerations(x, &f, j)) < 0)
        return rc;
    if (sv_get(v, "gpuModels", &f)) {
        void *it = NULL;
        if ((rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
            return rc;
        if (count && !(j->models = calloc((size_t)count, sizeof *j->models)))
            return sv_oom(x, &f);
        for (int i = 0; i < count; i++) {
            sv_item(&iv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = sv_text(x, &iv, buf, sizeof buf, false)) < 0 ||
                (rc = intern(x, &iv, buf, &j->models[j->nmodels])) < 0)
                return rc;
            j->nmodels++;
        }
    }
    return 0;
}

/* One job (instance k of a job with count:, named NAME-k); *out on success. */
static int parse_job(sx_t *x, const sval_t *v, int k, arb_job_t **out)
{
    char name[ARB_JOB_NAME_MAX + 16];
    sval_t f, groups;
    arb_job_t *j = NULL;
    int rc, ngroups = 1;
    bool is, has_groups;

    if ((rc = sv_map(x, v, &is)) < 0)
        return rc;
    if (!is)
        return sv_fail(x, v, -EINVAL, "a job needs at least a name: and resources:");
    if ((rc = sv_check_keys(x, v, job_keys)) < 0)
        return rc;
    if (x->lone_job && sv_get(v, "count", &f))
        return sv_fail(x, &f, -EINVAL, "count: repeats a job in a scenario; submit one job here");
    if (!sv_get(v, "name", &f))
        return sv_fail(x, v, -EINVAL, "missing name:; give every job a unique name");
    if ((rc = sv_text(x, &f, name, ARB_JOB_NAME_MAX - 8, false)) < 0)
        return rc;
    if (k > 0)
        snprintf(name + strlen(name), 16, "-%d", k);
    has_groups = sv_get(v, "groups", &groups);
    if (has_groups) {
        static const char *const lone[] = {"replicas", "resources", "topology"};
        for (int i = 0; i < 3; i++)
            if (sv_get(v, lone[i], &f))
                return sv_fail(x, &f, -EINVAL,
                               "%s: belongs inside each of groups:, or drop groups: for a "
                               "one-group job",
                               lone[i]);
        if ((rc = sv_seq(x, &groups, SPEC_MAX_GROUPS, &ngroups)) < 0)
            return rc;
        if (ngroups == 0)
            return sv_fail(x, &groups, -EINVAL, "groups: needs at least one group");
    }
    j = arb_job_new(name, ngroups);
    if (!j)
        return sv_oom(x, v);
    rc = parse_job_fields(x, v, j, has_groups ? &groups : NULL);
    if (rc == 0 && (rc = arb_job_finalize(j, x->err)) < 0)
        rc = sv_prefix(x, v, rc, true);
    if (rc < 0) {
        arb_job_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

static int parse_jobs(sx_t *x, const sval_t *v, spec_scenario_t *s)
{
    int count, rc = sv_seq(x, v, SPEC_MAX_JOBS, &count), total = 0;
    arb_strtab_t names;
    void *it = NULL;

    if (rc < 0 || count == 0)
        return rc;
    arb_strtab_init(&names);
    for (int i = 0; rc == 0 && i < count; i++) {
        sval_t jv;
        int copies;
        bool is;

        sv_item(&jv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &jv, &is)) < 0)
            break;
        if (is && (rc = parse_count(x, &jv, SPEC_MAX_JOBS - total, &copies)) < 0)
            break;
        if (!is)
            copies = 1;
        if ((rc = charge(x, &jv, copies)) < 0)
            break;
        if (copies > 0) {
            arb_job_t **grown = realloc(s->jobs, (size_t)(s->njobs + copies) * sizeof *grown);
            if (!grown) {
                rc = sv_oom(x, &jv);
                break;
            }
            s->jobs = grown;
        }
        for (int k = 1; rc == 0 && k <= copies; k++) {
            arb_job_t *j;
            if ((rc = parse_job(x, &jv, copies > 1 ? k : 0, &j)) < 0)
                break;
            s->jobs[s->njobs++] = j;
            x->tasks += j->ntasks;
            if (x->tasks > SPEC_MAX_TASKS) {
                rc = sv_fail(x, &jv, -EINVAL,
                             "the jobs so far have more than %d tasks in all; make the file "
                             "smaller",
                             SPEC_MAX_TASKS);
            } else if (arb_strtab_find(&names, j->name)) {
                sval_t nf;
                sv_get(&jv, "name", &nf);
                rc = sv_fail(x, &nf, -EINVAL, "job name '%s' is used twice; names must be unique",
                             j->name);
            } else if (!arb_intern(&names, j->name)) {
                rc = sv_oom(x, &jv);
            }
        }
        total += copies;
    }
    arb_strtab_free(&names);
    return rc;
}

/* ---- scheduler settings and queues ------------------------------------------- */

static int parse_scheduler(sx_t *x, const sval_t *v, spec_scenario_t *s)
{
    arb_profile_t prof;
    sval_t f;
    bool is;
    int rc = sv_map(x, v, &is);
    char buf[64];

    if (rc < 0 || !is || (rc = sv_check_keys(x, v, sched_keys)) < 0)
        return rc;
    if (sv_get(v, "policy", &f)) {
        if ((rc = sv_text(x, &f, s->policy, sizeof s->policy, false)) < 0)
            return rc;
        if ((rc = arb_profile_lookup(s->policy, &prof, x->err)) < 0)
            return sv_prefix(x, &f, -EINVAL, true);
    }
    if (sv_get(v, "queue", &f)) {
        if ((rc = sv_text(x, &f, buf, sizeof buf, false)) < 0)
            return rc;
        if ((rc = arb_queue_policy_parse(buf, &s->queue_policy, x->err)) < 0)
            return sv_prefix(x, &f, -EINVAL, true);
    }
    if (sv_get(v, "backfill", &f) && (rc = sv_bool(x, &f, &s->backfill)) < 0)
        return rc;
    if (sv_get(v, "preemption", &f) && (rc = sv_bool(x, &f, &s->preemption)) < 0)
        return rc;
    if (sv_get(v, "starvation", &f)) {
        if ((rc = sv_duration_ns(x, &f, &s->starvation_ns)) < 0)
            return rc;
    }
    return 0;
}

static int parse_queues(sx_t *x, const sval_t *v, spec_scenario_t *s)
{
    int count, rc = sv_seq(x, v, 1024, &count);
    void *it = NULL;

    if (rc < 0 || count == 0)
        return rc;
    if (!(s->queues = calloc((size_t)count, sizeof *s->queues)))
        return sv_oom(x, v);
    for (int i = 0; i < count; i++) {
        arb_queue_t *q = &s->queues[i];
        char buf[SPEC_STR];
        rmap_t r;
        sval_t qv, f;
        bool is;

        sv_item(&qv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &qv, &is)) < 0)
            return rc;
        if (!is)
            return sv_fail(x, &qv, -EINVAL, "a queue needs at least a name:");
        if ((rc = sv_check_keys(x, &qv, queue_keys)) < 0)
            return rc;
        if (!sv_get(&qv, "name", &f))
            return sv_fail(x, &qv, -EINVAL, "missing name:");
        if ((rc = sv_text(x, &f, buf, sizeof buf, false)) < 0 ||
            (rc = intern(x, &f, buf, &q->name)) < 0)
            return rc;
        if (!strcmp(buf, "default"))
            return sv_fail(x, &f, -EINVAL,
                           "'default' is the queue of jobs that name none; "
                           "choose another name");
        for (int k = 0; k < s->nqueues; k++)
            if (s->queues[k].name == q->name)
                return sv_fail(x, &f, -EINVAL, "queue '%s' is defined twice", buf);
        s->nqueues++;
        if (sv_get(&qv, "cohort", &f) && ((rc = sv_text(x, &f, buf, sizeof buf, false)) < 0 ||
                                          (rc = intern(x, &f, buf, &q->cohort)) < 0))
            return rc;
        q->weight = 1;
        if (sv_get(&qv, "weight", &f) && (rc = sv_double(x, &f, 0.001, 1e6, &q->weight)) < 0)
            return rc;
        if (sv_get(&qv, "nominal", &f)) {
            if ((rc = parse_rmap(x, &f, RM_QUOTA, &r)) < 0)
                return rc;
            rmap_to_res(&r, &q->nominal);
            q->has_quota = true;
        }
        if (sv_get(&qv, "borrowingLimit", &f)) {
            if (!q->has_quota)
                return sv_fail(x, &f, -EINVAL,
                               "borrowingLimit: needs nominal: (the quota it "
                               "borrows above)");
            if ((rc = parse_rmap(x, &f, RM_QUOTA, &r)) < 0)
                return rc;
            rmap_to_res(&r, &q->borrow_limit);
        }
    }
    return 0;
}

/* ---- public ------------------------------------------------------------------- */

int spec_priority_class(const char *name, int32_t *prio)
{
    for (size_t i = 0; i < sizeof prio_classes / sizeof prio_classes[0]; i++)
        if (strcmp(name, prio_classes[i].name) == 0) {
            *prio = prio_classes[i].prio;
            return 0;
        }
    return -ENOENT;
}

int spec_priority_builtins(spec_prio_class_t *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < sizeof prio_classes / sizeof prio_classes[0] && n < max; i++, n++) {
        memset(&out[n], 0, sizeof out[n]);
        snprintf(out[n].name, sizeof out[n].name, "%s", prio_classes[i].name);
        out[n].value = prio_classes[i].prio;
        out[n].preemptible = -1;
        snprintf(out[n].description, sizeof out[n].description, "built-in");
    }
    return n;
}

void spec_scenario_free(spec_scenario_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->njobs; i++)
        arb_job_free(s->jobs[i]);
    free(s->jobs);
    free(s->queues);
    arb_cluster_free(&s->cluster);
    memset(s, 0, sizeof *s);
}

int spec_scenario_load_mem(const char *name, const char *buf, size_t len, spec_scenario_t *out,
                           arb_err_t *err)
{
    spec_scenario_t s;
    sv_doc_t d;
    sx_t x = {.file = name ? name : "scenario", .err = err};
    sval_t root, f;
    int rc;

    if ((rc = sv_doc_open(x.file, buf, len, &d, err)) < 0)
        return rc;
    memset(&s, 0, sizeof s);
    arb_cluster_init(&s.cluster);
    x.c = &s.cluster;
    sv_root(&root, fy_document_root(d.doc), "");
    if ((rc = sv_check_keys(&x, &root, root_keys)) < 0)
        goto out;
    /* Nodes first: they declare the extended resources that quotas and jobs
     * may name; queues before jobs, which must name a defined queue. */
    if (!sv_get(&root, "nodes", &f)) {
        rc = sv_fail(&x, &root, -EINVAL, "missing nodes: (the cluster's machines)");
        goto out;
    }
    if ((rc = parse_nodes(&x, &f)) < 0)
        goto out;
    if (sv_get(&root, "scheduler", &f) && (rc = parse_scheduler(&x, &f, &s)) < 0)
        goto out;
    if (sv_get(&root, "queues", &f) && (rc = parse_queues(&x, &f, &s)) < 0)
        goto out;
    x.queues = s.queues;
    x.nqueues = s.nqueues;
    if (sv_get(&root, "jobs", &f) && (rc = parse_jobs(&x, &f, &s)) < 0)
        goto out;
out:
    sv_doc_close(&d);
    if (rc < 0) {
        spec_scenario_free(&s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Read a whole file into a new buffer (free it). */
static int read_file(const char *path, char **buf, size_t *len, arb_err_t *err)
{
    FILE *fp = fopen(path, "rb");
    char *b = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    if (!fp) {
        int e = errno ? errno : EIO;
        return arb_errf(err, -e, "%s: cannot open: %s", path, strerror(e));
    }
    for (;;) {
        if (n == cap) {
            char *nb;
            if (cap >= SPEC_MAX_FILE) {
                rc = arb_errf(err, -EFBIG, "%s: larger than %d MiB", path, SPEC_MAX_FILE >> 20);
                break;
            }
            cap = cap ? cap * 2 : 65536;
            if (!(nb = realloc(b, cap))) {
                rc = arb_errf(err, -ENOMEM, "%s: out of memory", path);
                break;
            }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n, fp);
        n += got;
        if (got == 0) {
            if (ferror(fp))
                rc = arb_errf(err, -EIO, "%s: read error", path);
            break;
        }
    }
    fclose(fp);
    if (rc < 0) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

int spec_scenario_load_file(const char *path, spec_scenario_t *out, arb_err_t *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = read_file(path, &buf, &len, err);

    if (rc < 0)
        return rc;
    rc = spec_scenario_load_mem(path, buf, len, out, err);
    free(buf);
    return rc;
}

int spec_scenario_conf(const spec_scenario_t *s, const char *policy, arb_sched_conf_t *conf,
                       arb_err_t *err)
{
    arb_sched_conf_t c;
    const char *name = policy ? policy : s->policy[0] ? s->policy : "default";
    int rc;

    memset(&c, 0, sizeof c);
    if ((rc = arb_profile_lookup(name, &c.profile, err)) < 0)
        return rc;
    c.queue_policy = s->queue_policy;
    c.backfill = s->backfill;
    c.preemption = s->preemption;
    c.starvation_ns = s->starvation_ns;
    *conf = c;
    return 0;
}

int spec_job_from_node(const char *file, struct fy_node *node, const char *path, arb_cluster_t *c,
                       arb_job_t **out, arb_err_t *err)
{
    sx_t x = {.file = file ? file : "job", .err = err, .c = c, .lone_job = true};
    sval_t v;

    sv_root(&v, node, path);
    return parse_job(&x, &v, 0, out);
}

int spec_job_from_node_classes(const char *file, struct fy_node *node, const char *path,
                               arb_cluster_t *c, const spec_prio_table_t *classes, arb_job_t **out,
                               arb_err_t *err)
{
    sx_t x = {
        .file = file ? file : "job", .err = err, .c = c, .lone_job = true, .classes = classes};
    sval_t v;

    sv_root(&v, node, path);
    return parse_job(&x, &v, 0, out);
}

int spec_job_load_mem(const char *name, const char *buf, size_t len, arb_cluster_t *c,
                      arb_job_t **out, arb_err_t *err)
{
    sv_doc_t d;
    int rc;

    name = name ? name : "job";
    if ((rc = sv_doc_open(name, buf, len, &d, err)) < 0)
        return rc;
    rc = spec_job_from_node(name, fy_document_root(d.doc), "", c, out, err);
    sv_doc_close(&d);
    return rc;
}
