/*
 * scenario_res.c: resource maps, the one reader of a map of resource names
 * to quantities, in its three modes: a job's requests and limits, a node's
 * allocatable (which declares extended names), and a queue's quota (shared
 * with the controller config through spec/schema_sched.c); and a group's
 * resources, {requests, limits}, with Kubernetes' rules between the two.
 * Every name's unit and rules live here, so a typo gets the same "did you
 * mean" in each.
 */
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/scenario_int.h"

int scn_intern(sx_t *x, const sval_t *v, const char *s, uint32_t *id)
{
    *id = arb_intern(&x->c->strs, s);
    return *id ? 0 : sv_oom(x, v);
}

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

int scn_rmap(sx_t *x, const sval_t *v, rmode_t mode, rmap_t *r)
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
            /* A quota may be a fraction of a GPU: it is kept in milli. */
            rc = mode == RM_REQUEST ? parse_gpu_count(x, &f, &r->gpu)
                                    : sv_qty(x, &f, ARB_QTY_MILLI, &r->gpu);
            if (rc < 0)
                return rc;
            if (mode == RM_REQUEST && r->gpu > ARB_MAX_GPUS)
                return sv_fail(x, &f, -EINVAL,
                               "%" PRId64 " GPUs per task; a task gets at most %d GPUs of one "
                               "node (ask for more replicas instead)",
                               r->gpu, ARB_MAX_GPUS);
            if (mode == RM_REQUEST && r->gpu > INT64_MAX / 1000)
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
        } else if (strchr(name, '/') && !x->c) {
            f.n = fy_node_pair_key(p);
            return sv_fail(x, &f, -EINVAL,
                           "extended resource '%s': the controller's quotas take cpu, memory, "
                           "%s and %s",
                           shown, RES_GPU, RES_GPU_MEM);
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

void scn_rmap_to_res(const rmap_t *r, arb_res_t *out)
{
    memset(out, 0, sizeof *out);
    out->gpu_milli = r->gpu; /* RM_QUOTA reads GPUs in milli */
    out->gpu_mem_mib = r->gpumem;
    out->cpu_milli = r->cpu;
    out->mem_bytes = r->mem;
    memcpy(out->ext, r->ext, sizeof out->ext);
}

/* requests + limits, read into this by the table, then into the group. */
typedef struct res_rd {
    rmap_t req, lim;
} res_rd_t;

static int set_rmap(sx_t *x, const sval_t *v, void *at)
{
    return scn_rmap(x, v, RM_REQUEST, at);
}

/* The request or limit of resource i (RF_*, extended RF_EXT0 + k). */
static int64_t *rm_at(rmap_t *r, int i)
{
    int64_t *base[RF_EXT0] = {&r->gpu, &r->share, &r->gpumem, &r->cpu, &r->mem};

    return i < RF_EXT0 ? base[i] : &r->ext[i - RF_EXT0];
}

/* Kubernetes' rules between the two: a resource with only a limit
 * requests its limit; a limit is never below its request; GPUs and
 * extended resources are never overcommitted (request == limit). */
static int rule_limits(sx_t *x, const sval_t *map, void *obj)
{
    res_rd_t *rd = obj;
    const char *names[RF_EXT0] = {RES_GPU, RES_GPU_SHARE, RES_GPU_MEM, "cpu", "memory"};
    sval_t lv;

    if (!sv_get(map, "limits", &lv))
        lv = *map;
    for (int i = 0; i < RF_EXT0 + ARB_MAX_EXT; i++) {
        unsigned bit = 1u << i;
        const char *nm = i < RF_EXT0 ? names[i] : x->c->ext.name[i - RF_EXT0];
        int64_t *rq = rm_at(&rd->req, i), *lm = rm_at(&rd->lim, i);
        if (!(rd->lim.has & bit))
            continue;
        if (!(rd->req.has & bit)) {
            *rq = *lm;
            rd->req.has |= bit;
        } else if (*lm < *rq) {
            return sv_fail(x, &lv, -EINVAL, "the limit of %s is below its request", nm);
        } else if ((i == RF_GPU || i == RF_SHARE || i >= RF_EXT0) && *lm != *rq) {
            return sv_fail(x, &lv, -EINVAL,
                           "the limit of %s must equal its request (it is not overcommitted)", nm);
        }
    }
    return 0;
}

static int rule_gpu_kind(sx_t *x, const sval_t *map, void *obj)
{
    const rmap_t *req = &((res_rd_t *)obj)->req;
    sval_t rv;

    if (!sv_get(map, "requests", &rv))
        rv = *map;
    if ((req->has & (1u << RF_GPU)) && (req->has & (1u << RF_SHARE)) && req->gpu)
        return sv_fail(x, &rv, -EINVAL,
                       "asks for both whole GPUs (%s) and a GPU share (%s); choose one", RES_GPU,
                       RES_GPU_SHARE);
    if (req->gpumem && !req->gpu && !req->share)
        return sv_fail(x, &rv, -EINVAL,
                       "%s is memory on each GPU the task gets; ask for %s or %s too", RES_GPU_MEM,
                       RES_GPU, RES_GPU_SHARE);
    return 0;
}

static const sc_field_t resources_fields[] = {
    {.key = "requests",
     .type = SC_CUSTOM,
     .off = offsetof(res_rd_t, req),
     .set = set_rmap,
     .type_doc = "resources",
     .def_doc = "{}",
     .help = "per task: cpu, memory, ephemeral-storage, nvidia.com/gpu (whole GPUs), "
             "nvidia.com/gpu-memory (on each GPU), arbiter.io/gpu-share (1m..999m of one GPU), "
             "extended resources a node declares"},
    {.key = "limits",
     .type = SC_CUSTOM,
     .off = offsetof(res_rd_t, lim),
     .set = set_rmap,
     .type_doc = "resources",
     .def_doc = "the requests",
     .help = "per task, as in Kubernetes: a resource with only a limit requests it; never "
             "below the request; GPUs and extended resources equal to it"},
    {.key = "limits, requests",
     .type = SC_RULE,
     .check = rule_limits,
     .help = "a resource with only a limit requests its limit; a limit is never below its "
             "request; GPUs and extended resources: limit == request"},
    {.key = "requests",
     .type = SC_RULE,
     .check = rule_gpu_kind,
     .help = "whole GPUs or a GPU share, not both; nvidia.com/gpu-memory only with one of them"},
    {.key = NULL},
};
const sc_table_t scn_resources_table = {"resources", resources_fields, NULL};

/* requests + limits into group g, through the table and its rules. */
int scn_resources(sx_t *x, const sval_t *v, arb_tgroup_t *g)
{
    res_rd_t rd;
    bool is;
    int rc = sv_map(x, v, &is);

    if (rc < 0 || !is)
        return rc;
    memset(&rd, 0, sizeof rd);
    if ((rc = sc_walk(x, v, &scn_resources_table, SC_CTX_SCENARIO, &rd)) < 0)
        return rc;
    g->gpus = (int)rd.req.gpu;
    g->gpu_share = (int)rd.req.share;
    g->ephemeral_bytes = rd.req.eph ? rd.req.eph : rd.lim.eph;
    g->req.gpu_milli = rd.req.gpu ? rd.req.gpu * 1000 : rd.req.share;
    g->req.gpu_mem_mib = rd.req.gpumem;
    g->req.cpu_milli = rd.req.cpu;
    g->req.mem_bytes = rd.req.mem;
    memcpy(g->req.ext, rd.req.ext, sizeof g->req.ext);
    g->lim.cpu_milli = rd.lim.cpu; /* the caps the agent sets; the other limits were checked */
    g->lim.mem_bytes = rd.lim.mem;
    return 0;
}
